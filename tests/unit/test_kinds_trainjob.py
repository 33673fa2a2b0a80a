"""Trainer v2's TrainJob: the trainer makes one JobSet per TrainJob from its runtime (named
after it); that JobSet is the TrainJob's one gang, with a subgroup per replicated job, and a
replicated job that ``dependsOn`` another (the nodes after the initializers) joins the gang
only once its dependency is reached."""

from __future__ import annotations

import copy
from typing import Any

from podgang import kinds, rules
from podgang.gang import owned_subgroups
from podgang.manifests import read_manifests
from podgang.plan import build_plan
from tests.crd_support import crd_valid
from tests.grouper_support import NS, owner_ref
from tests.realcluster import ROOT


def job_template(parallelism: int = 1) -> dict[str, Any]:
    return {"spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": {
        "schedulerName": "kai-scheduler", "restartPolicy": "Never",
        "containers": [{"name": "node", "image": "pytorch/pytorch:2.4.0"}]}}}}


def trainer_jobset(owner: dict | None = None, status: dict | None = None) -> dict[str, Any]:
    """What the trainer makes from the torch-distributed runtime with a model initializer."""
    js = crd_valid({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "metadata": {"name": "llama", "namespace": NS,
                                 **({"ownerReferences": [owner_ref(owner)]} if owner else {})},
                    "spec": {"replicatedJobs": [
                        {"name": "model-initializer", "replicas": 1, "template": job_template()},
                        {"name": "node", "replicas": 4, "template": job_template(),
                         "dependsOn": [{"name": "model-initializer", "status": "Complete"}]}]}})
    if status:
        js["status"] = status
    return js


def test_the_nodes_join_the_gang_once_the_initializer_is_complete():
    waiting = trainer_jobset()
    assert rules.min_member_for(waiting).reason == (
        "jobset/llama replicatedJobs model-initializer 1×1; node is made once model-initializer is Complete")
    assert rules.min_member_for(waiting).value == 1
    done = trainer_jobset(status={"replicatedJobsStatus": [{"name": "model-initializer", "succeeded": 1, "ready": 0,
                                                            "failed": 0, "active": 0, "suspended": 0}]})
    mm = rules.min_member_for(done)
    assert (mm.value, mm.reason) == (4, "jobset/llama replicatedJobs node 4×1; model-initializer is complete")
    assert owned_subgroups(done, mm, rules.DEFAULT) == ()  # one part left: no subgroups


def test_in_order_each_replicated_job_joins_once_the_one_before_is_ready():
    """startupPolicy InOrder: the JobSet controller makes each replicated job only once every
    Job of the one before is ready — a gang of all of them would wait for ever."""
    js = trainer_jobset()
    js["spec"]["replicatedJobs"][1].pop("dependsOn")
    js["spec"]["replicatedJobs"].append({"name": "evaluator", "replicas": 1, "template": job_template(2)})
    js["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    js = crd_valid(js)
    first = rules.min_member_for(js)
    assert (first.value, first.reason) == (
        1, "jobset/llama replicatedJobs model-initializer 1×1; node is made once model-initializer is Ready; "
           "evaluator is made once node is Ready")
    js["status"] = {"replicatedJobsStatus": [{"name": "model-initializer", "ready": 1},
                                             {"name": "node", "ready": 2}]}
    assert rules.min_member_for(js).value == 1 + 4  # the nodes join; the evaluator waits for all 4
    js["status"]["replicatedJobsStatus"][1]["ready"] = 4
    assert rules.min_member_for(js).value == 1 + 4 + 2
    # what the grouper keeps says the same
    slim = kinds.JOB_SET.slim_spec(js["spec"], lambda t: {})
    assert slim["startupPolicy"] == {"startupPolicyOrder": "InOrder"}


def test_a_jobset_has_a_subgroup_per_replicated_job():
    js = trainer_jobset()
    js["spec"]["replicatedJobs"][1].pop("dependsOn")
    mm = rules.min_member_for(js)
    assert [(s.name, s.min_member) for s in owned_subgroups(js, mm, rules.DEFAULT)] == [
        ("model-initializer", 1), ("node", 4)]
    pod = {"metadata": {"labels": {"jobset.sigs.k8s.io/replicatedjob-name": "node"}}}
    assert kinds.pod_role("JobSet", pod) == "node"


def test_a_trainjobs_jobset_is_its_gang():
    train = crd_valid({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                       "metadata": {"name": "llama", "namespace": NS, "uid": "tj-1"},
                       "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 4}}})
    js = trainer_jobset(owner=train)
    assert rules.next_owner(js) is None  # the walk ends at the JobSet: it is the gang
    assert rules.min_member_for(train).value == 4  # what podgang plan says of a TrainJob alone
    suspended = copy.deepcopy(train)
    suspended["spec"]["suspend"] = True
    assert kinds.is_suspended(suspended)


def test_the_trainjob_example_plans_its_jobsets_gang_with_a_subgroup_per_replicated_job():
    plan = build_plan(read_manifests([str(ROOT / "examples" / "18-trainjob.yaml")]))
    (group,) = plan.groups.values()
    assert group.min_member.value == 3
    # KAI's JobSet shape: a parent per replicated job needing its Jobs, a leaf per Job needing its pods
    assert [(s.name, s.min_member, s.parent) for s in group.subgroups] == [
        ("launcher", 1, None), ("launcher-replica-0", 1, "launcher"), ("node", 1, None), ("node-replica-0", 2, "node")]
    assert group.min_subgroup == 2
