"""The grouper's pure parts: the slim cache and its indexes, the desired PodGroup
computed from it through the rules, the writes planned from desired vs actual,
change messages, rollout detection and the coalescing work queue."""

from __future__ import annotations

import asyncio
import json

import pytest

from podgang.settings import DEFAULT

from podgang.gang import Cache, Slimmer, obj_key
from podgang.kinds import rolling_out
from podgang.gang import describe_change, desired_group, gang_counts, is_orphan_candidate, plan_writes
from podgang.grouper.workqueue import WorkQueue
from tests.grouper_support import (
    ANN,
    LABEL,
    MANAGED,
    NS,
    deployment,
    owned_group,
    owner_ref,
    pod,
    podgroup,
    replicaset,
    revisioned,
    uid,
)
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "api"


def feed(cache: Cache, *objs: dict) -> Cache:
    """Put full API objects into the cache the way an informer does."""
    for obj in objs:
        kind = obj["kind"]
        slim = cache.slimmer_for(kind)(obj)
        if slim is None or not cache.keep(kind, slim):
            continue
        store = cache.store_for(kind)
        key = obj_key(slim)
        old = store.get(key)
        store[key] = slim
        cache.apply(kind, old, slim)
    return cache


def remove(cache: Cache, obj: dict) -> None:
    store = cache.store_for(obj["kind"])
    old = store.pop(obj_key(obj))
    cache.apply(obj["kind"], old, None)


def with_status(obj: dict, **status) -> dict:
    return {**obj, "status": {**obj.get("status", {}), **status}}


# ---------------------------------------------------------------------------- slim records


def test_slim_pod_keeps_only_what_the_grouper_reads():
    raw = pod("p", owner=replicaset(deployment("web", 1)), group="g", labels={"app": "x", "podgang.io/skip": "false"},
              annotations={"kubectl.kubernetes.io/last-applied-configuration": "x" * 5000, "gpu-memory": "4000"})
    raw["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}] * 20
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    slim = Slimmer().pod(raw)
    assert slim["metadata"]["labels"] == {LABEL: "g", "podgang.io/skip": "false"}
    # gpu-memory: what KAI counts against the queue (the never-placed verdicts read it)
    assert slim["metadata"]["annotations"] == {ANN: "g", "kai.scheduler/skip-podgrouper": "true",
                                               "gpu-memory": "4000"}
    assert set(slim["spec"]) == {"schedulerName", "nodeName"}
    assert slim["status"] == {"phase": "Running"}
    assert len(json.dumps(slim)) < 640  # the skip-podgrouper and gpu-memory annotations, the owner reference


def test_slim_owner_less_pod_keeps_its_metadata_as_its_own_top_owner():
    """KAI copies a top owner's labels and annotations onto its group, and an owner-less
    pod is its own top owner: its slim record keeps them all, but kubectl's copy."""
    raw = pod("p", group="g", labels={"app": "x"},
              annotations={"kubectl.kubernetes.io/last-applied-configuration": "x" * 5000, "team": "nlp"})
    slim = Slimmer().pod(raw)
    assert slim["metadata"]["labels"] == {LABEL: "g", "app": "x"}
    assert slim["metadata"]["annotations"] == {ANN: "g", "kai.scheduler/skip-podgrouper": "true", "team": "nlp"}


def test_slim_pods_of_one_gang_share_their_owner_reference_labels_spec_and_status():
    rs = replicaset(deployment("web", 2))
    slimmer = Slimmer()
    a, b = (slimmer.pod(pod(name, owner=rs, group="g")) for name in ("a", "b"))
    assert a["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True,
                                                 "name": rs["metadata"]["name"], "uid": rs["metadata"]["uid"]}]
    assert a["metadata"]["ownerReferences"][0] is b["metadata"]["ownerReferences"][0]
    for part in (("metadata", "labels"), ("metadata", "annotations"), ("spec",), ("status",)):
        one, other = a, b
        for k in part:
            one, other = one[k], other[k]
        assert one is other, part
    pending = slimmer.pod(pod("c", owner=rs, group="g", phase="Pending"))
    assert pending["status"] == {"phase": "Pending"} and a["status"] == {"phase": "Running"}
    assert slimmer.pod(pod("d", owner=rs, group="h"))["metadata"]["labels"] == {LABEL: "h"}
    not_controller = slimmer.pod({**pod("e"), "metadata": {
        **pod("e")["metadata"], "ownerReferences": [owner_ref(rs, controller=False)]}})
    assert not_controller["metadata"]["ownerReferences"][0]["controller"] is False
    no_flag = {k: v for k, v in owner_ref(rs).items() if k != "controller"}
    null_flag = {**no_flag, "controller": None}
    refs = [slimmer.pod({**pod(n), "metadata": {**pod(n)["metadata"], "ownerReferences": [ref]}})
            ["metadata"]["ownerReferences"][0] for n, ref in (("f", no_flag), ("g", null_flag))]
    assert "controller" not in refs[0] and refs[1]["controller"] is None
    odd = slimmer.pod({**pod("h"), "metadata": {**pod("h")["metadata"], "ownerReferences": [
        {**owner_ref(rs), "name": ["not", "a", "name"]}, "not a reference"]}})
    assert odd["metadata"]["ownerReferences"][0]["name"] == ["not", "a", "name"]  # kept, unshared
    assert len(odd["metadata"]["ownerReferences"]) == 1


def test_slim_workloads_keep_sizes_templates_and_rollout_status():
    dep = deployment("web", 3, group="shared", status={"observedGeneration": 1, "updatedReplicas": 2, "conditions": [
        {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ReplicaSet ..."}]})
    dep["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    slim = Slimmer().workload(dep)
    assert slim["spec"]["replicas"] == 3
    assert slim["spec"]["template"]["metadata"]["labels"] == {LABEL: "shared"}
    assert slim["spec"]["template"]["spec"] == {"schedulerName": "kai-scheduler"}
    assert slim["spec"]["strategy"] == {"type": "RollingUpdate"}
    assert slim["status"] == {"observedGeneration": 1, "updatedReplicas": 2, "conditions": [
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS, "uid": uid()},
           "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
               "partition": 1, "maxUnavailable": 1}}, "template": {}},
           "status": {"currentRevision": "db-1", "updateRevision": "db-2", "currentReplicas": 1}}
    slim = Slimmer().workload(sts)
    assert slim["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
    assert slim["status"] == {"currentRevision": "db-1", "updateRevision": "db-2"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": NS, "uid": uid()},
           "spec": {"parallelism": 4, "completions": 2, "template": {"spec": {"schedulerName": "kai-scheduler"}}},
           "status": {"conditions": [{"type": "Complete", "status": "True"}, {"type": "X", "status": "True"}]}}
    slim = Slimmer().workload(job)
    assert slim["spec"]["parallelism"] == 4 and slim["spec"]["completions"] == 2
    assert slim["status"]["conditions"] == [{"type": "Complete", "status": "True"}]


def test_pods_out_of_scope_stay_out_of_the_cache():
    cache = feed(Cache(), pod("other", scheduler="default-scheduler"), pod("sys", ns="kube-system"),
                 pod("skipped", labels={"podgang.io/skip": "true"}), pod("mine", group="g"))
    assert list(cache.pods) == [f"{NS}/mine"]


# ---------------------------------------------------------------------------- desired groups


def three_deployments(cache: Cache, sizes=(1, 1, 1), group: str = "shared-app-podgroup") -> list[dict]:
    deps = [deployment(n, s, group=group) for n, s in zip(("app-server", "model-1", "model-2"), sizes)]
    feed(cache, *deps)
    return deps


def test_shared_hand_made_group_is_the_sum_of_its_deployments():
    cache = Cache()
    deps = three_deployments(cache)
    feed(cache, podgroup("shared-app-podgroup", 3))
    desired = desired_group(cache, f"{NS}/shared-app-podgroup")
    assert desired.source == "hand-made" and not desired.may_create
    assert desired.min_member.value == 3
    assert dict(desired.contributions) == {"deployment app-server": 1, "deployment model-1": 1, "deployment model-2": 1}
    # one subgroup per deployment: written into the hand-made group, then nothing more
    [write] = plan_writes(desired, cache.podgroups[f"{NS}/shared-app-podgroup"], DEFAULT)
    assert write.action == "patch-subgroups"
    subgroups = [{"name": n, "minMember": 1} for n in ("app-server", "model-1", "model-2")]
    assert write.body["spec"] == {"subGroups": subgroups, "stalenessGracePeriod": "-1s"}
    # found at its members' total: podgang follows it from now on, and says so on the group
    assert write.body["metadata"]["annotations"][DEFAULT.followed_size_annotation] == "3"
    feed(cache, {**podgroup("shared-app-podgroup", 3, annotations={DEFAULT.followed_size_annotation: "3"}),
                 "spec": {"minMember": 3, "subGroups": subgroups}})
    assert plan_writes(desired, cache.podgroups[f"{NS}/shared-app-podgroup"], DEFAULT) == []

    feed(cache, {**deps[1], "spec": {**deps[1]["spec"], "replicas": 2}})
    desired = desired_group(cache, f"{NS}/shared-app-podgroup")
    assert desired.min_member.value == 4
    [write] = plan_writes(desired, cache.podgroups[f"{NS}/shared-app-podgroup"], DEFAULT)
    # one patch: minMember and the subgroups it is the sum of never disagree on the group
    assert (write.action, write.old, write.new) == ("patch-min-member", 3, 4)
    assert write.body["spec"]["minMember"] == 4
    assert write.body["spec"]["subGroups"][1] == {"name": "model-1", "minMember": 2}
    assert "hand-made" in write.note and write.subgroups.startswith("app-server 1, model-1 2, model-2 1")


def test_replicasets_of_a_shared_deployment_are_not_counted_twice():
    cache = Cache()
    deps = three_deployments(cache, (1, 2, 1))
    feed(cache, *[replicaset(d) for d in deps])
    assert desired_group(cache, f"{NS}/shared-app-podgroup").min_member.value == 4


def test_standalone_pods_add_to_a_shared_group_and_a_deleted_workload_leaves_it():
    cache = Cache()
    deps = three_deployments(cache)
    feed(cache, pod("sidecar", group="shared-app-podgroup"))
    assert desired_group(cache, f"{NS}/shared-app-podgroup").min_member.value == 4
    remove(cache, deps[2])
    desired = desired_group(cache, f"{NS}/shared-app-podgroup")
    assert desired.min_member.value == 3
    assert dict(desired.contributions) == {"deployment app-server": 1, "deployment model-1": 1, "standalone pods": 1}


def test_a_missing_hand_made_group_is_never_created_but_reported():
    cache = Cache()
    three_deployments(cache)
    desired = desired_group(cache, f"{NS}/shared-app-podgroup")
    assert plan_writes(desired, None, DEFAULT) == []
    assert any("not found in namespace team" in p and "stay Pending" in p for p in desired.problems)


def test_hand_made_group_named_only_by_standalone_pods_keeps_the_users_size():
    cache = Cache()
    feed(cache, podgroup("app-with-models", 3), *[pod(n, group="app-with-models") for n in ("a", "b")])
    desired = desired_group(cache, f"{NS}/app-with-models")
    assert desired.source == "hand-made" and desired.min_member is None
    assert plan_writes(desired, cache.podgroups[f"{NS}/app-with-models"], DEFAULT) == []


def test_a_deployment_owns_its_group_and_it_follows_replicas():
    cache = Cache()
    dep = deployment("web", 3)
    rs = replicaset(dep)
    feed(cache, dep, rs, *[pod(f"web-{i}", owner=rs, group=owned_group(dep)) for i in range(3)])
    key = f"{NS}/{owned_group(dep)}"
    desired = desired_group(cache, key)
    assert desired.source == "owner" and desired.owner.uid == dep["metadata"]["uid"]
    [create] = plan_writes(desired, None, DEFAULT)
    assert create.action == "create"
    assert create.body["metadata"]["labels"] == MANAGED
    assert create.body["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert create.body["spec"] == {"minMember": 3, "queue": "default-queue", "priorityClassName": "inference",
                                   "stalenessGracePeriod": "-1s"}  # what KAI's own grouper writes, KAI's eviction off
    feed(cache, {**create.body, "metadata": {**create.body["metadata"], "uid": uid(), "resourceVersion": "7"}})
    assert plan_writes(desired_group(cache, key), cache.podgroups[key], DEFAULT) == []


def test_an_unmanaged_group_with_a_podgang_name_is_left_alone():
    cache = Cache()
    dep = deployment("web", 3)
    feed(cache, dep, podgroup(owned_group(dep), 1))  # e.g. made by someone else first
    key = f"{NS}/{owned_group(dep)}"
    assert plan_writes(desired_group(cache, key), cache.podgroups[key], DEFAULT) == []


def test_jobs_statefulsets_and_cronjob_runs():
    cache = Cache()
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS, "uid": uid()},
           "spec": {"parallelism": 8, "completions": 4, "template": {"spec": {"schedulerName": "kai-scheduler"}}}}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS, "uid": uid()},
           "spec": {"replicas": 5, "podManagementPolicy": "Parallel", "template": {"spec": {"schedulerName": "kai-scheduler"}}}}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": NS, "uid": uid()},
            "spec": {"jobTemplate": {"spec": {"parallelism": 2,
                                              "template": {"spec": {"schedulerName": "kai-scheduler"}}}}}}
    run = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "nightly-29000000", "namespace": NS, "uid": uid(), "ownerReferences": [owner_ref(cron)]},
           "spec": {"parallelism": 2, "template": {"spec": {"schedulerName": "kai-scheduler"}}}}
    feed(cache, job, sts, cron, run)
    assert desired_group(cache, f"{NS}/{owned_group(job)}").min_member.value == 4
    assert desired_group(cache, f"{NS}/{owned_group(sts)}").min_member.value == 5
    run_group = desired_group(cache, f"{NS}/{owned_group(run)}")
    assert run_group.min_member.value == 2 and run_group.owner.name == "nightly-29000000"
    assert desired_group(cache, f"{NS}/{owned_group(cron)}").source is None  # the CronJob has no group itself


def test_pinning_on_the_workload_or_the_podgroup():
    cache = Cache()
    dep = deployment("web", 3, annotations={"podgang.io/min-member": "2"})
    feed(cache, dep)
    key = f"{NS}/{owned_group(dep)}"
    desired = desired_group(cache, key)
    assert desired.min_member.value == 2 and desired.min_member.pinned
    feed(cache, podgroup(owned_group(dep), 2, managed=True, annotations={"podgang.io/min-member": "5"}))
    assert desired_group(cache, key).min_member.value == 5
    bad = deployment("bad", 3, annotations={"podgang.io/min-member": "many"})
    feed(cache, bad)
    desired = desired_group(cache, f"{NS}/{owned_group(bad)}")
    assert desired.min_member.value == 3 and any("is ignored" in p for p in desired.problems)


def test_owner_less_pod_group_is_adopted_and_orphans_are_found():
    cache = Cache()
    feed(cache, podgroup("pg-solo", 1, managed=True), podgroup("pg-ghost", 1, managed=True),
         podgroup("users-own", 1), pod("solo", group="pg-solo"))
    desired = desired_group(cache, f"{NS}/pg-solo")
    assert desired.source == "owner-less"
    [adopt] = plan_writes(desired, cache.podgroups[f"{NS}/pg-solo"], DEFAULT)
    assert adopt.action == "adopt"
    assert adopt.body["metadata"]["ownerReferences"][0]["uid"] == cache.pods[f"{NS}/solo"]["metadata"]["uid"]
    ghost = desired_group(cache, f"{NS}/pg-ghost")
    assert is_orphan_candidate(ghost, cache.podgroups[f"{NS}/pg-ghost"], DEFAULT)
    assert not is_orphan_candidate(desired_group(cache, f"{NS}/users-own"), cache.podgroups[f"{NS}/users-own"], DEFAULT)
    assert not is_orphan_candidate(desired, cache.podgroups[f"{NS}/pg-solo"], DEFAULT)


def test_a_pod_whose_owner_is_not_cached_yet_waits():
    cache = Cache()
    dep = deployment("web", 2)
    rs = replicaset(dep)
    feed(cache, pod("web-0", owner=rs, group=owned_group(dep)))
    desired = desired_group(cache, f"{NS}/{owned_group(dep)}")
    assert desired.pending and plan_writes(desired, None, DEFAULT) == []
    feed(cache, rs, dep)
    assert desired_group(cache, f"{NS}/{owned_group(dep)}").min_member.value == 2


def test_changes_point_at_the_groups_to_reconcile():
    cache = Cache()
    dep = deployment("web", 2, group="shared")
    changes = cache.apply("Deployment", None, cache.slim.workload(dep))
    assert changes.urgent and changes.groups == {f"{NS}/shared"}
    cache.store_for("Pod")[f"{NS}/p"] = slim = cache.slim.pod(pod("p"))
    changes = cache.apply("Pod", None, slim)
    assert not changes.urgent and changes.pods == {f"{NS}/p"}  # no membership: backfill


# ---------------------------------------------------------------------------- messages, counts, rollout


def test_change_messages_name_the_cause():
    assert describe_change({"deployment model-1": 1, "deployment model-2": 1}, {"deployment model-1": 2,
                           "deployment model-2": 1}, "x") == "deployment model-1 scaled 1 → 2"
    assert describe_change({"deployment a": 1}, {"deployment a": 1, "deployment b": 2}, "x") == "deployment b added (2)"
    assert describe_change({"deployment a": 1, "deployment b": 2}, {"deployment a": 1}, "x") == (
        "deployment b removed (was 2)")
    assert describe_change(None, {"deployment a": 1}, "fallback") == "fallback"


def test_gang_counts():
    pods = [pod("a"), pod("b", phase="Pending", node=None), pod("c", phase="Succeeded"), pod("d", phase="Failed")]
    pods[0]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    counts = gang_counts(pods)
    assert (counts.active, counts.succeeded) == (0, 1)
    assert [p["metadata"]["name"] for p in counts.remaining] == ["b"]


def test_a_member_stopped_by_its_eviction_did_not_succeed():
    """Seen on a real node: KAI evicted the rest of a stale gang, their containers exited 0 on
    SIGTERM and the pods turned Succeeded while terminating; counted as successes, they made the
    evicted gang 'recovered'."""
    evicted = pod("e", phase="Succeeded")
    evicted["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert gang_counts([evicted, pod("f", phase="Succeeded")]).succeeded == 1


def test_rollout_detection_follows_the_recorded_deployment_scale():
    events = [json.loads(line) for line in (FIXTURES / "watch-deployments-scale.jsonl").read_text().splitlines()]
    verdicts = [rolling_out(Slimmer().workload(e["object"])) is not None for e in events if e["type"] != "BOOKMARK"]
    # 3 → 5: observedGeneration lags one event; the new pods are a scale-up, not a
    # rollout (Progressing stays NewReplicaSetAvailable while updatedReplicas lags)
    assert verdicts == [True, False, False, False]
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": 2},
           "spec": {"replicas": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 2,
                                               "currentRevision": "db-1", "updateRevision": "db-2"}}
    assert "revision" in rolling_out(sts)


def test_slim_pods_keep_their_revision_labels_from_the_recorded_watch():
    line = (FIXTURES / "watch-pods-scale-down-with-bookmarks.jsonl").read_text().splitlines()[0]
    slim = Slimmer().pod(json.loads(line)["object"])
    assert slim["metadata"]["labels"] == {"pod-template-hash": "7887448d46"}


def test_a_deployments_pods_are_found_through_its_replicasets_with_the_newest_hash():
    dep = deployment("web", 2)
    old, new = revisioned(dep, 1, "aaa"), revisioned(dep, 2, "bbb")
    other = deployment("other", 1)
    cache = feed(Cache(), dep, old, new, other, revisioned(other, 3, "ccc"),
                 pod("web-aaa-1", owner=old, group="g", labels={"pod-template-hash": "aaa"}),
                 pod("web-bbb-1", owner=new, group="g", labels={"pod-template-hash": "bbb"}),
                 pod("other-ccc-1", owner=other, group="g"))
    seen = cache.workload_pods(cache.workloads["Deployment"][f"{NS}/web"])
    assert sorted(p["metadata"]["name"] for p in seen.pods) == ["web-aaa-1", "web-bbb-1"]
    assert seen.newest_hash == "bbb"
    assert rolling_out(cache.workloads["Deployment"][f"{NS}/web"], seen) == (
        "deployment web: 1 pod of an older revision still running")


def test_a_statefulset_pod_deleted_is_remembered_by_revision_until_its_successor_runs():
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS, "uid": uid()},
           "spec": {"replicas": 2, "template": {}}}
    cache = feed(Cache(), sts)

    def db1(revision: str, phase: str = "Running") -> dict:
        p = pod("db-1", owner=sts, group="g", phase=phase, labels={"controller-revision-hash": revision})
        p["metadata"]["uid"] = revision + phase  # a new pod each time, the same name
        return p

    feed(cache, db1("db-r1"))
    uid_ = sts["metadata"]["uid"]
    remove(cache, db1("db-r1"))
    assert cache.workload_pods(sts).replaced == {"db-1": "db-r1"}
    feed(cache, db1("db-r2", "Pending"))
    assert cache.workload_pods(sts).replaced == {"db-1": "db-r1"}  # not running yet
    feed(cache, db1("db-r2"))
    assert uid_ not in cache.replaced_revisions
    remove(cache, db1("db-r2"))
    assert cache.workload_pods(sts).replaced == {"db-1": "db-r2"}
    remove(cache, sts)
    assert cache.replaced_revisions == {}  # forgotten with its StatefulSet
    feed(cache, db1("db-r3"))
    remove(cache, db1("db-r3"))  # the garbage collector removing its pods afterwards
    assert cache.replaced_revisions == {}


# ---------------------------------------------------------------------------- work queue


async def test_queue_coalesces_and_never_hands_a_key_to_two_workers():
    q = WorkQueue()
    for _ in range(1000):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    key = await q.get()
    assert key == "a"
    q.add("a")  # while processing: queued again after done
    assert await q.get() == "b"
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"
    q.done("a")
    q.done("b")
    await asyncio.wait_for(q.wait_idle(), 1)


async def test_queue_delays_and_keeps_the_earliest_time():
    q = WorkQueue()
    q.add("x", 0.05)
    q.add("x", 5.0)  # later: ignored
    assert q.delayed == 1 and len(q) == 0
    assert await asyncio.wait_for(q.get(), 1) == "x"
    q.done("x")
    q.add("y", 5.0)
    q.add("y")  # now wins
    assert await asyncio.wait_for(q.get(), 1) == "y"
    q.close()


@pytest.mark.parametrize("field", ["min-member", "grace"])
def test_slim_podgroup_keeps_podgang_annotations(field):
    note = {"min-member": "podgang.io/min-member", "grace": "podgang.io/staleness-grace-period"}[field]
    slim = Slimmer().podgroup(podgroup("g", 2, annotations={note: "5", "other": "x"}, managed=True))
    assert slim["metadata"]["annotations"] == {note: "5"}
    assert slim["metadata"]["labels"] == MANAGED and slim["spec"] == {"minMember": 2}


async def test_lease_calls_cut_off_mid_answer_are_failed_tries_not_a_crash():
    # an apiserver restarting drops connections ("Server disconnected"): the elector
    # must see a failed try and retry, not die (a standby would exit, a leader lose the Lease)
    import aiohttp
    from kubernetes_asyncio import client
    from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord

    from podgang.grouper.leader import TimedLeaseLock

    async def disconnected(*_a, **_kw):
        raise aiohttp.ServerDisconnectedError()

    async with client.ApiClient(client.Configuration(host="http://127.0.0.1:1")) as api:
        lock = TimedLeaseLock("podgang-grouper", "default", "me", api, timeout=1.0)
        for method in ("read_namespaced_lease", "create_namespaced_lease", "replace_namespaced_lease"):
            setattr(lock.api_instance, method, disconnected)
        ok, err = await lock.get("podgang-grouper", "default")
        assert ok is False and err.status != 404
        record = LeaderElectionRecord("me", "15", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z")
        assert await lock.create("podgang-grouper", "default", record) is False
        lock.lease_reference = client.V1Lease(metadata=client.V1ObjectMeta(name="podgang-grouper"),
                                              spec=client.V1LeaseSpec())
        assert await lock.update("podgang-grouper", "default", record) is False


async def test_a_watch_cut_after_working_reconnects_at_once_every_time():
    # a load balancer that cuts every long-lived watch: each cut comes after events, so
    # the wait before reconnecting must not double with every cut (it did, up to 30 s)
    from podgang.api import Unavailable
    from podgang.grouper.informer import Informer
    from podgang.kinds import POD

    class CuttingApi:
        def __init__(self):
            self.rv = 1

        async def get(self, path, **query):
            return {"metadata": {"resourceVersion": str(self.rv)}, "items": []}

        async def watch(self, path, *, resource_version, timeout_seconds, query=None):
            self.rv += 1
            yield {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": str(self.rv)}}}
            raise Unavailable(0, "", "the watch broke off: ClientPayloadError: Response payload is not completed")

    informer = Informer(CuttingApi(), POD, None, store={}, slim=lambda raw: raw, keep=lambda obj: True,
                        handler=lambda *a: None)
    seen: list[int] = []
    enough = asyncio.Event()

    def backoff(failures: int) -> float:
        seen.append(failures)
        if len(seen) >= 5:
            enough.set()
        return 0.0

    informer._backoff = backoff
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(enough.wait(), 5.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen[:5] == [1, 1, 1, 1, 1]
    assert informer.lists == 1  # resumed from the bookmark's resourceVersion, never relisted


def test_an_owner_walk_is_remembered_per_owner_and_forgotten_when_a_workload_changes():
    """The pods of one ReplicaSet share its walk and its podgang.io/skip verdict; a label put
    on the Deployment afterwards, or the Deployment gone, is seen at once."""
    dep = deployment("web", 2)
    rs = replicaset(dep)
    pods = [pod(f"web-abc12-{i}", owner=rs) for i in range(2)]
    cache = feed(Cache(), dep, rs, *pods)
    slim = [cache.pods[obj_key(p)] for p in pods]
    assert [o["kind"] for o in cache.owner_chain(slim[0])[0]] == ["ReplicaSet", "Deployment"]
    assert cache.owner_chain(slim[1]) == cache.owner_chain(slim[0]) and len(cache._walks) == 1
    assert not cache.owner_skipped(slim[1])
    skipped = {**dep, "metadata": {**dep["metadata"], "labels": {"podgang.io/skip": "true"}}}
    feed(cache, skipped)
    assert all(cache.owner_skipped(p) for p in slim)
    remove(cache, skipped)
    chain, complete = cache.owner_chain(slim[0])
    assert [o["kind"] for o in chain] == ["ReplicaSet"] and not complete  # its Deployment not (yet) cached
    assert not cache.owner_skipped(slim[0])


async def test_keys_behind_are_handed_out_only_when_nothing_else_waits():
    q = WorkQueue(behind=lambda key: key[0] == "p")
    q.add(("p", "1"))
    q.add(("p", "2"))
    q.add(("g", "a"))
    assert len(q) == 3 and q.waiting_behind == 2
    assert await q.get() == ("g", "a")
    q.add(("g", "a"))  # while processing: handed out again before any pod once done
    assert await q.get() == ("p", "1")
    q.done(("g", "a"))
    assert await q.get() == ("g", "a")
    assert await q.get() == ("p", "2")
    for key in (("p", "1"), ("g", "a"), ("p", "2")):
        q.done(key)
    await asyncio.wait_for(q.wait_idle(), 1)


async def test_a_held_back_lane_hands_out_only_the_front_lane_until_the_hold_ends():
    q = WorkQueue(behind=lambda key: key[0] == "p")
    q.hold_back_lane(1.0)
    q.hold_back_lane(0.05)  # a hold only grows
    q.add(("p", "1"))
    q.add(("g", "a"))
    assert await asyncio.wait_for(q.get(), 1) == ("g", "a")
    assert q.back_lane_held
    waiting = asyncio.ensure_future(q.get())
    done, _ = await asyncio.wait({waiting}, timeout=0.2)  # past the shorter hold, well before the longer one ends
    assert not done
    assert await asyncio.wait_for(waiting, 1) == ("p", "1")  # handed out once the hold ends, with no new key
    assert not q.back_lane_held
    q.close()
