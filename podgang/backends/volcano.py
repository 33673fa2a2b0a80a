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

from podgang.backends.keyed import PRIORITY_CLASS, OneKeyBackend, first_annotation, with_templates
from podgang.objects import Resource, spec

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
SCHEDULER_NAME = "volcano"


class VolcanoBackend(OneKeyBackend):
    name = "volcano"
    podgroup = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
    section = "annotations"
    key = GROUP_ANNOTATION
    pod_annotation_keys = (GROUP_ANNOTATION, QUEUE_ANNOTATION)
    pod_spec_keys = (PRIORITY_CLASS,)

    def gang_options(self, objs: Sequence[Any]) -> dict[str, Any]:
        options: dict[str, Any] = {}
        queue = first_annotation(objs, QUEUE_ANNOTATION)
        if queue:
            options["queue"] = queue
        priority = next((value for obj in with_templates(objs)
                         if isinstance(value := spec(obj).get(PRIORITY_CLASS), str) and value), None)
        if priority:
            options["priority_class"] = priority
        return options


VOLCANO = VolcanoBackend()
