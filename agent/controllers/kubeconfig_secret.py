"""Where the agent's control-plane kubeconfig is kept on the member, for certRotation to write a
rotated certificate back: the Secret and the key the mounted --karmada-kubeconfig file comes from.

Install layouts differ: `karmadactl register` (and ours) mount Secret `karmada-kubeconfig` with
key `karmada-kubeconfig`; Karmada's Helm chart mounts `<release>-kubeconfig` with key `kubeconfig`
in the release's namespace. In order:

1. `--karmada-kubeconfig-secret` / `--karmada-kubeconfig-secret-key` (each overrides what is
   found; the namespace is --karmada-kubeconfig-namespace);
2. the agent's own Pod (POD_NAME or HOSTNAME, POD_NAMESPACE or the service account's namespace
   file): the Secret volume mounted where --karmada-kubeconfig points, and the key the file is
   (through the volume's `items` when it maps keys to paths); the Pod's namespace;
3. register's layout: `<--karmada-kubeconfig-namespace>/karmada-kubeconfig`, key
   `karmada-kubeconfig`.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.karmada.names import AGENT_KUBECONFIG_KEY, AGENT_KUBECONFIG_SECRET
from agent.kube.client import KubeClient
from agent.kube.errors import ForbiddenError, KubeError, NotFoundError
from agent.kube.resources import PODS
from agent.logs import get_logger
from agent.options import Options

log = get_logger(__name__)

JsonDict = dict[str, Any]
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass(frozen=True)
class SecretLocation:
    namespace: str
    name: str
    key: str
    # How it was found, for log lines: "flags", "the Pod's volume <v>", "register's layout".
    found_by: str
    # False when the Pod could not be read for a reason that may pass: ask again next time.
    settled: bool = True

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} (key {self.key})"


def mounted_secret(pod: JsonDict, path: str) -> tuple[str, str, str] | None:
    """(Secret name, key, volume name) of the Secret volume that provides the file at `path` in
    any container of `pod`, or None. The mount whose path is the longest prefix wins."""
    volumes = {
        str(v.get("name")): v.get("secret")
        for v in (pod.get("spec") or {}).get("volumes") or ()
        if isinstance(v, dict)
    }
    path = posixpath.normpath(path)
    best: tuple[int, str, str, str] | None = None
    for container in (pod.get("spec") or {}).get("containers") or ():
        for mount in container.get("volumeMounts") or ():
            secret = volumes.get(str(mount.get("name")))
            if not isinstance(secret, dict) or not secret.get("secretName"):
                continue
            mount_path = posixpath.normpath(str(mount.get("mountPath") or ""))
            sub_path = str(mount.get("subPath") or "")
            if sub_path and path == mount_path:
                relative = sub_path
            elif not sub_path and path.startswith(mount_path.rstrip("/") + "/"):
                relative = path[len(mount_path.rstrip("/")) + 1 :]
            else:
                continue
            key = relative
            items = secret.get("items")
            if isinstance(items, list) and items:
                mapped = [i for i in items if isinstance(i, dict) and i.get("path") == relative]
                if not mapped:
                    continue
                key = str(mapped[0].get("key"))
            if best is None or len(mount_path) > best[0]:
                best = (len(mount_path), str(secret["secretName"]), key, str(mount.get("name")))
    return None if best is None else best[1:]


def _pod_identity(environ: Mapping[str, str], namespace_file: Path) -> tuple[str, str] | None:
    name = environ.get("POD_NAME") or environ.get("HOSTNAME") or ""
    namespace = environ.get("POD_NAMESPACE") or ""
    if not namespace:
        try:
            namespace = namespace_file.read_text().strip()
        except OSError:
            return None
    return (namespace, name) if name and namespace else None


async def find_kubeconfig_secret(
    member: KubeClient,
    options: Options,
    *,
    environ: Mapping[str, str] = os.environ,
    namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE,
) -> SecretLocation:
    """The Secret (and key) holding the agent's Karmada kubeconfig, as the module says."""
    found = SecretLocation(
        options.karmada_kubeconfig_namespace,
        AGENT_KUBECONFIG_SECRET,
        AGENT_KUBECONFIG_KEY,
        "register's layout",
    )
    identity = _pod_identity(environ, namespace_file)
    if (
        identity is not None
        and options.karmada_kubeconfig
        and not options.karmada_kubeconfig_secret
    ):
        namespace, pod_name = identity
        try:
            pod = await member.get(PODS, pod_name, namespace=namespace)
        except KubeError as exc:
            found = replace(found, settled=isinstance(exc, ForbiddenError | NotFoundError))
            log.info(
                "cannot read the agent's Pod %s/%s to find the Secret its kubeconfig is mounted "
                "from (%s); assuming %s",
                namespace,
                pod_name,
                exc,
                found,
            )
        else:
            mounted = mounted_secret(pod, options.karmada_kubeconfig)
            if mounted is not None:
                name, key, volume = mounted
                found = SecretLocation(namespace, name, key, f"the Pod's volume {volume}")
    if options.karmada_kubeconfig_secret:
        found = replace(
            found,
            namespace=options.karmada_kubeconfig_namespace,
            name=options.karmada_kubeconfig_secret,
            found_by="flags",
        )
    if options.karmada_kubeconfig_secret_key:
        found = replace(found, key=options.karmada_kubeconfig_secret_key, found_by="flags")
    return found
