"""The webhook as a process, and the slow clients that test its limits: a real
``python -m podgang.webhook`` with fresh certificates and its owners served by the API
emulator, raw TLS connections that trickle their requests, and the process's memory —
for the suite (``tests/emulated/test_webhook_process.py``, ``test_webhook_slow_clients.py``)
and ``bench/webhook/slow_clients.py`` alike."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import sys
import time
from pathlib import Path
from typing import AsyncIterator

import aiohttp

from tests.emulator import KubeEmulator
from tests.webhook_support import (DEPLOYMENT_UID, ROOT, client_context, eventually, group_after, owned_pod_review,
                                   podgang_certs_generate, seed_owners)


class WebhookProcess:
    def __init__(self, *argv: str, env: dict[str, str] | None = None):
        self.argv = argv
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.lines: list[str] = []
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> "WebhookProcess":
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, *self.argv, cwd=ROOT, env=self.env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode().rstrip("\n"))

    async def __aexit__(self, *exc) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        await self._reader

    def json_lines(self) -> list[dict]:
        out = []
        for line in self.lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    async def port(self) -> int:
        def serving():
            if self.proc.returncode is not None:
                raise AssertionError(f"exited {self.proc.returncode}: {self.lines}")
            for entry in self.json_lines():
                if entry.get("msg") == "webhook serving":
                    return int(entry["address"].rsplit(":", 1)[1])
            for line in self.lines:
                if "webhook serving" in line:
                    return int(line.split("address=")[1].split()[0].rsplit(":", 1)[1])
            return None

        return await eventually(serving, timeout=30, what=f"webhook serving ({self.lines})")


def request_head(length: int, path: str = "/validate-pods") -> bytes:
    return (
        f"POST {path}?timeout=5s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


async def open_tls(port: int, ctx: ssl.SSLContext) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="localhost")


async def closed_by_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, within: float,
                           trickle: bytes = b"") -> bool:
    """Send ``trickle`` every 0.2 s (a slow client) until the server closes the
    connection (True) or ``within`` seconds pass (False)."""
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            try:
                got = await asyncio.wait_for(reader.read(65536), 0.2)
            except asyncio.TimeoutError:
                if trickle:
                    writer.write(trickle)
                    await writer.drain()
                continue
            if not got:
                return True
        return False
    except (ConnectionError, ssl.SSLError):
        return True
    finally:
        writer.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def trickling_client(port: int, ctx: ssl.SSLContext, stop_at: float, cut: list[int]) -> None:
    """Connect, send the headers and 48 KB of a 64 KB body, trickle the rest a byte at
    a time; connect again when the server cuts the connection; until ``stop_at``."""
    head = request_head(64 * 1024) + b" " * (48 * 1024)
    while time.monotonic() < stop_at:
        try:
            reader, writer = await asyncio.wait_for(open_tls(port, ctx), 5)
        except (OSError, ssl.SSLError, asyncio.TimeoutError):
            continue
        try:
            writer.write(head)
            await writer.drain()
        except (ConnectionError, ssl.SSLError):
            writer.close()
            continue
        if await closed_by_server(reader, writer, within=stop_at - time.monotonic(), trickle=b" "):
            cut.append(1)


@contextlib.asynccontextmanager
async def webhook_process(workdir: Path, *webhook_args: str) -> AsyncIterator[tuple[WebhookProcess, int, ssl.SSLContext]]:
    """The real ``python -m podgang.webhook`` with fresh certificates, its owners served
    by the API emulator: the process, its port and a client context trusting its CA
    (this test and bench/webhook/slow_clients.py)."""
    certs = workdir / "certs"
    podgang_certs_generate(certs)
    async with KubeEmulator() as kube:
        seed_owners(kube)
        kubeconfig = kube.write_kubeconfig(workdir / "kubeconfig")
        async with WebhookProcess(
            "-m", "podgang.webhook", "--port", "0", "--bind-address", "127.0.0.1", "--cert-dir", str(certs),
            "--kubeconfig", kubeconfig, "--scheduler-name", "default-scheduler", *webhook_args,
        ) as wh:
            yield wh, await wh.port(), client_context(certs / "ca.crt")


class ApiserverReviews:
    """The apiserver's side of a flood bench: the recorded owned-pod CREATE, one after
    another on a keep-alive connection; each answer checked, its latency kept, a
    failure counted and the run going on (bench/webhook/slow_clients.py, fast_flood.py)."""

    def __init__(self, session: aiohttp.ClientSession, port: int, ctx: ssl.SSLContext):
        self.session, self.ctx = session, ctx
        self.url = f"https://127.0.0.1:{port}/mutate-pods?timeout=5s"
        self.latencies: list[float] = []  # ms
        self.failures: list[str] = []

    async def review(self, i: int) -> None:
        started = time.perf_counter()
        doc = owned_pod_review(i)
        try:
            async with self.session.post(self.url, json=doc, ssl=self.ctx,
                                         timeout=aiohttp.ClientTimeout(total=10)) as resp:
                answer = await resp.json()
            assert resp.status == 200 and group_after(doc, answer["response"]) == f"pg-web-{DEPLOYMENT_UID}"
            self.latencies.append((time.perf_counter() - started) * 1000)
        except Exception as exc:  # counted and reported, the run goes on
            self.failures.append(f"{type(exc).__name__}: {exc}"[:200])

    async def warm(self) -> None:
        """Owners cached, the heap at its working size; then nothing counted yet."""
        for i in range(50):
            await self.review(i)
        self.latencies.clear()

    def report(self) -> dict:
        done = sorted(self.latencies)
        at = (lambda q: round(done[min(len(done) - 1, int(len(done) * q))], 2)) if done else (lambda q: None)
        return {"answered": len(done), "failed": len(self.failures), "p50_ms": at(0.5), "p99_ms": at(0.99),
                "max_ms": round(done[-1], 2) if done else None, "first_failures": self.failures[:5]}


def closed_by_webhook(metrics: str) -> dict[str, float]:
    """``podgang_webhook_connections_closed_total`` by reason, from a /metrics answer."""
    return {line.split('reason="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines() if line.startswith("podgang_webhook_connections_closed_total{")}
