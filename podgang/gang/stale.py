"""Stale gangs (spec §5): a gang that was satisfied and then lost members.

Pure: no I/O, the clock is injected. The grouper feeds one
:class:`GangObservation` per reconcile of a group into
:meth:`StaleGangTracker.observe` and acts on the :class:`StaleVerdict`:

- ``"stale"``: the gang just became stale; emit ``GangStale`` and observe again
  at ``deadline`` (None: never, the grace period is "never evict").
- ``"waiting"``: still stale, the grace period has not run out; observe again at
  ``deadline``.
- ``"evict"``: the grace period ran out; evict the remaining members, emit
  ``GangEvicted`` and, once the evictions succeeded, call :meth:`evicted`. Until
  then every observation of the still-stale gang says ``"evict"`` again (retry).
- ``"recovered"``: the gang is no longer stale (members came back, a member
  succeeded, its workload started settling, its minMember dropped to 1): emit
  ``GangRecovered``; any pending eviction is cancelled.
- ``"none"``: nothing to do.

The rules:

- *satisfied*: active ≥ minMember. The tracker remembers the minMember of the
  last observation at which the gang was satisfied ("satisfied at").
- *subgroups* (a group several workloads share): each remembers whether it was
  satisfied (active ≥ its minimum); the gang is stale too when one that was falls
  below its minimum (every decode pod gone: the prefill pods cannot serve alone),
  whatever the total says. One still at or above its minimum after a loss is not.
- *stale*: active < satisfied-at. A gang waiting for capacity after a scale-up
  (minMember rose above a still-intact gang) is therefore not stale.
- *short when first seen* (:meth:`StaleGangTracker.short_at_start`: after a restart
  of the grouper, bound members but fewer pods than minMember): never taken as
  satisfied — nothing says it was whole, or at which size. Its grace period starts at
  its first observation, the full period, and it is judged by its minMember now: it
  is satisfied like any gang once it reaches it, and its rest is evicted when the
  period runs out first. What ends that for any gang (settling, a member succeeded,
  minMember ≤ 1) ends it for good: the gang is then only "not satisfied yet".
- never stale: any member Succeeded (and the remembered level is dropped, so a
  finishing job is never mistaken for a lost gang later), a settling workload
  (rolling out or scaling down: its controller removes pods on purpose; the
  remembered level follows a lowered minMember down so the finished scale-down
  is not mistaken for loss; with no member active it is dropped: the gang is made
  again whole, and must be satisfied again before it can go stale), a minMember ≤ 1
  (no gang constraint).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from podgang.settings import DEFAULT, Settings

NONE = "none"
STALE = "stale"
RECOVERED = "recovered"
EVICT = "evict"
WAITING = "waiting"


@dataclass(frozen=True)
class SubgroupCount:
    name: str
    min_member: int
    active: int  # active pods; for a role of multi-pod replicas, its complete replicas
    replicas: bool = False  # a role counted in complete replicas (an LWS in a tree)

    def __str__(self) -> str:
        if self.replicas:
            return f"role {self.name}: {self.active} of minimum {self.min_member} complete replicas"
        return f"{self.name}: {self.active} of minimum {self.min_member} active"


@dataclass(frozen=True)
class ReplicaCount:
    """One multi-pod replica of a gang (a leaf of its tree): its pods active now."""

    leaf: str
    role: str
    min_member: int  # pods it needs
    active: int

    @property
    def complete(self) -> bool:
        return self.active >= max(self.min_member, 1)


@dataclass(frozen=True)
class ReplicaVerdict:
    leaf: str
    action: str  # "stale" (broken) | "waiting" | "evict" | "recovered"
    deadline: float | None
    message: str


@dataclass(frozen=True)
class GangObservation:
    group: str  # "namespace/name"
    min_member: int
    active: int  # objects.is_active pods
    succeeded: int  # pods in phase Succeeded
    workload_settling: bool  # rolling out or scaling down
    grace_period: float | None  # seconds; None = never evict
    settling_reason: str = ""  # why the workload is settling, for the message (e.g. "job train is suspended")
    subgroups: tuple[SubgroupCount, ...] = ()  # the parts of a group several workloads share


@dataclass(frozen=True)
class StaleVerdict:
    action: str  # "none" | "stale" | "recovered" | "evict" | "waiting"
    deadline: float | None  # clock time at which the caller must observe again
    message: str  # event / log message
    shortfall: str = field(default="", compare=False)  # on "stale": what it lacks, not who evicts when


@dataclass
class _History:
    satisfied_at: int | None = None  # minMember when last satisfied
    stale_since: float | None = None  # clock time the gang became stale
    subgroups_satisfied: frozenset[str] = frozenset()  # subgroups seen at or above their minimum
    subgroup_levels: dict[str, int] = field(default_factory=dict)  # the minimum each was last satisfied at
    short_at_start: bool = False  # below its minimum when first seen, never satisfied since


def format_duration(seconds: float) -> str:
    """``60s``, ``5m``, ``1m30s``, ``1h30m``, ``500ms``, ``1.5s``.

    Up to a minute in seconds (the default grace period reads ``60s``), above it
    in hours, minutes and seconds with the zero parts left out.
    """
    if not math.isfinite(seconds):
        return "forever"
    millis = round(max(seconds, 0.0) * 1000)
    if millis == 0:
        return "0s"
    if millis < 1000:
        return f"{millis}ms"
    if millis <= 60_000:
        return _seconds(millis)
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    parts = []
    if hours:
        parts.append(f"{hours}h")
    if minutes:
        parts.append(f"{minutes}m")
    if rest:
        parts.append(_seconds(rest))
    return "".join(parts)


def _seconds(millis: int) -> str:
    whole, frac = divmod(millis, 1000)
    if not frac:
        return f"{whole}s"
    return f"{whole}.{frac:03d}".rstrip("0") + "s"


def _sane_grace(grace: float | None) -> float | None:
    """None, NaN and infinity: never evict; a negative period: evict at once."""
    if grace is None or grace != grace or grace == math.inf:
        return None
    return max(float(grace), 0.0)


class StaleGangTracker:
    """Remembers, per group, the level it was satisfied at and since when it is stale."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, settings: Settings = DEFAULT) -> None:
        self._clock = clock
        self._settings = settings
        self._groups: dict[str, _History] = {}
        self._stale: set[str] = set()  # groups whose stale_since is set: counted after every reconcile

    # -- queries and resets

    def forget(self, group: str) -> None:
        """The group was deleted: drop everything about it."""
        self._groups.pop(group, None)
        self._stale.discard(group)

    def evicted(self, group: str) -> None:
        """The remaining members were evicted: start over (the gang must be
        satisfied again before it can go stale again)."""
        self._groups.pop(group, None)
        self._stale.discard(group)

    def short_at_start(self, group: str) -> None:
        """``group``, seen for the first time (after a restart of the grouper, a leader
        change), has bound members but fewer pods than its minimum: it may have lost
        members while no grouper watched, or never been whole at that size (raised
        meanwhile). Not taken as satisfied: its grace period starts at its next
        observation, and it must reach its minimum before the period runs out. Nothing
        changes for a gang the tracker knows anything of."""
        h = self._groups.setdefault(group, _History())
        if h.satisfied_at is None and h.stale_since is None:
            h.short_at_start = True

    def assume_subgroups_satisfied(self, group: str, names: Iterable[str]) -> None:
        """Remember the subgroups ``names`` as satisfied, unless anything is known of
        them: a gang placed all at once (some members bound) under a PodGroup that
        holds these subgroups had each at its minimum when it was placed."""
        h = self._groups.setdefault(group, _History())
        if not h.subgroups_satisfied:
            h.subgroups_satisfied = frozenset(names)

    def stale_groups(self) -> list[str]:
        return sorted(self._stale)

    def is_stale(self, group: str) -> bool:
        """Whether ``group`` is stale now (an eviction of it asks before each try)."""
        return group in self._stale

    def satisfied_at(self, group: str) -> int | None:
        """The minMember the group was last satisfied at (for logs and tests)."""
        h = self._groups.get(group)
        return h.satisfied_at if h else None

    # -- the decision

    def observe(self, obs: GangObservation) -> StaleVerdict:
        h = self._groups.setdefault(obs.group, _History())
        verdict = self._judge(obs, h)
        if h.stale_since is None:
            self._stale.discard(obs.group)
        else:
            self._stale.add(obs.group)
        return verdict

    def _judge(self, obs: GangObservation, h: _History) -> StaleVerdict:
        now = self._clock()
        min_member = max(obs.min_member, 1)
        active = max(obs.active, 0)

        lost = self._lost_subgroups(obs, h)
        # Cases that can never be stale.
        if min_member <= 1:
            h.satisfied_at = None
            h.short_at_start = False
            return self._not_stale(h, f"minMember {min_member} puts no gang constraint")
        if obs.succeeded > 0:
            h.satisfied_at = None
            h.short_at_start = False
            h.subgroups_satisfied = frozenset()
            return self._not_stale(h, f"{obs.succeeded} member{'s' if obs.succeeded != 1 else ''} succeeded")
        if obs.workload_settling:
            h.short_at_start = False  # its workload removes pods on purpose: the shortfall is explained
            if active >= min_member:
                h.satisfied_at = min_member
            elif active == 0:
                # every member gone on purpose: the gang is made again whole (an LWS group
                # recreated, a JobSet restarted), a new gang, stale only once placed again — its
                # new pods are bound one by one, and a part bound is not a loss
                h.satisfied_at = None
                h.subgroups_satisfied = frozenset()
            elif h.satisfied_at is not None:
                # a scale-down lowers the level; a rollout keeps it
                h.satisfied_at = min(h.satisfied_at, min_member)
            h.subgroups_satisfied -= {s.name for s in lost}  # removed on purpose: not lost
            return self._not_stale(h, obs.settling_reason or "its workload is rolling out or scaling down")

        if active >= min_member:
            h.satisfied_at = min_member
            h.short_at_start = False
        level = h.satisfied_at
        short = h.short_at_start  # below its minimum since first seen: judged by the minimum now
        if not lost and not short and (level is None or active >= level):
            if h.stale_since is not None:
                h.stale_since = None
                return StaleVerdict(
                    RECOVERED, None, f"{active} of {level or min_member} members active again, minMember {min_member}"
                )
            if level is None:
                why = f"{active} of {min_member} members active, minMember {min_member}: not satisfied yet"
            elif active < min_member:
                why = (
                    f"{active} of {min_member} members active, minMember {min_member}: "
                    f"waiting for capacity (satisfied at {level})"
                )
            else:
                why = f"{active} of {min_member} members active, minMember {min_member}: satisfied"
            return StaleVerdict(NONE, None, why)

        # Stale: active < the level it was satisfied at.
        grace = _sane_grace(obs.grace_period)
        lost_text = "; ".join(map(str, lost))
        if short:
            counts = f"{active} of {min_member} members active"
            tail = (f"minMember {min_member}, short of it since the grouper first saw the gang (not known to have "
                    f"been whole)" + (f" ({lost_text})" if lost else ""))
        elif level is None or active >= level:  # only a subgroup is short
            counts, tail = lost_text, f"minMember {min_member}"
        else:
            counts = f"{active} of {level} members active"
            tail = f"minMember {min_member}" + (f" ({lost_text})" if lost else "")
        if grace is None:
            action = STALE if h.stale_since is None else WAITING
            if h.stale_since is None:
                h.stale_since = now
            note = f"{self._settings.grace_period_annotation} is -1"
            return StaleVerdict(action, None, f"{counts}, {tail}: not evicting ({note})", f"{counts}, {tail}")
        if h.stale_since is None:
            h.stale_since = now
            message = f"{counts}, {tail}: evicting the rest in {format_duration(grace)} unless it recovers"
            return StaleVerdict(STALE, now + grace, message, f"{counts}, {tail}")
        deadline = h.stale_since + grace
        if now >= deadline:
            return StaleVerdict(
                EVICT,
                None,
                f"evicting {active} remaining {'member' if active == 1 else 'members'}: "
                f"{counts} for {format_duration(now - h.stale_since)}, {tail}",
            )
        return StaleVerdict(
            WAITING,
            deadline,
            f"{counts}, {tail}: evicting the rest in {format_duration(deadline - now)} unless it recovers",
        )

    @staticmethod
    def _lost_subgroups(obs: GangObservation, h: _History) -> list[SubgroupCount]:
        """The subgroups that were satisfied and are below their minimum now; the
        satisfied ones are remembered (a subgroup that left the group is forgotten)."""
        now_ok = {s.name for s in obs.subgroups if s.active >= max(s.min_member, 1)}
        below = [s for s in obs.subgroups if s.name in h.subgroups_satisfied and s.name not in now_ok]
        # a subgroup whose minimum rose above its still-intact members (a Ray worker group's
        # minReplicas raised) waits for capacity, as a whole gang does: it lost nothing
        lost = [s for s in below if s.active < max(h.subgroup_levels.get(s.name, s.min_member), 1)]
        h.subgroups_satisfied = frozenset(now_ok | {s.name for s in below})
        h.subgroup_levels = {**{s.name: lvl for s in below if (lvl := h.subgroup_levels.get(s.name)) is not None},
                             **{s.name: s.min_member for s in obs.subgroups if s.name in now_ok}}
        return lost

    def _not_stale(self, h: _History, why: str) -> StaleVerdict:
        if h.stale_since is not None:
            h.stale_since = None
            return StaleVerdict(RECOVERED, None, f"no longer stale: {why}")
        return StaleVerdict(NONE, None, f"not stale: {why}")


class BrokenReplicaTracker:
    """Replicas of several pods (the leaves of a gang's tree) that were complete and lost
    pods while their role still has its minimum: a partial replica does no work and holds
    its resources, so after the grace period only its remaining pods are evicted — not the
    gang. A replica never complete yet (being placed; an LWS leader waiting for its workers
    under LeaderReady) or being rolled (its workload settling, or all its pods gone at
    once: replaced whole) is not broken. Pure; the clock is injected."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._complete: dict[str, set[str]] = {}  # group -> leaves seen complete
        self._broken: dict[str, dict[str, float]] = {}  # group -> leaf -> broken since

    def forget(self, group: str) -> None:
        self._complete.pop(group, None)
        self._broken.pop(group, None)

    def is_broken(self, group: str, leaf: str) -> bool:
        """Whether replica ``leaf`` of ``group`` is broken now (its eviction asks before each try)."""
        return leaf in self._broken.get(group, {})

    def evicted(self, group: str, leaf: str) -> None:
        """A broken replica's pods were evicted: it must be complete again to break again."""
        self._complete.get(group, set()).discard(leaf)
        self._broken.get(group, {}).pop(leaf, None)

    def observe(self, group: str, replicas: Iterable[ReplicaCount], *, settling: bool,
                grace_period: float | None) -> list[ReplicaVerdict]:
        now = self._clock()
        seen = self._complete.setdefault(group, set())
        broken = self._broken.setdefault(group, {})
        grace = _sane_grace(grace_period)
        out: list[ReplicaVerdict] = []
        present = set()
        for r in replicas:
            present.add(r.leaf)
            if r.complete:
                seen.add(r.leaf)
                if broken.pop(r.leaf, None) is not None:
                    out.append(ReplicaVerdict(r.leaf, RECOVERED, None, f"replica {r.leaf} of role {r.role} is "
                                              f"complete again: {r.active} of {r.min_member} pods active"))
                continue
            if settling or r.active == 0 or r.leaf not in seen:
                # being placed, rolled or replaced whole: not broken
                if r.active == 0 or settling:
                    seen.discard(r.leaf)
                if broken.pop(r.leaf, None) is not None:
                    out.append(ReplicaVerdict(r.leaf, RECOVERED, None, f"replica {r.leaf} of role {r.role} is no "
                                              f"longer broken: {'its workload is settling' if settling else 'its pods are gone'}"))
                continue
            counts = f"replica {r.leaf} of role {r.role}: {r.active} of its {r.min_member} pods active"
            since = broken.get(r.leaf)
            if since is None:
                broken[r.leaf] = now
                if grace is None:
                    out.append(ReplicaVerdict(r.leaf, STALE, None, f"{counts}: broken, not evicting "
                                              f"(the grace period is -1)"))
                else:
                    out.append(ReplicaVerdict(r.leaf, STALE, now + grace, f"{counts}: broken, evicting its "
                                              f"{r.active} remaining pods in {format_duration(grace)} unless it "
                                              f"recovers (the other replicas are untouched)"))
            elif grace is not None and now >= since + grace:
                out.append(ReplicaVerdict(r.leaf, EVICT, None, f"evicting the {r.active} remaining pods of broken "
                                          f"{counts} for {format_duration(now - since)}"))
            elif grace is not None:
                out.append(ReplicaVerdict(r.leaf, WAITING, since + grace, counts))
        for leaf in set(broken) - present:  # scaled away
            broken.pop(leaf, None)
        seen &= present
        return out
