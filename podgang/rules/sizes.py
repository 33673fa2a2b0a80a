"""How large a gang must be: a workload's own group, a hand-made group several workloads share,
and whose number a hand-made group's written minMember is.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from podgang.kinds import (
    desired_size,
    pod_templates,
    replica_stage,
    replica_units,
    roles,
    size_writes,
    stages,
    workload_kind,
)
from podgang.objects import annotations, clip, kind_name, metadata
from podgang.objects import as_dict as _dict
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.membership import roles_in_hand_made_group, workload_backend
from podgang.rules.owners import next_owner
from podgang.rules.pins import min_available, min_replicas, pinned_min_member
from podgang.rules.results import MinMember
from podgang.rules.roles import _role_parts
from podgang.rules.scope import scope_problem
from podgang.rules.trees import whole_workload_tree


def min_member_for(
    workload: Any, podgroup: Any = None, settings: Settings = DEFAULT, owners: Sequence[Any] = (),
    pods: Sequence[Any] | None = None,
) -> MinMember:
    """minMember of the group a workload owns (spec §3).

    ``podgang.io/min-member`` on the PodGroup, then on the workload, then on the
    objects above it (``owners``, nearest first: the CronJob above a Job run) pins it.
    ``pods``: the group's pods, for a kind that makes a replica group in stages (a
    LeaderReady LWS group is its leader alone until the leader is placed).
    A gang is never smaller than 1; a kind that is not a gang (a DaemonSet) is always 1.
    """
    entry = workload_kind(workload)
    if entry is not None and not entry.gang:
        return MinMember(1, f"{kind_name(workload)}: {desired_size(workload)[1]}")
    for source in (podgroup, workload, *owners):
        pinned, _problem = pinned_min_member(source, settings)
        if pinned is not None:
            return MinMember(pinned, f"pinned by {settings.min_member_annotation} on {kind_name(source)}", True)
    backend = workload_backend(workload, settings)
    if backend is not None:  # the scheduler's own size annotation (KAI's batch-min-member on a Job)
        value, why = backend.size_pin(workload)
        if value is not None:
            return MinMember(value, f"pinned by {why}", True)
    if whole_workload_tree(workload, settings):
        return subgroup_min_member(workload, settings)
    staged = replica_stage(workload, pods) if pods is not None else None
    if staged is not None:
        return MinMember(staged.size, f"{kind_name(workload)} {staged.reason}")
    parts = _role_parts(workload, settings)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere or any(s.pinned for s in parts):  # a role pinned or in a hand-made group: the sum of the others
        total = sum(s.min_member for s in parts)
        away = f"; {', '.join(sorted(elsewhere))} in hand-made PodGroup {_q(next(iter(elsewhere.values())))}" \
            if elsewhere else ""
        return MinMember(max(total, 1), f"{kind_name(workload)} " + (" + ".join(
            f"{s.name} {s.min_member}{' (pinned)' if s.pinned else ''}" for s in parts) or "no role of its own") + away)
    size, why = desired_size(workload)
    if size < 1:
        return MinMember(1, f"{kind_name(workload)} {why}; a gang is never smaller than 1", idle=True)
    return MinMember(size, f"{kind_name(workload)} {why}")


def staged_problem(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """What a user is told about a workload whose controller makes its pods in stages
    (an OrderedReady StatefulSet), or None: its gang counts only the stage it is in, and a
    ``podgang.io/min-member`` above that stage is a gang that never forms."""
    note = stages(workload)
    if note is None or next_owner(workload) is not None:  # an owned one is part of its owner's gang
        return None
    namespace = metadata(workload).get("namespace")
    if all(scope_problem(t, namespace, settings) for _, t in pod_templates(workload)):
        return None
    size, _ = desired_size(workload)
    pinned, _problem = pinned_min_member(workload, settings)
    if pinned is not None and pinned > size:
        return (f"{kind_name(workload)}: {settings.min_member_annotation}={pinned} waits for pods its controller "
                f"makes only in stages, a gang that never forms: {note}")
    return f"{kind_name(workload)} is not one gang (its gang counts {size}): {note}"


def shared_min_member(
    workloads: Iterable[Any],
    standalone_pods: int = 0,
    podgroup: Any = None,
    settings: Settings = DEFAULT,
) -> MinMember:
    """minMember of a hand-made group several workloads point at:
    Σ their desired sizes, plus the standalone pods labelled with it.
    """
    pinned, _problem = pinned_min_member(podgroup, settings)
    if pinned is not None:
        return MinMember(pinned, f"pinned by {settings.min_member_annotation} on {kind_name(podgroup)}", True)
    total, parts = 0, []
    for workload in sorted(workloads, key=kind_name):
        size = subgroup_min_member(workload, settings).value
        total += size
        parts.append(f"{kind_name(workload)} {size}")
    if standalone_pods:
        total += standalone_pods
        parts.append(f"{standalone_pods} standalone pod{'s' if standalone_pods != 1 else ''}")
    if not parts:
        return MinMember(1, "no workload or pod references it yet")
    reason = " + ".join(parts) + (f" = {total}" if len(parts) > 1 else "")
    if total < 1:
        return MinMember(1, f"{reason}; a gang is never smaller than 1")
    return MinMember(total, reason)


#: what a member's history says of its size since a group was made
SCALED_SINCE = "scaled"


NO_RECORD = "no record"


@dataclass(frozen=True)
class SizeRule:
    """Whose number a hand-made group's written minMember is: the total of its members that
    podgang keeps true (``follows``), or the user's elastic gang, kept as written. Decided
    once per group from evidence, and recorded on it."""

    #: the minMember written on the group
    written: int
    follows: bool
    #: the rule that decided and its evidence, in words (plan, status, the event)
    why: str
    #: decided at this look, nothing being recorded on the group yet (podgang's first look)
    first_look: bool = False


def hand_made_size_rule(group: Any, written: int, total: MinMember, members: Sequence[Any],
                        settings: Settings = DEFAULT) -> SizeRule:
    """The rule for a hand-made ``group`` written with ``written`` whose ``members``
    (the workloads naming it) total ``total``, not pinned:

    - at or above the total: followed (a gang larger than its pods never forms);
    - a number podgang recorded: followed at it (``podgang.io/followed-min-member``); another
      number written later below the total, or the elastic record
      (``podgang.io/elastic-min-member``): the user's elastic gang;
    - else, podgang's first look: 0 or 1 is a placeholder (a gang of 1 gangs nothing):
      followed; a member scaled after the group was made, or whose size has no dated
      record, makes the number an old total: followed; with no member scaled since, the
      number below the total is on purpose: the user's elastic gang (the scheduler-plugins
      demo, a group of 3 applied with a ReplicaSet of 6)."""
    notes = annotations(group)
    if written >= total.value:
        return SizeRule(written, True, "at its members' total" if written == total.value else
                        f"written {written}, over its members' {total.value}: a gang larger than its pods never forms")
    followed = notes.get(settings.followed_size_annotation)
    if followed == str(written):
        return SizeRule(written, True, f"followed since podgang found it at its members' total "
                                       f"({settings.followed_size_annotation})")
    if followed is not None:
        return SizeRule(written, False, f"set to {written} after podgang followed it at {clip(followed, 16)}: "
                                        f"an elastic gang, the user's number")
    if settings.elastic_size_annotation in notes:
        return SizeRule(written, False, f"an elastic gang, the user's number, as judged at podgang's first "
                                        f"look ({settings.elastic_size_annotation})")
    if written <= 1:
        return SizeRule(written, True, f"written {written}, a placeholder (a gang of {written} gangs nothing): "
                                       f"followed", True)
    since = metadata(group).get("creationTimestamp")
    pin = f'{settings.min_member_annotation}: "{written}" on the group'
    for member in sorted(members, key=kind_name):
        found = scaled_since(member, since if isinstance(since, str) else None)
        if found is None:
            continue
        verdict, how = found
        name = f"{str(_dict(member).get('kind') or 'object').lower()} {metadata(member).get('name')}"
        scaled = f"{name} was scaled to {subgroup_min_member(member, settings).value}"
        if verdict == SCALED_SINCE:
            return SizeRule(written, True, f"{scaled} after the group was written with {written}", True)
        return SizeRule(written, True, f"{scaled} {how}: the written {written} is taken for an old total (if "
                                       f"{written} is on purpose, pin it: {pin})", True)
    return SizeRule(written, False, f"below its members' total and no member was scaled since the group was "
                                    f"written: an elastic gang, the user's number (to be sure, pin it: {pin})", True)


def scaled_since(workload: Any, since: str | None) -> tuple[str, str] | None:
    """Whether ``workload``'s size was written after the time ``since`` (a group's
    ``creationTimestamp``; None: not made yet, so nothing came after it), by its history
    (:func:`podgang.kinds.size_writes`): ``(SCALED_SINCE, by whom)``, ``(NO_RECORD, why)``
    when a write has no time and may have come after, or None. A workload whose spec never
    changed since it was made (``generation`` 1, or none: manifests applied together)
    counts with its size as made, whenever that was."""
    md = metadata(workload)
    generation = md.get("generation")
    if since is None or not isinstance(generation, int) or generation <= 1:
        return None
    group_made, made = _instant(since), _instant(md.get("creationTimestamp"))
    made_after = group_made is not None and made is not None and made >= group_made
    for manager, time, subresource in size_writes(workload):
        how = f"by {clip(manager, 48)}" + (f" through its {subresource} subresource" if subresource else "")
        at = _instant(time)
        if at is None:  # the apiserver dates no scale subresource write (kubectl scale, an HPA)
            if made_after:
                return SCALED_SINCE, how
            return NO_RECORD, f"{how} at a time its managedFields do not record"
        if group_made is not None and at >= group_made and not (made_after and at == made):
            return SCALED_SINCE, how
    return None


def _instant(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the apiserver writes it, or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def subgroup_min_member(workload: Any, settings: Settings = DEFAULT) -> MinMember:
    """A workload's minimum inside a shared group and where it comes from:
    ``podgang.io/min-available``, else ``podgang.io/min-member`` (both pinned: set by
    the user, not the workload's size), else its desired size. For a workload of
    multi-pod replicas (an LWS) ``podgang.io/min-available`` counts complete replicas
    (default 1): its minimum is that many replicas' pods."""
    replicas = min_replicas(workload, settings)
    if replicas is not None:
        count, why, pinned = replicas
        unit = replica_units(workload)
        assert unit is not None
        return MinMember(count * unit.pods, f"{why} × {unit.reason}", pinned=pinned)
    for value, key in ((min_available(workload, settings)[0], settings.min_available_annotation),
                       (pinned_min_member(workload, settings)[0], settings.min_member_annotation)):
        if value is not None:
            return MinMember(value, f"{key} on {kind_name(workload)}", pinned=True)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere:  # only some roles name the group (Spark's executors, not its driver): those count
        parts = [r for r in roles(workload) if r.name in elsewhere]
        return MinMember(sum(r.size for r in parts), f"{kind_name(workload)} " + (
            " + ".join(f"{r.name} {r.size}" for r in parts) or f"{', '.join(sorted(elsewhere))} 0 (not made yet)")
            + " (the roles that name it)")
    size, why = desired_size(workload)
    return MinMember(size, f"{kind_name(workload)} {why}")
