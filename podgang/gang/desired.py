"""What each PodGroup should be, computed purely from the cache through the rules:
:func:`desired_group` answers "what should ``namespace/group`` be?" — its kind of group,
owner, minMember and why, the workloads and pods behind it, its subgroups and settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from podgang import feasibility, kinds, rules
from podgang.backends import Backend
from podgang.backends.base import ClusterFacts, GangSource, min_pods
from podgang.objects import POD, OwnerRef, clip, is_active, is_terminating, quoted
from podgang.rules import HAND_MADE, OWNED, OWNER_LESS, MinMember
from podgang.settings import Settings

from podgang.gang.stale import ReplicaCount
from podgang.gang.cache import Cache
from podgang.gang.slim import (SIZE_WRITERS, Obj, display_name, key_of, pod_ref, split_key, template_backend,
                               workload_ref)


@dataclass(frozen=True)
class Desired:
    """What one PodGroup should be."""

    namespace: str
    name: str
    source: str | None  # rules.OWNED | OWNER_LESS | HAND_MADE | None (nothing references it)
    min_member: MinMember | None = None  # None: podgang leaves the size alone
    owner: OwnerRef | None = None  # the ownerReference a podgang group carries
    may_create: bool = False  # podgang creates it when missing (never a hand-made group)
    workloads: tuple[Obj, ...] = ()  # the workloads behind the group
    members: tuple[Obj, ...] = ()  # the pods that name the group
    contributions: tuple[tuple[str, int], ...] = ()  # ("deployment model-1", 2) ...
    problems: tuple[str, ...] = ()  # what a user should fix (Warning events)
    pinned: frozenset[str] = frozenset()  # contributions fixed by podgang.io/min-member on the workload
    pending: str | None = None  # cannot decide yet (an owner is not in the cache): why
    backend: Backend | None = None  # whose PodGroup it is (None: nothing says)
    subgroups: tuple[rules.Subgroup, ...] = ()  # a hand-made group's parts, one per workload
    #: a tree's root: how many of its top subgroups the gang needs (KAI's minSubGroup); None: flat
    min_subgroup: int | None = None
    #: a hand-made group holding a tree its user wrote: podgang writes none of it (why, for plan)
    users_tree: str | None = None
    #: the scheduler's own settings for a group podgang makes (its backend's gang_options)
    options: Mapping[str, Any] = field(default_factory=dict)
    #: the resources the gang needs at least, for a scheduler that reads them; None: not known
    min_resources: Mapping[str, str] | None = None
    #: why its scheduler will never place it as the cluster is (podgang.feasibility); empty: nothing says so
    verdicts: tuple[feasibility.Verdict, ...] = ()
    #: why the workload's operator makes its gang's PodGroup itself (its own gang integration):
    #: podgang makes none for it and leaves that one's size (None: not so)
    operator: str | None = None
    #: what podgang assumed of a gang whose top owner is of a kind it does not know (that its
    #: pods need not run together) and how to pin it: said once (a Normal event), never guessed silently
    assumed: str | None = None
    #: a hand-made group's: whose number its written minMember is, and on what evidence
    size_rule: rules.SizeRule | None = None
    #: what a user might add, not fix (``podgang plan`` and ``podgang status`` say it; no event)
    advice: tuple[str, ...] = ()
    #: the owners a gang's settings are read from when no workload is behind it (a top owner of
    #: a kind podgang does not follow, read for its metadata), nearest first
    owners: tuple[Obj, ...] = ()
    #: a hand-made group's declared roles no workload fills yet, recorded on it for the webhook
    #: (``podgang.io/awaited-roles``); None: it declares none
    awaited_roles: tuple[str, ...] | None = None
    #: a live group the scheduler's own pod-grouper made for this gang (KAI's, under the name podgang
    #: gives it), which podgang takes over rather than making a second one: who made it; None: not so
    adopted: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _md(obj: Any) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def is_managed(podgroup: Any, settings: Settings) -> bool:
    return (_md(podgroup).get("labels") or {}).get(settings.managed_by_label) == settings.managed_by_value


MANAGERS_NAMED = 3  # other writers named in one message; the rest are counted


MANAGER_CHARS = 48  # of one manager's name (the apiserver allows 128)


def size_writers(podgroup: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The other writers of a podgang-made group's size fields the Slimmer found in its
    managedFields: ``(manager, ("spec.minMember", …))``; empty when none."""
    return _md(podgroup).get(SIZE_WRITERS) or ()


def changed_by_others(backend: Backend | None, podgroup: Any, settings: Settings) -> str | None:
    """What to tell the user when a field manager other than podgang owns the size or
    subgroup fields of a group podgang made, or None. podgang writes them back, so the
    two fight over the gang's size: the writer is named, with what to do."""
    writers = size_writers(podgroup) if podgroup is not None and is_managed(podgroup, settings) else ()
    if not writers:
        return None
    named = "; ".join(f"{quoted(clip(manager, MANAGER_CHARS))} ({', '.join(fields)})"
                      for manager, fields in writers[:MANAGERS_NAMED])
    if len(writers) > MANAGERS_NAMED:
        named += f"; and {len(writers) - MANAGERS_NAMED} more"
    kind = backend.podgroup.kind if backend is not None else "PodGroup"
    text = (f"another field manager wrote the size of {kind} {_md(podgroup).get('name')}, which podgang made: "
            f"{named}. podgang sizes it from the workload and writes it back, so the two fight: stop that writer "
            f"(to choose the size, set {settings.min_member_annotation} on the workload)")
    hint = backend.other_writer_hint if backend is not None else ""
    return f"{text}. {hint}" if hint else text


def natural_gang(cache: Cache, pod: Obj) -> rules.Gang | rules.Denial | None:
    """The gang the rules give a pod from its owners alone (ignoring the group it
    names), or None while an owner is missing from the cache."""
    chain, complete = cache.owner_chain(pod)
    if not complete:
        return None
    return rules.gang_for_pod(rules.without_membership(pod, cache.settings), chain, settings=cache.settings)


def pod_gang(cache: Cache, pod: Obj) -> rules.Gang | rules.Denial | None:
    """The gang a pod joins per spec §2 (its own keys first), or None while an
    owner is missing from the cache. Owner-less pods are named (the grouper only
    sees created pods), so no random suffix is ever needed."""
    chain, complete = cache.owner_chain(pod)
    if not complete:
        return None
    return rules.gang_for_pod(pod, chain, settings=cache.settings)


def _live(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not is_terminating(p)]


def _standalone(pods: list[Obj]) -> list[Obj]:
    return [p for p in _live(pods) if rules.controller_ref(p) is None]


def _named_from_generate_name(pod: Obj, name: str, settings: Settings) -> bool:
    """Whether ``name`` is what the webhook gave an owner-less pod admitted with only
    ``generateName``: ``pg-<generateName><5 random characters>``. When the webhook
    could not create that group (an API error never denies a pod), the grouper does."""
    generate = _md(pod).get("generateName")
    if not isinstance(generate, str) or not generate or len(name) < 5:
        return False
    return rules.group_name(generate, name[-5:], settings) == name


def group_backend(cache: Cache, group_key: str) -> Backend | None:
    """The backend group ``group_key`` belongs to: its workloads' pod templates',
    else its pods', else the backend whose PodGroup of that name exists."""
    owner = cache.group_owner_workload(group_key)
    for workload in [owner] if owner is not None else cache.template_workloads(group_key):
        backend = template_backend(workload, cache.settings)
        if backend is not None:
            return backend
    for pod in cache.members(group_key):
        backend = cache.settings.backend_for(pod)
        if backend is not None:
            return backend
    return cache.podgroups.backend_of(group_key)


def desired_group(cache: Cache, group_key: str) -> Desired:
    """What PodGroup ``group_key`` ("namespace/name") should be, from the cache."""
    backend = group_backend(cache, group_key)
    desired = _desired_group(cache, group_key, backend, cache.podgroups.of(backend, group_key))
    if desired.subgroups and backend is not None and backend.subgroup_key is None:
        desired = replace(desired, problems=(*desired.problems, subgroups_unexpressed(desired, backend)))
    options: dict[str, Any] = {}
    verdicts: tuple[feasibility.Verdict, ...] = ()
    minimum = minimum_pods(desired, cache.settings)
    # a hand-made group's settings are the user's; with neither pods nor workloads yet (a
    # group the webhook just made for a pod not seen yet) there is nothing to read them from
    if backend is not None and desired.source != HAND_MADE and (desired.members or desired.workloads):
        options = gang_options(backend, desired.members,
                               lent_metadata(cache, desired.workloads) or desired.owners, cache.facts_for(backend))
    actual = cache.podgroups.of(backend, group_key) if backend is not None else None
    if backend is not None and desired.source is not None and (desired.members or desired.workloads) \
            and not (desired.min_member is not None and desired.min_member.idle):
        least = None
        size = desired.min_member.value if desired.min_member is not None else (
            backend.min_member(actual) if actual is not None else None)
        if minimum is None and not desired.workloads and size:
            # standalone pods only (seed 003's shape): the least their minimum counts against the queue
            least = feasibility.least_demand(backend, _live(list(desired.members)), size, cache.facts_for(backend))
        verdicts = feasibility.never_placed(backend, judged_settings(backend, options, actual), minimum,
                                            cache.facts_for(backend), least=least)
    min_resources = backend.min_resources_for(minimum) if backend else None
    return replace(desired, backend=backend, options=options, min_resources=min_resources, verdicts=verdicts,
                   adopted=peer_made(backend, desired, actual, cache.settings))


def peer_made(backend: Backend | None, desired: Desired, actual: Obj | None, settings: Settings) -> str | None:
    """Who made ``actual``, when it is the scheduler's own pod-grouper's group for the gang podgang
    gives the same name (a cluster switching from KAI's grouper): podgang adopts it. None otherwise."""
    if (backend is None or backend.peer_grouper is None or actual is None or desired.owner is None
            or desired.source not in (OWNED, OWNER_LESS) or is_managed(actual, settings)
            or _md(actual).get("deletionTimestamp")):
        return None
    return backend.peer_grouper if backend.made_by_peer_grouper(actual, desired.owner.uid) else None


def judged_settings(backend: Backend, options: Mapping[str, Any], actual: Any) -> dict[str, Any]:
    """The settings the scheduler reads for a gang: what podgang would write (``options``),
    overridden by what its live PodGroup holds (a KAI queue is never moved; a hand-made
    group's settings are the user's)."""
    live = backend.live_settings(actual) if actual is not None else {}
    judged = {**options, **live}
    if live.get("queue") is not None and live.get("queue") != options.get("queue"):
        origins = tuple(o for o in options.get("origins") or () if o[0] != "queue")
        judged["origins"] = (*origins, ("queue", "spec.queue of its PodGroup"))
    return judged


def minimum_pods(desired: Desired, settings: Settings) -> tuple[tuple[int, Any], ...] | None:
    """The pods the gang needs at least, as (how many, pod template), from its workloads:
    its own workload's roles, or each workload of a shared group at its own minimum. None
    when that cannot be told from templates: standalone pods share the group (the cache
    keeps no pod's requests), the size is pinned across parts, or no workload is known. A
    pod users create directly is its own gang of one, and the cache keeps its requests."""
    if desired.source == OWNER_LESS:
        pods = _live(list(desired.members))
        return ((1, pods[0]),) if len(pods) == 1 else None
    if desired.min_member is None or not desired.workloads:
        return None
    if desired.source == OWNED:
        return rules.minimum_pods(desired.workloads[0], desired.min_member.value, desired.subgroups, settings)
    if desired.source != HAND_MADE or _standalone(list(desired.members)):
        return None
    if sum(value for _, value in desired.contributions) != desired.min_member.value:
        return None  # podgang.io/min-member on the group pins it: which pods it counts is not said
    parts: list[tuple[int, Any]] = []
    for workload, (_, own) in zip(desired.workloads, desired.contributions):
        found = rules.minimum_pods(workload, own, (), settings, desired.name)
        if found is None:
            return None
        parts += found
    return tuple(parts)


def subgroups_unexpressed(desired: Desired, backend: Backend) -> str:
    """What a user is told when the scheduler has no subgroups: only the sum holds."""
    parts = ", ".join(f"{s.name} {s.min_member}" for s in desired.subgroups)
    total = desired.min_member.value if desired.min_member is not None else "?"
    return (f"the {backend.name} backend cannot express subgroups ({parts}): the gang only needs "
            f"minMember {total} pods in all, whichever part they belong to")


def pod_subgroup(cache: Cache, pod: Obj) -> str | None:
    """The subgroup a member of a hand-made group counts toward (the one it names,
    else its top workload's), None while an owner is missing from the cache."""
    gang = pod_gang(cache, pod)
    return gang.subgroup if isinstance(gang, rules.Gang) else None


def pod_leaf(cache: Cache, pod: Obj) -> str | None:
    """The leaf of the multi-pod replica a pod belongs to (``<role>-<index>``), None for any
    other pod or while an owner is missing from the cache."""
    if not kinds.carries_replica_label(pod):
        return None
    gang = pod_gang(cache, pod)
    return gang.subgroup if isinstance(gang, rules.Gang) and gang.leaf else None


def replica_counts(desired: Desired, active: Mapping[str | None, int], settings: Settings) -> list[ReplicaCount]:
    """Each multi-pod replica of a tree gang (a leaf needing pods, under its role or, for a
    lone LWS, directly under the group) with its active pods (``active``: by subgroup)."""
    if desired.min_subgroup is None:
        return []
    lone = desired.source == OWNED and not any(s.parent for s in desired.subgroups)
    role = rules.workload_subgroup(desired.workloads[0], settings) if lone and desired.workloads else ""
    return [ReplicaCount(s.name, s.parent or role, s.min_member, active.get(s.name, 0)) for s in desired.subgroups
            if not s.of_subgroups and (s.parent is not None or lone)]


def _desired_group(cache: Cache, group_key: str, backend: Backend | None, actual: Obj | None) -> Desired:
    settings = cache.settings
    namespace, name = split_key(group_key)
    # a pod whose owner is labelled podgang.io/skip is none of podgang's business, whatever
    # group it names (KAI's own pod-grouper gives it one): as the webhook decides
    members = cache.not_skipped(cache.members(group_key))

    # 1. A top workload owns it (spec §2.2), found from the workload itself.
    owner_workload = cache.group_owner_workload(group_key)
    if owner_workload is not None and not members:
        elsewhere = operator_named(cache, owner_workload, name)
        if elsewhere is not None:  # its operator's own gang: no second one (a group made before is retired)
            return Desired(namespace, name, None, workloads=(owner_workload,), operator=elsewhere)
    if owner_workload is not None:
        mm = rules.min_member_for(owner_workload, actual, settings, with_owners(cache, (owner_workload,))[1:],
                                  _live(members))
        subgroups, root = owned_parts(owner_workload, mm, backend, settings, replicas_present(cache, members))
        return Desired(
            namespace, name, OWNED, mm, workload_ref(owner_workload), True,
            workloads=(owner_workload,), members=tuple(members),
            contributions=((display_name(owner_workload), mm.value),),
            problems=(_pin_problems([actual, owner_workload], settings) + rules.role_problems(owner_workload, settings)
                      + rules.scheduler_pin_problems(owner_workload, settings)
                      + rules.tree_problems(owned_parts(owner_workload, mm, backend, settings)[0], root)
                      + tuple(p for p in (rules.replicas_not_held(owner_workload, settings),) if p)),
            subgroups=subgroups, min_subgroup=root,
        )

    # 2. Workloads name it in their pod templates: a hand-made group (§3 last row).
    hand = cache.template_workloads(group_key)
    # a group that declares its roles is a gang of those roles from the start, before any
    # workload fills one: nothing is placed until each can be (seed 004, whatever order they come in)
    if hand or (actual is not None and rules.declared_roles(actual, settings)[0]):
        standalone = _standalone(members)
        mm = rules.shared_min_member(hand, len(standalone), actual, settings)
        if not hand and not standalone and not mm.pinned:  # only its declared roles, each counted below
            mm = MinMember(0, "its declared roles, before any workload")
        contributions = []
        pinned = set()
        for w in hand:
            own = rules.subgroup_min_member(w, settings)
            contributions.append((display_name(w), own.value))
            if own.pinned:
                pinned.add(display_name(w))
        if standalone:
            contributions.append(("standalone pods", len(standalone)))
        by_subgroup: dict[str, int] = {}
        for pod in standalone:
            named = backend.subgroup_of(pod) if backend is not None else None
            by_subgroup[named or rules.STANDALONE] = by_subgroup.get(named or rules.STANDALONE, 0) + 1
        trees = backend is not None and backend.holds_trees
        required = rules.required_roles(actual, hand, by_subgroup, settings)  # seed 004: whatever order they come in
        # the tree as it will be (its minimum, what can never be met), and as the pods made so far allow
        whole, subgroup_problems = rules.shared_subgroups(hand, by_subgroup, settings, trees, awaited=required.awaited)
        subgroups = whole if not cache.pods_observed else rules.shared_subgroups(
            hand, by_subgroup, settings, trees, replicas_present(cache, members), required.awaited)[0]
        root = rules.root_min_subgroup(whole, rules.min_available(actual, settings)[0] if actual else None)
        problems = (_pin_problems([actual, *hand], settings) + subgroup_problems + rules.tree_problems(whole, root)
                    + required.problems)
        if root is not None and not mm.pinned:
            mm = MinMember(min_pods(whole, root), mm.reason)
        mm = rules.with_awaited(mm, required, root, hand, len(standalone),
                                backend is None or backend.subgroup_key is not None)
        if not trees and any(rules.replica_units(w) is not None for w in hand) and backend is not None:
            problems += (replicas_unexpressed(backend, hand, settings),)
        total = sum(value for _, value in contributions)
        # the user's own minimum below the total: theirs, whole (no subgroups) — but never over a
        # tree of complete replicas, counted in replicas (podgang.io/min-available), where a
        # written minMember is what KAI refuses beside minSubGroup
        rule = size_rule(backend, actual, mm, hand, settings) if root is None and not required.declared else None
        if rule is not None and not rule.follows:
            mm, subgroups = MinMember(rule.written, f"as written: {rule.written} (its members: {mm.reason}), "
                                                    f"neither raised nor following scales: {rule.why}", True), ()
        elif rule is not None and rule.first_look:
            mm = replace(mm, reason=f"{rule.why}; its members: {mm.reason}")
        # the gang the scheduler waits for is the size in force (a StatefulSet's own gang is
        # sized for OrderedReady by its kind: issue 18)
        in_force = (backend.min_member(actual) if backend is not None and actual is not None else None) or mm.value
        for w, (_, own) in zip(hand, contributions):
            ordered = rules.ordered_ready_problem(w, in_force, total - own)
            if ordered:
                problems += (ordered,)
        if actual is None:
            problems += (
                f"{_missing(cache, group_key, backend)}: "
                f"{', '.join(display_name(w) for w in hand)} name it in their pod templates and their pods "
                f"stay Pending until it exists; create it (podgang keeps its minMember at {mm.value})",
            )
        users = users_tree(backend, actual, settings)
        if users is not None:  # the user's tree: podgang writes none of it, and says what KAI would do
            problems += (users,) if users.startswith("KAI") else ()
        return Desired(
            namespace, name, HAND_MADE, None if users else mm, None, False,
            workloads=tuple(hand), members=tuple(members), contributions=tuple(contributions), problems=problems,
            pinned=frozenset(pinned), subgroups=() if users else subgroups, min_subgroup=None if users else root,
            users_tree=users, size_rule=None if users else rule, advice=required.advice,
            awaited_roles=None if users or not required.declared else required.awaited_names,
        )

    # 3. Only pods name it: what would the rules give them from their owners?
    live = _live(members) or members
    if not live:
        return Desired(namespace, name, None, members=tuple(members))
    probe = live[0]
    natural = natural_gang(cache, probe)
    if natural is None:
        return Desired(namespace, name, None, members=tuple(members),
                       pending=f"an owner of pod {_md(probe).get('name')} is not in the cache yet")
    podgangs = isinstance(natural, rules.Gang) and (
        natural.name == name or (actual is not None and is_managed(actual, settings))
        or (natural.source == OWNER_LESS and _named_from_generate_name(probe, name, settings))
    )
    if not podgangs or isinstance(natural, rules.Denial):
        # a hand-made group that only standalone pods (or pods whose workloads we
        # do not follow) name: the user's size stands; pods of a workload naming a group
        # podgang does not make: its operator's own (or a user's) gang
        operator = None
        if isinstance(natural, rules.Gang) and natural.top_owner is not None:
            top = natural.top_owner
            found = kinds.operator_gang(cache.by_uid.get(top.uid)) if top.uid in cache.by_uid else None
            entry = kinds.workload_kind(top)
            if found is not None:
                operator = found[1]
            elif entry is not None and entry.operator_gangs:  # LWS's gangSchedulingManagement, KubeRay's batch scheduler
                operator = (f"owned by the operator of {top.kind.lower()}/{top.name}: its own gang scheduling, "
                            f"turned on in the operator, made this group and names it on the pods")
            else:
                operator = (f"the pods of {top.kind.lower()}/{top.name} name it, not the group podgang would give "
                            f"them: their operator's own gang (or a user's)")
            operator += "; podgang makes no second one and leaves its size"
        problems: tuple[str, ...] = ()
        if actual is None:
            problems = (
                f"{_missing(cache, group_key, backend)}: pod {_md(probe).get('name')} names it "
                f"and stays Pending until it exists",
            )
        users = users_tree(backend, actual, settings)  # the user's tree is theirs, whoever names the group
        problems += (users,) if users is not None and users.startswith("KAI") else ()
        return Desired(namespace, name, HAND_MADE, None, None, False, members=tuple(members), problems=problems,
                       operator=operator, users_tree=users)
    assert isinstance(natural, rules.Gang)
    if natural.source == OWNER_LESS:
        mm = rules.min_member_for(probe, actual, settings)
        return Desired(
            namespace, name, OWNER_LESS, mm, pod_ref(probe), not is_terminating(probe),
            members=tuple(members), contributions=((display_name(probe), mm.value),),
            problems=_pin_problems([actual, probe], settings),
        )
    # owned by a top owner podgang does not derive from a workload (an unwatched
    # kind, a CronJob's Job run seen first through its pods, an LWS group)
    top = natural.owner
    assert top is not None
    top_obj = cache.owner_object(top.uid)
    if top_obj is None:
        top_obj = {"apiVersion": top.api_version, "kind": top.kind, "metadata": {"name": top.name, "uid": top.uid}}
    # its settings are read from its owners up to the top, whatever their kind (as KAI's grouper reads them)
    chain = cache.metadata_chain(probe)
    owners = tuple(chain[:next((i + 1 for i, o in enumerate(chain) if _md(o).get("uid") == top.uid), len(chain))])
    mm = rules.min_member_for(top_obj, actual, settings, with_owners(cache, (top_obj,))[1:], _live(members))
    workloads = (top_obj,) if top.uid in cache.by_uid else ()
    assumed = None if mm.pinned or kinds.workload_kind(top) is not None or top.kind == POD.kind else (
        f"podgang does not know the kind {clip(top.kind)} of {clip(f'{top.kind.lower()}/{top.name}')}, the top owner "
        f"of these pods: it assumed they need not run together (minMember {mm.value}); if N of them must, pin it "
        f"with {settings.min_member_annotation}=N on this PodGroup")
    return Desired(
        namespace, name, OWNED, mm, top, not is_terminating(probe),
        workloads=workloads, members=tuple(members), contributions=((display_name(top_obj), mm.value),),
        owners=owners if owners and _md(owners[-1]).get("uid") == top.uid else (),
        problems=_pin_problems([actual, top_obj], settings)
        + tuple(p for p in (rules.replicas_not_held(top_obj, settings),) if p), assumed=assumed,
        **dict(zip(("subgroups", "min_subgroup"), owned_parts(top_obj, mm, backend, settings,
                                                               replicas_present(cache, members)))),
    )


def operator_named(cache: Cache, workload: Obj, name: str) -> str | None:
    """Why ``workload``'s own group ``name`` is not its gang, or None: its live pods exist and
    every one names another PodGroup podgang does not manage — its operator's own gang
    integration, turned on in the operator (KubeRay's batch scheduler, LWS's
    gangSchedulingManagement), which the workload does not show."""
    entry = kinds.workload_kind(workload)
    if entry is None or not entry.operator_gangs:
        return None
    pods = [p for p in cache.pods_under(workload) if not is_terminating(p)]
    named = {rules.group_of(p, cache.settings) for p in pods}
    if not pods or None in named or named & set(cache.owned_group_names(workload)):
        return None  # none, or some in the groups podgang gives it (another LWS group's)
    namespace = _md(workload).get("namespace") or ""
    if any((g := cache.podgroups.of(cache.podgroups.backend_of(key_of(namespace, n)), key_of(namespace, n)))
           is not None and is_managed(g, cache.settings) for n in named if n):
        return None
    others = ", ".join(sorted(n for n in named if n))
    return (f"the pods of {display_name(workload)} name PodGroup {clip(others)}, their operator's own gang: "
            f"podgang makes no second one")


def size_rule(backend: Backend | None, actual: Obj | None, mm: MinMember, hand: Sequence[Obj],
              settings: Settings) -> rules.SizeRule | None:
    """Whose number a live hand-made group's minMember is (:func:`podgang.rules.hand_made_size_rule`):
    None where there is no number to judge (no group yet, or its size pinned)."""
    if backend is None or actual is None or mm.pinned:
        return None
    written = backend.min_member(actual)
    if written is None:
        return None
    return rules.hand_made_size_rule(actual, written, mm, hand, settings)


def _missing(cache: Cache, group_key: str, backend: Backend | None) -> str:
    """``PodGroup x not found in namespace ns``, as the backend spells its groups (a 1.35
    Workload that lacks the pod group a pod names)."""
    namespace, name = split_key(group_key)
    if backend is None:
        return f"PodGroup {name} not found in namespace {namespace}"
    return backend.missing_group(name, namespace, cache.podgroups.holder(backend, group_key))


def owned_subgroups(workload: Obj, mm: MinMember, settings: Settings) -> tuple[rules.Subgroup, ...]:
    """The subgroups of a workload's own gang, one per role (a PyTorchJob's master and
    workers); none when ``podgang.io/min-member`` pins the whole gang (the pin is the gang)
    — unless the scheduler splits a role into segments, which its pods are labelled with
    whatever the size (a pod naming a subgroup its group does not list is ignored)."""
    found = rules.role_subgroups(workload, settings)
    if mm.pinned and not any(s.parent for s in found):
        return ()
    return found


def replicas_present(cache: Cache, members: Any) -> dict[str, dict[int, tuple[int, int]]] | None:
    """Workload name -> replica index -> (its live pods, those bound), of its multi-pod
    replicas; None where the pods are not the cluster's (``podgang plan``: the whole tree)."""
    if not cache.pods_observed:
        return None
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for pod in _live(list(members)):
        found = kinds.replica_of(pod)
        if found is not None:
            live, placed = out.setdefault(found[1], {}).get(found[2], (0, 0))
            out[found[1]][found[2]] = (live + 1, placed + (1 if is_active(pod) else 0))
    return out


def owned_parts(workload: Obj, mm: MinMember, backend: Backend | None, settings: Settings,
                present: Mapping[str, Mapping[int, tuple[int, int]]] | None = None,
                ) -> tuple[tuple[rules.Subgroup, ...], int | None]:
    """A workload's own gang's subgroups and its root's minimum of them: a leaf per
    replica and N of them for a lone LWS asking for N complete replicas (where the
    scheduler holds trees), else one subgroup per role."""
    tree, root = rules.owned_tree(workload, settings, None if present is None else
                                  present.get(str(_md(workload).get("name")), {}))
    if tree and backend is not None and backend.holds_trees:
        return tree, root
    roles = rules.role_tree(workload, settings) if backend is not None and backend.holds_trees else ()
    if roles:  # a JobSet's replicated jobs: a parent each, a leaf per Job, every role made now required
        made = sum(1 for s in roles if s.parent is None)
        wanted = backend.parts_pin(workload)[0] if backend is not None else None  # KAI's batch-min-member
        return roles, rules.root_min_subgroup(roles, None if wanted is None else min(wanted, made))
    segments = rules.lws_segments(workload, settings)
    if segments is not None and not segments.split:  # one replica's leader and workers, as KAI's grouper writes them
        if mm.pinned:
            return (), None  # the pin is the gang
        # a LeaderReady group before its leader is placed: the leader alone (its workers are not made yet)
        return (segments.subgroups[:1] if mm.value < segments.pods else segments.subgroups), None
    if segments is not None:  # one replica's gang, split into segments as the scheduler's own grouper does
        return segments.subgroups, None
    return owned_subgroups(workload, mm, settings), None


def users_tree(backend: Backend | None, actual: Obj | None, settings: Settings) -> str | None:
    """What podgang says of a hand-made group holding a tree its user wrote (a root or a
    subgroup counting subgroups, not recorded as podgang's): it writes none of it —
    never a ``minMember`` beside a ``minSubGroup``, which KAI refuses. None for any other.
    Starts with "KAI" when the scheduler would evict the gang itself, misjudging it."""
    if backend is None or actual is None or not backend.is_users_tree(actual):
        return None
    if (_md(actual).get("annotations") or {}).get(settings.subgroups_annotation):
        return None  # podgang wrote it
    kept = "podgang keeps the subgroup tree its user wrote and changes none of its fields (no minMember, no subGroups)"
    evictor = backend.evicts_itself(actual)
    if evictor is None:
        return f"{kept}; podgang judges it stale by its pods and subgroups"
    return (f"KAI v0.17 judges a tree stale when any leaf is below its minMember, whatever minSubGroup says, "
            f"and evicts the whole gang — {evictor}; {kept}")


def replicas_unexpressed(backend: Backend, workloads: Any, settings: Settings) -> str:
    """What a user is told when the scheduler cannot count complete replicas."""
    named = ", ".join(display_name(w) for w in workloads if rules.replica_units(w) is not None)
    return (f"the {backend.name} backend cannot say \"complete replicas\" ({named}): each counts as its minimum "
            f"replicas' pods in all, from whichever replicas — a partly placed replica may hold pods that cannot "
            f"work (use KAI for whole replicas)")


def _pin_problems(objs: list[Any], settings: Settings) -> tuple[str, ...]:
    out = []
    for obj in objs:
        if obj is None:
            continue
        _, problem = rules.pinned_min_member(obj, settings)
        if problem:
            out.append(problem)
    return tuple(out)


def gang_options(backend: Backend, members: Any, workloads: Any,
                 facts: ClusterFacts = ClusterFacts()) -> dict[str, Any]:
    """The backend's own per-gang settings (a queue, a priority class, ...), read from
    the gang's pods, its workloads' pod templates and the workloads (the gang's top owner)."""
    templates = [template for w in workloads for _, template in kinds.pod_templates(w)]
    return backend.gang_options(GangSource(tuple(members), tuple(templates), tuple(workloads), facts))


def lent_metadata(cache: Cache, workloads: tuple[Obj, ...]) -> tuple[Obj, ...]:
    """The workloads with the labels and annotations their cached owner lends them (a
    TrainJob's, on the JobSet it makes): what the gang's scheduler settings are read from."""
    out = []
    for workload in workloads:
        ref = rules.controller_ref(workload)
        owner = cache.owner_object(ref.uid) if ref is not None and ref.uid else None
        out.append(rules.lent_metadata(workload, owner) if owner is not None else workload)
    return tuple(out)


def with_owners(cache: Cache, workloads: tuple[Obj, ...] | list[Obj]) -> list[Obj]:
    """The workloads, then the cached owners above them (a CronJob above its Job
    run), for per-workload settings such as the staleness grace period: the nearest
    object that sets one wins."""
    out = list(workloads)
    seen = {id(w) for w in out}
    for workload in workloads:
        obj: Any = workload
        for _ in range(4):
            ref = rules.controller_ref(obj)
            obj = cache.by_uid.get(ref.uid) if ref is not None and ref.uid else None
            if obj is None or obj.get("kind") != ref.kind or id(obj) in seen:
                break
            seen.add(id(obj))
            out.append(obj)
    return out
