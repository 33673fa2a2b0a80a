"""A gang's members as counted for its staleness: which pods count, bound or running, and
why a workload replaces its pods on purpose right now.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podgang import kinds, rules
from podgang.objects import is_active, is_terminating, pod_phase

from podgang.gang.cache import Cache
from podgang.gang.slim import Obj, display_name
from podgang.gang.desired import Desired, _md


@dataclass(frozen=True)
class GangCounts:
    active: int
    succeeded: int
    remaining: tuple[Obj, ...] = field(default=())  # members an eviction would remove


def gang_counts(members: tuple[Obj, ...] | list[Obj]) -> GangCounts:
    active = succeeded = 0
    remaining = []
    for pod in members:
        phase = pod_phase(pod)
        # a pod stopped by its deletion (an eviction) often exits 0: stopped, not finished
        if phase == "Succeeded" and not is_terminating(pod):
            succeeded += 1
        if is_active(pod):
            active += 1
        if not is_terminating(pod) and phase not in ("Succeeded", "Failed"):
            remaining.append(pod)
    return GangCounts(active, succeeded, tuple(remaining))


def counted_members(cache: Cache, desired: Desired) -> list[Obj]:
    """The members that count toward the gang: not the pods of a finished run, a
    Job of its own or of a CronJob (past runs keep their Succeeded pods around as
    history, and a finished run no longer counts toward a shared group's
    minMember either). The Jobs of a JobSet are parts of one run: a finished
    part's pods stay members (a Succeeded member: never stale)."""
    out = []
    for pod in desired.members:
        if replaced_by(cache, desired, pod) is not None:  # its controller removes it on purpose
            continue
        owner = rules.controller_ref(pod)
        run = cache.by_uid.get(owner.uid) if owner is not None and owner.uid else None
        if run is not None and run.get("kind") == owner.kind and kinds.is_finished(run):
            if rules.next_owner(run) is None:  # a run of its own (a CronJob's Job), not part of its owner's
                continue
        out.append(pod)
    return out


def _replica_workload(cache: Cache, pod: Obj) -> Obj | None:
    """The workload a pod's multi-pod replica belongs to (an LWS), from its controller's labels."""
    found = kinds.replica_of(pod)
    if found is None:
        return None
    namespace = _md(pod).get("namespace") or ""
    return cache.workload(found[0], f"{namespace}/{found[1]}")


def _pod_workloads(cache: Cache, desired: Desired, pod: Obj) -> tuple[Obj, ...]:
    """The gang's own workloads, or — for a group its operator made, which names none — the
    one the pod's replica labels name."""
    return desired.workloads or tuple(w for w in (_replica_workload(cache, pod),) if w is not None)


def replaced_by(cache: Cache, desired: Desired, pod: Obj) -> str | None:
    """Why the controller of the gang's workload removes ``pod`` on purpose (an LWS group above
    ``spec.replicas``, a JobSet pod of an earlier restart attempt), or None."""
    return next((why for w in _pod_workloads(cache, desired, pod) if (why := kinds.replaced(w, pod))), None)


def remade(cache: Cache, desired: Desired) -> str | None:
    """Why the controller of the gang's workload is making the gang's replica again whole on
    purpose (an LWS group recreated), or None — only where the gang is that one replica (a
    lone LWS's group, podgang's or LWS's own): in a gang of several, a replica made again is
    one the tree counts whole or not at all, and the others' losses stay losses."""
    replicas = {kinds.replica_of(p) for p in desired.members}
    if len(replicas) != 1 or None in replicas:
        return None
    return next((why for pod in desired.members for w in _pod_workloads(cache, desired, pod)
                 if (why := kinds.remade(w, pod))), None)


def rollout_reason(desired: Desired, cache: Cache) -> str | None:
    """Why the workloads behind a gang are removing its pods on purpose right
    now (being deleted, suspended, rolling out, or finished: a failed Job's controller deletes the rest of
    its pods), or None."""
    for workload in desired.workloads:
        if _md(workload).get("deletionTimestamp"):
            return f"{display_name(workload)} is being deleted"
        if kinds.is_suspended(workload):  # a Job or JobSet (e.g. preempted by Kueue)
            return f"{display_name(workload)} is suspended"
        why = kinds.rolling_out(workload, cache.workload_pods(workload))
        if why:
            return why
    for pod in desired.members:  # its controller's own scale-down or recovery (an old restart attempt)
        why = replaced_by(cache, desired, pod)
        if why:
            return why
    why = remade(cache, desired)  # a replica made again whole (an LWS group recreated)
    if why:
        return why
    finished = finished_workloads(desired)
    if finished and len(finished) == len(desired.workloads):
        return "; ".join(f"{display_name(w)} finished" for w in finished)
    return None


def describe_change(old: dict[str, int] | None, new: dict[str, int], fallback: str,
                    pinned_before: frozenset[str] = frozenset(), pinned_now: frozenset[str] = frozenset()) -> str:
    """Why minMember moved, from the contributions before and after:
    ``deployment model-1 scaled 1 → 2``, ``deployment model-3 added (1)``,
    ``deployment model-1 pinned 1 → 4`` (its podgang.io/min-member, not a scale), ..."""
    if old is None:
        return fallback
    parts = []
    for name in sorted(set(old) | set(new)):
        before, after = old.get(name), new.get(name)
        if before == after:
            continue
        if before is None:
            parts.append(f"{name} added ({after})")
        elif after is None:
            parts.append(f"{name} removed (was {before})")
        elif name in pinned_now:
            parts.append(f"{name} pinned {before} → {after}")
        elif name in pinned_before:
            parts.append(f"{name} unpinned {before} → {after}")
        else:
            parts.append(f"{name} scaled {before} → {after}")
    return "; ".join(parts) if parts else fallback


def finished_workloads(desired: Desired) -> list[Obj]:
    return [w for w in desired.workloads if kinds.is_finished(w)]
