"""What parsing a command line raises instead of returning options."""

from __future__ import annotations

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
