"""Stale gangs: a placed gang that lost members is judged by the tracker, and its rest
evicted after the grace period (a broken replica of a tree, alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Iterable

from podgang import rules
from podgang.api import describe
from podgang.objects import is_active

from podgang.gang import stale
from podgang.grouper import eviction
from podgang.grouper.gangs import GROUP
from podgang.gang import Obj
from podgang.gang import (
    Desired,
    counted_members,
    desired_group,
    gang_counts,
    replica_counts,
    pod_leaf,
    pod_subgroup,
    rollout_reason,
    size_held,
    size_refused,
    subgroup_sizes,
    with_owners,
)

log = logging.getLogger("podgang.grouper")

#: said on a recovery while its eviction is still retrying (:meth:`Staleness._eviction_unwanted`)
STOPPING = "; the eviction under way stops before its next try"


class Staleness:
    """Judging gangs stale and evicting them (part of :class:`~podgang.grouper.controller.Controller`)."""

    def _unwatch(self, key: str, *, contributions: bool) -> None:
        """Stop judging a gang: forget its stale state and sizes (and what its workloads
        contributed, when the group is gone for good)."""
        self.tracker.forget(key)
        record = self.gangs.get(key)
        if contributions and record is not None and record.never:
            self.gangs.forget(key, "never", "never_on_group")
            self._count_never()
        self._warned.pop(("operator", key), None)
        self.replicas.forget(key)
        self._gauge_replicas(key, ())
        self.gangs.forget(key, "observed_min", "lowered_at", *(("contributions", "pinned") if contributions else ()))
        self.metrics.stale_gangs_now.set(len(self.tracker.stale_groups()))

    def _observe(self, key: str, desired: Desired, started: float) -> None:
        actual = self._actual(key, desired)
        if actual is None or desired.source is None:
            self._unwatch(key, contributions=actual is None and not desired.members)
            return
        assert desired.backend is not None  # it holds the group
        if desired.min_member is not None and (desired.min_subgroup is not None or size_held(
                desired, actual, self.settings)) and not size_refused(desired, actual, self.settings):
            # the live group cannot take its new size: the gang is judged by the size in force;
            # a tree's leaves come and go with its replicas' pods: judged by the whole tree's size
            # (a size refused for good, a semi-preemptible group's: the live group is the gang)
            min_member = desired.min_member.value
        else:
            min_member = desired.backend.min_member(actual) or 1
        record = self.gangs.of(key)
        previous = record.observed_min
        now = self.clock()
        if previous is not None and min_member < previous:
            record.lowered_at = now
        record.observed_min = min_member
        settling = rollout_reason(desired, self.cache)
        lowered = record.lowered_at
        if settling is None and lowered is not None:
            if now - lowered < self.options.settle_window:
                settling = f"minMember lowered {now - lowered:.1f}s ago: scaling down"
                # nothing else may happen when the window closes: look again then, or a
                # member lost during the scale-down would wait for the next resync
                self.queue.add((GROUP, key), lowered + self.options.settle_window - now + 0.01)
            else:
                record.lowered_at = None
        counts = gang_counts(counted_members(self.cache, desired))
        if (previous is None and not self.initial_reconcile_done and settling is None and not counts.succeeded
                and 0 < counts.active < min_member and len(counts.remaining) < min_member):
            # First look after a (re)start, and the gang has bound members but fewer
            # pods than minMember at all: it lost pods while no grouper watched (a
            # restart, a leader change), or its minMember rose meanwhile — nothing in the
            # cluster tells which, nor the size it was placed at. Never taken as
            # satisfied: its grace period starts now, the full period, and it must reach
            # its minimum before it runs out (else it would never be found stale, its
            # bound members holding their nodes for nothing). Pods still Pending that
            # make up the minimum may be a scale-up waiting for capacity: nothing then.
            self.tracker.short_at_start(key)
        subgroups = self._subgroup_counts(desired, counts.remaining)
        self._gauge_replicas(key, subgroups)
        if (subgroups and previous is None and not self.initial_reconcile_done and settling is None
                and not counts.succeeded and counts.active > 0
                and desired.backend.subgroups_of(actual) == dict(subgroup_sizes(desired))):
            # the same first look, per subgroup: bound members under a PodGroup holding
            # these subgroups were placed with every subgroup at its minimum (all decode
            # pods lost while no grouper watched must still make the prefill pods stale)
            self.tracker.assume_subgroups_satisfied(key, (s.name for s in subgroups))
        grace, grace_why = rules.grace_period_for([actual, *with_owners(self.cache, desired.workloads)],
                                                  self.settings.staleness_grace_period, self.settings)
        placed_before = self.tracker.satisfied_at(key)
        verdict = self.tracker.observe(stale.GangObservation(
            group=key, min_member=min_member, active=counts.active, succeeded=counts.succeeded,
            workload_settling=settling is not None, grace_period=grace, settling_reason=settling or "",
            subgroups=subgroups,
        ))
        action = verdict.action
        if placed_before is None and self.tracker.satisfied_at(key) is not None and min_member > 1:
            # from here on a loss of members makes the gang stale: say when that starts
            self._decision(key, "placed", f"{counts.active} of minMember {min_member} members active: the gang is "
                           f"placed, and judged stale if it loses members", started, active=counts.active,
                           minMember=min_member)
        evictor = desired.backend.evicts_itself(actual) if desired.backend is not None else None
        if action == stale.STALE:
            self.metrics.stale_gangs.inc()
            # a gang the scheduler evicts: podgang's own countdown would be a promise it does not keep
            self.events.emit(actual, "GangStale", f"{verdict.shortfall}: {evictor}" if evictor else verdict.message)
            self._decision(key, "stale", verdict.message, started, active=counts.active, minMember=min_member,
                           grace=grace_why)
        elif action == stale.RECOVERED:
            self.metrics.recovered_gangs.inc()
            # a PDB may hold the rest for a while: the eviction asks the tracker before its next try
            message = verdict.message + (STOPPING if None in record.evicting else "")
            self.events.emit(actual, "GangRecovered", message)
            self._decision(key, "recovered", message, started, active=counts.active, minMember=min_member)
        elif action == stale.EVICT and evictor:
            self._decision(key, "leave-to-scheduler", f"{verdict.message}; {evictor}", started)
        elif action == stale.EVICT:
            if None not in record.evicting:
                record.evicting[None] = asyncio.create_task(self._evict(key, verdict.message), name=f"evict {key}")
        if verdict.deadline is not None:
            self.queue.add((GROUP, key), max(verdict.deadline - self.clock(), 0.0) + 0.01)
        self._judge_replicas(key, desired, actual, counts.remaining, settling=settling is not None, grace=grace,
                             gang_stale=key in self.tracker.stale_groups(), evictor=evictor, started=started)
        self.metrics.stale_gangs_now.set(len(self.tracker.stale_groups()))

    def _subgroup_counts(self, desired: Desired, members: Iterable[Obj]) -> tuple[stale.SubgroupCount, ...]:
        """How many of the gang's counted ``members`` are active in each subgroup: only
        where the backend holds subgroups and there are several (one is the whole gang).
        A pod's own subgroup key first; its owners only when it has none. In a tree, a role
        of multi-pod replicas counts its complete replicas (a lone LWS's root, its own)."""
        backend = desired.backend
        if backend is None or backend.subgroup_key is None or not desired.subgroups:
            return ()
        tree = desired.min_subgroup is not None
        if not tree and len(desired.subgroups) < 2:
            return ()
        active = self._active_by_subgroup(desired, members)
        if not tree:  # roles, segments of a role or of a replica: each leaf that needs pods (a parent holds none)
            return tuple(stale.SubgroupCount(s.name, s.min_member, active.get(s.name, 0)) for s in desired.subgroups
                         if not s.of_subgroups and s.min_member > 0)
        replicas = replica_counts(desired, active, self.settings)
        if desired.source == rules.OWNED and not any(s.parent for s in desired.subgroups):
            # a lone LWS: one workload's replicas, directly under the group
            role = replicas[0].role if replicas else ""
            return (stale.SubgroupCount(role, desired.min_subgroup or 1, sum(r.complete for r in replicas), True),)
        out = []
        for s in desired.subgroups:
            if s.parent is not None:
                continue
            if s.of_subgroups:
                complete = sum(r.complete for r in replicas if r.role == s.name)
                out.append(stale.SubgroupCount(s.name, s.min_member, complete, True))
            else:
                out.append(stale.SubgroupCount(s.name, s.min_member, active.get(s.name, 0)))
        return tuple(out)

    def _gauge_replicas(self, key: str, subgroups: Iterable[stale.SubgroupCount]) -> None:
        """``podgang_grouper_complete_replicas`` of each role of multi-pod replicas."""
        roles = {s.name: s for s in subgroups if s.replicas}
        record = self.gangs.get(key)
        for role in (record.gauged if record is not None else frozenset()) - set(roles):
            for kind in ("complete", "minimum"):
                with contextlib.suppress(KeyError):
                    self.metrics.complete_replicas.remove(key, role, kind)
        for role, s in roles.items():
            self.metrics.complete_replicas.labels(key, role, "complete").set(s.active)
            self.metrics.complete_replicas.labels(key, role, "minimum").set(s.min_member)
        if roles:
            self.gangs.of(key).gauged = frozenset(roles)
        else:
            self.gangs.forget(key, "gauged")

    def _active_by_subgroup(self, desired: Desired, members: Iterable[Obj]) -> dict[str | None, int]:
        backend = desired.backend
        assert backend is not None
        active: dict[str | None, int] = {}
        for pod in members:
            if is_active(pod):
                name = pod_leaf(self.cache, pod) or backend.subgroup_of(pod) or pod_subgroup(self.cache, pod)
                active[name] = active.get(name, 0) + 1
        return active

    def _judge_replicas(self, key: str, desired: Desired, actual: Obj, members: Iterable[Obj], *, settling: bool,
                        grace: float | None, gang_stale: bool, evictor: str | None, started: float) -> None:
        """Broken replicas above their role's minimum: each, after the grace period, loses
        its remaining pods, the rest of the gang untouched (not while the whole gang is stale:
        it goes whole; not where the scheduler evicts the gang itself)."""
        if desired.min_subgroup is None or desired.backend is None:
            self.replicas.forget(key)
            return
        counts = replica_counts(desired, self._active_by_subgroup(desired, members), self.settings)
        verdicts = self.replicas.observe(key, counts, settling=settling, grace_period=grace)
        if gang_stale or evictor:
            return
        for v in verdicts:
            if v.action == stale.STALE:
                self.events.emit(actual, "ReplicaBroken", v.message)
                self._decision(key, "replica-broken", v.message, started, replica=v.leaf)
            elif v.action == stale.RECOVERED:
                record = self.gangs.get(key)
                message = v.message + (STOPPING if record is not None and v.leaf in record.evicting else "")
                self.events.emit(actual, "ReplicaRecovered", message)
                self._decision(key, "replica-recovered", message, started, replica=v.leaf)
            elif v.action == stale.EVICT and v.leaf not in self.gangs.of(key).evicting:
                self.gangs.of(key).evicting[v.leaf] = asyncio.create_task(
                    self._evict(key, v.message, v.leaf), name=f"evict {key} {v.leaf}")
            if v.deadline is not None:
                self.queue.add((GROUP, key), max(v.deadline - self.clock(), 0.0) + 0.01)

    def _eviction_unwanted(self, key: str, leaf: str | None) -> str | None:
        """Why an eviction under way must stop before its next try (a PDB's refusals are
        retried for seconds): the gang is no longer stale — it recovered, its workload started
        settling, its group went — or the replica no longer broken. The tracker is the judge:
        every change to the gang's pods is observed at once, the same verdict that says
        ``GangRecovered``."""
        if leaf is None:
            return None if self.tracker.is_stale(key) else "the gang is no longer stale"
        return None if self.replicas.is_broken(key, leaf) else f"replica {leaf} is no longer broken"

    async def _evict(self, key: str, why: str, leaf: str | None = None) -> None:
        """Evict the remaining members of a stale gang — or, with ``leaf``, only those of
        one broken replica of it (the rest of the gang untouched)."""
        started = time.perf_counter()
        retry = False
        try:
            desired = desired_group(self.cache, key)
            pods = list(gang_counts(desired.members).remaining)
            if leaf is not None:
                pods = [p for p in pods if pod_leaf(self.cache, p) == leaf
                        or (desired.backend is not None and desired.backend.subgroup_of(p) == leaf)]
            result = await eviction.evict_pods(
                self.api_client, pods, timeout=self.options.eviction_timeout,
                attempts=self.options.eviction_attempts, backoff=self.options.eviction_backoff,
                stop=lambda: self.fence.problem() or self._eviction_unwanted(key, leaf), fence=self.fence,
            )
            actual = self._actual(key, desired)
            what, action = ("GangEvicted", "evict") if leaf is None else ("ReplicaEvicted", "evict-replica")
            if result.evicted:
                self.metrics.evictions.labels(result="evicted").inc(len(result.evicted))
                message = (f"{why}: evicted {len(result.evicted)} pod{'s' if len(result.evicted) != 1 else ''} "
                           f"({_first_ten(result.evicted)})")
                held = size_held(desired, actual, self.settings) if leaf is None else None
                if held:  # the replacements rejoin the live group at once: it is never empty
                    message += f"; the replacements join the live group, whose size stays until the gang is empty ({held})"
                if actual is not None:
                    self.events.emit(actual, what, message)
                self._decision(key, action, message, started, evicted=len(result.evicted),
                               **({"replica": leaf} if leaf else {}))
            if not result.evicted and not result.refused and not result.kept:
                # a decision all the same: say so, rather than nothing at all
                message = f"{why}: nothing left to evict ({len(result.gone)} already gone)"
                self._decision(key, action, message, started, evicted=0, gone=len(result.gone))
            if result.kept:
                # the gang (or replica) came back while a PDB held its pods: the rest stay, nothing is
                # retried or started over — the tracker's recovery stands
                self.metrics.evictions.labels(result="stopped").inc(len(result.kept) + len(result.refused))
                stayed = [*result.kept, *(pod for pod, _ in result.refused)]
                message = (f"{why}: stopped, {result.stopped}; {len(stayed)} "
                           f"member{'s' if len(stayed) != 1 else ''} kept ({_first_ten(stayed)})")
                self._decision(key, "evict-stopped", message, started, evicted=len(result.evicted),
                               kept=len(stayed), **({"replica": leaf} if leaf else {}))
            elif result.refused:
                self.metrics.evictions.labels(result="refused").inc(len(result.refused))
                detail = "; ".join(f"{pod}: {reason}" for pod, reason in result.refused[:5])
                whose = "of the stale gang" if leaf is None else f"of broken replica {leaf}"
                message = (f"could not evict {len(result.refused)} member{'s' if len(result.refused) != 1 else ''} "
                           f"{whose}: {detail}; retrying in "
                           f"{stale.format_duration(self.options.eviction_retry)}")
                if actual is not None:
                    self.events.emit(actual, "GangEvictionRefused", message, "Warning")
                self._decision(key, "evict-refused", message, started, refused=len(result.refused))
                retry = True
            elif leaf is None:
                self.tracker.evicted(key)
            else:
                self.replicas.evicted(key, leaf)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("eviction failed: retrying", extra={"fields": {"group": key, "replica": leaf,
                                                                       "error": describe(exc)}})
            retry = True
        finally:
            record = self.gangs.get(key)
            if record is not None:
                record.evicting.pop(leaf, None)
                self.gangs.tidy(key)
            self.metrics.stale_gangs_now.set(len(self.tracker.stale_groups()))
        if retry:
            self.queue.add((GROUP, key), self.options.eviction_retry)
        else:
            self.queue.add((GROUP, key))


def _first_ten(names: list[str]) -> str:
    """Pod names for a message: the first ten, and an ellipsis for the rest."""
    return ", ".join(names[:10]) + (" …" if len(names) > 10 else "")
