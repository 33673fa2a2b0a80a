"""The real CRDs of the workload kinds (../shared/fixtures/crds/workloads, and the
repository's tests/fixtures/crds/workloads): a manifest a
test builds is checked against its kind's schema before it is used, so that a table row
holds only what the operator's API accepts."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from podgang import rules
from podgang.gang import owned_subgroups
from tests.realcluster import WORKLOAD_CRDS, workload_crd_files


@functools.cache
def _crds() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the openAPIV3Schema of every served version."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in workload_crd_files():
        crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out[(f"{group}/{version['name']}", kind)] = version["schema"]["openAPIV3Schema"]
    return out


def crd_valid(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj``, once checked against the real CRD of its apiVersion and kind (the test
    is skipped, with the reason, where the CRDs are not there)."""
    schema = _crds().get((obj["apiVersion"], obj["kind"]))
    if schema is None and not Path(WORKLOAD_CRDS).is_dir():
        pytest.skip(f"no workload CRDs at {WORKLOAD_CRDS}", allow_module_level=True)  # a table built at import
    assert schema is not None, f"no CRD serves {obj['apiVersion']} {obj['kind']}"
    jsonschema.validate(obj, schema, cls=jsonschema.Draft7Validator)
    return obj


def gang_and_parts(obj: dict[str, Any]) -> tuple[int, str, list[tuple[str, int]]]:
    """A workload's own gang as the grouper writes it: minMember, why, and its subgroups."""
    mm = rules.min_member_for(obj)
    return mm.value, mm.reason, [(s.name, s.min_member) for s in owned_subgroups(obj, mm, rules.DEFAULT)]


def kai_webhook_refusals(podgroup: dict[str, Any]) -> list[str]:
    """What KAI v0.17's PodGroup webhook refuses on create (``podgroup_webhook.go``; see
    ../shared/kai/KAI-FACTS.md (d2)): ``minMember`` beside ``minSubGroup`` (the root's or a
    subgroup's), duplicate subgroup names, a missing parent, a leaf without ``minMember`` or
    with ``minSubGroup``, a parent with ``minMember``. The CRD's schema cannot say these."""
    spec = podgroup.get("spec") or {}
    entries = spec.get("subGroups") or []
    names = [e.get("name") for e in entries]
    parents = {e.get("parent") for e in entries if e.get("parent")}
    out = ["spec: minMember and minSubGroup both set"] if "minMember" in spec and "minSubGroup" in spec else []
    out += [f"subgroup {n}: defined twice" for n in sorted({n for n in names if names.count(n) > 1})]
    out += [f"subgroup {e['name']}: parent {e['parent']} does not exist" for e in entries
            if e.get("parent") and e["parent"] not in names]
    for e in entries:
        if e.get("name") in parents and "minMember" in e:
            out.append(f"subgroup {e['name']}: a parent with minMember")
        if e.get("name") not in parents and ("minSubGroup" in e or "minMember" not in e):
            out.append(f"subgroup {e['name']}: a leaf needs minMember and no minSubGroup")
    return out
