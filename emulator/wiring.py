"""Compose an ApiServer with the real authentication, authorization, reviews, OpenAPI,
schemas and patch engines, as kube-apiserver is assembled from its parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .apiserver import ApiServer, ReviewFn
from .authn import Authenticator
from .handlers import ServerConfig
from .openapi import openapi_response
from .pki import CertificateAuthority, ServiceAccountTokenIssuer
from .rbac import AlwaysAllow, Authorizer, RbacAuthorizer
from .requestheader import RequestHeaderConfig
from .reviews import create_review
from .schema import builtin_kubernetes_version, builtin_schema, crd_schema
from .storage import Event, Storage
from .tokenrequest import token_subresource
from .wire import UserInfo

JSON = dict[str, Any]
_RBAC_RESOURCES = frozenset(
    ("rbac.authorization.k8s.io", r)
    for r in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")
)
_REVIEWS = {
    ("authorization.k8s.io", "subjectaccessreviews"): "SubjectAccessReview",
    ("authorization.k8s.io", "localsubjectaccessreviews"): "LocalSubjectAccessReview",
    ("authorization.k8s.io", "selfsubjectaccessreviews"): "SelfSubjectAccessReview",
    ("authorization.k8s.io", "selfsubjectrulesreviews"): "SelfSubjectRulesReview",
    ("authentication.k8s.io", "selfsubjectreviews"): "SelfSubjectReview",
    ("authentication.k8s.io", "tokenreviews"): "TokenReview",
}


class StorageRbacSource:
    """RBAC objects straight from storage; the revision moves only when one of them changes,
    so the authorizer's indexes survive unrelated writes."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._revision = 0
        storage.listeners.append(self._on_event)

    def _on_event(self, gr: tuple[str, str], ev: Event) -> None:
        if gr in _RBAC_RESOURCES:
            self._revision += 1

    def revision(self) -> int:
        return self._revision

    def list(self, group: str, resource: str, namespace: str | None) -> list[JSON]:
        return self._storage.list((group, resource), namespace)


def _review(kind: str, authorizer: Authorizer, authenticator: Authenticator) -> ReviewFn:
    def answer(body: JSON, user: UserInfo) -> JSON:
        namespace = str((body.get("metadata") or {}).get("namespace") or "")
        return create_review(
            kind,
            body,
            user=user,
            authorizer=authorizer,
            authenticator=authenticator,
            namespace=namespace,
        )

    return answer


def kubernetes_version() -> JSON:
    git_version = builtin_kubernetes_version()
    major, minor = git_version.lstrip("v").split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def build_api_server(
    *,
    ca: CertificateAuthority,
    sa_tokens: ServiceAccountTokenIssuer,
    static_tokens: Mapping[str, UserInfo],
    authorization: bool = True,
    fixed_uids: Mapping[tuple[str, str, str, str], str] | None = None,
    config: ServerConfig | None = None,
    history_size: int = 10000,
    requestheader: RequestHeaderConfig | None = None,
) -> ApiServer:
    """`requestheader`: the front proxy this server trusts to name users in headers
    (kube-apiserver's --requestheader-* flags); client certificates must be signed by `ca`."""
    storage = Storage(history_size)
    authenticator = Authenticator(
        static_tokens=static_tokens,
        sa_tokens=sa_tokens,
        lookup=lambda group, resource, namespace, name: storage.get(
            (group, resource), namespace, name
        ),
        client_ca_pem=ca.cert_pem,
        requestheader=requestheader,
    )
    rbac: Authorizer = (
        RbacAuthorizer(StorageRbacSource(storage)) if authorization else AlwaysAllow()
    )
    api = ApiServer(
        storage=storage,
        authenticator=authenticator,
        authorizer=rbac if authorization else None,
        ca=ca,
        openapi=openapi_response,
        reviews={gr: _review(kind, rbac, authenticator) for gr, kind in _REVIEWS.items()},
        builtin_schema=builtin_schema,
        crd_schema=crd_schema,
        config=config,
        version=kubernetes_version(),
        fixed_uids=fixed_uids,
    )
    # TokenRequest reads the authenticator's clock, so tests that move it move both.
    api.add_subresource(
        "", "serviceaccounts", "token", token_subresource(sa_tokens, lambda: authenticator.clock())
    )
    return api
