"""The tunnel's token: requested by the agent for the tunnel ServiceAccount, reused for half its
life, requested again after a refusal; a caller without the grant gets a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.tunnel.grpc_call import GrpcError
from agent.tunnel.token_request import TunnelTokens
from emulator.emulator import run_emulator
from tests.e2e.support import client_for

SERVICE_ACCOUNT = "karmada-system/karmada-tunnel-agent"


async def test_a_token_is_reused_for_half_its_life_and_renewed_after_a_refusal(
    tmp_path: Path,
) -> None:
    now = [0.0]
    async with run_emulator("karmada", name="karmada") as karmada:
        agent = await client_for(
            karmada.write_kubeconfig(
                tmp_path / "agent",
                user="system:karmada:agent:edge-1",
                groups=["system:karmada:agents"],
            )
        )
        alice = await client_for(karmada.write_kubeconfig(tmp_path / "alice", user="alice"))
        try:
            tokens = TunnelTokens(agent, SERVICE_ACCOUNT, "karmada-tunnel", clock=lambda: now[0])
            first = await tokens.token()
            review = {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": first, "audiences": ["karmada-tunnel"]},
            }
            async with karmada.client() as admin:
                reviewed = (
                    await admin.post("/apis/authentication.k8s.io/v1/tokenreviews", json=review)
                ).json()["status"]
            assert reviewed["authenticated"] is True
            assert reviewed["user"]["username"] == (
                "system:serviceaccount:karmada-system:karmada-tunnel-agent"
            )
            now[0] = 1799.0
            assert await tokens.token() == first  # still in the first half of its hour
            now[0] = 1801.0
            second = await tokens.token()
            assert second != first
            tokens.forget()
            assert await tokens.token() not in (first, second)
            with pytest.raises(GrpcError, match="cannot request a token of karmada-system/"):
                await TunnelTokens(alice, SERVICE_ACCOUNT, "karmada-tunnel").token()
        finally:
            await agent.close()
            await alice.close()
