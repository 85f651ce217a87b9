"""Events carry the upstream controller that records them as their source and reporting
component (issue 24 item 5): after one Work, the execution controller's Events say
`execution-controller`, the status ones `work-status-controller`, as upstream's do; and the
execution controller's SyncSucceed is on the resource template too, in its namespace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.kube.resources import EVENTS
from agent.resources import WORKS
from emulator.works import control_plane_work, deployment

from .support import (
    client_for,
    cluster_ready,
    emulated_clusters,
    eventually,
    running_agent,
    work_applied,
)

JsonDict = dict[str, Any]
CLUSTER = "member1"
ES = f"karmada-es-{CLUSTER}"
EXPECTED = {
    "WorkDispatching": "execution-controller",
    "SyncSucceed": "execution-controller",
    "InterpretHealthSucceed": "work-status-controller",
}


async def test_events_name_the_upstream_controller(tmp_path: Path) -> None:
    async with emulated_clusters(tmp_path) as (_, _, karmada_kc, member_kc):
        admin = await client_for(karmada_kc)
        try:
            async with running_agent(karmada_kc, member_kc, CLUSTER):
                await eventually(lambda: cluster_ready(admin, CLUSTER), timeout=30, what="Ready")
                # A Deployment: its health is judged (a ConfigMap's is not, and gets no Event).
                work = control_plane_work(CLUSTER, "one", [deployment("one")])
                await admin.create(WORKS, work, namespace=ES)
                await eventually(lambda: work_applied(admin, CLUSTER, "one"), what="applied")

                async def sources() -> dict[str, tuple[str, str]]:
                    events = (await admin.list(EVENTS, namespace=ES))["items"]
                    found = {
                        e["reason"]: (e["source"].get("component"), e.get("reportingComponent"))
                        for e in events
                    }
                    assert set(EXPECTED) <= set(found), sorted(found)
                    return found

                found = await eventually(sources, what="the Work's Events")

                async def on_template() -> JsonDict:
                    # The Deployment's own Events, in its namespace on the control plane.
                    events = (await admin.list(EVENTS, namespace="default"))["items"]
                    about = [e for e in events if e["involvedObject"]["name"] == "one"]
                    assert len(about) == 1, about
                    return about[0]

                template = await eventually(on_template, what="the template's Event")
        finally:
            await admin.close()
    manifest = work["spec"]["workload"]["manifests"][0]
    assert template["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "namespace": "default",
        "name": "one",
        "uid": manifest["metadata"]["annotations"]["resourcetemplate.karmada.io/uid"],
    }
    assert (template["type"], template["reason"], template["message"]) == (
        "Normal",
        "SyncSucceed",
        f"Successfully applied resource(default/one) to cluster {CLUSTER}",
    )
    component = "execution-controller"
    assert (template["source"]["component"], template["reportingComponent"]) == (component,) * 2
    assert {reason: found[reason] for reason in EXPECTED} == {
        reason: (component, component) for reason, component in EXPECTED.items()
    }
