"""The member kinds the Works name: their watches follow the Works cache, started outside any
reconcile, a kind the member serves only once a CRD is applied included."""

from __future__ import annotations

from typing import Any

import structlog

from agent.kube.client import GVR
from agent.kube.resources import CONFIGMAPS, NAMESPACES
from tests.agent.controllers.harness import (
    APPLIED_OK,
    configmap,
    crd,
    eventually,
    karmada_work,
    running_pair,
)

WIDGETS = GVR("example.io", "v1", "widgets")
CRDS = GVR("apiextensions.k8s.io", "v1", "customresourcedefinitions")


async def test_the_kinds_works_name_are_watched_and_never_from_a_reconcile() -> None:
    widget = {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "team-a"},
    }
    team_ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    work = karmada_work("widgets", [widget, configmap("cfg", "team-a"), crd(), team_ns])
    async with running_pair("execution", "workStatus") as pair:
        objects = pair.ctx.sources.member_objects
        started_in: list[Any] = []
        ensure = objects.ensure

        def recording_ensure(gvr: GVR, kind: str = "") -> None:
            # The reconcile id bound in the context, if a reconcile started the watch.
            started_in.append(structlog.contextvars.get_contextvars().get("reconcile_id"))
            ensure(gvr, kind)

        objects.ensure = recording_ensure  # type: ignore[method-assign]
        await pair.create_work(work)
        await pair.wait_work("widgets", APPLIED_OK, "Applied=True")
        # Widgets were not served when the Work came: their watch starts once the CRD is.
        await eventually(
            lambda: set(objects.watched), lambda w: WIDGETS in w, what="widgets watched"
        )
        assert {CONFIGMAPS, NAMESPACES, CRDS, WIDGETS} <= set(objects.watched)
        kinds = objects.kinds_named_by(pair.ctx.sources.works, pair.ctx.member_mapper)
        assert kinds.pending == set()
        assert started_in
        assert set(started_in) == {None}
