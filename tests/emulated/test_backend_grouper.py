"""The grouper through each new backend, against the HTTP API emulator: a
Deployment's PodGroup created in the backend's API with the backend's spelling,
resized when the Deployment scales, and a pod admitted without its group
backfilled (Volcano, coscheduling) or reported once as impossible (native)."""

from __future__ import annotations

import asyncio

import jsonpatch
import pytest

from podgang.backends.base import GangSpec
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from tests.backend_support import NS, SCHEDULERS, grouper, member, podgroup_of, resource, settings_for
from tests.grouper_support import deployment, events, owned_group, replicaset, scale
from tests.emulator import KubeEmulator
from tests.webhook_support import eventually

@pytest.mark.parametrize("name", ["volcano", "coscheduling"])
async def test_created_resized_and_backfilled(name):
    backend, scheduler = SCHEDULERS[name]
    async with grouper(name) as (emu, _):
        dep = emu.put(deployment("web", 3, ns=NS, scheduler=scheduler))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        emu.put(member("web-0", rs, backend, scheduler, group))
        emu.put(member("web-1", rs, backend, scheduler, group))
        emu.put(member("web-2", rs, backend, scheduler, None))  # admitted while the webhook was down
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group) is not None, 10, "no PodGroup")
        created = podgroup_of(emu, backend, NS, group)
        assert created["apiVersion"] == backend.podgroup.api_version
        assert created["spec"] == {"minMember": 3}
        assert created["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
        assert emu.list("podgroups.scheduling.run.ai", NS) == []  # nothing in KAI's spelling

        await emu.wait_for(lambda: backend.group_of(emu.get("pods", NS, "web-2")) == group, 10, "not backfilled")
        # the grouper made the group and backfilled its pod: one event says both
        (backfilled,) = await eventually(lambda: events(emu, "PodGroupCreated"), what="a PodGroupCreated event")
        assert f"; 1 pod backfilled: {backend.describe_membership(group)}" in backfilled["message"]

        scale(emu, dep, 5)
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group)["spec"] == {"minMember": 5}, 10, "not resized")


async def test_native_creates_the_policy_and_reports_a_pod_it_cannot_backfill_once():
    backend, scheduler = SCHEDULERS["native"]
    async with grouper("native") as (emu, controller):
        dep = emu.put(deployment("web", 3, ns=NS, scheduler=scheduler))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        emu.put(member("web-0", rs, backend, scheduler, None))  # admitted while the webhook was down
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group) is not None, 10, "no PodGroup")
        assert podgroup_of(emu, backend, NS, group)["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
        (impossible,) = await eventually(lambda: events(emu, "BackfillImpossible"), what="a BackfillImpossible event")
        assert "cannot set it on a created pod" in impossible["message"] and group in impossible["message"]
        assert impossible["type"] == "Warning"
        assert emu.count("PATCH", r"/pods/") == 0
        # nothing retries it: the work queue runs dry with the pod still as it was
        await asyncio.wait_for(controller.queue.wait_idle(), 10)
        assert len(events(emu, "BackfillImpossible")) == 1 and emu.count("PATCH", r"/pods/") == 0


@pytest.mark.parametrize("name", ["volcano", "coscheduling", "native", "native-1.35"])
async def test_a_stale_gang_is_evicted_in_every_backend(name):
    """A satisfied gang of 3 loses a member with no rollout: after the grace period the
    rest is evicted, whatever scheduler spells the gang."""
    backend, scheduler = SCHEDULERS[name]
    settings = settings_for(name).with_changes(staleness_grace_period=0.3)
    async with KubeEmulator() as emu:
        emu.register(resource(backend))
        dep = emu.put(deployment("web", 3, ns=NS, scheduler=scheduler))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        for i in range(3):
            emu.put(member(f"web-{i}", rs, backend, scheduler, group))
        client = emu.api_client()
        controller = Controller(client, settings, Options(resync_period=300.0, request_timeout=5.0),
                                events=EventSink(EventRecorder(client, "podgang-grouper")))
        task = asyncio.create_task(controller.run())
        try:
            await emu.wait_for(lambda: podgroup_of(emu, backend, NS, group) is not None, 10, "no PodGroup")
            await emu.wait_for(lambda: controller.initial_reconcile_done, 10, "no first reconcile")
            await controller.queue.wait_idle()
            emu.delete("pods", NS, "web-0")
            (stale,) = await eventually(lambda: events(emu, "GangStale"), what="a GangStale event")
            assert stale["message"].startswith("2 of 3 members active, minMember 3")
            await emu.wait_for(lambda: emu.list("pods", NS) == [], 10, "the rest of the gang was not evicted")
            (evicted,) = await eventually(lambda: events(emu, "GangEvicted"), what="a GangEvicted event")
            assert "evicted 2 pods" in evicted["message"]
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()


@pytest.mark.parametrize("name, spec, said", [
    # Volcano keys the minimums by task: one task per workload
    ("volcano", {"minMember": 2, "minTaskMember": {"decode": 1, "prefill": 1}}, None),
    # coscheduling has no subgroups: the summed minimum, and a warning once
    ("coscheduling", {"minMember": 2},
     "the coscheduling backend cannot express subgroups (decode 1, prefill 1): the gang only needs minMember 2 pods "
     "in all, whichever part they belong to"),
])
async def test_a_group_two_workloads_share_gets_their_subgroups_or_the_sum(name, spec, said):
    backend, scheduler = SCHEDULERS[name]
    async with grouper(name) as (emu, _):
        emu.put(backend.build_podgroup(GangSpec("prefill-decode", NS, 5)))
        for workload, replicas in (("prefill", 2), ("decode", 3)):
            dep = deployment(workload, replicas, ns=NS, scheduler=scheduler,
                             annotations={"podgang.io/min-available": "1"})
            template = dep["spec"]["template"]
            dep["spec"]["template"] = jsonpatch.apply_patch(template, backend.membership_patch(template, "prefill-decode"))
            emu.put(dep)
        await emu.wait_for(lambda: podgroup_of(emu, backend, NS, "prefill-decode")["spec"] == spec, 10,
                           f"spec is {podgroup_of(emu, backend, NS, 'prefill-decode')['spec']}")
        if said:
            await emu.wait_for(lambda: [e["message"] for e in events(emu, "PodGroupProblem", ns=NS)] == [said], 5)
        else:
            assert events(emu, "PodGroupProblem", ns=NS) == []


@pytest.mark.parametrize("placed", [0, 1], ids=["held-whole", "a-later-stage"])
async def test_a_coscheduling_gang_held_whole_is_woken_until_it_is_bound(monkeypatch, placed):
    """The Coscheduling plugin tries a gang it rejected again only on a pod added or its
    PodGroup added or updated — not on a node added: while members wait unbound and fewer
    than minMember are bound — the whole gang held, or the later stage of a staged gang
    beside its placed first stage — the grouper touches the PodGroup once per interval; a
    bound gang is left alone."""
    backend, scheduler = SCHEDULERS["coscheduling"]
    monkeypatch.setattr(backend, "wake_interval", 0.3)
    async with grouper("coscheduling") as (emu, controller):
        dep = emu.put(deployment("web", 3, ns=NS, scheduler=scheduler))
        rs = emu.put(replicaset(dep))
        group = owned_group(dep)
        pods = []
        for i in range(3):
            p = member(f"web-{i}", rs, backend, scheduler, group)
            if i >= placed:
                p["spec"].pop("nodeName", None)
                p["status"] = {"phase": "Pending"}
            pods.append(emu.put(p))

        def woken():
            got = podgroup_of(emu, backend, NS, group)
            return ((got or {}).get("metadata", {}).get("annotations") or {}).get("podgang.io/woken-at")
        await emu.wait_for(woken, 10, "the held gang's PodGroup was not touched")
        for p in pods:  # the scheduler binds the gang
            emu.patch_object("pods", NS, p["metadata"]["name"], {"spec": {"nodeName": "node-1"},
                                                                 "status": {"phase": "Running"}})
        key = f"{NS}/{group}"
        await emu.wait_for(lambda: not is_woken(controller, key), 10, "the grouper kept waking a bound gang")
        await asyncio.wait_for(controller.queue.wait_idle(), 10)
        touched = emu.count("PATCH", r"/podgroups/")
        await asyncio.wait_for(controller.queue.wait_idle(), 10)  # nothing is queued to wake it again
        assert emu.count("PATCH", r"/podgroups/") == touched and not is_woken(controller, key)


def is_woken(controller: Controller, key: str) -> bool:
    """Whether the grouper still wakes the held gang ``key`` (it remembers when it last did)."""
    record = controller.gangs.get(key)
    return record is not None and record.woken is not None
