"""A Secret's `stringData` is write-only, as kube-apiserver makes it: on create, update, patch
and server-side apply its keys are merged into `data` (base64, overwriting what was there) and
`stringData` is neither stored nor returned. Held with the real kubectl."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from emulator.emulator import Emulator

from .kubectl import Kubectl, version_params
from .test_kubectl import new_ns

pytestmark = pytest.mark.asyncio(loop_scope="module")
JSON = dict[str, Any]


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def stored(emu: Emulator, ns: str, name: str) -> JSON:
    obj = emu.api.storage.get(("", "secrets"), ns, name)
    assert obj is not None, f"secret {ns}/{name} is not stored"
    return obj


async def shown(k: Kubectl, ns: str, name: str) -> JSON:
    out: JSON = json.loads(await k.ok("get", "secret", name, "-n", ns, "-o", "json"))
    return out


def manifest(ns: str, name: str, string_data: dict[str, str], data: dict[str, str]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "type": "Opaque",
            "data": data,
            "stringData": string_data,
        }
    )


@pytest.mark.parametrize("version", version_params())
async def test_string_data_is_merged_into_data_and_never_stored(
    version: str, admin_kubeconfig: Path, emu: Emulator, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)

    # kubectl encodes --from-literal itself: what it sends is stored and shown as it is.
    await k.ok("create", "secret", "generic", "literal", "-n", ns, "--from-literal=user=admin")
    assert (await shown(k, ns, "literal"))["data"] == {"user": b64("admin")}

    # Client-side apply: create, then an update of a stringData key and a new one.
    applied = manifest(ns, "applied", {"password": "s3cret", "user": "ops"}, {"user": b64("x")})
    out = await k.ok("apply", "-f", "-", stdin=applied)
    assert out.strip() == "secret/applied created"
    for obj in (stored(emu, ns, "applied"), await shown(k, ns, "applied")):
        assert "stringData" not in obj
        # stringData wins over data for a key in both, as kube's conversion merges it.
        assert obj["data"] == {"password": b64("s3cret"), "user": b64("ops")}
        assert obj["type"] == "Opaque"

    reapplied = manifest(ns, "applied", {"password": "changed", "token": "t0k"}, {})
    out = await k.ok("apply", "-f", "-", stdin=reapplied)
    assert out.strip() == "secret/applied configured"
    for obj in (stored(emu, ns, "applied"), await shown(k, ns, "applied")):
        assert "stringData" not in obj
        assert obj["data"]["password"] == b64("changed")
        assert obj["data"]["token"] == b64("t0k")

    # A merge patch and a JSON patch that write stringData.
    await k.ok(
        "patch", "secret", "literal", "-n", ns, "--type=merge",
        "-p", json.dumps({"stringData": {"user": "root", "extra": "e"}}),
    )  # fmt: skip
    for obj in (stored(emu, ns, "literal"), await shown(k, ns, "literal")):
        assert "stringData" not in obj
        assert obj["data"] == {"user": b64("root"), "extra": b64("e")}
    await k.ok(
        "patch", "secret", "literal", "-n", ns, "--type=json",
        "-p", json.dumps([{"op": "add", "path": "/stringData", "value": {"extra": "f"}}]),
    )  # fmt: skip
    assert stored(emu, ns, "literal")["data"] == {"user": b64("root"), "extra": b64("f")}

    # A strategic merge patch (kubectl's default for built-ins).
    await k.ok(
        "patch", "secret", "literal", "-n", ns, "-p", json.dumps({"stringData": {"more": "m"}})
    )
    assert stored(emu, ns, "literal")["data"]["more"] == b64("m")

    # A PUT (kubectl replace) of the object as read, with stringData added.
    current = await shown(k, ns, "literal")
    current["stringData"] = {"user": "replaced"}
    await k.ok("replace", "-f", "-", stdin=json.dumps(current))
    obj = stored(emu, ns, "literal")
    assert "stringData" not in obj
    assert obj["data"]["user"] == b64("replaced")

    # Server-side apply.
    ssa = manifest(ns, "server-side", {"key": "value"}, {})
    out = await k.ok("apply", "--server-side", "-f", "-", stdin=ssa)
    assert out.strip() == "secret/server-side serverside-applied"
    for obj in (stored(emu, ns, "server-side"), await shown(k, ns, "server-side")):
        assert "stringData" not in obj
        assert obj["data"] == {"key": b64("value")}


@pytest.mark.parametrize("version", version_params())
async def test_string_data_with_a_non_string_value_is_refused(
    version: str, admin_kubeconfig: Path, emu: Emulator, ns: str
) -> None:
    k = Kubectl(version, admin_kubeconfig)
    await new_ns(k, ns)
    bad = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "bad", "namespace": ns},
            "stringData": {"n": 1},
        }
    )
    result = await k("create", "-f", "-", "--validate=false", stdin=bad)
    assert result.rc != 0
    assert emu.api.storage.get(("", "secrets"), ns, "bad") is None
