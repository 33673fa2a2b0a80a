"""Gang intent as the peer projects write it (issue 23): fields podgang reads besides its own.

Each table runs a manifest in a peer's own shape (written here from what the project
documents) through the code the processes run: the grouper's ``desired_group`` on a cache
fed as its informers feed it, and ``podgang plan``'s ``build_plan``.
"""

from __future__ import annotations

import asyncio
import copy
from datetime import datetime, timezone
from typing import Any

import jsonpatch
import pytest

from podgang import kinds, rules
from podgang.backends.base import PATCH, GangSpec
from podgang.backends.kai import KAI
from podgang.backends.volcano import VOLCANO
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from podgang.gang import Cache
from podgang.gang import desired_group, plan_writes
from podgang.manifests import Manifest, Source
from podgang.plan import build_plan, plan_with_scale, shown
from podgang.settings import DEFAULT, Settings
from podgang.status import Snapshot, build_report
from tests.backend_support import SCHEDULERS, podgroup_of, resource
from tests.crd_support import crd_valid
from tests.unit.test_grouper_units import feed
from tests.emulator import KubeEmulator
from tests.webhook_support import eventually

NS = "serving"


def planned(*objs: dict, settings: Settings = DEFAULT):
    return build_plan([Manifest(copy.deepcopy(o), Source("test.yaml", i)) for i, o in enumerate(objs)], settings, NS)


def group_of_plan(plan, prefix: str):
    (found,) = [g for g in plan.groups.values() if shown(g.name).startswith(prefix)]
    return found


# ---------------------------------------------------------------------------
# 1. LWS startupPolicy LeaderReady: a staged gang, the leader first


def lws(startup: str | None = None, size: int = 4, replicas: int = 1) -> dict[str, Any]:
    template = {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "vllm", "image": "vllm/vllm"}]}}
    return crd_valid({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama", "namespace": NS, "uid": "lws-1"},
        "spec": {"replicas": replicas, **({"startupPolicy": startup} if startup else {}),
                 "leaderWorkerTemplate": {"size": size, "leaderTemplate": copy.deepcopy(template),
                                          "workerTemplate": copy.deepcopy(template)}}})


def lws_pod(index: int, *, node: str | None = None, group: int = 0) -> dict[str, Any]:
    """A pod as LWS labels it (the leader is worker-index 0), as podgang's webhook admitted it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"llama-{group}" + (f"-{index}" if index else ""), "namespace": NS,
                         "uid": f"pod-{group}-{index}",
                         "annotations": {"pod-group-name": f"pg-llama-lws-1-group-{group}"},  # as admitted
                         "labels": {kinds.LWS_NAME_LABEL: "llama", kinds.LWS_GROUP_INDEX_LABEL: str(group),
                                    kinds.LWS_WORKER_INDEX_LABEL: str(index)},
                         "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                              "name": "llama", "uid": "lws-1", "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {}),
                     "containers": [{"name": "vllm", "image": "vllm/vllm"}]},
            "status": {"phase": "Running" if node else "Pending"}}


LEADER_READY = [
    pytest.param(None, [], 4, id="LeaderCreated (the default): the group at once"),
    pytest.param("LeaderCreated", [lws_pod(0)], 4, id="LeaderCreated: the group at once"),
    pytest.param("LeaderReady", [], 1, id="LeaderReady, nothing made yet: the leader alone"),
    pytest.param("LeaderReady", [lws_pod(0)], 1, id="LeaderReady, the leader pending: the leader alone"),
    pytest.param("LeaderReady", [lws_pod(0, node="n1")], 4, id="LeaderReady, the leader placed: the group"),
    pytest.param("LeaderReady", [lws_pod(0, node="n1"), lws_pod(1)], 4, id="LeaderReady, workers made: the group"),
]


@pytest.mark.parametrize("startup,pods,size", LEADER_READY)
def test_a_leader_ready_group_is_its_leader_until_the_leader_is_placed(startup, pods, size):
    cache = feed(Cache(), lws(startup), *copy.deepcopy(pods))
    desired = desired_group(cache, f"{NS}/{rules.owned_group_name(rules.OwnerRef.of(lws()), '-group-0')}")
    assert desired.min_member is not None and desired.min_member.value == size
    if size == 1:
        assert "LeaderReady: the leader first" in desired.min_member.reason
        stage = kinds.replica_stage(lws(startup), pods)  # what the tree code reads: being placed, not broken
        assert stage is not None and (stage.size, stage.whole) == (1, 4)
    else:
        assert kinds.replica_stage(lws(startup), pods) is None


def test_plan_shows_each_leader_ready_group_staged():
    plan = planned(lws("LeaderReady", replicas=2))
    sizes = sorted((shown(g.name), g.min_member.value) for g in plan.groups.values())
    assert sizes == [("pg-llama-lws-1-group-0", 1), ("pg-llama-lws-1-group-1", 1)]
    assert all("once it is Ready" in g.min_member.reason for g in plan.groups.values())


# ---------------------------------------------------------------------------
# 4. KAI's own size annotations, read where KAI's grouper reads them

BATCH = "kai.scheduler/batch-min-member"


def kai_job(notes: dict | None = None, parallelism: int = 4) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": NS, "uid": "job-1", **({"annotations": notes} if notes else {})},
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": {
                "schedulerName": "kai-scheduler", "restartPolicy": "Never",
                "containers": [{"name": "t", "image": "pytorch/pytorch"}]}}}}


def kai_jobset(rjob_notes: dict | None = None, notes: dict | None = None) -> dict[str, Any]:
    def rjob(name: str, replicas: int, parallelism: int, job_notes: dict | None) -> dict:
        return {"name": name, "replicas": replicas, "template": {
            **({"metadata": {"annotations": job_notes}} if job_notes else {}),
            "spec": {"parallelism": parallelism, "completions": parallelism, "template": {"spec": {
                "schedulerName": "kai-scheduler", "restartPolicy": "Never",
                "containers": [{"name": "t", "image": "pytorch/pytorch"}]}}}}}
    return crd_valid({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                      "metadata": {"name": "pretrain", "namespace": NS, "uid": "js-1",
                                   **({"annotations": notes} if notes else {})},
                      "spec": {"replicatedJobs": [rjob("coordinator", 1, 1, None),
                                                  rjob("workers", 2, 4, rjob_notes)]}})


KAI_MIN_MEMBER = "kai.scheduler/min-member"


def kai_apps(kind: str, notes: dict | None = None, replicas: int = 4, **extra: Any) -> dict[str, Any]:
    """A Deployment or StatefulSet of KAI pods (KAI v0.18 groups a Deployment whole)."""
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": "serve", "namespace": NS, "uid": f"{kind.lower()}-1",
                         **({"annotations": notes} if notes else {})},
            "spec": {"replicas": replicas, **extra, "selector": {"matchLabels": {"app": "serve"}}, "template": {
                "metadata": {"labels": {"app": "serve"}},
                "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "s", "image": "vllm"}]}}}}


KAI_PINS = [
    # KAI v0.18's size keys on a Deployment and a Parallel StatefulSet: both read, batch-min-member first
    pytest.param(kai_apps("Deployment", {BATCH: "2"}), 2, [], None, id="batch-min-member on a Deployment"),
    pytest.param(kai_apps("Deployment", {KAI_MIN_MEMBER: "3"}), 3, [], None, id="min-member on a Deployment"),
    pytest.param(kai_apps("Deployment", {BATCH: "2", KAI_MIN_MEMBER: "3"}), 2, [], None,
                 id="both on a Deployment: batch-min-member"),
    pytest.param(kai_apps("Deployment", {KAI_MIN_MEMBER: "0"}), 4, [], "is ignored: a whole number ≥ 1",
                 id="min-member 0 on a Deployment"),
    pytest.param(kai_apps("StatefulSet", {KAI_MIN_MEMBER: "2"}, podManagementPolicy="Parallel"), 2, [], None,
                 id="min-member on a Parallel StatefulSet"),
    pytest.param(kai_apps("StatefulSet", {KAI_MIN_MEMBER: "2"}), 1, [], None,
                 id="not on an ordered StatefulSet (a gang of one)"),
    pytest.param(kai_job(), 4, [], None, id="a Job without it: parallelism"),
    pytest.param(kai_job({BATCH: "2"}), 2, [], None, id="on a Job: KAI's minMember"),
    pytest.param(kai_job({BATCH: "two"}), 4, [], "is ignored: a whole number ≥ 1", id="on a Job, not a number"),
    pytest.param(kai_job({BATCH: "2", "podgang.io/min-member": "3"}), 3, [], None, id="podgang's own pin first"),
    # KAI's JobSet tree: each replicated job a parent needing all its Jobs, a leaf per Job
    # (`<replicated job>-replica-<index>`), the root needing every replicated job (minSubGroup)
    pytest.param(kai_jobset(), 9, [("coordinator", 1), ("coordinator-replica-0", 1), ("workers", 2),
                                   ("workers-replica-0", 4), ("workers-replica-1", 4)], None,
                 id="a JobSet without it"),
    pytest.param(kai_jobset({BATCH: "1"}), 3, [("coordinator", 1), ("coordinator-replica-0", 1), ("workers", 2),
                                               ("workers-replica-0", 1), ("workers-replica-1", 1)], None,
                 id="on a replicated job's Job template: each Job's minimum"),
    # on the JobSet: KAI's root minSubGroup (the replicated jobs it needs), as KAI's grouper writes it
    pytest.param(kai_jobset(notes={BATCH: "1"}), 9, [("coordinator", 1), ("coordinator-replica-0", 1), ("workers", 2),
                                                     ("workers-replica-0", 4), ("workers-replica-1", 4)],
                 None, id="on a JobSet: the root's minSubGroup"),
]


@pytest.mark.parametrize("workload,size,subgroups,problem", KAI_PINS)
def test_kais_batch_min_member_sizes_the_gang_as_kais_grouper_does(workload, size, subgroups, problem):
    cache = feed(Cache(), copy.deepcopy(workload))  # through the Slimmer: the grouper keeps what it reads
    (key,) = cache.owned_group_names(cache.store_for(workload["kind"])[f"{NS}/{workload['metadata']['name']}"])
    desired = desired_group(cache, f"{NS}/{key}")
    assert desired.min_member is not None and desired.min_member.value == size
    assert [(s.name, s.min_member) for s in desired.subgroups] == subgroups
    if workload["kind"] == "JobSet":  # the root needs its replicated jobs, or the JobSet's own number of them
        assert desired.min_subgroup == (1 if BATCH in (workload["metadata"].get("annotations") or {}) else 2)
    said = [*desired.problems, *(desired.options.get("problems") or ())]
    assert any(problem in p for p in said) if problem else not said
    plan = planned(workload)  # the plan says the same
    assert group_of_plan(plan, f"pg-{workload['metadata']['name']}").min_member.value == size


def test_a_batch_min_member_is_kais_only():
    """On a Job whose pods another scheduler places, KAI's annotation means nothing."""
    job = kai_job({BATCH: "2"})
    job["spec"]["template"]["spec"]["schedulerName"] = "volcano"
    settings = Settings(backends=(("kai-scheduler", KAI), ("volcano", VOLCANO)))
    assert rules.min_member_for(job, settings=settings).value == 4
    assert rules.min_member_for(kai_job({BATCH: "2"}), settings=settings).value == 2


# ---------------------------------------------------------------------------
# 3. A hand-made group written below its members' total: the user's elastic gang

ALL_BACKENDS = {"kai": (KAI, "kai-scheduler"), **SCHEDULERS}


GROUP_MADE = "2026-11-28T10:00:00Z"
BEFORE, AFTER = "2026-11-28T09:00:00Z", "2026-11-28T10:05:00Z"


def history(made: str, *writes: tuple[str, str | None]) -> dict[str, Any]:
    """A ReplicaSet's metadata as the apiserver keeps it: made at ``made``, its replicas then
    written by each ``(manager, time)`` (time None: through the scale subresource, which the
    apiserver does not date)."""
    entries = [{"manager": "kubectl-client-side-apply", "operation": "Update", "time": made,
                "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {}}}}]
    for manager, time in writes:
        entries.append({"manager": manager, "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                        **({"time": time} if time else {"subresource": "scale"})})
    return {"creationTimestamp": made, "generation": 1 + len(writes), "managedFields": entries}


def elastic_case(name: str, written: int, replicas: int = 6, followed: str | None = None,
                 elastic: bool = False, rs_history: dict[str, Any] | None = None):
    """The scheduler-plugins demo in each backend's spelling: a ReplicaSet of ``replicas``
    whose pods name a PodGroup written with ``minMember: written`` (made at GROUP_MADE)."""
    backend, scheduler = ALL_BACKENDS[name]
    settings = Settings(backends=((scheduler, backend),))
    group = backend.build_podgroup(GangSpec("nginx", NS, written))
    group["metadata"]["creationTimestamp"] = GROUP_MADE
    notes = {settings.followed_size_annotation: followed} if followed else {}
    if elastic:
        notes[settings.elastic_size_annotation] = str(written)
    if notes:
        group["metadata"].setdefault("annotations", {}).update(notes)
    template = {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "nginx", "image": "nginx"}]}}
    template = jsonpatch.apply_patch(template, backend.membership_patch(template, "nginx"))
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "nginx", "namespace": NS, "uid": "rs-1", **(rs_history or {})},
          "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "nginx"}}, "template": template}}
    return backend, settings, group, rs


SCALED_AFTER = "replicaset nginx was scaled to 4 after the group was written with 3"
NOT_DATED = "replicaset nginx was scaled to 4 by kubectl through its scale subresource at a time its managedFields"
ELASTIC = [pytest.param(name, written, replicas, followed, elastic, made, size, writes, says, id=f"{name}: {why}")
           for name in ALL_BACKENDS
           for written, replicas, followed, elastic, made, size, writes, says, why in [
               (3, 6, None, False, None, 3, ["record-elastic"], "no member was scaled since",
                "3 of 6 applied together is an elastic gang, recorded at the first look"),
               (3, 6, None, True, None, 3, [], "as judged at podgang's first look", "recorded elastic stays 3"),
               (3, 8, None, True, history(GROUP_MADE, ("kubectl", None)), 3, [], "elastic gang",
                "recorded elastic stays 3 when scaled to 8 after the look"),
               (6, 6, None, False, None, 6, ["record-size"], "", "6 of 6 is followed from now on"),
               (6, 8, "6", False, None, 8, ["patch-min-member"], "", "a followed 6 follows a scale to 8"),
               (3, 8, "6", False, None, 3, [], "after podgang followed it at 6",
                "a followed group the user set to 3 is theirs again"),
               (8, 6, None, False, None, 6, ["patch-min-member"], "", "8 of 6 never forms: lowered"),
               (3, 4, None, False, history(GROUP_MADE, ("kubectl", None)), 4, ["patch-min-member"], SCALED_AFTER,
                "seed 003: 3 of 3, one scaled before the first look, is followed"),
               (3, 4, None, False, history(AFTER, ("kubectl", None)), 4, ["patch-min-member"], SCALED_AFTER,
                "a member made after the group and scaled is followed"),
               (3, 4, None, False, history(GROUP_MADE, ("autoscaler", AFTER)), 4, ["patch-min-member"],
                SCALED_AFTER, "a dated write of replicas after the group is followed"),
               (3, 4, None, False, history(BEFORE, ("kubectl", None)), 4, ["patch-min-member"], NOT_DATED,
                "an undated scale of a member older than the group: an old total, followed"),
               (3, 6, None, False, history(BEFORE, ("autoscaler", BEFORE)), 3, ["record-elastic"],
                "no member was scaled since", "a member scaled before the group was written: elastic"),
               (3, 6, None, False, history(AFTER), 3, ["record-elastic"], "no member was scaled since",
                "a member made after the group counts with its size as made"),
               (1, 6, None, False, None, 6, ["patch-min-member"], "a placeholder",
                "1 of 6 is a placeholder, followed"),
               (0, 6, None, False, None, 6, ["patch-min-member"], "a placeholder",
                "0 of 6 is a placeholder, followed"),
           ]]


@pytest.mark.parametrize("name,written,replicas,followed,elastic,made,size,writes,says", ELASTIC)
def test_whose_number_a_hand_made_groups_size_is(name, written, replicas, followed, elastic, made, size, writes,
                                                  says):
    backend, settings, group, rs = elastic_case(name, written, replicas, followed, elastic, made)
    cache = feed(Cache(settings), copy.deepcopy(group), copy.deepcopy(rs))
    desired = desired_group(cache, f"{NS}/nginx")
    assert desired.min_member is not None and desired.min_member.value == size
    assert says in desired.min_member.reason
    if size < replicas:
        assert "an elastic gang" in desired.min_member.reason
    actual = cache.podgroups.of(backend, f"{NS}/nginx")
    patchable = backend.resize(actual, written + 1).action == PATCH
    # a group whose size cannot change while it lives is never resized: nothing to record either
    assert [w.action for w in plan_writes(desired, actual, settings)] == (writes if patchable else [])
    plan = planned(group, rs, settings=settings)  # podgang plan says the same, from the same evidence
    assert plan.groups[(NS, "nginx")].min_member.value == size


# ---------------------------------------------------------------------------
# 10. A hand-made group only some of a workload's roles name

VOLCANO_SETTINGS = Settings(backends=(("volcano", VOLCANO),))


def volcano_spark(state: str | None = None) -> dict[str, Any]:
    """Volcano's way with spark-operator: the executors name a PodGroup, the driver does not."""
    app = crd_valid({
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "metadata": {"name": "spark-pi", "namespace": NS, "uid": "app-1"},
        "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
                 "mainClass": "org.apache.spark.examples.SparkPi",
                 "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                 "driver": {"cores": 1, "memory": "512m", "schedulerName": "volcano"},
                 "executor": {"cores": 1, "instances": 2, "memory": "512m", "schedulerName": "volcano",
                              "annotations": {"scheduling.k8s.io/group-name": "spark-pi-group"}}}})
    if state:
        app["status"] = {"applicationState": {"state": state}}
    return app


def spark_pi_group(written: int = 2) -> dict[str, Any]:
    return VOLCANO.build_podgroup(GangSpec("spark-pi-group", NS, written))


PARTLY_NAMED = [
    pytest.param(None, 1, 1, id="submitted: the driver's own gang; the executors, not made yet, none"),
    pytest.param("RUNNING", 1, 2, id="running: the driver's own gang of 1; the executors' group of 2"),
]


@pytest.mark.parametrize("state,driver_gang,executor_gang", PARTLY_NAMED)
def test_the_driver_is_not_counted_into_the_executors_group_and_has_its_own_gang(state, driver_gang, executor_gang):
    cache = feed(Cache(VOLCANO_SETTINGS), spark_pi_group(), volcano_spark(state))
    (own,) = cache.owned_group_names(cache.store_for("SparkApplication")[f"{NS}/spark-pi"])
    driver = desired_group(cache, f"{NS}/{own}")
    assert (driver.source, driver.min_member.value) == (rules.OWNED, driver_gang)
    assert driver.may_create and driver.subgroups == ()
    assert 'executor in hand-made PodGroup "spark-pi-group"' in driver.min_member.reason
    assert driver.min_resources == {"cpu": "1", "memory": "896Mi"}  # the driver alone: 512m + 384Mi overhead
    executors = desired_group(cache, f"{NS}/spark-pi-group")
    assert (executors.source, executors.min_member.value) == (rules.HAND_MADE, executor_gang)
    assert dict(executors.contributions) == {"sparkapplication spark-pi": 0 if state is None else 2}
    plan = planned(spark_pi_group(), volcano_spark(state), settings=VOLCANO_SETTINGS)
    assert plan.groups[(NS, "spark-pi-group")].min_member.value == executor_gang
    assert group_of_plan(plan, "pg-spark-pi-").min_member.value == driver_gang
    (member,) = plan.members
    assert "executor in hand-made PodGroup spark-pi-group" in member.why


def test_a_driver_pod_gets_its_workloads_gang_and_an_executor_the_named_one():
    app = volcano_spark("RUNNING")
    owner = [{"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "spark-pi",
              "uid": "app-1", "controller": True}]
    driver = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "spark-pi-driver", "namespace": NS, "labels": {"spark-role": "driver"}, "ownerReferences": owner},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "spark-kubernetes-driver"}]}}
    executor = copy.deepcopy(driver)
    executor["metadata"].update(name="spark-pi-exec-1", labels={"spark-role": "executor"},
                                annotations={"scheduling.k8s.io/group-name": "spark-pi-group"})
    assert rules.gang_for_pod(driver, [app], settings=VOLCANO_SETTINGS).name == "pg-spark-pi-app-1"
    assert rules.gang_for_pod(executor, [app], settings=VOLCANO_SETTINGS).name == "spark-pi-group"


@pytest.mark.parametrize("name", ["kai", "coscheduling", "volcano"])
def test_plan_scale_follows_a_followed_group_and_leaves_an_elastic_one(name):
    for written, after in ((3, 3), (6, 8)):  # 3 of 6: the user's; 6 of 6: followed from the grouper's first look
        _, settings, group, rs = elastic_case(name, written)
        manifests = [Manifest(copy.deepcopy(o), Source("demo.yaml", i)) for i, o in enumerate((group, rs))]
        plan = plan_with_scale(manifests, {"rs/nginx": 8}, settings, NS)
        assert plan.groups[(NS, "nginx")].min_member.value == after


# ---------------------------------------------------------------------------
# 6. A TrainJob with its runtime in the manifests: the JobSet the Trainer makes is its gang

ANCESTOR = kinds.TRAINER_ANCESTOR_LABEL


def rjob(name: str, ancestor: str | None, *, depends: str | None = None, scheduler: str = "kai-scheduler",
         parallelism: int | None = None) -> dict[str, Any]:
    job_spec: dict[str, Any] = {"template": {"spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                                                      "containers": [{"name": name, "image": f"trainer/{name}"}]}}}
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    return {"name": name, **({"dependsOn": [{"name": depends, "status": "Complete"}]} if depends else {}),
            "template": {**({"metadata": {"labels": {ANCESTOR: ancestor}}} if ancestor else {}), "spec": job_spec}}


def runtime(*rjobs: dict, kind: str = "ClusterTrainingRuntime", ml: dict | None = None,
            pod_group: dict | None = None) -> dict[str, Any]:
    return crd_valid({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind,
                      "metadata": {"name": "torch-llm", **({"namespace": NS} if kind == "TrainingRuntime" else {})},
                      "spec": {**({"mlPolicy": ml} if ml else {}), **({"podGroupPolicy": pod_group} if pod_group else {}),
                               "template": {"spec": {"replicatedJobs": list(rjobs)}}}})


def trainjob(nodes: int | None = 4, kind: str | None = None) -> dict[str, Any]:
    return crd_valid({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                      "metadata": {"name": "llama", "namespace": NS},
                      "spec": {"runtimeRef": {"name": "torch-llm", **({"kind": kind} if kind else {})},
                               **({"trainer": {"numNodes": nodes}} if nodes is not None else {})}})


TORCH = runtime(rjob("model-initializer", "model-initializer"), rjob("node", "trainer", depends="model-initializer"),
                ml={"numNodes": 2, "torch": {}})
TRAINJOBS = [
    pytest.param(trainjob(4), TORCH, [("model-initializer", 1, 1), ("node", 1, 4)], 1,
                 "node is made once model-initializer is Complete", id="torch: numNodes 4, the initializer first"),
    pytest.param(trainjob(None), TORCH, [("model-initializer", 1, 1), ("node", 1, 2)], 1,
                 "node is made once model-initializer is Complete", id="torch: the runtime's numNodes"),
    pytest.param(trainjob(3), runtime(rjob("node", "trainer"), ml={"numNodes": 1, "torch": {}}),
                 [("node", 1, 3)], 3, "replicatedJobs node 1×3", id="torch without an initializer"),
    pytest.param(trainjob(3, "TrainingRuntime"), runtime(rjob("node", "trainer"), kind="TrainingRuntime",
                                                         ml={"numNodes": 1, "torch": {}}),
                 [("node", 1, 3)], 3, "replicatedJobs node 1×3", id="a namespaced TrainingRuntime"),
    pytest.param(trainjob(4), runtime(rjob("launcher", "trainer"), rjob("node", None),
                                      ml={"numNodes": 1, "mpi": {"runLauncherAsNode": True}}),
                 [("launcher", 1, 1), ("node", 1, 3)], 4, "launcher 1×1 + node 1×3", id="MPI: the launcher is a node"),
]


@pytest.mark.parametrize("job,rt,shape,size,why", TRAINJOBS)
def test_a_trainjobs_gang_is_the_jobset_the_trainer_makes_from_its_runtime(job, rt, shape, size, why):
    made = kinds.trainjob_jobset(job, rt)
    assert made["metadata"]["name"] == "llama" and made["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    crd_valid(made)
    assert [(r["name"], r.get("replicas", 1), r["template"]["spec"]["parallelism"])
            for r in made["spec"]["replicatedJobs"]] \
        == [(n, replicas, p) for n, replicas, p in shape]
    plan = planned(rt, job)
    group = group_of_plan(plan, "pg-llama-")
    assert group.min_member.value == size and why in group.min_member.reason
    (member,) = [m for m in plan.members if m.what == f"trainjob {NS}/llama"]
    assert member.group == shown(group.name) and "torch-llm is its gang" in member.why


def test_a_trainjob_whose_runtime_is_not_in_the_manifests_points_at_the_jobset_it_starts():
    plan = planned(trainjob(4))
    (member,) = plan.members
    assert plan.groups == {} and "through the JobSet it starts" in member.no_group


# ---------------------------------------------------------------------------
# 8. An operator's own gang integration: one gang per workload, the operator's

COSCHEDULING_SETTINGS = Settings(backends=(("scheduler-plugins-scheduler", SCHEDULERS["coscheduling"][0]),))


def test_a_trainer_runtimes_pod_group_policy_is_the_trainers_own_podgroup():
    rt = runtime(rjob("node", "trainer", scheduler="scheduler-plugins-scheduler"), ml={"numNodes": 1, "torch": {}},
                 pod_group={"coscheduling": {"scheduleTimeoutSeconds": 100}})
    made = kinds.trainjob_jobset(trainjob(4), rt)
    pod_labels = made["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    assert pod_labels == {"scheduling.x-k8s.io/pod-group": "llama"}  # as the Trainer labels them
    plan = planned(rt, trainjob(4), settings=COSCHEDULING_SETTINGS)
    assert not any(g.name in ("llama",) or shown(g.name).startswith("pg-llama") for g in plan.groups.values())
    assert all("not found" not in w.message for w in plan.warnings)
    (member,) = [m for m in plan.members if m.what == f"trainjob {NS}/llama"]
    assert "the Trainer makes PodGroup llama itself" in member.no_group and "no second one" in member.no_group
    # on a cluster: the JobSet the Trainer made names the Trainer's group; podgang sizes it not
    js = copy.deepcopy(made)
    js["metadata"]["ownerReferences"][0]["uid"] = "tj-1"
    js["metadata"]["uid"] = "js-1"
    trainer_group = SCHEDULERS["coscheduling"][0].build_podgroup(GangSpec("llama", NS, 4))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "llama-node-0-0", "namespace": NS, "uid": "p-1", "labels": {"scheduling.x-k8s.io/pod-group": "llama"},
        "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "llama", "uid": "js-1",
                             "controller": True}]},
        "spec": {"schedulerName": "scheduler-plugins-scheduler", "containers": [{"name": "node"}]}}
    cache = feed(Cache(COSCHEDULING_SETTINGS), {**trainjob(4), "metadata": {"name": "llama", "namespace": NS,
                                                                          "uid": "tj-1"}}, js, trainer_group, pod)
    desired = desired_group(cache, f"{NS}/llama")
    assert desired.min_member is None and "the Trainer makes PodGroup llama itself" in desired.operator
    assert plan_writes(desired, cache.podgroups.of(SCHEDULERS["coscheduling"][0], f"{NS}/llama"),
                       COSCHEDULING_SETTINGS) == []


def spark_batch(scheduler: str) -> dict[str, Any]:
    app = volcano_spark()
    app["spec"]["batchScheduler"] = scheduler
    app["spec"]["executor"].pop("annotations")
    return crd_valid(app)


def ray_gang(labels: dict | None = None) -> dict[str, Any]:
    pod = {"spec": {"schedulerName": "volcano", "containers": [{"name": "ray", "image": "rayproject/ray"}]}}
    return crd_valid({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                      "metadata": {"name": "raycluster", "namespace": NS, "uid": "ray-1", "labels": labels or {}},
                      "spec": {"headGroupSpec": {"rayStartParams": {}, "template": copy.deepcopy(pod)},
                               "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2,
                                                     "maxReplicas": 2, "rayStartParams": {},
                                                     "template": copy.deepcopy(pod)}]}})


OPERATOR_GANGS = [
    pytest.param(spark_batch("volcano"), "spark-spark-pi-pg", "spec.batchScheduler volcano", id="spark: volcano"),
    pytest.param(spark_batch("scheduler-plugins-scheduler"), "spark-pi-pg", "spark-operator makes PodGroup spark-pi-pg",
                 id="spark: a scheduler-plugins scheduler"),
    pytest.param(ray_gang({kinds.RAY_GANG_LABEL: "true"}), "raycluster", "KubeRay (batchScheduler scheduler-plugins)",
                 id="kuberay: ray.io/gang-scheduling-enabled"),
]


@pytest.mark.parametrize("workload,group,why", OPERATOR_GANGS)
def test_an_operators_own_gang_integration_gets_no_second_podgroup(workload, group, why):
    cache = feed(Cache(VOLCANO_SETTINGS), copy.deepcopy(workload))  # the grouper makes none
    assert cache.owned_group_names(cache.store_for(workload["kind"])[f"{NS}/{workload['metadata']['name']}"]) == []
    plan = planned(workload, settings=VOLCANO_SETTINGS)  # nor does the plan, and it says why
    assert plan.groups == {}
    (member,) = plan.members
    assert member.group is None and group in member.no_group and why in member.no_group
    assert "podgang makes no second one" in member.no_group
    assert any(why in n.message for n in plan.notes)


def test_without_the_operators_integration_podgang_makes_the_gang():
    cache = feed(Cache(VOLCANO_SETTINGS), ray_gang())
    assert cache.owned_group_names(cache.store_for("RayCluster")[f"{NS}/raycluster"]) == ["pg-raycluster-ray-1"]


def operator_pod(name: str, group: str, owner: dict) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "annotations": {"scheduling.k8s.io/group-name": group},
                         "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {"schedulerName": "volcano", "containers": [{"name": "ray", "image": "rayproject/ray"}]},
            "status": {"phase": "Pending"}}


def test_pods_naming_their_operators_group_are_that_gang_and_podgangs_own_is_retired():
    """KubeRay run with batchScheduler volcano (an operator flag the RayCluster does not show)
    names ray-<cluster>-pg on its pods: that is the gang; the group podgang made when the
    cluster appeared, before its pods, is no longer wanted."""
    from podgang.gang import retired_by
    ray = ray_gang()
    ours = VOLCANO.build_podgroup(GangSpec("pg-raycluster-ray-1", NS, 3, labels=DEFAULT.managed_labels,
                                           owner=rules.OwnerRef.of(ray)))
    theirs = VOLCANO.build_podgroup(GangSpec("ray-raycluster-pg", NS, 3))
    pods = [operator_pod(f"raycluster-{i}", "ray-raycluster-pg", ray) for i in range(3)]
    cache = feed(Cache(VOLCANO_SETTINGS), ray, ours, theirs, *pods)
    own = desired_group(cache, f"{NS}/pg-raycluster-ray-1")
    assert own.source is None and "their operator's own gang" in own.operator
    assert retired_by(own, cache.podgroups.of(VOLCANO, f"{NS}/pg-raycluster-ray-1"), cache)
    operator = desired_group(cache, f"{NS}/ray-raycluster-pg")
    assert operator.source == rules.HAND_MADE and operator.min_member is None  # its size is the operator's
    assert "podgang makes no second one" in operator.operator
    assert plan_writes(operator, cache.podgroups.of(VOLCANO, f"{NS}/ray-raycluster-pg"), VOLCANO_SETTINGS) == []


def test_pods_of_a_kind_without_an_operator_gang_naming_another_group_keep_podgangs():
    """A ReplicaSet has no operator that gangs it: its pods naming a group podgang does not
    manage were labelled by another grouper (KAI's own, with no webhook in front), and
    podgang still makes the ReplicaSet's gang (the real-apiserver test caught this)."""
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": NS, "uid": "rs-1"},
          "spec": {"replicas": 3, "template": {"spec": {"schedulerName": "volcano",
                                                          "containers": [{"name": "c", "image": "nginx"}]}}}}
    pods = [operator_pod(f"web-{i}", "pg-web-from-another-grouper", rs) for i in range(3)]
    cache = feed(Cache(VOLCANO_SETTINGS), rs, *pods)
    (own_name,) = cache.owned_group_names(cache.store_for("ReplicaSet")[f"{NS}/web"])
    own = desired_group(cache, f"{NS}/{own_name}")
    assert own.operator is None and own.source == rules.OWNED and own.min_member.value == 3


async def test_the_grouper_says_once_that_a_gang_is_its_operators_and_makes_no_second_one():
    """The grouper on a RayCluster whose KubeRay (batchScheduler volcano) made ray-<name>-pg:
    its pods name that group, podgang's own, made when the cluster came, is retired, and one
    OperatorGang event says why; podgang status shows the same."""
    async with KubeEmulator() as emu:
        emu.register(resource(VOLCANO))
        ray = emu.put(ray_gang())
        emu.put(VOLCANO.build_podgroup(GangSpec("ray-raycluster-pg", NS, 3)))
        client = emu.api_client()
        controller = Controller(client, VOLCANO_SETTINGS, Options(resync_period=300.0, request_timeout=5.0),
                                events=EventSink(EventRecorder(client, "podgang-grouper")))
        task = asyncio.create_task(controller.run())
        ours = "pg-raycluster-ray-1"
        try:
            await emu.wait_for(lambda: podgroup_of(emu, VOLCANO, NS, ours) is not None, 10, "podgang's group")
            for i in range(3):  # KubeRay's pods come, naming its own group
                emu.put(operator_pod(f"raycluster-{i}", "ray-raycluster-pg", ray))
            await emu.wait_for(lambda: podgroup_of(emu, VOLCANO, NS, ours) is None, 10, "podgang's group retired")
            said = await eventually(lambda: grouper_events(emu, "OperatorGang"), what="an OperatorGang event")
            assert all("their operator's own gang" in e["message"] or "no second one" in e["message"] for e in said)
            await eventually(lambda: [e for e in grouper_events(emu, "OperatorGang")
                                      if e["involvedObject"]["kind"] == "RayCluster"], what="said on the RayCluster")
            await controller.queue.wait_idle()
            count = len(grouper_events(emu, "OperatorGang"))
            emu.put({**operator_pod("raycluster-3", "ray-raycluster-pg", ray)})  # a new pod: nothing new to say
            await controller.queue.wait_idle()
            assert len(grouper_events(emu, "OperatorGang")) == count
            theirs = podgroup_of(emu, VOLCANO, NS, "ray-raycluster-pg")
            assert theirs["spec"]["minMember"] == 3 and "labels" not in theirs["metadata"]  # the operator's, untouched
            snapshot = Snapshot(pods=emu.list("pods", NS), podgroups={"volcano": [theirs]},
                                workloads={"RayCluster": [emu.get("rayclusters", NS, "raycluster")]}, events=[],
                                now=datetime.now(timezone.utc))
            (gang,) = [g for g in build_report(snapshot, VOLCANO_SETTINGS).gangs if g.name == "ray-raycluster-pg"]
            assert "podgang makes no second one" in gang.min_member_from
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()


def grouper_events(emu, reason: str) -> list[dict]:
    return [e for e in emu.list("events", NS) if e.get("reason") == reason]


def test_a_trainjobs_runtime_patches_reach_the_jobset_and_its_gang():
    """runtimePatches (Kueue's, a user's): labels on the JobSet, KAI's batch-min-member on a
    replicated job's Job template, a queue label on its pods — as the Trainer merges them."""
    job = trainjob(4)
    job["metadata"]["labels"] = {"kai.scheduler/queue": "research"}
    job["spec"]["runtimePatches"] = [{"manager": "user", "trainingRuntimeSpec": {"template": {
        "metadata": {"labels": {"team": "nlp"}},
        "spec": {"replicatedJobs": [{"name": "node", "template": {
            "metadata": {"annotations": {BATCH: "2"}},
            "spec": {"template": {"metadata": {"labels": {"tier": "gpu"}}}}}}]}}}}]
    job = crd_valid(job)
    rt = runtime(rjob("node", "trainer"), ml={"numNodes": 1, "torch": {}})
    made = kinds.trainjob_jobset(job, rt)
    node = made["spec"]["replicatedJobs"][0]["template"]
    assert made["metadata"]["labels"] == {"team": "nlp"}
    assert node["metadata"]["annotations"] == {BATCH: "2"}
    assert node["spec"]["template"]["metadata"]["labels"] == {"tier": "gpu"}
    group = group_of_plan(planned(rt, job), "pg-llama-")
    assert group.min_member.value == 2  # KAI's annotation on the node Job: each of its 1 Jobs needs 2
    assert group.options["queue"] == "research"  # the TrainJob's label, lent to its JobSet as KAI reads it
