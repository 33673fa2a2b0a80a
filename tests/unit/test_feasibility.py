"""The never-placed verdicts (podgang.feasibility), table by table: each verdict raised for
the gangs it holds for, and for no gang that only waits for room. The queues, PriorityClasses
and nodes are written as KAI's own chart and the kit's cluster make them."""

from __future__ import annotations

import io
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from podgang import cli, feasibility, plan_cli
from podgang.backends import KAI
from podgang.backends.base import GangSource
from podgang.backends.coscheduling import COSCHEDULING
from podgang.backends.volcano import VOLCANO
from podgang.gang import judged_settings
from podgang.nodes import node_facts, placement, may_use, slim_node
from podgang.settings import DEFAULT
from podgang.status import Snapshot, build_report, explain_pod
from tests import grouper_support

UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
PRIORITIES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}


def queue(name: str, parent: str | None = None, **resources: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"resources": {r: {**UNLIMITED, **resources.get(r, {})} for r in ("cpu", "gpu", "memory")}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


#: KAI's quickstart queues: a parent and its leaf, every quota 0, no limit
QUICKSTART = [queue("default-parent-queue", cpu={"quota": 0}, gpu={"quota": 0}, memory={"quota": 0}),
              queue("default-queue", "default-parent-queue", cpu={"quota": 0}, gpu={"quota": 0}, memory={"quota": 0})]


def node(name: str, cpu: str = "8", memory: str = "32Gi", gpu: str = "4", labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"taints": taints or []}
    if unschedulable:
        spec["unschedulable"] = True
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": gpu}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"allocatable": allocatable, "capacity": allocatable}}


def facts(queues: list | None = None, nodes: list | None = None, priorities: dict | None = None, backend=KAI):
    found: dict[str, Any] = {
        "PriorityClass": [{"metadata": {"name": n}, "value": v} for n, v in (priorities or PRIORITIES).items()],
        "Node": nodes}
    if queues is not None:
        found["Queue"] = queues
    return backend.cluster_facts(found)


def template(cpu: str = "1", gpu: str | None = None, *, labels: dict | None = None, annotations: dict | None = None,
             priority: str | None = None, **spec: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu}}
    if gpu:
        resources["limits"] = {"nvidia.com/gpu": gpu}
    pod_spec: dict[str, Any] = {"schedulerName": "kai-scheduler", **spec,
                                "containers": [{"name": "main", "image": "x", "resources": resources}]}
    if priority:
        pod_spec["priorityClassName"] = priority
    return {"metadata": {"labels": labels or {}, "annotations": annotations or {}}, "spec": pod_spec}


def deployment(replicas: int, pod: dict[str, Any], labels: dict | None = None) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "uid": "u1", "labels": labels or {}},
            "spec": {"replicas": replicas, "template": pod}}


def judge(replicas: int, pod: dict[str, Any], known, *, kind: str = "Deployment", labels: dict | None = None,
          backend=KAI) -> dict[str, str]:
    owner = {**deployment(replicas, pod, labels), "kind": kind}
    options = backend.gang_options(GangSource((), (pod,), (owner,), known))
    return {v.kind: v.message for v in feasibility.never_placed(backend, options, [(replicas, pod)], known)}


# -- quota: a non-preemptible gang never goes over its queue's quota, nor any parent's


def test_an_inference_deployment_on_kais_quickstart_queues_is_never_placed_and_told_the_fix():
    said = judge(9, template("1"), facts(QUICKSTART, [node("n1"), node("n2")]))
    assert set(said) == {feasibility.OVER_QUOTA}
    message = said[feasibility.OVER_QUOTA]
    assert "priority inference 125" in message and "9 CPU cores" in message
    assert '"default-queue" 0 CPU cores' in message and '"default-parent-queue" 0 CPU cores' in message
    assert "NonPreemptibleOverQuota" in message
    assert "spec.resources.cpu.quota >= 9000" in message and "default-queue, default-parent-queue" in message
    assert "preemptible" in message.split("fix:")[1]


@pytest.mark.parametrize("kind, labels, pod, never", [
    ("Job", {}, template("1"), False),  # KAI's train (50): preemptible, may go over quota
    ("Deployment", {"kai.scheduler/preemptibility": "preemptible"}, template("1"), False),
    ("Job", {"kai.scheduler/preemptibility": "non-preemptible"}, template("1"), True),
    ("Job", {"priorityClassName": "build"}, template("1"), True),  # 100: non-preemptible
    ("Job", {"priorityClassName": "build-preemptible"}, template("1"), False),  # 75
    ("Deployment", {}, template("0"), False),  # requests nothing KAI counts
])
def test_only_a_non_preemptible_gang_is_held_to_its_quota(kind, labels, pod, never):
    said = judge(2, pod, facts(QUICKSTART, [node("n1")]), kind=kind, labels=labels)
    assert (feasibility.OVER_QUOTA in said) is never, said


@pytest.mark.parametrize("leaf, parent, over", [
    ({"quota": 4000}, {"quota": 8000}, None),  # 3 cores fit both
    ({"quota": 2000}, {"quota": -1}, ['"team" 2 CPU cores']),
    ({"quota": -1}, {"quota": 2000}, ['"org" 2 CPU cores']),  # a parent's quota holds too
    ({"quota": 1000}, {"quota": 2000}, ['"team" 1 CPU core', '"org" 2 CPU cores']),
])
def test_the_quota_of_every_queue_up_the_tree_holds(leaf, parent, over):
    queues = [queue("org", cpu=parent), queue("team", "org", cpu=leaf)]
    said = judge(3, template("1"), facts(queues, [node("n1")]), labels={"kai.scheduler/queue": "team"})
    if over is None:
        assert feasibility.OVER_QUOTA not in said, said
    else:
        assert all(q in said[feasibility.OVER_QUOTA] for q in over), said


def test_memory_quota_is_counted_in_kais_megabytes():
    queues = [queue("team", memory={"quota": 1000})]  # 1000 MB = 10^9 bytes
    fits = judge(1, {**template("0"), "spec": {"containers": [{"name": "m", "resources": {"requests": {"memory": "1G"}}}]}},
                 facts(queues, [node("n1")]), labels={"kai.scheduler/queue": "team"})
    over = judge(1, {**template("0"), "spec": {"containers": [{"name": "m", "resources": {"requests": {"memory": "1Gi"}}}]}},
                 facts(queues, [node("n1")]), labels={"kai.scheduler/queue": "team"})
    assert feasibility.OVER_QUOTA not in fits and "1073.742 MB memory" in over[feasibility.OVER_QUOTA]


# -- GPU and GPU fractions, as KAI counts them


@pytest.mark.parametrize("pod, replicas, quota, never", [
    (template("0", "1"), 2, 2, False),
    (template("0", "1"), 3, 2, True),
    (template("0", annotations={"gpu-fraction": "0.5"}), 4, 2, False),  # 4 × 0.5 = 2 GPUs
    (template("0", annotations={"gpu-fraction": "0.5"}), 5, 2, True),
    (template("0", annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}), 3, 2, True),  # 3 × 1
])
def test_gpus_and_gpu_fractions_count_against_the_gpu_quota(pod, replicas, quota, never):
    queues = [queue("team", gpu={"quota": quota})]
    said = judge(replicas, pod, facts(queues, [node("n1", gpu="8")]), labels={"kai.scheduler/queue": "team"})
    assert (feasibility.OVER_QUOTA in said) is never, said


def test_gpu_memory_counts_as_its_share_of_the_largest_gpu_as_kai_counts_it():
    """KAI: count × gpu-memory / the largest GPU memory a node is labelled with (MiB); with
    no node labelled it counts nothing, and nothing is concluded."""
    pod = template("0", annotations={"gpu-memory": "40960"})  # half of the largest GPU: 81920 floored to 81900
    labelled = [node("n1", labels={"nvidia.com/gpu.memory": "81920"}),
                node("n2", labels={"nvidia.com/gpu.memory": "40960"})]
    queues = [queue("team", gpu={"quota": 1})]
    fits = judge(1, pod, facts(queues, labelled), labels={"kai.scheduler/queue": "team"})
    over = judge(2, pod, facts(queues, labelled), labels={"kai.scheduler/queue": "team"})  # 2 × 40960/81900 > 1
    assert feasibility.OVER_QUOTA not in fits and "1.001 GPUs" in over[feasibility.OVER_QUOTA]
    assert not judge(3, pod, facts(queues, [node("n1")]), labels={"kai.scheduler/queue": "team"})


def test_gpu_fractions_share_a_nodes_gpus():
    pod = template("0", annotations={"gpu-fraction": "0.5"})
    assert feasibility.CLUSTER_TOO_SMALL not in judge(8, pod, facts([queue("default-queue")], [node("n1", gpu="4")]))
    said = judge(9, pod, facts([queue("default-queue")], [node("n1", gpu="4")]))
    assert feasibility.CLUSTER_TOO_SMALL in said, said


# -- limit: no gang goes over it, preemptible or not


@pytest.mark.parametrize("limit, never", [(-1, False), (3000, False), (2000, True)])
def test_a_gang_over_its_queues_limit_is_never_placed_preemptible_or_not(limit, never):
    queues = [queue("team", cpu={"limit": limit})]
    said = judge(3, template("1"), facts(queues, [node("n1")]), kind="Job", labels={"kai.scheduler/queue": "team"})
    assert (feasibility.OVER_LIMIT in said) is never, said
    if never:
        assert "spec.resources.cpu.limit >= 3000" in said[feasibility.OVER_LIMIT]
        assert "OverLimit" in said[feasibility.OVER_LIMIT]


# -- the nodes it may use


POOL = {"nodeSelector": {"pool": "a"}, "tolerations": [{"key": "pool", "operator": "Equal", "value": "a",
                                                         "effect": "NoSchedule"}]}
TAINT = [{"key": "pool", "value": "a", "effect": "NoSchedule"}]


def pool_nodes(count: int, cpu: str = "8") -> list[dict[str, Any]]:
    return [node(f"a{i}", cpu=cpu, labels={"pool": "a"}, taints=TAINT) for i in range(count)]


@pytest.mark.parametrize("replicas, cpu, nodes, verdict", [
    (9, "8", pool_nodes(3), feasibility.CLUSTER_TOO_SMALL),  # the 9 × 8 CPU on 3 × 8 CPU
    (3, "8", pool_nodes(3), None),
    (3, "5", pool_nodes(2), feasibility.CLUSTER_TOO_SMALL),  # 16 CPU in all, but one 5-CPU pod per node
    (1, "9", pool_nodes(3), feasibility.POD_TOO_LARGE),
    # other nodes are big, but the gang may not use them: not selected, or tainted against it
    (9, "8", [*pool_nodes(3), *(node(f"b{i}", cpu="64") for i in range(3))], feasibility.CLUSTER_TOO_SMALL),
    (1, "9", [*pool_nodes(1), node("big", cpu="64", labels={"pool": "a"}, taints=[
        {"key": "gpu-only", "value": "yes", "effect": "NoExecute"}])], feasibility.POD_TOO_LARGE),
    (1, "9", [*pool_nodes(1), node("big", cpu="64", labels={"pool": "a"}, taints=TAINT, unschedulable=True)],
     feasibility.POD_TOO_LARGE),  # cordoned
    (1, "9", [*pool_nodes(1), node("big", cpu="64", labels={"pool": "a"}, taints=[
        *TAINT, {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}])], None),
])
def test_a_gang_larger_than_the_nodes_it_may_use_is_never_placed(replicas, cpu, nodes, verdict):
    said = judge(replicas, template(cpu, **POOL), facts([queue("default-queue")], nodes))
    kinds = set(said) & {feasibility.CLUSTER_TOO_SMALL, feasibility.POD_TOO_LARGE}
    assert kinds == ({verdict} if verdict else set()), said


def test_the_message_names_the_nodes_and_what_they_hold():
    said = judge(9, template("8", **POOL), facts([queue("default-queue")], pool_nodes(3)))
    message = said[feasibility.CLUSTER_TOO_SMALL]
    assert "9 pods of cpu 8" in message and "3 such pods" in message and "a0, a1, a2" in message
    assert "nodeSelector pool=a" in message and "add nodes" in message


@pytest.mark.parametrize("terms, fits", [
    ([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}], True),
    ([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]}], False),
    ([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}], True),
    ([{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}], True),
    ([{"matchExpressions": [{"key": "gen", "operator": "Lt", "values": ["3"]}]}], False),
    ([{"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}], False),
])
def test_required_node_affinity_is_honoured(terms, fits):
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}
    said = judge(1, template("1", affinity=affinity), facts([queue("default-queue")],
                                                             [node("n1", labels={"zone": "z1", "gen": "5"})]))
    assert (not said) is fits, said


def test_a_kai_node_pool_limits_the_nodes():
    nodes = [node("p1", cpu="4", labels={"kai.scheduler/node-pool": "small"}), node("p2", cpu="64")]
    pooled = template("8", labels={"kai.scheduler/node-pool": "small"})
    assert feasibility.POD_TOO_LARGE in judge(1, pooled, facts([queue("default-queue")], nodes))
    assert not judge(1, template("8"), facts([queue("default-queue")], nodes))


def test_a_toleration_that_exists_tolerates_every_taint_of_its_key_or_all():
    tainted = node_facts(node("t", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]))
    assert may_use(tainted, placement({"spec": {"tolerations": [{"operator": "Exists"}]}}))
    assert may_use(tainted, placement({"spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}}))
    assert not may_use(tainted, placement({"spec": {"tolerations": [{"key": "k", "value": "w"}]}}))
    assert not may_use(tainted, placement({"spec": {"tolerations": [
        {"key": "k", "value": "v", "effect": "NoExecute"}]}}))


def test_a_node_is_slimmed_to_what_the_verdicts_read():
    raw = node("n1", labels={"a": "b"}, taints=[{"key": "k", "effect": "PreferNoSchedule"},
                                                 {"key": "x", "value": "y", "effect": "NoSchedule"}])
    raw["status"]["conditions"] = [{"type": "Ready", "lastHeartbeatTime": "now"}]
    raw["status"]["images"] = [{"names": ["big"]}]
    slim = slim_node(raw)
    assert slim["spec"] == {"taints": [{"key": "x", "value": "y", "effect": "NoSchedule"}]}
    assert set(slim["status"]) == {"allocatable"} and slim["metadata"]["labels"]["a"] == "b"
    assert node_facts(slim) == node_facts(raw)


# -- what does not exist


def test_a_queue_that_does_not_exist_or_is_not_a_leaf_is_a_verdict():
    known = facts(QUICKSTART, [node("n1")])
    assert feasibility.QUEUE_MISSING in judge(1, template("1"), known, kind="Job", labels={"kai.scheduler/queue": "x"})
    said = judge(1, template("1"), known, kind="Job", labels={"kai.scheduler/queue": "default-parent-queue"})
    assert set(said) == {feasibility.QUEUE_NOT_LEAF}


def test_a_priority_class_its_pods_name_that_does_not_exist_is_a_verdict():
    said = judge(1, template("1", priority="urgent"), facts([queue("default-queue")], [node("n1")]), kind="Job")
    assert set(said) == {feasibility.PRIORITY_CLASS_MISSING}
    assert 'PriorityClass "urgent"' in said[feasibility.PRIORITY_CLASS_MISSING]


# -- nothing is said when nothing is known, or when the gang only waits


def test_nothing_is_concluded_from_facts_not_known():
    pod = template("64", priority="urgent")
    owner = deployment(9, pod)
    unknown = KAI.cluster_facts({"PriorityClass": None, "Queue": None, "Node": None})
    options = KAI.gang_options(GangSource((), (pod,), (owner,), unknown))
    assert feasibility.never_placed(KAI, options, [(9, pod)], unknown) == ()


def test_a_gang_that_only_waits_for_room_gets_no_verdict():
    # room taken by other gangs is not counted: the verdicts compare with what the nodes
    # allocate and the queue's bounds, never with what is free now
    queues = [queue("team", cpu={"quota": 24000})]
    said = judge(3, template("8", **POOL), facts(queues, pool_nodes(3)), labels={"kai.scheduler/queue": "team"})
    assert said == {}


def test_other_backends_judge_the_nodes_too():
    said = judge(9, template("8", **POOL), facts(None, pool_nodes(3), backend=COSCHEDULING), kind="Job",
                 backend=COSCHEDULING)
    assert set(said) == {feasibility.CLUSTER_TOO_SMALL}


def test_counts_give_every_verdict():
    got = feasibility.counts([[feasibility.OVER_QUOTA, feasibility.OVER_LIMIT], [feasibility.OVER_QUOTA]])
    assert got[feasibility.OVER_QUOTA] == 2 and got[feasibility.OVER_LIMIT] == 1
    assert set(got) == set(feasibility.VERDICTS) and got[feasibility.QUEUE_MISSING] == 0


def test_kai_counts_cpu_memory_and_gpus():
    demand = KAI.queue_demand([(2, template("1500m", "1", annotations={}))])
    assert demand == {"cpu": Decimal(3), "gpu": Decimal(2)}


# -- podgang status: NEVER beside the scheduler's own verdict, and --explain's numbers and fix


def quickstart_snapshot(facts_listed: bool = True):
    dep = grouper_support.deployment("web", 2)
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    rs = grouper_support.replicaset(dep)
    group = grouper_support.owned_group(dep)
    pods = [grouper_support.pod(f"web-{i}", owner=rs, phase="Pending", group=group, labels={"app": "web"})
            for i in range(2)]
    pg = grouper_support.podgroup(group, 2, managed=True, owner=dep)
    pg["status"] = {"schedulingConditions": [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True", "transitionID": "0",
        "lastTransitionTime": "2026-11-23T09:42:57Z",
        "reasons": [{"reason": "NonPreemptibleOverQuota", "message": "Non-preemptible workload is over quota"}]}]}
    facts_found = {"priorityclasses.scheduling.k8s.io": [{"metadata": {"name": n}, "value": v}
                                                         for n, v in PRIORITIES.items()],
                   "queues.scheduling.run.ai": QUICKSTART, "nodes": [node("n1"), node("n2")]} if facts_listed else {}
    snapshot = Snapshot(pods, {"kai": [pg]}, {"Deployment": [dep], "ReplicaSet": [rs]}, [],
                        datetime.now(timezone.utc), facts=facts_found)
    return snapshot, group


def test_status_says_never_beside_the_schedulers_verdict_and_explain_gives_the_fix():
    snapshot, group = quickstart_snapshot()
    gang = next(g for g in build_report(snapshot, DEFAULT).gangs if g.name == group)
    assert gang.state == feasibility.NEVER and "over quota" in str(gang.scheduler)  # KAI's own, beside
    assert "never placed: non-preemptible" in gang.state_text and [v.kind for v in gang.never] == [
        feasibility.OVER_QUOTA]
    explained = explain_pod(snapshot, DEFAULT, "team", "web-0")
    said = " ".join(explained.waits_for)
    assert "2 CPU cores" in said and "spec.resources.cpu.quota >= 2000" in said, said


def test_status_without_the_facts_says_waiting():
    snapshot, group = quickstart_snapshot(facts_listed=False)
    gang = next(g for g in build_report(snapshot, DEFAULT).gangs if g.name == group)
    assert gang.state == "waiting" and gang.never == []


# -- podgang plan: the manifests' queues, PriorityClasses and nodes are the facts


def test_plan_says_never_placed_when_the_manifests_give_the_queues_and_nodes(tmp_path):
    dep = {**deployment(3, template("8")), "metadata": {"name": "web", "namespace": "team"}}
    dep["spec"]["selector"] = {"matchLabels": {"app": "web"}}
    dep["spec"]["template"]["metadata"]["labels"] = {"app": "web"}
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
               for n, v in PRIORITIES.items()]
    path = tmp_path / "all.yaml"

    def planned(docs: list) -> str:
        path.write_text(yaml.safe_dump_all(docs))
        parser, _ = cli.command_parser("plan")
        out, err = io.StringIO(), io.StringIO()
        assert plan_cli.run(parser.parse_args([str(path)]), out, err) == 0, err.getvalue()
        return out.getvalue()

    said = planned([*QUICKSTART, *classes, node("n1"), node("n2"), dep])
    assert "never placed: non-preemptible (priority inference 125 >= 100)" in said, said
    assert "cluster-too-small" not in said and "never fits" not in said
    assert "never placed" in planned([*classes, node("n1"), dep])  # 24 CPU on one 8-CPU node
    assert "never placed" not in planned([dep])  # nothing known: nothing concluded


def test_a_hand_made_group_is_judged_by_the_settings_it_holds():
    """Seed 003's shape: standalone pods naming a group a user wrote, in queue "test"."""
    group = grouper_support.podgroup("app-with-models", 3)
    group["spec"].update(queue="test", priorityClassName="inference")
    pods = [grouper_support.pod(f"m-{i}", phase="Pending", group="app-with-models") for i in range(3)]
    known = {"priorityclasses.scheduling.k8s.io": [{"metadata": {"name": n}, "value": v}
                                                   for n, v in PRIORITIES.items()],
             "queues.scheduling.run.ai": QUICKSTART, "nodes": [node("n1")]}
    snapshot = Snapshot(pods, {"kai": [group]}, {}, [], datetime.now(timezone.utc), facts=known)
    (gang,) = build_report(snapshot, DEFAULT).gangs
    assert gang.state == feasibility.NEVER and [v.kind for v in gang.never] == [feasibility.QUEUE_MISSING]
    assert 'KAI queue "test" (spec.queue of its PodGroup) does not exist' in gang.never[0].message
    known["queues.scheduling.run.ai"] = [*QUICKSTART, queue("test")]
    (gang,) = build_report(Snapshot(pods, {"kai": [group]}, {}, [], datetime.now(timezone.utc), facts=known),
                           DEFAULT).gangs
    assert gang.never == [] and gang.state == "waiting"
    # in a queue of quota 0, its pods' requests (kept for standalone pods) are over it
    known["queues.scheduling.run.ai"] = [*QUICKSTART, queue("test", cpu={"quota": 0})]
    for i, p in enumerate(pods):
        p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": f"{i + 1}"}}
    (gang,) = build_report(Snapshot(pods, {"kai": [group]}, {}, [], datetime.now(timezone.utc), facts=known),
                           DEFAULT).gangs
    assert [v.kind for v in gang.never] == [feasibility.OVER_QUOTA]
    assert "6 CPU cores" in gang.never[0].message  # 1 + 2 + 3: minMember 3 of its 3 pods
    group["spec"]["minMember"] = 2
    (gang,) = build_report(Snapshot(pods, {"kai": [group]}, {}, [], datetime.now(timezone.utc), facts=known),
                           DEFAULT).gangs
    assert "3 CPU cores" in gang.never[0].message  # at least its 2 smallest pods: 1 + 2


def test_the_least_a_gang_of_standalone_pods_counts_is_its_smallest_minimum():
    pods = [template(cpu) for cpu in ("4", "1", "2")]
    assert feasibility.least_demand(KAI, pods, 2) == {"cpu": Decimal(3)}
    assert feasibility.least_demand(KAI, pods, 4) == {}  # fewer pods than the minimum: nothing known


# -- Volcano: a queue's capability is a limit no gang's minimum may exceed


def test_a_volcano_gang_over_its_queues_capability_or_a_parents_is_never_placed():
    def vqueue(name: str, capability: dict | None = None, parent: str | None = None) -> dict:
        spec: dict[str, Any] = {"capability": capability} if capability else {}
        if parent:
            spec["parent"] = parent
        return {"metadata": {"name": name}, "spec": spec}

    known = VOLCANO.cluster_facts({"PriorityClass": [], "Node": [node("n1", cpu="64")],
                                   "Queue": [vqueue("org", {"cpu": "8"}), vqueue("team", {"cpu": "32"}, "org"),
                                             vqueue("free")]})
    pod = template("2")
    for queue_name, never in (("team", True), ("free", False)):
        options = {"queue": queue_name}
        said = {v.kind: v.message for v in feasibility.never_placed(VOLCANO, options, [(5, pod)], known)}
        assert (feasibility.OVER_LIMIT in said) is never, said
    said = {v.kind: v.message for v in feasibility.never_placed(VOLCANO, {"queue": "team"}, [(5, pod)], known)}
    assert '"org" cpu 8' in said[feasibility.OVER_LIMIT] and "spec.capability.cpu to 10" in said[feasibility.OVER_LIMIT]


# -- never raises, whatever the objects hold


def test_the_verdicts_never_raise_on_odd_objects():
    json_any = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                                      max_size=3), max_leaves=12)
    shaped = st.fixed_dictionaries({}, optional={"metadata": json_any, "spec": json_any, "status": json_any,
                                                 "value": json_any})

    @settings(max_examples=150, deadline=None)
    @given(queues=st.none() | st.lists(shaped, max_size=3), nodes=st.none() | st.lists(shaped, max_size=3),
           classes=st.none() | st.lists(shaped, max_size=3), pods=st.lists(shaped, max_size=3),
           options=st.dictionaries(st.sampled_from(["queue", "priority_class", "extra_spec", "origins"]), json_any))
    def check(queues, nodes, classes, pods, options):
        known = KAI.cluster_facts({"PriorityClass": classes, "Queue": queues, "Node": nodes})
        feasibility.never_placed(KAI, options, [(2, p) for p in pods], known)
        feasibility.least_demand(KAI, pods, 2, known)

    check()


def test_a_live_kai_group_is_judged_by_its_own_preemptibility_not_the_workloads_new_label():
    options = {"queue": "default-queue", "priority_class": "inference",
               "extra_spec": {"preemptibility": "preemptible"}}  # labelled after its group was made
    live = {"spec": {"queue": "default-queue", "priorityClassName": "inference"}}
    known = facts(QUICKSTART, [node("n1")])
    said = feasibility.never_placed(KAI, judged_settings(KAI, options, live), [(2, template("1"))], known)
    assert [v.kind for v in said] == [feasibility.OVER_QUOTA]  # KAI still goes by the group's priority
    assert not feasibility.never_placed(KAI, options, [(2, template("1"))], known)  # a group made now would not


def test_a_semi_preemptible_groups_minimum_is_held_to_its_queues_quota():
    """KAI v0.18: a semi-preemptible group's minimum is non-preemptible and in quota, whatever its
    priority; only what is above it runs over quota."""
    options = {"queue": "default-queue", "priority_class": "train"}
    live = {"spec": {"queue": "default-queue", "priorityClassName": "train", "preemptibility": "semi-preemptible"}}
    known = facts(QUICKSTART, [node("n1")])
    assert not feasibility.never_placed(KAI, options, [(2, template("1"))], known)  # train: preemptible
    said = feasibility.never_placed(KAI, judged_settings(KAI, options, live), [(2, template("1"))], known)
    assert [v.kind for v in said] == [feasibility.OVER_QUOTA]
    assert said[0].what.startswith("non-preemptible (spec.preemptibility semi-preemptible): its minimum")
