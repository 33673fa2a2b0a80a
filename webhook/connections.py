"""Connections that cannot hold the webhook's memory: read deadlines and a bound.

Anyone who reaches the Service can open TLS connections, send headers and then
trickle the body a byte at a time; aiohttp alone holds every such connection for as
long as the client likes (3,000 of them took the webhook from 93 MB to 325 MB, past
the chart's 256Mi limit). The apiserver sends a whole review at once and gives up
after its ``timeoutSeconds`` anyway, so:

- a request's headers must arrive within ``read_header_timeout`` of its first byte,
  and the whole request (headers and body) within ``read_timeout`` (Go's
  ``http.Server`` ReadHeaderTimeout / ReadTimeout); the TLS handshake within
  ``read_header_timeout`` of the connection;
- a connection with no request under way is closed after ``idle_timeout`` (longer
  than the apiserver's own 90 s, so that the apiserver closes its idle connections
  first and never reuses one the webhook is closing);
- at most ``max_connections`` connections are open past the handshake. One more
  evicts the connection whose request has been arriving for longest (the slow
  client), else the connection idle for longest; when every connection is busy in a
  handler, the new one is refused. A review sent whole is read in microseconds, so a
  flood of slow clients cannot starve the apiserver's own connections.

This relies on a few internals of aiohttp's ``RequestHandler`` (its message queue,
its manager and loop), pinned down by tests/test_webhook_slow_clients.py.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from podgang.webhook.metrics import WebhookMetrics

log = logging.getLogger("podgang.webhook")

IDLE, READING, BUSY, CLOSED = range(4)
REPORT_INTERVAL = 10.0  # seconds between two log lines about closed connections
SWEEP_INTERVAL = 0.25  # seconds: read deadlines are kept to within this
SSL_SHUTDOWN_TIMEOUT = 2.0  # a peer that never answers close_notify is dropped after this


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 500
    read_header_timeout: float = 2.0
    read_timeout: float = 4.0
    idle_timeout: float = 120.0

    def problem(self) -> str | None:
        """What is wrong with these limits, in one line, or None."""
        if self.max_connections < 1:
            return f"--max-connections must be at least 1, not {self.max_connections}"
        for flag, value in (("--read-header-timeout", self.read_header_timeout), ("--read-timeout", self.read_timeout),
                            ("--idle-timeout", self.idle_timeout)):
            if not value > 0:
                return f"{flag} must be more than 0 seconds, not {value:g}"
        if self.read_header_timeout > self.read_timeout:
            return (f"--read-header-timeout ({self.read_header_timeout:g}s) must not exceed --read-timeout "
                    f"({self.read_timeout:g}s): the whole request includes its headers")
        return None


class ConnectionTable:
    """The open connections of one server, by what they are doing, oldest first."""

    def __init__(self, limits: ConnectionLimits, metrics: WebhookMetrics):
        self.limits = limits
        self.metrics = metrics
        self.open = 0
        # eviction order: a request under way for longest, a connection that never sent
        # one, then a keep-alive connection idle for longest (the apiserver's, likely)
        self.reading: OrderedDict[GuardedHandler, None] = OrderedDict()
        self.fresh: OrderedDict[GuardedHandler, None] = OrderedDict()
        self.idle: OrderedDict[GuardedHandler, None] = OrderedDict()
        self._closed_since_report: dict[str, int] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self._next_report = 0.0

    def admit(self, handler: GuardedHandler) -> bool:
        """Count a new connection; make room for it, or refuse it (False)."""
        if self.open >= self.limits.max_connections:
            victim = next(iter(self.reading), None) or next(iter(self.fresh), None) or next(iter(self.idle), None)
            if victim is None:
                self.closed("refused", handler)
                return False
            victim.drop("evicted")
        self.open += 1
        self.metrics.connections_open.set(self.open)
        return True

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Check the read deadlines while requests are under way. One sweep every
        :data:`SWEEP_INTERVAL` instead of a timer per request: setting and cancelling a
        timer for every review was 2% of the webhook's time under load."""
        if self._sweeper is None:
            self._sweeper = loop.call_later(min(SWEEP_INTERVAL, self.limits.read_header_timeout / 4), self._sweep, loop)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        self._sweeper = None
        now = loop.time()
        earliest_possible = now - self.limits.read_header_timeout
        expired = []
        for handler in self.reading:  # oldest request first; none began later can have expired
            if handler._request_began > earliest_possible:
                break
            if handler._deadline <= now:
                expired.append(handler)
        for handler in expired:
            handler.too_slow()
        if self.reading:
            self.watch(loop)

    def closed(self, reason: str, handler: GuardedHandler) -> None:
        """Count a connection the server closes on its own; say so in the log at most
        every :data:`REPORT_INTERVAL` seconds (a flood must not flood the log)."""
        self.metrics.connections_closed.labels(reason).inc()
        self._closed_since_report[reason] = self._closed_since_report.get(reason, 0) + 1
        now = handler._loop.time()
        if now >= self._next_report:
            self._next_report = now + REPORT_INTERVAL
            counts, self._closed_since_report = self._closed_since_report, {}
            log.warning(
                "closed connections that were too slow or too many",
                extra={"fields": {**{r.replace("-", "_"): n for r, n in sorted(counts.items())},
                                  "open": self.open, "max_connections": self.limits.max_connections}},
            )


class GuardedHandler(RequestHandler):
    """aiohttp's connection handler, with the deadlines and the bound of this module."""

    __slots__ = ("_table", "_phase", "_deadline", "_request_began", "_payload")

    def __init__(self, table: ConnectionTable, manager: web.Server, **kwargs: Any):
        super().__init__(manager, keepalive_timeout=table.limits.idle_timeout, **kwargs)
        self._table = table
        self._phase = CLOSED
        self._deadline = 0.0  # of the request under way (READING)
        self._request_began = 0.0
        self._payload: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        if not self._table.admit(self):
            self._abort()
            return
        self._phase = IDLE
        self._table.fresh[self] = None

    def data_received(self, data: bytes) -> None:
        if self._phase != READING and self._phase != CLOSED and data:
            # the first byte of a request: its deadlines start now
            table = self._table
            table.fresh.pop(self, None)
            table.idle.pop(self, None)
            table.reading[self] = None
            self._phase = READING
            self._payload = None
            self._request_began = began = self._loop.time()
            self._deadline = began + table.limits.read_header_timeout
            table.watch(self._loop)
        queued = len(self._messages)
        super().data_received(data)
        if self._phase != READING:
            return
        if len(self._messages) > queued:  # the headers are in: the body has until read_timeout
            self._payload = self._messages[-1][1]
            self._deadline = self._request_began + self._table.limits.read_timeout
        if self._payload is not None and self._payload.is_eof():
            self._table.reading.pop(self, None)
            self._phase = BUSY

    async def finish_response(self, request: Any, resp: Any, start_time: float | None) -> Any:
        try:
            return await super().finish_response(request, resp, start_time)
        finally:
            if self._phase == BUSY:
                self._phase = IDLE
                self._table.idle[self] = None

    def connection_lost(self, exc: BaseException | None) -> None:
        self._release()
        super().connection_lost(exc)

    def drop(self, reason: str) -> None:
        """Close this connection now (no TLS goodbye) and count why."""
        self._release()
        self._table.closed(reason, self)
        self._abort()

    # ------------------------------------------------------------------

    def too_slow(self) -> None:
        if self._phase == READING:
            self.drop("read-timeout" if self._payload is not None else "read-header-timeout")

    def _release(self) -> None:
        """Take this connection out of the table (once)."""
        if self._phase == CLOSED:
            return
        self._phase = CLOSED
        table = self._table
        table.reading.pop(self, None)
        table.fresh.pop(self, None)
        table.idle.pop(self, None)
        table.open -= 1
        table.metrics.connections_open.set(table.open)
        self._payload = None

    def _abort(self) -> None:
        transport = self.transport
        self.force_close()
        if transport is not None:
            transport.abort()


class GuardedSite(web.BaseSite):
    """A TLS TCP site whose connections are :class:`GuardedHandler` s."""

    __slots__ = ("_host", "_port", "_table", "_handler_args")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext,
        table: ConnectionTable,
        backlog: int = 1024,
        **handler_args: Any,
    ):
        super().__init__(runner, ssl_context=ssl_context, backlog=backlog)
        self._host, self._port = host, port
        self._table = table
        self._handler_args = handler_args

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        sockets = self._server.sockets if self._server is not None else ()
        return sockets[0].getsockname()[1] if sockets else self._port

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        manager = self._runner.server
        table, handler_args = self._table, {"loop": loop, **self._handler_args}
        self._server = await loop.create_server(
            lambda: GuardedHandler(table, manager, **handler_args),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
            ssl_handshake_timeout=table.limits.read_header_timeout,
            ssl_shutdown_timeout=SSL_SHUTDOWN_TIMEOUT,
        )
