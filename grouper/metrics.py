"""The grouper's Prometheus metrics and its plain-HTTP health server
(``/metrics``, ``/healthz``, ``/readyz``).

Each :class:`GrouperMetrics` has its own registry, so two groupers in one process
(tests) do not collide.
"""

from __future__ import annotations

import logging
from typing import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger("podgang.grouper")

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class GrouperMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_seconds = Histogram(
            "podgang_grouper_reconcile_duration_seconds",
            "Time to reconcile one PodGroup or pod (API writes included), by result.",
            ["kind", "result"], buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.watch_restarts = Counter(
            "podgang_grouper_watch_restarts_total",
            "Watch streams restarted, by resource and reason (closed, expired = 410 relist, error, http_<code>).",
            ["resource", "reason"], registry=r,
        )
        self.podgroups_created = Counter(
            "podgang_grouper_podgroups_created_total", "PodGroups the grouper created, by kind of group.",
            ["source"], registry=r,
        )
        self.min_member_changes = Counter(
            "podgang_grouper_min_member_changes_total", "minMember patches, by direction (up, down).",
            ["direction"], registry=r,
        )
        self.stale_gangs = Counter(
            "podgang_grouper_stale_gangs_total", "Gangs that became stale (lost members after being satisfied).",
            registry=r,
        )
        self.stale_gangs_now = Gauge("podgang_grouper_stale_gangs_current", "Gangs stale right now.", registry=r)
        self.recovered_gangs = Counter(
            "podgang_grouper_recovered_gangs_total", "Stale gangs that recovered within the grace period.", registry=r,
        )
        self.evictions = Counter(
            "podgang_grouper_evictions_total", "Pods of stale gangs the grouper evicted, by result (evicted, refused).",
            ["result"], registry=r,
        )
        self.backfilled = Counter(
            "podgang_grouper_backfilled_pods_total", "Pods given their PodGroup membership by the grouper.", registry=r,
        )
        self.backfill_impossible = Counter(
            "podgang_grouper_backfill_impossible_total",
            "Pods admitted without their PodGroup whose backend cannot set it on a created pod.", registry=r,
        )
        self.adopted = Counter("podgang_grouper_podgroups_adopted_total", "Owner-less PodGroups given an owner.",
                               registry=r)
        self.orphans_deleted = Counter(
            "podgang_grouper_orphan_podgroups_deleted_total", "PodGroups deleted because their pod never appeared.",
            registry=r,
        )
        self.api_errors = Counter(
            "podgang_grouper_api_errors_total", "Failed API writes, by action and HTTP status.",
            ["action", "code"], registry=r,
        )
        self.conflicts = Counter("podgang_grouper_conflicts_total", "Writes retried after 409 Conflict.", registry=r)
        self.queue_depth = Gauge("podgang_grouper_queue_depth", "Keys waiting to be reconciled.", registry=r)
        self.leader = Gauge("podgang_grouper_leader", "1 while this replica holds the leader Lease.", registry=r)
        self.synced = Gauge("podgang_grouper_cache_synced", "1 once every watch has listed.", registry=r)
        self.cached_objects = Gauge("podgang_grouper_cached_objects", "Objects in the cache, by kind.", ["kind"],
                                    registry=r)
        self.initial_reconcile_seconds = Gauge(
            "podgang_grouper_initial_reconcile_seconds", "Time from start to the first complete reconcile.", registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)


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
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ok, why = self.ready()
        return web.Response(text=why + "\n", status=200 if ok else 503)
