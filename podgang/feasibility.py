"""Gangs the scheduler will never place, named before anyone waits for them.

Gang scheduling fails silently: every pod ``Pending`` for ever, and the scheduler's own
words ("Resources were found for 6 pods while 9 are required") read like "not yet". Some
gangs podgang can prove will never start, from what it already knows — the gang's minimum
pods and their requests, the queue and priority it is given — and the cluster's facts
(:class:`~podgang.backends.base.ClusterFacts`: queues, PriorityClasses, nodes):

- the queue it names does not exist, or is not a leaf (KAI: ``QueueDoesNotExist``);
- a PriorityClass its pods name does not exist (the apiserver refuses every pod);
- it may not be preempted and its minimum exceeds its queue's quota, or a parent's
  (KAI: ``NonPreemptibleOverQuota``): until the quota grows or it is made preemptible;
- its minimum exceeds its queue's limit, or a parent's (KAI: ``OverLimit``);
- one of its pods asks more than any node it may use has, or its minimum exceeds what all
  the nodes it may use can hold (node selector, required node affinity, taints, cordons,
  the scheduler's node pool): never on this cluster as it is.

A gang that merely waits for room (other gangs hold it) gets no verdict: every check
compares with the cluster's whole capacity and the queue's bounds, never with what is
free. Pure functions, used by the grouper (events, metric), the webhook (admission
warnings), ``podgang status`` and ``podgang plan`` alike. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal
from typing import Any, Iterable, Mapping, Sequence

from podgang import quantities
from podgang.backends.base import Backend, ClusterFacts
from podgang.nodes import NodeFacts, Placement, may_use, placement
from podgang.objects import quoted, spec

QUEUE_MISSING = "queue-missing"
QUEUE_NOT_LEAF = "queue-not-leaf"
PRIORITY_CLASS_MISSING = "priority-class-missing"
OVER_QUOTA = "over-quota"
OVER_LIMIT = "over-limit"
POD_TOO_LARGE = "pod-too-large"
CLUSTER_TOO_SMALL = "cluster-too-small"
#: every verdict, in the order they are judged (the metric's ``verdict`` label values)
VERDICTS = (QUEUE_MISSING, QUEUE_NOT_LEAF, PRIORITY_CLASS_MISSING, OVER_QUOTA, OVER_LIMIT, POD_TOO_LARGE,
            CLUSTER_TOO_SMALL)
#: the verdicts that an object does not exist, by the kind of that object
ABSENT = {QUEUE_MISSING: "Queue", PRIORITY_CLASS_MISSING: "PriorityClass"}
#: the state ``podgang status`` shows for a gang with a verdict
NEVER = "NEVER"
ADD_NODES = "add nodes where its pods may go, or lower the gang's minimum or its pods' requests"
#: at most this many nodes named in a message
NODES_NAMED = 3


@dataclass(frozen=True)
class Verdict:
    """Why a gang is never placed: ``kind`` (one of :data:`VERDICTS`), what holds (with the
    numbers), what its scheduler says meanwhile, and the change that would fix it."""

    kind: str
    what: str
    fix: str
    scheduler_says: str = ""
    #: the object whose absence the verdict is (the queue or PriorityClass named), if it is one
    missing: str = ""

    @property
    def message(self) -> str:
        says = f" ({self.scheduler_says})" if self.scheduler_says else ""
        return f"never placed: {self.what}{says}; fix: {self.fix}"

    def __str__(self) -> str:
        return self.message


def never_placed(backend: Backend, options: Mapping[str, Any], parts: Sequence[tuple[int, Any]] | None,
                 facts: ClusterFacts, *, least: Mapping[str, Decimal] | None = None) -> tuple[Verdict, ...]:
    """The verdicts that hold for a gang of ``backend`` with settings ``options`` (its
    :meth:`~podgang.backends.base.Backend.gang_options`) and minimum pods ``parts`` ((how
    many, pod or pod template); None: not known — only its settings are judged), given
    ``facts``. ``least``: where the minimum pods are not known, the least the gang counts
    against its queue (:func:`least_demand`). Empty: nothing proves it will never be placed."""
    found: list[Verdict] = []
    queue = options.get("queue")
    queue_missing = _queue_verdict(backend, options, queue, facts)
    if queue_missing is not None:
        found.append(queue_missing)
    demand = backend.queue_demand(parts, facts) if parts else dict(least or {})
    if parts:
        found.extend(_priority_verdicts(parts, facts))
    if queue_missing is None and isinstance(queue, str) and demand:
        found.extend(_queue_bound_verdicts(backend, options, queue, demand, facts))
    if parts:
        found.extend(_node_verdicts(backend, parts, facts))
    return tuple(found)


def least_demand(backend: Backend, pods: Sequence[Any], minimum: int,
                 facts: ClusterFacts | None = None) -> dict[str, Decimal]:
    """The least a gang of ``pods`` (standalone pods: nothing says which ``minimum`` of them
    its scheduler places first) counts against its queue: per resource, its ``minimum``
    smallest pods' amounts. Empty when fewer pods than the minimum exist."""
    if minimum <= 0 or len(pods) < minimum:
        return {}
    each = [backend.queue_demand(((1, pod),), facts) for pod in pods]
    names = {name for demand in each for name in demand}
    least = {name: sum(sorted(d.get(name, Decimal(0)) for d in each)[:minimum]) for name in names}
    return {name: Decimal(amount) for name, amount in least.items() if amount > 0}


def _where(options: Mapping[str, Any], setting: str) -> str:
    origins = options.get("origins")
    for entry in origins if isinstance(origins, (list, tuple)) else ():
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] == setting:
            return f" ({entry[1]})"
    return ""


def _queue_verdict(backend: Backend, options: Mapping[str, Any], queue: Any, facts: ClusterFacts) -> Verdict | None:
    known = facts.queues
    if known is None or not isinstance(queue, str):
        return None
    title = backend.scheduler_title
    if queue not in known:
        return Verdict(QUEUE_MISSING, f"{title} queue {quoted(queue)}{_where(options, 'queue')} does not exist",
                       f"create a Queue named {quoted(queue)}, or name an existing leaf queue",
                       f"{title}: QueueDoesNotExist", missing=queue)
    if not known[queue]:
        return Verdict(QUEUE_NOT_LEAF, f"{title} queue {quoted(queue)}{_where(options, 'queue')} is not a leaf "
                       f"queue, and {title} places only gangs of leaf queues", "name one of its child queues")
    return None


def _priority_verdicts(parts: Sequence[tuple[int, Any]], facts: ClusterFacts) -> list[Verdict]:
    known = facts.priority_classes
    if known is None:
        return []
    missing = sorted({name for _, pod in parts
                      if isinstance(name := spec(pod).get("priorityClassName"), str) and name and name not in known})
    return [Verdict(PRIORITY_CLASS_MISSING, f"PriorityClass {quoted(name)} named by its pods does not exist",
                    f"create PriorityClass {quoted(name)}, or name an existing one",
                    f"the apiserver refuses its pods: no PriorityClass with name {quoted(name)} was found",
                    missing=name)
            for name in missing]


def _queue_bound_verdicts(backend: Backend, options: Mapping[str, Any], queue: str,
                          demand: Mapping[str, Decimal], facts: ClusterFacts) -> list[Verdict]:
    bounds = facts.queue_bounds
    if bounds is None:
        return []
    why = backend.non_preemptible(options, facts)
    found: list[Verdict] = []
    title = backend.scheduler_title
    checks = ([("quota", OVER_QUOTA)] if why else []) + [("limit", OVER_LIMIT)]
    for bound, kind in checks:
        hit = _over(queue, bounds, demand, bound)
        if hit is None:
            continue
        resource, blocking = hit
        asked = backend.queue_words(resource, demand[resource])
        held = ", ".join(f"{quoted(name)} {backend.queue_words(resource, allowed)}" for name, allowed in blocking)
        lead = f"non-preemptible ({why}): " if bound == "quota" else ""
        what = f"{lead}its minimum, {asked}, is over the {bound} of {title} queue {held}"
        fix = backend.queue_fix(", ".join(name for name, _ in blocking), bound, resource, demand[resource])
        says = backend.queue_verdict_words(bound)
        found.append(Verdict(kind, what, fix, f"{title}: {says}" if says else ""))
    return found


def _over(queue: str, bounds: Mapping[str, Any], demand: Mapping[str, Decimal],
          bound: str) -> tuple[str, list[tuple[str, Decimal]]] | None:
    """The first resource of ``demand`` over the ``bound`` of ``queue`` or a queue above it,
    and every queue on that way whose ``bound`` it exceeds (each with what it allows): all of
    them must change."""
    chain = []
    seen: set[str] = set()
    name: str | None = queue
    while name is not None and name not in seen and name in bounds:
        seen.add(name)
        chain.append(bounds[name])
        name = bounds[name].parent
    for resource in sorted(demand):
        blocking = [(q.name, allowed[resource]) for q in chain
                    if resource in (allowed := q.quota if bound == "quota" else q.limit)
                    and demand[resource] > allowed[resource]]
        if demand[resource] > 0 and blocking:
            return resource, blocking
    return None


# -- nodes


@dataclass(frozen=True)
class _Room:
    """The nodes one placement may use, and what they allocate in all per resource."""

    nodes: tuple[NodeFacts, ...]
    totals: Mapping[str, Decimal]

    def total(self, resource: str) -> Decimal:
        return self.totals.get(resource, Decimal(0))


def _room_of(nodes: Iterable[NodeFacts]) -> _Room:
    kept = tuple(nodes)
    totals: dict[str, Decimal] = {}
    for n in kept:
        for resource, amount in n.allocatable.items():
            totals[resource] = totals.get(resource, Decimal(0)) + amount
    return _Room(kept, totals)


#: the most answers kept with one set of facts (placements and pod shapes are few; a bound all the same)
MEMO_SIZE = 4096


def _memo(facts: ClusterFacts, key: Any, compute: Any) -> Any:
    """``compute()``, kept with ``facts`` under ``key``: a webhook admitting many pods of one
    shape, or a grouper judging many gangs of one placement, walks the nodes once."""
    memo = facts.memo
    if key not in memo:
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[key] = compute()
    return memo[key]


def _room(facts: ClusterFacts, where: Placement) -> _Room:
    return _memo(facts, ("room", where), lambda: _room_of(n for n in facts.nodes or () if may_use(n, where)))


def _holds(facts: ClusterFacts, where: Placement, requests: Mapping[str, Decimal]) -> tuple[int, int]:
    """How many pods of ``requests`` the nodes ``where`` allows hold, at most on one node and in all."""
    def compute() -> tuple[int, int]:
        fits = [_fits(n, requests) for n in _room(facts, where).nodes]
        return max(fits, default=0), sum(fits)
    return _memo(facts, ("holds", where, tuple(sorted(requests.items()))), compute)


def _fits(node: NodeFacts, requests: Mapping[str, Decimal]) -> int:
    """How many pods of ``requests`` one empty node holds."""
    most: int | None = None
    for resource, amount in requests.items():
        if amount <= 0:
            continue
        have = node.allocatable.get(resource, Decimal(0))
        n = int((have / amount).to_integral_value(rounding=ROUND_FLOOR))
        most = n if most is None else min(most, n)
    pods = node.allocatable.get("pods")
    if pods is not None:
        most = int(pods) if most is None else min(most, int(pods))
    return most if most is not None else 0


def _node_verdicts(backend: Backend, parts: Sequence[tuple[int, Any]], facts: ClusterFacts) -> list[Verdict]:
    if facts.nodes is None:
        return []
    found: list[Verdict] = []
    # the pods of each placement by what each requests: roles alike (a PyTorchJob's master and
    # workers) are counted together, so a message counts the whole gang, not one role of it
    by_placement: dict[Placement, dict[tuple[tuple[str, Decimal], ...], int]] = {}
    for count, pod in parts:
        requests = backend.node_requests(pod)
        if count <= 0 or not requests:
            continue
        shapes_here = by_placement.setdefault(placement(pod, backend.node_pool(pod)), {})
        shape = tuple(sorted(requests.items()))
        shapes_here[shape] = shapes_here.get(shape, 0) + int(count)
    for where, alike in by_placement.items():
        shapes = [(count, dict(shape)) for shape, count in alike.items()]
        room = _room(facts, where)
        if not room.nodes:
            found.append(Verdict(
                CLUSTER_TOO_SMALL, f"no node it may use exists ({_scope(room, where)})",
                "add nodes where its pods may go, or widen where they may go (node selector, tolerations)",
                f"{backend.scheduler_title} says only that the pods do not fit yet"))
            continue
        for count, requests in shapes:
            most, held = _holds(facts, where, requests)
            if not most:
                largest = _largest(room, requests)
                found.append(Verdict(
                    POD_TOO_LARGE, f"one pod requests {_describe(requests)}, more than any node it may use has "
                    f"({_scope(room, where)}{largest})",
                    "add a node that large where its pods may go, lower the pod's requests, or widen where it "
                    "may go (node selector, tolerations)",
                    f"{backend.scheduler_title} says only that the pods do not fit yet"))
                break
            if held < count:
                found.append(Verdict(
                    CLUSTER_TOO_SMALL, f"its minimum of {count} pods of {_describe(requests)} exceeds what the nodes "
                    f"it may use hold even empty: {held} such pods ({_scope(room, where)})",
                    ADD_NODES, f"{backend.scheduler_title} says only that the gang does not fit yet"))
                break
        else:
            total: dict[str, Decimal] = {}
            for count, requests in shapes:
                for resource, amount in requests.items():
                    total[resource] = total.get(resource, Decimal(0)) + amount * count
            short = sorted(r for r, amount in total.items() if amount > room.total(r))
            if short:
                r = short[0]
                found.append(Verdict(
                    CLUSTER_TOO_SMALL, f"its minimum requests {r} {quantities.format_quantity(total[r])} in all, "
                    f"more than the nodes it may use allocate ({r} {quantities.format_quantity(room.total(r))}; "
                    f"{_scope(room, where)})", ADD_NODES, f"{backend.scheduler_title} says only that the gang does "
                    f"not fit yet"))
    return found


def _scope(room: _Room, where: Placement) -> str:
    names = ", ".join(n.name for n in room.nodes[:NODES_NAMED])
    more = f" and {len(room.nodes) - NODES_NAMED} more" if len(room.nodes) > NODES_NAMED else ""
    nodes = f"{len(room.nodes)} node{'s' if len(room.nodes) != 1 else ''}" + (f": {names}{more}" if names else "")
    limits = where.describe()
    return f"{nodes}{'; ' + limits if limits else ''}"


def _largest(room: _Room, requests: Mapping[str, Decimal]) -> str:
    if not room.nodes:
        return ""
    parts = []
    for resource in sorted(requests):
        best = max(room.nodes, key=lambda n: n.allocatable.get(resource, Decimal(0)))
        parts.append(f"{resource} {quantities.format_quantity(best.allocatable.get(resource, Decimal(0)))}")
    return f"; the most any has: {', '.join(parts)}"


def _describe(requests: Mapping[str, Decimal]) -> str:
    return quantities.describe(quantities.resource_list(requests))


def counts(kinds_per_gang: Iterable[Iterable[str]]) -> dict[str, int]:
    """How many gangs have each verdict kind (a gang counted once per kind), every kind present."""
    out = dict.fromkeys(VERDICTS, 0)
    for gang in kinds_per_gang:
        for kind in set(gang):
            out[kind] = out.get(kind, 0) + 1
    return out
