"""The official `kubernetes` Python client (blocking; run in threads) against the emulator."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config, dynamic, watch
from kubernetes.client.rest import ApiException

from emulator.emulator import Emulator

pytestmark = pytest.mark.asyncio(loop_scope="module")


def api_client(kubeconfig: Path) -> client.ApiClient:
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    return client.ApiClient(configuration)


async def test_typed_crud_errors_watch_and_server_side_apply(admin_kubeconfig: Path) -> None:
    api = await asyncio.to_thread(api_client, admin_kubeconfig)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = "pyclient"
    await asyncio.to_thread(
        core.create_namespace, client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
    )

    # ConfigMap CRUD through the typed API.
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={"a": "1"})
    created = await asyncio.to_thread(core.create_namespaced_config_map, ns, body)
    assert created.metadata.uid
    assert created.metadata.resource_version
    created.data["a"] = "2"
    replaced = await asyncio.to_thread(core.replace_namespaced_config_map, "cfg", ns, created)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = await asyncio.to_thread(
        core.patch_namespaced_config_map, "cfg", ns, {"data": {"b": "3"}}
    )
    assert patched.data == {"a": "2", "b": "3"}

    # 409 AlreadyExists and 409 Conflict (stale resourceVersion), 404 NotFound.
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(core.create_namespaced_config_map, ns, body)
    assert (exc.value.status, exc.value.reason) == (409, "Conflict")
    assert '"reason":"AlreadyExists"' in exc.value.body.replace(" ", "")
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(core.replace_namespaced_config_map, "cfg", ns, created)
    assert exc.value.status == 409
    assert "the object has been modified" in exc.value.body
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(core.read_namespaced_config_map, "missing", ns)
    assert (exc.value.status, exc.value.reason) == (404, "Not Found")
    assert 'configmaps \\"missing\\" not found' in exc.value.body

    # Deployment CRUD.
    dep = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
            ),
        ),
    )
    made = await asyncio.to_thread(apps.create_namespaced_deployment, ns, dep)
    assert made.spec.strategy.type == "RollingUpdate"  # server defaulting
    assert made.metadata.generation == 1
    scaled = await asyncio.to_thread(
        apps.patch_namespaced_deployment, "web", ns, {"spec": {"replicas": 3}}
    )
    assert (scaled.spec.replicas, scaled.metadata.generation) == (3, 2)

    # A watch with bookmarks: events from a resourceVersion, ended by timeoutSeconds.
    start = (await asyncio.to_thread(core.list_namespaced_config_map, ns)).metadata.resource_version
    await asyncio.to_thread(core.delete_namespaced_config_map, "cfg", ns)

    def stream() -> list[tuple[str, str]]:
        seen = []
        w = watch.Watch()
        for event in w.stream(
            core.list_namespaced_config_map, ns, resource_version=start,
            allow_watch_bookmarks=True, timeout_seconds=2,
        ):  # fmt: skip
            obj: Any = event["object"]
            seen.append((event["type"], obj.metadata.name if obj.metadata else ""))
            if event["type"] == "DELETED":
                w.stop()
        return seen

    events = await asyncio.to_thread(stream)
    assert ("DELETED", "cfg") in events
    assert all(kind in ("DELETED", "BOOKMARK") for kind, _ in events)

    # Server-side apply through the DynamicClient.
    dyn = await asyncio.to_thread(dynamic.DynamicClient, api)
    cms = await asyncio.to_thread(dyn.resources.get, api_version="v1", kind="ConfigMap")
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "applied", "namespace": ns},
        "data": {"k": "v"},
    }
    applied = await asyncio.to_thread(
        cms.server_side_apply, body=manifest, field_manager="pytest", namespace=ns
    )
    assert applied.data.k == "v"
    managers = [(m.manager, m.operation) for m in applied.metadata.managedFields]
    assert managers == [("pytest", "Apply")]
    manifest["data"] = {"k": "other"}
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(
            cms.server_side_apply, body=manifest, field_manager="intruder", namespace=ns
        )
    assert exc.value.status == 409
    assert 'conflict with \\"pytest\\"' in exc.value.body
    await asyncio.to_thread(api.close)


async def test_unauthenticated_is_401(emu: Emulator, tmp_path: Path) -> None:
    path = emu.write_kubeconfig(tmp_path / "kc", token="not-a-token")
    api = await asyncio.to_thread(api_client, path)
    with pytest.raises(ApiException) as exc:
        await asyncio.to_thread(client.CoreV1Api(api).list_namespace)
    assert (exc.value.status, exc.value.reason) == (401, "Unauthorized")
    await asyncio.to_thread(api.close)
