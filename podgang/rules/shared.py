"""The parts of a hand-made group several workloads share, and the roles a user declares it needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from podgang.backends.base import Subgroup
from podgang.kinds import desired_size
from podgang.objects import annotations, clip, kind_name, metadata
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.membership import workload_subgroup
from podgang.rules.names import _DNS_LABEL, MAX_SUBGROUP_NAME
from podgang.rules.pins import min_available
from podgang.rules.results import MinMember
from podgang.rules.sizes import subgroup_min_member
from podgang.rules.trees import replica_tree


def shared_subgroups(
    workloads: Iterable[Any],
    standalone: Mapping[str, int] | None = None,
    settings: Settings = DEFAULT,
    holds_trees: bool = True,
    present: Mapping[str, Mapping[int, tuple[int, int]]] | None = None,
    awaited: Sequence[Subgroup] = (),
) -> tuple[tuple[Subgroup, ...], tuple[str, ...]]:
    """The subgroups of a hand-made group the ``workloads`` name, and what a user
    should fix; none unless there are several parts or a workload of multi-pod replicas.
    Each workload is one subgroup (named after it, or what its pod template names); one of
    multi-pod replicas (an LWS), where the scheduler ``holds_trees``, is a parent needing
    its minimum of complete replicas with a leaf per replica (:func:`replica_tree`), else
    one flat part at that many replicas' pods; ``standalone``: subgroup name -> the
    standalone pods in it; ``awaited``: the parts of required roles no one fills yet
    (:func:`required_roles`).
    Two workloads landing in one subgroup, or a name that cannot be a subgroup's,
    is a problem, and then there are no subgroups (the summed minimum still holds)."""
    found: dict[str, Subgroup] = {}
    owners: dict[str, list[str]] = {}
    problems = []
    trees: dict[str, tuple[Subgroup, ...]] = {}
    for workload in sorted(workloads, key=kind_name):
        name = workload_subgroup(workload, settings)
        own = subgroup_min_member(workload, settings)
        owners.setdefault(name, []).append(kind_name(workload))
        found[name] = Subgroup(name, own.value, own.reason, own.pinned)
        tree = replica_tree(workload, settings, None if present is None else
                            present.get(str(metadata(workload).get("name")), {})) if holds_trees else ()
        if tree:
            trees[name] = tree
            found[name] = tree[0]
        problem = min_available(workload, settings)[1]
        if problem:
            problems.append(problem)
    for name, count in sorted((standalone or {}).items()):
        if count > 0:
            owners.setdefault(name, []).append(f"{count} standalone pod{'s' if count != 1 else ''}")
            found[name] = Subgroup(name, count, f"{count} standalone pod{'s' if count != 1 else ''}")
    for part in awaited:
        owners.setdefault(part.name, []).append(settings.required_roles_annotation)
        found[part.name] = part
    if sum(map(len, owners.values())) < 2 and not trees:  # one part is the whole gang: as it always was
        return (), tuple(problems)
    broken = []
    for name, who in sorted(owners.items()):
        if len(who) > 1:
            broken.append(f"subgroup {_q(name)} is claimed by {', '.join(who)}: give each its own "
                          f"subgroup name in its pod template")
        elif len(name) > MAX_SUBGROUP_NAME or not _DNS_LABEL.fullmatch(name) or any(
                leaf.name in owners for leaf in trees.get(name, ())[1:]):
            broken.append(f"{who[0]}: {_q(clip(name))} cannot name a subgroup (a DNS label: lower-case letters, "
                          f"digits and '-', at most {MAX_SUBGROUP_NAME} characters): set a subgroup name in its "
                          f"pod template")
    if broken:
        return (), (*problems, *(f"{b}; the group has no subgroups until then" for b in broken))
    return tuple(part for n in sorted(found) for part in trees.get(n, (found[n],))), tuple(problems)


@dataclass(frozen=True)
class RequiredRoles:
    """What ``podgang.io/required-roles`` on a hand-made group asks of its gang: the roles
    declared, a part for each no workload fills yet (:func:`required_roles`), what a user
    should fix and what they might add."""

    declared: tuple[str, ...] = ()
    #: one part per declared role no workload (nor standalone pod) fills yet, at minimum 1: the
    #: gang needs it, so nothing is placed before its pods come
    awaited: tuple[Subgroup, ...] = ()
    problems: tuple[str, ...] = ()
    #: the annotation advised: several workloads share a group that declares no role
    advice: tuple[str, ...] = ()

    @property
    def awaited_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.awaited)


def declared_roles(podgroup: Any, settings: Settings = DEFAULT) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``podgang.io/required-roles`` on a group, ``"prefill,decode"``: the role names, in
    order, each once, and a problem per name that cannot be a subgroup's (ignored)."""
    raw = annotations(podgroup).get(settings.required_roles_annotation)
    if not isinstance(raw, str):
        return (), ()
    names, problems = [], []
    for name in (n.strip() for n in raw.split(",")):
        if not name or name in names:
            continue
        if len(name) > MAX_SUBGROUP_NAME or not _DNS_LABEL.fullmatch(name):
            problems.append(f"{settings.required_roles_annotation} on {kind_name(podgroup)}: {_q(clip(name))} is "
                            f"ignored: a role is a subgroup's name (a DNS label: lower-case letters, digits and '-', "
                            f"at most {MAX_SUBGROUP_NAME} characters)")
            continue
        names.append(name)
    return tuple(names), tuple(problems)


def required_roles(podgroup: Any, workloads: Sequence[Any], standalone: Mapping[str, int] | None = None,
                   settings: Settings = DEFAULT) -> RequiredRoles:
    """A hand-made group's required roles (seed 004: "at least one prefill AND one decode,
    whatever order they come in"). A role is the subgroup podgang gives a workload
    (:func:`workload_subgroup`) or standalone pods; a declared role no one fills yet is a
    part of the gang at minimum 1 — counted by the root's minimum of subgroups in a tree,
    by ``minMember`` in a flat list or where the scheduler has no subgroups — so that no pod
    is placed before its pods come; once a workload fills it, that workload's own part
    replaces it. Without the annotation, a group several workloads share is advised to
    declare it: a role whose pods come last may find the room taken."""
    declared, problems = declared_roles(podgroup, settings)
    key = settings.required_roles_annotation
    filled = {workload_subgroup(w, settings) for w in workloads} | {
        name for name, count in (standalone or {}).items() if count > 0}
    if not declared:
        if len(filled) < 2 or problems:
            return RequiredRoles(problems=problems)
        roles_now = ",".join(sorted(filled))
        return RequiredRoles(advice=(
            f"{len(filled)} workloads share this group ({', '.join(sorted(filled))}) and it declares no {key}: "
            f"if each is needed, one whose pods come after the others' may find their room taken and never be "
            f"placed; declare them: {key}: {_q(roles_now)}",))
    awaited = tuple(Subgroup(role, 1, f"required by {key}; no workload fills it yet") for role in declared
                    if role not in filled)
    if awaited:
        names = ", ".join(s.name for s in awaited)
        problems += (f"{key} on {kind_name(podgroup)} requires role{'s' if len(awaited) > 1 else ''} {names}, which "
                     f"no workload fills yet: none of the gang's pods is placed until {names} ha"
                     f"{'ve' if len(awaited) > 1 else 's'} pods",)
    return RequiredRoles(declared, awaited, problems)


def required_roles_warning(podgroup: Any, name: str, settings: Settings = DEFAULT) -> str | None:
    """What a pod joining hand-made group ``name`` is told of the roles it declares: those the
    grouper last found no workload fills (``podgang.io/awaited-roles``, its record). None:
    nothing to say. (The annotation is advised by ``podgang plan`` and ``podgang status``, not
    here: by the time a group lists several parts they have all come, and every pod of every
    shared group would hear it.)"""
    if not declared_roles(podgroup, settings)[0]:
        return None
    awaited = [r for r in str(annotations(podgroup).get(settings.awaited_roles_annotation) or "").split(",") if r]
    if not awaited:
        return None
    names = ", ".join(awaited)
    return (f"PodGroup {name} requires role{'s' if len(awaited) > 1 else ''} {clip(names)} "
            f"({settings.required_roles_annotation}), which no workload filled when podgang last looked: none of "
            f"its pods is placed until {'each has' if len(awaited) > 1 else 'it has'} pods")


def with_awaited(mm: MinMember, required: RequiredRoles, min_subgroup: int | None, workloads: Sequence[Any] = (),
                 standalone: int = 0, parts_told: bool = True) -> MinMember:
    """A flat gang's minimum with its awaited roles counted, 1 each (a tree counts them
    already: each is a part its root needs); a pinned minimum stays as pinned. Where the
    scheduler cannot tell the parts apart (``parts_told`` False: no subgroups, as on
    coscheduling or native gangs) the known parts' pods beyond their minimums would stand in
    for the awaited role: the gang then needs every pod the known parts will have, and one
    more per awaited role."""
    if not required.awaited or min_subgroup is not None or mm.pinned:
        return mm
    extra = " + ".join(f"{s.name} 1 (required, no workload yet)" for s in required.awaited)
    if parts_told:
        return MinMember(mm.value + len(required.awaited), f"{mm.reason} + {extra}")
    known = max(sum(desired_size(w)[0] for w in workloads) + standalone, mm.value)
    return MinMember(known + len(required.awaited), f"every pod of its workloads {known} + {extra}: the scheduler "
                                                    f"cannot tell its parts apart")
