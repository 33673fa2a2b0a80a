"""The values backends and their callers pass each other: a gang as podgang wants it
(:class:`GangSpec`, its :class:`Subgroup` tree), what its settings are read from
(:class:`GangSource`), what is known of the cluster (:class:`ClusterFacts`), how a size
change is applied (:class:`Resize`) and what a scheduler said (:class:`SchedulerVerdict`).

Apart from :class:`podgang.backends.base.Backend` so that the backend's core and its
optional capabilities (:mod:`podgang.backends.capabilities`) can both speak them. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Mapping, Sequence

from podgang import nodes
from podgang.objects import OwnerRef, Resource, as_dict, as_list, metadata, quoted, spec

PATCH = "patch"
REPLACE_WHEN_EMPTY = "replace-when-empty"
REFUSE = "refuse"


@dataclass(frozen=True)
class Resize:
    """How a live PodGroup's size change is applied.

    ``patch``: send ``body`` as a merge patch. ``replace-when-empty``: the group
    cannot change while it lives; delete it once it has no pods so that it is
    created again with the new size. ``refuse``: not to this size (the scheduler
    refuses it: a semi-preemptible KAI group's raise; a smaller one may be allowed);
    ``why`` says so.
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
