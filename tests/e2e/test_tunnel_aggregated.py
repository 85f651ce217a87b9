"""The whole user path to a member behind NAT, with the stock components: kubectl -> the Karmada
control-plane emulator (its aggregation layer) -> the unmodified karmada-aggregated-apiserver
(Clusters in its own etcd) -> the stock ANP proxy-server -> our agent's tunnel -> the member.

The members cannot be dialled by the control plane: a Cluster's apiEndpoint is the agent's
tunnel route, a name that never resolves, reachable only through the proxy-server. The agents
register through the aggregation layer (their Clusters live in the aggregated API server's
etcd), and the RBAC that lets karmada-aggregated-apiserver's impersonator act for a user is
shipped to each member as Works, as upstream's unified-auth controller ships it.

Users: alice and mallory may reach both clusters through the control plane (clusters/proxy);
on the members alice may view, mallory nothing; bob may not use the cluster proxy at all.
Skipped, with the reason, without $KARMADA_UPSTREAM_BIN (or without Debian's etcd).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from agent.app import Agent
from emulator import upstream
from emulator.emulator import Emulator, run_emulator
from emulator.upstream import KarmadaAggregatedApiserver
from tests import polling
from tests.agent.tunnel.harness import Hub, open_hub
from tests.e2e.cluster_proxy import CLUSTER_API, PROXY_RULE, grant, ship_impersonation
from tests.e2e.support import kubectl, kubectl_process, running_agent

_missing = upstream.aggregated_apiserver_missing_reason() or (
    upstream.missing_reason("proxy-server") if upstream.binary("proxy-server") is None else None
)
pytestmark = [
    pytest.mark.skipif(_missing is not None, reason=_missing or ""),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(300),
]

CLUSTERS = ("edge-a", "edge-b")
APISERVICE = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.cluster.karmada.io"
LOG_INTERVAL = 0.5
VIEW_RULE = {
    "apiGroups": [""],
    "resources": ["namespaces", "pods", "pods/log"],
    "verbs": ["get", "list", "watch"],
}


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


async def _aggregate(cp: Emulator, server: KarmadaAggregatedApiserver) -> None:
    async with cp.client() as client:
        service = server.service()
        path = f"/api/v1/namespaces/{service['metadata']['namespace']}/services"
        (await client.post(path, json=service)).raise_for_status()
        (
            await client.post(APISERVICE.rpartition("/")[0], json=server.apiservice())
        ).raise_for_status()
        await polling.eventually(
            lambda: client.get(APISERVICE),
            until=lambda r: any(
                c["type"] == "Available" and c["status"] == "True"
                for c in (r.json().get("status") or {}).get("conditions") or []
            ),
            timeout=30,
            what="karmada-aggregated-apiserver Available",
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def bed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bed]:
    from emulator.controllers import Knobs

    directory = tmp_path_factory.mktemp("aggregated")
    async with run_emulator("karmada", name="karmada") as cp:
        server = KarmadaAggregatedApiserver(directory)
        cp.api.services[server.SERVICE_KEY] = server.address
        config = cp.write_kubeconfig(
            directory / "karmada.config",
            user="system:karmada:karmada-aggregated-apiserver",
            groups=["system:masters"],
        )
        await server.start(config)
        try:
            await _aggregate(cp, server)
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
