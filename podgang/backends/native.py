"""Native Kubernetes gang scheduling: kube-scheduler places a ``scheduling.k8s.io``
PodGroup's pods all at once. Membership is the pod field
``spec.schedulingGroup.podGroupName``, which can only be set when the pod is
created: the webhook sets it at admission, and a pod admitted without it (the
webhook was down) cannot be given one later (:meth:`NativeBackend.backfill_patch`
is None; the grouper says so once instead of retrying).

The size is ``spec.schedulingPolicy.gang.minCount`` (a gang of one is
``basic: {}``; the API refuses ``minCount: 0``). Which API version the cluster
serves decides whether it may change on a live group: ``v1beta1`` (1.37) patches
it; ``v1alpha2`` (1.36) makes ``schedulingPolicy`` immutable, so the group keeps
its size until it has no pods and is then replaced. The version is read from API
discovery (:func:`native_version`), never assumed: :data:`NATIVE` is the
``v1alpha2`` default, a process that can ask the apiserver builds
``NativeBackend(native_version(<GET DISCOVERY_PATH>))``. No I/O.
"""

from __future__ import annotations

from typing import Any, Mapping

from podgang.backends.base import (
    PATCH,
    REPLACE_WHEN_EMPTY,
    Backend,
    GangSpec,
    Resize,
    SchedulerVerdict,
    membership_change_message,
    one_line,
)
from podgang.objects import Denial, Resource, as_dict, as_list, quoted, spec, status

GROUP = "scheduling.k8s.io"
V1BETA1 = "v1beta1"  # Kubernetes 1.37: minCount may change
V1ALPHA2 = "v1alpha2"  # Kubernetes 1.36: schedulingPolicy is immutable
VERSIONS = (V1BETA1, V1ALPHA2)  # preferred first
DISCOVERY_PATH = f"/apis/{GROUP}"
SCHEDULER_NAME = "default-scheduler"
SCHEDULING_GROUP = "schedulingGroup"
POD_GROUP_NAME = "podGroupName"
FIELD = f"spec.{SCHEDULING_GROUP}.{POD_GROUP_NAME}"
POLICY = "schedulingPolicy"
SCHEDULED_CONDITION = "PodGroupScheduled"


def native_version(discovery_doc: Any) -> str:
    """The PodGroup version to speak, from ``GET /apis/scheduling.k8s.io`` (an
    APIGroup): ``v1beta1`` when served, else ``v1alpha2``. (``v1`` in that group
    is PriorityClass, not PodGroup.) Raises ValueError when neither is served."""
    served = {as_dict(v).get("version") for v in as_list(as_dict(discovery_doc).get("versions"))}
    for version in VERSIONS:
        if version in served:
            return version
    listed = ", ".join(sorted(str(v) for v in served if v)) or "none"
    raise ValueError(
        f"the apiserver serves no native PodGroup API ({GROUP} {' or '.join(VERSIONS)}; it serves {listed}): "
        f"native gang scheduling needs Kubernetes 1.36 or later with that API enabled"
    )


def _group_field(obj: Any) -> Any:
    return as_dict(spec(obj).get(SCHEDULING_GROUP)).get(POD_GROUP_NAME)


class NativeBackend(Backend):
    name = "native"
    pod_spec_keys = (SCHEDULING_GROUP,)

    def __init__(self, version: str = V1ALPHA2):
        if version not in VERSIONS:
            raise ValueError(f"native PodGroup version {quoted(version)} is not one of {', '.join(VERSIONS)}")
        self.version = version
        self.podgroup = Resource(GROUP, version, "podgroups", "PodGroup")

    # -- membership

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        value = _group_field(obj)
        return (value, FIELD) if isinstance(value, str) else None

    def group_of(self, pod: Any) -> str | None:
        value = _group_field(pod)
        return value if isinstance(value, str) and value else None

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """Creates ``spec`` / ``spec.schedulingGroup`` when absent; nothing when the
        field already holds ``group``."""
        pod_spec = pod.get("spec")
        if not isinstance(pod_spec, dict):
            return [{"op": "add", "path": "/spec", "value": {SCHEDULING_GROUP: {POD_GROUP_NAME: group}}}]
        current = pod_spec.get(SCHEDULING_GROUP)
        if not isinstance(current, dict):
            return [{"op": "add", "path": f"/spec/{SCHEDULING_GROUP}", "value": {POD_GROUP_NAME: group}}]
        if current.get(POD_GROUP_NAME) == group:
            return []
        return [{"op": "add", "path": f"/spec/{SCHEDULING_GROUP}/{POD_GROUP_NAME}", "value": group}]

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        return None  # the field is immutable once the pod exists

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        """True for a pod without the field; the grouper then finds that it cannot
        backfill it (:meth:`backfill_patch` is None) and says so once."""
        return not isinstance(_group_field(pod), str)

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        pod_spec = pod.get("spec")
        if not isinstance(pod_spec, dict) or SCHEDULING_GROUP not in pod_spec:
            return dict(pod)
        return {**pod, "spec": {k: v for k, v in pod_spec.items() if k != SCHEDULING_GROUP}}

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """The field is set at creation or never: no UPDATE may add, change or remove it
        (the apiserver refuses it too, with a message about every pod spec field)."""
        was, now = _group_field(old_pod), _group_field(new_pod)
        return None if was == now else membership_change_message(FIELD, was, now)

    def describe_membership(self, group: str) -> str:
        return f"{FIELD}={group} set"

    # -- PodGroups

    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        """``gang: {minCount}`` for two or more; ``basic: {}`` for a gang of one (or
        less: ``minCount: 0`` is refused by the API)."""
        size = int(gang.min_member)
        policy: dict[str, Any] = {"gang": {"minCount": size}} if size >= 2 else {"basic": {}}
        return {"apiVersion": self.podgroup.api_version, "kind": self.podgroup.kind,
                "metadata": self.podgroup_metadata(gang), "spec": {POLICY: policy}}

    def min_member(self, podgroup: Any) -> int | None:
        policy = as_dict(spec(podgroup).get(POLICY))
        if "gang" in policy:
            value = as_dict(policy["gang"]).get("minCount")
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        if isinstance(policy.get("basic"), Mapping):
            return 1
        return None

    def resize(self, podgroup: Any, value: int) -> Resize:
        """v1beta1: a merge patch of ``minCount`` (a basic group becomes a gang; a gang
        brought to one keeps ``gang`` with ``minCount: 1``, the same thing). v1alpha2:
        ``schedulingPolicy`` is immutable, so the group is replaced once it has no pods."""
        size = max(int(value), 1)
        if self.version == V1BETA1:
            policy: dict[str, Any] = {"gang": {"minCount": size}}
            if "gang" not in as_dict(spec(podgroup).get(POLICY)):
                policy["basic"] = None  # merge patch: remove it
            return Resize(PATCH, {"spec": {POLICY: policy}})
        current = self.min_member(podgroup)
        return Resize(REPLACE_WHEN_EMPTY, why=(
            f"minCount cannot follow a scale on {GROUP}/{V1ALPHA2} (immutable until 1.37): the live group keeps "
            f"minCount {current if current is not None else 'unset'} until no pod names it"
        ))

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        return {POLICY: spec[POLICY]} if POLICY in spec else {}

    def for_discovery(self, discovery: Mapping[str, Any] | None) -> "NativeBackend":
        """The version the cluster serves (``v1beta1`` makes minCount mutable);
        raises ValueError when it serves no native PodGroup API."""
        if discovery is None:
            return self
        version = native_version(discovery)
        return self if version == self.podgroup.version else NativeBackend(version)

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        """The ``PodGroupScheduled`` condition: ``scheduled``, or its reason
        (``unschedulable``) and message. kube-scheduler sets it at the gang's first
        placement only: it stays True after the gang is gone."""
        for condition in as_list(status(podgroup).get("conditions")):
            condition = as_dict(condition)
            if condition.get("type") != SCHEDULED_CONDITION:
                continue
            if condition.get("status") == "True":
                return SchedulerVerdict("scheduled", one_line(condition.get("message")))
            state = str(condition.get("reason") or f"{SCHEDULED_CONDITION}={condition.get('status') or 'Unknown'}")
            return SchedulerVerdict(state.lower() if condition.get("reason") else state,
                                    one_line(condition.get("message")))
        return None


NATIVE = NativeBackend(V1ALPHA2)
