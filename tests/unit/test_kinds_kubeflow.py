"""Kubeflow's training jobs, one table: each row a manifest the real CRD accepts, the gang
podgang gives it (size, why) and its subgroups, one per replica type."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from podgang import kinds, rules
from podgang.manifests import read_manifests
from podgang.plan import build_plan
from tests.crd_support import crd_valid, gang_and_parts
from tests.realcluster import ROOT

FIELDS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs",
          "XGBoostJob": "xgbReplicaSpecs", "JAXJob": "jaxReplicaSpecs", "PaddleJob": "paddleReplicaSpecs"}


def template(annotations: dict | None = None) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "registry.example/t:1"}]}}


def training_job(kind: str, replicas: dict[str, int | None], *, version: str = "v1", name: str = "train",
                 annotations: dict | None = None, role_annotations: dict[str, dict] | None = None,
                 **spec: Any) -> dict[str, Any]:
    """A Kubeflow job: ``replicas`` maps each replica type to its count (None: unset)."""
    specs = {}
    for rtype, count in replicas.items():
        specs[rtype] = {"template": template((role_annotations or {}).get(rtype)),
                        **({"replicas": count} if count is not None else {})}
    return crd_valid({"apiVersion": f"kubeflow.org/{version}", "kind": kind,
                      "metadata": {"name": name, "namespace": "team", "annotations": annotations or {}},
                      "spec": {FIELDS[kind]: specs, **spec}})


def parts(obj: dict) -> list[tuple[str, int]]:
    return [(s.name, s.min_member) for s in rules.role_subgroups(obj)]


# (manifest, minMember, its reason, subgroups)
TABLE = [
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": 3}),
                 4, "pytorchjob/train master 1 + worker 3", [("master", 1), ("worker", 3)], id="pytorch master+workers"),
    pytest.param(lambda: training_job("PyTorchJob", {"Worker": 4}),
                 4, "pytorchjob/train worker 4", [("worker", 4)],
                 id="pytorch workers only: its one subgroup, as KAI lists it"),
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": None}),
                 2, "pytorchjob/train master 1 + worker 1", [("master", 1), ("worker", 1)],
                 id="pytorch replicas default to 1"),
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": 7},
                                      elasticPolicy={"minReplicas": 3, "maxReplicas": 7}),
                 3, "pytorchjob/train elasticPolicy.minReplicas 3: master 1 + worker 2", [("master", 1), ("worker", 2)],
                 id="pytorch elastic: minReplicas, workers first"),
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": 7},
                                      elasticPolicy={"minReplicas": 3},
                                      runPolicy={"schedulingPolicy": {"minAvailable": 5}}),
                 5, "pytorchjob/train runPolicy.schedulingPolicy.minAvailable 5: master 1 + worker 4",
                 [("master", 1), ("worker", 4)], id="pytorch minAvailable wins over elastic"),
    pytest.param(lambda: training_job("TFJob", {"Chief": 1, "PS": 2, "Worker": 4}),
                 7, "tfjob/train chief 1 + ps 2 + worker 4", [("chief", 1), ("ps", 2), ("worker", 4)], id="tf chief+ps+workers"),
    pytest.param(lambda: training_job("TFJob", {"PS": 1, "Worker": 4}, runPolicy={"schedulingPolicy": {"minAvailable": 3}}),
                 3, "tfjob/train runPolicy.schedulingPolicy.minAvailable 3: ps 1 + worker 2", [("ps", 1), ("worker", 2)],
                 id="tf minAvailable: the ps is kept"),
    pytest.param(lambda: training_job("MPIJob", {"Launcher": 1, "Worker": 4}),
                 5, "mpijob/train launcher 1 + worker 4", [("launcher", 1), ("worker", 4)], id="mpi v1"),
    pytest.param(lambda: training_job("MPIJob", {"Launcher": 1, "Worker": 4}, version="v2beta1"),
                 5, "mpijob/train launcher 1 + worker 4", [("launcher", 1), ("worker", 4)], id="mpi v2beta1"),
    pytest.param(lambda: training_job("MPIJob", {"Launcher": 1, "Worker": 4}, version="v2beta1",
                                      launcherCreationPolicy="WaitForWorkersReady"),
                 4, "mpijob/train worker 4; the launcher joins once the workers are Ready (launcherCreationPolicy "
                    "WaitForWorkersReady)", [], id="mpi v2beta1 WaitForWorkersReady: the workers first"),
    pytest.param(lambda: training_job("XGBoostJob", {"Master": 1, "Worker": 2}),
                 3, "xgboostjob/train master 1 + worker 2", [("master", 1), ("worker", 2)], id="xgboost"),
    pytest.param(lambda: training_job("JAXJob", {"Worker": 8}),
                 8, "jaxjob/train worker 8", [], id="jax"),
    pytest.param(lambda: training_job("PaddleJob", {"Master": 1, "Worker": 2}),
                 3, "paddlejob/train master 1 + worker 2", [("master", 1), ("worker", 2)], id="paddle (KAI has no plugin)"),
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": 3},
                                      role_annotations={"Worker": {"podgang.io/min-available": "2"}}),
                 3, "pytorchjob/train master 1 + worker 2 (pinned)", [("master", 1), ("worker", 2)],
                 id="min-available on a role's template pins that role"),
    pytest.param(lambda: training_job("PyTorchJob", {"Master": 1, "Worker": 3},
                                      annotations={"podgang.io/min-member": "2"}),
                 2, "pinned by podgang.io/min-member on pytorchjob/train", [], id="min-member pins the whole"),
]


@pytest.mark.parametrize("build,size,reason,subgroups", TABLE)
def test_the_gang_of_a_training_job(build, size, reason, subgroups):
    assert gang_and_parts(build()) == (size, reason, subgroups)


def test_the_mpi_launcher_joins_the_gang_once_it_exists():
    """WaitForWorkersReady: mpi-operator makes the launcher once every worker is Ready; a gang
    that counted it would wait for a pod that comes only after the gang runs."""
    job = training_job("MPIJob", {"Launcher": 1, "Worker": 4}, version="v2beta1",
                       launcherCreationPolicy="WaitForWorkersReady",
                       runPolicy={"schedulingPolicy": {"minAvailable": 5}})
    assert rules.min_member_for(job).value == 4
    started = copy.deepcopy(job)
    started["status"] = {"replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 4}}}
    assert rules.min_member_for(started).value == 5
    assert parts(started) == [("launcher", 1), ("worker", 4)]


def test_a_pod_is_in_its_replica_types_subgroup():
    job = training_job("PyTorchJob", {"Master": 1, "Worker": 3})
    job["metadata"]["uid"] = "u-1"
    ref = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train", "uid": "u-1", "controller": True}
    for role, label in (("master", "master"), ("worker", "worker")):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"train-{role}-0", "namespace": "team", "ownerReferences": [ref],
                            "labels": {"training.kubeflow.org/replica-type": label}},
               "spec": {"schedulerName": "kai-scheduler"}}
        gang = rules.gang_for_pod(pod, [job])
        assert (gang.name, gang.subgroup) == ("pg-train-u-1", role)
    # mpi-operator's v2beta1 pods name their role in training.kubeflow.org/job-role
    launcher = {"metadata": {"labels": {"training.kubeflow.org/job-role": "launcher"}}}
    assert kinds.pod_role("MPIJob", launcher) == "launcher"
    assert kinds.pod_role("Deployment", launcher) is None


def test_a_bad_min_available_on_a_role_is_said_and_ignored():
    job = training_job("PyTorchJob", {"Master": 1, "Worker": 3},
                       role_annotations={"Worker": {"podgang.io/min-available": "most"}})
    assert rules.min_member_for(job).value == 4
    (problem,) = rules.role_problems(job)
    assert problem.startswith("pytorchjob/train spec.pytorchReplicaSpecs.Worker.template: "
                              "podgang.io/min-available=\"most\" is ignored")


@pytest.mark.parametrize("kind", sorted(FIELDS))
def test_suspended_and_finished_are_what_the_operator_says(kind):
    job = training_job(kind, {"Worker": 2}, runPolicy={"suspend": True})
    assert kinds.is_suspended(job)
    assert not kinds.is_suspended(training_job(kind, {"Worker": 2}))
    done = training_job(kind, {"Worker": 2})
    done["status"] = {"conditions": [{"type": "Running", "status": "False"}, {"type": "Succeeded", "status": "True"}]}
    assert kinds.is_finished(done)
    failed = training_job(kind, {"Worker": 2})
    failed["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    assert kinds.is_finished(failed)
    assert not kinds.is_finished(training_job(kind, {"Worker": 2}))


@pytest.mark.parametrize("name", ["14-pytorchjob.yaml", "15-mpijob.yaml", "16-raycluster.yaml",
                                  "17-sparkapplication.yaml", "18-trainjob.yaml"])
def test_the_examples_are_what_the_operators_accept(name):
    for doc in yaml.safe_load_all((ROOT / "examples" / name).read_text()):
        crd_valid(doc)


def test_the_pytorchjob_example_plans_one_gang_with_a_subgroup_per_replica_type():
    plan = build_plan(read_manifests([str(ROOT / "examples" / "14-pytorchjob.yaml")]))
    (group,) = plan.groups.values()
    assert group.min_member.value == 4
    assert [(s.name, s.min_member, s.reason) for s in group.subgroups] == [
        ("master", 1, "Master replicas 1"), ("worker", 3, "Worker replicas 3")]
    plan = build_plan(read_manifests([str(ROOT / "examples" / "15-mpijob.yaml")]))
    (group,) = plan.groups.values()
    assert group.min_member.value == 2 and group.subgroups == ()  # the workers first: the launcher comes later
