"""Authentication: client certificates, static, bootstrap and service-account tokens."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from emulator.authn import Authenticator, TokenRejectedError
from emulator.errors import ApiError
from emulator.pki import CertificateAuthority, ServiceAccountTokenIssuer
from emulator.wire import UserInfo

from .helpers import UNAUTHORIZED, FakeStore, bootstrap_secret, request, secret

NOW = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
ADMIN_TOKEN = "admin-token-123"
TOKEN_ID = "abcdef"
TOKEN_SECRET = "0123456789abcdef"
BOOTSTRAP = f"{TOKEN_ID}.{TOKEN_SECRET}"
AUTHENTICATED = "system:authenticated"


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test-ca", now=NOW - timedelta(days=1))


@pytest.fixture(scope="module")
def issuer() -> ServiceAccountTokenIssuer:
    return ServiceAccountTokenIssuer.generate()


@pytest.fixture
def store() -> FakeStore:
    return FakeStore()


@pytest.fixture
def authn(store: FakeStore, issuer: ServiceAccountTokenIssuer) -> Authenticator:
    return Authenticator(
        static_tokens={ADMIN_TOKEN: UserInfo("admin", ("system:masters",))},
        sa_tokens=issuer,
        lookup=store.lookup,
        clock=lambda: NOW,
    )


def _reject(authn: Authenticator, **headers: str) -> None:
    with pytest.raises(ApiError) as caught:
        authn.authenticate(request(**headers))
    assert caught.value.status() == UNAUTHORIZED


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


# --- anonymous and static tokens ---------------------------------------------------------


def test_no_credentials_is_anonymous(authn: Authenticator) -> None:
    user = authn.authenticate(request())
    assert user == UserInfo("system:anonymous", ("system:unauthenticated",))


def test_no_credentials_without_anonymous_is_401(store: FakeStore) -> None:
    strict = Authenticator(static_tokens={}, sa_tokens=None, lookup=store.lookup, anonymous=False)
    _reject(strict)


def test_non_bearer_authorization_is_ignored(authn: Authenticator) -> None:
    assert authn.authenticate(request(authorization="Basic YTpi")).name == "system:anonymous"
    assert authn.authenticate(request(authorization="Bearer")).name == "system:anonymous"


def test_static_token(authn: Authenticator) -> None:
    user = authn.authenticate(request(**_bearer(ADMIN_TOKEN)))
    assert user == UserInfo("admin", ("system:masters", AUTHENTICATED))
    lower = authn.authenticate(request(authorization=f"bearer {ADMIN_TOKEN}"))
    assert lower.name == "admin"


def test_unknown_token_is_401_not_anonymous(authn: Authenticator) -> None:
    _reject(authn, **_bearer("nobody-knows-this"))
    with pytest.raises(TokenRejectedError, match="invalid bearer token"):
        authn.authenticate_token("nobody-knows-this")


# --- client certificates -----------------------------------------------------------------


def test_client_certificate_gives_cn_and_organizations(
    authn: Authenticator, ca: CertificateAuthority
) -> None:
    cert_pem, _ = ca.issue("alice", ["devs", "ops"], now=NOW - timedelta(hours=1))
    der = _der(cert_pem)
    req = request()
    req.peer_cert_der = der
    user = authn.authenticate(req)
    assert user.name == "alice"
    assert user.groups == ("devs", "ops", AUTHENTICATED)
    assert user.extra == {
        "authentication.kubernetes.io/credential-id": (
            "X509SHA256=" + hashlib.sha256(der).hexdigest(),
        )
    }


def test_client_certificate_wins_over_a_bad_token(
    authn: Authenticator, ca: CertificateAuthority
) -> None:
    cert_pem, _ = ca.issue("alice", now=NOW - timedelta(hours=1))
    req = request(**_bearer("garbage"))
    req.peer_cert_der = _der(cert_pem)
    assert authn.authenticate(req).name == "alice"


def test_server_only_certificate_is_refused(authn: Authenticator, ca: CertificateAuthority) -> None:
    cert_pem, _ = ca.issue("server", usage="server", now=NOW - timedelta(hours=1))
    req = request()
    req.peer_cert_der = _der(cert_pem)
    with pytest.raises(ApiError) as caught:
        authn.authenticate(req)
    assert caught.value.status() == UNAUTHORIZED


def test_expired_certificate_is_refused(authn: Authenticator, ca: CertificateAuthority) -> None:
    cert_pem, _ = ca.issue("old", lifetime=timedelta(minutes=5), now=NOW - timedelta(hours=1))
    req = request()
    req.peer_cert_der = _der(cert_pem)
    with pytest.raises(ApiError) as caught:
        authn.authenticate(req)
    assert caught.value.code == 401


def test_certificate_without_common_name_is_no_credential(
    authn: Authenticator, ca: CertificateAuthority
) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "org")]))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(NOW - timedelta(hours=1))
        .not_valid_after(NOW + timedelta(hours=1))
        .sign(ca.key, hashes.SHA256())
    )
    req = request()
    req.peer_cert_der = cert.public_bytes(serialization.Encoding.DER)
    assert authn.authenticate(req).name == "system:anonymous"
    req = request(**_bearer(ADMIN_TOKEN))
    req.peer_cert_der = cert.public_bytes(serialization.Encoding.DER)
    assert authn.authenticate(req).name == "admin"


# --- bootstrap tokens --------------------------------------------------------------------


def test_bootstrap_token_authenticates(authn: Authenticator, store: FakeStore) -> None:
    store.put(
        "",
        "secrets",
        bootstrap_secret(
            TOKEN_ID,
            TOKEN_SECRET,
            expiration=(NOW + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            auth_extra_groups="system:bootstrappers:karmada:default-cluster-token,"
            "system:bootstrappers:a,system:bootstrappers:a",
        ),
    )
    user = authn.authenticate(request(**_bearer(BOOTSTRAP)))
    assert user == UserInfo(
        "system:bootstrap:abcdef",
        (
            "system:bootstrappers",
            "system:bootstrappers:a",
            "system:bootstrappers:karmada:default-cluster-token",
            AUTHENTICATED,
        ),
    )


def test_bootstrap_token_without_expiration_never_expires(
    authn: Authenticator, store: FakeStore
) -> None:
    store.put("", "secrets", bootstrap_secret(TOKEN_ID, TOKEN_SECRET))
    user = authn.authenticate(request(**_bearer(BOOTSTRAP)))
    assert user.groups == ("system:bootstrappers", AUTHENTICATED)


@pytest.mark.parametrize(
    "expiration",
    [
        (NOW - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        # Same instant as NOW, in another zone.
        (NOW + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S+02:00"),
        "tomorrow",
        "2999-01-01",  # not RFC 3339: treated as expired, as kube does
    ],
)
def test_expired_or_unparsable_bootstrap_token_is_refused(
    authn: Authenticator, store: FakeStore, expiration: str
) -> None:
    store.put("", "secrets", bootstrap_secret(TOKEN_ID, TOKEN_SECRET, expiration=expiration))
    _reject(authn, **_bearer(BOOTSTRAP))


def test_bootstrap_expiration_follows_the_clock(store: FakeStore) -> None:
    now = [NOW]
    authn = Authenticator(
        static_tokens={}, sa_tokens=None, lookup=store.lookup, clock=lambda: now[0]
    )
    store.put(
        "",
        "secrets",
        bootstrap_secret(TOKEN_ID, TOKEN_SECRET, expiration="2030-06-01T12:30:00.5Z"),
    )
    assert authn.authenticate(request(**_bearer(BOOTSTRAP))).name == "system:bootstrap:abcdef"
    now[0] = NOW + timedelta(minutes=31)
    _reject(authn, **_bearer(BOOTSTRAP))


@pytest.mark.parametrize(
    ("token", "overrides"),
    [
        pytest.param(f"{TOKEN_ID}.ffffffffffffffff", {}, id="wrong-secret"),
        pytest.param(BOOTSTRAP, {"usage_bootstrap_authentication": "false"}, id="usage-false"),
        pytest.param(BOOTSTRAP, {"token_id": "zzzzzz"}, id="token-id-mismatch"),
        pytest.param(BOOTSTRAP, {"auth_extra_groups": "system:masters"}, id="group-prefix"),
        pytest.param(
            BOOTSTRAP, {"auth_extra_groups": "system:bootstrappers:ok,evil"}, id="one-bad-group"
        ),
        pytest.param(
            BOOTSTRAP, {"auth_extra_groups": "system:bootstrappers:trailing:"}, id="group-colon"
        ),
        pytest.param(BOOTSTRAP, {"auth_extra_groups": "system:bootstrappers:"}, id="group-empty"),
        pytest.param(
            BOOTSTRAP, {"auth_extra_groups": "system:bootstrappers:UPPER"}, id="group-upper"
        ),
        pytest.param("ABCDEF.0123456789ABCDEF", {}, id="token-format"),
    ],
)
def test_bad_bootstrap_tokens_are_refused(
    authn: Authenticator, store: FakeStore, token: str, overrides: dict[str, str]
) -> None:
    store.put("", "secrets", bootstrap_secret(TOKEN_ID, TOKEN_SECRET, **overrides))
    _reject(authn, **_bearer(token))


def test_bootstrap_token_missing_usage_is_refused(authn: Authenticator, store: FakeStore) -> None:
    obj = bootstrap_secret(TOKEN_ID, TOKEN_SECRET)
    del obj["data"]["usage-bootstrap-authentication"]
    store.put("", "secrets", obj)
    _reject(authn, **_bearer(BOOTSTRAP))


def test_bootstrap_secret_of_wrong_type_or_place_is_ignored(
    authn: Authenticator, store: FakeStore
) -> None:
    obj = bootstrap_secret(TOKEN_ID, TOKEN_SECRET)
    obj["type"] = "Opaque"
    store.put("", "secrets", obj)
    _reject(authn, **_bearer(BOOTSTRAP))
    elsewhere = bootstrap_secret(TOKEN_ID, TOKEN_SECRET)
    elsewhere["metadata"]["namespace"] = "default"
    store.objects.clear()
    store.put("", "secrets", elsewhere)
    _reject(authn, **_bearer(BOOTSTRAP))


def test_bootstrap_secret_being_deleted_is_refused(authn: Authenticator, store: FakeStore) -> None:
    obj = bootstrap_secret(TOKEN_ID, TOKEN_SECRET)
    obj["metadata"]["deletionTimestamp"] = "2030-06-01T11:00:00Z"
    store.put("", "secrets", obj)
    _reject(authn, **_bearer(BOOTSTRAP))


# --- legacy service-account tokens -------------------------------------------------------


def _service_account(
    store: FakeStore, issuer: ServiceAccountTokenIssuer, **secret_meta: object
) -> str:
    store.put(
        "",
        "serviceaccounts",
        {"metadata": {"name": "builder", "namespace": "ci", "uid": "sa-uid-1"}},
    )
    token = issuer.issue("ci", "builder", "sa-uid-1", "builder-token")
    store.put(
        "",
        "secrets",
        secret(
            "builder-token",
            "ci",
            "kubernetes.io/service-account-token",
            {"token": token, "namespace": "ci"},
            **secret_meta,
        ),
    )
    return token


def test_service_account_token(
    authn: Authenticator, store: FakeStore, issuer: ServiceAccountTokenIssuer
) -> None:
    token = _service_account(store, issuer)
    user = authn.authenticate(request(**_bearer(token)))
    assert user == UserInfo(
        "system:serviceaccount:ci:builder",
        ("system:serviceaccounts", "system:serviceaccounts:ci", AUTHENTICATED),
        "sa-uid-1",
    )


def test_service_account_token_dies_with_its_secret(
    authn: Authenticator, store: FakeStore, issuer: ServiceAccountTokenIssuer
) -> None:
    token = _service_account(store, issuer)
    del store.objects[("", "secrets", "ci", "builder-token")]
    _reject(authn, **_bearer(token))
    with pytest.raises(TokenRejectedError, match="Token has been invalidated"):
        authn.authenticate_token(token)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda s: s.objects[("", "secrets", "ci", "builder-token")]["metadata"].update(
                deletionTimestamp="2030-01-01T00:00:00Z"
            ),
            "Token has been invalidated",
            id="secret-terminating",
        ),
        pytest.param(
            lambda s: s.objects[("", "secrets", "ci", "builder-token")]["metadata"].update(
                labels={"kubernetes.io/legacy-token-invalid-since": "2030-01-01"}
            ),
            "Token has been invalidated",
            id="invalid-since-label",
        ),
        pytest.param(
            lambda s: s.objects[("", "secrets", "ci", "builder-token")]["data"].update(
                token="b3RoZXI="
            ),
            "Token does not match server's copy",
            id="secret-rotated",
        ),
        pytest.param(
            lambda s: s.objects.pop(("", "serviceaccounts", "ci", "builder")),
            'serviceaccount "builder" not found',
            id="sa-deleted",
        ),
        pytest.param(
            lambda s: s.objects[("", "serviceaccounts", "ci", "builder")]["metadata"].update(
                uid="sa-uid-2"
            ),
            r"ServiceAccount UID \(sa-uid-2\) does not match claim \(sa-uid-1\)",
            id="sa-recreated",
        ),
    ],
)
def test_service_account_token_invalidated(
    authn: Authenticator,
    store: FakeStore,
    issuer: ServiceAccountTokenIssuer,
    mutate: object,
    message: str,
) -> None:
    token = _service_account(store, issuer)
    assert callable(mutate)
    mutate(store)
    _reject(authn, **_bearer(token))
    with pytest.raises(TokenRejectedError, match=message):
        authn.authenticate_token(token)


def test_token_signed_by_another_key_is_refused(authn: Authenticator, store: FakeStore) -> None:
    foreign = ServiceAccountTokenIssuer.generate()
    token = _service_account(store, foreign)
    _reject(authn, **_bearer(token))
