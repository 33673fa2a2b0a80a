"""The HTTPS server: TLS 1.2+, certificates re-read when they change, graceful
shutdown (stop accepting, finish the requests in flight, exit 0). HTTP is
:mod:`webhook.http` (llhttp on an asyncio protocol), connections are bounded by
:mod:`webhook.connections`; here are the endpoints.

Endpoints: ``POST /mutate-pods``, ``POST /validate-pods``, ``GET /healthz``,
``GET /readyz`` (ready once the certificate is loaded), ``GET /metrics``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable
from urllib.parse import parse_qs

from podgang import rules
from podgang.api import Api, make_api_client
from podgang.declarations import teach_at_start
from podgang.discovery import discovered
from podgang.events import EventRecorder, EventSink
from podgang.logs import quiet_abandoned_connections
from podgang.metrics import WebhookMetrics
from podgang.objects import clip
from podgang.settings import DEFAULT, Settings

from podgang.webhook.admission import (
    DEFAULT_REVIEW_TIMEOUT,
    Admission,
    BadReview,
    Verdict,
    bounded_warning,
    encode_response,
    parse_review,
    pod_label,
)
from podgang.webhook.certificates import CertificateKeeper
from podgang.webhook.connections import MAX_BODY, ConnectionLimits, ConnectionTable, Listener
from podgang.webhook.decisions import DecisionLog, stderr_stream
from podgang.webhook.http import BodyTooLarge, Request, Response, connection_factory
from podgang.webhook.owners import OwnerCache
from podgang.webhook.podgroups import CreationBudget, PodGroups
from podgang.webhook.tls import ServingCertificate

log = logging.getLogger("podgang.webhook")

MUTATE, VALIDATE = "/mutate-pods", "/validate-pods"
HEALTH_PATHS = ("/healthz", "/readyz", "/metrics")  # also served on the health port
#: the health port's connections: the kubelet's probes and a scrape or two at a time
HEALTH_LIMITS = ConnectionLimits(max_connections=32, body_budget=MAX_BODY)
MAX_LOGGED = 1000  # characters of a reason or message in one log line (they quote user values)


@dataclass
class WebhookConfig:
    host: str = "0.0.0.0"
    port: int = 9443
    health_port: int | None = None  # plain HTTP for the probes and /metrics; None: not served
    cert_dir: str = "/etc/podgang/tls"
    client_ca_file: str | None = None  # require client certificates this CA signed (None: any client)
    settings: Settings = DEFAULT
    api_timeout: float = 2.0
    kinds_files: tuple[str, ...] = ()  # --kinds: declarations read at start
    karta: bool = True  # --karta: the cluster's Kartas read at start
    owner_cache_size: int = 10_000
    owner_cache_ttl: float = 300.0
    cert_poll_interval: float = 1.0
    shutdown_timeout: float = 15.0
    # certificates managed by the webhook itself (podgang certs' ensure)
    manage_certs: bool = False
    namespace: str | None = None
    secret: str = "podgang-webhook-tls"
    service: str = "podgang-webhook"
    webhook_configs: list[str] = field(default_factory=list)  # each looked up as both kinds
    mutating_webhook_configs: list[str] = field(default_factory=list)
    validating_webhook_configs: list[str] = field(default_factory=list)
    cert_check_interval: float = 3600.0
    # slow or too many clients (see webhook.connections)
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    # PodGroups created at admission: at most this many per namespace per window (None: no bound)
    podgroup_budget: int | None = 30
    podgroup_budget_window: float = 60.0


class WebhookServer:
    """One running webhook. ``api_client``: a kubernetes_asyncio ApiClient (the
    caller closes it), or None for a webhook without API access (owner look-ups
    and PodGroup creation then fail softly, as in an API outage)."""

    def __init__(self, config: WebhookConfig, api_client: Any = None, *, decision_log: DecisionLog | None = None):
        self.config = config
        self.decision_log = decision_log or DecisionLog()
        self.settings = config.settings
        self.metrics = WebhookMetrics()
        self.api_client = api_client
        self.api = (Api(api_client, timeout=config.api_timeout, field_manager=self.settings.webhook_field_manager)
                    if api_client is not None else None)
        self.owners = OwnerCache(
            self.api,
            self.metrics,
            max_size=config.owner_cache_size,
            ttl=config.owner_cache_ttl,
            keep_labels=(self.settings.skip_label,),
            note=lambda owner: rules.staged_problem(owner, self.settings),
            roles=lambda owner: rules.own_subgroup_names(owner, self.settings),
            # and what tells a scheduler's own grouper (so podgang) to leave an owner's pods alone
            keep_annotations=(self.settings.min_available_annotation, self.settings.min_member_annotation,
                              *dict.fromkeys(k for b in self.settings.enabled_backends for k in b.opt_out_annotations)),
        )
        budget = (CreationBudget(config.podgroup_budget, config.podgroup_budget_window)
                  if config.podgroup_budget is not None else None)
        self.podgroups = PodGroups(self.api, self.settings, self.metrics, budget=budget)
        self.events: EventSink | None = None
        if api_client is not None:
            self.events = EventSink(EventRecorder(api_client, "webhook", timeout=config.api_timeout),
                                    capacity=1000, on_drop=self.metrics.events_dropped.inc)
        self.admission = Admission(
            self.settings, self.owners, self.podgroups, api_timeout=config.api_timeout, events=self.events
        )
        self.certificate: ServingCertificate | None = None
        self.port: int | None = None
        self.health_port: int | None = None
        self.connections: ConnectionTable | None = None
        self._listener: Listener | None = None
        self._health_listener: Listener | None = None
        self._routes: dict[str, tuple[str, Callable[[Request], Awaitable[Response]]]] = {
            MUTATE: ("POST", self.handle_mutate),
            VALIDATE: ("POST", self.handle_validate),
            "/healthz": ("GET", self.handle_healthz),
            "/readyz": ("GET", self.handle_readyz),
            "/metrics": ("GET", self.handle_metrics),
        }
        self._tasks: list[asyncio.Task] = []
        self.keeper = None  # a CertificateKeeper with --manage-certs

    # -- lifecycle --------------------------------------------------------

    max_body = MAX_BODY  # for webhook.http

    async def start(self) -> None:
        if self.events is not None:
            self.events.start()
        for backend in self.settings.enabled_backends:
            self.podgroups.facts.get(backend)  # listed in the background from the start
        self.certificate = ServingCertificate(self.config.cert_dir, self.metrics, client_ca=self.config.client_ca_file)
        self.connections = ConnectionTable(self.config.limits, self.metrics)
        listener = Listener(
            self.config.host,
            self.config.port,
            ssl_context=self.certificate.context,
            table=self.connections,
            protocol_factory=connection_factory(self, self.connections, asyncio.get_running_loop()),
        )
        await listener.start()
        self._listener = listener
        self.port = listener.port
        if self.config.health_port is not None:
            table = ConnectionTable(HEALTH_LIMITS, None)
            health = Listener(self.config.host, self.config.health_port, ssl_context=None, table=table,
                              protocol_factory=connection_factory(HealthPort(self), table, asyncio.get_running_loop()))
            try:
                await health.start()
            except OSError as exc:
                await listener.stop(0)
                raise OSError(exc.errno, f"health port {self.config.host}:{self.config.health_port}: {exc.strerror}") from None
            self._health_listener = health
            self.health_port = health.port
        self._tasks.append(asyncio.create_task(self._watch_certificate(), name="podgang-cert-watch"))
        if self.config.manage_certs:
            if self.api_client is None:
                raise RuntimeError("--manage-certs needs Kubernetes API access")
            self.keeper = CertificateKeeper(self.config, self.api_client, self._reload_certificate)
            self._tasks.append(asyncio.create_task(self.keeper.run(), name="podgang-cert-keeper"))
            self._tasks.append(asyncio.create_task(self.keeper.follow_secret(), name="podgang-cert-secret-watch"))
        log.info(
            "webhook serving",
            extra={
                "fields": {
                    "address": f"{self.config.host}:{self.port}",
                    "health_address": f"{self.config.host}:{self.health_port}" if self.health_port is not None else None,
                    "cert_dir": self.config.cert_dir,
                    "client_ca_file": self.config.client_ca_file,
                    "certificate_loaded": self.certificate.loaded,
                    "backends": {name: backend.name for name, backend in self.settings.backends},
                    "excluded_namespaces": list(self.settings.excluded_namespaces),
                    "api": self.api is not None,
                    "max_connections": self.config.limits.max_connections,
                    "read_timeout": self.config.limits.read_timeout,
                    "body_budget": self.config.limits.body_budget,
                }
            },
        )

    async def stop(self) -> None:
        """Stop accepting, let requests in flight finish, then release everything."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        if self._listener is not None:
            await self._listener.stop(self.config.shutdown_timeout)
            self._listener = None
        if self._health_listener is not None:  # the probes are answered until the end
            await self._health_listener.stop(0)
            self._health_listener = None
        if self.events is not None:
            await self.events.stop()
        self.decision_log.flush()
        log.info("webhook stopped")

    def _reload_certificate(self) -> None:
        if self.certificate is not None:
            self.certificate.reload()

    async def _watch_certificate(self) -> None:
        while True:
            await asyncio.sleep(self.config.cert_poll_interval)
            try:
                self.certificate.reload()
            except Exception:  # never let the watcher die
                log.exception("checking the serving certificate failed")

    # -- handlers ---------------------------------------------------------

    def handle(self, request: Request) -> Awaitable[Response]:
        """Route one request (webhook.http calls this)."""
        route = self._routes.get(request.path)
        if route is None:
            return _ready(self.refuse(404, "not-found", f"no such path: {request.path}"))
        method, handler = route
        if request.method != method:
            return _ready(self.refuse(405, "method", f"{request.path} takes {method}, not {request.method}",
                                      headers=f"Allow: {method}\r\n"))
        return handler(request)

    async def handle_healthz(self, request: Request) -> Response:
        return OK

    async def handle_readyz(self, request: Request) -> Response:
        cert = self.certificate
        if cert is None or not cert.loaded:
            problem = cert.problem if cert is not None else "starting"
            if self.keeper is not None and self.keeper.problem:
                problem += f"; managing certificates failed: {self.keeper.problem}"
            return Response.text(503, f"not ready: {problem}\n")
        return OK

    async def handle_metrics(self, request: Request) -> Response:
        self.metrics.owner_cache_entries.set(len(self.owners))
        body, content_type = self.metrics.exposition()
        return Response(200, body, content_type)

    async def handle_mutate(self, request: Request) -> Response:
        return await self._answer(request, MUTATE)

    async def handle_validate(self, request: Request) -> Response:
        return await self._answer(request, VALIDATE)

    async def _answer(self, request: Request, endpoint: str) -> Response:
        started = time.perf_counter()
        try:
            body = request.content(MAX_BODY)
        except BodyTooLarge as exc:
            return self.refuse(413, "too-large", str(exc))
        except ValueError as exc:  # a broken gzip stream, an unknown encoding
            return self.refuse(400, "unreadable", f"cannot read the body: {exc}")
        try:
            review = parse_review(body)
        except BadReview as exc:
            return self.refuse(400, "invalid", str(exc))
        try:
            if endpoint == MUTATE:
                verdict = await self.admission.mutate(review, budget=lambda: _review_budget(request))
            else:
                verdict = await self.admission.validate(review, budget=lambda: _review_budget(request))
        except Exception as exc:  # a bug must not block pods: allow, unchanged, and say so loudly
            log.exception("admission failed", extra={"fields": {"uid": review.uid, "endpoint": endpoint}})
            verdict = Verdict(True, "degraded", f"internal error, admitted unchanged: {type(exc).__name__}: {exc}")
        payload, patch_size = encode_response(review.uid, verdict)
        seconds = time.perf_counter() - started
        self.metrics.observe(endpoint, review.operation, verdict.verdict, seconds)
        if self.decision_log.enabled:
            # every string here may come from the request: a log line quotes a bounded prefix
            fields: dict[str, Any] = {
                "uid": clip(review.uid),
                "endpoint": endpoint,
                "operation": clip(review.operation),
                "kind": clip(review.kind),
                "namespace": clip(review.namespace),
                "pod": clip(pod_label(review.obj)) if review.kind == "Pod" else "",
                "group": verdict.group and clip(verdict.group, MAX_LOGGED),
                "verdict": verdict.verdict,
                "reason": clip(verdict.reason, MAX_LOGGED),
                "patch_bytes": patch_size,
                "dry_run": review.dry_run,
                "duration_ms": round(seconds * 1000, 3),
            }
            if verdict.warnings:
                fields["warnings"] = [bounded_warning(w) for w in verdict.warnings]
            self.decision_log.write(fields)
        return Response(200, payload, "application/json")

    def refuse(self, status: int, reason: str, message: str, *, headers: str = "") -> Response:
        """An error answer in one line, counted by reason and logged (webhook.http calls this too)."""
        message = clip(message, MAX_LOGGED).replace("\n", " ")
        self.metrics.bad_requests.labels(reason).inc()
        log.warning("bad admission request", extra={"fields": {"status": status, "reason": message}})
        return Response.text(status, message + "\n", headers)


OK = Response.text(200, "ok\n")


class HealthPort:
    """The health port's application: the probes and ``/metrics`` over plain HTTP, on
    a listener and a table of connections of their own. On the HTTPS port they would
    wait for a slot with the admission traffic: a flood there failed the kubelet's
    liveness probe, which restarted a pod that was only busy (issue 35)."""

    max_body = 0  # GETs: a request with a body is refused with 413

    def __init__(self, server: WebhookServer):
        self._server = server

    def handle(self, request: Request) -> Awaitable[Response]:
        if request.path not in HEALTH_PATHS:
            return _ready(self.refuse(404, "not-found", f"no such path: {request.path}; this port serves "
                                                        f"{', '.join(HEALTH_PATHS)}"))
        return self._server.handle(request)

    def refuse(self, status: int, reason: str, message: str) -> Response:
        return self._server.refuse(status, reason, message)


async def _ready(response: Response) -> Response:
    return response


def _review_budget(request: Request) -> float:
    """Seconds the apiserver waits for this review (its ``?timeout=`` query)."""
    raw = parse_qs(request.query).get("timeout", [""])[0] if request.query else None
    if raw:
        try:
            return rules.parse_duration(raw)
        except ValueError:
            pass
    return DEFAULT_REVIEW_TIMEOUT


async def serve(config: WebhookConfig, *, kubeconfig: str | None = None, json_logs: bool = True) -> int:
    """Run a webhook until SIGTERM or SIGINT; 0 after a clean shutdown.

    ``json_logs``: decision lines take the fast path (see :mod:`webhook.decisions`).
    """
    quiet_abandoned_connections(asyncio.get_running_loop())
    try:
        api_client = await make_api_client(kubeconfig)
    except RuntimeError as exc:
        log.error("cannot start the webhook", extra={"fields": {"error": str(exc)}})
        return 2
    settings = await discovered(Api(api_client, timeout=config.api_timeout), config.settings)
    config = replace(config, settings=settings)
    await teach_at_start(Api(api_client, timeout=max(config.api_timeout, 5.0)), config.kinds_files, config.karta)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    received: list[str] = []

    def on_signal(name: str) -> None:
        received.append(name)
        stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    server = WebhookServer(config, api_client, decision_log=DecisionLog(stderr_stream()) if json_logs else None)
    try:
        try:
            await server.start()
        except OSError as exc:
            log.error("cannot listen", extra={"fields": {"address": f"{config.host}:{config.port}", "error": str(exc)}})
            return 1
        # what start-up built lives as long as the process: keep the collector off it,
        # and let it run less often (a review allocates a few hundred objects)
        gc.collect()
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)
        await stopping.wait()
        log.info("stopping: finishing requests in flight", extra={"fields": {"signal": received[0]}})
    finally:
        await server.stop()
        await api_client.close()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0
