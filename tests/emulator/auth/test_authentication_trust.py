"""kube-system/extension-apiserver-authentication and its reader Role, as kube-apiserver
publishes them for aggregated API servers (read with the real kubectl)."""

from __future__ import annotations

import json
from pathlib import Path

from emulator.emulator import Emulator
from emulator.requestheader import RequestHeaderConfig
from tests import polling
from tests.e2e.support import kubectl

CM = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"


async def test_published_at_start_with_kubes_keys_and_formats(
    karmada_emulator: Emulator, tmp_path: Path
) -> None:
    config = karmada_emulator.write_kubeconfig(tmp_path / "admin")
    out = await kubectl(
        config, "-n", "kube-system", "get", "configmap",
        "extension-apiserver-authentication", "-o", "json",
    )  # fmt: skip
    data = json.loads(out)["data"]
    assert sorted(data) == [
        "client-ca-file",
        "requestheader-allowed-names",
        "requestheader-client-ca-file",
        "requestheader-extra-headers-prefix",
        "requestheader-group-headers",
        "requestheader-uid-headers",
        "requestheader-username-headers",
    ]
    assert data["client-ca-file"] == karmada_emulator.ca_pem.decode()
    assert data["requestheader-client-ca-file"] == karmada_emulator.front_proxy_ca.cert_pem.decode()
    assert data["requestheader-allowed-names"] == '["front-proxy-client"]'
    assert data["requestheader-username-headers"] == '["X-Remote-User"]'
    assert data["requestheader-uid-headers"] == '["X-Remote-Uid"]'
    assert data["requestheader-group-headers"] == '["X-Remote-Group"]'
    assert data["requestheader-extra-headers-prefix"] == '["X-Remote-Extra-"]'
    assert RequestHeaderConfig.from_configmap(data) == karmada_emulator.requestheader


async def test_the_reader_role_lets_its_subjects_read_that_configmap_only(
    member_emulator: Emulator, tmp_path: Path
) -> None:
    admin = member_emulator.write_kubeconfig(tmp_path / "admin")
    role = json.loads(
        await kubectl(admin, "-n", "kube-system", "get", "role",
                      "extension-apiserver-authentication-reader", "-o", "json")
    )  # fmt: skip
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["extension-apiserver-authentication"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = json.loads(
        await kubectl(admin, "-n", "kube-system", "get", "rolebinding",
                      "system::extension-apiserver-authentication-reader", "-o", "json")
    )  # fmt: skip
    assert binding["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert [s["name"] for s in binding["subjects"]] == [
        "system:kube-controller-manager",
        "system:kube-scheduler",
    ]
    scheduler = member_emulator.write_kubeconfig(tmp_path / "sched", user="system:kube-scheduler")
    can = "-n", "kube-system", "auth", "can-i", "get"
    assert (
        await kubectl(scheduler, *can, "configmap/extension-apiserver-authentication")
    ).strip() == "yes"
    async with member_emulator.client(user="system:kube-scheduler") as client:
        assert (await client.get(CM)).status_code == 200
        other = "/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt"
        assert (await client.get(other)).status_code == 403


async def test_kept_as_kube_keeps_it_values_merged_and_a_deleted_map_back(
    member_emulator: Emulator,
) -> None:
    async with member_emulator.client() as admin:
        current = (await admin.get(CM)).json()
        current["data"]["requestheader-allowed-names"] = '["another-proxy"]'
        current["data"]["stray"] = "x"
        assert (await admin.put(CM, json=current)).status_code == 200

        async def merged() -> bool:
            data = (await admin.get(CM)).json()["data"]
            return (
                data["requestheader-allowed-names"] == '["another-proxy","front-proxy-client"]'
                and "stray" not in data
            )

        await polling.eventually(merged, what="our allowed name added after theirs")
        assert (await admin.delete(CM)).status_code == 200
        await polling.eventually(
            lambda: admin.get(CM), until=lambda r: r.status_code == 200, what="recreated"
        )
