"""karmada-bootstrap's command line, read with the agent's pflag parser as karmadactl reads its
own: what it accepts, what it refuses and in which words (held to a real karmadactl when
KARMADA_UPSTREAM_BIN has one)."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from agent.options.errors import HelpRequested, OptionsError
from bootstrap.cli import main_async, parse_arguments


def test_booleans_take_go_spellings_and_never_the_next_argument() -> None:
    # pflag: a bare boolean is true, and the endpoint after it stays an argument.
    args = parse_arguments(["register", "--dry-run", "10.0.0.1:5443"])
    assert args.dry_run is True
    assert args.args == ["10.0.0.1:5443"]
    for text, value in (("true", True), ("T", True), ("1", True), ("False", False), ("0", False)):
        args = parse_arguments(["register", "h:1", f"--wait-for-ready={text}"])
        assert args.wait_for_ready is value
    assert parse_arguments(["register", "h:1"]).wait_for_ready is True


def test_values_lists_durations_and_spellings_as_pflag_reads_them() -> None:
    args = parse_arguments(
        [
            "register",
            "h:1",
            "--discovery-token-ca-cert-hash=sha256:aa,sha256:bb",
            "--discovery-token-ca-cert-hash",
            "sha256:cc",
            "--cluster-zones=z1,z2",
            "--discovery-timeout",
            "90s",
            "--cluster_name=member1",  # Go normalises underscores in flag names
            "-n=agents",
            "--karmada-agent-replicas",
            "2",
        ]
    )
    assert args.ca_cert_hashes == ("sha256:aa", "sha256:bb", "sha256:cc")
    assert args.cluster_zones == ("z1", "z2")
    assert args.discovery_timeout == timedelta(seconds=90)
    assert args.cluster_name == "member1"
    assert args.namespace == "agents"
    assert args.karmada_agent_replicas == 2
    assert parse_arguments(["unregister", "m1", "-nns"]).namespace == "ns"
    create = parse_arguments(["token", "create", "--usages", "signing", "--groups=g1,g2"])
    assert create.usages == ("signing",)
    assert create.groups == ("g1", "g2")
    assert parse_arguments(["token", "create"]).ttl == timedelta(hours=24)
    assert parse_arguments(["token", "delete", "abcdef", "ghijkl"]).args == ["abcdef", "ghijkl"]


# The command line, then karmadactl's error for it (karmada-bootstrap for karmadactl).
REFUSED = [
    (["register", "h:1", "--bogus"], "unknown flag: --bogus"),
    (["register", "h:1", "--dry-run=yes"], 'invalid argument "yes" for "--dry-run" flag: '),
    (["register", "h:1", "--no-dry-run"], "unknown flag: --no-dry-run"),
    (["register", "h:1", "--dry"], "unknown flag: --dry"),  # no abbreviations
    (["register", "-x"], "unknown shorthand flag: 'x' in -x"),
    (["register", "h:1", "--token"], "flag needs an argument: --token"),
    (["register", "h:1", "--discovery-timeout=abc"], 'invalid argument "abc" for "--discovery-timeout" flag: '),
    (["register", "h:1", "--karmada-agent-replicas=x"], 'invalid argument "x" for "--karmada-agent-replicas" flag: '),
    (["register"], "accepts 1 arg(s), received 0"),
    (["register", "a:1", "b:1"], "accepts 1 arg(s), received 2"),
    (["register", "a:1", "--dry-run", "false"], "accepts 1 arg(s), received 2"),
    (["token", "create", "extra"], 'unknown command "extra" for "karmada-bootstrap token create"'),
    (["token", "create", "--ttl=5"], 'invalid argument "5" for "--ttl" flag: '),
    (["token", "list", "--print-register-command"], "unknown flag: --print-register-command"),
    (["unregister", "a", "b"], "only the cluster name is allowed as an argument"),
    (["unregister", "m1", "--wait=soon"], 'invalid argument "soon" for "--wait" flag: '),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "error"), REFUSED)
def test_refused_command_lines_say_what_pflag_says(argv: list[str], error: str) -> None:
    with pytest.raises(OptionsError) as refused:
        parse_arguments(argv)
    [problem] = refused.value.problems
    assert problem.startswith(error) if error.endswith(": ") else problem == error


async def test_a_refused_command_line_exits_1_pointing_to_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await main_async(["register", "h:1", "--no-wait-for-ready"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: unknown flag: --no-wait-for-ready",
        "See 'karmada-bootstrap register --help' for usage.",
    ]
    assert await main_async(["register", "--help"]) == 0
    assert "--discovery-token-ca-cert-hash" in capsys.readouterr().out
    with pytest.raises(HelpRequested):
        parse_arguments(["token", "create", "-h"])


def karmadactl() -> Path:
    binary = Path(os.environ.get("KARMADA_UPSTREAM_BIN", "")) / "karmadactl"
    if not os.environ.get("KARMADA_UPSTREAM_BIN") or not binary.exists():
        pytest.skip("KARMADA_UPSTREAM_BIN is not set (or has no karmadactl): cannot ask it")
    return binary


# karmada-bootstrap's own flags (not karmadactl's) are left out of the comparison.
OURS_ONLY = {"--wait-for-ready", "--no-wait-for-ready"}


@pytest.mark.parametrize(
    ("argv", "error"),
    [(a, e) for a, e in REFUSED if not OURS_ONLY.intersection(arg.partition("=")[0] for arg in a)],
)
def test_karmadactl_refuses_the_same_command_lines_in_the_same_words(
    argv: list[str], error: str
) -> None:
    done = subprocess.run(
        [str(karmadactl()), *argv], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    first = done.stderr.splitlines()[0].removeprefix("error: ")
    expected = error.replace("karmada-bootstrap", "karmadactl")
    # Causes after "flag: " are Go's own (strconv, time) and ours differ in wording.
    assert first.startswith(expected) if expected.endswith(": ") else first == expected
