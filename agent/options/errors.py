"""What parsing a command line raises instead of returning options."""

from __future__ import annotations

import sys
from collections.abc import Sequence


class OptionsError(ValueError):
    """Bad command line: one or more problems, each naming its flag."""

    def __init__(self, problems: Sequence[str], *, command: str = "") -> None:
        self.problems = tuple(problems)
        self.command = command  # the (sub)command whose --help to point to, when known
        super().__init__("\n".join(self.problems))


class HelpRequested(Exception):  # noqa: N818 - a signal, not an error
    def __init__(self, text: str) -> None:
        self.text = text
        super().__init__(text)


def explain(refused: OptionsError | HelpRequested, *, error: str, usage: str, command: str) -> int:
    """A refused command line as cobra reports it: the help on stdout (exit 0), or each problem
    after `error` and then `usage` (its `{command}` the refusing (sub)command, else `command`)
    on stderr (exit 1)."""
    if isinstance(refused, HelpRequested):
        sys.stdout.write(refused.text)
        return 0
    for problem in refused.problems:
        print(f"{error}: {problem}", file=sys.stderr)
    if refused.command or command:
        print(usage.format(command=refused.command or command), file=sys.stderr)
    return 1
