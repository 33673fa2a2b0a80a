"""A backfill on a real kube-apiserver + etcd with KAI's CRDs: pods a training-operator made
while podgang's webhook was not there get everything they need from the grouper in ONE write
each — their group, their role's subgroup, KAI's skip key — and the backfill is said with the
count, in one event for the gangs of a namespace settled at once. Counted from the apiserver's
own watch: every change of a pod's membership keys is one etcd write (KAI's scheduler and
binder write these pods too, once they are grouped: their changes touch other keys), and
nothing else sets those keys here (the pods' scheduler name is mapped to KAI by this test's
grouper only, so neither the session's podgang nor KAI's own pod-grouper groups them). The
namespace is the one the session's podgang leaves alone: its grouper would otherwise take this
test's PodGroups for groups no workload of its has, and delete them."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from podgang.api import Api, Conflict, make_api_client
from podgang.grouper import cli
from tests.grouper_support import args
from tests.realcluster import TEST_OWN_NAMESPACE, until
from tests.training_operator import operator_pods, pytorchjob

SCHEDULER = "kai-backfill"  # mapped to the KAI backend by this test's grouper only
ANNOTATION, SUBGROUP, SKIP = "pod-group-name", "kai.scheduler/subgroup-name", "kai.scheduler/skip-podgrouper"
KEYS = (("annotations", ANNOTATION), ("annotations", SKIP), ("labels", "kai.scheduler/podgroup"), ("labels", SUBGROUP))
JOBS, WORKERS = 3, 4


async def test_a_backfill_writes_each_pod_once_and_says_it_once_per_namespace(cluster, podgang):
    ns = TEST_OWN_NAMESPACE
    run = uuid.uuid4().hex[:5]
    client = await make_api_client(cluster.kubeconfig)
    api = Api(client, timeout=15)
    writes: dict[str, list[tuple]] = {}  # pod -> its membership keys after each change of them
    seen: dict[str, tuple] = {}  # pod -> its membership keys as the watch last saw them
    watching = None
    try:
        try:
            await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        except Conflict:
            pass  # tests/real/test_grouper_apiserver.py made it
        jobs = [await api.create(f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs",
                                 pytorchjob(f"backfill-{run}-{n}", WORKERS, scheduler=SCHEDULER)) for n in range(JOBS)]
        names = []
        for job in jobs:  # the webhook is not there for these pods: admitted as the operator made them
            for pod in operator_pods(job):
                names.append((await api.create(f"/api/v1/namespaces/{ns}/pods", pod))["metadata"]["name"])
        mine = {"labelSelector": f"app in ({','.join(j['metadata']['name'] for j in jobs)})"}
        listed = await api.get(f"/api/v1/namespaces/{ns}/pods", **mine)
        seen.update({p["metadata"]["name"]: _keys(p) for p in listed["items"]})
        watching = asyncio.create_task(_count_changes(api, ns, listed["metadata"]["resourceVersion"], seen, writes,
                                                      mine))

        holder: list[Any] = []
        stop = asyncio.Event()
        grouper = asyncio.create_task(cli.serve(args(kubeconfig=cluster.kubeconfig, namespaces=[ns],
                                                     backends=[(SCHEDULER, "kai")]),
                                                stop=stop, on_controller=holder.append))
        try:
            groups = {job["metadata"]["name"]: f"pg-{job['metadata']['name']}-{job['metadata']['uid']}" for job in jobs}

            async def all_backfilled():
                pods = (await api.get(f"/api/v1/namespaces/{ns}/pods", **mine))["items"]
                done = [p for p in pods if (p["metadata"].get("annotations") or {}).get(ANNOTATION)
                        and (p["metadata"].get("labels") or {}).get(SUBGROUP)]
                return pods if len(done) == len(names) else None

            pods = await until(all_backfilled, "every pod backfilled with its group and subgroup", 60)
            for pod in pods:
                md = pod["metadata"]
                job = md["labels"]["training.kubeflow.org/job-name"]
                assert md["annotations"][ANNOTATION] == groups[job] and md["annotations"][SKIP] == "true"
                assert md["labels"][SUBGROUP] == md["labels"]["training.kubeflow.org/replica-type"]

            async def idle():
                controller = holder[-1] if holder else None
                return controller is not None and controller.initial_reconcile_done and not controller.queue.busy()

            await until(idle, "the grouper idle", 30)
            # the watch has seen every pod's membership as it is now: nothing of the backfill is on its way
            pods = (await api.get(f"/api/v1/namespaces/{ns}/pods", **mine))["items"]
            latest = {p["metadata"]["name"]: _keys(p) for p in pods}
            await until(_async(lambda: all(seen.get(n) == keys for n, keys in latest.items())), "the watch caught up", 30)
            assert sorted(writes) == sorted(names)
            assert {n: changes for n, changes in writes.items() if len(changes) != 1} == {}, \
                "pods whose membership was written more than once"

            async def said():  # the grouper made each job's group and backfilled its pods: one event says it all
                events = [e for e in (await api.get(f"/api/v1/namespaces/{ns}/events"))["items"]
                          if e["source"].get("component") == "podgang-grouper" and e["type"] == "Normal"
                          and any(g in e["message"] for g in groups.values())]
                told = {g for g in groups.values() if any(g in e["message"] for e in events)}
                return events if told == set(groups.values()) else None

            events = await until(said, "every gang's creation and backfill said", 30)
            # one event for the namespace's gangs settled at once, not an etcd write per gang
            assert len(events) < JOBS, [(e["reason"], e["message"]) for e in events]
            assert all(e["reason"] == "PodGroupCreated" and e["involvedObject"]["kind"] == "PodGroup"
                       and e["involvedObject"]["name"] in groups.values()
                       and e["count"] == 1 and f"; {1 + WORKERS} pods backfilled: " in e["message"]
                       for e in events), [(e["reason"], e["message"]) for e in events]
        finally:
            stop.set()
            assert await asyncio.wait_for(grouper, 30) in (0, 1)
    finally:
        if watching is not None:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        for job in locals().get("jobs") or ():  # its pods and PodGroup go with it (owner references)
            await api.delete(f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{job['metadata']['name']}",
                             {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"})
        await client.close()


def _keys(pod: dict[str, Any]) -> tuple:
    md = pod["metadata"]
    return tuple((md.get(section) or {}).get(key) for section, key in KEYS)


async def _count_changes(api: Api, ns: str, resource_version: str, seen: dict[str, tuple],
                         writes: dict[str, list[tuple]], query: dict[str, str]) -> None:
    while True:
        async for event in api.watch(f"/api/v1/namespaces/{ns}/pods", resource_version=resource_version,
                                     timeout_seconds=300, query=query):
            md = event["object"]["metadata"]
            resource_version = md["resourceVersion"]
            if event["type"] == "MODIFIED" and _keys(event["object"]) != seen.get(md["name"]):
                seen[md["name"]] = _keys(event["object"])
                writes.setdefault(md["name"], []).append(seen[md["name"]])


def _async(check):
    async def wrapped():
        return check()
    return wrapped
