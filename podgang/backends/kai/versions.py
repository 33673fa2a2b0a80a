"""Which KAI-Scheduler release podgang speaks to, and how a cluster shows it.

KAI v0.18 (the long-term release) changed what podgang's behaviour depends on: the GPU
request rules its admission applies, and semi-preemptible PodGroups whose minimum may not
be raised. One setting (``Settings.kai_version``, ``--kai-version``) picks the rules;
``auto`` asks the cluster's PodGroup CRD, whose schema gained two things in v0.18 (the
``semi-preemptible`` preemptibility and ``status.schedulingState.corePods``). No I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

from podgang.backends.kai.keys import MIN_SUBGROUP, MSG_SEMI_PREEMPTIBLE_INCREASE, SEMI_PREEMPTIBLE, SUBGROUPS
from podgang.objects import as_dict, as_list

V0_17 = "v0.17"
V0_18 = "v0.18"
VERSIONS = (V0_17, V0_18)
#: what podgang assumes when nothing says: KAI's long-term release (September 2026 to 2027)
DEFAULT_VERSION = V0_18
AUTO = "auto"

#: KAI's PodGroup CRD, whose schema says which KAI installed it
CRD_NAME = "podgroups.scheduling.run.ai"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"

#: the flag's help (``podgang.options``)
VERSION_HELP = (f"the KAI-Scheduler release whose rules podgang applies (GPU requests, semi-preemptible "
                f"groups): {', '.join(VERSIONS)}, or {AUTO}: what the cluster's {CRD_NAME} CRD shows "
                f"(v0.18 when it allows spec.preemptibility {SEMI_PREEMPTIBLE} or has "
                f"status.schedulingState), else {DEFAULT_VERSION}")


def version_from_crd(crd: Any) -> tuple[str, str] | None:
    """The KAI version the PodGroup CRD ``crd`` was installed by, and why; None when it
    does not say (not KAI's CRD: podgang's own keeps every field without a schema).

    v0.18 added ``semi-preemptible`` to ``spec.preemptibility``'s enum and
    ``status.schedulingState.corePods``; an enum without it is v0.17 or older."""
    for version in as_list(as_dict(as_dict(crd).get("spec")).get("versions")):
        schema = as_dict(as_dict(as_dict(version).get("schema")).get("openAPIV3Schema"))
        properties = as_dict(schema.get("properties"))
        group_spec = as_dict(as_dict(properties.get("spec")).get("properties"))
        group_status = as_dict(as_dict(properties.get("status")).get("properties"))
        state = as_dict(as_dict(group_status.get("schedulingState")).get("properties"))
        if "corePods" in state:
            return V0_18, f"its {CRD_NAME} CRD has status.schedulingState.corePods"
        enum = as_dict(group_spec.get("preemptibility")).get("enum")
        if isinstance(enum, list):
            if SEMI_PREEMPTIBLE in enum:
                return V0_18, f"its {CRD_NAME} CRD allows spec.preemptibility {SEMI_PREEMPTIBLE}"
            return V0_17, f"its {CRD_NAME} CRD's spec.preemptibility has no {SEMI_PREEMPTIBLE} (KAI v0.17 or older)"
    return None


def parse_version(text: str) -> str:
    """``v0.18``, ``0.18``, ``v0.18.3`` -> ``v0.18``; ``auto`` stays; ValueError otherwise."""
    value = text.strip().lower()
    if value == AUTO:
        return AUTO
    parts = value.removeprefix("v").split(".")
    short = "v" + ".".join(parts[:2])
    if short not in VERSIONS or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected {', '.join(VERSIONS)} or {AUTO} (a patch release such as v0.18.3 is its "
                         f"minor's), not {text[:40]!r}")
    return short


def semi_preemptible(podgroup: Mapping[str, Any] | Any) -> bool:
    """Whether a KAI PodGroup says ``spec.preemptibility: semi-preemptible`` (KAI v0.18)."""
    return as_dict(as_dict(podgroup).get("spec")).get("preemptibility") == SEMI_PREEMPTIBLE


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _minimums(podgroup: Any) -> dict[str | None, tuple[int, int]]:
    """(minMember, minSubGroup) of the root (key None) and of each named subgroup, unset ones at
    the value KAI's scheduler takes: root minMember 1, a subgroup's 0, a minSubGroup the number
    of its direct children."""
    group_spec = as_dict(as_dict(podgroup).get("spec"))
    entries = [as_dict(e) for e in as_list(group_spec.get(SUBGROUPS)) if isinstance(as_dict(e).get("name"), str)]
    children: dict[str | None, int] = {}
    for e in entries:
        parent = e.get("parent") if isinstance(e.get("parent"), str) and e.get("parent") else None
        children[parent] = children.get(parent, 0) + 1

    def pair(node: Mapping[str, Any], name: str | None, unset_members: int) -> tuple[int, int]:
        members, subgroups = _int(node.get("minMember")), _int(node.get(MIN_SUBGROUP))
        return (unset_members if members is None else members,
                children.get(name, 0) if subgroups is None else subgroups)

    out = {None: pair(group_spec, None, 1)}
    for e in entries:
        out[e["name"]] = pair(e, e["name"], 0)
    return out


def semi_preemptible_refusal(old: Any, new: Any) -> str | None:
    """What KAI v0.18's PodGroup webhook answers to updating ``old`` into ``new`` when ``old`` is
    semi-preemptible (validateSemiPreemptibleImmutability, #1804): the first minimum raised — the
    root's or a subgroup's (by name, in both) minMember or minSubGroup, unset ones at KAI's
    effective value, so removing one can raise it — in KAI's words; None when it allows it.
    Raising would reclassify running elastic pods as protected core pods."""
    if not semi_preemptible(old):
        return None
    before, after = _minimums(old), _minimums(new)
    for name, (members, subgroups) in after.items():
        if name not in before:
            continue
        scope = "a" if name is None else f'subgroup "{name}" of a'
        for field, was, now in (("minMember", before[name][0], members), (MIN_SUBGROUP, before[name][1], subgroups)):
            if now > was:
                return MSG_SEMI_PREEMPTIBLE_INCREASE.format(field=field, old=was, new=now, scope=scope)
    return None
