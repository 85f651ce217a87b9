"""The whole user path to a member behind NAT, with the stock components: kubectl -> the Karmada
control-plane emulator (its aggregation layer) -> the unmodified karmada-aggregated-apiserver
(Clusters in its own etcd) -> the stock ANP proxy-server -> our agent's tunnel -> the member.

The members cannot be dialled by the control plane: a Cluster's apiEndpoint is the agent's
tunnel route, a name that never resolves, reachable only through the proxy-server. The agents
register through the aggregation layer (their Clusters live in the aggregated API server's
etcd), and the RBAC that lets karmada-aggregated-apiserver's impersonator act for a user is
shipped to each member as Works, as upstream's unified-auth controller ships it.

Users: alice and mallory may reach both clusters through the control plane (clusters/proxy);
on the members alice may view and operate (exec, attach, port-forward, metrics), mallory nothing;
bob may not use the cluster proxy at all. Operating goes through the same path: kubectl exec
(WebSocket and SPDY, a TTY) and port-forward (50 MiB) with a kubeconfig whose server ends in
/clusters/<cluster>/proxy, and the unmodified karmadactl's exec, attach and top. Karmada's own
features that reach members themselves (with each Cluster's apiEndpoint, proxyURL and Secret)
work for the NAT'd members too: karmada-metrics-adapter's metrics.k8s.io, a FederatedHPA that
karmada-controller-manager scales on it, and karmada-search's cache.
Skipped, with the reason, without $KARMADA_UPSTREAM_BIN (or without Debian's etcd).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import yaml

from agent.app import Agent
from emulator import upstream
from emulator.emulator import Emulator, run_emulator
from emulator.kubelet.ports import pattern
from emulator.metrics_server import CPU_ANNOTATION, MEMORY_ANNOTATION, cpu_millicores, memory_bytes
from emulator.upstream import (
    ExtensionApiserver,
    KarmadaAggregatedApiserver,
    KarmadaMetricsAdapter,
    KarmadaSearch,
)
from tests import polling
from tests.agent.tunnel.harness import Hub, open_hub
from tests.e2e.cluster_proxy import CLUSTER_API, PROXY_RULE, grant, ship_impersonation
from tests.e2e.support import kubectl, kubectl_process, running_agent
from tests.kubectl_streams import FORWARDING, WIRES, kubectl_on_terminal
from tests.kubectl_streams import kubectl_result as run_kubectl

_missing = upstream.aggregated_apiserver_missing_reason() or (
    upstream.missing_reason("proxy-server") if upstream.binary("proxy-server") is None else None
)
pytestmark = [
    pytest.mark.skipif(_missing is not None, reason=_missing or ""),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(300),
]

JSON = dict[str, Any]
CLUSTERS = ("edge-a", "edge-b")
LOG_INTERVAL = 0.5
VIEW_RULE = {
    "apiGroups": [""],
    "resources": ["namespaces", "pods", "pods/log"],
    "verbs": ["get", "list", "watch"],
}
OPERATE_RULES = [
    {
        "apiGroups": [""],
        "resources": ["pods/exec", "pods/attach", "pods/portforward"],
        "verbs": ["get", "create"],
    },
    {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get", "list"]},
    # karmadactl top nodes lists the nodes before their metrics.
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
]
CLUSTER_READER = {"apiGroups": ["cluster.karmada.io"], "resources": ["clusters"],
                  "verbs": ["get", "list"]}  # fmt: skip
# Where the pods to operate on run (default holds only the web Deployment's).
OPS = "ops"


@dataclass
class Bed:
    cp: Emulator
    server: KarmadaAggregatedApiserver
    hub: Hub
    members: dict[str, Emulator]
    agents: dict[str, Agent]
    dir: Path
    kubeconfigs: dict[str, Path] = field(default_factory=dict)

    def user(self, name: str) -> Path:
        """`name`'s kubeconfig for the control plane (client certificate)."""
        if name not in self.kubeconfigs:
            self.kubeconfigs[name] = self.cp.write_kubeconfig(
                self.dir / f"{name}.kubeconfig", user=name
            )
        return self.kubeconfigs[name]

    def proxy_kubeconfig(self, user: str, cluster: str) -> Path:
        """`user`'s kubeconfig whose server is the control plane's cluster proxy for `cluster`."""
        path = self.dir / f"{user}-{cluster}-proxy.kubeconfig"
        config = yaml.safe_load(self.user(user).read_text())
        config["clusters"][0]["cluster"]["server"] = f"{self.cp.url}{CLUSTER_API}/{cluster}/proxy"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path


async def _aggregate(cp: Emulator, server: ExtensionApiserver) -> None:
    """Post `server`'s Service and APIService and wait until the APIService is Available."""
    async with cp.client() as client:
        service = server.service()
        path = f"/api/v1/namespaces/{service['metadata']['namespace']}/services"
        (await client.post(path, json=service)).raise_for_status()
        apiservice = server.apiservice()
        apiservices = "/apis/apiregistration.k8s.io/v1/apiservices"
        (await client.post(apiservices, json=apiservice)).raise_for_status()
        await polling.eventually(
            lambda: client.get(f"{apiservices}/{apiservice['metadata']['name']}"),
            until=lambda r: any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (r.json().get("status") or {}).get("conditions") or []
            ),
            timeout=30,
            what=f"{server.SERVICE} Available",
        )


async def _serve(cp: Emulator, server: ExtensionApiserver, kubeconfig: Path) -> None:
    """Start `server` as Karmada deploys it (user system:karmada:`SERVICE` with the admin's
    rights, reached at its Service) and aggregate it; stopped again if that fails."""
    cp.api.services[server.SERVICE_KEY] = server.address
    config = cp.write_kubeconfig(
        kubeconfig, user=f"system:karmada:{server.SERVICE}", groups=["system:masters"]
    )
    await server.start(config)
    try:
        await _aggregate(cp, server)
    except BaseException:
        await server.stop()
        raise


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bed]:
    from emulator.controllers import Knobs

    directory = tmp_path_factory.mktemp("aggregated")
    async with run_emulator("karmada", name="karmada") as cp:
        server = KarmadaAggregatedApiserver(directory)
        await _serve(cp, server, directory / "karmada.config")
        try:
            async with contextlib.AsyncExitStack() as stack:
                hub = await stack.enter_async_context(open_hub("stock", cluster_ca_pem=cp.ca_pem))
                ca_file = directory / "proxy-server-ca.crt"
                ca_file.write_bytes(hub.server_ca.cert_pem)
                knobs = Knobs(log_line_interval=LOG_INTERVAL)
                members: dict[str, Emulator] = {}
                agents: dict[str, Agent] = {}
                async with cp.client() as client:
                    await grant(
                        client,
                        "edge-proxy",
                        [{**PROXY_RULE, "resourceNames": list(CLUSTERS)}],
                        ["alice", "mallory"],
                    )
                    # karmadactl reads the Cluster before it goes through its proxy.
                    await grant(client, "cluster-reader", [CLUSTER_READER], ["alice", "mallory"])
                for name in CLUSTERS:
                    member = await stack.enter_async_context(
                        run_emulator("member", name=name, knobs=knobs)
                    )
                    members[name] = member
                    agent_kc = cp.write_kubeconfig(
                        directory / f"{name}-agent.kubeconfig",
                        user=f"system:karmada:agent:{name}",
                        groups=["system:masters"],
                    )
                    _, agent = await stack.enter_async_context(
                        running_agent(
                            agent_kc,
                            member.write_kubeconfig(directory / f"{name}-member.kubeconfig"),
                            name,
                            f"--tunnel-server-address={hub.agent_address}",
                            f"--tunnel-server-ca-file={ca_file}",
                            "--tunnel-server-name=localhost",
                            f"--tunnel-proxy-url={hub.connect_url}",
                        )
                    )
                    agents[name] = agent
                    async with member.client() as admin:
                        await grant(admin, "alice-view", [VIEW_RULE], ["alice"])
                        await grant(admin, "alice-operates", OPERATE_RULES, ["alice"])
                        await _ops_pods(admin, with_shell=name == CLUSTERS[0])
                        deployment = {
                            "metadata": {"name": "web"},
                            "spec": {
                                "replicas": 2,
                                "selector": {"matchLabels": {"app": "web"}},
                                "template": {
                                    "metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "nginx", "image": "nginx"}]},
                                },
                            },
                        }
                        path = "/apis/apps/v1/namespaces/default/deployments"
                        (await admin.post(path, json=deployment)).raise_for_status()
                bed = Bed(cp, server, hub, members, agents, directory)
                for name, agent in agents.items():
                    tunnel = await polling.eventually(lambda a=agent: a.tunnel, what="tunnel built")
                    await asyncio.wait_for(tunnel.connected.wait(), 30)
                    async with cp.client() as client, members[name].client() as member:
                        await ship_impersonation(client, member, name)
                yield bed
        finally:
            await server.stop()


async def _ops_pods(admin: httpx.AsyncClient, *, with_shell: bool) -> None:
    """In namespace ops: `debug` (a shell that serves port 8080) on every member, and `shell`
    (an attachable main process) on the first only."""
    (await admin.post("/api/v1/namespaces", json={"metadata": {"name": OPS}})).raise_for_status()
    pods: dict[str, dict[str, Any]] = {"debug": {"ports": [{"containerPort": 8080}]}}
    if with_shell:
        pods["shell"] = {"command": ["sh"], "stdin": True, "stdinOnce": True}
    for name, extra in pods.items():
        container = {"name": "app", "image": "busybox", **extra}
        body = {"metadata": {"name": name}, "spec": {"containers": [container]}}
        collection = f"/api/v1/namespaces/{OPS}/pods"
        (await admin.post(collection, json=body)).raise_for_status()
        pod_path = f"{collection}/{name}"
        await polling.eventually(
            lambda: admin.get(pod_path),  # noqa: B023 - awaited before the loop moves on
            until=lambda r: r.json().get("status", {}).get("phase") == "Running",
            what=f"pod {name} running",
        )


async def _web_pods(config: Path) -> list[str]:
    """The member's web pods (`pod/<name>`), listed through the cluster proxy once both run."""
    listed = await polling.eventually(
        lambda: kubectl(config, "get", "pods", "-n", "default", "-o", "name"),
        until=lambda out: len(out.split()) == 2,
        timeout=30,
        what="the web pods through the proxy",
    )
    return sorted(listed.split())


async def _line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    return (await asyncio.wait_for(process.stdout.readline(), 30)).decode()


async def _kubectl_fails(config: Path, *args: str) -> str:
    with pytest.raises(AssertionError) as failed:
        await kubectl(config, *args)
    return str(failed.value)


async def _uid(member: Emulator, namespace: str = "kube-system") -> str:
    async with member.client() as client:
        return str((await client.get(f"/api/v1/namespaces/{namespace}")).json()["metadata"]["uid"])


async def test_the_clusters_live_in_the_aggregated_apiservers_etcd(bed: Bed) -> None:
    assert bed.cp.aggregator.served_remotely("cluster.karmada.io", "v1alpha1")
    async with bed.cp.client() as client:
        listed = (await client.get(CLUSTER_API)).json()
    assert sorted(i["metadata"]["name"] for i in listed["items"]) == list(CLUSTERS)
    for item in listed["items"]:
        assert (
            item["spec"]["apiEndpoint"]
            == f"https://{item['metadata']['name']}.karmada-tunnel.invalid:443"
        )
        assert item["spec"]["proxyURL"] == bed.hub.connect_url
        assert (
            bed.cp.api.storage.get(("cluster.karmada.io", "clusters"), "", item["metadata"]["name"])
            is None
        )
    admin = bed.cp.write_kubeconfig(bed.dir / "admin.kubeconfig")
    resources = await kubectl(admin, "api-resources", "--api-group=cluster.karmada.io")
    assert resources.splitlines()[1].split() == [
        "clusters", "cluster.karmada.io/v1alpha1", "false", "Cluster"
    ]  # fmt: skip
    # Its OpenAPI v3 document is the aggregated server's own (whose operations carry no
    # group-version-kind, so `kubectl explain clusters` fails against Karmada itself too).
    root = json.loads(await kubectl(admin, "get", "--raw", "/openapi/v3"))["paths"]
    document = json.loads(
        await kubectl(
            admin, "get", "--raw", root["apis/cluster.karmada.io/v1alpha1"]["serverRelativeURL"]
        )
    )
    assert f"{CLUSTER_API}/{{name}}/proxy/{{path}}" in document["paths"]
    table = await kubectl(admin, "get", "apiservice", "v1alpha1.cluster.karmada.io")
    assert table.splitlines()[1].split()[:3] == [
        "v1alpha1.cluster.karmada.io", "karmada-system/karmada-aggregated-apiserver", "True"
    ]  # fmt: skip


async def test_kubectl_get_raw_returns_the_members_namespaces(bed: Bed) -> None:
    raw = await kubectl(
        bed.user("alice"), "get", "--raw", f"{CLUSTER_API}/edge-a/proxy/api/v1/namespaces"
    )
    listed = json.loads(raw)
    assert listed["kind"] == "NamespaceList"
    by_name = {i["metadata"]["name"]: i["metadata"]["uid"] for i in listed["items"]}
    assert by_name["kube-system"] == await _uid(bed.members["edge-a"])


async def test_a_kubeconfig_ending_in_proxy_lists_pods_and_follows_a_log(bed: Bed) -> None:
    config = bed.proxy_kubeconfig("alice", "edge-a")
    first = (await _web_pods(config))[0]
    follow_log = ("logs", "-f", "-n", "default", first, "--tail=1")
    async with kubectl_process(config, *follow_log) as follow:
        numbers = []
        for _ in range(3):
            line = await _line(follow)
            assert f"of nginx in pod default/{first.split('/')[1]}" in line
            numbers.append(int(line.split()[1]))
        assert numbers == [numbers[0], numbers[0] + 1, numbers[0] + 2]


async def test_two_clusters_on_one_private_address_each_answer_for_themselves(bed: Bed) -> None:
    a, b = bed.members["edge-a"], bed.members["edge-b"]
    assert a.url.rpartition(":")[0] == b.url.rpartition(":")[0] == "https://127.0.0.1"
    for name, member in bed.members.items():
        raw = await kubectl(
            bed.user("alice"),
            "get",
            "--raw",
            f"{CLUSTER_API}/{name}/proxy/api/v1/namespaces/kube-system",
        )
        assert json.loads(raw)["metadata"]["uid"] == await _uid(member)
    assert await _uid(a) != await _uid(b)


async def test_a_dial_for_any_other_address_is_refused(bed: Bed) -> None:
    """A Cluster naming edge-a's route host with another port: the proxy-server hands the dial
    to edge-a's agent (destHost), which refuses it."""
    async with bed.cp.client() as client:
        edge_a = (await client.get(f"{CLUSTER_API}/edge-a")).json()
        rogue = {
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "rogue"},
            "spec": {
                **{
                    k: edge_a["spec"][k]
                    for k in ("syncMode", "proxyURL", "secretRef", "impersonatorSecretRef")
                },
                "apiEndpoint": edge_a["spec"]["apiEndpoint"].replace(":443", ":6443"),
            },
        }
        (await client.post(CLUSTER_API, json=rogue)).raise_for_status()
        await grant(client, "rogue-proxy", [{**PROXY_RULE, "resourceNames": ["rogue"]}], ["alice"])
    tunnel = bed.agents["edge-a"].tunnel
    assert tunnel is not None
    before = tunnel.policy.refused
    try:
        message = await _kubectl_fails(
            bed.user("alice"), "get", "--raw", f"{CLUSTER_API}/rogue/proxy/api/v1/namespaces"
        )
        # The proxy-server answers the aggregated apiserver's CONNECT with 502 for a refused dial.
        assert "Error from server: Bad Gateway" in message
        assert tunnel.policy.refused == before + 1
    finally:
        async with bed.cp.client() as client:
            await client.delete(f"{CLUSTER_API}/rogue")


async def test_an_identity_forbidden_on_the_member_stays_forbidden(bed: Bed) -> None:
    path = f"{CLUSTER_API}/edge-a/proxy/api/v1/namespaces"
    mallory = await _kubectl_fails(bed.user("mallory"), "get", "--raw", path)
    assert (
        'Error from server (Forbidden): namespaces is forbidden: User "mallory" cannot list '
        'resource "namespaces" in API group "" at the cluster scope'
    ) in mallory
    # bob may not use the cluster proxy: the control plane says so before anything leaves it.
    bob = await _kubectl_fails(bed.user("bob"), "get", "--raw", path)
    assert (
        'User "bob" cannot get resource "clusters/proxy" in API group "cluster.karmada.io"' in bob
    )


async def test_fifty_gets_and_five_followed_logs_at_once(bed: Bed) -> None:
    config = bed.proxy_kubeconfig("alice", "edge-b")
    pods = await _web_pods(config)
    follow_log = ("logs", "-f", "-n", "default", pods[0], "--tail=1")
    async with contextlib.AsyncExitStack() as stack:
        follows = [
            await stack.enter_async_context(kubectl_process(config, *follow_log)) for _ in range(5)
        ]
        for follow in follows:
            await _line(follow)
        started = time.monotonic()
        outputs = await asyncio.gather(
            *(kubectl(config, "get", "pods", "-n", "default", "-o", "name") for _ in range(50))
        )
        print(f"50 kubectl get through the whole path: {time.monotonic() - started:.1f}s")
        assert all(sorted(out.split()) == pods for out in outputs)
        # Every followed log is still streaming: each gets the next lines as they are written.
        for follow in follows:
            assert f"pod default/{pods[0].split('/')[1]}" in await _line(follow)


async def test_a_watch_streams_through_the_whole_path(bed: Bed) -> None:
    config = bed.proxy_kubeconfig("alice", "edge-a")
    watch_namespaces = ("get", "namespaces", "-w", "-o", "name", "--watch-only")
    async with (
        kubectl_process(config, *watch_namespaces) as watch,
        bed.members["edge-a"].client() as admin,
    ):
        assert watch.stdout is not None
        created = False
        while not created:  # kubectl may still be connecting: create until one is seen
            name = f"watched-{time.monotonic_ns()}"
            body = {"metadata": {"name": name}}
            (await admin.post("/api/v1/namespaces", json=body)).raise_for_status()
            try:
                line = await asyncio.wait_for(watch.stdout.readline(), 5)
            except TimeoutError:
                continue
            created = line.decode().strip().startswith("namespace/watched-")


async def test_what_users_see_when_the_route_cannot_carry_their_request(bed: Bed) -> None:
    """kubectl through the stock aggregated apiserver and proxy-server: a member API server that
    does not answer its agent is named (the agent answers the request itself); a cluster whose
    route has no agent connected gets the stock components' words, which the agent cannot
    change (README, "What users see")."""
    alice = bed.user("alice")
    member = bed.members["edge-b"]
    await member.faults.go_offline()
    try:
        message = await _kubectl_fails(
            alice, "get", "--raw", f"{CLUSTER_API}/edge-b/proxy/api/v1/namespaces"
        )
    finally:
        await member.faults.come_back()
    assert "Error from server (ServiceUnavailable): the API server of cluster edge-b (" in message
    assert "does not answer its karmada-agent: dial tcp" in message
    async with bed.cp.client() as client:
        edge_b = (await client.get(f"{CLUSTER_API}/edge-b")).json()
        orphan = {
            "apiVersion": "cluster.karmada.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "orphan"},
            "spec": {
                **{
                    k: edge_b["spec"][k]
                    for k in ("syncMode", "proxyURL", "secretRef", "impersonatorSecretRef")
                },
                "apiEndpoint": "https://orphan.karmada-tunnel.invalid:443",
            },
        }
        (await client.post(CLUSTER_API, json=orphan)).raise_for_status()
        await grant(
            client, "orphan-proxy", [{**PROXY_RULE, "resourceNames": ["orphan"]}], ["alice"]
        )
    try:
        message = await _kubectl_fails(
            alice, "get", "--raw", f"{CLUSTER_API}/orphan/proxy/api/v1/namespaces"
        )
        # The proxy-server's 500 "currently no tunnels available"; its text does not get through.
        assert "Error from server: Internal Server Error" in message, message
    finally:
        async with bed.cp.client() as client:
            await client.delete(f"{CLUSTER_API}/orphan")


async def test_the_agent_finds_its_route_answering_for_it(bed: Bed) -> None:
    """The route check through the real cluster proxy: the dial reaches the agent."""
    agent = bed.agents["edge-a"]
    check = await polling.eventually(lambda: agent.route_check, what="the route check")
    verdict = await check.check_and_report()
    assert verdict.held is True, verdict.seen
    async with bed.cp.client() as client:
        cluster = (await client.get(f"{CLUSTER_API}/edge-a")).json()
    [condition] = [c for c in cluster["status"]["conditions"] if c["type"] == "TunnelRouteHeld"]
    assert (condition["status"], condition["reason"]) == ("True", "AnsweredByAgent")


async def test_a_metadata_only_get_of_an_aggregated_cluster_is_answered_whole(bed: Bed) -> None:
    """The heartbeat's read of its Cluster, answered by the stock aggregated apiserver through
    the emulator's aggregation layer: the body is as long as its Content-Length says."""
    accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    for http2 in (False, True):
        async with bed.cp.https_client(http2=http2, timeout=15) as client:
            response = await client.get(f"{CLUSTER_API}/edge-a", headers={"Accept": accept})
        assert response.status_code == 200, response.text
        assert response.headers["content-length"] == str(len(response.content))
        assert response.json()["kind"] == "PartialObjectMetadata"
        assert response.json()["metadata"]["name"] == "edge-a"


KARMADACTL = upstream.binary("karmadactl")
needs_karmadactl = pytest.mark.skipif(
    KARMADACTL is None, reason=upstream.missing_reason("karmadactl")
)


async def _karmadactl(config: Path, *args: str, stdin: bytes | None = None) -> tuple[int, str, str]:
    assert KARMADACTL is not None
    process = await asyncio.create_subprocess_exec(
        str(KARMADACTL), "--kubeconfig", str(config), *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_kubectl_exec_through_the_cluster_proxy_carries_the_exit_code(
    bed: Bed, wire: str
) -> None:
    config = bed.proxy_kubeconfig("alice", "edge-a")
    code, out, err = await run_kubectl(
        config, "exec", "-n", OPS, "debug", "--", "sh", "-c", "echo ok; echo oops >&2; exit 3",
        env=WIRES[wire],
    )  # fmt: skip
    assert (code, out) == (3, "ok\n"), err
    assert "command terminated with exit code 3" in err
    script = "until [ \"$(stty size)\" = '30 100' ]; do :; done; tty; stty size; exit 6"
    code, output = await kubectl_on_terminal(
        config, "exec", "-it", "-n", OPS, "debug", "--", "sh", "-c", script,
        env=WIRES[wire], size=(100, 30),
    )  # fmt: skip
    assert code == 6, output
    assert output.decode().split("\r\n")[1] == "30 100"


async def test_each_cluster_runs_the_exec_in_its_own_pod(bed: Bed) -> None:
    """Two clusters on one private address, one pod name: each exec lands in its own
    cluster's pod (the container's directory names the pod's uid), and a pod only one cluster
    has is not found through the other's proxy."""
    for name, member in bed.members.items():
        async with member.client() as admin:
            uid = (await admin.get(f"/api/v1/namespaces/{OPS}/pods/debug")).json()["metadata"][
                "uid"
            ]
        config = bed.proxy_kubeconfig("alice", name)
        code, out, err = await run_kubectl(config, "exec", "-n", OPS, "debug", "--", "pwd")
        assert code == 0, err
        assert f"/{OPS}_debug_{uid[:8]}/app" in out
    code, _, err = await run_kubectl(
        bed.proxy_kubeconfig("alice", "edge-b"), "exec", "-n", OPS, "shell", "--", "true"
    )
    assert code == 1
    assert 'Error from server (NotFound): pods "shell" not found' in err


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_port_forward_through_the_cluster_proxy_carries_fifty_mib(
    bed: Bed, wire: str
) -> None:
    size = 50 * 1024 * 1024
    expected = hashlib.sha256()
    for chunk in pattern(size):
        expected.update(chunk)
    process = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", str(bed.proxy_kubeconfig("alice", "edge-a")), "-n", OPS,
        "port-forward", "--address=127.0.0.1", "pod/debug", ":8080",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **WIRES[wire]},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        found = FORWARDING.search(await asyncio.wait_for(process.stdout.readline(), 30))
        assert found is not None
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{int(found.group(1))}", timeout=120
        ) as http:
            assert (await http.get("/")).text == "pod ops/debug container app port 8080\n"
            received = hashlib.sha256()
            started = time.monotonic()
            async with http.stream("GET", f"/bytes/{size}") as response:
                async for chunk in response.aiter_bytes():
                    received.update(chunk)
            elapsed = time.monotonic() - started
            print(f"50 MiB through the cluster proxy ({wire}): {50 / elapsed:.1f} MiB/s")
            assert received.hexdigest() == expected.hexdigest()
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        await process.wait()


@needs_karmadactl
async def test_karmadactl_exec_prints_ok_and_exits_3(bed: Bed) -> None:
    code, out, err = await _karmadactl(
        bed.user("alice"), "exec", "-n", OPS, "debug", "--operation-scope=members",
        "--cluster=edge-a", "--", "sh", "-c", "echo ok; exit 3",
    )  # fmt: skip
    assert (code, out) == (3, "ok\n"), err


@needs_karmadactl
async def test_karmadactl_attach_joins_the_main_process(bed: Bed) -> None:
    code, out, err = await _karmadactl(
        bed.user("alice"), "attach", "-i", "-n", OPS, "shell", "--operation-scope=members",
        "--cluster=edge-a", stdin=b"echo attached; exit 0\n",
    )  # fmt: skip
    assert (code, out) == (0, "attached\n"), err


@needs_karmadactl
async def test_karmadactl_top_reads_the_members_metrics(bed: Bed) -> None:
    code, out, err = await _karmadactl(bed.user("alice"), "top", "pods", "-n", OPS,
                                       "--clusters=edge-a")  # fmt: skip
    assert code == 0, err
    rows = [line.split() for line in out.strip().splitlines()[1:]]
    assert sorted((r[0], r[1]) for r in rows) == [("debug", "edge-a"), ("shell", "edge-a")]
    code, out, err = await _karmadactl(bed.user("alice"), "top", "nodes", "--clusters=edge-a")
    assert code == 0, err
    assert len(out.strip().splitlines()) > 1


@pytest.mark.parametrize("wire", sorted(WIRES))
async def test_a_user_the_member_forbids_exec_gets_the_members_403(bed: Bed, wire: str) -> None:
    """mallory may read pods in ops on edge-a (a Role there), not exec into them: the member's
    own 403 for pods/exec comes back through the cluster proxy and the tunnel, unchanged. A user
    the control plane does not let through (bob) is refused there, before the tunnel."""
    async with bed.members["edge-a"].client() as admin:
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{OPS}"
        role = {
            "metadata": {"name": f"mallory-reads-{wire}"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
        }
        binding = {
            "metadata": {"name": f"mallory-reads-{wire}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": f"mallory-reads-{wire}"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "mallory"}],
        }  # fmt: skip
        (await admin.post(f"{rbac}/roles", json=role)).raise_for_status()
        (await admin.post(f"{rbac}/rolebindings", json=binding)).raise_for_status()
    code, _, err = await run_kubectl(
        bed.proxy_kubeconfig("mallory", "edge-a"), "exec", "-n", OPS, "debug", "--", "true",
        env=WIRES[wire],
    )  # fmt: skip
    assert code == 1
    assert 'pods "debug" is forbidden: User "mallory" cannot' in err
    assert 'resource "pods/exec" in API group "" in the namespace "ops"' in err
    code, _, err = await run_kubectl(
        bed.proxy_kubeconfig("bob", "edge-a"), "exec", "-n", OPS, "debug", "--", "true",
        env=WIRES[wire],
    )  # fmt: skip
    assert code == 1
    assert (
        'User "bob" cannot get resource "clusters/proxy" in API group "cluster.karmada.io"' in err
    )


needs_metrics_adapter = pytest.mark.skipif(
    upstream.binary(upstream.METRICS_ADAPTER) is None,
    reason=upstream.missing_reason(upstream.METRICS_ADAPTER),
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def metrics_adapter(bed: Bed) -> AsyncIterator[KarmadaMetricsAdapter]:
    """karmada-metrics-adapter on the control plane, Available behind its APIService."""
    adapter = KarmadaMetricsAdapter(bed.dir)
    await _serve(bed.cp, adapter, bed.dir / "metrics-adapter.kubeconfig")
    try:
        yield adapter
    finally:
        await adapter.stop()


def _usage_by_pod(listed: dict[str, Any]) -> dict[str, list[tuple[str, int, int]]]:
    """Each pod's containers' (name, millicores, bytes): the adapter re-writes the quantities
    canonically (9000000n -> 9m), the values stay."""
    return {
        item["metadata"]["name"]: sorted(
            (c["name"], cpu_millicores(c["usage"]["cpu"]), memory_bytes(c["usage"]["memory"]))
            for c in item["containers"]
        )
        for item in listed["items"]
    }


@needs_metrics_adapter
async def test_the_metrics_adapter_answers_with_the_nat_members_pod_usage(
    bed: Bed, metrics_adapter: KarmadaMetricsAdapter
) -> None:
    """kubectl get --raw on karmada-apiserver: the adapter reads each member's metrics.k8s.io
    through the Cluster's proxyURL, i.e. the proxy-server and the agent's tunnel."""
    admin = bed.cp.write_kubeconfig(bed.dir / "admin.kubeconfig")
    path = f"/apis/metrics.k8s.io/v1beta1/namespaces/{OPS}/pods"
    try:
        _, out, _ = await polling.eventually(
            lambda: run_kubectl(admin, "get", "--raw", path),
            until=lambda r: r[0] == 0 and len(json.loads(r[1]).get("items") or []) == 3,
            timeout=60,
            what="the members' ops pods in karmada-apiserver's metrics.k8s.io",
        )
    except AssertionError:
        print(metrics_adapter.log())
        raise
    listed = json.loads(out)
    by_cluster: dict[str, dict[str, Any]] = {}
    for item in listed["items"]:
        source = (item["metadata"].get("annotations") or {}).get(
            "resource.karmada.io/query-from-cluster", ""
        )
        by_cluster.setdefault(source, {"items": []})["items"].append(item)
    assert sorted(by_cluster) == sorted(bed.members)
    for name, member in bed.members.items():
        async with member.client() as client:
            own = (await client.get(path)).json()
        assert _usage_by_pod(by_cluster.get(name, {"items": []})) == _usage_by_pod(own), name


needs_search = pytest.mark.skipif(
    upstream.binary(upstream.SEARCH) is None, reason=upstream.missing_reason(upstream.SEARCH)
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def search(bed: Bed) -> AsyncIterator[KarmadaSearch]:
    """karmada-search on the control plane (its own etcd), Available behind its APIService."""
    server = KarmadaSearch(bed.dir / "search")
    await _serve(bed.cp, server, bed.dir / "search.kubeconfig")
    try:
        yield server
    finally:
        await server.stop()


@needs_search
async def test_karmada_search_caches_the_nat_members_pods(bed: Bed, search: KarmadaSearch) -> None:
    """A ResourceRegistry for both clusters' pods in ops: karmada-search lists and watches them
    through each Cluster's proxyURL (the proxy-server and the agent's tunnel) and answers
    from its cache, each pod marked with its cluster."""
    registry = {
        "apiVersion": "search.karmada.io/v1alpha1",
        "kind": "ResourceRegistry",
        "metadata": {"name": "edge-pods"},
        "spec": {
            "targetCluster": {"clusterNames": list(CLUSTERS)},
            "resourceSelectors": [{"apiVersion": "v1", "kind": "Pod", "namespace": OPS}],
        },
    }
    async with bed.cp.client() as client:
        created = await client.post(
            "/apis/search.karmada.io/v1alpha1/resourceregistries", json=registry
        )
        assert created.status_code == 201, created.text
    admin = bed.cp.write_kubeconfig(bed.dir / "admin.kubeconfig")
    path = f"/apis/search.karmada.io/v1alpha1/search/cache/api/v1/namespaces/{OPS}/pods"
    try:
        _, out, _ = await polling.eventually(
            lambda: run_kubectl(admin, "get", "--raw", path),
            until=lambda r: r[0] == 0 and len(json.loads(r[1]).get("items") or []) == 3,
            timeout=60,
            what="the members' ops pods in karmada-search's cache",
        )
    except AssertionError:
        print(search.log())
        raise
    cached = {
        (
            (item["metadata"].get("annotations") or {}).get(
                "resource.karmada.io/cached-from-cluster"
            ),
            item["metadata"]["name"],
            item["metadata"]["uid"],
        )
        for item in json.loads(out)["items"]
    }
    expected = set()
    for name, member in bed.members.items():
        async with member.client() as client:
            for pod in (await client.get(f"/api/v1/namespaces/{OPS}/pods")).json()["items"]:
                expected.add((name, pod["metadata"]["name"], pod["metadata"]["uid"]))
    assert cached == expected


CONTROLLER_MANAGER = "karmada-controller-manager"
needs_controller_manager = pytest.mark.skipif(
    upstream.binary(CONTROLLER_MANAGER) is None
    or upstream.binary(upstream.METRICS_ADAPTER) is None,
    reason=upstream.missing_reason(CONTROLLER_MANAGER),
)
HPA_NAMESPACE = "hpa"
PERMANENT_ID = "propagationpolicy.karmada.io/permanent-id"
FHPA_PATH = f"/apis/autoscaling.karmada.io/v1alpha1/namespaces/{HPA_NAMESPACE}/federatedhpas"


async def _install_crd(client: httpx.AsyncClient, relative: str) -> None:
    """An upstream CRD (from $KARMADA_UPSTREAM_BIN/crds), created unless present, served."""
    directory = upstream.upstream_dir()
    assert directory is not None
    crd = yaml.safe_load((directory / "crds" / relative).read_text())
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    created = await client.post(path, json=crd)
    assert created.status_code in (201, 409), created.text
    await polling.eventually(
        lambda: client.get(f"{path}/{crd['metadata']['name']}"),
        until=lambda r: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (r.json().get("status") or {}).get("conditions") or []
        ),
        what=f"CRD {crd['metadata']['name']} established",
    )


def _load_deployment(replicas: int, labels: dict[str, str]) -> JSON:
    """`load`: pods each using 200Mi of memory (what the members' metrics-server reports)."""
    template = {
        "metadata": {
            "labels": {"app": "load"},
            "annotations": {MEMORY_ANNOTATION: "200Mi", CPU_ANNOTATION: "50m"},
        },
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "load", "namespace": HPA_NAMESPACE, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "load"}},
            "template": template,
        },
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def controller_manager(
    bed: Bed, metrics_adapter: KarmadaMetricsAdapter
) -> AsyncIterator[upstream.UpstreamProcess]:
    """karmada-controller-manager with only its FederatedHPA controller, on the control plane
    whose metrics.k8s.io is karmada-metrics-adapter's."""
    directory = upstream.upstream_dir()
    assert directory is not None
    async with bed.cp.client() as client:
        # Every Karmada CRD, as karmadactl init installs them: the controller-manager's
        # resource detector watches policies whichever controllers run.
        for crd in sorted((directory / "crds").rglob("*.yaml")):
            await _install_crd(client, str(crd.relative_to(directory / "crds")))
    config = bed.cp.write_kubeconfig(
        bed.dir / "controller-manager.kubeconfig",
        user="system:karmada:karmada-controller-manager",
        groups=["system:masters"],
    )
    health = upstream.free_port()
    process = upstream.UpstreamProcess(
        CONTROLLER_MANAGER,
        [
            f"--kubeconfig={config}",
            "--controllers=federatedHorizontalPodAutoscaler",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{upstream.free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{health}",
            "--horizontal-pod-autoscaler-sync-period=2s",
            "--v=4",
        ],
        ready=upstream.http_ready(f"http://127.0.0.1:{health}/healthz"),
        workdir=bed.dir,
    )
    await process.start(timeout=60)
    try:
        yield process
    finally:
        await process.stop()


@needs_controller_manager
async def test_a_federatedhpa_scales_on_the_nat_members_usage(
    bed: Bed, controller_manager: upstream.UpstreamProcess
) -> None:
    """Two pods on each member use 200Mi each; a FederatedHPA targeting 100Mi on average: the
    controller reads the pods and their usage through the tunnel (karmada-metrics-adapter's
    metrics.k8s.io, the members' pods and scale), wants twice the four replicas, and scales the
    control plane's Deployment to 8."""
    labels = {PERMANENT_ID: "load-policy-id"}
    for member in bed.members.values():
        async with member.client() as admin:
            namespace = {"metadata": {"name": HPA_NAMESPACE}}
            (await admin.post("/api/v1/namespaces", json=namespace)).raise_for_status()
            path = f"/apis/apps/v1/namespaces/{HPA_NAMESPACE}/deployments"
            (await admin.post(path, json=_load_deployment(2, labels))).raise_for_status()
            await polling.eventually(
                lambda a=admin: a.get(f"/api/v1/namespaces/{HPA_NAMESPACE}/pods"),
                until=lambda r: (
                    sum(
                        1
                        for p in r.json()["items"]
                        if (p.get("status") or {}).get("phase") == "Running"
                    )
                    == 2
                ),
                timeout=30,
                what="two load pods running",
            )
    async with bed.cp.client() as client:
        (
            await client.post("/api/v1/namespaces", json={"metadata": {"name": HPA_NAMESPACE}})
        ).raise_for_status()
        path = f"/apis/apps/v1/namespaces/{HPA_NAMESPACE}/deployments"
        (await client.post(path, json=_load_deployment(4, labels))).raise_for_status()
        binding = {
            "apiVersion": "work.karmada.io/v1alpha2",
            "kind": "ResourceBinding",
            "metadata": {"name": "load-deployment", "namespace": HPA_NAMESPACE, "labels": labels},
            "spec": {
                "resource": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": HPA_NAMESPACE,
                             "name": "load"},
                "clusters": [{"name": name, "replicas": 2} for name in CLUSTERS],
            },
        }  # fmt: skip
        bindings = f"/apis/work.karmada.io/v1alpha2/namespaces/{HPA_NAMESPACE}/resourcebindings"
        (await client.post(bindings, json=binding)).raise_for_status()
        fhpa = {
            "apiVersion": "autoscaling.karmada.io/v1alpha1",
            "kind": "FederatedHPA",
            "metadata": {"name": "load", "namespace": HPA_NAMESPACE},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "load"},
                "minReplicas": 1,
                "maxReplicas": 10,
                "metrics": [{"type": "Resource", "resource": {"name": "memory",
                             "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
            },
        }  # fmt: skip
        (await client.post(FHPA_PATH, json=fhpa)).raise_for_status()
        try:
            status = await polling.eventually(
                lambda: client.get(f"{FHPA_PATH}/load"),
                until=lambda r: (r.json().get("status") or {}).get("desiredReplicas") == 8,
                timeout=60,
                what="the FederatedHPA's desired replicas",
            )
        except AssertionError:
            print(controller_manager.log(20000))
            raise
        current = status.json()["status"]["currentMetrics"][0]["resource"]["current"]
        assert memory_bytes(current["averageValue"]) == 200 * 2**20
        assert status.json()["status"]["currentReplicas"] == 4
        scaled = await polling.eventually(
            lambda: client.get(f"{path}/load/scale"),
            until=lambda r: r.json()["spec"]["replicas"] == 8,
            what="the control plane's Deployment scaled to 8",
        )
        assert scaled.json()["spec"]["replicas"] == 8
