"""Show every gang as podgang sees it right now: one line per gang with its
minMember and where that number comes from, its members by state, whether it is
stale and when the rest is evicted, and what the scheduler says. Read-only: it
lists pods, PodGroups, the workloads podgang follows and events with your
kubeconfig. Also installed as the kubectl plugin `kubectl podgang status`.

  podgang status -A                 every gang in every namespace
  podgang status -n team my-group   one gang
  podgang status --explain POD      which gang a pod is in and why, what it waits for
  podgang status -A --watch         print again when something changes (Ctrl-C stops)

Exit status: 0 no gang is stale, 1 a gang is stale (its rest will be evicted unless
it recovers), 2 a usage error or an API error (a missing permission is named).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime, timezone
from typing import Any, Mapping, TextIO

import orjson
import yaml
from kubernetes_asyncio import config

from podgang import api, kinds
from podgang.gang.stale import format_duration
from podgang.backends.base import slim_fact
from podgang.objects import POD, Resource, as_dict
from podgang.discovery import discovered
from podgang.declarations import teach_at_start
from podgang.options import (add_backend_flags, add_flag, add_kinds_flags, backends_from, duration, kai_version_settings,
                             own_namespace)
from podgang.settings import DEFAULT, Settings
from podgang.status import (
    Explanation,
    GangStatus,
    Grouper,
    Report,
    Snapshot,
    build_report,
    event_time,
    explain_pod,
    grouper_from_lease,
)

OUTPUTS = ("text", "wide", "yaml", "json")
OK, STALE_FOUND, FAILED = 0, 1, 2
PAGE = 500  # objects per list call
EVENTS = Resource("", "v1", "events", "Event")
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")
DEFAULT_LEASE = "podgang/podgang-grouper"  # the chart's, for a release named podgang in namespace podgang
NARROW = 48  # characters of a reason shown in the text table (-o wide: all)


class StatusError(Exception):
    """What stops ``podgang status``, in one line for the user."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("group", nargs="?", help="show only this PodGroup")
    parser.add_argument("-n", "--namespace", help="the namespace (default: the kubeconfig context's)")
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text", help="text (default), wide, yaml or json")
    parser.add_argument("--explain", metavar="POD", help="which gang POD is in and why, and what that gang waits for")
    parser.add_argument("-w", "--watch", action="store_true", help="print again on every change (Ctrl-C stops)")
    parser.add_argument("--interval", type=duration, default=2.0, help="with --watch: seconds between looks (default 2s)")
    parser.add_argument("--count", type=int, default=0, help="with --watch: stop after this many looks (default: never)")
    add_flag(parser, "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    parser.add_argument("--context", help="the kubeconfig context to use (default: its current context)")
    add_backend_flags(parser)  # as podgang is configured: which schedulers' pods, in which backends
    add_flag(parser, "--exclude-namespace", default=list(DEFAULT.excluded_namespaces), repeat=True,
             help="namespaces podgang leaves alone (repeatable)")
    add_flag(parser, "--staleness-grace-period", type=duration, default=DEFAULT.staleness_grace_period,
             help="the grouper's grace period, used when its GangStale event does not say it")
    add_flag(parser, "--request-timeout", type=duration, default=10.0, help="seconds per API call")
    add_kinds_flags(parser)
    add_flag(parser, "--grouper-lease", type=lease_name, default=DEFAULT_LEASE, metavar="NAMESPACE/NAME",
             help="the Lease the grouper holds while it works (its --leader-election-namespace/-name; "
                  f"default {DEFAULT_LEASE}): without a holder, nothing evicts a stale gang")


def lease_name(text: str) -> tuple[str, str]:
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: expected NAMESPACE/NAME, e.g. {DEFAULT_LEASE}")
    return namespace, name


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    try:
        return asyncio.run(run_async(args, out, err))
    except BrokenPipeError:
        return OK


async def run_async(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``podgang status`` in a running event loop; the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    if args.explain and (args.all_namespaces or args.group):
        err.write("podgang status: --explain takes one pod: give -n NAMESPACE, not -A or a group name\n")
        return FAILED
    if args.count < 0 or args.interval <= 0:
        err.write("podgang status: --count must be 0 (no limit) or more, --interval more than 0\n")
        return FAILED
    try:
        return await _run(args, out, err)
    except (StatusError, RuntimeError) as exc:
        err.write(f"podgang status: {exc}\n")
        return FAILED


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    settings = Settings(backends=backends_from(args), excluded_namespaces=tuple(args.exclude_namespace),
                        **kai_version_settings(args))
    namespace = None if args.all_namespaces else (args.namespace or context_namespace(args.kubeconfig, args.context))
    api_client = await api.make_api_client(args.kubeconfig, context=args.context)
    try:
        client = api.Api(api_client, timeout=args.request_timeout)
        settings = await discovered(client, settings)  # native: the version the cluster serves, for all below
        learned = await teach_at_start(client, args.kinds_files, args.karta)  # the kinds the grouper was taught
        for problem in learned.problems:
            err.write(f"podgang status: kind not taught: {problem}\n")
        reader = Reader(client, settings, lease=args.grouper_lease)
        looks = 0
        shown = failure = told = None
        code = OK
        while True:
            try:
                snapshot = await reader.snapshot(namespace, args.explain)
                text, code, said = render(args, snapshot, settings, namespace)
                grouper = snapshot.grouper
                if grouper is not None and not grouper.running and grouper.text != told:
                    err.write(f"podgang status: {grouper.text}\n")  # what no gang's state can promise then
                    err.flush()
                told = grouper.text if grouper is not None else None
            except StatusError as exc:
                if not args.watch:
                    raise
                if str(exc) != failure:  # a watch goes on through an API hiccup: say it once
                    err.write(f"podgang status: {exc} (retrying)\n")
                    err.flush()
                failure, code = str(exc), FAILED
            else:
                failure = None
            if failure is None and said != shown:
                if args.watch and args.output in ("text", "wide"):
                    out.write(f"{'' if shown is None else chr(10)}{snapshot.now:%Y-%m-%dT%H:%M:%SZ}\n")
                elif args.watch and args.output == "yaml" and shown is not None:
                    out.write("---\n")
                out.write(text)
                out.flush()
                shown = said
            looks += 1
            if not args.watch or (args.count and looks >= args.count):
                return code
            await asyncio.sleep(args.interval)
    finally:
        await api_client.close()


def render(args: argparse.Namespace, snapshot: Snapshot, settings: Settings,
           namespace: str | None) -> tuple[str, int, str]:
    """The output for one look, the exit status it stands for, and what it says apart from when it
    was taken: a watch prints a look only when that differs from the last one printed."""
    grace = args.staleness_grace_period
    if args.explain:
        assert namespace is not None
        found = explain_pod(snapshot, settings, namespace, args.explain, grace)
        if found is None:
            raise StatusError(f"pod {args.explain} not found in namespace {namespace}")
        code = STALE_FOUND if found.gang is not None and found.gang.state == "stale" else OK
        if args.output in ("json", "yaml"):
            return _dumped(explanation_as_dict(found, snapshot.now), args, code)
        text = explanation_text(found, snapshot.now)
        return text, code, text
    report = build_report(snapshot, settings, grace, namespace, args.group)
    if args.group and not report.gangs:
        where = f"namespace {namespace}" if namespace else "any namespace"
        raise StatusError(f"no gang named {args.group} in {where}")
    code = STALE_FOUND if report.stale else OK
    if args.output in ("json", "yaml"):
        return _dumped(report_as_dict(report), args, code)
    text = table(report, wide=args.output == "wide")
    return text, code, text


def _dumped(data: dict[str, Any], args: argparse.Namespace, code: int) -> tuple[str, int, str]:
    text = dump(data, args.output)
    return text, code, dump({**data, "time": None}, "json") if args.watch else text


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's, else the pod's own, else default."""
    files = api.existing_kubeconfig(kubeconfig)
    try:
        if files is None:  # none at all (in a pod): asking the loader would only log that
            raise FileNotFoundError(kubeconfig)
        contexts, active = config.list_kube_config_contexts(files)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
        found = as_dict(as_dict(chosen).get("context")).get("namespace")
        if isinstance(found, str) and found:
            return found
    except Exception:  # no kubeconfig at all (in a pod): fall through
        pass
    return own_namespace() or "default"


# ---------------------------------------------------------------------------
# reading


def missing_permission(verb: str, resource: Resource, namespace: str | None, exc: api.ApiError) -> str:
    """A Forbidden answer as the permission to grant."""
    where = f'in namespace "{namespace}"' if namespace else "in all namespaces (cluster-wide)"
    return (f'permission missing: {verb} {resource.label} {where} — grant verb "{verb}" on resource '
            f'"{resource.plural}" in API group "{resource.group}" (the chart\'s operatorRole has it); '
            f"the API server said: {exc.message or exc.reason}")


class Reader:
    """Lists what ``podgang status`` needs, read-only."""

    def __init__(self, client: api.Api, settings: Settings, lease: tuple[str, str] | None = None):
        self.api = client
        self.settings = settings
        self.lease = lease  # the grouper's (namespace, name); None: not asked

    async def grouper(self) -> Grouper | None:
        """What the grouper's Lease says (read, never a reason to fail: a missing right is said)."""
        if self.lease is None:
            return None
        namespace, name = self.lease
        key = f"{namespace}/{name}"
        try:
            lease = await self.api.get(LEASE.path(namespace, name))
        except api.NotFound:
            return grouper_from_lease(key, None, datetime.now(timezone.utc))
        except api.Forbidden as exc:
            return grouper_from_lease(key, None, datetime.now(timezone.utc),
                                      error=missing_permission("get", LEASE, namespace, exc))
        except api.ApiError as exc:
            return grouper_from_lease(key, None, datetime.now(timezone.utc), error=str(exc))
        return grouper_from_lease(key, lease if isinstance(lease, dict) else {}, datetime.now(timezone.utc))

    async def list(self, resource: Resource, namespace: str | None, *, optional: bool = False,
                   _others: tuple[Resource, ...] | None = None, **selector: str) -> list[dict[str, Any]] | None:
        """Every object of ``resource``, at whichever of its versions the cluster serves
        (None: an optional resource the cluster does not serve)."""
        others = resource.alternatives[1:] if _others is None else _others
        items: list[dict[str, Any]] = []
        token = None
        while True:
            try:
                page = await self.api.request("GET", resource.path(namespace),
                                              query={"limit": PAGE, "continue": token, **selector})
            except api.Forbidden as exc:
                raise StatusError(missing_permission("list", resource, namespace, exc)) from None
            except api.NotFound as exc:
                if not items and token is None and others:  # served at another version (MPIJob: v2beta1, else v1)?
                    return await self.list(others[0], namespace, optional=optional, _others=others[1:], **selector)
                if optional:
                    return None
                raise StatusError(f"the cluster does not serve {resource.label} ({resource.api_version}): "
                                  f"{exc.message or exc.reason}") from None
            except api.ApiError as exc:
                raise StatusError(f"cannot list {resource.label}: {exc}") from None
            for item in page.get("items") or ():
                if isinstance(item, dict):  # list items carry no kind: put it back for the rules
                    item.setdefault("apiVersion", resource.api_version)
                    item.setdefault("kind", resource.kind)
                    items.append(item)
            token = as_dict(page.get("metadata")).get("continue")
            if not token:
                return items

    async def snapshot(self, namespace: str | None, pod: str | None = None) -> Snapshot:
        backends = self.settings.enabled_backends
        kinds_of_groups = sorted({b.podgroup.kind for b in backends})
        followed = [k.resource for k in kinds.FOLLOWED]
        calls = [
            self.list(POD, namespace),
            *(self.list(b.podgroup, namespace, optional=len(backends) > 1) for b in backends),
            *(self.list(EVENTS, namespace, fieldSelector=f"involvedObject.kind={kind}") for kind in kinds_of_groups),
            *(self.list(r, namespace, optional=r.optional) for r in followed),
        ]
        if pod:
            calls.append(self.list(EVENTS, namespace, fieldSelector=f"involvedObject.kind=Pod,involvedObject.name={pod}"))
        facts = list(dict.fromkeys(r for b in backends for r in b.fact_resources))
        calls += [self.facts(r) for r in facts]
        grouper, *found = await asyncio.gather(self.grouper(), *calls)
        found, listed = found[:len(found) - len(facts)], found[len(found) - len(facts):]
        pods, found = found[0], found[1:]
        podgroups = {b.name: found[i] or [] for i, b in enumerate(backends)}
        found = found[len(backends):]
        events = [e for batch in found[:len(kinds_of_groups)] for e in batch or []]
        found = found[len(kinds_of_groups):]
        workloads = {r.kind: objs or [] for r, objs in zip(followed, found)}
        absent = tuple(r.kind for r, objs in zip(followed, found) if objs is None)
        if pod:
            events += found[len(followed)] or []
        return Snapshot(pods or [], podgroups, workloads, events, datetime.now(timezone.utc), absent, grouper,
                        {r.label: objs for r, objs in zip(facts, listed)})

    async def facts(self, resource: Resource) -> list[dict[str, Any]] | None:
        """The objects the never-placed verdicts read (queues, PriorityClasses, nodes), slimmed;
        None when they cannot be read (a missing right is no reason to fail: no verdict then)."""
        try:
            found = await self.list(resource, None, optional=True)
        except StatusError:
            return None
        return None if found is None else [slim_fact(obj, resource.kind) for obj in found]


# ---------------------------------------------------------------------------
# output


def _time(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else None


def gang_as_dict(gang: GangStatus) -> dict[str, Any]:
    """One gang in ``-o json``/``-o yaml`` (the schema the README documents)."""
    stale = None
    if gang.stale is not None:
        stale = {"since": _time(gang.stale.since), "gracePeriodSeconds": gang.stale.grace,
                 "evictInSeconds": None if gang.stale.evict_in is None else round(gang.stale.evict_in, 1),
                 "message": gang.stale.message}
    return {
        "namespace": gang.namespace,
        "group": gang.name,
        "kind": gang.kind,
        "backend": gang.backend,
        "state": gang.state,
        "message": gang.state_text,
        "source": gang.source,
        "exists": gang.exists,
        "managedByPodgang": gang.managed,
        "owner": gang.owner or None,
        "minMember": gang.min_member,
        "wantedMinMember": gang.wanted,
        "minMemberFrom": gang.min_member_from,
        "members": {"running": gang.running, "pending": gang.pending, "succeeded": gang.succeeded,
                    "failed": gang.failed, "terminating": gang.terminating},
        "pendingPods": gang.pending_pods,
        "subgroups": {name: {"minMember": part.min_member, "minMemberFrom": part.min_member_from or None,
                             "members": part.members,
                             **({"replicas": part.replicas, "completeReplicas": part.complete}
                                if part.replicas is not None else {}),
                             **({"parent": part.parent} if part.parent else {})}
                      for name, part in gang.subgroups.items()},
        "stale": stale,
        "evictedAt": _time(gang.evicted_at),
        "scheduler": None if gang.scheduler is None else {"state": gang.scheduler.state,
                                                          "message": gang.scheduler.message},
        "problems": gang.problems,
        "neverPlaced": [{"verdict": v.kind, "message": v.what, "schedulerSays": v.scheduler_says or None,
                         "fix": v.fix} for v in gang.never],
        "changedBy": [{"manager": manager, "fields": list(fields)} for manager, fields in gang.changed_by],
    }


def grouper_as_dict(grouper: Grouper | None) -> dict[str, Any] | None:
    if grouper is None:
        return None
    return {"lease": grouper.lease, "running": grouper.running, "holder": grouper.holder,
            "renewTime": _time(grouper.renewed), "message": grouper.text}


def report_as_dict(report: Report) -> dict[str, Any]:
    return {"time": _time(report.now), "gangs": [gang_as_dict(g) for g in report.gangs],
            "staleGangs": len(report.stale), "kindsNotServed": list(report.absent),
            "grouper": grouper_as_dict(report.grouper)}


def event_as_dict(event: Mapping[str, Any]) -> dict[str, Any]:
    return {"time": _time(event_time(event)), "type": event.get("type"), "reason": event.get("reason"),
            "count": event.get("count") or 1, "message": event.get("message")}


def explanation_as_dict(found: Explanation, now: datetime) -> dict[str, Any]:
    return {"time": _time(now), "namespace": found.namespace, "pod": found.pod, "phase": found.phase,
            "group": found.group, "why": found.why, "waitsFor": found.waits_for,
            "gang": gang_as_dict(found.gang) if found.gang is not None else None,
            "grouper": grouper_as_dict(found.grouper),
            "podEvents": [event_as_dict(e) for e in found.pod_events],
            "groupEvents": [event_as_dict(e) for e in found.group_events]}


def dump(data: Any, output: str) -> str:
    if output == "json":
        return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def _cut(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def table(report: Report, wide: bool = False) -> str:
    if not report.gangs:
        return "No gangs found.\n"
    width = None if wide else NARROW
    header = ["NAMESPACE", "GROUP", "BACKEND", "MINMEMBER", "FROM", "RUNNING", "PENDING", "SUCCEEDED", "FAILED",
              "STATE", "SCHEDULER"]
    if wide:
        header += ["OWNER", "SUBGROUPS", "PROBLEMS"]
    rows = [header]
    for g in report.gangs:
        size = "-" if g.min_member is None else str(g.min_member)
        if g.wanted is not None and g.wanted != g.min_member:
            size = f"{size}→{g.wanted}"
        row = [g.namespace, g.name, g.backend, size, _cut(g.min_member_from, width), str(g.running), str(g.pending),
               str(g.succeeded), str(g.failed), _cut(f"{g.state}: {g.state_text}", None if wide else 64),
               _cut(str(g.scheduler) if g.scheduler else "-", width)]
        if wide:
            # roles and flat parts; a replica of several pods only while it is incomplete
            subgroups = ", ".join(f"{name}: {part}" for name, part in g.subgroups.items()
                                  if part.parent is None or part.incomplete)
            row += [g.owner or "-", subgroups or "-", "; ".join(g.problems) or "-"]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["   ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    if not wide:  # -o wide has them in PROBLEMS, with what to do
        lines += [f"{g.namespace}/{g.name}: another field manager wrote its size: "
                  f"{', '.join(_cut(manager, 48) for manager, _ in g.changed_by)} (-o wide says what to do)"
                  for g in report.gangs if g.changed_by]
    return "\n".join(lines) + "\n"


def _event_lines(events: list[dict[str, Any]], now: datetime) -> list[str]:
    if not events:
        return ["  (none)"]
    out = []
    for e in events:
        at = event_time(e)
        ago = f"{format_duration(round((now - at).total_seconds()))} ago" if at else "?"
        count = f" (x{e.get('count')})" if (e.get("count") or 1) > 1 else ""
        out.append(f"  {ago:>9}  {e.get('type') or 'Normal':<7}  {e.get('reason')}{count}: {e.get('message')}")
    return out


def explanation_text(found: Explanation, now: datetime) -> str:
    lines = [f"Pod:        {found.namespace}/{found.pod} ({found.phase})"]
    if found.group is None:
        lines.append(f"Gang:       none — {found.why}")
    else:
        lines.append(f"Gang:       {found.group} — {found.why}")
    gang = found.gang
    if gang is not None:
        size = "-" if gang.min_member is None else str(gang.min_member)
        lines += [
            f"State:      {gang.state}: {gang.state_text}",
            f"MinMember:  {size} ({gang.min_member_from})",
            f"Members:    {gang.running} running, {gang.pending} pending, {gang.succeeded} succeeded, "
            f"{gang.failed} failed" + (f", {gang.terminating} terminating" if gang.terminating else ""),
            f"Scheduler:  {gang.scheduler or '-'}",
        ]
    if found.waits_for:
        lines.append("Waits for:")
        lines += [f"  - {w}" for w in found.waits_for]
    lines.append(f"Events of pod {found.pod}:")
    lines += _event_lines(found.pod_events, now)
    if found.group is not None:
        lines.append(f"Events of {found.gang.kind if found.gang is not None else 'PodGroup'} {found.group}:")
        lines += _event_lines(found.group_events, now)
    return "\n".join(lines) + "\n"
