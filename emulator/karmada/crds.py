"""The CustomResourceDefinitions a Karmada control plane installs, read from this package.

Each YAML file here is one of Karmada's published CRDs (the file's header names the upstream
path and commit), kept without descriptions. Files are parsed once per process; every call
returns fresh objects, so callers may change what they get.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import yaml

JSON = dict[str, Any]

# Karmada's own API groups, as its chart installs them (the control plane's full set).
PUBLISHED = (
    "policy.karmada.io_propagationpolicies.yaml",
    "policy.karmada.io_clusterpropagationpolicies.yaml",
    "policy.karmada.io_overridepolicies.yaml",
    "policy.karmada.io_clusteroverridepolicies.yaml",
    "policy.karmada.io_federatedresourcequotas.yaml",
    "policy.karmada.io_clustertaintpolicies.yaml",
    "work.karmada.io_works.yaml",
    "work.karmada.io_resourcebindings.yaml",
    "work.karmada.io_clusterresourcebindings.yaml",
    "config.karmada.io_resourceinterpretercustomizations.yaml",
    "config.karmada.io_resourceinterpreterwebhookconfigurations.yaml",
    "networking.karmada.io_multiclusteringresses.yaml",
    "networking.karmada.io_multiclusterservices.yaml",
)
MCS_API = (
    "multicluster.x-k8s.io_serviceexports.yaml",
    "multicluster.x-k8s.io_serviceimports.yaml",
)


@functools.cache
def _as_json(name: str) -> str:
    text = resources.files(__package__).joinpath(name).read_text()
    loaded = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert isinstance(loaded, dict), name
    return json.dumps(loaded)


def load(name: str) -> JSON:
    """A fresh copy of the CRD in file `name`, each use of a YAML anchor its own object."""
    loaded: JSON = json.loads(_as_json(name))
    return loaded


def work_crd() -> JSON:
    return load("work.karmada.io_works.yaml")


def mcs_crds() -> list[JSON]:
    """The Kubernetes MCS API kinds (ServiceExport, ServiceImport), served by the control plane
    and by member clusters, as Karmada installs them."""
    return [load(name) for name in MCS_API]


def multicluster_service_crd() -> JSON:
    return load("networking.karmada.io_multiclusterservices.yaml")


def published_crds() -> list[JSON]:
    """Every CRD of Karmada's policy, work, config and networking groups, as published."""
    return [load(name) for name in PUBLISHED]


def interpreter_crds() -> list[JSON]:
    """The config.karmada.io types the agent lists and watches, as published."""
    return [
        load("config.karmada.io_resourceinterpretercustomizations.yaml"),
        load("config.karmada.io_resourceinterpreterwebhookconfigurations.yaml"),
    ]


def default_crds() -> list[JSON]:
    """What the karmada profile installs by default: the kinds the agent itself uses."""
    return [work_crd(), *interpreter_crds(), *mcs_crds(), multicluster_service_crd()]


def control_plane_crds() -> list[JSON]:
    """What a full control plane installs: Karmada's published CRDs and the MCS API."""
    return [*published_crds(), *mcs_crds()]
