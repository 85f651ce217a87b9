"""--tunnel-* flags: off by default, checked at start, and what registration writes with them."""

from __future__ import annotations

import pytest

from agent.options import OptionsError, parse_options
from agent.registration import desired_cluster_spec
from agent.tunnel.route import TunnelPublication


def parse(*args: str) -> object:
    return parse_options(["--cluster-name=edge-7", *args])


def test_off_by_default_and_on_with_an_address() -> None:
    assert not parse_options(["--cluster-name=edge-7"]).tunnel_enabled
    options = parse_options(["--cluster-name=edge-7", "--tunnel-server-address=hub.example:8091"])
    assert options.tunnel_enabled
    assert options.tunnel_proxy_url == "http://karmada-tunnel-connect.karmada-system.svc:8090"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (
            ["--tunnel-server-address=hub.example"],
            "--tunnel-server-address: 'hub.example' is not host:port",
        ),
        (
            ["--tunnel-server-address=hub:8091", "--cluster-api-endpoint=https://10.0.0.1:6443"],
            "--cluster-api-endpoint: cannot be combined with --tunnel-server-address",
        ),
        (
            ["--tunnel-server-address=hub:8091", "--proxy-server-address=http://p:3128"],
            "--proxy-server-address: cannot be combined",
        ),
        (
            ["--tunnel-server-address=hub:8091", "--report-secrets=KubeCredentials"],
            "--report-secrets: must include KubeImpersonator",
        ),
        (
            ["--tunnel-server-address=hub:8091", "--tunnel-proxy-url=https://hub:8090"],
            "only a plain http CONNECT proxy works",
        ),
        (["--tunnel-server-address=hub:8091", "--tunnel-domain=Bad_Domain"], "--tunnel-domain"),
        (
            ["--tunnel-server-address=hub:8091", "--tunnel-keepalive-time=10s"],
            "--tunnel-keepalive-time: must be at least 30s",
        ),
    ],
)
def test_bad_tunnel_flags_are_refused_with_their_flag(args: list[str], problem: str) -> None:
    with pytest.raises(OptionsError) as caught:
        parse(*args)
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_tunnel_mode_spec_names_the_route_the_proxy_and_the_ca_secret() -> None:
    options = parse_options(
        [
            "--cluster-name=edge-7",
            "--tunnel-server-address=hub:8091",
            "--report-secrets=KubeImpersonator",
        ]
    )
    publication = TunnelPublication(
        "https://edge-7.karmada-tunnel.invalid:443", "http://p:8090", "Q0E="
    )
    spec = desired_cluster_spec(
        options,
        "uid-1",
        member_proxy_url="http://ignored:1",
        insecure_skip_tls_verification=True,
        tunnel=publication,
    )
    assert spec["apiEndpoint"] == publication.api_endpoint
    assert spec["proxyURL"] == "http://p:8090"
    assert spec["insecureSkipTLSVerification"] is False
    # Without KubeCredentials the Secret still exists, for the caBundle.
    assert spec["secretRef"] == {"namespace": "karmada-cluster", "name": "edge-7"}
    assert spec["impersonatorSecretRef"]["name"] == "edge-7-impersonator"
