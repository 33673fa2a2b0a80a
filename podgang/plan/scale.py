"""``podgang plan --scale``: the plan after scales, each group remembering its size before them.
"""

from __future__ import annotations

import copy
from typing import Any


from podgang import kinds
from podgang import plan_codes as codes
from podgang.backends.base import PATCH, REFUSE
from podgang.manifests import Manifest
from podgang.objects import merge_patch as _merge
from podgang.objects import metadata
from podgang.settings import DEFAULT, Settings

from podgang.plan.build import build_plan
from podgang.plan.model import Finding, Known, MAX_SCALE, Plan, ScaleError


def apply_scale(manifests: list[Manifest], scales: dict[str, int]) -> tuple[list[Manifest], list[str]]:
    """Copies of ``manifests`` with ``KIND/NAME[:PART]=N`` scales applied, and what changed.
    The kind's registry entry says which field a scale sets (a Kubeflow job's workers, a
    RayCluster's worker group, a JobSet's replicated job: ``PART``)."""
    out = [Manifest(copy.deepcopy(m.obj), m.source) for m in manifests]
    done: list[str] = []
    for target, count in scales.items():
        kind_text, _, named = target.partition("/")
        name, _, part = named.partition(":")
        entry = kinds.scale_target(kind_text)
        if entry is None or not name:
            scalable = sorted(k.kind for k in kinds.WORKLOADS.values() if k.scales)
            raise ScaleError(f"--scale {target}={count}: expected KIND/NAME=N with KIND one of {', '.join(scalable)}"
                             f" (KIND/NAME:PART=N for a part: a replica type, a worker group, a replicated job)")
        if not 0 <= count <= MAX_SCALE:
            raise ScaleError(f"--scale {target}={count}: a count is a whole number from 0 to {MAX_SCALE}")
        hits = [m for m in out if kinds.workload_kind(m.obj) is entry and metadata(m.obj).get("name") == name]
        if not hits:
            raise ScaleError(f"--scale {target}={count}: no {entry.kind} named {name!r} in the manifests")
        for m in hits:
            path = kinds.scale_field(entry, m.obj, part or None)
            if isinstance(path, str):
                raise ScaleError(f"--scale {target}={count}: {entry.kind.lower()}/{name}: {path}")
            node: Any = m.obj
            for step in path[:-1]:
                if isinstance(node, dict) and isinstance(step, str):
                    node = node.setdefault(step, {})
                elif isinstance(node, list) and isinstance(step, int) and step < len(node):
                    node = node[step]
                else:
                    node = {}
            old = node.get(path[-1]) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node[path[-1]] = count
            before = old if old is not None else 1
            done.append(f"{entry.kind.lower()}/{name} {kinds.path_text(path[1:])} {before} → {count}")
    return out, done


def plan_with_scale(
    manifests: list[Manifest],
    scales: dict[str, int],
    settings: Settings = DEFAULT,
    default_namespace: str = "default",
    known: Known = Known(),
) -> Plan:
    """The plan after ``scales``; each group remembers its minMember before them."""
    if not scales:
        return _refused_sizes(build_plan(manifests, settings, default_namespace, known), settings)
    before = build_plan(manifests, settings, default_namespace, known)
    scaled, changes = apply_scale(_as_followed(manifests, before, settings), scales)
    after = build_plan(scaled, settings, default_namespace, known)
    after.scaled = changes
    for key, group in after.groups.items():
        old = before.groups.get(key)
        group.before = old.min_member if old else None
    return _refused_sizes(after, settings)


def _refused_sizes(plan: Plan, settings: Settings) -> Plan:
    """A hand-made group the plan would resize to a size its scheduler refuses (a semi-preemptible
    KAI group's raise): said, as the grouper says it, and the group keeps its size."""
    for group in plan.groups.values():
        if group.origin != "hand-made" or group.defined_obj is None or group.min_member.pinned:
            continue
        backend = group.backend or settings.default_backend
        resize = backend.resize(group.defined_obj, group.min_member.value)
        if resize.action == REFUSE:
            plan.warnings.append(Finding(codes.SIZE_REFUSED, group.defined_at, f"PodGroup {group.namespace}/{group.name}",
                                         f"minMember stays {backend.min_member(group.defined_obj)} (wanted "
                                         f"{group.min_member.value}): {resize.why}"))
    return plan


def _as_followed(manifests: list[Manifest], plan: Plan, settings: Settings) -> list[Manifest]:
    """The manifests as the grouper leaves them after its first look: each hand-made group
    whose size it follows at that size, marked followed (``podgang.io/followed-min-member``),
    so that a scale is followed, not taken for the user's elastic gang."""
    out = []
    for m in manifests:
        group = next((g for g in plan.groups.values() if g.defined_at == m.source and g.origin == "hand-made"), None)
        if group is None or group.min_member.pinned or group.defined_obj is None:
            out.append(m)
            continue
        backend = group.backend or settings.default_backend
        doc = copy.deepcopy(m.obj)
        resize = backend.resize(doc, group.min_member.value)
        if resize.action != PATCH:
            out.append(m)
            continue
        if resize.body is not None:
            _merge(doc, resize.body)
        doc.setdefault("metadata", {}).setdefault("annotations", {})[settings.followed_size_annotation] = str(
            group.min_member.value)
        out.append(Manifest(doc, m.source))
    return out
