"""What every workload kind is made of: the :class:`WorkloadKind` entry and its parts
(:class:`Role`, :class:`Replicas`, :class:`Stage`, :class:`KindDoc`), the gang layouts,
and the few rules more than one family shares (a Job's size, a ``spec.template``, the
conditions that end a run). Its own module so that every family imports it and no
family imports another's entries. No I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from podgang import rollouts
from podgang.objects import EMPTY, Resource, as_dict, as_int, as_list, spec, status


Obj = dict[str, Any]
Template = Mapping[str, Any]
SlimTemplate = Callable[[Any], Obj]


#: gang layouts
ONE_PER_OBJECT = "object"  # the top owner's one PodGroup
ONE_PER_RUN = "run"  # every object the kind starts is a gang of its own (a CronJob's Jobs, a RayService's clusters)
ONE_PER_REPLICA = "replica"  # one PodGroup per replica group (LeaderWorkerSet)
#: no gang of its own: it makes workloads of kinds that define gangs (an AppWrapper's PyTorchJob, a
#: DisaggregatedSet's LeaderWorkerSets, a RayCronJob's RayJobs), each of which keeps its own gangs
WRAPPER = "wrapper"

# Job / JobSet conditions that mean "this run is over".
FINISHED_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Completed",
                                 "Succeeded"})  # Succeeded: a Kubeflow training job's


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
    pod-grouper does instead is said beside it, from ``podgang.backends.kai.keys``."""

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
    #: what a user is told when the workload asks for a minimum its pods cannot meet (a
    #: Kubeflow job's ``minAvailable`` above the pods it is made of), which podgang caps; None: nothing
    minimum_problem: Callable[[Any], "str | None"] = lambda obj: None
    #: a workload of this kind with one role still has that role as its one subgroup (as
    #: KAI's own PyTorchJob grouper writes it); False: one role is the whole gang, no subgroups
    lone_role_subgroup: bool = False
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
    #: with layout WRAPPER: the workloads its controller makes from it, as it makes them (a name
    #: the cluster decides, a revision hash or a run's time, holds a placeholder), owned by it
    makes: Callable[[Any], list[Obj]] = lambda obj: []
    #: its operator makes the gang of every pod under it, and says so to the scheduler itself
    #: (Grove's PodGang, and the PodGroup made from it): who, in words. podgang leaves those pods
    #: alone; empty for every other kind
    gang_maker: str = ""
    #: its runs read its labels and annotations where they have none of their own: a kind
    #: KAI's pod-grouper skips as a top owner (a TrainJob, for the JobSet it makes)
    lends_metadata: bool = False
    #: the pod labels that name a pod's role (the first one a pod carries), lower-cased
    role_labels: tuple[str, ...] = ()
    #: the role a pod plays, where :attr:`role_labels`' value is not its name (a taught kind's
    #: component told by a label's value): None, the first role label's value
    pod_role: Callable[[Any], str | None] | None = None
    #: a kind taught by a declaration (a Karta, a ``kinds:`` entry): where it comes from; empty: built in
    taught_from: str = ""
    #: held back on purpose (Kueue, a user): its pods are removed on purpose
    suspended: Callable[[Any], bool] = lambda obj: spec(obj).get("suspend") is True
    #: why its controller is removing one of its pods on purpose, given the workload and the pod
    #: (an LWS group above ``spec.replicas``; a JobSet pod of a restart attempt before
    #: ``status.restarts``), or None: such a pod is not counted as a member of its gang, and its
    #: gang is settling while it is there
    replaced: Callable[[Any, Any], str | None] = lambda obj, pod: None
    #: the pod labels :attr:`replaced` reads (the grouper keeps them on its pods)
    replaced_labels: tuple[str, ...] = ()
    #: why its controller is making ``pod``'s multi-pod replica again whole on purpose (an LWS
    #: group recreated after a pod restart: a pod of it being deleted, its new leader not placed
    #: yet), or None: the pod stays a member, and a gang that is that one replica is settling
    remade: Callable[[Any, Any], str | None] = lambda obj, pod: None
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
    #: every role is a tree of its replicas, however many and however large (a JobSet's
    #: replicated job: a parent needing all its Jobs, a leaf ``<role>-<infix>-<i>`` per Job, as
    #: KAI's own JobSet grouper writes it): the infix; None: only roles of :attr:`Role.per_replica`
    #: are trees, their leaves ``<role>-<i>``
    role_leaf_infix: str | None = None
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
        if self.layout in (ONE_PER_RUN, WRAPPER):
            return []
        return [""]


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


def _spec_template(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.template", as_dict(spec(obj).get("template")))] if "template" in spec(obj) else []


def _slim_job(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    s = as_dict(s)
    out: Obj = {k: s[k] for k in ("parallelism", "completions", "suspend") if k in s}
    if "template" in s:
        out["template"] = slim_template(s.get("template"))
    return out


def _whole_number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


_REPLICATED_STATUS = ("observedGeneration", "replicas", "updatedReplicas", "currentRevision", "updateRevision")
_RUN_STATUS = ("completionTime", "active", "succeeded")


def _conditions_finished(obj: Any) -> bool:
    """A Job, JobSet or Kubeflow job whose completionTime or a finished condition says it is over."""
    st = status(obj)
    if st.get("completionTime"):
        return True
    return any(as_dict(c).get("type") in FINISHED_CONDITIONS and as_dict(c).get("status", "True") == "True"
               for c in as_list(st.get("conditions")))


def _only_part(entry: WorkloadKind, obj: Any) -> str | None:
    """The one part of an object sized by parts, when it has exactly one."""
    parts = list(entry.scale_parts(obj)) if entry.scale_parts is not None else []
    return parts[0] if len(parts) == 1 else None
