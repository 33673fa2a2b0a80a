"""A gang's PodGroup written: create, resize, subgroups, adopt, replace, retire, wake.

Only the difference the rules plan (:func:`~podgang.gang.plan_writes`) is
sent, the answer kept in the cache so that neither it nor its watch echo queues the gang again.
"""

from __future__ import annotations

import calendar
import logging
import time
from typing import Any, Awaitable

from podgang.api import ApiError, NamespaceTerminating
from podgang.fence import Fenced
from podgang.backends import Backend
from podgang.objects import is_terminating

from podgang.gang import stale
from podgang.grouper.gangs import GROUP
from podgang.gang import Obj, resource_version, split_key
from podgang.gang import (Desired, Write, describe_change, is_managed, is_orphan_candidate, orphan_timeout,
                          retired_by)

log = logging.getLogger("podgang.grouper")

#: written on a held coscheduling gang's PodGroup every 20 s: the plugin tries the gang again
WOKEN_ANNOTATION = "podgang.io/woken-at"


class Writes:
    """The writes of a gang's PodGroup (part of :class:`~podgang.grouper.controller.Controller`)."""

    def _actual(self, key: str, desired: Desired) -> Obj | None:
        """The cached PodGroup ``key`` of the desired group's backend."""
        return self.cache.podgroups.of(desired.backend, key)

    async def _patch(self, key: str, backend: Backend, path: str, body: Any) -> Obj:
        """Merge-patch a gang's PodGroup, by its reconcile, and keep the answer in the cache."""
        return await self._own(key, backend, self.api.merge_patch(path, body))

    async def _own(self, key: str, backend: Backend, call: Awaitable[Obj]) -> Obj:
        """A gang's reconcile writing its own group, the answer kept in the cache. Neither the
        answer nor the watch's echo of the write (which may come first) queues the gang again:
        the pass goes on from the answer (a created group was otherwise planned twice more for
        nothing). A change of another resourceVersion seen meanwhile does."""
        self.gangs.of(key).writing = ""
        answer: Obj | None = None
        try:
            answer = await call
            self.writes += 1
            self._upsert(backend, answer)
            return answer
        finally:
            seen = self.gangs.of(key).writing or ""
            self.gangs.forget(key, "writing")
            if seen and (answer is None or seen != resource_version(answer)):
                self.queue.add((GROUP, key))

    def _min_resources_changed(self, podgroup: Obj, resources: str) -> None:
        if resources:
            self.events.emit(podgroup, "MinResourcesChanged",
                             f"minResources set: {resources} (the gang's minimum pods × their requests)")

    async def _write(self, key: str, write: Write, desired: Desired, actual: Obj | None, started: float) -> bool:
        """Perform one write; False when the cache was refreshed and the caller must plan again."""
        namespace, name = split_key(key)
        backend = desired.backend or self.settings.default_backend
        d = backend.podgroup
        path = d.path(namespace, backend.holder_name(name))  # a 1.35 Workload holds its gangs by pod group
        try:
            if write.action == "create":
                created = await self._own(key, backend, self.api.create(d.path(namespace), write.body))
                self.metrics.podgroups_created.labels(source=desired.source or "unknown").inc()
                mm = desired.min_member
                assert mm is not None
                who = f"{desired.owner.kind.lower()} {desired.owner.name}" if desired.owner else "its pods"
                live = [p for p in desired.members if not is_terminating(p)]
                again = f"; {len(live)} pod{'s' if len(live) != 1 else ''} already name it" if live else ""
                message = f"created for {who}: minMember {mm.value} ({mm.reason}){again}"
                # said with the backfill of its pods, if they follow: one event for the gang
                self._news_of(key).created = (created, message)
                self._decision(key, "create", message, started, minMember=mm.value, source=desired.source)
                self.gangs.of(key).observed_min = mm.value
                return True
            if write.action == "patch-min-member":
                patched = await self._patch(key, backend, path, write.body)
                old, new = write.old, write.new
                mm = desired.min_member
                assert mm is not None and new is not None
                if mm.pinned or (desired.size_rule is not None and desired.size_rule.first_look):
                    cause = mm.reason  # a hand-made group's first look: the rule that decided, and its evidence
                else:
                    record = self.gangs.get(key)
                    before, pinned_before = ((record.contributions, record.pinned) if record is not None
                                             else (None, frozenset()))
                    cause = describe_change(before, dict(desired.contributions), mm.reason,
                                            pinned_before, desired.pinned)
                message = f"minMember {old} → {new}: {cause}"
                if write.note:
                    message += f" ({write.note})"
                direction = "up" if old is None or new > old else "down"
                self.metrics.min_member_changes.labels(direction=direction).inc()
                self.events.emit(patched, "MinMemberChanged", message)
                self._decision(key, "patch", message, started, old=old, new=new, source=desired.source)
                if write.subgroups:
                    self.events.emit(patched, "SubgroupsChanged", f"subgroups set: {write.subgroups}")
                self._min_resources_changed(patched, write.resources)
                return True
            if write.action == "patch-subgroups":
                patched = await self._patch(key, backend, path, write.body)
                message = f"subgroups set: {write.note}"
                self.events.emit(patched, "SubgroupsChanged", message)
                self._decision(key, "patch-subgroups", message, started)
                self._min_resources_changed(patched, write.resources)
                return True
            if write.action == "patch-min-resources":
                patched = await self._patch(key, backend, path, write.body)
                self._min_resources_changed(patched, write.note)
                self._decision(key, "patch-min-resources", f"minResources set: {write.note}", started)
                return True
            if write.action == "adopt":
                patched = await self._patch(key, backend, path, write.body)
                self.metrics.adopted.inc()
                message = f"adopted by {write.note}: it is deleted with it"
                self._decision(key, "adopt", message, started)
                return True
            if write.action == "adopt-group":
                patched = await self._patch(key, backend, path, write.body)
                who = f"{desired.owner.kind.lower()} {desired.owner.name}" if desired.owner else "its pods"
                message = (f"made by {write.note} for {who}: podgang manages it from now on instead of making a "
                           f"second group (its size and subgroups follow the workload as podgang's own)")
                self.events.emit(patched, "PodGroupAdopted", message)
                self._decision(key, "adopt-group", message, started)
                return False  # plan again from the adopted group: its size next
            if write.action == "record-elastic":
                patched = await self._patch(key, backend, path, write.body)
                total = sum(value for _, value in desired.contributions)
                message = (f"minMember {write.old} kept as written, of its members' {total}: {write.note}. podgang "
                           f"does not follow their scales; set minMember to their total to have it followed, or "
                           f"annotate the group {self.settings.min_member_annotation}=\"{write.old}\" to pin it")
                self.events.emit(patched, "ElasticGang", message)
                self._decision(key, "record-elastic", message, started)
                return True
            if write.action == "record-size":
                patched = await self._patch(key, backend, path, write.body)
                if write.new is not None:
                    self._decision(key, "record-size", f"{self.settings.desired_size_annotation}={write.new}: "
                                   f"minMember stays {write.old} on the live group", started)
                return True
            if write.action == "replace":
                assert actual is not None
                await self._delete_podgroup(backend, actual)
                self.writes += 1
                if write.new is None:  # the workload is scaled to 0
                    message = (f"no pod names the group and its workload wants none: it is deleted, and created "
                               f"again with the size in force once the workload wants pods ({write.note})")
                else:
                    message = (f"minMember {write.old} → {write.new}: no pod names the group, so it is deleted and "
                               f"created again with the new size ({write.note})")
                self.events.emit(actual, "PodGroupReplaced", message)
                self._decision(key, "replace", message, started, old=write.old, new=write.new)
                return False  # plan again: the next write creates it
        except Fenced:
            raise  # not leading: no failure to say, nothing to retry
        except ApiError as exc:
            return await self._write_failed(key, write, exc, actual, backend)
        raise ValueError(f"unknown write {write.action}")

    async def _write_failed(self, key: str, write: Write, exc: ApiError, actual: Obj | None,
                            backend: Backend) -> bool:
        namespace, name = split_key(key)
        self.metrics.api_error(write.action, exc.status or None)
        if exc.status == 409 or (exc.status == 404 and write.action != "create"):
            # stale resourceVersion, created by someone else meanwhile, or gone: re-read
            self.metrics.conflicts.inc()
            log.info("write raced with another change: re-reading", extra={"fields": {
                "group": key, "action": write.action, "reason": exc.reason, "status": exc.status}})
            await self._reread(namespace, backend.holder_name(name), backend)
            return False
        if isinstance(exc, NamespaceTerminating):
            raise exc  # not a fault to warn about: the namespace is going, and the gang with it
        self._warn_once((GROUP, key, "write"), (f"cannot {write.action} PodGroup {name}: {exc}",),
                        [actual] if actual else [], "PodGroupWriteFailed")
        raise exc

    async def _reread(self, namespace: str, name: str, backend: Backend) -> None:
        try:
            fresh = await self.api.get(backend.podgroup.path(namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            cached = self.cache.podgroups.store(backend).get(f"{namespace}/{name}")
            if cached is not None:
                self._forget(backend, cached)
            return
        informers = self._informers_of(backend)
        if informers:
            # a fresh read is the truth, even if its resourceVersion compares oddly
            store = informers[0].store
            old = store.get(f"{namespace}/{name}")
            slim = self.cache.slim.podgroup(fresh, backend)
            if slim is not None:
                store[f"{namespace}/{name}"] = slim
                self._on_change(backend.podgroup.kind, old, slim)

    async def _orphans(self, key: str, desired: Desired, started: float) -> None:
        actual = self._actual(key, desired)
        retired = retired_by(desired, actual, self.cache)
        if retired is not None and desired.backend is not None:
            assert actual is not None
            name = split_key(key)[1]
            await self._delete_podgroup(desired.backend, actual)
            self.writes += 1
            self.metrics.retired.inc()
            message = f"deleted PodGroup {name}: {retired}"
            self.events.emit(actual, "PodGroupRetired", message)
            self._decision(key, "delete", message, started)
            return
        if not is_orphan_candidate(desired, actual, self.settings):
            self.gangs.forget(key, "orphan_seen")
            return
        assert actual is not None
        now = self.clock()
        record = self.gangs.of(key)
        if record.orphan_seen is None:
            record.orphan_seen = now
        first = record.orphan_seen
        age = now - first
        created = _parse_time(actual["metadata"].get("creationTimestamp"))
        if created is not None:
            # the younger of the two ages: never delete early because of clock skew
            age = min(age, max(self.wall() - created, 0.0))
        timeout = orphan_timeout(actual, self.settings)
        if age < timeout:
            self.queue.add((GROUP, key), timeout - age + 0.05)
            return
        namespace, name = split_key(key)
        assert desired.backend is not None  # it holds the group
        await self._delete_podgroup(desired.backend, actual)
        self.gangs.forget(key, "orphan_seen")
        self.writes += 1
        self.metrics.orphans_deleted.inc()
        self._decision(key, "delete", f"no pod appeared for PodGroup {name} within "
                       f"{stale.format_duration(timeout)} of its creation: deleted it (orphan)", started)

    async def _delete_podgroup(self, backend: Backend, actual: Obj) -> None:
        """Delete the PodGroup ``actual`` is (not a newer one of the same name)."""
        md = actual["metadata"]
        path = backend.podgroup.path(md.get("namespace"), md.get("name"))
        uid = md.get("uid")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}} if uid else None
        try:
            await self.api.delete(path, body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                raise
        self._forget(backend, actual)

    async def _wake_held_gang(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """A scheduler that retries a gang it held whole only on its own events (the
        Coscheduling plugin: a pod added, its PodGroup added or updated — never a node)
        leaves it waiting minutes after room appears. While members of such a gang wait
        unbound and fewer than its minMember are bound (all of it held whole, or the later
        stage of a staged gang: a Spark application's executors beside their running
        driver), podgang touches its PodGroup once per the backend's interval: the scheduler
        then tries the gang again at once."""
        backend = desired.backend
        interval = backend.wake_interval if backend is not None else None
        if interval is None or actual is None or not is_managed(actual, self.settings) or not desired.members:
            self.gangs.forget(key, "woken")
            return
        bound = sum(1 for p in desired.members if p.get("spec", {}).get("nodeName"))
        if (any(is_terminating(p) for p in desired.members) or bound == len(desired.members)
                or bound >= (backend.min_member(actual) or 1)):
            self.gangs.forget(key, "woken")
            return
        now = self.clock()
        record = self.gangs.of(key)
        last = record.woken
        if last is None:
            record.woken = now  # the scheduler has its first try: wake it only if it keeps waiting
        elif now - last >= interval:
            record.woken = now
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall()))
            try:
                await self.api.merge_patch(backend.podgroup.path(*split_key(key)),
                                           {"metadata": {"annotations": {WOKEN_ANNOTATION: stamp}}})
            except ApiError as exc:
                log.info("could not wake a held gang", extra={"fields": {"group": key, "error": str(exc)}})
        self.queue.add((GROUP, key), max(interval - (now - record.woken), 0.0) + 0.01)


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text.replace("Z", "")[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None
