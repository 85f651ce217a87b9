"""argparse, taught Go pflag's syntax: repeatable lists, merged feature gates, klog flags that are
accepted and ignored, pflag's error wording and its way of printing defaults."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from agent.options.durations import format_duration
from agent.options.errors import HelpRequested, OptionsError


def converter(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

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
    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            extra = message.removeprefix("unrecognized arguments: ").split()
            flag = next((arg for arg in extra if arg.startswith("-")), None)
            if flag is not None:
                message = f"unknown flag: {flag.partition('=')[0]}"
            else:
                message = f"{self.prog} takes no arguments, got {extra[0]!r}"
        elif message.startswith("argument "):
            # "argument --x/-y: detail" -> "--x: detail", naming the long flag.
            names, _, detail = message.removeprefix("argument ").partition(": ")
            long_names = [n for n in names.split("/") if n.startswith("--")]
            message = f"{(long_names or [names])[0]}: {detail}"
        raise OptionsError([message])


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
