"""Kubeflow's training jobs (training-operator's v1 kinds, mpi-operator's v2beta1
MPIJob): one entry each from one factory, a subgroup per replica type, a smaller
``minAvailable`` taken from the workers first. Tested in tests/unit/test_kinds_kubeflow.py."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from podgang.kinds.model import KindDoc, Obj, Role, SlimTemplate, Template, WorkloadKind, _whole_number
from podgang.objects import Resource, as_dict, as_int, spec, status


#: read on a pod: its role (subgroup) in a Kubeflow training job (training-operator)
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
#: read on a pod: its role in an MPIJob (mpi-operator)
KUBEFLOW_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
#: the replica type a smaller minimum (elastic, minAvailable) is taken from first: the
#: others (master, launcher, chief, ps) are each the one pod the rest cannot run without
SCALING_ROLE = "worker"


def _kubeflow_whole(obj: Any, elastic: bool) -> tuple[int | None, str]:
    """The minimum a Kubeflow job sets for its whole gang, if any, and where it is."""
    policy = as_dict(as_dict(spec(obj).get("runPolicy")).get("schedulingPolicy"))
    minimum = _whole_number(policy.get("minAvailable"))
    if minimum is not None:
        return minimum, f"runPolicy.schedulingPolicy.minAvailable {minimum}"
    if elastic:
        minimum = _whole_number(as_dict(spec(obj).get("elasticPolicy")).get("minReplicas"))
        if minimum is not None:
            return minimum, f"elasticPolicy.minReplicas {minimum}"
    return None, ""


def _launcher_made(obj: Any) -> bool:
    """Whether an MPIJob's launcher exists (mpi-operator counts it in status.replicaStatuses)."""
    launcher = as_dict(as_dict(status(obj).get("replicaStatuses")).get("Launcher"))
    return any(as_int(launcher.get(k), 0) > 0 for k in ("active", "succeeded", "failed"))


def _fit(parts: list[Role], whole: int, why: str) -> list[Role]:
    """``parts`` brought down to ``whole`` pods in all, the workers first: a job whose
    minimum is below its replicas starts with fewer workers, never without its master."""
    deficit = sum(r.size for r in parts) - whole
    if deficit <= 0:
        return parts
    order = sorted(range(len(parts)), key=lambda i: (parts[i].name != SCALING_ROLE, -i))
    sizes = [r.size for r in parts]
    for i in order:
        take = min(deficit, sizes[i])
        sizes[i] -= take
        deficit -= take
    return [r if size == r.size else replace(r, size=size, reason=f"{r.reason}, {size} within {why}")
            for r, size in zip(parts, sizes)]


def _kubeflow(field: str, elastic: bool = False, launcher_waits: bool = False) -> tuple[
        Callable[[Any], list[Role]], Callable[[Any], tuple[int, str]], Callable[[Any], list[tuple[str, Template]]],
        Callable[[Any], str | None]]:
    """The roles, size and templates of a Kubeflow job whose replica specs are ``field``."""

    def waiting(obj: Any) -> bool:
        """An MPIJob whose launcher is made only once its workers are Ready, not made yet."""
        return (launcher_waits and spec(obj).get("launcherCreationPolicy") == "WaitForWorkersReady"
                and not _launcher_made(obj))

    def roles(obj: Any) -> list[Role]:
        parts = []
        for rtype, rspec in as_dict(spec(obj).get(field)).items():
            rspec = as_dict(rspec)
            replicas = max(as_int(rspec.get("replicas"), 1), 0)
            if waiting(obj) and str(rtype).lower() == "launcher":
                replicas = 0  # not there to count: it joins once it exists
            parts.append(Role(str(rtype).lower(), replicas, f"{rtype} replicas {replicas}",
                              as_dict(rspec.get("template")), f"spec.{field}.{rtype}.template", written=replicas))
        whole, why = _kubeflow_whole(obj, elastic)
        if whole is not None:
            parts = _fit(parts, max(whole - 1, 0) if waiting(obj) else whole, why)
        return [r for r in parts if r.size > 0]

    def size(obj: Any) -> tuple[int, str]:
        parts = roles(obj)
        whole, why = _kubeflow_whole(obj, elastic)
        listed = " + ".join(f"{r.name} {r.size}" for r in parts) or f"no {field}"
        if whole is not None:
            listed = f"{why}: {listed}"
        if waiting(obj):
            listed += "; the launcher joins once the workers are Ready (launcherCreationPolicy WaitForWorkersReady)"
        return sum(r.size for r in parts), listed

    def templates(obj: Any) -> list[tuple[str, Template]]:
        return [(f"spec.{field}.{rtype}.template", as_dict(as_dict(rspec).get("template")))
                for rtype, rspec in as_dict(spec(obj).get(field)).items()]

    def minimum_problem(obj: Any) -> str | None:
        whole, why = _kubeflow_whole(obj, elastic)
        pods = sum(max(as_int(as_dict(rspec).get("replicas"), 1), 0) for rspec in as_dict(spec(obj).get(field)).values())
        if whole is None or whole <= pods:
            return None
        return (f"{why} is more than the {pods} pods the job is made of: podgang's gang is {max(pods, 1)} (KAI's own "
                f"pod-grouper would make it {whole}, a gang its pods can never meet: the job would never be placed)")

    return roles, size, templates, minimum_problem


def _slim_kubeflow(field: str) -> Callable[[Mapping[str, Any], SlimTemplate], Obj]:
    def slim(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
        s = as_dict(s)
        out: Obj = {field: {
            str(rtype): {**({"replicas": as_dict(r)["replicas"]} if "replicas" in as_dict(r) else {}),
                         "template": slim_template(as_dict(r).get("template"))}
            for rtype, r in as_dict(s.get(field)).items()}}
        run = as_dict(s.get("runPolicy"))
        kept_run: Obj = {"suspend": run["suspend"]} if "suspend" in run else {}
        policy = as_dict(run.get("schedulingPolicy"))
        if "minAvailable" in policy:
            kept_run["schedulingPolicy"] = {"minAvailable": policy["minAvailable"]}
        if kept_run:
            out["runPolicy"] = kept_run
        if "minReplicas" in as_dict(s.get("elasticPolicy")):
            out["elasticPolicy"] = {"minReplicas": as_dict(s.get("elasticPolicy"))["minReplicas"]}
        if "launcherCreationPolicy" in s:
            out["launcherCreationPolicy"] = s["launcherCreationPolicy"]
        return out
    return slim


def _run_policy_suspended(obj: Any) -> bool:
    return as_dict(spec(obj).get("runPolicy")).get("suspend") is True


#: read on a Kubeflow training job's pod: its index among its replica type's pods (a PyTorch worker's segment is index // segment size)
KUBEFLOW_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


def _kubeflow_kind(kind: str, plural: str, field: str, aliases: tuple[str, ...], doc: KindDoc, *,
                   version: str = "v1", also: tuple[str, ...] = (), elastic: bool = False,
                   launcher_waits: bool = False, segmented_role: str | None = None,
                   lone_role_subgroup: bool = False) -> WorkloadKind:
    roles, size, templates, minimum_problem = _kubeflow(field, elastic, launcher_waits)
    return WorkloadKind(
        Resource("kubeflow.org", version, plural, kind, optional=True, also=also), size, templates,
        _slim_kubeflow(field), aliases=aliases, status_fields=("replicaStatuses",), roles=roles,
        scale_parts=lambda obj: {str(rtype).lower(): ("spec", field, str(rtype), "replicas")
                                 for rtype in as_dict(spec(obj).get(field))},
        scale_parts_doc=f"spec.{field}.<replica type>.replicas",
        default_scale_part=lambda obj: SCALING_ROLE,
        role_labels=(KUBEFLOW_REPLICA_TYPE_LABEL, KUBEFLOW_JOB_ROLE_LABEL), suspended=_run_policy_suspended, doc=doc,
        segmented_role=segmented_role, segment_index_label=KUBEFLOW_REPLICA_INDEX_LABEL if segmented_role else None,
        minimum_problem=minimum_problem, lone_role_subgroup=lone_role_subgroup,
    )


PYTORCH_JOB = _kubeflow_kind(
    "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", ("pytorchjob", "pytorchjobs"),
    KindDoc("`runPolicy.schedulingPolicy.minAvailable`, else `elasticPolicy.minReplicas`, else Σ replica specs' "
            "`replicas` (unset: 1)", roles="one per replica type: `master`, `worker`"), elastic=True,
    # a scheduler that segments (KAI, by its segment size) splits its workers; KAI lists its master and worker
    # subgroups whatever the other's replicas
    segmented_role="worker", lone_role_subgroup=True)
TF_JOB = _kubeflow_kind("TFJob", "tfjobs", "tfReplicaSpecs", ("tfjob", "tfjobs"), KindDoc(
    "`minAvailable`, else Σ `replicas`", roles="one per replica type: `chief`, `ps`, `worker`, `evaluator`, …"))
XGBOOST_JOB = _kubeflow_kind("XGBoostJob", "xgboostjobs", "xgbReplicaSpecs", ("xgboostjob", "xgboostjobs"), KindDoc(
    "`minAvailable`, else Σ `replicas`", roles="one per replica type"))
JAX_JOB = _kubeflow_kind("JAXJob", "jaxjobs", "jaxReplicaSpecs", ("jaxjob", "jaxjobs"), KindDoc(
    "`minAvailable`, else Σ `replicas`", roles="one per replica type"))
PADDLE_JOB = _kubeflow_kind("PaddleJob", "paddlejobs", "paddleReplicaSpecs", ("paddlejob", "paddlejobs"), KindDoc(
    "`minAvailable`, else Σ `replicas`", roles="`master`, `worker`"))
#: mpi-operator's v2beta1 (its launcher is a Job) or training-operator's v1: one CRD name, so
#: a cluster serves one of them, with the fields podgang reads in the same places
MPI_JOB = _kubeflow_kind(
    "MPIJob", "mpijobs", "mpiReplicaSpecs", ("mpijob", "mpijobs"),
    KindDoc("`minAvailable`, else Σ `replicas`", roles="`launcher`, `worker`",
            staging="with `launcherCreationPolicy: WaitForWorkersReady` the launcher is left out until mpi-operator "
                    "reports it (`status.replicaStatuses.Launcher`)"),
    version="v2beta1", also=("v1",), launcher_waits=True)


#: on a Notebook: Kubeflow's notebook controller scales its StatefulSet to 0 (culled or stopped by its user)
NOTEBOOK_STOPPED_ANNOTATION = "kubeflow-resource-stopped"


def _notebook_size(obj: Any) -> tuple[int, str]:
    if NOTEBOOK_STOPPED_ANNOTATION in as_dict(as_dict(as_dict(obj).get("metadata")).get("annotations")):
        return 0, f"stopped (annotation {NOTEBOOK_STOPPED_ANNOTATION}): no pod"
    return 1, "a Notebook is one pod (its StatefulSet's)"


def _slim_notebook(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(as_dict(s).get("template"))} if "template" in as_dict(s) else {}


#: Kubeflow's notebook controller makes a StatefulSet of one pod per Notebook: the Notebook is
#: its pod's top owner (KAI's Notebook plugin: v1beta1; served as v1 too, with the same fields)
NOTEBOOK = WorkloadKind(
    Resource("kubeflow.org", "v1beta1", "notebooks", "Notebook", optional=True, also=("v1",)), _notebook_size,
    lambda obj: [("spec.template", as_dict(spec(obj).get("template")))] if "template" in spec(obj) else [],
    _slim_notebook, aliases=("notebook", "notebooks"),
    suspended=lambda obj: NOTEBOOK_STOPPED_ANNOTATION in as_dict(as_dict(as_dict(obj).get("metadata")).get(
        "annotations")),
    doc=KindDoc("1 (one pod), 0 while `kubeflow-resource-stopped`; its default priority is `build`, as KAI's"),
)
