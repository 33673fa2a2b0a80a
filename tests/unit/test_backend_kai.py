"""The KAI backend: KAI's PodGroup manifest shape, resize patches, owner references."""

from __future__ import annotations


import jsonschema
import pytest
import yaml

from podgang.backends import BACKENDS, GangSpec
from podgang.backends.base import PATCH
from podgang.backends.kai import KAI
from podgang.backends.keyed import MIN_MEMBER, PRIORITY_CLASS, QUEUE
from podgang.objects import OwnerRef
from podgang.rules import Gang, gang_for_pod, min_member_for
from podgang.settings import DEFAULT
from tests.paths import TESTS

CRD = TESTS / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml"


def kai_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == KAI.podgroup.version]
    return version["schema"]["openAPIV3Schema"]


OWNER = OwnerRef("apps/v1", "Deployment", "web", "2d14ca47-2cb2-410d-8124-0dd58f4b12e1")


def test_kai_identity():
    assert KAI.podgroup.api_version == "scheduling.run.ai/v2alpha2"
    assert (KAI.podgroup.group, KAI.podgroup.version, KAI.podgroup.plural, KAI.podgroup.kind) == ("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")
    assert KAI.annotation == "pod-group-name"
    assert KAI.label == "kai.scheduler/podgroup"
    assert KAI.subgroup_label == "kai.scheduler/subgroup-name"
    assert MIN_MEMBER == "minMember"
    assert BACKENDS["kai"] is KAI
    assert DEFAULT.default_backend is KAI


def test_kai_matches_the_crd():
    crd = yaml.safe_load(CRD.read_text())
    assert crd["spec"]["group"] == KAI.podgroup.group
    assert crd["spec"]["names"]["kind"] == KAI.podgroup.kind
    assert crd["spec"]["names"]["plural"] == KAI.podgroup.plural
    spec_props = kai_schema()["properties"]["spec"]["properties"]
    for field in (MIN_MEMBER, QUEUE, PRIORITY_CLASS):
        assert field in spec_props


def test_manifest_full_shape():
    m = KAI.build_podgroup(GangSpec(
        "pg-web-2d14ca47-2cb2-410d-8124-0dd58f4b12e1",
        "cap",
        3,
        owner=OWNER,
        labels={"podgang.io/managed-by": "podgang"},
        annotations={"podgang.io/reason": "deployment/web spec.replicas 3"},
        queue="test",
        priority_class="inference",
    ))
    assert m == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": "pg-web-2d14ca47-2cb2-410d-8124-0dd58f4b12e1",
            "namespace": "cap",
            "labels": {"podgang.io/managed-by": "podgang"},
            "annotations": {"podgang.io/reason": "deployment/web spec.replicas 3"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": "web",
                    "uid": "2d14ca47-2cb2-410d-8124-0dd58f4b12e1",
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {"minMember": 3, "queue": "test", "priorityClassName": "inference"},
    }
    jsonschema.validate(m, kai_schema())


def test_manifest_minimal_shape():
    m = KAI.build_podgroup(GangSpec("pg-bare", None, 1))
    assert m == {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-bare"}, "spec": {"minMember": 1}}
    jsonschema.validate(m, kai_schema())


def test_manifest_copies_its_inputs():
    labels = {"a": "b"}
    m = KAI.build_podgroup(GangSpec("g", "ns", 2, labels=labels))
    labels["a"] = "changed"
    assert m["metadata"]["labels"] == {"a": "b"}


def test_manifest_min_member_is_an_int():
    m = KAI.build_podgroup(GangSpec("g", "ns", True))  # type: ignore[arg-type]
    assert m["spec"]["minMember"] == 1 and type(m["spec"]["minMember"]) is int


def test_manifest_from_the_rules():
    """What the grouper creates for a recorded Deployment pod passes the CRD schema."""
    pod = {
        "kind": "Pod",
        "metadata": {
            "generateName": "web-7887448d46-",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": OWNER.uid, "controller": True}],
        },
    }
    gang = gang_for_pod(pod)
    assert isinstance(gang, Gang)
    size = min_member_for({"kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}})
    m = KAI.build_podgroup(GangSpec(gang.name, "cap", size.value, owner=gang.owner, labels=DEFAULT.managed_labels))
    jsonschema.validate(m, kai_schema())
    assert m["metadata"]["ownerReferences"][0]["uid"] == OWNER.uid
    assert m["metadata"]["labels"] == {"podgang.io/managed-by": "podgang"}
    assert KAI.is_podgroup(m)
    assert KAI.min_member(m) == 3


def test_crd_rejects_a_negative_min_member():
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(KAI.build_podgroup(GangSpec("g", "ns", -1)), kai_schema())


def test_min_member_patch():
    assert KAI.resize({}, 4).body == {"spec": {"minMember": 4}}
    assert KAI.resize({}, 3).body == {"spec": {"minMember": 3}}


def test_min_member_reading():
    assert KAI.min_member({"spec": {"minMember": 3}}) == 3
    assert KAI.min_member({"spec": {"minMember": 0}}) == 0
    assert KAI.min_member({"spec": {}}) is None
    assert KAI.min_member({}) is None
    assert KAI.min_member({"spec": {"minMember": True}}) is None
    assert KAI.min_member({"spec": {"minMember": "3"}}) is None


def test_resize_is_a_merge_patch_of_min_member():
    resize = KAI.resize({"spec": {"minMember": 3}}, 4)
    assert resize.action == PATCH
    assert resize.body == {"spec": {"minMember": 4}}


def test_is_podgroup():
    assert KAI.is_podgroup({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup"})
    assert not KAI.is_podgroup({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"})
    assert not KAI.is_podgroup({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "Queue"})


def test_paths():
    assert KAI.podgroup.path("cap") == "/apis/scheduling.run.ai/v2alpha2/namespaces/cap/podgroups"
    assert KAI.podgroup.path("cap", "pg-web") == "/apis/scheduling.run.ai/v2alpha2/namespaces/cap/podgroups/pg-web"


def test_owner_ref_round_trip():
    raw = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u", "controller": True, "blockOwnerDeletion": True}
    ref = OwnerRef.from_dict(raw)
    assert ref == OwnerRef("apps/v1", "Deployment", "web", "u", True)
    assert ref.to_dict() == {**raw, "blockOwnerDeletion": False}
    assert OwnerRef.from_dict(ref.to_dict()) == ref


def test_owner_ref_from_partial_dict():
    assert OwnerRef.from_dict({}) == OwnerRef("", "", "", "", False)
    assert OwnerRef.from_dict({"kind": "Job", "name": "j"}).controller is False
