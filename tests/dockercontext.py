"""The build context `docker build .` sends: the files .dockerignore lets through.

Docker's rules (moby/patternmatcher, as the builder applies .dockerignore): each line is a
pattern, cleaned like a path (leading "/" and "./" dropped, trailing "/" dropped); `*` and `?`
match within one path segment, `**` matches any number of segments, `[...]` is a class; a
pattern matches a file when it matches the file's path or any of its parent directories; the
last matching pattern decides, and a pattern starting with `!` re-includes. Lines starting
with `#` are comments. The Dockerfile and .dockerignore themselves are always sent.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pattern:
    text: str
    exclusion: bool
    regex: re.Pattern[str]


def _clean(pattern: str) -> str:
    parts: list[str] = []
    for part in pattern.strip().split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts:
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _regex(pattern: str) -> re.Pattern[str]:
    out = ["^"]
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**", i):
            # "**/" matches zero or more directories; a trailing "**" matches everything below.
            if pattern.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("^"):
                    body = "!" + body[1:]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = end + 1
                continue
        elif char == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        else:
            out.append(re.escape(char))
        i += 1
    out.append("$")
    return re.compile("".join(out))


def parse(text: str) -> list[Pattern]:
    patterns: list[Pattern] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exclusion = line.startswith("!")
        body = _clean(line[1:] if exclusion else line)
        if not body:
            continue
        patterns.append(Pattern(line, exclusion, _regex(body)))
    return patterns


def excluded(path: str, patterns: list[Pattern]) -> bool:
    """Whether the file or directory at `path` (relative, "/"-separated) is left out."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for pattern in patterns:
        if any(pattern.regex.match(candidate) for candidate in candidates):
            result = not pattern.exclusion
    return result


ALWAYS_SENT = ("Dockerfile", ".dockerignore")


def _may_reinclude_below(directory: str, patterns: list[Pattern]) -> bool:
    """Whether some `!` pattern could re-include a file below an excluded `directory`."""
    for pattern in patterns:
        if not pattern.exclusion:
            continue
        body = _clean(pattern.text[1:])
        first = body.split("/", 1)[0]
        if any(c in first for c in "*?[") or body.startswith(directory + "/"):
            return True
    return False


def context_files(root: Path, patterns: list[Pattern]) -> list[str]:
    """Every file under `root` that the build context holds, relative and sorted. Excluded
    directories that no `!` pattern reaches into are not walked (as Docker skips them)."""
    files: list[str] = []
    for directory, subdirs, names in os.walk(root):
        base = Path(directory).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        kept = []
        for sub in sorted(subdirs):
            relative = prefix + sub
            if relative == ".git":
                continue
            if excluded(relative, patterns) and not _may_reinclude_below(relative, patterns):
                continue
            kept.append(sub)
        subdirs[:] = kept
        for name in names:
            relative = prefix + name
            if relative in ALWAYS_SENT or not excluded(relative, patterns):
                files.append(relative)
    return sorted(files)
