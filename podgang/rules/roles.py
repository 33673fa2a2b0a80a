"""A workload's roles as subgroups of its gang (a job's master and workers, a Ray cluster's
head and worker groups), and the segments a scheduler splits a role or replica into.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from podgang import quantities
from podgang.backends.base import Subgroup
from podgang.kinds import (
    LWS_LEADER_EXCLUDED,
    Role,
    lws_subgroup_policy,
    pod_templates,
    replica_units,
    roles,
    segment_index,
    segmented_role,
    whole_roles,
    workload_kind,
)
from podgang.objects import annotations, clip, kind_name, metadata
from podgang.objects import as_dict as _dict
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.membership import _segmenting_backend, leaf_name, roles_in_hand_made_group, workload_backend
from podgang.rules.names import _role_name_ok, MAX_SUBGROUP_NAME
from podgang.rules.pins import min_available, pinned_min_member
from podgang.rules.trees import whole_workload_tree


def own_subgroup_names(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """The subgroups of a workload's own gang by name — its roles — none while
    ``podgang.io/min-member`` on it pins the whole gang (the pin is the gang)."""
    if pinned_min_member(workload, settings)[0] is not None:
        return ()
    return tuple(part.name for part in role_subgroups(workload, settings))


def role_tree(workload: Any, settings: Settings = DEFAULT) -> tuple[Subgroup, ...]:
    """A workload's own gang as a tree where some role is several replicas of several pods
    each (a Ray worker group of multi-host replicas), or every role is a tree of its replicas
    (a JobSet: its kind's :attr:`~podgang.kinds.WorkloadKind.role_leaf_infix`): such a role
    a parent needing all its replicas complete, a leaf per replica (:func:`role_leaf`); every
    other role a flat part. A JobSet's leaf needs its Job's pods, or what the scheduler's own
    annotation on the replicated job's Job template asks of each Job (KAI's batch-min-member,
    :meth:`Backend.role_pin`), and is placed where that template asks (its topology). Empty
    when no role is such, a role's minimum is pinned by ``podgang.io/min-available`` (it counts
    pods there) or the gang is pinned whole."""
    if pinned_min_member(workload, settings)[0] is not None:
        return ()
    found = roles(workload)
    entry = workload_kind(workload)
    every = entry is not None and entry.role_leaf_infix is not None
    parts = _role_parts(workload, settings)
    by_pin = {r.name for r in found if min_available(r.template, settings)[0] is not None}
    if not (every or any(r.per_replica for r in found)) or any(p.pinned for p in parts if not every or p.name in by_pin) \
            or any(not _role_name_ok(r.name) for r in found):
        return ()
    backend = workload_backend(workload, settings)
    out: list[Subgroup] = []
    placed = {p.name: p.topology for p in parts}  # a role's own placement (a Ray group's topology)
    for role in found:
        each = role.per_replica or (role.size // role.replicas if every and role.replicas > 0 else None)
        if not each:
            out.append(Subgroup(role.name, role.size, role.reason, topology=placed.get(role.name, ())))
            continue
        count = role.size // each
        now = max(role.replica_count or 0, count)
        why = f"{each} pod{'' if each == 1 else 's'}"
        leaf_topology: tuple[tuple[str, str], ...] = ()
        if every and backend is not None:
            own, where = backend.role_pin(replace(role, replicas=1))
            each, why = (own, where.removesuffix(" × replicas 1")) if own is not None else (each, why)
            leaf_topology = backend.role_topology(role.owner_template)[0]
        out.append(Subgroup(role.name, count, f"{count} of its {now} replicas complete ({role.reason})",
                            of_subgroups=True, topology=placed.get(role.name, ())))
        out += [Subgroup(role_leaf(workload, role.name, i), each, f"replica {i}: {why}", parent=role.name,
                         topology=leaf_topology) for i in range(now)]
    return tuple(out)


def role_leaf(workload: Any, role: str, index: int) -> str:
    """The leaf of replica ``index`` of a role of ``workload`` (a reference or a kind name
    will do): ``<role>-<index>``, or ``<role>-replica-<index>`` in a JobSet (KAI's name)."""
    entry = workload_kind(workload)
    infix = entry.role_leaf_infix if entry is not None else None
    return leaf_name(f"{role}-{infix}" if infix else role, index)


def role_subgroups(workload: Any, settings: Settings = DEFAULT) -> tuple[Subgroup, ...]:
    """The subgroups of a workload's own gang, one per role its kind knows (a PyTorchJob's
    replica types, a RayCluster's head and worker groups), each at the role's minimum:
    ``podgang.io/min-available`` on the role's pod template, else what the kind says; a role
    its scheduler splits into segments (:func:`role_segments`) is a parent of them.
    None for a kind without roles, or a workload with a single unsegmented role (one part is
    the whole)."""
    found = _role_parts(workload, settings)
    if any(not _role_name_ok(s.name) for s in found):
        return ()
    by_name = {r.name: r for r in roles(workload)}
    out: list[Subgroup] = []
    for part in found:
        role = by_name.get(part.name)
        out += role_segments(workload, role, part, settings)[0] if role is not None else (part,)
    segmented = segmented_role(workload)
    if segmented is not None and segmented.name not in by_name:  # none of its pods required (in segments, if any)
        parts = role_segments(workload, segmented, Subgroup(segmented.name, 0, segmented.reason), settings)[0]
        out += parts if len(parts) > 1 or (out and _lone_role_subgroup(workload)) else ()
    if len(out) < 2 and not (out and _lone_role_subgroup(workload)):
        return ()
    return tuple(out)


def _lone_role_subgroup(workload: Any) -> bool:
    entry = workload_kind(workload)
    return entry is not None and entry.lone_role_subgroup


#: the most segments one role is split into (KAI's own pod-grouper refuses more)
MAX_SEGMENTS = 10000


def role_segments(workload: Any, role: Role, part: Subgroup,
                  settings: Settings = DEFAULT) -> tuple[tuple[Subgroup, ...], str | None]:
    """A role its scheduler splits into segments of consecutive pods (KAI's
    ``segment-size`` on a PyTorchJob's Worker template), as KAI's own pod-grouper writes
    them (``pytorch_grouper.go``): the role a parent needing every segment, and a leaf
    ``<role>-<i>`` per segment of ``size`` pods (the last one the rest), with the segments'
    topology; a segment wholly beyond the role's minimum (``part``) needs no pods. Else
    ``(part,)``. And what is wrong with the annotation, if anything."""
    entry = workload_kind(workload)
    if entry is None or entry.segmented_role != role.name:
        return (part,), None
    backend = _segmenting_backend(role.template, settings)
    if backend is None:
        return (part,), None
    size, where, problem = backend.segment_size([role.template])
    written = role.written if role.written is not None else role.size
    if size is None or written <= 0:
        return (part,), problem
    count = -(-written // size)
    if count > MAX_SEGMENTS:
        return (part,), (f"{kind_name(workload)}: {where} makes {count} segments, more than the {MAX_SEGMENTS} KAI "
                         f"allows: no segments")
    topology = backend.segment_topology([role.template], workload)
    mandatory = -(-int(part.min_member) // size)
    rest = written % size
    leaves = []
    for i in range(count):
        need = 0 if i >= mandatory else (rest if rest and i == count - 1 else size)
        last = min((i + 1) * size, written) - 1
        why = (f"pod{f's {i * size}-' if last > i * size else ' '}{last} of {role.name}"
               + ("" if need else f", beyond its minimum {part.min_member}"))
        leaves.append(Subgroup(leaf_name(role.name, i), need, why, parent=role.name, topology=topology))
    parent = replace(part, min_member=count, of_subgroups=True, counts="segments",
                     reason=f"{part.reason}; {where}: {count} segment{'s' if count != 1 else ''}")
    return (parent, *leaves), problem


def pod_segment(top: Any, top_obj: Any, pod: Any, role: str | None,
                settings: Settings = DEFAULT) -> str | None:
    """The segment leaf a pod is in, as the scheduler's own grouper labels it: a PyTorchJob
    worker by its replica index over the segment size (read from the pod, then its
    template), an LWS pod by its worker index within its replica (:func:`lws_segments`);
    None for any other pod."""
    entry = workload_kind(top)
    index = segment_index(top, pod)
    if entry is None or index is None:
        return None
    if entry.segmented_role is not None:
        if role != entry.segmented_role:
            return None
        backend = _segmenting_backend(pod, settings)
        if backend is None:
            return None
        written = segmented_role(top_obj) if top_obj is not None else None
        template = written.template if written is not None else None
        size, _, _ = backend.segment_size([pod, *([template] if template is not None else [])])
        return leaf_name(role, index // size) if size is not None else None
    if entry.replicas is not None and top_obj is not None and not whole_workload_tree(top_obj, settings):
        # (a lone LWS's one group over all its replicas has a leaf per replica, not segments)
        shape = lws_segments(top_obj, settings)
        if shape is None or (not shape.split and pinned_min_member(top_obj, settings)[0] is not None):
            return None  # (a group pinned whole lists no leader and workers)
        return shape.leaf_of(index)
    return None


@dataclass(frozen=True)
class ReplicaSegments:
    """One multi-pod replica split into segments (an LWS group under KAI's segment size)."""

    subgroups: tuple[Subgroup, ...]
    size: int  # pods per segment
    pods: int  # pods per replica
    leader_excluded: bool
    #: False: not split into segments, the replica's leader and its workers only (KAI's
    #: ``leader`` and ``workers`` subgroups of an LWS group)
    split: bool = True

    def segment_of(self, index: int) -> int:
        """KAI's segment index of pod ``index`` (0: the leader, always in the first)."""
        if index <= 0:
            return 0
        if (self.pods - 1) % self.size == 0:  # the leader is the first segment's extra pod
            return (index - 1) // self.size
        return index // self.size

    def pods_in(self, segment: int) -> int:
        """How many of the replica's pods segment ``segment`` holds (the leader counted in the first)."""
        if (self.pods - 1) % self.size == 0:  # pods 1.., shifted by the leader
            first, end = segment * self.size + 1, min((segment + 1) * self.size + 1, self.pods)
            return max(end - first, 0) + (1 if segment == 0 else 0)
        return max(min((segment + 1) * self.size, self.pods) - segment * self.size, 0)

    def leaf_of(self, index: int) -> str:
        if index == 0:
            return LEADER
        segment = self.segment_of(index)
        if segment == 0 and not self.leader_excluded:
            return WORKERS
        return f"{SEGMENT}-{segment}"


LEADER, WORKERS, SEGMENT = "leader", "workers", "segment"  # KAI's names in an LWS replica's group


def lws_segments(workload: Any, settings: Settings = DEFAULT) -> ReplicaSegments | None:
    """The subgroups of one replica's gang of an LWS split into segments, as KAI's own
    pod-grouper writes them (``lws_grouper.go``): the segment size from
    ``subGroupPolicy.subGroupSize``, else the scheduler's annotation on the LWS, then on its
    worker template; segments ``segment-<i>`` of that many pods (the last the rest);
    ``LeaderWorker``: ``segment-0`` a parent of ``leader`` (1) and ``workers`` (its other
    pods), ``LeaderExcluded``: ``leader`` a subgroup of its own; without segments ``leader`` (1) and
    ``workers`` (the rest: ``split`` False). None for another workload or scheduler, or
    with a size KAI refuses (:func:`role_problems` says why)."""
    shape, _problem = _lws_segments(workload, settings)
    return shape


def _lws_segments(workload: Any, settings: Settings) -> tuple[ReplicaSegments | None, str | None]:
    unit = replica_units(workload)
    templates = dict(pod_templates(workload))
    worker = templates.get("spec.leaderWorkerTemplate.workerTemplate")
    if unit is None or worker is None:
        return None, None
    backend = _segmenting_backend(worker, settings)
    if backend is None:
        return None, None
    written, policy = lws_subgroup_policy(workload)
    if written is not None:
        size, where, problem = written, f"subGroupPolicy.subGroupSize {written}", None
    else:
        size, where, problem = backend.segment_size([workload, worker])
    if size is None:
        return (None, problem) if problem else (_leader_and_workers(unit.pods), None)
    pods = unit.pods
    if size <= 1 or size > pods:
        return None, (f"{kind_name(workload)}: {where} is not above 1 and at most leaderWorkerTemplate.size {pods}: "
                      f"KAI's own pod-grouper refuses it; podgang gives its replicas no segments")
    excluded = policy == LWS_LEADER_EXCLUDED
    if excluded and (pods - 1) % size:
        return None, (f"{kind_name(workload)}: subGroupPolicyType {LWS_LEADER_EXCLUDED} needs size - 1 ({pods - 1}) "
                      f"divisible by the segment size {size}: KAI's own pod-grouper refuses it; podgang gives its "
                      f"replicas no segments")
    shape = ReplicaSegments((), size, pods, excluded)
    count = shape.segment_of(pods - 1) + 1
    if count > MAX_SEGMENTS:
        return None, f"{kind_name(workload)}: {where} makes {count} segments, more than the {MAX_SEGMENTS} KAI allows"
    topology = backend.segment_topology([worker], workload)
    members = [shape.pods_in(i) for i in range(count)]
    leaves: list[Subgroup] = []
    if excluded:
        members[0] -= 1  # the leader is a subgroup of its own
        leaves.append(Subgroup(LEADER, 1, "the leader (subGroupPolicyType LeaderExcluded)"))
    for i in range(count):
        why = f"segment {i} of {where}"
        if i == 0 and not excluded:
            leaves.append(Subgroup(f"{SEGMENT}-0", 2, f"{why}: the leader and its first workers",
                                   of_subgroups=True, counts="parts", topology=topology))
            leaves.append(Subgroup(LEADER, 1, "the leader", parent=f"{SEGMENT}-0"))
            leaves.append(Subgroup(WORKERS, members[0] - 1, f"the workers of {SEGMENT}-0", parent=f"{SEGMENT}-0"))
        else:
            leaves.append(Subgroup(f"{SEGMENT}-{i}", members[i], why, topology=topology))
    return replace(shape, subgroups=tuple(leaves)), None


def _leader_and_workers(pods: int) -> ReplicaSegments:
    """One LWS replica's gang not split into segments, as KAI's own pod-grouper writes it: a
    subgroup ``leader`` (its pod 0) and ``workers`` (the other ``pods - 1``, when there are any)."""
    parts = (Subgroup(LEADER, 1, "the leader (worker index 0)"),
             *((Subgroup(WORKERS, pods - 1, f"the group's other {pods - 1} pod{'' if pods == 2 else 's'}"),)
               if pods > 1 else ()))
    return ReplicaSegments(parts, pods, pods, False, split=False)


def _role_parts(workload: Any, settings: Settings) -> tuple[Subgroup, ...]:
    """The roles of a workload's own gang (not those in a hand-made group), each at its minimum."""
    found = []
    backend = workload_backend(workload, settings)
    elsewhere = roles_in_hand_made_group(workload, settings)
    entry = workload_kind(workload)
    for role in roles(workload):
        if role.name in elsewhere:
            continue
        value, _problem = min_available(role.template, settings)
        own, why = backend.role_pin(role) if backend is not None else (None, "")
        if value is not None:
            part = Subgroup(role.name, value, f"{settings.min_available_annotation} on {role.path}", True)
        elif own is not None:  # the scheduler's own annotation (KAI's batch-min-member on a replicated job)
            part = Subgroup(role.name, own, why, True)
        else:
            part = Subgroup(role.name, role.size, role.reason)
        placed = _role_topology(entry is not None and entry.placed_roles, role, settings)[0]
        found.append(replace(part, topology=placed) if placed else part)
    return tuple(found)


def _role_topology(placed: bool, role: Role, settings: Settings) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """Where a role's own pod template asks its scheduler to place it together (a Ray group's
    topology, for a scheduler that holds trees), and what is wrong with that."""
    backend = _segmenting_backend(role.template, settings) if placed else None
    return backend.role_topology(role.template) if backend is not None else ((), None)


def lent_metadata(workload: Any, owner: Any) -> Any:
    """``workload`` as a gang's settings are read from it: when its owner is a kind that
    lends its metadata (a TrainJob, to its JobSet — as KAI's pod-grouper, which skips the
    TrainJob, copies them) or a kind podgang does not follow (an Argo Workflow: KAI's grouper
    takes it for the top owner and reads it), the owner's labels and annotations where it has
    none of its own."""
    entry = workload_kind(owner)
    if entry is not None and not entry.lends_metadata or not metadata(owner):
        return workload
    md = dict(metadata(workload))
    for section in ("labels", "annotations"):
        merged = {**_dict(metadata(owner).get(section)), **_dict(md.get(section))}
        if merged:
            md[section] = merged
    return {**_dict(workload), "metadata": md}


def minimum_pods(workload: Any, size: int, subgroups: Sequence[Subgroup] = (),
                 settings: Settings = DEFAULT, group: str | None = None) -> tuple[tuple[int, Any], ...] | None:
    """The pods a workload's gang of ``size`` needs at least, as (how many, pod template)
    pairs — what its minimum resources are summed from: each role at its subgroup's
    minimum (a staged kind's whole run: the driver *and* the executors it will make, as
    spark-operator reserves them), else ``size`` pods of its one template. None when that
    cannot be told: templates that request differently and no roles to tell their counts
    (a LeaderWorkerSet's leader and workers), or a size pinned across roles."""
    by_name = {s.name: s.min_member for s in subgroups}
    parts = whole_roles(workload)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere:  # the roles of this gang: those that name ``group``, else those that name none
        parts = [r for r in parts if elsewhere.get(r.name) == group]
        return tuple((by_name.get(r.name, r.size), r.template) for r in parts if by_name.get(r.name, r.size) > 0)
    if len(parts) == 1:
        return ((size, parts[0].template),)
    if parts and (by_name or sum(r.size for r in roles(workload)) == size):  # else a pin across the roles
        return tuple((by_name.get(r.name, r.size), r.template) for r in parts)
    templates = [template for _, template in pod_templates(workload)]
    if not templates:
        return None
    requests = quantities.pod_requests(templates[0])
    if any(quantities.pod_requests(t) != requests for t in templates[1:]):
        return None
    return ((size, templates[0]),)


def role_problems(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """A malformed ``podgang.io/min-available`` on a role's pod template."""
    out = []
    for role in roles(workload):
        problem = min_available(role.template, settings)[1]
        if problem:
            out.append(f"{kind_name(workload)} {role.path}: {problem.split(': ', 1)[-1]}")
        entry = workload_kind(workload)
        placed = _role_topology(entry is not None and entry.placed_roles, role, settings)[1]
        if placed:
            out.append(f"{kind_name(workload)} {role.path}: {placed}")
        segments = role_segments(workload, role, Subgroup(role.name, role.size), settings)[1]
        if segments:
            out.append(f"{kind_name(workload)} {role.path}: {segments}")
        if not _role_name_ok(role.name):
            out.append(f"{kind_name(workload)}: {_q(clip(role.name))} cannot name a subgroup (a DNS label: lower-case "
                       f"letters, digits and '-', at most {MAX_SUBGROUP_NAME} characters): the gang has no subgroups, "
                       f"only its summed minimum")
    entry = workload_kind(workload)
    capped = entry.minimum_problem(workload) if entry is not None else None
    if capped:  # a minimum above the workload's pods, capped at them
        out.append(f"{kind_name(workload)}: {capped}")
    replica_segments = _lws_segments(workload, settings)[1]
    if replica_segments:
        out.append(replica_segments)
    return tuple(out)
