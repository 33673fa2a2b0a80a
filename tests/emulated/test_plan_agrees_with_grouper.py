"""``podgang plan`` is what the cluster will do: the grouper runs against the HTTP
API emulator holding the same objects, and the PodGroups it writes are exactly the
ones the plan prints for those objects as ``kubectl get -o yaml`` exports them
(UIDs and all). Both decide through the grouper's own ``desired_group``; this
checks that the plan feeds it the cluster's state faithfully. Manifests a new user
writes by hand (an owner without ``metadata.uid`` that references point at by UID)
are checked against the webhook too, which walks the owners by name."""

from __future__ import annotations

import copy

import pytest

from podgang.backends.kai import KAI
from podgang.manifests import Manifest, Source, read_manifests
from podgang.plan import build_plan
from tests.grouper_support import owned_group, running_grouper, uid
from tests.webhook_support import eventually, patched, review, running_webhook

EXPORTED_KINDS = ("pods", "deployments", "replicasets", "statefulsets", "jobs", "cronjobs", "leaderworkersets",
                  "jobsets", "podgroups")
#: 03-gpu-conflict.yaml holds a pod the webhook denies: it never exists in a cluster
EXAMPLES = ["examples/01-app-with-models.yaml", "examples/02-shared-podgroup-deployments.yaml",
            "examples/04-leaderworkerset.yaml", "examples/05-plain-deployment.yaml"]


def exported(emu) -> list[Manifest]:
    """Every object as ``kubectl get -o yaml`` would export it."""
    return [Manifest(obj, Source(f"export/{kind}", i + 1))
            for kind in EXPORTED_KINDS for i, obj in enumerate(emu.list(kind))]


def cluster_groups(emu) -> dict[tuple[str, str], int]:
    return {(pg["metadata"]["namespace"], pg["metadata"]["name"]): KAI.min_member(pg) for pg in emu.list("podgroups")}


def planned_groups(manifests: list[Manifest]) -> tuple[dict[tuple[str, str], int], list]:
    plan = build_plan(manifests)
    return {key: group.min_member.value for key, group in plan.groups.items()}, plan.warnings


async def settled(emu, grouper) -> dict[tuple[str, str], int]:
    """The PodGroups once the grouper has nothing left to do."""
    await grouper.wait_ready(emu)
    await grouper.controller.queue.wait_idle()
    return cluster_groups(emu)


@pytest.mark.parametrize("example", EXAMPLES)
async def test_the_plan_of_an_exported_cluster_is_the_cluster(emu, example):
    for m in read_manifests([example]):
        emu.put(m.obj)
    async with running_grouper(emu) as grouper:
        cluster = await settled(emu, grouper)
    assert cluster, "the grouper wrote no PodGroup"
    planned, _warnings = planned_groups(exported(emu))
    assert planned == cluster


@pytest.mark.parametrize("policy,size", [("Parallel", 3), ("OrderedReady", 1)])
async def test_an_exported_statefulset_and_its_pods_plan_as_the_cluster_has_them(emu, policy, size):
    """Tried as a new user would: `kubectl get statefulset etcd -o yaml` plus its pods,
    which carry podgang's own pg-etcd-<uid>: that is the StatefulSet's gang (of 3, or of 1
    when its controller makes its pods one at a time), not a hand-made group of 1 said to
    be missing."""
    sts = emu.put({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "etcd", "namespace": "db", "uid": uid()},
        "spec": {"replicas": 3, "serviceName": "etcd", "selector": {"matchLabels": {"app": "etcd"}},
                 "podManagementPolicy": policy,
                 "template": {"metadata": {"labels": {"app": "etcd"}},
                              "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}},
        "status": {"replicas": 3, "updatedReplicas": 3, "observedGeneration": 1},
    })
    group = owned_group(sts)
    for i in range(3):
        emu.put({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"etcd-{i}", "namespace": "db", "uid": uid(),
                         "labels": {"app": "etcd", KAI.label: group}, "annotations": {KAI.annotation: group},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd",
                                              "uid": sts["metadata"]["uid"], "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", "nodeName": "node-1", "containers": [{"name": "c", "image": "x"}]},
            "status": {"phase": "Running"},
        })
    async with running_grouper(emu) as grouper:
        cluster = await settled(emu, grouper)
    assert cluster == {("db", group): size}
    sts_and_pods = [m for m in exported(emu) if m.obj["kind"] in ("StatefulSet", "Pod")]
    planned, warnings = planned_groups(sts_and_pods)
    assert planned == {("db", group): size}
    if size == 3:
        assert warnings == []
    else:
        assert len(warnings) == 1 and "podManagementPolicy: Parallel makes them one gang" in warnings[0].message


async def test_the_plan_follows_a_scale_as_the_grouper_does(emu):
    for m in read_manifests(["examples/02-shared-podgroup-deployments.yaml"]):
        emu.put(m.obj)
    async with running_grouper(emu) as grouper:
        await settled(emu, grouper)
        emu.patch_object("deployments", "models-deploys", "model-1", {"spec": {"replicas": 2}})
        await eventually(lambda: cluster_groups(emu)[("models-deploys", "shared-app-podgroup")] == 4,
                         what="the grouper following the scale")
        cluster = cluster_groups(emu)
    planned, _ = planned_groups(exported(emu))
    assert planned == cluster == {("models-deploys", "shared-app-podgroup"): 4}


def hand_written(skip: bool, gpu_conflict: bool) -> tuple[dict, dict, dict]:
    """A Deployment as a user writes it (no uid), and a ReplicaSet and pod as exported
    from a cluster (their ownerReferences carry the owners' uids)."""
    template = {"metadata": {"labels": {"app": "x"}},
                "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "x", "namespace": "team", **({"labels": {"podgang.io/skip": "true"}} if skip else {})},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template}}
    replicaset = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "x-7d9f", "namespace": "team", "uid": uid(),
                               "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "x",
                                                    "uid": uid(), "controller": True}]},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": template}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "x-7d9f-a", "namespace": "team", "uid": uid(), "labels": {"app": "x"},
                        "annotations": {"gpu-fraction": "0.5", "gpu-memory": "1024"} if gpu_conflict else {},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x-7d9f",
                                             "uid": replicaset["metadata"]["uid"], "controller": True}]},
           "spec": template["spec"]}
    return deployment, replicaset, pod


def pod_review(pod: dict) -> dict:
    doc = review("pod-create-by-replicaset")
    doc["request"].update(uid="hand-written", namespace=pod["metadata"]["namespace"], object=copy.deepcopy(pod))
    return doc


@pytest.mark.parametrize("skip, gpu_conflict", [(True, True), (True, False), (False, True), (False, False)])
async def test_an_owner_written_without_a_uid_is_found_by_name_as_the_webhook_finds_it(
        emu, tmp_path, skip, gpu_conflict):
    """The Deployment's manifest has no uid; the ReplicaSet's reference to it has the
    one the cluster gave it. The plan links them by name, as the webhook does: a skip
    label on the Deployment keeps the pod out of scope (no GPU denial), and without it
    the pod's group is pg-x-<that uid>, the group the webhook and the grouper make."""
    deployment, replicaset, pod = hand_written(skip, gpu_conflict)
    in_cluster = emu.put({**deployment, "metadata": {**deployment["metadata"],
                                                   "uid": replicaset["metadata"]["ownerReferences"][0]["uid"]}})
    emu.put(replicaset)
    async with emu.api_client() as client, running_webhook(tmp_path, api_client=client) as wh:
        validated = await wh.validate(pod_review(pod))
        mutated = await wh.mutate(pod_review(pod))
    plan = build_plan([Manifest(o, Source("new-user.yaml", i + 1)) for i, o in enumerate((deployment, replicaset, pod))])
    [member] = [m for m in plan.members if m.what == "pod team/x-7d9f-a"]

    assert validated["allowed"] is (skip or not gpu_conflict)
    assert [d.message for d in plan.denials] == ([] if validated["allowed"] else [validated["status"]["message"]])
    if skip:
        assert mutated == {"uid": "hand-written", "allowed": True}  # left alone: no patch
        assert member.skipped == "deployment/x is labelled podgang.io/skip=true"
    elif not gpu_conflict:
        admitted = patched(pod, mutated)
        assert member.group == admitted["metadata"]["annotations"]["pod-group-name"] == owned_group(in_cluster)
        emu.put(admitted)
    assert all(m.group or m.skipped or m.no_group or m is member for m in plan.members), plan.members
    async with running_grouper(emu) as grouper:
        cluster = await settled(emu, grouper)
    assert {key: group.min_member.value for key, group in plan.groups.items()} == cluster
    assert cluster == ({} if skip else {("team", owned_group(in_cluster)): 2})
