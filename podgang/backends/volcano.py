"""Volcano: PodGroups ``scheduling.volcano.sh/v1beta1``, membership in the pod
annotation ``scheduling.k8s.io/group-name`` (what Volcano's scheduler reads, and
what a user sets for a hand-made group), sizes patched in place.

Volcano's own controllers default a Deployment's group to ``minMember: 1`` and do
not follow a scale; podgang sizes the group from the workload instead. The queue
comes from Volcano's ``scheduling.volcano.sh/queue-name`` annotation, or the
``volcano.sh/queue-name`` label KubeRay's Volcano integration reads, on the pod template
or the workload, nearest first; the priority class from the pod template. No I/O.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from podgang.backends.base import GangSource
from podgang.backends.keyed import PRIORITY_CLASS, OneKeyBackend, with_templates
from podgang.objects import Resource, annotations, as_dict, labels, spec

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
QUEUE_LABEL = "volcano.sh/queue-name"  # the queue as KubeRay's Volcano integration names it: a label
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
    pod_label_keys = (QUEUE_LABEL,)
    subgroup_key = ("annotations", TASK_ANNOTATION)
    subgroups_field = MIN_TASK_MEMBER
    pod_spec_keys = (PRIORITY_CLASS,)
    min_resources_field = MIN_RESOURCES
    queue_field = "queue"
    priority_field = PRIORITY_CLASS
    own_workloads = {
        ("batch.volcano.sh", "Job"): "Volcano's job controller makes its PodGroup itself (spec.minAvailable)",
        ("batch.volcano.sh", "CronJob"): "each run is a Volcano Job, whose PodGroup Volcano's job controller makes",
        ("flow.volcano.sh", "JobTemplate"): "a template for the Volcano Jobs a JobFlow runs, whose PodGroups "
                                            "Volcano's job controller makes",
    }

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        objs = source.nearest_first
        options: dict[str, Any] = {}
        queue = next((value for obj in with_templates(objs)
                      if (value := annotations(obj).get(QUEUE_ANNOTATION) or labels(obj).get(QUEUE_LABEL))), None)
        if queue:
            options["queue"] = queue
        priority = next((value for obj in with_templates(objs)
                         if isinstance(value := spec(obj).get(PRIORITY_CLASS), str) and value), None)
        if priority:
            options["priority_class"] = priority
        return options

    def subgroups_spec(self, subgroups: Mapping[str, int]) -> dict[str, Any]:
        return {MIN_TASK_MEMBER: {name: int(value) for name, value in sorted(subgroups.items())}}

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        return dict(as_dict(spec(podgroup).get(MIN_TASK_MEMBER)))

    def subgroups_patch(self, podgroup: Any, subgroups: Mapping[str, int]) -> dict[str, Any] | None:
        gone = {name: None for name in (self.subgroups_of(podgroup) or {}) if name not in subgroups}
        return {"spec": {MIN_TASK_MEMBER: {**gone, **self.subgroups_spec(subgroups)[MIN_TASK_MEMBER]}}}


VOLCANO = VolcanoBackend()
