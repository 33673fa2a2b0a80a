"""What a gang scheduler's backend must answer, and nothing else.

podgang's rules decide *which* gang a pod joins and *how large* it must be; a
backend says how one scheduler spells that: where a pod carries its membership,
the patches that set it (at admission, or backfilled later), the PodGroup object
and its size field, and what happens when the size must change on a live group.
Everything outside ``podgang/backends/`` talks to a scheduler only through
:class:`Backend`, so a new scheduler is one new module. No I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

from podgang import nodes, quantities
from podgang.objects import Denial, OwnerRef, Resource, as_dict, as_list, metadata, quoted, spec

PATCH = "patch"
REPLACE_WHEN_EMPTY = "replace-when-empty"
REFUSE = "refuse"


@dataclass(frozen=True)
class Resize:
    """How a live PodGroup's size change is applied.

    ``patch``: send ``body`` as a merge patch. ``replace-when-empty``: the group
    cannot change while it lives; delete it once it has no pods so that it is
    created again with the new size. ``refuse``: it cannot change at all; ``why``
    says so.
    """

    action: str
    body: dict[str, Any] | None = None
    why: str = ""


@dataclass(frozen=True)
class SchedulerVerdict:
    """What a scheduler itself last said about placing a gang (from its PodGroup's status)."""

    state: str  # "scheduled", "unschedulable", or the scheduler's own word
    message: str = ""

    def __str__(self) -> str:
        return f"{self.state}: {self.message}" if self.message else self.state


def one_line(text: Any, limit: int = 300) -> str:
    """A scheduler's message folded to one line of at most ``limit`` characters."""
    return " ".join(str(text or "").split())[:limit]


PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass")


@dataclass(frozen=True)
class QueueFacts:
    """A scheduler queue's bounds as its scheduler counts them (the backend's units):
    ``quota`` (what a non-preemptible gang may never exceed, KAI's deserved share) and
    ``limit`` (what no gang may exceed); a resource absent from either is unbounded."""

    name: str
    parent: str | None = None
    quota: Mapping[str, Decimal] = field(default_factory=dict)
    limit: Mapping[str, Decimal] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterFacts:
    """What a scheduler's own grouper would check in the cluster before it trusts a
    value: which PriorityClasses exist, which queues exist and whether each is a leaf —
    and what the never-placed verdicts read (``podgang.feasibility``): the classes'
    values, the queues' bounds, the nodes. None: not known (offline, or not readable) — a
    value is then taken as written, and nothing is concluded from it."""

    priority_classes: frozenset[str] | None = None
    queues: Mapping[str, bool] | None = None  # queue name -> is a leaf queue
    priority_values: Mapping[str, int] | None = None  # PriorityClass name -> value
    queue_bounds: Mapping[str, QueueFacts] | None = None
    nodes: tuple[nodes.NodeFacts, ...] | None = None
    #: what the verdicts worked out per placement (the nodes a placement may use), kept with the facts
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False, hash=False)


def slim_fact(raw: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """A fact object of ``kind`` as the processes keep it: a Node trimmed to what the
    verdicts read (:func:`podgang.nodes.slim_node`); a PriorityClass to its name and value;
    a queue to its name and spec (parent, quota, limit: small)."""
    if kind == nodes.NODES.kind:
        return nodes.slim_node(raw)
    md = metadata(raw)
    version = {"resourceVersion": md["resourceVersion"]} if md.get("resourceVersion") else {}
    out: dict[str, Any] = {"metadata": {"name": md.get("name"), **version}}
    if isinstance(raw.get("value"), int):
        out["value"] = raw["value"]
    if raw.get("globalDefault") is True:
        out["globalDefault"] = True
    if spec(raw):
        out["spec"] = dict(spec(raw))
    return out


def common_facts(found: Mapping[str, Any]) -> ClusterFacts:
    """The facts every backend reads alike: PriorityClasses (names, values) and nodes."""
    classes = found.get(PRIORITY_CLASSES.kind)
    names = values = None
    if classes is not None:
        values = {n: v for p in as_list(classes) if isinstance(n := metadata(p).get("name"), str) and n
                  for v in [as_dict(p).get("value")] if isinstance(v, int) and not isinstance(v, bool)}
        names = frozenset(n for p in as_list(classes) if isinstance(n := metadata(p).get("name"), str) and n)
    listed = found.get(nodes.NODES.kind)
    known = None if listed is None else tuple(n for raw in as_list(listed) if (n := nodes.node_facts(raw)))
    return ClusterFacts(names, None, values, None, known)


@dataclass(frozen=True)
class GangSource:
    """What a gang's scheduler settings are read from: its pods (or the one pod being
    admitted), its workloads' pod templates, and its owners nearest first — the top
    owner last — plus what is known of the cluster."""

    pods: Sequence[Any] = ()
    templates: Sequence[Any] = ()
    owners: Sequence[Any] = ()
    facts: ClusterFacts = ClusterFacts()

    @property
    def nearest_first(self) -> list[Any]:
        return [*self.pods, *self.templates, *self.owners]

    @property
    def pod_like(self) -> list[Any]:
        """The pods, else the pod templates: what "the pod" means for a gang."""
        return [*self.pods, *self.templates]

    @property
    def top_owner(self) -> Any:
        return self.owners[-1] if self.owners else None


@dataclass(frozen=True)
class Subgroup:
    """One node of a gang's subgroup tree, and where its minimum comes from: a workload's
    pods (or the standalone pods) in a hand-made group several workloads share, one role
    of a workload's own gang (a PyTorchJob's master), a role whose replicas are several
    pods each (an LWS: ``of_subgroups``, its minimum counts complete replicas), or one such
    replica (a leaf under its role: ``parent``). The rules build them
    (:func:`podgang.rules.gang_tree`); a backend spells them."""

    name: str
    #: pods for a leaf; for a node with ``of_subgroups``: the direct children it needs
    min_member: int
    reason: str = ""
    pinned: bool = False  # set by podgang.io/min-available, not the workload's size
    parent: str | None = None  # None: directly under the group
    of_subgroups: bool = False  # its minimum counts child subgroups (KAI's minSubGroup)
    #: what its minimum of child subgroups counts, for people (``podgang plan``)
    counts: str = "complete replicas"
    #: where the scheduler must place its pods, as ``(field, value)`` pairs its backend
    #: spells (KAI's segment topology constraint); empty: anywhere the gang's own allows
    topology: tuple[tuple[str, str], ...] = ()

    @property
    def shape(self) -> tuple[str, int, str | None, bool]:
        """What a scheduler holds of it (the reason and pin are podgang's own)."""
        return (self.name, int(self.min_member), self.parent, self.of_subgroups)


def tree_shape(subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> tuple[Any, ...]:
    """A tree as a scheduler holds it, comparable: the root's minimum of subgroups and
    each node's shape, by name."""
    return (min_subgroup, tuple(sorted(s.shape for s in subgroups)))


def min_pods(subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> int:
    """The fewest pods a tree can be satisfied with: a leaf's minimum, a node's smallest
    ``minimum`` children summed; the root takes ``min_subgroup`` of its top nodes (all of
    them when None)."""
    children: dict[str | None, list[Subgroup]] = {}
    for s in subgroups:
        children.setdefault(s.parent, []).append(s)

    def need(node: Subgroup, depth: int = 0) -> int:
        if not node.of_subgroups or depth > 32:
            return max(int(node.min_member), 0)
        return smallest(children.get(node.name, []), node.min_member, depth + 1)

    def smallest(nodes: list[Subgroup], count: int | None, depth: int) -> int:
        needs = sorted(need(n, depth) for n in nodes)
        return sum(needs if count is None else needs[:max(int(count), 0)])

    return smallest(children.get(None, []), min_subgroup, 0)


@dataclass(frozen=True)
class GangSpec:
    """A PodGroup as podgang wants it, before a backend spells it."""

    name: str
    namespace: str | None
    min_member: int
    owner: OwnerRef | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    queue: str | None = None
    priority_class: str | None = None
    #: seconds the scheduler waits for the whole gang (coscheduling's scheduleTimeoutSeconds)
    schedule_timeout: int | None = None
    #: the gang's subgroups (a flat list, or a tree: roles of complete replicas); empty: none
    subgroups: tuple[Subgroup, ...] = ()
    #: the root's minimum of direct subgroups (a tree: KAI's ``minSubGroup``, written instead
    #: of ``minMember``); None: the root counts pods
    min_subgroup: int | None = None
    #: the resources the whole gang needs at least (a ResourceList), for a scheduler that reads them
    min_resources: Mapping[str, str] | None = None
    #: more spec fields the scheduler reads (KAI's preemptibility, topology, ...)
    extra_spec: Mapping[str, Any] | None = None
    #: (setting, where its value comes from), for ``podgang plan``; not written
    origins: tuple[tuple[str, str], ...] = ()
    #: what is wrong with the settings (a queue that does not exist, ...); not written
    problems: tuple[str, ...] = ()


def gang_spec(name: str, namespace: str | None, size: int, *, labels: Mapping[str, str],
              options: Mapping[str, Any], **fields: Any) -> GangSpec:
    """A :class:`GangSpec` from a backend's :meth:`Backend.gang_options`: its labels
    merged under ``labels`` (podgang's own, which win)."""
    options = dict(options)
    merged = {**(options.pop("labels", None) or {}), **labels}
    return GangSpec(name, namespace, size, labels=merged, **fields, **options)


class Backend(ABC):
    """One gang scheduler's PodGroup and pod-membership dialect."""

    #: the backend's name on the command line (``--backend SCHEDULER=NAME``)
    name: str
    #: where its PodGroups live
    podgroup: Resource
    #: pod (and pod template) labels and annotations the grouper must keep: the
    #: membership keys and the keys :meth:`gang_options` reads
    pod_label_keys: tuple[str, ...] = ()
    pod_annotation_keys: tuple[str, ...] = ()
    #: pod spec fields the grouper must keep (membership in the spec, the priority class)
    pod_spec_keys: tuple[str, ...] = ()
    #: the scheduler's verdict is read from the gang's pods (its PodGroup holds none)
    verdict_on_pods: bool = False
    #: (API group, kind) of the scheduler's own workloads, whose controller makes their
    #: PodGroup itself (Volcano's Job): podgang makes none, and says why
    own_workloads: Mapping[tuple[str, str], str] = {}

    # -- pod membership -------------------------------------------------------

    @abstractmethod
    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        """The group a pod or pod template names itself (a hand-made group) and the
        key that names it, None when it names none, a :class:`Denial` when its keys
        contradict each other."""

    @abstractmethod
    def group_of(self, pod: Any) -> str | None:
        """The group a pod already carries, whoever set it."""

    #: where a pod names its subgroup, ``(section, key)``; None: the scheduler has no subgroups
    subgroup_key: tuple[str, str] | None = None

    def subgroup_of(self, pod: Any) -> str | None:
        """The pod's subgroup inside its gang, where the scheduler has subgroups."""
        if self.subgroup_key is None:
            return None
        return string_value(pod, *self.subgroup_key) or None

    def with_subgroup(self, pod: Mapping[str, Any], patch: list[dict[str, Any]],
                      subgroup: str | None, *, over_own: bool = False) -> list[dict[str, Any]]:
        """``patch`` (the pod's membership operations) plus what names the pod's
        ``subgroup``; unchanged when the scheduler has no subgroups or the pod names
        one itself (a pod template that sets it keeps its own) — unless ``over_own``:
        a replica's leaf replaces its template's role."""
        own = self.subgroup_of(pod)
        if self.subgroup_key is None or not subgroup or own == subgroup or (own is not None and not over_own):
            return patch
        section, key = self.subgroup_key
        out = [dict(op) for op in patch]
        for op in out:  # a section the membership patch creates: put the subgroup in it too
            if op.get("op") == "add" and op.get("path") in ("/metadata", f"/metadata/{section}"):
                value = dict(op["value"])
                if op["path"] == "/metadata":
                    value[section] = {**as_dict(value.get(section)), key: subgroup}
                else:
                    value[key] = subgroup
                op["value"] = value
                return out
        md = pod.get("metadata")
        if not isinstance(md, dict):
            return [*out, {"op": "add", "path": "/metadata", "value": {section: {key: subgroup}}}]
        if not isinstance(md.get(section), dict):
            return [*out, {"op": "add", "path": f"/metadata/{section}", "value": {key: subgroup}}]
        return [*out, {"op": "add", "path": f"/metadata/{section}/{escape_key(key)}", "value": subgroup}]

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        """The subgroups a PodGroup holds (name -> minimum); None when the scheduler
        cannot express subgroups (its gang has only the summed minimum)."""
        return None

    def segment_size(self, objs: Sequence[Any]) -> tuple[int | None, str, str | None]:
        """The size of the segments the scheduler splits a role into (consecutive pods by
        index, each segment a leaf of its own), read from ``objs`` in the scheduler's order
        (a pod, its pod template, its workload): (size, where it is written, None), or
        (None, "", what is wrong with it), or (None, "", None) when none is asked for."""
        return None, "", None

    def segment_topology(self, objs: Sequence[Any], top: Any = None) -> tuple[tuple[str, str], ...]:
        """Where each segment's pods must be placed (:attr:`Subgroup.topology`), read from
        ``objs`` (a pod, its template) and the workload ``top``, as the scheduler reads it;
        empty when none is asked for."""
        return ()

    def role_topology(self, template: Any) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """Where one role's pods must be placed together (:attr:`Subgroup.topology`), read
        from the role's pod template as the scheduler reads it (KAI: a Ray head's or worker
        group's), and what is wrong with it; ((), None) when none is asked for."""
        return (), None

    #: whether the scheduler holds a tree of subgroups (a role of complete replicas, each a
    #: leaf with its own minimum): KAI. Elsewhere a role is one flat part at its pod total.
    holds_trees: bool = False

    def subgroup_tree_of(self, podgroup: Any) -> tuple[int | None, tuple[Subgroup, ...]] | None:
        """The root's minimum of subgroups (None: it counts pods) and every subgroup a
        PodGroup holds, parents included; None when the scheduler has no subgroups."""
        flat = self.subgroups_of(podgroup)
        if flat is None:
            return None
        return None, tuple(Subgroup(n, v if isinstance(v, int) else 0) for n, v in flat.items())

    def is_users_tree(self, podgroup: Any) -> bool:
        """Whether a PodGroup holds a tree (a root or a subgroup counting subgroups) —
        on a hand-made group podgang did not write it, the user's own."""
        return False

    def subgroups_patch(self, podgroup: Any, subgroups: Sequence[Subgroup],
                        min_subgroup: int | None = None) -> dict[str, Any] | None:
        """A merge patch that gives a live PodGroup exactly ``subgroups`` (and, for a
        tree, the root's ``min_subgroup``); None when the scheduler cannot express them."""
        return None

    @abstractmethod
    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """JSONPatch operations that put ``pod`` into ``group`` at admission;
        empty when the pod already carries it."""

    @abstractmethod
    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        """A merge patch that puts an already created pod into ``group``, or None
        when the scheduler's membership cannot be set after creation."""

    def backfill(self, pod: Mapping[str, Any], group: str, subgroup: str | None = None,
                 over_own: bool = False) -> dict[str, Any] | None:
        """Everything a created pod lacks, as ONE merge patch: its membership in ``group``
        (:meth:`backfill_patch`) and, where the scheduler has subgroups and the pod names
        none (or ``over_own``: a replica's leaf over the role its template names), ``subgroup``;
        a key already holding its value is left out (so ``{}`` when the pod lacks nothing).
        None when the membership cannot be set after creation."""
        patch = self.backfill_patch(pod, group)
        if patch is None:
            return None
        md = {section: dict(values) for section, values in as_dict(patch.get("metadata")).items()}
        if subgroup and self.subgroup_key is not None and (over_own or self.subgroup_of(pod) is None):
            section, key = self.subgroup_key
            md.setdefault(section, {})[key] = subgroup
        lacking = {section: {k: v for k, v in values.items() if string_value(pod, section, k) != v}
                   for section, values in md.items()}
        lacking = {section: values for section, values in lacking.items() if values}
        rest = {k: v for k, v in patch.items() if k != "metadata"}
        return {**rest, "metadata": lacking} if lacking else rest

    @abstractmethod
    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        """Whether a created pod lacks part of its membership."""

    @abstractmethod
    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """A shallow copy of ``pod`` without its membership (to find its natural gang)."""

    @abstractmethod
    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """Why an UPDATE may not make this change to a pod's membership, or None."""

    @abstractmethod
    def describe_membership(self, group: str) -> str:
        """What setting the membership wrote, for events: ``key=group set``."""

    def membership_problem(self, group: str) -> str | None:
        """Why a pod can never carry ``group`` in this scheduler (a name too long for
        the key that holds it), for a denial at admission; None when it can."""
        return None

    # -- PodGroups ------------------------------------------------------------

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        """The scheduler's own per-gang settings, as :class:`GangSpec` fields, read
        from ``source`` (its pods, pod templates and owners). Empty when the scheduler
        has none."""
        return {}

    def size_pin(self, workload: Any) -> tuple[int | None, str]:
        """The gang size the scheduler's own annotation on a workload sets (KAI's batch
        min-member annotation on a Job): ``(size, where)``, ``(None, problem)``
        for a value the scheduler ignores, ``(None, "")`` when there is none."""
        return None, ""

    def role_pin(self, role: Any) -> tuple[int | None, str]:
        """The same for one role of a workload's gang (a :class:`podgang.kinds.Role`: a
        JobSet's replicated job, whose Job template KAI reads), for all its copies."""
        return None, ""

    #: whether :meth:`gang_options` reads every label and annotation of the top owner
    #: (the grouper then keeps them in its cache)
    reads_owner_metadata: bool = False

    def cluster_facts(self, found: Mapping[str, Any]) -> ClusterFacts:
        """:class:`ClusterFacts` from the objects of :attr:`fact_resources` (kind ->
        list of objects, or None when that kind could not be read)."""
        return common_facts(found)

    # -- what the never-placed verdicts ask a scheduler (podgang.feasibility)

    #: the scheduler's name in messages
    scheduler_title: str = "the scheduler"

    def live_settings(self, podgroup: Any) -> dict[str, Any]:
        """The settings a live PodGroup holds that the scheduler reads (KAI's queue, which is
        never moved; a hand-made group's, which are the user's), as :meth:`gang_options` spells
        them: what the verdicts judge once the group exists."""
        return {}

    def queue_demand(self, parts: Iterable[tuple[int, Any]], facts: ClusterFacts | None = None) -> dict[str, Decimal]:
        """What a gang's minimum pods ``parts`` ((how many, pod or template)) count against
        its queue, in the units of :class:`QueueFacts` (by default: their requests), given
        what is known of the cluster."""
        return quantities.gang_requests(parts)

    def node_requests(self, pod_or_template: Any) -> dict[str, Decimal]:
        """What one pod takes of a node's allocatable resources (by default its requests)."""
        return quantities.pod_requests(pod_or_template)

    def node_pool(self, pod_or_template: Any) -> dict[str, str]:
        """Node labels the scheduler adds to a pod's node selector (KAI's node pool)."""
        return {}

    def non_preemptible(self, options: Mapping[str, Any], facts: ClusterFacts) -> str | None:
        """Why the scheduler never lets this gang go over its queue's quota (it may not be
        preempted: KAI's rule), or None when it may (or the scheduler has no such rule)."""
        return None

    def queue_words(self, resource: str, amount: Decimal) -> str:
        """``amount`` of ``resource`` as a queue counts it, for a message."""
        return f"{resource} {quantities.format_quantity(amount)}"

    def queue_fix(self, queue: str, bound: str, resource: str, amount: Decimal) -> str:
        """The change to queue ``queue`` that lets ``amount`` of ``resource`` through its ``bound``
        (``quota`` or ``limit``)."""
        return f"raise the {bound} of queue {queue} to at least {self.queue_words(resource, amount)}"

    def queue_verdict_words(self, bound: str) -> str:
        """What the scheduler itself says of a gang over a queue's ``bound``."""
        return ""

    #: whether the scheduler ignores a pod naming a subgroup its PodGroup does not list
    #: (KAI): such a pod is given its subgroup key only once the group lists it
    subgroups_must_be_listed: bool = False

    #: seconds after which a gang held whole with every member unbound gets its PodGroup
    #: touched, for a scheduler that does not try it again when room appears (None: never)
    wake_interval: float | None = None

    def evicts_itself(self, podgroup: Any) -> str | None:
        """Why the scheduler itself evicts what is left of this stale gang (and podgang
        must not as well), or None when podgang is the one evictor."""
        return None

    #: the PodGroup field that sets how long the scheduler waits before it evicts a stale gang
    #: itself (None: it never does)
    eviction_grace_field: str | None = None

    def grace_taken_over(self, podgroup: Any, spec_patch: Mapping[str, Any]) -> str | None:
        """The grace period a user gave the scheduler's own eviction of ``podgroup`` that
        ``spec_patch`` (podgang's) turns off to evict the gang itself, or None: podgang keeps
        it as its own grace for the gang, so that it is never lost."""
        return None

    def settings_drift(self, podgroup: Any, options: Mapping[str, Any]) -> list[str]:
        """What differs between a live group podgang made and the settings it would give
        it now, that is never changed on a live group (KAI's queue); said, not written."""
        return []

    #: cluster-scoped resources :class:`ClusterFacts` are read from for this backend
    #: (PriorityClasses, queues, nodes); the grouper watches them, the webhook lists them
    fact_resources: tuple[Resource, ...] = (PRIORITY_CLASSES, nodes.NODES)

    def configured(self, options: Mapping[str, Any]) -> "Backend":
        """This backend with the process's backend-specific flags applied (KAI's default
        queue, say); itself when it has none."""
        return self

    @abstractmethod
    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        """A complete PodGroup object, ready to create."""

    #: the spec field that holds the resources the gang needs at least (Volcano's and
    #: coscheduling's ``minResources``); None: the scheduler reads none
    min_resources_field: str | None = None

    def min_resources_for(self, minimum: Sequence[tuple[int, Any]] | None) -> dict[str, str] | None:
        """The resources a gang needs at least — Σ its minimum pods × their requests, as
        Volcano's and coscheduling's own controllers compute them — from ``minimum``, the
        pods it needs as (how many, a pod or pod template); None when the scheduler reads
        none, the pods are not known, or they request nothing."""
        if self.min_resources_field is None or minimum is None:
            return None
        return quantities.resource_list(quantities.gang_requests(minimum)) or None

    def min_resources_of(self, podgroup: Any) -> Any:
        """The resources a PodGroup says its gang needs (as written), None when it says none."""
        if self.min_resources_field is None:
            return None
        return as_dict(as_dict(podgroup).get("spec")).get(self.min_resources_field)

    def min_resources_patch(self, podgroup: Any, wanted: Mapping[str, str]) -> dict[str, Any] | None:
        """A merge patch that gives a live PodGroup exactly ``wanted`` as its minimum
        resources; None when the scheduler reads none."""
        if self.min_resources_field is None:
            return None
        gone = {name: None for name in as_dict(self.min_resources_of(podgroup)) if name not in wanted}
        return {"spec": {self.min_resources_field: {**gone, **wanted}}}

    @abstractmethod
    def min_member(self, podgroup: Any) -> int | None:
        """The PodGroup's current size, or None when it has none (or a bad one)."""

    def for_discovery(self, discovery: Mapping[str, Any] | None) -> "Backend":
        """This backend as the cluster serves it, from the discovery document of its
        PodGroup's API group (``GET /apis/<group>``; None when not served or unknown).
        A backend whose version depends on what is served returns that variant."""
        return self

    @abstractmethod
    def resize(self, podgroup: Any, value: int) -> Resize:
        """How to bring a live PodGroup to size ``value``."""

    #: the PodGroup fields that hold the gang's size and subgroups (paths from the object's
    #: root): podgang writes them on the groups it makes, and another writer of any of them
    #: (``metadata.managedFields``) fights podgang for the gang's size
    size_fields: tuple[tuple[str, ...], ...] = ()

    #: what to tell the user about another writer of :attr:`size_fields` that is likely
    #: this scheduler's own (KAI's older pod-grouper); empty: nothing particular
    other_writer_hint: str = ""

    @abstractmethod
    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a PodGroup's spec the grouper keeps in its cache."""

    #: the PodGroup spec fields that hold the gang's queue and its priority class, where
    #: the scheduler has them
    queue_field: str | None = None
    priority_field: str | None = None

    def written_options(self, podgroup: Any) -> dict[str, Any]:
        """The queue and priority class a PodGroup holds as written (a hand-made group's
        own, which podgang never changes), in :meth:`gang_options`' keys."""
        found = as_dict(as_dict(podgroup).get("spec"))
        out: dict[str, Any] = {}
        for option, field_name in (("queue", self.queue_field), ("priority_class", self.priority_field)):
            if field_name is not None and isinstance(found.get(field_name), str) and found[field_name]:
                out[option] = found[field_name]
        return out

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        """What the scheduler last said about placing the gang (from the PodGroup's
        status), or None when it says nothing podgang can read."""
        return None

    # -- an object that holds several gangs (a 1.35 Workload's pod groups) -------
    # Every other scheduler's PodGroup is one gang of the same name: these defaults.

    def holder_name(self, group: str) -> str:
        """The name of the object that holds gang ``group``."""
        return group

    def name_parts(self, group: str) -> tuple[str, ...]:
        """The object names gang ``group`` is made of (each must be a valid name)."""
        return (group,)

    def gangs_in(self, podgroup: Any) -> tuple[str, ...]:
        """The gangs one PodGroup object holds, by name."""
        name = metadata(podgroup).get("name")
        return (name,) if isinstance(name, str) and name else ()

    def gang_view(self, holder: Any, group: str) -> Any | None:
        """``holder`` (the object :meth:`holder_name` names) as gang ``group``'s PodGroup,
        None when it does not hold that gang."""
        return holder

    def missing_group(self, group: str, namespace: str, holder: Any | None) -> str:
        """What is said of gang ``group`` when it does not exist (``holder``: the object that
        should hold it, when that exists)."""
        return f"{self.podgroup.kind} {group} not found in namespace {namespace}"

    def refusals(self, podgroup: Any) -> list[str]:
        """What the apiserver (or kubectl's strict validation) refuses in a PodGroup manifest
        as written, in its words; empty when it would be created."""
        return []

    def is_podgroup(self, obj: Any) -> bool:
        obj = as_dict(obj)
        return obj.get("kind") == self.podgroup.kind and obj.get("apiVersion") == self.podgroup.api_version

    @staticmethod
    def podgroup_metadata(gang: GangSpec) -> dict[str, Any]:
        """The metadata every backend's PodGroup carries."""
        md: dict[str, Any] = {"name": gang.name}
        if gang.namespace:
            md["namespace"] = gang.namespace
        if gang.labels:
            md["labels"] = dict(gang.labels)
        if gang.annotations:
            md["annotations"] = dict(gang.annotations)
        if gang.owner is not None:
            md["ownerReferences"] = [gang.owner.to_dict()]
        return md

    def __repr__(self) -> str:
        return f"<backend {self.name}: {self.podgroup.api_version} {self.podgroup.kind}>"


def membership_change_message(where: str, was: Any, now: Any) -> str:
    """Why an UPDATE that moves a pod from ``was`` to ``now`` (None: unset) is refused."""
    before = "unset" if was is None else quoted(was)
    after = "removed" if now is None else quoted(now)
    return (f"a pod's PodGroup cannot change once the pod exists ({where} {before} → {after}): "
            f"delete the pod and create it again in the other group")


def escape_key(key: str) -> str:
    """A map key as one JSON Pointer token (RFC 6901): ``~`` → ``~0``, ``/`` → ``~1``."""
    return key.replace("~", "~0").replace("/", "~1")


def string_value(obj: Any, section: str, key: str) -> str | None:
    """``metadata.<section>[key]`` when it is a string."""
    value = as_dict(metadata(obj).get(section)).get(key)
    return value if isinstance(value, str) else None
