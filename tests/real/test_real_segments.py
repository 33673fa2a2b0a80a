"""KAI segments, checked against KAI's own pod-grouper (v0.17, from ``../shared/kube-bin``).

Two PyTorchJobs of the same spec in one namespace: one labelled ``podgang.io/skip`` (so
KAI's own pod-grouper, which every KAI install runs, groups it), one left to podgang. The
PodGroup podgang writes must be the one KAI's grouper writes — the worker parent, a leaf
per segment with its topology constraint, the group's own topology — and each pod must
carry the same segment leaf. Then KAI places podgang's segmented gang.
"""

from __future__ import annotations

from typing import Any

from tests.realcluster import bound, corner, until
from tests.real.test_real_journeys import KAI, controller_ref, owned_group, podgroup

SEGMENTED = {"kai.scheduler/segment-size": "3"}
PLACED = {"kai.scheduler/segment-topology-required-placement": "rack"}


def job(name: str, here: Any, *, labels: dict[str, str], annotations: dict[str, str],
        worker_annotations: dict[str, str], workers: int) -> dict[str, Any]:
    def template(extra: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"labels": {"app": name}, "annotations": extra},
                "spec": {"schedulerName": KAI.scheduler, **here.placement, "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "pytorch", "image": "registry.example/train:1",
                                         "resources": {"requests": {"cpu": "1"}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": {**KAI.workload_labels, **labels}, "annotations": annotations},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template({})},
                                             "Worker": {"replicas": workers, "template": template(worker_annotations)}}}}


async def play_training_operator(here: Any, made: dict[str, Any], worker_annotations: dict[str, str]) -> None:
    """The pods training-operator makes for a PyTorchJob: each template's annotations copied
    onto its pods, the replica type and index labels, the job as their controller."""
    name = made["metadata"]["name"]
    common = {"app": name, "training.kubeflow.org/job-name": name,
              "training.kubeflow.org/operator-name": "pytorchjob-controller"}
    workers = made["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
    for rtype, count, extra in (("master", 1, {}), ("worker", workers, worker_annotations)):
        template = made["spec"]["pytorchReplicaSpecs"][rtype.capitalize()]["template"]
        for i in range(count):
            await here.api.create(f"/api/v1/namespaces/{here.namespace}/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{rtype}-{i}", "annotations": dict(extra),
                             "labels": {**common, "training.kubeflow.org/replica-type": rtype,
                                        "training.kubeflow.org/replica-index": str(i)},
                             "ownerReferences": [controller_ref(made)]},
                "spec": template["spec"]})


def shape(group: dict[str, Any]) -> dict[str, Any]:
    """What both groupers decide: the size fields, the subgroups and the topology."""
    spec = group["spec"]
    return {"minMember": spec.get("minMember"), "minSubGroup": spec.get("minSubGroup"),
            "topologyConstraint": spec.get("topologyConstraint"),
            "subGroups": sorted(spec.get("subGroups") or [], key=lambda s: s["name"])}


def leaves(pods: list[dict[str, Any]], name: str) -> dict[str, str | None]:
    """Each pod's subgroup label, by its name without the job's."""
    return {p["metadata"]["name"].removeprefix(f"{name}-"): (p["metadata"].get("labels") or {}).get(
        "kai.scheduler/subgroup-name") for p in pods}


async def test_kai_segments_as_kais_own_pod_grouper_writes_them(cluster, podgang):
    """7 workers in segments of 3 (3 + 3 + 1) under a required rack placement, the job naming its
    topology: podgang's PodGroup and pod labels equal KAI's own."""
    async with corner(cluster, "segments", nodes=1) as here:
        api, ns = here.api, here.namespace
        annotations = {"kai.scheduler/topology": "dc"}
        worker = {**SEGMENTED, **PLACED}
        path = f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"
        theirs = await api.create(path, job("theirs", here, labels={"podgang.io/skip": "true"},
                                            annotations=annotations, worker_annotations=worker, workers=7))
        ours = await api.create(path, job("ours", here, labels={}, annotations=annotations,
                                          worker_annotations=worker, workers=7))
        await play_training_operator(here, theirs, worker)
        await play_training_operator(here, ours, worker)

        async def both_groups():
            kai_own = await podgroup(here, KAI, owned_group(theirs))
            podgangs = await podgroup(here, KAI, owned_group(ours))
            return (kai_own, podgangs) if kai_own and podgangs and podgangs["spec"].get("subGroups") else None
        kai_own, podgangs = await until(both_groups, "KAI's and podgang's PodGroups of the two PyTorchJobs")
        assert kai_own["metadata"]["annotations"].get("kai.scheduler/top-owner-metadata")  # KAI's grouper made it
        assert shape(podgangs) == shape(kai_own)
        assert [s["name"] for s in shape(podgangs)["subGroups"]] == ["master", "worker", "worker-0", "worker-1",
                                                                      "worker-2"]
        assert podgangs["spec"]["stalenessGracePeriod"] == "-1s"  # podgang's own: it is the one evictor

        async def labelled():
            pods = await here.pods()
            mine = leaves([p for p in pods if p["metadata"]["name"].startswith("ours-")], "ours")
            kais = leaves([p for p in pods if p["metadata"]["name"].startswith("theirs-")], "theirs")
            return (mine, kais) if len(mine) == len(kais) == 8 and None not in mine.values() and \
                None not in kais.values() else None
        mine, kais = await until(labelled, "every pod of both jobs in a subgroup")
        assert mine == kais
        assert mine["worker-6"] == "worker-2" and mine["worker-2"] == "worker-0"


async def test_kai_places_a_segmented_gang_podgang_writes(cluster, podgang):
    """4 workers in segments of 2 with no topology (this cluster has none): KAI takes the tree
    podgang writes and binds the whole gang."""
    async with corner(cluster, "segments-placed", nodes=1) as here:
        made = await here.api.create(f"/apis/kubeflow.org/v1/namespaces/{here.namespace}/pytorchjobs",
                                     job("placed", here, labels={}, annotations={},
                                         worker_annotations={"kai.scheduler/segment-size": "2"}, workers=4))
        await play_training_operator(here, made, {"kai.scheduler/segment-size": "2"})

        async def all_bound():
            pods = await here.pods(app="placed")
            return pods if len(pods) == 5 and len(bound(pods)) == 5 else None
        pods = await until(all_bound, "the segmented PyTorchJob's 5 pods bound")
        assert sorted(leaves(pods, "placed").values()) == ["master", "worker-0", "worker-0", "worker-1", "worker-1"]
        group = await podgroup(here, KAI, owned_group(made))
        assert {s["name"]: s.get("minSubGroup", s.get("minMember")) for s in group["spec"]["subGroups"]} == {
            "master": 1, "worker": 2, "worker-0": 2, "worker-1": 2}


async def test_kai_places_an_lws_replica_podgang_splits_by_its_subgroup_policy(cluster, podgang):
    """An LWS of one replica of 5 pods, subGroupPolicy.subGroupSize 2 (the leader the first
    segment's extra pod), its pods played as the LWS controller makes them: podgang's group
    is the tree KAI's own pod-grouper wrote for this manifest, each pod in KAI's segment, and
    KAI binds the replica whole."""
    async with corner(cluster, "segments-lws", nodes=1) as here:
        api, ns = here.api, here.namespace
        template = {"metadata": {"labels": {"app": "serve"}},
                    "spec": {"schedulerName": KAI.scheduler, **here.placement, "terminationGracePeriodSeconds": 0,
                             "containers": [{"name": "main", "image": "registry.example/serve:1",
                                             "resources": {"requests": {"cpu": "1"}}}]}}
        lws = await api.create(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets", {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "labels": KAI.workload_labels},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 5, "subGroupPolicy": {"subGroupSize": 2},
                                                             "workerTemplate": template}}})

        async def statefulset(name: str, owner: dict[str, Any]) -> dict[str, Any]:
            return await api.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "ownerReferences": [controller_ref({"apiVersion": "v1", "kind": "Pod", **owner}
                                                                             if "kind" not in owner else owner)]},
                "spec": {"replicas": 0, "serviceName": "serve", "selector": {"matchLabels": {"played": name}},
                         "template": {"metadata": {"labels": {"played": name}},
                                      "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]}}}})

        async def member(name: str, owner: dict[str, Any], worker: int) -> dict[str, Any]:
            labels = {"app": "serve", "leaderworkerset.sigs.k8s.io/name": "serve",
                      "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}
            ref = {**controller_ref(owner), "controller": False}  # the real StatefulSet controller leaves it be
            return await api.create(f"/api/v1/namespaces/{ns}/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels, "ownerReferences": [ref]},
                "spec": template["spec"]})

        leaders = await statefulset("serve", lws)
        leader = await member("serve-0", leaders, 0)
        workers = await statefulset("serve-0", {"apiVersion": "v1", "kind": "Pod", **leader})
        for worker in range(1, 5):
            await member(f"serve-0-{worker}", workers, worker)

        async def all_bound():
            pods = await here.pods(app="serve")
            return pods if len(pods) == 5 and len(bound(pods)) == 5 else None
        pods = await until(all_bound, "the LWS replica's 5 pods bound")
        by_index = {p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/worker-index"]:
                    p["metadata"]["labels"].get("kai.scheduler/subgroup-name") for p in pods}
        # what KAI's own pod-grouper labelled the same pods with
        assert by_index == {"0": "leader", "1": "workers", "2": "workers", "3": "segment-1", "4": "segment-1"}
        group = await podgroup(here, KAI, f"{owned_group(lws)}-group-0")
        assert shape(group) == {"minMember": 5, "minSubGroup": None, "topologyConstraint": None, "subGroups": [
            {"name": "leader", "parent": "segment-0", "minMember": 1},
            {"name": "segment-0", "minSubGroup": 2},
            {"name": "segment-1", "minMember": 2},
            {"name": "workers", "parent": "segment-0", "minMember": 2}]}
