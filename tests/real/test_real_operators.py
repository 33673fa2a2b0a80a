"""Issue 45: podgang beside the workloads' **real** controllers — LWS v0.10, JobSet and
KubeRay built from source (``../shared/kube-bin-operators``), their own pod webhooks
included — on the real KAI and Volcano: seeds 000 and 001 step by step, no fight with an
operator's own scale-down, rolling update, group recreation and restart, KubeRay's own batch
schedulers, and the played controllers of the rest of the suite checked against the real ones.

One cluster of its own and the controllers started once (the ``operators`` fixture); LWS is
restarted once, between the tests that want its own Volcano gang management and those that
do not, and KubeRay twice, last, for its batch scheduler (settings of the controllers, not of
their objects: the tests are in that order). Nothing here is played: every
StatefulSet, Job and pod is the controllers' own; :class:`FakeKubelet` stands for the kubelets.
A fight would be podgang's ``GangStale``/``GangEvicted`` on pods an operator is removing or
replacing (grace period 5s): none may appear.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

from podgang.kinds.jobset import (JOBSET_JOB_INDEX_LABEL, JOBSET_NAME_LABEL, JOBSET_REPLICATED_JOB_LABEL,
                                  JOBSET_RESTART_ATTEMPT_LABEL)
from podgang.kinds.lws import LWS_GROUP_INDEX_LABEL, LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL
from podgang.kinds.ray import RAY_GROUP_LABEL, RAY_REPLICA_INDEX_LABEL
from podgang.settings import DEFAULT
from tests.emulated.test_operator_recovery import attempt, jobset
from tests.emulated.test_ray_emulator import kuberay_pod
from tests.emulated.test_replica_tree import lws, lws_pods
from tests.grouper_support import NS, uid
from tests.realcluster import KAI_TEAM_QUEUE, ROOT, Corner, FakeKubelet, bound, corner, holds, until
from tests.real.test_real_journeys import KAI, VOLCANO, Flavor, owned_group, wait_held_whole, wait_size
from tests.real.test_real_replicas import PlayedLws
from tests.real.test_real_workloads import jobset_labels

LWS_API = "/apis/leaderworkerset.x-k8s.io/v1"
JOBSET_API = "/apis/jobset.x-k8s.io/v1alpha2"
RAY_API = "/apis/ray.io/v1"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
#: what podgang says when it fights an operator: a gang judged stale, pods evicted
FIGHT = ("GangStale", "GangEvicted", "ReplicaBroken", "ReplicaEvicted")


# ---------------------------------------------------------------------------
# builders and looks


def container(here: Corner, flavor: Flavor, role: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"schedulerName": flavor.scheduler, **here.placement, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": role, "image": "nginx:latest",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}


def lws_manifest(here: Corner, flavor: Flavor, name: str, *, size: int = 4, replicas: int = 1, cpu: str = "100m",
                 memory: str = "128Mi") -> dict[str, Any]:
    """Seed 000's LeaderWorkerSet (a leader and workers templates, requests set), on ``flavor``."""
    def template(role: str) -> dict[str, Any]:
        return {"metadata": {"labels": {"app": name}}, "spec": container(here, flavor, role, cpu, memory)}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": here.namespace, "labels": flavor.workload_labels},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "leaderTemplate": template("leader"), "workerTemplate": template("worker")}}}


async def create(here: Corner, api: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    return await here.api.create(f"{api}/namespaces/{here.namespace}/{plural}", obj)


async def live_pods(here: Corner, **labels: str) -> list[dict[str, Any]]:
    return [p for p in await here.pods(**labels) if not p["metadata"].get("deletionTimestamp")]


async def wait_pods(here: Corner, count: int, what: str, *, ready: bool = False, **labels: str) -> list[dict]:
    """Exactly ``count`` live pods with ``labels``, all bound (and Running, with ``ready``), and
    none of them being deleted."""
    async def there():
        pods = await here.pods(**labels)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        if len(pods) != count or len(bound(live)) != count:
            return None
        return live if not ready or all((p.get("status") or {}).get("phase") == "Running" for p in live) else None
    return await until(there, f"{count} {what} bound")


async def groups(here: Corner, flavor: Flavor) -> list[dict[str, Any]]:
    return (await here.api.get(f"{flavor.podgroups}/namespaces/{here.namespace}/podgroups")).get("items") or []


async def assert_no_fight(here: Corner) -> None:
    fought = [f"{e['reason']} {e['involvedObject']['name']}: {e['message']}" for e in await here.events()
              if e.get("reason") in FIGHT]
    assert not fought, "podgang fought the operator:\n" + "\n".join(fought)


async def status(here: Corner, kit) -> list[dict[str, Any]]:
    """``podgang status -n <namespace> -o json``, as a user runs it."""
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "podgang.cli", "status", "-n", here.namespace, "-o", "json",
        "--backend", "kai-scheduler=kai", "--backend", "volcano=volcano", f"--kubeconfig={kit.cluster.kubeconfig}"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["gangs"]


async def scale(here: Corner, api: str, plural: str, name: str, patch: dict[str, Any]) -> None:
    await here.api.merge_patch(f"{api}/namespaces/{here.namespace}/{plural}/{name}", patch)


def condition(obj: dict[str, Any], kind: str) -> str | None:
    return next((c.get("status") for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind),
                None)


# ---------------------------------------------------------------------------
# seeds 000 and 001: LWS with its own Volcano gang management


async def test_seed_000_lws_gangs_its_groups_itself_and_podgang_makes_no_second_group(operators):
    """LWS run with ``gangSchedulingManagement: volcano`` makes a Volcano PodGroup per group
    (``<lws>-<group>-<revision>``, minMember = size) and names it on the pods through its own
    pod webhook. podgang makes no group of its own, leaves LWS's alone, says so (an OperatorGang
    event; ``podgang status``: one row, the operator's), and does not fight LWS's scale steps.
    The seed's cannot-fit gang (4 × 4 CPU, 8 free) stays all Pending until room is made."""
    await asyncio.to_thread(operators.operators.use_lws_gang, "volcano")
    async with corner(operators.cluster, "seed000", nodes=1) as here, FakeKubelet(here):
        await create(here, LWS_API, "leaderworkersets", lws_manifest(here, VOLCANO, "gang-test"))
        pods = await wait_pods(here, 4, "pods of gang-test", app="gang-test")
        (theirs,) = await groups(here, VOLCANO)
        name = theirs["metadata"]["name"]
        assert name.startswith("gang-test-0-") and theirs["spec"]["minMember"] == 4
        assert theirs["spec"]["minResources"] == {"cpu": "400m", "memory": "512Mi"}
        assert DEFAULT.managed_by_label not in (theirs["metadata"].get("labels") or {})  # LWS's, not podgang's
        assert {p["metadata"]["annotations"][VOLCANO_GROUP] for p in pods} == {name}
        assert await groups(here, KAI) == []
        said = await here.wait_events("OperatorGang")
        assert any(e["involvedObject"]["name"] == name for e in said)
        gangs = await status(here, operators)
        assert [g["group"] for g in gangs] == [name]  # no second, "not-created" row
        assert gangs[0]["minMemberFrom"].startswith("owned by the operator of leaderworkerset/gang-test")
        assert gangs[0]["state"] == "satisfied" and gangs[0]["minMember"] == 4

        # the seed's scale steps: 1 → 2 → 1 groups
        await scale(here, LWS_API, "leaderworkersets", "gang-test", {"spec": {"replicas": 2}})
        await wait_pods(here, 8, "pods of gang-test", app="gang-test")
        assert sorted(g["spec"]["minMember"] for g in await groups(here, VOLCANO)) == [4, 4]
        await scale(here, LWS_API, "leaderworkersets", "gang-test", {"spec": {"replicas": 1}})
        await wait_pods(here, 4, "pods of gang-test", app="gang-test")

        async def one_group():
            found = await groups(here, VOLCANO)
            return found if [g["metadata"]["name"] for g in found] == [name] else None
        await until(one_group, "LWS's PodGroup of group 1 gone with its leader")
        assert (await groups(here, VOLCANO))[0]["spec"]["minMember"] == 4  # untouched
        await assert_no_fight(here)

        # seed 000, tests 2 and 3: a gang that cannot fit stays whole, then is placed together
        await create(here, LWS_API, "leaderworkersets",
                     lws_manifest(here, VOLCANO, "gang-constrained", cpu="4", memory="1Gi"))
        await wait_held_whole(here, "gang-constrained", 4)  # 16 CPU wanted, 7.6 free
        (constrained,) = [g for g in await groups(here, VOLCANO)
                          if g["metadata"]["name"].startswith("gang-constrained-0-")]
        assert constrained["spec"]["minMember"] == 4 and constrained["spec"]["minResources"]["cpu"] == "16"
        await here.add_node()
        await here.add_node()
        await wait_pods(here, 4, "pods of gang-constrained", app="gang-constrained")
        assert await groups(here, KAI) == []
        await assert_no_fight(here)


async def test_seed_001_lws_without_its_gang_management_gets_podgangs_gangs_on_kai(operators):
    """The same LWS without LWS's own gang management, on KAI: podgang makes a KAI PodGroup
    per LWS group (size 4), the seed's cannot-fit gang stays all Pending until room is made,
    and its scale steps — a group added, a group removed by LWS — are followed, the removed
    group not taken for a stale gang."""
    await asyncio.to_thread(operators.operators.use_lws_gang, None)
    async with corner(operators.cluster, "seed001", nodes=1) as here, FakeKubelet(here):
        lws = await create(here, LWS_API, "leaderworkersets", lws_manifest(here, KAI, "gang-test"))
        base = owned_group(lws)
        await wait_size(here, KAI, f"{base}-group-0", 4)
        pods = await wait_pods(here, 4, "pods of gang-test", app="gang-test")
        assert {p["metadata"]["annotations"]["pod-group-name"] for p in pods} == {f"{base}-group-0"}
        assert VOLCANO_GROUP not in pods[0]["metadata"]["annotations"]
        await scale(here, LWS_API, "leaderworkersets", "gang-test", {"spec": {"replicas": 2}})
        await wait_size(here, KAI, f"{base}-group-1", 4)
        await wait_pods(here, 8, "pods of gang-test", app="gang-test", ready=True)
        await scale(here, LWS_API, "leaderworkersets", "gang-test", {"spec": {"replicas": 1}})
        await wait_pods(here, 4, "pods of gang-test", app="gang-test")

        async def retired():
            return [g["metadata"]["name"] for g in await groups(here, KAI)] == [f"{base}-group-0"]
        await until(retired, "podgang's group of the removed LWS group retired")
        await assert_no_fight(here)

        constrained = await create(here, LWS_API, "leaderworkersets",
                                   lws_manifest(here, KAI, "gang-constrained", cpu="4", memory="1Gi"))
        await wait_size(here, KAI, f"{owned_group(constrained)}-group-0", 4)
        await wait_held_whole(here, "gang-constrained", 4)
        await here.add_node()
        await here.add_node()
        await wait_pods(here, 4, "pods of gang-constrained", app="gang-constrained")
        await assert_no_fight(here)


# ---------------------------------------------------------------------------
# an operator's own rollout and recovery


async def test_an_lws_rolling_update_on_kai_is_not_fought(operators):
    """A template change rolls an LWS's groups one by one (maxUnavailable 1): LWS deletes a
    group's leader (its workers go with it) and makes the group again at the new revision. It
    counts the group updated once the new leader exists (``updatedReplicas``), its workers still
    to come; its UpdateInProgress condition stays True until all are Ready. No group podgang
    made is judged stale; the new revision's groups are sized as before, no group left over."""
    await asyncio.to_thread(operators.operators.use_lws_gang, None)
    async with corner(operators.cluster, "lws-roll", nodes=1) as here, FakeKubelet(here):
        lws = await create(here, LWS_API, "leaderworkersets", lws_manifest(here, KAI, "roll", size=3, replicas=2))
        base = owned_group(lws)
        before = await wait_pods(here, 6, "pods of roll", app="roll", ready=True)

        async def available():
            got = await here.api.get(f"{LWS_API}/namespaces/{here.namespace}/leaderworkersets/roll")
            return got if condition(got, "Available") == "True" else None
        await until(available, "LWS roll Available")
        old = {p["metadata"]["labels"][REVISION] for p in before}
        stamp = {"metadata": {"annotations": {"rollout": "2"}}}
        await scale(here, LWS_API, "leaderworkersets", "roll", {"spec": {"leaderWorkerTemplate": {
            "leaderTemplate": stamp, "workerTemplate": stamp}}})

        async def rolled():
            got = await here.api.get(f"{LWS_API}/namespaces/{here.namespace}/leaderworkersets/roll")
            pods = await here.pods(app="roll")
            new = [p for p in pods if p["metadata"]["labels"].get(REVISION) not in old
                   and (p.get("status") or {}).get("phase") == "Running"]
            done = (condition(got, "Available") == "True" and condition(got, "UpdateInProgress") != "True"
                    and len(pods) == len(new) == 6)
            return got if done else None
        await until(rolled, "every group of roll at the new revision, Running, and LWS Available")
        assert sorted((g["metadata"]["name"], g["spec"]["minMember"]) for g in await groups(here, KAI)) == [
            (f"{base}-group-0", 3), (f"{base}-group-1", 3)]
        await assert_no_fight(here)


async def recreate_group(here: Corner, trigger, group: str, first: list[dict[str, Any]], why: str) -> list[dict]:
    """``trigger`` (a worker restarted or deleted) makes LWS recreate the group whole: wait for
    its ``size`` new pods (none of ``first``), all bound and Running, in podgang's ``group``."""
    await trigger()
    old = {p["metadata"]["uid"] for p in first}

    async def recreated():
        pods = await here.pods(app="recreate")
        fresh = [p for p in pods if p["metadata"]["uid"] not in old]
        running = [p for p in fresh if (p.get("status") or {}).get("phase") == "Running"]
        return fresh if len(pods) == len(running) == len(first) and len(bound(fresh)) == len(first) else None
    new = await until(recreated, f"LWS recreate's group made again ({why}): {len(first)} new pods bound and Running")
    assert {p["metadata"]["annotations"]["pod-group-name"] for p in new} == {group}
    await wait_size(here, KAI, group, len(first))
    return new


async def test_an_lws_group_recreated_on_a_pod_restart_is_followed_not_evicted(operators):
    """LWS's ``restartPolicy: RecreateGroupOnPodRestart`` (its webhook's default): when a worker's
    container restarts or a worker is deleted, LWS deletes the group's leader (foreground: the
    workers' StatefulSet and pods go with it) and the group is made again, leader first. podgang
    evicts nothing LWS is replacing, and its group follows the new pods: size 4, all 4 bound."""
    await asyncio.to_thread(operators.operators.use_lws_gang, None)
    async with corner(operators.cluster, "lws-recreate", nodes=1) as here, FakeKubelet(here):
        lws = await create(here, LWS_API, "leaderworkersets", lws_manifest(here, KAI, "recreate"))
        assert lws["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
        group = f"{owned_group(lws)}-group-0"
        await wait_size(here, KAI, group, 4)
        first = await wait_pods(here, 4, "pods of recreate", app="recreate", ready=True)

        def worker(pods: list[dict[str, Any]]) -> dict[str, Any]:
            return next(p for p in pods if p["metadata"]["labels"][WORKER_INDEX] == "1")

        async def restart() -> None:  # what a kubelet reports when a container exits and is restarted
            pod = worker(first)
            statuses = [{**s, "restartCount": 1} for s in pod["status"]["containerStatuses"]]
            await here.api.merge_patch(f"/api/v1/namespaces/{here.namespace}/pods/{pod['metadata']['name']}/status",
                                       {"status": {"containerStatuses": statuses}})
        second = await recreate_group(here, restart, group, first, "a worker's container restarted")

        async def delete() -> None:  # kubectl delete pod: graceful; the kubelet finishes it
            await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/{worker(second)['metadata']['name']}",
                                  {"gracePeriodSeconds": 30})
        await recreate_group(here, delete, group, second, "a worker deleted")
        assert len(await here.events("RecreateGroup")) >= 2  # LWS's own: "deleted leader pod … to recreate group 0"
        await assert_no_fight(here)


def jobset_manifest(here: Corner, name: str, pods: int) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}},
                "spec": {**container(here, KAI, "worker", "100m", "128Mi"), "restartPolicy": "Never"}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": here.namespace, "labels": KAI.workload_labels},
            "spec": {"failurePolicy": {"maxRestarts": 2},
                     "replicatedJobs": [{"name": "workers", "replicas": 1, "template": {"spec": {
                         "parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template}}}]}}


async def test_a_jobset_restarted_by_its_failure_policy_is_followed_not_evicted(operators):
    """A worker fails; its Job fails (backoffLimit 0) and JobSet's failure policy restarts the
    JobSet: ``status.restarts`` 1, every Job deleted and made again with ``restart-attempt: 1``.
    podgang's gang follows the new attempt (the same group, its 5 new pods bound together) and
    evicts nothing the operator is replacing."""
    async with corner(operators.cluster, "js-restart", nodes=1) as here, FakeKubelet(here):
        js = await create(here, JOBSET_API, "jobsets", jobset_manifest(here, "train", 5))
        group = owned_group(js)
        await wait_size(here, KAI, group, 5)
        first = await wait_pods(here, 5, "pods of train", app="train", ready=True)
        assert {p["metadata"]["labels"][RESTART_ATTEMPT] for p in first} == {"0"}
        victim = first[0]["metadata"]["name"]
        now = first[0]["status"]["startTime"]
        await here.api.merge_patch(f"/api/v1/namespaces/{here.namespace}/pods/{victim}/status", {"status": {
            "phase": "Failed", "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
            "containerStatuses": [{"name": "worker", "image": "nginx:latest", "imageID": "", "ready": False,
                                   "restartCount": 0, "state": {"terminated": {
                                       "exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}}}]}})

        async def restarted():
            got = await here.api.get(f"{JOBSET_API}/namespaces/{here.namespace}/jobsets/train")
            pods = await here.pods(app="train")
            new = [p for p in pods if p["metadata"]["labels"].get(RESTART_ATTEMPT) == "1"]
            done = ((got.get("status") or {}).get("restarts") == 1 and len(pods) == len(new) == 5
                    and len(bound(new)) == 5 and condition(got, "RestartingJobSet") == "False")
            return new if done else None
        new = await until(restarted, "JobSet train restarted: attempt 1's 5 pods bound, RestartingJobSet False")
        assert {p["metadata"]["annotations"]["pod-group-name"] for p in new} == {group}
        await wait_size(here, KAI, group, 5)  # KAI's JobSet tree: its leaves hold the 5
        evicted = [e["message"] for e in await here.events("GangEvicted")]
        assert not evicted, evicted
        stale = [e["message"] for e in await here.events("GangStale")]
        # the grouper may look between the pod failing and JobSet's restart (milliseconds):
        # then a GangStale is followed by its GangRecovered, never by an eviction
        if stale:
            assert await here.events("GangRecovered"), stale


def ray_pod(here: Corner, flavor: Flavor | None, app: str) -> dict[str, Any]:
    """A Ray node's template; without ``flavor`` no schedulerName (KubeRay's batch scheduler sets it)."""
    spec = container(here, flavor or KAI, "ray", "100m", "128Mi")
    if flavor is None:
        del spec["schedulerName"]
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


def workers(pod: dict[str, Any], replicas: int, minimum: int, **more: Any) -> list[dict[str, Any]]:
    return [{"groupName": "workers", "replicas": replicas, "minReplicas": minimum, "maxReplicas": 4,
             "rayStartParams": {}, "template": pod, **more}]


def ray_cluster(here: Corner, name: str, pod: dict[str, Any], replicas: int, minimum: int,
                labels: dict[str, str]) -> dict[str, Any]:
    """A RayCluster: a head and one worker group ``workers`` of ``pod``."""
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": name, "namespace": here.namespace, "labels": labels},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": pod},
                     "workerGroupSpecs": workers(pod, replicas, minimum)}}


async def test_a_kuberay_worker_group_scaled_as_its_autoscaler_does_is_followed(operators):
    """KubeRay (no batch scheduler) makes a head and a worker group on KAI; podgang's gang is
    the head plus the group's ``minReplicas`` (docs/workloads/ray.md). The autoscaler raises
    ``replicas`` (the gang stays at its minimum, the new workers join it) and lowers it with
    ``scaleStrategy.workersToDelete`` naming the workers to remove — not a stale gang; a raised
    ``minReplicas`` raises the gang."""
    async with corner(operators.cluster, "ray-scale", nodes=1) as here, FakeKubelet(here):
        pod = ray_pod(here, KAI, "rc")
        rc = await create(here, RAY_API, "rayclusters", ray_cluster(here, "rc", pod, 2, 2, KAI.workload_labels))
        group = owned_group(rc)
        await wait_size(here, KAI, group, 3)
        await wait_pods(here, 3, "pods of rc", app="rc", ready=True)
        await scale(here, RAY_API, "rayclusters", "rc", {"spec": {"workerGroupSpecs": workers(pod, 4, 2)}})
        pods = await wait_pods(here, 5, "pods of rc", app="rc", ready=True)
        assert (await wait_size(here, KAI, group, 3))["spec"]["minMember"] == 3
        doomed = sorted(p["metadata"]["name"] for p in pods if p["metadata"]["labels"].get("ray.io/node-type") == "worker")[:2]
        await scale(here, RAY_API, "rayclusters", "rc", {"spec": {"workerGroupSpecs": workers(
            pod, 2, 2, scaleStrategy={"workersToDelete": doomed})}})
        left = await wait_pods(here, 3, "pods of rc", app="rc")
        assert not {p["metadata"]["name"] for p in left} & set(doomed)
        await scale(here, RAY_API, "rayclusters", "rc", {"spec": {"workerGroupSpecs": workers(pod, 3, 3)}})
        await wait_size(here, KAI, group, 4)
        await wait_pods(here, 4, "pods of rc", app="rc")
        await assert_no_fight(here)


# ---------------------------------------------------------------------------
# the played controllers of the rest of the suite, checked against the real ones

#: the pod labels podgang's kinds read (podgang/kinds/lws.py, jobset.py, ray.py)
READ = (LWS_NAME_LABEL, LWS_GROUP_INDEX_LABEL, LWS_WORKER_INDEX_LABEL, JOBSET_NAME_LABEL, JOBSET_REPLICATED_JOB_LABEL,
        JOBSET_JOB_INDEX_LABEL, JOBSET_RESTART_ATTEMPT_LABEL, RAY_GROUP_LABEL, RAY_REPLICA_INDEX_LABEL)
Chain = tuple[tuple[str, str, bool], ...]


def read(labels: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k in READ}


async def real_chain(here: Corner, obj: dict[str, Any]) -> Chain:
    """The owners above ``obj`` as the apiserver holds them: (kind, name, controller) of each
    ownerReference, one an object, up to the object no one owns."""
    out: list[tuple[str, str, bool]] = []
    while refs := obj["metadata"].get("ownerReferences") or []:
        assert len(refs) == 1, refs
        (ref,) = refs
        out.append((ref["kind"], ref["name"], ref.get("controller") is True))
        root = "/api/v1" if ref["apiVersion"] == "v1" else f"/apis/{ref['apiVersion']}"
        obj = await here.api.get(f"{root}/namespaces/{here.namespace}/{ref['kind'].lower()}s/{ref['name']}")
    return tuple(out)


def played_chain(obj: dict[str, Any], made: list[dict[str, Any]]) -> Chain:
    by_uid = {o["metadata"]["uid"]: o for o in made}
    out: list[tuple[str, str, bool]] = []
    while refs := obj["metadata"].get("ownerReferences") or []:
        assert len(refs) == 1, refs
        (ref,) = refs
        out.append((ref["kind"], ref["name"], ref.get("controller") is True))
        obj = by_uid[ref["uid"]]
    return tuple(out)


async def real_shapes(here: Corner, pods: list[dict[str, Any]]) -> list[tuple[dict[str, str], Chain]]:
    return sorted([(read(p["metadata"]["labels"]), await real_chain(here, p)) for p in pods], key=repr)


def played_shapes(pods: list[dict[str, Any]], owners: list[dict[str, Any]]) -> list[tuple[dict[str, str], Chain]]:
    """The same of the pods a builder played, ``owners`` (and the pods themselves: an LWS leader
    owns its workers' StatefulSet) standing for the apiserver."""
    return sorted([(read(p["metadata"]["labels"]), played_chain(p, [*owners, *pods])) for p in pods], key=repr)


async def test_the_played_lws_jobset_and_kuberay_write_what_the_real_controllers_write(operators):
    """The rest of the suite plays these controllers: ``lws_pods`` (tests/emulated/test_replica_tree.py)
    and ``PlayedLws`` (tests/real/test_real_replicas.py), the JobSet of ``attempt``
    (tests/emulated/test_operator_recovery.py) and ``jobset_labels`` (tests/real/test_real_workloads.py),
    KubeRay's ``kuberay_pod`` (tests/emulated/test_ray_emulator.py). What each writes on the pods
    that podgang's kinds read, and the chain of owners above them (kind, name, controller), is
    what the real controllers write for the same objects. One difference stays, on purpose:
    PlayedLws's pods name their StatefulSet without ``controller: true`` (else the real
    StatefulSet controller would take them); podgang follows the first owner when none controls."""
    await asyncio.to_thread(operators.operators.use_lws_gang, None)
    async with corner(operators.cluster, "played", nodes=1) as here:
        await create(here, LWS_API, "leaderworkersets", lws_manifest(here, KAI, "lw", size=3))
        await create(here, JOBSET_API, "jobsets", jobset_manifest(here, "js", 2))
        await create(here, RAY_API, "rayclusters", ray_cluster(here, "rc", ray_pod(here, KAI, "rc"), 2, 2,
                                                               KAI.workload_labels))
        real_lws = await wait_pods(here, 3, "pods of lw", app="lw")
        real_js = await wait_pods(here, 2, "pods of js", app="js")
        real_ray = await wait_pods(here, 3, "pods of rc", app="rc")

        played = lws("lw", 1, 3, group=None)
        owners, pods = lws_pods(played, group=None)
        assert played_shapes(pods, [played, *owners]) == await real_shapes(here, real_lws)
        assert sorted((read(PlayedLws(here, "lw", 3).pod_labels(0, w)) for w in range(3)), key=repr) == sorted(
            (read(p["metadata"]["labels"]) for p in real_lws), key=repr)

        played = jobset("js", 2)
        job, pods = attempt(played, 0, 2)
        assert played_shapes(pods, [played, job]) == await real_shapes(here, real_js)
        assert [read(jobset_labels("js", "workers", 1, 0, here.namespace))] * 2 == [
            read(p["metadata"]["labels"]) for p in real_js]

        played = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", "namespace": NS, "uid": uid()}}
        pods = [kuberay_pod(played, "headgroup", 0), *(kuberay_pod(played, "workers", i) for i in range(2))]
        assert played_shapes(pods, [played]) == await real_shapes(here, real_ray)


# ---------------------------------------------------------------------------
# KubeRay's batch schedulers (a flag of the controller: KubeRay restarted, last in the module)


async def test_kuberay_with_its_kai_batch_scheduler_is_gang_scheduled_by_podgangs_group(operators):
    """KubeRay run with ``--batch-scheduler=kai-scheduler`` makes no PodGroup (its KAI plugin
    leaves that to a pod-grouper): it sets ``schedulerName: kai-scheduler`` on the cluster's
    pods and copies the RayCluster's ``kai.scheduler/queue`` label to them. The templates name no
    scheduler: podgang's group — head + minReplicas — is the one KAI places the pods by, the
    only one, and ``podgang status`` shows it as podgang's."""
    await asyncio.to_thread(operators.operators.use_kuberay_batch_scheduler, "kai-scheduler")
    async with corner(operators.cluster, "ray-kai", nodes=1) as here, FakeKubelet(here):
        rc = await create(here, RAY_API, "rayclusters",
                          ray_cluster(here, "rck", ray_pod(here, None, "rck"), 2, 2, KAI.workload_labels))
        group = owned_group(rc)
        await wait_size(here, KAI, group, 3)
        pods = await wait_pods(here, 3, "pods of rck", app="rck", ready=True)
        assert {p["spec"]["schedulerName"] for p in pods} == {"kai-scheduler"}  # KubeRay's, not the template's
        assert {p["metadata"]["labels"].get("kai.scheduler/queue") for p in pods} == {KAI_TEAM_QUEUE}
        assert {p["metadata"]["annotations"]["pod-group-name"] for p in pods} == {group}
        assert [g["metadata"]["name"] for g in await groups(here, KAI)] == [group]
        assert await groups(here, VOLCANO) == []
        gangs = await status(here, operators)
        assert [g["group"] for g in gangs] == [group] and gangs[0]["state"] == "satisfied"
        assert not gangs[0]["minMemberFrom"].startswith("owned by the operator")
        await assert_no_fight(here)


async def test_kuberay_with_its_volcano_batch_scheduler_gangs_its_cluster_itself(operators):
    """KubeRay run with ``--batch-scheduler=volcano`` makes a Volcano PodGroup per RayCluster
    (``ray-<name>-pg``, owned by the cluster; minMember head + the workers' ``replicas`` when the
    autoscaler is off) and names it on the pods, whose schedulerName it sets. podgang makes no
    second group, says whose it is (an OperatorGang event; ``podgang status``: one row, the
    operator's) and leaves its size: workers scaled 2 → 3, KubeRay makes it 4 (podgang's own
    rule, head + minReplicas, would say 3) and it stays 4."""
    await asyncio.to_thread(operators.operators.use_kuberay_batch_scheduler, "volcano")
    async with corner(operators.cluster, "ray-volcano", nodes=1) as here, FakeKubelet(here):
        pod = ray_pod(here, None, "rcv")
        await create(here, RAY_API, "rayclusters", ray_cluster(here, "rcv", pod, 2, 2, {}))
        pods = await wait_pods(here, 3, "pods of rcv", app="rcv", ready=True)
        (theirs,) = await groups(here, VOLCANO)
        assert theirs["metadata"]["name"] == "ray-rcv-pg" and theirs["spec"]["minMember"] == 3
        assert [(o["kind"], o["name"]) for o in theirs["metadata"]["ownerReferences"]] == [("RayCluster", "rcv")]
        assert DEFAULT.managed_by_label not in (theirs["metadata"].get("labels") or {})  # KubeRay's, not podgang's
        assert {p["spec"]["schedulerName"] for p in pods} == {"volcano"}
        assert {p["metadata"]["annotations"][VOLCANO_GROUP] for p in pods} == {"ray-rcv-pg"}
        assert await groups(here, KAI) == []
        said = await here.wait_events("OperatorGang")
        assert any(e["involvedObject"]["name"] == "ray-rcv-pg" for e in said)
        gangs = await status(here, operators)
        assert [g["group"] for g in gangs] == ["ray-rcv-pg"]
        assert gangs[0]["minMemberFrom"].startswith("owned by the operator of raycluster/rcv")

        await scale(here, RAY_API, "rayclusters", "rcv", {"spec": {"workerGroupSpecs": workers(pod, 3, 2)}})
        await wait_pods(here, 4, "pods of rcv", app="rcv", ready=True)
        await wait_size(here, VOLCANO, "ray-rcv-pg", 4)

        async def kubrays_size():
            return [(g["metadata"]["name"], g["spec"]["minMember"]) for g in await groups(here, VOLCANO)] == [
                ("ray-rcv-pg", 4)]
        await holds(kubrays_size, "KubeRay's PodGroup alone, at KubeRay's size 4", 3.0)
        await assert_no_fight(here)
