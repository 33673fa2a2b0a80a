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
its size until it has no pods and is then replaced.

Kubernetes 1.35 (seed 002) spells all of it differently: ``scheduling.k8s.io/v1alpha1``
**Workload** objects hold up to 8 pod groups (``spec.podGroups[{name, policy}]``,
immutable), and a pod joins one with ``spec.workloadRef {name, podGroup}`` (set at
creation, immutable). :class:`NativeWorkloads` speaks that: podgang's gang is a
Workload named for the gang with one pod group (:func:`pod_group_for`), and a gang's
name is ``<workload>`` when its pod group is that default, else
``<workload>/<podGroup>`` (a hand-made Workload's pod group: a Workload name has no
``/``, so each name is one pair and back).

The version is read from API discovery (:func:`native_version`), never assumed:
:data:`NATIVE` is the ``v1alpha2`` default, a process that can ask the apiserver
builds ``native_backend(native_version(<GET DISCOVERY_PATH>))``. No I/O.
"""

from __future__ import annotations

import hashlib
import re
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
from podgang.objects import Denial, Resource, as_dict, as_list, metadata, quoted, spec, status

GROUP = "scheduling.k8s.io"
V1BETA1 = "v1beta1"  # Kubernetes 1.37: minCount may change
V1ALPHA2 = "v1alpha2"  # Kubernetes 1.36: schedulingPolicy is immutable
V1ALPHA1 = "v1alpha1"  # Kubernetes 1.35: Workload objects, pod spec.workloadRef; podGroups immutable
VERSIONS = (V1BETA1, V1ALPHA2, V1ALPHA1)  # preferred first
POD_GROUP_VERSIONS = (V1BETA1, V1ALPHA2)  # PodGroup objects, pod spec.schedulingGroup
KUBERNETES = {V1BETA1: "1.37", V1ALPHA2: "1.36", V1ALPHA1: "1.35"}
DISCOVERY_PATH = f"/apis/{GROUP}"
SCHEDULER_NAME = "default-scheduler"
SCHEDULING_GROUP = "schedulingGroup"
POD_GROUP_NAME = "podGroupName"
FIELD = f"spec.{SCHEDULING_GROUP}.{POD_GROUP_NAME}"
POLICY = "schedulingPolicy"
SCHEDULED_CONDITION = "PodGroupScheduled"
WORKLOAD_REF = "workloadRef"  # v1alpha1: the pod's {name, podGroup}
WORKLOAD_FIELD = f"spec.{WORKLOAD_REF}"
POD_GROUPS = "podGroups"  # v1alpha1: a Workload's pod groups
MAX_POD_GROUPS = 8  # what the 1.35 apiserver accepts in one Workload
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def native_version(discovery_doc: Any) -> str:
    """The version to speak, from ``GET /apis/scheduling.k8s.io`` (an APIGroup):
    ``v1beta1`` PodGroups when served (1.37), else ``v1alpha2`` PodGroups (1.36), else
    ``v1alpha1`` Workloads (1.35). (``v1`` in that group is PriorityClass.) Raises
    ValueError when none is served."""
    served = {as_dict(v).get("version") for v in as_list(as_dict(discovery_doc).get("versions"))}
    for version in VERSIONS:
        if version in served:
            return version
    listed = ", ".join(sorted(str(v) for v in served if v)) or "none"
    raise ValueError(
        f"the apiserver serves no native PodGroup API ({GROUP} {', '.join(VERSIONS)}; it serves {listed}): "
        f"native gang scheduling needs Kubernetes 1.35 or later with that API enabled"
    )


def _without_spec_field(pod: Mapping[str, Any], field: str) -> dict[str, Any]:
    """The pod as if it did not set ``spec.<field>`` (the pod field that carries its gang)."""
    pod_spec = pod.get("spec")
    if not isinstance(pod_spec, dict) or field not in pod_spec:
        return dict(pod)
    return {**pod, "spec": {k: v for k, v in pod_spec.items() if k != field}}


def _group_field(obj: Any) -> Any:
    return as_dict(spec(obj).get(SCHEDULING_GROUP)).get(POD_GROUP_NAME)


class NativeBackend(Backend):
    name = "native"
    pod_spec_keys = (SCHEDULING_GROUP,)
    size_fields = (("spec", POLICY),)
    #: a PodGroup's own priority class (1.36 on; the apiserver resolves it into ``spec.priority``)
    priority_field = "priorityClassName"
    #: 1.36 and 1.37: a Workload is a template; its controller (the Job controller) makes
    #: the PodGroups, the gangs, from ``spec.podGroupTemplates``
    own_workloads = {(GROUP, "Workload"): "a Workload is a template for gangs: the PodGroups its controller (the Job "
                                          "controller) makes from spec.podGroupTemplates are the gangs"}

    def __init__(self, version: str = V1ALPHA2):
        if version not in POD_GROUP_VERSIONS:
            raise ValueError(f"native PodGroup version {quoted(version)} is not one of {', '.join(POD_GROUP_VERSIONS)}"
                             f" ({V1ALPHA1}: NativeWorkloads)")
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
        return _without_spec_field(pod, SCHEDULING_GROUP)

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
        return _policy_size(spec(podgroup).get(POLICY))

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
        return self if version == self.podgroup.version else native_backend(version)

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


def pod_group_for(workload: str) -> str:
    """The one pod group of a Workload podgang makes for gang ``workload``: the same
    name when it is a DNS label (what a pod group name must be), else one cut to 63
    characters that ends in a short hash of the whole."""
    if len(workload) <= 63 and _DNS_LABEL.fullmatch(workload):
        return workload
    digest = hashlib.sha256(workload.encode()).hexdigest()[:8]
    head = re.sub(r"[^a-z0-9-]", "-", workload.lower())[:54].strip("-")
    return f"{head}-{digest}" if head else digest


def split_gang(gang: str) -> tuple[str, str]:
    """(Workload, pod group) of a v1alpha1 gang name: ``w/g``, or ``w`` with its default pod group."""
    workload, slash, group = gang.partition("/")
    return (workload, group) if slash else (gang, pod_group_for(gang))


def gang_name(workload: str, pod_group: str) -> str:
    """The gang a pod naming ``{name: workload, podGroup: pod_group}`` is in (see :func:`split_gang`)."""
    return workload if pod_group == pod_group_for(workload) else f"{workload}/{pod_group}"


def _workload_ref(obj: Any) -> tuple[str, str] | None:
    ref = as_dict(spec(obj).get(WORKLOAD_REF))
    name, group = ref.get("name"), ref.get("podGroup")
    return (name, group) if isinstance(name, str) and isinstance(group, str) else None  # the apiserver refuses ""


def _policy_size(policy: Any) -> int | None:
    policy = as_dict(policy)
    if "gang" in policy:
        value = as_dict(policy["gang"]).get("minCount")
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(policy.get("basic"), Mapping):
        return 1
    return None


def pod_groups(workload: Any) -> list[Mapping[str, Any]]:
    """A Workload's pod groups as written (entries that are not objects are left out)."""
    return [as_dict(g) for g in as_list(spec(workload).get(POD_GROUPS)) if isinstance(g, Mapping)]


#: the fields of a 1.35 pod group, by path inside it (None: any content)
_POD_GROUP_FIELDS: dict[str, Any] = {"name": None, "policy": {"basic": {}, "gang": {"minCount": None}}}


def _unknown_fields(obj: Mapping[str, Any], known: Mapping[str, Any] = _POD_GROUP_FIELDS, at: str = "") -> list[str]:
    """Paths in ``obj`` that the v1alpha1 schema does not have (what strict decoding refuses)."""
    out = []
    for key, value in obj.items():
        path = f"{at}{key}"
        if key not in known:
            out.append(path)
        elif isinstance(known[key], dict) and isinstance(value, Mapping):
            out += _unknown_fields(value, known[key], f"{path}.")
    return out


class NativeWorkloads(NativeBackend):
    """Kubernetes 1.35: ``scheduling.k8s.io/v1alpha1`` Workloads and pod ``spec.workloadRef``.

    A Workload holds up to 8 gangs (its pod groups); everything podgang makes holds
    one. ``podGroups`` is immutable and the Workload has no status: a size change
    waits for the group to have no pods (as on ``v1alpha2``), and the scheduler's
    verdict is on the pods alone (bound or not)."""

    pod_spec_keys = (WORKLOAD_REF,)
    verdict_on_pods = True  # a Workload has no status
    size_fields = (("spec", POD_GROUPS),)

    def __init__(self) -> None:
        self.version = V1ALPHA1
        self.podgroup = Resource(GROUP, V1ALPHA1, "workloads", "Workload")

    # -- membership

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        ref = _workload_ref(obj)
        return (gang_name(*ref), WORKLOAD_FIELD) if ref is not None else None

    def group_of(self, pod: Any) -> str | None:
        ref = _workload_ref(pod)
        return gang_name(*ref) if ref is not None else None

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        workload, pod_group = split_gang(group)
        value = {"name": workload, "podGroup": pod_group}
        pod_spec = pod.get("spec")
        if not isinstance(pod_spec, dict):
            return [{"op": "add", "path": "/spec", "value": {WORKLOAD_REF: value}}]
        if _workload_ref(pod) == (workload, pod_group):
            return []
        return [{"op": "add", "path": f"/spec/{WORKLOAD_REF}", "value": value}]

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        return _workload_ref(pod) is None

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        return _without_spec_field(pod, WORKLOAD_REF)

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        was, now = _workload_ref(old_pod), _workload_ref(new_pod)
        if was == now:
            return None
        return membership_change_message(WORKLOAD_FIELD, None if was is None else "/".join(was),
                                         None if now is None else "/".join(now))

    def describe_membership(self, group: str) -> str:
        workload, pod_group = split_gang(group)
        return f"{WORKLOAD_FIELD}={{name: {workload}, podGroup: {pod_group}}} set"

    # -- Workloads

    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        """A Workload named for the gang with one pod group: ``gang: {minCount}`` for two
        or more, ``basic: {}`` for one."""
        size = int(gang.min_member)
        policy: dict[str, Any] = {"gang": {"minCount": size}} if size >= 2 else {"basic": {}}
        workload, pod_group = split_gang(gang.name)
        md = self.podgroup_metadata(gang)
        md["name"] = workload
        return {"apiVersion": self.podgroup.api_version, "kind": self.podgroup.kind,
                "metadata": md, "spec": {POD_GROUPS: [{"name": pod_group, "policy": policy}]}}

    def min_member(self, podgroup: Any) -> int | None:
        """The size of a Workload's one pod group (a view of one gang: :meth:`gang_view`);
        None when it holds several or none."""
        groups = pod_groups(podgroup)
        return _policy_size(groups[0].get("policy")) if len(groups) == 1 else None

    def resize(self, podgroup: Any, value: int) -> Resize:
        current = self.min_member(podgroup)
        return Resize(REPLACE_WHEN_EMPTY, why=(
            f"a Workload's podGroups cannot change on {GROUP}/{V1ALPHA1} (Kubernetes 1.35): the live Workload keeps "
            f"minCount {current if current is not None else 'unset'} until no pod names it"
        ))

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        groups = [{"name": g.get("name"), "policy": g.get("policy")}
                  for g in as_list(spec.get(POD_GROUPS)) if isinstance(g, Mapping)]
        return {POD_GROUPS: groups} if POD_GROUPS in spec else {}

    def refusals(self, podgroup: Any) -> list[str]:
        """What the 1.35 apiserver answers to this Workload, in its words (recorded in
        tests/fixtures/native-1.35/): fields its pod groups do not have (seed 002's
        ``gang.timeout``: kubectl's default strict validation refuses them, and with
        ``--validate=ignore`` they are dropped), more than 8 pod groups, ``minCount`` below 1."""
        name = metadata(podgroup).get("name") or "?"
        out = []
        unknown = [f'unknown field "spec.podGroups[{i}].{path}"' for i, group in enumerate(pod_groups(podgroup))
                   for path in _unknown_fields(group)]
        if unknown:
            out.append(f'Workload in version "{V1ALPHA1}" cannot be handled as a Workload: strict decoding error: '
                       f'{", ".join(unknown)} (remove them: a 1.35 pod group is a name and a policy, '
                       f'basic: {{}} or gang: {{minCount}})')
        invalid = []
        count = len(as_list(spec(podgroup).get(POD_GROUPS)))
        if count > MAX_POD_GROUPS:
            invalid.append(f"spec.podGroups: Too many: {count}: must have at most {MAX_POD_GROUPS} items")
        for i, group in enumerate(pod_groups(podgroup)):
            gang = as_dict(as_dict(group.get("policy")).get("gang"))
            value = gang.get("minCount")
            if "minCount" in gang and isinstance(value, int) and not isinstance(value, bool) and value < 1:
                invalid.append(f"spec.podGroups[{i}].policy.gang.minCount: Invalid value: {value}: "
                               f"must be greater than zero")
        if invalid:
            out.append(f'The Workload "{name}" is invalid: {"; ".join(invalid)}')
        return out

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        return None  # a 1.35 Workload has no status: the verdict is on its pods (bound or not)

    # -- one Workload, several gangs

    def holder_name(self, group: str) -> str:
        return split_gang(group)[0]

    def name_parts(self, group: str) -> tuple[str, ...]:
        return split_gang(group) if "/" in group else (group,)

    def gangs_in(self, podgroup: Any) -> tuple[str, ...]:
        name = metadata(podgroup).get("name")
        if not isinstance(name, str) or not name:
            return ()
        return tuple(gang_name(name, g["name"]) for g in pod_groups(podgroup) if isinstance(g.get("name"), str))

    def gang_view(self, holder: Any, group: str) -> Any | None:
        """The Workload as gang ``group``'s own: itself when that is its only pod group,
        else a copy holding that pod group alone; None when it lacks it."""
        pod_group = split_gang(group)[1]
        groups = pod_groups(holder)
        mine = [g for g in groups if g.get("name") == pod_group]
        if not mine:
            return None
        if len(groups) == 1:
            return holder
        return {**holder, "spec": {**spec(holder), POD_GROUPS: mine[:1]}}

    def missing_group(self, group: str, namespace: str, holder: Any | None) -> str:
        workload, pod_group = split_gang(group)
        if holder is None:
            return f"Workload {workload} not found in namespace {namespace}"
        have = ", ".join(str(g.get("name")) for g in pod_groups(holder)) or "none"
        return (f"Workload {workload} in namespace {namespace} has no pod group {pod_group} (it has: {have}; its "
                f"podGroups cannot change: recreate it with that pod group)")


def written_for(obj: Any) -> str | None:
    """The native API version an object is written for, when it says: a ``scheduling.k8s.io``
    Workload or PodGroup its own version (a 1.35 Workload holds gangs, a 1.36/1.37 one is a
    template for them), a pod ``workloadRef`` 1.35's ``v1alpha1``."""
    obj = as_dict(obj)
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if kind in ("Workload", "PodGroup") and isinstance(api_version, str) and api_version.startswith(f"{GROUP}/"):
        version = api_version.partition("/")[2]
        if kind == "Workload":
            return version if version in VERSIONS else None
        return version if version in POD_GROUP_VERSIONS else None
    return V1ALPHA1 if isinstance(spec(obj).get(WORKLOAD_REF), Mapping) else None


def version_problem(obj: Any, planned: str) -> str | None:
    """Why a ``scheduling.k8s.io`` Workload or PodGroup written for another native API
    version than the one planned for cannot be planned as written, or None."""
    obj = as_dict(obj)
    if obj.get("kind") not in ("Workload", "PodGroup") or not str(obj.get("apiVersion") or "").startswith(f"{GROUP}/"):
        return None
    written = written_for(obj)
    if written == planned:
        return None
    if written is None:
        return (f"{GROUP} has no {obj.get('kind')} at {quoted(str(obj.get('apiVersion')))} that podgang knows "
                f"({', '.join(f'{v} (Kubernetes {KUBERNETES[v]})' for v in VERSIONS)}): not planned")
    return (f"written for {GROUP}/{written} (Kubernetes {KUBERNETES[written]}), but planned for {GROUP}/{planned} "
            f"(Kubernetes {KUBERNETES[planned]}), which does not serve it: not planned (--native-version {written} "
            f"plans for it)")


def native_backend(version: str) -> NativeBackend:
    """The native backend for an API version discovery picked."""
    if version == V1ALPHA1:
        return NativeWorkloads()
    return NativeBackend(version)


NATIVE = NativeBackend(V1ALPHA2)
