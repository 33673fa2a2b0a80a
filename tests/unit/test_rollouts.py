"""Rollout or lost member? :mod:`podgang.rollouts` over the states the Deployment and
StatefulSet controllers record, step by step, for every strategy (issue 11 item 1).

Each row is one moment of a 3-replica gang: what the controller wrote on the
workload and which pods exist. ``True``: the controller is replacing pods on
purpose (not a stale gang); ``False``: it is not (a missing member is a loss).
"""

from __future__ import annotations

import json

import pytest

from podgang.rollouts import (
    CONTROLLER_REVISION_HASH,
    POD_INDEX,
    POD_TEMPLATE_HASH,
    REVISION_ANNOTATION,
    WorkloadPods,
    newest_hash,
    ordinal,
)
from podgang.kinds import rolling_out
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "api"
OLD, NEW = "6d4cf56db6", "7b9f5c8d4"  # pod-template-hash of revision 1 and 2


def deployment(*, reason: str | None = "NewReplicaSetAvailable", status: str = "True", updated: int = 3,
               generation: int = 2, observed: int = 2, strategy: str = "RollingUpdate", replicas: int = 3,
               revision: str | None = None) -> dict:
    st: dict = {"observedGeneration": observed, "replicas": replicas, "updatedReplicas": updated}
    if reason is not None:
        st["conditions"] = [{"type": "Available", "status": "True"},
                            {"type": "Progressing", "status": status, "reason": reason}]
    md: dict = {"name": "gang", "generation": generation}
    if revision is not None:
        md["annotations"] = {REVISION_ANNOTATION: revision}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
            "spec": {"replicas": replicas, "strategy": {"type": strategy}}, "status": st}


def rs_pod(name: str, template_hash: str, phase: str = "Running", terminating: bool = False) -> dict:
    md: dict = {"name": name, "labels": {POD_TEMPLATE_HASH: template_hash}}
    if terminating:
        md["deletionTimestamp"] = "2026-11-22T12:00:00Z"
    spec = {"nodeName": "node-1"} if phase == "Running" else {}
    return {"kind": "Pod", "metadata": md, "spec": spec, "status": {"phase": phase}}


def pods(*spec: str, newest: str | None = NEW) -> WorkloadPods:
    """``"new"``, ``"new:Pending"``, ``"old"``, ``"old:gone"`` (terminating), ``"old:Failed"`` ..."""
    out = []
    for i, s in enumerate(spec):
        which, _, state = s.partition(":")
        phase = state if state in ("Pending", "Failed") else "Running"
        out.append(rs_pod(f"gang-{i}", NEW if which == "new" else OLD, phase, terminating=state == "gone"))
    return WorkloadPods(out, newest_hash=newest)


RUNNING = pods("new", "new", "new")

DEPLOYMENT_ROWS = [
    # RollingUpdate, maxSurge 0 / maxUnavailable 1: one old pod goes, then one new one comes
    ("template changed, not observed yet", deployment(observed=1), pods("old", "old", "old", newest=OLD), True),
    ("new ReplicaSet created", deployment(reason="NewReplicaSetCreated", updated=0),
     pods("old", "old", "old:gone"), True),
    ("first new pod pending", deployment(reason="ReplicaSetUpdated", updated=1),
     pods("old", "old", "new:Pending"), True),
    ("last new pod pending (the reported eviction)", deployment(reason="ReplicaSetUpdated", updated=3),
     pods("new", "new", "new:Pending"), True),
    ("rollout finished", deployment(), RUNNING, False),
    ("member lost right after the rollout: replacement pending", deployment(),
     pods("new", "new", "new:Pending"), False),
    ("member lost: replacement not created yet", deployment(updated=2), pods("new", "new"), False),
    # its first revision replaces nothing: a node lost before the rollout was marked complete
    # leaves it ReplicaSetUpdated for as long as the replacements find no room
    ("member lost during the first rollout: replacement pending",
     deployment(reason="ReplicaSetUpdated", revision="1"), pods("new", "new", "new:Pending"), False),
    ("the same on revision 2: the last new pod of a rollout",
     deployment(reason="ReplicaSetUpdated", revision="2"), pods("new", "new", "new:Pending"), True),
    ("member lost; an old pod the kubelet evicted long ago is still listed", deployment(),
     pods("new", "new", "new:Pending", "old:Failed"), False),
    # maxSurge 1 / maxUnavailable 0: a new pod first, then an old one goes
    ("surge pod pending beside the old gang", deployment(reason="ReplicaSetUpdated", updated=1),
     pods("old", "old", "old", "new:Pending"), True),
    ("last surge pod pending, old one terminating", deployment(reason="ReplicaSetUpdated", updated=3),
     pods("new", "new", "new:Pending", "old:gone"), True),
    # maxSurge 25% / maxUnavailable 25% (the defaults): both at once
    ("defaults: halfway", deployment(reason="ReplicaSetUpdated", updated=2),
     pods("old", "new", "new:Pending", "old:gone"), True),
    # a scale is not a rollout: the recorded 3 → 5 keeps NewReplicaSetAvailable
    ("scaled 3 → 5, new pods pending", deployment(updated=5, replicas=5),
     pods("new", "new", "new", "new:Pending", "new:Pending"), False),
    # Recreate: every old pod goes before the new ReplicaSet exists
    ("recreate: old pods terminating, condition not changed yet", deployment(strategy="Recreate", updated=0),
     pods("old:gone", "old:gone", "old:gone", newest=OLD), True),
    ("recreate: new pods pending", deployment(strategy="Recreate", reason="ReplicaSetUpdated", updated=3),
     pods("new:Pending", "new:Pending", "new:Pending"), True),
    ("recreate: finished", deployment(strategy="Recreate"), RUNNING, False),
    ("recreate: member lost after it finished", deployment(strategy="Recreate"),
     pods("new", "new", "new:Pending"), False),
    # what the condition cannot say, the pods do
    ("rollback to an older ReplicaSet, condition still finished", deployment(updated=1),
     pods("old", "old", "new:Pending"), True),
    ("paused halfway", deployment(reason="DeploymentPaused", status="Unknown", updated=1),
     pods("old", "old", "new", newest=None), True),
    ("progress deadline exceeded, old pods left", deployment(reason="ProgressDeadlineExceeded", status="False",
                                                             updated=1), pods("old", "old", "new:Pending"), True),
    ("progress deadline exceeded, every pod new: not a rollout any more",
     deployment(reason="ProgressDeadlineExceeded", status="False"), pods("new", "new", "new:Pending"), False),
    # no Progressing condition (progressDeadlineSeconds: 2147483647): only the counts
    ("no condition: updated below desired", deployment(reason=None, updated=2), pods("new", "new"), True),
    ("no condition: all updated", deployment(reason=None), pods("new", "new", "new:Pending"), False),
]


def test_the_reasons_say_what_is_going_on():
    assert rolling_out(deployment(reason="ReplicaSetUpdated"), RUNNING) == (
        "deployment gang: rollout in progress (Progressing: ReplicaSetUpdated)")
    assert rolling_out(deployment(updated=1), pods("old", "old", "new")) == (
        "deployment gang: 2 pods of an older revision still running")
    assert rolling_out(deployment(updated=1), pods("old", "old", "new", newest=None)) == (
        "deployment gang: pods of 2 revisions running")
    assert rolling_out(deployment(strategy="Recreate", updated=0), WorkloadPods()) == (
        "deployment gang: recreating its pods (0 of 3 replicas updated)")


def test_the_recorded_scale_up_is_not_a_rollout_once_observed():
    events = [json.loads(line) for line in (FIXTURES / "watch-deployments-scale.jsonl").read_text().splitlines()]
    verdicts = [rolling_out(e["object"]) for e in events if e["type"] != "BOOKMARK"]
    assert verdicts[0] == "deployment gang: observedGeneration 1 < generation 2"
    assert verdicts[1:] == [None, None, None]  # Progressing stays NewReplicaSetAvailable through the scale


def test_newest_hash_is_the_highest_revision():
    def rs(revision, template_hash):
        return {"metadata": {"annotations": {REVISION_ANNOTATION: revision},
                             "labels": {POD_TEMPLATE_HASH: template_hash}}}

    assert newest_hash([rs("2", NEW), rs("10", "c"), rs("9", OLD)]) == "c"
    assert newest_hash([rs("x", NEW), {"metadata": {}}]) is None
    assert newest_hash([]) is None


# ---------------------------------------------------------------------------- StatefulSet

R1, R2 = "db-5d8f7c9b6", "db-7c4b8d9f5"  # controller-revision-hash: the ControllerRevision's name


def statefulset(*, current: str | None = R1, update: str | None = R2, strategy: str = "RollingUpdate",
                partition: int | None = None, generation: int = 2, observed: int = 2, updated: int = 3) -> dict:
    us: dict = {"type": strategy}
    if partition is not None:
        us["rollingUpdate"] = {"partition": partition}
    st: dict = {"observedGeneration": observed, "replicas": 3, "updatedReplicas": updated}
    if current:
        st["currentRevision"] = current
    if update:
        st["updateRevision"] = update
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "generation": generation},
            "spec": {"replicas": 3, "updateStrategy": us}, "status": st}


def set_pods(*spec: str, replaced: dict | None = None) -> WorkloadPods:
    """One entry per ordinal: ``"1"`` / ``"2"`` (revision R1/R2, running), ``"2:Pending"``,
    ``"1:gone"`` (terminating), ``"-"`` (no pod). ``replaced``: ordinal → revision deleted."""
    out = []
    for i, s in enumerate(spec):
        if s == "-":
            continue
        which, _, state = s.partition(":")
        pod = rs_pod(f"db-{i}", "", "Pending" if state == "Pending" else "Running", terminating=state == "gone")
        pod["metadata"]["labels"] = {CONTROLLER_REVISION_HASH: R1 if which == "1" else R2}
        out.append(pod)
    return WorkloadPods(out, replaced={f"db-{i}": R1 if r == "1" else R2 for i, r in (replaced or {}).items()})


STATEFULSET_ROWS = [
    ("not observed yet", statefulset(observed=1), set_pods("1", "1", "1"), True),
    # RollingUpdate without a partition: from the highest ordinal down, one at a time
    ("db-2 being replaced", statefulset(updated=0), set_pods("1", "1", "1:gone"), True),
    ("last pod (db-0) pending", statefulset(), set_pods("2:Pending", "2", "2", replaced={0: "1"}), True),
    ("rollout finished: currentRevision caught up", statefulset(current=R2), set_pods("2", "2", "2"), False),
    ("member lost after the rollout", statefulset(current=R2), set_pods("2:Pending", "2", "2", replaced={0: "2"}),
     False),
    ("member lost after the rollout, not recreated yet", statefulset(current=R2, updated=2),
     set_pods("-", "2", "2", replaced={0: "2"}), False),
    # partition 1: db-2 and db-1 move to R2, db-0 stays at R1 for good (currentRevision never catches up)
    ("partition: db-2 being replaced", statefulset(partition=1), set_pods("1", "1", "1:gone"), True),
    ("partition: db-2 gone, not recreated yet", statefulset(partition=1), set_pods("1", "1", "-", replaced={2: "1"}),
     True),
    ("partition: db-2 pending", statefulset(partition=1), set_pods("1", "1", "2:Pending", replaced={2: "1"}), True),
    ("partition: db-1 still to come", statefulset(partition=1), set_pods("1", "1", "2"), True),
    ("partition: last pod (db-1) pending", statefulset(partition=1), set_pods("1", "2:Pending", "2", replaced={1: "1"}),
     True),
    ("partition: done (db-0 kept at R1)", statefulset(partition=1), set_pods("1", "2", "2"), False),
    ("partition: member lost after it was done", statefulset(partition=1),
     set_pods("1", "2:Pending", "2", replaced={1: "2"}), False),
    ("partition: member below the partition lost", statefulset(partition=1),
     set_pods("1:Pending", "2", "2", replaced={0: "1"}), False),
    ("partition: a pod in range lost before the grouper saw it", statefulset(partition=1),
     set_pods("1", "2:Pending", "2"), False),
    ("partition 3: nothing in range", statefulset(partition=3), set_pods("1", "1", "1:Pending", replaced={2: "1"}),
     False),
    # OnDelete: the controller replaces only what someone deleted
    ("on delete: old pods left alone", statefulset(strategy="OnDelete"), set_pods("1", "1", "1"), False),
    ("on delete: an old pod deleted to update it", statefulset(strategy="OnDelete"), set_pods("1", "1:gone", "1"),
     True),
    ("on delete: its successor pending", statefulset(strategy="OnDelete"),
     set_pods("1", "2:Pending", "1", replaced={1: "1"}), True),
    ("on delete: updated pod running", statefulset(strategy="OnDelete"), set_pods("1", "2", "1", replaced={1: "1"}),
     False),
    ("on delete: an updated pod lost", statefulset(strategy="OnDelete"),
     set_pods("1", "2:Pending", "1", replaced={1: "2"}), False),
    # no revisions recorded: only the counts
    ("no revisions: updated below desired", statefulset(current=None, update=None, updated=2), set_pods(), True),
    ("no revisions: all updated", statefulset(current=None, update=None), set_pods(), False),
]


@pytest.mark.parametrize("workload, seen, expected", [r[1:] for r in DEPLOYMENT_ROWS + STATEFULSET_ROWS],
                         ids=[r[0] for r in DEPLOYMENT_ROWS + STATEFULSET_ROWS])
def test_rollout_or_not(workload, seen, expected):
    why = rolling_out(workload, seen)
    assert (why is not None) is expected, why
    if why:
        assert why.startswith(f"{workload['kind'].lower()} {workload['metadata']['name']}: ")


def test_statefulset_reasons_name_the_pod_and_revisions():
    assert rolling_out(statefulset(), set_pods("2:Pending", "2", "2")) == f"statefulset db: revision {R1} → {R2}"
    assert rolling_out(statefulset(partition=1), set_pods("1", "1", "2:Pending", replaced={2: "1"})) == (
        f"statefulset db: pod db-1 still at revision {R1}, {R2} to come (partition 1)")
    assert rolling_out(statefulset(strategy="OnDelete"), set_pods("1", "2:Pending", "1", replaced={1: "1"})) == (
        f"statefulset db: pod db-1 replaced, revision {R1} → {R2}, not running yet (OnDelete)")


def test_ordinal_from_the_pod_index_label_or_the_name():
    assert ordinal("db-12", "db") == 12
    assert ordinal("db-x", "db") is None and ordinal("other-1", "db") is None
    assert ordinal("db-99999999999", "db") is None and ordinal("db-\u0663", "db") is None
    assert ordinal("renamed", "db", {"metadata": {"labels": {POD_INDEX: "4"}}}) == 4


# ---------------------------------------------------------------------------- other kinds, bad input


def test_other_kinds_keep_the_plain_signals():
    rs = {"kind": "ReplicaSet", "metadata": {"name": "r", "generation": 2}, "status": {"observedGeneration": 1}}
    assert rolling_out(rs) == "replicaset r: observedGeneration 1 < generation 2"
    lws = {"kind": "LeaderWorkerSet", "metadata": {"name": "l", "generation": 1},
           "spec": {"replicas": 2}, "status": {"observedGeneration": 1, "updatedReplicas": 1}}
    assert rolling_out(lws) == "leaderworkerset l: 1 of 2 replicas updated"
    assert rolling_out({"kind": "Job", "metadata": {"generation": 5}}) is None


@pytest.mark.parametrize("workload", [
    {"kind": "Deployment"},
    {"kind": "Deployment", "metadata": None, "spec": [], "status": {"conditions": ["x", None]}},
    {"kind": "StatefulSet", "spec": {"replicas": "3", "updateStrategy": "OnDelete"}, "status": {"updateRevision": 7}},
    {"kind": "StatefulSet", "spec": {"updateStrategy": {"rollingUpdate": {"partition": True}}},
     "status": {"updateRevision": "a", "currentRevision": "a"}},
])
def test_malformed_workloads_get_an_answer_not_an_exception(workload):
    rolling_out(workload, WorkloadPods([{"metadata": {"name": None, "labels": "x"}}], "h", {"db-1": "r"}))
