"""argparse, taught Go pflag's syntax: repeatable lists, merged feature gates, klog flags that are
accepted and ignored, booleans that never take the next argument, no abbreviations, pflag's
error wording and its way of printing defaults. The agent's flags and karmada-bootstrap's
(karmadactl's) are both parsed by it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from agent.options.durations import format_duration
from agent.options.errors import HelpRequested, OptionsError
from agent.options.flag_values import parse_go_bool


def flag_label(names: Iterable[str]) -> str:
    """A flag as pflag names it in errors: `-n, --namespace`, or `--name`."""
    ordered = sorted(names, key=lambda name: name.startswith("--"))
    return ", ".join(ordered)


def converter(parse: Callable[[str], Any], label: str) -> Callable[[str], Any]:
    """`parse` for argparse, its ValueError worded as pflag's InvalidValueError."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            quoted = json.dumps(text, ensure_ascii=False)  # as Go's %q for printable text
            raise argparse.ArgumentTypeError(
                f'invalid argument {quoted} for "{label}" flag: {exc}'
            ) from None

    convert.__name__ = parse.__name__
    return convert


class ListAction(argparse.Action):
    """pflag StringSlice: the first use replaces the default, later uses append."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        seen: set[str] = namespace.__dict__.setdefault("_lists_seen", set())
        current = list(getattr(namespace, self.dest)) if self.dest in seen else []
        seen.add(self.dest)
        setattr(namespace, self.dest, tuple(current + list(values)))


class GatesAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        merged = dict(getattr(namespace, self.dest) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


class IgnoredAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        ignored = list(getattr(namespace, "ignored_flags", ()))
        ignored.append(self.option_strings[0])
        namespace.ignored_flags = tuple(ignored)
        if self.dest == "logging_format" and values == "json":
            namespace.log_format = "json"


class PflagParser(argparse.ArgumentParser):
    """Raises OptionsError with pflag's wording instead of exiting. Flags are spelled as Go's:
    `--flag_name` is `--flag-name`, and a boolean (`add_bool`) given without `=value` is true
    and never takes the next argument as its value (pflag's NoOptDefVal)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # pflag matches whole names only
        kwargs.setdefault("add_help", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.bool_flags: set[str] = set()
        self.add_argument(
            "-h", "--help", nargs=0, action=HelpAction, help="Show this help and exit."
        )

    def add_bool(
        self, container: Any, *names: str, dest: str, help: str, default: bool = False
    ) -> None:
        """A pflag BoolVar: `--flag`, `--flag=true|false` (Go's spellings), nothing else."""
        self.bool_flags.update(names)
        container.add_argument(
            *names, dest=dest, type=converter(parse_go_bool, flag_label(names)), nargs="?",
            const=True, default=default, metavar="true|false", help=help,
        )  # fmt: skip

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return super().parse_known_args(self._go_spelling(args or []), namespace)

    def _go_spelling(self, argv: Sequence[str]) -> list[str]:
        result: list[str] = []
        for index, arg in enumerate(argv):
            if arg == "--":
                result.extend(argv[index:])
                break
            if arg.startswith("--"):
                name, sep, value = arg.partition("=")
                arg = name.replace("_", "-") + sep + value
                if not sep and arg in self.bool_flags:
                    arg += "=true"
            elif arg in self.bool_flags:  # a short boolean
                arg += "=true"
            result.append(arg)
        return result

    def unknown_flag(self, extra: Sequence[str]) -> str:
        """pflag's NotExistError for the first flag of arguments nothing took."""
        flag = next(arg for arg in extra if arg.startswith("-"))
        if flag.startswith("--"):
            return f"unknown flag: {flag.partition('=')[0]}"
        return f"unknown shorthand flag: {flag[1:2]!r} in {flag}"

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            extra = message.removeprefix("unrecognized arguments: ").split()
            if any(arg.startswith("-") for arg in extra):
                message = self.unknown_flag(extra)
            else:
                message = f"{self.prog} takes no arguments, got {extra[0]!r}"
        elif message.startswith("argument "):
            names, _, detail = message.removeprefix("argument ").partition(": ")
            long_names = [n for n in names.split("/") if n.startswith("--")]
            name = (long_names or [names])[0]
            if detail.startswith("invalid argument "):
                message = detail  # worded by `converter`
            elif detail == "expected one argument":
                message = f"flag needs an argument: {name}"
            elif detail.startswith("invalid choice: ") and not name.startswith("-"):
                chosen = detail.removeprefix("invalid choice: ").split(" (choose from")[0]
                message = f'unknown command "{chosen.strip(chr(39))}" for "{self.prog}"'
            else:
                message = f"{name}: {detail}"
        raise OptionsError([message], command=self.prog)


class HelpAction(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        raise HelpRequested(parser.format_help())


class HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=44, width=100)


def default_text(value: Any) -> str:
    """A default as pflag prints it; "" when pflag would print none (zero values)."""
    if isinstance(value, bool):
        return "true" if value else ""
    if isinstance(value, timedelta):
        return format_duration(value) if value else ""
    if isinstance(value, tuple):
        return f"[{','.join(value)}]" if value else ""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, str):
        return f'"{value}"' if value else ""
    if isinstance(value, int):
        return str(value) if value else ""
    return ""
