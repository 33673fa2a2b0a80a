"""``podgang grouper`` end to end against the HTTP API emulator: real JSON over
HTTP, resourceVersions, watch events and bookmarks, 409 on stale writes, 410 on
expired watches. The tests play the workload controllers and the kubelet."""

from __future__ import annotations

import asyncio
import time
import logging

from podgang import rules
from podgang.backends.kai import KAI
from podgang.objects import OwnerRef
from tests.grouper_support import (
    ANN,
    LABEL,
    MANAGED,
    NS,
    deploy_with_pods,
    deployment,
    deployment_progress,
    events,
    min_member,
    owned_group,
    owner_ref,
    pod,
    podgroup,
    podgroup_writes,
    replicaset,
    revisioned,
    running_grouper,
    scale,
    settle_status,
)
from tests.emulator import KubeEmulator
from tests.webhook_support import eventually

SHARED = "shared-app-podgroup"


def three_deployments(emu, sizes=(1, 1, 1)):
    group = podgroup(SHARED, sum(sizes))  # one subgroup per deployment, already in place
    group["spec"]["subGroups"] = [{"name": n, "minMember": s} for n, s in zip(("app-server", "model-1", "model-2"), sizes)]
    emu.put(group)
    return {n: deploy_with_pods(emu, n, s, group=SHARED)[0] for n, s in zip(("app-server", "model-1", "model-2"), sizes)}


async def wait_event(emu, reason, text=None, timeout=5.0, name=None):
    def found():
        return [e for e in events(emu, reason, name=name) if text is None or text in e["message"]]

    return await emu.wait_for(found, timeout, f"no {reason} event{' with ' + repr(text) if text else ''}: "
                              f"{[(e['reason'], e['message']) for e in events(emu)]}")


# ---------------------------------------------------------------------------- minMember


def job_gang(emu, **spec) -> tuple[dict, str]:
    """A running 3-pod Job gang (extra Job spec fields as keywords) and its group name."""
    job = emu.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
                   "spec": {"parallelism": 3, **spec, "template": {"spec": {
                       "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    group = owned_group(job)
    for i in range(3):
        emu.put(pod(f"train-{i}", owner=job, group=group))
    return job, group


def assert_never_stale(emu) -> None:
    assert events(emu, "GangStale") == [] and emu.find_requests("POST", r"/eviction$") == []


async def test_shared_group_follows_three_deployments_scaled_up_and_down(emu):
    deps = three_deployments(emu)
    async with running_grouper(emu):
        # 1 + 1 + 1 = 3 already: only that podgang follows it from now on is written (issue 23: a group
        # written below its members' total would be the user's elastic gang)
        await emu.wait_for(lambda: (emu.get("podgroups", NS, SHARED)["metadata"].get("annotations") or {}).get(
            "podgang.io/followed-min-member") == "3", 1.0)
        assert [w.method for w in podgroup_writes(emu)] == ["PATCH"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        scale(emu, deps["model-1"], 2)
        await emu.wait_for(lambda: min_member(emu, SHARED) == 4, 1.0, "minMember did not become 4 within 1s")
        assert loop.time() - started < 1.0
        await wait_event(emu, "MinMemberChanged", "minMember 3 → 4: deployment model-1 scaled 1 → 2")
        scale(emu, deps["model-1"], 1)
        await emu.wait_for(lambda: min_member(emu, SHARED) == 3, 1.0, "minMember did not go back to 3")
        await wait_event(emu, "MinMemberChanged", "minMember 4 → 3: deployment model-1 scaled 2 → 1")
        pg = emu.get("podgroups", NS, SHARED)
        # the user's group: only minMember changed, no label or owner added
        assert "labels" not in pg["metadata"] and "ownerReferences" not in pg["metadata"]
        assert "hand-made" in (await wait_event(emu, "MinMemberChanged", "scaled 2 → 1"))[0]["message"]
        assert len(podgroup_writes(emu, SHARED, "PATCH")) == 3  # minMember and model-1's subgroup in one patch, twice
        patch = podgroup_writes(emu, SHARED, "PATCH")[1]
        assert patch.content_type == "application/merge-patch+json"


async def test_shared_group_follows_a_new_workload_and_a_deleted_one(emu):
    three_deployments(emu)
    async with running_grouper(emu):
        extra, _, _ = deploy_with_pods(emu, "model-3", 2, group=SHARED)
        await emu.wait_for(lambda: min_member(emu, SHARED) == 5, 1.0)
        await wait_event(emu, "MinMemberChanged", "deployment model-3 added (2)")
        emu.delete("deployments", NS, "model-3")
        await emu.wait_for(lambda: min_member(emu, SHARED) == 3, 1.0)
        await wait_event(emu, "MinMemberChanged", "deployment model-3 removed (was 2)")


async def test_shared_group_that_does_not_exist_is_not_created_but_warned_about(emu):
    deploy_with_pods(emu, "app-server", 1, group="nowhere")
    async with running_grouper(emu):
        ev = await wait_event(emu, "PodGroupMissing", "PodGroup nowhere not found in namespace team")
        assert ev[0]["type"] == "Warning" and ev[0]["involvedObject"]["kind"] == "Deployment"
        assert emu.get("podgroups", NS, "nowhere") is None
        assert podgroup_writes(emu) == []


async def test_a_deployments_own_group_follows_kubectl_scale_with_one_patch(emu):
    dep, rs, pods = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        pg = emu.get("podgroups", NS, name)
        assert pg["metadata"]["labels"] == MANAGED
        assert pg["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
        await wait_event(emu, "PodGroupCreated", "created for deployment web: minMember 2")
        writes_before = len(podgroup_writes(emu, name))
        scale(emu, dep, 50)
        emu.patch_object("replicasets", NS, rs["metadata"]["name"], {"spec": {"replicas": 50}})
        for i in range(2, 50):  # the scale-up's pods arrive in a burst
            emu.put(pod(f"web-{i}", owner=rs, group=name, phase="Pending", node=None))
        settle_status(emu, dep)
        await emu.wait_for(lambda: min_member(emu, name) == 50, 1.0)
        await emu.wait_for(lambda: not g.controller.queue.busy() and not g.controller.queue.delayed, 2.0)
        assert len(podgroup_writes(emu, name)) == writes_before + 1, [r.body for r in podgroup_writes(emu, name)]


def size_written_by(manager: str) -> list[dict]:
    """managedFields as a real apiserver records them after ``manager`` changed minMember."""
    return [{"manager": "podgang-grouper", "operation": "Update", "apiVersion": "scheduling.run.ai/v2alpha2",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:podgang.io/managed-by": {}}}}},
            {"manager": manager, "operation": "Update", "apiVersion": "scheduling.run.ai/v2alpha2",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:minMember": {}}}}]


async def test_a_group_whose_size_another_manager_wrote_is_warned_about_once(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        # podgang's own writes are recorded under its name: never taken for another writer
        assert {r.query.get("fieldManager") for r in podgroup_writes(emu)} == {"podgang-grouper"}
        assert events(emu, "PodGroupChangedByOther") == []
        for size in (7, 9, 7):  # the other writer keeps fighting; podgang keeps writing its size back
            emu.patch_object("podgroups", NS, name, {"spec": {"minMember": size},
                                                     "metadata": {"managedFields": size_written_by("someone-else")}})
            await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0, f"minMember {size} was not written back")
        await emu.wait_for(lambda: not g.controller.queue.busy() and not g.controller.queue.delayed, 2.0)
        warned = events(emu, "PodGroupChangedByOther")
        assert sorted((e["involvedObject"]["kind"], e["type"], e.get("count")) for e in warned) == [
            ("Deployment", "Warning", 1), ("PodGroup", "Warning", 1)], warned
        assert '"someone-else" (spec.minMember)' in warned[0]["message"]
        assert f"PodGroup {name}, which podgang made" in warned[0]["message"]
        assert "older than v0.15" in warned[0]["message"]  # what to do about KAI's own pod-grouper


async def test_job_statefulset_and_cronjob_run(emu):
    job = emu.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": NS},
                   "spec": {"parallelism": 6, "completions": 4, "template": {
                       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    sts = emu.put({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
                   "spec": {"replicas": 3, "podManagementPolicy": "Parallel", "template": {
                       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    cron = emu.put({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly", "namespace": NS},
                    "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"parallelism": 2, "template": {
                        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}})
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, owned_group(job)) == 4, 2.0)
        await emu.wait_for(lambda: min_member(emu, owned_group(sts)) == 3, 2.0)
        assert emu.get("podgroups", NS, owned_group(cron)) is None  # a CronJob has no group; its runs do
        run = emu.put({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "nightly-2900", "namespace": NS, "ownerReferences": [owner_ref(cron)]},
                       "spec": {"parallelism": 2, "template": {"spec": {
                           "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
        emu.put(pod("nightly-2900-x", owner=run, group=owned_group(run), phase="Pending", node=None))
        await emu.wait_for(lambda: min_member(emu, owned_group(run)) == 2, 2.0)
        assert emu.get("podgroups", NS, owned_group(run))["metadata"]["ownerReferences"][0]["name"] == "nightly-2900"
        emu.patch_object("statefulsets", NS, "db", {"spec": {"replicas": 5}})
        await emu.wait_for(lambda: min_member(emu, owned_group(sts)) == 5, 1.0)
        # 4 completions at parallelism 6: after 3 succeeded, one pod is left to run
        emu.patch_object("jobs", NS, "train", {"status": {"succeeded": 3}})
        await emu.wait_for(lambda: min_member(emu, owned_group(job)) == 1, 1.0)


async def test_an_ordered_statefulset_is_a_gang_of_one_and_is_told_why(emu):
    """OrderedReady (the default) makes pod 1 only once pod 0 is Ready: a gang of 3 never forms."""
    sts = emu.put({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "etcd", "namespace": NS},
                   "spec": {"replicas": 3, "template": {
                       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, owned_group(sts)) == 1, 2.0)
        (warning,) = await eventually(lambda: events(emu, "GangStaged"), what="a GangStaged warning")
        assert warning["involvedObject"]["kind"] == "StatefulSet"
        assert "podManagementPolicy: Parallel makes them one gang" in warning["message"]
        emu.patch_object("statefulsets", NS, "etcd", {"spec": {"podManagementPolicy": "Parallel"}})
        await emu.wait_for(lambda: min_member(emu, owned_group(sts)) == 3, 1.0)
        assert len(events(emu, "GangStaged")) == 1  # said once


async def test_min_member_annotation_pins_the_value(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 3, annotations={"podgang.io/min-member": "2"})
    name = owned_group(dep)
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        scale(emu, dep, 6)
        await emu.wait_for(lambda: emu.get("deployments", NS, "web")["spec"]["replicas"] == 6)
        # a pinned group does not follow the scale
        emu.patch_object("podgroups", NS, name, {"metadata": {"annotations": {"podgang.io/min-member": "4"}}})
        await emu.wait_for(lambda: min_member(emu, name) == 4, 1.0)
        await wait_event(emu, "MinMemberChanged", "pinned by podgang.io/min-member on podgroup/")
        assert min_member(emu, name) == 4
        # shared groups can be pinned too
        three_deployments(emu)
        emu.patch_object("podgroups", NS, SHARED, {"metadata": {"annotations": {"podgang.io/min-member": "2"}}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 2, 1.0)


async def test_a_pin_on_a_workload_of_a_shared_group_is_not_called_a_scale(emu):
    deps = three_deployments(emu)
    async with running_grouper(emu):
        emu.patch_object("deployments", NS, "model-1", {"metadata": {"annotations": {"podgang.io/min-member": "4"}}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 6, 2.0)
        await wait_event(emu, "MinMemberChanged", "minMember 3 → 6: deployment model-1 pinned 1 → 4")
        emu.patch_object("deployments", NS, "model-1", {"metadata": {"annotations": {"podgang.io/min-member": None}}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 3, 2.0)
        await wait_event(emu, "MinMemberChanged", "minMember 6 → 3: deployment model-1 unpinned 4 → 1")
        assert not [e for e in events(emu, "MinMemberChanged") if "scaled" in e["message"]]
        assert deps["model-1"]["spec"]["replicas"] == 1


# ---------------------------------------------------------------------------- adoption, orphans, recreation


async def test_adoption_and_orphan_deletion(emu):
    emu.put(podgroup("pg-solo", 1, managed=True))  # the webhook made these at admission
    emu.put(podgroup("pg-never", 1, managed=True))
    emu.put(podgroup("mine", 1))  # not podgang's: never deleted
    solo = emu.put(pod("solo", group="pg-solo"))
    async with running_grouper(emu, orphan_timeout=1.0):
        await emu.wait_for(lambda: (emu.get("podgroups", NS, "pg-solo")["metadata"].get("ownerReferences") or [{}])[0]
                           .get("uid") == solo["metadata"]["uid"], 2.0)
        assert emu.get("podgroups", NS, "pg-never") is not None  # not before the timeout
        await emu.wait_for(lambda: emu.get("podgroups", NS, "pg-never") is None, 4.0)
        assert emu.get("podgroups", NS, "mine") is not None
        emu.delete("pods", NS, "solo")  # GC deletes its adopted group
        assert emu.get("podgroups", NS, "pg-solo") is None


async def test_a_group_kais_grouper_made_is_adopted_not_duplicated(emu):
    """A cluster switching from KAI's pod-grouper: the Job's group KAI made (its name is the one
    podgang gives, owned by the Job, minMember 1 from KAI's Job default) is taken over once —
    labelled podgang's, annotated who made it, then sized as podgang sizes it — and no second
    group appears. A same-named group with another owner stays the user's."""
    job, group = job_gang(emu)
    emu.put(podgroup(group, 1, owner=job, kai_evicts=True))
    other, _, _ = deploy_with_pods(emu, "web", 2)
    stranger = emu.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "stranger", "namespace": NS}})
    emu.put(podgroup(owned_group(other), 1, owner=stranger, kai_evicts=True))  # someone else's: not adopted
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, group) == 3, 3.0)
        adopted = emu.get("podgroups", NS, group)
        assert adopted["metadata"]["labels"] == MANAGED
        assert adopted["metadata"]["annotations"]["podgang.io/adopted-from"] == "kai-pod-grouper"
        said = await wait_event(emu, "PodGroupAdopted", "made by kai-pod-grouper for job train")
        assert len(said) == 1
        assert [pg["metadata"]["name"] for pg in emu.list("podgroups", NS)].count(group) == 1
        kept = emu.get("podgroups", NS, owned_group(other))
        assert "labels" not in kept["metadata"] and kept["spec"]["minMember"] == 1
        assert events(emu, "PodGroupAdopted", name=owned_group(other)) == []


async def test_the_group_of_a_generate_name_pod_the_webhook_could_not_create_is_created(emu):
    # owner-less pod with only generateName: the webhook named its group
    # pg-<generateName><5 random> and wrote it into the pod, but creating the PodGroup
    # failed (an API error never denies a pod): the grouper creates it
    raw = pod("batch-runner-x7k2p", annotations={ANN: "pg-batch-runner-q9z4m"}, labels={LABEL: "pg-batch-runner-q9z4m"})
    raw["metadata"]["generateName"] = "batch-runner-"
    solo = emu.put(raw)
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, "pg-batch-runner-q9z4m") == 1, 2.0)
        pg = emu.get("podgroups", NS, "pg-batch-runner-q9z4m")
        assert pg["metadata"]["labels"] == MANAGED
        assert pg["metadata"]["ownerReferences"][0]["uid"] == solo["metadata"]["uid"]
        assert events(emu, "PodGroupMissing") == []


async def test_a_group_deleted_under_its_pods_comes_back(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        emu.delete("podgroups", NS, name)
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        await wait_event(emu, "PodGroupCreated", "2 pods already name it")


# ---------------------------------------------------------------------------- backfill


async def test_backfill_pods_admitted_while_the_webhook_was_down(emu):
    dep, rs, pods = deploy_with_pods(emu, "web", 2, annotate=False)
    emu.put(pod("lonely"))  # owner-less, no group
    emu.put(pod("half", labels={LABEL: "shared"}))  # label only: gets the annotation
    async with running_grouper(emu):
        group = owned_group(dep)
        for p in pods:
            await emu.wait_for(lambda p=p: emu.get("pods", NS, p["metadata"]["name"])["metadata"]
                               .get("annotations", {}).get(ANN) == group, 2.0)
            got = emu.get("pods", NS, p["metadata"]["name"])
            assert got["metadata"]["labels"][LABEL] == group
            assert got["metadata"]["labels"]["app"] == "web"  # merge patch: nothing else touched
        await emu.wait_for(lambda: min_member(emu, group) == 2, 2.0)
        await emu.wait_for(lambda: emu.get("pods", NS, "lonely")["metadata"].get("annotations", {}).get(ANN)
                           == "pg-lonely", 2.0)
        await emu.wait_for(lambda: min_member(emu, "pg-lonely") == 1, 2.0)
        assert emu.get("podgroups", NS, "pg-lonely")["metadata"]["ownerReferences"][0]["name"] == "lonely"
        await emu.wait_for(lambda: emu.get("pods", NS, "half")["metadata"].get("annotations", {}).get(ANN)
                           == "shared", 2.0)
        ev = await wait_event(emu, "PodGroupCreated", f"{ANN}={group}")
        # one event for the gang, on its PodGroup: created, and its pods backfilled with the count
        assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in ev] == [("PodGroup", group)]
        assert "; 2 pods backfilled: " in ev[0]["message"], ev[0]["message"]
        assert not [e for e in events(emu, "Backfilled") if group in e["message"]]  # said once, above
        patches = [r for r in emu.find_requests("PATCH", r"/pods/") if r.path.endswith("web-abc12-0")]
        assert patches[0].content_type == "application/merge-patch+json"


async def test_a_group_name_too_long_for_a_label_is_backfilled_into_the_annotation_only(emu):
    # pg-<name>-<uid> of a workload named 24+ characters is over the 63 characters of a label
    # value: the webhook sets the annotation only, and the apiserver refuses such a label
    long_name = "inference-server-large-model"
    dep, rs, pods = deploy_with_pods(emu, long_name, 2, annotate=False)  # admitted while the webhook was down
    group = owned_group(dep)
    assert len(group) > 63
    emu.put(pod(f"{long_name}-abc12-x", owner=rs,  # admitted by the webhook
                annotations={ANN: group, "kai.scheduler/skip-podgrouper": "true"}))
    async with running_grouper(emu) as g:
        for p in pods:
            await emu.wait_for(lambda p=p: emu.get("pods", NS, p["metadata"]["name"])["metadata"]
                               .get("annotations", {}).get(ANN) == group, 2.0)
        await wait_event(emu, "PodGroupCreated", "2 pods backfilled: pod-group-name=")
        await wait_event(emu, "PodGroupCreated", "no kai.scheduler/podgroup label")
        await g.wait_ready(emu)
        patches = emu.find_requests("PATCH", r"/pods/")
        assert sorted(r.path.rsplit("/", 1)[1] for r in patches) == sorted(p["metadata"]["name"] for p in pods)
        assert all(LABEL not in (r.body["metadata"].get("labels") or {}) for r in patches)
        assert not g.controller.cache.unlabelled


# ---------------------------------------------------------------------------- stale gangs


def set_phase(emu, name, phase, node="node-1"):
    patch = {"status": {"phase": phase}}
    if node:
        patch["spec"] = {"nodeName": node}
    emu.patch_object("pods", NS, name, patch)


async def stale_gang(emu, n=3, **kw):
    dep, rs, pods = deploy_with_pods(emu, "gang", n, **kw)
    return dep, rs, [p["metadata"]["name"] for p in pods]


async def test_a_gang_that_loses_a_member_is_evicted_after_the_grace_period(emu):
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.6):
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        loop = asyncio.get_running_loop()
        emu.delete("pods", NS, names[0])
        lost = loop.time()
        ev = await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3: evicting the rest in")
        assert ev[0]["involvedObject"]["kind"] == "PodGroup"
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names[1:]), 4.0)
        assert loop.time() - lost >= 0.6
        assert len(emu.find_requests("POST", r"/eviction$")) == 2
        await wait_event(emu, "GangEvicted", "evicted 2 pods")


async def test_a_gang_that_recovers_within_the_grace_period_is_not_evicted(emu):
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=1.0) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.delete("pods", NS, names[0])
        await wait_event(emu, "GangStale")
        emu.put(pod("gang-abc12-new", owner=rs, group=group))  # the ReplicaSet replaced it, it runs
        await wait_event(emu, "GangRecovered", "3 of 3 members active again")
        await watch_a_while(emu, g, group, 1.5)  # well past the grace period
        assert emu.find_requests("POST", r"/eviction$") == []
        assert all(emu.get("pods", NS, n) is not None for n in names[1:])


async def test_scale_up_waiting_for_capacity_is_not_stale(emu):
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        scale(emu, dep, 5)
        settle_status(emu, dep)
        for i in (3, 4):
            emu.put(pod(f"gang-abc12-{i}", owner=rs, group=group, phase="Pending", node=None))
        await emu.wait_for(lambda: min_member(emu, group) == 5, 1.0)
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_gang_with_a_succeeded_member_is_never_stale(emu):
    job, group = job_gang(emu)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        set_phase(emu, "train-0", "Succeeded")
        emu.delete("pods", NS, "train-1")
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_failed_job_whose_controller_deletes_its_pods_is_not_stale(emu):
    # backoffLimit exceeded: the Job is marked failed and its controller deletes the
    # other pods on purpose; no GangStale ("evicting the rest in …") for a finished run
    job, group = job_gang(emu, backoffLimit=0)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        set_phase(emu, "train-0", "Failed")
        emu.patch_object("jobs", NS, "train", {"status": {"conditions": [
            {"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}})
        emu.delete("pods", NS, "train-1")
        emu.delete("pods", NS, "train-2")
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_workload_deleted_in_the_foreground_is_not_a_stale_gang(emu):
    # kubectl delete deployment --cascade=foreground: the Deployment stays (deletionTimestamp,
    # foregroundDeletion finalizer) while the garbage collector deletes its pods one by one
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        for kind, name in (("deployments", "gang"), ("replicasets", rs["metadata"]["name"])):
            emu.patch_object(kind, NS, name, {"metadata": {"finalizers": ["foregroundDeletion"]}})
            emu.delete(kind, NS, name)
        emu.delete("pods", NS, names[0])
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_suspended_job_whose_controller_deletes_its_pods_is_not_stale(emu):
    # spec.suspend: true (kubectl patch, or a queueing controller such as Kueue preempting it):
    # the Job controller deletes the running pods on purpose
    job, group = job_gang(emu)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.patch_object("jobs", NS, "train", {"spec": {"suspend": True}})
        emu.delete("pods", NS, "train-0")
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_stale_gang_whose_job_is_suspended_recovers_and_says_why(emu):
    job, group = job_gang(emu)
    async with running_grouper(emu, staleness_grace_period=30):
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.delete("pods", NS, "train-0")
        await wait_event(emu, "GangStale")
        emu.patch_object("jobs", NS, "train", {"spec": {"suspend": True}})
        await wait_event(emu, "GangRecovered", "no longer stale: job train is suspended")


async def test_a_rolling_out_or_scaling_down_workload_is_not_stale(emu):
    dep, rs, names = await stale_gang(emu, 4)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 4, 2.0)
        # scale down 4 → 3: the controller removes a pod on purpose
        scale(emu, dep, 3)
        await emu.wait_for(lambda: min_member(emu, group) == 3, 1.0)
        emu.delete("pods", NS, names[3])
        settle_status(emu, dep)
        # a rollout: new template, observedGeneration behind, a pod replaced
        emu.patch_object("deployments", NS, "gang", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}})
        emu.delete("pods", NS, names[2])
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def rolled_out_gang(emu, g, last_pod_placed_after: float) -> tuple[dict, str, list[str]]:
    """A running Deployment gang of 3 (maxSurge 0, maxUnavailable 1) at revision 1, then
    updated with the tests playing its controllers: one old pod goes, one new pod comes
    and is placed, three times; the last new pod stays Pending for
    ``last_pod_placed_after`` seconds, and nothing may go stale meanwhile. Returns the
    Deployment, its group and the new pods' names."""
    dep = deployment("gang", 3, status={"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
                                        "conditions": [{"type": "Progressing", "status": "True",
                                                        "reason": "NewReplicaSetAvailable"}]})
    dep["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    dep = emu.put(dep)
    group = owned_group(dep)
    rs = emu.put(revisioned(dep, 1, "v1"))
    old = [emu.put(pod(f"gang-v1-{i}", owner=rs, group=group, labels={"pod-template-hash": "v1"}))
           ["metadata"]["name"] for i in range(3)]
    await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
    dep = emu.patch_object("deployments", NS, "gang", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}})
    rs = emu.put(revisioned(dep, 2, "v2"))
    deployment_progress(emu, dep, "NewReplicaSetCreated", updated=0, available=3)
    new = []
    for i, name in enumerate(old):
        emu.delete("pods", NS, name)
        new.append(emu.put(pod(f"gang-v2-{i}", owner=rs, group=group, phase="Pending", node=None,
                               labels={"pod-template-hash": "v2"}))["metadata"]["name"])
        deployment_progress(emu, dep, "ReplicaSetUpdated", updated=i + 1, available=2)
        if i == len(old) - 1:
            await emu.wait_for(lambda: f"{NS}/{new[-1]}" in g.controller.cache.pods, 2.0)
            await watch_a_while(emu, g, group, last_pod_placed_after)
            assert_never_stale(emu)
        emu.patch_object("pods", NS, new[-1], {"spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})
        deployment_progress(emu, dep, "ReplicaSetUpdated", updated=i + 1, available=3)
    deployment_progress(emu, dep, "NewReplicaSetAvailable", updated=3, available=3)
    return dep, group, new


async def test_a_max_unavailable_rollout_whose_last_pod_is_slow_to_place_evicts_nothing(emu):
    # the last new pod already counts as updated while Pending: 2 of 3 active for five grace
    # periods, and the Deployment's Progressing reason says the rollout is still running
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        dep, group, new = await rolled_out_gang(emu, g, last_pod_placed_after=1.5)
        await watch_a_while(emu, g, group, 0.5)
        assert_never_stale(emu)
        assert all(emu.get("pods", NS, n)["status"]["phase"] == "Running" for n in new)


async def test_a_member_lost_right_after_a_rollout_finished_is_still_evicted(emu):
    # the Deployment merely replaces the lost pod: the replica counts look as in a rollout's
    # last step, but Progressing stays NewReplicaSetAvailable
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        dep, group, new = await rolled_out_gang(emu, g, last_pod_placed_after=0.0)
        emu.delete("pods", NS, new[0])
        emu.put(pod("gang-v2-3", owner=emu.get("replicasets", NS, "gang-v2"), group=group, phase="Pending",
                    node=None, labels={"pod-template-hash": "v2"}))
        deployment_progress(emu, dep, "NewReplicaSetAvailable", updated=3, available=2)
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3: evicting the rest in")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in new[1:]), 4.0)
        await wait_event(emu, "GangEvicted")


async def test_a_partitioned_statefulset_rollout_evicts_nothing_and_a_later_loss_does(emu):
    # partition 1: db-2 then db-1 move to revision r2, db-0 stays at r1 and currentRevision
    # never catches up; each replaced pod is Pending for two grace periods
    spec = {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}
    sts = emu.put({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": NS},
                   "spec": {"replicas": 3, "podManagementPolicy": "Parallel", "template": {"spec": spec},
                            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}},
                   "status": {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3,
                              "currentRevision": "db-r1", "updateRevision": "db-r1"}})
    group = owned_group(sts)

    def db(i: int, revision: str, phase: str = "Running") -> str:
        return emu.put(pod(f"db-{i}", owner=sts, group=group, phase=phase, node=None if phase == "Pending" else "n",
                           labels={"controller-revision-hash": revision}))["metadata"]["name"]

    names = [db(i, "db-r1") for i in range(3)]
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.patch_object("statefulsets", NS, "db", {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}})
        emu.patch_object("statefulsets", NS, "db", {"status": {"observedGeneration": 2, "updateRevision": "db-r2",
                                                               "updatedReplicas": 0}})
        for i in (2, 1):
            emu.delete("pods", NS, names[i])
            db(i, "db-r2", "Pending")
            await emu.wait_for(lambda: f"{NS}/db-{i}" in g.controller.cache.pods, 2.0)
            await watch_a_while(emu, g, group, 0.6)
            db(i, "db-r2")
        await watch_a_while(emu, g, group, 0.3)
        assert_never_stale(emu)
        # the staged rollout is done; now db-2 (at r2) is lost and its successor cannot be placed
        emu.delete("pods", NS, "db-2")
        db(2, "db-r2", "Pending")
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3: evicting the rest in")
        await emu.wait_for(lambda: emu.get("pods", NS, "db-0") is None and emu.get("pods", NS, "db-1") is None, 4.0)


async def test_a_member_lost_during_a_scale_down_is_stale_once_the_settle_window_closes(emu):
    # scale 4 → 3 and, meanwhile, a node takes another member away: once the scale-down
    # has settled the gang is 2 of 3 and stale, without waiting for the 5-minute resync
    dep, rs, names = await stale_gang(emu, 4)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        g.controller.options.settle_window = 0.5
        await emu.wait_for(lambda: min_member(emu, group) == 4, 2.0)
        scale(emu, dep, 3)
        await emu.wait_for(lambda: min_member(emu, group) == 3, 1.0)
        emu.delete("pods", NS, names[3])  # the scale-down
        settle_status(emu, dep)
        emu.delete("pods", NS, names[2])  # the loss
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3", timeout=3.0)
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names[:2]), 4.0)


async def test_grace_period_minus_one_never_evicts(emu):
    dep, rs, names = await stale_gang(emu, annotations={"podgang.io/staleness-grace-period": "-1"})
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.2) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.delete("pods", NS, names[0])
        await wait_event(emu, "GangStale", "not evicting")
        await watch_a_while(emu, g, group, 0.8)
        assert emu.find_requests("POST", r"/eviction$") == []


async def test_a_cronjobs_grace_period_applies_to_its_runs(emu):
    # the user annotates the CronJob; its runs (Jobs) carry only the jobTemplate's metadata
    cron = emu.put({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {
                        "name": "nightly", "namespace": NS, "annotations": {"podgang.io/staleness-grace-period": "-1"}},
                    "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"parallelism": 3, "template": {
                        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}})
    run = emu.put({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "nightly-1", "namespace": NS, "ownerReferences": [owner_ref(cron)]},
                   "spec": {"parallelism": 3, "template": {"spec": {
                       "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    group = owned_group(run)
    for i in range(3):
        emu.put(pod(f"nightly-1-{i}", owner=run, group=group))
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.delete("pods", NS, "nightly-1-0")
        await wait_event(emu, "GangStale", "not evicting (podgang.io/staleness-grace-period is -1)")
        await watch_a_while(emu, g, group, 1.0)
        assert emu.find_requests("POST", r"/eviction$") == []


async def test_a_group_whose_minmember_cannot_be_written_is_still_watched_for_staleness(emu):
    # the PodGroup refuses the new minMember (an immutable field, a validating webhook, RBAC):
    # that is warned about and retried, and the gang is still evicted when it loses a member
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3):
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.fail("PATCH", rf"/podgroups/{group}$", 422, times=None, body={
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Invalid",
            "message": "spec.minMember: Invalid value: field is immutable", "code": 422})
        scale(emu, dep, 4)
        settle_status(emu, dep)
        emu.put(pod("gang-abc12-3", owner=rs, group=group, phase="Pending", node=None))
        await wait_event(emu, "PodGroupWriteFailed", "field is immutable")
        emu.delete("pods", NS, names[0])
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names[1:]), 4.0)


async def test_an_eviction_that_finds_the_pods_gone_is_still_logged(emu, caplog):
    caplog.set_level(logging.INFO, logger="podgang.grouper")
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.2):
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        emu.fail("POST", r"/eviction$", 404, times=None)  # deleted meanwhile by someone else
        emu.delete("pods", NS, names[0])
        await wait_event(emu, "GangStale")
        await emu.wait_for(lambda: [r for r in caplog.records if getattr(r, "fields", {}).get("action") == "evict"],
                           3.0, "no decision logged for the eviction")
        line = [r for r in caplog.records if getattr(r, "fields", {}).get("action") == "evict"][0]
        assert "nothing left to evict (2 already gone)" in line.getMessage()
        assert line.fields["group"] == f"{NS}/{group}" and "duration_ms" in line.fields


def put_pdb(emu, group: str, min_available: int) -> None:
    """A PodDisruptionBudget over the gang's pods."""
    emu.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "gang", "namespace": NS},
             "spec": {"minAvailable": min_available, "selector": {"matchLabels": {LABEL: group}}}})


async def test_a_pdb_refusing_eviction_is_reported_and_retried(emu):
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.2) as g:
        g.controller.options.eviction_retry = 0.3
        g.controller.options.eviction_backoff = 0.01
        g.controller.options.eviction_attempts = 1
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        put_pdb(emu, group, 2)
        emu.delete("pods", NS, names[0])
        ev = await wait_event(emu, "GangEvictionRefused", "disruption budget", timeout=5.0)
        assert ev[0]["type"] == "Warning"
        assert emu.get("pods", NS, names[1]) is not None and emu.get("pods", NS, names[2]) is not None
        emu.delete("poddisruptionbudgets", NS, "gang")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names[1:]), 5.0)
        await wait_event(emu, "GangEvicted")


async def test_a_gang_that_recovers_while_a_pdb_holds_its_eviction_loses_no_more_pods(emu, caplog):
    """Issue 35: the eviction of a stale gang is retried while a PodDisruptionBudget refuses
    it; meanwhile the gang comes back (its lost member replaced, running). The eviction asks
    before its next try and stops: no pod evicted, though the budget would now let one go."""
    dep, rs, names = await stale_gang(emu)
    group = owned_group(dep)
    caplog.set_level("INFO", logger="podgang.grouper")
    async with running_grouper(emu, staleness_grace_period=0.2) as g:
        g.controller.options.eviction_backoff = 1.0  # retries after 1, 2, 4 s: the recovery lands between
        g.controller.options.eviction_attempts = 4
        await emu.wait_for(lambda: min_member(emu, group) == 3, 2.0)
        put_pdb(emu, group, 2)
        emu.delete("pods", NS, names[0])
        await emu.wait_for(lambda: emu.count("POST", r"/eviction$") >= 2, 5.0, "no eviction tried")
        emu.put(pod("gang-abc12-new", owner=rs, group=group))  # the ReplicaSet replaced it, it runs
        await wait_event(emu, "GangRecovered", "3 of 3 members active again, minMember 3; the eviction under way stops")
        await emu.wait_for(lambda: not g.controller.gangs.evictions(), 5.0, "the eviction went on")
        assert all(emu.get("pods", NS, n) is not None for n in names[1:])
        assert not events(emu, "GangEvicted")
        [stopped] = [r for r in caplog.records if getattr(r, "fields", {}).get("action") == "evict-stopped"]
        assert "stopped, the gang is no longer stale; 2 members kept" in stopped.getMessage()
        assert stopped.fields["kept"] == 2 and stopped.fields["evicted"] == 0
        assert 'podgang_grouper_evictions_total{result="stopped"} 2.0' in g.controller.metrics.exposition()[0].decode()


async def watch_a_while(emu, g, group, seconds):
    """Let the grouper reconcile ``group`` for ``seconds`` (several grace periods)."""
    loop = asyncio.get_running_loop()
    until = loop.time() + seconds
    start = g.controller.reconciles
    await emu.wait_for(lambda: loop.time() >= until, seconds + 1)
    assert g.controller.reconciles >= start


async def test_resync_period_zero_turns_resync_off_instead_of_spinning(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    async with running_grouper(emu, resync_period=0.0) as g:
        await emu.wait_for(lambda: min_member(emu, owned_group(dep)) == 2, 2.0)
        start = g.controller.reconciles
        await watch_a_while(emu, g, owned_group(dep), 0.5)
        assert g.controller.reconciles - start < 10  # nothing changed: (almost) nothing to do
        scale(emu, dep, 3)  # events still work
        await emu.wait_for(lambda: min_member(emu, owned_group(dep)) == 3, 2.0)


# ---------------------------------------------------------------------------- watches


async def test_watch_410_relists_without_losing_an_update(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        lists_before = sum(i.lists for i in g.controller.informers["Deployment"])
        emu.fail("GET", r"/deployments$", 503, times=2)  # the reconnects fail for a while
        emu.close_watches()
        scale(emu, dep, 7)  # happens while nobody watches
        emu.compact()  # and the history is gone: the resume answers 410
        await emu.wait_for(lambda: min_member(emu, name) == 7, 5.0)
        assert sum(i.lists for i in g.controller.informers["Deployment"]) > lists_before
        restarts = g.controller.metrics.exposition()[0].decode()
        assert 'podgang_grouper_watch_restarts_total{reason="expired",resource="deployments"}' in restarts


async def test_watches_use_bookmarks_timeouts_and_resume_from_the_last_version(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    async with running_grouper(emu, watch_timeout=30) as g:
        watches = emu.find_requests("GET", r"/deployments$")
        watch = [r for r in watches if r.query.get("watch") == "true"][0]
        assert watch.query["allowWatchBookmarks"] == "true" and watch.query["timeoutSeconds"] == "30"
        assert watch.query["resourceVersion"]
        emu.put(deployment("unrelated", 1, scheduler="default-scheduler"))
        await emu.send_bookmarks()
        informer = g.controller.informers["Deployment"][0]
        await emu.wait_for(lambda: informer.resource_version == emu.resource_version, 2.0)
        emu.clear_requests()
        emu.close_watches()
        await emu.wait_for(lambda: [r for r in emu.find_requests("GET", r"/deployments$")
                                    if r.query.get("watch") == "true"], 2.0)
        resumed = [r for r in emu.find_requests("GET", r"/deployments$") if r.query.get("watch") == "true"][0]
        assert resumed.query["resourceVersion"] == informer.resource_version
        assert not [r for r in emu.find_requests("GET", r"/deployments$") if r.query.get("watch") != "true"]


async def test_missing_crds_are_logged_once_and_not_retried(caplog):
    caplog.set_level(logging.INFO, logger="podgang.grouper")
    async with KubeEmulator(crds=["podgroups.scheduling.run.ai"]) as emu:
        dep, _, _ = deploy_with_pods(emu, "web", 1)
        async with running_grouper(emu):
            await emu.wait_for(lambda: min_member(emu, owned_group(dep)) == 1, 2.0)
            for i in range(3):
                emu.close_watches()
                await emu.wait_for(lambda: emu.watch_count >= 7, 2.0)
            assert emu.count("GET", r"/leaderworkersets") == 1
            assert emu.count("GET", r"/jobsets") == 1
        assert len([r for r in caplog.records if "leaderworkersets" in r.getMessage()]) == 1


# ---------------------------------------------------------------------------- leader election


def holder(emu, name="podgang-grouper", ns="default"):
    lease = emu.get("leases", ns, name)
    return lease and lease["spec"].get("holderIdentity")


async def test_two_groupers_one_leader(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    opts = dict(leader_elect=True, leader_election_lease_duration=3.0, leader_election_renew_deadline=2.0,
                leader_election_retry_period=1.0)
    async with running_grouper(emu, ready=False, leader_election_identity="a", **opts) as a:
        await emu.wait_for(lambda: holder(emu) == "a", 5.0)
        async with running_grouper(emu, ready=False, leader_election_identity="b", **opts) as b:
            await a.wait_ready(emu)
            await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
            await emu.wait_for(lambda: emu.count("GET", r"/leases/podgang-grouper") >= 6, 5.0)  # b keeps trying
            assert b.controller is None and holder(emu) == "a"
            writers = {r.headers.get("User-Agent") for r in podgroup_writes(emu)}
            assert len(writers) == 1
            transitions = emu.get("leases", "default", "podgang-grouper")["spec"].get("leaseTransitions") or 0
            await a.stop()  # hands the Lease over
            await emu.wait_for(lambda: holder(emu) == "b", 5.0)
            # counted as client-go counts a change of hands (kubectl describe lease shows it)
            assert emu.get("leases", "default", "podgang-grouper")["spec"]["leaseTransitions"] == transitions + 1
            await b.wait_ready(emu)
            scale(emu, dep, 4)
            await emu.wait_for(lambda: min_member(emu, name) == 4, 2.0)


async def test_losing_the_lease_stops_reconciling_and_exits_nonzero(emu):
    deploy_with_pods(emu, "web", 2)
    opts = dict(leader_elect=True, leader_election_lease_duration=3.0, leader_election_renew_deadline=2.0,
                leader_election_retry_period=1.0)
    async with running_grouper(emu, ready=False, leader_election_identity="a", **opts) as a:
        await a.wait_ready(emu)
        lease = emu.get("leases", "default", "podgang-grouper")
        spec = {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 3600}
        emu.patch_object("leases", "default", "podgang-grouper", {"spec": spec})
        code = await asyncio.wait_for(a.task, 10)
        assert code == 1
        assert holder(emu) == "intruder"


async def test_a_leader_whose_renewals_hang_stops_writing_before_its_lease_can_be_taken(emu, caplog):
    """Fencing (issue 35): the library checks the renew deadline only between tries, and a hung
    renewal that lands late counts as a success, so a leader could write on past the moment a
    standby may take the Lease. podgang stops at the renew deadline, counted from the last
    renewal that succeeded: before the lease duration is up."""
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    name = owned_group(dep)
    opts = dict(leader_elect=True, leader_election_lease_duration=3.0, leader_election_renew_deadline=2.0,
                leader_election_retry_period=1.0)
    caplog.set_level("INFO", logger="podgang.grouper")
    async with running_grouper(emu, ready=False, leader_election_identity="a", **opts) as a:
        await a.wait_ready(emu)
        await emu.wait_for(lambda: min_member(emu, name) == 2, 2.0)
        emu.delay(4.0, r"/leases/podgang-grouper$")  # every renewal hangs 4s, then lands
        hung = time.monotonic()
        await emu.wait_for(lambda: "stopping before it can be taken" in caplog.text, 3.0)
        # fenced within the renew deadline of the last renewal sent before the hang (≤ 1s before it)
        assert time.monotonic() - hung < 3.0
        writes = len(podgroup_writes(emu))
        scale(emu, dep, 4)
        code = await asyncio.wait_for(a.task, 15)
        assert code == 1
        assert len(podgroup_writes(emu)) == writes and min_member(emu, name) == 2  # nothing written since


# ---------------------------------------------------------------------------- conflicts


async def test_a_stale_write_is_re_read_and_retried(emu):
    three_deployments(emu)
    async with running_grouper(emu):
        await emu.wait_for(lambda: len(podgroup_writes(emu, SHARED, "PATCH")) == 1, 2.0)  # followed from now on
        emu.fail("PATCH", rf"/podgroups/{SHARED}$", 409, times=1, body={
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict",
            "message": "the object has been modified", "code": 409})
        emu.patch_object("deployments", NS, "model-2", {"spec": {"replicas": 3}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 5, 2.0)
        assert emu.count("GET", rf"/podgroups/{SHARED}$") >= 1  # re-read after the conflict
        await emu.wait_for(lambda: len(podgroup_writes(emu, SHARED, "PATCH")) == 3, 2.0)  # the refused one, then minMember with model-2's subgroup


async def test_a_write_that_fails_again_after_working_is_warned_about_again(emu):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    group = owned_group(dep)
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 2, 2.0)
        for replicas in (3, 4):  # the apiserver fails once, recovers; later fails once again
            emu.fail("PATCH", rf"/podgroups/{group}$", 500, times=1)
            scale(emu, dep, replicas)
            await emu.wait_for(lambda: min_member(emu, group) == replicas, 5.0)
        await emu.wait_for(lambda: sum(e.get("count", 1) for e in events(emu, "PodGroupWriteFailed")) == 2, 3.0,
                           f"one Warning per failure: {events(emu, 'PodGroupWriteFailed')}")
        await emu.wait_for(lambda: not [k for k in g.controller._warned if k[-1] == "write"], 2.0)


async def test_warnings_about_deleted_pods_are_forgotten(emu):
    async with running_grouper(emu) as g:
        emu.fail("PATCH", r"/pods/lonely$", 500, times=1000)
        emu.put(pod("lonely"))  # to backfill; the API refuses
        await wait_event(emu, "BackfillFailed")
        assert g.controller._warned
        emu.delete("pods", NS, "lonely")
        await emu.wait_for(lambda: not g.controller._warned, 2.0, f"still remembered: {g.controller._warned}")


# ---------------------------------------------------------------------------- seed 003 scenarios


async def test_seed_003_standalone_pods_member_deleted_from_a_running_gang(emu):
    emu.put(podgroup("app-with-models", 3))  # hand-made, only standalone pods name it
    for name in ("app-server", "model-1", "model-2"):
        emu.put(pod(name, group="app-with-models"))
    async with running_grouper(emu, staleness_grace_period=0.5):
        emu.delete("pods", NS, "model-1")
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3")
        await emu.wait_for(lambda: emu.get("pods", NS, "app-server") is None and emu.get("pods", NS, "model-2")
                           is None, 4.0)
        await wait_event(emu, "GangEvicted")
        assert min_member(emu, "app-with-models") == 3  # the user's size is never touched
        assert podgroup_writes(emu) == []


async def test_a_hand_made_kai_group_that_kai_evicts_itself_is_left_to_kai(emu, caplog):
    """KAI v0.17 evicts a stale gang after its stalenessGracePeriod unless that is negative:
    one evictor per gang, so podgang says so and evicts nothing."""
    emu.put(podgroup("app-with-models", 3, kai_evicts=True))
    for name in ("app-server", "model-1", "model-2"):
        emu.put(pod(name, group="app-with-models"))
    caplog.set_level("INFO", logger="podgang.grouper")
    async with running_grouper(emu, staleness_grace_period=0.2):
        emu.delete("pods", NS, "model-1")
        [stale] = await wait_event(emu, "GangStale", "KAI evicts the rest itself")
        # who evicts, once: not podgang's countdown beside KAI's (seen on a real node)
        assert stale["message"].startswith("2 of 3 members active, minMember 3: KAI evicts the rest itself")
        assert "evicting the rest in" not in stale["message"]
        # the grace period ends: where podgang would evict, it leaves the gang to KAI
        await emu.wait_for(lambda: "leave-to-scheduler" in caplog.text, 4.0)
        assert not emu.find_requests("POST", r"/eviction$")
        assert {p["metadata"]["name"] for p in emu.list("pods", NS)} == {"app-server", "model-2"}
        assert not events(emu, "GangEvicted")


async def test_seed_003_a_member_deleted_while_the_grouper_restarts_is_still_a_stale_gang(emu):
    emu.put(podgroup("app-with-models", 3))
    for name in ("app-server", "model-2"):  # model-1 was deleted while no grouper ran
        emu.put(pod(name, group="app-with-models"))
    async with running_grouper(emu, staleness_grace_period=0.5):
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3")
        await emu.wait_for(lambda: emu.list("pods", NS) == [], 4.0)


async def test_a_gang_short_of_its_minimum_at_start_gets_the_full_grace_period_and_is_never_said_placed(
        emu, caplog):
    """Issue 35: a grouper starting on a gang below its minimum (a member lost while none ran,
    or the minimum raised meanwhile) cannot tell whether it was ever whole: it does not take it
    as satisfied, and evicts only once the whole grace period has run from its first look."""
    emu.put(podgroup("app-with-models", 3))
    for name in ("app-server", "model-2"):
        emu.put(pod(name, group="app-with-models"))
    caplog.set_level("INFO", logger="podgang.grouper")
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with running_grouper(emu, staleness_grace_period=1.0) as g:
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3, short of it since the grouper "
                         "first saw the gang (not known to have been whole): evicting the rest in 1s")
        assert g.controller.tracker.satisfied_at(f"{NS}/app-with-models") is None
        await emu.wait_for(lambda: emu.list("pods", NS) == [], 5.0)
        assert min(r.at for r in emu.find_requests("POST", r"/eviction$")) >= started + 1.0
        assert not [r for r in caplog.records if getattr(r, "fields", {}).get("action") == "placed"]


async def test_a_scale_up_waiting_for_capacity_across_a_restart_is_not_stale(emu):
    dep, rs, pods = deploy_with_pods(emu, "gang", 4)
    group = owned_group(dep)
    emu.put(podgroup(group, 4, managed=True, owner=dep))
    emu.patch_object("pods", NS, pods[3]["metadata"]["name"], {"spec": {"nodeName": None},
                                                               "status": {"phase": "Pending"}})
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_seed_003_shared_deployments_lose_a_member_that_is_not_replaced(emu):
    three_deployments(emu)
    async with running_grouper(emu, staleness_grace_period=0.5):
        victim = [p for p in emu.list("pods", NS) if p["metadata"]["name"].startswith("model-1")][0]
        emu.delete("pods", NS, victim["metadata"]["name"])
        await wait_event(emu, "GangStale", "2 of 3 members active, minMember 3")
        await emu.wait_for(lambda: emu.list("pods", NS) == [], 4.0)
        assert min_member(emu, SHARED) == 3


async def test_a_cronjob_run_counts_in_a_shared_group_while_it_runs(emu):
    emu.put(podgroup(SHARED, 1))
    deploy_with_pods(emu, "app-server", 1, group=SHARED)
    cron = emu.put({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "batch", "namespace": NS},
                    "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"parallelism": 2, "template": {
                        "metadata": {"labels": {LABEL: SHARED}},
                        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}})
    async with running_grouper(emu):
        run = emu.put({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "batch-1", "namespace": NS, "ownerReferences": [owner_ref(cron)]},
                       "spec": {"parallelism": 2, "template": {"metadata": {"labels": {LABEL: SHARED}}, "spec": {
                           "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 3, 2.0)
        emu.patch_object("jobs", NS, "batch-1", {"status": {"completionTime": "2026-01-01T00:00:00Z",
                                                          "conditions": [{"type": "Complete", "status": "True"}]}})
        await emu.wait_for(lambda: min_member(emu, SHARED) == 1, 2.0)
        assert run["metadata"]["name"] == "batch-1"


async def test_a_finished_cronjob_run_in_a_shared_group_does_not_shield_the_rest_from_staleness(emu):
    # seed 003's shared group plus a batch CronJob: the finished run's Succeeded pods stay
    # (job history) but no longer count, in minMember or in the gang; a Deployment losing
    # a member afterwards is a stale gang like any other
    emu.put(podgroup(SHARED, 2))
    for name in ("app-server", "model-1"):
        deploy_with_pods(emu, name, 1, group=SHARED)
    cron = emu.put({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "batch", "namespace": NS},
                    "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"parallelism": 1, "template": {
                        "metadata": {"labels": {LABEL: SHARED}},
                        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}})
    run = emu.put({"apiVersion": "batch/v1", "kind": "Job",
                   "metadata": {"name": "batch-1", "namespace": NS, "ownerReferences": [owner_ref(cron)]},
                   "spec": {"parallelism": 1, "template": {"metadata": {"labels": {LABEL: SHARED}}, "spec": {
                       "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}},
                   "status": {"completionTime": "2026-01-01T00:00:00Z",
                              "conditions": [{"type": "Complete", "status": "True"}]}})
    emu.put(pod("batch-1-x", owner=run, group=SHARED, phase="Succeeded"))
    async with running_grouper(emu, staleness_grace_period=0.3):
        await emu.wait_for(lambda: min_member(emu, SHARED) == 2, 2.0)
        victim = [p for p in emu.list("pods", NS) if p["metadata"]["name"].startswith("app-server")][0]
        emu.delete("pods", NS, victim["metadata"]["name"])
        await wait_event(emu, "GangStale", "1 of 2 members active, minMember 2")
        await emu.wait_for(lambda: [p["metadata"]["name"] for p in emu.list("pods", NS)] == ["batch-1-x"], 4.0)


async def test_leaderworkerset_groups_and_jobset_group(emu):
    lws = emu.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                   "metadata": {"name": "llm", "namespace": NS},
                   "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {
                       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}})
    sts = emu.put({"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": "llm", "namespace": NS, "ownerReferences": [owner_ref(lws)]},
                   "spec": {"replicas": 2, "template": {"spec": {"schedulerName": "kai-scheduler",
                                                                 "containers": [{"name": "c", "image": "x"}]}}}})
    from podgang.objects import OwnerRef
    from podgang.rules import owned_group_name

    group0 = owned_group_name(OwnerRef.from_dict(owner_ref(lws)), "-group-0")
    emu.put(pod("llm-0", owner=sts, group=group0, labels={"leaderworkerset.sigs.k8s.io/group-index": "0"}))
    jobset = emu.put({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                      "metadata": {"name": "train", "namespace": NS},
                      "spec": {"replicatedJobs": [
                          {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": {
                              "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}},
                          {"name": "driver", "replicas": 1, "template": {"spec": {"parallelism": 1, "template": {
                              "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}},
                      ]}})
    async with running_grouper(emu):
        await emu.wait_for(lambda: min_member(emu, group0) == 4, 2.0)
        assert emu.get("podgroups", NS, group0)["metadata"]["ownerReferences"][0]["kind"] == "LeaderWorkerSet"
        assert emu.get("podgroups", NS, owned_group(sts)) is None  # the LWS's StatefulSet has no group of its own
        # workers: 2 Jobs of 3 pods, each a replica counted whole (issue 24): a tree of 7 pods at least
        await emu.wait_for(lambda: KAI.min_member(emu.get("podgroups", NS, owned_group(jobset)) or {}) == 7, 2.0)
        spec = emu.get("podgroups", NS, owned_group(jobset))["spec"]
        assert spec["minSubGroup"] == 2 and "minMember" not in spec
        assert {e["name"]: e.get("parent") for e in spec["subGroups"]} == {  # KAI's JobSet tree
            "driver": None, "driver-replica-0": "driver", "workers": None, "workers-replica-0": "workers",
            "workers-replica-1": "workers"}
        emu.patch_object("leaderworkersets", NS, "llm", {"spec": {"leaderWorkerTemplate": {"size": 8}}})
        await emu.wait_for(lambda: min_member(emu, group0) == 8, 2.0)


async def test_a_jobset_whose_initializer_job_finished_is_not_stale(emu):
    # minMember counts every replicatedJob; the finished initializer's Succeeded pod is a
    # Succeeded member of the JobSet's gang (never stale), not a lost one
    jobset = emu.put({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                      "metadata": {"name": "train", "namespace": NS}, "spec": {"replicatedJobs": [
                          {"name": name, "replicas": 1, "template": {"spec": {"parallelism": n, "template": {
                              "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}
                          for name, n in (("init", 1), ("workers", 2))]}})
    group = owned_group(jobset)
    jobs = {}
    for name in ("init", "workers"):
        jobs[name] = emu.put({"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": f"train-{name}-0", "namespace": NS, "ownerReferences": [owner_ref(jobset)]},
            "spec": {"parallelism": 1 if name == "init" else 2, "template": {"spec": {
                "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
    emu.put(pod("train-init-0-a", owner=jobs["init"], group=group))
    for i in range(2):
        emu.put(pod(f"train-workers-0-{i}", owner=jobs["workers"], group=group))
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        # KAI's JobSet tree: its size is its leaves' (KAI.min_member reads a tree's)
        await emu.wait_for(lambda: KAI.min_member(emu.get("podgroups", NS, group) or {}) == 3, 2.0)
        set_phase(emu, "train-init-0-a", "Succeeded")
        emu.patch_object("jobs", NS, "train-init-0", {"status": {
            "completionTime": "2026-01-01T00:00:00Z", "conditions": [{"type": "Complete", "status": "True"}]}})
        await watch_a_while(emu, g, group, 1.0)
        assert_never_stale(emu)


async def test_a_workload_whose_templates_name_two_groups_is_warned_about(emu):
    emu.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": {"name": "confused", "namespace": NS},
             "spec": {"replicas": 1, "leaderWorkerTemplate": {
                 "size": 2,
                 "leaderTemplate": {"metadata": {"labels": {LABEL: "one"}},
                                    "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}},
                 "workerTemplate": {"metadata": {"labels": {LABEL: "two"}},
                                    "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}})
    async with running_grouper(emu):
        ev = await wait_event(emu, "InvalidPodGroupReference", "names different PodGroups")
        assert ev[0]["type"] == "Warning" and ev[0]["involvedObject"]["name"] == "confused"
        assert podgroup_writes(emu) == []


async def test_a_pin_on_a_cronjob_applies_to_each_run(emu):
    cron = emu.put({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {
        "name": "nightly", "namespace": NS, "annotations": {"podgang.io/min-member": "2"}},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"parallelism": 5, "template": {
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}}})
    async with running_grouper(emu):
        run = emu.put({"apiVersion": "batch/v1", "kind": "Job",
                       "metadata": {"name": "nightly-2901", "namespace": NS, "ownerReferences": [owner_ref(cron)]},
                       "spec": {"parallelism": 5, "template": {"spec": {
                           "schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}})
        emu.put(pod("nightly-2901-x", owner=run, group=owned_group(run), phase="Pending", node=None))
        await emu.wait_for(lambda: min_member(emu, owned_group(run)) == 2, 2.0)


async def test_a_leaderworkerset_scaled_down_loses_the_groups_of_its_removed_replicas(emu):
    """Its groups are owned by the LWS, so garbage collection would keep them until the LWS
    is deleted: the grouper deletes a group once its index is gone and no pod names it."""
    lws = emu.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                   "metadata": {"name": "llm", "namespace": NS},
                   "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
                       "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}}}})
    groups = [rules.owned_group_name(OwnerRef.from_dict(owner_ref(lws)), f"-group-{i}") for i in range(3)]
    # a pod of the last group is still there when the scale-down lands
    leader = emu.put(pod("llm-2", owner=lws, group=groups[2], labels={"leaderworkerset.sigs.k8s.io/group-index": "2"}))
    async with running_grouper(emu) as grouper:
        await emu.wait_for(lambda: all(min_member(emu, g) == 2 for g in groups), 2.0)
        emu.patch_object("leaderworkersets", NS, "llm", {"spec": {"replicas": 2}})
        cache = grouper.controller.cache
        await emu.wait_for(lambda: cache.workload("LeaderWorkerSet", f"{NS}/llm")["spec"]["replicas"] == 2, 2.0)
        await grouper.controller.queue.wait_idle()
        assert emu.get("podgroups", NS, groups[2]) is not None, "a pod still names it"
        emu.delete("pods", NS, leader["metadata"]["name"])
        await emu.wait_for(lambda: emu.get("podgroups", NS, groups[2]) is None, 2.0)
        assert [emu.get("podgroups", NS, g) is not None for g in groups[:2]] == [True, True]
        (retired,) = await eventually(lambda: events(emu, "PodGroupRetired"), what="a PodGroupRetired event")
        assert retired["message"] == (f"deleted PodGroup {groups[2]}: leaderworkerset llm no longer has it and no "
                                      f"pod names it")


async def test_a_workload_only_partly_in_scope_is_warned_about_once(emu):
    emu.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": {"name": "half", "namespace": NS},
             "spec": {"replicas": 1, "leaderWorkerTemplate": {
                 "size": 4,
                 "leaderTemplate": {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}},
                 "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}})
    async with running_grouper(emu):
        (warning,) = await eventually(lambda: events(emu, "GangNeverComplete"), what="a GangNeverComplete warning")
    assert warning["type"] == "Warning" and warning["involvedObject"]["kind"] == "LeaderWorkerSet"
    assert "its gang can never be complete" in warning["message"]


async def test_subgroup_labels_an_earlier_podgang_gave_the_pods_of_a_one_part_group_are_taken_off(emu):
    """An earlier podgang labelled every pod of a hand-made group with a subgroup (its
    workload's name, or standalone), also where the group lists none — and KAI ignores such
    a pod (seed 003 never started). The grouper takes those labels off; a label the pod's
    own template sets is the user's and stays."""
    emu.put(podgroup("app-with-models", 3))
    for name in ("app-server", "model-1"):
        emu.put(pod(name, group="app-with-models", labels={"kai.scheduler/subgroup-name": "standalone"}))
    emu.put(podgroup("other", 1))
    dep = deployment("model-2", 1, group="other")
    dep["spec"]["template"]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "mine"
    dep = emu.put(dep)
    rs = emu.put(replicaset(dep))
    emu.put(pod("model-2-abc12-0", owner=rs, group="other", labels={"kai.scheduler/subgroup-name": "mine"}))
    async with running_grouper(emu) as g:
        for name in ("app-server", "model-1"):
            await emu.wait_for(lambda name=name: "kai.scheduler/subgroup-name" not in
                               emu.get("pods", NS, name)["metadata"]["labels"], 3.0, f"{name} kept its label")
        await asyncio.wait_for(g.controller.queue.wait_idle(), 5)  # group "other" was looked at too
        assert emu.get("pods", NS, "model-2-abc12-0")["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "mine"


async def test_the_pods_of_a_skipped_owner_are_never_backfilled_nor_counted(emu):
    """podgang.io/skip on a Deployment: the webhook leaves its pods alone, and so does the
    grouper, whatever group they come to name (KAI's own pod-grouper gives them one)."""
    dep = emu.put(deployment("legacy", 2, labels={"podgang.io/skip": "true"}))
    rs = emu.put(replicaset(dep))
    emu.put(pod("legacy-abc12-0", owner=rs))  # as admitted: no group
    emu.put(pod("legacy-abc12-1", owner=rs, annotations={ANN: "pg-legacy-abc12-1-kai"}))  # KAI's own
    emu.put(podgroup("pg-legacy-abc12-1-kai", 1))
    async with running_grouper(emu) as g:
        await asyncio.wait_for(g.controller.queue.wait_idle(), 5)
        assert not emu.find_requests("PATCH", r"/pods/")
        assert podgroup_writes(emu) == []
        assert not events(emu, "Backfilled")


# ---------------------------------------------------------------------------- namespaces being deleted


def namespace(name: str = NS, *, deleting: bool = False) -> dict:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}, "status": {"phase": "Active"}}
    if deleting:  # what `kubectl delete namespace` leaves until the namespace controller is done
        ns["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        ns["status"]["phase"] = "Terminating"
    return ns


def creates(emu, ns: str) -> list:
    return emu.find_requests("POST", rf"/namespaces/{ns}/podgroups$")


def logged(caplog, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "fields", {}).get("action") == action]


async def test_a_namespace_being_deleted_lets_its_gangs_go(emu, caplog):
    """Its members go on purpose: the gang is not stale, the rest is not evicted, and nothing
    new is written there. A namespace of the same name made again is grouped as any other."""
    caplog.set_level(logging.INFO, logger="podgang.grouper")
    emu.put(namespace())
    dep, _, pods = deploy_with_pods(emu, "gang", 3)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await emu.wait_for(lambda: logged(caplog, "placed"), 3.0, "the gang was never placed")
        emu.put(namespace(deleting=True))
        record = await emu.wait_for(lambda: logged(caplog, "namespace-deleted"), 3.0, "no namespace-deleted log")
        assert record[0].fields["namespace"] == NS and record[0].fields["groups"] == 1
        for p in pods[:2]:  # the namespace controller deletes them, and the group
            emu.delete("pods", NS, p["metadata"]["name"])
        emu.delete("podgroups", NS, group)
        start = g.controller.reconciles
        await emu.wait_for(lambda: g.controller.reconciles > start, 3.0, "the group was not looked at again")
        await watch_a_while(emu, g, group, 1.0)  # three grace periods
        assert_never_stale(emu)
        assert emu.get("pods", NS, pods[2]["metadata"]["name"]) is not None
        assert emu.get("podgroups", NS, group) is None and len(creates(emu, NS)) == 1  # only the first
        assert not g.controller.tracker.stale_groups()
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        emu.delete("pods", NS, pods[2]["metadata"]["name"])
        emu.delete("namespaces", None, NS)
        await emu.wait_for(lambda: not g.controller.being_deleted(NS), 3.0, "the namespace was never let go")
        emu.put(namespace())
        again, _, _ = deploy_with_pods(emu, "again", 2)
        await emu.wait_for(lambda: min_member(emu, owned_group(again)) == 2, 3.0)


async def test_a_grouper_that_may_not_read_namespaces_works_and_takes_the_apiservers_word(emu, caplog):
    """Without the right to list namespaces the grouper still syncs and groups; a create the
    apiserver refuses because the namespace is being deleted is neither retried nor warned about."""
    caplog.set_level(logging.INFO)
    emu.fail("GET", r"^/api/v1/namespaces$", 403, times=None)
    emu.put(namespace(deleting=True))
    emu.put(namespace("other"))
    doomed, _, _ = deploy_with_pods(emu, "doomed", 2)
    fine, _, _ = deploy_with_pods(emu, "fine", 2, ns="other")
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, owned_group(fine), ns="other") == 2, 3.0)
        await emu.wait_for(lambda: creates(emu, NS), 3.0, "no create tried")
        await watch_a_while(emu, g, owned_group(doomed), 1.5)  # past the first retry's 1s
        assert len(creates(emu, NS)) == 1 and emu.get("podgroups", NS, owned_group(doomed)) is None
        assert not events(emu, "PodGroupWriteFailed") and not events(emu, "GangStale")
        warned = [r for r in caplog.records if r.levelno >= logging.WARNING]  # once, however often it is retried
        assert len(warned) == 1 and warned[0].fields["resource"] == "namespaces", caplog.text


async def test_a_scheduler_installed_after_the_grouper_started_is_watched_from_its_first_group(emu):
    """KAI's PodGroup CRD installed while the grouper runs: the first group the grouper creates
    tells it the kind is served, and it watches the groups from then on (a user's change to one
    is seen), not from its next probe 10 minutes on."""
    emu.remove_crd("podgroups.scheduling.run.ai")
    async with running_grouper(emu) as g:
        [informer] = g.controller.podgroup_informers["kai"]
        await emu.wait_for(lambda: informer.absent, 5.0, "the missing CRD was never noticed")
        emu.add_crd("podgroups.scheduling.run.ai")
        dep, _, _ = deploy_with_pods(emu, "late", 2)
        await emu.wait_for(lambda: min_member(emu, owned_group(dep)) == 2, 5.0, "no group created")
        await emu.wait_for(lambda: not informer.absent, 10.0, "the served CRD is still not watched")
        emu.patch_object("podgroups", NS, owned_group(dep), {"spec": {"minMember": 5}})  # someone else's write
        await emu.wait_for(lambda: min_member(emu, owned_group(dep)) == 2, 5.0, "the change was not seen")
