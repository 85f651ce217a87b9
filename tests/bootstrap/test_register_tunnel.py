"""`karmada-bootstrap register --tunnel-server-address`: the agent is installed with the tunnel on,
its Karmada client certificate (issued by register) doubling as its tunnel credential."""

from __future__ import annotations

import pytest
import yaml

from agent.options import parse_options
from tests.bootstrap.test_register import CLUSTER, Bed, bed, create_token

__all__ = ["bed"]


async def dry_run(
    bed: Bed, capsys: pytest.CaptureFixture[str], *flags: str
) -> tuple[int, str, str]:
    argv = await create_token(bed, capsys)
    return await bed.cli(
        capsys,
        *argv,
        f"--kubeconfig={bed.member_kubeconfig}",
        "--tunnel-server-address=hub.example:8091",
        *flags,
        "--dry-run",
    )


async def test_dry_run_renders_the_agent_with_the_tunnel(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = await dry_run(bed, capsys)
    assert code == 0, err
    printed = [doc for doc in yaml.safe_load_all(out) if doc]
    [deployment] = [d for d in printed if d["kind"] == "Deployment"]
    command = deployment["spec"]["template"]["spec"]["containers"][0]["command"]
    options = parse_options(command[1:])
    assert options.cluster_name == CLUSTER
    assert options.tunnel_server_address == "hub.example:8091"
    assert options.tunnel_proxy_url == "http://karmada-tunnel-connect.karmada-system.svc:8090"
    # The route replaces the member's own address in the Cluster.
    assert options.cluster_api_endpoint == ""
    # The agent's kubeconfig (client certificate + Karmada CA) is its tunnel credential: no
    # other Secret or file is rendered for the tunnel.
    secrets = {d["metadata"]["name"] for d in printed if d["kind"] == "Secret"}
    assert secrets == {"karmada-kubeconfig"}


async def test_tunnel_flags_are_checked(bed: Bed, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = await dry_run(bed, capsys, "--proxy-server-address=http://proxy:3128")
    assert code != 0
    assert "cannot be combined with --tunnel-server-address" in err
