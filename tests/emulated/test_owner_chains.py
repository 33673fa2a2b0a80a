"""Owner chains at run time (issue 32): a gang whose top owner is of a kind podgang does not
know, with no known kind below it (an Argo Workflow's step pods), keeps the size podgang
guessed — and the grouper says so, once, with how to pin it; a pin ends the guess."""

from __future__ import annotations

import asyncio
from typing import Any

from podgang.backends.kai import KAI
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from podgang.settings import Settings
from tests.backend_support import podgroup_of, resource
from tests.emulator import KubeEmulator
from tests.webhook_support import eventually

NS = "pipelines"
SETTINGS = Settings(backends=(("kai-scheduler", KAI),))
WORKFLOW = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "name": "etl", "uid": "wf-1"}
GROUP = "pg-etl-wf-1"


def step_pod(name: str) -> dict[str, Any]:
    """A pod the Workflow controller makes itself, admitted into the group podgang names after
    its top owner (the webhook's patch: KAI's pod-group-name)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "annotations": {"pod-group-name": GROUP},
                         "ownerReferences": [{**WORKFLOW, "controller": True}]},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "argoproj/argoexec"}]},
            "status": {"phase": "Pending"}}


def assumed_events(emu: KubeEmulator) -> list[dict]:
    return [e for e in emu.list("events", NS) if e.get("reason") == "GangSizeAssumed"]


async def test_a_gang_of_a_kind_podgang_does_not_know_is_said_to_be_a_guess_once_until_pinned():
    async with KubeEmulator() as emu:
        emu.register(resource(KAI))
        client = emu.api_client()
        controller = Controller(client, SETTINGS, Options(resync_period=300.0, request_timeout=5.0),
                                events=EventSink(EventRecorder(client, "podgang-grouper")))
        task = asyncio.create_task(controller.run())
        try:
            emu.put(step_pod("etl-step-1"))
            await emu.wait_for(lambda: podgroup_of(emu, KAI, NS, GROUP) is not None, 10, "the Workflow's group")
            (said,) = await eventually(lambda: assumed_events(emu), what="a GangSizeAssumed event")
            assert said["type"] == "Normal" and said["involvedObject"]["name"] == GROUP
            assert said["message"] == (
                "podgang does not know the kind Workflow of workflow/etl, the top owner of these pods: it assumed "
                "they need not run together (minMember 1); if N of them must, pin it with podgang.io/min-member=N "
                "on this PodGroup")
            emu.put(step_pod("etl-step-2"))  # another pod: nothing new to say
            await controller.queue.wait_idle()
            assert len(assumed_events(emu)) == 1
            group = podgroup_of(emu, KAI, NS, GROUP)
            group["metadata"].setdefault("annotations", {})["podgang.io/min-member"] = "2"
            emu.put(group)  # the user pins it: no longer a guess
            await emu.wait_for(lambda: podgroup_of(emu, KAI, NS, GROUP)["spec"]["minMember"] == 2, 10, "pinned to 2")
            await controller.queue.wait_idle()
            assert len(assumed_events(emu)) == 1
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
