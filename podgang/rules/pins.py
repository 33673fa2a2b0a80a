"""The numbers users pin on objects: ``podgang.io/min-member``, ``podgang.io/min-available``, and a
workload's minimum of complete replicas.
"""

from __future__ import annotations

from typing import Any

from podgang.kinds import replica_units
from podgang.objects import annotations, kind_name
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.names import _WHOLE_NUMBER, MAX_MIN_MEMBER


def pinned_min_member(obj: Any, settings: Settings = DEFAULT) -> tuple[int | None, str | None]:
    """``podgang.io/min-member`` on an object: (value, None), (None, problem) or (None, None)."""
    raw = annotations(obj).get(settings.min_member_annotation)
    if raw is None:
        return None, None
    text = raw.strip()
    if _WHOLE_NUMBER.fullmatch(text) and int(text) > MAX_MIN_MEMBER:
        return None, (f"{kind_name(obj)}: {settings.min_member_annotation}={_q(raw)} is ignored: "
                      f"a PodGroup holds at most {MAX_MIN_MEMBER} members")
    if _WHOLE_NUMBER.fullmatch(text) and int(text) >= 1:
        return int(text), None
    return None, f"{kind_name(obj)}: {settings.min_member_annotation}={_q(raw)} is ignored: it must be a whole number ≥ 1"


def min_available(obj: Any, settings: Settings = DEFAULT) -> tuple[int | None, str | None]:
    """``podgang.io/min-available`` on a workload: (value, None), (None, problem) or (None, None)."""
    raw = annotations(obj).get(settings.min_available_annotation)
    if raw is None:
        return None, None
    text = raw.strip()
    if _WHOLE_NUMBER.fullmatch(text) and 1 <= int(text) <= MAX_MIN_MEMBER:
        return int(text), None
    return None, (f"{kind_name(obj)}: {settings.min_available_annotation}={_q(raw)} is ignored: "
                  f"it must be a whole number from 1 to {MAX_MIN_MEMBER}")


def min_replicas(workload: Any, settings: Settings = DEFAULT) -> tuple[int, str, bool] | None:
    """How many complete replicas a workload of multi-pod replicas needs at least, why, and
    whether the user set it: ``podgang.io/min-available`` on it, else 1. None for a kind
    whose pods are its units, or one whose size ``podgang.io/min-member`` pins in pods."""
    if replica_units(workload) is None or pinned_min_member(workload, settings)[0] is not None:
        return None
    value, _problem = min_available(workload, settings)
    if value is not None:
        return value, f"{settings.min_available_annotation}={value} complete replicas on {kind_name(workload)}", True
    return 1, f"1 complete replica of {kind_name(workload)} (the default)", False
