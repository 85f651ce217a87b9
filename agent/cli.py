"""`karmada-agent` (and `python -m agent`): flags -> Options -> logging -> agent.app.run."""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import fields
from datetime import timedelta
from typing import Any, cast

from agent.logs import configure_logging, get_logger
from agent.options import HelpRequested, Options, OptionsError, parse_options
from agent.options.compatibility import start_warnings
from agent.options.durations import format_duration
from agent.options.errors import explain
from agent.options.parser import PROGRAM
from agent.version import VERSION, build_info

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130

RunFunction = Callable[[Options], Coroutine[Any, Any, int | None]]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["version"]:
        return _version(args[1:])
    try:
        options = parse_options(args)
    except (HelpRequested, OptionsError) as refused:
        return explain(refused, error="Error", usage="Run '{command} --help' for usage.",
                       command=PROGRAM)  # fmt: skip

    configure_logging(verbosity=options.verbosity, log_format=options.log_format)
    log = get_logger(PROGRAM)
    log.info(
        "starting",
        version=VERSION,
        cluster=options.cluster_name,
        controllers=sorted(options.enabled_controllers()),
    )
    if options.verbosity >= 1:
        log.info("flags", **describe_options(options))
    for warning in start_warnings(options):
        log.warning(warning)

    try:
        result = asyncio.run(_serve(_load_run(), options))
    except KeyboardInterrupt:
        log.info("interrupted")
        return EXIT_INTERRUPTED
    except Exception:
        log.exception("karmada-agent failed")
        return EXIT_FAILURE
    return result if isinstance(result, int) else EXIT_OK


def _version(extra: Sequence[str]) -> int:
    if any(arg in ("-h", "--help") for arg in extra):
        print(f"Usage: {PROGRAM} version\n\nPrint the version and build information.")
        return EXIT_OK
    if extra:
        print(f"Error: {PROGRAM} version takes no arguments, got {extra[0]!r}", file=sys.stderr)
        return EXIT_FAILURE
    print(build_info().render(PROGRAM))
    return EXIT_OK


async def _serve(run: RunFunction, options: Options) -> int | None:
    """The agent's life, its freed memory given back to the system meanwhile."""
    from agent.heap_release import releasing_free_heap

    async with releasing_free_heap():
        return await run(options)


def _load_run() -> RunFunction:
    # Imported here so that `version`, `--help` and flag errors never load the whole agent.
    module = importlib.import_module("agent.app")
    return cast(RunFunction, module.run)


def describe_options(options: Options) -> dict[str, Any]:
    """The effective flags as plain values for the start-up log line (no secrets live in flags)."""
    described: dict[str, Any] = {}
    for item in fields(options):
        value = getattr(options, item.name)
        if isinstance(value, timedelta):
            value = format_duration(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif item.name == "feature_gates":
            value = dict(value)
        described[item.name] = value
    return described
