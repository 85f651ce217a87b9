"""`karmada-bootstrap unregister <cluster>`: undo `register`, as `karmadactl unregister` does.

1. delete the Works in karmada-es-<cluster> and wait until they are gone (the agent removes their
   finalizers after cleaning the member), 2. delete the Cluster and wait, 3. delete the agent's
   control-plane RBAC when an admin kubeconfig (--karmada-config) is given, else print it,
4. delete what register and the agent created on the member.

Without --karmada-config the control plane is reached with the agent's own credentials, read from
the Secret its Deployment mounts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

import yaml

from agent.karmada import names
from agent.kube.client import KubeClient
from agent.kube.config import ClientConfig, ConfigError
from agent.kube.errors import KubeError, NotFoundError
from agent.kube.resources import DEPLOYMENTS, SECRETS
from agent.resources import CLUSTERS, WORKS

from . import objects, render
from .kubeconfig import load_inline_config, load_user_config, open_client

Obj = dict[str, Any]


class UnregisterError(Exception):
    pass


@dataclass
class UnregisterOptions:
    cluster_name: str
    cluster_kubeconfig: str = ""
    cluster_context: str = ""
    karmada_config: str = ""
    karmada_context: str = ""
    namespace: str = names.DEFAULT_AGENT_NAMESPACE
    agent_name: str = render.AGENT_NAME
    cluster_namespace: str = names.DEFAULT_CLUSTER_NAMESPACE
    wait: float = 60.0
    dry_run: bool = False


def _say(message: str) -> None:
    print(f"[unregister] {message}", file=sys.stderr, flush=True)


def _ref(kind: str, name: str, namespace: str = "") -> Obj:
    api = {
        "Deployment": "apps/v1",
        "ClusterRole": "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding": "rbac.authorization.k8s.io/v1",
    }.get(kind, "v1")
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": api, "kind": kind, "metadata": meta}


def member_objects(o: UnregisterOptions) -> list[Obj]:
    """What register and the agent create on the member, in deletion order (as upstream)."""
    sa = names.credentials_service_account(o.cluster_name)
    role = names.controller_manager_role(o.cluster_name)
    return [
        _ref("ServiceAccount", sa, o.cluster_namespace),
        _ref("ClusterRole", role),
        _ref("ClusterRoleBinding", role),
        _ref("Secret", sa, o.cluster_namespace),
        _ref("ServiceAccount", names.IMPERSONATOR_SERVICE_ACCOUNT, o.cluster_namespace),
        _ref("Secret", names.IMPERSONATOR_SERVICE_ACCOUNT, o.cluster_namespace),
        _ref("Namespace", o.cluster_namespace),
        _ref("Deployment", o.agent_name, o.namespace),
        _ref("ServiceAccount", render.AGENT_SERVICE_ACCOUNT, o.namespace),
        _ref("ClusterRole", render.AGENT_NAME),
        _ref("ClusterRoleBinding", render.AGENT_NAME),
        _ref("Secret", names.AGENT_KUBECONFIG_SECRET, o.namespace),
    ]


def _flag(command: list[str], name: str) -> str:
    prefix = f"--{name}="
    value = ""
    for arg in command:
        if arg.startswith(prefix):
            value = arg[len(prefix) :]
    return value


async def agent_karmada_config(member: KubeClient, o: UnregisterOptions) -> ClientConfig:
    """The agent's own control-plane kubeconfig: --karmada-kubeconfig -> mount -> Secret."""
    try:
        deployment = await member.get(DEPLOYMENTS, o.agent_name, namespace=o.namespace)
    except NotFoundError:
        raise UnregisterError(
            f"Deployment {o.namespace}/{o.agent_name} not found on the member; give "
            "--karmada-config to reach the control plane"
        ) from None
    spec = deployment["spec"]["template"]["spec"]
    container = spec["containers"][0]
    command = [*container.get("command", []), *container.get("args", [])]
    path = _flag(command, "karmada-kubeconfig")
    directory, filename = posixpath.dirname(path), posixpath.basename(path)
    volume = next(
        (
            m["name"]
            for m in container.get("volumeMounts") or []
            if posixpath.normpath(m["mountPath"]) == directory
        ),
        "",
    )
    secret_name = next(
        (
            (v.get("secret") or {}).get("secretName", "")
            for v in spec.get("volumes") or []
            if v["name"] == volume
        ),
        "",
    )
    if not secret_name:
        raise UnregisterError("cannot find the Secret holding the agent's karmada kubeconfig")
    secret = await member.get(SECRETS, secret_name, namespace=o.namespace)
    raw = (secret.get("data") or {}).get(filename)
    if not raw:
        raise UnregisterError(f"Secret {o.namespace}/{secret_name} has no key {filename!r}")
    data = yaml.safe_load(base64.b64decode(raw))
    context = _flag(command, "karmada-context") or None
    return await load_inline_config(data, context)


async def _wait_gone(check: Callable[[], Any], deadline: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    delay = 0.1
    while True:
        if not await check():
            return
        if loop.time() + delay > deadline:
            raise UnregisterError(f"timed out waiting for {what} to be deleted (see --wait)")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def run(o: UnregisterOptions, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if not o.cluster_kubeconfig:
        raise UnregisterError(
            "--cluster-kubeconfig is required (the member cluster's kubeconfig file)"
        )
    if o.wait <= 0:
        raise UnregisterError("--wait must be a positive duration, e.g. 1m0s")
    try:
        member_config = await load_user_config(o.cluster_kubeconfig, o.cluster_context)
    except ConfigError as exc:
        raise UnregisterError(f"cannot load the member's kubeconfig: {exc}") from None
    control_plane_rbac = await render.render_control_plane(
        o.cluster_name, o.cluster_namespace, o.namespace
    )
    rbac_objects = [obj for obj in control_plane_rbac if obj["kind"] != "Namespace"]
    async with open_client(member_config) as member:
        if o.karmada_config:
            try:
                karmada_config = await load_user_config(o.karmada_config, o.karmada_context)
            except ConfigError as exc:
                raise UnregisterError(f"cannot load --karmada-config: {exc}") from None
        else:
            karmada_config = await agent_karmada_config(member, o)
        if o.dry_run:
            _print_plan(o, rbac_objects, out)
            return
        async with open_client(karmada_config) as karmada:
            await _unregister_control_plane(karmada, o, rbac_objects)
        for obj in member_objects(o):
            if await objects.delete(member, obj):
                _say(f"deleted {objects.describe(obj)} on the member")
    print(f"cluster({o.cluster_name}) is unregistered successfully", file=out)


async def _unregister_control_plane(
    karmada: KubeClient, o: UnregisterOptions, rbac_objects: list[Obj]
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + o.wait
    try:
        cluster = await karmada.get(CLUSTERS, o.cluster_name)
    except NotFoundError:
        cluster = None
    if cluster is not None and (cluster.get("spec") or {}).get("syncMode") == "Push":
        raise UnregisterError(
            f"Cluster {o.cluster_name} is in Push mode; use `karmadactl unjoin` for it"
        )
    es = names.execution_namespace(o.cluster_name)
    works = await karmada.list(WORKS, namespace=es)
    for work in works.get("items") or []:
        with contextlib.suppress(NotFoundError):
            await karmada.delete(WORKS, work["metadata"]["name"], namespace=es)

    async def works_left() -> bool:
        return bool((await karmada.list(WORKS, namespace=es)).get("items"))

    await _wait_gone(works_left, deadline, f"the Works in {es}")
    if cluster is not None:
        with contextlib.suppress(NotFoundError):
            await karmada.delete(CLUSTERS, o.cluster_name)

        async def cluster_left() -> bool:
            try:
                await karmada.get(CLUSTERS, o.cluster_name)
            except NotFoundError:
                return False
            return True

        await _wait_gone(cluster_left, deadline, f"Cluster {o.cluster_name}")
        _say(f"deleted Cluster {o.cluster_name} from the control plane")
    if o.karmada_config:
        for obj in rbac_objects:
            try:
                await objects.delete(karmada, obj)
            except KubeError as exc:
                raise UnregisterError(f"cannot delete {objects.describe(obj)}: {exc}") from None
        _say("deleted the agent's RBAC from the control plane")
    else:
        _say(
            "the agent's RBAC on the control plane must be removed by its administrator: "
            + ", ".join(objects.describe(obj) for obj in rbac_objects)
        )


def _print_plan(o: UnregisterOptions, rbac_objects: list[Obj], out: TextIO) -> None:
    es = names.execution_namespace(o.cluster_name)
    print(
        f"# would delete on the Karmada control plane: every Work in {es}, Cluster {o.cluster_name}",
        file=out,
    )
    if o.karmada_config:
        for obj in rbac_objects:
            print(f"#   {objects.describe(obj)}", file=out)
    print("# would delete on the member:", file=out)
    for obj in member_objects(o):
        print(f"#   {objects.describe(obj)}", file=out)
