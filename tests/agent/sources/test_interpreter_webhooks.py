"""Interpreter webhooks over HTTPS in the chain: health, status and retain answers, their place
between the user's customizations and the bundled ones, a bad certificate, a timeout, and a
failure reported once per kind."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agent.interpreter import Interpreter, InterpretError
from agent.interpreter.chain import InterpretReflectError
from agent.karmada import names
from agent.resources import RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS
from agent.sources.interpreter import AgentInterpreter
from emulator.pki import CertificateAuthority
from tests.agent.controllers.harness import WIDGETS, crd, eventually, karmada_work, running_pair
from tests.agent.interpreter.samples import customization

from .interpreter_webhook_server import InterpreterWebhook, configuration
from .test_interpreter import entry, install, set_status, widget

JSON = dict[str, Any]

ALWAYS_HEALTHY = "function InterpretHealth() return true end"

WIDGET = {
    "apiVersion": "example.io/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "namespace": "default", "resourceVersion": "3"},
    "spec": {"replicas": 2},
    "status": {"ready": 1},
}


@pytest_asyncio.fixture
async def server() -> AsyncIterator[InterpreterWebhook]:
    hooks = InterpreterWebhook()
    await hooks.start()
    yield hooks
    await hooks.stop()


@pytest_asyncio.fixture
async def chain() -> AsyncIterator[AgentInterpreter]:
    interpreter = AgentInterpreter(Interpreter())
    yield interpreter
    await interpreter.caller.close()


def patch(*ops: JSON) -> str:
    return base64.b64encode(json.dumps(list(ops)).encode()).decode()


async def test_health_status_and_retain_answers(
    server: InterpreterWebhook, chain: AgentInterpreter
) -> None:
    server.answer("health", lambda req: {"successful": True, "healthy": False})
    server.answer("status", lambda req: {"successful": True, "rawStatus": {"seen": req["name"]}})
    server.answer(
        "retain",
        lambda req: {
            "successful": True,
            "patchType": "JSONPatch",
            "patch": patch(
                {
                    "op": "replace",
                    "path": "/spec/replicas",
                    "value": req["observedObject"]["spec"]["replicas"],
                }
            ),
        },
    )
    for path, operation in (
        ("health", "InterpretHealth"),
        ("status", "InterpretStatus"),
        ("retain", "Retain"),
    ):
        chain.interpreter.webhooks.put(
            configuration(path, server.url(path), server.ca_bundle, [operation])
        )
    assert await chain.interpret_health(WIDGET) == names.UNHEALTHY
    assert await chain.reflect_status(WIDGET) == {"seen": "w"}
    observed = {**WIDGET, "spec": {"replicas": 9}}
    retained = await chain.retain({**WIDGET, "status": None}, observed)
    assert retained["spec"] == {"replicas": 9}
    assert "resourceVersion" not in retained["metadata"]
    [health_request] = server.requests["health"]
    assert health_request["operation"] == "InterpretHealth"
    assert health_request["kind"] == {"group": "example.io", "version": "v1", "kind": "Widget"}
    assert server.requests["retain"][0]["observedObject"] == observed


async def test_which_kinds_have_their_health_judged(
    server: InterpreterWebhook, chain: AgentInterpreter
) -> None:
    # Built-in rules and bundled customizations judge these; nothing judges a ConfigMap yet.
    assert chain.interprets_health("apps/v1", "Deployment")
    assert chain.interprets_health("argoproj.io/v1alpha1", "Workflow")
    assert not chain.interprets_health("v1", "ConfigMap")
    assert not chain.interprets_health("example.io/v1", "Widget")
    chain.interpreter.webhooks.put(
        configuration("health", server.url("health"), server.ca_bundle, ["InterpretHealth"])
    )
    assert chain.interprets_health("example.io/v1", "Widget")
    chain.interpreter.customizations.put(
        customization("mine", "v1", "ConfigMap", health=ALWAYS_HEALTHY)
    )
    assert chain.interprets_health("v1", "ConfigMap")


async def test_user_customization_wins_over_webhook_which_wins_over_bundled(
    server: InterpreterWebhook, chain: AgentInterpreter
) -> None:
    server.answer("health", lambda req: {"successful": True, "healthy": False})
    chain.interpreter.webhooks.put(
        configuration("health", server.url("health"), server.ca_bundle, ["InterpretHealth"])
    )
    rollout = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "r", "generation": 1},
        "spec": {},
        "status": {"phase": "Healthy", "observedGeneration": "1"},
    }
    # The bundled Rollout rule would say Healthy: the webhook answers first.
    assert await chain.interpret_health(rollout) == names.UNHEALTHY
    chain.interpreter.customizations.put(
        customization("mine", "argoproj.io/v1alpha1", "Rollout", health=ALWAYS_HEALTHY)
    )
    assert await chain.interpret_health(rollout) == names.HEALTHY
    assert len(server.requests["health"]) == 1


async def test_bad_certificate_fails_naming_the_webhook_once_per_kind(
    server: InterpreterWebhook, chain: AgentInterpreter
) -> None:
    server.answer("health", lambda req: {"successful": True, "healthy": True})
    other_ca = base64.b64encode(CertificateAuthority.generate("other").cert_pem).decode()
    chain.interpreter.webhooks.put(
        configuration(
            "health", server.url("health"), other_ca, ["InterpretHealth", "InterpretStatus"]
        )
    )
    with pytest.raises(InterpretError, match=r'interpreter webhook "health\.example\.io"') as first:
        await chain.interpret_health(WIDGET)
    assert "CERTIFICATE_VERIFY_FAILED" in str(first.value) or "certificate" in str(first.value)
    assert not first.value.repeated
    with pytest.raises(InterpretError) as second:
        await chain.interpret_health(WIDGET)
    assert second.value.repeated
    # Another kind is reported on its own.
    with pytest.raises(InterpretError) as gadget:
        await chain.interpret_health({**WIDGET, "kind": "Gadget"})
    assert not gadget.value.repeated
    with pytest.raises(InterpretReflectError) as reflect:
        await chain.reflect_status(WIDGET)
    # Another operation is reported on its own too.
    assert not reflect.value.repeated
    # Fixed: answers again, and the next failure is news again.
    chain.interpreter.webhooks.put(
        configuration("health", server.url("health"), server.ca_bundle, ["InterpretHealth"])
    )
    assert await chain.interpret_health(WIDGET) == names.HEALTHY


async def test_timeout(server: InterpreterWebhook, chain: AgentInterpreter) -> None:
    server.answer("slow", lambda req: {"successful": True, "healthy": True})
    server.hang.add("slow")
    chain.interpreter.webhooks.put(
        configuration("slow", server.url("slow"), server.ca_bundle, ["InterpretHealth"], timeout=1)
    )
    with pytest.raises(InterpretError, match=r'"slow\.example\.io".*failed in InterpretHealth'):
        await chain.interpret_health(WIDGET)


async def test_a_work_reports_what_the_webhook_says() -> None:
    server = InterpreterWebhook()
    await server.start()
    try:
        server.answer("health", lambda req: {"successful": True, "healthy": False})
        server.answer("status", lambda req: {"successful": True, "rawStatus": {"from": "webhook"}})
        async with running_pair("execution", "workStatus") as pair:
            await install(pair, crd(status=True), WIDGETS)
            await pair.create_work(karmada_work("widget", [widget()]))
            await pair.wait_work("widget", lambda w: entry(w).get("health") == names.HEALTHY)
            await pair.karmada.create(
                RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
                configuration(
                    "health", server.url("health"), server.ca_bundle, ["InterpretHealth"]
                ),
            )
            await pair.karmada.create(
                RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
                configuration(
                    "status", server.url("status"), server.ca_bundle, ["InterpretStatus"]
                ),
            )
            await pair.wait_work(
                "widget",
                lambda w: (
                    entry(w).get("health") == names.UNHEALTHY
                    and entry(w).get("status") == {"from": "webhook"}
                ),
                "health and status from the webhooks",
            )
            # The webhooks go away and the object changes: its status cannot be reflected,
            # which is said once although the Work is retried.
            await server.stop()
            await set_status(pair, WIDGETS, "w", {"ready": 2})

            async def reported(reason: str) -> list[JSON]:
                events = await pair.events_for("widget")
                return [e for e in events if e["reason"] == reason]

            await eventually(
                lambda: reported(names.EVENT_REFLECT_STATUS_FAILED), bool, what="reflect failure"
            )
            # Without the status webhook the health webhook fails alone: Unknown health.
            await pair.karmada.delete(RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS, "status")
            await pair.wait_work(
                "widget",
                lambda w: (
                    entry(w).get("health") == names.UNKNOWN
                    and entry(w).get("status") == {"ready": 2}
                ),
                "Unknown health",
            )
            [health_failed] = await reported(names.EVENT_INTERPRET_HEALTH_FAILED)
            assert 'interpreter webhook "health.example.io"' in health_failed["message"]
            [reflect_failed] = await reported(names.EVENT_REFLECT_STATUS_FAILED)
            assert 'interpreter webhook "status.example.io"' in reflect_failed["message"]
            assert reflect_failed.get("count", 1) == 1
    finally:
        await server.stop()
