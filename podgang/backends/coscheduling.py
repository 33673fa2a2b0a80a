"""scheduler-plugins coscheduling: PodGroups ``scheduling.x-k8s.io/v1alpha1``,
membership in the pod label ``scheduling.x-k8s.io/pod-group`` (the only key the
Coscheduling plugin reads), sizes patched in place.

The label's value is the PodGroup's name, and a label value has at most 63
characters, while podgang's names (``pg-<workload>-<uid>``) may be up to 253.
The plugin finds the group by exactly that name, so a shortened label would need a
shortened PodGroup name everywhere podgang keys groups by name; instead such a
name is refused at admission with a message that says what to do
(:meth:`CoschedulingBackend.membership_problem`): a workload name of at most 23
characters, or a hand-made group. ``spec.scheduleTimeoutSeconds`` comes from the
``podgang.io/schedule-timeout`` annotation (``300``, ``90s``, ``5m``, ``1h30m``).
No I/O.
"""

from __future__ import annotations

import re
from typing import Any

from podgang.backends.base import GangSource, GangSpec
from podgang.backends.keyed import OneKeyBackend, first_annotation
from podgang.objects import Resource, quoted

#: written (and read) on a pod: its coscheduling PodGroup, the only key the plugin reads
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
#: read on the workload or pod template (`300`, `90s`, `5m`, `1h30m`): the group's
#: `spec.scheduleTimeoutSeconds`
TIMEOUT_ANNOTATION = "podgang.io/schedule-timeout"
SCHEDULER_NAME = "scheduler-plugins-scheduler"
SCHEDULE_TIMEOUT = "scheduleTimeoutSeconds"
MIN_RESOURCES = "minResources"  # the Coscheduling plugin's PreFilter rejects a gang the cluster cannot hold
MAX_LABEL_VALUE = 63  # the longest label value the apiserver accepts
MAX_INT32 = 2**31 - 1
# the longest workload name whose pg-<name>-<uid> still fits a label value
MAX_WORKLOAD_NAME = MAX_LABEL_VALUE - len("pg-") - len("-") - 36

_TIMEOUT = re.compile(r"(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?")


def timeout_seconds(text: str) -> int | None:
    """``300``, ``90s``, ``5m``, ``1h30m`` → whole seconds (1 to int32), else None."""
    text = text.strip()
    if text.isascii() and text.isdigit():
        seconds = int(text[:12])
    else:
        parts = _TIMEOUT.fullmatch(text) if text.isascii() else None
        if parts is None or not any(parts.groups()):
            return None
        hours, minutes, secs = (int(p or 0) for p in parts.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    return seconds if 0 < seconds <= MAX_INT32 else None


class CoschedulingBackend(OneKeyBackend):
    name = "coscheduling"
    podgroup = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
    section = "labels"
    key = GROUP_LABEL
    pod_label_keys = (GROUP_LABEL,)
    pod_annotation_keys = (TIMEOUT_ANNOTATION,)
    min_resources_field = MIN_RESOURCES

    def membership_problem(self, group: str) -> str | None:
        if len(group) <= MAX_LABEL_VALUE:
            return None
        return (
            f"coscheduling reads a pod's PodGroup from the label {GROUP_LABEL}, and a label value has at most "
            f"{MAX_LABEL_VALUE} characters: this pod's PodGroup {quoted(group)} has {len(group)}. Give the workload "
            f"a name of at most {MAX_WORKLOAD_NAME} characters, or create a PodGroup with a shorter name and set "
            f"{GROUP_LABEL}=<that name> on the pod template"
        )

    #: the Coscheduling plugin tries a group it rejected again only when one of its pods is
    #: added or its PodGroup is added or updated (its EventsToRegister), else after
    #: kube-scheduler's unschedulable-pod timeout (5 minutes): a node added is not enough
    wake_interval = 20.0

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        text = first_annotation(source.nearest_first, TIMEOUT_ANNOTATION)
        seconds = timeout_seconds(text) if text else None
        return {"schedule_timeout": seconds} if seconds else {}

    def spec_options(self, gang: GangSpec) -> dict[str, Any]:
        options: dict[str, Any] = {MIN_RESOURCES: dict(gang.min_resources)} if gang.min_resources else {}
        if gang.schedule_timeout:
            options[SCHEDULE_TIMEOUT] = int(gang.schedule_timeout)
        return options


COSCHEDULING = CoschedulingBackend()
