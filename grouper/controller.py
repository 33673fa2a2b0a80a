"""The grouper's reconcile loop.

Informers feed a slim cache; every change enqueues the keys it touches
(``("g", "namespace/group")`` for a PodGroup, ``("p", "namespace/pod")`` for a
pod to backfill). Workers take one key at a time: compute the desired PodGroup
from the cache through the rules (:mod:`podgang.gang`), compare it with the
cached PodGroup and write only the difference; then feed the gang's counts to
the stale-gang tracker and act on its verdict. Level-triggered and idempotent:
the same state twice writes nothing. Our own writes go back into the cache at
once (write-through), so a burst of events after a scale costs one patch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable, Hashable

from kubernetes_asyncio.client import ApiClient

from podgang.api import Api, ApiError, NamespaceTerminating, RateLimit, describe
from podgang.events import EventSink
from podgang.fence import OPEN, Fence, Fenced
from podgang.metrics import GrouperMetrics
from podgang.settings import Settings

from podgang.gang import stale
from podgang.grouper.announcements import NEVER_PLACED, PLACEABLE, Announcements, GangNews
from podgang.grouper.backfill import Backfill
from podgang.grouper.gangs import GROUP, NEWS, POD_KEY, GangRecords
from podgang.grouper.informer import Informer
from podgang.grouper.owners import OwnerReads
from podgang.gang import Cache, Obj, split_key
from podgang.gang import Desired, desired_group, group_backend, plan_writes, size_held
from podgang.grouper.staleness import Staleness
from podgang.grouper.watches import Watches
from podgang.grouper.writes import WOKEN_ANNOTATION, Writes
from podgang.grouper.workqueue import WorkQueue

log = logging.getLogger("podgang.grouper")

__all__ = ["Controller", "Options", "DEFAULT_API_QPS", "DEFAULT_API_BURST", "GROUP", "POD_KEY", "NEWS", "NEVER_PLACED",
           "PLACEABLE", "WOKEN_ANNOTATION"]

#: the grouper's client-side limit by default (``--kube-api-qps``, ``--kube-api-burst``),
#: from bench/vs-kai: see bench/README.md
DEFAULT_API_QPS = 500.0
DEFAULT_API_BURST = 1000



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


class Controller(Watches, Writes, Staleness, Backfill, Announcements, OwnerReads):
    """The grouper: its watches feed the cache, its workers reconcile one gang (or pod) at a
    time; each concern is a module of its own, mixed in here."""

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
        fence: Fence = OPEN,
        limit: RateLimit | None = None,
    ):
        self.api_client = api_client
        self.settings = settings
        self.options = options or Options()
        self.metrics = metrics or GrouperMetrics()
        self.events = events or EventSink(None)
        self.clock = clock
        self.wall = wall
        # the term of leadership this controller was made in: every write it makes (PodGroups,
        # pods, evictions; its events through the sink's recorder) is checked as it is sent
        self.fence = fence
        # the process's one client limit (its start-up calls took from it too), else its own
        self.limit = limit or RateLimit(self.options.api_qps, self.options.api_burst,
                                        on_wait=self.metrics.rate_limit_wait.inc)
        self.api = Api(api_client, timeout=self.options.request_timeout, field_manager=settings.grouper_field_manager,
                       limit=self.limit, on_call=lambda method: self.metrics.api_calls.labels(method=method).inc(),
                       fence=fence)
        self.cache = Cache(settings)
        self._owner_reads_init()
        # pod backfills wait behind group writes: the group (and the subgroups a pod is
        # labelled with) first, and a catching-up backfill never holds up a scale
        self.queue = WorkQueue(behind=lambda item: item[0] == POD_KEY)
        # namespace -> gang key -> its group created, pods backfilled: not said yet (said per namespace)
        self._news: dict[str, dict[str, GangNews]] = {}
        self._patching_pods: set[str] = set()  # pods whose backfill is being written now
        # pods created a second (a decaying average over about a second), when the last came, and
        # since when the backfills have been held for them (None: not held)
        self._creation_rate, self._created_at, self._yield_since = 0.0, float("-inf"), None
        self._pods_synced = False
        self._backfilling = 0  # backfills being written now
        self.tracker = stale.StaleGangTracker(clock=clock, settings=settings)
        self.replicas = stale.BrokenReplicaTracker(clock=clock)
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
        self.gangs = GangRecords()  # what the grouper remembers of each gang between its looks
        # the problems said as Warning events, by what they are about (a gang, a pod, a workload)
        self._warned: dict[Hashable, frozenset[str]] = {}
        self._failures: dict[Hashable, int] = {}
        self._tasks: list[asyncio.Task] = []
        self.reconciles = 0
        self.writes = 0

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
            for task in [*self._tasks, *self.gangs.evictions()]:
                task.cancel()
            await asyncio.gather(*self._tasks, *self.gangs.evictions(), return_exceptions=True)
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
            except Fenced as exc:
                # no longer leading: the process is stopping, nothing is retried or warned about
                self._failures.pop(item, None)
                log.debug("not leading: nothing written", extra={"fields": {"key": item[1], "error": describe(exc)}})
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

    # ------------------------------------------------------------------ PodGroups

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
        unread = await self._read_owners(key)  # owners no watch brings: their metadata, before deciding
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
        record = self.gangs.of(key)
        record.contributions, record.pinned = dict(desired.contributions), desired.pinned
        await self._orphans(key, desired, started)
        self._problems(key, desired)
        actual = self._actual(key, desired)
        self._say_unread(key, unread, actual)
        self._operator_gang(key, desired, actual)
        self._assumed(key, desired, actual)
        held = size_held(desired, actual, self.settings)
        self._warn_once((GROUP, key, "size"), (held,) if held else (), [actual] if held and actual else [],
                        "MinMemberHeld")
        await self._wake_held_gang(key, desired, actual)
        await self._label_subgroups(key, desired, actual)
        self._observe(key, desired, started)

