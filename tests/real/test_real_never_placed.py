"""Gangs the real KAI will never place are named before anyone waits for them — and only those.

On the real KAI v0.17 from ``../shared/kube-bin``: a non-preemptible gang (a Deployment's,
``inference`` as KAI's own grouper gives it) in queues shaped like KAI's quickstart ones
(quota 0) is never bound, and KAI only says so in its PodGroup's status; a gang larger than
the nodes it may use waits with "Resources were found for 3 pods while 9 are required",
which reads like "not yet". podgang says "never" at once, on the workload and the PodGroup,
with the numbers and the fix, and takes it back when the cause goes.
"""

from __future__ import annotations

import time
import uuid

import yaml

from tests.realcluster import KAI_TEAM_QUEUE, Corner, FakeKubelet, bound, corner, create_all, example, until
from tests.real.test_real_journeys import KAI, KAI_SHARED_GPU_CONFIGMAP, owned_group, podgroup, unschedulable

NEVER, CLEARED = "GangNeverPlaced", "GangNoLongerNeverPlaced"
#: the issue asks for the verdict within 10 s; a loaded 2-core machine gets some slack here
SAID_WITHIN = 30.0
QUEUES = "/apis/scheduling.run.ai/v2/queues"


def quickstart_like(name: str, parent: str | None = None) -> dict:
    """A KAI Queue as KAI's quickstart makes its default ones: every quota 0, no limit."""
    zero = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    spec: dict = {"resources": {"cpu": zero, "gpu": zero, "memory": zero}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


async def said(here: Corner, reason: str, kinds: set[str], contains: str = "") -> list[dict]:
    """The events ``reason`` about each of ``kinds`` in the test's namespace, once all are there."""
    async def found():
        events = [e for e in await here.events(reason) if contains in e.get("message", "")]
        return events if kinds <= {e["involvedObject"]["kind"] for e in events} else None
    return await until(found, f"{reason} events on {sorted(kinds)} containing {contains!r}", SAID_WITHIN)


async def wait_bound(here: Corner, app: str, count: int) -> None:
    async def all_bound():
        return len(bound(await here.pods(app=app))) == count
    await until(all_bound, f"{count} pods of {app} bound")


def cpu_pod_template(here: Corner, app: str, cpu: str, labels: dict | None = None) -> dict:
    return {"metadata": {"labels": {"app": app, **(labels or {})}},
            "spec": {"schedulerName": "kai-scheduler", **here.placement, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/serve:1",
                                     "resources": {"requests": {"cpu": cpu}}}]}}


async def deployment(here: Corner, name: str, replicas: int, cpu: str, queue: str) -> dict:
    return await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": here.namespace, "labels": {"kai.scheduler/queue": queue}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": cpu_pod_template(here, name, cpu)}})


async def test_kai_an_inference_gang_over_a_quota_of_0_is_named_at_once_and_cleared_when_the_quota_grows(
        cluster, podgang):
    async with corner(cluster, "overquota", nodes=1) as here:
        suffix = uuid.uuid4().hex[:5]
        parent, leaf = f"parent-{suffix}", f"leaf-{suffix}"
        for queue in (quickstart_like(parent), quickstart_like(leaf, parent)):
            await here.api.create(QUEUES, queue)
        try:
            started = time.monotonic()
            dep = await deployment(here, "serve", 2, "1", leaf)
            events = await said(here, NEVER, {"Deployment", "PodGroup"}, "non-preemptible")
            took = time.monotonic() - started
            for event in events:
                message = event["message"]
                assert event["type"] == "Warning"
                assert "priority inference 125" in message and "2 CPU cores" in message, message
                assert f'"{leaf}" 0 CPU cores' in message and f'"{parent}" 0 CPU cores' in message, message
                assert "spec.resources.cpu.quota >= 2000" in message, message
            # one event per verdict and subject, not one per pod
            assert sorted(e["involvedObject"]["kind"] for e in events) == ["Deployment", "PodGroup"], events
            assert all((e.get("count") or 1) == 1 for e in events), events
            group = owned_group(dep)

            async def kai_agrees():
                got = await podgroup(here, KAI, group)
                return "NonPreemptibleOverQuota" in str(((got or {}).get("status") or {}).get("schedulingConditions"))
            await until(kai_agrees, "KAI's own verdict NonPreemptibleOverQuota on the group")
            assert not bound(await here.pods(app="serve"))

            for queue in (parent, leaf):  # the fix the event names: quota for both
                await here.api.merge_patch(f"{QUEUES}/{queue}", {"spec": {"resources": {"cpu": {"quota": 2000}}}})
            cleared = await said(here, CLEARED, {"Deployment", "PodGroup"})
            assert all(e["type"] == "Normal" and "no longer" in e["message"] for e in cleared), cleared
            await wait_bound(here, "serve", 2)
            print(f"verdict said {took:.1f}s after the Deployment was created")
        finally:
            for queue in (leaf, parent):
                await here.api.delete(f"{QUEUES}/{queue}")


async def test_kai_a_pod_created_directly_is_warned_at_admission_with_the_fix(cluster, podgang):
    """KAI's own quickstart queue (quota 0, made when the cluster came up) and a pod of
    priority inference: the user who creates it reads why it will never run, and the fix."""
    async with corner(cluster, "directpod", nodes=1) as here:
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "solo", "namespace": here.namespace},
               "spec": {"schedulerName": "kai-scheduler", "priorityClassName": "inference", **here.placement,
                        "containers": [{"name": "main", "image": "registry.example/x:1",
                                        "resources": {"requests": {"cpu": "1"}}}]}}
        done = cluster.kubectl_run("create", "-f", "-", input=yaml.safe_dump(pod))
        assert done.returncode == 0, done.stderr
        warnings = done.stderr
        assert "never placed: non-preemptible" in warnings and '"default-queue" 0 CPU cores' in warnings, warnings
        assert "spec.resources.cpu.quota >= 1000" in warnings, warnings
        # and where it is looked at later: on the pod (its own workload) and its PodGroup
        (on_pod, on_group) = sorted(await said(here, NEVER, {"Pod", "PodGroup"}, "non-preemptible"),
                                    key=lambda e: e["involvedObject"]["kind"])
        assert on_pod["involvedObject"]["name"] == "solo" and '"default-queue" 0 CPU cores' in on_group["message"]


async def test_kai_a_gang_larger_than_its_nodes_is_named_and_cleared_when_a_node_is_added(cluster, podgang):
    async with corner(cluster, "neverfits", nodes=3) as here:
        started = time.monotonic()
        dep = await deployment(here, "train", 9, "8", KAI_TEAM_QUEUE)
        events = await said(here, NEVER, {"Deployment", "PodGroup"}, "9 pods of cpu 8")
        took = time.monotonic() - started
        for event in events:
            assert "3 such pods" in event["message"] and "add nodes" in event["message"], event["message"]
        assert not bound(await here.pods(app="train"))
        await here.add_node(cpu="48")  # room for the 6 more pods

        cleared = await said(here, CLEARED, {"Deployment", "PodGroup"})
        assert all(e["type"] == "Normal" for e in cleared)
        await wait_bound(here, "train", 9)
        assert await podgroup(here, KAI, owned_group(dep))
        print(f"verdict said {took:.1f}s after the Deployment was created")


async def test_kai_a_gang_that_only_waits_for_room_is_not_said_never(cluster, podgang):
    """Room taken by another gang is not "never": the verdicts compare with the nodes' whole
    capacity and the queue's bounds, never with what is free now."""
    async with corner(cluster, "waits", nodes=1) as here:
        await deployment(here, "first", 1, "8", KAI_TEAM_QUEUE)
        await wait_bound(here, "first", 1)
        await deployment(here, "second", 1, "8", KAI_TEAM_QUEUE)

        async def held():
            pods = await here.pods(app="second")
            return pods and all(unschedulable(p) for p in pods) and not bound(pods)
        # KAI judges a gang only once its PodGroup exists, and the grouper says its verdicts in
        # the reconcile that makes the group: by KAI's verdict, podgang's would have been said
        await until(held, "KAI's verdict on the second gang, which waits for room")
        assert not await here.events(NEVER), await here.events(NEVER)


async def test_kai_seed_003_in_a_queue_of_quota_0_is_named_then_bound_when_the_quota_grows(cluster, podgang):
    """Seed 003 as written (priority inference, pods asking only gpu-memory), its group moved to a
    queue shaped like KAI's quickstart ones: KAI counts gpu-memory as a share of the largest GPU."""
    async with corner(cluster, "seed003q", nodes=1) as here, FakeKubelet(here):
        suffix = uuid.uuid4().hex[:5]
        parent, leaf = f"parent-{suffix}", f"leaf-{suffix}"
        for queue in (quickstart_like(parent), quickstart_like(leaf, parent)):
            await here.api.create(QUEUES, queue)
        try:
            docs = example("01-app-with-models.yaml", here.namespace, here.placement)
            for doc in docs:
                if doc["kind"] == "PodGroup":
                    doc["spec"]["queue"] = leaf
                else:  # what KAI's own admission webhook (not run here) adds to a GPU-sharing pod
                    doc["metadata"]["annotations"][KAI_SHARED_GPU_CONFIGMAP] = f"{doc['metadata']['name']}-shared-gpu"
            await create_all(here, docs)
            (event,) = await said(here, NEVER, {"PodGroup"}, "non-preemptible")
            assert "GPUs" in event["message"] and f'"{leaf}" 0 GPUs' in event["message"], event["message"]
            for queue in (parent, leaf):
                await here.api.merge_patch(f"{QUEUES}/{queue}", {"spec": {"resources": {"gpu": {"quota": -1}}}})
            await said(here, CLEARED, {"PodGroup"})

            async def all_bound():
                return len(bound(await here.pods())) == 3
            await until(all_bound, "seed 003's three pods bound")
        finally:
            for queue in (leaf, parent):
                await here.api.delete(f"{QUEUES}/{queue}")
