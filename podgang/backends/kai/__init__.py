"""KAI-Scheduler: PodGroups ``scheduling.run.ai/v2alpha2``, membership in the pod
annotation ``pod-group-name`` (what the scheduler reads) mirrored in the label
``kai.scheduler/podgroup`` (what users select with ``-l``), sizes patched in place.

The ``kai`` modules are the only ones in podgang that spell KAI's group, keys and fields:
every name in ``keys.py``; here the backend's membership, subgroup tree, PodGroups and
verdicts, with what KAI's grouper reads (``grouping.py``) and what it counts against its
queues and nodes (``facts.py``) mixed in.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from podgang.backends.base import (REFUSE, Resize, SchedulerVerdict, Subgroup, escape_key, min_pods, one_line,
                                   string_value)
from podgang.backends.kai.facts import KaiFeasibility, cluster_facts, queue_bounds
from podgang.backends.kai.grouping import KaiGrouping
from podgang.backends.kai.versions import semi_preemptible_refusal
from podgang.backends.kai.keys import (BATCH_MIN_MEMBER, DEFAULT_PRIORITY_CLASSES, DEFAULT_QUEUE, DISABLED_STALENESS,
                                       MIN_MEMBER_ANNOTATION, SEMI_PREEMPTIBLE,
                                       GPU_FRACTION_ANNOTATION, GPU_FRACTION_DEVICES_ANNOTATION, GPU_MEMORY_ANNOTATION,
                                       GROUP_ANNOTATION, GROUP_LABEL, MAX_LABEL_VALUE, MIN_SUBGROUP, NODE_POOL_LABEL,
                                       PREEMPTIBILITY_LABEL, PREEMPTION_DELAY_ANNOTATION, PRIORITY_LABEL,
                                       PROJECT_LABEL, QUEUE_LABEL, SEGMENT_ANNOTATIONS, SKIP_PODGROUPER_ANNOTATION,
                                       STALENESS_GRACE_PERIOD, SUBGROUP_LABEL, SUBGROUPS, TOPOLOGY_ANNOTATIONS,
                                       TOPOLOGY_FIELD)
from podgang.backends.keyed import MIN_MEMBER, MinMemberPodGroups
from podgang.objects import Denial, Resource, annotations, as_dict, as_list, labels, quoted, spec, status

__all__ = ["KAI", "KaiBackend", "cluster_facts", "queue_bounds"]


#: why podgang holds a semi-preemptible group's size (its decision, docs/schedulers/kai.md)
SEMI_PREEMPTIBLE_HOLD = (f"a {SEMI_PREEMPTIBLE} KAI group keeps its minimum (KAI v0.18 refuses raising it; the "
                         f"pods above it run elastic, reclaimed first): lower it, or recreate the group to "
                         f"protect more pods")


class KaiBackend(KaiFeasibility, KaiGrouping, MinMemberPodGroups):
    name = "kai"
    podgroup = Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")
    subgroups_must_be_listed = True  # KAI v0.15+: "Pod references subgroup x, which does not exist in PodGroup"
    pod_spec_keys = ("priorityClassName",)
    other_writer_hint = (f"KAI's own pod-grouper older than v0.15 ignores {SKIP_PODGROUPER_ANNOTATION} and "
                         f"rewrites the groups podgang makes: upgrade KAI, or turn its pod-grouper off")

    def __init__(self, annotation: str = GROUP_ANNOTATION, label: str = GROUP_LABEL,
                 subgroup_label: str = SUBGROUP_LABEL, *, default_queue: str = DEFAULT_QUEUE,
                 default_priority_classes: tuple[tuple[str, str], ...] = DEFAULT_PRIORITY_CLASSES,
                 given_priority_classes: tuple[tuple[str, str], ...] = (),
                 default_preemptibility: tuple[tuple[str, str], ...] = ()):
        self.annotation = annotation
        self.label = label
        self.subgroup_label = subgroup_label
        self.subgroup_key = ("labels", subgroup_label)
        self.pod_label_keys = (label, subgroup_label, QUEUE_LABEL, PROJECT_LABEL, NODE_POOL_LABEL, PRIORITY_LABEL,
                               PREEMPTIBILITY_LABEL)
        self.pod_annotation_keys = (annotation, SKIP_PODGROUPER_ANNOTATION, PREEMPTION_DELAY_ANNOTATION,
                                    GPU_FRACTION_ANNOTATION, GPU_FRACTION_DEVICES_ANNOTATION, GPU_MEMORY_ANNOTATION,
                                    BATCH_MIN_MEMBER, MIN_MEMBER_ANNOTATION, *SEGMENT_ANNOTATIONS,
                                    *(key for key, _ in TOPOLOGY_ANNOTATIONS[1:]))
        self.default_queue = default_queue
        self.default_priority_classes = default_priority_classes
        self.given_priority_classes = given_priority_classes
        self.default_preemptibility = default_preemptibility

    def configured(self, options: Mapping[str, Any]) -> "KaiBackend":
        """``--default-queue``, ``--default-priority-class KIND[.GROUP]=NAME`` and
        ``--default-preemptibility KIND[.GROUP]=VALUE`` applied (KAI's per-kind defaults ConfigMap)."""
        queue = options.get("default_queue") or self.default_queue
        given = tuple(options.get("default_priority_classes") or ())
        preemptibility = tuple(options.get("default_preemptibility") or ())
        if queue == self.default_queue and not given and not preemptibility:
            return self
        return KaiBackend(self.annotation, self.label, self.subgroup_label, default_queue=queue,
                          default_priority_classes=self.default_priority_classes,
                          given_priority_classes=tuple({**dict(self.given_priority_classes), **dict(given)}.items()),
                          default_preemptibility=tuple({**dict(self.default_preemptibility),
                                                        **dict(preemptibility)}.items()))

    def evicts_itself(self, podgroup: Any) -> str | None:
        """KAI (v0.17 and later) evicts a stale gang after ``spec.stalenessGracePeriod``
        (its global default when unset) unless that is negative. podgang's own groups say
        -1s; a group that does not (hand-made, or made by an older podgang) is left to KAI."""
        value = spec(podgroup).get(STALENESS_GRACE_PERIOD)
        if isinstance(value, str) and value.strip().startswith("-"):
            return None
        when = f"stalenessGracePeriod {value}" if isinstance(value, str) else "its default grace period (60s)"
        return (f"KAI evicts the rest itself after {when}, so podgang does not (set "
                f"spec.{STALENESS_GRACE_PERIOD}: -1s on the group to leave it to podgang)")

    eviction_grace_field = STALENESS_GRACE_PERIOD

    def resize(self, podgroup: Any, value: int) -> Resize:
        """A merge patch of ``minMember``; on a semi-preemptible group (KAI v0.18) never up:
        KAI's webhook refuses that (the minimum is the gang's protected core, the pods above
        it run elastic), so the group keeps its size and podgang says why."""
        refused = semi_preemptible_refusal(podgroup, {"spec": {**spec(podgroup), MIN_MEMBER: int(value)}})
        if refused is not None:
            return Resize(REFUSE, why=f"{SEMI_PREEMPTIBLE_HOLD}: {refused}")
        return super().resize(podgroup, value)

    def update_refused(self, old: Any, new: Any) -> str | None:
        """KAI v0.18's PodGroup webhook: a semi-preemptible group's minimums never go up."""
        return semi_preemptible_refusal(old, new)

    def grace_taken_over(self, podgroup: Any, spec_patch: Mapping[str, Any]) -> str | None:
        """A user's ``stalenessGracePeriod`` (not negative) that podgang's ``-1s`` replaces."""
        value = spec(podgroup).get(STALENESS_GRACE_PERIOD)
        if spec_patch.get(STALENESS_GRACE_PERIOD) != DISABLED_STALENESS or not isinstance(value, str):
            return None
        return None if value.strip().startswith("-") or not value.strip() else value.strip()

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        kept = super().slim_podgroup_spec(spec)
        for key in ("queue", STALENESS_GRACE_PERIOD, "priorityClassName", "preemptibility"):  # what KAI judges it by
            if isinstance(spec.get(key), str):
                kept[key] = spec[key]
        if _is_int(spec.get(MIN_SUBGROUP)):
            kept[MIN_SUBGROUP] = spec[MIN_SUBGROUP]
        return kept

    @property
    def size_fields(self) -> tuple[tuple[str, ...], ...]:
        return (*super().size_fields, ("spec", MIN_SUBGROUP))

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
        already holding their value are left alone (a reinvocation patches nothing).
        The pod also gets ``kai.scheduler/skip-podgrouper: "true"``: KAI's own
        pod-grouper (v0.15 and later, in every KAI install) then leaves it and its
        group to podgang instead of moving it to a group of its own."""
        md = pod.get("metadata")
        wanted = self._wanted(group)
        if not isinstance(md, dict):
            value: dict[str, Any] = {}
            for (section, key), v in wanted:
                value.setdefault(section, {})[key] = v
            return [{"op": "add", "path": "/metadata", "value": value}]
        ops: list[dict[str, Any]] = []
        created: dict[str, dict[str, Any]] = {}
        for (section, key), v in wanted:
            current = md.get(section)
            if not isinstance(current, dict):
                if section not in created:
                    created[section] = {}
                    ops.append({"op": "add", "path": f"/metadata/{section}", "value": created[section]})
                created[section][key] = v
            elif current.get(key) != v:
                ops.append({"op": "add", "path": f"/metadata/{section}/{escape_key(key)}", "value": v})
        return ops

    def _wanted(self, group: str) -> list[tuple[tuple[str, str], str]]:
        return [*((where, group) for where in self.membership_keys(group)),
                (("annotations", SKIP_PODGROUPER_ANNOTATION), "true")]

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        patch: dict[str, Any] = {}
        for (section, key), value in self._wanted(group):
            patch.setdefault(section, {})[key] = value
        return {"metadata": patch}

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        named = string_value(pod, "annotations", self.annotation)
        if named is None:
            return True
        return any(string_value(pod, section, key) != value for (section, key), value in self._wanted(named))

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

    # -- subgroups: ``spec.subGroups[{name, parent, minMember | minSubGroup}]``, a root
    # ``minSubGroup`` for a tree (KAI refuses ``minMember`` beside ``minSubGroup``)

    subgroups_field = SUBGROUPS
    holds_trees = True

    def subgroups_spec(self, subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> dict[str, Any]:
        entries = [_entry(s) for s in _ordered(subgroups)]
        if min_subgroup is None:
            return {SUBGROUPS: entries, STALENESS_GRACE_PERIOD: DISABLED_STALENESS}
        return {MIN_MEMBER: None, MIN_SUBGROUP: int(min_subgroup), SUBGROUPS: entries,
                STALENESS_GRACE_PERIOD: DISABLED_STALENESS}

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        return {s.name: s.min_member for s in self._tree(podgroup)}

    def subgroup_tree_of(self, podgroup: Any) -> tuple[int | None, tuple[Subgroup, ...]] | None:
        root = spec(podgroup).get(MIN_SUBGROUP)
        return (root if _is_int(root) else None), self._tree(podgroup)

    @staticmethod
    def _tree(podgroup: Any) -> tuple[Subgroup, ...]:
        out = []
        for e in map(as_dict, as_list(spec(podgroup).get(SUBGROUPS))):
            name, parent = e.get("name"), e.get("parent")
            if not isinstance(name, str) or not name:
                continue
            parent = parent if isinstance(parent, str) and parent else None
            if _is_int(e.get(MIN_SUBGROUP)):
                out.append(Subgroup(name, e[MIN_SUBGROUP], parent=parent, of_subgroups=True))
            else:
                value = e.get(MIN_MEMBER)
                out.append(Subgroup(name, value if _is_int(value) else 0, parent=parent))
        return tuple(out)

    def is_users_tree(self, podgroup: Any) -> bool:
        root, tree = self.subgroup_tree_of(podgroup) or (None, ())
        return root is not None or any(s.parent is not None or s.of_subgroups for s in tree)

    def min_member(self, podgroup: Any) -> int | None:
        """``spec.minMember``; for a tree (a root ``minSubGroup``, no ``minMember``) the
        fewest pods that satisfy it, so that a size compares alike either way."""
        value = super().min_member(podgroup)
        if value is not None:
            return value
        root, tree = self.subgroup_tree_of(podgroup) or (None, ())
        return min_pods(tree, root) if root is not None else None

    def subgroups_patch(self, podgroup: Any, subgroups: Sequence[Subgroup],
                        min_subgroup: int | None = None) -> dict[str, Any] | None:
        """A merge patch replaces the whole list: an entry kept keeps its other fields
        (a topology constraint, say); none left removes the field. Subgroups podgang
        writes come with ``stalenessGracePeriod: -1s``: KAI v0.17 judges a group stale
        when any leaf is below its minMember (even a replica beyond the role's minimum),
        so podgang, which judges by the tree, is the one evictor. A tree's root gets
        ``minSubGroup`` and loses ``minMember``; a flat list's root the reverse."""
        live_root = spec(podgroup).get(MIN_SUBGROUP)
        if not subgroups:
            out: dict[str, Any] = {SUBGROUPS: None}
            if live_root is not None:
                out.update({MIN_SUBGROUP: None, MIN_MEMBER: self.min_member(podgroup) or 1})
            return {"spec": out}
        kept = {str(e.get("name")): e for e in map(as_dict, as_list(spec(podgroup).get(SUBGROUPS)))}
        entries = []
        for s in _ordered(subgroups):
            old = {k: v for k, v in kept.get(s.name, {}).items() if k not in (MIN_MEMBER, MIN_SUBGROUP, "parent")}
            entries.append({**old, **_entry(s)})
        body = self.subgroups_spec(subgroups, min_subgroup)
        body[SUBGROUPS] = entries
        if min_subgroup is None and live_root is not None:
            body.update({MIN_SUBGROUP: None, MIN_MEMBER: max(min_pods(subgroups), 1)})
        return {"spec": body}

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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(s: Subgroup) -> dict[str, Any]:
    """One ``spec.subGroups`` entry as KAI's CRD takes it: never both minimums."""
    out: dict[str, Any] = {"name": s.name}
    if s.parent:
        out["parent"] = s.parent
    out[MIN_SUBGROUP if s.of_subgroups else MIN_MEMBER] = max(int(s.min_member), 0)
    if s.topology:
        out[TOPOLOGY_FIELD] = dict(s.topology)
    return out


def _ordered(subgroups: Sequence[Subgroup]) -> list[Subgroup]:
    """A flat list by name (as always written); a tree each parent before its children,
    in the order the rules give them (replicas by index)."""
    if not any(s.parent or s.of_subgroups for s in subgroups):
        return sorted(subgroups, key=lambda s: s.name)
    return list(subgroups)



KAI = KaiBackend()
