"""kubectl (oldest and newest supported) against the emulator over HTTPS.

Every assertion is on kubectl's own output, i.e. on what the server answered as kubectl
renders it; a lenient or wrong emulator changes these lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from emulator.emulator import Emulator
from tests import polling

from .kubectl import Kubectl, minor, version_params

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
versions = pytest.mark.parametrize("version", version_params())


def cm(ns: str, mode: str, extra: str = "") -> str:
    return (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n  namespace: {ns}\n"
        f"data:\n  mode: {mode}\n{extra}"
    )


def deployment(ns: str, name: str = "web", replicas: int = 1, image: str = "nginx:1.25") -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: {ns}
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: app
        image: {image}
      - name: sidecar
        image: busybox:1.36
"""


async def wait_until(condition: Callable[[], bool], timeout: float = 10) -> None:
    await polling.eventually(condition, timeout=timeout, interval=0.01)


async def new_ns(k: Kubectl, ns: str) -> None:
    assert (await k.ok("create", "namespace", ns)).strip() == f"namespace/{ns} created"


@versions
async def test_api_resources(version: str, admin_kubeconfig: Path) -> None:
    k = Kubectl(version, admin_kubeconfig)
    out = await k.ok("api-resources")
    assert re.search(r"^deployments\s+deploy\s+apps/v1\s+true\s+Deployment$", out, re.M)
    assert re.search(r"^namespaces\s+ns\s+v1\s+false\s+Namespace$", out, re.M)
    assert re.search(
        r"^customresourcedefinitions\s+crd,crds\s+apiextensions.k8s.io/v1\s+false\s+"
        r"CustomResourceDefinition$",
        out,
        re.M,
    )
    wide = await k.ok("api-resources", "--api-group=apps", "-o", "wide")
    assert re.search(
        r"^deployments\s.*\screate,delete,deletecollection,get,list,patch,update,watch\s+all$",
        wide,
        re.M,
    )


@versions
async def test_apply_client_side_then_server_side_with_conflicts(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    # Client-side apply (default validation: the server's fieldValidation=Strict).
    assert (await k.ok("apply", "-f", "-", stdin=cm(ns, "blue"))).strip() == (
        "configmap/app-config created"
    )
    assert (await k.ok("apply", "-f", "-", stdin=cm(ns, "green"))).strip() == (
        "configmap/app-config configured"
    )
    assert (await k.ok("apply", "-f", "-", stdin=cm(ns, "green"))).strip() == (
        "configmap/app-config unchanged"
    )
    got = await k.ok("get", "configmap", "app-config", "-n", ns, "-o", "jsonpath={.data.mode}")
    assert got == "green"
    bad = await k("apply", "-f", "-", stdin=cm(ns, "x") + "bogus: 1\n")
    assert bad.rc == 1
    assert 'strict decoding error: unknown field "bogus"' in bad.err
    assert bad.err.startswith("Error from server (BadRequest)")

    # Server-side apply, re-applied with a change.
    name = "ssa-config"
    manifest = cm(ns, "one").replace("app-config", name)
    assert (await k.ok("apply", "--server-side", "-f", "-", stdin=manifest)).strip() == (
        f"configmap/{name} serverside-applied"
    )
    changed = manifest.replace("mode: one", "mode: two") + "  extra: kept\n"
    await k.ok("apply", "--server-side", "-f", "-", stdin=changed)
    assert await k.ok("get", "cm", name, "-n", ns, "-o", "jsonpath={.data}") == (
        '{"extra":"kept","mode":"two"}'
    )
    # A second manager that sets a field the first one owns: the real conflict message
    # (an Apply manager is named without "using <apiVersion>", an Update manager with it).
    other = changed.replace("mode: two", "mode: three")
    conflict = await k("apply", "--server-side", "--field-manager=other", "-f", "-", stdin=other)
    assert conflict.rc == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .data.mode' in (conflict.err)
    assert "--force-conflicts" in conflict.err
    forced = await k.ok(
        "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-",
        stdin=other,
    )  # fmt: skip
    assert forced.strip() == f"configmap/{name} serverside-applied"

    plain = await k.ok("get", "cm", name, "-n", ns, "-o", "yaml")
    assert "managedFields" not in plain
    assert "mode: three" in plain
    shown = await k.ok("get", "cm", name, "-n", ns, "-o", "yaml", "--show-managed-fields")
    entries = re.findall(r"manager: (\S+)\n\s+operation: (\S+)", shown)
    # kubectl keeps the co-owned extra; "other" took mode (one Apply entry, no Update).
    assert sorted(entries) == [("kubectl", "Apply"), ("other", "Apply")]
    assert "f:mode: {}" in shown


@versions
async def test_server_side_apply_with_a_stale_resource_version_is_refused(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    """A resourceVersion in an apply configuration is a precondition, as in a PUT."""
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    await k.ok("apply", "--server-side", "-f", "-", stdin=cm(ns, "one"))
    first = await k.ok(
        "get", "cm", "app-config", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}"
    )
    await k.ok("patch", "cm", "app-config", "-n", ns, "--type=merge", "-p", '{"data":{"a":"b"}}')

    def at(version: str, mode: str) -> str:
        return cm(ns, mode).replace(
            f"  namespace: {ns}\n", f'  namespace: {ns}\n  resourceVersion: "{version}"\n'
        )

    stale = await k("apply", "--server-side", "-f", "-", stdin=at(first, "two"))
    assert stale.rc == 1
    # (kubectl words a 409 of an apply as its own error, with its advice on conflicts.)
    assert stale.err.startswith(
        'error: Operation cannot be fulfilled on configmaps "app-config": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    assert await k.ok("get", "cm", "app-config", "-n", ns, "-o", "jsonpath={.data.mode}") == "one"
    current = await k.ok(
        "get", "cm", "app-config", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}"
    )
    await k.ok("apply", "--server-side", "-f", "-", stdin=at(current, "two"))
    assert await k.ok("get", "cm", "app-config", "-n", ns, "-o", "jsonpath={.data.mode}") == "two"


@versions
async def test_server_side_apply_takes_over_client_side_fields(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    """kubectl's client-side -> server-side upgrade: its JSON patch of managedFields (tested
    against the resourceVersion) makes the Apply manager the owner of what client-side apply
    wrote, so a field the server-side configuration leaves out is removed."""
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    await k.ok("apply", "-f", "-", stdin=cm(ns, "blue", "  dropped: soon\n"))
    await k.ok("apply", "--server-side", "-f", "-", stdin=cm(ns, "blue"))
    assert await k.ok("get", "cm", "app-config", "-n", ns, "-o", "jsonpath={.data}") == (
        '{"mode":"blue"}'
    )
    shown = await k.ok("get", "cm", "app-config", "-n", ns, "-o", "yaml", "--show-managed-fields")
    entries = re.findall(r"manager: (\S+)\n\s+operation: (\S+)", shown)
    assert ("kubectl", "Apply") in entries
    assert ("kubectl-client-side-apply", "Update") not in entries


@versions
async def test_get_yaml_shows_server_fields(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    await k.ok("create", "configmap", "c1", "-n", ns, "--from-literal=k=v")
    out = await k.ok("get", "configmap", "c1", "-n", ns, "-o", "yaml")
    assert re.search(r'^  resourceVersion: "\d+"$', out, re.M)
    assert re.search(r"^  uid: [0-9a-f-]{36}$", out, re.M)
    assert re.search(r'^  creationTimestamp: "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"$', out, re.M)
    assert "data:\n  k: v\n" in out
    managed = await k.ok("get", "configmap", "c1", "-n", ns, "-o", "yaml", "--show-managed-fields")
    assert "manager: kubectl-create" in managed
    assert "operation: Update" in managed


@versions
async def test_get_watch_streams_changes(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    async with k.stream("get", "configmaps", "-n", ns, "--watch", "--output-watch-events") as w:
        await k.ok("create", "configmap", "w1", "-n", ns)
        await w.until(lambda line: line.split()[:2] == ["ADDED", "w1"])
        await k.ok("label", "configmap", "w1", "-n", ns, "x=y")
        await w.until(lambda line: line.split()[:2] == ["MODIFIED", "w1"])
        await k.ok("delete", "configmap", "w1", "-n", ns)
        await w.until(lambda line: line.split()[:2] == ["DELETED", "w1"])


@versions
async def test_patch_each_type(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    await k.ok("apply", "-f", "-", stdin=deployment(ns))
    target = ("deployment", "web", "-n", ns)
    out = await k.ok("patch", *target, "--type=json", "-p",
                     '[{"op":"replace","path":"/spec/replicas","value":2}]')  # fmt: skip
    assert out.strip() == "deployment.apps/web patched"
    out = await k.ok("patch", *target, "--type=merge", "-p",
                     '{"metadata":{"labels":{"tier":"front"}}}')  # fmt: skip
    assert out.strip() == "deployment.apps/web patched"
    # Strategic merge: containers merged by name, so the sidecar stays.
    await k.ok("patch", *target, "--type=strategic", "-p",
               '{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}}}')  # fmt: skip
    images = await k.ok("get", *target, "-o",
                        "jsonpath={.spec.replicas} {.metadata.labels.tier} "
                        "{.spec.template.spec.containers[*].image}")  # fmt: skip
    assert images == "2 front nginx:1.27 busybox:1.36"

    # The member's workload simulator writes the status of each new generation (after
    # workload_ready_delay); kubectl calls a patch "no change" only when the object it read
    # before is the object the patch returns, so no status write may fall in between.
    async def status_of_this_generation() -> bool:
        seen = await k.ok(
            "get", *target, "-o", "jsonpath={.metadata.generation} {.status.observedGeneration}"
        )
        generation, _, observed = seen.partition(" ")
        return observed == generation

    await polling.eventually(status_of_this_generation, timeout=15, what="the rollout's status")
    noop = await k.ok("patch", *target, "--type=merge", "-p", '{"spec":{"replicas":2}}')
    assert noop.strip() == "deployment.apps/web patched (no change)"
    bad = await k(
        "patch", *target, "--type=json", "-p", '[{"op":"test","path":"/spec/replicas","value":5}]'
    )
    assert bad.rc == 1
    assert bad.err.startswith("The request is invalid")  # 422 from the failed test op


@versions
async def test_delete_with_finalizer(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    manifest = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: held\n  namespace: {ns}\n"
        "  finalizers: [example.com/hold]\n"
    )
    await k.ok("apply", "-f", "-", stdin=manifest)
    out = await k.ok("delete", "configmap", "held", "-n", ns, "--wait=false")
    assert out.strip() == 'configmap "held" deleted'
    stamp = await k.ok("get", "cm", "held", "-n", ns, "-o",
                       "jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}")  # fmt: skip
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \["example.com/hold"\]', stamp)
    await k.ok("patch", "cm", "held", "-n", ns, "--type=json",
               "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')  # fmt: skip
    gone = await k("get", "cm", "held", "-n", ns)
    assert gone.rc == 1
    assert gone.err.strip() == 'Error from server (NotFound): configmaps "held" not found'


@versions
async def test_wait_for_condition_delete_and_jsonpath(
    version: str, emu: Emulator, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    await k.ok("apply", "-f", "-", stdin=deployment(ns, replicas=2))
    out = await k.ok("wait", "--for=condition=Available", "deployment/web", "-n", ns,
                     "--timeout=30s", timeout=40)  # fmt: skip
    assert out.strip() == "deployment.apps/web condition met"
    if minor(version) >= 31:
        out = await k.ok("wait", "--for=jsonpath={.status.readyReplicas}=2", "deployment/web",
                         "-n", ns, "--timeout=30s", timeout=40)  # fmt: skip
        assert out.strip() == "deployment.apps/web condition met"
    # A finalizer holds the object while `wait` watches it; releasing it ends the wait.
    held = (
        f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: doomed\n  namespace: {ns}\n"
        "  finalizers: [example.com/hold]\n"
    )
    await k.ok("apply", "-f", "-", stdin=held)
    await k.ok("delete", "configmap", "doomed", "-n", ns, "--wait=false")
    watches = emu.accounting.watches_opened(resource="configmaps")
    async with k.stream("wait", "--for=delete", "configmap/doomed", "-n", ns, "--timeout=30s") as w:
        await wait_until(lambda: emu.accounting.watches_opened(resource="configmaps") > watches)
        await k.ok("patch", "cm", "doomed", "-n", ns, "--type=json",
                   "-p", '[{"op":"remove","path":"/metadata/finalizers"}]')  # fmt: skip
        line = await w.until(lambda line: bool(line.strip()))
        assert line.strip() == "configmap/doomed condition met"
    timeout = await k("wait", "--for=condition=Nonexistent", "deployment/web", "-n", ns,
                      "--timeout=1s")  # fmt: skip
    assert timeout.rc == 1
    assert "timed out waiting for the condition on deployments/web" in timeout.err


@versions
async def test_auth_can_i_under_several_users(
    version: str, emu: Emulator, admin_kubeconfig: Path, ns: str, tmp_path: Path
) -> None:
    admin = Kubectl(version, admin_kubeconfig)
    await new_ns(admin, ns)
    assert (await admin.ok("auth", "can-i", "create", "pods")).strip() == "yes"
    await admin.ok("create", "role", "pod-reader", "-n", ns, "--verb=get,list",
                   "--resource=pods")  # fmt: skip
    await admin.ok("create", "rolebinding", "alice-reads", "-n", ns, "--role=pod-reader",
                   "--user=alice")  # fmt: skip
    alice = Kubectl(version, emu.write_kubeconfig(tmp_path / "alice", user="alice",
                                                  groups=["dev"]))  # fmt: skip
    assert (await alice.ok("auth", "can-i", "list", "pods", "-n", ns)).strip() == "yes"
    denied = await alice("auth", "can-i", "delete", "pods", "-n", ns)
    assert (denied.rc, denied.out.strip()) == (1, "no")
    elsewhere = await alice("auth", "can-i", "list", "pods", "-n", "default")
    assert (elsewhere.rc, elsewhere.out.strip()) == (1, "no")
    listing = await alice.ok("auth", "can-i", "--list", "-n", ns)
    assert re.search(r"^pods\s+\[\]\s+\[\]\s+\[get list\]$", listing, re.M)
    assert re.search(r"^selfsubjectaccessreviews.authorization.k8s.io\s+\[\]\s+\[\]\s+\[create\]$",
                     listing, re.M)  # fmt: skip
    nobody = Kubectl(version, emu.write_kubeconfig(tmp_path / "bob", user="bob"))
    assert (await nobody("auth", "can-i", "get", "pods", "-n", ns)).out.strip() == "no"
    forbidden = await nobody("get", "pods", "-n", ns)
    assert forbidden.rc == 1
    assert forbidden.err.strip() == (
        f'Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource '
        f'"pods" in API group "" in the namespace "{ns}"'
    )
    # Impersonation (the admin may impersonate; alice may not).
    assert (await admin.ok("auth", "can-i", "list", "pods", "-n", ns, "--as=alice")).strip() == (
        "yes"
    )
    as_bob = await admin("auth", "can-i", "list", "pods", "-n", ns, "--as=bob")
    assert (as_bob.rc, as_bob.out.strip()) == (1, "no")
    if minor(version) >= 28:
        who = await alice.ok("auth", "whoami")
        assert re.search(r"^Username\s+alice$", who, re.M)
        assert re.search(r"^Groups\s+\[dev system:authenticated\]$", who, re.M)


@versions
async def test_crd_then_objects(version: str, admin_kubeconfig: Path, ns: str) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    group = f"{ns}.example.com"
    crd = f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.{group}
spec:
  group: {group}
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    - {{name: Color, type: string, jsonPath: .spec.color}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {{type: integer, minimum: 1}}
              color: {{type: string}}
"""
    await k.ok("apply", "-f", "-", stdin=crd)
    out = await k.ok("wait", "--for=condition=Established", f"crd/widgets.{group}",
                     "--timeout=20s")  # fmt: skip
    assert (
        out.strip()
        == f"customresourcedefinition.apiextensions.k8s.io/widgets.{group} condition met"
    )
    widget = f"apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: {ns}\nspec:\n  size: 3\n  color: red\n"
    assert (await k.ok("apply", "-f", "-", stdin=widget)).strip() == (f"widget.{group}/w1 created")
    table = await k.ok("get", f"widgets.{group}", "-n", ns)
    header, row = table.strip().splitlines()
    # With additionalPrinterColumns, the columns are Name plus exactly those (no Age).
    assert header.split() == ["NAME", "SIZE", "COLOR"]
    assert row.split()[:3] == ["w1", "3", "red"]
    bad = await k(
        "apply", "-f", "-", stdin=widget.replace("w1", "w2").replace("size: 3", "size: 0")
    )
    assert bad.rc == 1
    assert (
        'The Widget "w2" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1'
        in bad.err
    )
    wrong = await k(
        "apply", "-f", "-", stdin=widget.replace("w1", "w3").replace("size: 3", "size: big")
    )
    assert wrong.rc == 1
    assert (
        'spec.size: Invalid value: "string": spec.size in body must be of type integer: "string"'
        in wrong.err
    )


@versions
async def test_invalid_builtin_object_rejected(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    bad = await k("apply", "-f", "-", stdin=deployment(ns, name="bad", replicas=-1))
    assert bad.rc == 1
    assert (
        'The Deployment "bad" is invalid: spec.replicas: Invalid value: -1: must be greater '
        "than or equal to 0"
    ) in bad.err
    upper = await k("create", "namespace", "Not_Valid")
    assert upper.rc == 1
    assert (
        'The Namespace "Not_Valid" is invalid: metadata.name: Invalid value: "Not_Valid"'
        in upper.err
    )


@versions
async def test_explain(version: str, admin_kubeconfig: Path) -> None:
    k = Kubectl(version, admin_kubeconfig)
    out = await k.ok("explain", "deployment.spec.replicas")
    assert re.search(r"^KIND:\s+Deployment$", out, re.M)
    assert re.search(r"^VERSION:\s+v1$", out, re.M)
    assert re.search(r"^FIELD:\s+replicas\s+<integer>$", out, re.M)
    assert "Number of desired pods." in out


@versions
async def test_create_namespace_and_deployment_typed(
    version: str, admin_kubeconfig: Path, ns: str
) -> None:
    # kubectl 1.33's typed clients send these bodies as protobuf; 1.27 as JSON.
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    out = await k.ok("create", "deployment", "typed", "-n", ns, "--image=nginx:1.25",
                     "--replicas=2", "--port=80")  # fmt: skip
    assert out.strip() == "deployment.apps/typed created"
    got = await k.ok("get", "deploy", "typed", "-n", ns, "-o",
                     "jsonpath={.spec.replicas} {.spec.selector.matchLabels.app} "
                     "{.spec.template.spec.containers[0].ports[0].containerPort} "
                     "{.spec.strategy.type} {.metadata.managedFields[0].manager}")  # fmt: skip
    assert got == "2 typed 80 RollingUpdate kubectl-create"
    for args, expected in (
        (("configmap", "c", "--from-literal=a=b"), "configmap/c created"),
        (("secret", "generic", "s", "--from-literal=a=b"), "secret/s created"),
        (("serviceaccount", "robot"), "serviceaccount/robot created"),
    ):
        assert (await k.ok("create", *args, "-n", ns)).strip() == expected
    assert await k.ok("get", "secret", "s", "-n", ns, "-o", "jsonpath={.data.a} {.type}") == (
        "Yg== Opaque"
    )
    dup = await k("create", "namespace", ns)
    assert dup.rc == 1
    assert dup.err.strip() == f'Error from server (AlreadyExists): namespaces "{ns}" already exists'
