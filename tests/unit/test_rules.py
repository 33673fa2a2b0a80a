"""Unit tests of the grouping rules (spec §1-2, §4 UPDATE, §5 durations): which gang a
pod joins, group names, scope, group changes, pod templates, grace periods.

minMember is in test_rules_min_member.py, GPU rules in test_rules_gpu.py, properties
in test_rules_properties.py.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from podgang import rules
from podgang.kinds import WORKLOADS
from podgang.objects import OwnerRef, is_active, is_terminating, pod_phase
from podgang.rules import (
    HAND_MADE,
    MAX_NAME,
    OWNED,
    OWNER_LESS,
    Denial,
    Gang,
    chain_objects,
    controller_ref,
    gang_for_pod,
    generated_suffix,
    grace_period_for,
    group_name,
    group_of,
    hand_made_group,
    in_scope,
    is_skipped,
    is_valid_group_name,
    next_owner,
    owned_group_name,
    owner_less_group_name,
    owner_to_look_up,
    parse_duration,
    pod_templates,
    scope_problem,
    template_group,
    top_owner,
)
from podgang.backends.kai import KAI, KaiBackend
from podgang.settings import DEFAULT, Settings
from tests.paths import TESTS

group_change_problem = KAI.membership_change_problem

ADMISSION = TESTS / "fixtures" / "admission"

LABEL = "kai.scheduler/podgroup"
ANNOTATION = "pod-group-name"
SUBGROUP = "kai.scheduler/subgroup-name"
LWS_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"


def review(name: str) -> dict:
    return json.loads((ADMISSION / name).read_text())


def admitted(name: str) -> dict:
    """``request.object`` of a recorded AdmissionReview."""
    return review(name)["request"]["object"]


def ref(kind: str, name: str, uid: str, api_version: str = "apps/v1", controller: bool = True) -> dict:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller}


def obj(kind: str, name: str, uid: str = "", *, owners=(), labels=None, annotations=None, spec=None,
        api_version=None) -> dict:
    """An object as the apiserver holds it: the apiVersion its kind is served at, unless given."""
    if api_version is None:
        api_version = WORKLOADS[kind].resource.api_version if kind in WORKLOADS else "apps/v1"
    md: dict = {"name": name, "namespace": "ns"}
    if uid:
        md["uid"] = uid
    if owners:
        md["ownerReferences"] = list(owners)
    if labels is not None:
        md["labels"] = dict(labels)
    if annotations is not None:
        md["annotations"] = dict(annotations)
    out = {"apiVersion": api_version, "kind": kind, "metadata": md}
    if spec is not None:
        out["spec"] = spec
    return out


def pod(name: str | None = "p", *, generate_name=None, owners=(), labels=None, annotations=None, spec=None) -> dict:
    md: dict = {"namespace": "ns"}
    if name is not None:
        md["name"] = name
    if generate_name is not None:
        md["generateName"] = generate_name
    if owners:
        md["ownerReferences"] = list(owners)
    if labels is not None:
        md["labels"] = dict(labels)
    if annotations is not None:
        md["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": md,
        "spec": spec if spec is not None else {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
    }


def assert_gang(result) -> Gang:
    assert isinstance(result, Gang), result
    assert is_valid_group_name(result.name), result.name
    return result


# ---------------------------------------------------------------------------
# §2.1 hand-made groups


class TestHandMade:
    def test_label_only(self):
        gang = assert_gang(gang_for_pod(pod(labels={LABEL: "app-with-models"})))
        assert gang.name == "app-with-models"
        assert gang.source == HAND_MADE and gang.hand_made and not gang.owner_less
        assert gang.owner is None

    def test_annotation_only(self):
        gang = assert_gang(gang_for_pod(pod(annotations={ANNOTATION: "app-with-models"})))
        assert gang.name == "app-with-models"
        assert gang.hand_made

    def test_both_equal(self):
        gang = assert_gang(gang_for_pod(pod(labels={LABEL: "shared"}, annotations={ANNOTATION: "shared"})))
        assert gang.name == "shared"
        assert gang.hand_made

    def test_both_different_is_denied_naming_both_values(self):
        result = gang_for_pod(pod(labels={LABEL: "group-b"}, annotations={ANNOTATION: "group-a"}))
        assert isinstance(result, Denial)
        assert result.message == (
            "the pod names two different PodGroups: annotation pod-group-name=\"group-a\" "
            "and label kai.scheduler/podgroup=\"group-b\"; set both to the same PodGroup name, "
            "or set only one and podgang copies it to the other"
        )

    def test_conflict_wins_over_owner(self):
        owned = pod(
            labels={LABEL: "x"},
            annotations={ANNOTATION: "y"},
            owners=[ref("ReplicaSet", "web-1", "rs-uid")],
        )
        result = gang_for_pod(owned)
        assert isinstance(result, Denial)
        assert '"x"' in result.message and '"y"' in result.message

    @pytest.mark.parametrize(
        "value",
        ["My_Group", "UPPER", "-leading", "trailing-", "a..b", "has space", "", "x" * (MAX_NAME + 1)],
    )
    def test_invalid_hand_made_name_by_label(self, value):
        result = gang_for_pod(pod(labels={LABEL: value}))
        assert isinstance(result, Denial)
        assert result.message == (
            f"kai.scheduler/podgroup={json.dumps(value)} is not a valid PodGroup name: use lower-case letters, digits, "
            f"'-' and '.', starting and ending with a letter or digit, at most 253 characters"
        )

    def test_invalid_hand_made_name_by_annotation_names_the_annotation(self):
        result = gang_for_pod(pod(annotations={ANNOTATION: "Bad_Group"}))
        assert isinstance(result, Denial)
        assert result.message.startswith('pod-group-name="Bad_Group" is not a valid PodGroup name')

    def test_trailing_newline_in_annotation_is_invalid(self):
        # annotations (unlike labels) may hold a newline; "g\n" is no PodGroup name
        result = gang_for_pod(pod(annotations={ANNOTATION: "app-with-models\n"}))
        assert isinstance(result, Denial)

    def test_longest_valid_hand_made_name(self):
        name = "a" * MAX_NAME
        assert assert_gang(gang_for_pod(pod(labels={LABEL: name}))).name == name

    def test_hand_made_wins_over_owner_and_keeps_top_owner(self):
        rs = obj("ReplicaSet", "app-server-5d4", "rs-uid", owners=[ref("Deployment", "app-server", "dep-uid")])
        p = pod(None, generate_name="app-server-5d4-", labels={LABEL: "shared-app-podgroup"}, owners=[ref("ReplicaSet", "app-server-5d4", "rs-uid")])
        gang = assert_gang(gang_for_pod(p, [rs]))
        assert gang.name == "shared-app-podgroup"
        assert gang.hand_made
        assert gang.owner is None  # a hand-made PodGroup is nobody's to garbage-collect
        assert gang.top_owner == OwnerRef("apps/v1", "Deployment", "app-server", "dep-uid", True)

    def test_subgroup_label(self):
        gang = assert_gang(gang_for_pod(pod(labels={LABEL: "g", SUBGROUP: "decode"})))
        assert gang.subgroup == "decode"
        # a standalone pod of a hand-made group is in the standalone subgroup; an owned
        # pod of an owned gang has none
        assert assert_gang(gang_for_pod(pod(labels={LABEL: "g"}))).subgroup == "standalone"
        assert assert_gang(gang_for_pod(pod())).subgroup is None

    def test_hand_made_group_function(self):
        assert hand_made_group(pod()) is None
        assert hand_made_group(pod(labels={LABEL: "g"})) == "g"
        assert hand_made_group({"metadata": {"annotations": {ANNOTATION: "g"}}}) == "g"
        assert isinstance(hand_made_group(pod(labels={LABEL: "a"}, annotations={ANNOTATION: "b"})), Denial)

    def test_recorded_labelled_pod(self):
        # seed 003: app-server carries only the label (and gpu-memory)
        gang = assert_gang(gang_for_pod(admitted("pod-create-labelled-gpu-memory.json")))
        assert gang.name == "app-with-models"
        assert gang.hand_made

    def test_custom_backend_keys(self):
        backend = KaiBackend(annotation="scheduling.k8s.io/group-name", label="example/group")
        settings = Settings(backends=(("kai-scheduler", backend),))
        gang = assert_gang(gang_for_pod(pod(annotations={"scheduling.k8s.io/group-name": "v"}), settings=settings))
        assert gang.name == "v"
        # the KAI keys mean nothing under other keys
        gang = assert_gang(gang_for_pod(pod("lonely", labels={LABEL: "v"}), settings=settings))
        assert gang.owner_less


# ---------------------------------------------------------------------------
# §2.2 owned pods, through an owner chain given as data


DEPLOY_UID = "2d14ca47-2cb2-410d-8124-0dd58f4b12e1"
RS_UID = "92b73ed6-0342-49a0-b17f-2357c512dad2"


def recorded_rs() -> dict:
    return admitted("replicaset-update-scale.json")


def recorded_deployment() -> dict:
    dep = copy.deepcopy(admitted("deployment-create.json"))
    dep["metadata"]["uid"] = DEPLOY_UID  # uid is empty at CREATE
    return dep


class TestOwned:
    def test_pod_replicaset_deployment(self):
        p = admitted("pod-create-by-replicaset.json")
        gang = assert_gang(gang_for_pod(p, [recorded_rs()]))
        assert gang.name == f"pg-web-{DEPLOY_UID}"
        assert gang.source == OWNED
        assert gang.owner == gang.top_owner == OwnerRef("apps/v1", "Deployment", "web", DEPLOY_UID, True)
        assert gang.reason == "top owner deployment/web"

    def test_pod_replicaset_deployment_full_chain(self):
        p = admitted("pod-create-by-replicaset.json")
        gang = assert_gang(gang_for_pod(p, [recorded_rs(), recorded_deployment()]))
        assert gang.name == f"pg-web-{DEPLOY_UID}"

    def test_without_chain_the_direct_owner_is_the_top(self):
        # before the ReplicaSet is looked up, the walk stops at the pod's owner
        p = admitted("pod-create-by-replicaset.json")
        gang = assert_gang(gang_for_pod(p))
        assert gang.name == f"pg-web-7887448d46-{RS_UID}"
        assert gang.owner.kind == "ReplicaSet"

    def test_owner_to_look_up_sequence_deployment(self):
        p = admitted("pod-create-by-replicaset.json")
        first = owner_to_look_up(p)
        assert first == OwnerRef("apps/v1", "ReplicaSet", "web-7887448d46", RS_UID, True)
        second = owner_to_look_up(p, [recorded_rs()])
        assert second == OwnerRef("apps/v1", "Deployment", "web", DEPLOY_UID, True)
        assert owner_to_look_up(p, [recorded_rs(), recorded_deployment()]) is None

    def test_pod_statefulset(self):
        p = admitted("pod-create-by-statefulset-gpu.json")
        gang = assert_gang(gang_for_pod(p))
        assert gang.name == "pg-db-ea1fc0ff-c6c6-4aa9-a3f6-d9d6ed82f23e"
        assert gang.owner.kind == "StatefulSet"
        sts = copy.deepcopy(admitted("statefulset-create.json"))
        sts["metadata"]["uid"] = "ea1fc0ff-c6c6-4aa9-a3f6-d9d6ed82f23e"
        assert owner_to_look_up(p) == OwnerRef("apps/v1", "StatefulSet", "db", "ea1fc0ff-c6c6-4aa9-a3f6-d9d6ed82f23e", True)
        assert owner_to_look_up(p, [sts]) is None
        assert assert_gang(gang_for_pod(p, [sts])).name == gang.name

    def test_pod_job(self):
        p = admitted("pod-create-by-job.json")
        job = obj("Job", "train", "c64e554b-f9d2-4870-aa19-0062565c3d59", api_version="batch/v1", spec={"parallelism": 2})
        for chain in ([], [job]):
            gang = assert_gang(gang_for_pod(p, chain))
            assert gang.name == "pg-train-c64e554b-f9d2-4870-aa19-0062565c3d59"
            assert gang.owner == OwnerRef("batch/v1", "Job", "train", "c64e554b-f9d2-4870-aa19-0062565c3d59", True)
        assert owner_to_look_up(p).kind == "Job"
        assert owner_to_look_up(p, [job]) is None

    def test_pod_job_cronjob_is_one_group_per_run(self):
        p = admitted("pod-create-by-cronjob-job.json")
        job = admitted("job-create-by-cronjob.json")  # owned by CronJob nightly
        gang = assert_gang(gang_for_pod(p, [job]))
        assert gang.name == "pg-nightly-29922453-0d893176-6fc7-4b03-9ae5-572233f06285"
        assert gang.owner.kind == "Job" and gang.owner.name == "nightly-29922453"
        assert "738c3135" not in gang.name  # not the CronJob's uid
        # the walk ends at the Job: the CronJob is never looked up
        assert owner_to_look_up(p) == OwnerRef("batch/v1", "Job", "nightly-29922453", "0d893176-6fc7-4b03-9ae5-572233f06285", True)
        assert owner_to_look_up(p, [job]) is None
        assert next_owner(job) is None
        assert top_owner(p, [job]).kind == "Job"

    def test_two_cronjob_runs_get_two_groups(self):
        cron = ref("CronJob", "nightly", "cron-uid", "batch/v1")
        job1 = obj("Job", "nightly-1", "job1-uid", owners=[cron], api_version="batch/v1")
        job2 = obj("Job", "nightly-2", "job2-uid", owners=[cron], api_version="batch/v1")
        p1 = pod(None, generate_name="nightly-1-", owners=[ref("Job", "nightly-1", "job1-uid", "batch/v1")])
        p2 = pod(None, generate_name="nightly-2-", owners=[ref("Job", "nightly-2", "job2-uid", "batch/v1")])
        g1, g2 = assert_gang(gang_for_pod(p1, [job1])), assert_gang(gang_for_pod(p2, [job2]))
        assert g1.name == "pg-nightly-1-job1-uid"
        assert g2.name == "pg-nightly-2-job2-uid"

    def test_pod_job_jobset(self):
        jobset_ref = ref("JobSet", "trainer", "js-uid", "jobset.x-k8s.io/v1alpha2")
        job = obj("Job", "trainer-workers-0", "job-uid", owners=[jobset_ref], api_version="batch/v1")
        jobset = obj("JobSet", "trainer", "js-uid", api_version="jobset.x-k8s.io/v1alpha2")
        p = pod(None, generate_name="trainer-workers-0-0-", owners=[ref("Job", "trainer-workers-0", "job-uid", "batch/v1")])
        assert owner_to_look_up(p).kind == "Job"
        assert owner_to_look_up(p, [job]) == OwnerRef("jobset.x-k8s.io/v1alpha2", "JobSet", "trainer", "js-uid", True)
        assert owner_to_look_up(p, [job, jobset]) is None
        for chain in ([job], [job, jobset]):
            gang = assert_gang(gang_for_pod(p, chain))
            assert gang.name == "pg-trainer-js-uid"
            assert gang.owner.kind == "JobSet"
            assert gang.reason == "top owner jobset/trainer"

    # LeaderWorkerSet (seeds 000/001): worker pod -> worker STS -> leader pod -> leader STS -> LWS
    LWS_UID = "5c3e7a0a-0000-4000-8000-00000000aaaa"

    def lws_objects(self, index: str = "0"):
        lws_ref = ref("LeaderWorkerSet", "gang-test", self.LWS_UID, "leaderworkerset.x-k8s.io/v1")
        leader_sts = obj("StatefulSet", "gang-test", "leader-sts-uid", owners=[lws_ref])
        leader = obj(
            "Pod",
            f"gang-test-{index}",
            "leader-pod-uid",
            owners=[ref("StatefulSet", "gang-test", "leader-sts-uid")],
            labels={LWS_NAME: "gang-test", LWS_INDEX: index},
            api_version="v1",
        )
        worker_sts = obj("StatefulSet", f"gang-test-{index}", "worker-sts-uid", owners=[ref("Pod", f"gang-test-{index}", "leader-pod-uid", "v1")])
        lws = obj("LeaderWorkerSet", "gang-test", self.LWS_UID, api_version="leaderworkerset.x-k8s.io/v1", spec={"leaderWorkerTemplate": {"size": 4}})
        worker = pod(
            f"gang-test-{index}-1",
            owners=[ref("StatefulSet", f"gang-test-{index}", "worker-sts-uid")],
            labels={LWS_NAME: "gang-test", LWS_INDEX: index, "leaderworkerset.sigs.k8s.io/worker-index": "1"},
        )
        return worker, [worker_sts, leader, leader_sts, lws]

    def test_lws_worker_pod(self):
        worker, chain = self.lws_objects("0")
        gang = assert_gang(gang_for_pod(worker, chain))
        assert gang.name == f"pg-gang-test-{self.LWS_UID}-group-0"
        assert gang.owner == OwnerRef("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "gang-test", self.LWS_UID, True)
        assert gang.reason == "top owner leaderworkerset/gang-test, group 0"
        # the LWS object itself is not needed to name the group
        assert assert_gang(gang_for_pod(worker, chain[:3])).name == gang.name

    def test_lws_group_index_12(self):
        worker, chain = self.lws_objects("12")
        assert assert_gang(gang_for_pod(worker, chain)).name == f"pg-gang-test-{self.LWS_UID}-group-12"

    def test_lws_leader_pod_joins_its_workers(self):
        worker, chain = self.lws_objects("3")
        leader = dict(chain[1])
        leader["spec"] = {"schedulerName": "kai-scheduler"}
        assert gang_for_pod(leader, chain[2:]).name == gang_for_pod(worker, chain).name

    def test_lws_groups_differ_by_index(self):
        w0, c0 = self.lws_objects("0")
        w1, c1 = self.lws_objects("1")
        assert gang_for_pod(w0, c0).name != gang_for_pod(w1, c1).name

    def test_lws_owner_to_look_up_sequence(self):
        worker, chain = self.lws_objects("0")
        expected = [
            ("StatefulSet", "gang-test-0"),
            ("Pod", "gang-test-0"),
            ("StatefulSet", "gang-test"),
            ("LeaderWorkerSet", "gang-test"),
            None,
        ]
        seen = []
        for n in range(len(chain) + 1):
            nxt = owner_to_look_up(worker, chain[:n])
            seen.append(None if nxt is None else (nxt.kind, nxt.name))
        assert seen == expected

    def test_lws_without_index_label_has_no_suffix(self):
        worker, chain = self.lws_objects("0")
        del worker["metadata"]["labels"][LWS_INDEX]
        assert assert_gang(gang_for_pod(worker, chain)).name == f"pg-gang-test-{self.LWS_UID}"

    @pytest.mark.parametrize("index", ["x", "-1", "1a", ""])
    def test_lws_non_numeric_index_is_ignored(self, index):
        worker, chain = self.lws_objects("0")
        worker["metadata"]["labels"][LWS_INDEX] = index
        gang = assert_gang(gang_for_pod(worker, chain))
        assert gang.name == f"pg-gang-test-{self.LWS_UID}"

    def test_unknown_crd_owner_is_the_top(self):
        p = pod(None, generate_name="lab-", owners=[ref("Workbench", "lab", "nb-uid", "research.example.com/v1")])
        assert owner_to_look_up(p) is None
        gang = assert_gang(gang_for_pod(p))
        assert gang.name == "pg-lab-nb-uid"
        assert gang.owner == OwnerRef("research.example.com/v1", "Workbench", "lab", "nb-uid", True)

    def test_unknown_crd_above_a_known_owner_is_passed_through(self):
        """A kind podgang does not know above one it knows wraps it: the gang is the known one's."""
        rs = obj("ReplicaSet", "svc-abc", "rs-uid", owners=[ref("InferenceService", "svc", "isvc-uid", "serving.example.com/v1")])
        p = pod(None, generate_name="svc-abc-", owners=[ref("ReplicaSet", "svc-abc", "rs-uid")])
        assert owner_to_look_up(p).kind == "ReplicaSet"
        assert owner_to_look_up(p, [rs]) is None  # the walk ends at the ReplicaSet
        gang = assert_gang(gang_for_pod(p, [rs]))
        assert gang.name == "pg-svc-abc-rs-uid"
        assert gang.owner.kind == "ReplicaSet"

    def test_unknown_crd_owning_pods_is_the_top(self):
        """No known kind below it: the unknown kind is the top, as before."""
        p = pod(None, generate_name="wf-", owners=[ref("Workflow", "wf", "wf-uid", "argoproj.io/v1alpha1")])
        assert owner_to_look_up(p) is None
        assert assert_gang(gang_for_pod(p)).owner.kind == "Workflow"

    def test_known_kind_with_unknown_api_version_is_not_looked_up(self):
        p = pod(owners=[ref("Deployment", "web", "u", "example.com/v1")])
        assert owner_to_look_up(p) is None

    def test_chain_that_does_not_match_is_ignored(self):
        p = admitted("pod-create-by-replicaset.json")
        other = obj("ReplicaSet", "other", "other-uid", owners=[ref("Deployment", "other", "other-dep")])
        assert gang_for_pod(p, [other]).name == f"pg-web-7887448d46-{RS_UID}"
        assert owner_to_look_up(p, [other]).kind == "ReplicaSet"
        assert chain_objects(p, [other]) == []
        assert chain_objects(p, [recorded_rs(), recorded_deployment(), other]) == [recorded_rs(), recorded_deployment()]

    def test_controller_reference_is_followed(self):
        p = pod(owners=[ref("ConfigMap", "cm", "cm-uid", "v1", controller=False), ref("Job", "j", "j-uid", "batch/v1")])
        assert controller_ref(p).kind == "Job"
        assert gang_for_pod(p).name == "pg-j-j-uid"

    def test_first_reference_when_none_is_controller(self):
        p = pod(owners=[ref("Job", "a", "a-uid", "batch/v1", controller=False), ref("Job", "b", "b-uid", "batch/v1", controller=False)])
        assert controller_ref(p).name == "a"

    def test_owner_without_uid_is_denied(self):
        p = pod(owners=[{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}])
        result = gang_for_pod(p)
        assert isinstance(result, Denial)
        assert result.message == "ownerReference Job/j has no uid; podgang cannot name its gang"

    def test_subgroup_on_owned_pod(self):
        p = admitted("pod-create-by-job.json")
        p["metadata"]["labels"][SUBGROUP] = "workers"
        assert gang_for_pod(p).subgroup == "workers"

    def test_long_owner_name_is_truncated(self):
        name = "w" * 253
        p = pod(owners=[ref("StatefulSet", name, "0d893176-6fc7-4b03-9ae5-572233f06285")])
        gang = assert_gang(gang_for_pod(p))
        assert len(gang.name) <= MAX_NAME
        assert gang.name.startswith("pg-www")


# ---------------------------------------------------------------------------
# §2.3 owner-less pods


class TestOwnerLess:
    def test_named_pod(self):
        gang = assert_gang(gang_for_pod(admitted("pod-create-dry-run.json")))
        assert gang.name == "pg-dryrun-pod"
        assert gang.source == OWNER_LESS and gang.owner_less
        assert gang.owner is None and gang.top_owner is None

    def test_recorded_bare_pod(self):
        assert gang_for_pod(admitted("pod-create-bare-gpu.json")).name == "pg-bare"

    def test_invalid_pod_name_still_gives_a_valid_group(self):
        # the apiserver rejects the pod later; the webhook must not crash before
        gang = assert_gang(gang_for_pod(admitted("pod-create-that-later-fails-validation.json")))
        assert gang.name.startswith("pg-bad-name")

    def test_generate_name_with_injected_suffix(self):
        gang = assert_gang(gang_for_pod(pod(None, generate_name="web-"), name_suffix="x7k2p"))
        assert gang.name == "pg-web-x7k2p"
        assert gang.owner_less

    def test_generate_name_without_suffix_is_stable(self):
        p = pod(None, generate_name="web-")
        first = assert_gang(gang_for_pod(p))
        assert re.fullmatch(r"pg-web-[a-z0-9]{5}", first.name), first.name
        assert gang_for_pod(copy.deepcopy(p)).name == first.name

    def test_generate_name_without_suffix_differs_between_pods(self):
        a = pod(None, generate_name="web-", labels={"n": "1"})
        b = pod(None, generate_name="web-", labels={"n": "2"})
        assert gang_for_pod(a).name != gang_for_pod(b).name

    def test_name_wins_over_generate_name(self):
        assert gang_for_pod(pod("db-0", generate_name="db-"), name_suffix="zzzzz").name == "pg-db-0"

    def test_neither_name_nor_generate_name(self):
        result = gang_for_pod(pod(None))
        assert isinstance(result, Denial)
        assert result.message == "the pod has neither metadata.name nor metadata.generateName"

    def test_not_a_pod(self):
        for thing in (None, [], "pod", 3):
            result = gang_for_pod(thing)
            assert isinstance(result, Denial)
            assert result.message == "the object is not a pod: expected a JSON object"

    def test_generated_suffix(self):
        for seed in ("", "a", "web-", "x" * 1000):
            s = generated_suffix(seed)
            assert re.fullmatch(r"[a-z0-9]{5}", s)
            assert generated_suffix(seed) == s
        assert re.fullmatch(r"[a-z0-9]{8}", generated_suffix("a", 8))
        assert len({generated_suffix(str(i)) for i in range(200)}) > 190


# ---------------------------------------------------------------------------
# names


class TestNames:
    @pytest.mark.parametrize("base", ["web", "a", "web-7887448d46", "a.b", "x" * 250])
    def test_valid_short_names_are_kept(self, base):
        assert group_name(base) == f"pg-{base}"

    def test_idempotent_without_prefix(self):
        settings = Settings(group_prefix="")
        for name in ("web", "a.b-c", "z" * 253, "app-with-models"):
            assert group_name(name, settings=settings) == name
            assert group_name(group_name(name, settings=settings), settings=settings) == name

    def test_custom_prefix(self):
        assert group_name("web", settings=Settings(group_prefix="gang")) == "gang-web"

    def test_invalid_characters_are_replaced_and_hashed(self):
        name = group_name("Bad_Name")
        assert is_valid_group_name(name)
        assert re.fullmatch(r"pg-bad-name-[0-9a-f]{8}", name), name
        # different originals that clean to the same text stay apart
        assert group_name("Bad_Name") != group_name("bad-name") != group_name("BAD.NAME")

    def test_long_name_is_truncated_with_a_stable_hash(self):
        base = "a" * 300
        name = group_name(base)
        assert len(name) == MAX_NAME
        assert is_valid_group_name(name)
        assert name == group_name(base)
        assert re.fullmatch(r"pg-a+-[0-9a-f]{8}", name), name

    def test_254_characters_is_too_long(self):
        assert len(group_name("x" * 250)) == 253
        name = group_name("x" * 251)  # pg- + 251 = 254
        assert len(name) <= MAX_NAME and is_valid_group_name(name)
        assert name != group_name("x" * 252)

    def test_suffix_is_preserved(self):
        name = group_name("l" * 300 + "-uid", "-group-12")
        assert len(name) <= MAX_NAME and is_valid_group_name(name)
        assert name.endswith("-group-12")

    def test_distinct_long_names_stay_distinct(self):
        a = group_name("a" * 300 + "1")
        b = group_name("a" * 300 + "2")
        assert a != b
        assert group_name("q" * 300, "-group-1") != group_name("q" * 300, "-group-2")

    def test_owned_and_owner_less_names(self):
        top = OwnerRef("apps/v1", "Deployment", "web", "uid-1")
        assert owned_group_name(top) == "pg-web-uid-1"
        assert owned_group_name(top, "-group-2") == "pg-web-uid-1-group-2"
        assert owner_less_group_name("bare") == "pg-bare"

    @pytest.mark.parametrize("base", ["a.-.b", "x.-.y-uid", "a-.-.b", "a.-.-.b"])
    def test_dots_and_dashes_mixed_give_a_valid_name(self, base):
        # '-' next to '.' is invalid in a DNS-1123 subdomain, and so is '..'
        name = group_name(base)
        assert is_valid_group_name(name), name

    @pytest.mark.parametrize("suffix", ["-x.-y", "-x..y", "-a.-.b"])
    def test_odd_suffix_on_a_long_name_gives_a_valid_name(self, suffix):
        name = group_name("a" * 300, suffix)
        assert is_valid_group_name(name), name

    @pytest.mark.parametrize("length", [240, 244, 250, 300])
    def test_very_long_suffix_gives_a_valid_name(self, length):
        name = group_name("a", "-" + "b" * length)
        assert len(name) <= MAX_NAME, len(name)
        assert is_valid_group_name(name), name

    def test_lws_index_that_is_very_long_gives_a_valid_name(self):
        p = pod(owners=[ref("LeaderWorkerSet", "llm", "u", "leaderworkerset.x-k8s.io/v1")], labels={LWS_INDEX: "9" * 300})
        gang = assert_gang(gang_for_pod(p))
        assert len(gang.name) <= MAX_NAME

    @pytest.mark.parametrize(
        "name,ok",
        [
            ("a", True), ("a.b", True), ("a-b.c-d", True), ("0", True), ("a" * 253, True),
            ("", False), ("a" * 254, False), ("A", False), ("a_b", False), ("-a", False), ("a-", False),
            ("a..b", False), ("a.-b", False), ("a-.b", False), (".a", False), ("a.", False), ("a\n", False),
        ],
    )  # fmt: skip
    def test_is_valid_group_name(self, name, ok):
        assert is_valid_group_name(name) is ok

    def test_is_valid_group_name_non_string(self):
        for thing in (None, 3, ["a"], {"a": 1}):
            assert is_valid_group_name(thing) is False


# ---------------------------------------------------------------------------
# scope


class TestScope:
    def test_kai_pod_in_scope(self):
        assert scope_problem(pod()) is None
        assert in_scope(pod())

    def test_recorded_labelled_pod_in_scope(self):
        assert in_scope(admitted("pod-create-labelled-gpu-memory.json"))

    def test_other_scheduler(self):
        p = admitted("pod-create-bare-gpu.json")
        assert scope_problem(p) == 'schedulerName "default-scheduler" is not one of kai-scheduler'
        assert not in_scope(p)

    def test_no_scheduler_name_means_default_scheduler(self):
        p = pod(spec={"containers": []})
        assert scope_problem(p) == 'schedulerName "default-scheduler" is not one of kai-scheduler'

    def test_configured_scheduler_names(self):
        settings = Settings(backends=(("kai-scheduler", KAI), ("volcano", KAI)))
        p = pod(spec={"schedulerName": "volcano"})
        assert in_scope(p, settings=settings)
        assert not in_scope(p)
        assert scope_problem(pod(spec={"schedulerName": "x"}), settings=settings) == (
            'schedulerName "x" is not one of kai-scheduler, volcano'
        )

    def test_excluded_namespace(self):
        p = pod()
        p["metadata"]["namespace"] = "kube-system"
        assert scope_problem(p) == 'namespace "kube-system" is excluded'

    def test_namespace_from_request(self):
        p = pod()
        del p["metadata"]["namespace"]
        assert scope_problem(p, "kube-system") == 'namespace "kube-system" is excluded'
        assert scope_problem(p, "team-a") is None

    def test_podgang_own_namespace(self):
        settings = Settings(excluded_namespaces=("kube-system", "podgang-system"))
        assert not in_scope(pod(), "podgang-system", settings)
        assert in_scope(pod(), "default", settings)

    def test_skip_label(self):
        p = pod(labels={"podgang.io/skip": "true"})
        assert is_skipped(p)
        assert scope_problem(p) == "labelled podgang.io/skip=true"

    @pytest.mark.parametrize("value", ["false", "", "yes", "1"])
    def test_skip_label_other_values_not_skipped(self, value):
        p = pod(labels={"podgang.io/skip": value})
        assert not is_skipped(p)
        assert in_scope(p)

    def test_skip_on_workload(self):
        dep = obj("Deployment", "web", labels={"podgang.io/skip": "true"})
        assert is_skipped(dep)
        assert not is_skipped(obj("Deployment", "web"))


# ---------------------------------------------------------------------------
# UPDATE: group changes


class TestGroupChange:
    def test_add_allowed(self):
        assert group_change_problem(pod(), pod(labels={LABEL: "g"}, annotations={ANNOTATION: "g"})) is None

    def test_copy_label_to_annotation_allowed(self):
        assert group_change_problem(pod(labels={LABEL: "g"}), pod(labels={LABEL: "g"}, annotations={ANNOTATION: "g"})) is None

    def test_unchanged_allowed(self):
        old = pod(labels={LABEL: "g"}, annotations={ANNOTATION: "g"})
        new = pod(labels={LABEL: "g", "extra": "1"}, annotations={ANNOTATION: "g"})
        assert group_change_problem(old, new) is None

    def test_recorded_label_update_allowed(self):
        req = review("pod-update-label.json")["request"]
        assert group_change_problem(req["oldObject"], req["object"]) is None

    def test_annotation_change_denied(self):
        old = pod(annotations={ANNOTATION: "a"})
        new = pod(annotations={ANNOTATION: "b"})
        assert group_change_problem(old, new) == (
            "a pod's PodGroup cannot change once it is set (annotation pod-group-name \"a\" → \"b\"): "
            "delete the pod and create it again in the other group"
        )

    def test_label_change_denied(self):
        old = pod(labels={LABEL: "a"}, annotations={ANNOTATION: "a"})
        new = pod(labels={LABEL: "b"}, annotations={ANNOTATION: "a"})
        problem = group_change_problem(old, new)
        assert problem is not None
        assert 'label kai.scheduler/podgroup "a" → "b"' in problem

    def test_annotation_removed_denied(self):
        old = pod(labels={LABEL: "a"}, annotations={ANNOTATION: "a"})
        new = pod(labels={LABEL: "a"})
        assert 'annotation pod-group-name "a" → removed' in group_change_problem(old, new)

    def test_label_removed_denied(self):
        old = pod(labels={LABEL: "a"})
        new = pod()
        assert group_change_problem(old, new) == (
            "a pod's PodGroup cannot change once it is set (label kai.scheduler/podgroup \"a\" → removed): "
            "delete the pod and create it again in the other group"
        )

    def test_both_changed_lists_both(self):
        old = pod(labels={LABEL: "a"}, annotations={ANNOTATION: "a"})
        new = pod(labels={LABEL: "b"}, annotations={ANNOTATION: "b"})
        problem = group_change_problem(old, new)
        assert 'annotation pod-group-name "a" → "b"; label kai.scheduler/podgroup "a" → "b"' in problem

    @pytest.mark.parametrize(
        "old,new",
        [
            # the pod is in group a by its label; a new annotation moves it to b (KAI reads the annotation)
            (pod(labels={LABEL: "a"}), pod(labels={LABEL: "a"}, annotations={ANNOTATION: "b"})),
            # in group a by its annotation; a new label names b
            (pod(annotations={ANNOTATION: "a"}), pod(labels={LABEL: "b"}, annotations={ANNOTATION: "a"})),
        ],
    )
    def test_adding_the_other_key_with_another_value_denied(self, old, new):
        assert group_change_problem(old, new) is not None

    def test_group_of(self):
        assert group_of(pod()) is None
        assert group_of(pod(labels={LABEL: "l"})) == "l"
        assert group_of(pod(labels={LABEL: "l"}, annotations={ANNOTATION: "a"})) == "a"


# ---------------------------------------------------------------------------
# pod templates of workloads


def template(labels=None) -> dict:
    t: dict = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    if labels:
        t["metadata"]["labels"] = labels
    return t


class TestTemplates:
    @pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet"])
    def test_spec_template_kinds(self, kind):
        t = template({LABEL: "g"})
        w = obj(kind, "w", spec={"template": t})
        assert pod_templates(w) == [("spec.template", t)]
        assert template_group(w) == "g"

    def test_recorded_deployment(self):
        dep = admitted("deployment-create.json")
        [(path, t)] = pod_templates(dep)
        assert path == "spec.template"
        assert t["metadata"]["labels"] == {"app": "web"}
        assert template_group(dep) is None

    def test_pod(self):
        p = pod(labels={LABEL: "g"})
        assert pod_templates(p) == [("", p)]
        assert template_group(p) == "g"

    def test_cronjob(self):
        t = template({LABEL: "nightly-gang"})
        cj = obj("CronJob", "nightly", api_version="batch/v1", spec={"jobTemplate": {"spec": {"template": t}}})
        assert pod_templates(cj) == [("spec.jobTemplate.spec.template", t)]
        assert template_group(cj) == "nightly-gang"

    def test_lws_leader_and_worker(self):
        leader, worker = template({LABEL: "g"}), template({LABEL: "g"})
        lws = obj("LeaderWorkerSet", "llm", spec={"leaderWorkerTemplate": {"size": 4, "leaderTemplate": leader, "workerTemplate": worker}})
        assert pod_templates(lws) == [
            ("spec.leaderWorkerTemplate.leaderTemplate", leader),
            ("spec.leaderWorkerTemplate.workerTemplate", worker),
        ]
        assert template_group(lws) == "g"

    def test_lws_worker_only(self):
        worker = template()
        lws = obj("LeaderWorkerSet", "llm", spec={"leaderWorkerTemplate": {"size": 2, "workerTemplate": worker}})
        assert pod_templates(lws) == [("spec.leaderWorkerTemplate.workerTemplate", worker)]
        assert template_group(lws) is None

    def test_jobset(self):
        a, b = template({LABEL: "js"}), template()
        js = obj(
            "JobSet",
            "trainer",
            spec={
                "replicatedJobs": [
                    {"name": "driver", "replicas": 1, "template": {"spec": {"template": a}}},
                    {"name": "workers", "replicas": 2, "template": {"spec": {"template": b}}},
                ]
            },
        )
        assert pod_templates(js) == [
            ("spec.replicatedJobs[0].template.spec.template", a),
            ("spec.replicatedJobs[1].template.spec.template", b),
        ]
        assert template_group(js) == "js"

    def test_unknown_kind_without_template(self):
        assert pod_templates(obj("ConfigMap", "cm", spec={})) == []
        assert template_group(obj("ConfigMap", "cm")) is None

    def test_templates_that_disagree(self):
        lws = obj(
            "LeaderWorkerSet",
            "llm",
            spec={"leaderWorkerTemplate": {"leaderTemplate": template({LABEL: "a"}), "workerTemplate": template({LABEL: "b"})}},
        )
        result = template_group(lws)
        assert isinstance(result, Denial)
        assert result.message == (
            "leaderworkerset/llm names different PodGroups in its pod templates "
            '(spec.leaderWorkerTemplate.leaderTemplate: "a", spec.leaderWorkerTemplate.workerTemplate: "b")'
        )

    def test_template_with_conflicting_keys(self):
        t = template({LABEL: "a"})
        t["metadata"]["annotations"] = {ANNOTATION: "b"}
        result = template_group(obj("Deployment", "web", spec={"template": t}))
        assert isinstance(result, Denial)
        assert result.message.startswith("deployment/web spec.template: the pod names two different PodGroups")

    def test_template_with_invalid_name(self):
        result = template_group(obj("Deployment", "web", spec={"template": template({LABEL: "Not_Valid"})}))
        assert isinstance(result, Denial)
        assert result.message.startswith('deployment/web spec.template: kai.scheduler/podgroup="Not_Valid" is not a valid')


# ---------------------------------------------------------------------------
# durations and the grace period


class TestDurations:
    @pytest.mark.parametrize(
        "text,seconds",
        [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("1h", 3600.0), ("500ms", 0.5), ("1m30s", 90.0),
         ("1.5h", 5400.0), ("30", 30.0), ("0", 0.0), (45, 45.0), (2.5, 2.5), ("  90s ", 90.0)],
    )  # fmt: skip
    def test_parse_duration(self, text, seconds):
        assert parse_duration(text) == seconds

    @pytest.mark.parametrize("text", ["", "soon", "5 minutes", "-5s", "5d", "m", "1h-30m", -1, float("inf"), float("nan"), None, True])
    def test_parse_duration_rejects(self, text):
        with pytest.raises(ValueError, match="invalid duration"):
            parse_duration(text)

    def annotated(self, kind: str, value: str | None) -> dict:
        return obj(kind, "x", annotations={} if value is None else {"podgang.io/staleness-grace-period": value})

    @pytest.mark.parametrize("value,seconds", [("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0)])
    def test_grace_period_from_podgroup(self, value, seconds):
        got, why = grace_period_for([self.annotated("PodGroup", value)], 60.0)
        assert got == seconds
        assert why == f"podgang.io/staleness-grace-period={value} on podgroup/x"

    def test_minus_one_never_evicts(self):
        got, why = grace_period_for([self.annotated("Deployment", "-1")], 60.0)
        assert got is None
        assert why == "podgang.io/staleness-grace-period=-1 on deployment/x: never evicts"

    def test_podgroup_before_workload(self):
        got, _ = grace_period_for([self.annotated("PodGroup", "90s"), self.annotated("Deployment", "5m")], 60.0)
        assert got == 90.0

    def test_workload_when_podgroup_has_none(self):
        got, why = grace_period_for([self.annotated("PodGroup", None), self.annotated("Deployment", "5m")], 60.0)
        assert got == 300.0
        assert "deployment/x" in why

    def test_default(self):
        assert grace_period_for([], 60.0) == (60.0, "default")
        assert grace_period_for([self.annotated("PodGroup", None)], None) == (None, "default")

    def test_garbage_falls_back_to_default_with_a_note(self):
        got, why = grace_period_for([self.annotated("PodGroup", "soon")], 60.0)
        assert got == 60.0
        assert why == (
            'default (ignored podgroup/x: invalid duration "soon": use e.g. 90s, 5m, 1h30m or a number of seconds)'
        )

    def test_garbage_then_valid(self):
        got, why = grace_period_for([self.annotated("PodGroup", "soon"), self.annotated("Deployment", "2m")], 60.0)
        assert got == 120.0


# ---------------------------------------------------------------------------
# pod state


class TestActive:
    def test_running(self):
        assert is_active({"status": {"phase": "Running"}})

    def test_bound_pending(self):
        assert is_active({"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}})

    def test_unbound_pending(self):
        assert not is_active({"spec": {}, "status": {"phase": "Pending"}})
        assert not is_active({})

    @pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
    def test_finished(self, phase):
        assert not is_active({"spec": {"nodeName": "n1"}, "status": {"phase": phase}})

    def test_terminating(self):
        p = {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
        assert not is_active(p)
        assert is_terminating(p)
        assert pod_phase({}) == "Pending"


def test_default_settings_are_the_spec_defaults():
    assert DEFAULT.scheduler_names == ("kai-scheduler",)
    assert "kube-system" in DEFAULT.excluded_namespaces
    assert DEFAULT.min_member_annotation == "podgang.io/min-member"
    assert DEFAULT.grace_period_annotation == "podgang.io/staleness-grace-period"
    assert DEFAULT.skip_label == "podgang.io/skip"
    assert DEFAULT.managed_labels == {"podgang.io/managed-by": "podgang"}
    assert (DEFAULT.gpu_memory_annotation, DEFAULT.gpu_fraction_annotation, DEFAULT.gpu_resource) == (
        "gpu-memory",
        "gpu-fraction",
        "nvidia.com/gpu",
    )
    assert DEFAULT.staleness_grace_period == 60.0
    assert DEFAULT.backends == (("kai-scheduler", KAI),)
    assert KAI.annotation == ANNOTATION
    assert KAI.label == LABEL
    assert KAI.subgroup_label == SUBGROUP


def test_membership_goes_into_the_annotation_only_when_the_name_is_too_long_for_a_label():
    both = (("annotations", "pod-group-name"), ("labels", "kai.scheduler/podgroup"))
    assert KAI.membership_keys("x" * 63) == both
    assert KAI.membership_keys("x" * 64) == both[:1]
    # a workload named 24 characters gets a name no label can hold
    top = OwnerRef("apps/v1", "Deployment", "a" * 24, "2d14ca47-2cb2-410d-8124-0dd58f4b12e1")
    assert KAI.membership_keys(rules.owned_group_name(top)) == both[:1]
