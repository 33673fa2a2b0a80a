"""``podgang plan`` is what the cluster will do: the grouper runs against the HTTP
API emulator holding the same objects, and the PodGroups it writes are exactly the
ones the plan prints for those objects as ``kubectl get -o yaml`` exports them
(UIDs and all). Both decide through the grouper's own ``desired_group``; this
checks that the plan feeds it the cluster's state faithfully."""

from __future__ import annotations

import pytest

from podgang.backends.kai import KAI
from podgang.manifests import Manifest, Source, read_manifests
from podgang.plan import build_plan
from tests.grouper_support import owned_group, running_grouper, uid
from tests.kube_emulator import kube_emulator_fixture
from tests.webhook_support import eventually

EXPORTED_KINDS = ("pods", "deployments", "replicasets", "statefulsets", "jobs", "cronjobs", "leaderworkersets",
                  "jobsets", "podgroups")
#: 03-gpu-conflict.yaml holds a pod the webhook denies: it never exists in a cluster
EXAMPLES = ["examples/01-app-with-models.yaml", "examples/02-shared-podgroup-deployments.yaml",
            "examples/04-leaderworkerset.yaml", "examples/05-plain-deployment.yaml"]


@pytest.fixture
async def emu():
    async for e in kube_emulator_fixture():
        yield e


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


async def test_an_exported_statefulset_and_its_pods_plan_as_the_cluster_has_them(emu):
    """Tried as a new user would: `kubectl get statefulset etcd -o yaml` plus its pods,
    which carry podgang's own pg-etcd-<uid>: that is the StatefulSet's gang of 3, not a
    hand-made group of 1 said to be missing."""
    sts = emu.put({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "etcd", "namespace": "db", "uid": uid()},
        "spec": {"replicas": 3, "serviceName": "etcd", "selector": {"matchLabels": {"app": "etcd"}},
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
    assert cluster == {("db", group): 3}
    sts_and_pods = [m for m in exported(emu) if m.obj["kind"] in ("StatefulSet", "Pod")]
    planned, warnings = planned_groups(sts_and_pods)
    assert planned == {("db", group): 3}
    assert warnings == []


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
