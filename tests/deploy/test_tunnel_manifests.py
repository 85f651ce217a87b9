"""deploy/ for the tunnel: the member overlay and the control plane's proxy-server, rendered with
the real kubectl and checked."""

from __future__ import annotations

from pathlib import Path

from agent.options import parse_options
from tests.deploy.test_manifests import DEPLOY, agent_container, find, render, with_params

PROXY_SERVER_IMAGE = "registry.k8s.io/kas-network-proxy/proxy-server:v0.36.0"


def test_tunnel_overlay_turns_the_tunnel_on_from_the_parameters(tmp_path: Path) -> None:
    default = agent_container(
        find(render(DEPLOY / "overlays" / "tunnel"), "Deployment", "karmada-agent")
    )
    assert not parse_options(default["command"][1:]).tunnel_enabled
    deploy = with_params(tmp_path, clusterName="edge-7", tunnelServerAddress="hub.example:8091")
    objects = render(deploy / "overlays" / "tunnel")
    command = agent_container(find(objects, "Deployment", "karmada-agent"))["command"]
    options = parse_options(command[1:])
    assert options.tunnel_enabled
    assert options.tunnel_server_address == "hub.example:8091"
    assert options.tunnel_proxy_url == "http://karmada-tunnel-connect.karmada-system.svc:8090"
    assert options.cluster_name == "edge-7"
    # Upstream's flags keep their positions; the tunnel's come after them.
    assert command[15:] == [
        "--tunnel-server-address=hub.example:8091",
        "--tunnel-proxy-url=http://karmada-tunnel-connect.karmada-system.svc:8090",
        "--tunnel-service-account=karmada-system/karmada-tunnel-agent",
    ]
    assert not [o for o in objects if o["kind"] == "ConfigMap"]


def test_proxy_server_is_the_stock_image_in_connect_mode_with_dest_host_only() -> None:
    objects = render(DEPLOY / "control-plane" / "tunnel-server")
    deployment = find(objects, "Deployment", "karmada-tunnel-server")
    pod = deployment["spec"]["template"]["spec"]
    server, relay = pod["containers"]
    assert server["image"] == PROXY_SERVER_IMAGE
    assert relay["image"].startswith("docker.io/alpine/socat:")
    assert not relay["image"].endswith(":latest")
    flags = dict(
        arg.removeprefix("--").split("=", 1) for arg in server["command"][1:] if "=" in arg
    )
    assert flags["mode"] == "http-connect"
    assert flags["proxy-strategies"] == "destHost"
    assert flags["server-port"] == "0"
    assert flags["cluster-ca-cert"].startswith("/etc/karmada-tunnel/")
    # Agents: a token of the ServiceAccount only agents may request tokens for.
    assert (
        flags["agent-namespace"],
        flags["agent-service-account"],
        flags["authentication-audience"],
    ) == ("karmada-system", "karmada-tunnel-agent", "karmada-tunnel")
    assert flags["kubeconfig"].startswith("/etc/karmada-tunnel-config/")
    socket = flags["uds-name"]
    assert relay["args"] == ["TCP-LISTEN:8090,fork,reuseaddr", f"UNIX-CONNECT:{socket}"]
    for container in (server, relay):
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    connect = find(objects, "Service", "karmada-tunnel-connect")
    assert connect["spec"]["type"] == "ClusterIP"
    assert find(objects, "Service", "karmada-tunnel-agent")["spec"]["ports"][0]["port"] == 8091


def test_only_the_proxying_karmada_components_reach_the_connect_port() -> None:
    objects = render(DEPLOY / "control-plane" / "tunnel-server")
    policy = find(objects, "NetworkPolicy", "karmada-tunnel-server")["spec"]
    connect_rules = [rule for rule in policy["ingress"] if {"port": 8090} in rule["ports"]]
    assert len(connect_rules) == 1
    allowed = {peer["podSelector"]["matchLabels"]["app"] for peer in connect_rules[0]["from"]}
    assert allowed == {"karmada-aggregated-apiserver", "karmada-search", "karmada-metrics-adapter"}
    open_rules = [rule for rule in policy["ingress"] if "from" not in rule]
    assert {p["port"] for rule in open_rules for p in rule["ports"]} == {8091, 8092}
