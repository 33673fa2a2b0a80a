"""Events off the hot path: the reconciler hands an event to :class:`EventSink`
and moves on; a few background writers record it through
:class:`podgang.kube.EventRecorder` (which folds repeats into a count).

A full queue drops events (logged) rather than slowing reconciliation down.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Mapping

from podgang.kube import EventRecorder

log = logging.getLogger("podgang.grouper.events")


class EventSink:
    def __init__(self, recorder: EventRecorder | None, *, writers: int = 4, capacity: int = 10_000,
                 history: int = 1000):
        self.recorder = recorder
        self.writers = writers
        self._queue: asyncio.Queue[tuple[Mapping[str, Any], str, str, str]] = asyncio.Queue(capacity)
        self._tasks: list[asyncio.Task] = []
        self.history: deque[tuple[str, str, str, str]] = deque(maxlen=history)  # (object, type, reason, message)
        self.dropped = 0

    def emit(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        md = obj.get("metadata") or {}
        self.history.append((f"{str(obj.get('kind') or '').lower()}/{md.get('namespace')}/{md.get('name')}",
                             type, reason, message))
        if self.recorder is None:
            return
        try:
            self._queue.put_nowait((obj, reason, message, type))
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("event queue full: event dropped", extra={"fields": {"reason": reason, "message": message}})

    def start(self) -> None:
        if self.recorder is None or self._tasks:
            return
        self._tasks = [asyncio.create_task(self._write(), name=f"events-{i}") for i in range(self.writers)]

    async def _write(self) -> None:
        assert self.recorder is not None
        while True:
            obj, reason, message, type = await self._queue.get()
            try:
                await self.recorder.emit(obj, reason, message, type)
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float = 5.0) -> None:
        if self._tasks:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except asyncio.TimeoutError:
                pass

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except BaseException:
                pass
        self._tasks = []
