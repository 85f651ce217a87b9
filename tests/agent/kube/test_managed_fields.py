"""Taking over the fields another manager wrote with PUT (agent.kube.managed_fields), on its own
and through KubeClient.apply against the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from agent.kube.client import KubeClient
from agent.kube.config import load_kubeconfig
from agent.kube.managed_fields import take_over_patch, taken_over
from agent.kube.resources import CONFIGMAPS
from agent.kube.transport import Transport

# What the API server records for upstream's Go agent: its User-Agent's program name.
GO_AGENT_USER_AGENT = "karmada-agent/v1.19.0 (linux/amd64) kubernetes/f8fdd02"


def entry(manager: str, operation: str, fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        **extra,
    }


def test_update_entries_merge_into_the_apply_entry() -> None:
    obj = {
        "metadata": {
            "resourceVersion": "7",
            "managedFields": [
                entry("karmada-agent", "Update", {"f:data": {".": {}, "f:a": {}, "f:b": {}}}),
                entry("karmada-agent", "Apply", {"f:data": {"f:a": {}}}),
                entry("kubectl-edit", "Update", {"f:data": {"f:c": {}}}),
                entry("karmada-agent", "Update", {"f:status": {}}, subresource="status"),
            ],
        }
    }
    result = taken_over(obj, from_managers=("karmada-agent",), to_manager="karmada-agent")
    assert result is not None
    assert [(e["manager"], e["operation"], e.get("subresource")) for e in result] == [
        ("karmada-agent", "Apply", None),
        ("kubectl-edit", "Update", None),
        ("karmada-agent", "Update", "status"),
    ]
    assert result[0]["fieldsV1"] == {"f:data": {".": {}, "f:a": {}, "f:b": {}}}
    patch = take_over_patch(obj, from_managers=("karmada-agent",), to_manager="karmada-agent")
    assert patch == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "replace", "path": "/metadata/managedFields", "value": result},
    ]


def test_without_an_apply_entry_one_is_made_from_the_updates() -> None:
    obj = {
        "metadata": {
            "managedFields": [
                entry("karmada-agent", "Update", {"f:data": {"f:a": {}}}),
                entry("karmada-agent", "Update", {"f:metadata": {"f:labels": {"f:x": {}}}}),
            ]
        }
    }
    result = taken_over(obj, from_managers=("karmada-agent",), to_manager="mine")
    assert result == [
        {
            "manager": "mine",
            "operation": "Apply",
            "apiVersion": "v1",
            "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:x": {}}}},
        }
    ]


def test_nothing_to_take_over() -> None:
    applied = {"metadata": {"managedFields": [entry("karmada-agent", "Apply", {"f:data": {}})]}}
    assert taken_over(applied, from_managers=("karmada-agent",), to_manager="karmada-agent") is None
    assert taken_over({"metadata": {}}, from_managers=("x",), to_manager="y") is None


@pytest_asyncio.fixture
async def clients(emulator_kubeconfig: Path) -> AsyncIterator[tuple[KubeClient, KubeClient]]:
    """Ours, and one that identifies itself as upstream's Go agent does."""
    config = await load_kubeconfig(str(emulator_kubeconfig))
    ours = KubeClient(Transport(config))
    go_agent = KubeClient(Transport(config.with_user_agent(GO_AGENT_USER_AGENT)))
    yield ours, go_agent
    await ours.close()
    await go_agent.close()


def configmap(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "default"},
        "data": data,
    }


async def test_apply_removes_fields_an_upstream_put_wrote(
    clients: tuple[KubeClient, KubeClient],
) -> None:
    ours, go_agent = clients
    created = await go_agent.create(
        CONFIGMAPS, configmap({"keep": "1", "drop": "2"}), namespace="default"
    )
    assert [(e["manager"], e["operation"]) for e in created["metadata"]["managedFields"]] == [
        ("karmada-agent", "Update")
    ]

    async def apply() -> dict[str, Any]:
        return await ours.apply(
            CONFIGMAPS,
            configmap({"keep": "1"}),
            field_manager="karmada-agent",
            force=True,
            take_over_from=("karmada-agent",),
        )

    applied = await apply()
    assert applied["data"] == {"keep": "1"}
    assert [(e["manager"], e["operation"]) for e in applied["metadata"]["managedFields"]] == [
        ("karmada-agent", "Apply")
    ]
    # Taken over once: the next apply changes nothing.
    again = await apply()
    assert again["metadata"]["resourceVersion"] == applied["metadata"]["resourceVersion"]


async def test_without_taking_over_the_field_stays(
    clients: tuple[KubeClient, KubeClient],
) -> None:
    """Why: a field the PUT wrote is co-owned by the Update manager, and stays."""
    ours, go_agent = clients
    await go_agent.create(CONFIGMAPS, configmap({"keep": "1", "drop": "2"}), namespace="default")
    applied = await ours.apply(
        CONFIGMAPS, configmap({"keep": "1"}), field_manager="karmada-agent", force=True
    )
    assert applied["data"] == {"keep": "1", "drop": "2"}
