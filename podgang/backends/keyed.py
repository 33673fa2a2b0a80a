"""The shapes PodGroup schedulers share. KAI, Volcano and scheduler-plugins
coscheduling all size a PodGroup with ``spec.minMember``, patched in place
(:class:`MinMemberPodGroups`); Volcano and coscheduling put a pod into its gang
through one metadata key, an annotation for Volcano and a label for coscheduling
(:class:`OneKeyBackend`).

Each scheduler's module says only which key, which API and which extra spec
fields; the common rules live here once. No I/O.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from podgang.backends.base import (PATCH, Backend, GangSpec, Resize, Subgroup, escape_key, membership_change_message,
                                   string_value)
from podgang.objects import Denial, annotations, as_dict, spec

MIN_MEMBER = "minMember"
QUEUE = "queue"
PRIORITY_CLASS = "priorityClassName"


class MinMemberPodGroups(Backend):
    """PodGroups sized by ``spec.minMember``, with ``queue`` and ``priorityClassName``
    when the gang has them (KAI's and Volcano's spelling), resized by a merge patch."""

    def spec_options(self, gang: GangSpec) -> dict[str, Any]:
        """The spec fields besides ``minMember`` the gang sets."""
        options: dict[str, Any] = {}
        if gang.queue:
            options[QUEUE] = gang.queue
        if gang.priority_class:
            options[PRIORITY_CLASS] = gang.priority_class
        if gang.min_resources and self.min_resources_field:
            options[self.min_resources_field] = dict(gang.min_resources)
        return options

    #: the spec field that holds the subgroups (KAI's list, Volcano's map); None: none
    subgroups_field: str | None = None

    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        subgroups = self.subgroups_spec(gang.subgroups, gang.min_subgroup) if gang.subgroups else {}
        size = {} if subgroups.get(MIN_MEMBER, 0) is None else {MIN_MEMBER: int(gang.min_member)}
        subgroups = {k: v for k, v in subgroups.items() if v is not None}
        return {"apiVersion": self.podgroup.api_version, "kind": self.podgroup.kind,
                "metadata": self.podgroup_metadata(gang),
                "spec": {**size, **self.spec_options(gang), **(gang.extra_spec or {}), **subgroups}}

    def subgroups_spec(self, subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> dict[str, Any]:
        """The spec fields that hold ``subgroups`` (a field None: not written, ``minMember``
        None: the root is sized by its subgroups instead)."""
        return {}

    def min_member(self, podgroup: Any) -> int | None:
        value = as_dict(as_dict(podgroup).get("spec")).get(MIN_MEMBER)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value

    def resize(self, podgroup: Any, value: int) -> Resize:
        return Resize(PATCH, {"spec": {MIN_MEMBER: int(value)}})

    @property
    def size_fields(self) -> tuple[tuple[str, ...], ...]:
        return tuple(("spec", f) for f in (MIN_MEMBER, self.subgroups_field) if f is not None)

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        keep = [f for f in (MIN_MEMBER, self.subgroups_field, self.min_resources_field) if f is not None and f in spec]
        return {f: spec[f] for f in keep}


class OneKeyBackend(MinMemberPodGroups):
    """Membership in ``metadata.<section>[key]``; PodGroup size in ``spec.minMember``."""

    #: "annotations" or "labels"
    section: str
    key: str

    @property
    def what(self) -> str:
        """The key's kind in messages: ``annotation`` or ``label``."""
        return self.section[:-1]

    # -- membership

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        value = string_value(obj, self.section, self.key)
        return (value, self.key) if value is not None else None

    def group_of(self, pod: Any) -> str | None:
        return string_value(pod, self.section, self.key) or None

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """Creates ``metadata`` / ``metadata.<section>`` when absent; nothing when the
        key already holds ``group`` (a reinvocation patches nothing)."""
        md = pod.get("metadata")
        if not isinstance(md, dict):
            return [{"op": "add", "path": "/metadata", "value": {self.section: {self.key: group}}}]
        current = md.get(self.section)
        if not isinstance(current, dict):
            return [{"op": "add", "path": f"/metadata/{self.section}", "value": {self.key: group}}]
        if current.get(self.key) == group:
            return []
        return [{"op": "add", "path": f"/metadata/{self.section}/{escape_key(self.key)}", "value": group}]

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        return {"metadata": {self.section: {self.key: group}}}

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        return string_value(pod, self.section, self.key) is None

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        md = pod.get("metadata")
        if not isinstance(md, dict) or not isinstance(md.get(self.section), dict) or self.key not in md[self.section]:
            return dict(pod)
        kept = {k: v for k, v in md[self.section].items() if k != self.key}
        return {**pod, "metadata": {**md, self.section: kept}}

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """An UPDATE may add a pod's group but never change or remove it."""
        was = string_value(old_pod, self.section, self.key)
        now = string_value(new_pod, self.section, self.key)
        if was is None or now == was:
            return None
        return membership_change_message(f"{self.what} {self.key}", was, now)

    def describe_membership(self, group: str) -> str:
        return f"{self.what} {self.key}={group} set"


def with_templates(objs: Sequence[Any]) -> list[Any]:
    """Each object followed by its pod template (``spec.template``), when it has one."""
    out: list[Any] = []
    for obj in objs:
        out.append(obj)
        template = spec(obj).get("template")
        if isinstance(template, Mapping):
            out.append(template)
    return out


def first_annotation(objs: Sequence[Any], key: str) -> str | None:
    """The first non-empty ``key`` annotation among ``objs`` and their pod templates."""
    return next((value for obj in with_templates(objs) if (value := annotations(obj).get(key))), None)
