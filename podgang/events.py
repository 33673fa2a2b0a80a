"""core/v1 Events for both processes — what `kubectl describe` shows an operator
about podgang's decisions — kept off the hot path: an admission or a reconcile hands
an event to :class:`EventSink` and moves on; a few background writers record it
through :class:`EventRecorder` (which folds repeats into a count).

A full queue drops the event (logged, counted) rather than slowing the caller
down; stopping writes what is queued, for a bounded time, before it gives up.

Given a fence (:mod:`podgang.fence`: the grouper's term of leadership), the recorder
checks it as each Event is sent, and the sink drops what is queued — never flushes it —
once the term is over: a leader that lost its Lease says nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kubernetes_asyncio import client

from podgang.api import Api, NamespaceTerminating, describe
from podgang.fence import Fence, Fenced

log = logging.getLogger("podgang.events")

def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A core/v1 ObjectReference to ``obj`` (for an event's involvedObject)."""
    md = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": md.get("name"),
        "namespace": md.get("namespace"),
        "uid": md.get("uid"),
        "resourceVersion": md.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first: str


class EventRecorder:
    """Records core/v1 Events that tell an operator what happened and why.

    A repeat of the same (object, type, reason, message) within ten minutes
    increments the existing event's count instead of creating another. Never
    raises: an event that cannot be written is logged and dropped.
    """

    REPEAT_WINDOW = 600.0
    MAX_REMEMBERED = 4096  # events remembered for counting repeats; the oldest go first

    def __init__(self, api: client.ApiClient, component: str, *, instance: str = "", timeout: float = 5.0,
                 fence: Fence | None = None):
        self._api = Api(api, timeout=timeout, fence=fence)
        self.fence = fence
        self.component = component
        self.instance = instance or os.environ.get("HOSTNAME", "") or component
        self.timeout = timeout
        self._seen: OrderedDict[tuple, tuple[float, _Seen]] = OrderedDict()

    async def emit(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        ref = object_reference(obj)
        namespace = ref.get("namespace") or "default"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        key = (ref.get("uid") or (ref.get("kind"), namespace, ref.get("name")), type, reason, message)
        mono = time.monotonic()
        self._forget_old(mono)
        try:
            seen = self._seen.get(key)
            if seen is not None:
                entry = seen[1]
                entry.count += 1
                await self._api.merge_patch(
                    f"/api/v1/namespaces/{entry.namespace}/events/{entry.name}",
                    {"count": entry.count, "lastTimestamp": now},
                )
                self._seen[key] = (mono, entry)
                self._seen.move_to_end(key)
                return
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{ref.get('name', 'podgang')}.", "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message[:1024],
                "type": type,
                "source": {"component": self.component},
                "reportingComponent": f"podgang.io/{self.component}",
                "reportingInstance": self.instance[:128],
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            created = await self._api.create(f"/api/v1/namespaces/{namespace}/events", body)
            name = created["metadata"]["name"]
            self._seen[key] = (mono, _Seen(name, namespace, 1, now))
        except Exception as exc:  # events are best effort by design
            self._seen.pop(key, None)
            # an event in a namespace being deleted is lost with it anyway: not worth a warning
            # nor one a leader no longer leading may not send (the fence): it is dropped on purpose
            log.log(
                logging.DEBUG if isinstance(exc, (NamespaceTerminating, Fenced)) else logging.WARNING,
                "could not record event",
                extra={"fields": {"reason": reason, "object": ref.get("name"), "error": describe(exc)}},
            )

    def _forget_old(self, now: float) -> None:
        """Drop repeats older than the window, and the oldest beyond the bound."""
        while self._seen:
            key, (seen_at, _) = next(iter(self._seen.items()))
            if now - seen_at <= self.REPEAT_WINDOW and len(self._seen) < self.MAX_REMEMBERED:
                break
            del self._seen[key]


QueuedEvent = tuple[Mapping[str, Any], str, str, str]  # (object, reason, message, type)


class EventSink:
    """A bounded queue of events and ``writers`` tasks that record them.

    ``recorder`` None: events are discarded (a process without API access).
    ``on_drop``: called once per event dropped because the queue was full
    (the processes count it in their metrics). ``fence``: once it is no longer held,
    events are dropped — those queued, those emitted after — and never flushed
    (``recorder``'s own fence, if it has one and none is given).
    """

    def __init__(
        self,
        recorder: EventRecorder | None,
        *,
        writers: int = 4,
        capacity: int = 10_000,
        on_drop: Callable[[], None] | None = None,
        fence: Fence | None = None,
    ):
        if writers < 1 or capacity < 1:
            raise ValueError(f"an event sink needs at least one writer and room for one event "
                             f"(writers={writers}, capacity={capacity})")
        self.recorder = recorder
        self.writers = writers
        self.on_drop = on_drop
        self.fence = fence if fence is not None else getattr(recorder, "fence", None)
        self.dropped = 0
        self.fenced = 0  # events dropped because the fence was no longer held
        self._queue: asyncio.Queue[QueuedEvent] = asyncio.Queue(capacity)
        self._tasks: list[asyncio.Task] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        """Queue an event; never blocks, never raises."""
        if self.recorder is None:
            return
        if not self._held():
            self.fenced += 1
            return
        try:
            self._queue.put_nowait((obj, reason, message, type))
        except asyncio.QueueFull:
            self.dropped += 1
            if self.on_drop is not None:
                self.on_drop()
            log.warning("event queue full: event dropped", extra={"fields": {"reason": reason, "message": message[:200]}})

    def start(self) -> None:
        """Start the writers (in the running event loop); a second call does nothing."""
        if self.recorder is None or self._tasks:
            return
        self._tasks = [asyncio.create_task(self._write(), name=f"podgang-events-{i}") for i in range(self.writers)]

    def _held(self) -> bool:
        return self.fence is None or self.fence.held

    def _drop_queued(self, also: int = 0) -> int:
        """Empty the queue without writing it (the fence is down; ``also``: events taken
        off it already, dropped too); how many were dropped."""
        dropped = 0
        while True:
            try:
                self._queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            self._queue.task_done()
            dropped += 1
        self.fenced += dropped
        if dropped + also:
            log.info("no longer leading: queued events dropped, not written", extra={"fields": {
                "dropped": dropped + also, "why": self.fence.problem() if self.fence is not None else ""}})
        return dropped

    async def _write(self) -> None:
        assert self.recorder is not None
        while True:
            obj, reason, message, type = await self._queue.get()
            try:
                if not self._held():
                    self.fenced += 1
                    self._drop_queued(also=1)
                    continue
                await self.recorder.emit(obj, reason, message, type)
            except Exception:  # the recorder never raises; a writer must not die if it does
                log.exception("recording an event failed", extra={"fields": {"reason": reason}})
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every queued event is written, at most ``timeout`` seconds;
        whether it was."""
        if not self._tasks:
            return self._queue.empty()
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued (bounded by ``timeout``), then stop the writers; with the
        fence down, drop what is queued instead."""
        if not self._held():
            self._drop_queued()
        elif self._tasks and not await self.flush(timeout):
            log.warning("stopping with events not written", extra={"fields": {"queued": self._queue.qsize()}})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
