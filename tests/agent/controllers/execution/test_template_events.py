"""SyncSucceed / SyncFailed Events on the resource template (upstream's execution controller
records them beside the Work's): about the manifest's object with the template's uid, in the
template's namespace ("default" for a cluster-scoped kind); none for a manifest that names no
template uid, with a log line."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent.karmada import names
from agent.kube.resources import EVENTS
from tests.agent.controllers.harness import (
    APPLIED_FAILED,
    APPLIED_OK,
    CLUSTER,
    Pair,
    configmap,
    deployment,
    karmada_work,
    running_pair,
)

JsonDict = dict[str, Any]


async def events_about(pair: Pair, namespace: str, name: str) -> list[JsonDict]:
    assert await pair.ctx.events.flush(5.0)
    listed = (await pair.karmada.list(EVENTS, namespace=namespace))["items"]
    return [e for e in listed if e["involvedObject"].get("name") == name]


def template_uid(work: JsonDict, ordinal: int) -> str:
    manifest = work["spec"]["workload"]["manifests"][ordinal]
    return str(manifest["metadata"]["annotations"][names.RESOURCE_TEMPLATE_UID_ANNOTATION])


async def test_applied_manifests_get_sync_succeed_on_their_templates() -> None:
    team = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    async with running_pair("execution") as pair:
        work = karmada_work("web", [deployment("web"), team])
        await pair.create_work(work)
        await pair.wait_work("web", APPLIED_OK, "Applied=True")

        [event] = await events_about(pair, "default", "web")
        assert event["involvedObject"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": "default",
            "name": "web",
            "uid": template_uid(work, 0),
        }
        assert (event["type"], event["reason"], event["message"]) == (
            "Normal",
            names.EVENT_SYNC_SUCCEED,
            f"Successfully applied resource(default/web) to cluster {CLUSTER}",
        )

        # A cluster-scoped template: its Events live in "default", as client-go puts them.
        [event] = await events_about(pair, "default", "team-a")
        assert event["involvedObject"] == {
            "apiVersion": "v1",
            "kind": "Namespace",
            "name": "team-a",
            "uid": template_uid(work, 1),
        }
        assert event["message"] == f"Successfully applied resource(/team-a) to cluster {CLUSTER}"

        # The Work's own Events stay on the Work, in upstream's words.
        messages = {e["reason"]: e["message"] for e in await pair.events_for("web")}
        assert messages[names.EVENT_SYNC_SUCCEED] == (
            f"Sync work(karmada-es-{CLUSTER}/web) to cluster({CLUSTER}) successful."
        )


async def test_a_failed_manifest_gets_sync_failed_on_its_template() -> None:
    broken = deployment("broken")
    broken["spec"]["selector"] = {"matchLabels": {"app": "something-else"}}
    async with running_pair("execution") as pair:
        work = karmada_work("bad", [broken, configmap("fine")])
        await pair.create_work(work)
        await pair.wait_work("bad", APPLIED_FAILED, "Applied=False")

        [event] = await events_about(pair, "default", "broken")
        assert event["involvedObject"]["uid"] == template_uid(work, 0)
        assert (event["type"], event["reason"]) == ("Warning", names.EVENT_SYNC_FAILED)
        prefix = (
            f"Failed to create or update resource(default/broken) in member cluster({CLUSTER}): "
            "refused by the member cluster: 422 Invalid: "
        )
        assert event["message"].startswith(prefix), event["message"]
        [fine] = await events_about(pair, "default", "fine")
        assert fine["reason"] == names.EVENT_SYNC_SUCCEED
        messages = {e["reason"]: e["message"] for e in await pair.events_for("bad")}
        assert messages[names.EVENT_SYNC_FAILED].startswith(
            f"Failed to sync work(karmada-es-{CLUSTER}/bad) to cluster({CLUSTER}), "
            "err: manifest 0 (Deployment default/broken): refused by the member cluster: "
        )


async def test_a_manifest_without_template_uid_gets_no_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with running_pair("execution") as pair:
        work = karmada_work("plain", [configmap("plain"), configmap("marked")])
        del work["spec"]["workload"]["manifests"][0]["metadata"]["annotations"][
            names.RESOURCE_TEMPLATE_UID_ANNOTATION
        ]
        await pair.create_work(work)
        await pair.wait_work("plain", APPLIED_OK, "Applied=True")

        assert await events_about(pair, "default", "plain") == []
        assert len(await events_about(pair, "default", "marked")) == 1
        said = [r for r in caplog.records if "names no template uid" in r.getMessage()]
        assert said
        assert "manifest 0 (ConfigMap default/plain)" in str(
            getattr(said[0], "agent_log_fields", {}).get("manifest")
        )
