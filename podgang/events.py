"""Events off the hot path, for both processes: an admission or a reconcile hands
an event to :class:`EventSink` and moves on; a few background writers record it
through :class:`podgang.kube.EventRecorder` (which folds repeats into a count).

A full queue drops the event (logged, counted) rather than slowing the caller
down; stopping writes what is queued, for a bounded time, before it gives up.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Mapping

from podgang.kube import EventRecorder

log = logging.getLogger("podgang.events")

QueuedEvent = tuple[Mapping[str, Any], str, str, str]  # (object, reason, message, type)


class EventSink:
    """A bounded queue of events and ``writers`` tasks that record them.

    ``recorder`` None: events are discarded (a process without API access).
    ``on_drop``: called once per event dropped because the queue was full
    (the processes count it in their metrics).
    """

    def __init__(
        self,
        recorder: EventRecorder | None,
        *,
        writers: int = 4,
        capacity: int = 10_000,
        on_drop: Callable[[], None] | None = None,
    ):
        if writers < 1 or capacity < 1:
            raise ValueError(f"an event sink needs at least one writer and room for one event "
                             f"(writers={writers}, capacity={capacity})")
        self.recorder = recorder
        self.writers = writers
        self.on_drop = on_drop
        self.dropped = 0
        self._queue: asyncio.Queue[QueuedEvent] = asyncio.Queue(capacity)
        self._tasks: list[asyncio.Task] = []

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        """Queue an event; never blocks, never raises."""
        if self.recorder is None:
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

    async def _write(self) -> None:
        assert self.recorder is not None
        while True:
            obj, reason, message, type = await self._queue.get()
            try:
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
        """Write what is queued (bounded by ``timeout``), then stop the writers."""
        if self._tasks and not await self.flush(timeout):
            log.warning("stopping with events not written", extra={"fields": {"queued": self._queue.qsize()}})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
