"""The Dockerfile checks of tests/image_check.py (the wheel/venv half runs in `make image-check`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.version import VERSION
from tests import image_check

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


def test_dockerignore_semantics() -> None:
    patterns = ["*", "!agent/", "**/__pycache__"]
    assert image_check.dockerignore_allows("agent", patterns)
    assert not image_check.dockerignore_allows("tests", patterns)
    assert not image_check.dockerignore_allows("Makefile", patterns)
