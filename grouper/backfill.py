"""Pods admitted without the webhook: their membership backfilled in one write, held
while a controller creates pods in a burst; and pods' subgroup labels kept in step.
"""

from __future__ import annotations

import logging
import math
import time

from podgang import rules
from podgang.api import ApiError
from podgang.fence import Fenced
from podgang.backends import Backend
from podgang.objects import POD, is_terminating

from podgang.grouper.gangs import POD_KEY
from podgang.gang import Obj, obj_key, split_key
from podgang.gang import Desired, desired_group, pod_gang, pod_leaf, pod_subgroup

log = logging.getLogger("podgang.grouper")


class Backfill:
    """Backfilling pods and their subgroups (part of :class:`~podgang.grouper.controller.Controller`)."""

    def _pods_listed(self) -> bool:
        """The pods' first list is in: a pod new to the cache from now on was created (the
        list's own pods are not a burst of creations)."""
        if not self._pods_synced:
            self._pods_synced = all(i.synced.is_set() for i in self.informers.get("Pod", ()))
        return self._pods_synced

    def _pod_created(self) -> None:
        """While pods are created faster than backfill_yield_rate a second — a workload's
        controller making a job's pods — the backfills are held until none came for
        yield_quiet: the grouper's pod writes do not compete with the controller's creates
        at the API server, and the pods are backfilled right after, at full speed. Held for
        at most yield_max at a time, then left to run as long before the next hold, so a
        controller that never stops creating does not starve them."""
        now = self.clock()
        since = now - self._created_at
        if since > self.options.yield_quiet:
            self._yield_since = None  # a quiet gap: a new burst starts a new hold
        self._creation_rate = self._creation_rate * math.exp(-since) + 1.0  # per second, over about a second
        self._created_at = now
        if self.options.backfill_yield_rate <= 0 or self._creation_rate < self.options.backfill_yield_rate:
            return
        if self._yield_since is None or now - self._yield_since >= 2 * self.options.yield_max:
            self._yield_since = now
            self.metrics.backfill_yields.inc()
        if now - self._yield_since < self.options.yield_max:
            self.queue.hold_back_lane(self.options.yield_quiet)

    async def backfill_pod(self, key: str) -> None:
        self._backfilling += 1
        try:
            await self._backfill_pod(key)
        finally:
            self._backfilling -= 1

    async def _backfill_pod(self, key: str) -> None:
        """One merge patch gives a pod admitted without the webhook everything it lacks:
        membership, subgroup, the scheduler's own keys; what it already carries is not
        written again. The event says the count, per gang — per namespace when many settle
        at once (:meth:`_say_news`)."""
        started = time.perf_counter()
        pod = self.cache.pods.get(key)
        if pod is None or is_terminating(pod) or self.being_deleted(split_key(key)[0]):
            return
        backend = self.settings.backend_for(pod)
        if backend is None or not backend.needs_backfill(pod) or not self.touches(split_key(key)[0], backend):
            return
        if self.cache.owner_skipped(pod):
            return  # the webhook left it alone for the same reason
        gang = pod_gang(self.cache, pod)
        if gang is None:
            self.queue.add((POD_KEY, key), self.options.pending_retry)
            return
        if isinstance(gang, rules.Denial):
            self._warn_once((POD_KEY, key), (gang.message,), [pod], "BackfillFailed")
            return
        namespace, name = split_key(key)
        gang_key = f"{namespace}/{gang.name}"
        subgroup = self._backfill_subgroup(backend, pod, gang, gang_key)
        patch = backend.backfill(pod, gang.name, subgroup, over_own=bool(gang.leaf))
        if patch is None:
            problem = (f"pod {name} was admitted without its PodGroup (the webhook was unavailable) and the "
                       f"{backend.name} backend cannot set it on a created pod: delete the pod so that it is "
                       f"created again through the webhook, into {gang.name}")
            self.metrics.backfill_impossible.inc()
            self._warn_once((POD_KEY, key), (problem,), [pod], "BackfillImpossible")
            return
        if not patch:
            return
        self._patching_pods.add(key)  # its answer and its echo queue the gang once its pods are done
        try:
            patched = await self.api.merge_patch(POD.path(namespace, name), patch)
            self.writes += 1
            self._upsert("Pod", patched)
        except ApiError as exc:
            if exc.status == 404:
                return
            if isinstance(exc, Fenced):
                raise  # not leading: no failure to say
            self.metrics.api_error("backfill", exc.status or None)
            self._warn_once((POD_KEY, key), (f"cannot set the PodGroup of pod {name}: {exc}",),
                            [pod], "BackfillFailed")
            raise
        finally:
            self._patching_pods.discard(key)
        self._warned.pop((POD_KEY, key), None)
        self.metrics.backfilled.inc()
        news = self._news_of(gang_key)
        if news.backend is None:
            news.backend, news.group, news.reason, news.example = backend, gang.name, gang.reason, pod
        news.pods += 1
        news.subgroups += subgroup is not None
        log.debug("backfilled", extra={"fields": {"group": gang_key, "action": "backfill", "pod": name,
                                                   "duration_ms": round((time.perf_counter() - started) * 1000, 2)}})

    def _backfill_subgroup(self, backend: Backend, pod: Obj, gang: rules.Gang, gang_key: str) -> str | None:
        """The subgroup a backfilled pod is labelled with in the same write: the one the rules
        give it (the value :meth:`_label_subgroups` would write later), where the scheduler may
        see it now — its group lists it, or will once podgang writes the group (planned from the
        same cache; a scheduler that ignores a pod naming an unlisted subgroup ignores a pod of
        a group not yet there just the same)."""
        if backend.subgroup_key is None or not gang.subgroup:
            return None
        if gang.leaf:  # a replica's leaf, over the role its template names: as admission gives it
            return gang.subgroup if backend.subgroup_of(pod) != gang.subgroup else None
        if backend.subgroup_of(pod) is not None:
            return None
        if not backend.subgroups_must_be_listed:
            return gang.subgroup if gang.source == rules.OWNED else None
        actual = self.cache.podgroups.of(backend, gang_key)
        if actual is not None and gang.subgroup in (backend.subgroups_of(actual) or {}):
            return gang.subgroup
        desired = desired_group(self.cache, gang_key)
        if desired.backend is backend and gang.subgroup in {s.name for s in desired.subgroups}:
            return gang.subgroup
        return None

    async def _label_subgroups(self, key: str, desired: Desired, actual: Obj | None) -> None:
        """Where the scheduler ignores a pod naming a subgroup its group does not list (KAI),
        the webhook leaves a pod's subgroup key out until the group lists it; once it does,
        the grouper sets it (a label may change on a live pod)."""
        backend = desired.backend
        if backend is None or not backend.subgroups_must_be_listed or backend.subgroup_key is None or actual is None:
            return
        listed = set(backend.subgroups_of(actual) or {})
        section, subgroup_key = backend.subgroup_key
        for pod in desired.members:
            if is_terminating(pod):
                continue
            if obj_key(pod) in self.cache.unlabelled:
                # its backfill carries the subgroup in the same one write
                self.queue.add((POD_KEY, obj_key(pod)))
                continue
            current = backend.subgroup_of(pod)
            leaf = pod_leaf(self.cache, pod)
            if leaf is not None:  # a replica's leaf, whether the group lists it yet or not
                if current == leaf:
                    continue
                wanted = value = leaf
            elif current is None:
                if not listed:
                    continue  # nothing it could be labelled with
                wanted = pod_subgroup(self.cache, pod)
                value = wanted if wanted in listed else None
            elif current not in listed and self._podgang_set_subgroup(pod, current):
                # an earlier podgang labelled every pod of a hand-made group (KAI then ignored
                # the pods of a group without subGroups): take its label off again
                wanted, value = None, None
            else:
                continue
            if value is None and current is None:
                continue
            namespace, name = split_key(obj_key(pod))
            try:
                await self.api.merge_patch(POD.path(namespace, name), {"metadata": {section: {subgroup_key: value}}})
            except ApiError as exc:
                log.info("could not set a pod's subgroup", extra={"fields": {"pod": obj_key(pod), "error": str(exc)}})

    def _podgang_set_subgroup(self, pod: Obj, value: str) -> bool:
        """Whether a pod's subgroup key is one podgang gave it (its workload's name, or
        ``standalone``) rather than one its own template names."""
        chain, complete = self.cache.owner_chain(pod)
        if not complete:
            return False
        top = chain[-1] if chain else None
        if top is not None and rules.template_subgroup(top, self.settings) is not None:
            return False
        return value == (str(top["metadata"].get("name")) if top is not None else rules.STANDALONE)
