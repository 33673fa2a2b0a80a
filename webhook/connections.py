"""Connections that cannot hold the webhook's memory: read deadlines and a bound.

Anyone who reaches the Service can open TLS connections, send headers and then
trickle the body a byte at a time; aiohttp alone holds every such connection for as
long as the client likes (3,000 of them took the webhook from 93 MB to 325 MB, past
the chart's 256Mi limit). The apiserver sends a whole review at once and gives up
after its ``timeoutSeconds`` anyway, so:

- a request's headers must arrive within ``read_header_timeout`` of its first byte,
  and the whole request (headers and body) within ``read_timeout`` (Go's
  ``http.Server`` ReadHeaderTimeout / ReadTimeout); the TLS handshake within
  ``read_header_timeout`` of the accept;
- a connection with no request under way is closed after ``idle_timeout`` (longer
  than the apiserver's own 90 s, so that the apiserver closes its idle connections
  first and never reuses one the webhook is closing);
- at most ``max_connections`` sockets are held, counted from their accept (a socket
  in its TLS handshake holds ~50 KB too). One more evicts the connection whose
  request has been arriving for longest (the slow client), else one that never sent
  a request; keep-alive connections between requests (the apiserver's) and requests
  being decided are never evicted. With nothing to evict, the webhook stops
  accepting and the kernel's backlog holds new connections until one goes. A review
  sent whole is read in microseconds, so a flood of slow clients cannot starve the
  apiserver's connections.

This relies on a few internals of aiohttp's ``RequestHandler`` (its message queue,
its manager and loop), pinned down by tests/test_webhook_slow_clients.py.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from podgang import rules
from podgang.metrics import WebhookMetrics

log = logging.getLogger("podgang.webhook")

FRESH, READING, SERVED, CLOSED = range(4)  # SERVED: being decided, answered, or idle after
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
        # eviction order: a request under way for longest, then a connection that never
        # sent one; the others (being decided, or kept alive between requests) stay
        self.reading: OrderedDict[GuardedHandler, None] = OrderedDict()
        self.fresh: OrderedDict[GuardedHandler, None] = OrderedDict()
        self._closed_since_report: dict[str, int] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self.room: asyncio.Event | None = None  # set when accepting may resume
        self.accept_waiting = False
        self._next_report = 0.0

    def make_room(self) -> bool:
        """Room for one more socket: True when there is (evicting one connection if
        need be), False when none can be evicted."""
        if self.open < self.limits.max_connections:
            return True
        victim = next(iter(self.reading), None) or next(iter(self.fresh), None)
        if victim is None:
            return False
        victim.drop("evicted")
        return True

    def count(self) -> None:
        self.open += 1
        self.metrics.connections_open.set(self.open)

    def release(self) -> None:
        self.open -= 1
        self.metrics.connections_open.set(self.open)
        self.wake()

    def wake(self) -> None:
        """A connection went, or became one that can be evicted: a socket waiting for room may go on."""
        if self.accept_waiting:
            self.accept_waiting = False
            self.room.set()

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

    def closed(self, reason: str) -> None:
        """Count a connection the server closes on its own; say so in the log at most
        every :data:`REPORT_INTERVAL` seconds (a flood must not flood the log)."""
        self.metrics.connections_closed.labels(reason).inc()
        self._closed_since_report[reason] = self._closed_since_report.get(reason, 0) + 1
        now = time.monotonic()
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
        """The TLS handshake is done; the socket was counted when it was accepted."""
        super().connection_made(transport)
        self._phase = FRESH
        self._table.fresh[self] = None
        self._table.wake()

    def data_received(self, data: bytes) -> None:
        if self._phase != READING and self._phase != CLOSED and data:
            # the first byte of a request: its deadlines start now
            table = self._table
            table.fresh.pop(self, None)
            table.reading[self] = None
            self._phase = READING
            self._payload = None
            self._request_began = began = self._loop.time()
            self._deadline = began + table.limits.read_header_timeout
            table.watch(self._loop)
            table.wake()
        queued = len(self._messages)
        super().data_received(data)
        if self._phase != READING:
            return
        if len(self._messages) > queued:  # the headers are in: the body has until read_timeout
            self._payload = self._messages[-1][1]
            self._deadline = self._request_began + self._table.limits.read_timeout
        if self._payload is not None and self._payload.is_eof():
            self._table.reading.pop(self, None)
            self._phase = SERVED

    def connection_lost(self, exc: BaseException | None) -> None:
        self._release()
        super().connection_lost(exc)

    def drop(self, reason: str) -> None:
        """Close this connection now (no TLS goodbye) and count why."""
        self._release()
        self._table.closed(reason)
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
        table.release()
        self._payload = None

    def _abort(self) -> None:
        transport = self.transport
        self.force_close()
        if transport is not None:
            transport.abort()


class GuardedSite(web.BaseSite):
    """A TLS TCP site that accepts a socket only when the table has room for it.

    The webhook runs its own accept loop: a socket is counted from the moment it is
    accepted, through its TLS handshake (which each holds ~50 KB for, up to
    ``read_header_timeout``), and when the table is full of handshakes and busy
    connections, it stops accepting and the kernel's backlog holds the rest. Accepting
    everything and bounding only finished handshakes let 3,000 clients that reconnect
    as fast as they are evicted keep 2,500 handshakes open (700 MB)."""

    __slots__ = ("_host", "_port", "_table", "_handler_args", "_listener", "_accepting", "_handshakes")

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
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._handshakes: set[asyncio.Task] = set()

    @property
    def name(self) -> str:
        return f"https://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1] if self._listener is not None else self._port

    async def start(self) -> None:
        await super().start()
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self._host, self._port))
            listener.listen(self._backlog)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._table.room = asyncio.Event()
        self._accepting = asyncio.get_running_loop().create_task(self._accept(), name="podgang-accept")

    async def stop(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            try:
                await self._accepting
            except asyncio.CancelledError:
                pass
            self._accepting = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        await super().stop()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        table, listener = self._table, self._listener
        manager = self._runner.server
        handler_args = {"loop": loop, **self._handler_args}
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except Exception as exc:  # out of file descriptors, say: the accept loop must not die
                log.warning("accepting a connection failed", extra={"fields": {"error": rules.clip(str(exc))}})
                await asyncio.sleep(0.1)
                continue
            # no room and none to be made: this socket waits, untouched, and the kernel's
            # backlog holds the next ones, until a connection goes or can be evicted
            while not table.make_room():
                table.room.clear()
                table.accept_waiting = True
                await table.room.wait()
            table.count()
            task = loop.create_task(self._handshake(loop, sock, manager, handler_args))
            self._handshakes.add(task)  # a task nobody holds may be collected mid-handshake
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, manager: Any,
                         handler_args: dict[str, Any]) -> None:
        table = self._table
        try:
            await loop.connect_accepted_socket(
                lambda: GuardedHandler(table, manager, **handler_args),
                sock,
                ssl=self._ssl_context,
                ssl_handshake_timeout=table.limits.read_header_timeout,
                ssl_shutdown_timeout=SSL_SHUTDOWN_TIMEOUT,
            )
        except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
            # asyncio and uvloop abort a handshake past its timeout with ConnectionAbortedError
            timed_out = isinstance(exc, (asyncio.TimeoutError, ConnectionAbortedError))
            exc.__traceback__ = None  # no cycle through this frame; the transport closed the socket
            table.release()
            if timed_out:
                table.closed("read-header-timeout")
        except Exception:  # a bug here must cost one connection, not the count
            table.release()
            log.exception("serving a new connection failed")
