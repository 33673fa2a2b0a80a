"""The webhook's own HTTP/1.1 protocol (webhook/http.py) on the wire: raw bytes over
real TLS on 127.0.0.1, certificates from ``podgang certs generate``. Malformed and
oversized requests, chunked bodies, pipelining, HTTP/1.0, ``Expect: 100-continue``,
the read deadlines against keep-alive, and a graceful shutdown that answers the
review in flight. (The flood of slow clients: test_webhook_slow_clients.py.)"""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl

import pytest

from podgang.webhook.connections import ConnectionLimits
from podgang.webhook.http import MAX_HEAD
from podgang.webhook.server import MAX_BODY, WebhookConfig, WebhookServer
from tests.emulator import KubeEmulator
from tests.webhook_support import (
    DEPLOYMENT_UID,
    TEST_SETTINGS,
    client_context,
    eventually,
    group_after,
    owned_pod_review,
    podgang_certs_generate,
    running_webhook,
    seed_owners,
)

BODY = json.dumps(owned_pod_review(0)).encode()


def post(body: bytes, path: str = "/validate-pods?timeout=5s", *, version: str = "1.1", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/{version}\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n").encode() + body


def chunked(body: bytes, size: int, path: str = "/validate-pods?timeout=5s") -> bytes:
    out = [f"POST {path} HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".encode()]
    for at in range(0, len(body), size):
        piece = body[at:at + size]
        out.append(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    out.append(b"0\r\n\r\n")
    return b"".join(out)


async def connect(wh) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", wh.port, ssl=wh.ssl, server_hostname="localhost")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
    status_line, *lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
    version, status, _ = status_line.split(" ", 2)
    assert version == "HTTP/1.1", status_line
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    body = await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 15)
    return int(status), headers, body


async def closed(reader: asyncio.StreamReader) -> bool:
    """The server closed the connection (nothing more to read), within 15 s."""
    try:
        return await asyncio.wait_for(reader.read(), 15) == b""
    except (ConnectionError, ssl.SSLError):
        return True


async def exchange(wh, raw: bytes) -> tuple[int, dict[str, str], bytes, asyncio.StreamReader]:
    reader, writer = await connect(wh)
    writer.write(raw)
    await writer.drain()
    status, headers, body = await read_response(reader)
    return status, headers, body, reader


def uid_of(body: bytes) -> str:
    return json.loads(body)["response"]["uid"]


async def test_a_malformed_request_line_gets_400_and_the_connection_is_closed(tmp_path):
    async with running_webhook(tmp_path) as wh:
        status, headers, body, reader = await exchange(wh, b"GET / HTTP/1.1 extra\r\nHost: x\r\n\r\n")
        assert status == 400 and headers["connection"] == "close"
        line = body.decode()
        assert line.startswith("malformed HTTP request") and line.count("\n") == 1
        assert await closed(reader)
        status, _, body, _ = await exchange(wh, b"\x16\x03\x01garbage\r\n\r\n")
        assert status == 400
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="malformed") == 2
        assert await wh.get("/healthz") == (200, "ok\n")


async def test_headers_above_the_limit_get_431(tmp_path):
    async with running_webhook(tmp_path) as wh:
        big = "X-Filler: " + "a" * MAX_HEAD + "\r\n"
        status, headers, body, reader = await exchange(wh, post(BODY, extra=big))
        assert status == 431 and headers["connection"] == "close"
        assert body.decode().count("\n") == 1 and str(MAX_HEAD) in body.decode()
        assert await closed(reader)
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="headers-too-large") == 1


async def test_a_declared_length_above_the_limit_gets_413_before_the_body_is_sent(tmp_path):
    async with running_webhook(tmp_path) as wh:
        reader, writer = await connect(wh)
        writer.write(post(b"")[: -len(b"\r\n")].replace(b"Content-Length: 0", f"Content-Length: {MAX_BODY + 1}".encode())
                     + b"\r\n")
        await writer.drain()
        status, headers, body = await read_response(reader)  # no byte of the body sent
        assert status == 413 and headers["connection"] == "close"
        assert body.decode() == f"the body is {MAX_BODY + 1} bytes; at most {MAX_BODY} are accepted\n"
        writer.close()


async def test_a_client_waiting_for_100_continue_gets_413_and_is_closed_at_once(tmp_path):
    """It never sends the body: the connection is not held until the read deadline."""
    async with running_webhook(tmp_path) as wh:
        reader, writer = await connect(wh)
        head = post(b"", extra="Expect: 100-continue\r\n").replace(b"Content-Length: 0",
                                                                   f"Content-Length: {MAX_BODY + 1}".encode())
        writer.write(head)
        await writer.drain()
        status, headers, _ = await read_response(reader)
        assert status == 413 and headers["connection"] == "close"
        assert await closed(reader)
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="read-timeout") == 0


async def test_a_protocol_upgrade_gets_one_answer_400_and_the_connection_is_closed(tmp_path):
    async with running_webhook(tmp_path) as wh:
        status, headers, body, reader = await exchange(
            wh, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        assert status == 400 and headers["connection"] == "close"
        assert body == b"protocol upgrades are not served\n"
        assert await asyncio.wait_for(reader.read(), 15) == b""  # nothing after it: no 200 for the request


async def test_a_chunked_body_is_read_and_refused_with_413_once_it_grows_past_the_limit(tmp_path):
    async with running_webhook(tmp_path) as wh:
        status, _, body, reader = await exchange(wh, chunked(BODY, 100))
        assert status == 200 and uid_of(body) == "scale-up-0"
        status, headers, body, reader = await exchange(wh, chunked(b" " * (MAX_BODY + 1), 64 * 1024))
        assert status == 413 and headers["connection"] == "close"
        assert body.decode() == f"the body is larger than {MAX_BODY} bytes\n"
        assert await closed(reader)
        # a gzip body larger than the limit once decompressed is refused the same way
        bomb = gzip.compress(b" " * (MAX_BODY + 1))
        status, _, body, _ = await exchange(wh, post(bomb, extra="Content-Encoding: gzip\r\n"))
        assert status == 413
        status, _, body, _ = await exchange(wh, post(b"not gzip", extra="Content-Encoding: gzip\r\n"))
        assert status == 400 and body.decode().startswith("cannot read the body")
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="too-large") == 2
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="unreadable") == 1


async def test_pipelined_requests_are_answered_in_order_on_one_connection(tmp_path):
    async with running_webhook(tmp_path) as wh:
        reader, writer = await connect(wh)
        first, second = json.dumps(owned_pod_review(1)).encode(), json.dumps(owned_pod_review(2)).encode()
        writer.write(post(first, "/mutate-pods?timeout=5s") + b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                     + chunked(second, 500))
        await writer.drain()
        status, _, body = await read_response(reader)
        assert status == 200 and uid_of(body) == "scale-up-1"
        assert (await read_response(reader))[::2] == (200, b"ok\n")
        status, _, body = await read_response(reader)
        assert status == 200 and uid_of(body) == "scale-up-2"
        # and the connection is kept for the next one
        writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await read_response(reader))[::2] == (200, b"ok\n")
        writer.close()


async def test_http_1_0_closes_unless_asked_to_keep_alive_and_connection_close_is_honoured(tmp_path):
    async with running_webhook(tmp_path) as wh:
        status, headers, body, reader = await exchange(wh, post(BODY, version="1.0"))
        assert status == 200 and uid_of(body) == "scale-up-0" and headers["connection"] == "close"
        assert await closed(reader)
        reader, writer = await connect(wh)
        for _ in range(2):
            writer.write(post(BODY, version="1.0", extra="Connection: keep-alive\r\n"))
            status, headers, body = await read_response(reader)
            assert status == 200 and headers["connection"] == "keep-alive"
        writer.write(post(BODY, extra="Connection: close\r\n"))
        status, headers, _ = await read_response(reader)
        assert status == 200 and headers["connection"] == "close"
        assert await closed(reader)


async def test_expect_100_continue_is_answered_before_the_body(tmp_path):
    async with running_webhook(tmp_path) as wh:
        reader, writer = await connect(wh)
        writer.write(post(b"", extra="Expect: 100-continue\r\n").replace(b"Content-Length: 0",
                                                                        f"Content-Length: {len(BODY)}".encode()))
        await writer.drain()
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 15)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(BODY)
        status, _, body = await read_response(reader)
        assert status == 200 and uid_of(body) == "scale-up-0"
        writer.close()


async def test_unknown_paths_get_404_and_wrong_methods_405(tmp_path):
    async with running_webhook(tmp_path) as wh:
        status, _, body, _ = await exchange(wh, b"GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 404 and body == b"no such path: /nowhere\n"
        status, headers, body, _ = await exchange(wh, b"GET /mutate-pods HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status == 405 and headers["allow"] == "POST" and body.count(b"\n") == 1
        status, headers, _, _ = await exchange(wh, post(BODY, "/healthz"))
        assert status == 405 and headers["allow"] == "GET"


async def test_a_second_request_trickled_on_a_kept_alive_connection_is_cut_at_its_deadlines(tmp_path):
    limits = ConnectionLimits(max_connections=50, read_header_timeout=0.5, read_timeout=1.0, idle_timeout=60.0)
    async with running_webhook(tmp_path, limits=limits) as wh:
        reader, writer = await connect(wh)
        writer.write(post(BODY))
        assert (await read_response(reader))[0] == 200
        writer.write(post(BODY)[:-200])  # the headers, most of the body: the rest never comes
        await writer.drain()
        assert await closed(reader)
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="read-timeout") == 1
        assert await wh.metric("podgang_webhook_admission_requests_total", endpoint="/validate-pods",
                               operation="CREATE", verdict="allowed") == 1


async def test_an_idle_keep_alive_connection_outlives_the_read_deadlines(tmp_path):
    """Idle between requests is not slow: slow clients that came after it are cut at
    both deadlines (so both have passed), and the idle connection stays and serves."""
    limits = ConnectionLimits(max_connections=50, read_header_timeout=0.3, read_timeout=0.5, idle_timeout=60.0)
    async with running_webhook(tmp_path, limits=limits) as wh:
        idle_reader, idle_writer = await connect(wh)
        idle_writer.write(post(BODY))
        assert (await read_response(idle_reader))[0] == 200
        for slow in (b"POST /validate-pods HTTP/1.1\r\n", post(BODY)[:-1]):  # headers, then a body, never finished
            reader, writer = await connect(wh)
            writer.write(slow)
            await writer.drain()
            assert await closed(reader)
            writer.close()
        idle_writer.write(post(BODY))
        assert (await read_response(idle_reader))[0] == 200
        for reason in ("read-header-timeout", "read-timeout"):
            assert await wh.metric("podgang_webhook_connections_closed_total", reason=reason) == 1
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="evicted") == 0
        idle_writer.close()


async def test_shutdown_answers_the_review_in_flight_then_stops(tmp_path):
    cert_dir = tmp_path / "certs"
    podgang_certs_generate(cert_dir)
    async with KubeEmulator() as kube:
        seed_owners(kube)
        kube.delay(1.0, r"/replicasets/")  # the owner look-up keeps the review in flight
        client = kube.api_client()
        try:
            config = WebhookConfig(host="127.0.0.1", port=0, cert_dir=str(cert_dir), settings=TEST_SETTINGS,
                                   api_timeout=5.0, shutdown_timeout=10.0)
            server = WebhookServer(config, client)
            await server.start()
            ctx = client_context(cert_dir / "ca.crt")
            idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx,
                                                                     server_hostname="localhost")
            busy_reader, busy_writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx,
                                                                     server_hostname="localhost")
            doc = owned_pod_review(7)
            busy_writer.write(post(json.dumps(doc).encode(), "/mutate-pods?timeout=5s"))
            await busy_writer.drain()
            await eventually(lambda: kube.count("GET", r"/replicasets/") == 1, what="look-up under way")
            stopping = asyncio.create_task(server.stop())
            assert await closed(idle_reader)  # the idle connection goes at once
            status, headers, body = await read_response(busy_reader)  # the review in flight is answered
            assert status == 200 and headers["connection"] == "close"
            assert group_after(doc, json.loads(body)["response"]) == f"pg-web-{DEPLOYMENT_UID}"
            assert await closed(busy_reader)
            await asyncio.wait_for(stopping, 15)
            with pytest.raises(OSError):  # and nothing listens any more
                await asyncio.open_connection("127.0.0.1", server.port)
            assert server.connections.open == 0
            for writer in (idle_writer, busy_writer):
                writer.close()
        finally:
            await client.close()


async def test_a_review_sent_on_a_kept_alive_connection_as_the_server_stops_is_answered(tmp_path):
    """The apiserver keeps using its connections to a pod after the pod leaves the Service's
    endpoints: one closed at SIGTERM just as a review is sent there fails that call with EOF
    (seen in a rolling upgrade on the real node). It is answered, with Connection: close."""
    cert_dir = tmp_path / "certs"
    podgang_certs_generate(cert_dir)
    config = WebhookConfig(host="127.0.0.1", port=0, cert_dir=str(cert_dir), settings=TEST_SETTINGS,
                           shutdown_timeout=10.0)
    server = WebhookServer(config)
    await server.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client_context(cert_dir / "ca.crt"),
                                                   server_hostname="localhost")
    body = json.dumps(owned_pod_review(1)).encode()
    writer.write(post(body))
    await writer.drain()
    status, headers, _ = await read_response(reader)
    assert status == 200 and headers.get("connection") != "close"  # kept alive, now idle
    stopping = asyncio.create_task(server.stop())
    await eventually(lambda: server.connections.stopping, what="the server stopping")
    writer.write(post(body))  # the apiserver's next review, on the connection it holds
    await writer.drain()
    status, headers, _ = await read_response(reader)
    assert status == 200 and headers["connection"] == "close"
    assert await closed(reader)
    await asyncio.wait_for(stopping, 15)
    assert server.connections.open == 0
    writer.close()
