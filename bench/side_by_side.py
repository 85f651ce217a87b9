"""This agent and upstream's Go karmada-agent, side by side, at three flag settings.

    KARMADA_UPSTREAM_BIN=... python -m bench.side_by_side [--repeat 1] [--idle-seconds 60]
        [--settings default,control-plane-lifted,all-lifted] [--agents ours,go]
        [--agent-python PY] [--no-docs] [--out FILE]

Each run is bench.agent_latency's `measure` on fresh emulators (control plane and member in
processes of their own): the agent's idle requests, a burst of Works (`control_plane_work`,
half Deployments, half ConfigMaps) created one after the other, then all of them deleted at
once. The settings are issue 23's:

- default: upstream's defaults (200 Works);
- control-plane-lifted: `--kube-api-qps=1000 --kube-api-burst=2000 --concurrent-work-syncs=20`
  (300 Works);
- all-lifted: also `--cluster-api-qps=1000 --cluster-api-burst=2000` (300 Works).

Both agents run with `--leader-elect=false`. With `KARMADA_UPSTREAM_BIN` unset (or without its
karmada-agent) only this agent runs. `--repeat N` runs every agent N times per setting,
alternating them; the table gives the range of the N runs where they differ. The table is
written into docs/benchmarks.md between the side-by-side markers (unless `--no-docs`) and all
runs as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emulator import upstream

from .agent_latency import CLUSTER, JSON, AgentUnderTest, OurAgent, _per, event_key, measure
from .emulators import EmulatorProcess

DOCS = Path("docs/benchmarks.md")
BEGIN = "<!-- side-by-side:begin (bench.side_by_side writes this table) -->"
END = "<!-- side-by-side:end -->"
CONTROL_PLANE_LIFTED = (
    "--kube-api-qps=1000",
    "--kube-api-burst=2000",
    "--concurrent-work-syncs=20",
)
MEMBER_LIFTED = ("--cluster-api-qps=1000", "--cluster-api-burst=2000")


@dataclass(frozen=True)
class Setting:
    name: str
    works: int
    flags: tuple[str, ...]


SETTINGS = (
    Setting("default", 200, ()),
    Setting("control-plane-lifted", 300, CONTROL_PLANE_LIFTED),
    Setting("all-lifted", 300, CONTROL_PLANE_LIFTED + MEMBER_LIFTED),
)


class UpstreamAgent:
    """Upstream's Go karmada-agent (emulator.upstream.UpstreamKarmadaAgent)."""

    name = "go"

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.process: upstream.UpstreamKarmadaAgent | None = None

    async def start(self, cp: EmulatorProcess, member: EmulatorProcess, directory: Path) -> int:
        self.process = upstream.UpstreamKarmadaAgent(
            karmada_kubeconfig=cp.client_kubeconfig,
            member_kubeconfig=member.client_kubeconfig,
            cluster_name=CLUSTER,
            extra_args=["--leader-elect=false", *self.args],
            workdir=directory,
        )
        await self.process.start(timeout=120)
        assert self.process.process is not None
        return self.process.process.pid

    async def stop(self) -> None:
        if self.process is not None:
            await self.process.stop()

    def recorded_events(self, works: int) -> JSON:
        """The Events the Go agent recorded, by reason, per Work: its log has a line for each
        (the event broadcaster's logging watcher). Those its API writer never wrote were
        dropped by client-go's broadcaster, which drops rather than waits once 1000 are queued
        for a watcher."""
        assert self.process is not None
        counts: dict[str, int] = {}
        for line in self.process.log_path.read_text(errors="replace").splitlines():
            found = _RECORDED.search(line)
            if found is None:
                continue
            key = event_key(json.loads(found.group(1)), found.group(2))
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        return _per(counts, works)


# client-go's event logging: `... logger="events" type="Normal" object={...} reason="..."`.
_RECORDED = re.compile(r'logger="events" type="\w+" object=(\{.*?\}) reason="(\w+)"')


def agents_for(
    setting: Setting, names: list[str], python: str
) -> list[Callable[[], AgentUnderTest]]:
    makers: dict[str, Callable[[], AgentUnderTest]] = {
        "ours": lambda: OurAgent(list(setting.flags), python=python),
        "go": lambda: UpstreamAgent(list(setting.flags)),
    }
    return [makers[name] for name in names]


async def run(
    settings: list[Setting], agent_names: list[str], repeat: int, idle_seconds: float, python: str
) -> list[JSON]:
    runs: list[JSON] = []
    for setting in settings:
        for attempt in range(repeat):
            for make in agents_for(setting, agent_names, python):
                agent = make()
                print(f"{setting.name}: {agent.name}, run {attempt + 1} of {repeat}", flush=True)
                result = await measure(agent, setting.works, idle_seconds=idle_seconds)
                if isinstance(agent, UpstreamAgent):
                    result["events_recorded_per_work_by_reason"] = agent.recorded_events(
                        setting.works
                    )
                result.update(setting=setting.name, flags=" ".join(setting.flags))
                runs.append(result)
                print(json.dumps(_summary(result)), flush=True)
    return runs


def _summary(result: JSON) -> JSON:
    return {key: value for key, value in result.items() if not isinstance(value, dict)}


# --- the table -----------------------------------------------------------------------------------

Figure = tuple[str, Callable[[JSON], float | None], str]


def _total(key: str) -> Callable[[JSON], float | None]:
    return lambda run: (run.get(key) or {}).get("total")


def _event_writes(run: JSON) -> float | None:
    requests: JSON = run.get("control_plane_requests_per_work") or {}
    return round(sum(float(v) for k, v in requests.items() if k.endswith(" events")), 2)


def _connections(key: str) -> Callable[[JSON], float | None]:
    return lambda run: sum((run.get(key) or {}).values())


FIGURES: tuple[Figure, ...] = (
    ("Ready after start, s", lambda r: r["ready_after_start_seconds"], "{:.1f}"),
    ("Works/s", lambda r: r["works_per_second"], "{:.1f}"),
    ("p50 Work created -> Applied=True, ms", lambda r: r["latency_p50_ms"], "{:.0f}"),
    ("p90, ms", lambda r: r["latency_p90_ms"], "{:.0f}"),
    (
        "all requests done (Events too), s after the first Work",
        lambda r: r.get("requests_done_after_seconds"),
        "{:.0f}",
    ),
    ("agent CPU per Work, ms", lambda r: r["agent_cpu_ms_per_work"], "{:.1f}"),
    ("member requests per Work", _total("member_requests_per_work"), "{:.2f}"),
    (
        "member requests per Work beyond the idle ones",
        lambda r: (r.get("member_requests_per_work") or {}).get("beyond_idle"),
        "{:.2f}",
    ),
    ("control-plane requests per Work", _total("control_plane_requests_per_work"), "{:.2f}"),
    ("Event objects per Work", _total("event_objects_per_work_by_reason"), "{:.2f}"),
    ("Event writes (POST/PATCH) per Work", _event_writes, "{:.2f}"),
    (
        "Events the Go agent recorded per Work (its log)",
        _total("events_recorded_per_work_by_reason"),
        "{:.2f}",
    ),
    ("deleting all Works at once, s", lambda r: r.get("delete_all_seconds"), "{:.2f}"),
    (
        "member requests per deleted Work",
        _total("delete_member_requests_per_work"),
        "{:.2f}",
    ),
    (
        "control-plane requests per deleted Work",
        _total("delete_control_plane_requests_per_work"),
        "{:.2f}",
    ),
    ("RSS idle, MiB", lambda r: r["agent_rss_idle_mib"], "{:.0f}"),
    ("RSS after the load, MiB", lambda r: r["agent_rss_after_load_mib"], "{:.0f}"),
    (
        "TCP connections after the load (both API servers)",
        _connections("tcp_connections_after_load"),
        "{:.0f}",
    ),
    (
        "idle control-plane requests per minute",
        _total("idle_control_plane_requests_per_minute"),
        "{:.0f}",
    ),
    ("idle member requests per minute", _total("idle_member_requests_per_minute"), "{:.0f}"),
)


def _cell(values: list[float | None], fmt: str) -> str:
    present = [v for v in values if v is not None]
    if not present:
        return ""
    low, high = fmt.format(min(present)), fmt.format(max(present))
    return low if low == high else f"{low} - {high}"


def table(runs: list[JSON]) -> str:
    columns: list[tuple[str, str]] = []
    for run in runs:
        column = (run["setting"], run["agent"])
        if column not in columns:
            columns.append(column)
    header = "| figure | " + " | ".join(f"{s}: {a}" for s, a in columns) + " |"
    lines = [header, "|---|" + "---:|" * len(columns)]
    for label, value, fmt in FIGURES:
        cells = [
            _cell([value(r) for r in runs if (r["setting"], r["agent"]) == column], fmt)
            for column in columns
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(runs: list[JSON], command: str) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    today = datetime.date.today().isoformat()
    repeats = max(
        sum(
            1 for r in runs if (r["setting"], r["agent"]) == (runs[0]["setting"], runs[0]["agent"])
        ),
        1,
    )
    settings = ", ".join(
        f"{s.name} ({s.works} Works{': ' + ' '.join(s.flags) if s.flags else ''})"
        for s in SETTINGS
        if any(r["setting"] == s.name for r in runs)
    )
    return "\n".join(
        (
            BEGIN,
            f"`{command}`, {today}, at {commit or 'an uncommitted tree'}, "
            f"{platform.machine()} {_cores()} cores, Python {platform.python_version()}; "
            f"{repeats} run(s) per agent and setting (ranges where they differ). Settings: "
            f"{settings}.",
            "",
            table(runs),
            END,
        )
    )


def _cores() -> int:
    return os.cpu_count() or 0


def write_docs(text: str, path: Path = DOCS) -> None:
    content = path.read_text()
    if BEGIN in content and END in content:
        head, rest = content.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        content = head + text + tail
    else:
        content = content.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(content)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument(
        "--settings", default=",".join(s.name for s in SETTINGS), help="comma-separated"
    )
    parser.add_argument("--agents", default="ours,go", help="comma-separated: ours, go")
    parser.add_argument("--agent-python", default=sys.executable)
    parser.add_argument("--no-docs", action="store_true", help="do not write docs/benchmarks.md")
    parser.add_argument("--out", default="bench/results/side_by_side.json")
    args = parser.parse_args(argv)
    wanted = args.settings.split(",")
    settings = [s for s in SETTINGS if s.name in wanted]
    agent_names = [a for a in args.agents.split(",") if a]
    if "go" in agent_names and upstream.binary("karmada-agent") is None:
        print(f"Go agent left out: {upstream.missing_reason('karmada-agent')}", file=sys.stderr)
        agent_names.remove("go")
    runs = asyncio.run(
        run(settings, agent_names, args.repeat, args.idle_seconds, args.agent_python)
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(runs, indent=2) + "\n")
    command = "python -m bench.side_by_side " + " ".join(argv if argv is not None else sys.argv[1:])
    text = section(runs, command.strip())
    print(text)
    if not args.no_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
