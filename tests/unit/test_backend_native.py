"""The native Kubernetes gang backend: the version from discovery, membership in
the immutable pod field, the policy it builds (never ``minCount: 0``), resizes per
API version, and the scheduler's verdict — checked against what a real 1.36
control plane recorded (tests/fixtures/native/, the 422 for an immutable minCount)."""

from __future__ import annotations

import copy
import json

import jsonpatch
import pytest

from podgang.backends import BACKENDS, NATIVE, GangSpec, NativeBackend, native_version
from podgang.backends.base import PATCH, REPLACE_WHEN_EMPTY, SchedulerVerdict
from podgang.backends.native import DISCOVERY_PATH, FIELD
from podgang.gang import Desired, plan_writes, size_held
from podgang.objects import OwnerRef
from podgang.rules import HAND_MADE, OWNED, MinMember, gang_for_pod
from podgang.settings import DEFAULT
from tests.webhook_support import api_status, review, review_names
from tests.paths import TESTS

NATIVE_FIXTURES = TESTS / "fixtures" / "native"
V1BETA1 = NativeBackend("v1beta1")
SETTINGS = DEFAULT.with_changes(backends=(("default-scheduler", NATIVE),))


def recorded(name: str) -> dict:
    return json.loads((NATIVE_FIXTURES / f"{name}.json").read_text())


# ---------------------------------------------------------------------------- version


def test_the_recorded_1_36_discovery_gives_v1alpha2():
    doc = recorded("discovery-scheduling.k8s.io")
    assert DISCOVERY_PATH == "/apis/scheduling.k8s.io"
    assert native_version(doc) == "v1alpha2"


def test_a_1_37_discovery_gives_v1beta1():
    doc = recorded("discovery-scheduling.k8s.io")
    doc["versions"].insert(1, {"groupVersion": "scheduling.k8s.io/v1beta1", "version": "v1beta1"})
    assert native_version(doc) == "v1beta1"
    doc["versions"] = [v for v in doc["versions"] if v["version"] != "v1alpha2"]
    assert native_version(doc) == "v1beta1"


@pytest.mark.parametrize("doc", [
    {"kind": "APIGroup", "versions": [{"groupVersion": "scheduling.k8s.io/v1", "version": "v1"}]},
    {}, None, "junk", {"versions": "v1alpha2"},
])
def test_no_native_api_is_a_clear_error(doc):
    with pytest.raises(ValueError, match="serves no native PodGroup API"):
        native_version(doc)


def test_registry_and_versions():
    assert BACKENDS["native"] is NATIVE and NATIVE.version == "v1alpha2"
    assert NATIVE.podgroup.api_version == "scheduling.k8s.io/v1alpha2"
    assert V1BETA1.podgroup.path("ml", "g") == "/apis/scheduling.k8s.io/v1beta1/namespaces/ml/podgroups/g"
    with pytest.raises(ValueError, match="not one of v1beta1, v1alpha2"):
        NativeBackend("v1")


# ---------------------------------------------------------------------------- membership


@pytest.mark.parametrize("fixture", [n for n in review_names() if n.startswith("pod-create")])
def test_membership_patch_on_recorded_pods(fixture):
    pod = review(fixture)["request"]["object"]
    patched = jsonpatch.apply_patch(pod, NATIVE.membership_patch(pod, "pg-train"))
    assert patched["spec"]["schedulingGroup"] == {"podGroupName": "pg-train"}
    assert NATIVE.group_of(patched) == "pg-train" and not NATIVE.needs_backfill(patched)
    assert NATIVE.membership_patch(patched, "pg-train") == []
    assert patched["metadata"] == pod["metadata"]
    assert NATIVE.without_membership(patched)["spec"] == {k: v for k, v in pod["spec"].items() if k != "schedulingGroup"}


def test_the_recorded_hand_made_native_pod():
    pod = review("pod-create-native-scheduling-group")["request"]["object"]
    assert NATIVE.named_group(pod) == ("native-gang", FIELD)
    assert NATIVE.membership_patch(pod, "native-gang") == []
    gang = gang_for_pod(pod, settings=SETTINGS)
    assert (gang.name, gang.source) == ("native-gang", HAND_MADE)
    assert NATIVE.describe_membership("native-gang") == "spec.schedulingGroup.podGroupName=native-gang set"


def test_membership_patch_ops():
    assert NATIVE.membership_patch({}, "g") == [
        {"op": "add", "path": "/spec", "value": {"schedulingGroup": {"podGroupName": "g"}}}]
    assert NATIVE.membership_patch({"spec": {"containers": []}}, "g") == [
        {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": "g"}}]
    assert NATIVE.membership_patch({"spec": {"schedulingGroup": {}}}, "g") == [
        {"op": "add", "path": "/spec/schedulingGroup/podGroupName", "value": "g"}]


def test_backfill_is_impossible_and_said_once():
    """A created pod cannot get the field: no patch, and needs_backfill is a fixed
    answer for the pod (so the grouper decides once, not in a loop)."""
    pod = review("pod-create-by-job")["request"]["object"]
    assert NATIVE.needs_backfill(pod) and NATIVE.needs_backfill(pod)
    assert NATIVE.backfill_patch(pod, "pg-train") is None
    assert V1BETA1.backfill_patch(pod, "pg-train") is None


@pytest.mark.parametrize("old, new, refused", [
    (None, None, False),
    ("a", "a", False),
    ("a", "b", True),
    ("a", None, True),
    (None, "a", True),  # the apiserver forbids it too: set at creation or never
])
def test_membership_change_on_update(old, new, refused):
    def pod(group):
        return {"spec": {"schedulingGroup": {"podGroupName": group}} if group else {"containers": []}}

    problem = NATIVE.membership_change_problem(pod(old), pod(new))
    assert (problem is not None) is refused
    if refused:
        assert problem.startswith("a pod's PodGroup cannot change once the pod exists (spec.schedulingGroup.podGroupName")


# ---------------------------------------------------------------------------- PodGroups


OWNER = OwnerRef("batch/v1", "Job", "train", "5b1c4e0a-6a9e-4d57-9d2b-1b7e9f3c2a10")


@pytest.mark.parametrize("size, policy", [
    (4, {"gang": {"minCount": 4}}),
    (2, {"gang": {"minCount": 2}}),
    (1, {"basic": {}}),
    (0, {"basic": {}}),  # minCount 0 is refused by the API: never built
])
def test_policy(size, policy):
    m = NATIVE.build_podgroup(GangSpec("pg-train", "ml", size, owner=OWNER, labels=DEFAULT.managed_labels))
    assert m == {"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                 "metadata": {"name": "pg-train", "namespace": "ml", "labels": DEFAULT.managed_labels,
                              "ownerReferences": [OWNER.to_dict()]},
                 "spec": {"schedulingPolicy": policy}}
    assert NATIVE.min_member(m) == max(size, 1)


def test_what_we_build_is_what_the_apiserver_stored():
    """The recorded 201: the apiserver added only defaults and its finalizer to a
    PodGroup of this shape."""
    created = recorded("podgroup-create-201")
    built = NATIVE.build_podgroup(GangSpec(created["metadata"]["name"], created["metadata"]["namespace"], 7))
    assert (built["apiVersion"], built["kind"]) == (created["apiVersion"], created["kind"])
    assert created["spec"]["schedulingPolicy"] == built["spec"]["schedulingPolicy"]
    assert {k: v for k, v in created["spec"].items() if k != "schedulingPolicy"} == {
        "disruptionMode": "Pod", "podGroupTemplateRef": None, "priority": 0}
    assert created["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    assert NATIVE.is_podgroup(created) and not V1BETA1.is_podgroup(created)
    assert NATIVE.slim_podgroup_spec(created["spec"]) == {"schedulingPolicy": {"gang": {"minCount": 7}}}


@pytest.mark.parametrize("fixture, size", [
    ("podgroup-create-201", 7), ("podgroup-unschedulable", 7), ("podgroup-scheduled", 3),
])
def test_min_member_of_recorded_groups(fixture, size):
    assert NATIVE.min_member(recorded(fixture)) == size


@pytest.mark.parametrize("spec, size", [
    ({"schedulingPolicy": {"basic": {}}}, 1),
    ({"schedulingPolicy": {"gang": {"minCount": True}}}, None),
    ({"schedulingPolicy": {"gang": "x"}}, None),
    ({"schedulingPolicy": {}}, None),
    ({}, None),
])
def test_min_member_of_odd_groups(spec, size):
    assert NATIVE.min_member({"spec": spec}) == size


def test_v1alpha2_never_patches_the_immutable_policy():
    """The recorded 422 names the field a patch would touch; v1alpha2 replaces instead."""
    refusal = api_status("422-native-podgroup-mincount-immutable")
    assert refusal["details"]["causes"][0]["field"] == "spec.schedulingPolicy"
    group = recorded("podgroup-scheduled")
    resize = NATIVE.resize(group, 5)
    assert resize.action == REPLACE_WHEN_EMPTY and resize.body is None
    assert resize.why == ("minCount cannot follow a scale on scheduling.k8s.io/v1alpha2 (immutable until 1.37): "
                          "the live group keeps minCount 3 until no pod names it")


def apply_merge_patch(target: dict, patch: dict) -> dict:
    """RFC 7386, as the apiserver applies a merge patch."""
    out = copy.deepcopy(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = apply_merge_patch(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@pytest.mark.parametrize("policy, size, after", [
    ({"gang": {"minCount": 3}}, 5, {"gang": {"minCount": 5}}),
    ({"gang": {"minCount": 3}}, 1, {"gang": {"minCount": 1}}),  # a gang of one, still a gang
    ({"basic": {}}, 4, {"gang": {"minCount": 4}}),
    ({"gang": {"minCount": 3}}, 0, {"gang": {"minCount": 1}}),  # never 0
])
def test_v1beta1_patches_min_count(policy, size, after):
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "spec": {"schedulingPolicy": policy}}
    resize = V1BETA1.resize(group, size)
    assert resize.action == PATCH
    assert apply_merge_patch(group, resize.body)["spec"]["schedulingPolicy"] == after


def test_the_grouper_holds_a_live_v1alpha2_group_and_replaces_an_empty_one():
    group = recorded("podgroup-scheduled")
    group["metadata"]["labels"] = dict(DEFAULT.managed_labels)
    ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
    desired = Desired(ns, name, OWNED, MinMember(5, "job/train"), members=({"metadata": {"name": "train-0"}},))
    # nothing changes the live group: the size podgang wants is only recorded on it
    [record] = plan_writes(desired, group, SETTINGS)
    assert (record.action, record.old, record.new) == ("record-size", 3, 5)
    assert record.body["metadata"]["annotations"] == {"podgang.io/desired-min-member": "5"}
    held = size_held(desired, group, SETTINGS)
    assert "minCount cannot follow a scale on scheduling.k8s.io/v1alpha2" in held
    assert held.endswith("until no pod names it; podgang then replaces it with minMember 5")
    # a hand-made group is the user's: podgang never replaces it, and says so
    hand_made = copy.deepcopy(group)
    del hand_made["metadata"]["labels"]
    held = size_held(Desired(ns, name, HAND_MADE, MinMember(5, "deployment/a 2 + deployment/b 3")), hand_made, SETTINGS)
    assert held.endswith("until no pod names it; a hand-made group: recreate it to change its size")
    empty = Desired(ns, name, OWNED, MinMember(5, "job/train"))
    [write] = plan_writes(empty, group, SETTINGS)
    assert (write.action, write.old, write.new) == ("replace", 3, 5)


def test_a_v1alpha2_gang_scaled_to_zero_is_deleted_and_not_made_again_until_it_wants_pods():
    """Replaced by a group of 1 at 0 replicas, the pods of a later scale-up to 3 would
    join a group of minCount 1 that cannot change while they live: no gang at all."""
    group = recorded("podgroup-scheduled")
    group["metadata"]["labels"] = dict(DEFAULT.managed_labels)
    ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
    idle = MinMember(1, "deployment/train spec.replicas 0; a gang is never smaller than 1", idle=True)
    [write] = plan_writes(Desired(ns, name, OWNED, idle, may_create=True), group, SETTINGS)
    assert (write.action, write.old, write.new) == ("replace", 3, None)  # deleted, with nothing to make again
    assert plan_writes(Desired(ns, name, OWNED, idle, may_create=True), None, SETTINGS) == []
    [create] = plan_writes(Desired(ns, name, OWNED, MinMember(3, "deployment/train spec.replicas 3"),
                                   may_create=True), None, SETTINGS)
    assert create.action == "create" and create.body["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    # a backend that can resize a live group still gets one at 0 replicas (it follows the scale-up)
    kai = DEFAULT
    [made] = plan_writes(Desired(ns, name, OWNED, idle, may_create=True), None, kai)
    assert made.action == "create"


def test_the_grouper_leaves_a_terminating_group_alone():
    """A PodGroup deleted under live pods keeps its finalizer: it cannot be replaced yet."""
    group = recorded("podgroup-terminating-with-pods")
    assert group["metadata"]["deletionTimestamp"] and group["metadata"]["finalizers"]
    group["metadata"]["labels"] = dict(DEFAULT.managed_labels)
    desired = Desired(group["metadata"]["namespace"], group["metadata"]["name"], OWNED, MinMember(2, "job/train"))
    assert plan_writes(desired, group, SETTINGS) == []


# ---------------------------------------------------------------------------- the scheduler's verdict


@pytest.mark.parametrize("fixture, verdict", [
    ("podgroup-unschedulable", SchedulerVerdict(
        "unschedulable", "0/1 placements are available, first placement status: pod group is unschedulable, No "
                         "preemption victims found for incoming preemptor")),
    ("podgroup-scheduled", SchedulerVerdict("scheduled")),
    ("podgroup-create-201", None),
])
def test_scheduler_verdict(fixture, verdict):
    assert NATIVE.scheduler_verdict(recorded(fixture)) == verdict


def test_scheduler_verdict_of_odd_statuses():
    assert NATIVE.scheduler_verdict({"status": {"conditions": [{"type": "PodGroupScheduled"}]}}) == \
        SchedulerVerdict("PodGroupScheduled=Unknown")
    assert NATIVE.scheduler_verdict({"status": {"conditions": ["x", None, {"type": "Other", "status": "True"}]}}) is None
    assert NATIVE.scheduler_verdict({"status": "x"}) is None
    assert BACKENDS["kai"].scheduler_verdict(recorded("podgroup-unschedulable")) is None  # KAI reads its own status
