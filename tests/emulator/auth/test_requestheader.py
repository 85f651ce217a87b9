"""Front-proxy (requestheader) authentication, and the headers a front proxy sends."""

from __future__ import annotations

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from emulator.authn import Authenticator
from emulator.errors import ApiError
from emulator.pki import CertificateAuthority
from emulator.requestheader import (
    RequestHeaderConfig,
    escape_extra_key,
    is_identity_header,
    issued_by,
    proxy_headers,
)
from emulator.wire import ApiRequest, UserInfo

from .helpers import UNAUTHORIZED, FakeStore


@pytest.fixture(scope="module")
def client_ca() -> CertificateAuthority:
    return CertificateAuthority.generate("client-ca")


@pytest.fixture(scope="module")
def proxy_ca() -> CertificateAuthority:
    return CertificateAuthority.generate("front-proxy-ca")


@pytest.fixture
def authn(client_ca: CertificateAuthority, proxy_ca: CertificateAuthority) -> Authenticator:
    return Authenticator(
        static_tokens={},
        sa_tokens=None,
        lookup=FakeStore().lookup,
        client_ca_pem=client_ca.cert_pem,
        requestheader=RequestHeaderConfig(proxy_ca.cert_pem),
    )


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def _request(cert_pem: bytes, headers: list[tuple[str, str]]) -> ApiRequest:
    """As the fronts hand it over: lower-case names, repeated headers joined with ", "."""
    joined: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return ApiRequest("GET", "/api/v1/namespaces", headers=joined, peer_cert_der=_der(cert_pem))


def test_a_front_proxy_names_the_user_and_its_headers_are_dropped(
    authn: Authenticator, proxy_ca: CertificateAuthority
) -> None:
    cert, _ = proxy_ca.issue("front-proxy-client")
    user = UserInfo(
        "alice",
        ("dev", "system:authenticated"),
        "uid-1",
        {"authentication.kubernetes.io/credential-id": ("X509SHA256=ab",), "scopes": ("a", "b")},
    )
    req = _request(cert, [*proxy_headers(user), ("Accept", "application/json")])
    assert authn.authenticate(req) == user
    assert [h for h in req.headers if is_identity_header(h)] == []
    assert req.headers["accept"] == "application/json"


def test_the_extra_key_travels_escaped_as_client_go_escapes_it() -> None:
    assert escape_extra_key("authentication.kubernetes.io/credential-id") == (
        "authentication.kubernetes.io%2Fcredential-id"
    )
    assert escape_extra_key("100%") == "100%25"
    headers = proxy_headers(UserInfo("u", (), "", {"a/b": ("1",)}))
    assert headers == [("X-Remote-User", "u"), ("X-Remote-Extra-a%2Fb", "1")]


def test_a_proxy_cn_that_is_not_allowed_is_not_trusted(
    authn: Authenticator, proxy_ca: CertificateAuthority
) -> None:
    cert, _ = proxy_ca.issue("someone-else")
    with pytest.raises(ApiError) as caught:
        authn.authenticate(_request(cert, [("X-Remote-User", "admin")]))
    assert caught.value.status() == UNAUTHORIZED


def test_headers_from_a_client_certificate_are_ignored(
    authn: Authenticator, client_ca: CertificateAuthority
) -> None:
    cert, _ = client_ca.issue("bob", ("team",))
    user = authn.authenticate(_request(cert, [("X-Remote-User", "admin")]))
    assert (user.name, user.groups) == ("bob", ("team", "system:authenticated"))


def test_a_proxy_that_names_nobody_and_foreign_certificates_are_refused(
    authn: Authenticator, proxy_ca: CertificateAuthority
) -> None:
    proxy, _ = proxy_ca.issue("front-proxy-client")
    foreign, _ = CertificateAuthority.generate("other").issue("bob")
    for req in (_request(proxy, []), _request(foreign, [("X-Remote-User", "admin")])):
        with pytest.raises(ApiError) as caught:
            authn.authenticate(req)
        assert caught.value.status() == UNAUTHORIZED


def test_the_published_form_reads_back(proxy_ca: CertificateAuthority) -> None:
    config = RequestHeaderConfig(proxy_ca.cert_pem)
    data = config.configmap_data(b"CLIENT CA\n")
    assert data["requestheader-username-headers"] == '["X-Remote-User"]'
    assert data["requestheader-extra-headers-prefix"] == '["X-Remote-Extra-"]'
    assert RequestHeaderConfig.from_configmap(data) == config


def test_a_certificate_is_verified_against_a_ca_once() -> None:
    """Every request carries the same client certificate: its signature is checked once per
    CA, and the answer still tells which CA signed it."""
    ca, other = CertificateAuthority.generate("ca"), CertificateAuthority.generate("other")
    cert_pem, _ = ca.issue("user", usage="client")
    authority = x509.load_pem_x509_certificate(ca.cert_pem)
    stranger = x509.load_pem_x509_certificate(other.cert_pem)

    def parsed() -> x509.Certificate:  # as each request parses its peer's certificate anew
        return x509.load_pem_x509_certificate(cert_pem)

    assert issued_by(parsed(), authority)
    assert not issued_by(parsed(), stranger)
    hits = issued_by.cache_info().hits
    assert issued_by(parsed(), authority)
    assert not issued_by(parsed(), stranger)
    assert issued_by.cache_info().hits == hits + 2
