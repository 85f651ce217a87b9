"""Fault injection: latency, error responses, dropped watches, compaction, going offline.

`Faults.hook` is registered as an ApiServer request hook: for each request it sleeps
the latency of every matching rule, then raises the error of the first matching error
rule. Rules fire with a probability (from a seedable RNG) and optionally only a given
number of times ("fail the next 3 lists of pods with 503").

Tests drive it in-process (`emu.faults.add_error(...)`); another process drives it over
HTTP under /_emulator/faults (JSON, system:masters only), served by `ControlRouter`.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import random
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import errors
from .accounting import ResourceSpec, json_response, status_response
from .https import Handler, ResponseWithFollowUp
from .requestinfo import RequestAttributes
from .wire import ApiRequest, ApiResponse, UserInfo

ERROR_CODES = (429, 500, 503, 504)
VERBS = frozenset(
    ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
)


class Front(Protocol):
    """A way into the emulator that faults can cut: the HTTPS server, an in-process transport."""

    async def go_offline(self) -> None: ...

    async def come_back(self) -> None: ...

    async def drop_streams(self) -> int: ...


class StorageControl(Protocol):
    """The part of the core's storage that faults use."""

    def compact(self) -> Any: ...

    def close_all_watches(self) -> Any: ...


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


@dataclass
class FaultRule:
    id: str
    verbs: frozenset[str] | None = None
    resource: ResourceSpec | None = None
    user: str | None = None
    namespace: str | None = None
    latency: float = 0.0
    code: int | None = None
    retry_after: int | None = None
    message: str | None = None
    probability: float = 1.0
    # None: forever; otherwise the rule is removed after firing this many times.
    remaining: int | None = None
    fired: int = 0

    def __post_init__(self) -> None:
        if self.code is not None and self.code not in ERROR_CODES:
            raise ValueError(f"unsupported fault code {self.code}; use one of {ERROR_CODES}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be between 0 and 1")
        if self.latency < 0:
            raise ValueError("latency must not be negative")
        if self.remaining is not None and self.remaining < 1:
            raise ValueError("count must be at least 1")
        if self.verbs is not None and not self.verbs <= VERBS:
            raise ValueError(f"unknown verbs {sorted(self.verbs - VERBS)}")
        if self.code is None and self.latency == 0:
            raise ValueError("a fault rule needs a latency or an error code")

    def matches(self, req: ApiRequest, attrs: RequestAttributes) -> bool:
        if self.verbs is not None and attrs.verb not in self.verbs:
            return False
        if self.resource is not None and not (
            attrs.is_resource_request
            and self.resource.matches(attrs.api_group, attrs.resource, attrs.subresource)
        ):
            return False
        if self.namespace is not None and attrs.namespace != self.namespace:
            return False
        return self.user is None or (req.user is not None and req.user.name == self.user)

    def error(self) -> errors.ApiError:
        message = self.message
        if self.code == 429:
            return errors.too_many_requests(self.retry_after or 1)
        if self.code == 500:
            err = errors.internal(message or "fault injected by the emulator")
        elif self.code == 503:
            err = errors.service_unavailable(*([message] if message else []))
        else:
            err = errors.timeout(*([message] if message else []))
        if self.retry_after is not None:
            err.headers["Retry-After"] = str(self.retry_after)
        return err

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "fired": self.fired}
        if self.verbs is not None:
            out["verbs"] = sorted(self.verbs)
        for key, value in (
            ("resource", str(self.resource) if self.resource is not None else None),
            ("user", self.user),
            ("namespace", self.namespace),
            ("code", self.code),
            ("retryAfterSeconds", self.retry_after),
            ("message", self.message),
            ("remaining", self.remaining),
        ):
            if value is not None:
                out[key] = value
        if self.latency:
            out["latencySeconds"] = self.latency
        out["probability"] = self.probability
        return out


def _verbs(verb: str | Iterable[str] | None) -> frozenset[str] | None:
    if verb is None or verb == "*":
        return None
    if isinstance(verb, str):
        return frozenset((verb,))
    return frozenset(verb)


@dataclass
class Faults:
    storage: StorageControl | None = None
    seed: int | None = None
    rules: list[FaultRule] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._ids = itertools.count(1)
        self._fronts: weakref.WeakSet[Any] = weakref.WeakSet()
        self._offline = False
        self._back_timer: asyncio.Task[None] | None = None

    # --- fronts and state -------------------------------------------------------------

    def attach(self, front: Front) -> None:
        """Let faults cut this front (drop its streams, take it offline)."""
        self._fronts.add(front)

    @property
    def offline(self) -> bool:
        return self._offline

    def reseed(self, seed: int | None) -> None:
        self.seed = seed
        self._rng = random.Random(seed)

    # --- rules ------------------------------------------------------------------------

    def add_rule(
        self,
        *,
        verb: str | Iterable[str] | None = None,
        resource: str | None = None,
        user: str | None = None,
        namespace: str | None = None,
        latency: float = 0.0,
        code: int | None = None,
        retry_after: int | None = None,
        message: str | None = None,
        probability: float = 1.0,
        count: int | None = None,
    ) -> FaultRule:
        rule = FaultRule(
            id=f"rule-{next(self._ids)}",
            verbs=_verbs(verb),
            resource=ResourceSpec.parse(resource) if resource and resource != "*" else None,
            user=user,
            namespace=namespace,
            latency=latency,
            code=code,
            retry_after=retry_after,
            message=message,
            probability=probability,
            remaining=count,
        )
        self.rules.append(rule)
        return rule

    def add_latency(self, seconds: float, **match: Any) -> FaultRule:
        """Delay matching requests (all matching latency rules add up)."""
        return self.add_rule(latency=seconds, **match)

    def add_error(self, code: int, **match: Any) -> FaultRule:
        """Answer matching requests with `code` (429, 500, 503, 504) and a Status body."""
        return self.add_rule(code=code, **match)

    def fail_next(self, n: int, code: int = 500, **match: Any) -> FaultRule:
        return self.add_rule(code=code, count=n, **match)

    def remove(self, rule_id: str) -> bool:
        before = len(self.rules)
        self.rules = [r for r in self.rules if r.id != rule_id]
        return len(self.rules) != before

    def clear(self) -> int:
        n = len(self.rules)
        self.rules = []
        return n

    async def hook(self, req: ApiRequest, attrs: RequestAttributes) -> None:
        """The ApiServer request hook."""
        if not self.rules:
            return
        delay = 0.0
        failure: errors.ApiError | None = None
        spent: list[FaultRule] = []
        for rule in self.rules:
            if not rule.matches(req, attrs):
                continue
            if rule.code is not None and failure is not None and not rule.latency:
                continue
            if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                continue
            rule.fired += 1
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining == 0:
                    spent.append(rule)
            delay += rule.latency
            if rule.code is not None and failure is None:
                failure = rule.error()
        if spent:
            self.rules = [r for r in self.rules if r not in spent]
        if delay:
            await asyncio.sleep(delay)
        if failure is not None:
            raise failure

    # --- connection-level faults ------------------------------------------------------

    async def drop_watches(self, *, include_loopback: bool = False) -> int:
        """Cut every open watch connection of the fronts (clients see the stream break).
        With `include_loopback`, also end the server-side watches of in-process clients
        (loopback clients; the emulator's own controllers are fed by the storage and keep
        their subscriptions, as kube-apiserver's own parts do)."""
        dropped = 0
        for front in list(self._fronts):
            dropped += await front.drop_streams()
        if include_loopback and self.storage is not None:
            await _maybe_await(self.storage.close_all_watches())
        return dropped

    async def compact(self) -> None:
        """Compact the event history: watches from an older resourceVersion get 410."""
        if self.storage is None:
            raise RuntimeError("faults has no storage to compact")
        await _maybe_await(self.storage.compact())

    async def go_offline(self, seconds: float | None = None) -> None:
        """Refuse connections (and reset open ones); come back after `seconds` if given."""
        self._cancel_back_timer()
        self._offline = True
        for front in list(self._fronts):
            await front.go_offline()
        if seconds is not None:
            self._back_timer = asyncio.create_task(self._back_after(seconds))

    async def come_back(self) -> None:
        self._cancel_back_timer()
        self._offline = False
        for front in list(self._fronts):
            await front.come_back()

    async def _back_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._back_timer = None
        await self.come_back()

    def _cancel_back_timer(self) -> None:
        timer, self._back_timer = self._back_timer, None
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def close(self) -> None:
        self._cancel_back_timer()

    def state(self) -> dict[str, Any]:
        return {
            "rules": [r.to_dict() for r in self.rules],
            "offline": self._offline,
            "seed": self.seed,
        }

    # --- HTTP control -----------------------------------------------------------------

    async def http(self, req: ApiRequest) -> ApiResponse:
        """/_emulator/faults[/...]; see docs in the module docstring of this file."""
        rest = req.path[len(FAULTS_PREFIX) :].strip("/")
        method = req.method
        try:
            body = _json_body(req)
            if rest == "":
                if method == "GET":
                    return json_response(200, self.state())
                if method == "DELETE":
                    self.clear()
                    return json_response(200, self.state())
            elif rest == "rules":
                if method == "GET":
                    return json_response(200, {"rules": [r.to_dict() for r in self.rules]})
                if method == "POST":
                    return json_response(201, self._rule_fromjson_response(body).to_dict())
                if method == "DELETE":
                    return json_response(200, {"removed": self.clear()})
            elif rest.startswith("rules/"):
                rule_id = rest[len("rules/") :]
                if method == "DELETE":
                    if not self.remove(rule_id):
                        raise errors.ApiError(
                            404,
                            "NotFound",
                            f'fault rule "{rule_id}" not found',
                            {"name": rule_id, "kind": "faultrules"},
                        )
                    return json_response(200, {"removed": 1})
            elif rest == "seed" and method == "POST":
                seed = body.get("seed")
                if seed is not None and not isinstance(seed, int):
                    raise errors.bad_request("seed must be an integer or null")
                self.reseed(seed)
                return json_response(200, self.state())
            elif rest == "drop-watches" and method == "POST":
                dropped = await self.drop_watches(
                    include_loopback=bool(body.get("includeLoopback", False))
                )
                return json_response(200, {"dropped": dropped})
            elif rest == "compact" and method == "POST":
                await self.compact()
                return json_response(200, {"compacted": True})
            elif rest == "offline" and method == "POST":
                seconds = body.get("seconds")
                if not isinstance(seconds, int | float) or seconds <= 0:
                    # Over HTTP there is no way to ask for the way back: it must be timed.
                    raise errors.bad_request("offline needs a positive number of seconds")
                out = json_response(202, {"offline": True, "seconds": seconds})
                return ResponseWithFollowUp(
                    out.status,
                    out.body,
                    out.headers,
                    then=lambda: self.go_offline(float(seconds)),
                )
            elif rest == "online" and method == "POST":
                await self.come_back()
                return json_response(200, self.state())
            elif rest not in _ACTIONS:
                raise _not_found()
            raise errors.method_not_allowed()
        except errors.ApiError as err:
            return status_response(err)
        except (ValueError, TypeError) as exc:
            return status_response(errors.bad_request(str(exc)))

    def _rule_fromjson_response(self, body: dict[str, Any]) -> FaultRule:
        known = {
            "verb",
            "verbs",
            "resource",
            "user",
            "namespace",
            "latencySeconds",
            "code",
            "retryAfterSeconds",
            "message",
            "probability",
            "count",
        }
        unknown = sorted(set(body) - known)
        if unknown:
            raise errors.bad_request(f"unknown fields in fault rule: {', '.join(unknown)}")
        verb = body.get("verbs", body.get("verb"))
        return self.add_rule(
            verb=verb,
            resource=body.get("resource"),
            user=body.get("user"),
            namespace=body.get("namespace"),
            latency=float(body.get("latencySeconds", 0.0)),
            code=body.get("code"),
            retry_after=body.get("retryAfterSeconds"),
            message=body.get("message"),
            probability=float(body.get("probability", 1.0)),
            count=body.get("count"),
        )


FAULTS_PREFIX = "/_emulator/faults"
_ACTIONS = frozenset(("seed", "drop-watches", "compact", "offline", "online"))
CONTROL_PREFIX = "/_emulator/"
MASTERS = "system:masters"

Authenticate = Callable[[ApiRequest], "UserInfo | Awaitable[UserInfo]"]
Route = Callable[[ApiRequest], Awaitable[ApiResponse]]


class ControlRouter:
    """Serves /_emulator/<name>[/...] to system:masters and passes everything else to `api`.

    Control requests skip the request chain on purpose: they are neither counted nor
    subject to injected faults.
    """

    def __init__(self, api: Handler, authenticate: Authenticate, routes: dict[str, Route]) -> None:
        self._api = api
        self._authenticate = authenticate
        self._routes = routes

    async def handle(self, req: ApiRequest) -> ApiResponse:
        if not req.path.startswith(CONTROL_PREFIX):
            return await self._api.handle(req)
        try:
            user = await _maybe_await(self._authenticate(req))
        except errors.ApiError as err:
            return status_response(err)
        if MASTERS not in user.groups:
            return status_response(errors.forbidden_path(user.name, req.method.lower(), req.path))
        name = req.path[len(CONTROL_PREFIX) :].split("/", 1)[0]
        route = self._routes.get(name)
        if route is None:
            return status_response(_not_found())
        return await route(req)


def _not_found() -> errors.ApiError:
    return errors.ApiError(404, "NotFound", "the server could not find the requested resource")


def _json_body(req: ApiRequest) -> dict[str, Any]:
    if not req.body.strip():
        return {}
    try:
        body = json.loads(req.body)
    except ValueError as exc:
        raise errors.bad_request(f"invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object")
    return body
