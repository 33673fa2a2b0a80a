"""The grouper's reconcile loop.

Informers feed a slim cache; every change enqueues the keys it touches
(``("g", "namespace/group")`` for a PodGroup, ``("p", "namespace/pod")`` for a
pod to backfill). Workers take one key at a time: compute the desired PodGroup
from the cache through the rules (:mod:`grouper.podgroups`), compare it with the
cached PodGroup and write only the difference; then feed the gang's counts to
the stale-gang tracker and act on its verdict. Level-triggered and idempotent:
the same state twice writes nothing. Our own writes go back into the cache at
once (write-through), so a burst of events after a scale costs one patch.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Hashable, Iterable, Mapping

from kubernetes_asyncio.client import ApiClient

from podgang import feasibility, rules
from podgang.api import Api, ApiError, NamespaceTerminating, RateLimit, describe
from podgang.backends import Backend
from podgang.backends.base import slim_fact
from podgang.nodes import NODES
from podgang.events import EventSink
from podgang.kinds import FOLLOWED
from podgang.metrics import GrouperMetrics
from podgang.objects import NAMESPACE, POD, Resource, is_active, is_terminating
from podgang.settings import Settings

from podgang.grouper import eviction, stale
from podgang.grouper.informer import Informer
from podgang.grouper.model import Cache, Obj, key_of, obj_key, resource_version, split_key
from podgang.grouper.podgroups import (
    Desired,
    Write,
    changed_by_others,
    counted_members,
    describe_change,
    desired_group,
    gang_counts,
    group_backend,
    is_managed,
    is_orphan_candidate,
    natural_gang,
    plan_writes,
    pod_gang,
    replica_counts,
    pod_leaf,
    pod_subgroup,
    retired_by,
    rollout_reason,
    size_held,
    subgroup_sizes,
    with_owners,
)
from podgang.grouper.workqueue import WorkQueue

log = logging.getLogger("podgang.grouper")

#: the grouper's client-side limit by default (``--kube-api-qps``, ``--kube-api-burst``),
#: from bench/vs-kai: see bench/README.md
DEFAULT_API_QPS = 500.0
DEFAULT_API_BURST = 1000

GROUP = "g"
POD_KEY = "p"
#: the events of a never-placed verdict (podgang.feasibility), and of its end
NEVER_PLACED = "GangNeverPlaced"
PLACEABLE = "GangNoLongerNeverPlaced"
NEWS = "b"  # say what the grouper did for gangs (created groups, backfilled pods): one event per namespace


@dataclass
class Options:
    namespaces: tuple[str, ...] = ()  # empty: all namespaces
    namespace_selector: str = ""  # a label selector: touch only the namespaces it selects ("": all)
    selector_backends: tuple[str, ...] = ()  # the backends it applies to (empty: every backend)
    workers: int = 32
    request_timeout: float = 10.0
    watch_timeout: int = 300
    resync_period: float = 300.0
    page_size: int = 500
    pod_debounce: float = 0.05  # coalesce a burst of pod events for one gang
    backfill_settle: float = 1.0  # a gang looked at once its pods' backfill is done, not after each pod
    pending_retry: float = 1.0  # an owner not in the cache yet: look again after
    settle_window: float = 30.0  # minMember lowered this recently: the gang is scaling down
    eviction_timeout: float = 10.0
    eviction_attempts: int = 5
    eviction_backoff: float = 1.0
    eviction_retry: float = 10.0  # an eviction was refused (PDB): try again after
    absent_probe_interval: float = 600.0
    max_write_attempts: int = 5
    # the client-side limit of the grouper's API calls (client-go's QPS and burst; qps <= 0: none)
    api_qps: float = DEFAULT_API_QPS
    api_burst: int = DEFAULT_API_BURST
    # pod backfills wait while pods are created faster than this a second (a workload's controller
    # making a job's pods), until none came for yield_quiet, for at most yield_max at a time (0: never)
    backfill_yield_rate: float = 20.0
    yield_quiet: float = 0.5
    yield_max: float = 30.0
    backfill_event_delay: float = 1.0  # a gang's backfill is said once no backfill has waited this long
    backfill_event_max_wait: float = 60.0  # ... or once the first of its pods was backfilled this long ago


class Controller:
    def __init__(
        self,
        api_client: ApiClient,
        settings: Settings,
        options: Options | None = None,
        *,
        metrics: GrouperMetrics | None = None,
        events: EventSink | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ):
        self.api_client = api_client
        self.settings = settings
        self.options = options or Options()
        self.metrics = metrics or GrouperMetrics()
        self.events = events or EventSink(None)
        self.clock = clock
        self.wall = wall
        self.limit = RateLimit(self.options.api_qps, self.options.api_burst, on_wait=self.metrics.rate_limit_wait.inc)
        self.api = Api(api_client, timeout=self.options.request_timeout, field_manager=settings.grouper_field_manager,
                       limit=self.limit, on_call=lambda method: self.metrics.api_calls.labels(method=method).inc())
        self.cache = Cache(settings)
        # pod backfills wait behind group writes: the group (and the subgroups a pod is
        # labelled with) first, and a catching-up backfill never holds up a scale
        self.queue = WorkQueue(behind=lambda item: item[0] == POD_KEY)
        # namespace -> gang key -> its group created, pods backfilled: not said yet (said per namespace)
        self._news: dict[str, dict[str, _GangNews]] = {}
        # gang key -> the resourceVersion of its group the watch brought while its reconcile wrote it ("": none)
        self._writing: dict[str, str] = {}
        self._patching_pods: set[str] = set()  # pods whose backfill is being written now
        # pods created a second (a decaying average over about a second), when the last came, and
        # since when the backfills have been held for them (None: not held)
        self._creation_rate, self._created_at, self._yield_since = 0.0, float("-inf"), None
        self._pods_synced = False
        self._backfilling = 0  # backfills being written now
        self.tracker = stale.StaleGangTracker(clock=clock, settings=settings)
        self.replicas = stale.BrokenReplicaTracker(clock=clock)
        self._gauged: dict[str, set[str]] = {}  # group -> roles with a complete-replicas gauge
        self._evicting_replicas: set[tuple[str, str]] = set()
        self.informers: dict[str, list[Informer]] = {}
        self.podgroup_informers: dict[str, list[Informer]] = {}  # by backend: kinds may be shared
        # informers the grouper does not wait for at start: what refines a decision but is not
        # needed for one (PriorityClasses and queues backends check against, namespaces being deleted)
        self.refining_informers: list[Informer] = []
        self.deleted_namespaces: dict[str, Obj] = {}  # namespaces being deleted (phase Terminating)
        self.selected_namespaces: dict[str, Obj] | None = {} if self.options.namespace_selector else None
        self.synced = False
        self.initial_reconcile_done = False
        self.started_at = clock()
        # per group memory, for messages and timing
        self._contributions: dict[str, tuple[dict[str, int], frozenset[str]]] = {}  # and which were pinned
        self._observed_min: dict[str, int] = {}
        self._lowered_at: dict[str, float] = {}
        self._orphan_seen: dict[str, float] = {}
        self._warned: dict[Hashable, frozenset[str]] = {}
        self._evicting: dict[str, asyncio.Task] = {}
        self._woken: dict[str, float] = {}  # group key -> when its held gang was last woken
        #: group key -> the never-placed verdicts last said of it (kind -> message)
        self._never: dict[str, dict[str, str]] = {}
        self._never_said_on_group: dict[str, dict[str, str]] = {}
        self._failures: dict[Hashable, int] = {}
        self._tasks: list[asyncio.Task] = []
        self.reconciles = 0
        self.writes = 0

    # ------------------------------------------------------------------ wiring

    def _build_informers(self) -> list[Informer]:
        namespaces: tuple[str | None, ...] = tuple(self.options.namespaces) or (None,)
        backends = self.settings.enabled_backends
        kinds: list[tuple[Resource, bool, str | Backend]] = [(POD, False, POD.kind)]
        # with several backends, one whose CRD is not installed is waited for, not fatal
        kinds += [(b.podgroup, b.podgroup.optional or len(backends) > 1, b) for b in backends]
        kinds += [(k.resource, k.resource.optional, k.resource.kind) for k in FOLLOWED]
        out = []
        for resource, optional, source in kinds:
            kind = resource.kind
            for namespace in namespaces:
                informer = Informer(
                    self.api, resource, namespace,
                    store=self.cache.store_for(source),
                    slim=self.cache.slimmer_for(source),
                    keep=lambda obj, kind=kind: self.cache.keep(kind, obj),
                    handler=self._on_change,
                    metrics=self.metrics,
                    watch_timeout=self.options.watch_timeout,
                    page_size=self.options.page_size,
                    optional=optional,
                    absent_probe_interval=self.options.absent_probe_interval,
                )
                if optional:
                    informer.on_presence = lambda present, source=source: self._presence(source, present)
                if isinstance(source, Backend):
                    self.podgroup_informers.setdefault(source.name, []).append(informer)
                else:
                    self.informers.setdefault(kind, []).append(informer)
                out.append(informer)
        for resource in dict.fromkeys(r for b in backends for r in b.fact_resources):
            informer = Informer(
                self.api, resource, None, store=self.cache.fact_stores[resource.label],
                slim=lambda raw, kind=resource.kind: slim_fact(raw, kind),
                keep=lambda obj: True, metrics=self.metrics,
                handler=lambda kind, old, new, label=resource.label: self._fact_changed(label, old, new),
                watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
                optional=True, absent_probe_interval=self.options.absent_probe_interval)
            informer.on_presence = lambda present, label=resource.label: self._fact_presence(label, present)
            self.refining_informers.append(informer)
            out.append(informer)
        # a namespace being deleted takes its gangs with it: their members go on purpose (not
        # needed either: a grouper that may not list namespaces works all the same)
        deleting = Informer(
            self.api, NAMESPACE, None, store=self.deleted_namespaces, slim=_namespace_name,
            keep=lambda obj: True, handler=self._namespace_deleted, metrics=self.metrics,
            watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
            query={"fieldSelector": "status.phase=Terminating"},
        )
        self.refining_informers.append(deleting)
        out.append(deleting)
        if self.selected_namespaces is not None:
            selector = Informer(
                self.api, NAMESPACE, None, store=self.selected_namespaces, slim=_namespace_name,
                keep=lambda obj: True, handler=self._namespace_changed, metrics=self.metrics,
                watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
                query={"labelSelector": self.options.namespace_selector},
            )
            out.append(selector)
        return out

    def _fact_presence(self, label: str, present: bool) -> None:
        """Values are checked against a kind of fact once its first list is complete,
        and no longer while it is not served."""
        if present:
            self.cache.known_facts.add(label)
        else:
            self.cache.known_facts.discard(label)
            self.cache.fact_stores[label].clear()
        self.cache.facts_version += 1
        if self.synced:  # the gangs judged before these facts were known: judge them again
            self._enqueue_everything()

    def _fact_changed(self, label: str, old: Obj | None, new: Obj | None) -> None:
        """A PriorityClass, queue or node came, went or changed what the verdicts read (a node's
        heartbeat changes none of it). The gangs said never placed are judged again at once (a
        node added, a quota raised: said so within seconds); after a queue or a PriorityClass
        changed — rare, and any gang may be in that queue — every gang is."""
        if _without_version(old) == _without_version(new):
            return
        self.cache.facts_version += 1
        if label == NODES.label:
            for key in list(self._never):
                self.queue.add((GROUP, key))
        elif self.synced and label in self.cache.known_facts:
            self._enqueue_everything()

    def _namespace_deleted(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A namespace began to be deleted: its gangs are let go. (Once it is gone there is
        nothing to look at there: its pods went first.)"""
        if new is not None and old is None:
            namespace = obj_key(new).partition("/")[2]
            groups = [key for key in self.cache.all_group_keys() if split_key(key)[0] == namespace]
            log.info("namespace being deleted: its gangs are let go, not judged stale nor written",
                     extra={"fields": {"namespace": namespace, "action": "namespace-deleted", "groups": len(groups)}})
            self._namespace_changed(kind, old, new)

    def being_deleted(self, namespace: str) -> bool:
        """Whether ``namespace`` is being deleted: nothing new can be made in it, and every
        pod in it goes on purpose."""
        return key_of("", namespace) in self.deleted_namespaces

    def _namespace_changed(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A namespace was selected or left the selection, or began to be deleted: look at its
        groups and pods again."""
        namespace = obj_key(new or old or {}).partition("/")[2]
        for key in self.cache.all_group_keys():
            if split_key(key)[0] == namespace:
                self.queue.add((GROUP, key))
        for key in list(self.cache.unlabelled):
            if split_key(key)[0] == namespace:
                self.queue.add((POD_KEY, key))

    def touches(self, namespace: str, backend: Backend | None) -> bool:
        """Whether the grouper may act for ``backend`` in ``namespace`` (``--namespace-selector``)."""
        if self.selected_namespaces is None or backend is None:
            return True
        if self.options.selector_backends and backend.name not in self.options.selector_backends:
            return True
        return key_of("", namespace) in self.selected_namespaces

    def _presence(self, kind: str | Backend, present: bool) -> None:
        if not isinstance(kind, Backend):  # a workload kind: owner walks may end at it, or not
            self.cache.set_watched(kind, present)
        if present:
            self._enqueue_everything()

    def _on_change(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        changes = self.cache.apply(kind, old, new)
        if kind == "Pod" and old is None and new is not None and self._pods_listed():
            self._pod_created()
        if new is not None and old is None:
            self._probe_unserved_owners(new)
        if new is None and old is not None:
            # gone: forget the warnings about it (a bounded memory, and a new
            # object of the same name is warned about afresh)
            if kind == "Pod":
                self._warned.pop((POD_KEY, obj_key(old)), None)
            elif kind in self.cache.workloads:
                self._warned.pop(("w", old["metadata"].get("uid")), None)
                self._warned.pop(("partial", old["metadata"].get("uid")), None)
                self._warned.pop(("staged", old["metadata"].get("uid")), None)
        if new is not None and kind in self.cache.workloads:
            named = rules.template_group(new, self.settings)
            if isinstance(named, rules.Denial) or (old is not None and ("w", old["metadata"].get("uid")) in self._warned):
                problems = (named.message,) if isinstance(named, rules.Denial) else ()
                self._warn_once(("w", new["metadata"].get("uid")), problems, [new], "InvalidPodGroupReference")
            for tag, problem, reason in (
                    ("partial", rules.partial_scope_problem(new, None, self.settings), "GangNeverComplete"),
                    ("staged", rules.staged_problem(new, self.settings), "GangStaged")):
                if problem or (old is not None and (tag, old["metadata"].get("uid")) in self._warned):
                    self._warn_once((tag, new["metadata"].get("uid")), (problem,) if problem else (), [new], reason)
        delay = 0.0 if changes.urgent else self.options.pod_debounce
        if kind == "Pod" and obj_key(new or old or {}) in self._patching_pods:
            # the grouper's own backfill of the gang's pods (its answer, or the watch's echo of it first)
            delay = max(delay, self.options.backfill_settle)
        group_changed = bool(changes.groups) and self.cache.is_podgroup_kind(kind)
        for key in changes.groups:
            if group_changed and key in self._writing:
                # while its reconcile writes it: its own write, unless the answer says otherwise
                self._writing[key] = resource_version(new) if new is not None else "gone"
                continue
            self.queue.add((GROUP, key), delay)
        for key in changes.pods:
            self.queue.add((POD_KEY, key), delay)

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

    def _probe_unserved_owners(self, obj: Obj) -> None:
        """A new object owned by a kind podgang follows but found not served: its operator
        (its CRD) was installed since that kind was last probed for. Look now, or its pods
        would wait for the next probe without a PodGroup."""
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
            kind = ref.get("kind")
            if kind in self.cache.watched_kinds or not isinstance(ref.get("apiVersion"), str):
                continue
            group = ref["apiVersion"].rpartition("/")[0]
            for informer in self.informers.get(kind, ()):
                if informer.resource.group == group:
                    informer.probe_soon()

    def _enqueue_everything(self) -> None:
        for key in self.cache.all_group_keys():
            self.queue.add((GROUP, key))
        for key in list(self.cache.unlabelled):
            self.queue.add((POD_KEY, key))

    def _upsert(self, kind: str | Backend, raw: dict[str, Any]) -> None:
        """Put what the grouper just wrote in the cache. A write that worked is also word that
        the resource is served: a scheduler (its PodGroup CRD) installed after the grouper
        started is watched from its first group on, not from the next probe."""
        informers = self._informers_of(kind)
        if informers:
            informers[0].upsert(raw)
            for informer in informers:
                informer.probe_soon()

    def _forget(self, kind: str | Backend, raw: dict[str, Any]) -> None:
        informers = self._informers_of(kind)
        if informers:
            informers[0].remove(raw)

    def _informers_of(self, kind: str | Backend) -> list[Informer] | None:
        """The informers of a kind, or of a backend's PodGroups."""
        if isinstance(kind, Backend):
            return self.podgroup_informers.get(kind.name)
        return self.informers.get(kind)

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """Watch, reconcile and keep going until cancelled."""
        self.started_at = self.clock()
        self.events.start()
        informers = self._build_informers()
        try:
            self._tasks = [asyncio.create_task(i.run(), name=f"watch {i.name}") for i in informers]
            # the refining informers: a grouper that may not read PriorityClasses, queues or
            # namespaces (or not yet) works all the same, with those values unchecked
            waiting = {asyncio.create_task(i.synced.wait()) for i in informers if i not in self.refining_informers}
            try:
                while waiting:
                    done, _ = await asyncio.wait([*waiting, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        if task in waiting:
                            waiting.discard(task)
                        else:
                            task.result()  # a watch loop died: re-raise why
                            raise RuntimeError(f"{task.get_name()} ended")
            finally:
                for task in waiting:
                    task.cancel()
            self.synced = True
            self.metrics.synced.set(1)
            log.info("caches synced", extra={"fields": {
                "pods": len(self.cache.pods), "podgroups": len(self.cache.podgroups),
                "workloads": sum(len(s) for s in self.cache.workloads.values()),
                "duration_ms": round((self.clock() - self.started_at) * 1000, 1)}})
            self._enqueue_everything()
            self._tasks += [asyncio.create_task(self._worker(), name=f"worker {n}")
                            for n in range(self.options.workers)]
            self._tasks.append(asyncio.create_task(self._housekeeping(), name="housekeeping"))
            await self.queue.wait_idle()
            self.initial_reconcile_done = True
            took = self.clock() - self.started_at
            self.metrics.initial_reconcile_seconds.set(took)
            log.info("first complete reconcile done", extra={"fields": {
                "groups": len(self.cache.podgroups), "writes": self.writes, "reconciles": self.reconciles,
                "duration_ms": round(took * 1000, 1)}})
            await asyncio.gather(*self._tasks)
        finally:
            for task in [*self._tasks, *self._evicting.values()]:
                task.cancel()
            await asyncio.gather(*self._tasks, *self._evicting.values(), return_exceptions=True)
            self.queue.close()
            await self.events.stop()

    def ready(self) -> tuple[bool, str]:
        if not self.synced:
            return False, "waiting for the caches to sync"
        if not self.initial_reconcile_done:
            return False, "first reconcile in progress"
        return True, "ok"

    async def _housekeeping(self) -> None:
        last_resync = self.clock()
        resync = self.options.resync_period  # 0 (or less): no periodic resync, as in client-go
        while True:
            await asyncio.sleep(min(5.0, resync) if resync > 0 else 5.0)
            self.metrics.queue_depth.set(len(self.queue))
            self.metrics.backfill_waiting.set(len(self.cache.unlabelled))
            self.metrics.cached_objects.labels(kind="Pod").set(len(self.cache.pods))
            self.metrics.cached_objects.labels(kind="PodGroup").set(len(self.cache.podgroups))
            for kind, store in self.cache.workloads.items():
                self.metrics.cached_objects.labels(kind=kind).set(len(store))
            if resync > 0 and self.clock() - last_resync >= resync:
                last_resync = self.clock()
                self._enqueue_everything()

    async def _worker(self) -> None:
        while True:
            item = await self.queue.get()
            started = time.perf_counter()
            result = "ok"
            try:
                if item[0] == GROUP:
                    await self.reconcile_group(item[1])
                elif item[0] == NEWS:
                    self._say_news(item[1])
                else:
                    await self.backfill_pod(item[1])
                self._failures.pop(item, None)
            except asyncio.CancelledError:
                raise
            except NamespaceTerminating as exc:
                # deleted before the namespace watch said so: nothing to retry, its watch event
                # lets the gang go
                self._failures.pop(item, None)
                log.debug("namespace being deleted: not retried", extra={"fields": {
                    "key": item[1], "error": describe(exc)}})
            except Exception as exc:
                result = "error"
                failures = self._failures[item] = self._failures.get(item, 0) + 1
                retry = min(0.5 * 2 ** min(failures, 8), 60.0)
                level = logging.WARNING if isinstance(exc, ApiError) else logging.ERROR
                log.log(level, "reconcile failed: retrying", exc_info=not isinstance(exc, ApiError),
                        extra={"fields": {"key": item[1], "error": describe(exc), "retry_in_s": retry}})
                self.queue.add(item, retry)
            finally:
                self.queue.done(item)
                self.reconciles += 1
                if item[0] != NEWS:
                    self.metrics.reconcile_seconds.labels(
                        kind="podgroup" if item[0] == GROUP else "pod", result=result
                    ).observe(time.perf_counter() - started)

    # ------------------------------------------------------------------ decisions log

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

    # ------------------------------------------------------------------ PodGroups

    def _actual(self, key: str, desired: Desired) -> Obj | None:
        """The cached PodGroup ``key`` of the desired group's backend."""
        return self.cache.podgroups.of(desired.backend, key)

    async def reconcile_group(self, key: str) -> None:
        started = time.perf_counter()
        desired: Desired | None = None
        if not self.touches(split_key(key)[0], group_backend(self.cache, key)):
            return  # outside --namespace-selector: not ours to touch (nor worth deciding)
        if self.being_deleted(split_key(key)[0]):
            # its members leave on purpose, and nothing new can be made there: neither judged
            # stale nor evicted, its PodGroup neither made nor resized
            self._unwatch(key, contributions=True)
            return
        for _attempt in range(self.options.max_write_attempts):
            desired = desired_group(self.cache, key)
            if desired.pending:
                log.debug("cannot decide yet", extra={"fields": {"group": key, "reason": desired.pending}})
                self.queue.add((GROUP, key), self.options.pending_retry)
                return
            actual = self._actual(key, desired)
            self._changed_by_others(key, desired, actual)  # before podgang writes its size back over it
            writes = plan_writes(desired, actual, self.settings)
            if not writes:
                break
            try:
                if not await self._write(key, writes[0], desired, actual, started):
                    continue  # the cache was refreshed: plan again
                if len(writes) == 1:
                    break  # the group is as planned: the answer is in the cache
            except NamespaceTerminating:
                self._unwatch(key, contributions=True)  # as above: the namespace is being deleted
                raise
            except ApiError:
                # the write is warned about and retried, but the gang is still
                # watched: a PodGroup that refuses its new size can go stale too
                assert desired is not None
                self._observe(key, desired, started)
                raise
        else:
            raise RuntimeError(f"PodGroup {key} kept changing under {self.options.max_write_attempts} writes")
        assert desired is not None
        self._warned.pop((GROUP, key, "write"), None)  # writes work again: warn about the next failure
        self._contributions[key] = (dict(desired.contributions), desired.pinned)
        await self._orphans(key, desired, started)
        self._problems(key, desired)
        actual = self._actual(key, desired)
        self._operator_gang(key, desired, actual)
        held = size_held(desired, actual, self.settings)
        self._warn_once((GROUP, key, "size"), (held,) if held else (), [actual] if held and actual else [],
                        "MinMemberHeld")
        await self._wake_held_gang(key, desired, actual)
        await self._label_subgroups(key, desired, actual)
        self._observe(key, desired, started)

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

    def _unwatch(self, key: str, *, contributions: bool) -> None:
        """Stop judging a gang: forget its stale state and sizes (and what its workloads
        contributed, when the group is gone for good)."""
        self.tracker.forget(key)
        if contributions and (self._never.pop(key, None) is not None):
            self._never_said_on_group.pop(key, None)
            self._count_never()
        self._warned.pop(("operator", key), None)
        self.replicas.forget(key)
        self._gauge_replicas(key, ())
        self._observed_min.pop(key, None)
        self._lowered_at.pop(key, None)
        if contributions:
            self._contributions.pop(key, None)
        self.metrics.stale_gangs_now.set(len(self.tracker.stale_groups()))

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
            self._woken.pop(key, None)
            return
        bound = sum(1 for p in desired.members if p.get("spec", {}).get("nodeName"))
        if (any(is_terminating(p) for p in desired.members) or bound == len(desired.members)
                or bound >= (backend.min_member(actual) or 1)):
            self._woken.pop(key, None)
            return
        now = self.clock()
        last = self._woken.get(key)
        if last is None:
            self._woken[key] = now  # the scheduler has its first try: wake it only if it keeps waiting
        elif now - last >= interval:
            self._woken[key] = now
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.wall()))
            try:
                await self.api.merge_patch(backend.podgroup.path(*split_key(key)),
                                           {"metadata": {"annotations": {WOKEN_ANNOTATION: stamp}}})
            except ApiError as exc:
                log.info("could not wake a held gang", extra={"fields": {"group": key, "error": str(exc)}})
        self.queue.add((GROUP, key), max(interval - (now - self._woken[key]), 0.0) + 0.01)

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
        before = self._never.get(key, {})
        # an owner-less pod is its own workload: said on it too, where its user looks
        owner_less = [p for p in desired.members[:1] if desired.source == rules.OWNER_LESS]
        self._say_changes(before, current, list(desired.workloads) or owner_less)
        said_on_group = self._never_said_on_group.get(key, {})
        if actual is not None:
            self._say_changes(said_on_group, current, [actual])
            self._never_said_on_group[key] = current
        if not current:
            self._never_said_on_group.pop(key, None)
        if current != before:
            if current:
                self._never[key] = current
            else:
                self._never.pop(key, None)
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
        for kind, count in feasibility.counts(self._never.values()).items():
            self.metrics.never_placed_gangs.labels(verdict=kind).set(count)

    async def _patch(self, key: str, backend: Backend, path: str, body: Any) -> Obj:
        """Merge-patch a gang's PodGroup, by its reconcile, and keep the answer in the cache."""
        return await self._own(key, backend, self.api.merge_patch(path, body))

    async def _own(self, key: str, backend: Backend, call: Awaitable[Obj]) -> Obj:
        """A gang's reconcile writing its own group, the answer kept in the cache. Neither the
        answer nor the watch's echo of the write (which may come first) queues the gang again:
        the pass goes on from the answer (a created group was otherwise planned twice more for
        nothing). A change of another resourceVersion seen meanwhile does."""
        self._writing[key] = ""
        answer: Obj | None = None
        try:
            answer = await call
            self.writes += 1
            self._upsert(backend, answer)
            return answer
        finally:
            seen = self._writing.pop(key, "")
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
                self._observed_min[key] = mm.value
                return True
            if write.action == "patch-min-member":
                patched = await self._patch(key, backend, path, write.body)
                old, new = write.old, write.new
                mm = desired.min_member
                assert mm is not None and new is not None
                if mm.pinned or (desired.size_rule is not None and desired.size_rule.first_look):
                    cause = mm.reason  # a hand-made group's first look: the rule that decided, and its evidence
                else:
                    before, pinned_before = self._contributions.get(key) or (None, frozenset())
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
            self._orphan_seen.pop(key, None)
            return
        assert actual is not None
        now = self.clock()
        first = self._orphan_seen.setdefault(key, now)
        age = now - first
        created = _parse_time(actual["metadata"].get("creationTimestamp"))
        if created is not None:
            # the younger of the two ages: never delete early because of clock skew
            age = min(age, max(self.wall() - created, 0.0))
        timeout = self.settings.orphan_timeout
        if age < timeout:
            self.queue.add((GROUP, key), timeout - age + 0.05)
            return
        namespace, name = split_key(key)
        assert desired.backend is not None  # it holds the group
        await self._delete_podgroup(desired.backend, actual)
        self._orphan_seen.pop(key, None)
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

    # ------------------------------------------------------------------ stale gangs

    def _observe(self, key: str, desired: Desired, started: float) -> None:
        actual = self._actual(key, desired)
        if actual is None or desired.source is None:
            self._unwatch(key, contributions=actual is None and not desired.members)
            return
        assert desired.backend is not None  # it holds the group
        if desired.min_member is not None and (desired.min_subgroup is not None
                                               or size_held(desired, actual, self.settings)):
            # the live group cannot take its new size: the gang is judged by the size in force;
            # a tree's leaves come and go with its replicas' pods: judged by the whole tree's size
            min_member = desired.min_member.value
        else:
            min_member = desired.backend.min_member(actual) or 1
        previous = self._observed_min.get(key)
        now = self.clock()
        if previous is not None and min_member < previous:
            self._lowered_at[key] = now
        self._observed_min[key] = min_member
        settling = rollout_reason(desired, self.cache)
        lowered = self._lowered_at.get(key)
        if settling is None and lowered is not None:
            if now - lowered < self.options.settle_window:
                settling = f"minMember lowered {now - lowered:.1f}s ago: scaling down"
                # nothing else may happen when the window closes: look again then, or a
                # member lost during the scale-down would wait for the next resync
                self.queue.add((GROUP, key), lowered + self.options.settle_window - now + 0.01)
            else:
                del self._lowered_at[key]
        counts = gang_counts(counted_members(self.cache, desired))
        if (previous is None and not self.initial_reconcile_done and settling is None and not counts.succeeded
                and 0 < counts.active < min_member and len(counts.remaining) < min_member):
            # First look after a (re)start, and the gang has bound members but fewer
            # pods than minMember at all: under a gang scheduler its members were only
            # bound once it was complete, so it was satisfied and lost pods while no
            # grouper watched (a restart, a leader change). Without this it would
            # never be found stale. (Pods still Pending may be a scale-up waiting for
            # capacity: no assumption then.)
            self.tracker.assume_satisfied(key, min_member)
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
            self.events.emit(actual, "GangStale", f"{verdict.message}; {evictor}" if evictor else verdict.message)
            self._decision(key, "stale", verdict.message, started, active=counts.active, minMember=min_member,
                           grace=grace_why)
        elif action == stale.RECOVERED:
            self.metrics.recovered_gangs.inc()
            self.events.emit(actual, "GangRecovered", verdict.message)
            self._decision(key, "recovered", verdict.message, started, active=counts.active, minMember=min_member)
        elif action == stale.EVICT and evictor:
            self._decision(key, "leave-to-scheduler", f"{verdict.message}; {evictor}", started)
        elif action == stale.EVICT:
            if key not in self._evicting:
                self._evicting[key] = asyncio.create_task(self._evict(key, verdict.message), name=f"evict {key}")
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
        for role in self._gauged.get(key, set()) - set(roles):
            for kind in ("complete", "minimum"):
                with contextlib.suppress(KeyError):
                    self.metrics.complete_replicas.remove(key, role, kind)
        for role, s in roles.items():
            self.metrics.complete_replicas.labels(key, role, "complete").set(s.active)
            self.metrics.complete_replicas.labels(key, role, "minimum").set(s.min_member)
        if roles:
            self._gauged[key] = set(roles)
        else:
            self._gauged.pop(key, None)

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
                self.events.emit(actual, "ReplicaRecovered", v.message)
                self._decision(key, "replica-recovered", v.message, started, replica=v.leaf)
            elif v.action == stale.EVICT and (key, v.leaf) not in self._evicting_replicas:
                self._evicting_replicas.add((key, v.leaf))
                task = asyncio.create_task(self._evict(key, v.message, v.leaf), name=f"evict {key} {v.leaf}")
                self._evicting[f"{key}#{v.leaf}"] = task
            if v.deadline is not None:
                self.queue.add((GROUP, key), max(v.deadline - self.clock(), 0.0) + 0.01)

    async def _evict(self, key: str, why: str, leaf: str | None = None) -> None:
        """Evict the remaining members of a stale gang — or, with ``leaf``, only those of
        one broken replica of it (the rest of the gang untouched)."""
        started = time.perf_counter()
        retry = False
        task_key = key if leaf is None else f"{key}#{leaf}"
        try:
            desired = desired_group(self.cache, key)
            pods = list(gang_counts(desired.members).remaining)
            if leaf is not None:
                pods = [p for p in pods if pod_leaf(self.cache, p) == leaf
                        or (desired.backend is not None and desired.backend.subgroup_of(p) == leaf)]
            result = await eviction.evict_pods(
                self.api_client, pods, timeout=self.options.eviction_timeout,
                attempts=self.options.eviction_attempts, backoff=self.options.eviction_backoff,
            )
            actual = self._actual(key, desired)
            what, action = ("GangEvicted", "evict") if leaf is None else ("ReplicaEvicted", "evict-replica")
            if result.evicted:
                self.metrics.evictions.labels(result="evicted").inc(len(result.evicted))
                names = ", ".join(result.evicted[:10]) + (" …" if len(result.evicted) > 10 else "")
                message = f"{why}: evicted {len(result.evicted)} pod{'s' if len(result.evicted) != 1 else ''} ({names})"
                held = size_held(desired, actual, self.settings) if leaf is None else None
                if held:  # the replacements rejoin the live group at once: it is never empty
                    message += f"; the replacements join the live group, whose size stays until the gang is empty ({held})"
                if actual is not None:
                    self.events.emit(actual, what, message)
                self._decision(key, action, message, started, evicted=len(result.evicted),
                               **({"replica": leaf} if leaf else {}))
            elif not result.refused:
                # a decision all the same: say so, rather than nothing at all
                message = f"{why}: nothing left to evict ({len(result.gone)} already gone)"
                self._decision(key, action, message, started, evicted=0, gone=len(result.gone))
            if result.refused:
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
            self._evicting.pop(task_key, None)
            self._evicting_replicas.discard((key, leaf or ""))
            self.metrics.stale_gangs_now.set(len(self.tracker.stale_groups()))
        if retry:
            self.queue.add((GROUP, key), self.options.eviction_retry)
        else:
            self.queue.add((GROUP, key))

    # ------------------------------------------------------------------ backfill

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

    def _news_of(self, gang_key: str) -> "_GangNews":
        """What is to be said about a gang, said once the grouper's work on it has settled."""
        namespace = split_key(gang_key)[0]
        news = self._news.setdefault(namespace, {}).get(gang_key)
        if news is None:
            news = self._news[namespace][gang_key] = _GangNews(self.clock())
        self.queue.add((NEWS, gang_key), self.options.backfill_event_delay)
        return news

    def _news_waits(self, gang_key: str, news: "_GangNews") -> bool:
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

    def _news_text(self, gang_key: str, news: "_GangNews") -> str:
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
class _GangNews:
    """What the grouper did for one gang since it last said so."""

    since: float
    created: tuple[Obj, str] | None = None  # the group it created, and the message
    backend: Backend | None = None  # of the pods backfilled
    group: str = ""
    reason: str = ""
    example: Obj | None = None  # a pod backfilled: where the event goes while the group is not there
    pods: int = 0
    subgroups: int = 0


def _parse_time(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text.replace("Z", "")[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _namespace_name(raw: Any) -> Obj:
    """A selected namespace, as the selector's store keeps it: its name."""
    md = raw.get("metadata") or {}
    return {"metadata": {"name": md.get("name"), "namespace": "", "resourceVersion": md.get("resourceVersion")}}


#: written on a held coscheduling gang's PodGroup every 20 s: the plugin tries the gang again
WOKEN_ANNOTATION = "podgang.io/woken-at"


def _without_version(obj: Obj | None) -> Any:
    """A slimmed fact without its resourceVersion: what the verdicts read of it."""
    if obj is None:
        return None
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": md}
