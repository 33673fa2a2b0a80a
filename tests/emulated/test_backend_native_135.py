"""The native backend on Kubernetes 1.35 (seed 002): ``scheduling.k8s.io/v1alpha1``
Workloads and pod ``spec.workloadRef``, checked against what a real 1.35 control plane
recorded (tests/fixtures/native-1.35/, copied from ../shared/fixtures/native-1.35/):
discovery, membership, the Workload podgang builds, immutable podGroups held until no
pod names them, a gang in a Workload of several pod groups, and the words for a
Workload or pod group that does not exist."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonpatch
import pytest

from podgang.backends import NATIVE, GangSpec, NativeBackend, NativeWorkloads, native_backend, native_version
from podgang.backends.base import REPLACE_WHEN_EMPTY
from podgang.backends.native import WORKLOAD_FIELD, gang_name, pod_group_for, split_gang
from podgang.gang import Cache
from podgang.gang import Desired, desired_group, plan_writes, size_held
from podgang.objects import OwnerRef
from podgang.rules import HAND_MADE, OWNED, MinMember, gang_for_pod, is_valid_group_name
from podgang.settings import DEFAULT
from tests.backend_support import NS, SCHEDULERS, grouper, member, podgroup_of
from tests.grouper_support import deployment, events, owned_group, replicaset, scale, uid
from tests.webhook_support import eventually
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "native-1.35"
FIXTURES_136 = TESTS / "fixtures" / "native"
WORKLOADS = NativeWorkloads()
SETTINGS = DEFAULT.with_changes(backends=(("default-scheduler", WORKLOADS),))


def recorded(name: str, where: Path = FIXTURES) -> dict:
    return json.loads((where / f"{name}.json").read_text())


def said(name: str) -> str:
    """The apiserver's own words in a recorded refusal (the line after ``exit 1``)."""
    return (FIXTURES / f"{name}.txt").read_text().split("exit 1\n", 1)[1].splitlines()[0]


# ---------------------------------------------------------------------------- discovery


def test_the_recorded_1_35_discovery_gives_workloads():
    doc = recorded("discovery-scheduling.k8s.io")
    assert native_version(doc) == "v1alpha1"
    picked = NATIVE.for_discovery(doc)
    assert isinstance(picked, NativeWorkloads)
    assert picked.podgroup.api_version == "scheduling.k8s.io/v1alpha1" and picked.podgroup.kind == "Workload"
    assert picked.podgroup.path("ml", "w") == "/apis/scheduling.k8s.io/v1alpha1/namespaces/ml/workloads/w"
    # the recorded resource list says the same resource
    resources = recorded("discovery-scheduling.k8s.io-v1alpha1")["resources"]
    assert [(r["name"], r["kind"]) for r in resources] == [("workloads", "Workload")]


def test_discovery_prefers_v1beta1_then_v1alpha2_then_v1alpha1():
    doc_136 = recorded("discovery-scheduling.k8s.io", FIXTURES_136)
    both = copy.deepcopy(doc_136)
    both["versions"].append({"groupVersion": "scheduling.k8s.io/v1alpha1", "version": "v1alpha1"})
    assert native_version(both) == "v1alpha2"
    assert type(NATIVE.for_discovery(both)) is NativeBackend
    both["versions"].append({"groupVersion": "scheduling.k8s.io/v1beta1", "version": "v1beta1"})
    assert native_version(both) == "v1beta1"
    assert WORKLOADS.for_discovery(both).version == "v1beta1"  # from 1.35's dialect to 1.37's
    assert WORKLOADS.for_discovery(recorded("discovery-scheduling.k8s.io")) is WORKLOADS


def test_a_cluster_older_than_1_35_is_told_what_it_needs():
    with pytest.raises(ValueError, match="native gang scheduling needs Kubernetes 1.35 or later"):
        native_version({"versions": [{"version": "v1"}]})


def test_versions_are_built_by_name():
    assert isinstance(native_backend("v1alpha1"), NativeWorkloads)
    assert native_backend("v1alpha2").version == "v1alpha2" and native_backend("v1beta1").version == "v1beta1"
    with pytest.raises(ValueError, match="v1alpha1: NativeWorkloads"):
        NativeBackend("v1alpha1")


# ---------------------------------------------------------------------------- membership


def test_gang_names_are_one_pair_each():
    assert split_gang("pg-web-1234") == ("pg-web-1234", "pg-web-1234")
    assert split_gang("spark-job/spark-gang") == ("spark-job", "spark-gang")
    assert gang_name("spark-job", "spark-gang") == "spark-job/spark-gang"
    assert gang_name("pg-web-1234", "pg-web-1234") == "pg-web-1234"
    long = "pg-" + "a" * 30 + "-" + str(uid())
    assert len(long) > 63 and is_valid_group_name(long)
    short = pod_group_for(long)
    assert len(short) <= 63 and short != long and gang_name(long, short) == long
    assert pod_group_for("a.b") != "a.b" and "." not in pod_group_for("a.b")  # a DNS label: no dots


@pytest.mark.parametrize("fixture, gang", [
    ("pods-gang-of-4-bound", "training-job-basic/training-gang"),
    ("pods-gang-of-10-unschedulable", "large-training-job/large-gang"),
    ("pods-spark-shared-gang", "spark-job/spark-gang"),
])
def test_the_seed_s_pods_are_in_their_hand_made_gang(fixture, gang):
    for pod in recorded(fixture)["items"]:
        assert WORKLOADS.named_group(pod) == (gang, WORKLOAD_FIELD)
        assert WORKLOADS.group_of(pod) == gang and not WORKLOADS.needs_backfill(pod)
        assert WORKLOADS.membership_patch(pod, gang) == []  # podgang leaves the user's field alone
        chosen = gang_for_pod(pod, settings=SETTINGS)
        assert (chosen.name, chosen.source) == (gang, HAND_MADE)


def test_the_executor_template_names_the_shared_gang():
    sts = recorded("statefulset-with-workloadref-create")
    assert WORKLOADS.named_group(sts["spec"]["template"]) == ("spark-job/spark-gang", WORKLOAD_FIELD)


def test_membership_patch_sets_workload_ref_at_create():
    pod = copy.deepcopy(recorded("pods-gang-of-4-bound")["items"][0])
    gang = "pg-web-5b1c4e0a-6a9e-4d57-9d2b-1b7e9f3c2a10"
    bare = WORKLOADS.without_membership(pod)
    assert "workloadRef" not in bare["spec"] and WORKLOADS.needs_backfill(bare)
    patched = jsonpatch.apply_patch(bare, WORKLOADS.membership_patch(bare, gang))
    assert patched["spec"]["workloadRef"] == {"name": gang, "podGroup": gang}
    assert WORKLOADS.group_of(patched) == gang and WORKLOADS.membership_patch(patched, gang) == []
    assert WORKLOADS.membership_patch({}, "g") == [
        {"op": "add", "path": "/spec", "value": {"workloadRef": {"name": "g", "podGroup": "g"}}}]
    assert WORKLOADS.backfill_patch(bare, gang) is None  # immutable once the pod exists
    assert WORKLOADS.describe_membership("w/g") == "spec.workloadRef={name: w, podGroup: g} set"


def test_a_changed_workload_ref_is_refused_as_the_apiserver_does():
    """The recorded patch moved spark-driver from spark-job/spark-gang to other/x: refused."""
    assert "pod updates may not change fields" in said("pod-workloadref-patch")
    driver = recorded("pods-spark-shared-gang")["items"][0]
    moved = copy.deepcopy(driver)
    moved["spec"]["workloadRef"] = {"name": "other", "podGroup": "x"}
    problem = WORKLOADS.membership_change_problem(driver, moved)
    assert problem.startswith("a pod's PodGroup cannot change once the pod exists "
                              "(spec.workloadRef \"spark-job/spark-gang\" → \"other/x\")")
    assert WORKLOADS.membership_change_problem(driver, copy.deepcopy(driver)) is None


# ---------------------------------------------------------------------------- Workloads


OWNER = OwnerRef("apps/v1", "Deployment", "web", "5b1c4e0a-6a9e-4d57-9d2b-1b7e9f3c2a10")


@pytest.mark.parametrize("size, fixture", [(4, "workload-gang-of-4-after"), (1, "workload-basic-create")])
def test_what_we_build_is_what_the_apiserver_stores(size, fixture):
    stored = recorded(fixture)
    gang = stored["spec"]["podGroups"][0]["name"]
    built = WORKLOADS.build_podgroup(GangSpec(gang, "ns", size, owner=OWNER, labels=DEFAULT.managed_labels))
    assert (built["apiVersion"], built["kind"]) == (stored["apiVersion"], stored["kind"])
    assert built["metadata"]["name"] == gang and built["metadata"]["ownerReferences"] == [OWNER.to_dict()]
    assert built["spec"] == {"podGroups": [{"name": gang, "policy": stored["spec"]["podGroups"][0]["policy"]}]}
    assert WORKLOADS.min_member(built) == WORKLOADS.min_member(stored) == size
    assert WORKLOADS.gangs_in(built) == (gang,)


def test_never_min_count_zero():
    """The 1.35 apiserver refuses minCount 0 (recorded): a gang of 0 or 1 is basic."""
    assert "minCount: Invalid value: 0: must be greater than zero" in said("workload-mincount-0")
    built = WORKLOADS.build_podgroup(GangSpec("g", "ns", 0))
    assert built["spec"]["podGroups"][0]["policy"] == {"basic": {}}


def test_a_workload_of_several_pod_groups_holds_one_gang_each():
    workload = {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                "metadata": {"name": "job", "namespace": "ns"},
                "spec": {"podGroups": [{"name": "driver", "policy": {"basic": {}}},
                                       {"name": "workers", "policy": {"gang": {"minCount": 4}}}]}}
    assert WORKLOADS.gangs_in(workload) == ("job/driver", "job/workers")
    assert WORKLOADS.min_member(workload) is None  # which one? only a gang's view says
    assert WORKLOADS.min_member(WORKLOADS.gang_view(workload, "job/workers")) == 4
    assert WORKLOADS.min_member(WORKLOADS.gang_view(workload, "job/driver")) == 1
    assert WORKLOADS.gang_view(workload, "job/nope") is None
    assert WORKLOADS.missing_group("job/nope", "ns", workload) == (
        "Workload job in namespace ns has no pod group nope (it has: driver, workers; its podGroups cannot "
        "change: recreate it with that pod group)")
    assert WORKLOADS.missing_group("gone/g", "ns", None) == "Workload gone not found in namespace ns"


def test_podgroups_are_immutable_so_a_live_workload_keeps_its_size():
    """The recorded 422 for minCount 5 → 6: podgang never sends that patch. A live
    Workload podgang made keeps its size (recorded on it), and is replaced once no pod
    names it; a hand-made one is the user's to recreate."""
    assert "podGroups: Invalid value" in said("workload-mincount-patch") and "field is immutable" in said(
        "422-workload-podgroups-immutable")
    live = recorded("workload-gang-of-4-after")
    live["metadata"]["labels"] = dict(DEFAULT.managed_labels)
    resize = WORKLOADS.resize(live, 6)
    assert resize.action == REPLACE_WHEN_EMPTY and resize.body is None
    ns, name = live["metadata"]["namespace"], live["metadata"]["name"]
    desired = Desired(ns, name, OWNED, MinMember(6, "deployment/train spec.replicas 6"),
                      members=({"metadata": {"name": "training-0"}},), backend=WORKLOADS)
    [record] = plan_writes(desired, live, SETTINGS)
    assert (record.action, record.old, record.new) == ("record-size", 4, 6)
    assert record.body["metadata"]["annotations"] == {"podgang.io/desired-min-member": "6"}
    assert "spec" not in record.body  # only metadata: what the apiserver lets change
    held = size_held(desired, live, SETTINGS)
    assert held == ("minMember stays 4 (wanted 6): a Workload's podGroups cannot change on "
                    "scheduling.k8s.io/v1alpha1 (Kubernetes 1.35): the live Workload keeps minCount 4 until no pod "
                    "names it; podgang then replaces it with minMember 6")
    [replace] = plan_writes(Desired(ns, name, OWNED, MinMember(6, "x"), backend=WORKLOADS), live, SETTINGS)
    assert (replace.action, replace.old, replace.new) == ("replace", 4, 6)
    hand_made = recorded("workload-gang-of-4-after")
    held = size_held(Desired(ns, name, HAND_MADE, MinMember(6, "x"), backend=WORKLOADS), hand_made, SETTINGS)
    assert held.endswith("a hand-made group: recreate it to change its size")


def test_no_scheduler_verdict_on_a_workload():
    """The recorded Workload after its gang was bound has no status at all."""
    after = recorded("workload-gang-of-4-after")
    assert "status" not in after and WORKLOADS.scheduler_verdict(after) is None


# ---------------------------------------------------------------------------- the grouper's view


def _cache(*objs: dict) -> Cache:
    cache = Cache(SETTINGS)
    for obj in objs:
        kind = obj["kind"]
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        target = WORKLOADS if kind == "Workload" else kind
        slim = cache.slimmer_for(target)(obj)
        if kind != "Pod" or cache.keep(kind, slim):
            cache.store_for(target)[key] = slim
            cache.apply(target, None, slim)
    return cache


def _spark(replicas: int = 4, workload: bool = True) -> list[dict]:
    pods = recorded("pods-spark-shared-gang")["items"]
    sts = recorded("statefulset-with-workloadref-create")
    sts["spec"]["replicas"] = replicas
    for p in pods[1:]:
        p["metadata"]["ownerReferences"][0]["uid"] = sts["metadata"]["uid"]
    objs = [sts, *pods]
    if workload:
        objs.insert(0, {"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
                        "metadata": {"name": "spark-job", "namespace": "seed002b", "uid": uid()},
                        "spec": {"podGroups": [{"name": "spark-gang", "policy": {"gang": {"minCount": 5}}}]}})
    return objs


def test_the_spark_shared_gang_is_the_executors_plus_the_driver():
    cache = _cache(*_spark())
    desired = desired_group(cache, "seed002b/spark-job/spark-gang")
    # the seed's OrderedReady executors count what their controller can make before one
    # runs (one: issue 18); the Workload's minCount 5 stays (immutable), and never forms
    assert desired.source == HAND_MADE and desired.min_member.value == 2
    assert dict(desired.contributions) == {"statefulset spark-executor": 1, "standalone pods": 1}
    assert len(desired.members) == 2
    # as recorded: the OrderedReady executors made one pod and wait for it to be Ready
    assert desired.problems == (
        "statefulset spark-executor has podManagementPolicy OrderedReady: it creates spark-executor-1 only once "
        "spark-executor-0 is Ready, and no pod of the gang is placed before 5 exist, but only 2 ever will: the gang "
        "never forms. Set podManagementPolicy: Parallel (it cannot change on a live StatefulSet: recreate it)",
        "the native backend cannot express subgroups (spark-executor 1, standalone 1): the gang only needs "
        "minMember 2 pods in all, whichever part they belong to")
    actual = cache.podgroups.of(WORKLOADS, "seed002b/spark-job/spark-gang")
    assert WORKLOADS.min_member(actual) == 5 and plan_writes(desired, actual, SETTINGS) == []
    assert "seed002b/spark-job/spark-gang" in set(cache.podgroups)


def test_parallel_executors_form_the_gang():
    objs = _spark()
    objs[1]["spec"]["podManagementPolicy"] = "Parallel"
    desired = desired_group(_cache(*objs), "seed002b/spark-job/spark-gang")
    assert not any("OrderedReady" in p for p in desired.problems)


def test_an_ordered_ready_statefulset_that_only_needs_its_first_pod_is_fine():
    objs = _spark(replicas=1)
    assert not any("OrderedReady" in p for p in desired_group(_cache(*objs), "seed002b/spark-job/spark-gang").problems)


def test_a_shared_gang_written_below_its_members_is_the_users_elastic_gang():
    """Issue 23: a minCount of 5 under 7 members (six executors at once and the driver) is a
    gang written to start with part of its pods: podgang neither wants it raised nor says it
    is held (a Workload's podGroups cannot change anyway)."""
    objs = _spark(replicas=6)
    objs[1]["spec"]["podManagementPolicy"] = "Parallel"
    cache = _cache(*objs)
    desired = desired_group(cache, "seed002b/spark-job/spark-gang")
    actual = cache.podgroups.of(WORKLOADS, "seed002b/spark-job/spark-gang")
    assert desired.min_member.value == 5 and "an elastic gang" in desired.min_member.reason
    assert plan_writes(desired, actual, SETTINGS) == [] and size_held(desired, actual, SETTINGS) is None


@pytest.mark.parametrize("workload, pod_group, message", [
    ("nowhere", "g", "Workload nowhere not found in namespace seed002b: pod orphan-ref names it and stays Pending"),
    ("spark-job", "no-such-group", "Workload spark-job in namespace seed002b has no pod group no-such-group "
                                   "(it has: spark-gang; its podGroups cannot change: recreate it with that pod "
                                   "group): pod bad-group-ref names it and stays Pending"),
])
def test_a_pod_naming_a_missing_workload_or_pod_group_is_reported(workload, pod_group, message):
    """The scheduler keeps such a pod Pending with no condition and no event (recorded)."""
    pods = {p["metadata"]["name"]: p for p in recorded("pods-naming-missing-workload-or-group")["items"]}
    pod = next(p for p in pods.values() if p["spec"]["workloadRef"] == {"name": workload, "podGroup": pod_group}
               or p["spec"]["workloadRef"]["podGroup"] == pod_group)
    pod["spec"]["workloadRef"] = {"name": workload, "podGroup": pod_group}
    assert "conditions" not in pod["status"]
    cache = _cache(*_spark()[:1], pod)
    desired = desired_group(cache, f"seed002b/{gang_name(workload, pod_group)}")
    assert desired.problems and desired.problems[0].startswith(message)


def test_a_deployment_gets_a_workload_of_its_own():
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "ns", "uid": uid()},
           "spec": {"replicas": 3, "template": {"spec": {"schedulerName": "default-scheduler"}}}, "status": {}}
    cache = _cache(dep)
    gang = next(iter(cache.group_owner))
    desired = desired_group(cache, gang)
    [create] = plan_writes(desired, None, SETTINGS)
    assert create.body["kind"] == "Workload"
    [owner] = create.body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("Deployment", dep["metadata"]["uid"], True)
    assert create.body["spec"]["podGroups"] == [{"name": gang.split("/")[1], "policy": {"gang": {"minCount": 3}}}]


# ---------------------------------------------------------------------------- the grouper, end to end (emulator)


async def test_the_grouper_makes_holds_and_replaces_a_deployment_s_workload():
    """Created as a Workload of one pod group; a scale cannot reach the live Workload, so
    its size is recorded and said once, nothing in spec is written; once no pod names
    it, it is replaced with the size in force."""
    backend, scheduler = SCHEDULERS["native-1.35"]
    async with grouper("native-1.35") as (emu, controller):
        dep = emu.put(deployment("web", 3, ns=NS, scheduler=scheduler))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        for i in range(3):
            emu.put(member(f"web-{i}", rs, backend, scheduler, group))
        assert emu.get("pods", NS, "web-0")["spec"]["workloadRef"] == {"name": group, "podGroup": group}
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group) is not None, 10, "no Workload")
        made = podgroup_of(emu, backend, NS, group)
        assert made["kind"] == "Workload"
        assert made["spec"] == {"podGroups": [{"name": group, "policy": {"gang": {"minCount": 3}}}]}
        uid_before = made["metadata"]["uid"]

        scale(emu, dep, 5)
        (held,) = await eventually(lambda: events(emu, "MinMemberHeld"), what="a MinMemberHeld event")
        assert held["message"].startswith("minMember stays 3 (wanted 5): a Workload's podGroups cannot change")
        await emu.wait_for(lambda: (podgroup_of(emu, backend, NS, group)["metadata"].get("annotations") or {})
                           .get("podgang.io/desired-min-member") == "5", 10, "size not recorded")
        writes = [r for r in emu.find_requests(None, r"/workloads/") if r.method in ("PATCH", "PUT")]
        assert writes and all("spec" not in (r.body or {}) for r in writes)  # podGroups: immutable

        for i in range(3):
            emu.delete("pods", NS, f"web-{i}")
        await emu.wait_for(lambda: (podgroup_of(emu, backend, NS, group) or {}).get("metadata", {}).get("uid")
                           not in (None, uid_before), 10, "not replaced")
        replaced = podgroup_of(emu, backend, NS, group)
        assert replaced["spec"]["podGroups"][0]["policy"] == {"gang": {"minCount": 5}}
        (said_once,) = await eventually(lambda: events(emu, "PodGroupReplaced"), what="a PodGroupReplaced event")
        assert "minMember 3 → 5" in said_once["message"]


async def test_the_grouper_reports_a_pod_naming_a_missing_workload():
    backend, scheduler = SCHEDULERS["native-1.35"]
    async with grouper("native-1.35") as (emu, controller):
        pod = recorded("pods-naming-missing-workload-or-group")["items"][1]
        pod["metadata"]["namespace"] = NS
        for key in ("uid", "resourceVersion", "creationTimestamp"):
            pod["metadata"].pop(key)
        emu.put(pod)
        (missing,) = await eventually(lambda: events(emu, "PodGroupMissing"), what="a PodGroupMissing event")
        ref = pod["spec"]["workloadRef"]
        assert missing["type"] == "Warning" and missing["involvedObject"]["name"] == pod["metadata"]["name"]
        assert missing["message"].startswith(f"Workload {ref['name']} not found in namespace {NS}")
