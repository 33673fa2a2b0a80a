"""Builders and a running-grouper harness for the grouper tests.

The emulator runs no controllers, so tests play the Deployment/ReplicaSet
controllers and the kubelet themselves: they put ReplicaSets and pods (already
annotated, as the webhook would have) and set pod phases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from typing import Any, AsyncIterator

from podgang.backends.kai import KAI
from podgang.settings import DEFAULT

from podgang.grouper import cli
from podgang.grouper.controller import Controller

NS = "team"
SCHED = "kai-scheduler"
PG = ("scheduling.run.ai/v2alpha2", "PodGroup")
ANN = KAI.annotation
SKIP_PODGROUPER = "kai.scheduler/skip-podgrouper"
LABEL = KAI.label
MANAGED = {DEFAULT.managed_by_label: DEFAULT.managed_by_value}


def uid() -> str:
    return str(uuid.uuid4())


def template(group: str | None = None, scheduler: str = SCHED, labels: dict | None = None) -> dict:
    lab = dict(labels or {"app": "x"})
    if group:
        lab[LABEL] = group
    return {"metadata": {"labels": lab},
            "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}}


def deployment(name: str, replicas: int, *, group: str | None = None, ns: str = NS, annotations: dict | None = None,
               labels: dict | None = None, scheduler: str = SCHED, generation: int = 1, status: dict | None = None) -> dict:
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid(), "generation": generation}
    if annotations:
        md["annotations"] = annotations
    if labels:
        md["labels"] = labels
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": template(group, scheduler, {"app": name})},
        "status": status if status is not None else {"observedGeneration": generation, "replicas": replicas,
                                                      "updatedReplicas": replicas, "readyReplicas": replicas},
    }


def owner_ref(obj: dict, controller: bool = True) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def replicaset(dep: dict, suffix: str = "abc12") -> dict:
    return {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": f"{dep['metadata']['name']}-{suffix}", "namespace": dep["metadata"]["namespace"],
                     "uid": uid(), "ownerReferences": [owner_ref(dep)]},
        "spec": {"replicas": dep["spec"]["replicas"], "template": dep["spec"]["template"]},
        "status": {"replicas": dep["spec"]["replicas"], "observedGeneration": 1},
    }


def revisioned(dep: dict, revision: int, template_hash: str) -> dict:
    """A Deployment's ReplicaSet as its controller names and labels it, for revision ``revision``."""
    rs = replicaset(dep, template_hash)
    rs["metadata"]["labels"] = {"pod-template-hash": template_hash}
    rs["metadata"]["annotations"] = {"deployment.kubernetes.io/revision": str(revision)}
    return rs


def pod(name: str, *, owner: dict | None = None, group: str | None = None, ns: str = NS, phase: str = "Running",
        node: str | None = "node-1", scheduler: str = SCHED, labels: dict | None = None,
        annotations: dict | None = None) -> dict:
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid(), "labels": dict(labels or {}),
                          "annotations": dict(annotations or {})}
    if group:  # as the webhook admits it (KAI's pod-grouper told to leave it alone)
        md["labels"][LABEL] = group
        md["annotations"][ANN] = group
        if scheduler == SCHED:
            md["annotations"][SKIP_PODGROUPER] = "true"
    if owner is not None:
        md["ownerReferences"] = [owner_ref(owner)]
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "image": "busybox"}]}
    if node and phase in ("Running", "Succeeded", "Failed"):
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec, "status": {"phase": phase}}


def podgroup(name: str, min_member: int, *, ns: str = NS, managed: bool = False, owner: dict | None = None,
             annotations: dict | None = None, kai_evicts: bool = False) -> dict:
    """A KAI PodGroup. A hand-made one leaves eviction to podgang (stalenessGracePeriod -1s,
    as the tests of podgang's eviction need) unless ``kai_evicts``: then KAI does it itself."""
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if managed:
        md["labels"] = dict(MANAGED)
    if owner is not None:
        md["ownerReferences"] = [owner_ref(owner)]
    if annotations:
        md["annotations"] = annotations
    spec: dict[str, Any] = {"minMember": min_member}
    if not managed and not kai_evicts:
        spec["stalenessGracePeriod"] = "-1s"
    return {"apiVersion": PG[0], "kind": PG[1], "metadata": md, "spec": spec}


def owned_group(obj: dict) -> str:
    from podgang.rules import owned_group_name
    from podgang.objects import OwnerRef

    return owned_group_name(OwnerRef.from_dict(owner_ref(obj)))


def kai_subgroups(emu, name: str, ns: str = NS) -> list | None:
    """The ``spec.subGroups`` of KAI PodGroup ``name`` (None: no group, or none set)."""
    obj = emu.get("podgroups", ns, name)
    return None if obj is None else obj["spec"].get("subGroups")


def min_member(emu, name: str, ns: str = NS) -> int | None:
    obj = emu.get("podgroups", ns, name)
    return None if obj is None else obj["spec"].get("minMember")


def events(emu, reason: str | None = None, ns: str = NS, name: str | None = None) -> list[dict]:
    out = []
    for ev in emu.list("events", ns):
        if reason and ev.get("reason") != reason:
            continue
        if name and (ev.get("involvedObject") or {}).get("name") != name:
            continue
        out.append(ev)
    return out


def podgroup_writes(emu, name: str | None = None, method: str | None = None) -> list:
    path = r"/podgroups" + (f"/{name}$" if name else "")
    return [r for r in emu.find_requests(method, path) if r.method in ("POST", "PATCH", "PUT", "DELETE")]


def deploy_with_pods(emu, name: str, replicas: int, *, group: str | None = None, ns: str = NS,
                     phase: str = "Running", annotate: bool = True, **kw: Any) -> tuple[dict, dict, list[dict]]:
    """A Deployment, its ReplicaSet and ``replicas`` pods, stored in the emulator.
    ``group``: the hand-made group its template names; else pods carry the
    Deployment's own group (as the webhook would have set it) when ``annotate``."""
    dep = emu.put(deployment(name, replicas, group=group, ns=ns, **kw))
    rs = emu.put(replicaset(dep))
    pods = [emu.put(pod(f"{rs['metadata']['name']}-{i}", owner=rs, ns=ns, phase=phase, labels={"app": name},
                        group=(group or owned_group(dep)) if annotate else None))
            for i in range(replicas)]
    return dep, rs, pods


def scale(emu, dep: dict, replicas: int) -> dict:
    """``kubectl scale``: spec.replicas changes, generation bumps (status catches up later)."""
    return emu.patch_object("deployments", dep["metadata"]["namespace"], dep["metadata"]["name"],
                            {"spec": {"replicas": replicas}})


def settle_status(emu, dep: dict) -> dict:
    """The Deployment controller catching up: observedGeneration and updatedReplicas."""
    cur = emu.get("deployments", dep["metadata"]["namespace"], dep["metadata"]["name"])
    replicas = cur["spec"]["replicas"]
    return emu.patch_object("deployments", dep["metadata"]["namespace"], dep["metadata"]["name"], {
        "status": {"observedGeneration": cur["metadata"]["generation"], "replicas": replicas,
                   "updatedReplicas": replicas, "readyReplicas": replicas}})


def deployment_progress(emu, dep: dict, reason: str, updated: int, available: int) -> dict:
    """The Deployment controller recording a rollout's progress (the Progressing condition's reason)."""
    cur = emu.get("deployments", dep["metadata"]["namespace"], dep["metadata"]["name"])
    return emu.patch_object("deployments", dep["metadata"]["namespace"], dep["metadata"]["name"], {"status": {
        "observedGeneration": cur["metadata"]["generation"], "replicas": cur["spec"]["replicas"],
        "updatedReplicas": updated, "availableReplicas": available,
        "conditions": [{"type": "Progressing", "status": "True", "reason": reason}]}})


def args(**overrides: Any) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    ns = parser.parse_args([])
    ns.metrics_port = 0
    ns.log_format = "text"
    for key, value in overrides.items():
        setattr(ns, key, value)
    return ns


class RunningGrouper:
    def __init__(self, task: asyncio.Task, stop: asyncio.Event, holder: list[Controller]):
        self.task = task
        self.stop_event = stop
        self._holder = holder

    @property
    def controller(self) -> Controller | None:
        return self._holder[-1] if self._holder else None

    @property
    def controllers(self) -> list[Controller]:
        return list(self._holder)

    async def wait_ready(self, emu, timeout: float = 10.0) -> Controller:
        await emu.wait_for(lambda: self.controller is not None and self.controller.initial_reconcile_done
                           or self.task.done(), timeout, "the grouper did not finish its first reconcile")
        if self.task.done():
            self.task.result()
            raise AssertionError("the grouper stopped")
        return self.controller

    async def stop(self) -> int:
        self.stop_event.set()
        return await asyncio.wait_for(self.task, 10)


@contextlib.asynccontextmanager
async def running_grouper(emu, *, ready: bool = True, **overrides: Any) -> AsyncIterator[RunningGrouper]:
    """``podgang grouper`` against the emulator (through a kubeconfig file, like a user would)."""
    import tempfile, os

    defaults = dict(staleness_grace_period=0.5, orphan_timeout=1.0, resync_period=300.0, request_timeout=5.0)
    defaults.update(overrides)
    fd, path = tempfile.mkstemp(suffix=".kubeconfig")
    os.close(fd)
    emu.write_kubeconfig(path)
    holder: list[Controller] = []
    stop = asyncio.Event()
    task = asyncio.create_task(cli.serve(args(kubeconfig=path, **defaults), stop=stop,
                                         on_controller=holder.append))
    running = RunningGrouper(task, stop, holder)
    try:
        if ready:
            await running.wait_ready(emu)
        yield running
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 10)
        except BaseException:
            task.cancel()
        os.unlink(path)
