"""Shared by the per-backend webhook and grouper tests: each new backend with the
scheduler name it serves, and its PodGroup resource in the API emulator."""

from __future__ import annotations

from typing import Any

from podgang.backends import COSCHEDULING, NATIVE, VOLCANO
from podgang.backends.base import Backend
from podgang.settings import Settings
from tests.kube_emulator import ResourceType
from tests.webhook_support import review

SCHEDULERS = {"volcano": (VOLCANO, "volcano"), "coscheduling": (COSCHEDULING, "scheduler-plugins-scheduler"),
              "native": (NATIVE, "default-scheduler")}


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
