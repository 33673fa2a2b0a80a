"""The webhook's decisions without a server: reading reviews, building JSONPatches,
validating pods, encoding answers."""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import orjson
import pytest
from hypothesis import given, settings as hyp_settings, strategies as st

from podgang import rules
from podgang.backends.kai import KAI, escape_key
from podgang.settings import DEFAULT
from tests.webhook_support import TEST_SETTINGS, review, with_annotations
from podgang.webhook import podgroups
from podgang.webhook.podgroups import CreationBudget
from podgang.webhook.admission import (
    BadReview,
    Verdict,
    encode_response,

    parse_review,
    validate,
)

#: every pod podgang puts into a KAI gang tells KAI's own pod-grouper to leave it alone
SKIP = "kai.scheduler/skip-podgrouper"


def parsed(doc):
    return parse_review(json.dumps(doc).encode())


# ---------------------------------------------------------------------------
# reading the review


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"", "the body is empty: expected an admission.k8s.io/v1 AdmissionReview"),
        (b"{not json", "the body is not JSON"),
        (b"\xff\xfe", "the body is not JSON"),
        (b"[1, 2]", "the body is JSON list, not an AdmissionReview object"),
        (b'"text"', "the body is JSON str, not an AdmissionReview object"),
        (b'{"kind": "AdmissionReview"}', "apiVersion (missing) is not supported: expected admission.k8s.io/v1"),
        (
            b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}',
            "apiVersion 'admission.k8s.io/v1beta1' is not supported: expected admission.k8s.io/v1",
        ),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}', "kind 'Pod' is not supported: expected AdmissionReview"),
        (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "the AdmissionReview has no request object"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}',
            "the AdmissionReview has no request object",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "the AdmissionReview request has no uid",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 7}}',
            "the AdmissionReview request has no uid",
        ),
    ],
)
def test_bad_reviews_are_refused_with_a_one_line_reason(body, reason):
    with pytest.raises(BadReview) as err:
        parse_review(body)
    assert str(err.value).startswith(reason)
    assert "\n" not in str(err.value)


def test_a_recorded_review_is_read_as_the_apiserver_sent_it():
    r = parsed(review("pod-create-by-replicaset"))
    assert (r.uid, r.operation, r.kind, r.group, r.sub_resource, r.namespace, r.dry_run) == (
        "14244bff-0b5c-4400-8bae-121483372c87", "CREATE", "Pod", "", "", "cap", False,
    )
    assert r.is_pod and r.old is None
    assert r.obj["metadata"]["generateName"] == "web-7887448d46-"
    assert parsed(review("pod-create-dry-run")).dry_run is True
    scale = parsed(review("deployment-update-scale-subresource"))
    assert (scale.kind, scale.sub_resource, scale.is_pod) == ("Scale", "scale", False)
    delete = parsed(review("pod-delete"))
    assert delete.obj is None and delete.old["metadata"]["name"] == "bare"


def test_integers_beyond_64_bits_are_still_json():
    doc = review("pod-create-dry-run")
    doc["request"]["object"]["spec"]["priority"] = 2**70
    assert parsed(doc).uid == doc["request"]["uid"]


# ---------------------------------------------------------------------------
# the JSONPatch


def test_keys_are_escaped_as_json_pointer_tokens():
    assert escape_key("kai.scheduler/podgroup") == "kai.scheduler~1podgroup"
    assert escape_key("a~b/c") == "a~0b~1c"


def test_absent_maps_are_created_with_the_key_inside():
    pod = {"metadata": {"name": "p"}}
    assert KAI.membership_patch(pod, "g") == [
        {"op": "add", "path": "/metadata/annotations", "value": {"pod-group-name": "g", SKIP: "true"}},
        {"op": "add", "path": "/metadata/labels", "value": {"kai.scheduler/podgroup": "g"}},
    ]


def test_existing_maps_get_only_the_keys_and_keep_everything_else():
    pod = {
        "metadata": {
            "labels": {"app": "x", "kai.scheduler/subgroup-name": "workers"},
            "annotations": {"note": "n"},
        }
    }
    ops = KAI.membership_patch(pod, "g")
    assert ops == [
        {"op": "add", "path": "/metadata/annotations/pod-group-name", "value": "g"},
        {"op": "add", "path": "/metadata/labels/kai.scheduler~1podgroup", "value": "g"},
        {"op": "add", "path": "/metadata/annotations/kai.scheduler~1skip-podgrouper", "value": "true"},
    ]
    out = jsonpatch.apply_patch(pod, ops)
    assert out["metadata"]["labels"] == {"app": "x", "kai.scheduler/subgroup-name": "workers", "kai.scheduler/podgroup": "g"}
    assert out["metadata"]["annotations"] == {"note": "n", "pod-group-name": "g", SKIP: "true"}


def test_null_maps_and_missing_metadata_are_created():
    assert jsonpatch.apply_patch({"metadata": {"labels": None}}, KAI.membership_patch({"metadata": {"labels": None}}, "g")) == {
        "metadata": {"labels": {"kai.scheduler/podgroup": "g"}, "annotations": {"pod-group-name": "g", SKIP: "true"}}
    }
    assert jsonpatch.apply_patch({}, KAI.membership_patch({}, "g")) == {
        "metadata": {"labels": {"kai.scheduler/podgroup": "g"}, "annotations": {"pod-group-name": "g", SKIP: "true"}}
    }


def test_a_hand_made_label_gets_only_the_missing_annotation():
    pod = review("pod-create-labelled-gpu-memory")["request"]["object"]
    assert KAI.membership_patch(pod, "app-with-models") == [
        {"op": "add", "path": "/metadata/annotations/pod-group-name", "value": "app-with-models"},
        {"op": "add", "path": "/metadata/annotations/kai.scheduler~1skip-podgrouper", "value": "true"},
    ]


label_keys = st.sampled_from(["app", "kai.scheduler/podgroup", "kai.scheduler/subgroup-name", "x/y~z", "pod-group-name"])
maps = st.one_of(st.none(), st.dictionaries(label_keys, st.text(max_size=5), max_size=4))


@hyp_settings(max_examples=200, deadline=None)
@given(labels=maps, annotations=maps, group=st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True))
def test_patching_twice_changes_nothing_the_second_time(labels, annotations, group):
    md = {"name": "p"}
    if labels is not None:
        md["labels"] = labels
    if annotations is not None:
        md["annotations"] = annotations
    pod = {"metadata": md}
    ops = KAI.membership_patch(pod, group)
    once = jsonpatch.apply_patch(pod, ops)
    assert once["metadata"]["labels"]["kai.scheduler/podgroup"] == group
    assert once["metadata"]["annotations"]["pod-group-name"] == group
    # every other key survives
    for key, value in (labels or {}).items():
        if key != "kai.scheduler/podgroup":
            assert once["metadata"]["labels"][key] == value
    for key, value in (annotations or {}).items():
        if key != "pod-group-name":
            assert once["metadata"]["annotations"][key] == value
    # reinvocation: the webhook sees its own result and asks for nothing more
    assert KAI.membership_patch(once, group) == []
    # the same patch applied again is a no-op too
    assert jsonpatch.apply_patch(once, ops) == once


# ---------------------------------------------------------------------------
# the answer


def test_an_allowed_answer_echoes_the_uid_and_carries_a_base64_patch():
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    body, size = encode_response("uid-1", Verdict(True, "patched", "r", group="g", patch=ops))
    doc = orjson.loads(body)
    assert doc["apiVersion"] == "admission.k8s.io/v1" and doc["kind"] == "AdmissionReview"
    resp = doc["response"]
    assert resp["uid"] == "uid-1" and resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(resp["patch"])) == ops
    assert size == len(orjson.dumps(ops))
    assert "status" not in resp and "warnings" not in resp


def test_a_denial_carries_the_message_verbatim_and_a_4xx_code():
    message = "cannot request both GPU and GPU memory: x; y"
    body, size = encode_response("uid-2", Verdict(False, "denied", message, message=message))
    resp = orjson.loads(body)["response"]
    assert resp == {
        "uid": "uid-2",
        "allowed": False,
        "status": {"status": "Failure", "code": 403, "reason": "Forbidden", "message": message},
    }
    assert size == 0


def test_warnings_are_sent():
    w = rules.missing_group_warning("team-a", "ml")
    assert w == "PodGroup team-a not found in namespace ml: the pod stays Pending until it exists"
    resp = orjson.loads(encode_response("u", Verdict(True, "patched", "r", warnings=[w]))[0])["response"]
    assert resp["warnings"] == [w]


# ---------------------------------------------------------------------------
# validation


def gpu_pod_review(notes, *, operation="CREATE", old_notes=None):
    doc = with_annotations(review("pod-create-bare-gpu"), notes)
    if operation == "UPDATE":
        doc["request"]["operation"] = "UPDATE"
        doc["request"]["oldObject"] = with_annotations(review("pod-create-bare-gpu"), old_notes or {})["request"]["object"]
    return parsed(doc)


@pytest.mark.parametrize("version, start", [
    ("v0.17", "cannot request both GPU and GPU memory: "),
    ("v0.18", "cannot have both GPU fraction request and whole GPU resource request/limit: "),  # gpu-memory: a fraction
])
def test_whole_gpu_with_gpu_memory_is_denied_with_the_kai_message_first(version, start):
    settings = TEST_SETTINGS.with_changes(kai_version=version, kai_version_source="--kai-version")
    verdict = validate(gpu_pod_review({"gpu-memory": "4000"}), settings)
    assert not verdict.allowed and verdict.verdict == "denied"
    # the rule's message, whole and unchanged: KAI's words first, then the specifics
    assert verdict.message == rules.gpu_problem(gpu_pod_review({"gpu-memory": "4000"}).obj, settings)
    assert verdict.message.startswith(start)
    assert "nvidia.com/gpu" in verdict.message and "4000" in verdict.message
    # the decision log says whose rules: the KAI release and why that one
    assert verdict.reason == f"{verdict.message} (KAI {version}'s GPU rules: --kai-version)"


@pytest.mark.parametrize(
    "notes, start",
    [
        ({"gpu-fraction": "0.5"}, "cannot have both GPU fraction request and whole GPU resource request/limit: "),
    ],
)
def test_fraction_with_whole_gpu_is_denied(notes, start):
    verdict = validate(gpu_pod_review(notes), TEST_SETTINGS)
    assert not verdict.allowed and verdict.message.startswith(start)


@pytest.mark.parametrize("value", ["0", "-1", "2000Mi", "1.5", ""])
def test_bad_gpu_memory_is_denied(value):
    doc = with_annotations(review("pod-create-labelled-gpu-memory"), {"gpu-memory": value})
    verdict = validate(parsed(doc), TEST_SETTINGS)
    assert verdict.message.startswith("gpu-memory annotation value must be a positive integer greater than 0: ")


@pytest.mark.parametrize("value", ["0", "1", "1.5", "NaN", "abc"])
def test_bad_gpu_fraction_is_denied(value):
    doc = review("pod-create-dry-run")
    doc["request"]["object"]["metadata"]["annotations"] = {"gpu-fraction": value}
    verdict = validate(parsed(doc), TEST_SETTINGS)
    assert verdict.message.startswith("gpu-fraction annotation value must be a positive number smaller than 1.0: ")


def test_recorded_pods_without_contradictions_are_allowed():
    for name in ("pod-create-bare-gpu", "pod-create-labelled-gpu-memory", "pod-create-by-replicaset", "pod-update-label"):
        verdict = validate(parsed(review(name)), TEST_SETTINGS)
        assert verdict.allowed and verdict.verdict == "allowed", (name, verdict)


def test_a_group_named_two_ways_is_denied():
    doc = review("pod-create-labelled-gpu-memory")
    doc["request"]["object"]["metadata"]["annotations"]["pod-group-name"] = "other"
    verdict = validate(parsed(doc), TEST_SETTINGS)
    assert not verdict.allowed
    assert verdict.message == rules.hand_made_group(doc["request"]["object"], TEST_SETTINGS).message
    assert "'other'" in verdict.message.replace('"', "'") and "app-with-models" in verdict.message


def test_an_update_that_changes_or_removes_the_group_is_denied():
    doc = review("pod-update-label")
    doc["request"]["object"]["metadata"]["labels"]["kai.scheduler/podgroup"] = "elsewhere"
    verdict = validate(parsed(doc), TEST_SETTINGS)
    assert not verdict.allowed
    assert verdict.message == KAI.membership_change_problem(doc["request"]["oldObject"], doc["request"]["object"])
    assert "app-with-models" in verdict.message and "elsewhere" in verdict.message
    doc = review("pod-update-label")
    del doc["request"]["object"]["metadata"]["labels"]["kai.scheduler/podgroup"]
    verdict = validate(parsed(doc), TEST_SETTINGS)
    assert not verdict.allowed and "removed" in verdict.message


def test_an_update_is_not_refused_for_a_contradiction_the_pod_already_had():
    before = {"gpu-memory": "4000"}
    assert validate(gpu_pod_review(before, operation="UPDATE", old_notes=before), TEST_SETTINGS).allowed
    # ...but one the update introduces is
    verdict = validate(gpu_pod_review(before, operation="UPDATE", old_notes={}), TEST_SETTINGS)
    assert not verdict.allowed and verdict.message.startswith(rules.MSG_FRACTION_AND_GPU + ": ")


def test_pods_out_of_scope_and_other_requests_are_not_validated():
    doc = with_annotations(review("pod-create-bare-gpu"), {"gpu-memory": "4000"})
    assert validate(parsed(doc), DEFAULT).verdict == "skipped"  # default-scheduler is not in scope by default
    skipped = copy.deepcopy(doc)
    skipped["request"]["object"]["metadata"]["labels"]["podgang.io/skip"] = "true"
    assert validate(parsed(skipped), TEST_SETTINGS).verdict == "skipped"
    excluded = copy.deepcopy(doc)
    excluded["request"]["namespace"] = "kube-system"
    assert validate(parsed(excluded), TEST_SETTINGS).verdict == "skipped"
    for name in ("pod-delete", "deployment-create", "deployment-update-scale-subresource", "replicaset-update-scale"):
        verdict = validate(parsed(review(name)), TEST_SETTINGS)
        assert verdict.allowed and verdict.verdict == "skipped", name


# ---------------------------------------------------------------------------
# memory


async def test_remembered_decisions_do_not_keep_the_pods_they_were_made_for():
    """The decisions replayed for identical owned pods are bounded in count; each must
    also be small. Keeping the pod's bytes as the key made a full table hold 4,096
    whole pods (StatefulSet pods are all distinct: every one is an entry)."""
    import tracemalloc

    from tests.webhook_support import NS, REPLICASET_UID, recorded_object
    from podgang.webhook.admission import Admission
    from podgang.metrics import WebhookMetrics
    from podgang.webhook.owners import OwnerCache
    from podgang.webhook.podgroups import PodGroups

    metrics = WebhookMetrics()
    owners = OwnerCache(None, metrics)
    owners.put(NS, recorded_object("replicaset-create-by-deployment", REPLICASET_UID))
    owners.put(NS, recorded_object("deployment-create", "2d14ca47-2cb2-410d-8124-0dd58f4b12e1"))
    admission = Admission(TEST_SETTINGS, owners, PodGroups(None, TEST_SETTINGS, metrics))
    doc = review("pod-create-by-replicaset")
    big = "x" * 100_000  # a pod with a large annotation (env, config) ...
    bodies = []
    for i in range(40):  # ... and 40 of them, each different
        one = copy.deepcopy(doc)
        one["request"]["uid"] = f"u{i}"
        one["request"]["object"]["metadata"]["annotations"] = {"config": f"{i}{big}"}
        bodies.append(json.dumps(one).encode())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for body in bodies:
            verdict = await admission.mutate(parse_review(body))
            assert verdict.group == "pg-web-2d14ca47-2cb2-410d-8124-0dd58f4b12e1"
            del verdict
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(admission._replay) == 40
    assert held < 1_000_000, f"{held} bytes kept for 40 decisions"


# ---------------------------------------------------------------------------
# what the apiserver validates after the webhook

import re as _re

_LABEL_VALUE = _re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def apiserver_accepts_labels(pod: dict) -> list[str]:
    """The label problems kube-apiserver's ValidateLabels reports (values: at most 63
    characters, alphanumeric at both ends)."""
    problems = []
    for key, value in ((pod.get("metadata") or {}).get("labels") or {}).items():
        if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
            problems.append(f"{key}={value!r}: must be no more than 63 characters")
    return problems


async def test_a_workload_with_a_long_name_still_gets_pods_the_apiserver_accepts():
    """``pg-<name>-<uid>`` is 40 characters plus the name: a Job of 24 or more characters
    gives a group name no label value can hold. The pod must still be valid (the
    annotation carries the group; KAI reads the annotation), or every pod is refused."""
    from podgang.webhook.admission import Admission
    from podgang.metrics import WebhookMetrics
    from podgang.webhook.owners import OwnerCache
    from podgang.webhook.podgroups import PodGroups

    uid = "c64e554b-f9d2-4870-aa19-0062565c3d59"
    name = "nightly-llama-finetune-with-long-name"
    metrics = WebhookMetrics()
    owners = OwnerCache(None, metrics)
    owners.put("cap", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "cap", "uid": uid}})
    admission = Admission(TEST_SETTINGS, owners, PodGroups(None, TEST_SETTINGS, metrics))
    doc = review("pod-create-by-job")
    ref = doc["request"]["object"]["metadata"]["ownerReferences"][0]
    ref["name"], ref["uid"] = name, uid
    verdict = await admission.mutate(parsed(doc))
    group = f"pg-{name}-{uid}"
    assert verdict.allowed and verdict.group == group
    pod = jsonpatch.apply_patch(doc["request"]["object"], verdict.patch)
    assert pod["metadata"]["annotations"]["pod-group-name"] == group
    assert apiserver_accepts_labels(pod) == []
    # reinvoked on its own result: nothing more to change, no denial
    again = copy.deepcopy(doc)
    again["request"]["object"] = pod
    again["request"]["uid"] = "again"
    assert (await admission.mutate(parsed(again))).patch == []
    assert validate(parsed(again), TEST_SETTINGS).allowed


# ---------------------------------------------------------------------------
# issue 24: a pod of a multi-pod replica carries its leaf from admission


@pytest.mark.parametrize("shared", [True, False])
async def test_an_lws_pod_is_admitted_into_its_replicas_leaf(shared):
    """A worker of an LWS group: into the shared group (its template names it and the role
    "prefill"), or a lone LWS asking for 2 complete replicas: its one group, not the
    replica's. Either way its replica's leaf replaces what its template names."""
    from podgang.webhook.admission import Admission
    from podgang.metrics import WebhookMetrics
    from podgang.webhook.owners import OwnerCache
    from podgang.webhook.podgroups import PodGroups
    from tests.grouper_support import owner_ref
    from tests.emulated.test_replica_tree import GROUP_INDEX, lws, lws_pods

    ns = "team"
    workload = lws("llm-prefill", 2, 3, group="serve" if shared else None, subgroup="prefill" if shared else None,
                   min_available=None if shared else "2")
    workload["metadata"]["namespace"] = ns
    workload["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulerName"] = "kai-scheduler"
    owners_made, pods = lws_pods(workload, group=None)
    metrics = WebhookMetrics()
    owners = OwnerCache(None, metrics)
    for obj in (workload, *owners_made, *pods):
        obj["metadata"]["namespace"] = ns
        owners.put(ns, obj)
    admission = Admission(TEST_SETTINGS, owners, PodGroups(None, TEST_SETTINGS, metrics))
    worker = copy.deepcopy(pods[-1])  # group 1's last worker
    worker["metadata"].pop("uid", None)
    worker["spec"]["schedulerName"] = "kai-scheduler"
    worker["spec"].pop("nodeName", None)
    worker["metadata"]["labels"] = {k: v for k, v in worker["metadata"]["labels"].items() if "kai.scheduler" not in k}
    worker["metadata"]["annotations"] = {}
    if shared:  # as the template makes it
        worker["metadata"]["labels"].update({KAI.label: "serve", KAI.subgroup_label: "prefill"})
    doc = review("pod-create-by-job")
    doc["request"]["object"], doc["request"]["namespace"] = worker, ns
    verdict = await admission.mutate(parsed(doc))
    pod = jsonpatch.apply_patch(worker, verdict.patch)
    group = "serve" if shared else rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))
    assert verdict.group == group and pod["metadata"]["annotations"]["pod-group-name"] == group
    leaf = "prefill-1" if shared else "llm-prefill-1"
    assert worker["metadata"]["labels"][GROUP_INDEX] == "1"
    assert pod["metadata"]["labels"][KAI.subgroup_label] == leaf


# ---------------------------------------------------------------------------
# the budget of PodGroups created at admission


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_is_a_sliding_window_per_namespace():
    clock = Clock()
    budget = CreationBudget(2, 60.0, clock=clock)
    assert budget.take("a") is None and budget.take("a") is None
    assert budget.take("a") == 60.0  # spent: the oldest slot frees in 60 s
    assert budget.take("b") is None  # another namespace has its own
    clock.now += 30
    assert budget.take("a") == 30.0
    clock.now += 30  # the first two fall out of the window together
    assert budget.take("a") is None and budget.take("a") is None and budget.take("a") is not None


def test_a_slot_given_back_is_free_again_and_zero_creates_none():
    clock = Clock()
    budget = CreationBudget(1, 60.0, clock=clock)
    assert budget.take("a") is None
    budget.give_back("a")  # the create did not make a group (it existed, the API failed)
    assert budget.take("a") is None and budget.take("a") is not None
    none = CreationBudget(0, 60.0, clock=clock)
    assert none.take("a") == 60.0


def test_the_budget_remembers_a_bounded_number_of_namespaces(monkeypatch):
    monkeypatch.setattr(podgroups, "BUDGET_NAMESPACES", 3)
    budget = CreationBudget(1, 60.0, clock=Clock())
    for ns in "abcd":
        assert budget.take(ns) is None
    assert len(budget._spent) == 3 and "a" not in budget._spent
