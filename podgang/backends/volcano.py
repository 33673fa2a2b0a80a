"""Volcano: PodGroups ``scheduling.volcano.sh/v1beta1``, membership in the pod
annotation ``scheduling.k8s.io/group-name`` (what Volcano's scheduler reads, and
what a user sets for a hand-made group), sizes patched in place.

Volcano's own controllers default a Deployment's group to ``minMember: 1`` and do
not follow a scale; podgang sizes the group from the workload instead. The queue
comes from Volcano's ``scheduling.volcano.sh/queue-name`` annotation on the pod
template or the workload, the priority class from the pod template. No I/O.
"""

from __future__ import annotations

from typing import Any, Sequence

from podgang.backends.base import GangSource, Subgroup
from podgang.backends.keyed import PRIORITY_CLASS, OneKeyBackend, first_annotation, with_templates
from podgang.objects import Resource, as_dict, spec

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TASK_ANNOTATION = "volcano.sh/task-spec"  # a pod's task: the key of spec.minTaskMember
MIN_TASK_MEMBER = "minTaskMember"
MIN_RESOURCES = "minResources"  # what Volcano's enqueue checks the queue's room against
SCHEDULER_NAME = "volcano"


class VolcanoBackend(OneKeyBackend):
    name = "volcano"
    podgroup = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
    section = "annotations"
    key = GROUP_ANNOTATION
    pod_annotation_keys = (GROUP_ANNOTATION, QUEUE_ANNOTATION, TASK_ANNOTATION)
    subgroup_key = ("annotations", TASK_ANNOTATION)
    subgroups_field = MIN_TASK_MEMBER
    pod_spec_keys = (PRIORITY_CLASS,)
    min_resources_field = MIN_RESOURCES

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        objs = source.nearest_first
        options: dict[str, Any] = {}
        queue = first_annotation(objs, QUEUE_ANNOTATION)
        if queue:
            options["queue"] = queue
        priority = next((value for obj in with_templates(objs)
                         if isinstance(value := spec(obj).get(PRIORITY_CLASS), str) and value), None)
        if priority:
            options["priority_class"] = priority
        return options

    def subgroups_spec(self, subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> dict[str, Any]:
        """``minTaskMember``: one flat entry per part (Volcano has no tree; the rules give it
        a role's pod total, never replicas)."""
        return {MIN_TASK_MEMBER: {s.name: int(s.min_member) for s in sorted(subgroups, key=lambda s: s.name)
                                  if not s.of_subgroups and s.parent is None}}

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        return dict(as_dict(spec(podgroup).get(MIN_TASK_MEMBER)))

    def subgroups_patch(self, podgroup: Any, subgroups: Sequence[Subgroup],
                        min_subgroup: int | None = None) -> dict[str, Any] | None:
        wanted = self.subgroups_spec(subgroups)[MIN_TASK_MEMBER]
        gone = {name: None for name in (self.subgroups_of(podgroup) or {}) if name not in wanted}
        return {"spec": {MIN_TASK_MEMBER: {**gone, **wanted}}}


VOLCANO = VolcanoBackend()
