"""Which objects get a gang: kinds matched by API group and kind, templates that own no
pods, a DaemonSet (never a gang), a scheduler's own workloads, unfollowed kinds (a gang
only when their pod templates name a mapped scheduler)."""

from __future__ import annotations

import re

import pytest

from podgang import kinds, rules
from podgang.manifests import Manifest, Source
from podgang.objects import OwnerRef
from podgang.plan import ScaleError, apply_scale, build_plan
from podgang.settings import Settings
from podgang.backends import KAI, VOLCANO


def manifests(*objs):
    return [Manifest(o, Source("m.yaml", i)) for i, o in enumerate(objs, 1)]


def test_a_kind_is_its_api_group_and_kind_never_its_kind_alone():
    assert kinds.workload_kind({"apiVersion": "batch/v1", "kind": "Job"}) is kinds.JOB
    assert kinds.workload_kind({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}) is None
    assert kinds.workload_kind({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob"}) is None
    assert kinds.workload_kind(OwnerRef("batch.volcano.sh/v1alpha1", "Job", "j", "u")) is None
    assert kinds.workload_kind(OwnerRef("kubeflow.org/v1", "MPIJob", "j", "u")) is kinds.MPI_JOB
    assert kinds.run_kinds(OwnerRef("batch/v1", "CronJob", "c", "u")) == ("Job",)
    assert kinds.run_kinds(OwnerRef("batch.volcano.sh/v1alpha1", "CronJob", "c", "u")) == ()


def test_a_pod_of_a_volcano_job_is_not_a_run_of_a_cronjob_of_another_group():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "ju", "ownerReferences": [
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "name": "c", "uid": "cu", "controller": True}]}}
    # a batch/v1 CronJob's Job is a run of its own; a Volcano CronJob is a kind podgang does not know
    # above one it knows: passed through, the Job's gang is the Job's (every run its own)
    assert rules.owner_to_look_up(job) is None
    assert rules.next_owner(job) is None
    assert rules.controller_ref(job) == OwnerRef("batch.volcano.sh/v1alpha1", "CronJob", "c", "cu")


def _vcjob():
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "tf"},
            "spec": {"minAvailable": 2, "schedulerName": "volcano", "tasks": [
                {"name": "w", "replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}]}}


def test_a_volcano_job_is_gangd_by_volcano_not_read_as_a_batch_job():
    plan = build_plan(manifests(_vcjob()), Settings(backends=(("volcano", VOLCANO),)))
    [member] = plan.members
    assert member.what == "job.batch.volcano.sh default/tf"
    assert member.group is None and "Volcano's job controller makes its PodGroup itself" in member.no_group
    assert not plan.groups and not plan.warnings


def test_a_trainer_runtime_is_a_template_with_no_gang_and_no_advice():
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
               "metadata": {"name": "torch"}, "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node",
               "template": {"spec": {"template": {"spec": {"schedulerName": "kai-scheduler",
                                                            "containers": [{"name": "c"}]}}}}}]}}}}
    plan = build_plan(manifests(runtime))
    [member] = plan.members
    assert member.group is None and member.no_group.startswith("a template, not a workload")
    assert not plan.groups and not plan.warnings


def test_an_unknown_kind_gets_a_gang_only_when_its_templates_name_a_mapped_scheduler():
    def sandbox(scheduler):
        return {"apiVersion": "example.com/v1", "kind": "Sandbox", "metadata": {"name": scheduler},
                "spec": {"podTemplate": {"spec": {"schedulerName": scheduler, "containers": [{"name": "c"}]}}}}
    plan = build_plan(manifests(sandbox("my-scheduler"), sandbox("kai-scheduler")),
                      Settings(backends=(("kai-scheduler", KAI),)))
    other, kai = plan.members
    assert other.group is None and "my-scheduler" in other.skipped
    assert kai.group == "pg-kai-scheduler-<uid>"
    assert [w.what for w in plan.warnings] == ["sandbox default/kai-scheduler"]


def test_a_daemonset_is_never_a_gang_whatever_a_pin_says():
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "uid": "u",
          "annotations": {"podgang.io/min-member": "3"}},
          "spec": {"template": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}}}}
    mm = rules.min_member_for(ds)
    assert (mm.value, mm.pinned) == (1, False) and "not a gang" in mm.reason
    plan = build_plan(manifests(ds))
    assert [g.min_member.value for g in plan.groups.values()] == [1]
    assert [w.message for w in plan.warnings] == [f"podgang.io/min-member=3 is ignored: {mm.reason}"]


def test_an_object_defined_twice_is_one_finding_and_its_last_definition_wins():
    def deployment(replicas):
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                "spec": {"replicas": replicas, "template": {"spec": {"schedulerName": "kai-scheduler",
                                                                     "containers": [{"name": "c"}]}}}}
    plan = build_plan(manifests(deployment(2), deployment(5)))
    [member] = plan.members
    assert (member.group, member.pods, member.no_group) == ("pg-web-<uid>", 5, None)
    assert [(str(w.source), w.message) for w in plan.warnings] == [
        ("m.yaml#1", "defined twice: m.yaml#2 wins (applied after it, it replaces this one)")]
    assert [g.min_member.value for g in plan.groups.values()] == [5]


def test_scale_reaches_every_kind_sized_by_parts_and_says_which_part_it_needs():
    pytorch = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
               "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
              "spec": {"replicatedJobs": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]}}
    ray = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"},
           "spec": {"rayClusterSpec": {"workerGroupSpecs": [{"groupName": "Small", "replicas": 2}]}}}
    out, done = apply_scale(manifests(pytorch, jobset, ray), {"pytorchjob/pt": 5, "jobset/js:b": 4, "rayjob/rj": 3})
    assert done == ["pytorchjob/pt pytorchReplicaSpecs.Worker.replicas 3 → 5",
                    "jobset/js replicatedJobs[1].replicas 2 → 4",
                    "rayjob/rj rayClusterSpec.workerGroupSpecs[0].replicas 2 → 3"]
    assert out[2].obj["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] == 3
    for target, said in (("jobset/js", "say which part: NAME:PART=N with PART one of a, b"),
                         ("pytorchjob/pt:launcher", "it has no part 'launcher' (its parts: master, worker)"),
                         ("deployment/web:x", "no Deployment named 'web'")):
        with pytest.raises(ScaleError, match=re.escape(said)):
            apply_scale(manifests(pytorch, jobset), {target: 2})


def test_a_native_workload_is_planned_for_the_version_it_is_written_for_or_refused_saying_why():
    from podgang.backends import native
    def workload(version):
        return {"apiVersion": f"scheduling.k8s.io/{version}", "kind": "Workload", "metadata": {"name": "w"}}
    assert [native.written_for(workload(v)) for v in ("v1alpha1", "v1alpha2", "v1beta1", "v2")] == [
        "v1alpha1", "v1alpha2", "v1beta1", None]
    assert native.version_problem(workload("v1beta1"), "v1beta1") is None
    assert native.version_problem(workload("v1beta1"), "v1alpha2") == (
        "written for scheduling.k8s.io/v1beta1 (Kubernetes 1.37), but planned for scheduling.k8s.io/v1alpha2 "
        "(Kubernetes 1.36), which does not serve it: not planned (--native-version v1beta1 plans for it)")
    plan = build_plan(manifests(workload("v1beta1")),
                      Settings(backends=(("default-scheduler", native.native_backend("v1beta1")),)))
    [member] = plan.members
    assert member.no_group.startswith("a Workload is a template for gangs") and not plan.groups
    plan = build_plan(manifests(workload("v1beta1")), Settings(backends=(("default-scheduler", native.NATIVE),)))
    assert not plan.members and [w.message.split(",")[0] for w in plan.warnings] == [
        "written for scheduling.k8s.io/v1beta1 (Kubernetes 1.37)"]


@pytest.mark.parametrize("api_version, kind, said", [
    ("kueue.x-k8s.io/v1beta1", "Workload", "a template, not a workload"),
    ("kubeflow.org/v1beta1", "Experiment", "a template, not a workload"),
    ("v1", "PodTemplate", "a template, not a workload"),
    ("flow.volcano.sh/v1alpha1", "JobTemplate", "Volcano's job controller makes"),
])
def test_more_templates_with_pod_templates_inside_get_no_gang(api_version, kind, said):
    template = {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}}
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "t"},
           "spec": {"podSets": [{"name": "main", "count": 3, "template": template}]}}
    plan = build_plan(manifests(obj))
    [member] = plan.members
    assert member.group is None and said in member.no_group
    assert not plan.groups and not plan.warnings
