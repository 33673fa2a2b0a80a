"""Builders the taught-kinds tests share (issue 46): KAI's CustomJob example — its Karta and a
CustomJob from examples/27-customjob-karta.yaml — and the same kind in podgang's own terms."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from tests.paths import ROOT

EXAMPLE = ROOT / "examples" / "27-customjob-karta.yaml"
ROLE_LABEL = "e2e.example.com/role"
#: the CRDs of the CustomJob and of the Karta (tests/fixtures/crds/taught/SOURCES.md)
CRDS = ROOT / "tests" / "fixtures" / "crds" / "taught"

#: the example's Karta as a kinds: entry of podgang's own
CUSTOM_JOB = {
    "apiVersion": "e2e.example.com/v1", "kind": "CustomJob",
    "components": [
        {"name": "coordinator", "podTemplate": "spec.coordinator.template", "replicas": "spec.coordinator.replicas",
         "roleLabel": ROLE_LABEL},
        {"name": "worker", "podTemplate": "spec.worker.template", "replicas": "spec.worker.replicas",
         "roleLabel": ROLE_LABEL},
    ],
}


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Karta, the CustomJob) of the example, fresh copies."""
    karta, job = list(yaml.safe_load_all(EXAMPLE.read_text()))
    return karta, job


def declaration() -> dict[str, Any]:
    """The example's Karta in podgang's own terms: a PodgangKinds document."""
    return {"apiVersion": "podgang.io/v1", "kind": "PodgangKinds", "kinds": [copy.deepcopy(CUSTOM_JOB)]}
