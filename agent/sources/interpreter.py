"""The interpreter chain as the controllers ask it, webhooks included.

Upstream's order per operation: the user's ResourceInterpreterCustomization for the kind, else
a ResourceInterpreterWebhookConfiguration's webhook for it, else the bundled customizations,
else the built-in rules. agent.interpreter does all but the webhook calls, which are made here
over HTTPS (caBundle, timeout) through the agent's transport.

A webhook that fails (in pull mode it is often out of reach of the member) is reported once per
webhook and kind: the first failure is logged and its error says so; while the same webhook
keeps failing for that kind, the errors are marked repeated, so that the callers do not record
an Event at every reconcile. The first success after that is logged too.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from agent.interpreter import Interpreter, InterpretError
from agent.interpreter import webhooks as hooks
from agent.interpreter.chain import InterpretReflectError, without_server_fields
from agent.interpreter.customizations import INTERPRET_HEALTH, REFLECT_STATUS, RETAIN
from agent.karmada.health import has_health_rule
from agent.karmada.names import HEALTHY, UNHEALTHY
from agent.kube.config import ClientConfig
from agent.kube.errors import KubeError
from agent.kube.transport import RetryPolicy, Transport
from agent.logs import get_logger

log = get_logger(__name__)

JsonDict = dict[str, Any]
T = TypeVar("T")
# (webhook name, url, operation, apiVersion, kind)
_FailureKey = tuple[str, str, str, str, str]


def _failure_key(webhook: hooks.Webhook, operation: str, obj: JsonDict) -> _FailureKey:
    kind = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
    return (webhook.name, webhook.url, operation, *kind)


class WebhookCaller:
    """POSTs ResourceInterpreterContexts; one transport per webhook endpoint and CA."""

    def __init__(self) -> None:
        self._transports: dict[tuple[str, bytes | None], Transport] = {}
        self._failing: set[_FailureKey] = set()

    def _transport(self, webhook: hooks.Webhook) -> tuple[Transport, str]:
        parts = urlsplit(webhook.url)
        base = f"{parts.scheme}://{parts.netloc}"
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        key = (base, webhook.ca_bundle)
        transport = self._transports.get(key)
        if transport is None:
            config = ClientConfig(
                host=base,
                ca_pem=webhook.ca_bundle,
                qps=0,
                http2=False,
                timeout=webhook.timeout,
                source=f"interpreter webhook {webhook.name}",
            )
            # No retries: a webhook answer is wanted within its timeout or not at all.
            transport = Transport(config, retry=RetryPolicy(max_retries=0, connection_retries=0))
            self._transports[key] = transport
        return transport, path

    async def call(
        self, webhook: hooks.Webhook, operation: str, obj: JsonDict, observed: JsonDict | None
    ) -> tuple[str, Any]:
        """(uid, the decoded answer); raises InterpretError naming the webhook."""
        uid = str(uuid.uuid4())
        key = _failure_key(webhook, operation, obj)
        try:
            body = hooks.request(webhook, operation, uid, obj, observed)
            transport, path = self._transport(webhook)
            response = await transport.request(
                "POST",
                path,
                body=json.dumps(body).encode(),
                content_type="application/json",
                timeout=webhook.timeout,
            )
            answer = response.json()
        except (hooks.WebhookError, KubeError, ValueError) as exc:
            raise self._failed(key, webhook, operation, str(exc)) from None
        if key in self._failing:
            self._failing.discard(key)
            log.info("interpreter webhook answers again", webhook=webhook.name, kind=key[4])
        return uid, answer

    def _failed(
        self, key: _FailureKey, webhook: hooks.Webhook, operation: str, reason: str
    ) -> InterpretError:
        repeated = key in self._failing
        if not repeated:
            self._failing.add(key)
            log.warning(
                "interpreter webhook failed", webhook=webhook.name, kind=key[4], error=reason
            )
        return InterpretError(webhook.describe(), operation, reason, repeated=repeated)

    def answer_failed(
        self, webhook: hooks.Webhook, operation: str, obj: JsonDict, exc: hooks.WebhookError
    ) -> InterpretError:
        return self._failed(_failure_key(webhook, operation, obj), webhook, operation, str(exc))

    async def close(self) -> None:
        transports, self._transports = self._transports, {}
        for transport in transports.values():
            await transport.close()


class AgentInterpreter:
    """InterpretHealth, ReflectStatus and Retain through the whole chain. A Runnable shared by
    the controllers: stopping it closes the webhook connections."""

    name = "interpreter"

    def __init__(self, interpreter: Interpreter, caller: WebhookCaller | None = None) -> None:
        self.interpreter = interpreter
        self.caller = caller or WebhookCaller()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        await self.caller.close()

    def _webhook(self, obj: JsonDict, operation: str) -> hooks.Webhook | None:
        if self.interpreter.has_user_customization(obj, operation):
            return None
        return self.interpreter.webhooks.match(
            str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""), operation
        )

    async def _locally(self, fn: Callable[..., T], operation: str, *objs: JsonDict) -> T:
        """`fn` of the interpreter; scripts run in a worker thread (lupa releases the GIL), so
        that a script using up its budget never holds up the event loop."""
        if self.interpreter.runs_script(objs[0], operation):
            return await asyncio.to_thread(fn, *objs)
        return fn(*objs)

    def interprets_health(self, api_version: str, kind: str) -> bool:
        """Something judges the health of this kind: a customization, a webhook or a built-in
        rule (upstream's InterpretHealth hook is enabled for it). Other kinds are Healthy."""
        typed = {"apiVersion": api_version, "kind": kind}
        return (
            has_health_rule(api_version, kind)
            or self.interpreter.runs_script(typed, INTERPRET_HEALTH)
            or self._webhook(typed, INTERPRET_HEALTH) is not None
        )

    async def interpret_health(self, obj: JsonDict) -> str:
        webhook = self._webhook(obj, INTERPRET_HEALTH)
        if webhook is None:
            return await self._locally(self.interpreter.interpret_health, INTERPRET_HEALTH, obj)
        uid, answer = await self.caller.call(webhook, INTERPRET_HEALTH, obj, None)
        try:
            return HEALTHY if hooks.health(webhook, uid, answer) else UNHEALTHY
        except hooks.WebhookError as exc:
            raise self.caller.answer_failed(webhook, INTERPRET_HEALTH, obj, exc) from None

    async def reflect_status(self, obj: JsonDict) -> JsonDict | None:
        webhook = self._webhook(obj, REFLECT_STATUS)
        if webhook is None:
            return await self._locally(self.interpreter.reflect_status, REFLECT_STATUS, obj)
        try:
            uid, answer = await self.caller.call(webhook, REFLECT_STATUS, obj, None)
            try:
                return hooks.status(webhook, uid, answer)
            except hooks.WebhookError as exc:
                raise self.caller.answer_failed(webhook, REFLECT_STATUS, obj, exc) from None
        except InterpretError as exc:
            raise InterpretReflectError(exc) from None

    async def retain(self, desired: JsonDict, observed: JsonDict) -> JsonDict:
        webhook = self._webhook(desired, RETAIN)
        if webhook is None:
            return await self._locally(self.interpreter.retain, RETAIN, desired, observed)
        uid, answer = await self.caller.call(webhook, RETAIN, desired, observed)
        try:
            return without_server_fields(hooks.retained(webhook, uid, answer, desired))
        except hooks.WebhookError as exc:
            raise self.caller.answer_failed(webhook, RETAIN, desired, exc) from None
