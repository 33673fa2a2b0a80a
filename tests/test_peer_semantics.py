"""Gang intent as the peer projects write it (issue 23): fields podgang reads besides its own.

Each table runs a manifest in a peer's own shape (written here from what the project
documents) through the code the processes run: the grouper's ``desired_group`` on a cache
fed as its informers feed it, and ``podgang plan``'s ``build_plan``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podgang import kinds, rules
from podgang.grouper.model import Cache, obj_key
from podgang.grouper.podgroups import desired_group
from podgang.manifests import Manifest, Source
from podgang.plan import build_plan, shown
from podgang.settings import DEFAULT, Settings
from tests.crd_support import crd_valid

NS = "serving"


def feed(cache: Cache, *objs: dict) -> Cache:
    """Full API objects into the cache, as the grouper's informers put them."""
    for obj in objs:
        kind = obj["kind"]
        slim = cache.slimmer_for(kind)(obj)
        if slim is None or not cache.keep(kind, slim):
            continue
        store = cache.store_for(kind)
        key = obj_key(slim)
        old = store.get(key)
        store[key] = slim
        cache.apply(kind, old, slim)
    return cache


def planned(*objs: dict, settings: Settings = DEFAULT):
    return build_plan([Manifest(copy.deepcopy(o), Source("test.yaml", i)) for i, o in enumerate(objs)], settings, NS)


def group_of_plan(plan, prefix: str):
    (found,) = [g for g in plan.groups.values() if shown(g.name).startswith(prefix)]
    return found


# ---------------------------------------------------------------------------
# 1. LWS startupPolicy LeaderReady: a staged gang, the leader first


def lws(startup: str | None = None, size: int = 4, replicas: int = 1) -> dict[str, Any]:
    template = {"spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "vllm", "image": "vllm/vllm"}]}}
    return crd_valid({
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "llama", "namespace": NS, "uid": "lws-1"},
        "spec": {"replicas": replicas, **({"startupPolicy": startup} if startup else {}),
                 "leaderWorkerTemplate": {"size": size, "leaderTemplate": copy.deepcopy(template),
                                          "workerTemplate": copy.deepcopy(template)}}})


def lws_pod(index: int, *, node: str | None = None, group: int = 0) -> dict[str, Any]:
    """A pod as LWS labels it (the leader is worker-index 0), as podgang's webhook admitted it."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"llama-{group}" + (f"-{index}" if index else ""), "namespace": NS,
                         "uid": f"pod-{group}-{index}",
                         "annotations": {"pod-group-name": f"pg-llama-lws-1-group-{group}"},  # as admitted
                         "labels": {kinds.LWS_NAME_LABEL: "llama", kinds.LWS_GROUP_INDEX_LABEL: str(group),
                                    kinds.LWS_WORKER_INDEX_LABEL: str(index)},
                         "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                              "name": "llama", "uid": "lws-1", "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {}),
                     "containers": [{"name": "vllm", "image": "vllm/vllm"}]},
            "status": {"phase": "Running" if node else "Pending"}}


LEADER_READY = [
    pytest.param(None, [], 4, id="LeaderCreated (the default): the group at once"),
    pytest.param("LeaderCreated", [lws_pod(0)], 4, id="LeaderCreated: the group at once"),
    pytest.param("LeaderReady", [], 1, id="LeaderReady, nothing made yet: the leader alone"),
    pytest.param("LeaderReady", [lws_pod(0)], 1, id="LeaderReady, the leader pending: the leader alone"),
    pytest.param("LeaderReady", [lws_pod(0, node="n1")], 4, id="LeaderReady, the leader placed: the group"),
    pytest.param("LeaderReady", [lws_pod(0, node="n1"), lws_pod(1)], 4, id="LeaderReady, workers made: the group"),
]


@pytest.mark.parametrize("startup,pods,size", LEADER_READY)
def test_a_leader_ready_group_is_its_leader_until_the_leader_is_placed(startup, pods, size):
    cache = feed(Cache(), lws(startup), *copy.deepcopy(pods))
    desired = desired_group(cache, f"{NS}/{rules.owned_group_name(rules.OwnerRef.of(lws()), '-group-0')}")
    assert desired.min_member is not None and desired.min_member.value == size
    if size == 1:
        assert "LeaderReady: the leader first" in desired.min_member.reason
        stage = kinds.replica_stage(lws(startup), pods)  # what the tree code reads: being placed, not broken
        assert stage is not None and (stage.size, stage.whole) == (1, 4)
    else:
        assert kinds.replica_stage(lws(startup), pods) is None


def test_plan_shows_each_leader_ready_group_staged():
    plan = planned(lws("LeaderReady", replicas=2))
    sizes = sorted((shown(g.name), g.min_member.value) for g in plan.groups.values())
    assert sizes == [("pg-llama-lws-1-group-0", 1), ("pg-llama-lws-1-group-1", 1)]
    assert all("once it is Ready" in g.min_member.reason for g in plan.groups.values())
