"""Both processes' Prometheus metrics in one place, so that one concept has one
label name in both (``call`` and ``code`` for a failed API call, ``result``,
``reason``, ``kind``), and the chart's dashboard and alerts can be checked
against what is really exported (tests/unit/test_dashboards.py).

Each process object gets its own registry, so several servers or groupers in one
process (tests) never share counts. Every registry also carries the process
metrics (``process_resident_memory_bytes``, ``process_open_fds``,
``process_cpu_seconds_total`` …). The client library's ``*_created`` series are
turned off at import: they double the series count and no panel or alert uses them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from podgang.feasibility import VERDICTS as NEVER_PLACED_VERDICTS
from podgang.rules import OWNER_LESS

disable_created_metrics()

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

VERDICTS = ("patched", "allowed", "skipped", "denied", "degraded")
"""patched: allowed with a patch; allowed: in scope, nothing to change;
skipped: not podgang's business (other kind/operation, out of scope);
denied: refused with a message; degraded: allowed, but an API failure kept the
webhook from finishing its work (the grouper backfills)."""

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

NO_ANSWER = "none"
"""The ``code`` of a failed API call that got no HTTP answer (timeout, connection refused)."""


class ProcessMetrics:
    """What both processes export: the process metrics, failed API calls by
    ``call`` and ``code`` (the HTTP status, or ``none``), and dropped events."""

    PREFIX = "podgang"

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        r, p = self.registry, self.PREFIX
        self.api_errors = Counter(
            f"{p}_api_errors", "Kubernetes API calls that failed or got no answer, by call and HTTP status code.",
            ["call", "code"], registry=r,
        )
        self.events_dropped = Counter(
            f"{p}_events_dropped", "Events not recorded because the event queue was full.", registry=r,
        )

    def api_error(self, call: str, code: int | str | None) -> None:
        """Count a failed API call; ``code`` None (or 0): no HTTP answer."""
        self.api_errors.labels(call=call, code=str(code) if code else NO_ANSWER).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The body and content type of a ``/metrics`` answer."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


#: why the webhook closes a connection itself (see podgang.webhook.connections)
CONNECTION_CLOSE_REASONS = ("read-header-timeout", "read-timeout", "evicted", "shed", "shutdown")


class WebhookMetrics(ProcessMetrics):
    """The webhook's metrics (spec §6), served on its health port's ``GET /metrics`` (and its HTTPS one)."""

    PREFIX = "podgang_webhook"

    def __init__(self, registry: CollectorRegistry | None = None):
        super().__init__(registry)
        r = self.registry
        self.requests = Counter(
            "podgang_webhook_admission_requests",
            "Admission reviews answered, by endpoint, operation and verdict.",
            ["endpoint", "operation", "verdict"],
            registry=r,
        )
        self.duration = Histogram(
            "podgang_webhook_admission_duration_seconds",
            "Time from reading the review to answering it.",
            ["endpoint", "operation", "verdict"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.bad_requests = Counter(
            "podgang_webhook_bad_requests", "Requests refused (400, 404, 405, 413, 431), by reason.", ["reason"], registry=r
        )
        # ``source`` as on the grouper's counter; the webhook creates only owner-less groups
        self.podgroups_created = Counter(
            "podgang_webhook_podgroups_created", "PodGroups created for owner-less pods, by kind of group.",
            ["source"], registry=r,
        ).labels(source=OWNER_LESS)
        self.podgroups_over_budget = Counter(
            "podgang_webhook_podgroups_over_budget",
            "Owner-less pods admitted without creating their PodGroup: their namespace's budget of groups "
            "created by admission was spent (--podgroup-budget); the grouper creates it once the pod exists.",
            registry=r,
        )
        self.podgroups_reused = Counter(
            "podgang_webhook_podgroups_reused",
            "Owner-less pods joining a PodGroup podgang already manages.",
            registry=r,
        )
        self.owner_lookup_failures = Counter(
            "podgang_webhook_owner_lookup_failures",
            "Pods admitted without a group because an owner could not be looked up.",
            registry=r,
        )
        self.owner_cache_hits = Counter("podgang_webhook_owner_cache_hits", "Owner look-ups served from the cache.", registry=r)
        self.owner_cache_misses = Counter(
            "podgang_webhook_owner_cache_misses", "Owner look-ups that needed the API.", registry=r
        )
        self.decisions_replayed = Counter(
            "podgang_webhook_decisions_replayed",
            "Owned pods answered like an identical pod decided before (no rules walk, no look-up).",
            registry=r,
        )
        self.owner_cache_entries = Gauge(
            "podgang_webhook_owner_cache_entries", "Owners held in the cache.", registry=r
        )
        self.certificate_reloads = Counter(
            "podgang_webhook_certificate_reloads", "Serving certificate (re)loads, by result.", ["result"], registry=r
        )
        self.certificate_not_after = Gauge(
            "podgang_webhook_certificate_not_after_seconds",
            "Expiry of the serving certificate in use (Unix time).",
            registry=r,
        )
        self.connections_open = Gauge(
            "podgang_webhook_connections_open", "Client sockets held, from their accept (TLS handshakes included).", registry=r
        )
        self.connections_closed = Counter(
            "podgang_webhook_connections_closed",
            "Connections the webhook closed itself: too slow to send a request, evicted for a new one, or "
            "after a 503 for a request its body budget had no room for (shed).",
            ["reason"],
            registry=r,
        )
        self.body_bytes_held = Gauge(
            "podgang_webhook_body_bytes_held",
            "Bytes of request bodies held, from their first byte until they are answered (bounded by --body-budget).",
            registry=r,
        )
        # pre-create the common series so dashboards see zeros, not gaps
        for result in ("loaded", "failed"):
            self.certificate_reloads.labels(result)
        for reason in CONNECTION_CLOSE_REASONS:
            self.connections_closed.labels(reason)
        self._observers: dict[tuple[str, str, str], tuple] = {}

    def observe(self, endpoint: str, operation: str, verdict: str, seconds: float) -> None:
        key = (endpoint, operation, verdict)
        pair = self._observers.get(key)
        if pair is None:
            if operation not in OPERATIONS:  # it comes from the request: keep the series bounded
                key = (endpoint, "other", verdict)
            pair = self._observers.setdefault(
                key, (self.requests.labels(*key).inc, self.duration.labels(*key).observe)
            )
        pair[0]()
        pair[1](seconds)


class GrouperMetrics(ProcessMetrics):
    """The grouper's metrics, served on its plain-HTTP ``GET /metrics``
    (:class:`podgang.grouper.health.HealthServer`)."""

    PREFIX = "podgang_grouper"

    def __init__(self, registry: CollectorRegistry | None = None):
        super().__init__(registry)
        r = self.registry
        self.reconcile_seconds = Histogram(
            "podgang_grouper_reconcile_duration_seconds",
            "Time to reconcile one PodGroup or pod (API writes included), by result.",
            ["kind", "result"], buckets=LATENCY_BUCKETS, registry=r,
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
        self.never_placed_gangs = Gauge(
            "podgang_grouper_never_placed_gangs",
            "Gangs the scheduler will never place as the cluster is, by verdict (podgang.feasibility).",
            ["verdict"], registry=r,
        )
        self.complete_replicas = Gauge(
            "podgang_grouper_complete_replicas",
            "Complete replicas (all their pods bound) of each role of multi-pod replicas in a gang, and the role's "
            "minimum (kind=complete|minimum).", ["podgroup", "role", "kind"], registry=r,
        )
        self.recovered_gangs = Counter(
            "podgang_grouper_recovered_gangs_total", "Stale gangs that recovered within the grace period.", registry=r,
        )
        self.evictions = Counter(
            "podgang_grouper_evictions_total", "Pods of stale gangs the grouper evicted, by result (evicted, refused; stopped: kept as the gang recovered).",
            ["result"], registry=r,
        )
        self.backfilled = Counter(
            "podgang_grouper_backfilled_pods_total", "Pods given their PodGroup membership by the grouper.", registry=r,
        )
        self.backfill_yields = Counter(
            "podgang_grouper_backfill_yields_total",
            "Times the grouper held its pod backfills while pods were created faster than --backfill-yield-rate "
            "a second (a workload's controller making a job's pods), so as not to slow it.", registry=r,
        )
        self.backfill_impossible = Counter(
            "podgang_grouper_backfill_impossible_total",
            "Pods admitted without their PodGroup whose backend cannot set it on a created pod.", registry=r,
        )
        self.backfill_waiting = Gauge(
            "podgang_grouper_backfill_waiting_pods",
            "Pods admitted without their PodGroup membership that the grouper has not backfilled yet.", registry=r,
        )
        self.api_calls = Counter(
            "podgang_grouper_api_calls_total",
            "Kubernetes API calls the grouper made (watches opened included), by method (GET, POST, PATCH, "
            "PUT, DELETE, WATCH).", ["method"], registry=r,
        )
        self.rate_limit_wait = Counter(
            "podgang_grouper_rate_limit_wait_seconds_total",
            "Seconds the grouper's API calls waited for its client-side limit (--kube-api-qps, --kube-api-burst).",
            registry=r,
        )
        self.adopted = Counter("podgang_grouper_podgroups_adopted_total", "Owner-less PodGroups given an owner.",
                               registry=r)
        self.orphans_deleted = Counter(
            "podgang_grouper_orphan_podgroups_deleted_total", "PodGroups deleted because their pod never appeared.",
            registry=r,
        )
        self.retired = Counter(
            "podgang_grouper_podgroups_retired_total",
            "PodGroups deleted because the workload that owns them no longer has them (a scale-down).", registry=r,
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
        for result in ("evicted", "refused", "stopped"):  # zeros, not gaps, for the eviction panel and alert
            self.evictions.labels(result=result)
        for verdict in NEVER_PLACED_VERDICTS:  # zeros, not gaps, for the alert
            self.never_placed_gangs.labels(verdict=verdict)
