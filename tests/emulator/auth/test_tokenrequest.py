"""serviceaccounts/token (TokenRequest) and the bound tokens it issues, through the whole
request chain: authentication, RBAC, the subresource, and the authenticator taking the
tokens back."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from emulator.apiserver import ApiServer
from emulator.authn import TokenRejectedError
from emulator.pki import CertificateAuthority, ServiceAccountTokenIssuer
from emulator.protobuf import decode_object
from emulator.tokenrequest import ISSUER
from emulator.wire import SYSTEM_ADMIN, ApiRequest, ApiResponse, UserInfo
from emulator.wiring import build_api_server

JSON = dict[str, Any]
START = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
TOKEN_PATH = "/api/v1/namespaces/dev/serviceaccounts/robot/token"


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def issuer() -> ServiceAccountTokenIssuer:
    return ServiceAccountTokenIssuer.generate()


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate("test-ca")


@pytest.fixture
async def api(ca: CertificateAuthority, issuer: ServiceAccountTokenIssuer) -> ApiServer:
    server = build_api_server(ca=ca, sa_tokens=issuer, static_tokens={})
    server.authenticator.clock = Clock()
    admin = server.loopback()
    await admin.create("/api/v1/namespaces", {"metadata": {"name": "dev"}})
    await admin.create("/api/v1/namespaces/dev/serviceaccounts", {"metadata": {"name": "robot"}})
    return server


def clock(api: ApiServer) -> Clock:
    c = api.authenticator.clock
    assert isinstance(c, Clock)
    return c


async def call(
    api: ApiServer,
    method: str,
    path: str,
    body: JSON | None = None,
    *,
    user: UserInfo | None = SYSTEM_ADMIN,
    token: str = "",
) -> tuple[int, JSON]:
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    req = ApiRequest.from_target(
        method,
        path,
        headers=headers,
        body=json.dumps(body).encode() if body is not None else b"",
        user=user,
    )
    resp: ApiResponse = await api.handle(req)
    return resp.status, json.loads(resp.body)


async def request_token(api: ApiServer, spec: JSON | None = None, path: str = TOKEN_PATH) -> str:
    code, body = await call(api, "POST", path, {"kind": "TokenRequest",
                            "apiVersion": "authentication.k8s.io/v1", "spec": spec or {}})  # fmt: skip
    assert code == 201, body
    token = body["status"]["token"]
    assert isinstance(token, str)
    return token


def claims_of(token: str) -> JSON:
    payload = token.split(".")[1]
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert isinstance(decoded, dict)
    return decoded


async def test_token_request_defaults_and_response(api: ApiServer) -> None:
    sa = api.storage.get(("", "serviceaccounts"), "dev", "robot")
    assert sa is not None
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {}})
    assert code == 201
    stamp = START.strftime("%Y-%m-%dT%H:%M:%SZ")
    token = body["status"]["token"]
    assert body == {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": "robot", "namespace": "dev", "creationTimestamp": stamp},
        "spec": {"audiences": [ISSUER], "expirationSeconds": 3600, "boundObjectRef": None},
        "status": {"token": token, "expirationTimestamp": "2030-01-02T04:04:05Z"},
    }
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "RS256", "kid": api.authenticator.sa_tokens.key_id}
    claims = claims_of(token)
    now = int(START.timestamp())
    assert claims == {
        "aud": [ISSUER],
        "exp": now + 3600,
        "iat": now,
        "iss": ISSUER,
        "jti": claims["jti"],
        "kubernetes.io": {
            "namespace": "dev",
            "serviceaccount": {"name": "robot", "uid": sa["metadata"]["uid"]},
        },
        "nbf": now,
        "sub": "system:serviceaccount:dev:robot",
    }
    user = api.authenticator.authenticate_token(token)
    assert user == UserInfo(
        "system:serviceaccount:dev:robot",
        ("system:serviceaccounts", "system:serviceaccounts:dev", "system:authenticated"),
        sa["metadata"]["uid"],
        {"authentication.kubernetes.io/credential-id": (f"JTI={claims['jti']}",)},
    )


async def test_audiences_and_expiration_are_honoured(api: ApiServer) -> None:
    token = await request_token(api, {"audiences": ["vault"], "expirationSeconds": 600})
    claims = claims_of(token)
    assert (claims["aud"], claims["exp"] - claims["iat"]) == (["vault"], 600)
    # Not for this API server: a token for another audience is refused.
    with pytest.raises(TokenRejectedError) as exc:
        api.authenticator.authenticate_token(token)
    assert str(exc.value) == (
        f'token audiences ["vault"] is invalid for the target audiences ["{ISSUER}"]'
    )


async def test_expired_token_is_refused_after_the_leeway(api: ApiServer) -> None:
    token = await request_token(api, {"expirationSeconds": 600})
    clock(api).now = START + timedelta(seconds=600 + 59)  # within kube's one minute leeway
    assert api.authenticator.authenticate_token(token).name == "system:serviceaccount:dev:robot"
    clock(api).now = START + timedelta(seconds=600 + 61)
    with pytest.raises(TokenRejectedError, match=r"^service account token has expired$"):
        api.authenticator.authenticate_token(token)
    code, body = await call(api, "GET", "/api/v1/namespaces/dev/pods", user=None, token=token)
    assert (code, body) == (401, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                  "status": "Failure", "message": "Unauthorized",
                                  "reason": "Unauthorized", "code": 401})  # fmt: skip


async def test_deleted_or_recreated_service_account_invalidates_the_token(api: ApiServer) -> None:
    token = await request_token(api)
    admin = api.loopback()
    await admin.delete("/api/v1/namespaces/dev/serviceaccounts/robot")
    with pytest.raises(TokenRejectedError, match=r'^serviceaccounts "robot" not found$'):
        api.authenticator.authenticate_token(token)
    recreated = await admin.create(
        "/api/v1/namespaces/dev/serviceaccounts", {"metadata": {"name": "robot"}}
    )
    old_uid = claims_of(token)["kubernetes.io"]["serviceaccount"]["uid"]
    with pytest.raises(TokenRejectedError) as exc:
        api.authenticator.authenticate_token(token)
    assert str(exc.value) == (
        f"service account UID ({recreated['metadata']['uid']}) does not match claim ({old_uid})"
    )


async def test_errors_are_kube_statuses(api: ApiServer) -> None:
    code, body = await call(api, "POST", TOKEN_PATH.replace("robot", "nobody"), {"spec": {}})
    assert (code, body["reason"], body["message"], body["details"]) == (
        404, "NotFound", 'serviceaccounts "nobody" not found',
        {"name": "nobody", "kind": "serviceaccounts"},
    )  # fmt: skip
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {"expirationSeconds": 60}})
    assert (code, body["reason"], body["message"]) == (
        422, "Invalid",
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: '
        "Invalid value: 60: may not specify a duration less than 10 minutes",
    )  # fmt: skip
    assert body["details"] == {
        "group": "authentication.k8s.io",
        "kind": "TokenRequest",
        "causes": [{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                    "message": "Invalid value: 60: may not specify a duration less than "
                               "10 minutes"}],
    }  # fmt: skip
    code, body = await call(api, "POST", TOKEN_PATH, {"metadata": {"name": "other"}})
    assert (code, body["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "robot" is invalid: metadata.name: Invalid value: '
        '"other": must match the service account name if specified',
    )
    code, body = await call(api, "POST", TOKEN_PATH, {"metadata": {"namespace": "other"}})
    assert (code, body["message"]) == (
        422,
        'TokenRequest.authentication.k8s.io "robot" is invalid: metadata.namespace: Invalid '
        'value: "other": must match the service account namespace if specified',
    )
    ref = {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"}
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {"boundObjectRef": ref}})
    assert (code, body["reason"], body["message"]) == (
        400, "BadRequest", "cannot bind token to object of type /v1, Kind=ConfigMap"
    )  # fmt: skip
    code, body = await call(api, "GET", TOKEN_PATH)
    assert (code, body["reason"]) == (405, "MethodNotAllowed")


async def test_pod_bound_token_carries_pod_and_node_and_dies_with_the_pod(api: ApiServer) -> None:
    admin = api.loopback()
    node = await admin.create("/api/v1/nodes", {"metadata": {"name": "n1"}})
    pod = await admin.create("/api/v1/namespaces/dev/pods", {
        "metadata": {"name": "p1"},
        "spec": {"serviceAccountName": "robot", "nodeName": "n1",
                 "containers": [{"name": "c", "image": "busybox"}]},
    })  # fmt: skip
    ref = {"kind": "Pod", "apiVersion": "v1", "name": "p1", "uid": "wrong"}
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {"boundObjectRef": ref}})
    assert (code, body["reason"], body["message"]) == (
        409, "Conflict",
        'Operation cannot be fulfilled on Pod "p1": the UID in the bound object reference '
        "(wrong) does not match the UID in record. The object might have been deleted and "
        "then recreated",
    )  # fmt: skip
    ref["uid"] = pod["metadata"]["uid"]
    token = await request_token(api, {"boundObjectRef": ref})
    private = claims_of(token)["kubernetes.io"]
    assert private["pod"] == {"name": "p1", "uid": pod["metadata"]["uid"]}
    assert private["node"] == {"name": "n1", "uid": node["metadata"]["uid"]}
    extra = api.authenticator.authenticate_token(token).extra
    assert extra["authentication.kubernetes.io/pod-name"] == ("p1",)
    assert extra["authentication.kubernetes.io/pod-uid"] == (pod["metadata"]["uid"],)
    assert extra["authentication.kubernetes.io/node-name"] == ("n1",)
    assert extra["authentication.kubernetes.io/node-uid"] == (node["metadata"]["uid"],)
    await admin.delete("/api/v1/namespaces/dev/pods/p1", {"gracePeriodSeconds": 0})
    assert api.storage.get(("", "pods"), "dev", "p1") is None
    with pytest.raises(TokenRejectedError, match=r"^service account token has been invalidated$"):
        api.authenticator.authenticate_token(token)


async def test_creating_a_token_is_its_own_rbac_permission(api: ApiServer) -> None:
    admin = api.loopback()
    alice = UserInfo("alice", ("system:authenticated",))
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {}}, user=alice)
    assert (code, body["message"]) == (
        403,
        'serviceaccounts "robot" is forbidden: User "alice" cannot create resource '
        '"serviceaccounts/token" in API group "" in the namespace "dev"',
    )
    rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/dev"
    await admin.create(f"{rbac}/roles", {"metadata": {"name": "sa-admin"}, "rules": [
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["*"]}]})  # fmt: skip
    await admin.create(f"{rbac}/rolebindings", {
        "metadata": {"name": "alice"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sa-admin"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}],
    })  # fmt: skip
    code, _ = await call(api, "POST", TOKEN_PATH, {"spec": {}}, user=alice)
    assert code == 403  # "serviceaccounts" does not cover the subresource
    role = await admin.get(f"{rbac}/roles/sa-admin")
    role["rules"].append({"apiGroups": [""], "resources": ["serviceaccounts/token"],
                          "verbs": ["create"]})  # fmt: skip
    await admin.update(f"{rbac}/roles/sa-admin", role)
    code, body = await call(api, "POST", TOKEN_PATH, {"spec": {}}, user=alice)
    assert code == 201, body


async def test_discovery_and_token_review_know_the_subresource(api: ApiServer) -> None:
    code, body = await call(api, "GET", "/api/v1")
    assert code == 200
    entry = [r for r in body["resources"] if r["name"] == "serviceaccounts/token"]
    assert entry == [{
        "name": "serviceaccounts/token", "singularName": "", "namespaced": True,
        "kind": "TokenRequest", "verbs": ["create"],
        "group": "authentication.k8s.io", "version": "v1",
    }]  # fmt: skip
    token = await request_token(api)
    code, body = await call(api, "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                            {"spec": {"token": token}})  # fmt: skip
    assert code == 201
    assert body["status"]["authenticated"] is True
    assert body["status"]["user"]["username"] == "system:serviceaccount:dev:robot"


def test_kubectl_133_protobuf_token_request_decodes_like_its_json() -> None:
    # The bytes kubectl 1.33 sends for `create token robot --duration=1m` (captured).
    body = (
        b"k8s\x00\n(\n\x18authentication.k8s.io/v1\x12\x0cTokenRequest\x12\x1c\n\x10\n\x00"
        b'\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00\x12\x02 <\x1a\x04\n\x00\x12\x00\x1a\x00"\x00'
    )
    # What kubectl 1.27 sends as JSON for the same request, apart from the audiences.
    assert decode_object(body) == {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {"audiences": None, "expirationSeconds": 60, "boundObjectRef": None},
        "status": {"token": "", "expirationTimestamp": None},
    }
