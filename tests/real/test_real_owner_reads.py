"""A gang's top owner, whatever its kind, on the real apiserver and the real KAI (issue 43).

- An owner of a kind podgang knows nothing of (a ``TestKind``, a CRD this module installs) lends
  its ``kai.scheduler/queue`` to its pods' group, as KAI's own grouper reads it: the grouper
  reads the owner metadata-only once the chart's ``grouper.readOwners`` grants it, and says
  ``OwnerNotRead`` once (a Warning on the PodGroup) while it does not.
- ``kai.scheduler/skip-podgrouper: "true"`` on a Deployment: podgang makes no group for its pods
  and the webhook leaves them as they are.
- The node pool: a pod labelled ``kai.scheduler/node-pool`` gets a group labelled with it, and a
  KAI scheduler shard for that pool (``kai-scheduler --partition-label-value``, started here beside
  the cluster's default one) places it on that pool's node; an unlabelled gang stays with the
  default shard, off the pool's node.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import yaml

from podgang.api import AlreadyExists
from tests.realcluster import (KAI_TEAM_QUEUE, KUBE_BIN, RELEASE, Cluster, Corner, FakeKubelet,
                               bound, chart_objects, corner, free_port, kai_queue, until, wait_sync)
from tests.real.test_real_journeys import KAI, controller_ref, owned_group, play_pod, pod_template, podgroup
from tests.real.test_real_owner_chains import podgang_groups

GROUP, VERSION, PLURAL, KIND = "owners.podgang.test", "v1", "testkinds", "TestKind"
QUEUE_LABEL, NODE_POOL_LABEL = "kai.scheduler/queue", "kai.scheduler/node-pool"
SKIP_PODGROUPER = "kai.scheduler/skip-podgrouper"
GROUP_ANNOTATION = "pod-group-name"
READ_TESTKINDS = [{"group": GROUP, "resources": [PLURAL]}]

TESTKIND_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": PLURAL, "singular": "testkind", "kind": KIND, "listKind": f"{KIND}List"},
             "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def testkinds(cluster, podgang, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("owner-reads") / "testkind-crd.yaml"
    path.write_text(yaml.safe_dump(TESTKIND_CRD))
    cluster.apply_crds(path)
    return path


def grouper_role(values: dict[str, Any]) -> str:
    """The grouper's ClusterRole as the chart renders it with ``values``."""
    role = next(d for d in chart_objects(values)
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == f"{RELEASE}-grouper")
    return yaml.safe_dump(role)


@contextlib.contextmanager
def read_owners_granted(cluster: Cluster, podgang) -> Any:
    """``helm upgrade --set grouper.readOwners=…`` as far as RBAC goes: the grouper's ClusterRole
    re-rendered with the TestKinds in it; the session's own afterwards."""
    values = {**podgang.values, "grouper": {**podgang.values.get("grouper", {}), "readOwners": READ_TESTKINDS}}
    cluster.kubectl("apply", "-f", "-", input=grouper_role(values))
    try:
        yield
    finally:
        cluster.kubectl("apply", "-f", "-", input=grouper_role(podgang.values))


async def create_testkind(here: Corner, name: str, labels: dict[str, str]) -> dict[str, Any]:
    return await here.api.create(f"/apis/{GROUP}/{VERSION}/namespaces/{here.namespace}/{PLURAL}", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name, "labels": labels},
        "spec": {"workers": 2}})


async def wait_group(here: Corner, name: str) -> dict[str, Any]:
    async def made():
        return await podgroup(here, KAI, name)
    return await until(made, f"PodGroup {name}")


async def test_an_unknown_kind_owner_lends_its_queue_once_readable_and_is_said_not_read_before(
        cluster, podgang, testkinds):
    async with corner(cluster, "ownq", nodes=1) as here, FakeKubelet(here):
        # before the chart grants it: the grouper may not read TestKinds
        unread = await create_testkind(here, "unread", {QUEUE_LABEL: KAI_TEAM_QUEUE})
        await play_pod(here, KAI, "unread-0", unread, "unread", {})
        group = await wait_group(here, owned_group(unread))
        assert group["spec"]["queue"] == "default-queue", group["spec"]  # the owner's label was not read
        (said,) = await here.wait_events("OwnerNotRead", "testkind/unread")
        assert said["type"] == "Warning" and said["involvedObject"]["kind"] == "PodGroup"
        assert said["involvedObject"]["name"] == owned_group(unread)
        assert "may not read it (HTTP 403" in said["message"] and "grouper.readOwners" in said["message"]

        with read_owners_granted(cluster, podgang):
            owner = await create_testkind(here, "sim", {QUEUE_LABEL: KAI_TEAM_QUEUE})
            for i in range(2):
                await play_pod(here, KAI, f"sim-{i}", owner, "sim", {}, gpus=1)
            group = await wait_group(here, owned_group(owner))
            assert group["spec"]["queue"] == KAI_TEAM_QUEUE, group["spec"]  # the top owner's, as KAI reads it

            async def placed():
                pods = await here.pods(app="sim")
                return pods if len(bound(pods)) == 2 else None
            pods = await until(placed, "the TestKind's 2 pods bound by KAI")
            assert {p["metadata"]["annotations"][GROUP_ANNOTATION] for p in pods} == {owned_group(owner)}
        assert [e for e in await here.events("OwnerNotRead") if "testkind/sim" in e["message"]] == []
        assert len(await here.events("OwnerNotRead")) == 1  # said once, for the owner it could not read


async def test_skip_podgrouper_on_a_deployment_gets_its_pods_no_group(cluster, podgang, testkinds):
    async with corner(cluster, "ownskip", nodes=1) as here:
        template = pod_template(here, KAI, "skipped")
        await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "skipped", "labels": {QUEUE_LABEL: KAI_TEAM_QUEUE},
                         "annotations": {SKIP_PODGROUPER: "true"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "skipped"}}, "template": template}})

        async def made():
            pods = await here.pods(app="skipped")
            return pods if len(pods) == 2 else None
        pods = await until(made, "the Deployment's 2 pods")
        for pod in pods:  # the webhook left them as they were
            annotations = pod["metadata"].get("annotations") or {}
            assert GROUP_ANNOTATION not in annotations and SKIP_PODGROUPER not in annotations, annotations
        # the grouper has seen them (a pod created after them is grouped) and made nothing for them
        marker = await create_testkind(here, "marker", {})
        await play_pod(here, KAI, "marker-0", marker, "marker", {})
        await wait_group(here, owned_group(marker))
        assert await podgang_groups(here, KAI) == [owned_group(marker)]


# ---------------------------------------------------------------------------
# the node pool: a KAI shard of its own


@contextlib.contextmanager
def kai_shard(cluster: Cluster, partition: str, log: Path) -> Any:
    """A second kai-scheduler, for the nodes, queues and PodGroups labelled
    ``kai.scheduler/node-pool=<partition>`` (KAI's scheduling shards), started as ``cluster``
    starts the default one."""
    binary = Path.home() / ".cache" / "podgang-kube-bin" / (KUBE_BIN / "VERSION").read_text().strip() / "kai-scheduler"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(binary), "--scheduler-name=kai-scheduler", f"--partition-label-value={partition}",
             f"--listen-address=127.0.0.1:{free_port()}", f"--plugin-server-port={free_port()}",
             f"--profiler-port={free_port()}"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": cluster.kubeconfig})
    cluster.extra_logs.append(log)
    try:
        wait_sync(lambda: process.poll() is None and log.stat().st_size > 0, "the KAI shard started", 30.0)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


async def test_a_node_pool_gang_is_labelled_and_placed_by_its_pools_shard_on_its_nodes(
        cluster, podgang, testkinds, tmp_path_factory):
    async with corner(cluster, "ownpool", nodes=2) as here, FakeKubelet(here):
        pool = f"pool-{here.pool[-5:]}"
        pool_node, other_node = here.nodes
        await here.api.merge_patch(f"/api/v1/nodes/{pool_node}", {"metadata": {"labels": {NODE_POOL_LABEL: pool}}})
        parent, leaf = (kai_queue(f"{pool}-parent"), kai_queue(f"{pool}-queue", f"{pool}-parent"))
        for queue in (parent, leaf):  # a shard sees the queues of its pool only
            queue["metadata"]["labels"] = {NODE_POOL_LABEL: pool}
            with contextlib.suppress(AlreadyExists):
                await here.api.create("/apis/scheduling.run.ai/v2/queues", queue)
        log = tmp_path_factory.mktemp("kai-shard") / "kai-scheduler-shard.log"
        with kai_shard(cluster, pool, log):
            labels = {NODE_POOL_LABEL: pool, QUEUE_LABEL: leaf["metadata"]["name"]}
            owner = await create_testkind(here, "pooled", {})
            await play_pod(here, KAI, "pooled-0", owner, "pooled", labels, gpus=1)
            group = await wait_group(here, owned_group(owner))
            assert (group["metadata"].get("labels") or {}).get(NODE_POOL_LABEL) == pool, group["metadata"]

            async def placed(app: str):
                pods = await here.pods(app=app)
                return pods[0] if len(bound(pods)) == 1 else None
            pod = await until(lambda: placed("pooled"), "the pool's pod bound by the pool's shard")
            assert pod["spec"]["nodeName"] == pool_node
            # a gang of no pool: the default shard, which does not see the pool's node
            plain = await create_testkind(here, "plain", {QUEUE_LABEL: KAI_TEAM_QUEUE})
            await play_pod(here, KAI, "plain-0", plain, "plain", {}, gpus=1)
            group = await wait_group(here, owned_group(plain))
            assert NODE_POOL_LABEL not in (group["metadata"].get("labels") or {})
            pod = await until(lambda: placed("plain"), "the pod of no pool bound by the default shard")
            assert pod["spec"]["nodeName"] == other_node
        for queue in (leaf, parent):
            await here.api.delete(f"/apis/scheduling.run.ai/v2/queues/{queue['metadata']['name']}")
