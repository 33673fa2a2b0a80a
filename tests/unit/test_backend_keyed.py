"""The Volcano and coscheduling backends, table-driven: membership patches on
recorded pods, backfill, membership changes on UPDATE, PodGroups built from the
rules and validated against each scheduler's real CRD, sizes and resizes, and each
scheduler's own per-gang options."""

from __future__ import annotations


import jsonpatch
import jsonschema
import pytest
import yaml

from podgang.backends import BACKENDS, COSCHEDULING, VOLCANO, GangSpec
from podgang.backends.base import PATCH, GangSource
from podgang.backends.coscheduling import MAX_WORKLOAD_NAME, timeout_seconds
from podgang.objects import OwnerRef
from podgang.rules import HAND_MADE, Gang, gang_for_pod, hand_made_group, min_member_for
from podgang.gang import Slimmer
from podgang.settings import DEFAULT, Settings
from tests.webhook_support import review, review_names
from tests.paths import TESTS

CRDS = TESTS / "fixtures" / "crds"
OWNER = OwnerRef("apps/v1", "Deployment", "web", "2d14ca47-2cb2-410d-8124-0dd58f4b12e1")

#: backend -> (CRD file, where a pod carries its group, spec fields the CRD must have)
CASES = {
    "volcano": (VOLCANO, "scheduling.volcano.sh_podgroups.yaml", ("annotations", "scheduling.k8s.io/group-name"),
                ("minMember", "queue", "priorityClassName")),
    "coscheduling": (COSCHEDULING, "scheduling.x-k8s.io_podgroups.yaml", ("labels", "scheduling.x-k8s.io/pod-group"),
                     ("minMember", "scheduleTimeoutSeconds")),
}
NAMES = sorted(CASES)
CREATED_PODS = [n for n in review_names() if n.startswith("pod-create")]


def crd(name: str) -> dict:
    return yaml.safe_load((CRDS / CASES[name][1]).read_text())


def schema(name: str) -> dict:
    backend = CASES[name][0]
    [version] = [v for v in crd(name)["spec"]["versions"] if v["name"] == backend.podgroup.version]
    return version["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("name", NAMES)
def test_identity_matches_the_crd(name):
    backend, _, _, fields = CASES[name]
    doc = crd(name)
    assert BACKENDS[name] is backend
    assert (doc["spec"]["group"], doc["spec"]["names"]["kind"], doc["spec"]["names"]["plural"]) == (
        backend.podgroup.group, backend.podgroup.kind, backend.podgroup.plural)
    assert set(fields) <= set(schema(name)["properties"]["spec"]["properties"])


@pytest.mark.parametrize("fixture", CREATED_PODS)
@pytest.mark.parametrize("name", NAMES)
def test_membership_patch_on_recorded_pods(name, fixture):
    backend, _, (section, key), _ = CASES[name]
    pod = review(fixture)["request"]["object"]
    patch = backend.membership_patch(pod, "pg-web")
    patched = jsonpatch.apply_patch(pod, patch)
    assert patched["metadata"][section][key] == "pg-web"
    assert backend.group_of(patched) == "pg-web"
    assert backend.named_group(patched) == ("pg-web", key)
    assert not backend.needs_backfill(patched)
    assert backend.membership_patch(patched, "pg-web") == []
    # nothing else changed
    assert backend.without_membership(patched)["metadata"] == {
        **pod["metadata"], section: pod["metadata"].get(section, {})}
    assert patched["spec"] == pod["spec"]


@pytest.mark.parametrize("name", NAMES)
def test_membership_patch_ops(name):
    backend, _, (section, key), _ = CASES[name]
    escaped = key.replace("/", "~1")
    assert backend.membership_patch({}, "g") == [{"op": "add", "path": "/metadata", "value": {section: {key: "g"}}}]
    assert backend.membership_patch({"metadata": {}}, "g") == [
        {"op": "add", "path": f"/metadata/{section}", "value": {key: "g"}}]
    assert backend.membership_patch({"metadata": {section: {"x": "y"}}}, "g") == [
        {"op": "add", "path": f"/metadata/{section}/{escaped}", "value": "g"}]
    assert backend.describe_membership("g") == f"{section[:-1]} {key}=g set"


@pytest.mark.parametrize("name", NAMES)
def test_backfill(name):
    backend, _, (section, key), _ = CASES[name]
    pod = review("pod-create-by-replicaset")["request"]["object"]
    assert backend.needs_backfill(pod)
    patch = backend.backfill_patch(pod, "pg-web")
    assert patch == {"metadata": {section: {key: "pg-web"}}}
    merged = jsonpatch.apply_patch(pod, [{"op": "add", "path": f"/metadata/{section}",
                                          "value": {**pod["metadata"].get(section, {}), **patch["metadata"][section]}}])
    assert not backend.needs_backfill(merged) and backend.group_of(merged) == "pg-web"


@pytest.mark.parametrize("name", NAMES)
def test_membership_change_on_update(name):
    backend, _, (section, key), _ = CASES[name]

    def pod(group):
        return {"metadata": {section: {key: group} if group else {"other": "x"}}}

    assert backend.membership_change_problem(pod(None), pod("a")) is None  # added
    assert backend.membership_change_problem(pod("a"), pod("a")) is None
    moved = backend.membership_change_problem(pod("a"), pod("b"))
    assert moved and f'{key} "a" → "b"' in moved and "delete the pod and create it again" in moved
    removed = backend.membership_change_problem(pod("a"), pod(None))
    assert removed and f'{key} "a" → removed' in removed


@pytest.mark.parametrize("name", NAMES)
def test_hand_made_group_through_the_rules(name):
    backend, _, (section, key), _ = CASES[name]
    settings = DEFAULT.with_changes(backends=(("volcano", backend),))
    pod = {"metadata": {"name": "p", section: {key: "my-gang"}}}
    assert hand_made_group(pod, settings) == "my-gang"
    gang = gang_for_pod(pod, settings=settings)
    assert isinstance(gang, Gang) and (gang.name, gang.source) == ("my-gang", HAND_MADE)
    # KAI's keys mean nothing to this backend
    assert hand_made_group({"metadata": {"annotations": {"pod-group-name": "kai-gang"}}}, settings) is None


@pytest.mark.parametrize("name", NAMES)
def test_podgroup_from_the_rules_passes_the_crd(name):
    backend = CASES[name][0]
    pod = {"kind": "Pod", "metadata": {"generateName": "web-7887448d46-", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": OWNER.uid, "controller": True}]}}
    gang = gang_for_pod(pod)
    size = min_member_for({"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}})
    m = backend.build_podgroup(GangSpec(gang.name, "cap", size.value, owner=gang.owner, labels=DEFAULT.managed_labels))
    jsonschema.validate(m, schema(name))
    assert m["apiVersion"] == backend.podgroup.api_version and backend.is_podgroup(m)
    assert m["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert m["spec"] == {"minMember": 3}
    assert backend.min_member(m) == 3
    assert backend.slim_podgroup_spec(m["spec"]) == {"minMember": 3}
    with pytest.raises(jsonschema.ValidationError):  # the schema does check the spec
        jsonschema.validate({**m, "spec": {"minMember": "3"}}, schema(name))


def test_volcano_podgroup_full_shape():
    m = VOLCANO.build_podgroup(GangSpec("pg-lws-0", "ml", 4, labels=DEFAULT.managed_labels,
                                        **VOLCANO.gang_options(GangSource([{"metadata": {"annotations": {
                                            "scheduling.volcano.sh/queue-name": "research"}},
                                            "spec": {"priorityClassName": "high"}}]))))
    assert m == {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                 "metadata": {"name": "pg-lws-0", "namespace": "ml", "labels": DEFAULT.managed_labels},
                 "spec": {"minMember": 4, "queue": "research", "priorityClassName": "high"}}
    jsonschema.validate(m, schema("volcano"))


QUEUE = "scheduling.volcano.sh/queue-name"


@pytest.mark.parametrize("objs, expected", [
    ([], {}),
    ([{"metadata": {"annotations": {QUEUE: "q-pod"}}}, {"metadata": {"annotations": {QUEUE: "q-workload"}}}],
     {"queue": "q-pod"}),
    ([{"metadata": {}}, {"metadata": {"annotations": {QUEUE: "q-workload"}}}], {"queue": "q-workload"}),
    # a workload whose pod template names the queue and the priority class
    ([{"kind": "Deployment", "spec": {"template": {"metadata": {"annotations": {QUEUE: "q-template"}},
                                                   "spec": {"priorityClassName": "batch"}}}}],
     {"queue": "q-template", "priority_class": "batch"}),
    ([{"metadata": {"annotations": {QUEUE: ""}}, "spec": {"priorityClassName": 3}}], {}),
    # KubeRay's way: the label volcano.sh/queue-name on the RayCluster; the nearest object that names one wins
    ([{"metadata": {}}, {"metadata": {"labels": {"volcano.sh/queue-name": "kuberay-q"}}}], {"queue": "kuberay-q"}),
    ([{"metadata": {"labels": {"volcano.sh/queue-name": "q-pod"}}},
      {"metadata": {"annotations": {QUEUE: "q-workload"}}}], {"queue": "q-pod"}),
    ([{"metadata": {"labels": {"volcano.sh/queue-name": "q-label"}, "annotations": {QUEUE: "q-annotation"}}}],
     {"queue": "q-annotation"}),
    (["junk", None, {"spec": "x"}], {}),
])
def test_volcano_gang_options(objs, expected):
    assert VOLCANO.gang_options(GangSource(objs)) == expected


def test_the_grouper_keeps_a_workloads_volcano_queue_label():
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "r", "namespace": "ml", "labels": {"volcano.sh/queue-name": "kuberay-q", "team": "x"}},
           "spec": {"headGroupSpec": {"template": {"spec": {"schedulerName": "volcano"}}}}}
    slim = Slimmer(Settings(backends=(("volcano", VOLCANO),))).workload(ray)
    assert slim["metadata"]["labels"] == {"volcano.sh/queue-name": "kuberay-q"}
    assert VOLCANO.gang_options(GangSource([slim])) == {"queue": "kuberay-q"}


TIMEOUT = "podgang.io/schedule-timeout"


@pytest.mark.parametrize("text, seconds", [
    ("300", 300), ("90s", 90), ("5m", 300), ("1h30m", 5400), ("1h", 3600), (" 60 ", 60),
    ("0", None), ("", None), ("-5", None), ("1.5", None), ("5x", None), ("h", None), ("٣", None),
    ("9999999999999", None), ("2147483647", 2**31 - 1), ("2147483648", None),
])
def test_schedule_timeout_forms(text, seconds):
    assert timeout_seconds(text) == seconds


def test_coscheduling_schedule_timeout():
    options = COSCHEDULING.gang_options(GangSource([{"metadata": {}}, {"metadata": {"annotations": {TIMEOUT: "5m"}}}]))
    assert options == {"schedule_timeout": 300}
    m = COSCHEDULING.build_podgroup(GangSpec("pg-web", "cap", 3, **options))
    assert m["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 300}
    jsonschema.validate(m, schema("coscheduling"))
    assert COSCHEDULING.gang_options(GangSource([{"metadata": {"annotations": {TIMEOUT: "soon"}}}])) == {}
    assert COSCHEDULING.build_podgroup(GangSpec("g", None, 2, queue="ignored"))["spec"] == {"minMember": 2}


def test_coscheduling_refuses_a_name_longer_than_a_label_value():
    assert COSCHEDULING.membership_problem("g" * 63) is None
    long_name = "g" * 64
    problem = COSCHEDULING.membership_problem(long_name)
    assert problem and "at most 63 characters" in problem and "has 64" in problem
    assert f"at most {MAX_WORKLOAD_NAME} characters" in problem
    assert VOLCANO.membership_problem("g" * 253) is None  # an annotation has no such limit
    # the longest workload name that still fits, as the rules name its group
    for length, fits in ((MAX_WORKLOAD_NAME, True), (MAX_WORKLOAD_NAME + 1, False)):
        owner = OwnerRef("apps/v1", "Deployment", "w" * length, OWNER.uid, True)
        gang = gang_for_pod({"metadata": {"generateName": "x-", "ownerReferences": [owner.to_dict()]}})
        assert (COSCHEDULING.membership_problem(gang.name) is None) is fits


@pytest.mark.parametrize("name", NAMES)
def test_sizes_and_resize(name):
    backend = CASES[name][0]
    assert backend.min_member({"spec": {"minMember": 3}}) == 3
    assert backend.min_member({"spec": {"minMember": True}}) is None
    assert backend.min_member({"spec": {"minMember": "3"}}) is None
    assert backend.min_member({}) is None
    resize = backend.resize({"spec": {"minMember": 3}}, 5)
    assert (resize.action, resize.body) == (PATCH, {"spec": {"minMember": 5}})
    assert backend.scheduler_verdict({"status": {"phase": "Running"}}) is None
