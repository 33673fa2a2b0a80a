"""Serve admission for pods over HTTPS: put every in-scope pod into its gang
(JSONPatch on CREATE), refuse contradictory GPU requests and group changes
(CREATE, UPDATE), create the PodGroup of an owner-less pod.

Every flag can also be given as a PODGANG_* environment variable."""

from __future__ import annotations

import argparse
import asyncio
import sys

from podgang.certs.cli import add_webhook_config_flags
from podgang.logs import setup_logging
from podgang.options import (add_backend_flags, add_flag, add_kinds_flags, backends_from, byte_size, duration,
                             kai_version_settings, own_namespace, port)
from podgang.webhook.connections import ConnectionLimits
from podgang.settings import DEFAULT

from podgang.webhook.server import WebhookConfig, serve

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    uvloop = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    serve = parser.add_argument_group("serving")
    add_flag(serve, "--port", default=9443, type=port, help="HTTPS port (0: any free port)")
    add_flag(serve, "--bind-address", default="0.0.0.0", help="address to listen on")
    add_flag(serve, "--health-port", default=None, type=port, help="plain-HTTP port of /healthz, /readyz and /metrics, with connections of its own: a flood of the HTTPS port cannot fail the probes (0: any free port; unset: only on the HTTPS port)")
    add_flag(serve, "--cert-dir", default="/etc/podgang/tls", help="directory holding tls.crt and tls.key (re-read when they change)")
    add_flag(serve, "--client-ca-file", default=None, help="require a client certificate signed by a CA in this PEM file on the HTTPS port (the apiserver's, from its AdmissionConfiguration); re-read when it changes; unset: any client")
    add_flag(serve, "--cert-poll-interval", default=1.0, type=duration, help="how often to check the certificate files")
    add_flag(serve, "--shutdown-timeout", default=15.0, type=duration, help="on SIGTERM, how long requests in flight may take")
    clients = parser.add_argument_group("slow and surplus clients (keep the timeouts below the webhook configurations' timeoutSeconds)")
    add_flag(clients, "--read-header-timeout", default=2.0, type=duration, help="a request's headers (and a new connection's TLS handshake) must arrive within this")
    add_flag(clients, "--read-timeout", default=4.0, type=duration, help="a whole request, headers and body, must arrive within this of its first byte")
    add_flag(clients, "--idle-timeout", default=120.0, type=duration, help="close a connection with no request under way after this (keep it above the apiserver's 90s)")
    add_flag(clients, "--max-connections", default=500, type=int, help="sockets held at once, TLS handshakes included; one more evicts the slowest, or the longest idle, or waits in the backlog")
    add_flag(clients, "--body-budget", default=32 * 1024 * 1024, type=byte_size, help="bytes of request bodies held at once, all connections together, until each is answered; a request with no room is shed with a 503 (at least 3Mi)")
    scope = parser.add_argument_group("scope")
    add_backend_flags(scope)
    add_flag(scope, "--exclude-namespace", default=["kube-system"], repeat=True, help="namespace podgang leaves alone (repeatable); --namespace is always excluded")
    api = parser.add_argument_group("Kubernetes API")
    add_flag(api, "--kubeconfig", default=None, help="kubeconfig file (else in-cluster config, else $KUBECONFIG or ~/.kube/config)")
    add_flag(api, "--api-timeout", default=2.0, type=duration, help="timeout of each API call (owner look-up, PodGroup creation)")
    add_flag(api, "--owner-cache-size", default=10_000, type=int, help="owners kept in the look-up cache")
    add_kinds_flags(api)
    add_flag(api, "--owner-cache-ttl", default=300.0, type=duration, help="how long a looked-up owner is trusted")
    budget = parser.add_argument_group("PodGroups created at admission (a side effect on behalf of whoever sends a review)")
    add_flag(budget, "--podgroup-budget", default=30, type=int, help="PodGroups this replica creates for owner-less pods in one namespace within --podgroup-budget-window; beyond it the pod is patched and the grouper creates its group (0: never at admission)")
    add_flag(budget, "--podgroup-budget-window", default=60.0, type=duration, help="the sliding window of --podgroup-budget")
    certs = parser.add_argument_group("self-managed certificates")
    add_flag(certs, "--manage-certs", default=False, switch=True, help="create/rotate the serving certificate in a Secret, inject caBundle, write the files to --cert-dir")
    add_flag(certs, "--namespace", default=own_namespace(), help="podgang's namespace (Secret and Service live here; always excluded)")
    add_flag(certs, "--secret", default="podgang-webhook-tls", help="Secret holding the CA and the serving certificate")
    add_flag(certs, "--service", default="podgang-webhook", help="Service in front of the webhook (the certificate's DNS names)")
    add_webhook_config_flags(certs)
    add_flag(certs, "--cert-check-interval", default=3600.0, type=duration, help="how often to check the certificate for rotation")
    logs = parser.add_argument_group("logging")
    add_flag(logs, "--log-format", default="json", type=str.lower, choices=LOG_FORMATS, help="json: one object per line; text: for humans")
    add_flag(logs, "--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS, help="")


LOG_FORMATS = ("json", "text")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _choice_problem(args: argparse.Namespace) -> str | None:
    """A value from a PODGANG_* variable is not checked against the flag's choices by
    argparse (it is the default): check it here, in one line."""
    for flag, value, allowed in (
        ("--log-format", args.log_format, LOG_FORMATS),
        ("--log-level", args.log_level, LOG_LEVELS),
    ):
        if value not in allowed:
            env = "PODGANG_" + flag.lstrip("-").replace("-", "_").upper()
            return f"podgang webhook: error: {flag} ({env}) {value!r}: expected one of {', '.join(allowed)}"
    if args.podgroup_budget < 0 or args.podgroup_budget_window <= 0:
        return ("podgang webhook: error: --podgroup-budget (PODGANG_PODGROUP_BUDGET) must be 0 or more and "
                "--podgroup-budget-window (PODGANG_PODGROUP_BUDGET_WINDOW) above 0")
    problem = _limits(args).problem()
    return f"podgang webhook: error: {problem}" if problem else None


def _limits(args: argparse.Namespace) -> ConnectionLimits:
    return ConnectionLimits(
        max_connections=args.max_connections,
        read_header_timeout=args.read_header_timeout,
        read_timeout=args.read_timeout,
        idle_timeout=args.idle_timeout,
        body_budget=args.body_budget,
    )


def config_from_args(args: argparse.Namespace) -> WebhookConfig:
    excluded = list(dict.fromkeys([*args.exclude_namespace, *([args.namespace] if args.namespace else [])]))
    settings = DEFAULT.with_changes(
        backends=backends_from(args),
        excluded_namespaces=tuple(excluded),
        **kai_version_settings(args),
    )
    return WebhookConfig(
        host=args.bind_address,
        port=args.port,
        health_port=args.health_port,
        cert_dir=args.cert_dir,
        client_ca_file=args.client_ca_file or None,
        settings=settings,
        api_timeout=args.api_timeout,
        owner_cache_size=args.owner_cache_size,
        owner_cache_ttl=args.owner_cache_ttl,
        cert_poll_interval=args.cert_poll_interval,
        shutdown_timeout=args.shutdown_timeout,
        manage_certs=args.manage_certs,
        namespace=args.namespace,
        secret=args.secret,
        service=args.service,
        webhook_configs=list(args.webhook_config),
        mutating_webhook_configs=list(args.mutating_webhook_config),
        validating_webhook_configs=list(args.validating_webhook_config),
        cert_check_interval=args.cert_check_interval,
        limits=_limits(args),
        podgroup_budget=args.podgroup_budget,
        podgroup_budget_window=args.podgroup_budget_window,
        kinds_files=tuple(args.kinds_files),
        karta=args.karta,
    )


def run(args: argparse.Namespace) -> int:
    problem = _choice_problem(args)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    setup_logging(args.log_format, args.log_level)
    config = config_from_args(args)
    if config.manage_certs and not config.namespace:
        raise SystemExit("podgang webhook: --manage-certs needs --namespace (or PODGANG_NAMESPACE)")
    loop_factory = uvloop.new_event_loop if uvloop is not None else None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(serve(config, kubeconfig=args.kubeconfig, json_logs=args.log_format == "json"))
