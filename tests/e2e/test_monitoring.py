"""deploy/monitoring is importable and true to the agent: every alert rule and dashboard query
parses as PromQL (promql-parser, Prometheus' grammar), the rules are complete (alert, severity,
summary), and every metric they read is exported by a running agent (scraped over HTTP after a
Work, in tunnel mode so the tunnel's families are there too, with a client certificate so
certRotation's are).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from agent.resources import WORKS
from emulator.emulator import run_emulator
from emulator.works import configmap, control_plane_work
from tests.agent.tunnel.harness import open_hub

from .support import DEPLOY, client_for, cluster_ready, eventually, running_agent, work_applied

MONITORING = DEPLOY / "monitoring"
RULES = MONITORING / "prometheus-rules.yaml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
CLUSTER = "member1"
SEVERITIES = {"warning", "critical"}
# Grafana's variables, replaced by values of the same kind before parsing.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "${datasource}": "prometheus"}
_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*[A-Za-z_][A-Za-z0-9_]*\)$")


def grafana_to_promql(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    # Template variables stand inside regex matchers ("$job"): any value matches there.
    return _VARIABLE.sub(".*", expr)


def rule_queries() -> Iterator[tuple[str, str]]:
    document = yaml.safe_load(RULES.read_text())
    for group in document["groups"]:
        for rule in group["rules"]:
            yield f"rule {rule.get('alert')}", rule["expr"]


def dashboard_queries() -> Iterator[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield f"panel {panel['title']!r} {target['refId']}", grafana_to_promql(target["expr"])
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.match(variable["query"]["query"])
        assert match, f"variable {variable['name']}: not label_values(selector, label)"
        yield f"variable {variable['name']}", grafana_to_promql(match.group(1))


def metric_names(node: Any) -> Iterator[str]:
    """The metric names an expression reads (strict: an unknown node type is an error)."""
    if isinstance(node, promql_parser.VectorSelector):
        name = node.name or next(
            (m.value for m in node.matchers.matchers if m.name == "__name__"), None
        )
        assert name, f"a selector without a metric name: {node}"
        yield name
    elif isinstance(node, promql_parser.MatrixSelector):
        yield from metric_names(node.vector_selector)
    elif isinstance(node, promql_parser.Call):
        for arg in node.args:
            yield from metric_names(arg)
    elif isinstance(node, promql_parser.AggregateExpr):
        yield from metric_names(node.expr)
        if node.param is not None:
            yield from metric_names(node.param)
    elif isinstance(node, promql_parser.BinaryExpr):
        yield from metric_names(node.lhs)
        yield from metric_names(node.rhs)
    elif isinstance(
        node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
    ):
        yield from metric_names(node.expr)
    elif not isinstance(node, promql_parser.NumberLiteral | promql_parser.StringLiteral):
        raise AssertionError(f"unexpected PromQL node {type(node).__name__}: {node}")


def queried_metrics() -> dict[str, set[str]]:
    """metric name -> where it is read."""
    found: dict[str, set[str]] = {}
    for where, expr in [*rule_queries(), *dashboard_queries()]:
        for name in metric_names(promql_parser.parse(expr)):
            found.setdefault(name, set()).add(where)
    return found


def test_every_rule_and_dashboard_query_parses() -> None:
    queries = [*rule_queries(), *dashboard_queries()]
    assert len(queries) >= 20
    unparsable = {}
    for where, expr in queries:
        try:
            promql_parser.parse(expr)
        except ValueError as exc:
            unparsable[where] = f"{expr}: {exc}"
    assert unparsable == {}


def test_the_parser_refuses_what_prometheus_refuses() -> None:
    """The check has teeth: promql-parser rejects malformed expressions."""
    for bad in ("rate(x[5m]", "sum by (job) x >", "x{a=}", "histogram_quantile(0.9 x)"):
        with pytest.raises(ValueError):  # noqa: PT011 - the parser's only error type
            promql_parser.parse(bad)


def test_rules_are_complete() -> None:
    document = yaml.safe_load(RULES.read_text())
    names = []
    for group in document["groups"]:
        assert group["name"]
        for rule in group["rules"]:
            names.append(rule["alert"])
            assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
            assert rule["labels"]["severity"] in SEVERITIES, rule["alert"]
            assert rule["annotations"]["summary"], rule["alert"]
            assert rule["annotations"]["description"], rule["alert"]
            if "for" in rule:
                assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
    assert len(names) == len(set(names)), names
    # What the issue asks the monitoring to cover, each read by a rule.
    read = " ".join(rule["expr"] for group in document["groups"] for rule in group["rules"])
    for metric in (
        "work_sync_workload_duration_seconds_count",
        "workqueue_depth",
        "workqueue_queue_duration_seconds_bucket",
        "karmada_agent_cluster_lease_last_renew_timestamp_seconds",
        "karmada_agent_client_certificate_expiration_seconds",
        "konnectivity_network_proxy_agent_open_server_connections",
        "karmada_agent_clock_skew_seconds",
        "karmada_agent_contested_objects",
    ):
        assert metric in read, metric


async def test_every_queried_metric_is_exported_by_a_running_agent(tmp_path: Path) -> None:
    wanted = queried_metrics()
    async with (
        run_emulator("karmada", name="karmada") as cp,
        run_emulator("member", name=CLUSTER) as member,
        open_hub("double", cluster_ca_pem=cp.ca_pem) as hub,
    ):
        # A client certificate: certRotation runs, and it authenticates to the proxy-server.
        karmada_kc = cp.write_kubeconfig(
            tmp_path / "karmada", user=f"system:karmada:agent:{CLUSTER}", groups=["system:masters"]
        )
        member_kc = member.write_kubeconfig(tmp_path / "member")
        ca_file = tmp_path / "proxy-server-ca.crt"
        ca_file.write_bytes(hub.server_ca.cert_pem)
        admin = await client_for(cp.write_kubeconfig(tmp_path / "admin"))
        try:
            async with running_agent(
                karmada_kc, member_kc, CLUSTER,
                f"--tunnel-server-address={hub.agent_address}",
                f"--tunnel-server-ca-file={ca_file}",
                "--tunnel-server-name=localhost",
                f"--tunnel-proxy-url={hub.connect_url}",
                "--metrics-bind-address=127.0.0.1:0",
            ) as (_, agent):  # fmt: skip
                await eventually(
                    lambda: cluster_ready(admin, CLUSTER), timeout=60, what="Cluster Ready"
                )
                work = control_plane_work(CLUSTER, "monitored", [configmap("monitored")])
                await admin.create(WORKS, work, namespace=f"karmada-es-{CLUSTER}")
                await eventually(
                    lambda: work_applied(admin, CLUSTER, "monitored"), timeout=30, what="applied"
                )
                assert agent.serving is not None
                assert agent.serving.metrics is not None
                url = f"http://127.0.0.1:{agent.serving.metrics.port}/metrics"

                async def exported() -> set[str]:
                    async with httpx.AsyncClient() as http:
                        text = (await http.get(url)).text
                    names = {
                        sample.name
                        for family in text_string_to_metric_families(text)
                        for sample in family.samples
                    }
                    missing = sorted(set(wanted) - names)
                    assert not missing, f"not (yet) exported: {missing}"
                    return names

                names = await eventually(exported, timeout=30, what="every queried metric")
        finally:
            await admin.close()
    assert set(wanted) <= names
