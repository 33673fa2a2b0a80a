"""Connections that cannot hold the webhook's memory: read deadlines and a bound.

Anyone who reaches the Service can open TLS connections, send headers and then
trickle the body a byte at a time; a server without deadlines holds every such
connection for as long as the client likes (3,000 of them took the webhook, then on
aiohttp, from 93 MB to 325 MB, past the chart's 256Mi limit). The apiserver sends a whole review at once and gives up
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
  a request, else the connection kept alive longest without one, if that is
  :data:`IDLE_EVICTABLE` seconds or more (Go's client reuses its most recently used
  connection first, so the apiserver's in use are never idle that long; one it holds
  idle and picks just as it is closed is sent again on a fresh connection when nothing
  was written yet, and fails once, per ``failurePolicy``, when it was). Requests being
  decided are never evicted. With nothing to evict, the webhook stops accepting and
  the kernel's backlog holds new connections until one goes. A review sent whole is
  read in microseconds, so a flood of slow clients cannot starve the apiserver's
  connections;
- the bodies of all requests held at once, from their first byte until they are
  answered, fit in ``body_budget`` bytes (a request is counted at its
  ``Content-Length`` when its headers end, a chunked one as it grows, an encoded one
  also at the most it may decompress to). A request that does not fit evicts requests
  still arriving, the oldest first; when what holds the budget is being decided, it is
  shed: a 503 at once, nothing read, the connection closed — the apiserver applies the
  configuration's ``failurePolicy`` without waiting for its timeout. No
  ``Retry-After``: client-go retries a 503 that carries one, and the shed request
  would come back to a webhook that has no room.

The table and the accept loop are here; the connections they hold are
:class:`webhook.http.HttpConnection` (tests/emulated/test_webhook_slow_clients.py).
"""
from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Protocol

from podgang import rules
from podgang.metrics import WebhookMetrics
from podgang.waits import event_set_within

log = logging.getLogger("podgang.webhook")

FRESH, READING, SERVED, CLOSED = range(4)  # SERVED: being decided, answered, or idle after
REPORT_INTERVAL = 10.0  # seconds between two log lines about closed connections
SWEEP_INTERVAL = 0.25  # seconds: read deadlines are kept to within this
SSL_SHUTDOWN_TIMEOUT = 2.0  # a peer that never answers close_notify is dropped after this
MAX_BODY = 3 * 1024 * 1024  # bytes of one request body: the apiserver's own request limit (3 MiB)
MiB = 1024 * 1024
IDLE_EVICTABLE = 1.0  # seconds a kept-alive connection must have been idle before it may be evicted


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 500
    read_header_timeout: float = 2.0
    read_timeout: float = 4.0
    idle_timeout: float = 120.0
    body_budget: int = 32 * MiB  # bytes of request bodies held at once, all connections together

    def problem(self) -> str | None:
        """What is wrong with these limits, in one line, or None."""
        if self.max_connections < 1:
            return f"--max-connections must be at least 1, not {self.max_connections}"
        if self.body_budget < MAX_BODY:
            return (f"--body-budget must hold one review of the largest size the apiserver sends ({MAX_BODY // MiB}Mi), "
                    f"not {self.body_budget} bytes")
        for flag, value in (("--read-header-timeout", self.read_header_timeout), ("--read-timeout", self.read_timeout),
                            ("--idle-timeout", self.idle_timeout)):
            if not value > 0:
                return f"{flag} must be more than 0 seconds, not {value:g}"
        if self.read_header_timeout > self.read_timeout:
            return (f"--read-header-timeout ({self.read_header_timeout:g}s) must not exceed --read-timeout "
                    f"({self.read_timeout:g}s): the whole request includes its headers")
        return None


class Connection(Protocol):
    """What the table needs of a connection (webhook.http.HttpConnection)."""

    _request_began: float  # loop time of the first byte of the request under way
    _deadline: float  # loop time by which that request must have arrived
    _held: int  # bytes of the budget the request under way holds
    _idle_since: float  # loop time since which it is kept alive with no request

    def too_slow(self) -> None: ...  # past its deadline: closed and counted, if still reading

    def drop(self, reason: str) -> None: ...  # closed now, counted under reason

    def shutdown(self) -> None: ...  # the server stops: close after the next answer

    def close_idle(self) -> None: ...  # the server stops: close now if nothing is under way


class ConnectionTable:
    """The open connections of one server, by what they are doing, oldest first."""

    def __init__(self, limits: ConnectionLimits, metrics: WebhookMetrics | None):
        """``metrics``: None for a table nobody counts (the health port's)."""
        self.limits = limits
        self.metrics = metrics
        self.open = 0
        self.held = 0  # bytes of request bodies held, see reserve()
        # eviction order: a request under way for longest, then a connection that never
        # sent one, then the one kept alive between requests for longest; requests being
        # decided stay
        self.reading: OrderedDict[Connection, None] = OrderedDict()
        self.fresh: OrderedDict[Connection, None] = OrderedDict()
        self.idle: OrderedDict[Connection, None] = OrderedDict()
        self.connections: set[Connection] = set()  # all of them, from their TLS handshake to their end
        self._closed_since_report: dict[str, int] = {}
        self._sweeper: asyncio.TimerHandle | None = None
        self.room: asyncio.Event | None = None  # set when accepting may resume
        self.accept_waiting = False
        self.stopping = False  # the server is shutting down
        self._next_report = 0.0
        self._report_timer: asyncio.TimerHandle | None = None  # says the rest of an interval at its end

    def make_room(self, now: float) -> bool:
        """Room for one more socket at loop time ``now``: True when there is (evicting
        one connection if need be), False when none can be evicted."""
        if self.open < self.limits.max_connections:
            return True
        victim = next(iter(self.reading), None) or next(iter(self.fresh), None)
        if victim is None:
            victim = next(iter(self.idle), None)
            if victim is None or now - victim._idle_since < IDLE_EVICTABLE:
                return False
        victim.drop("evicted")
        return True

    def reserve(self, connection: Connection, size: int) -> bool:
        """Room in the body budget for ``size`` more bytes of ``connection``'s request:
        True when there is (evicting requests still arriving, the oldest first, if need
        be), False when the budget is held by requests that cannot be evicted."""
        budget = self.limits.body_budget
        if self.held + size > budget:
            evictable = sum(other._held for other in self.reading if other is not connection)
            if self.held - evictable + size > budget:
                return False
            for victim in [other for other in self.reading if other is not connection and other._held]:
                victim.drop("evicted")  # gives back what it held
                if self.held + size <= budget:
                    break
        self.held += size
        if self.metrics is not None:
            self.metrics.body_bytes_held.set(self.held)
        return True

    def give_back(self, size: int) -> None:
        if size:
            self.held -= size
            if self.metrics is not None:
                self.metrics.body_bytes_held.set(self.held)

    def count(self) -> None:
        self.open += 1
        if self.metrics is not None:
            self.metrics.connections_open.set(self.open)

    def release(self) -> None:
        self.open -= 1
        if self.metrics is not None:
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
        if self.metrics is not None:
            self.metrics.connections_closed.labels(reason).inc()
        self._closed_since_report[reason] = self._closed_since_report.get(reason, 0) + 1
        now = time.monotonic()
        if now >= self._next_report:
            self._report()
        elif self._report_timer is None:  # the rest of this interval is said when it ends
            self._report_timer = asyncio.get_running_loop().call_later(self._next_report - now, self._report)

    def _report(self) -> None:
        self._report_timer = None
        self._next_report = time.monotonic() + REPORT_INTERVAL
        counts, self._closed_since_report = self._closed_since_report, {}
        if counts:
            log.warning(
                "closed connections that were too slow or too many, or shed requests",
                extra={"fields": {**{r.replace("-", "_"): n for r, n in sorted(counts.items())},
                                  "open": self.open, "max_connections": self.limits.max_connections,
                                  "body_bytes_held": self.held, "body_budget": self.limits.body_budget}},
            )


class Listener:
    """A TCP listener (TLS, or plain for the health port) that accepts a socket only when the table has room for it.

    The webhook runs its own accept loop: a socket is counted from the moment it is
    accepted, through its TLS handshake (which each holds ~50 KB for, up to
    ``read_header_timeout``), and when the table is full of handshakes and busy
    connections, it stops accepting and the kernel's backlog holds the rest. Accepting
    everything and bounding only finished handshakes let 3,000 clients that reconnect
    as fast as they are evicted keep 2,500 handshakes open (700 MB)."""

    def __init__(self, host: str, port: int, *, ssl_context: ssl.SSLContext | None, table: ConnectionTable,
                 protocol_factory: Callable[[], asyncio.Protocol], backlog: int = 1024):
        self._host, self._port = host, port
        self._ssl_context = ssl_context
        self._table = table
        self._protocol_factory = protocol_factory
        self._backlog = backlog
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._handshakes: set[asyncio.Task] = set()

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1] if self._listener is not None else self._port

    async def start(self) -> None:
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

    async def stop(self, timeout: float) -> None:
        """Stop accepting; answer every request with ``Connection: close``; close each
        connection once it has been idle for :data:`IDLE_EVICTABLE` (a client may be sending
        on one just idle); give the rest ``timeout`` seconds; then drop what is left."""
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
        table = self._table
        table.stopping = True  # a handshake that completes from now on is closed when idle
        for connection in list(table.connections):
            connection.shutdown()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while table.open and loop.time() < deadline:  # handshakes included
            now = loop.time()
            for connection in [*table.fresh, *table.idle]:
                if now - connection._idle_since >= IDLE_EVICTABLE:
                    connection.close_idle()
            table.room.clear()
            table.accept_waiting = True  # release() wakes this wait as connections go
            await event_set_within(table.room, min(IDLE_EVICTABLE / 4, deadline - now))
        for connection in list(table.connections):
            connection.drop("shutdown")

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        table, listener = self._table, self._listener
        while True:
            try:
                sock, _ = await loop.sock_accept(listener)
            except Exception as exc:  # out of file descriptors, say: the accept loop must not die
                log.warning("accepting a connection failed", extra={"fields": {"error": rules.clip(str(exc))}})
                await asyncio.sleep(0.1)
                continue
            # no room and none to be made: this socket waits, untouched, and the kernel's
            # backlog holds the next ones, until a connection goes or can be evicted
            try:
                while not table.make_room(loop.time()):
                    table.room.clear()
                    table.accept_waiting = True
                    # an idle connection becomes evictable in time, unannounced: look again then
                    await event_set_within(table.room, IDLE_EVICTABLE / 4 if table.idle else None)
            except asyncio.CancelledError:  # stopping: this socket was never handed over
                sock.close()
                raise
            table.count()
            task = loop.create_task(self._handshake(loop, sock))
            self._handshakes.add(task)  # a task nobody holds may be collected mid-handshake
            task.add_done_callback(self._handshakes.discard)

    async def _handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
        table = self._table
        tls = {} if self._ssl_context is None else {  # None: plain HTTP (the health port)
            "ssl": self._ssl_context,
            "ssl_handshake_timeout": table.limits.read_header_timeout,
            "ssl_shutdown_timeout": SSL_SHUTDOWN_TIMEOUT,
        }
        try:
            await loop.connect_accepted_socket(self._protocol_factory, sock, **tls)
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
