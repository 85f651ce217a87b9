"""The forms flag values must have (agent/options/formats.py)."""

from __future__ import annotations

import pytest

from agent.options.formats import (
    dns1123_label_problem,
    dns1123_subdomain_problem,
    host_port_problem,
    label_value_problem,
    secret_key_problem,
    url_problem,
)


def test_dns1123_labels() -> None:
    assert dns1123_label_problem("edge-7") is None
    assert "DNS-1123 label" in (dns1123_label_problem("Edge") or "")
    assert "DNS-1123 label" in (dns1123_label_problem("-a") or "")
    assert dns1123_label_problem("a" * 49, 48) == "must be no more than 48 characters"
    assert dns1123_label_problem("a" * 63) is None


def test_dns1123_subdomains() -> None:
    assert dns1123_subdomain_problem("karmada-kubeconfig.v2") is None
    assert dns1123_subdomain_problem("Bad_") == "must be a valid object name (DNS-1123 subdomain)"
    assert dns1123_subdomain_problem("a" * 254) is not None


def test_label_values() -> None:
    assert label_value_problem("") is None
    assert label_value_problem("eu-west_1.a") is None
    assert "valid label value" in (label_value_problem("not valid") or "")
    assert label_value_problem("r" * 64) == "must be no more than 63 characters"


def test_secret_keys() -> None:
    assert secret_key_problem("karmada.config") is None
    assert "Secret data key" in (secret_key_problem("a/b") or "")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("https://10.0.0.1:6443", None),
        ("ftp://h:21", "must be a URL with scheme https or http, like https://x:1"),
        ("https://", "has no host"),
        ("https://h:99999", "is not a valid URL"),
        ("https://h/?q=1", "must not have a query or fragment"),
    ],
)
def test_urls(value: str, fragment: str | None) -> None:
    problem = url_problem(value, ("https", "http"), "https://x:1")
    if fragment is None:
        assert problem is None
    else:
        assert fragment in (problem or "")


@pytest.mark.parametrize(
    ("value", "ok"),
    [("hub:8091", True), ("hub", False), (":8091", False), ("hub:0", False), ("hub:65536", False)],
)
def test_host_port(value: str, ok: bool) -> None:
    assert (host_port_problem(value) is None) is ok
