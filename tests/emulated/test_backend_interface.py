"""The Backend interface is enough: a scheduler invented here, and nowhere in the
product, gets podgang's whole value through it — the webhook's patch and the
owner-less group, the grouper's create and resize, and ``podgang plan``'s output.

The toy scheduler keeps membership in one annotation and its ``Gang`` objects
cannot change size while they live (like native Kubernetes gangs in 1.36), so the
hardest resize path is the one exercised: held while pods name the group,
replaced once none does.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

import jsonpatch
import pytest

from podgang.backends import GangSpec, Resize
from podgang.backends.base import REPLACE_WHEN_EMPTY, Backend, string_value
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from podgang.manifests import Manifest, Source
from podgang.objects import Denial, Resource, annotations, as_dict
from podgang.plan import build_plan, podgroup_manifests
from podgang.settings import Settings
from tests.backend_support import bare_pod_review
from tests.grouper_support import deployment, events, owned_group, owner_ref, replicaset, uid
from tests.emulator import KubeEmulator, ResourceType
from tests.webhook_support import decoded_patch, eventually, running_webhook

KEY = "toy.example.com/gang"
NS = "team"
SCHEDULER = "toy-scheduler"


class ToyBackend(Backend):
    name = "toy"
    podgroup = Resource("toy.example.com", "v1", "gangs", "Gang")
    pod_annotation_keys = (KEY,)

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        value = annotations(obj).get(KEY)
        return (value, KEY) if value is not None else None

    def group_of(self, pod: Any) -> str | None:
        return annotations(pod).get(KEY)

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        if self.group_of(pod) == group:
            return []
        if not isinstance(as_dict(pod.get("metadata")).get("annotations"), dict):
            return [{"op": "add", "path": "/metadata/annotations", "value": {KEY: group}}]
        return [{"op": "add", "path": "/metadata/annotations/toy.example.com~1gang", "value": group}]

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        return {"metadata": {"annotations": {KEY: group}}}

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        return string_value(pod, "annotations", KEY) is None

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        md = dict(as_dict(pod.get("metadata")))
        md["annotations"] = {k: v for k, v in as_dict(md.get("annotations")).items() if k != KEY}
        return {**pod, "metadata": md}

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        old = self.group_of(old_pod)
        return None if old is None or self.group_of(new_pod) == old else "a toy gang is for life"

    def describe_membership(self, group: str) -> str:
        return f"{KEY}={group} set"

    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        return {"apiVersion": "toy.example.com/v1", "kind": "Gang", "metadata": self.podgroup_metadata(gang),
                "spec": {"size": gang.min_member}}

    def min_member(self, podgroup: Any) -> int | None:
        size = as_dict(as_dict(podgroup).get("spec")).get("size")
        return size if isinstance(size, int) and not isinstance(size, bool) else None

    def resize(self, podgroup: Any, value: int) -> Resize:
        return Resize(REPLACE_WHEN_EMPTY, why="a toy Gang cannot change size while it lives")

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        return {"size": spec["size"]} if "size" in spec else {}


TOY = ToyBackend()
SETTINGS = Settings(backends=((SCHEDULER, TOY),))
GANGS = ResourceType("toy.example.com", "v1", "gangs", "Gang", crd=True)


@pytest.fixture
async def emu():
    async with KubeEmulator() as e:
        e.register(GANGS)
        yield e


def toy_pod(name: str, owner: dict | None, group: str | None, phase: str = "Running") -> dict:
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid(), "labels": {"app": "web"},
                          "annotations": {KEY: group} if group else {}}
    if owner is not None:
        md["ownerReferences"] = [owner_ref(owner)]
    spec = {"schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "busybox"}], "nodeName": "node-1"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": {"phase": phase}}


# ---------------------------------------------------------------------------- webhook


async def test_the_webhook_patches_and_creates_through_the_backend(tmp_path, emu):
    doc = bare_pod_review(SCHEDULER)
    pod = doc["request"]["object"]
    ns = doc["request"]["namespace"]
    client = emu.api_client()
    try:
        async with running_webhook(tmp_path, api_client=client, settings=SETTINGS) as wh:
            response = await wh.mutate(doc)
    finally:
        await client.close()
    assert response["allowed"] is True
    patched = jsonpatch.apply_patch(pod, decoded_patch(response))
    assert patched["metadata"]["annotations"] == {KEY: "pg-bare"}
    assert "labels" not in patched["metadata"] or "kai.scheduler/podgroup" not in patched["metadata"]["labels"]
    gang = emu.get("gangs", ns, "pg-bare")
    assert gang is not None and gang["spec"] == {"size": 1}
    assert gang["metadata"]["labels"] == SETTINGS.managed_labels
    assert emu.list("podgroups", ns) == []  # nothing in KAI's spelling


# ---------------------------------------------------------------------------- grouper


async def test_the_grouper_creates_holds_and_replaces_through_the_backend(emu):
    dep = emu.put(deployment("web", 3, ns=NS, scheduler=SCHEDULER))
    rs = emu.put(replicaset(dep))
    group = owned_group(dep)
    pods = [emu.put(toy_pod(f"web-{i}", rs, group)) for i in range(3)]
    client = emu.api_client()
    controller = Controller(client, SETTINGS, Options(resync_period=300.0, request_timeout=5.0),
                            events=EventSink(EventRecorder(client, "podgang-grouper")))
    task = asyncio.create_task(controller.run())
    try:
        await emu.wait_for(lambda: emu.get("gangs", NS, group) is not None, 10, "the Gang was not created")
        gang = emu.get("gangs", NS, group)
        assert gang["spec"] == {"size": 3}
        assert gang["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]

        # scaled while its pods live: the size is held, and said once
        emu.patch_object("deployments", NS, "web", {"spec": {"replicas": 5}})
        await eventually(lambda: events(emu, "MinMemberHeld"), what="a MinMemberHeld warning")
        (held,) = events(emu, "MinMemberHeld")
        assert "minMember stays 3 (wanted 5): a toy Gang cannot change size while it lives" in held["message"]
        assert emu.get("gangs", NS, group)["spec"] == {"size": 3}
        assert emu.count("DELETE", r"/gangs/") == 0

        # no pod names it any more: replaced with the size in force
        for p in pods:
            emu.delete("pods", NS, p["metadata"]["name"])
        await emu.wait_for(lambda: (emu.get("gangs", NS, group) or {}).get("spec") == {"size": 5}, 10,
                           "the Gang was not replaced with size 5")
        assert emu.count("DELETE", r"/gangs/") == 1
        (replaced,) = await eventually(lambda: events(emu, "PodGroupReplaced"), what="a PodGroupReplaced event")
        assert replaced["message"].startswith("minMember 3 → 5: no pod names the group")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_the_grouper_backfills_through_the_backend(emu):
    dep = emu.put(deployment("web", 1, ns=NS, scheduler=SCHEDULER))
    rs = emu.put(replicaset(dep))
    emu.put(toy_pod("web-0", rs, None))
    client = emu.api_client()
    controller = Controller(client, SETTINGS, Options(resync_period=300.0, request_timeout=5.0),
                            events=EventSink(EventRecorder(client, "podgang-grouper")))
    task = asyncio.create_task(controller.run())
    try:
        await emu.wait_for(lambda: annotations(emu.get("pods", NS, "web-0")).get(KEY) == owned_group(dep), 10,
                           "the pod was not backfilled")
        # the grouper made the group and backfilled its pod: one event says both
        (backfilled,) = await eventually(lambda: events(emu, "PodGroupCreated"), what="a PodGroupCreated event")
        assert f"; 1 pod backfilled: {KEY}={owned_group(dep)} set" in backfilled["message"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


# ---------------------------------------------------------------------------- plan


def test_plan_speaks_the_backend():
    dep = deployment("web", 3, ns=NS, scheduler=SCHEDULER)
    plan = build_plan([Manifest(dep, Source("web.yaml", 1))], SETTINGS)
    (group,) = plan.groups.values()
    assert (group.name, group.min_member.value) == (owned_group(dep), 3)
    docs, comments = podgroup_manifests(plan, SETTINGS)
    assert comments == []
    assert docs == [TOY.build_podgroup(GangSpec(
        owned_group(dep), NS, 3, owner=group.owner, labels=SETTINGS.managed_labels))]
    assert docs[0]["kind"] == "Gang" and docs[0]["spec"] == {"size": 3}
