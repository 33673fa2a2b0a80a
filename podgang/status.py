"""``podgang status``: what every gang looks like right now, and why.

The answer comes from the grouper's own code run on live objects: the objects fill
the grouper's :class:`~podgang.gang.Cache` through its Slimmer, and each
group is what :func:`~podgang.gang.desired_group` says — the function
the running grouper calls — so the minMember and its reason shown here are the ones
the grouper writes. Staleness is read from the grouper's ``GangStale`` /
``GangRecovered`` / ``GangEvicted`` events (its tracker lives in its memory) and
the grace period rules; the scheduler's verdict from the PodGroup's status; another
writer of a podgang group's size from its managedFields (what the Slimmer keeps of them).
This module only turns a snapshot of the cluster into a report. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from podgang import feasibility, kinds, rules
from podgang.backends import Backend
from podgang.backends.base import SchedulerVerdict, one_line, slim_fact
from podgang.gang import Cache, key_of, obj_key, split_key
from podgang.gang import (
    Desired,
    changed_by_others,
    counted_members,
    desired_group,
    is_managed,
    natural_gang,
    pod_gang,
    pod_subgroup,
    size_held,
    size_writers,
    with_owners,
)
from podgang.gang.stale import format_duration
from podgang.objects import (annotations, as_dict, as_list, clip, is_active, is_terminating, metadata, pod_phase,
                             spec, status)
from podgang.settings import Settings

# the grouper's events about a gang's staleness (grouper/controller.py)
STALE_EVENT, RECOVERED_EVENT, EVICTED_EVENT = "GangStale", "GangRecovered", "GangEvicted"
STALE_REASONS = (STALE_EVENT, RECOVERED_EVENT, EVICTED_EVENT)

# a gang's state, one word
SATISFIED = "satisfied"  # at least minMember members bound or running
WAITING = "waiting"  # fewer: the scheduler has not placed the gang (yet)
STALE = "stale"  # was satisfied, lost members: evicted when the grace period runs out
EVICTED = "evicted"  # the grouper evicted the rest; the gang waits to start again
FINISHED = "finished"  # every counted member ended
MISSING = "missing"  # pods name a PodGroup that does not exist
NOT_CREATED = "not-created"  # the grouper creates it (it is not running, or behind)
UNUSED = "unused"  # a PodGroup no pod or workload uses
UNKNOWN = "unknown"  # an owner of a member is not readable
NEVER = feasibility.NEVER  # the scheduler will never place it as the cluster is (podgang.feasibility)

EVENTS_SHOWN = 5  # per object, with --explain
_GRACE_IN_MESSAGE = re.compile(r"evicting the rest in (\S+) unless it recovers")


@dataclass
class Grouper:
    """Whether a grouper is at work, as its Lease says: only a running grouper evicts a
    stale gang, creates a PodGroup or follows a scale."""

    lease: str  # "namespace/name"
    running: bool | None  # None: the Lease could not be read
    text: str  # what the Lease says, one line
    holder: str | None = None
    renewed: datetime | None = None


def grouper_from_lease(lease_key: str, lease: Mapping[str, Any] | None, now: datetime,
                       error: str | None = None) -> Grouper:
    """What ``lease`` (None: it does not exist; ``error``: it could not be read) says
    about the grouper. A Lease nobody holds, or one not renewed within its
    ``leaseDurationSeconds``, means no grouper is at work (a leader renews it every few
    seconds and hands it back when it stops)."""
    if error is not None:
        return Grouper(lease_key, None, f"cannot tell whether a grouper is running: Lease {lease_key}: {error}")
    if lease is None:
        return Grouper(lease_key, False, f"no grouper holds Lease {lease_key}: it does not exist")
    spec = as_dict(lease.get("spec"))
    holder = spec.get("holderIdentity") if isinstance(spec.get("holderIdentity"), str) else None
    renewed = parse_time(spec.get("renewTime"))
    if not holder:
        return Grouper(lease_key, False, f"no grouper holds Lease {lease_key}: it was handed back", None, renewed)
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or isinstance(duration, bool) or not isinstance(duration, int):
        return Grouper(lease_key, None, f"cannot tell whether a grouper is running: Lease {lease_key} held by "
                                        f"{one_line(holder)} has no renewTime or leaseDurationSeconds", holder, renewed)
    expired = now - (renewed + timedelta(seconds=duration))
    if expired > timedelta(0):
        return Grouper(lease_key, False, f"no grouper holds Lease {lease_key}: {one_line(holder)} last renewed it "
                                         f"{_seconds(now - renewed)} ago, it expired {_seconds(expired)} ago",
                       holder, renewed)
    return Grouper(lease_key, True, f"{one_line(holder)} holds Lease {lease_key}, renewed "
                                    f"{_seconds(max(now - renewed, timedelta(0)))} ago", holder, renewed)


@dataclass
class Snapshot:
    """What ``podgang status`` read from the cluster: raw API objects."""

    pods: list[dict[str, Any]]
    podgroups: dict[str, list[dict[str, Any]]]  # backend name -> its PodGroups
    workloads: dict[str, list[dict[str, Any]]]  # kind -> objects
    events: list[dict[str, Any]]
    now: datetime
    absent: tuple[str, ...] = ()  # followed kinds whose (optional) CRD the cluster does not serve
    grouper: Grouper | None = None  # None: not asked
    #: the backends' fact objects by resource label (PriorityClasses, queues, nodes); None: not readable
    facts: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict)


Verdict = SchedulerVerdict  # what the scheduler itself says about a PodGroup


@dataclass
class Stale:
    since: datetime
    grace: float | None  # seconds; None: never evicted
    evict_in: float | None  # seconds left (≤ 0: due now); None: never
    message: str


@dataclass
class GangStatus:
    namespace: str
    name: str
    backend: str
    state: str
    state_text: str
    source: str | None  # rules.OWNED / OWNER_LESS / HAND_MADE, None when nothing uses it
    exists: bool
    managed: bool
    min_member: int | None  # what the PodGroup says (what the scheduler uses)
    wanted: int | None  # what the grouper wants it to be
    min_member_from: str
    owner: str = ""
    running: int = 0
    pending: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    pending_pods: list[str] = field(default_factory=list)
    subgroups: dict[str, SubgroupStatus] = field(default_factory=dict)
    stale: Stale | None = None
    evicted_at: datetime | None = None
    scheduler: Verdict | None = None
    problems: list[str] = field(default_factory=list)
    #: why the scheduler will never place the gang as the cluster is (podgang.feasibility)
    never: list[feasibility.Verdict] = field(default_factory=list)
    #: other field managers that wrote the size of a group podgang made: (manager, fields)
    changed_by: tuple[tuple[str, tuple[str, ...]], ...] = ()
    kind: str = "PodGroup"  # the object that holds the gang (1.35: a Workload, one per pod group)
    events: list[dict[str, Any]] = field(default_factory=list)  # the group's, oldest first

    @property
    def key(self) -> str:
        return key_of(self.namespace, self.name)


@dataclass
class SubgroupStatus:
    """One part of a gang: its members by state and, in a group several workloads
    share, its own minimum and where that comes from (the grouper's rule)."""

    min_member: int | None = None
    min_member_from: str = ""
    members: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MEMBER_STATES, 0))
    #: a role of multi-pod replicas: its replicas, and how many are complete (all pods running)
    replicas: int | None = None
    complete: int = 0
    #: a replica of several pods: the role it belongs to (its minimum is the role's say)
    parent: str | None = None

    @property
    def short(self) -> bool:
        if self.parent is not None:
            return False
        if self.replicas is not None:
            return self.min_member is not None and self.complete < self.min_member
        return self.min_member is not None and self.members["running"] < self.min_member

    @property
    def incomplete(self) -> bool:
        """A replica with some of its pods running and not all."""
        return self.parent is not None and self.min_member is not None and 0 < self.members["running"] < self.min_member

    def __str__(self) -> str:
        if self.replicas is not None:
            return f"{self.complete} of minimum {self.min_member} complete replicas ({self.replicas} replicas)"
        of = f" of minimum {self.min_member}" if self.min_member is not None else f"/{sum(self.members.values())}"
        return f"{self.members['running']}{of} running"


@dataclass
class Report:
    gangs: list[GangStatus]
    now: datetime
    absent: tuple[str, ...] = ()
    grouper: Grouper | None = None

    @property
    def stale(self) -> list[GangStatus]:
        return [g for g in self.gangs if g.state == STALE]


# ---------------------------------------------------------------------------
# reading what the API served


def parse_time(value: Any) -> datetime | None:
    """An API timestamp (RFC 3339) as an aware datetime, None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def event_time(event: Mapping[str, Any]) -> datetime | None:
    """When an event last happened (core/v1 lastTimestamp, else eventTime, else creation)."""
    for value in (event.get("lastTimestamp"), event.get("eventTime"), metadata(event).get("creationTimestamp")):
        parsed = parse_time(value)
        if parsed is not None:
            return parsed
    return None


def events_about(events: list[dict[str, Any]], kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
    """The events whose involved object is ``kind namespace/name``, oldest first."""
    found = [
        e for e in events
        if (ref := as_dict(e.get("involvedObject"))).get("kind") == kind and ref.get("name") == name
        and (ref.get("namespace") or metadata(e).get("namespace")) == namespace
    ]
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    # timestamps have whole seconds: within one, the later write has the higher
    # resourceVersion (an etcd revision on every real apiserver)
    return sorted(found, key=lambda e: (event_time(e) or epoch, _revision(e)))


def _revision(obj: Mapping[str, Any]) -> int:
    rv = str(metadata(obj).get("resourceVersion") or "")
    return int(rv) if rv.isdigit() else 0


def scheduler_verdict(backend: Backend, podgroup: Mapping[str, Any] | None) -> Verdict | None:
    """The scheduler's own word on a PodGroup, where it wrote one: the backend reads
    its scheduler's status; failing that, a condition that is not True."""
    if podgroup is None:
        return None
    said = backend.scheduler_verdict(podgroup)
    if said is not None:
        return said
    conditions = [as_dict(c) for c in as_list(status(podgroup).get("conditions"))]
    not_true = [c for c in conditions if c.get("status") != "True" and c.get("type")]
    if not_true:
        c = not_true[-1]
        return Verdict(f"{c.get('type')}={c.get('status')}", one_line(c.get("message") or c.get("reason")))
    return None


def pods_verdict(pods: list[Mapping[str, Any]], size: int | None) -> Verdict:
    """The scheduler's verdict read from a gang's pods, where its group holds none (a 1.35
    Workload has no status, and its waiting pods no condition): bound, or not yet."""
    live = [p for p in pods if not is_terminating(p)]
    placed = sum(1 for p in live if spec(p).get("nodeName"))
    said = next((m for p in live if (m := pod_scheduling_message(p))), None)
    if live and placed == len(live):
        return Verdict("scheduled", f"{placed} of {len(live)} pods bound")
    if said:
        return Verdict("unschedulable", said)
    need = f", {size} needed" if size else ""
    return Verdict("waiting", f"{placed} of {len(live)} pods bound{need}; the scheduler says nothing on the pods "
                              f"of a gang that waits (Kubernetes 1.35)")


def pod_scheduling_message(pod: Mapping[str, Any]) -> str | None:
    """Why the scheduler has not placed a pod (its PodScheduled=False condition)."""
    for c in as_list(status(pod).get("conditions")):
        c = as_dict(c)
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return one_line(f"{c.get('reason') or 'Unschedulable'}: {c.get('message') or ''}").rstrip(": ")
    return None


# ---------------------------------------------------------------------------
# the grouper's view


def fill_cache(snapshot: Snapshot, settings: Settings) -> Cache:
    """The grouper's cache, filled as its informers fill it, from ``snapshot``."""
    cache = Cache(settings)
    for entry in kinds.FOLLOWED:
        cache.set_watched(entry.kind, entry.kind not in snapshot.absent)
    kinds_of = {r.label: r.kind for b in settings.enabled_backends for r in b.fact_resources}
    for label, objs in snapshot.facts.items():
        if objs is not None and label in cache.fact_stores:
            cache.fact_stores[label].update({obj_key(f): f for raw in objs if (f := slim_fact(raw, kinds_of[label]))})
            cache.known_facts.add(label)
    podgroups = [(b, snapshot.podgroups.get(b.name, [])) for b in settings.enabled_backends]
    batches = [*snapshot.workloads.items(), *podgroups, ("Pod", snapshot.pods)]
    for kind, objs in batches:
        store = cache.store_for(kind)
        slim = cache.slimmer_for(kind)
        for raw in objs:
            if not cache.keep(kind, raw) or not metadata(raw).get("name"):
                continue
            new = slim(raw)
            key = obj_key(new)
            old = store.get(key)
            store[key] = new
            cache.apply(kind, old, new)
    return cache


def build_report(snapshot: Snapshot, settings: Settings, grace_default: float | None = None,
                 namespace: str | None = None, group: str | None = None) -> Report:
    """One :class:`GangStatus` per group in ``namespace`` (all: None), or only ``group``."""
    cache = fill_cache(snapshot, settings)
    raw_groups: dict[tuple[str, str], Mapping[str, Any]] = {
        (name, obj_key(g)): g for name, groups in snapshot.podgroups.items() for g in groups}
    keys = sorted(k for k in cache.all_group_keys()
                  if (namespace is None or split_key(k)[0] == namespace) and (group is None or split_key(k)[1] == group))
    grace = settings.staleness_grace_period if grace_default is None else grace_default
    gangs = []
    for key in keys:
        desired = desired_group(cache, key)
        backend = desired.backend or settings.default_backend
        if desired.source is None and desired.operator is not None and cache.podgroups.of(backend, key) is None:
            continue  # a group podgang would give a workload whose operator makes its own: that one is its row
        gangs.append(gang_status(cache, desired, raw_groups.get((backend.name, key)), snapshot, grace))
    return Report(gangs, snapshot.now, snapshot.absent, snapshot.grouper)


def gang_status(cache: Cache, desired: Desired, raw_group: Mapping[str, Any] | None, snapshot: Snapshot,
                grace_default: float | None) -> GangStatus:
    settings = cache.settings
    backend = desired.backend or settings.default_backend  # the group's own scheduler
    actual = cache.podgroups.of(backend, desired.key)
    current = backend.min_member(actual) if actual is not None else None
    wanted = desired.min_member.value if desired.min_member is not None else None
    if desired.operator is not None:  # the workload's operator makes its PodGroup: podgang made none
        origin = desired.operator
    elif desired.min_member is not None:
        origin = desired.min_member.reason
    elif desired.source == rules.HAND_MADE:
        origin = "as written: only standalone pods use it"
    else:
        origin = "as written"
    adopted = annotations(actual).get(settings.adopted_from_annotation) if actual is not None else None
    if desired.adopted is not None:  # what the grouper's PodGroupAdopted will say
        origin += f"; made by {desired.adopted}: the grouper takes it over (no second group)"
    elif adopted and is_managed(actual, settings):
        origin += f"; adopted from {clip(str(adopted))}"
    gang = GangStatus(
        desired.namespace, desired.name, backend.name, UNKNOWN, "", desired.source, actual is not None,
        actual is not None and is_managed(actual, settings), current, wanted, origin,
        owner=f"{desired.owner.kind.lower()}/{desired.owner.name}" if desired.owner is not None else "",
        scheduler=scheduler_verdict(backend, raw_group), problems=[*desired.problems, *desired.advice],
        never=list(desired.verdicts),
        events=events_about(snapshot.events, backend.podgroup.kind, desired.namespace,
                            backend.holder_name(desired.name)),  # a 1.35 Workload's events are its pod groups'
        kind=backend.podgroup.kind,
    )
    changed = changed_by_others(backend, actual, settings)  # what the grouper's PodGroupChangedByOther says
    if changed is not None:
        gang.changed_by = size_writers(actual)
        gang.problems.append(changed)
    held = size_held(desired, actual, settings)  # what the grouper's MinMemberHeld says
    if held is not None:
        gang.problems.append(held)
    lone_role = None
    if (desired.min_subgroup is not None and desired.source == rules.OWNED and desired.workloads
            and not any(s.parent for s in desired.subgroups)):
        # a lone LWS's replicas sit right under the group: its root is the role
        lone_role = rules.workload_subgroup(desired.workloads[0], settings)
        gang.subgroups[lone_role] = SubgroupStatus(desired.min_subgroup, "the group's minSubGroup", replicas=0)
    for part in desired.subgroups:
        gang.subgroups[part.name] = SubgroupStatus(
            part.min_member, part.reason, replicas=0 if part.of_subgroups else None,
            parent=part.parent or (lone_role if not part.of_subgroups and lone_role else None))
    counted = counted_members(cache, desired)
    for pod in counted:
        state = member_state(pod)
        setattr(gang, state, getattr(gang, state) + 1)
        if state == "pending":
            gang.pending_pods.append(str(metadata(pod).get("name")))
        # in a shared group: the part the grouper counts the pod toward; else the one it names
        subgroup = pod_subgroup(cache, pod) if desired.subgroups else backend.subgroup_of(pod)
        if subgroup:
            gang.subgroups.setdefault(subgroup, SubgroupStatus()).members[state] += 1
    for part in gang.subgroups.values():  # a role's complete replicas
        if part.parent is not None and part.parent in gang.subgroups:
            role = gang.subgroups[part.parent]
            role.replicas = (role.replicas or 0) + 1
            role.complete += part.min_member is not None and part.members["running"] >= part.min_member
    gang.pending_pods.sort()
    if backend.verdict_on_pods and actual is not None:
        gang.scheduler = pods_verdict(counted, gang.min_member)
    _decide_state(gang, cache, desired, actual, snapshot.now, grace_default, bool(counted), snapshot.grouper)
    if gang.never and gang.state in (WAITING, NOT_CREATED, EVICTED):
        # a gang that waits for ever: said beside the scheduler's own verdict (its "not yet")
        first = gang.never[0]
        more = f" (and {len(gang.never) - 1} more)" if len(gang.never) > 1 else ""
        gang.state, gang.state_text = NEVER, f"never placed: {first.what}{more}; {gang.state_text}"
    return gang


MEMBER_STATES = ("running", "pending", "succeeded", "failed", "terminating")


def member_state(pod: Mapping[str, Any]) -> str:
    """One of :data:`MEMBER_STATES`; "running" is bound to a node (what the gang counts)."""
    phase = pod_phase(pod)
    if is_terminating(pod):
        return "terminating"
    if phase in ("Succeeded", "Failed"):
        return phase.lower()
    return "running" if is_active(pod) else "pending"


def _decide_state(gang: GangStatus, cache: Cache, desired: Desired, actual: Any, now: datetime,
                  grace_default: float | None, has_members: bool, grouper: Grouper | None = None) -> None:
    size = gang.min_member if gang.min_member is not None else (gang.wanted or 1)
    if desired.pending:
        gang.state, gang.state_text = UNKNOWN, desired.pending
        return
    if actual is None:
        if desired.source == rules.HAND_MADE:
            backend = desired.backend or cache.settings.default_backend
            holder = cache.podgroups.holder(backend, desired.key)
            missing = backend.missing_group(desired.name, desired.namespace, holder)
            gang.state, gang.state_text = MISSING, f"{missing}: its pods stay Pending"
        else:
            gang.state, gang.state_text = NOT_CREATED, (
                "the grouper has not created the PodGroup: no grouper is running" if grouper is not None
                and grouper.running is False else "the grouper has not created the PodGroup (is it running?)")
        return
    if desired.source is None:
        gang.state, gang.state_text = UNUSED, "no pod or workload uses this PodGroup"
        return
    if has_members and gang.running == gang.pending == 0 and gang.succeeded + gang.failed > 0:
        gang.state, gang.state_text = FINISHED, f"{gang.succeeded} succeeded, {gang.failed} failed"
        return
    last = next((e for e in reversed(gang.events) if e.get("reason") in STALE_REASONS), None)
    short = [f"{name}: {part}" for name, part in gang.subgroups.items() if part.short]
    satisfied = gang.running >= size and not short
    if last is not None and last.get("reason") == EVICTED_EVENT and not satisfied:
        gang.evicted_at = event_time(last)
        ago = _seconds(now - gang.evicted_at) if gang.evicted_at else "?"
        gang.state, gang.state_text = EVICTED, f"evicted {ago} ago; {_running(gang.running, size)}"
        return
    if last is not None and last.get("reason") == STALE_EVENT and not satisfied and gang.succeeded == 0:
        gang.stale = _stale(last, [actual, *with_owners(cache, desired.workloads)], cache.settings, now, grace_default)
        gang.state = STALE
        since = _seconds(now - gang.stale.since)
        tail = _eviction_text(gang.stale, grouper)
        gang.state_text = f"stale for {since}, {tail}; {_running(gang.running, size)}"
        return
    if satisfied:
        gang.state, gang.state_text = SATISFIED, f"{_running(gang.running, size)}"
        return
    missing = size - gang.running
    if missing <= 0:  # enough members in all, but a part is below its own minimum
        gang.state, gang.state_text = WAITING, f"waiting for {'; '.join(short)}; {_running(gang.running, size)}"
        return
    gang.state, gang.state_text = WAITING, (
        f"waiting for {missing} more member{'s' if missing != 1 else ''} to be placed; {_running(gang.running, size)}"
    )


def _eviction_text(stale: Stale, grouper: Grouper | None) -> str:
    """When the rest of a stale gang is evicted: a promise only while a grouper holds
    its Lease; otherwise when it would be, and why nothing evicts it."""
    if stale.evict_in is None:
        return "never evicted (grace period -1)"
    due = f"in {format_duration(int(stale.evict_in))}" if stale.evict_in >= 1 else "now"
    if grouper is None or grouper.running:
        return f"evicting {due}"
    if grouper.running is False:
        return f"no grouper to evict it (due {due})"
    return f"evicting {due} if a grouper runs"


def _running(running: int, size: int) -> str:
    """``2 of 3 running``, or ``4 running, minMember 2`` for a gang larger than its minimum."""
    return f"{running} of {size} running" if running <= size else f"{running} running, minMember {size}"


def _seconds(span: timedelta) -> str:
    """A time span for people: whole seconds."""
    return format_duration(round(span.total_seconds()))


def _stale(event: Mapping[str, Any], objs: list[Any], settings: Settings, now: datetime,
           grace_default: float | None) -> Stale:
    """When a stale gang's rest is evicted: the grace period the rules give it now
    (an annotation on the PodGroup or a workload), else the one the grouper said
    in its GangStale event (its --staleness-grace-period), else ``grace_default``."""
    message = one_line(event.get("message"))
    since = event_time(event) or now
    said = _GRACE_IN_MESSAGE.search(message)
    default = grace_default
    if "not evicting" in message:
        default = None
    elif said:
        try:
            default = rules.parse_duration(said.group(1))
        except ValueError:
            pass
    grace, _ = rules.grace_period_for(objs, default, settings)
    left = None if grace is None else grace - (now - since).total_seconds()
    return Stale(since, grace, left, message)


# ---------------------------------------------------------------------------
# one pod


@dataclass
class Explanation:
    namespace: str
    pod: str
    phase: str
    group: str | None
    why: str  # the rule that put the pod in its gang, or why it is in none
    waits_for: list[str]
    gang: GangStatus | None
    pod_events: list[dict[str, Any]]
    group_events: list[dict[str, Any]]
    grouper: Grouper | None = None


def explain_pod(snapshot: Snapshot, settings: Settings, namespace: str, name: str,
                grace_default: float | None = None) -> Explanation | None:
    """Which gang pod ``namespace/name`` is in and why, and what that gang waits for;
    None when the snapshot has no such pod."""
    raw = next((p for p in snapshot.pods
                if metadata(p).get("name") == name and metadata(p).get("namespace") == namespace), None)
    if raw is None:
        return None
    pod_events = events_about(snapshot.events, "Pod", namespace, name)[-EVENTS_SHOWN:]
    phase = pod_phase(raw)
    out_of_scope = rules.scope_problem(raw, namespace, settings)
    if namespace in settings.excluded_namespaces:
        out_of_scope = f"namespace {namespace} is excluded"
    if out_of_scope:
        return Explanation(namespace, name, phase, None, f"podgang leaves it alone: {out_of_scope}", [], None,
                           pod_events, [])
    cache = fill_cache(snapshot, settings)
    slim = cache.pods.get(key_of(namespace, name))
    found = pod_gang(cache, slim) if slim is not None else None
    natural = natural_gang(cache, slim) if slim is not None else None
    carried = rules.group_of(raw, settings)
    group = carried or (found.name if isinstance(found, rules.Gang) else None)
    if isinstance(natural, rules.Gang) and natural.name == group:
        why = natural.reason  # the rule the webhook (or the grouper's backfill) applied
    elif isinstance(found, rules.Gang):
        why = found.reason
        if isinstance(natural, rules.Gang) and found.hand_made:
            why += f" (without it, the rules would give {natural.name}: {natural.reason})"
    elif isinstance(found, rules.Denial):
        why = f"the rules refuse it: {found.message}"
    else:
        why = "an owner of the pod is not readable: the rules cannot decide yet"
    if group is None:
        return Explanation(namespace, name, phase, None, why, ["podgang to put it in a gang (is the grouper running?)"],
                           None, pod_events, [])
    report = build_report(snapshot, settings, grace_default, namespace, group)
    gang = report.gangs[0] if report.gangs else None
    waits = waits_for(gang, raw, snapshot.grouper) if gang is not None else []
    return Explanation(namespace, name, phase, group, why, waits, gang, pod_events,
                       gang.events[-EVENTS_SHOWN:] if gang is not None else [], snapshot.grouper)


def replica_waits(gang: GangStatus, pod: Mapping[str, Any]) -> list[str]:
    """The pod's own replica, when it is one of several pods and not complete: which, and
    what it waits for."""
    values = {v for v in as_dict(metadata(pod).get("labels")).values() if isinstance(v, str)}
    leaf = next((name for name, p in gang.subgroups.items() if p.parent is not None and name in values), None)
    part = gang.subgroups.get(leaf) if leaf is not None else None
    if part is None or part.parent is None or part.min_member is None:
        return []
    running = part.members["running"]
    if running >= part.min_member:
        return []
    return [f"its replica {leaf} (role {part.parent}) to be complete: {running} of its {part.min_member} pods "
            f"running, {part.members['pending']} pending — the scheduler places a replica whole or not at all"]


def waits_for(gang: GangStatus, pod: Mapping[str, Any], grouper: Grouper | None = None) -> list[str]:
    """What stands between the gang and running, most direct first."""
    out: list[str] = []
    if gang.state == MISSING:
        what = f"{gang.kind} {gang.name}" if gang.kind == "PodGroup" else f"the {gang.kind} that holds {gang.name}"
        out.append(f"{what} to be created in namespace {gang.namespace} (pods naming it stay Pending)")
    elif gang.state == NOT_CREATED:
        out.append(f"the grouper to create {gang.kind} {gang.name} (minMember {gang.wanted})")
    elif gang.state in (WAITING, EVICTED):
        shown = ", ".join(gang.pending_pods[:5]) + (" …" if len(gang.pending_pods) > 5 else "")
        missing = (gang.min_member or 1) - gang.running
        if missing > 0:
            out.append(f"{missing} more member{'s' if missing != 1 else ''} placed by the scheduler"
                       + (f" (pending: {shown})" if shown else " (no pod is pending: the workload has too few pods)"))
        out.extend(f"subgroup {name} to reach its minimum: {part}" for name, part in gang.subgroups.items()
                   if part.short)
        out.extend(replica_waits(gang, pod))
    elif gang.state == STALE and gang.stale is not None:
        when = ("never: its grace period is -1" if gang.stale.evict_in is None
                else f"in {format_duration(int(gang.stale.evict_in))}" if gang.stale.evict_in >= 1 else "now")
        if gang.stale.evict_in is None or grouper is None or grouper.running:
            out.append(f"its lost members to come back; otherwise the rest is evicted {when}")
        elif grouper.running is False:
            out.append(f"its lost members to come back; the rest is due for eviction {when}, but nothing evicts it: "
                       f"{grouper.text}")
        else:
            out.append(f"its lost members to come back; otherwise the rest is evicted {when} ({grouper.text})")
    elif gang.state == NEVER:
        out.extend(f"nothing: it is never placed as the cluster is ({v.kind}): {v.what}"
                   + (f"; {v.scheduler_says}" if v.scheduler_says else "") + f". Fix: {v.fix}" for v in gang.never)
    elif gang.state in (SATISFIED, FINISHED):
        # the gang has its minimum; a pod of a replica beyond it may still wait for that replica
        out.extend(replica_waits(gang, pod) or ["nothing: the gang has " + gang.state_text])
    if gang.min_member is not None and gang.wanted is not None and gang.min_member != gang.wanted:
        out.append(f"the grouper to change minMember {gang.min_member} → {gang.wanted} ({gang.min_member_from})")
    own = pod_scheduling_message(pod)
    if own and gang.state != SATISFIED:
        out.append(f"the pod's PodScheduled condition: {own}")
    out.extend(gang.problems)
    return out
