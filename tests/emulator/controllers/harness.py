"""The emulator's API server in process, for driving its controllers one at a time.

`ControlPlane("karmada")` is what `Emulator` builds (authentication, RBAC, reviews, schemas,
the profile's types) without the HTTPS front and without starting the profile's controllers:
a test runs the controller it is about with `Running(controller.run(plane.ctx))`, writes
through `plane.api` (the admin's loopback client) and reads what the storage holds with
`plane.stored(path)`. `plane.requests` records every request the server answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from typing import Any

from emulator.apiserver import ApiServer
from emulator.controllers import ControllerContext, Knobs
from emulator.local import LocalClient
from emulator.pki import CertificateAuthority, ServiceAccountTokenIssuer
from emulator.profiles import profile_by_name
from emulator.requestinfo import RequestAttributes, parse_request_info
from emulator.wire import ApiRequest, UserInfo
from emulator.wiring import build_api_server
from tests import polling

JSON = dict[str, Any]

_CA: CertificateAuthority | None = None
_TOKENS: ServiceAccountTokenIssuer | None = None


def _credentials() -> tuple[CertificateAuthority, ServiceAccountTokenIssuer]:
    """A CA and a token issuer, generated once for the module's tests (keys are slow)."""
    global _CA, _TOKENS
    if _CA is None or _TOKENS is None:
        _CA = CertificateAuthority.generate("test-ca")
        _TOKENS = ServiceAccountTokenIssuer.generate()
    return _CA, _TOKENS


class ControlPlane:
    def __init__(self, profile: str = "member", *, name: str = "member1", **knobs: Any) -> None:
        ca, tokens = _credentials()
        chosen = profile_by_name(profile, name)
        self.server: ApiServer = build_api_server(
            ca=ca, sa_tokens=tokens, static_tokens={}, fixed_uids=chosen.fixed_uids
        )
        for resource_type in chosen.types:
            self.server.register_type(resource_type)
        self.seed = chosen.seed
        self.api: LocalClient = self.server.loopback()
        self.ctx = ControllerContext(
            api=self.api,
            storage=self.server.storage,
            ca=ca,
            sa_tokens=tokens,
            cluster_name=name,
            knobs=Knobs(retry_delay=0.05, **knobs),
            server_url="https://127.0.0.1:5443",
        )
        # (verb, path, body) of every request, in the order the server answered them.
        self.requests: list[tuple[str, str, Any]] = []
        self.server.hooks.append(self._record)

    async def _record(self, req: ApiRequest, attrs: RequestAttributes) -> None:
        self.requests.append((attrs.verb, req.path, json.loads(req.body) if req.body else None))

    def calls(self, verb: str, path: str) -> int:
        """How many `verb` requests for `path` the server answered."""
        return sum(1 for v, p, _ in self.requests if (v, p) == (verb, path))

    def reviews(self) -> list[JSON]:
        """The specs of the SubjectAccessReviews asked for, in order."""
        return [
            body["spec"]
            for verb, path, body in self.requests
            if verb == "create" and path.endswith("/subjectaccessreviews")
        ]

    def as_user(self, name: str, groups: tuple[str, ...]) -> LocalClient:
        return self.server.loopback(UserInfo(name, (*groups, "system:authenticated")))

    async def namespace(self, name: str) -> None:
        await self.api.create("/api/v1/namespaces", {"metadata": {"name": name}})

    def stored(self, path: str) -> JSON | None:
        """The object at `path` as the storage holds it now (a copy), or None."""
        gr, namespace, name = _key(path)
        obj = self.server.storage.get(gr, namespace, name)
        return copy.deepcopy(obj) if obj is not None else None

    def items(self, path: str) -> list[JSON]:
        """The objects of the collection at `path`, sorted by namespace and name (copies)."""
        gr, namespace, _ = _key(path)
        return copy.deepcopy(self.server.storage.list(gr, namespace or None))


def _key(path: str) -> tuple[tuple[str, str], str, str]:
    """(group, resource), namespace and name of a REST path, as the server reads it."""
    at = parse_request_info(ApiRequest.from_target("GET", path))
    gr = (at.api_group, at.resource)
    # A Namespace is itself cluster-scoped: its name is not a namespace it lives in.
    return gr, "" if gr == ("", "namespaces") else at.namespace, at.name


async def eventually(check: Any, timeout: float = 5.0) -> Any:
    """Wait until `check()` returns something truthy."""
    return await polling.eventually(check, timeout=timeout, interval=0.01)


class Running:
    """`async with Running(controller.run(ctx)):` runs a controller for the block."""

    def __init__(self, *jobs: Any) -> None:
        self.jobs = jobs
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Running:
        self.tasks = [asyncio.create_task(job) for job in self.jobs]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
