"""A gang's minimum resources (Volcano's and coscheduling's ``spec.minResources``): its
pods' requests counted as the kubelet counts them, times the gang's minimum, per role and
summed over the workloads of a shared group; written at creation, kept true on scale, and
a hand-made group's own value left to its user."""

from __future__ import annotations

import copy
from decimal import Decimal

import pytest

from podgang import kinds, quantities, rules
from podgang.backends import COSCHEDULING, KAI, VOLCANO
from podgang.gang import Desired, plan_writes
from podgang.rules import HAND_MADE, OWNED, MinMember
from podgang.settings import Settings
from tests.backend_support import NS, SCHEDULERS, grouper, member, podgroup_of
from tests.grouper_support import deployment, events, owned_group, replicaset, scale
from tests.webhook_support import eventually


def containers(*requests: dict, init: tuple[dict, ...] = (), overhead: dict | None = None) -> dict:
    """A pod (or template) whose containers request ``requests``; ``init``: init containers,
    a ``"sidecar"`` key marking one that keeps running."""
    spec: dict = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(requests)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "resources": {k: v for k, v in r.items() if k != "sidecar"},
                                   **({"restartPolicy": "Always"} if r.get("sidecar") else {})}
                                  for i, r in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    return {"spec": spec}


@pytest.mark.parametrize("pod, expected", [
    (containers({"requests": {"cpu": "500m", "memory": "1Gi"}}, {"requests": {"cpu": "1"}}),
     {"cpu": "1500m", "memory": "1Gi"}),
    # a limit alone is the request (the apiserver defaults it so on a pod)
    (containers({"limits": {"nvidia.com/gpu": 2, "cpu": "2"}, "requests": {"cpu": "1"}}),
     {"cpu": "1", "nvidia.com/gpu": "2"}),
    # a regular init container runs before the others: only its peak counts
    (containers({"requests": {"cpu": "1"}}, init=({"requests": {"cpu": "3", "memory": "64Mi"}},)),
     {"cpu": "3", "memory": "64Mi"}),
    # a sidecar runs beside them: it adds
    (containers({"requests": {"cpu": "1"}}, init=({"requests": {"cpu": "250m"}, "sidecar": True},)),
     {"cpu": "1250m"}),
    (containers({"requests": {"memory": "1G"}}, overhead={"memory": "120Mi"}), {"memory": "1125829120"}),
    # nothing a quantity cannot be, nothing requested at zero
    (containers({"requests": {"cpu": "lots", "memory": "0"}}), {}),
    ({"spec": {"containers": "no"}}, {}),
])  # fmt: skip
def test_what_one_pod_requests(pod, expected):
    assert quantities.resource_list(quantities.pod_requests(pod)) == expected


@pytest.mark.parametrize("amount, spelled", [
    (Decimal(4), "4"), (Decimal("1.5"), "1500m"), (Decimal(3 * 2**30), "3Gi"), (Decimal(1000), "1000"),
    (Decimal("0.0001"), "1m"),  # rounded up: a minimum never shrinks
    (Decimal(2**20 + 1), "1048577"),
])  # fmt: skip
def test_quantities_are_spelled_exactly_and_short(amount, spelled):
    assert quantities.format_quantity(amount) == spelled
    assert quantities.quantity(spelled) >= amount


def test_equal_amounts_in_other_spellings_are_the_same():
    assert quantities.same_resources({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1073741824"})
    assert not quantities.same_resources({"cpu": "1"}, {"cpu": "2"})
    assert quantities.parse_compact(quantities.compact({"cpu": "4", "memory": "8Gi"})) == {"cpu": "4",
                                                                                          "memory": "8Gi"}


ONE_CPU = {"requests": {"cpu": "1", "memory": "2Gi"}}


def with_requests(obj: dict, resources: dict, *path: str) -> dict:
    obj = copy.deepcopy(obj)
    template = obj
    for key in path:
        template = template[key]
    template["spec"]["containers"] = [{"name": "main", "resources": resources}]
    return obj


def pytorchjob(master: dict, worker: dict, workers: int = 3) -> dict:
    def spec(replicas, resources):
        return {"replicas": replicas, "template": {"spec": {"containers": [{"name": "pytorch",
                                                                            "resources": resources}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train", "namespace": NS},
            "spec": {"pytorchReplicaSpecs": {"Master": spec(1, master), "Worker": spec(workers, worker)}}}


def sparkapp(state: str = "") -> dict:
    return {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "etl", "namespace": NS},
            "spec": {"type": "Python", "driver": {"cores": 1, "memory": "512m"},
                     "executor": {"cores": 2, "memory": "4g", "memoryOverhead": "1g", "instances": 3}},
            "status": {"applicationState": {"state": state}} if state else {}}


def test_a_workloads_minimum_pods_are_its_roles_at_their_minimums():
    dep = with_requests(deployment("web", 3), ONE_CPU, "spec", "template")
    [(count, template)] = rules.minimum_pods(dep, 3)
    assert count == 3 and quantities.pod_requests(template) == {"cpu": 1, "memory": 2 * 2**30}

    job = pytorchjob({"requests": {"cpu": "4"}}, {"limits": {"nvidia.com/gpu": "8"}})
    sizes = rules.role_subgroups(job)
    got = rules.minimum_pods(job, 4, sizes)
    assert quantities.resource_list(quantities.gang_requests(got)) == {"cpu": "4", "nvidia.com/gpu": "24"}
    # podgang.io/min-member pins the whole gang at 2 of master + workers: which pods it counts is not said
    assert rules.minimum_pods(job, 2) is None
    # ... unless every pod asks the same
    same = pytorchjob(ONE_CPU, ONE_CPU)
    assert quantities.resource_list(quantities.gang_requests(rules.minimum_pods(same, 2))) == {"cpu": "2",
                                                                                               "memory": "4Gi"}


def test_a_spark_application_reserves_the_whole_application_from_the_driver_on():
    """spark-operator's own Volcano integration reserves driver + executors up front: the
    gang counts the driver only (the driver makes the executors), its resources do not.
    Spark's pods: cores CPUs, memory plus its overhead (max(0.4 × memory, 384Mi) for
    Python) — 512m is 512MiB in Spark's units."""
    for state in ("", "RUNNING"):
        app = sparkapp(state)
        size = rules.desired_size(app)[0]
        got = quantities.gang_requests(rules.minimum_pods(app, size, rules.role_subgroups(app)))
        assert quantities.resource_list(got) == {"cpu": "7", "memory": f"{512 + 384 + 3 * 5 * 1024}Mi"}, state


def test_templates_that_ask_differently_without_roles_give_no_minimum():
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "vllm"},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {
               "size": 4, "leaderTemplate": {"spec": {"containers": [{"name": "l", "resources": ONE_CPU}]}},
               "workerTemplate": {"spec": {"containers": [{"name": "w", "resources": {"limits": {"x/y": 1}}}]}}}}}
    assert rules.minimum_pods(lws, 4) is None


SETTINGS = Settings(backends=(("volcano", VOLCANO),))
WEB = with_requests(deployment("web", 3), ONE_CPU, "spec", "template")


def volcano_group(min_member: int, min_resources: dict | None, *, managed: bool = True,
                  written: str | None = None) -> dict:
    md = {"name": "g", "namespace": NS, "resourceVersion": "7",
          "labels": {SETTINGS.managed_by_label: SETTINGS.managed_by_value} if managed else {},
          "annotations": {SETTINGS.min_resources_annotation: written} if written else {}}
    spec = {"minMember": min_member, **({"minResources": min_resources} if min_resources else {})}
    return {"apiVersion": VOLCANO.podgroup.api_version, "kind": "PodGroup", "metadata": md, "spec": spec}


def desired(source: str, size: int, workloads: tuple = (WEB,), resources: dict | None = None) -> Desired:
    return Desired(NS, "g", source, MinMember(size, "spec.replicas"), may_create=source == OWNED,
                   workloads=workloads, backend=VOLCANO,
                   min_resources=resources or {"cpu": str(size), "memory": f"{2 * size}Gi"})


def test_created_with_and_patched_in_the_same_step_as_the_size():
    [create] = plan_writes(desired(OWNED, 3), None, SETTINGS)
    assert create.body["spec"] == {"minMember": 3, "minResources": {"cpu": "3", "memory": "6Gi"}}
    [patch] = plan_writes(desired(OWNED, 5), volcano_group(3, {"cpu": "3", "memory": "6Gi", "x/gone": "1"}), SETTINGS)
    assert patch.action == "patch-min-member" and patch.resources == "cpu 5, memory 10Gi"
    assert patch.body["spec"] == {"minMember": 5, "minResources": {"cpu": "5", "memory": "10Gi", "x/gone": None}}
    assert patch.body["metadata"] == {"resourceVersion": "7"}
    # the same amounts spelled otherwise: nothing to write
    assert plan_writes(desired(OWNED, 3), volcano_group(3, {"cpu": "3000m", "memory": "6144Mi"}), SETTINGS) == []
    # a template that changed its requests: only the resources
    [alone] = plan_writes(desired(OWNED, 3, resources={"cpu": "6"}), volcano_group(3, {"cpu": "3"}), SETTINGS)
    assert alone.action == "patch-min-resources" and alone.body["spec"] == {"minResources": {"cpu": "6"}}


def test_a_hand_made_groups_own_min_resources_stay_its_users():
    shared = desired(HAND_MADE, 3)
    [first] = plan_writes(shared, volcano_group(3, None, managed=False), SETTINGS)
    assert first.body["spec"]["minResources"] == {"cpu": "3", "memory": "6Gi"}
    assert first.body["metadata"]["annotations"] == {SETTINGS.min_resources_annotation: "cpu=3,memory=6Gi",
                                                     SETTINGS.followed_size_annotation: "3"}
    # what podgang wrote there is podgang's to keep true ...
    later = desired(HAND_MADE, 4)
    [again] = plan_writes(later, volcano_group(3, {"cpu": "3", "memory": "6Gi"}, managed=False,
                                               written="cpu=3,memory=6Gi"), SETTINGS)
    assert again.body["spec"]["minResources"] == {"cpu": "4", "memory": "8Gi"}
    # ... a value the user wrote (or changed) is not
    users = volcano_group(4, {"cpu": "16"}, managed=False, written="cpu=3,memory=6Gi")
    assert [w.action for w in plan_writes(later, users, SETTINGS)] == ["record-size"]  # only the followed size
    assert [w.action for w in plan_writes(later, volcano_group(4, {"cpu": "16"}, managed=False),
                                          SETTINGS)] == ["record-size"]


def test_kai_reads_no_min_resources():
    assert KAI.min_resources_for(((3, WEB["spec"]["template"]),)) is None
    assert VOLCANO.min_resources_for(((3, WEB["spec"]["template"]),)) == {"cpu": "3", "memory": "6Gi"}
    assert COSCHEDULING.min_resources_for(((3, {"spec": {"containers": [{"name": "c"}]}}),)) is None


@pytest.mark.parametrize("name", ["volcano", "coscheduling"])
async def test_the_grouper_keeps_a_deployments_min_resources_true_on_scale(name):
    backend, scheduler = SCHEDULERS[name]
    async with grouper(name) as (emu, _):
        dep = emu.put(with_requests(deployment("web", 3, ns=NS, scheduler=scheduler), ONE_CPU, "spec", "template"))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        emu.put(member("web-0", rs, backend, scheduler, group))
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group) is not None, 10, "no PodGroup")
        assert podgroup_of(emu, backend, NS, group)["spec"]["minResources"] == {"cpu": "3", "memory": "6Gi"}
        scale(emu, dep, 5)
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group)["spec"].get("minResources")
                           == {"cpu": "5", "memory": "10Gi"}, 10, "minResources not kept true")
        assert podgroup_of(emu, backend, NS, group)["spec"]["minMember"] == 5
        [changed] = await eventually(lambda: events(emu, "MinResourcesChanged"), what="a MinResourcesChanged event")
        assert changed["message"] == "minResources set: cpu 5, memory 10Gi (the gang's minimum pods × their requests)"


@pytest.mark.parametrize("part, factor, expected", [
    ({"cores": 2, "memory": "1g"}, None, {"cpu": "2", "memory": str(2**30 + int(2**30 * 0.4))}),  # Python: 40%
    ({"coreRequest": "500m", "memory": "2048m", "memoryOverhead": "1g"}, None, {"cpu": "500m", "memory": "3Gi"}),
    ({"memory": "9" * 400 + "g"}, None, {"cpu": "1", "memory": str(2**30 + int(2**30 * 0.4))}),  # Spark's 1g then
    ({"memory": "1g"}, "inf", {"cpu": "1", "memory": "1408Mi"}),  # a factor no pod holds: the 384Mi floor
    ({"memory": "1g", "gpu": {"name": "nvidia.com/gpu", "quantity": 1}}, "0.1",
     {"cpu": "1", "memory": "1408Mi", "nvidia.com/gpu": "1"}),
])  # fmt: skip
def test_a_spark_pod_requests_what_spark_sets(part, factor, expected):
    app = sparkapp()
    app["spec"]["executor"] = {**part, "instances": 1}
    if factor:
        app["spec"]["memoryOverheadFactor"] = factor
    (executor,) = [r for r in kinds.whole_roles(app) if r.name == "executor"]
    got = quantities.resource_list(quantities.pod_requests(executor.template))
    assert {k: quantities.quantity(v) for k, v in got.items()} == {
        k: quantities.quantity(v) for k, v in expected.items()}


async def test_a_hand_made_groups_min_resources_follow_two_scales_through_the_grouper():
    """What podgang wrote on a hand-made Volcano group stays podgang's to keep true: the
    grouper's slim cache keeps the podgang.io/min-resources record, so the second scale is
    followed as the first was (a unit test of plan_writes alone could not tell)."""
    backend, scheduler = SCHEDULERS["volcano"]
    async with grouper("volcano") as (emu, _):
        emu.put({"apiVersion": backend.podgroup.api_version, "kind": "PodGroup",
                 "metadata": {"name": "shared", "namespace": NS}, "spec": {"minMember": 2}})
        deps = []
        for name in ("prefill", "decode"):
            dep = with_requests(deployment(name, 1, ns=NS, scheduler=scheduler), ONE_CPU, "spec", "template")
            dep["spec"]["template"]["metadata"].setdefault("annotations", {})[backend.key] = "shared"
            deps.append(emu.put(dep))

        def min_resources():
            return (podgroup_of(emu, backend, NS, "shared")["spec"]).get("minResources")
        await emu.wait_for(lambda: min_resources() == {"cpu": "2", "memory": "4Gi"}, 10, "not written")
        scale(emu, deps[0], 2)
        await emu.wait_for(lambda: min_resources() == {"cpu": "3", "memory": "6Gi"}, 10, "first scale not followed")
        scale(emu, deps[1], 3)
        await emu.wait_for(lambda: min_resources() == {"cpu": "5", "memory": "10Gi"}, 10, "second scale not followed")
