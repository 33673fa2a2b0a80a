"""Resource quantities, and what a gang needs at least: its pods' requests summed.

Volcano and scheduler-plugins coscheduling read a PodGroup's ``spec.minResources`` —
the resources the whole gang needs — before they place any of its pods (Volcano to
admit the group into its queue, coscheduling to reject early a gang the cluster cannot
hold). What their own controllers write is the gang's minimum times its pods'
requests; this module computes that, the way the kubelet counts a pod's requests:
its containers and sidecars summed, each regular init container's peak when it is
larger, plus the pod overhead. A request left out falls back to the limit, as the
apiserver defaults it on a pod (a pod template is not defaulted). No I/O.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any, Iterable, Mapping

from podgang.objects import as_dict, as_list

Requests = dict[str, Decimal]

_QUANTITY = re.compile(r"([+-]?[0-9.]+)([KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE])?")
_SUFFIX = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": Decimal(1000),
    "M": Decimal(10) ** 6, "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18, "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40, "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60,
}  # fmt: skip
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
#: the largest quantity a request can hold (an int64 of milli-units): beyond it, not a request
_MAX = Decimal(2**63 - 1) / 1000
_MILLI = Decimal("0.001")


def quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource quantity as a number, or None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value)) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    match = _QUANTITY.fullmatch(value.strip())
    if not match:
        return None
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:
        return None
    suffix = match.group(2)
    if not suffix:
        return number
    if suffix in _SUFFIX:
        return number * _SUFFIX[suffix]
    try:
        return number.scaleb(int(suffix[1:]))  # a decimal exponent: 1e3
    except ArithmeticError:  # an exponent no quantity can have
        return None


def request(value: Any) -> Decimal | None:
    """A quantity a pod can request (0 up to an int64 of milli-units), else None."""
    try:
        amount = quantity(value)
        return amount if amount is not None and 0 <= amount <= _MAX else None
    except ArithmeticError:  # a huge exponent
        return None


def container_requests(container: Any) -> Requests:
    """One container's requests; a resource it only limits counts at its limit."""
    resources = as_dict(as_dict(container).get("resources"))
    out: Requests = {}
    for section in ("limits", "requests"):  # requests win
        for name, value in as_dict(resources.get(section)).items():
            amount = request(value)
            if isinstance(name, str) and amount is not None:
                out[name] = amount
    return out


def pod_requests(pod_or_template: Any) -> Requests:
    """What one pod of ``pod_or_template`` requests: max(containers + sidecars, each init
    container + the sidecars started before it) + overhead."""
    spec = as_dict(as_dict(pod_or_template).get("spec"))
    total: Requests = {}
    for container in as_list(spec.get("containers")):
        _add(total, container_requests(container))
    sidecars: Requests = {}
    peak: Requests = {}
    for container in as_list(spec.get("initContainers")):
        own = container_requests(container)
        if as_dict(container).get("restartPolicy") == "Always":  # a sidecar runs beside the containers
            _add(sidecars, own)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, own)
        for name, amount in step.items():
            peak[name] = max(peak.get(name, Decimal(0)), amount)
    _add(total, sidecars)
    for name, amount in peak.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    overhead: Requests = {}
    for name, value in as_dict(spec.get("overhead")).items():
        amount = request(value)
        if isinstance(name, str) and amount is not None:
            overhead[name] = amount
    _add(total, overhead)
    return {name: amount for name, amount in total.items() if amount > 0}


def gang_requests(parts: Iterable[tuple[int, Any]]) -> Requests:
    """What a gang needs at least: Σ count × :func:`pod_requests` over its ``parts``,
    each (how many pods, a pod or pod template)."""
    total: Requests = {}
    for count, pod in parts:
        for name, amount in pod_requests(pod).items():
            total[name] = total.get(name, Decimal(0)) + amount * max(int(count), 0)
    return {name: amount for name, amount in total.items() if amount > 0}


def resource_list(requests: Mapping[str, Decimal]) -> dict[str, str]:
    """``requests`` as a Kubernetes ResourceList, keys sorted: ``{"cpu": "1500m", "memory": "3Gi"}``."""
    return {name: format_quantity(requests[name]) for name in sorted(requests)}


def format_quantity(amount: Decimal) -> str:
    """A quantity in its shortest exact spelling: ``2``, ``1500m``, ``3Gi``; a fraction
    below a milli-unit is rounded up (a minimum never shrinks)."""
    milli = int((amount / _MILLI).to_integral_value(rounding="ROUND_CEILING"))
    if milli % 1000:
        return f"{milli}m"
    whole = milli // 1000
    for suffix, factor in _BINARY:
        if whole and whole % factor == 0:
            return f"{whole // factor}{suffix}"
    return str(whole)


def parse_resource_list(value: Any) -> Requests | None:
    """A ResourceList as numbers; None when it is not a map of quantities."""
    if not isinstance(value, Mapping):
        return None
    out: Requests = {}
    for name, text in value.items():
        amount = request(text)
        if not isinstance(name, str) or amount is None:
            return None
        out[name] = amount
    return out


def same_resources(a: Any, b: Any) -> bool:
    """Whether two ResourceLists hold the same amounts (``1000m`` is ``1``), zeros aside."""
    left, right = parse_resource_list(a), parse_resource_list(b)
    if left is None or right is None:
        return False
    return {k: v for k, v in left.items() if v} == {k: v for k, v in right.items() if v}


def describe(resource_list_: Mapping[str, str]) -> str:
    """``cpu 4, memory 8Gi``: a ResourceList for a message."""
    return ", ".join(f"{name} {value}" for name, value in resource_list_.items())


def compact(resource_list_: Mapping[str, str]) -> str:
    """``cpu=4,memory=8Gi``: a ResourceList in one annotation value."""
    return ",".join(f"{name}={value}" for name, value in resource_list_.items())


def parse_compact(text: str) -> dict[str, str]:
    """:func:`compact`'s text as a ResourceList again (what is not ``name=value`` is dropped)."""
    pairs = (part.split("=", 1) for part in text.split(",") if "=" in part)
    return {name.strip(): value.strip() for name, value in pairs}


def _add(into: Requests, more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        into[name] = into.get(name, Decimal(0)) + amount
