"""KubeRay: a RayCluster on its own, or made by a RayJob or a RayService (each cluster
a gang of its own); a subgroup for the head and for each worker group, multi-host
replicas counted whole. Tested in tests/unit/test_kinds_ray.py."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from podgang.kinds.model import (ONE_PER_RUN, KindDoc, Obj, Role, SlimTemplate, Template, WorkloadKind,
                                 _conditions_finished, _only_part)
from podgang.objects import Resource, as_dict, as_int, as_list, labels, spec, status


#: read on a pod: its Ray group (subgroup): `headgroup` or a worker group's name
RAY_GROUP_LABEL = "ray.io/group"
RAY_HEAD_GROUP = "headgroup"  # the head pod's ray.io/group
#: KubeRay (1.5 and later) on each pod of a multi-host worker replica: which replica of its group
RAY_REPLICA_INDEX_LABEL = "ray.io/worker-group-replica-index"


def _ray_cluster_spec(obj: Any) -> Mapping[str, Any]:
    """A RayCluster's spec, or the cluster spec a RayJob (``rayClusterSpec``) or a
    RayService (``rayClusterConfig``) makes its clusters from."""
    kind = as_dict(obj).get("kind")
    if kind == "RayJob":
        return as_dict(spec(obj).get("rayClusterSpec"))
    if kind == "RayService":
        return as_dict(spec(obj).get("rayClusterConfig"))
    return spec(obj)


def _ray_roles(obj: Any) -> list[Role]:
    """The head, then each worker group not suspended: ``minReplicas`` (or ``replicas``
    when minReplicas is 0) × ``numOfHosts``. A suspended cluster wants no pods."""
    cluster = _ray_cluster_spec(obj)
    if not cluster or cluster.get("suspend") is True:
        return []
    out = [Role(RAY_HEAD_GROUP, 1, "the head", as_dict(as_dict(cluster.get("headGroupSpec")).get("template")),
                "headGroupSpec.template")]
    for i, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        group = as_dict(group)
        name = str(group.get("groupName") or f"worker-group-{i}")
        if group.get("suspend") is True:
            continue
        hosts = max(as_int(group.get("numOfHosts"), 1), 1)
        minimum = max(as_int(group.get("minReplicas"), 0), 0)
        count, field_name = (minimum, "minReplicas") if minimum > 0 else (
            max(as_int(group.get("replicas"), 0), 0), "replicas")
        why = f"{field_name} {count}" + (f" × numOfHosts {hosts}" if hosts != 1 else "")
        now = max(as_int(group.get("replicas"), 0), count)
        # multi-host replicas (numOfHosts > 1): each replica's hosts only work together, counted whole
        out.append(Role(name.lower(), count * hosts, why, as_dict(group.get("template")),
                        f"workerGroupSpecs[{i}].template", per_replica=hosts if hosts >= 2 and now >= 2 else None,
                        replica_count=now))
    return [r for r in out if r.size > 0]


#: read on a RayCluster: KubeRay's own gang scheduling is on (its batch scheduler makes the PodGroup; podgang makes none)
RAY_GANG_LABEL = "ray.io/gang-scheduling-enabled"
#: workload labels that turn an operator's own gang integration on (the grouper keeps them)
OPERATOR_GANG_LABELS = (RAY_GANG_LABEL,)


def _ray_own_gang(obj: Any) -> tuple[str, str] | None:
    """``ray.io/gang-scheduling-enabled`` on a RayCluster: KubeRay run with
    ``batchScheduler: scheduler-plugins`` makes its PodGroup (named after the cluster) and
    labels its pods (KubeRay's Volcano integration needs no label: the operator flag alone
    turns it on, and its pods then name ``ray-<name>-pg``, which the grouper sees)."""
    if as_dict(obj).get("kind") != "RayCluster" or RAY_GANG_LABEL not in labels(obj):
        return None
    name = str(as_dict(as_dict(obj).get("metadata")).get("name") or "")
    return name, (f"label {RAY_GANG_LABEL}: KubeRay (batchScheduler scheduler-plugins) makes PodGroup {name} and "
                  f"names it on the cluster's pods")


#: where the cluster spec of a Ray kind is
_RAY_CLUSTER_SPEC_AT: dict[str, tuple[str, ...]] = {"RayJob": ("spec", "rayClusterSpec"),
                                                    "RayService": ("spec", "rayClusterConfig")}


def _ray_scale_doc(kind: str) -> str:
    return ".".join(_RAY_CLUSTER_SPEC_AT.get(kind, ("spec",))) + ".workerGroupSpecs[<i>].replicas"


def _ray_scale_parts(obj: Any) -> dict[str, tuple[str | int, ...]]:
    """Each worker group's ``replicas`` (its head is one pod), wherever the cluster spec is."""
    where = _RAY_CLUSTER_SPEC_AT.get(str(as_dict(obj).get("kind")), ("spec",))
    return {str(as_dict(g).get("groupName") or f"worker-group-{i}").lower(): (*where, "workerGroupSpecs", i, "replicas")
            for i, g in enumerate(as_list(_ray_cluster_spec(obj).get("workerGroupSpecs")))}


def _ray_size(obj: Any) -> tuple[int, str]:
    if _ray_cluster_spec(obj).get("suspend") is True:
        return 0, "suspended"
    parts = _ray_roles(obj)
    return sum(r.size for r in parts), " + ".join(f"{r.name} {r.size}" for r in parts) or "no head"


def _ray_templates(obj: Any) -> list[tuple[str, Template]]:
    cluster = _ray_cluster_spec(obj)
    prefix = {"RayJob": "spec.rayClusterSpec.", "RayService": "spec.rayClusterConfig."}.get(
        str(as_dict(obj).get("kind")), "spec.")
    out = [(f"{prefix}headGroupSpec.template", as_dict(as_dict(cluster.get("headGroupSpec")).get("template")))]
    for i, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        out.append((f"{prefix}workerGroupSpecs[{i}].template", as_dict(as_dict(group).get("template"))))
    return out


def _slim_ray_cluster(c: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    c = as_dict(c)
    out: Obj = {"suspend": c["suspend"]} if "suspend" in c else {}
    out["headGroupSpec"] = {"template": slim_template(as_dict(c.get("headGroupSpec")).get("template"))}
    out["workerGroupSpecs"] = [
        {**{k: as_dict(g)[k] for k in ("groupName", "replicas", "minReplicas", "numOfHosts", "suspend")
            if k in as_dict(g)}, "template": slim_template(as_dict(g).get("template"))}
        for g in as_list(c.get("workerGroupSpecs")) if isinstance(g, Mapping)]
    return out


def _slim_ray(field_name: str | None) -> Callable[[Mapping[str, Any], SlimTemplate], Obj]:
    def slim(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
        s = as_dict(s)
        if field_name is None:
            return _slim_ray_cluster(s, slim_template)
        out: Obj = {"suspend": s["suspend"]} if "suspend" in s else {}
        if field_name in s:
            out[field_name] = _slim_ray_cluster(as_dict(s.get(field_name)), slim_template)
        return out
    return slim


def _ray_job_finished(obj: Any) -> bool:
    return status(obj).get("jobDeploymentStatus") in ("Complete", "Failed") or _conditions_finished(obj)


RAY_SIZE_RULE = ("head 1 + Σ worker groups `minReplicas` (or `replicas` when `minReplicas` is 0) × `numOfHosts`; a "
                 "worker group with `suspend: true` is left out, a suspended cluster wants no pods")
RAY_CLUSTER = WorkloadKind(
    Resource("ray.io", "v1", "rayclusters", "RayCluster", optional=True), _ray_size, _ray_templates,
    _slim_ray(None), aliases=("raycluster", "rayclusters"), scale_parts=_ray_scale_parts,
    scale_parts_doc=_ray_scale_doc("RayCluster"),
    default_scale_part=lambda obj: _only_part(RAY_CLUSTER, obj), roles=_ray_roles, role_labels=(RAY_GROUP_LABEL,),
    own_gang=_ray_own_gang, role_replica_label=RAY_REPLICA_INDEX_LABEL, placed_roles=True, operator_gangs=True,
    doc=KindDoc(RAY_SIZE_RULE, roles="`headgroup` + one per worker group (`groupName`, pods by label `ray.io/group`)"),
)
#: a RayJob's cluster (sized from the spec it is made from, rayClusterSpec) is a gang of its
#: own, and so is its submitter Job: the submitter starts only once the cluster is ready
RAY_JOB = WorkloadKind(
    Resource("ray.io", "v1", "rayjobs", "RayJob", optional=True), _ray_size, _ray_templates,
    _slim_ray("rayClusterSpec"), aliases=("rayjob", "rayjobs"), scale_parts=_ray_scale_parts,
    scale_parts_doc=_ray_scale_doc("RayJob"),
    default_scale_part=lambda obj: _only_part(RAY_JOB, obj), layout=ONE_PER_RUN, runs=("RayCluster", "Job"),
    roles=_ray_roles, role_labels=(RAY_GROUP_LABEL,), role_replica_label=RAY_REPLICA_INDEX_LABEL,
    status_fields=("jobDeploymentStatus",), finished=lambda obj: _ray_job_finished(obj), placed_roles=True,
    doc=KindDoc("its cluster (the one `status.rayClusterName` names, made from `spec.rayClusterSpec`) is a gang of "
                "its own, sized as a RayCluster; the submitter Job, made once the cluster is ready, is a gang of its "
                "own too", roles="as the RayCluster"),
)
#: each cluster of a RayService (the serving one, and a new one during an upgrade) is a gang of its own
RAY_SERVICE = WorkloadKind(
    Resource("ray.io", "v1", "rayservices", "RayService", optional=True), _ray_size, _ray_templates,
    _slim_ray("rayClusterConfig"), aliases=("rayservice", "rayservices"), scale_parts=_ray_scale_parts,
    scale_parts_doc=_ray_scale_doc("RayService"),
    default_scale_part=lambda obj: _only_part(RAY_SERVICE, obj), layout=ONE_PER_RUN, runs=("RayCluster",),
    roles=_ray_roles, role_labels=(RAY_GROUP_LABEL,), role_replica_label=RAY_REPLICA_INDEX_LABEL, placed_roles=True,
    operator_gangs=True,
    doc=KindDoc("each cluster it makes (the serving one, and a new one during an upgrade) is a gang of its own, "
                "sized as a RayCluster", roles="as the RayCluster"),
)
