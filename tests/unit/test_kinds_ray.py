"""KubeRay, one table: RayCluster, RayJob and RayService manifests the real CRDs accept, the
gang podgang gives their cluster and its subgroups (``headgroup`` and one per worker group)."""

from __future__ import annotations

from typing import Any

import pytest

from podgang import kinds, rules
from tests.crd_support import crd_valid, gang_and_parts


def template(annotations: dict | None = None) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "ray", "image": "rayproject/ray:2.41.0"}]}}


def worker_group(name: str, replicas: int | None = None, *, min_replicas: int | None = None, hosts: int | None = None,
                 suspend: bool | None = None, annotations: dict | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"groupName": name, "template": template(annotations), "minReplicas": min_replicas or 0,
                             "maxReplicas": max(replicas or 0, min_replicas or 0, 1)}
    for key, value in (("replicas", replicas), ("numOfHosts", hosts), ("suspend", suspend)):
        if value is not None:
            group[key] = value
    return group


def cluster_spec(*groups: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": template()}, "workerGroupSpecs": list(groups), **extra}


def ray(kind: str, spec: dict[str, Any], name: str = "ray") -> dict[str, Any]:
    return crd_valid({"apiVersion": "ray.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "team"},
                      "spec": spec})


TABLE = [
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 2), worker_group("cpu", 4))),
                 7, "raycluster/ray headgroup 1 + gpu 2 + cpu 4", [("headgroup", 1), ("gpu", 2), ("cpu", 4)],
                 id="two worker groups"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 4, min_replicas=2))),
                 3, "raycluster/ray headgroup 1 + gpu 2", [("headgroup", 1), ("gpu", 2)], id="autoscaled: minReplicas"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("tpu", 2, hosts=4))),
                 9, "raycluster/ray headgroup 1 + tpu 8", [("headgroup", 1), ("tpu", 8)], id="multi-host: × numOfHosts"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 2), worker_group("spare", 3, suspend=True))),
                 3, "raycluster/ray headgroup 1 + gpu 2", [("headgroup", 1), ("gpu", 2)],
                 id="a suspended worker group is left out (KubeRay's field is suspend)"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 0))),
                 1, "raycluster/ray headgroup 1", [], id="head only"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 2), suspend=True)),
                 1, "raycluster/ray suspended; a gang is never smaller than 1", [], id="a suspended cluster wants no pods"),
    pytest.param(lambda: ray("RayCluster", cluster_spec(worker_group("gpu", 4, annotations={
                     "podgang.io/min-available": "2"}))),
                 3, "raycluster/ray headgroup 1 + gpu 2 (pinned)", [("headgroup", 1), ("gpu", 2)],
                 id="min-available on a worker group's template pins it"),
    pytest.param(lambda: ray("RayJob", {"entrypoint": "python train.py",
                                        "rayClusterSpec": cluster_spec(worker_group("gpu", 2))}),
                 3, "rayjob/ray headgroup 1 + gpu 2", [("headgroup", 1), ("gpu", 2)],
                 id="rayjob: the cluster it makes"),
    pytest.param(lambda: ray("RayService", {"rayClusterConfig": cluster_spec(worker_group("serve", 3))}),
                 4, "rayservice/ray headgroup 1 + serve 3", [("headgroup", 1), ("serve", 3)],
                 id="rayservice: each cluster it makes"),
]


@pytest.mark.parametrize("build,size,reason,subgroups", TABLE)
def test_the_gang_of_a_ray_cluster(build, size, reason, subgroups):
    assert gang_and_parts(build()) == (size, reason, subgroups)


def test_a_worker_group_name_that_cannot_name_a_subgroup_is_said():
    obj = ray("RayCluster", cluster_spec(worker_group("small_group", 2)))
    assert rules.role_subgroups(obj) == ()  # only the summed minimum
    assert rules.min_member_for(obj).value == 3
    (problem,) = rules.role_problems(obj)
    assert problem.startswith("raycluster/ray: \"small_group\" cannot name a subgroup")


def test_the_clusters_of_a_rayjob_and_a_rayservice_are_gangs_of_their_own():
    """A RayService makes a new cluster beside the serving one on an upgrade; a RayJob makes
    its cluster, then a submitter Job once the cluster is ready: each is a gang of its own,
    so that none waits for pods that come only after another runs."""
    for owner_kind, child_kind in (("RayService", "RayCluster"), ("RayJob", "RayCluster"), ("RayJob", "Job")):
        child = {"apiVersion": "v1", "kind": child_kind, "metadata": {"name": "c", "ownerReferences": [
            {"apiVersion": "ray.io/v1", "kind": owner_kind, "name": "ray", "uid": "u-1", "controller": True}]}}
        assert rules.next_owner(child) is None, (owner_kind, child_kind)
    pod = {"metadata": {"labels": {"ray.io/group": "headgroup", "ray.io/node-type": "head"}}}
    assert kinds.pod_role("RayCluster", pod) == "headgroup"


@pytest.mark.parametrize("kind,field", [("RayCluster", None), ("RayJob", "rayClusterSpec"),
                                        ("RayService", "rayClusterConfig")])
def test_ray_pod_templates_are_found(kind, field):
    spec = cluster_spec(worker_group("gpu", 2))
    obj = ray(kind, {field: spec} if field else spec)
    paths = [path for path, _ in kinds.pod_templates(obj)]
    prefix = f"spec.{field}." if field else "spec."
    assert paths == [f"{prefix}headGroupSpec.template", f"{prefix}workerGroupSpecs[0].template"]
