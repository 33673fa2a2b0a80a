"""The webhook's HTTP/1.1 server protocol: llhttp (``httptools``) on an asyncio
Protocol, one connection per instance, under the deadlines of :mod:`webhook.connections`.

Why not aiohttp (which the API client still uses): profiled under load (bench/README.md,
issue 11 item 9), aiohttp's server machinery (its parser wrapper, ``RequestHandler``,
``Request``, ``StreamReader``, the response writer) was about 60% of the time of a
review, podgang's own work a fifth; a bare aiohttp endpoint that only answers reached
0.7 of the Go standard-library anchor. The admission path needs little of HTTP: two
POSTs and three GETs, a bounded body, keep-alive. What is kept, and checked by
tests/emulated/test_webhook_http.py:

- requests are parsed by llhttp (Node's parser, via ``httptools``): malformed requests
  get 400, headers above :data:`MAX_HEAD` bytes 431, and a body above the limit 413 on
  its ``Content-Length`` before it is read, or as a chunked body grows past it (the rest
  is read and dropped, so that the client sees the answer, then the connection closes);
- keep-alive, ``Connection: close``, HTTP/1.0, chunked bodies, ``Expect: 100-continue``;
- pipelined requests are answered in order, one at a time (reading pauses while one
  waits behind another, so a client cannot queue more than a read's worth);
- the read deadlines, the bound on connections and the body budget of
  :class:`ConnectionTable`: a request is READING from its first byte to its last, then
  SERVED; it holds its share of the budget until it is answered; one the budget has no
  room for is shed with a 503; an idle connection is closed at ``idle_timeout`` (one
  timer per idle stretch, re-armed only when it fires);
- graceful shutdown: every answer says ``Connection: close``, requests under way are
  answered, idle connections close once idle for ``IDLE_EVICTABLE``, see
  :meth:`HttpConnection.shutdown`.

The application never sees HTTP beyond :class:`Request` and :class:`Response`.
"""

from __future__ import annotations

import asyncio
import zlib
from collections import deque
from typing import Awaitable, Callable, Protocol

import httptools

from podgang.webhook.connections import CLOSED, FRESH, READING, SERVED, ConnectionTable

MAX_HEAD = 16 * 1024  # bytes of request line and headers (the apiserver sends a few hundred)
REASONS = {
    100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    413: "Content Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
    503: "Service Unavailable",
}
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
DECODERS = {b"gzip": 16 + zlib.MAX_WBITS, b"x-gzip": 16 + zlib.MAX_WBITS, b"deflate": zlib.MAX_WBITS}


class BodyTooLarge(ValueError):
    """The body, decompressed, is larger than the limit."""


class Request:
    """One whole request: what the admission endpoints need of it, nothing more."""

    __slots__ = ("method", "path", "query", "body", "encoding", "http10", "held")

    def __init__(self, method: str, path: str, query: str, body: bytes, encoding: bytes | None, http10: bool,
                 held: int = 0):
        self.method, self.path, self.query, self.body, self.encoding = method, path, query, body, encoding
        self.http10 = http10  # its answer says so when the connection is kept
        self.held = held  # bytes of the table's body budget it holds until it is answered

    def content(self, limit: int) -> bytes:
        """The body, decompressed per its ``Content-Encoding``; :class:`BodyTooLarge`
        past ``limit`` bytes, ValueError for an encoding or a stream that is not understood."""
        if self.encoding is None or self.encoding == b"identity":
            return self.body
        wbits = DECODERS.get(self.encoding)
        if wbits is None:
            raise ValueError(f"unsupported Content-Encoding {self.encoding.decode('latin-1')!r}")
        decoder = zlib.decompressobj(wbits)
        try:
            out = decoder.decompress(self.body, limit + 1)
        except zlib.error as exc:
            raise ValueError(f"cannot decompress the {self.encoding.decode('latin-1')} body: {exc}") from None
        if len(out) > limit or decoder.unconsumed_tail:
            raise BodyTooLarge(f"the body is larger than {limit} bytes")
        if not decoder.eof:
            raise ValueError(f"the {self.encoding.decode('latin-1')} body is truncated")
        return out


class Response:
    __slots__ = ("status", "body", "content_type", "headers")

    def __init__(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
                 headers: str = ""):
        self.status, self.body, self.content_type, self.headers = status, body, content_type, headers

    @classmethod
    def text(cls, status: int, text: str, headers: str = "") -> "Response":
        return cls(status, text.encode(), headers=headers)

    def encode(self, close: bool, http10: bool) -> bytes:
        """The bytes on the wire. An HTTP/1.0 client keeps the connection only when told so."""
        connection = "Connection: close\r\n" if close else "Connection: keep-alive\r\n" if http10 else ""
        head = (f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Unknown')}\r\nContent-Type: {self.content_type}\r\n"
                f"Content-Length: {len(self.body)}\r\n{self.headers}{connection}\r\n")
        return head.encode("latin-1") + self.body


class Application(Protocol):
    """What serves the requests (the webhook)."""

    max_body: int  # bytes of a request body, as sent

    def handle(self, request: Request) -> Awaitable[Response]: ...

    def refuse(self, status: int, reason: str, message: str) -> Response: ...


class _Stop(Exception):
    """Raised in a parser callback: this request is refused, parse no further."""


class HttpConnection(asyncio.Protocol):
    """One client connection (after its TLS handshake)."""

    __slots__ = (
        "_app", "_table", "_loop", "_transport", "_parser", "_phase", "_deadline", "_request_began", "_headers_done",
        "_head_size", "_head_chunks", "_url", "_length", "_encoding", "_expect", "_body", "_body_size", "_discarding",
        "_queue", "_task", "_busy", "_closing", "_stopping", "_idle_since", "_idle_timer", "_write_paused",
        "_read_paused", "_http10", "_held",
    )

    def __init__(self, app: Application, table: ConnectionTable, loop: asyncio.AbstractEventLoop):
        self._app = app
        self._table = table
        self._loop = loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpRequestParser(self)
        self._phase = CLOSED
        self._deadline = 0.0  # of the request under way (READING)
        self._request_began = 0.0
        self._headers_done = True
        self._head_size = 0  # bytes of the request line and the headers parsed so far
        self._head_chunks = 0  # bytes of reads that fell wholly inside the head
        self._url = b""
        self._length = -1
        self._encoding: bytes | None = None
        self._expect = False
        self._body: list[bytes] = []
        self._body_size = 0
        self._discarding = False  # a refused request's body is read and dropped
        self._queue: deque[Request | Response] = deque()  # complete requests (or refusals), in order
        self._busy = False  # a request is being answered
        self._task: asyncio.Task | None = None  # the one answering (held: a task nobody holds may be collected)
        self._closing = False  # close once the queue is answered
        self._stopping = False  # the server is shutting down
        self._idle_since = 0.0
        self._idle_timer: asyncio.TimerHandle | None = None
        self._write_paused = False
        self._read_paused = False
        self._http10 = False
        self._held = 0  # bytes of the body budget the request under way holds

    # -- asyncio.Protocol -------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The TLS handshake is done; the socket was counted when it was accepted."""
        self._transport = transport  # type: ignore[assignment]
        self._phase = FRESH
        table = self._table
        table.fresh[self] = None
        table.connections.add(self)
        table.wake()
        self._idle()
        if table.stopping:  # handshaken while the server stops
            self.shutdown()

    def data_received(self, data: bytes) -> None:
        if self._phase == CLOSED or self._closing and not self._discarding:
            return  # refused or shutting down: nothing more is read
        within_head = self._phase == READING and not self._headers_done
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:  # a callback's _Stop included
            if self._discarding:  # the rest of a refused request is broken too: stop reading it
                self._discarding = False
                self._finish()
            elif not self._closing:
                self._refuse(400, "malformed", f"malformed HTTP request: {exc}")
            return
        if within_head and not self._headers_done and not self._closing:
            # the whole read is inside a head still arriving (one long header, say,
            # which llhttp holds until it ends): count it here
            self._head_chunks += len(data)
            if self._head_chunks > MAX_HEAD:
                self._refuse_head()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._release()
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._queue.clear()
        self._body = []
        self._parser = None  # it holds this protocol: no cycle left for the collector to find

    def pause_writing(self) -> None:  # a client that does not read its answers
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    # -- httptools callbacks ----------------------------------------------

    def on_message_begin(self) -> None:
        """The first byte of a request: its deadlines start now."""
        table = self._table
        table.fresh.pop(self, None)
        table.idle.pop(self, None)
        table.reading[self] = None
        self._phase = READING
        self._headers_done = False
        self._head_size = self._head_chunks = 0
        self._request_began = began = self._loop.time()
        self._deadline = began + table.limits.read_header_timeout
        table.watch(self._loop)
        table.wake()
        self._url = b""
        self._length = -1
        self._encoding = None
        self._expect = False
        self._body = []
        self._body_size = 0

    def on_url(self, url: bytes) -> None:
        self._url += url
        self._head_size += len(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_size += len(name) + len(value) + 4
        if self._head_size > MAX_HEAD:
            self._refuse_head()
            raise _Stop
        name = name.lower()
        if name == b"content-length":
            try:
                self._length = int(value)
            except ValueError:
                pass  # llhttp refuses it
        elif name == b"content-encoding":
            self._encoding = value.strip().lower()
        elif name == b"expect":
            self._expect = value.strip().lower() == b"100-continue"

    def on_headers_complete(self) -> None:
        if self._head_size > MAX_HEAD:
            self._refuse_head()
            raise _Stop
        self._headers_done = True
        self._deadline = self._request_began + self._table.limits.read_timeout
        self._http10 = self._parser.get_http_version() == "1.0"
        if self._parser.should_upgrade():  # refused before llhttp completes (and queues) the request
            self._refuse(400, "malformed", "protocol upgrades are not served")
            raise _Stop
        limit = self._app.max_body
        if self._length > limit:
            # a client waiting for 100 Continue sends no body: close at once, read nothing more
            self._refuse(413, "too-large", f"the body is {self._length} bytes; at most {limit} are accepted",
                         discard=not self._expect)
            return
        # what the body will hold: its length when it is known, and the most an encoded
        # body may decompress to; a chunked body is counted as it arrives (on_body)
        encoded = self._encoding is not None and self._encoding != b"identity"
        if not self._hold(max(self._length, 0) + (limit if encoded else 0)):
            raise _Stop
        if self._expect and not self._http10 and not self._busy and not self._queue and self._length != 0:
            self._transport.write(CONTINUE)

    def on_body(self, body: bytes) -> None:
        if self._discarding:
            return
        self._body_size += len(body)
        if self._body_size > self._app.max_body:
            self._body = []
            self._let_go()
            self._refuse(413, "too-large", f"the body is larger than {self._app.max_body} bytes", discard=True)
            return
        if self._length < 0 and not self._hold(len(body)):  # chunked: counted as it grows
            self._body = []
            raise _Stop
        self._body.append(body)

    def on_message_complete(self) -> None:
        table = self._table
        table.reading.pop(self, None)
        self._phase = SERVED
        if self._discarding:  # the refusal is queued; the connection closes once it is written
            self._discarding = False
            self._body = []
            self._finish()
            return
        if self._closing:
            return
        url = self._url
        path, _, query = url.partition(b"?")
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        self._body = []
        if not self._parser.should_keep_alive():
            self._closing = True
        self._queue.append(Request(self._parser.get_method().decode("latin-1"), path.decode("latin-1"),
                                   query.decode("latin-1"), body, self._encoding, self._http10, self._held))
        self._held = 0  # the request holds it now, until it is answered
        self._start_answering()

    # -- answering --------------------------------------------------------

    async def _answer(self) -> None:
        """Answer the queued requests in order, then become idle (or close)."""
        queue = self._queue
        try:
            while queue:
                item = queue.popleft()
                if self._read_paused:
                    self._update_reading()
                if isinstance(item, Response):
                    response, http10 = item, self._http10
                else:
                    http10 = item.http10
                    try:
                        response = await self._app.handle(item)
                    except Exception as exc:  # the application answers its own errors; this is a bug
                        response = self._app.refuse(500, "internal", f"internal error: {type(exc).__name__}: {exc}")
                    finally:
                        self._table.give_back(item.held)
                transport = self._transport
                if transport is None or transport.is_closing():
                    return
                close = (self._closing or self._stopping) and not queue
                transport.write(response.encode(close, http10))
                if close:
                    break
        finally:
            self._busy = False
            self._task = None
        self._finish()

    def _finish(self) -> None:
        """Nothing is being answered: close if asked to, else wait for the next request."""
        if self._busy or self._queue:
            return
        if self._closing or self._stopping:
            if not self._discarding:
                self._close()
            return
        if self._phase == SERVED:
            self._idle()

    def _refuse(self, status: int, reason: str, message: str, *, discard: bool = False) -> None:
        """Answer this request with an error (after those before it), then close."""
        self._close_after(self._app.refuse(status, reason, message), discard)

    def _close_after(self, response: Response, discard: bool = False) -> None:
        """Answer this request with ``response`` (after those before it), then close;
        ``discard``: read the rest of its body first, and drop it."""
        self._closing = True
        self._discarding = discard
        if not discard:  # nothing more is read: no deadline either
            self._table.reading.pop(self, None)
            self._phase = SERVED
        self._queue.append(response)
        self._start_answering()

    def _hold(self, size: int) -> bool:
        """Take ``size`` more bytes of the body budget for this request; when there is
        no room, shed it (a 503 now, nothing more read) and say False."""
        table = self._table
        if table.reserve(self, size):
            self._held += size
            return True
        held, budget = table.held, table.limits.body_budget
        self._let_go()
        table.closed("shed")  # counted, and said at most once per log interval
        self._close_after(Response.text(503, f"the webhook holds {held} bytes of requests being decided, its budget is "
                                             f"{budget}: request shed\n"))
        return False

    def _let_go(self) -> None:
        """Give back what the request under way holds of the body budget."""
        self._table.give_back(self._held)
        self._held = 0

    def _start_answering(self) -> None:
        if self._busy:
            self._update_reading()
        else:
            self._busy = True
            self._task = self._loop.create_task(self._answer())

    def _close(self) -> None:
        """Close with a TLS goodbye; the socket is released when it is gone (connection_lost)."""
        self._closing = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def _refuse_head(self) -> None:
        self._refuse(431, "headers-too-large", f"the request line and headers exceed {MAX_HEAD} bytes")

    def _update_reading(self) -> None:
        """Read while nothing waits behind the request being answered and the client reads its answers."""
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        pause = self._write_paused or len(self._queue) > 0 and self._busy
        if pause != self._read_paused:
            self._read_paused = pause
            (transport.pause_reading if pause else transport.resume_reading)()

    # -- idle connections and shutdown ------------------------------------

    def _idle(self) -> None:
        if self._phase == SERVED:  # kept alive between requests: the table may evict it (in time)
            self._table.idle[self] = None
            self._table.wake()
        self._idle_since = self._loop.time()
        if self._idle_timer is None:
            self._idle_timer = self._loop.call_later(self._table.limits.idle_timeout, self._check_idle)

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self._phase not in (FRESH, SERVED) or self._busy:
            return  # a request under way: the timer is armed again when it is answered
        left = self._idle_since + self._table.limits.idle_timeout - self._loop.time()
        if left > 0:
            self._idle_timer = self._loop.call_later(left, self._check_idle)
        else:
            self._close()

    def shutdown(self) -> None:
        """The server is stopping: close after the next answer (it says ``Connection:
        close``). An idle connection is not closed here but by the listener, once idle for
        ``IDLE_EVICTABLE`` (:meth:`close_idle`): the apiserver keeps using its connections to a
        pod after the pod leaves the Service's endpoints, and one closed just as it sends a
        review there fails that call (EOF, seen in a rolling upgrade on the real node)."""
        self._stopping = True

    def close_idle(self) -> None:
        """Close with a TLS goodbye if nothing is under way (the server is stopping)."""
        if self._phase in (FRESH, SERVED) and not self._busy and not self._queue:
            self._finish()

    # -- the table's side (webhook.connections) ---------------------------

    def too_slow(self) -> None:
        if self._phase == READING:
            self.drop("read-timeout" if self._headers_done else "read-header-timeout")

    def drop(self, reason: str) -> None:
        """Close this connection now (no TLS goodbye) and count why."""
        self._release()
        self._table.closed(reason)
        if self._transport is not None:
            self._transport.abort()

    def _release(self) -> None:
        """Take this connection out of the table (once)."""
        if self._phase == CLOSED:
            return
        self._phase = CLOSED
        table = self._table
        table.reading.pop(self, None)
        table.fresh.pop(self, None)
        table.idle.pop(self, None)
        table.connections.discard(self)
        # what it holds of the body budget: the request under way, and those waiting in
        # the queue (the one being answered gives back its own when it is)
        self._let_go()
        for item in self._queue:
            if isinstance(item, Request):
                table.give_back(item.held)
        self._queue.clear()
        table.release()


def connection_factory(app: Application, table: ConnectionTable,
                       loop: asyncio.AbstractEventLoop) -> Callable[[], HttpConnection]:
    return lambda: HttpConnection(app, table, loop)
