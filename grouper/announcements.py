"""What the grouper says: its decisions log, Warning events once per distinct problem,
never-placed verdicts and their end, and the news of what it did for a namespace's gangs
(one event for many).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Hashable, Mapping

from podgang import feasibility, rules
from podgang.backends import Backend

from podgang.grouper.gangs import GROUP, NEWS
from podgang.gang import Obj, split_key
from podgang.gang import Desired, changed_by_others, is_managed, natural_gang

log = logging.getLogger("podgang.grouper")

#: the events of a never-placed verdict (podgang.feasibility), and of its end
NEVER_PLACED = "GangNeverPlaced"
PLACEABLE = "GangNoLongerNeverPlaced"


class Announcements:
    """What the grouper says, and to whom (part of :class:`~podgang.grouper.controller.Controller`)."""

    def _decision(self, group: str, action: str, reason: str, started: float, **fields: Any) -> None:
        log.info(f"{action}: {reason}", extra={"fields": {
            "group": group, "action": action, "reason": reason,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2), **fields}})

    def _warn_once(self, key: Hashable, problems: tuple[str, ...], subjects: list[Obj], reason: str) -> None:
        """Warning events for what a user should fix, once per distinct problem."""
        current = frozenset(problems)
        seen = self._warned.get(key, frozenset())
        if current == seen:
            return
        if current:
            self._warned[key] = current
        else:
            self._warned.pop(key, None)
        for problem in sorted(current - seen):
            log.warning(problem, extra={"fields": {"group": key[1] if isinstance(key, tuple) else key,
                                                   "action": "warn", "reason": reason}})
            for subject in subjects:
                self.events.emit(subject, reason, problem, "Warning")

    def _operator_gang(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """One Normal event, on the PodGroup and the workloads, when a gang is its operator's
        own PodGroup (Spark's batchScheduler, KubeRay's or LWS's own gang integration): podgang
        made no second one and leaves its size."""
        memory = ("operator", key)
        if desired.operator is None:
            self._warned.pop(memory, None)
            return
        if self._warned.get(memory) == frozenset((desired.operator,)):
            return
        self._warned[memory] = frozenset((desired.operator,))
        log.info(desired.operator, extra={"fields": {"group": key, "action": "operator-gang"}})
        workloads = list(desired.workloads)
        natural = natural_gang(self.cache, desired.members[0]) if desired.members and not workloads else None
        if isinstance(natural, rules.Gang) and natural.top_owner is not None:  # the workload of the group's pods
            top = self.cache.by_uid.get(natural.top_owner.uid)
            workloads += [top] if top is not None else []
        for subject in [o for o in (actual, *workloads) if o is not None]:
            self.events.emit(subject, "OperatorGang", desired.operator)

    def _assumed(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """One Normal event on the PodGroup, once it exists, when its size is podgang's guess (a
        top owner of a kind podgang does not know): what it assumed and how to pin it."""
        memory = ("assumed", key)
        if desired.assumed is None:
            self._warned.pop(memory, None)
            return
        if actual is None or self._warned.get(memory) == frozenset((desired.assumed,)):
            return
        self._warned[memory] = frozenset((desired.assumed,))
        log.info(desired.assumed, extra={"fields": {"group": key, "action": "assumed"}})
        self.events.emit(actual, "GangSizeAssumed", desired.assumed)

    def _changed_by_others(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """One Warning, on the group and its workloads, when another field manager wrote the
        size of a group podgang made. Remembered while the group lives, not only while that
        manager owns the field: podgang's write-back takes it over, and a writer that keeps
        fighting (KAI's older pod-grouper) would otherwise be warned about on every round."""
        memory = ("changed-by", key)
        if actual is None:
            self._warned.pop(memory, None)
            return
        problem = changed_by_others(desired.backend, actual, self.settings)
        if problem is not None:
            self._warn_once(memory, (problem,), [actual, *desired.workloads], "PodGroupChangedByOther")

    def _problems(self, key: str, desired: Desired) -> None:
        actual = self._actual(key, desired)
        if desired.workloads and actual is None:
            subjects = list(desired.workloads)
        elif actual is not None:
            subjects = [actual]
        else:
            subjects = list(desired.members[:1])
        reason = "PodGroupMissing" if actual is None and desired.source == rules.HAND_MADE else "PodGroupProblem"
        self._warn_once((GROUP, key), desired.problems, subjects, reason)
        # what the scheduler will make of the group's settings (a KAI queue that does not
        # exist): said on the workload too, where a team looks, since nobody sees the
        # admission warnings of the pods a controller makes
        settings_problems = tuple(desired.options.get("problems") or ())
        if desired.backend is not None and actual is not None and is_managed(actual, self.settings) \
                and desired.options:
            settings_problems += tuple(desired.backend.settings_drift(actual, desired.options))
        self._warn_once(("settings", key), settings_problems, list(desired.workloads), "SchedulerSettingProblem")
        if actual is not None:
            self._warn_once(("settings-group", key), settings_problems, [actual], "SchedulerSettingProblem")
        self._say_never(key, desired, actual)

    def _say_never(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """One Warning event per verdict (not per pod) on the gang's workloads and on its
        PodGroup, once; a Normal event on each when the verdict no longer holds (a node
        added, the quota raised); the metric of gangs per verdict kept in step."""
        current = {v.kind: v.message for v in desired.verdicts}
        record = self.gangs.of(key)
        before = record.never
        # an owner-less pod is its own workload: said on it too, where its user looks
        owner_less = [p for p in desired.members[:1] if desired.source == rules.OWNER_LESS]
        self._say_changes(before, current, list(desired.workloads) or owner_less)
        if actual is not None:
            self._say_changes(record.never_on_group, current, [actual])
            record.never_on_group = current
        if not current:
            record.never_on_group = {}
        changed = current != before
        record.never = current
        self.gangs.tidy(key)
        if changed:
            self._count_never()

    def _say_changes(self, before: Mapping[str, str], current: Mapping[str, str], subjects: list[Obj]) -> None:
        for kind, message in current.items():
            if before.get(kind) != message:
                log.warning(message, extra={"fields": {"action": "warn", "reason": NEVER_PLACED, "verdict": kind}})
                for subject in subjects:
                    self.events.emit(subject, NEVER_PLACED, message, "Warning")
        for kind, message in before.items():
            if kind not in current:
                cleared = f"no longer never placed ({kind}): what was said holds no more — {message}"
                log.info(cleared, extra={"fields": {"action": "cleared", "reason": PLACEABLE, "verdict": kind}})
                for subject in subjects:
                    self.events.emit(subject, PLACEABLE, cleared, "Normal")

    def _count_never(self) -> None:
        for kind, count in feasibility.counts([r.never for _, r in self.gangs if r.never]).items():
            self.metrics.never_placed_gangs.labels(verdict=kind).set(count)

    def _news_of(self, gang_key: str) -> "GangNews":
        """What is to be said about a gang, said once the grouper's work on it has settled."""
        namespace = split_key(gang_key)[0]
        news = self._news.setdefault(namespace, {}).get(gang_key)
        if news is None:
            news = self._news[namespace][gang_key] = GangNews(self.clock())
        self.queue.add((NEWS, gang_key), self.options.backfill_event_delay)
        return news

    def _news_waits(self, gang_key: str, news: "GangNews") -> bool:
        """Whether a gang's news should wait: backfill still going on, or a group made before
        its pods came (a job's controller makes them next: said with them) — for at most
        backfill_event_max_wait."""
        if self.clock() - news.since >= self.options.backfill_event_max_wait:
            return False
        return bool(self.queue.waiting_behind or self._backfilling
                    or (news.created is not None and not news.pods and not self.cache.members(gang_key)))

    def _say_news(self, gang_key: str) -> None:
        """What the grouper did to its gangs — groups created, pods backfilled with their count —
        said once that work has settled, in ONE event per namespace for every gang of it settled
        then: a gang or a few as the webhook's pods come, hundreds in one when a grouper catches
        up (an event per gang would be an etcd write per gang, as many as the groups). On the
        first gang's group, else on a pod of it that was backfilled."""
        namespace = split_key(gang_key)[0]
        pending = self._news.get(namespace) or {}
        news = pending.get(gang_key)
        if news is None:
            return
        if self._news_waits(gang_key, news):
            self.queue.add((NEWS, gang_key), self.options.backfill_event_delay)
            return
        settled = [(gang_key, pending.pop(gang_key))]
        settled += [(key, pending.pop(key)) for key, other in list(pending.items()) if not self._news_waits(key, other)]
        if not pending:
            del self._news[namespace]
        said = [(key, each, text) for key, each in settled if (text := self._news_text(key, each))]
        if not said:
            return
        said.sort(key=lambda t: t[1].created is None)  # a group created first: the event goes on it
        key, first, text = said[0]
        created = [each for _, each, _ in said if each.created is not None]
        if len(said) > 1:
            pods = sum(each.pods for _, each, _ in said)
            names = [split_key(k)[1] for k, _, _ in said]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            parts = [f"{len(created)} PodGroup{'s' if len(created) != 1 else ''} created"] if created else []
            parts += [f"{pods} pod{'s' if pods != 1 else ''} backfilled"] if pods else []
            text = f"{' and '.join(parts)} for {len(said)} gangs ({shown}); the first: {text}"
        if first.created is not None:
            self.events.emit(first.created[0], "PodGroupCreated", text)
        elif first.backend is not None:
            actual = self.cache.podgroups.of(first.backend, key)
            self.events.emit(actual if actual is not None else first.example, "Backfilled", text)

    def _news_text(self, gang_key: str, news: "GangNews") -> str:
        """One gang's news, as said (and its backfill logged)."""
        said = []
        if news.created is not None:
            said.append(news.created[1])
        if news.pods and news.backend is not None:
            count = f"{news.pods} pod{'s' if news.pods != 1 else ''}"
            labelled = f", with their subgroup{'s' if news.subgroups != 1 else ''}" if news.subgroups else ""
            backfilled = (f"{count} backfilled: {news.backend.describe_membership(news.group)}{labelled} (admitted "
                          f"without them, e.g. while the webhook was unavailable): {news.reason}")
            said.append(backfilled)
            log.info(f"backfill: {backfilled}", extra={"fields": {"group": gang_key, "action": "backfill",
                                                                  "reason": backfilled, "pods": news.pods}})
        return "; ".join(said)


@dataclass
class GangNews:
    """What the grouper did for one gang since it last said so."""

    since: float
    created: tuple[Obj, str] | None = None  # the group it created, and the message
    backend: Backend | None = None  # of the pods backfilled
    group: str = ""
    reason: str = ""
    example: Obj | None = None  # a pod backfilled: where the event goes while the group is not there
    pods: int = 0
    subgroups: int = 0
