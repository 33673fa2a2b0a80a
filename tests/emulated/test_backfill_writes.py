"""Backfill at the API's floor, counted on the HTTP API emulator: pods admitted while the
webhook was down get everything they need — membership, subgroup label, the skip
annotation — in one merge patch each, nothing already there is written again, the backfill
is said with the count in one event for the gangs of a namespace settled at once, not one per
pod, and each group the grouper makes is planned once."""

from __future__ import annotations

from typing import Any

from tests.crd_support import crd_valid
from tests.grouper_support import (ANN, LABEL, NS, deploy_with_pods, deployment, events, kai_subgroups, min_member,
                                   owned_group, pod, replicaset, running_grouper, scale)
from tests.unit.test_kinds_kubeflow import template

SUBGROUP = "kai.scheduler/subgroup-name"
SKIP = "kai.scheduler/skip-podgrouper"


def pytorchjob_admitted_unseen(emu, name: str, workers: int, *, labelled: bool = False) -> tuple[dict[str, Any], list[str]]:
    """A PyTorchJob and its pods as the training-operator makes them, admitted while the
    webhook was down: no membership (or, ``labelled``, the group label only)."""
    job = emu.put(crd_valid({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                             "metadata": {"name": name, "namespace": NS},
                             "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template()},
                                                              "Worker": {"replicas": workers, "template": template()}}}}))
    names = []
    for role, count in (("master", 1), ("worker", workers)):
        for i in range(count):
            labels = {"training.kubeflow.org/replica-type": role, "training.kubeflow.org/replica-index": str(i),
                      "training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller"}
            if labelled:
                labels[LABEL] = owned_group(job)
            names.append(emu.put(pod(f"{name}-{role}-{i}", owner=job, phase="Pending", node=None,
                                     labels=labels))["metadata"]["name"])
    return job, names


def pod_patches(emu) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for request in emu.find_requests("PATCH", r"/pods/[^/]+$"):
        out.setdefault(request.path.rsplit("/", 1)[1], []).append(request.body)
    return out


async def test_each_backfilled_pod_is_written_once_with_membership_subgroup_and_skip(emu):
    jobs = [pytorchjob_admitted_unseen(emu, f"train-{n}", 3) for n in range(3)]
    async with running_grouper(emu) as g:
        for job, names in jobs:
            group = owned_group(job)
            for name in names:
                role = name.split("-")[2]
                await emu.wait_for(lambda name=name, role=role: (emu.get("pods", NS, name)["metadata"]
                                                                 .get("labels", {}).get(SUBGROUP)) == role, 5.0,
                                   f"pod {name}'s subgroup label")
            assert kai_subgroups(emu, group) == [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 3}]
        await g.wait_ready(emu)
        patches = pod_patches(emu)
        assert sorted(patches) == sorted(n for _, names in jobs for n in names)
        assert all(len(bodies) == 1 for bodies in patches.values()), {k: v for k, v in patches.items() if len(v) > 1}
        for job, names in jobs:
            for name in names:
                (body,) = patches[name]
                assert body["metadata"]["annotations"] == {ANN: owned_group(job), SKIP: "true"}
                assert body["metadata"]["labels"] == {LABEL: owned_group(job), SUBGROUP: name.split("-")[2]}


async def test_a_backfill_is_one_event_per_namespace_with_the_counts(emu):
    """The grouper creates each job's group and backfills its pods: one event says both, for
    every gang of the namespace settled at once — not an etcd write per gang."""
    jobs = [pytorchjob_admitted_unseen(emu, f"train-{n}", 3) for n in range(2)]
    async with running_grouper(emu) as g:
        (said,) = await emu.wait_for(lambda: events(emu, "PodGroupCreated"), 5.0, "a PodGroupCreated event")
        assert said["involvedObject"]["kind"] == "PodGroup", said
        first = said["involvedObject"]["name"]
        assert first in {owned_group(job) for job, _ in jobs}
        assert said["message"].startswith("2 PodGroups created and 8 pods backfilled for 2 gangs ("), said["message"]
        assert all(owned_group(job) in said["message"] for job, _ in jobs), said["message"]
        name = next(job["metadata"]["name"] for job, _ in jobs if owned_group(job) == first)
        assert f"the first: created for pytorchjob {name}: minMember 4" in said["message"], said["message"]
        assert "; 4 pods backfilled: " in said["message"], said["message"]
        await g.wait_ready(emu)
        assert g.controller.metrics.backfilled._value.get() == 8
        said = [e for e in events(emu) if e["type"] == "Normal"]
        assert len(said) == 1, [(e["reason"], e["message"]) for e in said]
        # a gang whose group was there already: its backfill is said alone, with the count
        emu.put(pod("train-0-worker-3", owner=jobs[0][0], phase="Pending", node=None, labels={
            "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "3",
            "training.kubeflow.org/job-name": "train-0"}))
        (alone,) = await emu.wait_for(lambda: events(emu, "Backfilled"), 5.0, "a Backfilled event")
        assert alone["involvedObject"] == {**alone["involvedObject"], "kind": "PodGroup", "name": owned_group(jobs[0][0])}
        assert alone["message"].startswith("1 pod backfilled: "), alone["message"]


async def test_nothing_a_pod_already_carries_is_written_again(emu):
    job, names = pytorchjob_admitted_unseen(emu, "train", 2, labelled=True)
    async with running_grouper(emu):
        for name in names:
            await emu.wait_for(lambda name=name: emu.get("pods", NS, name)["metadata"]
                               .get("labels", {}).get(SUBGROUP) is not None, 5.0)
        for name, bodies in pod_patches(emu).items():
            assert len(bodies) == 1
            assert LABEL not in bodies[0]["metadata"]["labels"], bodies
            assert bodies[0]["metadata"]["annotations"] == {ANN: owned_group(job), SKIP: "true"}


async def test_the_grouper_keeps_to_its_client_limit_and_writes_groups_before_backfills(emu):
    """40 pods to backfill at 20 calls a second, one worker: no second holds more calls than
    the burst and the rate allow, and a scale made meanwhile is written before the backfill
    is done (pod backfills wait behind group writes)."""
    dep, _, pods = deploy_with_pods(emu, "web", 40, annotate=False)
    other, _, _ = deploy_with_pods(emu, "api", 1)
    async with running_grouper(emu, api_qps=20.0, api_burst=5, workers=1, ready=False) as g:
        await emu.wait_for(lambda: len(pod_patches(emu)) >= 5, 10.0, "the backfill under way")
        scale(emu, other, 2)
        await emu.wait_for(lambda: min_member(emu, owned_group(other)) == 2, 10.0, "the scale written")
        assert len(pod_patches(emu)) < len(pods), "the group write waited for the whole backfill"
        await emu.wait_for(lambda: len(pod_patches(emu)) == len(pods), 10.0, "the backfill done")
        assert g.controller.metrics.rate_limit_wait._value.get() > 0
    times = sorted(r.at for r in emu.requests if not r.query.get("watch"))
    for i, start in enumerate(times):
        within = sum(1 for t in times[i:] if t < start + 1.0)
        assert within <= 5 + 20 * 1.0 + 1, f"{within} calls within one second from {start}"


async def test_a_group_made_before_its_pods_is_said_with_their_backfill(emu):
    """The controller makes the job first, its pods next: the grouper makes the group at once
    and says so together with the backfill of the pods that follow — one event for the gang."""
    async with running_grouper(emu) as g:
        job = emu.put(crd_valid({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                 "metadata": {"name": "later", "namespace": NS},
                                 "spec": {"pytorchReplicaSpecs": {
                                     "Master": {"replicas": 1, "template": template()},
                                     "Worker": {"replicas": 2, "template": template()}}}}))
        group = owned_group(job)
        await emu.wait_for(lambda: kai_subgroups(emu, group) is not None, 5.0, "the group made")
        await emu.wait_for(lambda: g.controller.queue.delayed and not g.controller.queue.busy(), 5.0)
        assert not events(emu, "PodGroupCreated"), "said before its pods came"
        for role, count in (("master", 1), ("worker", 2)):
            for i in range(count):
                emu.put(pod(f"later-{role}-{i}", owner=job, phase="Pending", node=None, labels={
                    "training.kubeflow.org/replica-type": role, "training.kubeflow.org/replica-index": str(i),
                    "training.kubeflow.org/job-name": "later"}))
        (said,) = await emu.wait_for(lambda: events(emu, "PodGroupCreated"), 5.0, "the gang's event")
        assert said["message"].startswith("created for pytorchjob later: minMember 3"), said["message"]
        assert "; 3 pods backfilled: " in said["message"], said["message"]
        await emu.wait_for(lambda: not g.controller._news, 5.0, "nothing left to say")
        assert [e["reason"] for e in events(emu) if e["type"] == "Normal"] == ["PodGroupCreated"]


def passes(controller, kind: str) -> float:
    """How many reconciles of ``kind`` the grouper made (its reconcile histogram's count)."""
    return sum(s.value for m in controller.metrics.reconcile_seconds.collect() for s in m.samples
               if s.name.endswith("_count") and s.labels.get("kind") == kind)


async def test_each_group_the_first_reconcile_makes_is_planned_once(emu):
    """A create's answer goes into the cache without queueing its gang again, and so does the
    watch's echo of it: the first reconcile of 10,000 gangs planned each three times."""
    deps = [deploy_with_pods(emu, f"web-{n}", 3)[0] for n in range(20)]
    async with running_grouper(emu) as g:
        controller = await g.wait_ready(emu)
        assert all(min_member(emu, owned_group(dep)) == 3 for dep in deps)
        await emu.wait_for(lambda: not controller.queue.busy(), 5.0, "the grouper idle")
        assert passes(controller, "podgroup") == len(deps)
        # a change to a group by someone else is still seen, and the group put back
        emu.patch_object("podgroups", NS, owned_group(deps[0]), {"spec": {"minMember": 7}})
        await emu.wait_for(lambda: min_member(emu, owned_group(deps[0])) == 3, 5.0, "the size written back")


async def test_backfills_wait_while_a_controller_creates_pods_in_a_burst_and_then_all_run(emu):
    """A ReplicaSet's 60 pods made one after the other with no webhook in front: the grouper
    holds their backfills while they come (its writes would compete with the controller's
    creates), and backfills them all once the burst is over."""
    dep = emu.put(deployment("burst", 60))
    rs = emu.put(replicaset(dep))
    async with running_grouper(emu, backfill_yield_rate=5.0) as g:
        controller = await g.wait_ready(emu)
        for i in range(60):  # each made once the grouper has seen the one before: a controller's pace
            emu.put(pod(f"burst-{i}", owner=rs, phase="Pending", node=None, labels={"app": "burst"}))
            await emu.wait_for(lambda i=i: f"{NS}/burst-{i}" in controller.cache.pods, 5.0, f"pod burst-{i} seen")
        during = len(pod_patches(emu))
        await emu.wait_for(lambda: len(pod_patches(emu)) == 60, 10.0, "every pod backfilled after the burst")
        assert during <= 10, f"{during} pods backfilled while the burst went on"
        assert controller.metrics.backfill_yields._value.get() >= 1
