"""A fast flood (issue 35, item 1): the bodies of all requests held at once fit in
``--body-budget`` (requests still arriving are evicted for new ones, a request the
budget has no room for is shed with a 503 at once), idle keep-alive connections are
closed when slots run short, and the probes and ``/metrics`` answer on a port of their
own whatever the HTTPS port is doing. Real TLS servers on 127.0.0.1; the 100-client
flood of 3 MiB bodies runs against the real process, the rest in-process."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import aiohttp
import pytest

from podgang.webhook.connections import MAX_BODY, ConnectionLimits
from tests.emulator import KubeEmulator
from tests.webhook_processes import closed_by_server, open_tls, request_head, rss_mb, webhook_process
from tests.webhook_support import DEPLOYMENT_UID, eventually, group_after, owned_pod_review, running_webhook, seed_owners

MiB = 1024 * 1024
BODY = json.dumps(owned_pod_review(0)).encode()


def padded_review(i: int, size: int) -> dict:
    """An owned pod's review of about ``size`` bytes (a long annotation)."""
    doc = owned_pod_review(i)
    doc["request"]["object"]["metadata"].setdefault("annotations", {})["example.com/pad"] = "x" * size
    return doc


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, body: bytes,
                   path: str = "/validate-pods") -> tuple[int, bytes]:
    """One request on an open connection, kept open: its status and body."""
    writer.write(request_head(len(body), path) + body)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status = int(head.split(b" ", 2)[1])
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
    return status, await asyncio.wait_for(reader.readexactly(length), 10)


async def test_bodies_still_arriving_are_evicted_so_that_all_held_fit_the_budget(tmp_path):
    limits = ConnectionLimits(max_connections=50, read_header_timeout=30, read_timeout=60, idle_timeout=60,
                              body_budget=4 * MiB)
    async with running_webhook(tmp_path, limits=limits) as wh:
        table = wh.server.connections
        partial = []
        peak = 0
        for i in range(10):  # each claims 1 MiB and sends all of it but its last byte
            reader, writer = await open_tls(wh.port, wh.ssl)
            writer.write(request_head(MiB) + b" " * (MiB - 1))
            await writer.drain()
            partial.append((reader, writer))
            await eventually(lambda: len(table.reading) == min(i + 1, 4) and table.held == min(i + 1, 4) * MiB,
                             what=f"request {i} read")
            peak = max(peak, table.held)
        assert peak == 4 * MiB  # never more than the budget
        for reader, writer in partial[:6]:  # the oldest went first
            assert await closed_by_server(reader, writer, within=5)
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="evicted") == 6
        # the apiserver's review, sent whole, evicts one more and is answered
        response = await wh.validate(owned_pod_review(1))
        assert response["allowed"] is True
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="shed") == 0
        assert table.held <= 3 * MiB
        for _, writer in partial[6:]:
            writer.close()
        await eventually(lambda: table.held == 0, what="every body given back")


async def test_a_request_the_budget_has_no_room_for_is_shed_at_once_while_the_others_are_decided(tmp_path):
    async with KubeEmulator() as kube:
        seed_owners(kube)
        lookups = kube.hold(r"/replicasets/")  # the owner look-up keeps the reviews being decided
        client = kube.api_client()
        try:
            limits = ConnectionLimits(body_budget=MAX_BODY)
            async with running_webhook(tmp_path, api_client=client, limits=limits, api_timeout=10.0) as wh:
                table = wh.server.connections
                size = MAX_BODY // 3 - 4096
                padded = [padded_review(i, size) for i in range(4)]
                deciding = [asyncio.create_task(wh.post_raw("/mutate-pods", json.dumps(padded[i]).encode()))
                            for i in range(3)]
                await eventually(lambda: table.held >= 3 * size and not table.reading, what="three bodies being decided")
                status, text = await wh.post_raw("/mutate-pods", json.dumps(padded[3]).encode())
                assert status == 503 and b"request shed" in text, text
                assert not any(task.done() for task in deciding)  # answered while they still wait
                assert await wh.metric("podgang_webhook_connections_closed_total", reason="shed") == 1
                assert await wh.metric("podgang_webhook_body_bytes_held") == table.held
                lookups.release()
                for i, task in enumerate(deciding):
                    status, body = await asyncio.wait_for(task, 15)
                    answer = json.loads(body)["response"]
                    assert status == 200 and group_after(padded[i], answer) == f"pg-web-{DEPLOYMENT_UID}"
                assert table.held == 0
                assert (await wh.mutate(owned_pod_review(4)))["allowed"] is True
        finally:
            await client.close()


async def test_idle_keep_alive_connections_are_closed_when_slots_run_short(tmp_path):
    """Ten connections kept open after one review each fill the table; a new client is
    served once the longest idle has been idle for IDLE_EVICTABLE, not at the 60 s idle
    timeout."""
    limits = ConnectionLimits(max_connections=10, read_header_timeout=2, read_timeout=4, idle_timeout=60)
    async with running_webhook(tmp_path, limits=limits) as wh:
        kept = []
        for _ in range(10):
            reader, writer = await open_tls(wh.port, wh.ssl)
            assert (await exchange(reader, writer, BODY))[0] == 200
            kept.append((reader, writer))
        assert wh.server.connections.open == 10
        began = time.monotonic()
        response = await asyncio.wait_for(wh.validate(owned_pod_review(1)), 15)
        assert response["allowed"] is True
        assert time.monotonic() - began < limits.idle_timeout / 2
        assert await closed_by_server(*kept[0], within=5)  # the longest idle went
        assert await wh.metric("podgang_webhook_connections_closed_total", reason="evicted") == 1
        status, _ = await exchange(*kept[-1], BODY)  # the most recent is still served
        assert status == 200
        for _, writer in kept[1:]:
            writer.close()


async def test_a_connection_idle_for_less_than_the_grace_is_not_evicted(tmp_path):
    """The apiserver's connections, idle between two of its reviews, are not taken
    from it: a connection waiting for room gets the idle one only once it has been
    idle for IDLE_EVICTABLE."""
    limits = ConnectionLimits(max_connections=1, read_header_timeout=2, read_timeout=4, idle_timeout=60)
    async with running_webhook(tmp_path, limits=limits) as wh:
        reader, writer = await open_tls(wh.port, wh.ssl)
        assert (await exchange(reader, writer, BODY))[0] == 200
        waiting = asyncio.create_task(wh.validate(owned_pod_review(1)))
        for _ in range(3):  # reviews on the one connection, each within the grace of the last
            assert (await exchange(reader, writer, BODY))[0] == 200
        assert not waiting.done()
        assert (await asyncio.wait_for(waiting, 15))["allowed"] is True  # once the first was idle long enough
        assert await closed_by_server(reader, writer, within=5)
        writer.close()


async def test_probes_and_metrics_answer_on_their_own_port_while_every_https_slot_is_busy(tmp_path):
    async with KubeEmulator() as kube:
        seed_owners(kube)
        lookups = kube.hold(r"/replicasets/")
        client = kube.api_client()
        try:
            limits = ConnectionLimits(max_connections=1, read_header_timeout=5, read_timeout=5, idle_timeout=60)
            async with running_webhook(tmp_path, api_client=client, limits=limits, health_port=0) as wh:
                busy = asyncio.create_task(wh.mutate(owned_pod_review(0)))
                await eventually(lambda: kube.count("GET", r"/replicasets/") == 1, what="look-up under way")
                base = f"http://127.0.0.1:{wh.server.health_port}"
                async with aiohttp.ClientSession() as plain:
                    for path, status, text in (("/healthz", 200, "ok"), ("/readyz", 200, "ok"),
                                               ("/mutate-pods", 404, "no such path")):
                        async with plain.get(base + path, timeout=aiohttp.ClientTimeout(total=5)) as resp:
                            assert resp.status == status and text in await resp.text()
                    async with plain.get(base + "/metrics") as resp:
                        assert "podgang_webhook_connections_open 1.0" in await resp.text()
                assert not busy.done()
                lookups.release()
                assert (await asyncio.wait_for(busy, 15))["allowed"] is True
        finally:
            await client.close()


async def test_a_health_port_in_use_is_named_in_the_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"health port 127.0.0.1:{port}: Address already in use"):
            async with running_webhook(tmp_path, health_port=port):
                pass


async def test_a_flood_of_3_mib_bodies_but_their_last_byte_keeps_the_process_within_its_limit(tmp_path):
    """The issue's flood, against the real process with its defaults: 100 clients each
    send a 3 MiB body but its last byte, then wait. Without the budget one replica
    reached 462 MB against the chart's 256Mi limit."""
    async with webhook_process(tmp_path) as (wh, port, ctx):
        url = f"https://127.0.0.1:{port}/mutate-pods?timeout=5s"
        async with aiohttp.ClientSession() as session:

            async def review(i: int) -> None:
                async with session.post(url, json=owned_pod_review(i), ssl=ctx) as resp:
                    assert resp.status == 200, await resp.text()

            for i in range(20):
                await review(i)
            baseline = peak = rss_mb(wh.proc.pid)
            body = b" " * (MAX_BODY - 1)
            held = []

            async def client() -> None:
                try:
                    reader, writer = await asyncio.wait_for(open_tls(port, ctx), 10)
                    writer.write(request_head(MAX_BODY) + body)
                    await writer.drain()
                    held.append(writer)
                except (OSError, asyncio.TimeoutError):
                    pass  # evicted while sending: what the budget does

            flood = [asyncio.create_task(client()) for _ in range(100)]
            answered = 0
            while not all(task.done() for task in flood):
                await asyncio.wait_for(review(1000 + answered), 10)
                answered += 1
                peak = max(peak, rss_mb(wh.proc.pid))
            await asyncio.gather(*flood)
            for _ in range(10):
                await review(2000 + answered)
                answered += 1
                peak = max(peak, rss_mb(wh.proc.pid))
            print(f"answered {answered}, RSS {baseline:.0f} -> peak {peak:.0f} MB")
            assert peak - baseline < 120, f"RSS grew from {baseline:.0f} MB to {peak:.0f} MB"
            assert peak < 256 * 0.9, f"RSS peaked at {peak:.0f} MiB, the chart's limit is 256Mi"
            for writer in held:
                writer.close()
