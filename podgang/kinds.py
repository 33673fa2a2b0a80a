"""The workload kinds podgang knows: one registry entry per kind.

An entry says everything kind-specific: where the kind lives in the API, how many
pods it wants together right now, where its pod templates are, which fields the
grouper keeps in its cache, when it is rolling out, finished or suspended, how
its gangs are laid out (one per object, one per run, one per replica group) and
which field ``--scale`` changes. The rules, the grouper's watches and cache,
``podgang plan`` and the chart's RBAC (checked by a test) all read this table, so
adding a kind (say Kubeflow's PyTorchJob) is one new entry. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from podgang import rollouts
from podgang.objects import (
    EMPTY,
    POD,
    Resource,
    as_dict,
    as_int,
    as_list,
    labels,
    spec,
    status,
)

Obj = dict[str, Any]
Template = Mapping[str, Any]
SlimTemplate = Callable[[Any], Obj]

#: gang layouts
ONE_PER_OBJECT = "object"  # the top owner's one PodGroup
ONE_PER_RUN = "run"  # every Job the kind starts is a gang of its own (CronJob)
ONE_PER_REPLICA = "replica"  # one PodGroup per replica group (LeaderWorkerSet)

# Job / JobSet conditions that mean "this run is over".
FINISHED_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Completed"})

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


@dataclass(frozen=True)
class WorkloadKind:
    """Everything podgang needs to know about one kind of workload."""

    resource: Resource
    #: (pods it wants together right now, why) — spec §3
    size: Callable[[Any], tuple[int, str]]
    #: [(path, pod template)] inside an object of this kind
    templates: Callable[[Any], list[tuple[str, Template]]]
    #: the spec fields the grouper keeps, given a function that slims a pod template
    slim_spec: Callable[[Mapping[str, Any], SlimTemplate], Obj]
    #: names accepted by ``podgang plan --scale KIND/NAME=N``
    aliases: tuple[str, ...] = ()
    #: the field ``--scale`` sets (None: the kind does not scale)
    scale_path: tuple[str, ...] | None = None
    #: why its controller replaces pods on purpose right now, or None (:mod:`podgang.rollouts`),
    #: given the workload and what is known of its pods
    rolling_out: Callable[[Any, rollouts.WorkloadPods], str | None] = lambda obj, seen: None
    layout: str = ONE_PER_OBJECT
    #: the grouper watches it and follows its size; the webhook fetches it as an owner
    followed: bool = True
    #: status fields the grouper keeps
    status_fields: tuple[str, ...] = ()
    #: status conditions the grouper keeps (type, status, reason), besides the finished ones
    kept_conditions: tuple[str, ...] = ()
    #: why its controller makes its pods in stages (a pod only once others are Ready or
    #: running), so that its gang counts only the stage it is in, and what makes it one
    #: gang; None when it makes them all at once. :func:`size` already counts the stage.
    stages: Callable[[Any], str | None] = lambda obj: None

    @property
    def kind(self) -> str:
        return self.resource.kind

    def replica_suffixes(self, obj: Any) -> list[str]:
        """The name suffix of each PodGroup an object of this kind owns itself."""
        if self.layout == ONE_PER_REPLICA:
            return [f"-group-{i}" for i in range(max(as_int(spec(obj).get("replicas"), 1), 0))]
        if self.layout == ONE_PER_RUN:
            return []
        return [""]


# ---------------------------------------------------------------------------
# sizes


def job_size(job_spec: Any, job_status: Any = EMPTY) -> tuple[int, str]:
    """A Job's gang: ``parallelism``, capped by the completions still to come.

    With ``completions: 5, parallelism: 3`` the last run has 2 pods: asking for 3
    would keep them Pending for ever, so the succeeded ones (``status.succeeded``)
    are taken off.
    """
    job_spec, job_status = as_dict(job_spec), as_dict(job_status)
    parallelism = max(as_int(job_spec.get("parallelism"), 1), 0)
    completions = job_spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool) and completions >= 0:
        succeeded = max(as_int(job_status.get("succeeded"), 0), 0)
        remaining = max(completions - succeeded, 0)
        if remaining < parallelism:
            if succeeded:
                return remaining, (f"parallelism {parallelism} capped by the {remaining} remaining completions "
                                   f"({completions} - {succeeded} succeeded)")
            return completions, f"parallelism {parallelism} capped by completions {completions}"
        return parallelism, f"parallelism {parallelism} (completions {completions})"
    return parallelism, f"parallelism {parallelism}"


def _replicas_size(obj: Any) -> tuple[int, str]:
    replicas = max(as_int(spec(obj).get("replicas"), 1), 0)
    return replicas, f"spec.replicas {replicas}"


def _statefulset_stages(obj: Any) -> str | None:
    replicas = max(as_int(spec(obj).get("replicas"), 1), 0)
    policy = spec(obj).get("podManagementPolicy") or "OrderedReady"
    if policy == "Parallel" or replicas <= 1:
        return None
    return (f"podManagementPolicy {policy}{' (the default)' if policy == 'OrderedReady' else ''} makes its "
            f"{replicas} pods one at a time, each only once the one before is Ready; "
            f"podManagementPolicy: Parallel makes them one gang")


def _statefulset_size(obj: Any) -> tuple[int, str]:
    replicas, why = _replicas_size(obj)
    if _statefulset_stages(obj) is None:
        return replicas, why
    return 1, f"{why}, made one at a time (OrderedReady): a gang of 1"


def _job_kind_size(obj: Any) -> tuple[int, str]:
    return job_size(spec(obj), status(obj))


def _cronjob_size(obj: Any) -> tuple[int, str]:
    size, why = job_size(_job_template_spec(obj))
    return size, f"per run: jobTemplate {why}"


def _lws_size(obj: Any) -> tuple[int, str]:
    size = max(as_int(as_dict(spec(obj).get("leaderWorkerTemplate")).get("size"), 1), 1)
    return size, f"leaderWorkerTemplate.size {size} per group"


def _jobset_size(obj: Any) -> tuple[int, str]:
    total, parts = 0, []
    for rjob in as_list(spec(obj).get("replicatedJobs")):
        rjob = as_dict(rjob)
        replicas = max(as_int(rjob.get("replicas"), 1), 0)
        size, _ = job_size(as_dict(as_dict(rjob.get("template")).get("spec")))
        total += replicas * size
        parts.append(f"{rjob.get('name', '?')} {replicas}×{size}")
    return total, "replicatedJobs " + (" + ".join(parts) if parts else "none")


def _one_pod(obj: Any) -> tuple[int, str]:
    return 1, "a single pod"


def _per_node(obj: Any) -> tuple[int, str]:
    return 1, "DaemonSet: one pod at a time (one per node)"


# ---------------------------------------------------------------------------
# pod templates


def _job_template_spec(obj: Any) -> Mapping[str, Any]:
    return as_dict(as_dict(spec(obj).get("jobTemplate")).get("spec"))


def _spec_template(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.template", as_dict(spec(obj).get("template")))] if "template" in spec(obj) else []


def _pod_itself(obj: Any) -> list[tuple[str, Template]]:
    return [("", as_dict(obj))]


def _cronjob_templates(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.jobTemplate.spec.template", as_dict(_job_template_spec(obj).get("template")))]


def _lws_templates(obj: Any) -> list[tuple[str, Template]]:
    lwt = as_dict(spec(obj).get("leaderWorkerTemplate"))
    out: list[tuple[str, Template]] = []
    if "leaderTemplate" in lwt:
        out.append(("spec.leaderWorkerTemplate.leaderTemplate", as_dict(lwt.get("leaderTemplate"))))
    out.append(("spec.leaderWorkerTemplate.workerTemplate", as_dict(lwt.get("workerTemplate"))))
    return out


def _jobset_templates(obj: Any) -> list[tuple[str, Template]]:
    out: list[tuple[str, Template]] = []
    for i, rjob in enumerate(as_list(spec(obj).get("replicatedJobs"))):
        job_spec = as_dict(as_dict(as_dict(rjob).get("template")).get("spec"))
        out.append((f"spec.replicatedJobs[{i}].template.spec.template", as_dict(job_spec.get("template"))))
    return out


# ---------------------------------------------------------------------------
# what the grouper keeps


def _slim_replicas(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {"replicas": s["replicas"]} if "replicas" in s else {}
    out["template"] = slim_template(s.get("template"))
    return out


def _slim_deployment(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out = _slim_replicas(s, slim_template)
    if "type" in as_dict(s.get("strategy")):  # Recreate or RollingUpdate: how a rollout looks
        out["strategy"] = {"type": s["strategy"]["type"]}
    return out


def _slim_statefulset(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out = _slim_replicas(s, slim_template)
    if "podManagementPolicy" in s:  # OrderedReady makes its pods one at a time: the gang's size
        out["podManagementPolicy"] = s["podManagementPolicy"]
    if "updateStrategy" in s:  # its type and partition: where a rollout ends
        strategy = as_dict(s["updateStrategy"])
        out["updateStrategy"] = {"type": strategy.get("type"), "rollingUpdate": {
            "partition": as_dict(strategy.get("rollingUpdate")).get("partition")}}
    return out


def _slim_job(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    s = as_dict(s)
    out: Obj = {k: s[k] for k in ("parallelism", "completions", "suspend") if k in s}
    if "template" in s:
        out["template"] = slim_template(s.get("template"))
    return out


def _slim_cronjob(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"jobTemplate": {"spec": _slim_job(as_dict(as_dict(s.get("jobTemplate")).get("spec")), slim_template)}}


def _slim_lws(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {"replicas": s["replicas"]} if "replicas" in s else {}
    lwt = as_dict(s.get("leaderWorkerTemplate"))
    slim_lwt: Obj = {"size": lwt["size"]} if "size" in lwt else {}
    for k in ("leaderTemplate", "workerTemplate"):
        if k in lwt:
            slim_lwt[k] = slim_template(lwt.get(k))
    out["leaderWorkerTemplate"] = slim_lwt
    return out


def _slim_jobset(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {"suspend": s["suspend"]} if "suspend" in s else {}
    out["replicatedJobs"] = [
        {
            "name": as_dict(r).get("name"),
            "replicas": as_dict(r).get("replicas", 1),
            "template": {"spec": _slim_job(as_dict(as_dict(as_dict(r).get("template")).get("spec")), slim_template)},
        }
        for r in as_list(s.get("replicatedJobs")) if isinstance(r, Mapping)
    ]
    return out


def _slim_template_only(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(s.get("template"))} if "template" in s else {}


# ---------------------------------------------------------------------------
# the registry

_REPLICATED_STATUS = ("observedGeneration", "replicas", "updatedReplicas", "currentRevision", "updateRevision")
_RUN_STATUS = ("completionTime", "active", "succeeded")

REPLICA_SET = WorkloadKind(
    Resource("apps", "v1", "replicasets", "ReplicaSet"), _replicas_size, _spec_template, _slim_replicas,
    aliases=("replicaset", "replicasets", "rs"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.replica_set_rollout, status_fields=_REPLICATED_STATUS,
)
DEPLOYMENT = WorkloadKind(
    Resource("apps", "v1", "deployments", "Deployment"), _replicas_size, _spec_template, _slim_deployment,
    aliases=("deployment", "deployments", "deploy"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.deployment_rollout, status_fields=_REPLICATED_STATUS, kept_conditions=("Progressing",),
)
STATEFUL_SET = WorkloadKind(
    Resource("apps", "v1", "statefulsets", "StatefulSet"), _statefulset_size, _spec_template, _slim_statefulset,
    aliases=("statefulset", "statefulsets", "sts"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.statefulset_rollout, status_fields=_REPLICATED_STATUS, stages=_statefulset_stages,
)
JOB = WorkloadKind(
    Resource("batch", "v1", "jobs", "Job"), _job_kind_size, _spec_template, _slim_job,
    aliases=("job", "jobs"), scale_path=("spec", "parallelism"), status_fields=_RUN_STATUS,
)
CRON_JOB = WorkloadKind(
    Resource("batch", "v1", "cronjobs", "CronJob"), _cronjob_size, _cronjob_templates, _slim_cronjob,
    aliases=("cronjob", "cronjobs", "cj"), scale_path=("spec", "jobTemplate", "spec", "parallelism"),
    layout=ONE_PER_RUN,
)
LEADER_WORKER_SET = WorkloadKind(
    Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", optional=True),
    _lws_size, _lws_templates, _slim_lws,
    aliases=("leaderworkerset", "leaderworkersets", "lws"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.leader_worker_set_rollout, layout=ONE_PER_REPLICA, status_fields=_REPLICATED_STATUS,
)
JOB_SET = WorkloadKind(
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", optional=True),
    _jobset_size, _jobset_templates, _slim_jobset, aliases=("jobset", "jobsets"), status_fields=_RUN_STATUS,
)
DAEMON_SET = WorkloadKind(
    Resource("apps", "v1", "daemonsets", "DaemonSet"), _per_node, _spec_template, _slim_template_only,
    aliases=("daemonset", "daemonsets", "ds"), followed=False,
)

#: every workload kind, by kind name
WORKLOADS: dict[str, WorkloadKind] = {
    k.kind: k for k in (DEPLOYMENT, REPLICA_SET, STATEFUL_SET, JOB, CRON_JOB, LEADER_WORKER_SET, JOB_SET, DAEMON_SET)
}

#: the workloads whose size the grouper follows (it watches these)
FOLLOWED: tuple[WorkloadKind, ...] = tuple(k for k in WORKLOADS.values() if k.followed)

#: owner kinds the webhook looks up to walk to the top owner. An owner of any other
#: kind (a DaemonSet, a custom controller's object) is taken as the top.
OWNER_KINDS: dict[str, Resource] = {POD.kind: POD, **{k.kind: k.resource for k in FOLLOWED}}

#: kinds whose every run (a Job it starts) is a gang of its own
RUN_OWNERS = frozenset(k.kind for k in WORKLOADS.values() if k.layout == ONE_PER_RUN)


def workload_kind(obj_or_kind: Any) -> WorkloadKind | None:
    kind = obj_or_kind if isinstance(obj_or_kind, str) else as_dict(obj_or_kind).get("kind")
    return WORKLOADS.get(kind) if isinstance(kind, str) else None


def resource_for(api_version: str, kind: str) -> Resource | None:
    """The known resource for an ownerReference's apiVersion and kind, if any."""
    resource = OWNER_KINDS.get(kind)
    if resource is None or resource.api_version != api_version:
        return None
    return resource


def pod_templates(obj: Any) -> list[tuple[str, Template]]:
    """The pod templates inside a pod or workload, with their path."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _pod_itself(obj)
    entry = workload_kind(obj)
    return entry.templates(obj) if entry else _spec_template(obj)


def desired_size(obj: Any) -> tuple[int, str]:
    """How many pods a workload wants running together right now, and why."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _one_pod(obj)
    entry = workload_kind(obj)
    if entry is None:
        return 1, f"{kind or 'unknown kind'}: one pod at a time"
    return entry.size(obj)


def stages(obj: Any) -> str | None:
    """Why a workload's controller makes its pods in stages (its gang counts only the
    stage it is in) and what makes it one gang, or None."""
    entry = workload_kind(obj)
    return entry.stages(obj) if entry is not None else None


def rolling_out(obj: Any, seen: rollouts.WorkloadPods = rollouts.NO_PODS) -> str | None:
    """Why a workload's controller replaces its pods on purpose right now, or None:
    its kind's entry decides, given what is known of its pods."""
    entry = workload_kind(obj)
    return entry.rolling_out(obj, seen) if entry is not None else None


def is_finished(obj: Any) -> bool:
    """A Job or JobSet run that is over (it wants no pods any more)."""
    st = status(obj)
    if st.get("completionTime"):
        return True
    return any(as_dict(c).get("type") in FINISHED_CONDITIONS and as_dict(c).get("status", "True") == "True"
               for c in as_list(st.get("conditions")))


def is_suspended(obj: Any) -> bool:
    """A Job or JobSet held back (e.g. by Kueue): its pods are removed on purpose."""
    return spec(obj).get("suspend") is True


def replica_suffix(top_kind: str, pod: Any) -> tuple[str, str]:
    """The suffix of the PodGroup a pod of a ``top_kind`` workload joins, and why
    (``-group-3`` for a LeaderWorkerSet's fourth group); ``("", "")`` otherwise."""
    entry = WORKLOADS.get(top_kind)
    if entry is None or entry.layout != ONE_PER_REPLICA:
        return "", ""
    index = labels(pod).get(LWS_GROUP_INDEX_LABEL)
    if index is not None and index.isdigit():
        return f"-group-{index}", f", group {index}"
    return "", ""


def scale_target(alias: str) -> WorkloadKind | None:
    """The kind ``--scale`` means by ``alias`` (``deploy``, ``sts``, ``lws`` ...)."""
    alias = alias.lower()
    return next((k for k in WORKLOADS.values() if k.scale_path and alias in k.aliases), None)

