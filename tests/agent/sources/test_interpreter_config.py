"""The karmada profile serves ResourceInterpreterCustomizations and
ResourceInterpreterWebhookConfigurations with their published schemas, as the agent reads them."""

from __future__ import annotations

import pytest

from agent.kube.errors import InvalidError
from agent.resources import (
    RESOURCE_INTERPRETER_CUSTOMIZATIONS,
    RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS,
)
from emulator.emulator import run_emulator
from tests.agent.controllers.harness import kube_client

from .interpreter_webhook_server import configuration
from .test_interpreter import customization


async def test_schemas_refuse_what_the_agent_could_not_use() -> None:
    async with run_emulator("karmada") as cp:
        client = kube_client(cp)
        try:
            good = customization("widgets", health="function InterpretHealth() return true end")
            created = await client.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, good)
            assert created["spec"]["target"] == {"apiVersion": "example.io/v1", "kind": "Widget"}
            no_target = customization("broken")
            del no_target["spec"]["target"]
            with pytest.raises(InvalidError, match="target"):
                await client.create(RESOURCE_INTERPRETER_CUSTOMIZATIONS, no_target)

            hook = configuration("hooks", "https://h.example/x", "", ["InterpretHealth"])
            await client.create(RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS, hook)
            del hook["webhooks"][0]["interpreterContextVersions"]
            hook["metadata"] = {"name": "no-versions"}
            with pytest.raises(InvalidError, match="interpreterContextVersions"):
                await client.create(RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS, hook)
            listed = await client.list(RESOURCE_INTERPRETER_WEBHOOK_CONFIGURATIONS)
            assert [i["metadata"]["name"] for i in listed["items"]] == ["hooks"]
        finally:
            await client.close()
