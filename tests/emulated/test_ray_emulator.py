"""KubeRay end to end against the HTTP API emulator, with the emulator playing KubeRay: the
pods it makes (owned by the RayCluster, labelled ``ray.io/group`` and ``ray.io/node-type``).
A RayCluster is one gang with a subgroup for its head and one per worker group; losing the
head evicts the workers after the grace period; a RayService's cluster is a gang of its own."""

from __future__ import annotations

from typing import Any

from tests.crd_support import crd_valid
from tests.grouper_support import NS, events, kai_subgroups, min_member, owned_group, owner_ref, pod, running_grouper
from tests.unit.test_kinds_ray import cluster_spec, worker_group


def kuberay_pod(cluster: dict[str, Any], group: str, index: int) -> dict[str, Any]:
    """Pod ``index`` KubeRay makes for the head (``headgroup``) or a worker group, as admitted:
    owned by the RayCluster, labelled as KubeRay 1.7 labels it (a worker's index in its group
    too: tests/real/test_real_operators.py checks it against the real KubeRay)."""
    head = group == "headgroup"
    labels = {"ray.io/cluster": cluster["metadata"]["name"], "ray.io/group": group,
              "ray.io/node-type": "head" if head else "worker"}
    if not head:
        labels["ray.io/worker-group-replica-index"] = str(index)
    return pod(f"{cluster['metadata']['name']}-{'head' if head else group + '-worker'}-{index}", owner=cluster,
               group=owned_group(cluster), labels=labels)


def kuberay_pods(emu, cluster: dict[str, Any], group: str, count: int) -> list[str]:
    """The pods KubeRay makes for the head (``headgroup``) or one worker group."""
    return [emu.put(kuberay_pod(cluster, group, i))["metadata"]["name"] for i in range(count)]


TWO_GROUPS = [{"name": "cpu", "minMember": 2}, {"name": "gpu", "minMember": 2}, {"name": "headgroup", "minMember": 1}]


async def test_a_raycluster_with_two_worker_groups_is_one_gang_whose_lost_head_evicts_the_workers(emu):
    cluster = emu.put(crd_valid({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                 "metadata": {"name": "ray", "namespace": NS},
                                 "spec": cluster_spec(worker_group("gpu", 2), worker_group("cpu", 2))}))
    (head,) = kuberay_pods(emu, cluster, "headgroup", 1)
    workers = kuberay_pods(emu, cluster, "gpu", 2) + kuberay_pods(emu, cluster, "cpu", 2)
    async with running_grouper(emu, staleness_grace_period=0.3):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(cluster)) == TWO_GROUPS and min_member(emu, owned_group(cluster)) == 5,
                           3.0, f"PodGroup {emu.get('podgroups', NS, owned_group(cluster))}")
        emu.delete("pods", NS, head)
        await emu.wait_for(lambda: any("headgroup: 0 of minimum 1 active" in e["message"]
                                       for e in events(emu, "GangStale")), 3.0, f"events: {events(emu)}")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in workers), 4.0,
                           "the workers were not evicted")


async def test_a_worker_group_scaled_and_one_suspended_resize_the_gang(emu):
    cluster = emu.put(crd_valid({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                                 "metadata": {"name": "ray", "namespace": NS},
                                 "spec": cluster_spec(worker_group("gpu", 2), worker_group("cpu", 2))}))
    async with running_grouper(emu):
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(cluster)) == TWO_GROUPS, 3.0)
        spec = cluster_spec(worker_group("gpu", 3), worker_group("cpu", 2, suspend=True))
        emu.patch_object("rayclusters", NS, "ray", {"spec": spec})
        await emu.wait_for(lambda: kai_subgroups(emu, owned_group(cluster)) == [
            {"name": "gpu", "minMember": 3}, {"name": "headgroup", "minMember": 1}] and min_member(
            emu, owned_group(cluster)) == 4, 3.0, f"PodGroup {emu.get('podgroups', NS, owned_group(cluster))}")


async def test_a_rayservices_cluster_is_a_gang_of_its_own(emu):
    """KubeRay makes the RayService's clusters (a new one beside the serving one on an
    upgrade): each is its own gang, sized by its own spec; the RayService has no group."""
    service = emu.put(crd_valid({"apiVersion": "ray.io/v1", "kind": "RayService",
                                 "metadata": {"name": "serve", "namespace": NS},
                                 "spec": {"rayClusterConfig": cluster_spec(worker_group("gpu", 2))}}))
    cluster = emu.put({"apiVersion": "ray.io/v1", "kind": "RayCluster",
                       "metadata": {"name": "serve-raycluster-x7k2p", "namespace": NS,
                                    "ownerReferences": [owner_ref(service)]},
                       "spec": cluster_spec(worker_group("gpu", 2))})
    kuberay_pods(emu, cluster, "headgroup", 1)
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, owned_group(cluster)) == 3, 3.0)
        pg = emu.get("podgroups", NS, owned_group(cluster))
        assert pg["metadata"]["ownerReferences"][0]["kind"] == "RayCluster"
        assert emu.get("podgroups", NS, owned_group(service)) is None
