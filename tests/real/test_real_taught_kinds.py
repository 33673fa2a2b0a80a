"""Kinds you teach podgang (issue 46) on the real apiserver and KAI: KAI's own Karta e2e
example, a ``CustomJob`` (``e2e.example.com/v1``) that no plugin of KAI's or entry of podgang's
knows, taught by its Karta (``examples/27-customjob-karta.yaml``).

As in KAI's e2e suite (``test/e2e/suites/integrations/third_party/karta/``), the CustomJob CRD
and a Karta CRD are installed, the processes are given read access to CustomJobs (here: the
chart's own rules for ``kinds.kartaKinds``) and restarted, since the Kartas are read at start;
no CustomJob controller runs, so the test makes the pods it would make, each owned by the
CustomJob and labelled with its component. A second, broken Karta (a jq pipe podgang does not
read) is there from the start: it is named in the grouper's log and in a Warning event on it,
and every other kind keeps working.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from typing import Any, Iterator

import pytest
import yaml

from tests.realcluster import RELEASE, ROOT, FakeKubelet, chart_objects, corner, until
from tests.real.test_real_journeys import (KAI, controller_ref, create_deployment, owned_group, pod_template,
                                           podgroup, wait_bound, wait_held_whole, wait_size)
from tests.taught_support import CRDS, ROLE_LABEL, example

CUSTOM_JOBS = "customjobs"
BROKEN = "e2e-example-com-v1-brokenjob"


def broken_karta() -> dict[str, Any]:
    """A Karta of another kind whose worker count is a jq pipe: podgang does not evaluate jq."""
    karta, _ = example()
    karta = copy.deepcopy(karta)
    karta["metadata"] = {"name": BROKEN, "labels": {"run.ai/karta-group": "e2e.example.com",
                                                    "run.ai/karta-version": "v1", "run.ai/karta-kind": "BrokenJob"}}
    karta["spec"]["structureDefinition"]["rootComponent"]["kind"]["kind"] = "BrokenJob"
    karta["spec"]["structureDefinition"]["childComponents"][1]["scaleDefinition"]["replicasPath"] = \
        ".spec.worker | .replicas"
    return karta


def roles_with_customjobs(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart's ClusterRoles of both processes with ``kinds.kartaKinds: [CustomJob]``."""
    docs = chart_objects({**values, "kinds": {"kartaKinds": [{"apiVersion": "e2e.example.com/v1",
                                                              "kind": "CustomJob"}]}})
    return [d for d in docs if d["kind"] == "ClusterRole"
            and d["metadata"]["name"] in (f"{RELEASE}-grouper", f"{RELEASE}-webhook")]


def restart(podgang) -> None:
    """Both processes again: they read the Kartas at start."""
    podgang.processes.pop("webhook").stop()
    podgang.start_webhook()
    podgang.stop_grouper()
    podgang.start_grouper()


@pytest.fixture(scope="module")
def taught(cluster, podgang) -> Iterator[dict[str, Any]]:
    cluster.apply_crds(CRDS / "run.ai_kartas.yaml", CRDS / "e2e.example.com_customjobs.yaml")
    karta, _ = example()
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([karta, broken_karta()]))
    before = [d for d in podgang.docs if d["kind"] == "ClusterRole"
              and d["metadata"]["name"] in (f"{RELEASE}-grouper", f"{RELEASE}-webhook")]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(roles_with_customjobs(podgang.values)))
    restart(podgang)
    try:
        yield karta
    finally:
        cluster.kubectl("delete", "kartas.run.ai", karta["metadata"]["name"], BROKEN, "--ignore-not-found",
                        check=False)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(before))
        restart(podgang)  # the hub as the other modules know it


async def create_custom_job(here, name: str, coordinators: int, workers: int, gpus: int) -> dict[str, Any]:
    _, job = example()
    job["metadata"] = {"name": name, "namespace": here.namespace, "labels": dict(KAI.workload_labels)}
    for component, count in (("coordinator", coordinators), ("worker", workers)):
        job["spec"][component] = {"replicas": count, "template": pod_template(
            here, KAI, name, gpus=gpus, labels={ROLE_LABEL: component})}
    return await here.api.create(f"/apis/e2e.example.com/v1/namespaces/{here.namespace}/{CUSTOM_JOBS}", job)


async def play_component_pods(here, job: dict[str, Any], component: str, indexes: range) -> list[dict[str, Any]]:
    """What a CustomJob controller would make: one pod per replica, owned by the job and
    labelled with its component (as KAI's e2e test makes them); the pods as created (admitted)."""
    made = []
    for i in indexes:
        template = job["spec"][component]["template"]
        made.append(await here.api.create(f"/api/v1/namespaces/{here.namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": f"{job['metadata']['name']}-{component}-{i}",
                         "ownerReferences": [controller_ref(job)]},
            "spec": template["spec"]}))
    return made


def status_explain(cluster, namespace: str, pod: str) -> str:
    """``podgang status --explain POD`` as a user runs it (it reads the cluster's Kartas too)."""
    done = subprocess.run([sys.executable, "-m", "podgang.cli", "status", "-n", namespace, "--explain", pod,
                           f"--kubeconfig={cluster.kubeconfig}"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def subgroups(group: dict[str, Any]) -> dict[str, int]:
    return {s["name"]: s.get("minMember") for s in (group.get("spec") or {}).get("subGroups") or ()}


async def test_a_customjob_its_karta_teaches_is_one_gang_with_a_subgroup_per_component(cluster, podgang, taught):
    """1 coordinator and 3 workers of 2 GPUs each (8 GPUs; one node has 4): one PodGroup of 4
    with the subgroups coordinator 1 and worker 3, held whole until a second node makes room;
    scaling the workers to 5 follows; deleting the CustomJob leaves no group."""
    async with corner(cluster, "taught-kai", nodes=1) as here:
        async with FakeKubelet(here):
            job = await create_custom_job(here, "train", 1, 3, gpus=2)
            name = owned_group(job)
            group = await wait_size(here, KAI, name, 4)
            assert subgroups(group) == {"coordinator": 1, "worker": 3}
            admitted = [*await play_component_pods(here, job, "coordinator", range(1)),
                        *await play_component_pods(here, job, "worker", range(3))]
            for pod in admitted:  # at admission, each in the subgroup of its component, as KAI's e2e test checks
                assert pod["metadata"]["labels"]["kai.scheduler/subgroup-name"] == \
                    pod["metadata"]["labels"][ROLE_LABEL], pod["metadata"]["name"]
                assert pod["metadata"]["annotations"]["pod-group-name"] == name
            await wait_held_whole(here, "train", 4)
            await here.add_node()
            await wait_bound(here, "train", 4)
            explained = status_explain(cluster, here.namespace, "train-worker-0")
            assert f"Karta {taught['metadata']['name']}" in explained and name in explained, explained

            job = await here.api.merge_patch(
                f"/apis/e2e.example.com/v1/namespaces/{here.namespace}/{CUSTOM_JOBS}/train",
                {"spec": {"worker": {"replicas": 5}}})
            group = await wait_size(here, KAI, name, 6)
            assert subgroups(group) == {"coordinator": 1, "worker": 5}
            await play_component_pods(here, job, "worker", range(3, 5))
            await here.add_node()
            await wait_bound(here, "train", 6)

            cluster.kubectl("-n", here.namespace, "delete", CUSTOM_JOBS, "train", "--wait=false")

            async def all_gone():
                return not await here.pods(app="train") and not await podgroup(here, KAI, name)
            await until(all_gone, "the CustomJob's pods and PodGroup gone")


async def test_a_broken_karta_is_named_and_every_other_kind_keeps_working(cluster, podgang, taught):
    line = await podgang.wait_logged("kind not taught", f"Karta {BROKEN}", "replicasPath")
    assert "is not a path podgang reads" in line, line
    await podgang.wait_logged("kind taught", "CustomJob")
    async with corner(cluster, "taught-others", nodes=1) as here:
        async def event_on_it():  # a cluster-scoped object's events are in the default namespace
            events = (await here.api.get("/api/v1/namespaces/default/events")).get("items") or []
            return [e for e in events if e.get("reason") == "KindNotTaught"
                    and e["involvedObject"].get("name") == BROKEN]
        (event,) = await until(event_on_it, f"a KindNotTaught event on Karta {BROKEN}")
        assert event["type"] == "Warning" and "replicasPath" in event["message"]
        async with FakeKubelet(here):
            dep = await create_deployment(here, KAI, "web", 2)
            await wait_size(here, KAI, owned_group(dep), 2)
            await wait_bound(here, "web", 2)
    podgang.check_alive()
