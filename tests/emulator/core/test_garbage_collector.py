"""The garbage collector as kube-controller-manager's: dangling ownerReferences, owners deleted
(background and foreground), and which propagation it deletes dependents with."""

from __future__ import annotations

import uuid
from typing import Any

from emulator.apiserver import ApiServer
from tests import polling

from .conftest import call, make_ns

CM = "/api/v1/namespaces/default/configmaps"
CLUSTERROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"


def ref(owner: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        **extra,
    }


def ghost() -> dict[str, Any]:
    """A reference to an owner that does not exist."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": "ghost", "uid": str(uuid.uuid4())}


async def gone(api: ApiServer, path: str) -> None:
    async def probe() -> bool:
        return (await call(api, "GET", path))[0] == 404

    await polling.eventually(probe, timeout=2.0, interval=0.005, what=f"{path} gone")


async def get(api: ApiServer, path: str) -> dict[str, Any]:
    code, body, _ = await call(api, "GET", path)
    assert code == 200, body
    return body  # type: ignore[no-any-return]


async def test_a_dependent_of_an_owner_that_does_not_exist_is_deleted(api: ApiServer) -> None:
    await make_ns(api, "default")
    code, _, _ = await call(
        api, "POST", CM, {"metadata": {"name": "d", "ownerReferences": [ghost()]}}
    )
    assert code == 201
    await gone(api, f"{CM}/d")


async def test_a_dangling_reference_is_dropped_while_another_owner_exists(api: ApiServer) -> None:
    await make_ns(api, "default")
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "o"}})
    body = {"metadata": {"name": "d", "ownerReferences": [ref(owner), ghost()]}}
    await call(api, "POST", CM, body)

    async def pruned() -> bool:
        refs = (await get(api, f"{CM}/d"))["metadata"].get("ownerReferences") or []
        return [r["uid"] for r in refs] == [owner["metadata"]["uid"]]

    await polling.eventually(pruned, timeout=2.0, interval=0.005, what="dangling ref dropped")


async def test_a_cluster_scoped_dependent_naming_a_namespaced_owner_is_left_alone(
    api: ApiServer,
) -> None:
    """kube's collector gives up on such a reference (it cannot be resolved) without deleting
    the dependent."""
    await make_ns(api, "default")
    role = {"metadata": {"name": "r", "ownerReferences": [ghost()]}, "rules": []}
    code, body, _ = await call(api, "POST", CLUSTERROLES, role)
    assert code == 201, body
    # A barrier: a dependent created after it is collected, so the collector has looked.
    await call(api, "POST", CM, {"metadata": {"name": "later", "ownerReferences": [ghost()]}})
    await gone(api, f"{CM}/later")
    assert (await call(api, "GET", f"{CLUSTERROLES}/r"))[0] == 200


async def test_dependents_of_a_deleted_owner_go_in_the_background(api: ApiServer) -> None:
    """Even a dependent that blocks its owner's deletion is deleted with propagation
    Background once the owner is gone (kube picks Foreground only for an owner waiting in the
    foreground and a dependent with dependents of its own)."""
    await make_ns(api, "default")
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "o"}})
    dependent = {
        "metadata": {
            "name": "d",
            "ownerReferences": [ref(owner, blockOwnerDeletion=True)],
            "finalizers": ["x.io/f"],
        }
    }
    await call(api, "POST", CM, dependent)
    await call(api, "DELETE", f"{CM}/o")

    async def deleting() -> bool:
        return bool((await get(api, f"{CM}/d"))["metadata"].get("deletionTimestamp"))

    await polling.eventually(deleting, timeout=2.0, interval=0.005, what="dependent deleted")
    assert (await get(api, f"{CM}/d"))["metadata"]["finalizers"] == ["x.io/f"]


async def test_foreground_deletion_deletes_a_leaf_dependent_in_the_background(
    api: ApiServer,
) -> None:
    await make_ns(api, "default")
    _, owner, _ = await call(api, "POST", CM, {"metadata": {"name": "o"}})
    leaf = {
        "metadata": {
            "name": "leaf",
            "ownerReferences": [ref(owner, blockOwnerDeletion=True)],
            "finalizers": ["x.io/f"],
        }
    }
    await call(api, "POST", CM, leaf)
    await call(api, "DELETE", f"{CM}/o?propagationPolicy=Foreground")

    async def deleting() -> bool:
        return bool((await get(api, f"{CM}/leaf"))["metadata"].get("deletionTimestamp"))

    await polling.eventually(deleting, timeout=2.0, interval=0.005, what="leaf deleted")
    assert (await get(api, f"{CM}/leaf"))["metadata"]["finalizers"] == ["x.io/f"]
    # The owner waits for its blocking dependent.
    assert (await call(api, "GET", f"{CM}/o"))[0] == 200
    await call(
        api,
        "PATCH",
        f"{CM}/leaf",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    await gone(api, f"{CM}/o")


async def test_foreground_deletion_goes_down_a_chain_in_the_foreground(api: ApiServer) -> None:
    """A dependent that has dependents of its own is deleted in the foreground when its owner
    waits for it: the chain goes bottom up."""
    await make_ns(api, "default")
    _, top, _ = await call(api, "POST", CM, {"metadata": {"name": "top"}})
    middle_body = {
        "metadata": {"name": "mid", "ownerReferences": [ref(top, blockOwnerDeletion=True)]}
    }
    _, middle, _ = await call(api, "POST", CM, middle_body)
    bottom = {
        "metadata": {
            "name": "bottom",
            "ownerReferences": [ref(middle, blockOwnerDeletion=True)],
            "finalizers": ["x.io/f"],
        }
    }
    await call(api, "POST", CM, bottom)
    await call(api, "DELETE", f"{CM}/top?propagationPolicy=Foreground")

    async def middle_waits() -> bool:
        meta = (await get(api, f"{CM}/mid"))["metadata"]
        return bool(meta.get("deletionTimestamp")) and "foregroundDeletion" in (
            meta.get("finalizers") or []
        )

    await polling.eventually(middle_waits, timeout=2.0, interval=0.005, what="middle waits")
    await call(
        api,
        "PATCH",
        f"{CM}/bottom",
        {"metadata": {"finalizers": None}},
        "application/merge-patch+json",
    )
    for name in ("bottom", "mid", "top"):
        await gone(api, f"{CM}/{name}")
