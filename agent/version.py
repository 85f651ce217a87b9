"""The agent's version and build information (`karmada-agent version`, the image's OCI labels)."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

# Single source of the release number: pyproject.toml, the Dockerfile's VERSION build argument and
# the deploy/ image tag are checked against it by tests/image_check.py and tests/cli.
VERSION = "0.1.0"

# The image build passes these in (Dockerfile ARG -> ENV); a source checkout leaves them unset.
GIT_COMMIT_ENV = "KARMADA_AGENT_GIT_COMMIT"
BUILD_DATE_ENV = "KARMADA_AGENT_BUILD_DATE"

_GO_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


@dataclass(frozen=True)
class BuildInfo:
    git_version: str
    git_commit: str
    build_date: str
    python_version: str
    platform: str

    def render(self, program: str) -> str:
        """One line shaped like the Go components' `version` output, so scripts can grep it."""
        fields = (
            f'GitVersion:"{self.git_version}"',
            f'GitCommit:"{self.git_commit}"',
            f'BuildDate:"{self.build_date}"',
            f'PythonVersion:"{self.python_version}"',
            f'Platform:"{self.platform}"',
        )
        return f"{program} version: version.Info{{{', '.join(fields)}}}"


def build_info() -> BuildInfo:
    machine = platform.machine().lower()
    return BuildInfo(
        git_version=f"v{VERSION}",
        git_commit=os.environ.get(GIT_COMMIT_ENV, "unknown"),
        build_date=os.environ.get(BUILD_DATE_ENV, "unknown"),
        python_version=platform.python_version(),
        platform=f"{sys.platform}/{_GO_ARCH.get(machine, machine)}",
    )
