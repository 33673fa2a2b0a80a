"""Issue 45: no fight with an operator's own scale-down, rollout and recovery. What the real
controllers write (tests/real/test_real_operators.py watched them) played into the grouper's
cache: an LWS scaled down removes its groups above ``spec.replicas`` (with podgang's gangs and
with LWS's own Volcano gang); an LWS group that lost a pod is made again whole by LWS; an LWS
rolling update is not over while ``UpdateInProgress`` is True; a JobSet restarted by its failure policy is its controller's recovery, and its gang is
the new attempt's pods. And ``podgang status`` beside an operator's gang: one row, saying
whose it is."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

from podgang import kinds, rules
from podgang.backends.kai import KAI
from podgang.backends.volcano import GROUP_ANNOTATION, VOLCANO
from podgang.gang import Cache, counted_members, desired_group, gang_counts, rollout_reason, stale
from podgang.settings import Settings
from podgang.status import NOT_CREATED, Snapshot, build_report
from tests.emulated.test_replica_tree import GROUP_INDEX, LWS_NAME, WORKER_INDEX, lws, lws_pods
from tests.grouper_support import NS, owned_group, owner_ref, pod, podgroup, template, uid
from tests.unit.test_grouper_units import feed, remove

VOLCANO_SETTINGS = Settings(backends=(("volcano", VOLCANO),))


def observe(tracker: stale.StaleGangTracker, cache: Cache, key: str, size: int) -> stale.StaleVerdict:
    """One reconcile's staleness look, as grouper/staleness.py feeds the tracker (``size``: the
    live group's minMember)."""
    desired = desired_group(cache, key)
    counts = gang_counts(counted_members(cache, desired))
    settling = rollout_reason(desired, cache)
    return tracker.observe(stale.GangObservation(key, size, counts.active, counts.succeeded, settling is not None,
                                                 5.0, settling or ""))


def scaled(workload: dict, replicas: int) -> dict:
    """The LWS after ``kubectl scale``: a new generation its controller has observed."""
    out = copy.deepcopy(workload)
    out["spec"]["replicas"] = replicas
    out["metadata"]["generation"] += 1
    out["status"] = {**out["status"], "observedGeneration": out["metadata"]["generation"], "replicas": replicas,
                     "updatedReplicas": replicas}
    return out


# ---------------------------------------------------------------------------- LWS scaled down


def test_an_lws_scaled_down_removes_its_upper_group_on_purpose_not_a_stale_gang():
    """podgang's gangs, one per LWS group: scaled 2 → 1, LWS deletes group 1 (its leader
    first, its workers with it). Group 1 is settling while its pods go, group 0 judged as ever."""
    workload = lws("serve", 2, 3, group=None)
    owners, pods = lws_pods(workload, group=None)
    base = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))
    for p in pods:  # as admitted: each names its group's PodGroup
        named = f"{base}-group-{p['metadata']['labels'][GROUP_INDEX]}"
        p["metadata"]["labels"][KAI.label] = p["metadata"]["annotations"][KAI.annotation] = named
    cache = feed(Cache(), workload, *owners, *pods)
    tracker = stale.StaleGangTracker(clock=lambda: 0.0)
    for g in (0, 1):
        assert observe(tracker, cache, f"{NS}/{base}-group-{g}", 3).action == stale.NONE
        assert tracker.satisfied_at(f"{NS}/{base}-group-{g}") == 3
    feed(cache, scaled(workload, 1))
    upper = f"{NS}/{base}-group-1"
    desired = desired_group(cache, upper)
    assert rollout_reason(desired, cache) == "leaderworkerset serve has 1 replicas: its controller removes group 1"
    assert counted_members(cache, desired) == []  # its pods are not the gang's members any more
    remove(cache, pods[3])  # the leader of group 1 goes first
    verdict = observe(tracker, cache, upper, 3)
    assert verdict.action == stale.NONE and "removes group 1" in verdict.message
    assert rollout_reason(desired_group(cache, f"{NS}/{base}-group-0"), cache) is None
    remove(cache, pods[0])  # a pod of group 0 lost: that gang is stale as before
    assert observe(tracker, cache, f"{NS}/{base}-group-0", 3).action == stale.STALE


def lws_own_gang(name: str, replicas: int, size: int) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """An LWS run with LWS's gangSchedulingManagement (Volcano): its pods as its pod webhook
    writes them (``scheduling.k8s.io/group-name: <lws>-<group>-<revision>``) and the PodGroups
    its controller makes, owned by each group's leader pod."""
    workload = lws(name, replicas, size, group=None)
    workload["spec"]["leaderWorkerTemplate"]["workerTemplate"] = template(scheduler="volcano")
    owners, pods = lws_pods(workload, group=None)
    groups = []
    for p in pods:
        p["spec"]["schedulerName"] = "volcano"
        index = p["metadata"]["labels"][GROUP_INDEX]
        p["metadata"]["annotations"] = {GROUP_ANNOTATION: f"{name}-{index}-7976bc59c7"}
        if p["metadata"]["labels"][WORKER_INDEX] == "0":
            groups.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": f"{name}-{index}-7976bc59c7", "namespace": NS, "uid": uid(),
                                        "labels": {LWS_NAME: name, GROUP_INDEX: index},
                                        "ownerReferences": [owner_ref(p)]},
                           "spec": {"minMember": size, "queue": "default"}})
    return workload, owners, pods, groups


def test_an_lws_with_its_own_volcano_gang_scaled_down_is_not_a_stale_gang_either():
    workload, owners, pods, groups = lws_own_gang("gang-test", 2, 4)
    cache = feed(Cache(VOLCANO_SETTINGS), workload, *owners, *pods, *groups)
    theirs = f"{NS}/gang-test-1-7976bc59c7"
    desired = desired_group(cache, theirs)
    assert desired.min_member is None  # its size is LWS's
    assert desired.operator.startswith("owned by the operator of leaderworkerset/gang-test")
    tracker = stale.StaleGangTracker(clock=lambda: 0.0)
    assert observe(tracker, cache, theirs, 4).action == stale.NONE and tracker.satisfied_at(theirs) == 4
    feed(cache, scaled(workload, 1))
    remove(cache, pods[4])  # group 1's leader goes first
    verdict = observe(tracker, cache, theirs, 4)
    assert verdict.action == stale.NONE and "its controller removes group 1" in verdict.message


# ---------------------------------------------------------------------------- LWS rolling update


def test_an_lws_rollout_is_not_over_while_update_in_progress_says_so():
    """The real LWS counts a group updated once its leader carries the new revision, its
    workers still being made again: ``updatedReplicas == replicas`` while the last group rolls.
    Its UpdateInProgress condition stays True until every group is updated and Ready."""
    workload = lws("serve", 2, 3, group=None)
    workload["status"]["conditions"] = [
        {"type": "UpdateInProgress", "status": "True", "reason": "GroupsUpdating"},
        {"type": "Progressing", "status": "True", "reason": "GroupsProgressing"}]
    assert kinds.rolling_out(workload) == "leaderworkerset serve: rolling update in progress (UpdateInProgress: GroupsUpdating)"
    cache = feed(Cache(), workload)  # the grouper keeps the condition
    (kept,) = cache.store_for("LeaderWorkerSet")[f"{NS}/serve"]["status"]["conditions"]
    assert kept == {"type": "UpdateInProgress", "status": "True", "reason": "GroupsUpdating"}
    workload["status"]["conditions"] = [{"type": "UpdateInProgress", "status": "False", "reason": "GroupsUpdating"},
                                        {"type": "Available", "status": "True", "reason": "AllGroupsReady"}]
    assert kinds.rolling_out(workload) is None  # done: a pod lost now is a loss


# ---------------------------------------------------------------------------- LWS group recreated


def terminating(p: dict) -> dict:
    """``p`` being deleted (its deletionTimestamp set, the kubelet yet to finish it)."""
    out = copy.deepcopy(p)
    out["metadata"]["deletionTimestamp"] = "2026-12-05T08:00:00Z"
    return out


def lws_group_of_four(policy: str | None) -> tuple[Cache, dict, list[dict], list[dict], str]:
    workload = lws("serve", 1, 4, group=None)
    if policy is not None:
        workload["spec"]["leaderWorkerTemplate"]["restartPolicy"] = policy
    owners, pods = lws_pods(workload, group=None)
    group = f"{rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))}-group-0"
    for p in pods:  # as admitted
        p["metadata"]["labels"][KAI.label] = p["metadata"]["annotations"][KAI.annotation] = group
    return feed(Cache(), workload, *owners, *pods), workload, owners, pods, f"{NS}/{group}"


def test_an_lws_group_recreated_after_a_pod_restart_is_its_operators_recovery():
    """``restartPolicy: RecreateGroupOnPodRestart`` (LWS's default, also when the field is
    absent): a worker deleted, LWS deletes the leader in the foreground, every pod of the group
    goes, and the group is made again — the leader first, Pending, then its workers, placed
    together. Settling all along (the real LWS: tests/real/test_real_operators.py); the gang is
    the new pods, judged as ever once placed."""
    for policy in ("RecreateGroupOnPodRestart", None):
        cache, workload, owners, pods, key = lws_group_of_four(policy)
        tracker = stale.StaleGangTracker(clock=lambda: 0.0)
        assert observe(tracker, cache, key, 4).action == stale.NONE and tracker.satisfied_at(key) == 4
        feed(cache, terminating(pods[2]))  # kubectl delete pod: the worker is being deleted
        assert rollout_reason(desired_group(cache, key), cache) == (
            "leaderworkerset serve recreates group 0 (RecreateGroupOnPodRestart): pod serve-0-2 is being deleted")
        assert observe(tracker, cache, key, 4).action == stale.NONE
        feed(cache, *(terminating(p) for p in pods))  # LWS deletes the leader, in the foreground
        assert observe(tracker, cache, key, 4).action == stale.NONE
        for p in pods:
            remove(cache, p)
        leader = pod("serve-0", owner=owners[0], phase="Pending", labels=pods[0]["metadata"]["labels"])
        leader["metadata"]["labels"][KAI.label] = leader["metadata"]["annotations"][KAI.annotation] = key.split("/")[1]
        feed(cache, leader)  # the leader's StatefulSet makes it again, not placed yet
        desired = desired_group(cache, key)
        assert rollout_reason(desired, cache) == (
            "leaderworkerset serve recreates group 0 (RecreateGroupOnPodRestart): its leader serve-0 is not placed yet")
        assert counted_members(cache, desired) != []  # the new leader is a member of the gang
        assert observe(tracker, cache, key, 4).action == stale.NONE
        _, again = lws_pods(workload, group=None)
        for p in again:
            p["metadata"]["labels"][KAI.label] = p["metadata"]["annotations"][KAI.annotation] = key.split("/")[1]
        feed(cache, again[0], *(pod(p["metadata"]["name"], owner=owners[1], phase="Pending",
                                    labels=p["metadata"]["labels"]) for p in again[1:]))
        # KAI's binder binds the placed gang's pods one by one: its leader first, here
        assert rollout_reason(desired_group(cache, key), cache) is None
        assert observe(tracker, cache, key, 4).action == stale.NONE  # made again whole: not a loss
        feed(cache, *again)  # every pod bound
        assert rollout_reason(desired_group(cache, key), cache) is None
        assert observe(tracker, cache, key, 4).action == stale.NONE and tracker.satisfied_at(key) == 4
        remove(cache, again[3])  # a pod gone without LWS seeing it deleted (a force delete): a loss
        assert observe(tracker, cache, key, 4).action == stale.STALE


def test_an_lws_that_does_not_recreate_its_groups_loses_a_pod_as_any_gang_does():
    """``restartPolicy: None``: LWS leaves a lost pod to its StatefulSet; a worker being deleted
    makes the gang stale as before."""
    cache, _, _, pods, key = lws_group_of_four("None")
    tracker = stale.StaleGangTracker(clock=lambda: 0.0)
    assert observe(tracker, cache, key, 4).action == stale.NONE
    feed(cache, terminating(pods[2]))
    assert rollout_reason(desired_group(cache, key), cache) is None
    assert observe(tracker, cache, key, 4).action == stale.STALE


def test_in_a_gang_of_several_lws_groups_a_pod_deleted_stays_a_loss():
    """Prefill and decode sharing one group: a decode pod being deleted does not settle the
    gang — the tree counts that replica whole or not at all, and a loss elsewhere meanwhile
    (every prefill pod) is still a loss."""
    prefill, decode = lws("prefill", 1, 2), lws("decode", 1, 2)
    cache = feed(Cache(), prefill, decode, podgroup("shared", 4))
    owners_p, pods_p = lws_pods(prefill)
    owners_d, pods_d = lws_pods(decode)
    feed(cache, *owners_p, *pods_p, *owners_d, *pods_d)
    key = f"{NS}/shared"
    tracker = stale.StaleGangTracker(clock=lambda: 0.0)
    assert observe(tracker, cache, key, 4).action == stale.NONE
    feed(cache, terminating(pods_d[1]))
    assert rollout_reason(desired_group(cache, key), cache) is None
    assert observe(tracker, cache, key, 4).action == stale.STALE


# ---------------------------------------------------------------------------- JobSet failure-policy restart


JOBSET_NAME, ATTEMPT = "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/restart-attempt"


def jobset(name: str, pods: int, *, restarts: int = 0, restarting: str | None = None) -> dict:
    status: dict = {"restarts": restarts}
    if restarting is not None:
        status["conditions"] = [{"type": "RestartingJobSet", "status": restarting,
                                 "reason": "FailurePolicy_" if restarting == "True" else "JobsReady"}]
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": NS, "uid": f"js-{name}", "generation": 1},
            "spec": {"failurePolicy": {"maxRestarts": 3},
                     "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
                         "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template()}}}]},
            "status": status}


def attempt(js: dict, n: int, pods: int) -> tuple[dict, list[dict]]:
    """The Job and pods JobSet makes for restart attempt ``n``, labelled as the real JobSet labels
    them (tests/real/test_real_operators.py checks it)."""
    name = js["metadata"]["name"]
    labels = {JOBSET_NAME: name, ATTEMPT: str(n), "jobset.sigs.k8s.io/replicatedjob-name": "workers",
              "jobset.sigs.k8s.io/job-index": "0"}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": f"{name}-workers-0", "namespace": NS, "uid": uid(), "labels": labels,
                        "ownerReferences": [owner_ref(js)]},
           "spec": {"parallelism": pods, "completions": pods}}
    return job, [pod(f"{name}-workers-0-{i}-a{n}", owner=job, labels=labels, group=owned_group(js))  # as admitted
                 for i in range(pods)]


def test_a_jobset_restarted_by_its_failure_policy_is_its_operators_recovery():
    """A worker fails, JobSet's failure policy restarts it: ``status.restarts`` 0 → 1,
    RestartingJobSet True, every Job of attempt 0 deleted and made again for attempt 1. The
    gang is settling until the new Jobs are Ready, and it is the new attempt's pods."""
    js = jobset("train", 5)
    job0, old = attempt(js, 0, 5)
    cache = feed(Cache(), js, job0, *old)
    key = f"{NS}/{owned_group(js)}"
    tracker = stale.StaleGangTracker(clock=lambda: 0.0)
    assert observe(tracker, cache, key, 5).action == stale.NONE and tracker.satisfied_at(key) == 5
    restarted = jobset("train", 5, restarts=1, restarting="True")
    feed(cache, {**old[0], "status": {"phase": "Failed"}}, restarted)
    desired = desired_group(cache, key)
    assert rollout_reason(desired, cache) == ("jobset train is restarting (attempt 1, RestartingJobSet: "
                                              "FailurePolicy_): its controller makes its Jobs again")
    assert counted_members(cache, desired) == []  # attempt 0's pods are not the gang's any more
    assert observe(tracker, cache, key, 5).action == stale.NONE
    for p in old[1:]:
        remove(cache, p)  # the old Job's pods go (foreground deletion)
    job1, new = attempt(restarted, 1, 5)
    feed(cache, job1, *new[:3])  # the new attempt's pods come
    assert observe(tracker, cache, key, 5).action == stale.NONE
    feed(cache, *new[3:], jobset("train", 5, restarts=1, restarting="False"))
    desired = desired_group(cache, key)
    assert rollout_reason(desired, cache) == (
        "jobset train restarted (attempt 1): its controller replaces the pods of attempt 0")  # the Failed one left
    remove(cache, old[0])
    desired = desired_group(cache, key)
    assert rollout_reason(desired, cache) is None and len(counted_members(cache, desired)) == 5
    assert observe(tracker, cache, key, 5).action == stale.NONE and tracker.satisfied_at(key) == 5
    remove(cache, new[0])  # a pod of the new attempt lost: that is a stale gang again
    assert observe(tracker, cache, key, 5).action == stale.STALE


def test_pods_of_an_earlier_attempt_settle_the_gang_even_before_the_condition_is_seen():
    js = jobset("train", 2, restarts=1)
    job0, old = attempt(js, 0, 2)
    cache = feed(Cache(), js, job0, *old)
    assert "replaces the pods of attempt 0" in rollout_reason(desired_group(cache, f"{NS}/{owned_group(js)}"), cache)


# ---------------------------------------------------------------------------- podgang status beside an operator's gang


def test_status_shows_an_operators_gang_once_and_says_whose_it_is():
    """LWS with its own Volcano gang: one row per LWS group — LWS's PodGroup, said to be its
    operator's — and no second "not-created" row for the group podgang would have made."""
    workload, owners, pods, groups = lws_own_gang("gang-test", 1, 4)
    snapshot = Snapshot(pods=pods, podgroups={"volcano": groups}, events=[], now=datetime.now(timezone.utc),
                        workloads={"LeaderWorkerSet": [workload], "StatefulSet": owners})
    gangs = build_report(snapshot, VOLCANO_SETTINGS).gangs
    assert [g.name for g in gangs] == ["gang-test-0-7976bc59c7"]
    (gang,) = gangs
    assert gang.state != NOT_CREATED and gang.min_member == 4 and gang.wanted is None
    assert gang.min_member_from.startswith("owned by the operator of leaderworkerset/gang-test")
    assert "podgang makes no second one and leaves its size" in gang.min_member_from
