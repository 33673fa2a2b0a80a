"""What podgang writes on the KAI PodGroups it makes: the queue, priority class and other
settings KAI's own pod-grouper would compute, in its order of precedence
(``../shared/kai/KAI-FACTS.md`` section (c)), checked against what exists."""

from __future__ import annotations

import pytest
import yaml

from podgang import feasibility
from podgang.backends import KAI
from podgang.backends.base import ClusterFacts, GangSource
from podgang.backends.kai import KaiBackend, cluster_facts

PRIORITIES = frozenset({"train", "inference", "build", "high"})
QUEUES = {"default-queue": True, "team-a": True, "research": True, "research-pool-b": True, "parent": False}
FACTS = ClusterFacts(PRIORITIES, QUEUES)


def obj(kind: str | None = None, labels: dict | None = None, annotations: dict | None = None,
        priority: str | None = None, name: str = "x") -> dict:
    out: dict = {"metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {},
                              "annotations": annotations or {}}}
    if kind:
        out.update(apiVersion="apps/v1" if kind in ("Deployment", "StatefulSet", "ReplicaSet") else "batch/v1",
                   kind=kind)
    if priority:
        out["spec"] = {"priorityClassName": priority}
    return out


def options(top: dict | None, pod: dict | None = None, facts: ClusterFacts = FACTS, backend: KaiBackend = KAI,
            owners: tuple = ()) -> dict:
    return backend.gang_options(GangSource(pods=(pod,) if pod else (), owners=(*owners, *((top,) if top else ())),
                                           facts=facts))


@pytest.mark.parametrize("top, pod, queue", [
    pytest.param(obj("Deployment", {"kai.scheduler/queue": "team-a"}), obj(labels={"kai.scheduler/queue": "research"}),
                 "team-a", id="queue label on the top owner first"),
    pytest.param(obj("Deployment"), obj(labels={"kai.scheduler/queue": "research"}), "research",
                 id="then on the pod"),
    pytest.param(obj("Deployment", {"project": "research"}), obj(labels={"kai.scheduler/queue": "team-a"}), "team-a",
                 id="a queue label beats a project label"),
    pytest.param(obj("Deployment", {"project": "research"}), obj(), "research", id="project on the top owner"),
    pytest.param(obj("Deployment"), obj(labels={"project": "research"}), "research", id="project on the pod"),
    pytest.param(obj("Deployment", {"project": "research"}), obj(labels={"kai.scheduler/node-pool": "pool-b"}),
                 "research-pool-b", id="project and the pod's node pool"),
    pytest.param(obj("Deployment"), obj(), "default-queue", id="else KAI's default queue"),
])
def test_queue_precedence(top, pod, queue):
    assert options(top, pod)["queue"] == queue


def test_the_default_queue_is_configurable():
    backend = KAI.configured({"default_queue": "ml"})
    assert options(obj("Job"), obj(), facts=ClusterFacts(), backend=backend)["queue"] == "ml"
    assert KAI.configured({}) is KAI


@pytest.mark.parametrize("owners, pod, priority", [
    pytest.param((obj("ReplicaSet", {"priorityClassName": "high"}), obj("Deployment", {"priorityClassName": "build"})),
                 obj(labels={"priorityClassName": "train"}, priority="inference"), "high",
                 id="the nearest owner's label first"),
    pytest.param((obj("ReplicaSet"), obj("Deployment", {"priorityClassName": "build"})),
                 obj(labels={"priorityClassName": "train"}), "build", id="then the next owner's"),
    pytest.param((obj("Deployment"),), obj(labels={"priorityClassName": "high"}, priority="train"), "high",
                 id="then the pod's label"),
    pytest.param((obj("Deployment"),), obj(priority="high"), "high", id="then the pod's spec.priorityClassName"),
    pytest.param((obj("Deployment", {"priorityClassName": "nonexistent"}),), obj(priority="build"), "build",
                 id="a class that does not exist is passed over"),
    pytest.param((obj("Deployment"),), obj(), "inference", id="a Deployment's default: inference"),
    pytest.param((obj("Job"),), obj(), "train", id="a Job's default: train"),
    pytest.param((), obj(), "train", id="an owner-less pod's default: train"),
])
def test_priority_precedence(owners, pod, priority):
    got = KAI.gang_options(GangSource(pods=(pod,), owners=owners, facts=FACTS))
    assert got["priority_class"] == priority


def test_without_knowing_the_classes_a_named_one_is_taken_as_written():
    got = options(obj("Deployment", {"priorityClassName": "nonexistent"}), obj(), facts=ClusterFacts())
    assert got["priority_class"] == "nonexistent"


def test_per_kind_defaults_are_configurable():
    backend = KAI.configured({"default_priority_classes": [("Job", "build"), ("Deployment", "high")]})
    assert options(obj("Job"), obj(), backend=backend)["priority_class"] == "build"
    assert options(obj("Deployment"), obj(), backend=backend)["priority_class"] == "high"
    assert options(obj("StatefulSet"), obj(), backend=backend)["priority_class"] == "train"


def test_preemptibility_and_preemption_delay():
    got = options(obj("Deployment", {"kai.scheduler/preemptibility": "non-preemptible"},
                      {"kai.scheduler/preemption-delay": "10m"}), obj())
    assert got["extra_spec"]["preemptibility"] == "non-preemptible"
    assert got["extra_spec"]["preemptionDelay"] == "10m"
    bad = options(obj("Deployment", {"kai.scheduler/preemptibility": "sometimes"},
                      {"kai.scheduler/preemption-delay": "soon"}), obj())
    assert "preemptibility" not in bad["extra_spec"] and "preemptionDelay" not in bad["extra_spec"]
    assert any('"sometimes"' in p and "preemptible or non-preemptible" in p for p in bad["problems"])
    assert any('"soon"' in p for p in bad["problems"])


def test_topology_labels_annotations_and_top_owner_metadata():
    top = obj("Deployment", {"team": "a"}, {"kai.scheduler/topology": "dc", "kai.scheduler/topology-required-placement":
                                            "rack", "note": "n"}, name="web")
    got = options(top, obj())
    assert got["extra_spec"]["topologyConstraint"] == {"topology": "dc", "requiredTopologyLevel": "rack"}
    assert got["labels"] == {"team": "a"}
    assert got["annotations"]["note"] == "n"
    assert yaml.safe_load(got["annotations"]["kai.scheduler/top-owner-metadata"]) == {
        "name": "web", "uid": "uid-web", "group": "apps", "version": "v1", "kind": "Deployment"}


def test_kais_own_stale_gang_eviction_is_off_on_podgangs_groups():
    assert options(obj("Deployment"), obj())["extra_spec"]["stalenessGracePeriod"] == "-1s"


@pytest.mark.parametrize("labels, problem", [
    ({"kai.scheduler/queue": "missing"}, 'KAI queue "missing" (label kai.scheduler/queue on the top owner) does not exist'),
    ({"kai.scheduler/queue": "parent"}, 'KAI queue "parent" (label kai.scheduler/queue on the top owner) is not a leaf'),
])
def test_a_queue_kai_would_skip_is_a_never_placed_verdict(labels, problem):
    got = options(obj("Deployment", labels), obj())
    said = [v.message for v in feasibility.never_placed(KAI, got, None, FACTS)]
    assert any(problem in p for p in said), said
    assert not got.get("problems")  # one home: podgang.feasibility, not the settings' problems


def test_every_value_says_where_it_comes_from():
    got = options(obj("Deployment", {"kai.scheduler/queue": "team-a"}), obj(priority="high"))
    assert dict(got["origins"]) == {"queue": "label kai.scheduler/queue on the top owner",
                                    "priorityClassName": "the pod's spec.priorityClassName"}


def test_cluster_facts_know_leaf_queues():
    facts = cluster_facts([{"metadata": {"name": "train"}}],
                          [{"metadata": {"name": "root"}}, {"metadata": {"name": "a"}, "spec": {"parentQueue": "root"}}])
    assert facts == ClusterFacts(frozenset({"train"}), {"root": False, "a": True})
    assert cluster_facts(None, None) == ClusterFacts()


def test_every_pod_in_a_kai_gang_tells_kais_pod_grouper_to_leave_it_alone():
    pod = {"metadata": {"name": "p", "annotations": {"note": "n"}}}
    assert KAI.backfill_patch(pod, "g")["metadata"]["annotations"]["kai.scheduler/skip-podgrouper"] == "true"
    assert KAI.needs_backfill({"metadata": {"annotations": {"pod-group-name": "g"}, "labels": {
        "kai.scheduler/podgroup": "g"}}})
    assert not KAI.needs_backfill({"metadata": {"annotations": {"pod-group-name": "g", "kai.scheduler/skip-podgrouper":
                                                                "true"}, "labels": {"kai.scheduler/podgroup": "g"}}})


@pytest.mark.parametrize("spec, evictor", [
    ({"minMember": 3}, "its default grace period (60s)"),
    ({"minMember": 3, "stalenessGracePeriod": "5m"}, "stalenessGracePeriod 5m"),
    ({"minMember": 3, "stalenessGracePeriod": "-1s"}, None),
])
def test_one_evictor_per_gang(spec, evictor):
    """KAI v0.17 evicts a stale gang itself unless its grace period is negative: podgang
    then leaves the gang to KAI (and says so) instead of evicting it too."""
    said = KAI.evicts_itself({"metadata": {"name": "g"}, "spec": spec})
    assert said is None if evictor is None else evictor in said
    assert KAI.slim_podgroup_spec(spec).get("stalenessGracePeriod") == spec.get("stalenessGracePeriod")


# -- what issue 43 found silent: the node pool, skip-podgrouper, owner-less pods, KAI's per-kind defaults


def test_the_pods_node_pool_is_on_its_group_unless_the_top_owner_names_one():
    """KAI's scheduler shards by the group's node-pool label: KAI's grouper copies the pod's."""
    pod = obj(labels={"kai.scheduler/node-pool": "pool-a"})
    assert options(obj("Job"), pod)["labels"]["kai.scheduler/node-pool"] == "pool-a"
    top = obj("Job", {"kai.scheduler/node-pool": "pool-b"})
    assert options(top, pod)["labels"]["kai.scheduler/node-pool"] == "pool-b"
    assert "kai.scheduler/node-pool" not in options(obj("Job"), obj())["labels"]


def test_skip_podgrouper_puts_a_pod_out_of_scope_only_where_the_user_wrote_it():
    from podgang import rules
    skip = {"kai.scheduler/skip-podgrouper": "true"}
    bare = {**obj(annotations=skip), "spec": {"schedulerName": "kai-scheduler"}}
    assert "skip-podgrouper" in rules.scope_problem(bare, "ns")
    # podgang writes the same key on the pods it groups: a pod naming its group stays in scope
    grouped = {**obj(annotations={**skip, "pod-group-name": "pg-x"}), "spec": {"schedulerName": "kai-scheduler"}}
    assert rules.scope_problem(grouped, "ns") is None
    plain = {**obj(), "spec": {"schedulerName": "kai-scheduler"}}
    assert "skip-podgrouper" in rules.scope_problem(plain, "ns", owners=[obj("Job", annotations=skip)])
    # an owner that is a pod podgang grouped (a Spark driver owns its executors) is not an opt-out
    driver = {**obj(annotations={**skip, "pod-group-name": "pg-x"}), "apiVersion": "v1", "kind": "Pod"}
    assert rules.scope_problem(plain, "ns", owners=[driver]) is None
    assert rules.workload_skip_problem({**obj("Job", annotations=skip), "spec": {"template": {
        "spec": {"schedulerName": "kai-scheduler"}}}})


def test_an_owner_less_pod_is_its_own_top_owner():
    pod = obj(labels={"team": "nlp", "kai.scheduler/podgroup": "pg-x"},
              annotations={"kai.scheduler/topology": "net", "kai.scheduler/topology-required-placement": "rack",
                           "pod-group-name": "pg-x", "kai.scheduler/skip-podgrouper": "true"})
    got = options(None, pod)
    assert got["labels"] == {"team": "nlp"}  # never the keys podgang itself writes on the pod
    assert got["extra_spec"]["topologyConstraint"] == {"topology": "net", "requiredTopologyLevel": "rack"}
    assert yaml.safe_load(got["annotations"]["kai.scheduler/top-owner-metadata"])["uid"] == "uid-x"
    pod["metadata"]["uid"] = ""  # at admission: no uid yet, so no top-owner-metadata
    assert "kai.scheduler/top-owner-metadata" not in options(None, pod)["annotations"]


def test_per_kind_defaults_as_kais_configmap_gives_them():
    backend = KAI.configured({"default_priority_classes": [("Job.batch", "high"), ("Job", "build")],
                              "default_preemptibility": [("Job", "non-preemptible")]})
    got = options(obj("Job"), obj(), backend=backend)
    assert (got["priority_class"], got["extra_spec"]["preemptibility"]) == ("high", "non-preemptible")
    missing = KAI.configured({"default_priority_classes": [("Job", "nope")]})
    assert options(obj("Job"), obj(), backend=missing)["priority_class"] == "train"  # only one that exists


def test_an_invalid_owner_value_is_said_and_the_pods_valid_one_taken():
    got = options(obj("Job", {"kai.scheduler/preemptibility": "maybe"}, {"kai.scheduler/preemption-delay": "soon"}),
                  obj(labels={"kai.scheduler/preemptibility": "preemptible"},
                      annotations={"kai.scheduler/preemption-delay": "30s"}))
    assert got["extra_spec"]["preemptibility"] == "preemptible" and got["extra_spec"]["preemptionDelay"] == "30s"
    assert len(got["problems"]) == 2
