"""The Works that report member EndpointSlices are written against the Works cache: a late watch
event must not take that cache back behind our last write (the next report would be written
again, over a stale resourceVersion)."""

from __future__ import annotations

from typing import Any

from agent.controllers.slice_reporting import SliceReports
from agent.karmada import collected
from agent.kube.resources import NAMESPACES
from agent.resources import WORKS
from agent.sources.works import WorkInformer
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import EXEC_NS, HeldEvents, kube_client

JsonDict = dict[str, Any]


def endpoint_slice(*addresses: str) -> JsonDict:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abcde",
            "namespace": "default",
            "uid": "0b5c1f5e-5d0e-4c52-9d59-2f3b3a7e1c11",
            "labels": {collected.SERVICE_NAME_LABEL: "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address]} for address in addresses],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


async def test_a_late_event_of_an_older_report_costs_no_write() -> None:
    async with run_emulator("karmada", name="karmada") as cp:
        karmada = kube_client(cp)
        await karmada.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": EXEC_NS}}
        )
        works = WorkInformer(karmada, EXEC_NS)
        works.start()
        try:
            assert await works.wait_synced(5)
            reports = SliceReports(karmada, works, collected.SERVICE_EXPORT)
            await reports.report(endpoint_slice("10.0.0.1"))
            # The Works watch lags from here: two changes of the slice reported, their
            # events after the answers.
            held = HeldEvents(works.reflector, lambda _e: True)
            await reports.report(endpoint_slice("10.0.0.1", "10.0.0.2"))
            await reports.report(endpoint_slice("10.0.0.2"))
            await held.arrived(3)
            held.release(until=lambda _e: True)  # the creation's event
            held.release(until=lambda _e: True)  # the first change's: older than our last
            writes = cp.accounting.counts(verb="update", resource="works")
            await reports.report(endpoint_slice("10.0.0.2"))  # unchanged: nothing to write
            assert cp.accounting.counts(verb="update", resource="works") == writes
            held.release()
            name = collected.slice_work_name("default", "web-abcde")
            stored = await karmada.get(WORKS, name, namespace=EXEC_NS)
            cached = works.get(name)
            assert cached is not None
            assert cached["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        finally:
            await works.stop()
            await karmada.close()
