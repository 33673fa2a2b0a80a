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

import dataclasses
from decimal import Decimal
from typing import Any, Mapping, Sequence

from podgang import quantities
from podgang.backends.base import PRIORITY_CLASSES, ClusterFacts, GangSource, QueueFacts, Subgroup
from podgang.backends.keyed import PRIORITY_CLASS, OneKeyBackend, with_templates
from podgang.nodes import NODES
from podgang.objects import Resource, annotations, as_dict, as_list, labels, metadata, spec

#: written (and read) on a pod: its Volcano PodGroup, what Volcano's scheduler reads
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
#: read on the pod template or workload (the nearest wins): the Volcano gang's queue
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
#: written on a pod: its task, the key of the group's `spec.minTaskMember` (subgroups on Volcano)
TASK_ANNOTATION = "volcano.sh/task-spec"
#: read on the pod template or workload (the nearest wins, after the annotation): the queue as KubeRay's Volcano integration names it
QUEUE_LABEL = "volcano.sh/queue-name"
MIN_TASK_MEMBER = "minTaskMember"
MIN_RESOURCES = "minResources"  # what Volcano's enqueue checks the queue's room against
SCHEDULER_NAME = "volcano"
#: Volcano's queues: ``spec.capability`` is the most a queue's jobs may hold together (per
#: resource it lists), ``spec.parent`` its parent; a PodGroup whose minResources exceed it is
#: never enqueued
QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", optional=True)


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
    fact_resources = (PRIORITY_CLASSES, NODES, QUEUES)
    scheduler_title = "Volcano"

    def cluster_facts(self, found: Mapping[str, Any]) -> ClusterFacts:
        """Besides the common facts, each queue's capability as its limit (whether a queue
        exists is not judged for Volcano)."""
        queues = found.get(QUEUES.kind)
        bounds = None if queues is None else {b.name: b for q in as_list(queues) if (b := _queue_bounds(q))}
        return dataclasses.replace(super().cluster_facts(found), queue_bounds=bounds)

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        kept = super().slim_podgroup_spec(spec)
        if isinstance(spec.get("queue"), str):
            kept["queue"] = spec["queue"]  # what the verdicts judge it by
        return kept

    def live_settings(self, podgroup: Any) -> dict[str, Any]:
        queue = spec(podgroup).get("queue")
        return {"queue": queue} if isinstance(queue, str) and queue else {}

    def queue_fix(self, queue: str, bound: str, resource: str, amount: Decimal) -> str:
        return (f"raise spec.capability.{resource} to {quantities.format_quantity(amount)} or more (or remove it) "
                f"on Volcano Queue {queue}, or lower the gang's minimum")

    def queue_verdict_words(self, bound: str) -> str:
        return "its PodGroup stays Pending, never enqueued"

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


def _queue_bounds(queue: Any) -> QueueFacts | None:
    """A Volcano Queue's capability, as the limit of :class:`QueueFacts`."""
    name = metadata(queue).get("name")
    if not isinstance(name, str) or not name:
        return None
    capability = quantities.parse_resource_list(spec(queue).get("capability")) or {}
    parent = spec(queue).get("parent")
    return QueueFacts(name, parent if isinstance(parent, str) and parent and parent != name else None, {}, capability)


VOLCANO = VolcanoBackend()
