"""The karmada-agent entry point (agent/cli.py, agent/__main__.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from agent import cli
from agent.heap_release import glibc_allocator
from agent.options import Options
from agent.version import VERSION

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()
    import logging

    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)


def install_fake_app(monkeypatch: pytest.MonkeyPatch, run: object) -> None:
    module = types.ModuleType("agent.app")
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "agent.app", module)


def test_version_prints_version_and_build_info(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("karmada-agent version: version.Info{")
    assert f'GitVersion:"v{VERSION}"' in out
    assert "PythonVersion:" in out
    assert "Platform:" in out


def test_version_reads_build_metadata_from_the_image_env(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KARMADA_AGENT_GIT_COMMIT", "abc123")
    monkeypatch.setenv("KARMADA_AGENT_BUILD_DATE", "2026-11-22T00:00:00Z")
    assert cli.main(["version"]) == 0
    out = capsys.readouterr().out
    assert 'GitCommit:"abc123"' in out
    assert 'BuildDate:"2026-11-22T00:00:00Z"' in out


def test_version_refuses_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["version", "extra"]) == 1
    assert "extra" in capsys.readouterr().err


def test_help_exits_zero_and_lists_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--karmada-kubeconfig" in out
    assert "--cluster-lease-renew-interval-fraction" in out
    assert "(default 16m40s)" in out


def test_invalid_flag_exits_one_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--cluster-name=member1", "--cluster-lease-renew-interval-fraction=2"]) == 1
    err = capsys.readouterr().err
    assert "Error: --cluster-lease-renew-interval-fraction:" in err
    assert "karmada-agent --help" in err


def test_unknown_flag_exits_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--cluster-name=member1", "--no-such-flag"]) == 1
    assert "unknown flag: --no-such-flag" in capsys.readouterr().err


def test_runs_the_app_with_the_parsed_options(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Options] = []

    async def run(options: Options) -> int:
        seen.append(options)
        return 0

    install_fake_app(monkeypatch, run)
    argv = ["--cluster-name=member1", "--leader-elect=false", "--log-format=json", "--v=1"]
    assert cli.main(argv) == 0
    assert len(seen) == 1
    assert seen[0].cluster_name == "member1"
    assert seen[0].leader_elect is False
    out = capsys.readouterr().out
    assert '"event": "starting"' in out
    assert '"cluster_status_update_frequency": "10s"' in out  # the flags line at -v >= 1


def test_app_exit_code_and_failures_are_propagated(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run_returns_three(options: Options) -> int:
        return 3

    install_fake_app(monkeypatch, run_returns_three)
    assert cli.main(["--cluster-name=member1", "--log-format=json"]) == 3

    async def run_returns_none(options: Options) -> None:
        return None

    install_fake_app(monkeypatch, run_returns_none)
    assert cli.main(["--cluster-name=member1", "--log-format=json"]) == 0

    async def run_fails(options: Options) -> int:
        raise RuntimeError("registration refused")

    install_fake_app(monkeypatch, run_fails)
    assert cli.main(["--cluster-name=member1", "--log-format=json"]) == 1


def test_failure_is_logged_without_secrets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def run_fails(options: Options) -> int:
        raise RuntimeError("401 for Authorization: Bearer s3cr3t-t0ken")

    install_fake_app(monkeypatch, run_fails)
    assert cli.main(["--cluster-name=member1", "--log-format=json"]) == 1
    out = capsys.readouterr().out
    assert "karmada-agent failed" in out
    assert "s3cr3t-t0ken" not in out


def test_ignored_klog_flags_are_warned_about(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def run(options: Options) -> int:
        return 0

    install_fake_app(monkeypatch, run)
    assert cli.main(["--cluster-name=member1", "--log-format=json", "--logtostderr"]) == 0
    out = capsys.readouterr().out
    assert "ignoring klog flags" in out
    assert "--logtostderr" in out


def test_python_dash_m_agent_runs_the_same_entry_point() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "version"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f'GitVersion:"v{VERSION}"' in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "agent", "--cluster-name=BAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1
    assert "--cluster-name" in bad.stderr


def test_version_matches_pyproject() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project.get("version", VERSION) == VERSION


def test_the_agent_runs_with_its_free_heap_released(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's freed memory is given back while the agent runs (agent.heap_release),
    and the job ends with it."""
    running: list[set[str]] = []

    async def run(options: Options) -> int:
        running.append({task.get_name() for task in asyncio.all_tasks()})
        return 0

    install_fake_app(monkeypatch, run)
    assert cli.main(["--cluster-name=member1", "--leader-elect=false"]) == 0
    assert ("heap-release" in running[0]) == (glibc_allocator() is not None)
