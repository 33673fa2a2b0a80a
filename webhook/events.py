"""Events the webhook records without making an admission wait for them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

from podgang.kube import EventRecorder

log = logging.getLogger("podgang.webhook")


class BackgroundEvents:
    """Hands events to a :class:`podgang.kube.EventRecorder` in background tasks:
    the review is answered first, the event follows."""

    def __init__(self, recorder: EventRecorder, max_pending: int = 1000):
        self.recorder = recorder
        self.max_pending = max_pending
        self._tasks: set[asyncio.Task] = set()

    def emit_soon(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        if len(self._tasks) >= self.max_pending:
            log.warning("event dropped: too many pending", extra={"fields": {"reason": reason, "message": message}})
            return
        task = asyncio.get_running_loop().create_task(self.recorder.emit(obj, reason, message, type))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait (bounded) for the events still being written, e.g. at shutdown."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)
