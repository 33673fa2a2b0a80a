"""Pod state and durations: when a pod counts as active, how long a grace period is.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

from podgang.objects import annotations, clip, kind_name
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: Any) -> float:
    """``90s``, ``5m``, ``1h30m``, ``500ms`` or a bare number of seconds -> seconds.

    Raises ValueError with a message that says what is accepted.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0 or not math.isfinite(text):
            raise ValueError(f"invalid duration {_q(text)}: must be ≥ 0")
        return float(text)
    raw = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    if raw and re.fullmatch(r"(\d+(?:\.\d+)?(?:ms|h|m|s))+", raw):
        return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(raw))
    raise ValueError(f"invalid duration {_q(text)}: use e.g. 90s, 5m, 1h30m or a number of seconds")


def grace_period_for(objs: Iterable[Any], default: float | None, settings: Settings = DEFAULT) -> tuple[float | None, str]:
    """The staleness grace period (seconds; None = never evict) from the first of
    ``objs`` (e.g. PodGroup, then workload) that sets the annotation, else ``default``.
    A malformed annotation is skipped, and the reason says so.
    """
    notes = []
    for obj in objs:
        raw = annotations(obj).get(settings.grace_period_annotation)
        if raw is None:
            continue
        if raw.strip() == "-1":
            return None, f"{settings.grace_period_annotation}=-1 on {kind_name(obj)}: never evicts"
        try:
            return parse_duration(raw), f"{settings.grace_period_annotation}={clip(raw)} on {kind_name(obj)}"
        except ValueError as exc:
            notes.append(f"ignored {kind_name(obj)}: {exc}")
    text = "default" if not notes else "default (" + "; ".join(notes) + ")"
    return default, text
