"""The PodGroup dialect: which API group/version/kind a gang scheduler reads, and
which fields and pod keys carry membership and size.

Everything scheduler-specific about PodGroups is here, so that another scheduler's
PodGroup (Volcano, scheduler-plugins, native Kubernetes) is one more instance of
:class:`PodGroupDialect`, not a change to the rules. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class OwnerRef:
    """An ownerReference as data (what a PodGroup is owned by, what a pod points at)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = True

    @classmethod
    def from_dict(cls, ref: Mapping[str, Any]) -> "OwnerRef":
        return cls(
            api_version=str(ref.get("apiVersion") or ""),
            kind=str(ref.get("kind") or ""),
            name=str(ref.get("name") or ""),
            uid=str(ref.get("uid") or ""),
            controller=bool(ref.get("controller", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": self.controller,
            "blockOwnerDeletion": False,
        }


@dataclass(frozen=True)
class PodGroupDialect:
    """How one gang scheduler spells PodGroups and pod membership."""

    name: str
    group: str
    version: str
    plural: str
    kind: str
    # pod keys that carry membership
    pod_group_annotation: str
    pod_group_label: str
    subgroup_label: str
    # PodGroup spec field names
    min_member_field: str = "minMember"
    queue_field: str = "queue"
    priority_class_field: str = "priorityClassName"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str, name: str | None = None) -> str:
        """The REST path of the collection, or of one PodGroup when ``name`` is given."""
        base = f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{name}" if name else base

    def manifest(
        self,
        name: str,
        namespace: str | None,
        min_member: int,
        *,
        owner: OwnerRef | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        queue: str | None = None,
        priority_class: str | None = None,
    ) -> dict[str, Any]:
        """A complete PodGroup object, ready to create."""
        metadata: dict[str, Any] = {"name": name}
        if namespace:
            metadata["namespace"] = namespace
        if labels:
            metadata["labels"] = dict(labels)
        if annotations:
            metadata["annotations"] = dict(annotations)
        if owner is not None:
            metadata["ownerReferences"] = [owner.to_dict()]
        spec: dict[str, Any] = {self.min_member_field: int(min_member)}
        if queue:
            spec[self.queue_field] = queue
        if priority_class:
            spec[self.priority_class_field] = priority_class
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": metadata, "spec": spec}

    def is_podgroup(self, obj: Mapping[str, Any]) -> bool:
        return obj.get("kind") == self.kind and obj.get("apiVersion") == self.api_version

    def min_member(self, podgroup: Mapping[str, Any]) -> int | None:
        """The PodGroup's current minMember, or None when it has none (or a bad one)."""
        value = (podgroup.get("spec") or {}).get(self.min_member_field)
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        return value

    def min_member_patch(self, value: int) -> dict[str, Any]:
        """A merge-patch body (``application/merge-patch+json``) setting minMember."""
        return {"spec": {self.min_member_field: int(value)}}

    def queue(self, podgroup: Mapping[str, Any]) -> str | None:
        return (podgroup.get("spec") or {}).get(self.queue_field)


#: KAI-Scheduler's PodGroup (``scheduling.run.ai/v2alpha2``): the default.
KAI = PodGroupDialect(
    name="kai",
    group="scheduling.run.ai",
    version="v2alpha2",
    plural="podgroups",
    kind="PodGroup",
    pod_group_annotation="pod-group-name",
    pod_group_label="kai.scheduler/podgroup",
    subgroup_label="kai.scheduler/subgroup-name",
)

DIALECTS: dict[str, PodGroupDialect] = {KAI.name: KAI}
