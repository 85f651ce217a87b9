"""pods/exec, pods/attach and pods/portforward on the member emulator, held to the real kubectl
over both wires it speaks: WebSocket (kubectl's default since 1.30/1.31) and SPDY/3.1 (what it
falls back to, and what `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` /
`KUBECTL_PORT_FORWARD_WEBSOCKETS=false` force)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from emulator.controllers import Knobs
from emulator.emulator import Emulator, run_emulator
from emulator.kubelet.ports import pattern
from emulator.kubelet.spdy import DICTIONARY
from tests import polling
from tests.kubectl_streams import (
    FORWARDING,
    WIRES,
    forwarded,
    kubectl_on_terminal,
    kubectl_result,
)

PODS = "/api/v1/namespaces/default/pods"


@pytest_asyncio.fixture
async def member() -> AsyncIterator[Emulator]:
    async with run_emulator(
        "member", name="streams", knobs=Knobs(workload_ready_delay=0.05)
    ) as emu:
        yield emu


@pytest.fixture(params=sorted(WIRES))
def wire(request: pytest.FixtureRequest) -> dict[str, str]:
    return dict(WIRES[request.param])


async def running(emu: Emulator, name: str, **container: Any) -> dict[str, Any]:
    spec = {"name": "app", "image": "busybox", **container}
    async with emu.client() as client:
        body = {"metadata": {"name": name}, "spec": {"containers": [spec]}}
        (await client.post(PODS, json=body)).raise_for_status()
        found = await polling.eventually(
            lambda: client.get(f"{PODS}/{name}"),
            until=lambda r: r.json().get("status", {}).get("phase") == "Running",
            what=f"pod {name} running",
        )
    return dict(found.json())


def test_the_spdy_header_dictionary_is_the_protocol_one() -> None:
    assert len(DICTIONARY) == 1423
    digest = "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"
    assert hashlib.sha256(DICTIONARY).hexdigest() == digest


async def test_exec_carries_output_and_exit_code(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    command = ("exec", "web", "--", "sh", "-c", "echo ok; echo oops >&2; exit 3")
    code, out, err = await kubectl_result(config, *command, env=wire)
    assert (code, out) == (3, "ok\n")
    assert "oops\n" in err
    assert "command terminated with exit code 3" in err
    assert await kubectl_result(config, "exec", "web", "--", "true", env=wire) == (0, "", "")


async def test_exec_runs_in_the_containers_own_directory(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    """What one exec writes, the next finds: the container's scratch directory persists."""
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web", env=[{"name": "GREETING", "value": "hello"}])
    write = ("exec", "web", "--", "sh", "-c", 'echo "$GREETING $HOSTNAME" > note')
    assert (await kubectl_result(config, *write, env=wire))[0] == 0
    assert await kubectl_result(config, "exec", "web", "--", "cat", "note", env=wire) == (
        0,
        "hello web\n",
        "",
    )


async def test_exec_stdin_reaches_the_command_and_ends_it(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    text = b"".join(b"line %d\n" % n for n in range(20000))
    code, out, _ = await kubectl_result(
        config, "exec", "-i", "web", "--", "sh", "-c", "wc -c; exit 7", env=wire, stdin=text
    )
    assert (code, out.strip()) == (7, str(len(text)))


async def test_exec_with_a_terminal_sees_its_size_and_exit_code(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    # The size arrives on the resize channel as the command starts: wait for it, as a shell
    # would see its SIGWINCH.
    script = "until [ \"$(stty size)\" = '33 111' ]; do :; done; tty; stty size; exit 4"
    code, output = await kubectl_on_terminal(
        config, "exec", "-it", "web", "--", "sh", "-c", script, env=wire, size=(111, 33)
    )
    assert code == 4, output
    lines = output.decode().split("\r\n")
    assert re.fullmatch(r"/dev/pts/\d+", lines[0]), output
    assert lines[1] == "33 111"
    assert "command terminated with exit code 4" in lines[2]


async def test_a_command_that_does_not_exist_is_the_runtimes_127(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    code, _, err = await kubectl_result(config, "exec", "web", "--", "no-such-command", env=wire)
    assert code == 127
    assert 'exec: "no-such-command": executable file not found in $PATH' in err
    assert (await kubectl_result(config, "exec", "web", "--", "sh", "-c", "echo > data", env=wire))[
        0
    ] == 0
    code, _, err = await kubectl_result(config, "exec", "web", "--", "./data", env=wire)
    assert code == 126
    assert 'exec: "./data": permission denied' in err


async def test_bad_exec_requests_get_kube_apiservers_answers(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    code, _, err = await kubectl_result(config, "exec", "web", "-c", "nope", "--", "true", env=wire)
    assert code == 1
    assert "Error from server (BadRequest): container nope is not valid for pod web" in err
    code, _, err = await kubectl_result(config, "exec", "ghost", "--", "true", env=wire)
    assert code == 1
    assert 'Error from server (NotFound): pods "ghost" not found' in err
    # A container that is not running: the kubelet has no such container to exec in.
    async with member.client() as client:
        pod = (await client.get(f"{PODS}/web")).json()
        pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
        (await client.put(f"{PODS}/web/status", json=pod)).raise_for_status()
    code, _, err = await kubectl_result(config, "exec", "web", "--", "true", env=wire)
    assert code == 1
    assert 'unable to upgrade connection: container not found ("app")' in err


async def test_exec_is_authorized_by_the_members_rbac(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    await running(member, "web")
    config = member.write_kubeconfig(tmp_path / "viewer", user="viewer")
    async with member.client() as client:
        role = {
            "metadata": {"name": "pod-reader", "namespace": "default"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }
        binding = {
            "metadata": {"name": "viewer", "namespace": "default"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "pod-reader",
            },
            "subjects": [
                {"kind": "User", "name": "viewer", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        }
        rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/default"
        (await client.post(f"{rbac}/roles", json=role)).raise_for_status()
        (await client.post(f"{rbac}/rolebindings", json=binding)).raise_for_status()
    code, _, err = await kubectl_result(config, "exec", "web", "--", "true", env=wire)
    assert code == 1
    assert 'User "viewer" cannot' in err
    assert 'resource "pods/exec" in API group "" in the namespace "default"' in err


async def test_attach_joins_the_containers_main_process(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "shell", command=["sh"], stdin=True, stdinOnce=True)
    typed = b"echo attached; echo to-stderr >&2; exit 0\n"
    code, out, err = await kubectl_result(config, "attach", "-i", "shell", env=wire, stdin=typed)
    assert (code, out) == (0, "attached\n")
    assert "to-stderr" in err


async def test_port_forward_reaches_the_pods_port_and_carries_bodies_intact(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web", ports=[{"containerPort": 8080}])
    size = 50 * 1024 * 1024
    expected = hashlib.sha256()
    for chunk in pattern(size):
        expected.update(chunk)
    upload = os.urandom(8 * 1024 * 1024)
    async with (
        forwarded(config, "pod/web", ":8080", env=wire) as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http,
    ):
        hello = await http.get("/")
        assert hello.text == "pod default/web container app port 8080\n"
        received = hashlib.sha256()
        async with http.stream("GET", f"/bytes/{size}") as response:
            async for chunk in response.aiter_bytes():
                received.update(chunk)
        assert received.hexdigest() == expected.hexdigest()
        echoed = await http.post("/echo", content=upload)
        assert echoed.content == upload


async def test_port_forward_to_a_port_nothing_listens_on_fails_as_the_kubelet_says(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web", ports=[{"containerPort": 8080}])
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "port-forward", "--address=127.0.0.1",
        "pod/web", ":9999", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **wire},
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stderr is not None
    found = FORWARDING.search(await asyncio.wait_for(process.stdout.readline(), 30))
    assert found is not None
    with pytest.raises(httpx.TransportError):
        async with httpx.AsyncClient(timeout=30) as http:
            await http.get(f"http://127.0.0.1:{int(found.group(1))}/")
    err = (await asyncio.wait_for(process.stderr.read(), 30)).decode()
    assert await process.wait() == 1
    assert "error forwarding port 9999 to pod" in err
    assert "connect: connection refused" in err


async def test_discovery_lists_the_connect_subresources(member: Emulator) -> None:
    async with member.client() as client:
        resources = (await client.get("/api/v1")).json()["resources"]
    found = {r["name"]: r for r in resources if r["name"].startswith("pods/")}
    for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"),
                      ("portforward", "PodPortForwardOptions")):  # fmt: skip
        assert found[f"pods/{sub}"]["kind"] == kind
        assert found[f"pods/{sub}"]["verbs"] == ["create", "get"]


async def test_a_client_that_goes_away_ends_its_command(
    member: Emulator, tmp_path: Path, wire: dict[str, str]
) -> None:
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "web")
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "exec", "web", "--",
        "sh", "-c", "echo $$; exec sleep 300",
        stdout=asyncio.subprocess.PIPE, env={**os.environ, **wire},
    )  # fmt: skip
    assert process.stdout is not None
    pid = int(await asyncio.wait_for(process.stdout.readline(), 30))
    os.kill(pid, 0)  # running
    process.kill()
    await process.wait()

    def ended() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    await polling.eventually(ended, what=f"the command (pid {pid}) ended")


async def test_a_deleted_pods_containers_are_released(member: Emulator, tmp_path: Path) -> None:
    """Its directory, its console and its port servers go (at the next kubelet request)."""
    config = member.write_kubeconfig(tmp_path / "admin")
    await running(member, "gone", ports=[{"containerPort": 8080}], command=["sh"], stdin=True)
    await running(member, "stays")
    code, out, _ = await kubectl_result(config, "exec", "gone", "--", "pwd")
    assert code == 0
    directory = out.strip()
    async with (
        forwarded(config, "pod/gone", ":8080", env={}) as port,
        httpx.AsyncClient() as http,
    ):
        assert (await http.get(f"http://127.0.0.1:{port}/")).status_code == 200
    attach = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(config), "attach", "gone",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    handler = member.api.subresource_handlers[("", "pods", "exec")]
    kubelet = handler.owner  # type: ignore[attr-defined]
    await polling.eventually(lambda: kubelet.consoles.uids(), what="the console started")
    assert _exists(directory)
    assert kubelet.ports.uids()
    async with member.client() as client:
        (await client.delete(f"{PODS}/gone")).raise_for_status()
    await polling.eventually(lambda: client_gone(member, "gone"), what="the pod deleted")
    assert (await kubectl_result(config, "exec", "stays", "--", "true"))[0] == 0
    assert not _exists(directory)
    assert kubelet.ports.uids() == set()
    assert kubelet.consoles.uids() == set()
    # The attach ends with the console it was joined to.
    await asyncio.wait_for(attach.wait(), 30)


def _exists(path: str) -> bool:
    return os.path.exists(path)


async def client_gone(member: Emulator, name: str) -> bool:
    async with member.client() as client:
        return (await client.get(f"{PODS}/{name}")).status_code == 404
