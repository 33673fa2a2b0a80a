"""The grouper's plain-HTTP server for ``/metrics``, ``/healthz`` and ``/readyz``:
the grouper has no other listener (the webhook serves the same paths over HTTPS).
Its metrics are defined with the webhook's in :mod:`podgang.metrics`.
"""

from __future__ import annotations

import logging
from typing import Callable

from aiohttp import web

from podgang.metrics import GrouperMetrics

log = logging.getLogger("podgang.grouper")


class HealthServer:
    """``/metrics``, ``/healthz`` (the event loop answers) and ``/readyz`` (the
    cache is synced and the first reconcile is done, or this replica is a standby
    waiting for the Lease)."""

    def __init__(self, metrics: GrouperMetrics, ready: Callable[[], tuple[bool, str]],
                 host: str = "0.0.0.0", port: int = 8080):
        self.metrics = metrics
        self.ready = ready
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        log.info("serving /metrics, /healthz and /readyz", extra={"fields": {"address": f"{self.host}:{self.port}"}})
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, request: web.Request) -> web.Response:
        body, content_type = self.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, why = self.ready()
        return web.Response(text=why + "\n", status=200 if ok else 503)
