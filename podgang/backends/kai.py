"""KAI-Scheduler: PodGroups ``scheduling.run.ai/v2alpha2``, membership in the pod
annotation ``pod-group-name`` (what the scheduler reads) mirrored in the label
``kai.scheduler/podgroup`` (what users select with ``-l``), sizes patched in place.

The one module in podgang that spells KAI's group, keys and fields. The GPU
sharing annotations are KAI's too; the rules read their names from here.
"""

from __future__ import annotations

from typing import Any, Mapping

from podgang.backends.base import SchedulerVerdict, escape_key, one_line, string_value
from podgang.backends.keyed import MinMemberPodGroups
from podgang.objects import Denial, Resource, annotations, as_dict, as_list, labels, quoted, status

GROUP_ANNOTATION = "pod-group-name"
GROUP_LABEL = "kai.scheduler/podgroup"
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
SUBGROUPS = "subGroups"
GPU_MEMORY_ANNOTATION = "gpu-memory"
GPU_FRACTION_ANNOTATION = "gpu-fraction"
SCHEDULER_NAME = "kai-scheduler"
MAX_LABEL_VALUE = 63  # the longest label value the apiserver accepts

# the messages KAI's own webhook denies contradictory GPU requests with
MSG_GPU_AND_MEMORY = "cannot request both GPU and GPU memory"
MSG_FRACTION_AND_GPU = "cannot have both GPU fraction request and whole GPU resource request/limit"
MSG_BAD_MEMORY = f"{GPU_MEMORY_ANNOTATION} annotation value must be a positive integer greater than 0"
MSG_BAD_FRACTION = f"{GPU_FRACTION_ANNOTATION} annotation value must be a positive number smaller than 1.0"


class KaiBackend(MinMemberPodGroups):
    name = "kai"
    podgroup = Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")

    def __init__(self, annotation: str = GROUP_ANNOTATION, label: str = GROUP_LABEL,
                 subgroup_label: str = SUBGROUP_LABEL):
        self.annotation = annotation
        self.label = label
        self.subgroup_label = subgroup_label
        self.subgroup_key = ("labels", subgroup_label)
        self.pod_label_keys = (label, subgroup_label)
        self.pod_annotation_keys = (annotation,)

    # -- membership

    def membership_keys(self, group: str) -> tuple[tuple[str, str], ...]:
        """Where a pod of ``group`` carries its membership: ``(section, key)`` pairs.

        Both the annotation and the label, except for a name longer than a label value
        may be (``pg-<name>-<uid>`` of a workload named 24 characters or more): that one
        goes into the annotation only, which is what the scheduler reads; the apiserver
        would refuse the pod with such a label.
        """
        if len(group) > MAX_LABEL_VALUE:
            return (("annotations", self.annotation),)
        return (("annotations", self.annotation), ("labels", self.label))

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        by_annotation = annotations(obj).get(self.annotation)
        by_label = labels(obj).get(self.label)
        if by_annotation is not None and by_label is not None and by_annotation != by_label:
            return Denial(
                f"the pod names two different PodGroups: annotation {self.annotation}={quoted(by_annotation)} "
                f"and label {self.label}={quoted(by_label)}; set both to the same PodGroup name, "
                f"or set only one and podgang copies it to the other"
            )
        if by_annotation is not None:
            return by_annotation, self.annotation
        if by_label is not None:
            return by_label, self.label
        return None

    def group_of(self, pod: Any) -> str | None:
        return annotations(pod).get(self.annotation) or labels(pod).get(self.label) or None

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """Creates ``metadata.annotations`` / ``metadata.labels`` when absent; keys
        already holding ``group`` are left alone (a reinvocation patches nothing)."""
        md = pod.get("metadata")
        wanted = self.membership_keys(group)
        if not isinstance(md, dict):
            return [{"op": "add", "path": "/metadata", "value": {f: {k: group} for f, k in wanted}}]
        ops: list[dict[str, Any]] = []
        for section, key in wanted:
            current = md.get(section)
            if not isinstance(current, dict):
                ops.append({"op": "add", "path": f"/metadata/{section}", "value": {key: group}})
            elif current.get(key) != group:
                ops.append({"op": "add", "path": f"/metadata/{section}/{escape_key(key)}", "value": group})
        return ops

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        patch: dict[str, Any] = {}
        for section, key in self.membership_keys(group):
            patch.setdefault(section, {})[key] = group
        return {"metadata": patch}

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        named = string_value(pod, "annotations", self.annotation)
        if named is None:
            return True
        return any(string_value(pod, section, key) is None for section, key in self.membership_keys(named))

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        md = pod.get("metadata")
        if not isinstance(md, dict):
            return dict(pod)
        md = dict(md)
        for section, key in (("annotations", self.annotation), ("labels", self.label)):
            if isinstance(md.get(section), dict) and key in md[section]:
                md[section] = {k: v for k, v in md[section].items() if k != key}
        return {**pod, "metadata": md}

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """An UPDATE may add a pod's group but never change or remove it: neither key
        may change or disappear, nor may the other key be added with another value."""
        old = self.group_of(old_pod)
        if old is None:
            return None
        changed = []
        for what, section, key in (("annotation", "annotations", self.annotation), ("label", "labels", self.label)):
            was, now = string_value(old_pod, section, key), string_value(new_pod, section, key)
            if was is not None and now != was:
                changed.append(f"{what} {key} {quoted(was)} → {'removed' if now is None else quoted(now)}")
            elif was is None and now is not None and now != old:
                changed.append(f"{what} {key} added as {quoted(now)} while the pod is in {quoted(old)}")
        if not changed:
            return None
        return (
            f"a pod's PodGroup cannot change once it is set ({'; '.join(changed)}): "
            f"delete the pod and create it again in the other group"
        )

    def describe_membership(self, group: str) -> str:
        if len(self.membership_keys(group)) > 1:
            return f"{self.annotation}={group} and {self.label}={group} set"
        return (f"{self.annotation}={group} set (no {self.label} label: the name is longer than the "
                f"{MAX_LABEL_VALUE} characters a label value may have)")

    # -- subgroups: ``spec.subGroups[{name, minMember}]``

    subgroups_field = SUBGROUPS

    def subgroups_spec(self, subgroups: Mapping[str, int]) -> dict[str, Any]:
        return {SUBGROUPS: [{"name": name, "minMember": int(value)} for name, value in sorted(subgroups.items())]}

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        entries = [as_dict(e) for e in as_list(as_dict(as_dict(podgroup).get("spec")).get(SUBGROUPS))]
        return {str(e.get("name")): e.get("minMember") for e in entries if e.get("name")}

    def subgroups_patch(self, podgroup: Any, subgroups: Mapping[str, int]) -> dict[str, Any] | None:
        """A merge patch replaces the whole list: an entry kept keeps its other fields
        (a topology constraint, say); none left removes the field."""
        if not subgroups:
            return {"spec": {SUBGROUPS: None}}
        kept = {str(e.get("name")): e for e in map(as_dict, as_list(as_dict(as_dict(podgroup).get("spec")).get(SUBGROUPS)))}
        return {"spec": {SUBGROUPS: [{**kept.get(name, {}), "name": name, "minMember": int(value)}
                                     for name, value in sorted(subgroups.items())]}}

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        """KAI's latest ``status.schedulingConditions`` entry: why it could not place
        the gang (its reasons' messages, and the node pool)."""
        entries = [as_dict(c) for c in as_list(status(podgroup).get("schedulingConditions"))]
        if not entries:
            return None
        latest = max(entries, key=lambda c: (str(c.get("lastTransitionTime") or ""), str(c.get("transitionID") or "")))
        reasons = [one_line(as_dict(r).get("message")) for r in as_list(latest.get("reasons"))]
        text = "; ".join(r for r in reasons if r) or one_line(latest.get("message"))
        pool = latest.get("nodePool")
        where = f" (node pool {pool})" if isinstance(pool, str) and pool else ""
        state = str(latest.get("type") or latest.get("reason") or "unschedulable")
        return SchedulerVerdict("unschedulable" if "unschedulable" in state.lower() else state, f"{text}{where}".strip())


KAI = KaiBackend()
