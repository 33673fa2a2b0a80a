"""The decision log: one line per admission decision (review uid, namespace, pod,
group, verdict, reason, patch size, duration).

Through the ``podgang.webhook.decision`` logger by default, so ``--log-format text``,
levels and test capture all work. A ``podgang webhook`` process logging JSON uses
the fast path instead: the same JSON object per line (the fields of
:class:`podgang.logs.JsonFormatter`), encoded with orjson and written to stderr in
batches at most ``flush_interval`` apart. At thousands of reviews per second the
logging module's per-record work and one write per line were a third of the
webhook's time; this costs a few microseconds. Lines are flushed at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, BinaryIO

import orjson

LOGGER = "podgang.webhook.decision"
decisions = logging.getLogger(LOGGER)


class DecisionLog:
    def __init__(self, stream: BinaryIO | None = None, *, flush_interval: float = 0.05, max_buffer: int = 64 * 1024):
        """``stream``: where the fast path writes (binary); None: use the logger."""
        self.stream = stream
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self._buffer = bytearray()
        self._timer: asyncio.TimerHandle | None = None
        self._second = -1
        self._stamp = ""

    @property
    def enabled(self) -> bool:
        return decisions.isEnabledFor(logging.INFO)

    def write(self, fields: dict[str, Any]) -> None:
        if self.stream is None:
            decisions.info("admission", extra={"fields": fields})
            return
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        entry = {
            "ts": f"{self._stamp}.{int((now - second) * 1000):03d}Z",
            "level": "info",
            "logger": LOGGER,
            "msg": "admission",
            **fields,
        }
        self._buffer += orjson.dumps(entry, default=str)
        self._buffer += b"\n"
        if len(self._buffer) >= self.max_buffer:
            self.flush()
        elif self._timer is None:
            try:
                self._timer = asyncio.get_running_loop().call_later(self.flush_interval, self.flush)
            except RuntimeError:  # no loop: write at once
                self.flush()

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._buffer or self.stream is None:
            return
        data, self._buffer = bytes(self._buffer), bytearray()
        try:
            self.stream.write(data)
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed: nothing sensible to do with a log line
            pass


def stderr_stream() -> BinaryIO:
    """A binary stream on file descriptor 2 that does not close it."""
    return os.fdopen(os.dup(2), "wb")
