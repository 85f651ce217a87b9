"""Interpreter webhook configurations, requests and responses (no I/O), and JSON Patch."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent.interpreter import webhooks as hooks

Obj = dict[str, Any]


def configuration(name: str, *webhooks: Obj) -> Obj:
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": list(webhooks),
    }


def webhook(name: str, operations: list[str], kinds: list[str], **client: Any) -> Obj:
    return {
        "name": name,
        "clientConfig": client or {"url": "https://hooks.example:8443/interpret"},
        "rules": [
            {
                "operations": operations,
                "apiGroups": ["example.io"],
                "apiVersions": ["*"],
                "kinds": kinds,
            }
        ],
        "interpreterContextVersions": ["v1alpha1"],
    }


WIDGET = {
    "apiVersion": "example.io/v1",
    "kind": "Widget",
    "metadata": {"name": "w", "namespace": "team"},
    "spec": {"replicas": 2},
}


def test_rules_match_group_version_kind_and_operation() -> None:
    webhooks = hooks.WebhookSet()
    webhooks.put(configuration("b", webhook("health.b", ["InterpretHealth"], ["Widget"])))
    webhooks.put(configuration("a", webhook("all.a", ["*"], ["Gadget"])))
    # Two webhooks of one configuration: the first by name answers, not the first listed.
    webhooks.put(
        configuration(
            "c",
            webhook("z.c", ["InterpretHealth"], ["Widget"]),
            webhook("b.c", ["InterpretHealth"], ["Thing"]),
            webhook("a.c", ["InterpretHealth"], ["Thing"]),
        )
    )
    thing = webhooks.match("example.io/v1", "Thing", "InterpretHealth")
    assert thing is not None
    assert thing.name == "a.c"
    found = webhooks.match("example.io/v1", "Widget", "InterpretHealth")
    assert found is not None
    assert found.name == "health.b"
    assert found.timeout == hooks.DEFAULT_TIMEOUT
    assert webhooks.match("example.io/v1", "Widget", "ReflectStatus") is None
    gadget = webhooks.match("example.io/v2", "Gadget", "ReflectStatus")
    assert gadget is not None
    assert gadget.name == "all.a"
    assert webhooks.match("other.io/v1", "Gadget", "Retain") is None
    webhooks.remove(configuration("a"))
    assert webhooks.match("example.io/v2", "Gadget", "ReflectStatus") is None


def test_client_config_url_service_ca_and_timeout() -> None:
    service = webhook(
        "svc",
        ["*"],
        ["*"],
        service={"namespace": "hooks", "name": "interp", "port": 8443, "path": "/x"},
        caBundle=base64.b64encode(b"PEM").decode(),
    )
    service["timeoutSeconds"] = 3
    [parsed] = hooks.parse_configuration(configuration("c", service))
    assert parsed.url == "https://interp.hooks.svc:8443/x"
    assert parsed.ca_bundle == b"PEM"
    assert parsed.timeout == 3.0


def test_request_is_a_resource_interpreter_context() -> None:
    [hook] = hooks.parse_configuration(configuration("c", webhook("h", ["*"], ["*"])))
    body = hooks.request(hook, "ReflectStatus", "u1", WIDGET, None)
    assert body == {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterContext",
        "request": {
            "uid": "u1",
            "kind": {"group": "example.io", "version": "v1", "kind": "Widget"},
            "name": "w",
            "namespace": "team",
            "operation": "InterpretStatus",
            "object": WIDGET,
            "replicas": 0,
        },
    }
    retain = hooks.request(hook, "Retain", "u2", WIDGET, {"observed": True})
    assert retain["request"]["observedObject"] == {"observed": True}
    unsupported = {**webhook("h", ["*"], ["*"]), "interpreterContextVersions": ["v9"]}
    [old] = hooks.parse_configuration(configuration("c", unsupported))
    with pytest.raises(hooks.WebhookError, match="accepts none"):
        hooks.request(old, "Retain", "u", WIDGET, None)


def answer(uid: str, **response: Any) -> Obj:
    return {"response": {"uid": uid, "successful": True, **response}}


def test_responses() -> None:
    [hook] = hooks.parse_configuration(configuration("c", webhook("h", ["*"], ["*"])))
    assert hooks.health(hook, "u", answer("u", healthy=False)) is False
    assert hooks.status(hook, "u", answer("u", rawStatus={"ready": 1})) == {"ready": 1}
    with pytest.raises(hooks.WebhookError, match="without `rawStatus`"):
        hooks.status(hook, "u", answer("u"))
    assert hooks.retained(hook, "u", answer("u"), WIDGET) == WIDGET
    with pytest.raises(hooks.WebhookError, match="only a JSONPatch"):
        hooks.retained(hook, "u", answer("u", patch="W10="), WIDGET)
    with pytest.raises(hooks.WebhookError, match="empty"):
        hooks.retained(hook, "u", answer("u", patchType="JSONPatch"), WIDGET)
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 5}]
    patch = base64.b64encode(json.dumps(ops).encode()).decode()
    retained = hooks.retained(hook, "u", answer("u", patch=patch, patchType="JSONPatch"), WIDGET)
    assert retained["spec"] == {"replicas": 5}
    assert WIDGET["spec"] == {"replicas": 2}
    with pytest.raises(hooks.WebhookError, match="uid mismatch"):
        hooks.health(hook, "u", answer("v", healthy=True))
    with pytest.raises(hooks.WebhookError, match="refused: nope \\(code 500\\)"):
        hooks.health(
            hook,
            "u",
            {
                "response": {
                    "uid": "u",
                    "successful": False,
                    "status": {"message": "nope", "code": 500},
                }
            },
        )
    with pytest.raises(hooks.WebhookError, match="without `healthy`"):
        hooks.health(hook, "u", answer("u"))
    with pytest.raises(hooks.WebhookError, match="unusable patch"):
        hooks.retained(hook, "u", answer("u", patch="!!", patchType="JSONPatch"), WIDGET)


def patched(obj: Obj, operations: Any) -> Obj:
    [hook] = hooks.parse_configuration(configuration("c", webhook("h", ["*"], ["*"])))
    patch = base64.b64encode(json.dumps(operations).encode()).decode()
    return hooks.retained(hook, "u", answer("u", patch=patch, patchType="JSONPatch"), obj)


def test_json_patch_operations() -> None:
    doc = {"a": {"b": [1, 2]}, "c": "x"}
    out = patched(
        doc,
        [
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "add", "path": "/a/b/0", "value": 0},
            {"op": "remove", "path": "/c"},
            {"op": "replace", "path": "/a/b/1", "value": 10},
            {"op": "copy", "from": "/a/b", "path": "/d"},
            {"op": "move", "from": "/d", "path": "/e~1f"},
            {"op": "test", "path": "/e~1f/0", "value": 0},
        ],
    )
    assert out == {"a": {"b": [0, 10, 2, 3]}, "e/f": [0, 10, 2, 3]}
    assert doc == {"a": {"b": [1, 2]}, "c": "x"}  # the desired object is left as it was


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ([{"op": "remove", "path": "/missing"}], "non-existent"),
        ([{"op": "test", "path": "/a", "value": 1}], "not equal"),
        ([{"op": "add", "path": "/a/b/9", "value": 1}], "outside of list"),
        ([{"op": "add", "path": "/a/b/01", "value": 1}], "not a valid sequence index"),
        ([{"op": "add", "path": "a", "value": 1}], "must start with /"),
        ([{"op": "add", "path": "/s/x", "value": 1}], "non-container"),
        ([{"op": "add", "path": "/x"}], "'value'"),
        ([{"op": "jump", "path": "/a"}], "Unknown operation"),
        ([5], "must be an object"),
        ({"op": "add"}, "a list of operations"),
        ('[{"op": "remove", "path": "/a"}]', "a list of operations"),
        ([{"op": "replace", "path": "", "value": 1}], "non-object"),
    ],
)
def test_unusable_json_patches_are_refused_with_why(bad: Any, says: str) -> None:
    with pytest.raises(hooks.WebhookError, match=says):
        patched({"a": {"b": []}, "s": "text"}, bad)
