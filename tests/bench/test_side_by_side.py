"""bench.side_by_side reads what the Go agent recorded from its log, counted as the Event
objects are (the benchmark's Works and their templates, by reason)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.side_by_side import UpstreamAgent

LINES = [
    # On a benchmark Work, twice (the second one the broadcaster may have dropped).
    'I1126 00:29:15.829032   12368 recorder.go:116] "Reflect status for object(Deployment/bench/'
    'web-1) succeed." logger="events" type="Normal" object={"kind":"Work","namespace":'
    '"karmada-es-member1","name":"bench-1","uid":"u1","apiVersion":"work.karmada.io/v1alpha1"}'
    ' reason="ReflectStatusSucceed"',
    'I1126 00:29:15.929032   12368 recorder.go:116] "Reflect status for object(Deployment/bench/'
    'web-1) succeed." logger="events" type="Normal" object={"kind":"Work","namespace":'
    '"karmada-es-member1","name":"bench-1","uid":"u1","apiVersion":"work.karmada.io/v1alpha1"}'
    ' reason="ReflectStatusSucceed"',
    # On the template.
    'I1126 00:29:13.308799   12368 recorder.go:116] "Successfully applied resource(bench/cm-3) '
    'to cluster member1" logger="events" type="Normal" object={"kind":"ConfigMap","namespace":'
    '"bench","name":"cm-3","uid":"u2","apiVersion":"v1"} reason="SyncSucceed"',
    # On the namespace Work the benchmark creates first: not counted.
    'I1126 00:29:13.228503   12368 recorder.go:116] "Work is being dispatched to member '
    'clusters." logger="events" type="Normal" object={"kind":"Work","namespace":'
    '"karmada-es-member1","name":"bench-ns","uid":"u3","apiVersion":"work.karmada.io/v1alpha1"}'
    ' reason="WorkDispatching"',
    'I1126 00:29:13.228503   12368 controller.go:1] "Starting workers" controller="work"',
]


@dataclass
class _Process:
    log_path: Path


def test_recorded_events_by_reason_per_work(tmp_path: Path) -> None:
    log = tmp_path / "karmada-agent.log"
    log.write_text("\n".join(LINES) + "\n")
    agent = UpstreamAgent([])
    agent.process = _Process(log)  # type: ignore[assignment]
    assert agent.recorded_events(2) == {
        "total": 1.5,
        "ReflectStatusSucceed": 1.0,
        "SyncSucceed (template)": 0.5,
    }
