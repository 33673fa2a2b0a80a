"""The README's journeys on a real control plane with the real gang schedulers.

Every test here ends where podgang's promise ends: pods bound by the real KAI scheduler and
binder, vc-scheduler, the coscheduling scheduler or kube-scheduler's native gangs — all of
a gang at once, or none of it. Deployments and StatefulSets are made by the real
controller-manager; only what has no controller here (LeaderWorkerSet, the training and
Ray operators) is played by the test, as the emulator tests play it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from podgang.api import AlreadyExists, NotFound
from podgang.backends.kai import KAI as KAI_BACKEND
from tests.realcluster import (KAI_TEAM_QUEUE, KAI_TEAMS_QUEUE, Corner, FakeKubelet, NATIVE_NAMESPACE_LABELS, bound,
                               corner, create_all, example, kai_queue, scheduler_caught_up, until)



@dataclass(frozen=True)
class Flavor:
    """One gang scheduler as these tests see it: where its PodGroups are, how big one is."""

    backend: str
    scheduler: str
    podgroups: str  # the API group/version path of its PodGroups
    namespace_labels: dict[str, str] = field(default_factory=dict)
    #: labels a team puts on its workloads for this scheduler (KAI: its queue)
    workload_labels: dict[str, str] = field(default_factory=dict)
    plural: str = "podgroups"  # 1.35's native gangs are Workloads
    says_why_pending: bool = True  # False: a waiting gang's pods carry no condition (native 1.35)
    reads_min_resources: bool = False  # its PodGroup says what the whole gang needs (spec.minResources)

    def size(self, podgroup: dict[str, Any]) -> int | None:
        spec = podgroup.get("spec") or {}
        if self.backend == "native":
            groups = spec.get("podGroups") or [{"policy": spec.get("schedulingPolicy")}]  # 1.35: a Workload's one
            policy = groups[0].get("policy") or {}
            return (policy.get("gang") or {}).get("minCount", 1 if "basic" in policy else None)
        if self.backend == "kai":  # a tree (KAI's JobSet, complete replicas) is sized by its leaves
            return KAI_BACKEND.min_member(podgroup)
        return spec.get("minMember")

    def param(self):
        return pytest.param(self, id=self.backend)


KAI = Flavor("kai", "kai-scheduler", "/apis/scheduling.run.ai/v2alpha2",
             workload_labels={"kai.scheduler/queue": KAI_TEAM_QUEUE})
VOLCANO = Flavor("volcano", "volcano", "/apis/scheduling.volcano.sh/v1beta1", reads_min_resources=True)
COSCHEDULING = Flavor("coscheduling", "scheduler-plugins-scheduler", "/apis/scheduling.x-k8s.io/v1alpha1",
                      reads_min_resources=True)
NATIVE = Flavor("native", "default-scheduler", "/apis/scheduling.k8s.io/v1alpha2", NATIVE_NAMESPACE_LABELS)
FLAVORS = [f.param() for f in (KAI, VOLCANO, COSCHEDULING, NATIVE)]


# ---------------------------------------------------------------------------
# builders and looks


def pod_template(here: Corner, flavor: Flavor, app: str, *, gpus: int = 0, labels: dict | None = None,
                 annotations: dict | None = None) -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"metadata": {"labels": {"app": app, **(labels or {})}, "annotations": annotations or {}},
            "spec": {"schedulerName": flavor.scheduler, **here.placement, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/train:1", "resources": resources}]}}


async def create_deployment(here: Corner, flavor: Flavor, name: str, replicas: int, **template: Any) -> dict:
    return await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": here.namespace, "labels": flavor.workload_labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": pod_template(here, flavor, name, **template)}})


def owned_group(obj: dict[str, Any]) -> str:
    return f"pg-{obj['metadata']['name']}-{obj['metadata']['uid']}"


async def podgroup(here: Corner, flavor: Flavor, name: str) -> dict[str, Any] | None:
    try:
        return await here.api.get(f"{flavor.podgroups}/namespaces/{here.namespace}/{flavor.plural}/{name}")
    except NotFound:
        return None


async def wait_size(here: Corner, flavor: Flavor, name: str, size: int) -> dict[str, Any]:
    async def sized():
        group = await podgroup(here, flavor, name)
        return group if group and flavor.size(group) == size else None
    return await until(sized, f"{flavor.backend} PodGroup {name} of size {size}")


async def wait_bound(here: Corner, app: str, count: int) -> list[dict[str, Any]]:
    async def all_bound():
        pods = await here.pods(app=app)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == count and len(bound(live)) == count else None
    return await until(all_bound, f"{count} pods of {app} bound")


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


async def wait_held_whole(here: Corner, app: str, count: int, flavor: Flavor | None = None) -> list[dict[str, Any]]:
    """Every pod of the gang has the scheduler's verdict (PodScheduled False) and none is
    bound: the gang is kept whole rather than started in part. Where the scheduler writes
    no verdict on a waiting gang's pods (native 1.35), all of them exist and none is bound
    once a pod created after them is."""
    if flavor is not None and not flavor.says_why_pending:
        async def all_there():
            return len(await here.pods(app=app)) == count
        await until(all_there, f"{count} pods of {app}")
        await scheduler_caught_up(here)
        pods = await here.pods(app=app)
        assert len(pods) == count and not bound(pods), f"part of the gang was bound: {bound(pods)}"
        return pods

    async def judged():
        pods = await here.pods(app=app)
        assert not bound(pods), f"part of the gang was bound: {[p['metadata']['name'] for p in bound(pods)]}"
        return pods if len(pods) == count and all(unschedulable(p) for p in pods) else None
    pods = await until(judged, f"the scheduler's verdict on all {count} pods of {app}")
    assert not bound(await here.pods(app=app))
    return pods


# ---------------------------------------------------------------------------
# journeys on every backend


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_deployment_gang_that_does_not_fit_stays_whole_then_is_bound_together(cluster, podgang, flavor):
    async with corner(cluster, f"fit-{flavor.backend}", nodes=1, labels=flavor.namespace_labels) as here:
        dep = await create_deployment(here, flavor, "train", 3, gpus=2)  # 6 GPUs, the one node has 4
        group = await wait_size(here, flavor, owned_group(dep), 3)
        if flavor.reads_min_resources:  # what the whole gang needs: the scheduler checks it before any pod
            assert group["spec"]["minResources"] == {"nvidia.com/gpu": "6"}
        await wait_held_whole(here, "train", 3, flavor)
        await here.add_node()
        pods = await wait_bound(here, "train", 3)
        assert len({p["spec"]["nodeName"] for p in pods}) == 2


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_scale_changes_the_gang_size(cluster, podgang, flavor):
    async with corner(cluster, f"scale-{flavor.backend}", nodes=2, labels=flavor.namespace_labels) as here:
        dep = await create_deployment(here, flavor, "serve", 2, gpus=1)
        group = owned_group(dep)
        await wait_size(here, flavor, group, 2)
        await wait_bound(here, "serve", 2)
        await here.api.merge_patch(f"/apis/apps/v1/namespaces/{here.namespace}/deployments/serve",
                                   {"spec": {"replicas": 3}})
        if flavor.backend == "native":
            # v1alpha2 (1.36): minCount is immutable; podgang records the new size and says so
            async def held():
                got = await podgroup(here, flavor, group)
                return (got["metadata"].get("annotations") or {}).get("podgang.io/desired-min-member") == "3"
            await until(held, "the desired size recorded on the held native group")
            await here.wait_events("MinMemberHeld")
        else:
            grown = await wait_size(here, flavor, group, 3)
            await here.wait_events("MinMemberChanged", "deployment serve scaled 2 → 3")
            if flavor.reads_min_resources:  # kept true in the same patch
                assert grown["spec"]["minResources"] == {"nvidia.com/gpu": "3"}
        await wait_bound(here, "serve", 3)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_gang_that_lost_members_is_evicted(cluster, podgang, flavor):
    async with corner(cluster, f"stale-{flavor.backend}", nodes=2, labels=flavor.namespace_labels) as here:
        async with FakeKubelet(here):
            dep = await create_deployment(here, flavor, "ring", 4, gpus=2)  # two pods on each node
            await wait_size(here, flavor, owned_group(dep), 4)
            pods = await wait_bound(here, "ring", 4)
            await until(lambda: _all_running(here, "ring", 4), "the gang running")
            # the grouper has seen it whole (else a loss before its first look is a gang still being placed)
            await podgang.wait_logged("placed: 4 of minMember 4 members active", here.namespace)
            lost = pods[0]["spec"]["nodeName"]
            survivors = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] != lost}
            # the node is gone, and its pods with it; their replacements find no room
            await here.remove_node(lost)
            for p in pods:
                if p["spec"]["nodeName"] == lost:
                    await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/{p['metadata']['name']}",
                                          {"gracePeriodSeconds": 0})
            await here.wait_events("GangStale")
            await here.wait_events("GangEvicted")

            async def survivors_gone():
                names = {p["metadata"]["name"] for p in await here.pods(app="ring")}
                return not (names & survivors)
            await until(survivors_gone, f"the rest of the gang ({sorted(survivors)}) evicted")
            # the Deployment makes four new pods; with room for two, none of them starts
            await wait_held_whole(here, "ring", 4, flavor)


async def grouper_lines(podgang, here: Corner, then: Corner) -> list[str]:
    """What the grouper logged about ``here``, read once it has placed a gang made after
    everything in ``here`` happened (it reads pods through one watch, in order: it has seen
    every pod of ``here`` come and go by then)."""
    async with FakeKubelet(then):
        await create_deployment(then, KAI, "next", 2)
        await podgang.wait_logged("placed: 2 of minMember 2 members active", then.namespace)
    return [line for line in podgang.processes["grouper"].log.read_text().splitlines() if here.namespace in line]


def judged_or_warned(lines: list[str]) -> list[str]:
    return [line for line in lines if "WARNING" in line or "action=stale" in line or "action=evict" in line]


async def test_deleting_a_gangs_workload_is_not_a_stale_gang(cluster, podgang):
    """`kubectl delete deployment` (background propagation: the Deployment goes at once, the
    garbage collector deletes its ReplicaSet, then the pods): the gang's members go on purpose."""
    async with corner(cluster, "gone-kai", nodes=2) as here:
        async with FakeKubelet(here):
            dep = await create_deployment(here, KAI, "ring", 2, gpus=2)
            group = owned_group(dep)
            await wait_size(here, KAI, group, 2)
            await until(lambda: _all_running(here, "ring", 2), "the gang running")
            await podgang.wait_logged("placed: 2 of minMember 2 members active", here.namespace)
            cluster.kubectl("-n", here.namespace, "delete", "deployment", "ring", "--wait=false")

            async def all_gone():
                return not await here.pods(app="ring") and not await podgroup(here, KAI, group)
            await until(all_gone, "the gang's pods and PodGroup gone")
        async with corner(cluster, "after-kai", nodes=1) as then:
            said = await grouper_lines(podgang, here, then)
    assert said and not judged_or_warned(said), "\n".join(said)


async def test_deleting_a_namespace_lets_its_gangs_go(cluster, podgang):
    """`kubectl delete namespace` with a placed gang in it: its pods go on purpose, so the gang
    is neither judged stale nor evicted, and nothing is written there (the apiserver refuses
    anything new in a namespace being deleted; podgang does not try, warn, or retry)."""
    async with corner(cluster, "bye-kai", nodes=2) as here:
        async with FakeKubelet(here):
            dep = await create_deployment(here, KAI, "ring", 2, gpus=2)
            await wait_size(here, KAI, owned_group(dep), 2)
            await wait_bound(here, "ring", 2)
            await until(lambda: _all_running(here, "ring", 2), "the gang running")
            await podgang.wait_logged("placed: 2 of minMember 2 members active", here.namespace)
            cluster.kubectl("delete", "namespace", here.namespace, "--wait=false")
            await podgang.wait_logged("namespace being deleted", here.namespace, "groups=1")

            async def gone():
                try:
                    await here.api.get(f"/api/v1/namespaces/{here.namespace}")
                except NotFound:
                    return True
            await until(gone, f"namespace {here.namespace} deleted")
        async with corner(cluster, "after-kai", nodes=1) as then:
            said = await grouper_lines(podgang, here, then)
    assert said and not judged_or_warned(said), "\n".join(said)


async def _all_running(here: Corner, app: str, count: int) -> bool:
    pods = await here.pods(app=app)
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_default_statefulset_gang_starts(cluster, podgang, flavor):
    """A StatefulSet as most users write it (podManagementPolicy OrderedReady, the default):
    its controller makes pod 1 only once pod 0 is Ready, so its gang is sized 1 and the
    StatefulSet is told why (GangStaged)."""
    async with corner(cluster, f"sts-{flavor.backend}", nodes=1, labels=flavor.namespace_labels) as here:
        async with FakeKubelet(here):
            sts = await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/statefulsets", {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": "etcd", "namespace": here.namespace, "labels": flavor.workload_labels},
                "spec": {"replicas": 3, "serviceName": "etcd", "selector": {"matchLabels": {"app": "etcd"}},
                         "template": pod_template(here, flavor, "etcd")}})
            await wait_size(here, flavor, owned_group(sts), 1)
            await here.wait_events("GangStaged", "podManagementPolicy: Parallel makes them one gang")
            await until(lambda: _all_running(here, "etcd", 3), "the StatefulSet's three pods running")


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_parallel_statefulset_that_does_not_fit_stays_whole(cluster, podgang, flavor):
    """podManagementPolicy Parallel makes every pod at once: a real gang of its replicas."""
    async with corner(cluster, f"psts-{flavor.backend}", nodes=1, labels=flavor.namespace_labels) as here:
        sts = await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "ring", "namespace": here.namespace},
            "spec": {"replicas": 3, "serviceName": "ring", "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"app": "ring"}},
                     "template": pod_template(here, flavor, "ring", gpus=2)}})  # 6 GPUs, the one node has 4
        await wait_size(here, flavor, owned_group(sts), 3)
        await wait_held_whole(here, "ring", 3)
        await here.add_node()
        await wait_bound(here, "ring", 3)


# ---------------------------------------------------------------------------
# KAI


#: KAI's admission webhook names a GPU-sharing pod's ConfigMap here; KAI's binder needs it
KAI_SHARED_GPU_CONFIGMAP = "runai/shared-gpu-configmap"


async def ensure_kai_queue(here: Corner, name: str, parent: str = KAI_TEAMS_QUEUE) -> None:
    """A leaf queue with a GPU quota, as a KAI admin creates one for a team."""
    try:
        await here.api.create("/apis/scheduling.run.ai/v2/queues", kai_queue(name, parent))
    except AlreadyExists:
        pass


async def test_kai_seed_003_hand_made_group_is_bound_at_once(cluster, podgang):
    async with corner(cluster, "seed003", nodes=1) as here, FakeKubelet(here):
        await ensure_kai_queue(here, "test")  # the seed's group names queue "test"
        docs = example("01-app-with-models.yaml", here.namespace, here.placement)
        for doc in docs:
            if doc["kind"] == "Pod":  # what KAI's own admission webhook (not run here) adds to a GPU-sharing pod
                doc["metadata"]["annotations"][KAI_SHARED_GPU_CONFIGMAP] = f"{doc['metadata']['name']}-shared-gpu"
        await create_all(here, docs)
        for name in ("app-server", "model-1", "model-2"):
            pod = await here.api.get(f"/api/v1/namespaces/{here.namespace}/pods/{name}")
            assert pod["metadata"]["annotations"]["pod-group-name"] == "app-with-models"

        async def all_bound():
            return len(bound(await here.pods())) == 3
        await until(all_bound, "seed 003's three pods bound")


async def test_kai_podgrouper_beside_podgang_changes_nothing(cluster, podgang):
    """KAI's own pod-grouper runs in every KAI install (and in this cluster): it must leave
    podgang's pods and groups alone."""
    async with corner(cluster, "kaipg", nodes=1) as here:
        dep = await create_deployment(here, KAI, "infer", 2, gpus=1)
        await wait_bound(here, "infer", 2)
        for pod in await here.pods(app="infer"):
            assert pod["metadata"]["annotations"]["pod-group-name"] == owned_group(dep)
        groups = (await here.api.get(f"{KAI.podgroups}/namespaces/{here.namespace}/podgroups"))["items"]
        assert [g["metadata"]["name"] for g in groups] == [owned_group(dep)]
        denied = [e for e in await here.events() if "denied the request" in e.get("message", "")]
        assert not denied, denied[0]["message"]


def size_managers(group: dict[str, Any]) -> set[str]:
    """The field managers that own spec.minMember of a KAI PodGroup, as the apiserver recorded them."""
    return {m["manager"] for m in group["metadata"].get("managedFields") or []
            if "f:minMember" in ((m.get("fieldsV1") or {}).get("f:spec") or {}) and m.get("subresource") != "status"}


async def test_kai_a_gang_size_another_manager_writes_is_named_once(cluster, podgang):
    """What an older KAI's pod-grouper (or a user) does to a group podgang made: write its
    minMember. podgang writes its own size back and names the other writer, once."""
    async with corner(cluster, "fight", nodes=1) as here:
        dep = await create_deployment(here, KAI, "infer", 2, gpus=1)
        group = owned_group(dep)
        made = await wait_size(here, KAI, group, 2)
        assert size_managers(made) == {"podgang-grouper"}  # podgang's own name, not its client library's
        assert not await here.events("PodGroupChangedByOther")
        cluster.kubectl("-n", here.namespace, "patch", f"podgroups.scheduling.run.ai/{group}", "--type=merge",
                        "-p", '{"spec": {"minMember": 5}}', "--field-manager=someone-else")

        async def on_group_and_workload():
            found = await here.events("PodGroupChangedByOther")
            return found if len({e["involvedObject"]["kind"] for e in found}) == 2 else None
        warned = await until(on_group_and_workload, "PodGroupChangedByOther on the PodGroup and the Deployment")
        back = await wait_size(here, KAI, group, 2)
        assert size_managers(back) == {"podgang-grouper"}  # the write-back took the field over again
        assert sorted(e["involvedObject"]["kind"] for e in warned) == ["Deployment", "PodGroup"]
        for event in warned:
            assert (event["type"], event.get("count") or 1) == ("Warning", 1)
            assert '"someone-else" (spec.minMember)' in event["message"]
            assert f"PodGroup {group}, which podgang made" in event["message"]
        await wait_bound(here, "infer", 2)


# ---------------------------------------------------------------------------
# Volcano: seed 000/001's LeaderWorkerSet


async def play_leaderworkerset(here: Corner, flavor: Flavor, name: str, replicas: int, size: int,
                               gpus: int) -> dict[str, Any]:
    """A LeaderWorkerSet and what its controller makes of it (:func:`play_lws_pods`)."""
    ns = here.namespace
    lws = await here.api.create(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": ns, "labels": flavor.workload_labels},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": size, "workerTemplate": pod_template(here, flavor, name, gpus=gpus)}}})
    await play_lws_pods(here, flavor, lws, gpus)
    return lws


async def play_lws_pods(here: Corner, flavor: Flavor, lws: dict[str, Any], gpus: int,
                        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> None:
    """What the LWS controller (and its pod webhook) make of ``lws``, which this cluster does not
    run: a leader StatefulSet whose pods lead the groups, and per leader a worker StatefulSet.
    The pods are created by the test (with the LWS labels, and ``labels`` and ``annotations``
    an owner of the LWS puts on its templates) and name their StatefulSet as their first owner
    without controlling it, so that the real StatefulSet controller, whose selector matches
    none of them, leaves them alone."""
    ns, name = here.namespace, lws["metadata"]["name"]
    replicas, size = lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]
    labels = labels or {}

    def ref(obj: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": obj.get("apiVersion", "v1"), "kind": obj.get("kind", "Pod"),
                "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"], "controller": False}

    async def statefulset(sts_name: str, owner: dict[str, Any]) -> dict[str, Any]:
        return await here.api.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": sts_name, "namespace": ns, "labels": labels,
                         "ownerReferences": [{**ref(owner), "controller": True}]},
            "spec": {"replicas": 0, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"played": sts_name}},
                     "template": {"metadata": {"labels": {"played": sts_name}},
                                  "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]}}}})

    async def member(pod_name: str, owner: dict[str, Any], group: int, worker: int) -> dict[str, Any]:
        template = pod_template(here, flavor, labels.get("app", name), gpus=gpus, annotations=annotations, labels={
            **labels, "leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(group),
            "leaderworkerset.sigs.k8s.io/worker-index": str(worker)})
        return await here.api.create(f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": pod_name, "ownerReferences": [ref(owner)]},
            "spec": template["spec"]})

    leaders = await statefulset(name, lws)
    for group in range(replicas):
        leader = await member(f"{name}-{group}", leaders, group, 0)
        workers = await statefulset(f"{name}-{group}", leader)
        for worker in range(1, size):
            await member(f"{name}-{group}-{worker}", workers, group, worker)


async def test_volcano_leaderworkerset_groups_are_each_bound_together(cluster, podgang):
    async with corner(cluster, "lws", nodes=1) as here:
        # two groups of 4 × 1 GPU; the one node has room for exactly one group
        lws = await play_leaderworkerset(here, VOLCANO, "llm", replicas=2, size=4, gpus=1)
        groups = [f"{owned_group(lws)}-group-{i}" for i in range(2)]
        for group in groups:
            await wait_size(here, VOLCANO, group, 4)

        async def one_group_bound_the_other_judged():
            pods = await here.pods(app="llm")
            by_group: dict[str, list[dict]] = {}
            for p in pods:
                by_group.setdefault(p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"], []).append(p)
            placed = [g for g, members in by_group.items() if len(bound(members)) == 4]
            waiting = [g for g, members in by_group.items() if all(unschedulable(p) for p in members)]
            return len(placed) == 1 and len(waiting) == 1 and (placed[0], waiting[0])
        placed, waiting = await until(one_group_bound_the_other_judged,
                                      "one group of 4 bound, the other kept whole by the scheduler")
        rest = await here.pods(**{"leaderworkerset.sigs.k8s.io/group-index": waiting})
        assert not bound(rest), "the second group was started in part"
        await here.add_node()
        await until(lambda: _count_bound(here, "llm", 8), "the second group bound too")


async def _count_bound(here: Corner, app: str, count: int) -> bool:
    return len(bound(await here.pods(app=app))) == count


async def test_kai_a_queue_that_does_not_exist_is_said_at_admission_and_on_the_workload(cluster, podgang):
    """KAI never schedules a gang whose queue does not exist (QueueDoesNotExist): a pod a
    user creates gets an admission warning; a controller's pods, whose warnings nobody
    sees, get a Warning event on their workload and PodGroup."""
    async with corner(cluster, "noqueue", nodes=1) as here:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "solo", "namespace": here.namespace, "labels": {"kai.scheduler/queue": "nope"}},
               "spec": {"schedulerName": "kai-scheduler", **here.placement,
                        "containers": [{"name": "main", "image": "registry.example/x:1"}]}}
        done = cluster.kubectl_run("create", "-f", "-", input=yaml.safe_dump(pod))
        assert done.returncode == 0, done.stderr
        assert 'KAI queue "nope"' in done.stderr and "does not exist" in done.stderr, done.stderr
        dep = await create_deployment(here, Flavor("kai", "kai-scheduler", KAI.podgroups,
                                                   workload_labels={"kai.scheduler/queue": "nope"}), "web", 2)
        # a never-placed verdict (podgang.feasibility), said as every other one is
        await until(lambda: _event_kinds(here, "GangNeverPlaced", {"Deployment", "PodGroup"}),
                    "the warning on the Deployment and on its PodGroup")
        group = await podgroup(here, KAI, owned_group(dep))
        assert group["spec"]["queue"] == "nope"
        said = [e["message"] for e in await here.events("GangNeverPlaced")]
        assert all('KAI queue "nope"' in m and "does not exist" in m for m in said), said

        async def kai_says_so():
            got = await podgroup(here, KAI, owned_group(dep))
            return "QueueDoesNotExist" in str((got.get("status") or {}).get("schedulingConditions"))
        await until(kai_says_so, "KAI's own verdict QueueDoesNotExist on the group")


async def _event_kinds(here: Corner, reason: str, wanted: set[str]) -> bool:
    return wanted <= {e["involvedObject"]["kind"] for e in await here.events(reason)}


# ---------------------------------------------------------------------------
# the jobs AI teams run: the operators are played as play_leaderworkerset plays the LWS one


def controller_ref(owner: dict[str, Any]) -> dict[str, Any]:
    """The ownerReference a controller sets on what it makes (metav1.NewControllerRef)."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


async def play_pod(here: Corner, flavor: Flavor, name: str, owner: dict[str, Any], app: str,
                   labels: dict[str, str], gpus: int = 0) -> dict[str, Any]:
    """One pod an operator (or a pod of it: a Spark driver) makes, controlled by ``owner``."""
    template = pod_template(here, flavor, app, gpus=gpus, labels=labels)
    return await here.api.create(f"/api/v1/namespaces/{here.namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {**template["metadata"], "name": name, "ownerReferences": [controller_ref(owner)]},
        "spec": template["spec"]})


async def play_operator_pods(here: Corner, flavor: Flavor, owner: dict[str, Any], app: str,
                             roles: list[tuple[str, int, dict[str, str], int]],
                             index_label: str | None = None) -> None:
    """The pods an operator makes for ``owner``: per role (pod name stem, count, the labels
    the operator sets, GPUs per pod), owned by ``owner`` as its controller, each with its
    index in ``index_label`` when the operator sets one. No controller for these kinds runs
    here, so none fights the test over them."""
    for stem, count, labels, gpus in roles:
        for i in range(count):
            indexed = {**labels, index_label: str(i)} if index_label else labels
            await play_pod(here, flavor, f"{stem}-{i}", owner, app, indexed, gpus)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_pytorchjob_is_placed_all_at_once_or_not_at_all(cluster, podgang, flavor):
    """A master and three workers of 2 GPUs each (8 GPUs; one node has 4): none is bound until
    a second node makes room for all of them."""
    async with corner(cluster, f"pytorch-{flavor.backend}", nodes=1, labels=flavor.namespace_labels) as here:
        job = await here.api.create(f"/apis/kubeflow.org/v1/namespaces/{here.namespace}/pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "resnet"},
            "spec": {"pytorchReplicaSpecs": {
                rtype: {"replicas": count, "template": pod_template(here, flavor, "resnet", gpus=2)}
                for rtype, count in (("Master", 1), ("Worker", 3))}}})
        await wait_size(here, flavor, owned_group(job), 4)
        if flavor.backend == "volcano":
            group = await podgroup(here, flavor, owned_group(job))
            assert group["spec"]["minTaskMember"] == {"master": 1, "worker": 3}
        labels = {"training.kubeflow.org/job-name": "resnet", "training.kubeflow.org/operator-name": "pytorchjob-controller"}
        await play_operator_pods(here, flavor, job, "resnet", [
            ("resnet-master", 1, {**labels, "training.kubeflow.org/replica-type": "master"}, 2),
            ("resnet-worker", 3, {**labels, "training.kubeflow.org/replica-type": "worker"}, 2)])
        await wait_held_whole(here, "resnet", 4)
        await here.add_node()
        await wait_bound(here, "resnet", 4)


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_a_raycluster_is_placed_all_at_once_or_not_at_all(cluster, podgang, flavor):
    """A head and a worker group of three workers, 2 GPUs each (8 GPUs; one node has 4). (With a
    head that asks for nothing, coscheduling kept the gang waiting at Permit past the test's
    90 s after a second node came: left open, see the README's Known limits.)"""
    async with corner(cluster, f"ray-{flavor.backend}", nodes=1, labels=flavor.namespace_labels) as here:
        ray = await here.api.create(f"/apis/ray.io/v1/namespaces/{here.namespace}/rayclusters", {
            "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "ray"},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod_template(here, flavor, "ray", gpus=2)},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "minReplicas": 0, "maxReplicas": 3,
                                           "template": pod_template(here, flavor, "ray", gpus=2)}]}})
        await wait_size(here, flavor, owned_group(ray), 4)
        if flavor.backend == "volcano":
            group = await podgroup(here, flavor, owned_group(ray))
            assert group["spec"]["minTaskMember"] == {"gpu": 3, "headgroup": 1}
        await play_operator_pods(here, flavor, ray, "ray", [
            ("ray-head", 1, {"ray.io/cluster": "ray", "ray.io/group": "headgroup", "ray.io/node-type": "head"}, 2),
            ("ray-gpu-worker", 3, {"ray.io/cluster": "ray", "ray.io/group": "gpu", "ray.io/node-type": "worker"}, 2)])
        await wait_held_whole(here, "ray", 4)
        await here.add_node()
        await wait_bound(here, "ray", 4)
