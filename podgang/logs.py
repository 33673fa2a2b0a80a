"""Logging for both processes: one JSON object per line (``--log-format json``, the
default, for log pipelines) or readable text (``--log-format text``, for humans).

Structured fields go in ``extra={"fields": {...}}``; both formats print them.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import sys
import time
from typing import Any

import orjson

LOG_FORMATS = ("json", "text")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            text += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return text


def setup_logging(log_format: str = "json", level: str | int = "INFO") -> None:
    """Send every log record to stderr in the chosen format (replaces handlers)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"--log-format must be one of {', '.join(LOG_FORMATS)}, not {log_format!r}")
    if isinstance(level, str):
        level = level.strip().upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError(f"--log-level must be DEBUG, INFO, WARNING or ERROR, not {level!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # the API client logs every request at DEBUG; keep our level
    logging.getLogger("kubernetes_asyncio").setLevel(max(logging.INFO, root.level))


#: what a connection attempt the API client gave up on (its timeout passed: the apiserver paused,
#: unreachable) raises once the peer answers at last; uvloop then leaves it on a future no one
#: awaits (MagicStack/uvloop#437) and asyncio would log it as an ERROR with a traceback
_ABANDONED = (ConnectionError, TimeoutError, ssl.SSLError)


def quiet_abandoned_connections(loop: asyncio.AbstractEventLoop) -> None:
    """Log a late failure of an abandoned connection as one warning line, without a traceback:
    the request that opened it already failed, was reported and retried. Anything else
    reaches the loop's default handler as before."""
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if context.get("message") == "Future exception was never retrieved" and isinstance(error, _ABANDONED):
            logging.getLogger("podgang").warning(
                "a connection given up on failed later (the request it was for had already failed and been retried)",
                extra={"fields": {"error": type(error).__name__}})
            return
        loop.default_exception_handler(context)
    loop.set_exception_handler(handle)
