"""The tunnel's credential for the proxy-server's token review: a bound token of one
ServiceAccount of the Karmada control plane (--tunnel-service-account), with the audience the
proxy-server checks (--tunnel-token-audience), requested by the agent itself with its own
Karmada credentials (TokenRequest: `create serviceaccounts/token`, granted to agents only).

Users never hold such a token: they have no grant to request one, and the proxy-server
(`--agent-namespace`, `--agent-service-account`, `--authentication-audience`) accepts no other
identity on its agent port, so a user's Karmada certificate can no longer claim a route.
A token is used until half its life has passed, then a new one is requested.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from agent.kube.client import KubeClient
from agent.kube.errors import KubeError
from agent.kube.resources import SERVICE_ACCOUNTS
from agent.tunnel.grpc_call import GrpcError

TOKEN_SECONDS = 3600


class TunnelTokens:
    def __init__(
        self,
        karmada: KubeClient,
        service_account: str,
        audience: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.namespace, _, self.name = service_account.partition("/")
        self.audience = audience
        self._karmada = karmada
        self._clock = clock
        self._token = ""
        self._renew_at = 0.0

    async def token(self) -> str:
        if self._token and self._clock() < self._renew_at:
            return self._token
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [self.audience], "expirationSeconds": TOKEN_SECONDS},
        }
        try:
            answer = await self._karmada.create(
                SERVICE_ACCOUNTS,
                request,
                namespace=self.namespace,
                name=self.name,
                subresource="token",
            )
        except KubeError as exc:
            raise GrpcError(
                f"cannot request a token of {self.namespace}/{self.name} for the tunnel "
                f"(--tunnel-service-account): {exc}"
            ) from exc
        status = answer.get("status") or {}
        token = str(status.get("token") or "")
        if not token:
            raise GrpcError("the TokenRequest for the tunnel was answered without a token")
        spec = answer.get("spec") or {}
        lifetime = int(spec.get("expirationSeconds") or TOKEN_SECONDS)
        self._token = token
        self._renew_at = self._clock() + lifetime / 2
        return token

    def forget(self) -> None:
        """The proxy-server refused the token: request a new one next time."""
        self._token = ""
