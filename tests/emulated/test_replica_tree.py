"""Gangs of complete multi-pod replicas (issue 24, seed 004 in full): the tree of a gang —
root → roles → replicas — as the one pure function the webhook, the grouper and
``podgang plan`` use builds it, and as KAI's CRD accepts it."""

from __future__ import annotations

import jsonschema
import yaml
from hypothesis import given, settings as hsettings, strategies as st

from podgang import kinds, rules
from podgang.backends import GangSpec
from podgang.backends.base import min_pods, tree_shape
from podgang.backends.kai import KAI
from podgang.backends.volcano import VOLCANO
from podgang.gang import stale
from podgang.gang import Cache
from podgang.gang import desired_group, plan_writes
from podgang.settings import DEFAULT
from tests.grouper_support import NS, deployment, events, owner_ref, pod, podgroup, running_grouper, template, uid
from tests.emulator import merge_patch
from tests.emulated.test_grouper_emulator import wait_event
from tests.unit.test_grouper_units import feed, remove
from tests.unit.test_plan_cli import plan, write
from tests.unit.test_subgroups import schema

SUBGROUP = KAI.subgroup_label
MIN_AVAILABLE = DEFAULT.min_available_annotation
LWS_NAME, GROUP_INDEX, WORKER_INDEX = ("leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index",
                                       "leaderworkerset.sigs.k8s.io/worker-index")


def kai_schema() -> dict:
    return schema("scheduling.run.ai_podgroups.yaml", KAI.podgroup.version)


def lws(name: str, replicas: int, size: int, *, group: str | None = "shared", min_available: str | None = None,
        subgroup: str | None = None) -> dict:
    """A LeaderWorkerSet as its CRD takes it (no leaderTemplate: the workers' template for all)."""
    worker = template(group, labels={"app": name})
    if subgroup:
        worker["metadata"]["labels"][SUBGROUP] = subgroup
    md = {"name": name, "namespace": NS, "uid": uid(), "generation": 1}
    if min_available:
        md["annotations"] = {MIN_AVAILABLE: min_available}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": md,
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": worker}},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas}}


def lws_pods(workload: dict, *, group: str | None = "shared", replicas: range | None = None) -> tuple[list, list]:
    """The owners and pods the LWS controller makes: a leader StatefulSet owned by the LWS
    whose pods lead the groups, per leader a worker StatefulSet it owns, with LWS's labels."""
    name = workload["metadata"]["name"]
    size = workload["spec"]["leaderWorkerTemplate"]["size"]
    leaders = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": NS, "uid": uid(), "ownerReferences": [owner_ref(workload)]},
               "spec": {"replicas": workload["spec"]["replicas"]}}
    owners, pods = [leaders], []
    for g in replicas if replicas is not None else range(workload["spec"]["replicas"]):
        labels = {LWS_NAME: name, GROUP_INDEX: str(g), WORKER_INDEX: "0"}
        leader = pod(f"{name}-{g}", owner=leaders, group=group, labels=labels)
        workers = {"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": f"{name}-{g}", "namespace": NS, "uid": uid(),
                                "ownerReferences": [owner_ref(leader)]}, "spec": {"replicas": size - 1}}
        owners.append(workers)
        pods.append(leader)
        for w in range(1, size):
            pods.append(pod(f"{name}-{g}-{w}", owner=workers, group=group, labels={**labels, WORKER_INDEX: str(w)}))
    return owners, pods


def tree(desired) -> list[tuple]:
    return [s.shape for s in desired.subgroups]


# ---------------------------------------------------------------------------- the tree, per mix


def test_two_lws_roles_are_a_tree_of_complete_replicas_in_their_shared_group():
    cache = Cache()
    prefill, decode = lws("prefill", 2, 2), lws("decode", 2, 2)
    feed(cache, prefill, decode, podgroup("shared", 1))
    # no pods made yet: each role one part needing its minimum's pods, no leaf (KAI would place a
    # replica's first pods alone) — and never a parent without leaves, which KAI takes for no part:
    # the role made first would take the room while the other's pods are being made
    assert tree(desired_group(cache, f"{NS}/shared")) == [("decode", 2, None, False), ("prefill", 2, None, False)]
    first, _ = lws_pods(prefill)
    feed(cache, *first)  # prefill's owners only, no pod yet: decode is still a part the gang waits for
    for workload in (prefill, decode):
        owners, pods = lws_pods(workload)
        waiting = [{**p, "spec": {k: v for k, v in p["spec"].items() if k != "nodeName"}, "status": {"phase": "Pending"}}
                   for p in pods[:-1]]
        feed(cache, *owners, *waiting)
        assert f"{workload['metadata']['name']}-1" not in [s.name for s in desired_group(cache, f"{NS}/shared").subgroups]
        feed(cache, *pods)  # its last worker made (and the pods placed since): replica 1 is listed
    desired = desired_group(cache, f"{NS}/shared")
    assert tree(desired) == [("decode", 1, None, True), ("decode-0", 2, "decode", False), ("decode-1", 2, "decode", False),
                             ("prefill", 1, None, True), ("prefill-0", 2, "prefill", False),
                             ("prefill-1", 2, "prefill", False)]
    assert desired.min_subgroup == 2  # every role required
    assert desired.min_member.value == 4  # one complete replica of each
    [write] = plan_writes(desired, cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert write.action == "patch-subgroups"
    # the root loses its minMember (KAI refuses both), and podgang is the one evictor
    assert write.body["spec"]["minMember"] is None and write.body["spec"]["minSubGroup"] == 2
    assert write.body["spec"]["stalenessGracePeriod"] == "-1s"
    after = merge_patch(cache.podgroups.of(KAI, f"{NS}/shared"), write.body)
    jsonschema.validate(after, kai_schema())
    assert "minMember" not in after["spec"]
    assert after["spec"]["subGroups"][:3] == [{"name": "decode", "minSubGroup": 1},
                                              {"name": "decode-0", "parent": "decode", "minMember": 2},
                                              {"name": "decode-1", "parent": "decode", "minMember": 2}]
    feed(cache, after)
    assert plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT) == []
    assert KAI.min_member(after) == 4


def test_lws_and_deployment_share_a_group_as_a_role_of_replicas_and_a_flat_part():
    cache = Cache()
    dep = deployment("decode", 3, group="shared", annotations={MIN_AVAILABLE: "2"})
    prefill = lws("prefill", 3, 4, min_available="2")
    feed(cache, prefill, dep, podgroup("shared", 1), *(obj for part in lws_pods(prefill) for obj in part))
    desired = desired_group(cache, f"{NS}/shared")
    assert tree(desired) == [("decode", 2, None, False), ("prefill", 2, None, True),
                             *((f"prefill-{i}", 4, "prefill", False) for i in range(3))]
    assert desired.min_subgroup == 2 and desired.min_member.value == 2 + 2 * 4
    assert "complete replicas" in desired.subgroups[1].reason


def test_a_lone_lws_asking_for_complete_replicas_is_one_group_with_a_leaf_per_replica():
    cache = Cache()
    workload = lws("serve", 3, 2, group=None, min_available="2")
    name = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))  # no -group-N: one gang
    owners, pods = lws_pods(workload, group=name)  # as admitted
    feed(cache, workload, *owners, *pods)
    assert cache.group_owner_workload(f"{NS}/{name}") is not None
    desired = desired_group(cache, f"{NS}/{name}")
    assert tree(desired) == [(f"serve-{i}", 2, None, False) for i in range(3)]
    assert desired.min_subgroup == 2 and desired.min_member.value == 4
    [create] = plan_writes(desired, None, DEFAULT)
    jsonschema.validate(create.body, kai_schema())
    assert create.body["spec"]["minSubGroup"] == 2 and "minMember" not in create.body["spec"]
    assert create.body["spec"]["stalenessGracePeriod"] == "-1s"
    # each pod joins that one group, in its replica's leaf, from its owners alone (the webhook's decision)
    for p in pods:
        chain, complete = cache.owner_chain(p)
        assert complete
        gang = rules.gang_for_pod(rules.without_membership(p, DEFAULT), chain)
        assert (gang.name, gang.subgroup) == (name, f"serve-{p['metadata']['labels'][GROUP_INDEX]}")


def test_a_lone_lws_without_it_keeps_one_group_per_replica():
    cache = Cache()
    workload = lws("serve", 2, 2, group=None)
    owners, pods = lws_pods(workload, group=None)
    feed(cache, workload, *owners, *pods)
    base = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))
    for i in range(2):  # each group KAI's way: its leader and its workers, no tree of replicas
        desired = desired_group(cache, f"{NS}/{base}-group-{i}")
        assert [(s.name, s.min_member, s.parent) for s in desired.subgroups] == [("leader", 1, None), ("workers", 1, None)]
        assert desired.min_subgroup is None and desired.min_member.value == 2
    chain, _ = cache.owner_chain(pods[3])
    gang = rules.gang_for_pod(rules.without_membership(pods[3], DEFAULT), chain)
    assert gang.name == f"{base}-group-1" and gang.subgroup == "workers"


def test_a_pod_of_a_shared_lws_carries_its_replica_leaf_whatever_its_template_says():
    cache = Cache()
    prefill = lws("llm-prefill", 2, 2, subgroup="prefill")
    owners, pods = lws_pods(prefill)
    feed(cache, prefill, *owners, *pods)
    for p in pods:
        chain, _ = cache.owner_chain(p)
        p["metadata"]["labels"][SUBGROUP] = "prefill"  # what the template gives every pod
        gang = rules.gang_for_pod(p, chain)
        assert gang.subgroup == f"prefill-{p['metadata']['labels'][GROUP_INDEX]}"
        again = {**p, "metadata": {**p["metadata"], "labels": {**p["metadata"]["labels"], SUBGROUP: gang.subgroup}}}
        assert rules.gang_for_pod(again, chain).subgroup == gang.subgroup  # stable on a second look
        assert rules.gang_for_pod(again, []).subgroup == gang.subgroup  # and without its owners


def test_scaling_an_lws_adds_its_new_replicas_leaf_and_removes_it_again():
    cache = Cache()
    prefill, decode = lws("prefill", 2, 2), lws("decode", 2, 2)
    feed(cache, prefill, decode, podgroup("shared", 1), *(obj for w in (prefill, decode) for part in lws_pods(w)
                                                          for obj in part))
    [write] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    feed(cache, merge_patch(cache.podgroups.of(KAI, f"{NS}/shared"), write.body))
    decode["spec"]["replicas"] = 3
    feed(cache, decode)
    feed(cache, *(obj for part in lws_pods(decode, replicas=range(2, 3)) for obj in part))  # its pods, as made
    desired = desired_group(cache, f"{NS}/shared")
    [write] = plan_writes(desired, cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    names = [e["name"] for e in write.body["spec"]["subGroups"]]
    assert "decode-2" in names and write.body["spec"]["minSubGroup"] == 2  # what was asked stays
    feed(cache, merge_patch(cache.podgroups.of(KAI, f"{NS}/shared"), write.body))
    pods = [p for p in cache.pods.values() if p["metadata"]["name"].startswith("decode-2")]
    decode["spec"]["replicas"] = 2
    feed(cache, decode)
    # scaled back: decode-2's leaf stays while its pods do (KAI would ignore them without it) ...
    assert plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT) == []
    for p in pods:
        remove(cache, p)
    # ... and goes with them
    [write] = plan_writes(desired_group(cache, f"{NS}/shared"), cache.podgroups.of(KAI, f"{NS}/shared"), DEFAULT)
    assert "decode-2" not in [e["name"] for e in write.body["spec"]["subGroups"]]


def test_a_leaf_name_too_long_keeps_its_head_and_a_hash():
    assert rules.leaf_name("prefill", 12) == "prefill-12"
    long_a, long_b = "a" * 70, "a" * 69 + "b"
    for role in (long_a, long_b, "x" * 63):
        leaf = rules.leaf_name(role, 7)
        assert len(leaf) <= 63 and leaf.endswith("-7") and rules._DNS_LABEL.fullmatch(leaf)
    assert rules.leaf_name(long_a, 7) != rules.leaf_name(long_b, 7)


def test_volcano_gets_the_sum_and_is_told_what_is_lost():
    # a backend without trees gets each LWS as one flat part: its minimum replicas' pods, from any replicas
    subgroups, _ = rules.shared_subgroups([lws("prefill", 2, 2), lws("decode", 3, 2)], {}, DEFAULT, holds_trees=False)
    assert [s.shape for s in subgroups] == [("decode", 2, None, False), ("prefill", 2, None, False)]
    assert VOLCANO.build_podgroup(GangSpec("g", NS, 4, subgroups=subgroups))["spec"]["minTaskMember"] == {
        "decode": 2, "prefill": 2}


# ---------------------------------------------------------------------------- every tree KAI's CRD takes

names = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True)


@hsettings(max_examples=60, deadline=None)
@given(roles=st.lists(st.tuples(names, st.integers(0, 6), st.integers(1, 5), st.one_of(st.none(), st.integers(1, 4)),
                                st.booleans()), min_size=1, max_size=4, unique_by=lambda r: r[0]))
def test_every_tree_podgang_writes_is_one_kais_crd_accepts(roles):
    workloads = []
    for name, replicas, size, minimum, is_lws in roles:
        if is_lws:
            workloads.append(lws(name, replicas, size, min_available=str(minimum) if minimum else None))
        else:
            workloads.append(deployment(name, replicas, group="shared",
                                        annotations={MIN_AVAILABLE: str(minimum)} if minimum else None))
    subgroups, problems = rules.shared_subgroups(workloads, {}, DEFAULT)
    if not subgroups:
        return  # names that clash (a leaf named like another role): said, and no subgroups
    root = rules.root_min_subgroup(subgroups)
    pg = KAI.build_podgroup(GangSpec("shared", NS, max(min_pods(subgroups, root), 1), subgroups=subgroups,
                                     min_subgroup=root))
    jsonschema.validate(pg, kai_schema())
    spec = pg["spec"]
    assert not ("minMember" in spec and "minSubGroup" in spec)
    entries = spec["subGroups"]
    listed = [e["name"] for e in entries]
    assert len(listed) == len(set(listed))
    for e in entries:
        assert not ("minMember" in e and "minSubGroup" in e)
        assert len(e["name"]) <= 63
        assert e.get("parent") is None or e["parent"] in listed
    # read back, it is the same tree, and a patch of it onto a flat group is too
    read_root, read = KAI.subgroup_tree_of(pg)
    assert tree_shape(read, read_root) == tree_shape(subgroups, root)
    flat = {"spec": {"minMember": 3}}
    patched = merge_patch(flat, KAI.subgroups_patch(flat, subgroups, root))
    jsonschema.validate({**pg, "spec": patched["spec"]}, kai_schema())
    assert not ("minMember" in patched["spec"] and "minSubGroup" in patched["spec"])


# ---------------------------------------------------------------------------- staleness by the tree


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def replicas(*active: int, pods: int = 2, role: str = "decode") -> list[stale.ReplicaCount]:
    return [stale.ReplicaCount(f"{role}-{i}", role, pods, a) for i, a in enumerate(active)]


def test_a_broken_replica_loses_its_remaining_pods_after_the_grace_period_and_no_other():
    clock = Clock()
    tracker = stale.BrokenReplicaTracker(clock)
    assert tracker.observe("g", replicas(2, 2), settling=False, grace_period=60) == []
    [broken] = tracker.observe("g", replicas(2, 1), settling=False, grace_period=60)
    assert (broken.leaf, broken.action, broken.deadline) == ("decode-1", stale.STALE, 1060.0)
    assert "decode-1 of role decode: 1 of its 2 pods active" in broken.message
    clock.now = 1059
    assert [v.action for v in tracker.observe("g", replicas(2, 1), settling=False, grace_period=60)] == [stale.WAITING]
    clock.now = 1060
    [evict] = tracker.observe("g", replicas(2, 1), settling=False, grace_period=60)
    assert (evict.leaf, evict.action) == ("decode-1", stale.EVICT)
    tracker.evicted("g", "decode-1")
    assert tracker.observe("g", replicas(2, 0), settling=False, grace_period=60) == []


def test_a_replica_being_placed_rolled_or_replaced_whole_is_not_broken():
    clock = Clock()
    tracker = stale.BrokenReplicaTracker(clock)
    # placed leader first (LWS LeaderReady), its workers later: never complete yet
    assert tracker.observe("g", replicas(1, 0), settling=False, grace_period=0) == []
    assert tracker.observe("g", replicas(2, 2), settling=False, grace_period=0) == []
    # a rolling update replaces a replica: its workload is settling
    assert tracker.observe("g", replicas(2, 1), settling=True, grace_period=0) == []
    assert tracker.observe("g", replicas(2, 1), settling=False, grace_period=0) == []  # the new one, being placed
    assert tracker.observe("g", replicas(2, 2), settling=False, grace_period=0) == []
    # all its pods gone at once (LWS recreates a group whole): nothing holds resources
    assert tracker.observe("g", replicas(2, 0), settling=False, grace_period=0) == []
    assert tracker.observe("g", replicas(2, 1), settling=False, grace_period=0) == []


def test_a_broken_replica_that_recovers_in_time_is_said_and_kept():
    clock = Clock()
    tracker = stale.BrokenReplicaTracker(clock)
    tracker.observe("g", replicas(2, 2), settling=False, grace_period=60)
    tracker.observe("g", replicas(2, 1), settling=False, grace_period=60)
    assert tracker.is_broken("g", "decode-1") and not tracker.is_broken("g", "decode-0")
    [back] = tracker.observe("g", replicas(2, 2), settling=False, grace_period=60)
    assert back.action == stale.RECOVERED and "decode-1" in back.message
    assert not tracker.is_broken("g", "decode-1")  # its eviction, were one retrying, stops


def test_a_role_below_its_minimum_of_complete_replicas_makes_the_gang_stale_naming_it():
    clock = Clock()
    tracker = stale.StaleGangTracker(clock)
    roles = lambda prefill, decode: (stale.SubgroupCount("prefill", 1, prefill, True),  # noqa: E731
                                     stale.SubgroupCount("decode", 1, decode, True))
    obs = lambda active, prefill, decode: stale.GangObservation(  # noqa: E731
        "ns/g", 4, active, 0, False, 60.0, subgroups=roles(prefill, decode))
    assert tracker.observe(obs(6, 1, 2)).action == stale.NONE
    # one decode replica broken: the role still has 1 complete, the gang is not stale
    assert tracker.observe(obs(5, 1, 1)).action == stale.NONE
    verdict = tracker.observe(obs(2, 1, 0))  # every decode replica lost
    assert verdict.action == stale.STALE and "role decode: 0 of minimum 1 complete replicas" in verdict.message


def test_elsewhere_a_lone_lws_keeps_a_gang_per_replica_and_is_told_what_is_not_held():
    volcano = DEFAULT.with_changes(backends=(("kai-scheduler", VOLCANO),))
    cache = Cache(settings=volcano)
    workload = lws("serve", 3, 2, group=None, min_available="2")
    feed(cache, workload)
    base = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))
    desired = desired_group(cache, f"{NS}/{base}-group-0")
    assert desired.source == "owner" and desired.min_member.value == 2 and desired.subgroups == ()
    [said] = [p for p in desired.problems if "not held" in p]
    assert "the volcano backend cannot say" in said and "each replica stays a gang of its own" in said


# ---------------------------------------------------------------------------- podgang plan

SERVE = """\
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: serve, namespace: llm}
spec: {minMember: 1, queue: team}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: prefill, namespace: llm}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      metadata: {labels: {kai.scheduler/podgroup: serve}}
      spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: decode, namespace: llm, annotations: {podgang.io/min-available: "2"}}
spec:
  replicas: 3
  leaderWorkerTemplate:
    size: 4
    workerTemplate:
      metadata: {labels: {kai.scheduler/podgroup: serve}}
      spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
---
apiVersion: scheduling.run.ai/v2alpha2
kind: PodGroup
metadata: {name: mine, namespace: llm}
spec:
  minSubGroup: 1
  queue: team
  subGroups: [{name: web, minMember: 2}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: llm}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web, kai.scheduler/podgroup: mine}}
    spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
"""


def test_plan_draws_the_tree_and_writes_it_as_kai_takes_it_and_leaves_a_users_tree(tmp_path):
    path = write(tmp_path, "serve.yaml", SERVE)
    text = plan(path).stdout
    assert "llm/serve  minSubGroup 2 (≥ 10 pods)" in text
    assert "├ decode       2 of 3 complete replicas  [podgang.io/min-available=2 complete replicas on " \
           "leaderworkerset/decode]" in text
    assert "│ ├ decode-0     minimum 4  [replica 0: leaderWorkerTemplate.size 4 per group]" in text
    assert "└ prefill      1 of 2 complete replicas  [1 complete replica of leaderworkerset/prefill (the default)]" in text
    assert "its subgroup tree as written: podgang changes none of its fields" in text
    assert "KAI v0.17 judges a tree stale when any leaf is below its minMember" in text  # mine: KAI would evict it
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(plan(path, "-o", "yaml").stdout) if d}
    for doc in docs.values():
        jsonschema.validate(doc, kai_schema())
    assert docs["serve"]["spec"]["minSubGroup"] == 2 and "minMember" not in docs["serve"]["spec"]
    assert docs["mine"]["spec"] == {"minSubGroup": 1, "queue": "team", "subGroups": [{"name": "web", "minMember": 2}]}


# ---------------------------------------------------------------------------- the grouper, on the emulator


async def test_the_grouper_evicts_a_broken_replica_alone_and_a_role_without_its_minimum_whole(emu):
    group = podgroup("serve", 1)
    emu.put(group)
    for name in ("prefill", "decode"):
        workload = emu.put(lws(name, 2, 2, group="serve"))
        owners, pods = lws_pods(workload, group="serve")
        for obj in (*owners, *pods):
            if obj["kind"] == "Pod":  # in its replica's leaf, as the webhook admits it
                obj["metadata"]["labels"][SUBGROUP] = f"{name}-{obj['metadata']['labels'][GROUP_INDEX]}"
            emu.put(obj)
    async with running_grouper(emu, staleness_grace_period=0.3):
        await emu.wait_for(lambda: (emu.get("podgroups", NS, "serve")["spec"].get("minSubGroup") == 2), 5.0)
        emu.delete("pods", NS, "prefill-1-1")  # one worker of a replica above prefill's minimum
        await wait_event(emu, "ReplicaBroken", "replica prefill-1 of role prefill: 1 of its 2 pods active")
        await wait_event(emu, "ReplicaEvicted", "prefill-1")
        await emu.wait_for(lambda: emu.get("pods", NS, "prefill-1") is None, 5.0)
        left = {p["metadata"]["name"] for p in emu.list("pods", NS)}
        assert left == {"prefill-0", "prefill-0-1", "decode-0", "decode-0-1", "decode-1", "decode-1-1"}
        assert not events(emu, "GangStale")
        for name in ("decode-0", "decode-0-1", "decode-1", "decode-1-1"):  # every decode replica lost
            emu.delete("pods", NS, name)
        # the role's pods all gone: it is a part needing its pods again (no leaf to KAI), short of them
        stale = await wait_event(emu, "GangStale", "decode: 0 of minimum 2 active")
        assert stale
        await emu.wait_for(lambda: not emu.list("pods", NS), 5.0)  # prefill-0 evicted with the gang


# ---------------------------------------------------------------------------- JobSet


def jobset(workers: int, parallelism: int) -> dict:
    job = lambda n, p: {"name": n, "replicas": 1 if n == "driver" else workers,  # noqa: E731
                        "template": {"spec": {"parallelism": p, "completions": p, "template": {
                            "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                                     "containers": [{"name": "c", "image": "x"}]}}}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "train", "namespace": NS, "uid": uid(), "generation": 1},
            "spec": {"replicatedJobs": [job("driver", 1), job("workers", parallelism)]}}


def test_a_jobsets_replicated_jobs_are_each_a_role_with_a_leaf_per_job_as_kai_writes_them():
    cache = Cache()
    js = jobset(workers=3, parallelism=4)
    feed(cache, js)
    name = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(js)))
    desired = desired_group(cache, f"{NS}/{name}")
    # KAI's JobSet tree: a parent per replicated job needing all its Jobs, a leaf <rj>-replica-<i> per Job
    assert tree(desired) == [("driver", 1, None, True), ("driver-replica-0", 1, "driver", False),
                             ("workers", 3, None, True),
                             *((f"workers-replica-{i}", 4, "workers", False) for i in range(3))]
    assert desired.min_subgroup == 2 and desired.min_member.value == 13
    [create] = plan_writes(desired, None, DEFAULT)
    jsonschema.validate(create.body, kai_schema())
    # a worker pod of Job 2 is in its leaf
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train-workers-2", "namespace": NS,
                                                                 "uid": uid(), "ownerReferences": [owner_ref(js)]}}
    worker = pod("train-workers-2-0-x", owner=job, labels={"jobset.sigs.k8s.io/replicatedjob-name": "workers",
                                                          "jobset.sigs.k8s.io/job-index": "2"})
    gang = rules.gang_for_pod(rules.without_membership(worker, DEFAULT), [job, js])
    assert (gang.name, gang.subgroup, gang.leaf) == (name, "workers-replica-2", True)
    # Jobs of one pod each, or one Job: a tree all the same (KAI's shape whatever the sizes)
    assert [s.shape for s in rules.role_tree(jobset(workers=3, parallelism=1))][2:] == [
        ("workers", 3, None, True), *((f"workers-replica-{i}", 1, "workers", False) for i in range(3))]
    assert [s.shape for s in rules.role_tree(jobset(workers=1, parallelism=4))][2:] == [
        ("workers", 1, None, True), ("workers-replica-0", 4, "workers", False)]


def test_a_pod_in_its_lws_replicas_own_group_gets_its_leader_or_workers_subgroup():
    """Without podgang.io/min-available each LWS replica is its own group, with KAI's subgroups
    ``leader`` and ``workers``: a pod that names it (as admitted) carries the one its worker index
    says, which the group lists (a pod naming a subgroup its group does not list is ignored by KAI)."""
    cache = Cache()
    workload = lws("serve", 2, 2, group=None)
    owners, pods = lws_pods(workload, group=None)
    feed(cache, workload, *owners, *pods)
    base = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(workload)))
    for p in pods:
        named = f"{base}-group-{p['metadata']['labels'][GROUP_INDEX]}"
        p["metadata"]["annotations"]["pod-group-name"] = named
        chain, _ = cache.owner_chain(p)
        gang = rules.gang_for_pod(p, chain)
        leaf = "leader" if p["metadata"]["labels"].get(WORKER_INDEX) == "0" else "workers"
        assert gang.name == named and gang.subgroup == leaf
        assert leaf in {s.name for s in desired_group(cache, f"{NS}/{named}").subgroups}


def test_a_ray_worker_group_of_multi_host_replicas_is_a_role_with_a_leaf_per_replica():
    spec = {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}}
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
           "metadata": {"name": "tpu", "namespace": NS, "uid": uid(), "generation": 1},
           "spec": {"headGroupSpec": {"template": spec}, "workerGroupSpecs": [
               {"groupName": "hosts", "replicas": 3, "minReplicas": 2, "maxReplicas": 4, "numOfHosts": 2,
                "template": spec}]}}
    cache = Cache()
    feed(cache, ray)
    name = rules.owned_group_name(rules.OwnerRef.from_dict(owner_ref(ray)))
    desired = desired_group(cache, f"{NS}/{name}")
    assert tree(desired) == [("headgroup", 1, None, False), ("hosts", 2, None, True),
                             *((f"hosts-{i}", 2, "hosts", False) for i in range(3))]
    assert desired.min_subgroup == 2 and desired.min_member.value == 5  # the head and 2 whole replicas
    host = pod("tpu-hosts-worker-x", owner=ray, labels={"ray.io/group": "hosts",
                                                       "ray.io/worker-group-replica-index": "2"})
    gang = rules.gang_for_pod(rules.without_membership(host, DEFAULT), [ray])
    assert (gang.name, gang.subgroup, gang.leaf) == (name, "hosts-2", True)


def test_a_leader_ready_lws_replica_lists_its_leader_alone_first():
    """LWS startupPolicy LeaderReady makes a replica's workers only once its leader is
    Ready: until then the leaf needs the leader alone, then the whole replica."""
    workload = lws("serve", 2, 3, min_available="1")
    workload["spec"]["startupPolicy"] = "LeaderReady"
    leaves = {s.name: s.min_member for s in rules.replica_tree(workload, DEFAULT, {0: (1, 0), 1: (3, 1)})[1:]}
    assert leaves == {"serve-0": 1, "serve-1": 3}
    leaves = {s.name: s.min_member for s in rules.replica_tree(workload, DEFAULT, {0: (2, 1)})[1:]}
    assert leaves == {"serve-0": 3}  # the leader placed, its workers being made: the whole replica
    workload["spec"]["startupPolicy"] = "LeaderCreated"
    # its leader made, its workers not yet: the replica's leaf needs all its pods (issue 44: a role
    # whose parent has no leaf is no part to KAI, and the other roles would take its room)
    leaves = {s.name: s.min_member for s in rules.replica_tree(workload, DEFAULT, {0: (1, 0)})[1:]}
    assert leaves == {"serve-0": 3}


def test_the_grouper_keeps_what_the_tree_is_made_of():
    workload = lws("serve", 2, 3, min_available="1")
    workload["spec"]["startupPolicy"] = "LeaderReady"
    cache = feed(Cache(), workload)
    [kept] = cache.store_for("LeaderWorkerSet").values()
    assert kinds.replica_units(kept).leader_first and rules.whole_workload_tree(kept)
