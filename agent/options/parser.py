"""The command line to Options: the flag table as an argparse parser, then fallbacks and validation."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from agent.options.compatibility import apply_upstream_fallbacks
from agent.options.durations import parse_duration
from agent.options.errors import OptionsError
from agent.options.feature_gates import parse_feature_gates, resolve_feature_gates
from agent.options.flag_values import parse_float, parse_go_bool, parse_int, parse_string_list
from agent.options.flags import FLAGS, KLOG_BOOL_FLAGS, KLOG_VALUE_FLAGS
from agent.options.model import Options
from agent.options.pflag_argparse import (
    GatesAction,
    IgnoredAction,
    ListAction,
    PflagParser,
    converter,
    default_text,
    flag_label,
)
from agent.options.validation import validate

PROGRAM = "karmada-agent"

_KIND_PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "bool": parse_go_bool,
    "int": parse_int,
    "float": parse_float,
    "duration": parse_duration,
    "list": parse_string_list,
    "gates": parse_feature_gates,
}


def build_parser() -> argparse.ArgumentParser:
    parser = PflagParser(
        prog=PROGRAM,
        usage=f"{PROGRAM} [flags]\n       {PROGRAM} version",
        description=(
            "Pull-mode member agent for Karmada: registers this cluster with the Karmada control "
            "plane, applies the Works placed on it, and reports their status and the cluster's."
        ),
    )
    defaults = Options()
    groups: dict[str, argparse._ArgumentGroup] = {}
    for flag in FLAGS:
        group = groups.get(flag.group) or groups.setdefault(
            flag.group, parser.add_argument_group(flag.group)
        )
        names = [n for n in (flag.short, f"--{flag.name}") if n]
        default = getattr(defaults, flag.attribute)
        shown = default_text(default)
        help_text = f"{flag.help} (default {shown})" if shown else flag.help
        convert = converter(_KIND_PARSERS[flag.kind], flag_label(names))
        if flag.kind == "bool":
            parser.add_bool(group, *names, dest=flag.attribute, default=default, help=help_text)
        elif flag.kind == "list":
            group.add_argument(
                *names, dest=flag.attribute, type=convert, action=ListAction,
                metavar="strings", help=help_text,
            )  # fmt: skip
        elif flag.kind == "gates":
            group.add_argument(
                *names, dest=flag.attribute, type=convert, action=GatesAction,
                metavar="Name=bool,...", help=help_text,
            )  # fmt: skip
        else:
            group.add_argument(
                *names, dest=flag.attribute, type=convert, metavar=flag.kind, help=help_text
            )
    klog = parser.add_argument_group("klog flags (accepted for compatibility, ignored)")
    parser.bool_flags.update(f"--{name}" for name in KLOG_BOOL_FLAGS)
    for name in KLOG_BOOL_FLAGS:
        klog.add_argument(f"--{name}", dest=name.replace("-", "_"), nargs="?", action=IgnoredAction,
                          help=argparse.SUPPRESS)  # fmt: skip
    for name in KLOG_VALUE_FLAGS:
        klog.add_argument(f"--{name}", dest=name.replace("-", "_"), action=IgnoredAction,
                          help=argparse.SUPPRESS)  # fmt: skip
    klog.description = "--" + ", --".join((*KLOG_BOOL_FLAGS, *KLOG_VALUE_FLAGS))
    initial = {flag.attribute: getattr(defaults, flag.attribute) for flag in FLAGS}
    initial.update(feature_gates={}, ignored_flags=())  # gates: only the explicit settings
    parser.set_defaults(**initial)
    return parser


def parse_options(argv: Sequence[str]) -> Options:
    """Parse and validate a command line (without the program name).

    Raises OptionsError (every problem names its flag) or HelpRequested (with the help text).
    """
    namespace = build_parser().parse_args(argv)
    values = {
        f.name: getattr(namespace, f.name) for f in fields(Options) if hasattr(namespace, f.name)
    }
    values["feature_gates"] = resolve_feature_gates(values.get("feature_gates") or {})
    options = Options(**apply_upstream_fallbacks(values))
    problems = validate(options)
    if problems:
        raise OptionsError(problems)
    return options
