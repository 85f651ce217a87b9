"""Run the agent container of a Deployment as a local process that sees what a kubelet gives it.

Install paths users take (`karmadactl register`, Karmada's Helm chart) create a Deployment on
the member; the emulated member runs its Pod (the workload simulator: name, IP, Ready). This
starts that Pod's container as a local process, unchanged:

- the command and args exactly as the Pod has them, `$(VAR)` expanded from the container's
  env as the kubelet does, the image's /bin/karmada-agent being this checkout's agent
  (`python -m agent`; `make image-check` holds that the image provides that path);
- env from the container (`value`, and `valueFrom.fieldRef` of the Pod: status.podIP,
  metadata.name, metadata.namespace), HOSTNAME the Pod's name, KUBERNETES_SERVICE_HOST/PORT
  the member's API server;
- a Pod IP the process can bind: the sandbox's Pod network is the host's loopback, so the
  Pod's status reports a 127.x.y.z address, as a kubelet reports the IP its network gave;
- every Secret volume at its mountPath (its `items` and defaultMode honoured), and the Pod's
  ServiceAccount token, the member's CA and the namespace at
  /var/run/secrets/kubernetes.io/serviceaccount, as the ServiceAccount admission plugin and
  the kubelet provide them.

The files are placed in a private mount namespace (`unshare --mount`): overlays on the
top-level directories they fall in (/etc, /run), so nothing is written to the host and
parallel sandboxes do not see each other. That needs root (CAP_SYS_ADMIN): without it the
tests skip with the reason. The process shares the host's network, so the Pod's ports are
the host's.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.kube.client import KubeClient
from agent.kube.errors import NotFoundError
from agent.kube.resources import CONFIGMAPS, DEPLOYMENTS, PODS, SECRETS
from agent.resources import WORKS
from emulator.emulator import Emulator
from emulator.works import configmap, control_plane_work

from .support import REPO, cluster_ready, eventually, service_account_token, work_applied

JSON = dict[str, Any]
IMAGE_ENTRYPOINT = "/bin/karmada-agent"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@functools.cache
def sandbox_missing_reason() -> str | None:
    """Why a private mount namespace cannot be made here, or None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return "no unshare (util-linux) to give the agent's Pod its files in a mount namespace"
    scratch = tempfile.mkdtemp(prefix="pod-sandbox-probe-")
    try:
        done = subprocess.run(
            [unshare, "--mount", "--propagation", "private", "sh", "-ec",
             f"mount -t tmpfs tmpfs {shlex.quote(scratch)}"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    finally:
        os.rmdir(scratch)
    if done.returncode != 0:
        return (
            "cannot make a private mount namespace (unshare --mount needs root with "
            f"CAP_SYS_ADMIN): {done.stderr.strip()}"
        )
    return None


def expand(text: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion: defined names replaced, `$$` an escaped `$`, undefined
    references left as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _VAR_REF.sub(replace, text)


def _field(pod: JSON, path: str) -> str:
    value: Any = pod
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def container_env(pod: JSON, container: JSON) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in container.get("env") or ():
        if "value" in item:
            env[item["name"]] = expand(str(item["value"]), env)
            continue
        field = ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if not field:
            raise AssertionError(f"env {item['name']}: only value and fieldRef are emulated")
        env[item["name"]] = _field(pod, field)
    return env


class PodProcess:
    """A Pod's container started as a local process (see the module docstring)."""

    def __init__(self, pod: JSON, container: JSON, files: dict[str, tuple[bytes, int]],
                 env: dict[str, str], workdir: Path) -> None:  # fmt: skip
        self.pod = pod
        self.container = container
        self.files = files
        self.env = env
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "agent.log"
        self.process: asyncio.subprocess.Process | None = None
        self.argv = self._argv()

    def _argv(self) -> list[str]:
        command = [*(self.container.get("command") or ()), *(self.container.get("args") or ())]
        command = [expand(str(part), self.env) for part in command]
        if not command or command[0] != IMAGE_ENTRYPOINT:
            raise AssertionError(f"the container starts {command[:1]}, not {IMAGE_ENTRYPOINT}")
        return [sys.executable, "-m", "agent", *command[1:]]

    def _script(self) -> str:
        scratch = self.workdir / "scratch"
        staged = self.workdir / "staged"
        scratch.mkdir()
        staged.mkdir()
        lines = [f"mount -t tmpfs tmpfs {shlex.quote(str(scratch))}"]
        resolved = {os.path.realpath(path): content for path, content in self.files.items()}
        tops = sorted({"/" + path.strip("/").split("/")[0] for path in resolved})
        for index, top in enumerate(tops):
            upper, work = scratch / f"upper{index}", scratch / f"work{index}"
            lines.append(f"mkdir {shlex.quote(str(upper))} {shlex.quote(str(work))}")
            options = f"lowerdir={top},upperdir={upper},workdir={work}"
            lines.append(f"mount -t overlay overlay -o {shlex.quote(options)} {shlex.quote(top)}")
        for index, (path, (data, mode)) in enumerate(sorted(resolved.items())):
            source = staged / str(index)
            source.touch(mode=0o600)  # Secret data: readable by this user only until placed
            source.write_bytes(data)
            lines.append(f"mkdir -p {shlex.quote(os.path.dirname(path))}")
            lines.append(f"cp {shlex.quote(str(source))} {shlex.quote(path)}")
            lines.append(f"chmod {mode:o} {shlex.quote(path)}")
        lines.append(f"rm -rf {shlex.quote(str(staged))}")
        environment = [f"{key}={value}" for key, value in self.env.items()]
        lines.append(shlex.join(["exec", "env", "-i", *environment, *self.argv]))
        return "\n".join(lines)

    async def start(self) -> PodProcess:
        script = self._script()
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                "unshare", "--mount", "--propagation", "private", "sh", "-ec", script,
                cwd=REPO, stdout=log, stderr=log,
            )  # fmt: skip
        return self

    def log(self, tail: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:]

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode

    async def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM, as the kubelet stops a container; SIGKILL after `grace`."""
        process = self.process
        if process is None:
            return None
        if process.returncode is None:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), grace)
            except TimeoutError:
                process.kill()
                await process.wait()
        return process.returncode


async def deployment_pod(member: KubeClient, namespace: str, name: str) -> JSON:
    """The running Pod of Deployment `name` (the emulated member's ReplicaSet made it)."""
    deployment = await member.get(DEPLOYMENTS, name, namespace=namespace)
    selector = deployment["spec"]["selector"]["matchLabels"]
    label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))

    async def running() -> JSON | None:
        pods = await member.list(PODS, namespace=namespace, label_selector=label_selector)
        for pod in pods.get("items") or ():
            if (pod.get("status") or {}).get("phase") == "Running":
                return dict(pod)
        return None

    pod: JSON = await eventually(running, timeout=30, what=f"a running Pod of {name}")
    return pod


async def _loopback_pod_ip(member: KubeClient, pod: JSON) -> JSON:
    address = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(1, 254)}"
    status = {"podIP": address, "podIPs": [{"ip": address}]}
    patched: JSON = await member.patch(
        PODS, pod["metadata"]["name"], {"status": status},
        namespace=pod["metadata"]["namespace"], subresource="status",
    )  # fmt: skip
    return patched


async def secret_volume_files(
    member: KubeClient, pod: JSON, container: JSON
) -> dict[str, tuple[bytes, int]]:
    """Container path -> (content, mode) of every Secret volume the container mounts."""
    namespace = pod["metadata"]["namespace"]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or ()}
    files: dict[str, tuple[bytes, int]] = {}
    for mount in container.get("volumeMounts") or ():
        volume = volumes[mount["name"]]
        source = volume.get("secret")
        if source is None:
            raise AssertionError(f"volume {mount['name']}: only Secret volumes are emulated")
        try:
            secret = await member.get(SECRETS, source["secretName"], namespace=namespace)
        except NotFoundError as exc:
            raise AssertionError(f"the Pod mounts Secret {source['secretName']}, missing") from exc
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        mode = int(source.get("defaultMode", 0o644))
        items = source.get("items")
        paths = (
            [(item["key"], item["path"], int(item.get("mode", mode))) for item in items]
            if items
            else [(key, key, mode) for key in data]
        )
        base = mount["mountPath"].rstrip("/")
        sub = mount.get("subPath")
        for key, path, file_mode in paths:
            if sub:
                if path == sub:
                    files[base] = (data[key], file_mode)
                continue
            files[f"{base}/{path}"] = (data[key], file_mode)
    return files


async def start_pod_container(
    member_emulator: Emulator,
    member_admin_kubeconfig: Path,
    member: KubeClient,
    namespace: str,
    deployment: str,
    workdir: Path,
    container_name: str = "karmada-agent",
) -> PodProcess:
    """Start the container of the running Pod of `deployment` (see the module docstring)."""
    pod = await deployment_pod(member, namespace, deployment)
    pod = await _loopback_pod_ip(member, pod)
    container = next(c for c in pod["spec"]["containers"] if c["name"] == container_name)
    files = await secret_volume_files(member, pod, container)
    if pod["spec"].get("automountServiceAccountToken", True):
        account = pod["spec"].get("serviceAccountName") or "default"
        token = await service_account_token(member_admin_kubeconfig, namespace, account)
        files[f"{SERVICE_ACCOUNT_DIR}/token"] = (token.encode(), 0o644)
        files[f"{SERVICE_ACCOUNT_DIR}/ca.crt"] = (member_emulator.ca_pem, 0o644)
        files[f"{SERVICE_ACCOUNT_DIR}/namespace"] = (namespace.encode(), 0o644)
    env = {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOSTNAME": pod["metadata"]["name"],
        "KUBERNETES_SERVICE_HOST": str(urlsplit(member_emulator.url).hostname),
        "KUBERNETES_SERVICE_PORT": str(urlsplit(member_emulator.url).port),
        **container_env(pod, container),
    }
    return await PodProcess(pod, container, files, env, workdir).start()


async def joins_and_applies(
    agent: PodProcess, karmada: KubeClient, member: KubeClient, cluster: str, work: str, name: str
) -> None:
    """The agent in the Pod makes `cluster` Ready (failing at once should it exit), then applies
    the Work `work` carrying the ConfigMap `name` ({"k": `name`}) to the member's default."""

    async def ready() -> bool:
        assert agent.returncode is None, f"the agent exited:\n{agent.log()}"
        return await cluster_ready(karmada, cluster)

    await eventually(ready, timeout=60, what=f"Cluster {cluster} Ready")
    await karmada.create(
        WORKS,
        control_plane_work(cluster, work, [configmap(name)]),
        namespace=f"karmada-es-{cluster}",
    )
    await eventually(
        lambda: work_applied(karmada, cluster, work), timeout=30, what="the Work applied"
    )
    assert (await member.get(CONFIGMAPS, name, namespace="default"))["data"] == {"k": name}
