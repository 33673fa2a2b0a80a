"""Owner chains (issue 32): the gang belongs to the highest owner whose kind defines one.
Wrappers and schedules (an AppWrapper, a DisaggregatedSet, a RayCronJob, a
ScheduledSparkApplication, and any kind podgang does not know above one it knows) are passed
through; Grove's kinds make their own gang and their pods are left alone; a SparkConnect is
staged as a SparkApplication. Manifests as the real CRDs accept them; chains as each
operator writes its ownerReferences (see the kinds' modules for the upstream sources)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podgang import kinds, rules
from podgang.plan import build_plan
from podgang.manifests import Manifest
from tests.crd_support import crd_valid, gang_and_parts
from tests.unit.test_rules_properties import PROPS


def ref(kind: str, name: str, uid: str, api_version: str, controller: bool = True) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid,
            **({"controller": True} if controller else {}), "blockOwnerDeletion": True}


def obj(api_version: str, kind: str, name: str, uid: str, owners: list[dict[str, Any]] = (), **more: Any) -> dict:
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "team", "uid": uid, "ownerReferences": list(owners),
                         **more.pop("metadata", {})}, **more}


def pod(name: str, owners: list[dict[str, Any]], labels: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "ownerReferences": owners, "labels": labels or {}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]}}


def gang(p: dict, chain: list[dict]) -> rules.Gang:
    found = rules.gang_for_pod(p, chain)
    assert isinstance(found, rules.Gang), found
    return found


POD_SPEC = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]}


# ---------------------------------------------------------------------------
# a DisaggregatedSet: each LeaderWorkerSet it makes keeps its per-group gangs


def lws_pods_under_a_disaggregated_set() -> tuple[dict, list[dict], dict]:
    """A decode LWS group's worker, as LWS makes it: worker pod → worker StatefulSet → leader
    pod → leader StatefulSet → LeaderWorkerSet → DisaggregatedSet."""
    ds = obj("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet", "serve", "ds-uid")
    lws_name = "serve-0-5d8c7b9f4-decode"
    lws = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws_name, "lws-uid",
              [ref("DisaggregatedSet", "serve", "ds-uid", "disaggregatedset.x-k8s.io/v1")],
              spec={"replicas": 2, "leaderWorkerTemplate": {"size": 2}})
    leader_sts = obj("apps/v1", "StatefulSet", lws_name, "leader-sts-uid",
                     [ref("LeaderWorkerSet", lws_name, "lws-uid", "leaderworkerset.x-k8s.io/v1")])
    labels = {kinds.LWS_NAME_LABEL: lws_name, kinds.LWS_GROUP_INDEX_LABEL: "1"}
    leader = obj("v1", "Pod", f"{lws_name}-1", "leader-uid",
                 [ref("StatefulSet", lws_name, "leader-sts-uid", "apps/v1")], metadata={"labels": labels})
    worker_sts = obj("apps/v1", "StatefulSet", f"{lws_name}-1", "worker-sts-uid",
                     [ref("Pod", f"{lws_name}-1", "leader-uid", "v1")])
    worker = pod(f"{lws_name}-1-1", [ref("StatefulSet", f"{lws_name}-1", "worker-sts-uid", "apps/v1")],
                 {**labels, kinds.LWS_WORKER_INDEX_LABEL: "1"})
    return worker, [worker_sts, leader, leader_sts, lws, ds], lws


def test_a_disaggregated_sets_lws_keeps_its_own_group_per_replica():
    worker, chain, lws = lws_pods_under_a_disaggregated_set()
    found = gang(worker, chain)
    assert found.name == "pg-serve-0-5d8c7b9f4-decode-lws-uid-group-1"
    assert found.owner.kind == "LeaderWorkerSet"
    assert rules.owner_to_look_up(worker, chain[:4]) is None  # the walk ends at the LWS: the set is not fetched
    assert rules.next_owner(lws) is None


def test_a_disaggregated_set_makes_one_lws_per_slice_and_role_with_its_labels():
    ds = crd_valid({"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
                    "metadata": {"name": "serve", "namespace": "team"},
                    "spec": {"slices": 2, "roles": [
                        {"name": "prefill", "spec": {"replicas": 2, "leaderWorkerTemplate": {
                            "size": 2, "workerTemplate": {"spec": POD_SPEC}}}},
                        {"name": "decode", "spec": {"replicas": 1, "leaderWorkerTemplate": {
                            "size": 4, "workerTemplate": {"spec": POD_SPEC}}}}]}})
    made = kinds.made_by(ds)
    assert [m["metadata"]["name"] for m in made] == [
        "serve-0-x0rev0x-prefill", "serve-0-x0rev0x-decode", "serve-1-x0rev0x-prefill", "serve-1-x0rev0x-decode"]
    for lws in made:
        crd_valid({**lws, "metadata": {k: v for k, v in lws["metadata"].items() if k != "ownerReferences"}})
        assert lws["metadata"]["ownerReferences"][0]["kind"] == "DisaggregatedSet"
        assert rules.next_owner(lws) is None
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert worker["metadata"]["labels"]["disaggregatedset.x-k8s.io/name"] == "serve"
    assert [gang_and_parts(m)[0] for m in made] == [2, 4, 2, 4]  # each LWS group: its size


# ---------------------------------------------------------------------------
# wrappers and schedules


def test_a_pytorchjob_in_an_appwrapper_is_its_own_gang():
    aw = obj("workload.codeflare.dev/v1beta2", "AppWrapper", "wrapped", "aw-uid")
    job = obj("kubeflow.org/v1", "PyTorchJob", "train", "job-uid",
              [ref("AppWrapper", "wrapped", "aw-uid", "workload.codeflare.dev/v1beta2")])
    worker = pod("train-worker-0", [ref("PyTorchJob", "train", "job-uid", "kubeflow.org/v1")],
                 {kinds.KUBEFLOW_REPLICA_TYPE_LABEL: "worker"})
    found = gang(worker, [job, aw])
    assert (found.name, found.owner.kind, found.subgroup) == ("pg-train-job-uid", "PyTorchJob", "worker")


def test_an_appwrapper_plans_each_component_in_its_place():
    aw = crd_valid({"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
                    "metadata": {"name": "wrapped", "namespace": "team"},
                    "spec": {"components": [{"template": {
                        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train"},
                        "spec": {"pytorchReplicaSpecs": {
                            "Master": {"replicas": 1, "template": {"spec": POD_SPEC}},
                            "Worker": {"replicas": 3, "template": {"spec": POD_SPEC}}}}}}]}})
    plan = build_plan([Manifest(aw, "aw.yaml#1")])
    by_what = {m.what: m for m in plan.members}
    assert "pytorchjob team/train" in by_what["appwrapper team/wrapped"].no_group
    assert by_what["pytorchjob team/train"].group == "pg-train-<uid>"
    [group] = plan.groups.values()
    assert group.min_member.value == 4 and [s.name for s in group.subgroups] == ["master", "worker"]
    assert not plan.warnings


def ray_run(index: int) -> tuple[dict, list[dict]]:
    """A worker of the cluster of a RayCronJob's run: pod → RayCluster → RayJob → RayCronJob."""
    cron = obj("ray.io/v1", "RayCronJob", "nightly", "cron-uid")
    job = obj("ray.io/v1", "RayJob", f"nightly-2950{index}", f"job-{index}",
              [ref("RayCronJob", "nightly", "cron-uid", "ray.io/v1")])
    cluster = obj("ray.io/v1", "RayCluster", f"nightly-2950{index}-abc", f"cluster-{index}",
                  [ref("RayJob", f"nightly-2950{index}", f"job-{index}", "ray.io/v1")])
    worker = pod(f"nightly-2950{index}-abc-worker-x", [ref("RayCluster", cluster["metadata"]["name"],
                                                           f"cluster-{index}", "ray.io/v1")], {"ray.io/group": "cpu"})
    return worker, [cluster, job, cron]


def test_every_run_of_a_ray_cron_job_is_its_own_gang():
    first, second = gang(*ray_run(1)), gang(*ray_run(2))
    assert first.name != second.name
    assert (first.owner.kind, second.owner.kind) == ("RayCluster", "RayCluster")


def spark_run(index: int) -> tuple[dict, list[dict]]:
    """A driver of a ScheduledSparkApplication's run: its ownerReference names no controller."""
    schedule = obj("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication", "pi", "ssa-uid")
    app = obj("sparkoperator.k8s.io/v1beta2", "SparkApplication", f"pi-17000{index}", f"app-{index}",
              [ref("ScheduledSparkApplication", "pi", "ssa-uid", "sparkoperator.k8s.io/v1beta2", controller=False)])
    driver = pod(f"pi-17000{index}-driver", [ref("SparkApplication", f"pi-17000{index}", f"app-{index}",
                                                 "sparkoperator.k8s.io/v1beta2")], {"spark-role": "driver"})
    return driver, [app, schedule]


def test_every_run_of_a_scheduled_spark_application_is_its_own_gang():
    first, second = gang(*spark_run(1)), gang(*spark_run(2))
    assert (first.name, second.name) == ("pg-pi-170001-app-1", "pg-pi-170002-app-2")


@pytest.mark.parametrize("schedule, run_kind", [
    ({"apiVersion": "ray.io/v1", "kind": "RayCronJob", "metadata": {"name": "nightly", "namespace": "team"},
      "spec": {"schedule": "0 2 * * *", "jobTemplate": {"entrypoint": "python train.py", "rayClusterSpec": {
          "headGroupSpec": {"rayStartParams": {}, "template": {"spec": POD_SPEC}},
          "workerGroupSpecs": [{"groupName": "cpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2, "rayStartParams": {},
                                "template": {"spec": POD_SPEC}}]}}}}, "RayJob"),
    ({"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "ScheduledSparkApplication",
      "metadata": {"name": "pi", "namespace": "team"},
      "spec": {"schedule": "@every 10m", "template": {
          "type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
          "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
          "driver": {"cores": 1, "memory": "512m", "schedulerName": "kai-scheduler"},
          "executor": {"cores": 1, "memory": "512m", "instances": 2, "schedulerName": "kai-scheduler"}}}},
     "SparkApplication"),
], ids=["RayCronJob", "ScheduledSparkApplication"])
def test_a_schedule_is_planned_as_one_run_of_its_own_with_its_name_to_come(schedule, run_kind):
    plan = build_plan([Manifest(crd_valid(schedule), "s.yaml#1")])
    [top, run] = plan.members
    name = schedule["metadata"]["name"]
    assert run.what == f"{run_kind.lower()} team/{name}-<time>"
    assert "no gang of its own" in top.no_group and run.what.split(" ")[1] in top.no_group
    assert run.group and not run.skipped
    assert not plan.warnings


# ---------------------------------------------------------------------------
# SparkConnect


def connect(state: str | None = None, **executor: Any) -> dict[str, Any]:
    sc = crd_valid({"apiVersion": "sparkoperator.k8s.io/v1alpha1", "kind": "SparkConnect",
                    "metadata": {"name": "conn", "namespace": "team", "uid": "sc-uid"},
                    "spec": {"sparkVersion": "4.0.0",
                             "server": {"template": {"spec": {"schedulerName": "kai-scheduler"}}},
                             "executor": {"template": {"spec": {"schedulerName": "kai-scheduler"}}, **executor}}})
    if state:
        sc["status"] = {"state": state}
    return sc


def test_a_spark_connect_is_its_server_then_its_executors_too():
    assert gang_and_parts(connect(instances=3))[0] == 1
    mm, why, parts = gang_and_parts(connect("Ready", instances=3))
    assert (mm, parts) == (4, [("connect-server", 1), ("executor", 3)])
    server = pod("conn-server", [ref("SparkConnect", "conn", "sc-uid", "sparkoperator.k8s.io/v1alpha1")],
                 {"spark-role": "connect-server"})
    server["metadata"]["uid"] = "server-uid"
    executor = pod("conn-exec-1", [ref("Pod", "conn-server", "server-uid", "v1")], {"spark-role": "executor"})
    assert gang(executor, [server]).name == gang(server, []).name == "pg-conn-sc-uid"
    assert gang(executor, [server]).subgroup == "executor"


# ---------------------------------------------------------------------------
# Grove: its gang, not podgang's


def test_a_grove_pod_is_left_to_grove_and_podgang_says_why():
    p = pod("disagg-0-prefill-abcde", [ref("PodClique", "disagg-0-prefill", "pclq-uid", "grove.io/v1alpha1")],
            {kinds.GROVE_PODGANG_LABEL: "disagg-0"})
    problem = rules.scope_problem(p, "team")
    assert problem is not None and problem.startswith("owned by PodClique disagg-0-prefill: its gang is Grove")
    assert "podgang leaves it alone" in problem


def test_a_podcliqueset_is_planned_as_grove_s_with_a_note_and_no_group():
    pcs = crd_valid({"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
                     "metadata": {"name": "disagg", "namespace": "team"},
                     "spec": {"replicas": 1, "template": {"cliques": [
                         {"name": "prefill", "spec": {"roleName": "prefill", "replicas": 2, "podSpec": POD_SPEC}}]}}})
    plan = build_plan([Manifest(pcs, "g.yaml#1")])
    [member] = plan.members
    assert member.group is None and "its gang is Grove" in member.no_group
    assert not plan.groups and not plan.warnings and len(plan.notes) == 1


# ---------------------------------------------------------------------------
# the rule, over random owner chains


KNOWN = [("apps/v1", "ReplicaSet"), ("apps/v1", "Deployment"), ("batch/v1", "Job"), ("kubeflow.org/v1", "PyTorchJob"),
         ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob")]
WRAPPERS = [("workload.codeflare.dev/v1beta2", "AppWrapper"), ("disaggregatedset.x-k8s.io/v1", "DisaggregatedSet"),
            ("ray.io/v1", "RayCronJob"), ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication")]
UNKNOWN = [("example.com/v1", "Wrapper"), ("serving.kserve.io/v1beta1", "InferenceService"),
           ("batch.volcano.sh/v1alpha1", "CronJob"), ("example.com/v1", "Deployment")]


@st.composite
def owner_chain(draw):
    """A pod and every owner above it, nearest first, each owned by the next: random depths
    of known kinds, wrappers and kinds podgang does not know."""
    kinds_drawn = draw(st.lists(st.sampled_from(KNOWN + WRAPPERS + UNKNOWN), min_size=1, max_size=6))
    chain = [obj(v, k, f"o{i}", f"u{i}") for i, (v, k) in enumerate(kinds_drawn)]
    for below, above in zip(chain, chain[1:]):
        below["metadata"]["ownerReferences"] = [ref(above["kind"], above["metadata"]["name"],
                                                     above["metadata"]["uid"], above["apiVersion"])]
    first = chain[0]
    return pod("p", [ref(first["kind"], first["metadata"]["name"], first["metadata"]["uid"], first["apiVersion"])]), chain


def _defines_gang(o: dict) -> bool:
    entry = kinds.workload_kind(o)
    return entry is not None and entry.layout != kinds.WRAPPER


@PROPS
@given(owner_chain())
def test_the_gang_is_the_highest_known_kind_below_any_wrapper(pod_chain):
    """Walking up from the pod, the gang's owner is the first known kind whose owner is a wrapper,
    a schedule or a kind podgang does not know (or one of the owner's runs), else the top."""
    p, chain = pod_chain
    found = gang(p, chain)
    top = rules.top_owner(p, chain)
    walked = rules.chain_objects(p, chain)
    assert found.owner == top and walked and walked[-1]["metadata"]["uid"] == top.uid
    if any(_defines_gang(o) for o in walked):
        assert _defines_gang(walked[-1]), (top, [o["kind"] for o in chain])
    for below, above in zip(walked, walked[1:]):  # nothing passed through defines a gang below a wrapper
        assert not (_defines_gang(below) and not _defines_gang(above) and above["kind"] not in (
            "Pod",)), [o["kind"] for o in walked]


@PROPS
@given(owner_chain(), st.sampled_from(WRAPPERS + UNKNOWN))
def test_a_wrapper_put_around_the_top_changes_no_gang(pod_chain, wrapper):
    p, chain = pod_chain
    before = gang(p, chain)
    walked = rules.chain_objects(p, chain)
    if not _defines_gang(walked[-1]) or walked[-1] is not chain[-1]:
        return  # the top is itself a wrapper or unknown (no known kind below it), or the walk ended below
    around = obj(wrapper[0], wrapper[1], "around", "around-uid")
    chain[-1]["metadata"]["ownerReferences"] = [ref(wrapper[1], "around", "around-uid", wrapper[0])]
    assert gang(p, [*chain, around]) == before
