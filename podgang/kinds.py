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

import copy
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from podgang import rollouts
from podgang.backends.coscheduling import GROUP_LABEL as COSCHEDULING_GROUP_LABEL
from podgang.backends.volcano import GROUP_ANNOTATION as VOLCANO_GROUP_ANNOTATION
from podgang.objects import (
    EMPTY,
    POD,
    OwnerRef,
    Resource,
    as_dict,
    as_int,
    as_list,
    field_write_times,
    labels,
    metadata,
    spec,
    status,
)

Obj = dict[str, Any]
Template = Mapping[str, Any]
SlimTemplate = Callable[[Any], Obj]

#: gang layouts
ONE_PER_OBJECT = "object"  # the top owner's one PodGroup
ONE_PER_RUN = "run"  # every object the kind starts is a gang of its own (a CronJob's Jobs, a RayService's clusters)
ONE_PER_REPLICA = "replica"  # one PodGroup per replica group (LeaderWorkerSet)

# Job / JobSet conditions that mean "this run is over".
FINISHED_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Completed",
                                 "Succeeded"})  # Succeeded: a Kubeflow training job's

#: read on a pod: its LeaderWorkerSet (set by the LWS controller)
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
#: read on a pod: its LWS group, the suffix of its PodGroup (`…-group-<index>`)
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
#: "0" on a group's leader, "1".."size-1" on its workers
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: LWS's startupPolicy that makes a group's workers only once its leader is Ready
LWS_LEADER_READY = "LeaderReady"


@dataclass(frozen=True)
class Role:
    """One part of a workload's gang with a minimum of its own: the pods of one replica
    type (a PyTorchJob's master, its workers; an MPIJob's launcher), of one Ray worker
    group, ... Each is a subgroup of the workload's PodGroup, so that the gang is never
    counted whole while its only launcher, master or head is missing."""

    name: str  # the subgroup's name: the role's pods carry it in the kind's role label
    size: int  # its minimum
    reason: str  # where the number comes from
    template: Template = field(default_factory=dict)  # its pod template: podgang.io/min-available pins the role
    path: str = ""  # where that template is
    #: how many copies of the object its pods come from it has (a replicated job's replicas),
    #: and that object's own template (the replicated job's Job template): a scheduler's own
    #: size annotation there sizes each copy (KAI's batch-min-member)
    replicas: int = 1
    owner_template: Template = field(default_factory=dict)
    written: int | None = None  # the pods it is written with, where its minimum may be fewer
    #: pods per replica when the role is several replicas of several pods each (a JobSet's
    #: replicated job: its Jobs), each counted whole; None: its pods are the units
    per_replica: int | None = None
    #: with :attr:`per_replica`: the replicas there are now (a Ray worker group's ``replicas``,
    #: beyond its ``minReplicas``); None: as many as the role needs
    replica_count: int | None = None


@dataclass(frozen=True)
class Stage:
    """The gang of a replica group in an earlier stage than the whole group, and why."""

    size: int
    reason: str
    whole: int  # the group's gang once it is whole


@dataclass(frozen=True)
class KindDoc:
    """What the reference page says of a kind (``docs/reference/workload-kinds.md`` is
    generated from it by ``make reference``): the rules above in words. What KAI's own
    pod-grouper does instead is said beside it, from ``podgang.backends.kai``."""

    size: str  # its gang's size, in words
    roles: str = ""  # its subgroups; empty: one part (the whole gang)
    staging: str = ""  # when its controller makes pods in stages: what the gang counts when


@dataclass(frozen=True)
class Replicas:
    """A part of a workload whose every replica is several pods that only work together
    (an LWS group: its leader and ``size - 1`` workers): the unit its gang counts in
    complete replicas. The pods name their replica in :attr:`WorkloadKind.replica_label`."""

    count: int  # replicas wanted now
    pods: int  # pods per replica
    reason: str  # where ``pods`` comes from
    #: its controller makes a replica's first pod, and the others only once that one is Ready
    #: (LWS ``startupPolicy: LeaderReady``)
    leader_first: bool = False


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
    #: the field ``--scale`` sets (None: the kind does not scale, or scales by parts)
    scale_path: tuple[str, ...] | None = None
    #: a kind sized by parts (a Kubeflow job's replica types, a RayCluster's worker groups,
    #: a JobSet's replicated jobs): the field ``--scale KIND/NAME:PART=N`` sets for each part
    #: of an object, by part name (lower-cased), and the part a plain ``KIND/NAME=N`` scales
    scale_parts: Callable[[Any], dict[str, tuple[str | int, ...]]] | None = None
    #: the fields :attr:`scale_parts` gives, in words for the docs (``spec.replicatedJobs[<i>].replicas``)
    scale_parts_doc: str = ""
    default_scale_part: Callable[[Any], str | None] = lambda obj: None
    #: why its controller replaces pods on purpose right now, or None (:mod:`podgang.rollouts`),
    #: given the workload and what is known of its pods
    rolling_out: Callable[[Any, rollouts.WorkloadPods], str | None] = lambda obj, seen: None
    layout: str = ONE_PER_OBJECT
    #: with layout ONE_PER_RUN: the kinds of the objects it starts that are each a gang of
    #: their own (a CronJob's Jobs, a TrainJob's JobSet, a RayJob's cluster and submitter Job)
    runs: tuple[str, ...] = ()
    #: the grouper watches it and follows its size; the webhook fetches it as an owner
    followed: bool = True
    #: its pods are ever placed together (False: a DaemonSet, whose pods each go to their
    #: own node when that node comes: its group is always 1, whatever a pin says)
    gang: bool = True
    #: status fields the grouper keeps
    status_fields: tuple[str, ...] = ()
    #: status conditions the grouper keeps (type, status, reason), besides the finished ones
    kept_conditions: tuple[str, ...] = ()
    #: why its controller makes its pods in stages (a pod only once others are Ready or
    #: running), so that its gang counts only the stage it is in, and what makes it one
    #: gang; None when it makes them all at once. :func:`size` already counts the stage.
    stages: Callable[[Any], str | None] = lambda obj: None
    #: a replica group its controller makes in stages, given the group's pods: the gang of
    #: the stage it is in and why, while that is an earlier stage than the whole group (a
    #: LeaderReady LeaderWorkerSet group whose leader is not placed yet: its leader alone);
    #: None once the group is whole, or for a kind that makes a group's pods all at once. A
    #: group in an earlier stage is being placed, not broken.
    replica_stage: Callable[[Any, Sequence[Any]], "Stage | None"] = lambda obj, pods: None
    #: its operator's own gang integration, when the workload turns it on: (the PodGroup the
    #: operator makes and names on its pods, why); None when podgang makes its gang
    own_gang: Callable[[Any], "tuple[str, str] | None"] = lambda obj: None
    #: its operator can make its gang when switched on in the operator, not in the workload
    #: (KubeRay's batch scheduler, LWS's gangSchedulingManagement): its pods all naming a group
    #: podgang does not manage are that gang. False for every other kind, whose pods naming
    #: such a group were labelled by another grouper (KAI's own, with no webhook in front)
    operator_gangs: bool = False
    #: the parts of its gang, each with its own minimum (their sum is :attr:`size`); none:
    #: the gang is one part
    roles: Callable[[Any], list[Role]] = lambda obj: []
    #: a staged kind's roles over its whole run, where :attr:`roles` counts only the stage it
    #: is in: what its gang must find room for from the start (None: :attr:`roles`)
    whole_roles: Callable[[Any], list[Role]] | None = None
    #: its runs read its labels and annotations where they have none of their own: a kind
    #: KAI's pod-grouper skips as a top owner (a TrainJob, for the JobSet it makes)
    lends_metadata: bool = False
    #: the pod labels that name a pod's role (the first one a pod carries), lower-cased
    role_labels: tuple[str, ...] = ()
    #: held back on purpose (Kueue, a user): its pods are removed on purpose
    suspended: Callable[[Any], bool] = lambda obj: spec(obj).get("suspend") is True
    #: the run is over: it wants no pods any more
    finished: Callable[[Any], bool] = lambda obj: _conditions_finished(obj)
    #: replicas that are several pods each (an LWS's groups), None: its pods are the units
    replicas: Callable[[Any], Replicas | None] = lambda obj: None
    #: the pod label that holds the index of the replica a pod belongs to
    replica_label: str | None = None
    #: the role a gang scheduler may split into segments of consecutive pods (a PyTorchJob's
    #: workers, by KAI's segment size); with :attr:`replicas`, each replica is split instead
    segmented_role: str | None = None
    #: the pod label that holds a pod's index in its role or replica (what its segment is told by)
    segment_index_label: str | None = None
    #: the pod label that names the workload a replica belongs to
    replica_owner_label: str | None = None
    #: each role's pod template may ask the scheduler to place that role together (KAI reads
    #: a Ray head's and worker groups' topology from their templates)
    placed_roles: bool = False
    #: the pod label that holds the index of the replica of its role a pod belongs to (a
    #: JobSet pod's Job), for roles with :attr:`Role.per_replica`
    role_replica_label: str | None = None
    #: the kind's rules in words, for the generated reference page
    doc: KindDoc = KindDoc("")

    @property
    def kind(self) -> str:
        return self.resource.kind

    @property
    def scales(self) -> bool:
        return self.scale_path is not None or self.scale_parts is not None

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
    if spec(obj).get("startupPolicy") == LWS_LEADER_READY and size > 1:
        return size, f"leaderWorkerTemplate.size {size} per group, once the group's leader is placed (LeaderReady)"
    return size, f"leaderWorkerTemplate.size {size} per group"


def _lws_replica_stage(obj: Any, pods: Sequence[Any]) -> Stage | None:
    """A ``startupPolicy: LeaderReady`` group: LWS makes its workers only once its leader is
    Ready, so a gang of ``size`` never forms before the leader runs on its own. Its gang is
    the leader alone until the leader is placed (bound to a node) or a worker exists, then
    the whole group — as KAI's own grouper sizes it (LWS's Volcano integration keeps 1)."""
    size = max(as_int(as_dict(spec(obj).get("leaderWorkerTemplate")).get("size"), 1), 1)
    if spec(obj).get("startupPolicy") != LWS_LEADER_READY or size <= 1:
        return None
    for pod in pods:
        index = labels(pod).get(LWS_WORKER_INDEX_LABEL)
        if (index is not None and index != "0") or (index == "0" and spec(pod).get("nodeName")):
            return None  # the leader is placed, or its workers are being made: the whole group
    return Stage(1, f"startupPolicy LeaderReady: the leader first (a gang of 1); LWS makes the group's "
                    f"{size - 1} workers once it is Ready, and the gang is then the group's {size}", size)


def _lws_replicas(obj: Any) -> Replicas:
    size, why = _lws_size(obj)
    return Replicas(max(as_int(spec(obj).get("replicas"), 1), 0), size, why,
                    leader_first=spec(obj).get("startupPolicy") == LWS_LEADER_READY)


LWS_LEADER_WORKER = "LeaderWorker"  # subGroupPolicyType: the leader is in the first subgroup
LWS_LEADER_EXCLUDED = "LeaderExcluded"  # the leader is a subgroup of its own


def lws_subgroup_policy(obj: Any) -> tuple[int | None, str]:
    """An LWS's ``leaderWorkerTemplate.subGroupPolicy``: (``subGroupSize`` or None,
    ``subGroupPolicyType``, LeaderWorker by default as its CRD says)."""
    policy = as_dict(as_dict(spec(obj).get("leaderWorkerTemplate")).get("subGroupPolicy"))
    size = policy.get("subGroupSize")
    kind = policy.get("subGroupPolicyType")
    return (size if isinstance(size, int) and not isinstance(size, bool) else None,
            kind if isinstance(kind, str) and kind else LWS_LEADER_WORKER)


#: JobSet's startupPolicy that makes each replicated job only once the one before is Ready
JOBSET_IN_ORDER = "InOrder"


def _jobset_stages(obj: Any) -> list[tuple[Mapping[str, Any], int, str, str | None]]:
    """Each replicated job, its pods (replicas × its Job's size), why that size, and why it
    is not counted now (None: counted). A replicated job that ``dependsOn`` another is made
    only once that one is Ready or Complete (Trainer v2's initializers, then its nodes): it
    joins the gang then; one that others wait to see Complete leaves it once complete. Under
    ``startupPolicy: InOrder`` each replicated job is made only once the one before it is
    Ready, as if it depended on it."""
    rjobs = [as_dict(r) for r in as_list(spec(obj).get("replicatedJobs"))]
    if as_dict(spec(obj).get("startupPolicy")).get("startupPolicyOrder") == JOBSET_IN_ORDER:
        rjobs = [r if i == 0 or r.get("dependsOn") else
                 {**r, "dependsOn": [{"name": rjobs[i - 1].get("name"), "status": "Ready"}]}
                 for i, r in enumerate(rjobs)]
    replicas_of = {str(r.get("name", "?")): max(as_int(r.get("replicas"), 1), 0) for r in rjobs}
    progress = {str(as_dict(st).get("name")): as_dict(st) for st in as_list(status(obj).get("replicatedJobsStatus"))}

    def reached(name: str, wanted: str) -> bool:
        st = progress.get(name, EMPTY)
        done = as_int(st.get("succeeded"), 0)
        if wanted == "Ready":
            done += as_int(st.get("ready"), 0)
        return replicas_of.get(name, 0) > 0 and done >= replicas_of.get(name, 0)

    awaited = {str(as_dict(d).get("name")) for r in rjobs for d in as_list(r.get("dependsOn"))
               if as_dict(d).get("status") == "Complete"}
    out = []
    for rjob in rjobs:
        name = str(rjob.get("name", "?"))
        size, why = job_size(as_dict(as_dict(rjob.get("template")).get("spec")))
        unmet = [as_dict(d) for d in as_list(rjob.get("dependsOn"))
                 if not reached(str(as_dict(d).get("name")), str(as_dict(d).get("status")))]
        left_out = None
        if unmet:
            left_out = f"{name} is made once {unmet[0].get('name')} is {unmet[0].get('status')}"
        elif name in awaited and reached(name, "Complete"):
            left_out = f"{name} is complete"
        out.append((rjob, replicas_of[name] * size, f"{replicas_of[name]} × {why}", left_out))
    return out


def _jobset_size(obj: Any) -> tuple[int, str]:
    total, parts, later = 0, [], []
    for rjob, size, _why, left_out in _jobset_stages(obj):
        if left_out:
            later.append(left_out)
            continue
        replicas = max(as_int(rjob.get("replicas"), 1), 0)
        total += size
        parts.append(f"{rjob.get('name', '?')} {replicas}×{size // replicas if replicas else 0}")
    return total, "replicatedJobs " + (" + ".join(parts) if parts else "none") + "".join(f"; {w}" for w in later)


def _one_pod(obj: Any) -> tuple[int, str]:
    return 1, "a single pod"


def _per_node(obj: Any) -> tuple[int, str]:
    return 1, "a DaemonSet is not a gang: one pod at a time, one per node, each placed on its own"


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
    out: Obj = {k: s[k] for k in ("replicas", "startupPolicy") if k in s}
    lwt = as_dict(s.get("leaderWorkerTemplate"))
    slim_lwt: Obj = {"size": lwt["size"]} if "size" in lwt else {}
    for k in ("leaderTemplate", "workerTemplate"):
        if k in lwt:
            slim_lwt[k] = slim_template(lwt.get(k))
    if isinstance(lwt.get("subGroupPolicy"), Mapping):
        slim_lwt["subGroupPolicy"] = dict(lwt["subGroupPolicy"])
    out["leaderWorkerTemplate"] = slim_lwt
    return out


def _slim_jobset(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {k: s[k] for k in ("suspend", "startupPolicy") if k in s}
    out["replicatedJobs"] = [
        {
            "name": as_dict(r).get("name"),
            "replicas": as_dict(r).get("replicas", 1),
            **({"dependsOn": as_dict(r)["dependsOn"]} if "dependsOn" in as_dict(r) else {}),
            "template": {**_slim_metadata(as_dict(as_dict(r).get("template")), slim_template),
                         "spec": _slim_job(as_dict(as_dict(as_dict(r).get("template")).get("spec")), slim_template)},
        }
        for r in as_list(s.get("replicatedJobs")) if isinstance(r, Mapping)
    ]
    return out


def _slim_metadata(template: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    """The metadata of an object template (a replicated job's Job template) a pod template's
    would keep: the keys a backend reads there (a scheduler's own size annotation)."""
    kept = as_dict(slim_template({"metadata": as_dict(template.get("metadata"))}).get("metadata"))
    return {"metadata": kept} if kept else {}


def _slim_template_only(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(s.get("template"))} if "template" in s else {}


# ---------------------------------------------------------------------------
# Kubeflow training jobs: training-operator's v1 kinds, mpi-operator's v2beta1 MPIJob

#: read on a pod: its role (subgroup) in a Kubeflow training job (training-operator)
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
#: read on a pod: its role in an MPIJob (mpi-operator)
KUBEFLOW_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
#: the replica type a smaller minimum (elastic, minAvailable) is taken from first: the
#: others (master, launcher, chief, ps) are each the one pod the rest cannot run without
SCALING_ROLE = "worker"


def _whole_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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
        Callable[[Any], list[Role]], Callable[[Any], tuple[int, str]], Callable[[Any], list[tuple[str, Template]]]]:
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

    return roles, size, templates


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
                   launcher_waits: bool = False, segmented_role: str | None = None) -> WorkloadKind:
    roles, size, templates = _kubeflow(field, elastic, launcher_waits)
    return WorkloadKind(
        Resource("kubeflow.org", version, plural, kind, optional=True, also=also), size, templates,
        _slim_kubeflow(field), aliases=aliases, status_fields=("replicaStatuses",), roles=roles,
        scale_parts=lambda obj: {str(rtype).lower(): ("spec", field, str(rtype), "replicas")
                                 for rtype in as_dict(spec(obj).get(field))},
        scale_parts_doc=f"spec.{field}.<replica type>.replicas",
        default_scale_part=lambda obj: SCALING_ROLE,
        role_labels=(KUBEFLOW_REPLICA_TYPE_LABEL, KUBEFLOW_JOB_ROLE_LABEL), suspended=_run_policy_suspended, doc=doc,
        segmented_role=segmented_role, segment_index_label=KUBEFLOW_REPLICA_INDEX_LABEL if segmented_role else None,
    )


# ---------------------------------------------------------------------------
# JobSet (and through it Trainer v2's TrainJob): a subgroup per replicated job

#: read on a pod: its replicated job (subgroup) in a JobSet
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: read on a pod: the index of its Job in its replicated job (a replica's leaf under its role)
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


def _jobset_roles(obj: Any) -> list[Role]:
    out = []
    for i, (rjob, size, why, left_out) in enumerate(_jobset_stages(obj)):
        if left_out is None and size > 0:
            job_spec = as_dict(as_dict(rjob.get("template")).get("spec"))
            replicas = max(as_int(rjob.get("replicas"), 1), 1)
            each = size // replicas
            # several Jobs of several pods each: each Job a replica, counted whole (as KAI's own
            # JobSet grouper makes a leaf per Job); one Job, or Jobs of one pod: its pods
            out.append(Role(str(rjob.get("name", "?")), size, why, as_dict(job_spec.get("template")),
                            f"spec.replicatedJobs[{i}].template.spec.template",
                            max(as_int(rjob.get("replicas"), 1), 0), as_dict(rjob.get("template")),
                            per_replica=each if replicas >= 2 and each >= 2 else None))
    return out


def _trainjob_size(obj: Any) -> tuple[int, str]:
    nodes = max(as_int(as_dict(spec(obj).get("trainer")).get("numNodes"), 1), 0)
    return nodes, (f"trainer.numNodes {nodes}: the JobSet the trainer makes from its runtime is the gang "
                   f"(one subgroup per replicated job)")


#: read on a runtime's replicated job: the Trainer stage it belongs to (dataset-initializer, model-initializer, trainer…); initializers form the first stage
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
_TRAINER_ONE_REPLICA = ("dataset-initializer", "model-initializer", "trainer")  # the Trainer makes 1 of each
#: the Trainer's podGroupPolicy: the pod key it names the TrainJob's own PodGroup with, by scheduler
_TRAINER_POD_GROUP_KEYS = {"coscheduling": ("labels", COSCHEDULING_GROUP_LABEL),
                           "volcano": ("annotations", VOLCANO_GROUP_ANNOTATION)}


def trainjob_runtime(trainjob: Any) -> tuple[str, str]:
    """The (kind, name) of the runtime a TrainJob's ``runtimeRef`` names (a
    ClusterTrainingRuntime unless it says TrainingRuntime, which is in its namespace)."""
    ref = as_dict(spec(trainjob).get("runtimeRef"))
    kind = ref.get("kind") if ref.get("kind") in TRAINER_RUNTIME_KINDS else TRAINER_RUNTIME_KINDS[0]
    return str(kind), str(ref.get("name") or "")


def trainer_pod_group_policy(runtime: Any) -> str | None:
    """The scheduler whose PodGroup the Trainer makes itself for a TrainJob of ``runtime``
    (its ``podGroupPolicy``: coscheduling or volcano), or None."""
    policy = as_dict(spec(runtime).get("podGroupPolicy"))
    return next((k for k in _TRAINER_POD_GROUP_KEYS if k in policy), None)


def trainjob_jobset(trainjob: Any, runtime: Any) -> Obj:
    """The JobSet the Trainer makes for ``trainjob`` from its ``runtime`` (kubeflow/trainer
    pkg/runtime/core/trainingruntime.go and the jobset, torch, plainml and mpi plugins): the
    runtime's JobSet template, named after the TrainJob and owned by it; one replica of each
    initializer and of the trainer; the trainer's Job as wide as ``trainer.numNodes`` (else the
    runtime's ``mlPolicy.numNodes``) — for MPI, the ``node`` Job (one fewer with
    ``runLauncherAsNode``); the runtime's ``dependsOn`` kept (its initializers first); the
    labels and annotations of the runtime's template and of the TrainJob's ``runtimePatches``
    (the TrainJob's own are lent to it where podgang reads them: ``lends_metadata``); with a
    ``podGroupPolicy``, its pods naming the PodGroup the Trainer makes (named after the TrainJob)."""
    runtime_spec = as_dict(spec(runtime))
    template = as_dict(runtime_spec.get("template"))
    js_spec: Obj = copy.deepcopy(dict(as_dict(template.get("spec"))))
    ml = as_dict(runtime_spec.get("mlPolicy"))
    mpi = as_dict(ml.get("mpi")) if "mpi" in ml else None
    trainer = as_dict(spec(trainjob).get("trainer"))
    nodes = _whole_number(trainer.get("numNodes"))
    md = as_dict(trainjob.get("metadata")) if isinstance(trainjob, Mapping) else {}
    policy = trainer_pod_group_policy(runtime)
    patches = [as_dict(as_dict(as_dict(p).get("trainingRuntimeSpec")).get("template"))
               for p in as_list(spec(trainjob).get("runtimePatches"))]
    js_md: Obj = {k: dict(as_dict(as_dict(template.get("metadata")).get(k))) for k in ("labels", "annotations")}
    for patch in patches:  # the TrainJob's runtimePatches: metadata on the JobSet, its Jobs and pods
        for k in js_md:
            js_md[k].update(as_dict(as_dict(patch.get("metadata")).get(k)))
    job_patches: dict[str, list[Mapping[str, Any]]] = {}
    for patch in patches:
        for rpatch in as_list(as_dict(patch.get("spec")).get("replicatedJobs")):
            job_patches.setdefault(str(as_dict(rpatch).get("name")), []).append(as_dict(as_dict(rpatch).get("template")))
    rjobs = []
    for rjob in as_list(js_spec.get("replicatedJobs")):
        rjob = dict(as_dict(rjob))
        job = dict(as_dict(rjob.get("template")))
        for jpatch in job_patches.get(str(rjob.get("name")), []):
            job = _patched_metadata(job, as_dict(jpatch.get("metadata")))
            pod_patch = as_dict(as_dict(jpatch.get("spec")).get("template"))
            job_spec_now = dict(as_dict(job.get("spec")))
            pod = _patched_metadata(as_dict(job_spec_now.get("template")), as_dict(pod_patch.get("metadata")))
            job = {**job, "spec": {**job_spec_now, "template": pod}}
        job_spec = dict(as_dict(job.get("spec")))
        ancestor = as_dict(as_dict(job.get("metadata")).get("labels")).get(TRAINER_ANCESTOR_LABEL)
        if ancestor in _TRAINER_ONE_REPLICA:
            rjob["replicas"] = 1
        count = max(as_int(job_spec.get("parallelism"), 1), 0)
        if ancestor == "trainer" and ml and mpi is None:
            count = nodes if nodes is not None else max(as_int(ml.get("numNodes"), 1), 0)
        elif ancestor == "trainer" and mpi is not None:
            count = 1  # MPI's launcher
        elif mpi is not None and rjob.get("name") == "node" and nodes is not None:
            count = max(nodes - 1, 1) if mpi.get("runLauncherAsNode") is True else nodes
        job_spec["parallelism"] = job_spec["completions"] = count
        if policy is not None:
            pod = dict(as_dict(job_spec.get("template")))
            pod_md = dict(as_dict(pod.get("metadata")))
            section, key = _TRAINER_POD_GROUP_KEYS[policy]
            pod_md[section] = {**as_dict(pod_md.get(section)), key: md.get("name")}
            job_spec["template"] = {**pod, "metadata": pod_md}
        rjobs.append({**rjob, "template": {**job, "spec": job_spec}})
    js_spec["replicatedJobs"] = rjobs
    if spec(trainjob).get("suspend") is True:
        js_spec["suspend"] = True
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), **{k: v for k, v in js_md.items() if v},
                         "ownerReferences": [{"apiVersion": str(as_dict(trainjob).get("apiVersion")),
                                              "kind": "TrainJob", "name": md.get("name"),
                                              **({"uid": md["uid"]} if md.get("uid") else {}),
                                              "controller": True}]},
            "spec": js_spec}


def _trainer_own_gang(obj: Any) -> tuple[str, str] | None:
    """A JobSet the Trainer made for a TrainJob whose runtime has a ``podGroupPolicy``: its pod
    templates name the PodGroup the Trainer makes itself, named after the TrainJob."""
    owner = next((as_dict(r) for r in as_list(as_dict(as_dict(obj).get("metadata")).get("ownerReferences"))
                  if as_dict(r).get("kind") == "TrainJob" and as_dict(r).get("controller") is True), None)
    name = owner.get("name") if owner is not None else None
    if not isinstance(name, str) or not name:
        return None
    for _, template in _jobset_templates(obj):
        md = as_dict(template.get("metadata"))
        for policy, (section, key) in _TRAINER_POD_GROUP_KEYS.items():
            if as_dict(md.get(section)).get(key) == name:
                return name, (f"the TrainJob's runtime podGroupPolicy {policy}: the Trainer makes PodGroup {name} "
                              f"itself and names it on the TrainJob's pods")
    return None


def _patched_metadata(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> Obj:
    """``obj`` with a patch's labels and annotations over its own."""
    md = dict(as_dict(obj.get("metadata")))
    for k in ("labels", "annotations"):
        if as_dict(patch.get(k)):
            md[k] = {**as_dict(md.get(k)), **as_dict(patch.get(k))}
    return {**obj, "metadata": md} if md else dict(obj)


def _slim_trainjob(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    s = as_dict(s)
    out: Obj = {"suspend": s["suspend"]} if "suspend" in s else {}
    if "numNodes" in as_dict(s.get("trainer")):
        out["trainer"] = {"numNodes": as_dict(s.get("trainer"))["numNodes"]}
    return out


# ---------------------------------------------------------------------------
# KubeRay: a RayCluster (on its own, or made by a RayJob or a RayService)

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


# ---------------------------------------------------------------------------
# Spark operator: a SparkApplication's driver, then its executors (owned by the driver pod)

#: read on a pod: `driver` or `executor` (subgroup) of a SparkApplication
SPARK_ROLE_LABEL = "spark-role"
_SPARK_DRIVER_RUNS = ("RUNNING",)
_SPARK_DONE = ("COMPLETED", "FAILED", "SUBMISSION_FAILED")


def _spark_state(obj: Any) -> str:
    return str(as_dict(status(obj).get("applicationState")).get("state") or "")


_SPARK_CONTAINER = "spark-kubernetes-{part}"  # the container Spark runs in the driver's and executors' pods
_SPARK_MIN_OVERHEAD = 384 * 2**20  # Spark's floor for a pod's memory overhead: 384MiB
_JAVA_MEMORY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kmgtp]?)b?")


def _spark_template(app_spec: Any, part_name: str) -> Obj:
    """A driver's or executor's pod as a pod template: its own template (if any) with the
    labels, annotations and schedulerName the SparkApplication sets on top, and the Spark
    container's requests as Spark sets them (cores, memory plus its overhead, GPUs)."""
    app_spec = as_dict(app_spec)
    part = as_dict(app_spec.get(part_name))
    base = as_dict(part.get("template"))
    md, pod_spec = as_dict(base.get("metadata")), as_dict(base.get("spec"))
    scheduler = part.get("schedulerName") or pod_spec.get("schedulerName")
    name = _SPARK_CONTAINER.format(part=part_name)
    containers = as_list(pod_spec.get("containers"))
    if not any(as_dict(c).get("name") == name for c in containers):  # a template already worked out keeps it
        containers = [{"name": name, "resources": _spark_resources(app_spec, part)},
                      *(c for c in containers if as_dict(c).get("name") != name)]
    return {"metadata": {"labels": {**as_dict(md.get("labels")), **as_dict(part.get("labels"))},
                         "annotations": {**as_dict(md.get("annotations")), **as_dict(part.get("annotations"))}},
            "spec": {**pod_spec, "containers": containers, **({"schedulerName": scheduler} if scheduler else {})}}


def _spark_resources(app_spec: Mapping[str, Any], part: Mapping[str, Any]) -> Obj:
    """The Spark container's resources: ``coreRequest`` else ``cores`` CPUs (1 by default);
    ``memory`` (Java units: ``512m`` is 512MiB; 1g by default) plus ``memoryOverhead``, else
    plus the overhead factor's share of it (0.1 for the JVM, 0.4 for Python and R), at least
    384MiB; ``gpu.quantity`` of ``gpu.name``."""
    cpu = part.get("coreRequest") or str(part.get("cores") or 1)
    memory = _java_bytes(part.get("memory")) or 2**30
    overhead = _java_bytes(part.get("memoryOverhead"))
    if overhead is None:
        conf = as_dict(app_spec.get("sparkConf"))
        factor = (app_spec.get("memoryOverheadFactor") or conf.get("spark.kubernetes.memoryOverheadFactor")
                  or ("0.1" if app_spec.get("type") in ("Java", "Scala") else "0.4"))
        try:
            overhead = max(int(memory * float(factor)), _SPARK_MIN_OVERHEAD)
        except (ValueError, OverflowError):  # not a number, or none a pod could hold
            overhead = _SPARK_MIN_OVERHEAD
    out: Obj = {"requests": {"cpu": str(cpu), "memory": str(memory + overhead)}}
    gpu = as_dict(part.get("gpu"))
    if isinstance(gpu.get("name"), str) and as_int(gpu.get("quantity"), 0) > 0:
        out["limits"] = {gpu["name"]: str(as_int(gpu.get("quantity"), 0))}
    return out


def _java_bytes(text: Any) -> int | None:
    """A JVM memory size (``512m``, ``1.5g``, ``1024``: bytes) in bytes, None when it is not one."""
    found = _JAVA_MEMORY.fullmatch(str(text).strip().lower()) if text is not None else None
    if found is None:
        return None
    try:
        return int(float(found.group(1)) * 1024 ** "bkmgtp".index(found.group(2) or "b"))
    except OverflowError:  # more digits than any memory
        return None


def _spark_own_gang(obj: Any) -> tuple[str, str] | None:
    """``spec.batchScheduler``: spark-operator (run with batch scheduling on) makes the
    application's PodGroup itself — Volcano's ``spark-<name>-pg`` named on the driver and
    executors, or for a scheduler-plugins scheduler ``<name>-pg`` labelled on them (YuniKorn
    takes task groups, no PodGroup)."""
    scheduler = spec(obj).get("batchScheduler")
    name = str(as_dict(as_dict(obj).get("metadata")).get("name") or "")
    if not isinstance(scheduler, str) or not scheduler:
        return None
    group = f"spark-{name}-pg" if scheduler == "volcano" else f"{name}-pg"
    if scheduler == "yunikorn":
        return "", "spec.batchScheduler yunikorn: spark-operator gives YuniKorn the application's task groups"
    return group, (f"spec.batchScheduler {scheduler}: spark-operator makes PodGroup {group} and names it on the "
                   f"driver and executors")


def _spark_executors(obj: Any) -> tuple[int, str]:
    dynamic = as_dict(spec(obj).get("dynamicAllocation"))
    if dynamic.get("enabled") is True:
        count = max(as_int(dynamic.get("minExecutors"), 0), 0)
        return count, f"dynamicAllocation.minExecutors {count}"
    count = max(as_int(as_dict(spec(obj).get("executor")).get("instances"), 1), 0)
    return count, f"executor.instances {count}"


def _spark_roles(obj: Any) -> list[Role]:
    """The driver; its executors once it runs (the driver makes them: a gang that counted them
    from the start would wait for ever for pods that come only after it runs)."""
    return _spark_whole(obj) if _spark_state(obj) in _SPARK_DRIVER_RUNS else _spark_whole(obj)[:1]


def _spark_whole(obj: Any) -> list[Role]:
    """The driver and its executors: the whole application."""
    count, why = _spark_executors(obj)
    parts = [Role("driver", 1, "the driver", _spark_template(spec(obj), "driver"), "spec.driver"),
             Role("executor", count, why, _spark_template(spec(obj), "executor"), "spec.executor")]
    return [r for r in parts if r.size > 0]


def _spark_size(obj: Any) -> tuple[int, str]:
    parts = _spark_roles(obj)
    listed = " + ".join(f"{r.name} {r.size}" for r in parts)
    if _spark_state(obj) not in _SPARK_DRIVER_RUNS:
        count, why = _spark_executors(obj)
        listed += f"; the executors ({why}) join once the driver runs: the driver makes them"
    return sum(r.size for r in parts), listed


def _spark_templates(obj: Any) -> list[tuple[str, Template]]:
    return [(f"spec.{part}", _spark_template(spec(obj), part)) for part in ("driver", "executor")]


def _slim_spark(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    s = as_dict(s)
    out: Obj = {part: {"template": slim_template(_spark_template(s, part))} for part in ("driver", "executor")}
    if "instances" in as_dict(s.get("executor")):
        out["executor"]["instances"] = as_dict(s.get("executor"))["instances"]
    dynamic = as_dict(s.get("dynamicAllocation"))
    if dynamic:
        out["dynamicAllocation"] = {k: dynamic[k] for k in ("enabled", "minExecutors") if k in dynamic}
    for key in ("suspend", "batchScheduler"):
        if key in s:
            out[key] = s[key]
    return out


# ---------------------------------------------------------------------------
# the registry

_REPLICATED_STATUS = ("observedGeneration", "replicas", "updatedReplicas", "currentRevision", "updateRevision")
_RUN_STATUS = ("completionTime", "active", "succeeded")

REPLICA_SET = WorkloadKind(
    Resource("apps", "v1", "replicasets", "ReplicaSet"), _replicas_size, _spec_template, _slim_replicas,
    aliases=("replicaset", "replicasets", "rs"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.replica_set_rollout, status_fields=_REPLICATED_STATUS,
    doc=KindDoc("`spec.replicas`"),
)
DEPLOYMENT = WorkloadKind(
    Resource("apps", "v1", "deployments", "Deployment"), _replicas_size, _spec_template, _slim_deployment,
    aliases=("deployment", "deployments", "deploy"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.deployment_rollout, status_fields=_REPLICATED_STATUS, kept_conditions=("Progressing",),
    doc=KindDoc("`spec.replicas`"),
)
STATEFUL_SET = WorkloadKind(
    Resource("apps", "v1", "statefulsets", "StatefulSet"), _statefulset_size, _spec_template, _slim_statefulset,
    aliases=("statefulset", "statefulsets", "sts"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.statefulset_rollout, status_fields=_REPLICATED_STATUS, stages=_statefulset_stages,
    doc=KindDoc("`spec.replicas` with `podManagementPolicy: Parallel`, else 1",
                staging="`OrderedReady` (the default) makes pod N+1 only once pod N is Ready: a gang of 1 and a "
                        "`GangStaged` warning"),
)
JOB = WorkloadKind(
    Resource("batch", "v1", "jobs", "Job"), _job_kind_size, _spec_template, _slim_job,
    aliases=("job", "jobs"), scale_path=("spec", "parallelism"), status_fields=_RUN_STATUS,
    doc=KindDoc("`parallelism` capped by the completions still to come (`completions` − `status.succeeded`)"),
)
CRON_JOB = WorkloadKind(
    Resource("batch", "v1", "cronjobs", "CronJob"), _cronjob_size, _cronjob_templates, _slim_cronjob,
    aliases=("cronjob", "cronjobs", "cj"), scale_path=("spec", "jobTemplate", "spec", "parallelism"),
    layout=ONE_PER_RUN, runs=("Job",),
    doc=KindDoc("per Job run (one PodGroup each): its `jobTemplate` sized as a Job"),
)
LEADER_WORKER_SET = WorkloadKind(
    Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", optional=True),
    _lws_size, _lws_templates, _slim_lws,
    aliases=("leaderworkerset", "leaderworkersets", "lws"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.leader_worker_set_rollout, layout=ONE_PER_REPLICA, status_fields=_REPLICATED_STATUS,
    replicas=_lws_replicas, replica_label=LWS_GROUP_INDEX_LABEL, replica_owner_label=LWS_NAME_LABEL, operator_gangs=True,
    replica_stage=_lws_replica_stage,
    doc=KindDoc("`leaderWorkerTemplate.size` per group (one PodGroup per LWS group, `…-group-<index>`)",
                staging="with `startupPolicy: LeaderReady` a group's gang is its leader alone until the leader is "
                        "bound (LWS makes the workers once it is Ready), then the whole group"),
    segment_index_label=LWS_WORKER_INDEX_LABEL,
)
JOB_SET = WorkloadKind(
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", optional=True),
    _jobset_size, _jobset_templates, _slim_jobset, aliases=("jobset", "jobsets"),
    scale_parts=lambda obj: {str(as_dict(r).get("name", "")).lower(): ("spec", "replicatedJobs", i, "replicas")
                             for i, r in enumerate(as_list(spec(obj).get("replicatedJobs")))},
    scale_parts_doc="spec.replicatedJobs[<i>].replicas",
    default_scale_part=lambda obj: _only_part(JOB_SET, obj),
    status_fields=(*_RUN_STATUS, "replicatedJobsStatus"), own_gang=_trainer_own_gang,
    roles=_jobset_roles, role_labels=(JOBSET_REPLICATED_JOB_LABEL,), role_replica_label=JOBSET_JOB_INDEX_LABEL,
    doc=KindDoc("Σ `replicas × min(parallelism, completions)` over the replicated jobs made now",
                roles="one per replicated job (label `jobset.sigs.k8s.io/replicatedjob-name`)",
                staging="a replicated job that `dependsOn` another (Trainer's nodes after its initializers) joins "
                        "once that one is Ready or Complete, one "
                        "others wait to see Complete leaves once it is; under `startupPolicy: InOrder` each joins "
                        "once the one before it is Ready"),
)
PYTORCH_JOB = _kubeflow_kind(
    "PyTorchJob", "pytorchjobs", "pytorchReplicaSpecs", ("pytorchjob", "pytorchjobs"),
    KindDoc("`runPolicy.schedulingPolicy.minAvailable`, else `elasticPolicy.minReplicas`, else Σ replica specs' "
            "`replicas` (unset: 1)", roles="one per replica type: `master`, `worker`"), elastic=True,
    segmented_role="worker")  # a scheduler that segments (KAI, by its segment size) splits its workers
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
#: Trainer v2: the trainer makes one JobSet per TrainJob (named after it) from the runtime; that
#: JobSet is the TrainJob's one gang, sized and split into subgroups as a JobSet
TRAIN_JOB = WorkloadKind(
    Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", optional=True), _trainjob_size,
    lambda obj: [], _slim_trainjob, aliases=("trainjob", "trainjobs"), layout=ONE_PER_RUN, runs=("JobSet",),
    lends_metadata=True,
    doc=KindDoc("the JobSet the trainer makes for it (named after it) is its one gang, sized as a JobSet; its KAI "
                "queue, priority and preemptibility are read from the TrainJob's labels and annotations where the "
                "JobSet has none of its own", roles="as the JobSet", staging="as the JobSet"),
)
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
#: a staged gang: the driver, then (once spark-operator says it runs) the driver and the
#: executors it makes, which Spark owns by the driver pod
SPARK_APPLICATION = WorkloadKind(
    Resource("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication", optional=True),
    _spark_size, _spark_templates, _slim_spark, aliases=("sparkapplication", "sparkapplications", "sparkapp"),
    scale_path=("spec", "executor", "instances"),
    status_fields=("applicationState",), roles=_spark_roles, role_labels=(SPARK_ROLE_LABEL,), whole_roles=_spark_whole,
    finished=lambda obj: _spark_state(obj) in _SPARK_DONE, own_gang=_spark_own_gang,
    doc=KindDoc("the driver + `executor.instances` (or `dynamicAllocation.minExecutors`)",
                roles="`driver`, `executor` (label `spark-role`), once the executors are counted",
                staging="the driver (1) until spark-operator reports the application `RUNNING`; the executors are "
                        "owned by the driver pod, which podgang follows to the application"),
)
DAEMON_SET = WorkloadKind(
    Resource("apps", "v1", "daemonsets", "DaemonSet"), _per_node, _spec_template, _slim_template_only,
    aliases=("daemonset", "daemonsets", "ds"), followed=False, gang=False,
    doc=KindDoc("no gang: one pod per node, each placed on its own; in scope, each pod's group is of 1 and a "
                "`podgang.io/min-member` pin is ignored with a warning (not followed: the top owner of its pods)"),
)

#: every workload kind, by kind name
WORKLOADS: dict[str, WorkloadKind] = {
    k.kind: k for k in (DEPLOYMENT, REPLICA_SET, STATEFUL_SET, JOB, CRON_JOB, LEADER_WORKER_SET, JOB_SET, DAEMON_SET,
                        PYTORCH_JOB, TF_JOB, MPI_JOB, XGBOOST_JOB, JAX_JOB, PADDLE_JOB, TRAIN_JOB, RAY_CLUSTER, RAY_JOB,
                        RAY_SERVICE, SPARK_APPLICATION)
}

#: kinds that are templates for workloads, not workloads: they own no pods, so they get no
#: gang (the workloads made from them do), by (API group, kind)
TEMPLATE_KINDS: dict[tuple[str, str], str] = {
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): "the TrainJobs that name it (through their JobSets)",
    ("trainer.kubeflow.org", "TrainingRuntime"): "the TrainJobs that name it (through their JobSets)",
    ("", "PodTemplate"): "the workloads that copy it",
    ("kueue.x-k8s.io", "Workload"): "the job Kueue admits by it",
    ("kubeflow.org", "Experiment"): "the trials (Jobs, training jobs) it starts",
    ("serving.kserve.io", "ServingRuntime"): "the InferenceServices that use it",
    ("serving.kserve.io", "ClusterServingRuntime"): "the InferenceServices that use it",
}

#: the pod labels that name a pod's role, of every kind
ROLE_LABELS: tuple[str, ...] = tuple(dict.fromkeys(label for k in WORKLOADS.values() for label in k.role_labels))

#: the pod labels that name a pod's multi-pod replica, of every kind
REPLICA_LABELS: tuple[str, ...] = tuple(label for k in WORKLOADS.values()
                                       for label in (k.replica_label, k.role_replica_label) if label)

#: the pod labels that hold a pod's index in a role or replica a scheduler may segment, of every kind
SEGMENT_INDEX_LABELS: tuple[str, ...] = tuple(dict.fromkeys(
    k.segment_index_label for k in WORKLOADS.values() if k.segment_index_label))

#: the workloads whose size the grouper follows (it watches these)
FOLLOWED: tuple[WorkloadKind, ...] = tuple(k for k in WORKLOADS.values() if k.followed)

#: owner kinds the webhook looks up to walk to the top owner. An owner of any other
#: kind (a DaemonSet, a custom controller's object) is taken as the top.
OWNER_KINDS: dict[str, Resource] = {POD.kind: POD, **{k.kind: k.resource for k in FOLLOWED}}

#: kinds whose every run (a Job a CronJob starts, a RayService's cluster) is a gang of its
#: own: owner kind -> the kinds of its runs
RUN_OWNERS: dict[str, tuple[str, ...]] = {k.kind: k.runs for k in WORKLOADS.values() if k.layout == ONE_PER_RUN}


def workload_kind(obj_or_kind: Any) -> WorkloadKind | None:
    """The registry entry of an object, an owner reference or a kind name. An object or
    reference is matched by its API group and kind, never its kind alone: Volcano's
    ``batch.volcano.sh`` Job is not a ``batch/v1`` Job. A bare kind name (the grouper's
    own stores, filled by watches of the kind's resource), or an object whose apiVersion
    is left out (a list's items), is taken as the entry of that name."""
    if isinstance(obj_or_kind, str):
        kind, api_version = obj_or_kind, None
    elif isinstance(obj_or_kind, OwnerRef):
        kind, api_version = obj_or_kind.kind, obj_or_kind.api_version or None
    else:
        kind, api_version = as_dict(obj_or_kind).get("kind"), as_dict(obj_or_kind).get("apiVersion")
    entry = WORKLOADS.get(kind) if isinstance(kind, str) else None
    if entry is None or not isinstance(api_version, str):
        return entry
    return entry if api_version.rpartition("/")[0] == entry.resource.group else None


#: the API groups whose kinds the apiserver validates itself: a count below 0 or beyond int32 is refused
#: (a custom resource's schema says only that it is an integer)
BUILT_IN_GROUPS = frozenset({"", "apps", "batch"})
INT32_MAX = 2**31 - 1


def path_text(path: tuple[str | int, ...]) -> str:
    """``workerGroupSpecs[0].replicas`` of ``("workerGroupSpecs", 0, "replicas")``."""
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).lstrip(".")


def count_fields(obj: Any) -> list[tuple[str | int, ...]]:
    """The fields of ``obj`` that count its pods or replicas, the ones ``--scale`` sets (a
    Deployment's ``spec.replicas``, each role's ``replicas`` of a PyTorchJob)."""
    entry = workload_kind(obj)
    if entry is None or not entry.scales:
        return []
    if entry.scale_parts is not None:
        return list(entry.scale_parts(obj).values())
    assert entry.scale_path is not None
    return [entry.scale_path]


def _at(obj: Any, path: tuple[str | int, ...]) -> Any:
    node = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return node


def count_refusals(obj: Any) -> list[str]:
    """What the apiserver refuses in ``obj``'s counts (:func:`count_fields`): a value that is not
    an integer (``replicas: "3"``), and in a built-in kind one below 0 or beyond int32 — rather
    than planned as a count it is not."""
    problems = []
    for path in count_fields(obj):
        value, where = _at(obj, path), path_text(path)
        if value is None:
            continue  # not set: the default
        if isinstance(value, str):
            unquoted = f" (write it unquoted: {value})" if re.fullmatch(r"-?[0-9]{1,12}", value) else ""
            problems.append(f'{where} must be an integer, not the string "{value[:40]}"{unquoted}')
        elif isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{where} must be an integer, not {str(value)[:40]}")
        elif api_group(obj) in BUILT_IN_GROUPS and value < 0:
            problems.append(f"{where} {value} must be 0 or more")
        elif api_group(obj) in BUILT_IN_GROUPS and value > INT32_MAX:
            problems.append(f"{where} {value} must be at most {INT32_MAX}")
    return problems


def api_group(obj: Any) -> str:
    """``apps`` of an ``apps/v1`` object, ``""`` of a ``v1`` one."""
    return str(as_dict(obj).get("apiVersion") or "").rpartition("/")[0]


def template_of(obj: Any) -> str | None:
    """For a kind that is a template for workloads (a Trainer runtime), what gets the gangs
    instead; None for anything else."""
    return TEMPLATE_KINDS.get((api_group(obj), str(as_dict(obj).get("kind"))))


def any_pod_templates(obj: Any) -> list[tuple[str, Template]]:
    """The pod templates of a workload, or of an object of a kind podgang does not know
    wherever they are in it (anything with a ``spec.containers``), with their path."""
    if workload_kind(obj) is not None or as_dict(obj).get("kind") == POD.kind:
        return pod_templates(obj)
    found: list[tuple[str, Template]] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > 10 or len(found) >= 16:
            return
        if isinstance(value, Mapping):
            if isinstance(value.get("spec"), Mapping) and "containers" in value["spec"]:
                found.append((path, value))
                return
            for k, v in value.items():
                if k != "metadata":
                    walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", depth + 1)

    walk(spec(obj), "spec", 0)
    return found


def run_kinds(owner: Any) -> tuple[str, ...]:
    """The kinds of the runs ``owner`` (an object or reference) starts, each a gang of its
    own (a CronJob's Jobs); none for a kind that is not laid out by run."""
    entry = workload_kind(owner)
    return entry.runs if entry is not None and entry.layout == ONE_PER_RUN else ()


def resource_for(api_version: str, kind: str) -> Resource | None:
    """The known resource for an ownerReference's apiVersion and kind, if any."""
    resource = OWNER_KINDS.get(kind)
    if resource is None:
        return None
    return resource.at(api_version)


def pod_templates(obj: Any) -> list[tuple[str, Template]]:
    """The pod templates inside a pod or workload, with their path."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _pod_itself(obj)
    entry = workload_kind(obj)
    return entry.templates(obj) if entry else _spec_template(obj)


def whole_roles(obj: Any) -> list[Role]:
    """The roles of a workload's whole run (a SparkApplication's driver and executors, while its
    gang counts the driver only); its :func:`roles` for a kind that is not staged."""
    entry = workload_kind(obj)
    if entry is None:
        return []
    return (entry.whole_roles or entry.roles)(obj)


def desired_size(obj: Any) -> tuple[int, str]:
    """How many pods a workload wants running together right now, and why."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _one_pod(obj)
    entry = workload_kind(obj)
    if entry is None:
        return 1, f"{kind or 'unknown kind'}: one pod at a time"
    return entry.size(obj)


#: in a slim workload's metadata, instead of its managedFields: who last wrote its size and
#: when (:func:`size_writes`), kept only once its spec changed after it was made (generation > 1)
SIZE_WRITES = "podgang.io/size-writes"


def size_writes(obj: Any) -> tuple[tuple[str, str, str], ...]:
    """Who wrote ``obj``'s size fields (the ones ``--scale`` sets, or a ``scale``
    subresource write) and when: ``(manager, time or "", subresource)`` per managedFields
    entry (:func:`podgang.objects.field_write_times`), or the summary a slim copy keeps."""
    kept = metadata(obj).get(SIZE_WRITES)
    if kept is not None:
        return tuple(kept)
    entry = workload_kind(obj)
    if entry is None:
        paths: tuple[tuple[str | int, ...], ...] = (("spec", "replicas"),)
    elif entry.scale_parts is not None:
        paths = tuple(entry.scale_parts(obj).values())
    else:
        paths = (entry.scale_path,) if entry.scale_path is not None else ()
    return field_write_times(obj, paths)


def replica_stage(obj: Any, pods: Sequence[Any]) -> Stage | None:
    """The gang of a replica group of ``obj`` in an earlier stage than the whole group, given
    the group's pods (a LeaderReady LWS group whose leader is not placed: 1), or None."""
    entry = workload_kind(obj)
    return entry.replica_stage(obj, pods) if entry is not None else None


def operator_gang(obj: Any) -> tuple[str, str] | None:
    """The PodGroup a workload's operator makes itself (its own gang integration, turned on
    in the workload) and why; None when podgang makes the workload's gang."""
    entry = workload_kind(obj)
    return entry.own_gang(obj) if entry is not None else None


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
    """A run that is over (it wants no pods any more): its kind's entry decides."""
    entry = workload_kind(obj)
    return entry.finished(obj) if entry is not None else _conditions_finished(obj)


def _conditions_finished(obj: Any) -> bool:
    """A Job, JobSet or Kubeflow job whose completionTime or a finished condition says it is over."""
    st = status(obj)
    if st.get("completionTime"):
        return True
    return any(as_dict(c).get("type") in FINISHED_CONDITIONS and as_dict(c).get("status", "True") == "True"
               for c in as_list(st.get("conditions")))


def is_suspended(obj: Any) -> bool:
    """A workload held back (a Job or JobSet by Kueue, a PyTorchJob's runPolicy.suspend):
    its pods are removed on purpose."""
    entry = workload_kind(obj)
    return entry.suspended(obj) if entry is not None else spec(obj).get("suspend") is True


def roles(obj: Any) -> list[Role]:
    """The parts of a workload's gang, each with its own minimum (none: one part)."""
    entry = workload_kind(obj)
    return entry.roles(obj) if entry is not None else []


def segmented_role(obj: Any) -> Role | None:
    """The role of a workload a scheduler may split into segments (a PyTorchJob's workers),
    as it is written: with its minimum, or, where the job's own minimum leaves it none (a
    ``minAvailable`` the master alone meets), with a minimum of 0 — its pods still exist and
    are still in their segments. None for another kind, or a workload without that role."""
    entry = workload_kind(obj)
    if entry is None or entry.segmented_role is None:
        return None
    found = next((r for r in entry.roles(obj) if r.name == entry.segmented_role), None)
    if found is not None:
        return found
    for path, template in entry.templates(obj):
        parts = path.split(".")
        if len(parts) == 4 and parts[2].lower() == entry.segmented_role:
            replicas = max(as_int(as_dict(as_dict(spec(obj).get(parts[1])).get(parts[2])).get("replicas"), 1), 0)
            if replicas:
                return Role(entry.segmented_role, 0, f"{parts[2]} replicas {replicas}, none within the job's minimum",
                            template, path, written=replicas)
    return None


def pod_role(top: Any, pod: Any) -> str | None:
    """The role a pod of the ``top`` workload (a reference or a kind name) plays (its
    subgroup), from the labels the kind's operator sets on it; None for a kind without roles."""
    entry = workload_kind(top)
    if entry is None:
        return None
    found = labels(pod)
    return next((found[k].lower() for k in entry.role_labels if found.get(k)), None)


def replica_units(obj: Any) -> Replicas | None:
    """A workload's replicas when each is several pods (an LWS's groups), else None."""
    entry = workload_kind(obj)
    return entry.replicas(obj) if entry is not None else None


def replica_index(top: Any, pod: Any) -> int | None:
    """The index of the replica a pod of the ``top`` workload (a reference or a kind name) belongs to (an LWS pod's
    group index), from the label its controller sets; None for a kind without such replicas."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.replica_label) if entry is not None and entry.replica_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def role_replica_index(top: Any, pod: Any) -> int | None:
    """The index of the replica of its role a pod of the ``top`` workload (a reference or a kind name) belongs to (a
    JobSet pod's Job index), from the label its controller sets; None elsewhere."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.role_replica_label) if entry is not None and entry.role_replica_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def replica_of(pod: Any) -> tuple[str, str, int] | None:
    """(kind, workload name, replica index) of the multi-pod replica a pod belongs to, from
    the labels its controller sets; None for any other pod."""
    found = labels(pod)
    for entry in WORKLOADS.values():
        if entry.replica_label and entry.replica_owner_label and entry.replica_owner_label in found:
            index = replica_index(entry.kind, pod)
            if index is not None:
                return entry.kind, found[entry.replica_owner_label], index
    return None


def segment_index(top: Any, pod: Any) -> int | None:
    """A pod's index in the role or replica its ``top`` workload's (a reference or a kind name) scheduler may split
    into segments (a PyTorchJob worker's replica index, an LWS pod's worker index), from the
    label its controller sets; None for another kind or a pod without it."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.segment_index_label) if entry is not None and entry.segment_index_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def carries_replica_label(pod: Any) -> bool:
    """Whether a pod carries the label some kind names its multi-pod replicas with."""
    found = labels(pod)
    return any(label in found for label in REPLICA_LABELS)


def replica_suffix(top: Any, pod: Any) -> tuple[str, str]:
    """The suffix of the PodGroup a pod of the ``top`` workload (a reference or a kind
    name) joins, and why (``-group-3`` for a LeaderWorkerSet's fourth group); ``("", "")``
    otherwise."""
    entry = workload_kind(top)
    if entry is None or entry.layout != ONE_PER_REPLICA:
        return "", ""
    index = labels(pod).get(LWS_GROUP_INDEX_LABEL)
    if index is not None and index.isdigit():
        return f"-group-{index}", f", group {index}"
    return "", ""


def scale_target(alias: str) -> WorkloadKind | None:
    """The kind ``--scale`` means by ``alias`` (``deploy``, ``sts``, ``lws`` ...)."""
    alias = alias.lower()
    return next((k for k in WORKLOADS.values() if k.scales and alias in k.aliases), None)


def _only_part(entry: WorkloadKind, obj: Any) -> str | None:
    """The one part of an object sized by parts, when it has exactly one."""
    parts = list(entry.scale_parts(obj)) if entry.scale_parts is not None else []
    return parts[0] if len(parts) == 1 else None


def scale_field(entry: WorkloadKind, obj: Any, part: str | None) -> tuple[str | int, ...] | str:
    """The field ``--scale`` sets on ``obj`` (of kind ``entry``) for ``part`` (None: the
    kind's own), or why there is none."""
    if entry.scale_parts is None:
        if part:
            return f"a {entry.kind} has no parts to scale (scale it as {entry.kind.lower()}/NAME=N)"
        assert entry.scale_path is not None
        return entry.scale_path
    parts = entry.scale_parts(obj)
    wanted = part.lower() if part else entry.default_scale_part(obj)
    if wanted in parts:
        return parts[wanted]
    listed = ", ".join(parts) or "none"
    if part:
        return f"it has no part {part!r} (its parts: {listed})"
    return f"say which part: NAME:PART=N with PART one of {listed}"

