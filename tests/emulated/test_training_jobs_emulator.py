"""Kubeflow training jobs end to end against the HTTP API emulator, with the emulator
playing the training-operator: pods with the ownerReferences and labels it sets
(``training.kubeflow.org/replica-type``, ``job-name``). The grouper gives each job one
PodGroup with a subgroup per replica type, follows an elastic resize, leaves a suspended
or finished job alone, and evicts the workers once their only master is lost."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.crd_support import crd_valid
from tests.grouper_support import NS, events, kai_subgroups, min_member, owned_group, owner_ref, pod, running_grouper
from tests.emulator import ResourceType
from tests.unit.test_kinds_kubeflow import template
from tests.webhook_support import patched, review, running_webhook


def pytorchjob(emu, name: str, master: int, workers: int, **spec: Any) -> dict[str, Any]:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
           "spec": {"pytorchReplicaSpecs": {
               **({"Master": {"replicas": master, "template": template()}} if master else {}),
               "Worker": {"replicas": workers, "template": template()}}, **spec}}
    return emu.put(crd_valid(job))


def operator_pods(emu, job: dict[str, Any], role: str, count: int, phase: str = "Running") -> list[str]:
    """The pods the training-operator makes for one replica type."""
    group = f"pg-{job['metadata']['name']}-{job['metadata']['uid']}"
    names = []
    for i in range(count):
        made = pod(f"{job['metadata']['name']}-{role}-{i}", owner=job, group=group, phase=phase,
                   node=None if phase == "Pending" else "node-1",
                   labels={"training.kubeflow.org/replica-type": role, "training.kubeflow.org/replica-index": str(i),
                           "training.kubeflow.org/job-name": job["metadata"]["name"],
                           "training.kubeflow.org/operator-name": "pytorchjob-controller"})
        names.append(emu.put(made)["metadata"]["name"])
    return names


async def judged_since(emu, g, job: dict[str, Any], gone: list[str]) -> None:
    """The grouper has seen ``gone`` pods leave the gang and judged the gang since (a loss
    is judged at once: a verdict of stale would have been said by then)."""
    key = f"{NS}/{owned_group(job)}"
    await emu.wait_for(lambda: not {p["metadata"]["name"] for p in g.controller.cache.members(key)} & set(gone), 3.0)
    start = g.controller.reconciles
    await emu.wait_for(lambda: g.controller.reconciles > start, 3.0)


MASTER_AND_WORKERS = [{"name": "master", "minMember": 1}, {"name": "worker", "minMember": 3}]


async def test_a_pytorchjob_gets_one_gang_with_a_subgroup_per_replica_type(emu):
    job = pytorchjob(emu, "train", 1, 3)
    async with running_grouper(emu):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == MASTER_AND_WORKERS and min_member(emu, owned_group(job)) == 4,
                           3.0, f"PodGroup {emu.get('podgroups', NS, owned_group(job))}")
        pg = emu.get("podgroups", NS, owned_group(job))
        assert pg["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
        assert pg["metadata"]["annotations"]["podgang.io/subgroups"] == "master,worker"


async def test_an_elastic_resize_moves_the_gang_and_the_workers_subgroup(emu):
    job = pytorchjob(emu, "elastic", 0, 6, elasticPolicy={"minReplicas": 2, "maxReplicas": 6})
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, owned_group(job)) == 2, 3.0)
        # workers only: still their subgroup, as KAI's grouper writes a one-role job's
        assert kai_subgroups(emu, owned_group(job)) == [{"name": "worker", "minMember": 2}]
        emu.patch_object("pytorchjobs", NS, "elastic", {"spec": {"elasticPolicy": {"minReplicas": 4}}})
        await emu.wait_for(lambda: min_member(emu, owned_group(job)) == 4, 3.0)
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == [{"name": "worker", "minMember": 4}], 3.0)
        await emu.wait_for(lambda: any("scaled 2 → 4" in e["message"] for e in events(emu, "MinMemberChanged")), 3.0,
                           f"events: {[e['message'] for e in events(emu)]}")


async def test_a_lost_master_evicts_the_workers_after_the_grace_period(emu):
    loop = asyncio.get_running_loop()
    job = pytorchjob(emu, "train", 1, 3)
    (master,) = operator_pods(emu, job, "master", 1)
    workers = operator_pods(emu, job, "worker", 3)
    async with running_grouper(emu, staleness_grace_period=0.5):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == MASTER_AND_WORKERS, 3.0)
        emu.delete("pods", NS, master)
        lost = loop.time()
        await emu.wait_for(lambda: any("master: 0 of minimum 1 active" in e["message"]
                                       for e in events(emu, "GangStale")), 3.0, f"no GangStale: {events(emu)}")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in workers), 4.0,
                           "the workers were not evicted")
        assert loop.time() - lost >= 0.5
        assert len(emu.find_requests("POST", r"/eviction$")) == 3


async def test_one_worker_lost_of_an_elastic_job_above_its_minimum_is_not_stale(emu):
    job = pytorchjob(emu, "elastic", 1, 4, elasticPolicy={"minReplicas": 3, "maxReplicas": 4})
    operator_pods(emu, job, "master", 1)
    workers = operator_pods(emu, job, "worker", 4)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == [{"name": "master", "minMember": 1},
                                                           {"name": "worker", "minMember": 2}], 3.0)
        emu.delete("pods", NS, workers[0])  # 3 workers left, 2 needed
        await judged_since(emu, g, job, gone=[workers[0]])
        assert g.controller.tracker.stale_groups() == []
        assert events(emu, "GangStale") == [] and emu.find_requests("POST", r"/eviction$") == []


@pytest.mark.parametrize("how", ["suspended", "finished"])
async def test_a_suspended_or_finished_job_losing_its_pods_is_not_stale(emu, how):
    job = pytorchjob(emu, "train", 1, 3)
    (master,) = operator_pods(emu, job, "master", 1)
    workers = operator_pods(emu, job, "worker", 3)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == MASTER_AND_WORKERS, 3.0)
        if how == "suspended":  # Kueue (or a user) suspends it: the operator deletes its pods
            emu.patch_object("pytorchjobs", NS, "train", {"spec": {"runPolicy": {"suspend": True}}})
        else:  # the master succeeded: the operator marks the job and cleans up the workers
            emu.patch_object("pytorchjobs", NS, "train", {"status": {"conditions": [
                {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}]}})
            emu.patch_object("pods", NS, master, {"status": {"phase": "Succeeded"}})
        key = f"{NS}/{owned_group(job)}"
        await emu.wait_for(lambda: any(w["metadata"]["name"] == "train" and (
            w["spec"].get("runPolicy", {}).get("suspend") or w["status"].get("conditions"))
            for w in g.controller.cache.workloads["PyTorchJob"].values()), 3.0)
        for name in workers:
            emu.delete("pods", NS, name)
        await judged_since(emu, g, job, gone=workers)
        assert key not in g.controller.tracker.stale_groups()
        assert events(emu, "GangStale") == [] and emu.find_requests("POST", r"/eviction$") == []


async def test_an_mpijob_at_training_operators_v1_is_found_when_v2beta1_is_not_served(emu):
    """The emulator serves mpijobs at v1 only (training-operator's CRD): the grouper asks
    for mpi-operator's v2beta1 first, then v1."""
    job = emu.put(crd_valid({
        "apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "allreduce", "namespace": NS},
        "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template()},
                                     "Worker": {"replicas": 2, "template": template()}}}}))
    async with running_grouper(emu):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == [{"name": "launcher", "minMember": 1},
                                                           {"name": "worker", "minMember": 2}], 3.0)
    assert emu.count("GET", r"/apis/kubeflow.org/v2beta1/mpijobs") >= 1


async def test_an_mpijob_crd_replaced_by_mpi_operators_is_followed_at_once(emu):
    """training-operator's MPIJob CRD (v1) replaced by mpi-operator's (v2beta1), same CRD
    name: the watch on v1 ends, and the grouper finds v2beta1 at once — not after its
    10-minute probe for a kind that is not served."""
    async with running_grouper(emu):
        await emu.wait_for(lambda: any(r.query.get("watch") for r in emu.find_requests("GET", r"/kubeflow.org/v1/mpijobs")),
                           5.0, "no watch on v1")
        emu.remove_crd("mpijobs.kubeflow.org")
        emu.register(ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob", status=True, crd=True))
        job = emu.put(crd_valid({
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "allreduce", "namespace": NS},
            "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template()},
                                         "Worker": {"replicas": 2, "template": template()}}}}))
        await emu.wait_for(lambda: min_member(emu, owned_group(job)) == 3, 5.0, "the v2beta1 MPIJob was not followed")


async def test_an_operator_installed_after_the_grouper_started_is_followed_once_its_pods_come(emu):
    """The training-operator (the PyTorchJob CRD) installed while the grouper runs: the first
    pod owned by a PyTorchJob makes the grouper look for the kind now, not at its next probe
    for a kind that is not served (every 10 minutes), so the gang gets its PodGroup at once."""
    emu.remove_crd("pytorchjobs.kubeflow.org")
    async with running_grouper(emu):  # absent_probe_interval: the default, 10 minutes
        await emu.wait_for(lambda: emu.count("GET", r"/kubeflow.org/v1/pytorchjobs") >= 1, 5.0, "never probed")
        emu.add_crd("pytorchjobs.kubeflow.org")
        job = pytorchjob(emu, "late", 1, 2)
        group = owned_group(job)
        operator_pods(emu, job, "master", 1)
        await emu.wait_for(lambda: min_member(emu, group) == 3, 10.0, "the PyTorchJob was not followed")
        operator_pods(emu, job, "worker", 2)
        await emu.wait_for(lambda: kai_subgroups(emu, group) == [{"name": "master", "minMember": 1},
                                                                 {"name": "worker", "minMember": 2}], 3.0)


def job_pod_review(job: dict[str, Any], role: str) -> dict[str, Any]:
    doc = review("pod-create-by-job")
    md = doc["request"]["object"]["metadata"]
    md["name"] = f"{job['metadata']['name']}-{role}-0"
    md["namespace"] = doc["request"]["namespace"] = NS
    md["labels"] = {"training.kubeflow.org/replica-type": role}
    md["ownerReferences"] = [owner_ref(job)]
    doc["request"]["object"]["spec"]["schedulerName"] = "kai-scheduler"
    return doc


async def test_the_webhook_puts_each_pod_of_a_pytorchjob_in_its_gang_and_its_role(emu, tmp_path):
    """As the training-operator creates them: the pod's owner is the PyTorchJob (looked up),
    its role is the replica-type label; the webhook puts the pod in the gang and in its role's
    subgroup in the same patch — the group is not there yet, and the grouper makes it listing
    the job's roles — so the grouper writes no pod."""
    job = pytorchjob(emu, "train", 1, 3)
    client = emu.api_client()
    try:
        async with running_webhook(tmp_path, api_client=client) as wh:
            for role in ("master", "worker"):
                doc = job_pod_review(job, role)
                resp = await wh.mutate(doc)
                assert resp["allowed"] is True and "warnings" not in resp, resp
                admitted = patched(doc["request"]["object"], resp)
                assert admitted["metadata"]["labels"]["kai.scheduler/subgroup-name"] == role
                assert admitted["metadata"]["labels"]["kai.scheduler/podgroup"] == owned_group(job)
                emu.put({**admitted, "metadata": {**admitted["metadata"], "uid": f"uid-{role}"}})
    finally:
        await client.close()
    async with running_grouper(emu):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(job)) == MASTER_AND_WORKERS, 5.0)
    assert emu.find_requests("PATCH", r"/pods/") == []


async def test_a_pod_is_not_given_a_subgroup_its_existing_group_does_not_list(emu, tmp_path):
    """KAI ignores a pod naming a subgroup its PodGroup does not list: where the job's group
    exists without the roles (made before podgang, say), the webhook leaves the pod's
    subgroup to the grouper, which labels it once the group lists it."""
    job = pytorchjob(emu, "train", 1, 3)
    emu.put({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": owned_group(job), "namespace": NS, "ownerReferences": [owner_ref(job)]},
             "spec": {"minMember": 4}})
    client = emu.api_client()
    try:
        async with running_webhook(tmp_path, api_client=client) as wh:
            doc = job_pod_review(job, "worker")
            admitted = patched(doc["request"]["object"], await wh.mutate(doc))
            assert "kai.scheduler/subgroup-name" not in admitted["metadata"]["labels"]
            assert admitted["metadata"]["labels"]["kai.scheduler/podgroup"] == owned_group(job)
    finally:
        await client.close()
