"""KAI segments and topology (issue 23 item 7): a PyTorchJob's workers split by
``kai.scheduler/segment-size``, an LWS replica by ``subGroupPolicy``, and the topology
annotations, as the subgroups and ``topologyConstraint`` KAI's own pod-grouper (v0.17)
writes — one pure decision the webhook, the backfill, the grouper and ``podgang plan`` share.

The expected trees and pod labels are what KAI's own pod-grouper wrote for the same
manifests on ``../shared/kube-bin`` (see ``tests/real/test_real_segments.py``)."""

from __future__ import annotations

import copy
import io

import jsonpatch
import jsonschema
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from podgang import plan_cli, rules
from podgang.backends import GangSpec
from podgang.backends.base import GangSource
from podgang.backends.kai import KAI
from podgang.gang import Cache
from podgang.gang import desired_group, plan_writes, pod_gang
from podgang.manifests import Manifest, Source
from podgang.metrics import WebhookMetrics
from podgang.plan import build_plan
from podgang.settings import DEFAULT
from podgang.webhook.admission import Admission
from podgang.webhook.owners import OwnerCache
from podgang.webhook.podgroups import PodGroups
from tests.grouper_support import NS, owner_ref, pod, uid
from tests.unit.test_grouper_units import feed
from tests.emulated.test_replica_tree import kai_schema
from tests.unit.test_webhook_admission import parsed
from tests.webhook_support import TEST_SETTINGS, review

SEGMENT_SIZE = "kai.scheduler/segment-size"
TOPOLOGY = "kai.scheduler/topology"
REQUIRED = "kai.scheduler/segment-topology-required-placement"
PREFERRED = "kai.scheduler/segment-topology-preferred-placement"
REPLICA_TYPE, REPLICA_INDEX = "training.kubeflow.org/replica-type", "training.kubeflow.org/replica-index"
GROUP_INDEX, WORKER_INDEX = "leaderworkerset.sigs.k8s.io/group-index", "leaderworkerset.sigs.k8s.io/worker-index"


def kai_template(annotations: dict | None = None) -> dict:
    return {"metadata": {"labels": {"app": "train"}, "annotations": dict(annotations or {})},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "pytorch", "image": "pytorch"}]}}


def pytorchjob(workers: int, *, master: int = 1, worker_annotations: dict | None = None,
               annotations: dict | None = None, elastic_min: int | None = None) -> dict:
    specs = {"Worker": {"replicas": workers, "template": kai_template(worker_annotations)}}
    if master:
        specs["Master"] = {"replicas": master, "template": kai_template()}
    spec: dict = {"pytorchReplicaSpecs": specs}
    if elastic_min is not None:
        spec["elasticPolicy"] = {"minReplicas": elastic_min}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "train", "namespace": NS, "uid": uid(), "annotations": dict(annotations or {})},
            "spec": spec}


def lws(size: int, policy: dict | None = None, *, annotations: dict | None = None,
        worker_annotations: dict | None = None, replicas: int = 1) -> dict:
    lwt: dict = {"size": size, "workerTemplate": kai_template(worker_annotations)}
    if policy is not None:
        lwt["subGroupPolicy"] = policy
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": NS, "uid": uid(), "annotations": dict(annotations or {})},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt}}


def entries(subgroups) -> dict:
    """name -> (parent, minMember or minSubGroup, kind of minimum), as KAI lists them."""
    return {s.name: (s.parent, s.min_member, "minSubGroup" if s.of_subgroups else "minMember") for s in subgroups}


def worker_pod(job: dict, index: int, *, rtype: str = "worker", annotations: dict | None = None) -> dict:
    """A pod training-operator makes: its template's annotations, the replica type and index."""
    return pod(f"train-{rtype}-{index}", owner=job, scheduler="kai-scheduler", node=None, phase="Pending",
               labels={REPLICA_TYPE: rtype, REPLICA_INDEX: str(index)}, annotations=annotations)


# ---------------------------------------------------------------------------- PyTorchJob


def test_eight_workers_in_segments_of_four_are_a_parent_and_two_leaves():
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"})
    assert entries(rules.role_subgroups(job)) == {
        "master": (None, 1, "minMember"),
        "worker": (None, 2, "minSubGroup"),
        "worker-0": ("worker", 4, "minMember"),
        "worker-1": ("worker", 4, "minMember")}


def test_workers_alone_in_segments_are_still_a_tree():
    """One role, but segmented: KAI writes the parent and its segments all the same."""
    job = pytorchjob(6, master=0, worker_annotations={SEGMENT_SIZE: "3"})
    assert entries(rules.role_subgroups(job)) == {
        "worker": (None, 2, "minSubGroup"), "worker-0": ("worker", 3, "minMember"),
        "worker-1": ("worker", 3, "minMember")}
    # unsegmented: the one role, as KAI's PyTorchJob grouper lists it
    assert entries(rules.role_subgroups(pytorchjob(6, master=0))) == {"worker": (None, 6, "minMember")}


def test_the_last_segment_takes_the_rest_and_topology_is_carried():
    """7 workers in threes, the job naming its topology and the template the segments'
    level: what KAI's own pod-grouper wrote for this manifest (3 + 3 + 1, each leaf with
    the constraint); the group itself gets the job's topology."""
    job = pytorchjob(7, worker_annotations={SEGMENT_SIZE: "3", REQUIRED: "rack", PREFERRED: "node"},
                     annotations={TOPOLOGY: "dc"})
    found = rules.role_subgroups(job)
    assert entries(found) == {
        "master": (None, 1, "minMember"), "worker": (None, 3, "minSubGroup"),
        "worker-0": ("worker", 3, "minMember"), "worker-1": ("worker", 3, "minMember"),
        "worker-2": ("worker", 1, "minMember")}
    written = KAI.build_podgroup(GangSpec("pg", NS, 8, subgroups=found))
    constraint = {"topology": "dc", "requiredTopologyLevel": "rack", "preferredTopologyLevel": "node"}
    assert {e["name"]: e.get("topologyConstraint") for e in written["spec"]["subGroups"]} == {
        "master": None, "worker": None, "worker-0": constraint, "worker-1": constraint, "worker-2": constraint}
    assert written["spec"]["minMember"] == 8 and "minSubGroup" not in written["spec"]
    jsonschema.validate(written, kai_schema())
    options = KAI.gang_options(rules_source(job))
    assert options["extra_spec"]["topologyConstraint"] == {"topology": "dc"}


def rules_source(job: dict):
    return GangSource((), (), (job,))


def test_a_segment_level_without_a_topology_constrains_nothing():
    """KAI writes a segment's constraint only with both a topology and a level."""
    job = pytorchjob(4, worker_annotations={SEGMENT_SIZE: "2", REQUIRED: "rack"})
    assert all(not s.topology for s in rules.role_subgroups(job))


def test_segments_beyond_an_elastic_minimum_need_no_pods():
    """elasticPolicy.minReplicas 5 of 1 master + 8 workers: the workers need 4, so only the
    first segment of 4 is required (KAI: a segment starting beyond the minimum is elastic)."""
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"}, elastic_min=5)
    found = entries(rules.role_subgroups(job))
    assert found["worker-0"] == ("worker", 4, "minMember") and found["worker-1"] == ("worker", 0, "minMember")
    assert found["worker"] == (None, 2, "minSubGroup")


@pytest.mark.parametrize("value", ["0", "-2", "four", ""])
def test_a_segment_size_kai_refuses_gives_no_segments_and_says_why(value):
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: value})
    assert entries(rules.role_subgroups(job)) == {"master": (None, 1, "minMember"), "worker": (None, 8, "minMember")}
    if value:
        [problem] = rules.role_problems(job)
        assert SEGMENT_SIZE in problem and "no segments" in problem


@pytest.mark.parametrize("index,leaf", [(0, "worker-0"), (3, "worker-0"), (4, "worker-1"), (7, "worker-1")])
def test_a_worker_is_in_its_replica_index_over_the_segment_size(index, leaf):
    """KAI's rule (pytorch_grouper.go getPodSegmentIndex): replica index // segment size."""
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"})
    gang = rules.gang_for_pod(worker_pod(job, index, annotations={SEGMENT_SIZE: "4"}), [job])
    assert isinstance(gang, rules.Gang) and (gang.subgroup, gang.leaf) == (leaf, True)
    master = rules.gang_for_pod(worker_pod(job, 0, rtype="master"), [job])
    assert master.subgroup == "master" and not master.leaf


def test_a_pod_already_in_podgangs_group_is_still_told_its_segment():
    """A pod admitted into its job's group (it names it) without its segment: the grouper's
    look gives it the segment, never the parent role (a parent holds no pods in KAI)."""
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"})
    group = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(job)))
    worker = worker_pod(job, 6)
    worker["metadata"]["annotations"] = {KAI.annotation: group}
    gang = rules.gang_for_pod(worker, [job])
    assert (gang.name, gang.subgroup, gang.leaf) == (group, "worker-1", True)
    workload = lws(5, {"subGroupSize": 2}, replicas=2)
    member = pod("serve-1-3", owner=workload, scheduler="kai-scheduler", node=None,
                 labels={GROUP_INDEX: "1", WORKER_INDEX: "3"})
    member["metadata"]["annotations"] = {KAI.annotation: rules.owned_group_name(
        rules.OwnerRef.from_dict(owner_ref(workload)), "-group-1")}
    assert rules.gang_for_pod(member, [workload]).subgroup == "segment-1"


def test_a_worker_is_told_its_segment_from_its_template_when_it_carries_none():
    """The webhook's owner cache keeps no template annotations, the grouper's does: the
    grouper's look finds the segment from the Worker template, as KAI falls back to it."""
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"})
    gang = rules.gang_for_pod(worker_pod(job, 5), [job])
    assert gang.subgroup == "worker-1"


def test_the_grouper_writes_kais_tree_and_backfills_each_pod_into_its_segment():
    job = pytorchjob(7, worker_annotations={SEGMENT_SIZE: "3", REQUIRED: "rack"}, annotations={TOPOLOGY: "dc"})
    pods = [worker_pod(job, i, annotations={SEGMENT_SIZE: "3", REQUIRED: "rack"}) for i in range(7)]
    cache = feed(Cache(), job, worker_pod(job, 0, rtype="master"), *pods)
    group = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(job)))
    desired = desired_group(cache, f"{NS}/{group}")
    [create] = plan_writes(desired, None, cache.settings)
    spec = create.body["spec"]
    assert spec["minMember"] == 8 and spec["topologyConstraint"] == {"topology": "dc"}
    assert sorted((e["name"], e.get("parent"), e.get("minMember", e.get("minSubGroup"))) for e in spec["subGroups"]) == [
        ("master", None, 1), ("worker", None, 3), ("worker-0", "worker", 3), ("worker-1", "worker", 3),
        ("worker-2", "worker", 1)]
    jsonschema.validate(create.body, kai_schema())
    labelled = {}
    for p in pods:
        gang = pod_gang(cache, p)
        patch = KAI.backfill(p, gang.name, gang.subgroup, over_own=gang.leaf)  # the one backfill patch
        labelled[p["metadata"]["labels"][REPLICA_INDEX]] = patch["metadata"]["labels"][KAI.subgroup_label]
    # what KAI's own pod-grouper labelled the same pods with
    assert labelled == {"0": "worker-0", "1": "worker-0", "2": "worker-0", "3": "worker-1", "4": "worker-1",
                        "5": "worker-1", "6": "worker-2"}


async def test_the_webhook_admits_a_worker_into_its_segment():
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4"})
    metrics = WebhookMetrics()
    owners = OwnerCache(None, metrics)
    owners.put(NS, job)
    admission = Admission(TEST_SETTINGS, owners, PodGroups(None, TEST_SETTINGS, metrics))
    worker = worker_pod(job, 6, annotations={SEGMENT_SIZE: "4"})
    worker["metadata"].pop("uid")
    doc = review("pod-create-by-job")
    doc["request"]["object"], doc["request"]["namespace"] = copy.deepcopy(worker), NS
    verdict = await admission.mutate(parsed(doc))
    admitted = jsonpatch.apply_patch(worker, verdict.patch)
    assert admitted["metadata"]["labels"][KAI.subgroup_label] == "worker-1"
    assert verdict.group == admitted["metadata"]["annotations"]["pod-group-name"]


# ---------------------------------------------------------------------------- LeaderWorkerSet


# (size, subGroupSize, subGroupPolicyType) -> the subgroups KAI's own pod-grouper wrote and
# the subgroup it labelled each pod (by worker index) with
LWS_CASES = [
    (5, 2, None, {"segment-0": (None, 2, "minSubGroup"), "leader": ("segment-0", 1, "minMember"),
                  "workers": ("segment-0", 2, "minMember"), "segment-1": (None, 2, "minMember")},
     ["leader", "workers", "workers", "segment-1", "segment-1"]),
    (4, 2, None, {"segment-0": (None, 2, "minSubGroup"), "leader": ("segment-0", 1, "minMember"),
                  "workers": ("segment-0", 1, "minMember"), "segment-1": (None, 2, "minMember")},
     ["leader", "workers", "segment-1", "segment-1"]),
    (5, 2, "LeaderExcluded", {"leader": (None, 1, "minMember"), "segment-0": (None, 2, "minMember"),
                              "segment-1": (None, 2, "minMember")},
     ["leader", "segment-0", "segment-0", "segment-1", "segment-1"]),
    (4, 4, None, {"segment-0": (None, 2, "minSubGroup"), "leader": ("segment-0", 1, "minMember"),
                  "workers": ("segment-0", 3, "minMember")},
     ["leader", "workers", "workers", "workers"]),
    # KAI v0.17 writes workers minMember 3 here (one more than the 2 workers there are) and
    # never places the group; podgang writes the 2 that exist (docs: Segments and topology)
    (3, 2, None, {"segment-0": (None, 2, "minSubGroup"), "leader": ("segment-0", 1, "minMember"),
                  "workers": ("segment-0", 2, "minMember")},
     ["leader", "workers", "workers"]),
]


@pytest.mark.parametrize("size,segment,policy,tree,labels", LWS_CASES)
def test_an_lws_replica_in_segments_is_kais_tree(size, segment, policy, tree, labels):
    workload = lws(size, {"subGroupSize": segment, **({"subGroupPolicyType": policy} if policy else {})})
    shape = rules.lws_segments(workload)
    assert shape is not None and entries(shape.subgroups) == tree
    assert [shape.leaf_of(i) for i in range(size)] == labels
    written = KAI.build_podgroup(GangSpec("pg", NS, size, subgroups=shape.subgroups))
    jsonschema.validate(written, kai_schema())
    for i, leaf in enumerate(labels):  # each pod of replica 1, as the webhook and grouper decide it
        member = pod(f"serve-1-{i}", owner=workload, scheduler="kai-scheduler", node=None,
                     labels={GROUP_INDEX: "1", WORKER_INDEX: str(i)})
        gang = rules.gang_for_pod(member, [workload])
        assert gang.name.endswith("-group-1") and (gang.subgroup, gang.leaf) == (leaf, True)


def test_an_lws_segment_size_from_its_annotations_and_the_segments_topology():
    """subGroupPolicy first, then the annotation on the LWS, then on its worker template; the
    segments' topology from the worker template, the topology's name from the LWS."""
    on_lws = lws(4, annotations={SEGMENT_SIZE: "2", TOPOLOGY: "dc"}, worker_annotations={REQUIRED: "rack"})
    shape = rules.lws_segments(on_lws)
    assert entries(shape.subgroups)["segment-1"] == (None, 2, "minMember")
    assert {s.name: dict(s.topology) for s in shape.subgroups if s.topology} == {
        "segment-0": {"topology": "dc", "requiredTopologyLevel": "rack"},
        "segment-1": {"topology": "dc", "requiredTopologyLevel": "rack"}}
    policy_wins = lws(5, {"subGroupSize": 4}, annotations={SEGMENT_SIZE: "2"})
    assert [s.name for s in rules.lws_segments(policy_wins).subgroups] == ["segment-0", "leader", "workers"]
    on_template = lws(4, worker_annotations={SEGMENT_SIZE: "2"})
    assert rules.lws_segments(on_template).size == 2
    unsplit = rules.lws_segments(lws(4))  # no segment size: KAI's leader and workers, not split
    assert not unsplit.split and entries(unsplit.subgroups) == {"leader": (None, 1, "minMember"),
                                                                "workers": (None, 3, "minMember")}


@pytest.mark.parametrize("size,policy,why", [
    (4, {"subGroupSize": 1}, "not above 1"), (4, {"subGroupSize": 5}, "not above 1"),
    (4, {"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}, "divisible")])
def test_an_lws_segment_size_kai_refuses_gives_no_segments_and_says_why(size, policy, why):
    workload = lws(size, policy)
    assert rules.lws_segments(workload) is None
    [problem] = rules.role_problems(workload)
    assert why in problem and "no segments" in problem


def test_a_lone_lws_asking_for_complete_replicas_keeps_a_leaf_per_replica():
    """One group over all replicas (podgang.io/min-available): replicas are its leaves;
    segments are not nested in them (KAI's own grouper never makes that group)."""
    workload = lws(4, {"subGroupSize": 2}, replicas=2)
    workload["metadata"]["annotations"][DEFAULT.min_available_annotation] = "1"
    member = pod("serve-1-3", owner=workload, scheduler="kai-scheduler", node=None,
                 labels={GROUP_INDEX: "1", WORKER_INDEX: "3"})
    gang = rules.gang_for_pod(member, [workload])
    assert gang.subgroup == "serve-1" and gang.leaf


# ---------------------------------------------------------------------------- every tree KAI's CRD takes


def kai_webhook_problems(spec: dict) -> list[str]:
    """KAI's PodGroup admission rules (podgroup_webhook.go) as errors."""
    out = []
    if "minMember" in spec and "minSubGroup" in spec:
        out.append("both minimums on the root")
    listed = [e["name"] for e in spec.get("subGroups") or []]
    if len(listed) != len(set(listed)):
        out.append("duplicate names")
    parents = {e.get("parent") for e in spec.get("subGroups") or []}
    for e in spec.get("subGroups") or []:
        if e.get("parent") is not None and e["parent"] not in listed:
            out.append(f"{e['name']}: missing parent")
        leaf = e["name"] not in parents
        if leaf and ("minMember" not in e or "minSubGroup" in e):
            out.append(f"{e['name']}: a leaf needs minMember only")
        if not leaf and "minMember" in e:
            out.append(f"{e['name']}: a parent has no minMember")
    return out


@hsettings(max_examples=80, deadline=None)
@given(workers=st.integers(1, 40), segment=st.integers(1, 12), master=st.integers(0, 2),
       minimum=st.one_of(st.none(), st.integers(1, 40)))
def test_every_segmented_pytorch_tree_is_one_kai_takes_and_lists_every_worker(workers, segment, master, minimum):
    job = pytorchjob(workers, master=master, worker_annotations={SEGMENT_SIZE: str(segment)}, elastic_min=minimum)
    found = rules.role_subgroups(job)
    written = KAI.build_podgroup(GangSpec("pg", NS, max(sum(s.min_member for s in found if not s.of_subgroups), 1),
                                          subgroups=found))
    jsonschema.validate(written, kai_schema())
    assert kai_webhook_problems(written["spec"]) == []
    listed = {e["name"] for e in written["spec"]["subGroups"]}
    for i in range(workers):
        gang = rules.gang_for_pod(worker_pod(job, i, annotations={SEGMENT_SIZE: str(segment)}), [job])
        assert gang.subgroup in listed


@hsettings(max_examples=80, deadline=None)
@given(size=st.integers(2, 30), segment=st.integers(2, 30), excluded=st.booleans())
def test_every_segmented_lws_replica_is_one_kai_takes_and_lists_every_pod(size, segment, excluded):
    workload = lws(size, {"subGroupSize": segment, **({"subGroupPolicyType": "LeaderExcluded"} if excluded else {})})
    shape = rules.lws_segments(workload)
    if segment > size or (excluded and (size - 1) % segment):
        assert shape is None  # KAI refuses it too
        return
    written = KAI.build_podgroup(GangSpec("pg", NS, size, subgroups=shape.subgroups))
    jsonschema.validate(written, kai_schema())
    assert kai_webhook_problems(written["spec"]) == []
    leaves = {e["name"]: e["minMember"] for e in written["spec"]["subGroups"] if "minMember" in e}
    counted = {}
    for i in range(size):
        counted[shape.leaf_of(i)] = counted.get(shape.leaf_of(i), 0) + 1
    assert counted == leaves  # every pod in a listed leaf, every leaf exactly its pods


# ---------------------------------------------------------------------------- podgang plan


def test_plan_draws_the_segments_and_their_topology():
    job = pytorchjob(8, worker_annotations={SEGMENT_SIZE: "4", REQUIRED: "rack"}, annotations={TOPOLOGY: "dc"})
    job["metadata"].pop("uid")
    result = build_plan([Manifest(job, Source("job.yaml", 1))], DEFAULT)
    out = io.StringIO()
    plan_cli.write_text(result, out)
    text = out.getvalue()
    assert "├ worker      2 of 2 segments" in text
    assert "worker-1    minimum 4  topology topology=dc, requiredTopologyLevel=rack  [pods 4-7 of worker]" in text
    assert "topologyConstraint topology=dc  [annotations kai.scheduler/topology on pytorchjob/train]" in text
    [group] = plan_cli.plan_as_dict(result)["podGroups"]
    assert {s["name"]: s.get("topology") for s in group["subgroups"]}["worker-0"] == {
        "topology": "dc", "requiredTopologyLevel": "rack"}


# ---------------------------------------------------------------------------- a Ray group placed together


def raycluster(head_annotations: dict, group_annotations: dict) -> dict:
    return {"apiVersion": "ray.io/v1", "kind": "RayCluster",
            "metadata": {"name": "ray", "namespace": NS, "uid": uid()},
            "spec": {"headGroupSpec": {"rayStartParams": {}, "template": kai_template(head_annotations)},
                     "workerGroupSpecs": [{"groupName": "gpu", "replicas": 4, "minReplicas": 0, "maxReplicas": 4,
                                           "template": kai_template(group_annotations)}]}}


def test_each_ray_group_carries_its_templates_topology_as_kai_writes_it():
    """KAI's Ray grouper: a group's constraint from its template, only with a level; the head alike."""
    cluster = raycluster({}, {TOPOLOGY: "dc", "kai.scheduler/topology-required-placement": "rack"})
    found = {s.name: dict(s.topology) for s in rules.role_subgroups(cluster)}
    assert found == {"headgroup": {}, "gpu": {"topology": "dc", "requiredTopologyLevel": "rack"}}
    written = KAI.build_podgroup(GangSpec("pg", NS, 5, subgroups=rules.role_subgroups(cluster)))
    jsonschema.validate(written, kai_schema())
    assert {e["name"]: e.get("topologyConstraint") for e in written["spec"]["subGroups"]} == {
        "headgroup": None, "gpu": {"topology": "dc", "requiredTopologyLevel": "rack"}}
    alone = raycluster({TOPOLOGY: "dc"}, {})  # a topology without a level constrains nothing
    assert all(not s.topology for s in rules.role_subgroups(alone))


def test_a_ray_group_level_without_a_topology_is_said_and_places_anywhere():
    cluster = raycluster({"kai.scheduler/topology-preferred-placement": "rack"}, {})
    assert all(not s.topology for s in rules.role_subgroups(cluster))
    [problem] = rules.role_problems(cluster)
    assert "headGroupSpec" in problem and TOPOLOGY in problem


def test_a_multi_host_ray_group_keeps_its_topology_on_its_parent():
    """A worker group of several hosts per replica is a parent of its replicas: the group's
    placement stays on the group, where KAI's Ray grouper puts it."""
    cluster = raycluster({}, {TOPOLOGY: "dc", "kai.scheduler/topology-required-placement": "rack"})
    cluster["spec"]["workerGroupSpecs"][0]["numOfHosts"] = 2
    tree = {s.name: dict(s.topology) for s in rules.role_tree(cluster)}
    assert tree["gpu"] == {"topology": "dc", "requiredTopologyLevel": "rack"} and tree["headgroup"] == {}
