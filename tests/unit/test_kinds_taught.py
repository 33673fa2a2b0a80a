"""Kinds you teach podgang (issue 46): a Karta, or podgang's own ``kinds:`` declaration, makes
a hub entry for a kind podgang has no built-in entry for — members by component, minMember the
sum of the components' replicas (a component's minimum where it has one), a subgroup per
component — and a declaration that cannot be used is named by object and field while every
other kind keeps working. KAI's own example: its Karta e2e suite's CustomJob."""

from __future__ import annotations

import argparse
import copy
import io
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest
import yaml

from podgang import kinds, plan_cli, rules
from podgang.kinds import taught
from tests.taught_support import declaration, example


@pytest.fixture(autouse=True)
def built_in_kinds_after() -> Iterator[None]:
    yield
    kinds.teach([])  # the hub as it was: what one test taught is not another's


def pod(job: dict[str, Any], role: str, index: int) -> dict[str, Any]:
    md = job["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{md['name']}-{role}-{index}", "namespace": md["namespace"],
                         "labels": {"e2e.example.com/role": role},
                         "ownerReferences": [{"apiVersion": job["apiVersion"], "kind": job["kind"], "name": md["name"],
                                              "uid": "job-uid", "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]}}


def plan(tmp_path: Path, *objects: Any, flags: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = plan_cli.run(parser.parse_args([str(path), "-o", "json", *flags]), out, err)
    assert code in (0, 1), err.getvalue()
    return code, orjson.loads(out.getvalue())


def group_of(planned: dict[str, Any]) -> dict[str, Any]:
    (found,) = [g for g in planned["podGroups"] if g["namespace"] == "team-a"]
    return found


def test_a_karta_teaches_kais_customjob_one_gang_with_a_subgroup_per_component(tmp_path):
    karta, job = example()
    code, planned = plan(tmp_path, karta, job)
    group = group_of(planned)
    assert code == 0 and group["minMember"] == 4
    assert {s["name"]: s["minMember"] for s in group["subgroups"]} == {"coordinator": 1, "worker": 3}
    assert [n["code"] for n in planned["notes"]][:1] == ["kind-taught"]
    assert not [w for w in planned["warnings"] if w["code"] in ("unknown-kind", "kind-not-taught")]


def test_without_its_karta_the_same_customjob_is_a_kind_podgang_does_not_know(tmp_path):
    _, job = example()
    _, planned = plan(tmp_path, job)
    assert group_of(planned)["minMember"] == 1
    assert "unknown-kind" in [w["code"] for w in planned["warnings"]]


def test_podgangs_own_declaration_teaches_the_same_as_the_karta(tmp_path):
    karta, job = example()
    _, by_karta = plan(tmp_path, karta, job)
    _, by_declaration = plan(tmp_path, declaration(), job)
    assert group_of(by_karta)["subgroups"] == group_of(by_declaration)["subgroups"]
    assert group_of(by_karta)["minMember"] == group_of(by_declaration)["minMember"] == 4


def test_kinds_file_and_a_configmap_holding_the_declaration(tmp_path):
    _, job = example()
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "podgang-kinds"},
                  "data": {"kinds.yaml": yaml.safe_dump({"kinds": declaration()["kinds"]})}}
    kinds_file = tmp_path / "kinds.yaml"
    kinds_file.write_text(yaml.safe_dump(config_map))
    _, planned = plan(tmp_path, job, flags=("--kinds", str(kinds_file)))
    assert group_of(planned)["minMember"] == 4
    assert "ConfigMap podgang-kinds" in planned["notes"][0]["message"]


def test_scaling_the_workers_follows(tmp_path):
    karta, job = example()
    _, planned = plan(tmp_path, karta, job, flags=("--scale", "customjob/train:worker=5"))
    group = group_of(planned)
    assert group["minMember"] == 6 and {s["name"]: s["minMember"] for s in group["subgroups"]}["worker"] == 5


def test_each_pod_joins_its_components_subgroup():
    karta, job = example()
    kinds.teach([("example", karta)])
    job = {**job, "metadata": {**job["metadata"], "uid": "job-uid"}}
    for role in ("coordinator", "worker"):
        found = rules.gang_for_pod(pod(job, role, 0), [job])
        assert isinstance(found, rules.Gang) and found.subgroup == role, found


def test_a_components_minimum_counts_before_its_replicas_as_kai_reads_it():
    karta, job = example()
    karta = copy.deepcopy(karta)
    karta["spec"]["structureDefinition"]["childComponents"][1]["scaleDefinition"]["minReplicasPath"] = \
        ".spec.worker.minReplicas"
    job = copy.deepcopy(job)
    job["spec"]["worker"]["minReplicas"] = 2
    kinds.teach([("example", karta)])
    assert kinds.desired_size(job)[0] == 3
    assert {r.name: r.size for r in kinds.roles(job)} == {"coordinator": 1, "worker": 2}


def test_without_subgroups_the_gang_is_one_part_of_every_components_pods():
    karta, job = example()
    karta = copy.deepcopy(karta)
    del karta["spec"]["optimizationInstructions"]["gangScheduling"]["podGroup"]["subGroups"]
    kinds.teach([("example", karta)])
    assert kinds.desired_size(job)[0] == 4 and kinds.roles(job) == []


def test_a_karta_with_no_gang_scheduling_instruction_teaches_nothing_as_kai_skips_it():
    karta, _ = example()
    karta = copy.deepcopy(karta)
    del karta["spec"]["optimizationInstructions"]
    found = kinds.teach([("example", karta)])
    assert not found.entries and not found.problems


def broken(change) -> dict[str, Any]:
    karta, _ = example()
    karta = copy.deepcopy(karta)
    change(karta)
    return karta


CHILD = "spec.structureDefinition.childComponents"


@pytest.mark.parametrize("change,field,says", [
    (lambda k: k["spec"]["structureDefinition"]["childComponents"][1]["scaleDefinition"].update(
        replicasPath=".spec.worker | .replicas"), f"{CHILD}[1].scaleDefinition.replicasPath", "not a path"),
    (lambda k: k["spec"]["structureDefinition"]["childComponents"][1].pop("scaleDefinition"),
     f"{CHILD}[1]", "names no replicas path"),
    (lambda k: k["spec"]["structureDefinition"]["childComponents"][0]["podSelector"]["componentTypeSelector"].update(
        keyPath=".metadata.annotations.role"), f"{CHILD}[0].podSelector.componentTypeSelector.keyPath", "pod label"),
    (lambda k: k["spec"]["structureDefinition"]["rootComponent"].pop("kind"),
     "spec.structureDefinition.rootComponent.kind", "missing"),
    (lambda k: k["spec"]["optimizationInstructions"]["gangScheduling"]["podGroup"]["subGroups"].append(
        {"componentName": "driver"}), "spec.optimizationInstructions.gangScheduling.podGroup.subGroups[2].componentName",
     "not a child component"),
    (lambda k: k["spec"]["structureDefinition"]["childComponents"][0]["scaleDefinition"].update(
        replicasPath=".status.replicas"), f"{CHILD}[0].scaleDefinition.replicasPath", "under .spec"),
])
def test_a_broken_karta_is_named_by_object_and_field_and_other_kinds_keep_working(change, field, says, tmp_path):
    karta, job = example()
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "team-a"},
                  "spec": {"replicas": 3, "template": {"spec": {"schedulerName": "kai-scheduler",
                                                                "containers": [{"name": "c", "image": "i"}]}}}}
    _, planned = plan(tmp_path, broken(change), job, deployment)
    (problem,) = [w for w in planned["warnings"] if w["code"] == "kind-not-taught"]
    assert problem["object"] == "Karta e2e-example-com-v1-customjob"
    assert problem["message"].startswith(field + ":") and says in problem["message"], problem
    sizes = {g["name"]: g["minMember"] for g in planned["podGroups"]}
    assert sizes[next(n for n in sizes if "web" in n)] == 3


def test_a_declaration_for_a_built_in_kind_is_refused_the_built_in_entry_is_kept():
    pytorch = {"kinds": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                          "components": [{"name": "worker", "replicas": "spec.workers", "roleLabel": "r"}]}]}
    found = kinds.teach([("f", {"kind": "PodgangKinds", **pytorch})])
    assert not found.entries
    assert ["f kinds[0]: kind: PyTorchJob.kubeflow.org is a kind podgang knows"] == [
        str(p).split(":")[0] + ":" + ":".join(str(p).split(":")[1:3]) for p in found.problems]
    assert kinds.workload_kind("PyTorchJob") is kinds.PYTORCH_JOB


def test_a_kind_declared_twice_is_taught_by_neither_and_both_are_named():
    karta, _ = example()
    found = kinds.teach([("a", karta), ("b", {"kind": "PodgangKinds", **declaration()})])
    assert not found.entries
    assert sorted(p.source for p in found.problems) == ["Karta e2e-example-com-v1-customjob",
                                                       "b kinds[0]"]
    assert all("declared 2 times" in p.message for p in found.problems)


def test_a_configmap_that_does_not_parse_is_named_with_its_key():
    found = kinds.teach([("f", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "podgang-kinds"},
                                "data": {"kinds.yaml": "kinds: [\n"}})])
    (problem,) = found.problems
    assert (problem.source, problem.field) == ("ConfigMap podgang-kinds", "data[kinds.yaml]")
    assert "does not parse" in problem.message


def test_a_declarations_unknown_field_is_named():
    bad = declaration()
    bad["kinds"][0]["components"][0]["replica"] = "spec.coordinator.replicas"
    found = kinds.teach([("f", bad)])
    assert [f"{p.source} {p.field}" for p in found.problems] == ["f kinds[0] components[0].replica"]


def test_teaching_again_replaces_what_was_taught():
    karta, job = example()
    kinds.teach([("example", karta)])
    assert kinds.workload_kind(job) is not None and "CustomJob" in {k.kind for k in kinds.FOLLOWED}
    kinds.teach([])
    assert kinds.workload_kind(job) is None and "CustomJob" not in {k.kind for k in kinds.FOLLOWED}
    assert kinds.HUB == kinds.BUILT_IN


@pytest.mark.parametrize("text,path", [
    (".spec.worker.replicas", ("spec", "worker", "replicas")),
    ("spec.worker.replicas", ("spec", "worker", "replicas")),
    ('.metadata.labels["e2e.example.com/role"]', ("metadata", "labels", "e2e.example.com/role")),
    (".spec.groups[2].replicas", ("spec", "groups", 2, "replicas")),
])
def test_paths_read_as_karta_writes_them_and_as_podgang_does(text, path):
    assert taught.parse_path(text) == path


@pytest.mark.parametrize("text", ["", ".spec.x | length", ".spec[]", "spec..x", '.a["b'])
def test_any_other_jq_is_not_a_path_podgang_reads(text):
    with pytest.raises(taught.PathError):
        taught.parse_path(text)
