"""The tunnel end to end: the agent's side, a proxy-server (the double, and the STOCK binary from
$KARMADA_UPSTREAM_BIN, skipped with the reason when absent), member emulators, and a control-plane
client that does what karmada-aggregated-apiserver's cluster proxy does.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from agent.app import RECONNECT_CAP, RECONNECT_INITIAL
from agent.events import EventEmitter
from agent.kube.backoff import Backoff
from agent.kube.client import KubeClient
from agent.kube.resources import EVENTS
from agent.resources import CLUSTERS
from emulator.emulator import Emulator, run_emulator
from emulator.netproxy import LinkProxy
from tests import polling
from tests.agent.tunnel.harness import (
    AGENT_GROUPS,
    HUB_KINDS,
    AgentTunnel,
    Hub,
    RoundRobin,
    TokenAuth,
    agent_tunnel,
    control_plane_client,
    member_kubeconfig,
    open_hub,
)
from tests.e2e.support import client_for, kubectl


@pytest_asyncio.fixture
async def karmada() -> AsyncIterator[Emulator]:
    async with run_emulator("karmada", name="karmada") as emu:
        yield emu


@pytest_asyncio.fixture(params=HUB_KINDS)
async def hub(request: pytest.FixtureRequest, karmada: Emulator) -> AsyncIterator[Hub]:
    async with open_hub(request.param, cluster_ca_pem=karmada.ca_pem) as opened:
        yield opened


def tunnel_for(
    cluster: str, member: Emulator, karmada: Emulator, hub: Hub, **kwargs: object
) -> object:
    return agent_tunnel(
        cluster=cluster,
        member_emulator=member,
        karmada_ca_pem=karmada.ca_pem,
        client_cert=karmada.issue_client_cert(f"system:karmada:agent:{cluster}", AGENT_GROUPS),
        server_address=hub.agent_address,
        proxy_url=hub.connect_url,
        server_ca_pem=hub.server_ca.cert_pem,
        **kwargs,  # type: ignore[arg-type]
    )


async def connected(bed: AgentTunnel, timeout: float = 15.0) -> None:
    await asyncio.wait_for(bed.tunnel.connected.wait(), timeout)


async def kube_system_uid(bed: AgentTunnel, member: Emulator) -> str:
    async with control_plane_client(bed.publication, token=member.admin_token) as client:
        response = await client.get("/api/v1/namespaces/kube-system")
    assert response.status_code == 200, response.text
    return str(response.json()["metadata"]["uid"])


async def test_control_plane_lists_the_members_namespaces(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        async with control_plane_client(bed.publication, token=member_emulator.admin_token) as c:
            response = await c.get("/api/v1/namespaces")
        assert response.status_code == 200, response.text + hub.log()
        assert "kube-system" in {i["metadata"]["name"] for i in response.json()["items"]}
        # HTTP/2 end to end as well (the aggregated apiserver offers h2 for plain requests).
        async with control_plane_client(
            bed.publication, token=member_emulator.admin_token, http2=True
        ) as c:
            response = await c.get("/api/v1/namespaces/default")
        assert response.status_code == 200
        assert response.http_version == "HTTP/2"


async def test_two_clusters_on_one_address_each_answer_for_themselves(
    hub: Hub, karmada: Emulator
) -> None:
    """Both members listen on 127.0.0.1 (one private address); routes are per cluster."""
    async with (
        run_emulator("member", name="edge-a") as member_a,
        run_emulator("member", name="edge-b") as member_b,
        tunnel_for("edge-a", member_a, karmada, hub) as bed_a,  # type: ignore[attr-defined]
        tunnel_for("edge-b", member_b, karmada, hub) as bed_b,  # type: ignore[attr-defined]
    ):
        assert member_a.url.split(":")[1] == member_b.url.split(":")[1] == "//127.0.0.1"
        await connected(bed_a)
        await connected(bed_b)
        expected_a = (await member_a.client().get("/api/v1/namespaces/kube-system")).json()
        expected_b = (await member_b.client().get("/api/v1/namespaces/kube-system")).json()
        assert expected_a["metadata"]["uid"] != expected_b["metadata"]["uid"]
        assert await kube_system_uid(bed_a, member_a) == expected_a["metadata"]["uid"]
        assert await kube_system_uid(bed_b, member_b) == expected_b["metadata"]["uid"]
        # Cluster A's CA does not vouch for B's route: a mixed-up route fails TLS.
        crossed = bed_a.publication.__class__(
            api_endpoint=bed_b.publication.api_endpoint,
            proxy_url=bed_a.publication.proxy_url,
            ca_bundle=bed_a.publication.ca_bundle,
        )
        async with control_plane_client(crossed, token=member_b.admin_token) as client:
            with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get("/api/v1/namespaces")


async def test_a_dial_for_any_other_address_is_refused(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        # The route's host with another port: destHost routes it to this agent, which refuses.
        for port in (6443, 22):
            other = bed.publication.api_endpoint.replace(":443", f":{port}")
            async with control_plane_client(
                bed.publication.__class__(
                    other, bed.publication.proxy_url, bed.publication.ca_bundle
                ),
                token=member_emulator.admin_token,
            ) as client:
                with pytest.raises(Exception, match="502"):
                    await client.get("/api/v1/namespaces")
        assert bed.metric("karmada_agent_tunnel_refused_dials_total") == 2
        assert bed.tunnel.policy.refused == 2


async def test_identity_forbidden_on_the_member_stays_forbidden(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        async with control_plane_client(
            bed.publication, token=member_emulator.admin_token, impersonate="alice"
        ) as client:
            response = await client.get("/api/v1/namespaces")
        assert response.status_code == 403, response.text
        status = response.json()
        assert status["reason"] == "Forbidden"
        assert 'User "alice" cannot list resource "namespaces"' in status["message"]
        async with control_plane_client(bed.publication, token="not-a-token") as client:
            assert (await client.get("/api/v1/namespaces")).status_code == 401


async def test_fifty_concurrent_kubectl_get_and_a_watch(
    hub: Hub, karmada: Emulator, member_emulator: Emulator, tmp_path: Path
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        config = member_kubeconfig(
            tmp_path / "tunnel.kubeconfig", bed.publication, token=member_emulator.admin_token
        )
        async with control_plane_client(
            bed.publication, token=member_emulator.admin_token
        ) as client:
            listed = await client.get("/api/v1/namespaces")
            version = listed.json()["metadata"]["resourceVersion"]
            async with client.stream(
                "GET",
                "/api/v1/namespaces",
                params={"watch": "1", "resourceVersion": version, "timeoutSeconds": "30"},
            ) as watch:
                outputs = await asyncio.gather(
                    *(kubectl(config, "get", "namespaces", "-o", "name") for _ in range(50))
                )
                assert all("namespace/kube-system" in out for out in outputs)
                await kubectl(config, "create", "namespace", "through-the-tunnel")
                async for line in watch.aiter_lines():
                    if '"through-the-tunnel"' in line and '"ADDED"' in line:
                        break
        names = await kubectl(config, "get", "namespaces", "-o", "name")
        assert "namespace/through-the-tunnel" in names


async def test_tunnel_survives_a_proxy_server_restart(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        await hub.restart()
        recovered = time.monotonic()
        await polling.eventually(
            lambda: (
                bed.tunnel.connected.is_set()
                and bed.metric("karmada_agent_tunnel_connects_total", result="success") >= 2
            ),
            timeout=15,
            what="the tunnel reconnected",
        )
        # Backoff(initial=0.2, cap=1.0) in the harness: one slot is at most 1.5 s.
        assert time.monotonic() - recovered < 1.5 + 1.0
        await polling.eventually(
            lambda: kube_system_uid(bed, member_emulator),
            timeout=10,
            retry_on=(Exception,),
            what="a request through the reconnected tunnel",
        )


@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_one_call_per_proxy_server_instance(
    kind: str, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with (
        open_hub(kind, cluster_ca_pem=karmada.ca_pem, server_count=2, server_id="a") as first,
        open_hub(
            kind,
            cluster_ca_pem=karmada.ca_pem,
            server_count=2,
            server_id="b",
            server_ca=first.server_ca,
        ) as second,
    ):
        balancer = await RoundRobin([first.agent_address, second.agent_address]).start()
        try:
            front = Hub(
                kind, balancer.address, first.connect_url, first.server_ca, first.restart, first.log
            )
            async with tunnel_for("member1", member_emulator, karmada, front) as bed:  # type: ignore[attr-defined]
                await polling.eventually(
                    lambda: sorted(bed.tunnel.sessions) == ["a", "b"],
                    timeout=15,
                    what="a call to each instance",
                )
                assert bed.metric("konnectivity_network_proxy_agent_known_server_count") == 2
                # A CONNECT at either instance reaches the member.
                for instance in (first, second):
                    async with control_plane_client(
                        bed.publication,
                        token=member_emulator.admin_token,
                        proxy_url=instance.connect_url,
                    ) as client:
                        assert (await client.get("/api/v1/namespaces")).status_code == 200
        finally:
            await balancer.stop()


OUTAGES = [
    pytest.param("double", 6.0, id="double-6s"),
    pytest.param("stock", 60.0, id="stock-60s", marks=HUB_KINDS[1].marks),
]


@pytest.mark.timeout(150)
@pytest.mark.parametrize(("kind", "outage"), OUTAGES)
async def test_tunnel_is_back_within_one_backoff_slot_after_a_hub_outage(
    kind: str, outage: float, karmada: Emulator, member_emulator: Emulator
) -> None:
    """The agent's control-plane reconnect schedule (app.RECONNECT_INITIAL/CAP: 1 s doubling
    to 10 s, +-50 % jitter): after the outage the tunnel is back within one slot, 15 s at most,
    and the outage costs one connection attempt per slot."""
    async with open_hub(kind, cluster_ca_pem=karmada.ca_pem) as hub:
        host, _, port = hub.agent_address.rpartition(":")
        async with LinkProxy(host, int(port)) as link:
            front = Hub(kind, link.address, hub.connect_url, hub.server_ca, hub.restart, hub.log)
            backoff = Backoff(initial=RECONNECT_INITIAL, cap=RECONNECT_CAP)
            async with tunnel_for(
                "member1", member_emulator, karmada, front, backoff=backoff
            ) as bed:  # type: ignore[attr-defined]
                await connected(bed)
                loop = asyncio.get_running_loop()
                link.refuse = True
                cut = loop.time()
                link.reset()
                await polling.eventually(lambda: not bed.tunnel.connected.is_set(), what="cut")
                await asyncio.sleep(outage)  # the outage itself: nothing to wait for
                link.refuse = False
                back = loop.time()
                await asyncio.wait_for(bed.tunnel.connected.wait(), RECONNECT_CAP * 1.5 + 2)
                delay = loop.time() - back
                attempts = link.attempts_since(cut)
                print(
                    f"{kind}: outage {outage:.0f}s, back {delay:.1f}s after recovery, {attempts} attempts"
                )
                assert delay <= RECONNECT_CAP * 1.5 + 0.5
                assert attempts <= outage / RECONNECT_INITIAL / 2 + 4
                assert await kube_system_uid(bed, member_emulator)


@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_token_authentication_instead_of_client_certificates(
    kind: str, karmada: Emulator, member_emulator: Emulator, tmp_path: Path
) -> None:
    """The proxy-server's token review (--agent-namespace/--agent-service-account/
    --authentication-audience against the control plane): --tunnel-token-file."""
    auth = TokenAuth(karmada)
    token_file = tmp_path / "agent.token"
    token_file.write_text(await auth.token())
    wrong_file = tmp_path / "wrong.token"
    wrong_file.write_text(await auth.token("someone-else"))
    async with open_hub(kind, cluster_ca_pem=karmada.ca_pem, token_auth=auth) as hub:
        async with tunnel_for(
            "member1", member_emulator, karmada, hub, extra=(f"--tunnel-token-file={wrong_file}",)
        ) as refused:  # type: ignore[attr-defined]
            await polling.eventually(
                lambda: refused.metric("karmada_agent_tunnel_connects_total", result="error") >= 1,
                what="a refused connection",
            )
            assert not refused.tunnel.connected.is_set()
        async with tunnel_for(
            "member1", member_emulator, karmada, hub, extra=(f"--tunnel-token-file={token_file}",)
        ) as bed:  # type: ignore[attr-defined]
            await connected(bed)
            assert await kube_system_uid(bed, member_emulator)


@pytest.mark.parametrize("kind", HUB_KINDS)
async def test_agents_request_their_tunnel_token_and_a_users_certificate_claims_nothing(
    kind: str, karmada: Emulator, member_emulator: Emulator, tmp_path: Path
) -> None:
    """The proxy-server's token review for karmada-system/karmada-tunnel-agent (the seeded
    prerequisites: only the agents group may request its tokens). An agent requests its own
    (--tunnel-service-account) and holds its route; a tunnel started with a user's Karmada
    certificate (no grant) gets no token and claims no route."""
    auth = TokenAuth(karmada)
    flag = f"--tunnel-service-account={auth.namespace}/{auth.service_account}"
    agent_user = "system:karmada:agent:member1"
    agent_client = await client_for(
        karmada.write_kubeconfig(tmp_path / "agent", user=agent_user, groups=list(AGENT_GROUPS))
    )
    user_client = await client_for(karmada.write_kubeconfig(tmp_path / "alice", user="alice"))
    try:
        async with (
            open_hub(kind, cluster_ca_pem=karmada.ca_pem, token_auth=auth) as hub,
            run_emulator("member", name="elsewhere") as elsewhere,
            agent_tunnel(
                cluster="member1",
                member_emulator=elsewhere,
                karmada_ca_pem=karmada.ca_pem,
                client_cert=karmada.issue_client_cert("alice"),
                server_address=hub.agent_address,
                proxy_url=hub.connect_url,
                server_ca_pem=hub.server_ca.cert_pem,
                karmada_client=user_client,
                extra=(flag,),
            ) as impostor,
        ):
            await polling.eventually(
                lambda: impostor.metric("karmada_agent_tunnel_connects_total", result="error") >= 1,
                what="the impostor's attempt failing",
            )
            assert not impostor.tunnel.connected.is_set()
            async with tunnel_for(  # type: ignore[attr-defined]
                "member1",
                member_emulator,
                karmada,
                hub,
                extra=(flag,),
                karmada_client=agent_client,
            ) as bed:
                await connected(bed)
                assert await kube_system_uid(bed, member_emulator)
            assert not impostor.tunnel.connected.is_set()
    finally:
        await agent_client.close()
        await user_client.close()


async def test_a_client_that_stops_reading_holds_up_the_member_not_the_agents_memory(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    """Backpressure end to end: flow control on the agent's call and its relay's bounded queue
    stop the member's response, instead of buffering it, while the client does not read."""
    count, size = BULK_COUNT, BULK_SIZE
    await _fill_bulk(member_emulator)
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        reader, writer = await _slow_reader(bed, hub, member_emulator)
        [session] = bed.tunnel.sessions.values()
        relay = await polling.eventually(
            lambda: next(iter(session.relays.values()), None), what="relay"
        )
        sent: list[int] = []

        def stalled() -> bool:
            sent.append(relay.bytes_out)
            return len(sent) > 10 and sent[-1] == sent[-10] and sent[-1] > 0

        await polling.eventually(stalled, timeout=20, interval=0.1, what="the relay to stall")
        assert relay.bytes_out < count * size / 2, f"{relay.bytes_out} bytes sent while unread"
        body = b""
        while chunk := await reader.read(1 << 20):
            body += chunk
        writer.close()
        assert body.startswith(b"HTTP/1.1 200")
        assert body.count(b'"name":"big-') == count
        assert relay.bytes_out > count * size


async def test_slow_readers_that_go_away_mid_response_leave_the_route_working(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    """A client reads a large answer slowly, so the agent's DATA waits for the proxy-server's
    window, then disconnects: its relay ends while its send waits. All of the member's
    connections share the agent's one call, so a message cut off there would wedge (or garble)
    the route for everyone; 20 times over, the route answers after each."""
    await _fill_bulk(member_emulator)
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        expected = await kube_system_uid(bed, member_emulator)
        [session] = bed.tunnel.sessions.values()
        for attempt in range(20):
            reader, writer = await _slow_reader(bed, hub, member_emulator)
            await reader.readexactly(4096)  # the answer has begun, then nothing is read
            await polling.eventually(
                lambda: session.stream.send_window == 0,
                timeout=20,
                what=f"the agent's send to wait for window (attempt {attempt})",
            )
            writer.transport.abort()
            assert await kube_system_uid(bed, member_emulator) == expected, hub.log()
        assert bed.tunnel.sessions.get(session.server_id) is session  # never reconnected


BULK_COUNT, BULK_SIZE = 30, 1024 * 1024 - 4096


async def _fill_bulk(member: Emulator) -> None:
    """BULK_COUNT ConfigMaps of about 1 MiB each in the member's namespace bulk."""
    async with member.client() as admin:
        await admin.post("/api/v1/namespaces", json={"metadata": {"name": "bulk"}})
        for i in range(BULK_COUNT):
            body = {"metadata": {"name": f"big-{i}"}, "data": {"x": "y" * BULK_SIZE}}
            assert (await admin.post("/api/v1/namespaces/bulk/configmaps", json=body)).is_success


async def _slow_reader(
    bed: AgentTunnel, hub: Hub, member: Emulator
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A CONNECT through the proxy-server, TLS for the route, a GET of every big ConfigMap, on a
    socket with a small receive buffer."""
    host, _, port = hub.connect_url.removeprefix("http://").rpartition(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
    reader, writer = await asyncio.open_connection(sock=sock)
    route = bed.publication.api_endpoint.removeprefix("https://")
    writer.write(f"CONNECT {route} HTTP/1.1\r\nHost: {route}\r\n\r\n".encode())
    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
    context = ssl.create_default_context(
        cadata=base64.b64decode(bed.publication.ca_bundle).decode()
    )
    await writer.start_tls(context, server_hostname=route.rpartition(":")[0])
    writer.write(
        f"GET /api/v1/namespaces/bulk/configmaps HTTP/1.1\r\nHost: {route}\r\n"
        f"Authorization: Bearer {member.admin_token}\r\nAccept-Encoding: identity\r\n"
        "Connection: close\r\n\r\n".encode()
    )
    await writer.drain()
    return reader, writer


async def test_beyond_the_stream_cap_a_request_is_told_so_and_counted(
    hub: Hub, karmada: Emulator, member_emulator: Emulator, tmp_path: Path
) -> None:
    async with tunnel_for(  # type: ignore[attr-defined]
        "member1", member_emulator, karmada, hub, extra=("--tunnel-max-streams=2",)
    ) as bed:
        await connected(bed)
        config = member_kubeconfig(
            tmp_path / "tunnel.kubeconfig", bed.publication, token=member_emulator.admin_token
        )
        # kubectl as an operator's usually is: with the cluster's discovery cached (a refused
        # discovery request shows kubectl's own words, not the server's).
        await kubectl(config, "get", "namespaces")
        async with (
            control_plane_client(bed.publication, token=member_emulator.admin_token) as one,
            control_plane_client(bed.publication, token=member_emulator.admin_token) as two,
            one.stream("GET", "/api/v1/namespaces", params={"watch": "1"}),
            two.stream("GET", "/api/v1/configmaps", params={"watch": "1"}),
        ):
            assert bed.tunnel.limit.open == 2
            async with control_plane_client(
                bed.publication, token=member_emulator.admin_token
            ) as third:
                refused = await third.get("/api/v1/namespaces")
            assert refused.status_code == 429, refused.text
            status = refused.json()
            assert (status["kind"], status["reason"]) == ("Status", "TooManyRequests")
            assert "tunnel of cluster member1 carries at most 2 connections" in status["message"]
            with pytest.raises(AssertionError) as failed:
                await kubectl(config, "get", "namespaces")
            assert "Error from server (TooManyRequests): the tunnel of cluster member1 carries" in (
                str(failed.value)
            )
            assert bed.metric("karmada_agent_tunnel_refused_streams_total") == 2
            assert bed.metric("karmada_agent_tunnel_max_streams") == 2
        await polling.eventually(lambda: bed.tunnel.limit.open == 0, what="the watches closed")
        assert await kube_system_uid(bed, member_emulator)


async def test_a_member_api_server_that_does_not_answer_is_named_to_the_user(
    hub: Hub, karmada: Emulator, member_emulator: Emulator
) -> None:
    async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
        await connected(bed)
        await member_emulator.faults.go_offline()
        async with control_plane_client(bed.publication, token=member_emulator.admin_token) as c:
            response = await c.get("/api/v1/namespaces")
        assert response.status_code == 503, response.text
        status = response.json()
        assert status["reason"] == "ServiceUnavailable"
        assert status["message"].startswith(
            f"the API server of cluster member1 ({member_emulator.url.removeprefix('https://')})"
            " does not answer its karmada-agent: dial tcp"
        ), status["message"]
        await member_emulator.faults.come_back()
        assert await kube_system_uid(bed, member_emulator)


async def test_a_route_claimed_by_someone_else_is_noticed_said_and_taken_back(
    hub: Hub, karmada: Emulator, member_emulator: Emulator, tmp_path: Path
) -> None:
    """A tunnel agent of another cluster (its own member, its own tunnel CA, a certificate of
    Karmada's CA) claims member1's route first. member1's agent checks its route through the
    control plane, sees the answer did not come from it, says so (condition, Warning Event,
    metric), and holds the route again once the claimant's call ends."""
    karmada_client = await client_for(karmada.write_kubeconfig(tmp_path / "karmada"))
    await karmada_client.create(
        CLUSTERS, {"apiVersion": CLUSTERS.api_version, "kind": "Cluster",
                   "metadata": {"name": "member1"}, "spec": {"syncMode": "Pull"}},
    )  # fmt: skip
    events = EventEmitter(karmada_client)
    async with run_emulator("member", name="elsewhere") as elsewhere:
        claimant = contextlib.AsyncExitStack()
        try:
            await connected(
                await claimant.enter_async_context(
                    tunnel_for("member1", elsewhere, karmada, hub)  # type: ignore[arg-type]
                )
            )
            async with tunnel_for("member1", member_emulator, karmada, hub) as bed:  # type: ignore[attr-defined]
                await connected(bed)

                async def probe() -> tuple[int, str]:
                    """As karmada-aggregated-apiserver's cluster proxy answers /version."""
                    async with control_plane_client(
                        bed.publication, token=member_emulator.admin_token
                    ) as client:
                        try:
                            response = await client.get("/version")
                        except httpx.HTTPError as exc:
                            return 503, f"error trying to reach service: {exc}"
                    return response.status_code, response.text

                check = bed.tunnel.route_check(probe, karmada=karmada_client, events=events)
                verdict = await check.check_and_report()
                assert verdict.held is False
                assert "CERTIFICATE_VERIFY_FAILED" in verdict.seen
                assert bed.metric("karmada_agent_tunnel_route_held") == 0
                assert bed.metric("karmada_agent_tunnel_route_checks_total", result="claimed") == 1
                condition = await _route_condition(karmada_client)
                assert (condition["status"], condition["reason"]) == ("False", "ClaimedElsewhere")
                assert "CERTIFICATE_VERIFY_FAILED" in condition["message"]
                await events.flush(10)
                warned = await karmada_client.list(EVENTS, namespace="default")
                assert [e["reason"] for e in warned["items"]] == ["TunnelRouteClaimed"]
                assert warned["items"][0]["type"] == "Warning"

                await claimant.aclose()  # the claimant's call ends
                verdict = await polling.eventually(
                    check.check_and_report, until=lambda v: v.held, what="the route back"
                )
                assert bed.metric("karmada_agent_tunnel_route_held") == 1
                condition = await _route_condition(karmada_client)
                assert (condition["status"], condition["reason"]) == ("True", "AnsweredByAgent")
                await events.flush(10)
                recorded = await karmada_client.list(EVENTS, namespace="default")
                assert sorted((e["reason"], e["type"]) for e in recorded["items"]) == [
                    ("TunnelRouteClaimed", "Warning"),
                    ("TunnelRouteRecovered", "Normal"),
                ]
        finally:
            await claimant.aclose()
            await events.stop()
            await karmada_client.close()


async def _route_condition(karmada_client: KubeClient) -> dict[str, str]:
    cluster = await karmada_client.get(CLUSTERS, "member1")
    return next(c for c in cluster["status"]["conditions"] if c["type"] == "TunnelRouteHeld")
