"""What KAI counts against its queues and nodes, as the never-placed verdicts
(:mod:`podgang.feasibility`) ask it: the Queues' quotas and limits in KAI's units, a GPU
fraction or a GPU-memory request as its share of a GPU, the node pool, and KAI's
non-preemptible rule. Apart from the backend's membership and PodGroups, which never
read them. No I/O.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any, Mapping

from podgang import quantities
from podgang.backends.base import PRIORITY_CLASSES, ClusterFacts, QueueFacts
from podgang.backends.capabilities import Feasibility
from podgang.backends.kai.keys import (GPU_FRACTION_ANNOTATION, GPU_FRACTION_DEVICES_ANNOTATION, GPU_MEMORY_ANNOTATION,
                                       GPU_MEMORY_LABEL, GPU_RESOURCE, NODE_POOL_LABEL, NON_PREEMPTIBLE_PRIORITY,
                                       PREEMPTIBILITY_LABEL, QUEUE_RESOURCES, QUEUES, SEMI_PREEMPTIBLE, TRAIN)
from podgang.nodes import NODES
from podgang.objects import annotations, as_dict, as_list, labels, metadata, spec


class KaiFeasibility(Feasibility):
    """KAI's side of :class:`podgang.backends.capabilities.Feasibility`."""

    fact_resources = (PRIORITY_CLASSES, QUEUES, NODES)
    scheduler_title = "KAI"

    def cluster_facts(self, found: Mapping[str, Any]) -> ClusterFacts:
        common = super().cluster_facts(found)
        listed = cluster_facts(found.get(PRIORITY_CLASSES.kind), found.get(QUEUES.kind))
        queues = found.get(QUEUES.kind)
        bounds = None if queues is None else {b.name: b for q in as_list(queues) if (b := queue_bounds(q))}
        return dataclasses.replace(common, queues=listed.queues, queue_bounds=bounds)

    def queue_demand(self, parts: Any, facts: ClusterFacts | None = None) -> dict[str, Decimal]:
        """CPU cores, memory bytes and GPUs as KAI's proportion plugin counts a gang's pods against
        its queue: whole GPUs, a fraction (``gpu-fraction`` × ``gpu-fraction-num-devices``) as that
        part of a GPU, and a ``gpu-memory`` request as its share of the largest GPU memory any
        node has (label ``nvidia.com/gpu.memory``, MiB; none labelled: not counted, as KAI)."""
        total = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0)}
        largest = _largest_gpu_memory(facts)
        for count, pod in parts:
            requests = quantities.pod_requests(pod)
            n = max(int(count), 0)
            total["cpu"] += requests.get("cpu", Decimal(0)) * n
            total["memory"] += requests.get("memory", Decimal(0)) * n
            total["gpu"] += (requests.get(GPU_RESOURCE, Decimal(0)) + _gpu_fraction(pod)) * n
            memory = quantities.request(annotations(pod).get(GPU_MEMORY_ANNOTATION))
            if largest and memory:
                devices = quantities.request(annotations(pod).get(GPU_FRACTION_DEVICES_ANNOTATION) or "1") or 1
                total["gpu"] += devices * memory / largest * n
        return {name: amount for name, amount in total.items() if amount > 0}

    def node_requests(self, pod_or_template: Any) -> dict[str, Decimal]:
        """A pod's requests, a GPU fraction taking its share of a node's GPUs."""
        requests = quantities.pod_requests(pod_or_template)
        fraction = _gpu_fraction(pod_or_template)
        if fraction:
            requests[GPU_RESOURCE] = requests.get(GPU_RESOURCE, Decimal(0)) + fraction
        return requests

    def node_pool(self, pod_or_template: Any) -> dict[str, str]:
        pool = labels(pod_or_template).get(NODE_POOL_LABEL)
        return {NODE_POOL_LABEL: pool} if pool else {}

    def non_preemptible(self, options: Mapping[str, Any], facts: ClusterFacts) -> str | None:
        """KAI's rule: label ``kai.scheduler/preemptibility``, else a priority of 100 or more. A
        semi-preemptible group's (KAI v0.18) minimum is non-preemptible and in quota too."""
        said = as_dict(options.get("extra_spec")).get("preemptibility")
        if said == "non-preemptible":
            return f"label {PREEMPTIBILITY_LABEL}=non-preemptible"
        if said == SEMI_PREEMPTIBLE:
            return f"spec.preemptibility {SEMI_PREEMPTIBLE}"
        if said == "preemptible":
            return None
        name = options.get("priority_class")
        value = (facts.priority_values or {}).get(name) if isinstance(name, str) else None
        if value is not None and value >= NON_PREEMPTIBLE_PRIORITY:
            return f"priority {name} {value} >= {NON_PREEMPTIBLE_PRIORITY}"
        return None

    def queue_words(self, resource: str, amount: Decimal) -> str:
        if resource == "cpu":
            return f"{_number(amount)} CPU cores" if amount != 1 else "1 CPU core"
        if resource == "memory":
            return f"{_number(amount / Decimal(10) ** 6)} MB memory"
        return f"{_number(amount)} GPUs"

    def queue_fix(self, queue: str, bound: str, resource: str, amount: Decimal) -> str:
        unit = dict(QUEUE_RESOURCES)[resource]
        value = (amount / unit).to_integral_value(rounding="ROUND_CEILING") if resource != "gpu" else amount
        fix = f"set spec.resources.{resource}.{bound} >= {_number(value)} (or -1) on Queue {queue}"
        if bound == "quota":
            fix += (f", or make the gang preemptible (label {PREEMPTIBILITY_LABEL}=preemptible, or a "
                    f"priorityClassName below {NON_PREEMPTIBLE_PRIORITY} such as {TRAIN}; a PodGroup made before "
                    f"keeps its own: delete it to have it made again)")
        return fix

    def queue_verdict_words(self, bound: str) -> str:
        return "NonPreemptibleOverQuota" if bound == "quota" else "OverLimit"


def cluster_facts(priority_classes: Any, queues: Any) -> ClusterFacts:
    """:class:`ClusterFacts` from listed PriorityClasses and KAI Queues (either None
    when not known): a queue is a leaf unless another names it as its parent."""
    def name(obj: Any) -> str | None:
        value = metadata(obj).get("name")
        return value if isinstance(value, str) and value else None

    names = None if priority_classes is None else frozenset(
        n for p in as_list(priority_classes) if (n := name(p)))
    if queues is None:
        return ClusterFacts(names, None)
    parents = {p for q in as_list(queues) if isinstance(p := spec(q).get("parentQueue"), str)}
    return ClusterFacts(names, {n: n not in parents for q in as_list(queues) if (n := name(q))})


def queue_bounds(queue: Any) -> QueueFacts | None:
    """A KAI Queue's quota and limit per resource, in :meth:`KaiBackend.queue_demand`'s units
    (-1, or a resource left out: unbounded)."""
    name = metadata(queue).get("name")
    if not isinstance(name, str) or not name:
        return None
    resources = as_dict(spec(queue).get("resources"))
    quota: dict[str, Decimal] = {}
    limit: dict[str, Decimal] = {}
    for resource, unit in QUEUE_RESOURCES:
        for bound, into in (("quota", quota), ("limit", limit)):
            amount = quantities.quantity(as_dict(resources.get(resource)).get(bound))
            if amount is not None and amount >= 0:
                into[resource] = amount * unit
    parent = spec(queue).get("parentQueue")
    return QueueFacts(name, parent if isinstance(parent, str) and parent else None, quota, limit)


def _largest_gpu_memory(facts: ClusterFacts | None) -> Decimal | None:
    """The most memory one GPU of any node has (MiB), as KAI reads it from the node label
    (a value of a TiB of MiB or more is bytes; floored to hundreds; 100 or less: unlabelled)."""
    if facts is None or not facts.nodes:
        return None
    if "largest-gpu-memory" not in facts.memo:  # once per set of facts
        facts.memo["largest-gpu-memory"] = _gpu_memory_of(facts)
    return facts.memo["largest-gpu-memory"]


def _gpu_memory_of(facts: ClusterFacts) -> Decimal | None:
    found = []
    for node in facts.nodes or ():
        try:
            value = int(node.labels.get(GPU_MEMORY_LABEL, ""))
        except ValueError:
            continue
        if value >= 2 ** 20:  # a TiB in MiB: the value is in bytes (NVIDIA's feature discovery bug)
            value //= 2 ** 20
        value -= value % 100
        if value > 100:
            found.append(value)
    return Decimal(max(found)) if found else None


def _gpu_fraction(pod: Any) -> Decimal:
    """The GPUs a pod's ``gpu-fraction`` annotation asks: fraction × devices (0 when none)."""
    fraction = quantities.request(annotations(pod).get(GPU_FRACTION_ANNOTATION))
    if fraction is None or not 0 < fraction < 1:
        return Decimal(0)
    devices = quantities.request(annotations(pod).get(GPU_FRACTION_DEVICES_ANNOTATION) or "1") or Decimal(1)
    return fraction * devices


def _number(amount: Decimal) -> str:
    """``9``, ``0.5``: a number without trailing zeros, to three decimals at most (rounded up:
    what is over a bound stays over it)."""
    return format(amount.quantize(Decimal("0.001"), rounding="ROUND_CEILING").normalize(), "f")
