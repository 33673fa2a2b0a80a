"""Gangs across workloads (issue 10): one subgroup per workload of a shared hand-made
group, each with its own minimum; the rules, the backends' spelling (validated against
the KAI and Volcano CRDs), the webhook's patch and per-subgroup staleness."""

from __future__ import annotations


import jsonschema
import pytest
import yaml

from podgang import rules
from podgang.backends import GangSpec
from podgang.backends.base import Subgroup
from podgang.backends.coscheduling import COSCHEDULING
from podgang.backends.kai import KAI
from podgang.backends.volcano import VOLCANO
from podgang.gang import stale
from podgang.gang import Cache
from podgang.gang import desired_group, plan_writes
from podgang.settings import DEFAULT, Settings
from tests.grouper_support import LABEL, NS, deployment, pod, podgroup, replicaset
from tests.emulator import merge_patch
from tests.unit.test_grouper_units import feed, remove
from tests.paths import TESTS

CRDS = TESTS / "fixtures" / "crds"
MIN_AVAILABLE = "podgang.io/min-available"
SUBGROUP = "kai.scheduler/subgroup-name"


def schema(crd_file: str, version: str) -> dict:
    crd = yaml.safe_load((CRDS / crd_file).read_text())
    [found] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    return found["schema"]["openAPIV3Schema"]


def workload(name: str, replicas: int, *, min_available: str | None = None, subgroup: str | None = None,
             kind: str = "Deployment") -> dict:
    dep = deployment(name, replicas, group="shared", annotations={MIN_AVAILABLE: min_available} if min_available else None)
    dep["kind"] = kind
    if subgroup:
        dep["spec"]["template"]["metadata"]["labels"][SUBGROUP] = subgroup
    return dep


# ---------------------------------------------------------------------------- rules

@pytest.mark.parametrize("workloads, standalone, expected", [
    # seed 004: prefill 2 (at least 1) + decode 3 (at least 1)
    ([("prefill", 2, "1", None), ("decode", 3, "1", None)], {}, [("decode", 1), ("prefill", 1)]),
    # no min-available: the desired replicas, as before
    ([("prefill", 2, None, None), ("decode", 3, None, None)], {}, [("decode", 3), ("prefill", 2)]),
    # a template that names its subgroup keeps that name
    ([("prefill-v2", 2, "1", "prefill"), ("decode", 3, None, None)], {}, [("decode", 3), ("prefill", 1)]),
    # standalone pods form their own subgroup
    ([("decode", 3, "2", None)], {"standalone": 2}, [("decode", 2), ("standalone", 2)]),
])
def test_subgroups_and_their_minimums(workloads, standalone, expected):
    objs = [workload(n, r, min_available=m, subgroup=s) for n, r, m, s in workloads]
    subgroups, problems = rules.shared_subgroups(objs, standalone)
    assert problems == ()
    assert [(s.name, s.min_member) for s in subgroups] == expected
    # the group's minMember is the sum of the subgroup minimums
    assert rules.shared_min_member(objs, sum(standalone.values())).value == sum(v for _, v in expected)


def test_where_a_minimum_comes_from():
    assert rules.subgroup_min_member(workload("decode", 3, min_available="1")) == rules.MinMember(
        1, "podgang.io/min-available on deployment/decode", pinned=True)
    assert rules.subgroup_min_member(workload("decode", 3)) == rules.MinMember(3, "deployment/decode spec.replicas 3")
    pinned = workload("decode", 3)
    pinned["metadata"]["annotations"] = {"podgang.io/min-member": "2"}
    assert rules.subgroup_min_member(pinned) == rules.MinMember(2, "podgang.io/min-member on deployment/decode", pinned=True)


@pytest.mark.parametrize("raw", ["0", "-1", "one", "1.5", "99999999999"])
def test_a_bad_min_available_is_ignored_and_said(raw):
    subgroups, problems = rules.shared_subgroups([workload("decode", 3, min_available=raw), workload("prefill", 1)])
    assert [(s.name, s.min_member) for s in subgroups] == [("decode", 3), ("prefill", 1)]
    assert problems == (f'deployment/decode: podgang.io/min-available="{raw}" is ignored: '
                        f"it must be a whole number from 1 to 2147483647",)


def test_two_workloads_in_one_subgroup_is_a_problem_and_no_subgroups():
    subgroups, problems = rules.shared_subgroups([workload("decode", 3), workload("decode", 1, kind="StatefulSet")])
    assert subgroups == ()
    assert problems == ('subgroup "decode" is claimed by deployment/decode, statefulset/decode: give each its own '
                        'subgroup name in its pod template; the group has no subgroups until then',)
    named, problems = rules.shared_subgroups([workload("a", 1, subgroup="x"), workload("b", 1, subgroup="x")])
    assert named == () and "subgroup \"x\" is claimed by deployment/a, deployment/b" in problems[0]


@pytest.mark.parametrize("workloads, standalone", [
    ([("decode", 3, "1", None)], {}),  # one workload is the whole gang
    ([("decode.v2", 3, None, None)], {}),  # so its name need not be a subgroup's
    ([], {"standalone": 3}),  # standalone pods alone: the user's group as written
])
def test_one_part_is_the_whole_gang_and_gets_no_subgroups(workloads, standalone):
    objs = [workload(n, r, min_available=m, subgroup=s) for n, r, m, s in workloads]
    assert rules.shared_subgroups(objs, standalone) == ((), ())


def test_a_name_that_cannot_be_a_subgroup_is_a_problem():
    subgroups, problems = rules.shared_subgroups([workload("decode.v2", 3), workload("prefill", 1)])
    assert subgroups == ()
    assert problems[0].startswith('deployment/decode.v2: "decode.v2" cannot name a subgroup')


def test_a_pod_of_a_hand_made_group_is_in_its_workloads_subgroup():
    dep = workload("decode", 3)
    rs = replicaset(dep)
    member = pod("decode-abc12-x", owner=rs, group="shared")
    assert rules.gang_for_pod(member, [rs, dep]).subgroup == "decode"
    own = pod("decode-abc12-y", owner=rs, group="shared", labels={SUBGROUP: "mine"})
    assert rules.gang_for_pod(own, [rs, dep]).subgroup == "mine"
    assert rules.gang_for_pod(pod("lonely", group="shared")).subgroup == rules.STANDALONE


# ---------------------------------------------------------------------------- backends

def test_kai_podgroup_with_subgroups_passes_the_crd():
    m = KAI.build_podgroup(GangSpec("shared", NS, 2, subgroups=(Subgroup("prefill", 1), Subgroup("decode", 1))))
    jsonschema.validate(m, schema("scheduling.run.ai_podgroups.yaml", KAI.podgroup.version))
    assert m["spec"]["subGroups"] == [{"name": "decode", "minMember": 1}, {"name": "prefill", "minMember": 1}]
    assert KAI.subgroups_of(m) == {"decode": 1, "prefill": 1}
    # podgang's subgroups come with a negative grace period: KAI v0.17 would misjudge them stale
    assert m["spec"]["stalenessGracePeriod"] == "-1s"
    assert KAI.subgroups_patch(m, [Subgroup("decode", 2)]) == {"spec": {
        "subGroups": [{"name": "decode", "minMember": 2}], "stalenessGracePeriod": "-1s"}}
    assert KAI.slim_podgroup_spec(m["spec"]) == {"minMember": 2, "subGroups": m["spec"]["subGroups"],
                                                 "stalenessGracePeriod": "-1s"}


def test_volcano_podgroup_with_task_minimums_passes_the_crd():
    m = VOLCANO.build_podgroup(GangSpec("shared", NS, 2, subgroups=(Subgroup("prefill", 1), Subgroup("decode", 1))))
    jsonschema.validate(m, schema("scheduling.volcano.sh_podgroups.yaml", VOLCANO.podgroup.version))
    assert m["spec"]["minTaskMember"] == {"decode": 1, "prefill": 1}
    # a task that left the group is removed (null in a merge patch)
    assert VOLCANO.subgroups_patch(m, [Subgroup("decode", 2)]) == {"spec": {"minTaskMember": {"prefill": None, "decode": 2}}}
    assert VOLCANO.subgroup_of({"metadata": {"annotations": {"volcano.sh/task-spec": "decode"}}}) == "decode"


def test_coscheduling_cannot_express_subgroups():
    assert COSCHEDULING.subgroup_key is None and COSCHEDULING.subgroups_of({"spec": {}}) is None
    m = COSCHEDULING.build_podgroup(GangSpec("shared", NS, 2, subgroups=(Subgroup("prefill", 1), Subgroup("decode", 1))))
    assert m["spec"] == {"minMember": 2}
    assert COSCHEDULING.with_subgroup({"metadata": {}}, [], "decode") == []


@pytest.mark.parametrize("metadata, membership, expected", [
    # the membership patch creates the labels: the subgroup goes into the same object
    ({}, [{"op": "add", "path": "/metadata/labels", "value": {"kai.scheduler/podgroup": "g"}}],
     [{"op": "add", "path": "/metadata/labels", "value": {"kai.scheduler/podgroup": "g", SUBGROUP: "decode"}}]),
    ({"labels": {"app": "x"}}, [],
     [{"op": "add", "path": "/metadata/labels/kai.scheduler~1subgroup-name", "value": "decode"}]),
    ({"annotations": {}}, [], [{"op": "add", "path": "/metadata/labels", "value": {SUBGROUP: "decode"}}]),
    # a pod that names its subgroup keeps it
    ({"labels": {SUBGROUP: "mine"}}, [], []),
])
def test_kai_labels_the_subgroup(metadata, membership, expected):
    assert KAI.with_subgroup({"metadata": metadata}, membership, "decode") == expected


# ---------------------------------------------------------------------------- grouper, pure

def seed_004(cache: Cache, decode: int = 3) -> None:
    for dep in (workload("prefill", 2, min_available="1"), workload("decode", decode, min_available="1")):
        feed(cache, dep)


def test_desired_group_has_the_subgroups_and_writes_them():
    cache = Cache()
    seed_004(cache)
    feed(cache, podgroup("shared", 2))
    desired = desired_group(cache, f"{NS}/shared")
    assert desired.min_member.value == 2
    assert [(s.name, s.min_member) for s in desired.subgroups] == [("decode", 1), ("prefill", 1)]
    [write] = plan_writes(desired, cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert write.action == "patch-subgroups"
    assert write.body["spec"] == {"subGroups": [{"name": "decode", "minMember": 1}, {"name": "prefill", "minMember": 1}],
                                  "stalenessGracePeriod": "-1s"}  # podgang, judging by the parts, evicts
    assert write.body["metadata"]["annotations"] == {  # what podgang wrote, and that it follows the size
        "podgang.io/subgroups": "decode,prefill", "podgang.io/followed-min-member": "2"}
    # scaling decode leaves the minimums alone: nothing to write once they are in place
    feed(cache, written(podgroup("shared", 2), write))
    seed_004(cache, decode=5)
    assert plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT) == []


def test_a_users_grace_period_becomes_podgangs_when_podgang_takes_the_eviction_over():
    """A hand-made KAI group written with ``stalenessGracePeriod: 5m``: the subgroups podgang
    writes come with -1s (KAI v0.17 would evict by any leaf), and in the same patch the 5m is
    kept as podgang's grace for the gang, which it then evicts after; plan shows both."""
    cache = Cache()
    seed_004(cache)
    users = podgroup("shared", 2, kai_evicts=True)
    users["spec"]["stalenessGracePeriod"] = "5m"
    feed(cache, users)
    [write] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert write.body["spec"]["stalenessGracePeriod"] == "-1s"
    assert write.body["metadata"]["annotations"]["podgang.io/staleness-grace-period"] == "5m"
    after = written(users, write)
    assert rules.grace_period_for([after], 60.0) == (300.0, "podgang.io/staleness-grace-period=5m on podgroup/shared")
    assert KAI.evicts_itself(after) is None  # one evictor: podgang, after the user's 5m
    # a grace podgang already keeps on the group is the one in force: not overwritten
    mine = {**users, "metadata": {**users["metadata"], "annotations": {"podgang.io/staleness-grace-period": "2m"}}}
    feed(cache, mine)
    [again] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert "podgang.io/staleness-grace-period" not in again.body["metadata"]["annotations"]
    # a negative grace period is KAI's "never": podgang's -1s says the same, nothing to keep
    never = {**users, "spec": {**users["spec"], "stalenessGracePeriod": "-1s"}}
    feed(cache, never)
    [same] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert "podgang.io/staleness-grace-period" not in same.body["metadata"]["annotations"]


def written(podgroup: dict, write) -> dict:
    """``podgroup`` after the merge patch of ``write``, as the apiserver applies it."""
    return merge_patch(podgroup, write.body)


def test_a_workload_leaving_takes_the_subgroups_podgang_wrote_with_it_but_never_a_users():
    """prefill is deleted: decode alone is the whole gang, and a subgroup prefill of
    minimum 1 that no pod can meet any more must not stay on the PodGroup."""
    cache = Cache()
    seed_004(cache)
    feed(cache, podgroup("shared", 2))
    [write] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    feed(cache, written(podgroup("shared", 2), write))
    remove(cache, workload("prefill", 2, min_available="1"))
    [removal] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert removal.action == "patch-min-member"  # in the same patch as the new size: decode's minimum alone
    assert removal.body["spec"] == {"minMember": 1, "subGroups": None}
    assert removal.body["metadata"]["annotations"] == {"podgang.io/subgroups": None,
                                                       "podgang.io/followed-min-member": "1"}
    feed(cache, written(cache.podgroups.of(KAI, f"{NS}/shared"), removal))
    assert plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT) == []
    # subgroups a user wrote into a group one workload names are theirs: left alone
    users = {**podgroup("shared", 1), "spec": {"minMember": 1, "subGroups": [{"name": "mine", "minMember": 1}]}}
    feed(cache, users)
    assert not any(w.action == "patch-subgroups" for w in plan_writes(
        desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT))


def test_kai_keeps_the_other_fields_of_a_subgroup_it_resizes():
    live = {"spec": {"subGroups": [{"name": "decode", "minMember": 3, "topologyConstraint": {"topology": "rack"}}]}}
    assert KAI.subgroups_patch(live, [Subgroup("decode", 1), Subgroup("prefill", 1)]) == {"spec": {"subGroups": [
        {"name": "decode", "minMember": 1, "topologyConstraint": {"topology": "rack"}},
        {"name": "prefill", "minMember": 1}], "stalenessGracePeriod": "-1s"}}


def test_a_group_one_workload_names_keeps_its_podgroup_as_before():
    """One workload is the whole gang: no subGroups are written (its pods may carry the
    subgroup label all the same; KAI counts a pod whose subgroup it lacks in the gang)."""
    cache = Cache()
    feed(cache, workload("decode", 3, min_available="2"))
    feed(cache, podgroup("shared", 2))
    desired = desired_group(cache, f"{NS}/shared")
    assert desired.subgroups == () and desired.min_member.value == 2
    [record] = plan_writes(desired, cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)  # followed from now on
    assert record.action == "record-size" and record.body == {"metadata": {"annotations": {
        "podgang.io/followed-min-member": "2"}}}


def test_a_backend_without_subgroups_gets_the_sum_and_a_problem():
    settings = Settings(backends=(("kai-scheduler", COSCHEDULING),))
    cache = Cache(settings=settings)
    for dep in (workload("prefill", 2, min_available="1"), workload("decode", 3, min_available="1")):
        labels = dep["spec"]["template"]["metadata"]["labels"]
        labels[COSCHEDULING.key] = labels.pop(LABEL)
        feed(cache, dep)
    desired = desired_group(cache, f"{NS}/shared")
    assert desired.min_member.value == 2
    assert desired.problems[-1] == ("the coscheduling backend cannot express subgroups (decode 1, prefill 1): the "
                                    "gang only needs minMember 2 pods in all, whichever part they belong to")


# ---------------------------------------------------------------------------- staleness

def observe(tracker, prefill: int, decode: int, settling: bool = False) -> stale.StaleVerdict:
    return tracker.observe(stale.GangObservation(
        group="ns/shared", min_member=2, active=prefill + decode, succeeded=0, workload_settling=settling,
        grace_period=30.0, subgroups=(stale.SubgroupCount("decode", 1, decode), stale.SubgroupCount("prefill", 1, prefill)),
    ))


def test_a_subgroup_emptied_makes_the_gang_stale_and_the_total_does_not_hide_it():
    now = [0.0]
    tracker = stale.StaleGangTracker(lambda: now[0])
    assert observe(tracker, 2, 3).action == stale.NONE
    verdict = observe(tracker, 2, 0)  # every decode pod lost: 2 active ≥ minMember 2, still stale
    assert verdict.action == stale.STALE
    assert verdict.message.startswith("decode: 0 of minimum 1 active, minMember 2: evicting the rest in 30s")
    now[0] = 31.0
    assert observe(tracker, 2, 0).action == stale.EVICT
    assert observe(tracker, 2, 1).action == stale.RECOVERED


def test_a_subgroup_reduced_but_at_its_minimum_is_not_stale():
    tracker = stale.StaleGangTracker(lambda: 0.0)
    assert observe(tracker, 2, 3).action == stale.NONE
    assert observe(tracker, 2, 1).action == stale.NONE
    assert observe(tracker, 1, 1).action == stale.NONE


def test_a_subgroup_never_satisfied_is_waiting_not_stale():
    tracker = stale.StaleGangTracker(lambda: 0.0)
    assert observe(tracker, 2, 0).action == stale.NONE  # decode has not started yet
    assert observe(tracker, 2, 0).action == stale.NONE


def test_a_subgroup_scaled_down_on_purpose_is_not_lost():
    tracker = stale.StaleGangTracker(lambda: 0.0)
    observe(tracker, 2, 3)
    assert observe(tracker, 2, 0, settling=True).action == stale.NONE
    assert observe(tracker, 2, 0).action == stale.NONE
