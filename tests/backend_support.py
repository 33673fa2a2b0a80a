"""Shared by the per-backend webhook and grouper tests: each new backend with the
scheduler name it serves, and its PodGroup resource in the API emulator."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import jsonpatch

from podgang.backends import COSCHEDULING, NATIVE, VOLCANO, NativeWorkloads
from podgang.backends.base import Backend
from podgang.events import EventRecorder, EventSink
from podgang.grouper.controller import Controller, Options
from podgang.settings import Settings
from tests.grouper_support import pod
from tests.emulator import KubeEmulator, ResourceType
from tests.webhook_support import review

SCHEDULERS = {"volcano": (VOLCANO, "volcano"), "coscheduling": (COSCHEDULING, "scheduler-plugins-scheduler"),
              "native": (NATIVE, "default-scheduler"),
              "native-1.35": (NativeWorkloads(), "default-scheduler")}  # seed 002's Workload API
NS = "team"


def settings_for(name: str) -> Settings:
    backend, scheduler = SCHEDULERS[name]
    return Settings(backends=((scheduler, backend),))


def resource(backend: Backend) -> ResourceType:
    """The backend's PodGroups for the emulator (native ones are built in, not a CRD)."""
    r = backend.podgroup
    return ResourceType(r.group, r.version, r.plural, r.kind, crd=r.group != "scheduling.k8s.io")


def podgroup_of(emu: Any, backend: Backend, namespace: str, name: str) -> dict | None:
    return emu.get(f"{backend.podgroup.plural}.{backend.podgroup.group}", namespace, name)


def bare_pod_review(scheduler: str) -> dict:
    """The recorded review of an owner-less pod, for ``scheduler``, without its GPU
    requests (no GPU sharing rules in the way)."""
    doc = review("pod-create-bare-gpu")
    pod = doc["request"]["object"]
    pod["spec"]["schedulerName"] = scheduler
    pod["metadata"].pop("annotations", None)
    for c in pod["spec"]["containers"]:
        c.pop("resources", None)
    return doc


def member(name: str, rs: dict, backend: Backend, scheduler: str, group: str | None) -> dict:
    """A pod of ``rs`` carrying ``group`` as the webhook would have written it."""
    p = pod(name, owner=rs, ns=NS, scheduler=scheduler, labels={"app": "web"})
    return jsonpatch.apply_patch(p, backend.membership_patch(p, group)) if group else p


@asynccontextmanager
async def grouper(name: str):
    backend, _ = SCHEDULERS[name]
    async with KubeEmulator() as emu:
        emu.register(resource(backend))
        client = emu.api_client()
        controller = Controller(client, settings_for(name), Options(resync_period=300.0, request_timeout=5.0),
                                events=EventSink(EventRecorder(client, "podgang-grouper")))
        task = asyncio.create_task(controller.run())
        try:
            yield emu, controller
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()
