"""Run the controller that keeps PodGroups and gangs true: every workload's PodGroup
exists with minMember equal to what its workloads want right now (scale-ups,
scale-downs, several Deployments sharing a hand-made group), pods admitted while
the webhook was down get their group, and a gang that lost members after it was
running is evicted after a grace period.

Every flag can also be set as a PODGANG_* environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

from podgang.api import Api, RateLimit, make_api_client
from podgang.declarations import teach_at_start
from podgang.discovery import discovered
from podgang.events import EventRecorder, EventSink
from podgang.fence import OPEN, Fence
from podgang.logs import quiet_abandoned_connections, setup_logging
from podgang.metrics import GrouperMetrics
from podgang.options import (add_backend_flags, add_flag, add_kinds_flags, backends_from, duration, kai_version_settings,
                             own_namespace, port, positive, rate)
from podgang.settings import Settings

from podgang.grouper.controller import DEFAULT_API_BURST, DEFAULT_API_QPS, Controller, Options
from podgang.grouper.health import HealthServer
from podgang.grouper.leader import default_identity, run_as_leader

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
    uvloop = None

log = logging.getLogger("podgang.grouper")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--kubeconfig", help="kubeconfig file (default: in-cluster config, then $KUBECONFIG, ~/.kube/config)")
    add_flag(parser, "--namespace", default=own_namespace(),
             help="podgang's own namespace (the Lease lives here; always excluded; default: the pod's own)")
    add_flag(parser, "--watch-namespace", repeat=True, default=[], dest="namespaces",
             help="watch only this namespace (repeatable; default: all namespaces)")
    add_flag(parser, "--exclude-namespace", repeat=True, default=["kube-system"], dest="exclude_namespaces",
             help="never touch pods in this namespace (repeatable; podgang's own namespace is always excluded)")
    add_backend_flags(parser)
    add_flag(parser, "--namespace-selector", default="",
             help="a label selector: act only in the namespaces it selects, e.g. podgang.io/native=enabled "
                  "(default: every namespace)")
    add_flag(parser, "--namespace-selector-backend", repeat=True, default=[], dest="selector_backends",
             metavar="BACKEND", help="--namespace-selector applies to this backend's gangs only (repeatable; "
                                     "default: every backend), e.g. native: opt-in per namespace")
    add_flag(parser, "--staleness-grace-period", type=duration, default=60.0,
             help="how long a stale gang may stay incomplete before the rest is evicted (e.g. 60s, 5m); "
                  "per group: annotation podgang.io/staleness-grace-period")
    add_flag(parser, "--orphan-timeout", type=duration, default=120.0,
             help="delete a podgang PodGroup whose pod never appeared after this long (e.g. 2m)")
    add_flag(parser, "--admission-orphan-timeout", type=duration, default=30.0,
             help="delete a PodGroup the webhook created at admission (annotated podgang.io/created-by-admission) "
                  "that no pod has named after this long (e.g. 30s; at most --orphan-timeout)")
    add_flag(parser, "--leader-elect", switch=True, default=False,
             help="run one active replica: hold a coordination.k8s.io/v1 Lease while reconciling")
    add_flag(parser, "--leader-election-name", default="podgang-grouper", help="name of the Lease")
    add_flag(parser, "--leader-election-namespace", default=None,
             help="namespace of the Lease (default: podgang's own namespace, else 'default')")
    add_flag(parser, "--leader-election-identity", default=None, help="this replica's identity (default: hostname + random)")
    add_flag(parser, "--leader-election-lease-duration", type=duration, default=15.0, help="Lease duration")
    add_flag(parser, "--leader-election-renew-deadline", type=duration, default=10.0,
             help="give up leading when the Lease cannot be renewed for this long")
    add_flag(parser, "--leader-election-retry-period", type=duration, default=2.0, help="Lease retry period")
    add_flag(parser, "--metrics-port", type=port, default=8080,
             help="plain-HTTP port for /metrics, /healthz and /readyz (0: off)")
    add_flag(parser, "--metrics-bind-address", default="0.0.0.0", help="address the metrics server binds")
    add_kinds_flags(parser)
    add_flag(parser, "--log-format", default="json", choices=["json", "text"], help="json (one object per line) or text")
    add_flag(parser, "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    add_flag(parser, "--workers", type=int, default=32,
             help="PodGroups reconciled and pods backfilled concurrently")
    add_flag(parser, "--request-timeout", type=duration, default=10.0, help="timeout of every API call")
    add_flag(parser, "--kube-api-qps", type=rate, default=DEFAULT_API_QPS, dest="api_qps",
             help="the grouper's API calls a second on average, as client-go's QPS (0: no limit); pod "
                  "backfills wait behind PodGroup writes")
    add_flag(parser, "--kube-api-burst", type=positive, default=DEFAULT_API_BURST, dest="api_burst",
             help="API calls the grouper may make at once after a quiet spell, as client-go's burst")
    add_flag(parser, "--backfill-yield-rate", type=rate, default=20.0,
             help="hold pod backfills while pods are created faster than this a second (a workload's controller "
                  "making a job's pods), so as not to slow it; for at most 30s at a time (0: never hold)")
    add_flag(parser, "--watch-timeout", type=duration, default=300.0, help="server-side timeout of each watch request")
    add_flag(parser, "--resync-period", type=duration, default=300.0,
             help="re-check every PodGroup this often even without events")


def settings_from(args: argparse.Namespace) -> Settings:
    excluded = list(dict.fromkeys(args.exclude_namespaces))
    mine = args.namespace
    if mine and mine not in excluded:
        excluded.append(mine)
    return Settings().with_changes(
        backends=backends_from(args),
        excluded_namespaces=tuple(excluded),
        staleness_grace_period=float(args.staleness_grace_period),
        orphan_timeout=float(args.orphan_timeout),
        admission_orphan_timeout=float(args.admission_orphan_timeout),
        **kai_version_settings(args),
    )


def options_from(args: argparse.Namespace) -> Options:
    return Options(
        namespaces=tuple(dict.fromkeys(args.namespaces)),
        namespace_selector=args.namespace_selector.strip(),
        selector_backends=tuple(dict.fromkeys(args.selector_backends)),
        workers=max(1, int(args.workers)),
        api_qps=float(args.api_qps),
        api_burst=int(args.api_burst),
        backfill_yield_rate=float(args.backfill_yield_rate),
        request_timeout=float(args.request_timeout),
        watch_timeout=max(1, int(args.watch_timeout)),
        resync_period=float(args.resync_period),
        eviction_timeout=float(args.request_timeout),
    )


async def serve(args: argparse.Namespace, *, api_client=None, stop: asyncio.Event | None = None,
                on_controller=None) -> int:
    """Run the grouper until ``stop`` is set (or a signal arrives); the exit code.

    ``api_client``: use this client (tests) instead of building one from flags.
    ``on_controller``: called with each Controller created (tests inspect it).
    """
    quiet_abandoned_connections(asyncio.get_running_loop())
    settings = settings_from(args)
    options = options_from(args)
    own_client = api_client is None
    if api_client is None:
        watches = (8 + len(settings.enabled_backends)) * max(1, len(options.namespaces)) + 1
        try:  # one connection per watch plus room for writes
            api_client = await make_api_client(args.kubeconfig, connections=watches + 32)
        except RuntimeError as exc:
            log.error(str(exc))
            return 2
    identity = args.leader_election_identity or default_identity()
    metrics = GrouperMetrics()
    state: dict = {"controller": None, "standby": bool(args.leader_elect)}

    def ready() -> tuple[bool, str]:
        controller = state["controller"]
        if controller is None:
            return (True, "standby: waiting for the leader Lease") if state["standby"] else (False, "starting")
        return controller.ready()

    health = None
    if args.metrics_port:
        health = HealthServer(metrics, ready, host=args.metrics_bind_address, port=args.metrics_port)
        try:
            await health.start()
        except OSError as exc:
            log.error(f"cannot serve metrics on port {args.metrics_port}: {exc}")
            if own_client:
                await api_client.close()
            return 2

    # one client limit for the process: discovery and the Kartas read at start take from it too
    limit = RateLimit(options.api_qps, options.api_burst, on_wait=metrics.rate_limit_wait.inc)
    settings = await discovered(Api(api_client, timeout=options.request_timeout, limit=limit), settings)
    # the kinds taught by declarations, before the watches are made (they watch the taught kinds too)
    learned = await teach_at_start(Api(api_client, timeout=options.request_timeout, limit=limit), args.kinds_files,
                                   args.karta)

    async def lead(fence: Fence = OPEN) -> None:
        # every writer gets the fence of the term it is made in (podgang/fence.py)
        recorder = EventRecorder(api_client, "podgang-grouper", instance=identity, timeout=options.request_timeout,
                                 fence=fence)
        sink = EventSink(recorder, on_drop=metrics.events_dropped.inc, fence=fence)
        controller = Controller(api_client, settings, options, metrics=metrics, fence=fence, events=sink, limit=limit)
        for karta, problem in learned.broken_kartas():
            sink.emit(karta, "KindNotTaught", f"podgang cannot use this Karta: {problem}", type="Warning")
        state["controller"] = controller
        if on_controller:
            on_controller(controller)
        try:
            await controller.run()
        finally:
            state["controller"] = None

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    log.info("podgang grouper starting", extra={"fields": {
        "namespaces": list(options.namespaces) or "all", "excluded": list(settings.excluded_namespaces),
        "backends": {name: backend.name for name, backend in settings.backends},
        "namespace_selector": options.namespace_selector or "all", "grace_s": settings.staleness_grace_period,
        "orphan_timeout_s": settings.orphan_timeout, "admission_orphan_timeout_s": settings.admission_orphan_timeout,
        "leader_elect": bool(args.leader_elect), "identity": identity}})

    def leading(flag: bool) -> None:
        metrics.leader.set(1 if flag else 0)
        state["standby"] = not flag

    if args.leader_elect:
        lease_ns = args.leader_election_namespace or args.namespace or "default"
        main = asyncio.create_task(run_as_leader(
            api_client, lead, name=args.leader_election_name, namespace=lease_ns, identity=identity,
            lease_duration=max(2, round(args.leader_election_lease_duration)),
            renew_deadline=max(2, round(args.leader_election_renew_deadline)),
            retry_period=max(1, round(args.leader_election_retry_period)),
            timeout=min(options.request_timeout, 5.0), on_leading=leading,
        ))
    else:
        metrics.leader.set(1)

        async def run_plain() -> int:
            await lead()
            return 1

        main = asyncio.create_task(run_plain())
    stopper = asyncio.create_task(stop.wait())
    code = 0
    try:
        done, _ = await asyncio.wait([main, stopper], return_when=asyncio.FIRST_COMPLETED)
        if main in done:
            try:
                code = main.result()
            except Exception:
                log.exception("the grouper failed")
                code = 1
        else:
            log.info("stopping")
    finally:
        for task in (main, stopper):
            task.cancel()
        await asyncio.gather(main, stopper, return_exceptions=True)
        if health is not None:
            await health.stop()
        if own_client:
            await api_client.close()
    return code


def run(args: argparse.Namespace) -> int:
    try:
        setup_logging(args.log_format, args.log_level.upper())
    except ValueError as exc:
        print(f"podgang grouper: {exc}", file=sys.stderr)
        return 2
    runner = uvloop.run if uvloop is not None else asyncio.run
    return int(runner(serve(args)) or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="podgang grouper", description=(__doc__ or "").strip())
    add_arguments(parser)
    return run(parser.parse_args(argv))
