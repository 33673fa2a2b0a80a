"""Owners of kinds the grouper has no watch for (issue 43): read for their metadata alone (a GET
as PartialObjectMetadata, the resource found by discovery), as KAI reads a gang's queue from its
top owner whatever its kind; where that read is refused or impossible the grouper says so once,
a Warning event OwnerNotRead on the PodGroup. The grouper runs under the RBAC the chart renders,
with and without ``grouper.readOwners``."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

from podgang.api import METADATA_ONLY
from podgang.backends.kai import KAI
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from podgang.grouper.owners import OWNER_NOT_READ
from podgang.settings import Settings
from tests.backend_support import podgroup_of, resource
from tests.chart_support import NAMESPACE, RELEASE, render
from tests.emulator import KubeEmulator, ResourceType
from tests.emulator.rbac import rules_for
from tests.webhook_support import eventually

NS = "pipelines"
SETTINGS = Settings(backends=(("kai-scheduler", KAI),))
TESTKIND = ResourceType("example.com", "v1", "testkinds", "TestKind", crd=True)
QUEUE_LABEL = "kai.scheduler/queue"
GROUPER_USER = f"system:serviceaccount:{NAMESPACE}:{RELEASE}-grouper"
READ_TESTKINDS = [{"group": "example.com", "resources": ["testkinds"]}]


def custom_owner(name: str, uid: str, queue: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "TestKind",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": {QUEUE_LABEL: queue}},
            "spec": {"anything": "podgang does not know"}}


def owned_pod(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    """A pod its owner's controller made, admitted into the group podgang names after its top
    owner (the webhook's patch: KAI's pod-group-name)."""
    md = owner["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "annotations": {"pod-group-name": f"pg-{md['name']}-{md['uid']}"},
                         "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": md["name"], "uid": md["uid"], "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Pending"}}


def not_read_events(emu: KubeEmulator) -> list[dict]:
    return [e for e in emu.list("events", NS) if e.get("reason") == OWNER_NOT_READ]


@contextlib.asynccontextmanager
async def grouper(emu: KubeEmulator, values: dict | None) -> AsyncIterator[Controller]:
    """The grouper, allowed exactly what the chart rendered with ``values`` grants it."""
    emu.register(resource(KAI))
    emu.register(TESTKIND)
    emu.grant(rules_for(render(values), f"{RELEASE}-grouper", NAMESPACE), user=GROUPER_USER)
    client = emu.api_client()
    controller = Controller(client, SETTINGS, Options(resync_period=300.0, request_timeout=5.0),
                            events=EventSink(EventRecorder(client, "podgang-grouper")))
    task = asyncio.create_task(controller.run())
    try:
        yield controller
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await client.close()


async def test_an_owner_of_a_kind_podgang_does_not_know_lends_its_queue_when_the_chart_grants_its_read():
    async with KubeEmulator() as emu, grouper(emu, {"grouper": {"readOwners": READ_TESTKINDS}}) as controller:
        owner = custom_owner("sim", "tk-1", "team-a")
        emu.put(owner)
        emu.put(owned_pod("sim-0", owner))
        emu.put(owned_pod("sim-1", owner))
        group = await eventually(lambda: podgroup_of(emu, KAI, NS, "pg-sim-tk-1"), what="the TestKind's group")
        assert group["spec"]["queue"] == "team-a"  # the top owner's, as KAI reads it
        reads = [r for r in emu.requests if r.method == "GET" and r.path == f"/apis/example.com/v1/namespaces/{NS}/testkinds/sim"]
        assert len(reads) == 1  # once for both pods
        assert reads[0].headers.get("Accept") == METADATA_ONLY
        await controller.queue.wait_idle()
        assert not_read_events(emu) == [] and emu.forbidden == []


async def test_an_owner_the_grouper_may_not_read_is_said_once_on_the_group_and_the_default_queue_applies():
    async with KubeEmulator() as emu, grouper(emu, None) as controller:
        owner = custom_owner("sim", "tk-2", "team-a")
        emu.put(owner)
        emu.put(owned_pod("sim-0", owner))
        group = await eventually(lambda: podgroup_of(emu, KAI, NS, "pg-sim-tk-2"), what="the TestKind's group")
        assert group["spec"]["queue"] == "default-queue"  # the owner's label is not read
        (said,) = await eventually(lambda: not_read_events(emu), what="an OwnerNotRead event")
        assert said["type"] == "Warning" and said["involvedObject"]["kind"] == "PodGroup"
        assert said["involvedObject"]["name"] == "pg-sim-tk-2"
        assert said["message"].startswith(
            "podgang cannot read testkind/sim (example.com/v1), an owner of these pods: the grouper may not read "
            "it (HTTP 403")
        assert "grouper.readOwners" in said["message"]
        assert any("testkinds" in line for line in emu.forbidden)
        emu.put(owned_pod("sim-1", owner))  # another pod of it: neither read again nor said again
        await eventually(lambda: len(controller.cache.members(f"{NS}/pg-sim-tk-2")) == 2 or None, what="2 members")
        await controller.queue.wait_idle()
        assert len(not_read_events(emu)) == 1
        assert len([line for line in emu.forbidden if "testkinds" in line]) == 1


async def test_an_owner_no_resource_serves_is_said_once():
    async with KubeEmulator() as emu, grouper(emu, None) as controller:
        ghost = {"apiVersion": "ghosts.example.com/v1", "kind": "Ghost",
                 "metadata": {"name": "boo", "namespace": NS, "uid": "g-1"}}
        emu.put(owned_pod("boo-0", ghost))
        await eventually(lambda: podgroup_of(emu, KAI, NS, "pg-boo-g-1"), what="the Ghost's group")
        (said,) = await eventually(lambda: not_read_events(emu), what="an OwnerNotRead event")
        assert "the API serves no kind Ghost in ghosts.example.com/v1" in said["message"]
        await controller.queue.wait_idle()
        assert len(not_read_events(emu)) == 1
