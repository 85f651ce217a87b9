"""The interpreter chain: user customization, else bundled, else built-in rules, per operation."""

from __future__ import annotations

from typing import Any

import pytest

from agent.interpreter import Interpreter, InterpretError
from agent.interpreter.customizations import CustomizationSet, bundled
from agent.karmada import names
from agent.karmada.reflect import ReflectError

from .samples import customization

Obj = dict[str, Any]


def widget(ready: int = 1, replicas: int = 1) -> Obj:
    return {
        "apiVersion": "example.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default", "generation": 1},
        "spec": {"replicas": replicas},
        "status": {"ready": ready, "conditions": []},
    }


def volcano_job(phase: str) -> Obj:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "generation": 2},
        "spec": {"minAvailable": 3},
        "status": {"state": {"phase": phase}, "running": 3},
    }


HEALTH = "function InterpretHealth(o) return o.status.ready >= o.spec.replicas end"
REFLECT = "function ReflectStatus(o) return {ready = o.status.ready, conditions = {}} end"


def interpreter(*objs: Obj) -> Interpreter:
    chain = Interpreter(CustomizationSet(bundled()))
    chain.customizations.replace_user(objs)
    return chain


def test_kinds_without_customization_use_the_built_in_rules() -> None:
    chain = interpreter()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "d",
            "generation": 1,
            "annotations": {"resourcetemplate.karmada.io/generation": "1"},
        },
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "updatedReplicas": 1, "availableReplicas": 1},
    }
    assert chain.interpret_health(deployment) == names.UNHEALTHY
    assert chain.reflect_status(deployment) is not None
    # No rule at all: Healthy, the whole status reflected, nothing retained.
    assert chain.interpret_health(widget(0)) == names.HEALTHY
    assert chain.reflect_status(widget(0)) == widget(0)["status"]
    assert chain.retain(widget(), widget(5)) == widget()


def test_user_customization_interprets_health_and_status() -> None:
    chain = interpreter(
        customization("w", "example.io/v1", "Widget", health=HEALTH, reflect=REFLECT)
    )
    assert chain.interpret_health(widget(0, 2)) == names.UNHEALTHY
    assert chain.interpret_health(widget(2, 2)) == names.HEALTHY
    # An empty table with nothing to say what it was is dropped, as upstream does.
    assert chain.reflect_status(widget(2, 2)) == {"ready": 2}


def test_bundled_customization_then_user_override_per_operation() -> None:
    chain = interpreter()
    assert chain.interpret_health(volcano_job("Failed")) == names.UNHEALTHY
    assert chain.interpret_health(volcano_job("Running")) == names.HEALTHY
    reflected = chain.reflect_status(volcano_job("Running"))
    assert reflected == {"state": {"phase": "Running"}, "running": 3}
    override = customization(
        "mine",
        "batch.volcano.sh/v1alpha1",
        "Job",
        health="function InterpretHealth() return false end",
    )
    chain.customizations.put(override)
    assert chain.interpret_health(volcano_job("Running")) == names.UNHEALTHY
    # ReflectStatus is not overridden: still the bundled one.
    assert chain.reflect_status(volcano_job("Running")) == reflected
    chain.customizations.remove(override)
    assert chain.interpret_health(volcano_job("Running")) == names.HEALTHY


def test_first_user_customization_by_name_wins() -> None:
    yes = "function InterpretHealth() return true end"
    no = "function InterpretHealth() return false end"
    chain = interpreter(
        customization("b", "example.io/v1", "Widget", health=no),
        customization("a", "example.io/v1", "Widget", health=yes),
    )
    assert chain.interpret_health(widget()) == names.HEALTHY


def test_changed_script_takes_effect() -> None:
    chain = interpreter(customization("w", "example.io/v1", "Widget", health=HEALTH))
    assert chain.interpret_health(widget(0)) == names.UNHEALTHY
    chain.customizations.put(
        customization(
            "w", "example.io/v1", "Widget", health="function InterpretHealth() return true end"
        )
    )
    assert chain.interpret_health(widget(0)) == names.HEALTHY


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ("function InterpretHealth() error('boom') end", "boom"),
        ("function InterpretHealth() while true do end end", "budget"),
        ("function InterpretHealth() return 'yes' end", "returned a string, not a boolean"),
        ("function InterpretHealth() return os.execute('id') end", "nil"),
    ],
)
def test_failing_health_script_names_the_customization(script: str, reason: str) -> None:
    chain = interpreter(customization("broken", "example.io/v1", "Widget", health=script))
    with pytest.raises(InterpretError, match=reason) as raised:
        chain.interpret_health(widget())
    assert 'ResourceInterpreterCustomization "broken" failed in InterpretHealth' in str(
        raised.value
    )


def test_failing_reflect_script_is_a_reflect_error_naming_it() -> None:
    chain = interpreter(
        customization(
            "bad", "example.io/v1", "Widget", reflect="function ReflectStatus() return 1 end"
        )
    )
    with pytest.raises(ReflectError, match='"bad" failed in ReflectStatus: returned a number'):
        chain.reflect_status(widget())


def test_retain_keeps_member_values_status_and_version_and_drops_server_fields() -> None:
    script = """
    function Retain(desired, observed)
      desired.spec.replicas = observed.spec.replicas
      desired.metadata = observed.metadata
      desired.status = observed.status
      return desired
    end
    """
    chain = interpreter(customization("keep", "example.io/v1", "Widget", retain=script))
    desired = {**widget(), "spec": {"replicas": 1, "selector": {}, "ports": []}}
    observed = widget(3, 7)
    observed["metadata"] = {**observed["metadata"], "resourceVersion": "9", "uid": "u"}
    retained = chain.retain(desired, observed)
    assert retained["spec"] == {"replicas": 7, "selector": {}, "ports": []}
    # As upstream's: the status stays, and the observed version makes the apply conditional.
    assert retained["status"] == observed["status"]
    assert retained["metadata"] == {"name": "w", "namespace": "default", "resourceVersion": "9"}


def test_retain_script_sees_the_desired_object_at_the_observed_version() -> None:
    script = """
    function Retain(desired, observed)
      desired.spec.seen = desired.metadata.resourceVersion
      return desired
    end
    """
    chain = interpreter(customization("v", "example.io/v1", "Widget", retain=script))
    observed = widget(3, 7)
    observed["metadata"] = {**observed["metadata"], "resourceVersion": "42"}
    desired = {**widget(), "spec": {"replicas": 1}}
    retained = chain.retain(desired, observed)
    assert retained["spec"]["seen"] == "42"
    assert retained["metadata"]["resourceVersion"] == "42"
    assert "resourceVersion" not in desired["metadata"]


def test_failing_retain_names_the_customization() -> None:
    chain = interpreter(
        customization("r", "example.io/v1", "Widget", retain="function Retain() return nil end")
    )
    with pytest.raises(InterpretError, match='"r" failed in Retain: returned nil'):
        chain.retain(widget(), widget())


def test_a_customization_without_target_is_ignored() -> None:
    broken = customization("x", "example.io/v1", "Widget", health=HEALTH)
    del broken["spec"]["target"]
    chain = interpreter(broken)
    assert chain.interpret_health(widget(0)) == names.HEALTHY


def test_kube_library_helpers() -> None:
    script = """
    local kube = require("kube")
    function ReflectStatus(o)
      local template = o.spec.template
      return {
        cpu = kube.resourceAdd("100m", "1", nil),
        requirements = kube.accuratePodRequirements(template),
        dependencies = kube.getPodDependencies(template, "team"),
      }
    end
    """
    chain = interpreter(customization("k", "example.io/v1", "Widget", reflect=script))
    template = {
        "metadata": {"namespace": "team"},
        "spec": {
            "nodeSelector": {"zone": "a"},
            "serviceAccountName": "runner",
            "containers": [
                {
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}},
                    "envFrom": [{"configMapRef": {"name": "cfg"}}],
                },
                {"resources": {"requests": {"cpu": "250m"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
            "volumes": [{"secret": {"secretName": "creds"}}],
        },
    }
    out = chain.reflect_status({**widget(), "spec": {"template": template}})
    assert out == {
        "cpu": "1100m",
        "requirements": {
            "nodeClaim": {"nodeSelector": {"zone": "a"}},
            "resourceRequest": {"cpu": "2", "memory": "64Mi"},
        },
        "dependencies": [
            {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "team", "name": "cfg"},
            {"apiVersion": "v1", "kind": "Secret", "namespace": "team", "name": "creds"},
            {"apiVersion": "v1", "kind": "ServiceAccount", "namespace": "team", "name": "runner"},
        ],
    }


def test_pod_requirements_as_karmada_computes_them() -> None:
    from agent.interpreter.kubelib import pod_requirements, resource_add

    template = {
        "spec": {
            "containers": [
                # A limit stands in for a missing request.
                {"resources": {"limits": {"cpu": "1", "memory": "1G", "example.com/gpu": "1"}}},
                {"resources": {"requests": {"cpu": "0.5", "ephemeral-storage": "1Gi"}}},
            ],
            "overhead": {"cpu": "100m"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
        }
    }
    assert pod_requirements(template) == {
        "nodeClaim": {"tolerations": [{"key": "k", "operator": "Exists"}]},
        "resourceRequest": {
            "cpu": "1600m",
            # BinarySI, as Go writes 10^9 bytes.
            "memory": "1000000000",
            "ephemeral-storage": "1Gi",
            "example.com/gpu": "1",
        },
    }
    assert pod_requirements({"spec": {"containers": [{"name": "c"}]}}) is None
    assert resource_add("1Gi", "512Mi") == "1536Mi"
    assert resource_add() == "0"
