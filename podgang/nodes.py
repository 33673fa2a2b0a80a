"""Nodes as the never-placed verdicts read them, and which nodes a pod may use.

A gang whose minimum cannot fit the nodes it may use waits for ever, and every gang
scheduler says so only as "not yet" (KAI: "Resources were found for 6 pods while 9 are
required"). To say "never" podgang keeps of each node only what decides that — its
allocatable resources, its labels, its taints and whether it is cordoned — and reads a
pod's placement the way kube-scheduler's filters do (``nodeSelector``, the required
node-affinity terms, tolerations of ``NoSchedule``/``NoExecute`` taints). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

from podgang import quantities
from podgang.objects import Resource, as_dict, as_list, labels, metadata, spec, status, str_map

NODES = Resource("", "v1", "nodes", "Node")
#: the taint a cordoned node carries (the node controller adds it; podgang reads the flag too)
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class NodeFacts:
    """One node as the verdicts read it."""

    name: str
    allocatable: Mapping[str, Decimal]
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect), blocking effects only
    unschedulable: bool = False


def slim_node(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A Node as the grouper's store keeps it: name, labels, blocking taints, cordon,
    allocatable. A node's status heartbeats change none of it."""
    node_spec = spec(raw)
    md = metadata(raw)
    out_spec: dict[str, Any] = {}
    taints = [{k: t[k] for k in ("key", "value", "effect") if isinstance(t.get(k), str)}
              for t in map(as_dict, as_list(node_spec.get("taints"))) if t.get("effect") in BLOCKING_EFFECTS]
    if taints:
        out_spec["taints"] = taints
    if node_spec.get("unschedulable") is True:
        out_spec["unschedulable"] = True
    return {"metadata": {"name": md.get("name"), "labels": labels(raw),
                         **({"resourceVersion": md["resourceVersion"]} if md.get("resourceVersion") else {})},
            "spec": out_spec, "status": {"allocatable": dict(as_dict(status(raw).get("allocatable")))}}


def node_facts(raw: Any) -> NodeFacts | None:
    """A Node (as listed, or slimmed by :func:`slim_node`) as :class:`NodeFacts`; one
    already parsed as itself."""
    if isinstance(raw, NodeFacts):
        return raw
    name = metadata(raw).get("name")
    if not isinstance(name, str) or not name:
        return None
    allocatable = quantities.parse_resource_list(status(raw).get("allocatable")) or {}
    taints = tuple((str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect")))
                   for t in map(as_dict, as_list(spec(raw).get("taints"))) if t.get("effect") in BLOCKING_EFFECTS)
    return NodeFacts(name, allocatable, labels(raw), taints, spec(raw).get("unschedulable") is True)


Requirement = tuple[str, str, tuple[str, ...]]


@dataclass(frozen=True)
class Placement:
    """Where a pod may go: its node selector, required node-affinity terms, tolerations."""

    selector: tuple[tuple[str, str], ...] = ()
    #: nodeSelectorTerms (any one must match), each (expressions, fields), each requirement
    #: (key, operator, values)
    terms: tuple[tuple[tuple[Requirement, ...], tuple[Requirement, ...]], ...] = ()
    tolerations: tuple[tuple[str, str, str, str], ...] = ()  # (key, operator, value, effect)

    def describe(self) -> str:
        parts = [f"nodeSelector {', '.join(f'{k}={v}' for k, v in self.selector)}"] if self.selector else []
        if self.terms:
            parts.append("required node affinity")
        if self.tolerations:
            parts.append(f"{len(self.tolerations)} toleration{'s' if len(self.tolerations) > 1 else ''}")
        return "; ".join(parts)


def placement(pod_or_template: Any, extra_selector: Mapping[str, str] | None = None) -> Placement:
    """A pod's (or pod template's) :class:`Placement`, with ``extra_selector`` (a
    scheduler's own node pool) added to its node selector."""
    pod_spec = spec(pod_or_template)
    selector = {**str_map(pod_spec.get("nodeSelector")), **(extra_selector or {})}
    required = as_dict(as_dict(as_dict(pod_spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    terms = tuple((_requirements(as_dict(term).get("matchExpressions")), _requirements(as_dict(term).get("matchFields")))
                  for term in as_list(required.get("nodeSelectorTerms")))
    tolerations = tuple((str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
                         str(t.get("effect") or "")) for t in map(as_dict, as_list(pod_spec.get("tolerations"))))
    return Placement(tuple(sorted(selector.items())), terms, tolerations)


def may_use(node: NodeFacts, where: Placement) -> bool:
    """Whether a pod placed by ``where`` may be scheduled on ``node`` at all."""
    if any(node.labels.get(k) != v for k, v in where.selector):
        return False
    if where.terms and not any(_term_matches(term, node) for term in where.terms):
        return False
    taints = node.taints
    if node.unschedulable:
        taints = (*taints, (UNSCHEDULABLE_TAINT, "", "NoSchedule"))
    return all(any(_tolerates(t, taint) for t in where.tolerations) for taint in taints)


def _tolerates(toleration: tuple[str, str, str, str], taint: tuple[str, str, str]) -> bool:
    key, operator, value, effect = toleration
    t_key, t_value, t_effect = taint
    if effect and effect != t_effect:
        return False
    if operator == "Exists":
        return not key or key == t_key
    return key == t_key and value == t_value


def _requirements(value: Any) -> tuple[Requirement, ...]:
    return tuple((str(e.get("key") or ""), str(e.get("operator") or ""), tuple(str(v) for v in as_list(e.get("values"))))
                 for e in map(as_dict, as_list(value)))


def _term_matches(term: tuple[tuple[Requirement, ...], tuple[Requirement, ...]], node: NodeFacts) -> bool:
    expressions, fields = term
    if not expressions and not fields:
        return False  # an empty term matches nothing (kube-scheduler's rule)
    for key, operator, values in expressions:
        if not _requirement(operator, values, node.labels.get(key), key in node.labels):
            return False
    for key, operator, values in fields:
        if key != "metadata.name" or not _requirement(operator, values, node.name, True):
            return False
    return True


def _requirement(operator: str, values: tuple[str, ...], value: str | None, present: bool) -> bool:
    if operator == "In":
        return present and value in values
    if operator == "NotIn":
        return not present or value not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            have, bound = int(str(value)), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False
