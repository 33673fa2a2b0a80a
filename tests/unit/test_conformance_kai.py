"""KAI-Scheduler's own pod-grouper tests as podgang's contract: each ported case (a row of
``tests/conformance/kai/*.yaml``) is planned through ``podgang plan`` in process, and the
group its pod gets is compared with what KAI's test asserts — or, where a row says podgang
differs on purpose, with podgang's answer and the docs section that says why. Format:
``tests/conformance/README.md``.
"""

from __future__ import annotations

import argparse
import io
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from podgang import plan_cli
from tests.paths import ROOT, TESTS

TABLES = TESTS / "conformance" / "kai"
DOCS = ROOT / "docs"
FILE_KEYS = {"source", "commit", "cases", "not_expressed"}
ROW_KEYS = {"name", "objects", "pod", "flags", "kai", "podgang"}
GROUP_KEYS = {"name", "minMember", "minSubGroup", "subgroups", "queue", "priorityClassName", "preemptibility",
              "preemptionDelay", "topology", "nodePool", "labels", "annotations", "owner", "subgroup", "group"}
NODE_POOL_LABEL = "kai.scheduler/node-pool"
BACKENDS = ["--backend", "kai-scheduler=kai"]


def tables() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, yaml.safe_load(path.read_text()) or {}) for path in sorted(TABLES.glob("*.yaml"))]


def rows() -> list[Any]:
    out = []
    for path, table in tables():
        for row in table.get("cases") or ():
            out.append(pytest.param(path, row, id=f"{path.stem}::{row.get('name')}"))
    return out


def plan(row: dict[str, Any], tmp: Path, output: str) -> str:
    manifests = tmp / "objects.yaml"
    manifests.write_text(yaml.safe_dump_all(row["objects"], sort_keys=False))
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    args = parser.parse_args([str(manifests), "-o", output, *BACKENDS, *(row.get("flags") or ())])
    out, err = io.StringIO(), io.StringIO()
    code = plan_cli.run(args, out, err)
    assert code in (0, 1), err.getvalue()
    return out.getvalue()


def the_pod(row: dict[str, Any]) -> str:
    if row.get("pod"):
        namespace, _, name = str(row["pod"]).rpartition("/")
        return f"pod {namespace or 'default'}/{name}"
    pods = [o for o in row["objects"] if o.get("kind") == "Pod" and o.get("apiVersion") == "v1"]
    assert len(pods) == 1, "a row with several pods names the one it checks (pod:)"
    md = pods[0].get("metadata") or {}
    return f"pod {md.get('namespace') or 'default'}/{md.get('name')}"


def _subgroup(entry: dict[str, Any]) -> dict[str, Any]:
    out = {k: entry[k] for k in ("name", "minMember", "minSubGroup", "parent") if entry.get(k) is not None}
    if entry.get("topology"):
        out["topology"] = dict(entry["topology"])
    return out


def _subgroups_of(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    return [_subgroup({**s, "topology": s.get("topologyConstraint")}) for s in (manifest.get("spec") or {})
            .get("subGroups") or ()]


def actual_group(row: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """What podgang gives the row's pod, in the keys of a row's ``kai:``."""
    planned = orjson.loads(plan(row, tmp, "json"))
    who = the_pod(row)
    member = next((m for m in planned["members"] if m["object"] == who), None)
    assert member is not None, f"{who} is not in the plan"
    if not member["group"]:
        return {"group": "none", "why": member["skipped"] or member["noGroup"] or "denied"}
    namespace = member["namespace"]
    manifests = [d for d in yaml.safe_load_all(plan(row, tmp, "yaml")) if d]
    manifest = next((d for d in manifests if d["metadata"]["name"] == member["group"]
                     and d["metadata"].get("namespace", namespace) == namespace), None)
    planned_group = next(g for g in planned["podGroups"] if g["name"] == member["group"] and g["namespace"] == namespace)
    got: dict[str, Any] = {"name": member["group"], "subgroup": member.get("subgroup"),
                           "minSubGroup": planned_group.get("minSubGroup"),
                           "subgroups": [_subgroup(s) for s in planned_group["subgroups"]]}
    if planned_group.get("minSubGroup") is None:
        got["minMember"] = planned_group["minMember"]
    if manifest is None:  # a hand-made group no manifest defines, or a name only the cluster gives
        got.update(queue=planned_group.get("queue"), priorityClassName=planned_group.get("priorityClassName"))
        return got
    md, group_spec = manifest.get("metadata") or {}, manifest.get("spec") or {}
    owners = md.get("ownerReferences") or []
    got.update(
        queue=group_spec.get("queue"), priorityClassName=group_spec.get("priorityClassName"),
        preemptibility=group_spec.get("preemptibility"), preemptionDelay=group_spec.get("preemptionDelay"),
        topology=group_spec.get("topologyConstraint"), labels=md.get("labels") or {},
        annotations=md.get("annotations") or {}, nodePool=(md.get("labels") or {}).get(NODE_POOL_LABEL),
        owner={k: owners[0].get(k) for k in ("kind", "name", "uid")} if owners else None,
        subgroups=_subgroups_of(manifest) or got["subgroups"],
    )
    if group_spec.get("minSubGroup") is not None:
        got["minSubGroup"] = group_spec["minSubGroup"]
        got.pop("minMember", None)
    return got


def differences(want: dict[str, Any], got: dict[str, Any]) -> list[str]:
    problems = []
    if want.get("group") == "none" or got.get("group") == "none":
        if want.get("group") != got.get("group"):
            problems.append(f"group: {got.get('group', got.get('name'))!r}"
                            f"{' (' + str(got.get('why')) + ')' if got.get('why') else ''}, expected "
                            f"{want.get('group', want.get('name'))!r}")
        return problems
    for key, value in want.items():
        if key in ("labels", "annotations"):
            have = got.get(key) or {}
            for k, v in value.items():
                if have.get(k) != v:
                    problems.append(f"{key}[{k}]: {have.get(k)!r}, expected {v!r}")
        elif key == "subgroups":
            order = lambda s: s["name"]  # noqa: E731
            if sorted(map(_subgroup, value), key=order) != sorted(got.get(key) or [], key=order):
                problems.append(f"subgroups: {got.get(key)!r}, expected {value!r}")
        elif key == "owner":
            have = got.get("owner") or {}
            if any(have.get(k) != v for k, v in value.items()):
                problems.append(f"owner: {have!r}, expected {value!r}")
        elif got.get(key) != value:
            problems.append(f"{key}: {got.get(key)!r}, expected {value!r}")
    return problems


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs' toc extension makes it."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[-\s]+", "-", text).strip("-")


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


@pytest.mark.parametrize("path,row", rows())
def test_kai_case_gets_kais_group_or_a_documented_difference(path, row, tmp_path):
    assert not set(row) - ROW_KEYS, f"unknown keys {set(row) - ROW_KEYS}"
    kai, ours = dict(row["kai"]), dict(row.get("podgang") or {})
    assert not set(kai) - GROUP_KEYS and not set(ours) - GROUP_KEYS - {"why"}
    why = ours.pop("why", None)
    assert bool(ours) == bool(why), "a podgang: block names its differences and the docs section that says why"
    want = {**kai, **ours}
    got = actual_group(row, tmp_path)
    problems = differences(want, got)
    assert not problems, f"{path.name} {row['name']}:\n  " + "\n  ".join(problems)
    if ours:  # a difference still asserted must still be one
        assert differences(kai, got), f"{row['name']}: podgang now gives KAI's answer: drop its podgang: block"


def test_every_table_is_well_formed_and_every_why_names_a_docs_section():
    assert tables(), "no conformance tables"
    names = set()
    for path, table in tables():
        assert not set(table) - FILE_KEYS, f"{path.name}: unknown keys {set(table) - FILE_KEYS}"
        assert table.get("source") and table.get("commit"), path.name
        for row in [*(table.get("cases") or ()), *(table.get("not_expressed") or ())]:
            assert row.get("name") and (path.name, row["name"]) not in names, f"{path.name}: {row.get('name')}"
            names.add((path.name, row["name"]))
        for item in table.get("not_expressed") or ():
            assert item.get("why"), f"{path.name} {item['name']}: not expressed, but why?"
        for row in table.get("cases") or ():
            why = (row.get("podgang") or {}).get("why")
            if why:
                page, _, anchor = str(why).partition("#")
                assert (DOCS / page).is_file() and anchor in anchors(DOCS / page), f"{row['name']}: {why}"


def test_no_row_is_pending():
    pending = [f"{path.name} {row['name']}" for path, table in tables() for row in table.get("cases") or ()
               if row.get("pending")]
    assert not pending, f"{len(pending)} rows differ from KAI with no documented reason yet:\n  " + "\n  ".join(pending)
