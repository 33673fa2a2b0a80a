"""The webhook's Prometheus metrics (spec §6), served on ``GET /metrics``.

Each server gets its own registry, so several servers in one process (tests)
never share counts.

- ``podgang_webhook_admission_requests_total{endpoint,operation,verdict}``
- ``podgang_webhook_admission_duration_seconds{endpoint,operation,verdict}``
- ``podgang_webhook_bad_requests_total{reason}``: 400/413 answers
- ``podgang_webhook_podgroups_created_total``, ``..._podgroups_reused_total``
- ``podgang_webhook_api_errors_total{call}``: get_owner, get_podgroup, create_podgroup
- ``podgang_webhook_owner_lookup_failures_total``: pods admitted without a group
- ``podgang_webhook_owner_cache_hits_total`` / ``..._misses_total``, ``..._owner_cache_entries``
- ``podgang_webhook_decisions_replayed_total``: owned pods identical to one decided before
- ``podgang_webhook_certificate_reloads_total{result}``, ``..._certificate_not_after_seconds``
- ``podgang_webhook_connections_open``; ``..._connections_closed_total{reason}``: closed by the
  webhook itself (read-header-timeout, read-timeout, evicted; see webhook.connections)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

VERDICTS = ("patched", "allowed", "skipped", "denied", "degraded")
"""patched: allowed with a patch; allowed: in scope, nothing to change;
skipped: not podgang's business (other kind/operation, out of scope);
denied: refused with a message; degraded: allowed, but an API failure kept the
webhook from finishing its work (the grouper backfills)."""

OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})

CONNECTION_CLOSE_REASONS = ("read-header-timeout", "read-timeout", "evicted")

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class WebhookMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
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
            "podgang_webhook_bad_requests", "Requests answered 400 or 413, by reason.", ["reason"], registry=r
        )
        self.podgroups_created = Counter(
            "podgang_webhook_podgroups_created", "PodGroups created for owner-less pods.", registry=r
        )
        self.podgroups_reused = Counter(
            "podgang_webhook_podgroups_reused",
            "Owner-less pods joining a PodGroup podgang already manages.",
            registry=r,
        )
        self.api_errors = Counter(
            "podgang_webhook_api_errors", "Kubernetes API calls that failed or timed out.", ["call"], registry=r
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
            "Connections the webhook closed itself: too slow to send a request, or evicted for a new one.",
            ["reason"],
            registry=r,
        )
        # pre-create the common series so dashboards see zeros, not gaps
        for call in ("get_owner", "get_podgroup", "create_podgroup"):
            self.api_errors.labels(call)
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

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
