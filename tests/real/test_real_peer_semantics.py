"""Issue 23 on the real schedulers: gang intent the peer projects write in their own fields.

KAI places a LeaderReady LeaderWorkerSet group leader first, then its workers together, and
a Job pinned by KAI's own ``kai.scheduler/batch-min-member``; coscheduling starts the
scheduler-plugins demo's "3 of 6" elastic gang as written; Volcano places a SparkApplication
whose spark-operator made its own PodGroup, with no second one from podgang. What has no
controller here (LWS, spark-operator) is played by the test, as the other real journeys do.
"""

from __future__ import annotations

from typing import Any

from podgang.api import NotFound
from tests.realcluster import Corner, bound, corner, until
from tests.real.test_real_journeys import (COSCHEDULING, KAI, VOLCANO, controller_ref, owned_group, pod_template, podgroup,
                                      wait_size)


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


async def named_pods(here: Corner, names: list[str]) -> list[dict[str, Any]]:
    return [p for p in await here.pods() if p["metadata"]["name"] in names]


async def wait_all_bound(here: Corner, names: list[str]) -> list[dict[str, Any]]:
    async def all_bound():
        pods = await named_pods(here, names)
        return pods if len(pods) == len(names) and len(bound(pods)) == len(names) else None
    return await until(all_bound, f"{', '.join(names)} bound")


async def wait_none_bound(here: Corner, names: list[str]) -> None:
    """Each of ``names`` has the scheduler's verdict (PodScheduled False) and none is bound."""
    async def held():
        pods = await named_pods(here, names)
        return len(pods) == len(names) and not bound(pods) and all(unschedulable(p) for p in pods)
    await until(held, f"{', '.join(names)} held whole")


# ---------------------------------------------------------------------------
# 1. KAI: a LeaderReady LWS group, the leader first and then its workers together


async def test_kai_leader_ready_group_places_its_leader_then_its_workers_together(cluster, podgang):
    """LWS makes a LeaderReady group's workers only once its leader is Ready. A gang of 3
    would keep the leader Pending for ever; podgang's gang is the leader alone until it is
    placed, then the group: its two workers (2 GPUs each, 2 left on the node) wait whole for
    a second node and are then placed together."""
    async with corner(cluster, "kai-lws-ready", nodes=1) as here:
        ns = here.namespace
        lws = await here.api.create(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets", {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "llm", "namespace": ns, "labels": KAI.workload_labels},
            "spec": {"replicas": 1, "startupPolicy": "LeaderReady", "leaderWorkerTemplate": {
                "size": 3, "workerTemplate": pod_template(here, KAI, "llm", gpus=2)}}})

        async def played(kind_path: str, name: str, owner: dict[str, Any]) -> dict[str, Any]:
            """A StatefulSet as LWS makes it (none of the played pods match its selector)."""
            return await here.api.create(f"/apis/apps/v1/namespaces/{ns}/{kind_path}", {
                "apiVersion": "apps/v1", "kind": "StatefulSet",
                "metadata": {"name": name, "namespace": ns, "ownerReferences": [controller_ref(owner)]},
                "spec": {"replicas": 0, "serviceName": "llm", "podManagementPolicy": "Parallel",
                         "selector": {"matchLabels": {"played": name}},
                         "template": {"metadata": {"labels": {"played": name}},
                                      "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]}}}})

        async def member(name: str, owner: dict[str, Any], worker: int) -> dict[str, Any]:
            template = pod_template(here, KAI, "llm", gpus=2, labels={
                "leaderworkerset.sigs.k8s.io/name": "llm", "leaderworkerset.sigs.k8s.io/group-index": "0",
                "leaderworkerset.sigs.k8s.io/worker-index": str(worker)})
            ref = {**controller_ref(owner), "controller": False}  # its StatefulSet's controller leaves it alone
            return await here.api.create(f"/api/v1/namespaces/{ns}/pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {**template["metadata"], "name": name, "ownerReferences": [ref]},
                "spec": template["spec"]})

        leaders = await played("statefulsets", "llm", lws)
        leader = await member("llm-0", leaders, 0)
        group = f"{owned_group(lws)}-group-0"
        await wait_size(here, KAI, group, 1)  # the leader alone: LWS makes no worker yet
        await wait_all_bound(here, ["llm-0"])
        await wait_size(here, KAI, group, 3)  # placed: the gang is now the group
        workers = await played("statefulsets", "llm-0", leader)  # LWS, once the leader is Ready
        names = ["llm-0-1", "llm-0-2"]
        for i, name in enumerate(names, 1):
            await member(name, workers, i)
        await wait_none_bound(here, names)  # 4 GPUs wanted, 2 left: neither starts alone
        await here.add_node()
        pods = await wait_all_bound(here, names)
        assert {p["metadata"]["annotations"]["pod-group-name"] for p in pods} == {group}


# ---------------------------------------------------------------------------
# 4. KAI: kai.scheduler/batch-min-member pins a Job's gang as KAI's own grouper does


async def test_kai_batch_min_member_lets_a_job_start_with_part_of_its_pods(cluster, podgang):
    """A Job of 3 × 2 GPUs on one node of 4, annotated for KAI with a minimum of 2: KAI's own
    grouper would start 2 of them; so does podgang's group (a gang of 3 would start none)."""
    async with corner(cluster, "kai-batch-min", nodes=1) as here:
        template = pod_template(here, KAI, "sweep", gpus=2)
        template["spec"]["restartPolicy"] = "Never"
        job = await here.api.create(f"/apis/batch/v1/namespaces/{here.namespace}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "sweep", "namespace": here.namespace, "labels": KAI.workload_labels,
                         "annotations": {"kai.scheduler/batch-min-member": "2"}},
            "spec": {"parallelism": 3, "completions": 3, "template": template}})
        await wait_size(here, KAI, owned_group(job), 2)

        async def two_of_three():
            pods = await here.pods(app="sweep")
            return pods if len(pods) == 3 and len(bound(pods)) == 2 else None
        pods = await until(two_of_three, "2 of the Job's 3 pods bound")
        assert all(p["metadata"]["annotations"]["pod-group-name"] == owned_group(job) for p in pods)


# ---------------------------------------------------------------------------
# 3. coscheduling: the scheduler-plugins demo, "3 of 6", is an elastic gang on purpose


async def test_coscheduling_elastic_gang_starts_as_written(cluster, podgang):
    """A PodGroup of minMember 3 and a ReplicaSet of 6 pods of 2 GPUs on two nodes of 4: the
    gang starts with the 4 that fit (at least 3, as written). podgang leaves the group at 3 —
    raised to 6, none would start — and leaves it so when the ReplicaSet is scaled."""
    async with corner(cluster, "cos-elastic", nodes=2) as here:
        ns = here.namespace
        await here.api.create(f"{COSCHEDULING.podgroups}/namespaces/{ns}/podgroups", {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "nginx", "namespace": ns}, "spec": {"minMember": 3, "scheduleTimeoutSeconds": 10}})
        template = pod_template(here, COSCHEDULING, "nginx", gpus=2, labels={"scheduling.x-k8s.io/pod-group": "nginx"})
        await here.api.create(f"/apis/apps/v1/namespaces/{ns}/replicasets", {
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "nginx", "namespace": ns},
            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "nginx"}}, "template": template}})

        async def four_running():
            pods = await here.pods(app="nginx")
            return pods if len(pods) == 6 and len(bound(pods)) == 4 else None
        await until(four_running, "4 of the 6 pods bound (3 or more at once, as written)")
        assert COSCHEDULING.size(await podgroup(here, COSCHEDULING, "nginx")) == 3
        await here.api.merge_patch(f"/apis/apps/v1/namespaces/{ns}/replicasets/nginx", {"spec": {"replicas": 8}})

        async def eight():
            return len(await here.pods(app="nginx")) == 8
        await until(eight, "8 pods")
        group = await podgroup(here, COSCHEDULING, "nginx")
        assert COSCHEDULING.size(group) == 3, group  # still the user's
        assert "podgang.io/followed-min-member" not in (group["metadata"].get("annotations") or {})


# ---------------------------------------------------------------------------
# 8. Volcano: spark-operator's own PodGroup (spec.batchScheduler) is the one gang


async def test_volcano_spark_batch_scheduler_gets_no_second_podgroup(cluster, podgang):
    """spark-operator, run with batch scheduling, makes ``spark-<app>-pg`` and names it on the
    driver (played here). podgang makes no group for the application, places nothing else,
    and says once, in an OperatorGang event, that the gang is the operator's."""
    async with corner(cluster, "vc-spark-batch", nodes=1) as here:
        ns = here.namespace
        app = await here.api.create(f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications", {
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": ns},
            "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
                     "mainClass": "org.apache.spark.examples.SparkPi", "batchScheduler": "volcano",
                     "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                     "driver": {"cores": 1, "memory": "512m", "schedulerName": "volcano"},
                     "executor": {"cores": 1, "instances": 1, "memory": "512m", "schedulerName": "volcano"}}})
        await here.api.create(f"{VOLCANO.podgroups}/namespaces/{ns}/podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "spark-pi-pg", "namespace": ns, "ownerReferences": [controller_ref(app)]},
            "spec": {"minMember": 1}})
        template = pod_template(here, VOLCANO, "pi", labels={"spark-role": "driver"},
                                annotations={"scheduling.k8s.io/group-name": "spark-pi-pg"})
        await here.api.create(f"/api/v1/namespaces/{ns}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": "pi-driver", "ownerReferences": [controller_ref(app)]},
            "spec": template["spec"]})
        await wait_all_bound(here, ["pi-driver"])

        async def said():
            events = (await here.api.get(f"/api/v1/namespaces/{ns}/events")).get("items") or []
            return [e for e in events if e.get("reason") == "OperatorGang"]
        (event, *_) = await until(said, "an OperatorGang event")
        assert "spec.batchScheduler volcano" in event["message"] and "no second one" in event["message"]
        listed = (await here.api.get(f"{VOLCANO.podgroups}/namespaces/{ns}/podgroups")).get("items") or []
        assert [g["metadata"]["name"] for g in listed] == ["spark-pi-pg"]  # podgang made none
        try:
            await here.api.get(f"{VOLCANO.podgroups}/namespaces/{ns}/podgroups/{owned_group(app)}")
            raise AssertionError("podgang made a second PodGroup")
        except NotFound:
            pass
