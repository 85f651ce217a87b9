"""One call of an admission webhook over HTTPS, as kube-apiserver's webhook client makes it.

The AdmissionReview goes to `clientConfig.url`, or to the Service `clientConfig.service` names
(`https://<name>.<namespace>.svc:<port><path>`), with the server's certificate checked against
`clientConfig.caBundle` (the system roots when it is empty). The emulator runs no cluster
network, so a Service reference is dialled at the address the `ServiceNetwork` gives
(emulator.services), still verifying the certificate for `<name>.<namespace>.svc`; without an
entry the Service's DNS name is dialled, which fails as kube-apiserver fails when it cannot
reach the Service. A `url` whose host is a Service's DNS name (`<name>.<namespace>.svc`, as
karmada-webhook's configuration has it) is dialled the same way.

Failures come back as `CallingError` (subject to the webhook's failurePolicy) with the text
kube-apiserver's Go client gives for the same failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import ssl
from dataclasses import dataclass, field
from typing import Any

import httpx

from .services import ServiceNetwork, dial_error, service_dns_name

JSON = dict[str, Any]
REVIEW_GROUP = "admission.k8s.io"
KNOWN_VERSIONS = ("v1", "v1beta1")


class CallingError(Exception):
    """kube's ErrCallingWebhook: the webhook could not give a usable answer."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')


@dataclass
class Answer:
    allowed: bool
    result: JSON | None
    patch: bytes = b""
    patch_type: str = ""
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    url: str  # as kube-apiserver shows it in errors
    host: str  # what is dialled: the URL's host, or the address a Service is mapped to
    port: int
    path: str  # path and query sent
    server_name: str  # the name the certificate must be valid for


_SERVICE_HOST = re.compile(r"^([^.]+)\.([^.]+)\.svc(\.cluster\.local)?$")


def _target(config: JSON, services: ServiceNetwork, timeout: int) -> Target:
    query = f"?timeout={timeout}s"
    service = config.get("service")
    if isinstance(service, dict):
        ns, name = service.get("namespace"), service.get("name")
        dns = service_dns_name(str(ns), str(name))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/") + query
        url = f"https://{dns}:{port}{path}"
    else:
        url = str(config.get("url") or "") + query
        parsed = httpx.URL(url)
        dns, port, path = parsed.host, parsed.port or 443, parsed.raw_path.decode()
        found = _SERVICE_HOST.match(dns)
        ns, name = (found.group(2), found.group(1)) if found else ("", "")
    mapped = services.address(str(ns), str(name))
    if mapped is not None:
        return Target(url, mapped[0], mapped[1], path, dns)
    return Target(url, dns, port, path, dns)


class WebhookClient:
    def __init__(self, services: ServiceNetwork | None = None) -> None:
        # Shared with the aggregation layer: one map of Services to addresses.
        self.services = services if services is not None else ServiceNetwork()
        # Connections are kept and reused, as kube-apiserver's webhook clients do: one client
        # per trust bundle and certificate name (and event loop).
        self._clients: dict[tuple[str, str, int], httpx.AsyncClient] = {}

    def _client(self, ca_bundle: str, server_name: str) -> httpx.AsyncClient:
        key = (ca_bundle, server_name, id(asyncio.get_running_loop()))
        client = self._clients.get(key)
        if client is None:
            if ca_bundle:
                pem = base64.b64decode(ca_bundle).decode()
                context = ssl.create_default_context(cadata=pem)
            else:
                context = ssl.create_default_context()
            client = httpx.AsyncClient(verify=context, trust_env=False, timeout=None)
            self._clients[key] = client
        return client

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def call(self, hook: JSON, request: JSON, *, mutating: bool) -> Answer:
        name = str(hook.get("name"))
        version = next(
            (v for v in hook.get("admissionReviewVersions") or () if v in KNOWN_VERSIONS), None
        )
        if version is None:
            reason = "webhook does not accept known AdmissionReview versions (v1, v1beta1)"
            raise CallingError(name, f"could not create admission objects: {reason}")
        timeout = int(hook.get("timeoutSeconds") or 10)
        config = hook.get("clientConfig") or {}
        target = _target(config, self.services, timeout)
        review = {
            "kind": "AdmissionReview",
            "apiVersion": f"{REVIEW_GROUP}/{version}",
            "request": request,
        }
        try:
            client = self._client(str(config.get("caBundle") or ""), target.server_name)
        except (ValueError, ssl.SSLError) as exc:
            raise CallingError(name, f"could not get REST client: {exc}") from exc
        body = await _post(name, client, target, review, timeout)
        return _verify(name, body, request["uid"], version, mutating)


async def _post(
    name: str, client: httpx.AsyncClient, target: Target, review: JSON, timeout: int
) -> Any:
    host = f"[{target.host}]" if ":" in target.host else target.host
    shown = f'Post "{target.url}"'
    try:
        async with asyncio.timeout(timeout):
            resp = await client.post(
                f"https://{host}:{target.port}{target.path}",
                content=json.dumps(review).encode(),
                headers={"content-type": "application/json", "accept": "application/json"},
                extensions={"sni_hostname": target.server_name},
            )
    except TimeoutError as exc:
        raise CallingError(
            name, f"failed to call webhook: {shown}: context deadline exceeded"
        ) from exc
    except httpx.HTTPError as exc:
        detail = dial_error(exc, target.host, target.port, target.server_name)
        raise CallingError(name, f"failed to call webhook: {shown}: {detail}") from exc
    if resp.status_code >= 300:
        raise CallingError(name, f"failed to call webhook: {_status_error(resp)}")
    try:
        return resp.json()
    except ValueError as exc:
        raise CallingError(name, f"failed to call webhook: {exc}") from exc


def _status_error(resp: httpx.Response) -> str:
    """client-go's text for a non-2xx answer that is not a Status."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and body.get("message"):
        return str(body["message"])
    if resp.status_code >= 500:
        said = json.dumps(resp.text.strip() or "unknown")
        return f"an error on the server ({said}) has prevented the request from succeeding"
    return f"the server responded with the status code {resp.status_code} but did not return more information"


def _invalid(name: str, why: str) -> CallingError:
    return CallingError(name, f"received invalid webhook response: {why}")


def _verify(name: str, body: Any, uid: str, version: str, mutating: bool) -> Answer:
    response = body.get("response") if isinstance(body, dict) else None
    if not isinstance(response, dict):
        raise _invalid(name, "webhook response was absent")
    patch_text = response.get("patch")
    patch_type = response.get("patchType")
    if version == "v1":
        got_uid = response.get("uid", "")
        if got_uid != uid:
            raise _invalid(name, f'expected response.uid="{uid}", got "{got_uid}"')
        api_version, kind = body.get("apiVersion", ""), body.get("kind", "")
        if api_version != f"{REVIEW_GROUP}/v1" or kind != "AdmissionReview":
            raise _invalid(
                name,
                f"expected webhook response of {REVIEW_GROUP}/v1, Kind=AdmissionReview, got "
                f"{api_version}, Kind={kind}",
            )
        if mutating:
            if patch_text and patch_type is None:
                raise _invalid(name, "webhook returned response.patch but not response.patchType")
            if not patch_text and patch_type is not None:
                raise _invalid(name, "webhook returned response.patchType but not response.patch")
            if patch_type == "":
                raise _invalid(name, 'webhook returned invalid response.patchType of ""')
        else:
            if patch_text:
                raise _invalid(name, "validating webhook may not return response.patch")
            if patch_type is not None:
                raise _invalid(name, "validating webhook may not return response.patchType")
    elif patch_text:
        patch_type = "JSONPatch"  # v1beta1 answers were never checked for a type
    patch = b""
    if mutating and patch_text:
        try:
            patch = base64.b64decode(str(patch_text), validate=True)
        except ValueError as exc:
            raise CallingError(name, f"failed to call webhook: {exc}") from exc
    result = response.get("status")
    warnings = [str(w) for w in response.get("warnings") or ()]
    return Answer(
        allowed=bool(response.get("allowed")),
        result=result if isinstance(result, dict) else None,
        patch=patch,
        patch_type=str(patch_type or "") if patch else "",
        warnings=warnings,
    )
