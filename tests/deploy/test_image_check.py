"""The Dockerfile checks of tests/image_check.py (the wheel/venv half runs in `make image-check`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.version import VERSION
from tests import dockercontext, image_check

REAL = image_check.DOCKERFILE.read_text()


def problems_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> list[str]:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    monkeypatch.setattr(image_check, "DOCKERFILE", path)
    failures = image_check.Failures()
    image_check.check_dockerfile(failures, VERSION)
    return failures.messages


def test_the_real_dockerfile_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert problems_with(tmp_path, monkeypatch, REAL) == []


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("USER 65532:65532", "USER root", "numeric and non-root"),
        ("USER 65532:65532", "USER 0", "numeric and non-root"),
        ("USER 65532:65532\n", "", "sets no USER"),
        ('ENTRYPOINT ["/opt/venv/bin/karmada-agent"]', "ENTRYPOINT karmada-agent", "exec form"),
        ("COPY agent ./agent", "COPY agents ./agent", "COPY source agents missing"),
        ("--from=builder /opt/venv", "--from=build /opt/venv", "names no earlier stage"),
        ("ARG VERSION=0.1.0", "ARG VERSION=9.9.9", "ARG VERSION"),
        ("python3-debian12:nonroot", "python3-debian13:nonroot", "runtime 3.13"),
        ("org.opencontainers.image.source=", "org.example.source=", "image.source"),
        ("USER 65532:65532", "RUN echo hi\nUSER 65532:65532", "must not RUN"),
    ],
)
def test_breaking_the_dockerfile_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, old: str, new: str, expected: str
) -> None:
    assert old in REAL
    problems = problems_with(tmp_path, monkeypatch, REAL.replace(old, new))
    assert any(expected in problem for problem in problems), problems


def test_single_stage_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = 'FROM python:3.11-slim\nUSER 65532\nENTRYPOINT ["/opt/venv/bin/karmada-agent"]\n'
    assert any("multi-stage" in p for p in problems_with(tmp_path, monkeypatch, text))


@pytest.mark.parametrize(
    ("path", "sent"),
    [
        ("agent", True),
        ("agent/cli.py", True),
        ("agent/__pycache__/cli.cpython-311.pyc", False),
        ("agent/kube/__pycache__", False),
        ("tests", False),
        ("tests/image_check.py", False),
        ("Makefile", False),
        ("deploy/base/deployment.yaml", True),
        ("docs/benchmarks.md", False),
        ("emulator/https.py", False),
    ],
)
def test_dockerignore_semantics(path: str, sent: bool) -> None:
    patterns = dockercontext.parse(
        "# comment\n*\n!agent/\n!deploy\n**/__pycache__\nemulator\n/docs/**\n"
    )
    assert dockercontext.excluded(path, patterns) is not sent


def test_double_star_and_reinclusion_order() -> None:
    patterns = dockercontext.parse("**/*.md\n!README.md\n")
    assert not dockercontext.excluded("README.md", patterns)
    assert dockercontext.excluded("docs/README.md", patterns)
    assert dockercontext.excluded("a/b/c.md", patterns)
    # The last matching pattern decides.
    assert dockercontext.excluded("README.md", dockercontext.parse("!README.md\n*.md\n"))
    # `*` stays within one segment.
    assert not dockercontext.excluded("a/b.md", dockercontext.parse("*.md\n"))


def test_context_holds_what_the_dockerfile_needs(tmp_path: Path) -> None:
    (tmp_path / "agent" / "__pycache__").mkdir(parents=True)
    (tmp_path / "agent" / "x.py").write_text("")
    (tmp_path / "agent" / "__pycache__" / "x.pyc").write_text("")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("")
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / ".dockerignore").write_text("*\n!agent/\n**/__pycache__\n")
    patterns = dockercontext.parse((tmp_path / ".dockerignore").read_text())
    assert dockercontext.context_files(tmp_path, patterns) == [
        ".dockerignore",
        "Dockerfile",
        "agent/x.py",
    ]


def test_copy_of_a_path_the_context_lacks_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ignore = tmp_path / ".dockerignore"
    ignore.write_text("*\n!pyproject.toml\n!README.md\n!agent/\n!bootstrap/\n")
    monkeypatch.setattr(image_check, "DOCKERIGNORE", ignore)
    problems = problems_with(tmp_path, monkeypatch, REAL)
    assert any("COPY source deploy" in p and ".dockerignore" in p for p in problems), problems


def test_replay_fails_on_the_dockerfile_that_never_copied_deploy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recipe before the fix: deploy/ (force-included into the wheel) neither copied nor in
    the context. The replayed wheel build fails as `docker build` did."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "\n".join(line for line in REAL.splitlines() if not line.startswith("COPY deploy"))
    )
    ignore = tmp_path / ".dockerignore"
    ignore.write_text("*\n!pyproject.toml\n!README.md\n!agent/\n!bootstrap/\n**/__pycache__\n")
    monkeypatch.setattr(image_check, "DOCKERFILE", dockerfile)
    monkeypatch.setattr(image_check, "DOCKERIGNORE", ignore)
    failures = image_check.Failures()
    assert image_check.replay(failures, tmp_path / "work") is None
    assert any("RUN failed" in m and "deploy" in m for m in failures.messages), failures.messages
