"""Seed 002 on real control planes: Kubernetes 1.35 (``scheduling.k8s.io/v1alpha1``
Workloads, pod ``spec.workloadRef``) with podgang installed as the chart deploys it, and the
same exercises on 1.36 (``v1alpha2`` PodGroups, pod ``spec.schedulingGroup``).
kube-scheduler does the gang work: a gang is bound all at once, or kept whole and Pending.

The exercises are examples/10-13 as a user applies them; on 1.36 the same gangs are spelled
as 1.36 spells them (:func:`as_1_36`). podgang's own gangs on 1.35 go through the README's
journeys (tests/real/test_real_journeys.py) with 1.35's flavour: a Deployment's gang that does not
fit kept whole, a scale held on the immutable Workload, a stale gang evicted.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
from typing import Any

from tests.real import test_real_journeys as journeys
from tests.realcluster import (NATIVE_NAMESPACE_LABELS, ROOT, Corner, bound, corner, create_all, example,
                               scheduler_caught_up, until)
from tests.real.test_real_journeys import Flavor, wait_bound

NATIVE_135 = Flavor("native", "default-scheduler", "/apis/scheduling.k8s.io/v1alpha1", NATIVE_NAMESPACE_LABELS,
                    plural="workloads", says_why_pending=False)


def as_1_36(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seed 002's objects as 1.36 spells them: each Workload's pod group a ``v1alpha2``
    PodGroup of the same name and policy, each ``workloadRef`` a ``schedulingGroup``."""
    out = []
    for doc in copy.deepcopy(docs):
        if doc["kind"] == "Workload":
            for group in doc["spec"]["podGroups"]:
                out.append({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                            "metadata": {"name": group["name"], "namespace": doc["metadata"]["namespace"]},
                            "spec": {"schedulingPolicy": group["policy"]}})
            continue
        spec = doc["spec"] if doc["kind"] == "Pod" else doc["spec"]["template"]["spec"]
        ref = spec.pop("workloadRef")
        spec["schedulingGroup"] = {"podGroupName": ref["podGroup"]}
        out.append(doc)
    return out


def seed(name: str, here: Corner, version: str) -> list[dict[str, Any]]:
    docs = example(name, here.namespace, here.placement)
    return docs if version == "1.35" else as_1_36(docs)


async def pods_created(here: Corner, app: str, count: int) -> None:
    async def there():
        return len(await here.pods(app=app)) == count
    await until(there, f"{count} pods of {app}")


async def basic_gang_bound_all_at_once(cluster, version: str) -> None:
    """Exercise 1: with 3 of the gang's 4 pods created, none is bound; the 4th binds all."""
    async with corner(cluster, f"seed002-basic-{version.replace('.', '')}", nodes=1,
                      labels=NATIVE_NAMESPACE_LABELS) as here:
        docs = seed("10-seed002-basic-gang.yaml", here, version)
        await create_all(here, docs[:-1])
        await pods_created(here, "training", 3)
        await scheduler_caught_up(here)
        assert not bound(await here.pods(app="training")), "part of the gang was bound"
        await create_all(here, docs[-1:])
        await wait_bound(here, "training", 4)


async def gang_of_10_kept_whole(cluster, version: str) -> None:
    """Exercise 2: 10 pods of 2 CPUs on 16 CPUs: none bound; with room, all 10 at once."""
    async with corner(cluster, f"seed002-large-{version.replace('.', '')}", nodes=2,
                      labels=NATIVE_NAMESPACE_LABELS) as here:
        await create_all(here, seed("11-seed002-large-gang.yaml", here, version))
        await pods_created(here, "large-training", 10)
        await scheduler_caught_up(here)
        pods = await here.pods(app="large-training")
        assert len(pods) == 10 and not bound(pods), f"part of the gang was bound: {len(bound(pods))}"
        assert all(p["status"]["phase"] == "Pending" for p in pods)
        await here.add_node()
        pods = await wait_bound(here, "large-training", 10)
        assert len({p["spec"]["nodeName"] for p in pods}) == 3


async def spark_shared_gang(cluster, version: str) -> None:
    """Exercise 4 with Parallel executors: the driver and the StatefulSet's 4 executors share
    one gang of 5 and are bound together."""
    async with corner(cluster, f"seed002-spark-{version.replace('.', '')}", nodes=1,
                      labels=NATIVE_NAMESPACE_LABELS) as here:
        await create_all(here, seed("13-seed002-spark.yaml", here, version))
        await wait_bound(here, "spark", 5)


# ---------------------------------------------------------------------------- 1.35


async def test_1_35_seed_002_basic_gang_is_bound_all_at_once(cluster_135, podgang_135):
    await basic_gang_bound_all_at_once(cluster_135, "1.35")


async def test_1_35_seed_002_gang_of_10_is_kept_whole_and_pending(cluster_135, podgang_135):
    await gang_of_10_kept_whole(cluster_135, "1.35")


async def test_1_35_seed_002_pytorch_gang_starts_together(cluster_135, podgang_135):
    async with corner(cluster_135, "seed002-pytorch", nodes=1, labels=NATIVE_NAMESPACE_LABELS) as here:
        await create_all(here, seed("12-seed002-pytorch.yaml", here, "1.35"))
        await wait_bound(here, "pytorch", 4)


async def test_1_35_seed_002_spark_shared_gang_is_bound_together(cluster_135, podgang_135):
    await spark_shared_gang(cluster_135, "1.35")


async def test_1_35_seed_002_spark_as_written_never_forms_and_podgang_says_why(cluster_135, podgang_135):
    """The seed's own StatefulSet (OrderedReady, the default) makes one executor and waits for
    it to be Ready; podgang's grouper says so on the Workload as it finds the gang."""
    async with corner(cluster_135, "seed002-ordered", nodes=1, labels=NATIVE_NAMESPACE_LABELS) as here:
        docs = example("13-seed002-spark.yaml", here.namespace, here.placement)
        del docs[-1]["spec"]["podManagementPolicy"]
        await create_all(here, docs)
        (problem,) = await here.wait_events("PodGroupProblem", "OrderedReady")
        assert problem["involvedObject"]["kind"] == "Workload" and problem["involvedObject"]["name"] == "spark-job"
        assert "Set podManagementPolicy: Parallel" in problem["message"]
        await pods_created(here, "spark", 2)  # the driver and executor-0, as recorded: no executor-1 comes
        await scheduler_caught_up(here)
        pods = await here.pods(app="spark")
        assert len(pods) == 2 and not bound(pods)  # the driver and executor-0, as recorded


async def test_1_35_a_pod_naming_a_missing_workload_is_reported(cluster_135, podgang_135):
    """The scheduler keeps it Pending with nothing said (recorded): podgang says it, at
    admission (a warning to the client) and as an event."""
    async with corner(cluster_135, "seed002-missing", nodes=1, labels=NATIVE_NAMESPACE_LABELS) as here:
        docs = example("10-seed002-basic-gang.yaml", here.namespace, here.placement)
        await create_all(here, docs[1:2])  # training-master, without its Workload
        (missing,) = await here.wait_events("PodGroupMissing")
        assert missing["message"].startswith(f"Workload training-job-basic not found in namespace {here.namespace}: "
                                             f"pod training-master names it and stays Pending until it exists")


async def test_1_35_status_shows_the_workload_and_the_verdict_on_its_pods(cluster_135, podgang_135):
    async with corner(cluster_135, "seed002-status", nodes=1, labels=NATIVE_NAMESPACE_LABELS) as here:
        await create_all(here, example("10-seed002-basic-gang.yaml", here.namespace, here.placement))
        await wait_bound(here, "training", 4)
        done = await asyncio.to_thread(subprocess.run, [
            sys.executable, "-m", "podgang.cli", "status", "-n", here.namespace, "-o", "json",
            "--backend", "default-scheduler=native", f"--kubeconfig={cluster_135.kubeconfig}"],
            capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        (gang,) = [g for g in json.loads(done.stdout)["gangs"] if g["group"] == "training-job-basic/training-gang"]
        assert gang["minMember"] == 4 and gang["kind"] == "Workload" and gang["scheduler"]["state"] == "scheduled"
        assert gang["members"]["running"] == 4


async def test_1_35_plan_asks_discovery_for_the_native_version(cluster_135, podgang_135):
    done = await asyncio.to_thread(subprocess.run, [
        sys.executable, "-m", "podgang.cli", "plan", str(ROOT / "examples" / "05-plain-deployment.yaml"),
        "--backend", "default-scheduler=native", f"--kubeconfig={cluster_135.kubeconfig}", "-o", "json"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [note] = [n for n in json.loads(done.stdout)["notes"] if n["object"] == "native gangs"]
    assert note["message"] == ("planned for scheduling.k8s.io/v1alpha1 (Kubernetes 1.35): API discovery "
                               f"(/apis/scheduling.k8s.io) of {cluster_135.kubeconfig}")


# podgang's own gangs on 1.35: the README's journeys with 1.35's flavour


async def test_1_35_a_deployment_gang_that_does_not_fit_stays_whole_then_is_bound_together(cluster_135, podgang_135):
    await journeys.test_a_deployment_gang_that_does_not_fit_stays_whole_then_is_bound_together(
        cluster_135, podgang_135, NATIVE_135)


async def test_1_35_a_scale_is_held_on_the_immutable_workload(cluster_135, podgang_135):
    await journeys.test_a_scale_changes_the_gang_size(cluster_135, podgang_135, NATIVE_135)


async def test_1_35_a_gang_that_lost_members_is_evicted(cluster_135, podgang_135):
    await journeys.test_a_gang_that_lost_members_is_evicted(cluster_135, podgang_135, NATIVE_135)


# ---------------------------------------------------------------------------- 1.36


async def test_1_36_seed_002_basic_gang_is_bound_all_at_once(cluster, podgang):
    await basic_gang_bound_all_at_once(cluster, "1.36")


async def test_1_36_seed_002_gang_of_10_is_kept_whole_and_pending(cluster, podgang):
    await gang_of_10_kept_whole(cluster, "1.36")


async def test_1_36_seed_002_spark_shared_gang_is_bound_together(cluster, podgang):
    await spark_shared_gang(cluster, "1.36")

