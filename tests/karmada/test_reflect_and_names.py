from agent.karmada.names import generate_work_name
from agent.karmada.reflect import reflect_status


def test_deployment_status_is_wrapped_with_generations() -> None:
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "generation": 4,
            "annotations": {"resourcetemplate.karmada.io/generation": "7"},
        },
        "status": {
            "replicas": 2,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "updatedReplicas": 2,
            "observedGeneration": 4,
            "conditions": [{"type": "Available"}],
        },
    }
    assert reflect_status(obj) == {
        "generation": 4,
        "resourceTemplateGeneration": 7,
        "replicas": 2,
        "updatedReplicas": 2,
        "readyReplicas": 2,
        "availableReplicas": 2,
    }


def test_fields_without_omitempty_are_kept_at_zero() -> None:
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {},
        "status": {"numberReady": 0},
    }
    assert reflect_status(ds) == {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    }
    svc = {"apiVersion": "v1", "kind": "Service", "status": {"conditions": []}}
    assert reflect_status(svc) == {"loadBalancer": {}}


def test_other_kinds_reflect_whole_status_or_none() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Running", "podIP": "10.1.1.1"}}
    assert reflect_status(pod) == {"phase": "Running", "podIP": "10.1.1.1"}
    assert reflect_status({"apiVersion": "v1", "kind": "ConfigMap"}) is None


def test_generate_work_name_is_stable_and_safe() -> None:
    name = generate_work_name("Deployment", "Nginx:Web", "default")
    assert name.startswith("nginx.web-")
    suffix = name.removeprefix("nginx.web-")
    assert suffix
    assert set(suffix) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert name == generate_work_name("Deployment", "Nginx:Web", "default")
    assert name != generate_work_name("Deployment", "Nginx:Web", "other")
