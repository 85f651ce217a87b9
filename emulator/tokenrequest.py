"""The serviceaccounts/token subresource (TokenRequest) and the bound tokens it issues.

`kubectl create token <sa>` POSTs an authentication.k8s.io/v1 TokenRequest to
/api/v1/namespaces/<ns>/serviceaccounts/<sa>/token. kube-apiserver answers with a bound
service-account token: a JWT signed with the service-account key whose claims name the
ServiceAccount (and optionally a Pod, Secret or Node it is bound to), valid for
spec.expirationSeconds. The authenticator accepts it until it expires or until the
ServiceAccount (or bound object) is deleted or replaced by one with another uid.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from . import errors
from .errors import field_cause
from .handlers.body import parse_body
from .pki import InvalidTokenError, ServiceAccountTokenIssuer
from .timefmt import parse_time, rfc3339
from .wire import ApiRequest, ApiResponse, UserInfo

if TYPE_CHECKING:
    from .apiserver import ApiServer, SubresourceFn
    from .registry import ResourceType
    from .requestinfo import RequestAttributes

JSON = dict[str, Any]
# (group, resource, namespace, name) -> the stored object, or None.
Lookup = Callable[[str, str, str, str], JSON | None]

# kubeadm's --service-account-issuer; with no --api-audiences the issuer is the audience.
ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = (ISSUER,)
GROUP, VERSION, KIND = "authentication.k8s.io", "v1", "TokenRequest"
DEFAULT_EXPIRATION_SECONDS = 60 * 60
MIN_EXPIRATION_SECONDS = 10 * 60
MAX_EXPIRATION_SECONDS = 1 << 32
# A pod-bound token asking for exactly this lifetime gets a year and a warn-after claim
# (kube-apiserver's --service-account-extend-token-expiration, on by default).
WARN_ONLY_EXPIRATION_SECONDS = 60 * 60 + 7
EXTENDED_EXPIRATION_SECONDS = 24 * 365 * 60 * 60
# The clock skew the token validator tolerates on exp/nbf and on deletions.
LEEWAY = timedelta(minutes=1)

SA_GROUP = "system:serviceaccounts"
CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id"
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NODE_UID_KEY = "authentication.kubernetes.io/node-uid"
_CLAIMS = "kubernetes.io"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _deleted_before(obj: Mapping[str, Any], moment: datetime) -> bool:
    stamp = _meta(obj).get("deletionTimestamp")
    if not isinstance(stamp, str):
        return False
    try:
        deleted = parse_time(stamp)
    except ValueError:
        return False
    return deleted < moment


# ------------------------------------------------------------------ claims


@dataclass(frozen=True)
class Ref:
    name: str
    uid: str = ""

    def claim(self) -> JSON:
        out: JSON = {}
        if self.name:
            out["name"] = self.name
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class BoundTokenClaims:
    namespace: str
    service_account: Ref
    audiences: tuple[str, ...]
    expiry: int
    not_before: int
    jti: str = ""
    pod: Ref | None = None
    secret: Ref | None = None
    node: Ref | None = None

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account.name}"


def bound_token_claims(
    *,
    namespace: str,
    service_account: Ref,
    audiences: tuple[str, ...] | list[str],
    issued: datetime,
    lifetime_seconds: int,
    pod: Ref | None = None,
    secret: Ref | None = None,
    node: Ref | None = None,
    warn_after_seconds: int = 0,
) -> JSON:
    """The JWT claims kube-apiserver puts in a bound token (keys sorted, as it writes them)."""
    now = int(issued.timestamp())
    private: JSON = {"namespace": namespace}
    if node is not None:
        private["node"] = node.claim()
    if pod is not None:
        private["pod"] = pod.claim()
    elif secret is not None:
        private["secret"] = secret.claim()
    private["serviceaccount"] = service_account.claim()
    if warn_after_seconds:
        private["warnafter"] = now + warn_after_seconds
    return {
        "aud": list(audiences),
        "exp": now + lifetime_seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": str(uuid.uuid4()),
        _CLAIMS: private,
        "nbf": now,
        "sub": f"system:serviceaccount:{namespace}:{service_account.name}",
    }


def _ref(value: Any) -> Ref | None:
    if not isinstance(value, dict):
        return None
    name, uid = value.get("name", ""), value.get("uid", "")
    return Ref(name if isinstance(name, str) else "", uid if isinstance(uid, str) else "")


def _int(claims: Mapping[str, Any], key: str) -> int:
    value = claims.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTokenError(f"{key} claim is missing")
    return int(value)


def parse_bound_claims(claims: Mapping[str, Any]) -> BoundTokenClaims:
    """The verified JWT claims of a bound token; InvalidTokenError when malformed."""
    private = claims.get(_CLAIMS)
    if not isinstance(private, dict):
        raise InvalidTokenError("service account token claims could not be validated")
    namespace = private.get("namespace")
    sa = _ref(private.get("serviceaccount"))
    if not isinstance(namespace, str) or not namespace or sa is None or not sa.name:
        raise InvalidTokenError("service account token claims could not be validated")
    aud = claims.get("aud")
    audiences = (
        (aud,) if isinstance(aud, str) else tuple(a for a in aud or () if isinstance(a, str))
    )
    jti = claims.get("jti")
    return BoundTokenClaims(
        namespace=namespace,
        service_account=sa,
        audiences=audiences,
        expiry=_int(claims, "exp"),
        not_before=_int(claims, "nbf") if "nbf" in claims else 0,
        jti=jti if isinstance(jti, str) else "",
        pod=_ref(private.get("pod")),
        secret=_ref(private.get("secret")),
        node=_ref(private.get("node")),
    )


# ------------------------------------------------------------------ authentication


def authenticate_bound_token(
    issuer: ServiceAccountTokenIssuer,
    token: str,
    lookup: Lookup,
    now: datetime,
    api_audiences: tuple[str, ...] = API_AUDIENCES,
) -> UserInfo | None:
    """The identity of a bound token; None when the token is not one of ours;
    InvalidTokenError (kube's message) when it is but is no longer valid."""
    raw = issuer.verified_claims(token, ISSUER)
    if raw is None:
        return None
    claims = parse_bound_claims(raw)
    if not set(claims.audiences) & set(api_audiences):
        raise InvalidTokenError(
            f"token audiences {_go_strings(claims.audiences)} is invalid for the target "
            f"audiences {_go_strings(api_audiences)}"
        )
    stamp = now.timestamp()
    if stamp - LEEWAY.total_seconds() > claims.expiry:
        raise InvalidTokenError("service account token has expired")
    if claims.not_before and stamp + LEEWAY.total_seconds() < claims.not_before:
        raise InvalidTokenError("service account token is not valid yet")
    deleted_cutoff = now - LEEWAY
    ns, sa_ref = claims.namespace, claims.service_account
    sa = lookup("", "serviceaccounts", ns, sa_ref.name)
    if sa is None:
        raise InvalidTokenError(f'serviceaccounts "{sa_ref.name}" not found')
    if _deleted_before(sa, deleted_cutoff):
        raise InvalidTokenError(f"service account {ns}/{sa_ref.name} has been deleted")
    live_uid = str(_meta(sa).get("uid", ""))
    if live_uid != sa_ref.uid:
        raise InvalidTokenError(
            f"service account UID ({live_uid}) does not match claim ({sa_ref.uid})"
        )
    extra: dict[str, tuple[str, ...]] = {}
    if claims.secret is not None:
        _check_bound(lookup, "secrets", ns, claims.secret, "secret", deleted_cutoff)
    if claims.pod is not None:
        _check_bound(lookup, "pods", ns, claims.pod, "pod", deleted_cutoff)
        extra[POD_NAME_KEY] = (claims.pod.name,)
        extra[POD_UID_KEY] = (claims.pod.uid,)
    if claims.node is not None:
        if claims.pod is None:  # a node-bound token lives only as long as its Node
            _check_bound(lookup, "nodes", "", claims.node, "node", deleted_cutoff)
        extra[NODE_NAME_KEY] = (claims.node.name,)
        if claims.node.uid:
            extra[NODE_UID_KEY] = (claims.node.uid,)
    if claims.jti:
        extra[CREDENTIAL_ID_KEY] = (f"JTI={claims.jti}",)
    return UserInfo(
        claims.username,
        (SA_GROUP, f"{SA_GROUP}:{ns}"),
        sa_ref.uid,
        dict(sorted(extra.items())),
    )


def _check_bound(
    lookup: Lookup, resource: str, ns: str, ref: Ref, what: str, cutoff: datetime
) -> None:
    obj = lookup("", resource, ns, ref.name)
    if obj is None or _deleted_before(obj, cutoff):
        raise InvalidTokenError("service account token has been invalidated")
    uid = str(_meta(obj).get("uid", ""))
    if uid != ref.uid:
        raise InvalidTokenError(
            f"{what} UID ({uid}) does not match service account {what} ref claim ({ref.uid})"
        )


def _go_strings(values: tuple[str, ...]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"


# ------------------------------------------------------------------ the subresource


def _group_version(api_version: str) -> tuple[str, str]:
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


def _bound_object(
    api: ApiServer, ns: str, sa_name: str, ref: Mapping[str, Any]
) -> tuple[Ref | None, Ref | None, Ref | None]:
    """(pod, secret, node) the token is bound to, as kube-apiserver resolves boundObjectRef."""
    kind = str(ref.get("kind") or "")
    name = str(ref.get("name") or "")
    group, version = _group_version(str(ref.get("apiVersion") or ""))
    pod = secret = node = None
    if group == "" and kind == "Pod":
        obj = api.storage.get(("", "pods"), ns, name)
        if obj is None:
            raise errors.not_found("", "pods", name)
        spec = obj.get("spec") or {}
        running_as = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        if running_as != sa_name:
            raise errors.bad_request(
                f'cannot bind token for serviceaccount "{sa_name}" to pod running with '
                "different serviceaccount name."
            )
        pod = Ref(name, str(_meta(obj).get("uid", "")))
        node_name = spec.get("nodeName")
        if isinstance(node_name, str) and node_name:
            live = api.storage.get(("", "nodes"), "", node_name)
            node = Ref(node_name, str(_meta(live).get("uid", "")) if live else "")
        uid = pod.uid
    elif group == "" and kind == "Node":
        obj = api.storage.get(("", "nodes"), "", name)
        if obj is None:
            raise errors.not_found("", "nodes", name)
        node = Ref(name, str(_meta(obj).get("uid", "")))
        uid = node.uid
    elif group == "" and kind == "Secret":
        obj = api.storage.get(("", "secrets"), ns, name)
        if obj is None:
            raise errors.not_found("", "secrets", name)
        secret = Ref(name, str(_meta(obj).get("uid", "")))
        uid = secret.uid
    else:
        raise errors.bad_request(
            f"cannot bind token to object of type {group}/{version}, Kind={kind}"
        )
    wanted = ref.get("uid")
    if wanted and wanted != uid:
        raise errors.conflict(
            group,
            kind,
            name,
            f"the UID in the bound object reference ({wanted}) does not match the UID in "
            "record. The object might have been deleted and then recreated",
        )
    return pod, secret, node


def _quoted(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def _request_body(api: ApiServer, req: ApiRequest, rt: ResourceType) -> JSON:
    body = parse_body(req, rt=rt)
    if not isinstance(body, dict):
        raise errors.bad_request(f"Object '{KIND}' is not a valid object")
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if (kind and kind != KIND) or (api_version and api_version != f"{GROUP}/{VERSION}"):
        raise errors.bad_request(
            f"the object provided is unrecognized (must be of type {KIND}): "
            f"{api_version}, Kind={kind}"
        )
    return body


def token_subresource(
    issuer: ServiceAccountTokenIssuer,
    clock: Callable[[], datetime] = _utcnow,
    api_audiences: tuple[str, ...] = API_AUDIENCES,
) -> SubresourceFn:
    """The handler for POST .../serviceaccounts/<name>/token (see ApiServer.add_subresource)."""

    async def create_token(
        api: ApiServer, req: ApiRequest, attrs: RequestAttributes, rt: ResourceType
    ) -> ApiResponse:
        if attrs.verb != "create":
            raise errors.method_not_allowed()
        ns, name = attrs.namespace, attrs.name
        body = _request_body(api, req, rt)
        meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        for key, expected in (("name", name), ("namespace", ns)):
            if meta.get(key) and meta[key] != expected:
                raise errors.invalid(GROUP, KIND, name, [field_cause(
                    "FieldValueInvalid", f"metadata.{key}",
                    f"Invalid value: {_quoted(meta[key])}: must match the service account "
                    f"{key} if specified",
                )])  # fmt: skip
        sa = api.storage.get(("", "serviceaccounts"), ns, name)
        if sa is None:
            raise errors.not_found("", "serviceaccounts", name)
        spec_in = body.get("spec") if isinstance(body.get("spec"), dict) else {}
        assert isinstance(spec_in, dict)
        audiences = [a for a in spec_in.get("audiences") or () if isinstance(a, str)]
        if not audiences:
            audiences = list(api_audiences)
        expiration = spec_in.get("expirationSeconds")
        if expiration is None:
            expiration = DEFAULT_EXPIRATION_SECONDS  # the v1 defaulter's value
        if isinstance(expiration, bool) or not isinstance(expiration, int):
            raise errors.bad_request(
                "json: cannot unmarshal into Go struct field "
                "TokenRequestSpec.spec.expirationSeconds of type int64"
            )
        now = clock().replace(microsecond=0)
        if expiration < MIN_EXPIRATION_SECONDS:
            raise errors.invalid(GROUP, KIND, "", [field_cause(
                "FieldValueInvalid", "spec.expirationSeconds",
                f"Invalid value: {expiration}: may not specify a duration less than 10 minutes",
            )])  # fmt: skip
        if expiration > MAX_EXPIRATION_SECONDS:
            raise errors.invalid(GROUP, KIND, "", [field_cause(
                "FieldValueInvalid", "spec.expirationSeconds",
                f"Invalid value: {expiration}: may not specify a duration larger than "
                "2^32 seconds",
            )])  # fmt: skip
        bound_ref = spec_in.get("boundObjectRef")
        pod = secret = node = None
        if isinstance(bound_ref, dict):
            pod, secret, node = _bound_object(api, ns, name, bound_ref)
        lifetime, warn_after = expiration, 0
        if (
            pod is not None
            and expiration == WARN_ONLY_EXPIRATION_SECONDS
            and set(audiences) <= set(api_audiences)
        ):
            lifetime, warn_after = EXTENDED_EXPIRATION_SECONDS, expiration
        claims = bound_token_claims(
            namespace=ns,
            service_account=Ref(name, str(_meta(sa).get("uid", ""))),
            audiences=audiences,
            issued=now,
            lifetime_seconds=lifetime,
            pod=pod,
            secret=secret,
            node=node,
            warn_after_seconds=warn_after,
        )
        spec_out: JSON = {"audiences": audiences, "expirationSeconds": expiration}
        spec_out["boundObjectRef"] = bound_ref if isinstance(bound_ref, dict) else None
        result: JSON = {
            "kind": KIND,
            "apiVersion": f"{GROUP}/{VERSION}",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": rfc3339(now)},
            "spec": spec_out,
            "status": {
                "token": issuer.sign(claims),
                "expirationTimestamp": rfc3339(now + timedelta(seconds=expiration)),
            },
        }
        body_out = json.dumps(result, separators=(",", ":")).encode()
        return ApiResponse(201, body_out, {"content-type": "application/json"})

    return create_token
