"""What a Retain answer of an interpreter webhook costs the agent: `webhooks.retained` (decode
the answer, apply its JSON Patch to a copy of the desired object) on a Deployment, for the
patches such webhooks answer with.

    python -m bench.webhook_patch [--runs 20000]

Patches: one `replace` (the member's replicas kept); four operations (replicas, paused, an
annotation and a label kept); twelve (those, plus container env entries added, replaced and
removed, a `test`, a `copy` and a `move`). Prints microseconds per call, the best of five rounds.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import timeit
from typing import Any

from agent.interpreter import webhooks

Obj = dict[str, Any]


def deployment() -> Obj:
    container = {
        "name": "app",
        "image": "registry.example/app:1.2.3",
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "env": [{"name": f"VAR_{i}", "value": str(i)} for i in range(6)],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "labels": {"app": "web", "tier": "frontend"},
            "annotations": {"example.io/owner": "team-a"},
        },
        "spec": {
            "replicas": 3,
            "paused": False,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container, {**copy.deepcopy(container), "name": "side"}]},
            },
        },
    }


ENV = "/spec/template/spec/containers/0/env"
PATCHES: dict[str, list[Obj]] = {
    "1 op": [{"op": "replace", "path": "/spec/replicas", "value": 5}],
    "4 ops": [
        {"op": "replace", "path": "/spec/replicas", "value": 5},
        {"op": "replace", "path": "/spec/paused", "value": True},
        {"op": "add", "path": "/metadata/annotations/example.io~1kept", "value": "yes"},
        {"op": "add", "path": "/metadata/labels/member", "value": "m1"},
    ],
    "12 ops": [
        {"op": "replace", "path": "/spec/replicas", "value": 5},
        {"op": "replace", "path": "/spec/paused", "value": True},
        {"op": "add", "path": "/metadata/annotations/example.io~1kept", "value": "yes"},
        {"op": "add", "path": "/metadata/labels/member", "value": "m1"},
        {"op": "test", "path": f"{ENV}/0/name", "value": "VAR_0"},
        {"op": "add", "path": f"{ENV}/-", "value": {"name": "MEMBER", "value": "m1"}},
        {"op": "add", "path": f"{ENV}/0", "value": {"name": "FIRST", "value": "0"}},
        {"op": "replace", "path": f"{ENV}/2/value", "value": "changed"},
        {"op": "remove", "path": f"{ENV}/3"},
        {"op": "copy", "from": f"{ENV}/1", "path": "/spec/template/spec/containers/1/env/-"},
        {"op": "move", "from": "/metadata/labels/tier", "path": "/metadata/labels/layer"},
        {"op": "remove", "path": "/spec/template/spec/containers/1/resources"},
    ],
}


def answer(uid: str, operations: list[Obj]) -> Obj:
    patch = base64.b64encode(json.dumps(operations).encode()).decode()
    return {
        "apiVersion": "config.karmada.io/v1alpha1",
        "kind": "ResourceInterpreterContext",
        "response": {"uid": uid, "successful": True, "patch": patch, "patchType": "JSONPatch"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000)
    args = parser.parse_args()
    [hook] = webhooks.parse_configuration(
        {
            "metadata": {"name": "bench"},
            "webhooks": [
                {
                    "name": "retain.bench",
                    "clientConfig": {"url": "https://hooks.example:8443/interpret"},
                    "rules": [
                        {
                            "operations": ["Retain"],
                            "apiGroups": ["apps"],
                            "apiVersions": ["v1"],
                            "kinds": ["Deployment"],
                        }
                    ],
                    "interpreterContextVersions": ["v1alpha1"],
                }
            ],
        }
    )
    desired = deployment()
    for name, operations in PATCHES.items():
        reply = answer("u", operations)
        webhooks.retained(hook, "u", reply, desired)  # fails here, not in the timing, if wrong
        best = min(
            timeit.repeat(
                lambda reply=reply: webhooks.retained(hook, "u", reply, desired),
                number=args.runs,
                repeat=5,
            )
        )
        print(f"{name:>7}: {best / args.runs * 1e6:7.1f} us per Retain answer")


if __name__ == "__main__":
    main()
