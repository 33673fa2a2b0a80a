"""PyTorchJobs and their pods as Kubeflow's training-operator (v1) makes them, for the tests
and benches that play the operator on a real apiserver: pod ``<job>-<type>-<index>`` owned by
the job as its controller, the operator's labels (job name, operator name, replica type and
index, the master's job role), the rendezvous environment (MASTER_ADDR, MASTER_PORT,
WORLD_SIZE, RANK) and, on workers, the init container that waits for the master's Service;
and that headless Service. Gang scheduling is left to the grouper under test (the job sets
no schedulingPolicy, so the operator makes no PodGroup of its own)."""

from __future__ import annotations

import copy
from typing import Any

OPERATOR = "pytorchjob-controller"
PORT = 23456
GROUP = "training.kubeflow.org"


def pytorchjob(name: str, workers: int, *, scheduler: str = "kai-scheduler", labels: dict[str, str] | None = None,
               cpu: str = "100m") -> dict[str, Any]:
    """A PyTorchJob of one master and ``workers`` workers (the manifest a user applies)."""
    def template() -> dict[str, Any]:
        return {"metadata": {"labels": {"app": name}}, "spec": {
            "schedulerName": scheduler, "restartPolicy": "OnFailure",
            "containers": [{"name": "pytorch", "image": "registry.example/pytorch-train:2.5",
                            "command": ["python", "-m", "train"],
                            "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template()},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template()}}}}


def _owner(job: dict[str, Any]) -> dict[str, Any]:
    md = job["metadata"]
    return {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": md["name"], "uid": md["uid"],
            "controller": True, "blockOwnerDeletion": True}


def operator_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the operator creates for a created ``job`` (it needs the job's uid), master first."""
    name = job["metadata"]["name"]
    specs = job["spec"]["pytorchReplicaSpecs"]
    world = sum(int(s.get("replicas") or 0) for s in specs.values())
    pods = []
    rank = 0
    for rtype in ("Master", "Worker"):
        spec = specs.get(rtype)
        for index in range(int((spec or {}).get("replicas") or 0)):
            template = copy.deepcopy(spec["template"])
            role = rtype.lower()
            labels = {**template["metadata"].get("labels", {}),
                      f"{GROUP}/job-name": name, f"{GROUP}/operator-name": OPERATOR,
                      f"{GROUP}/replica-type": role, f"{GROUP}/replica-index": str(index)}
            if rtype == "Master":
                labels[f"{GROUP}/job-role"] = "master"
            pod_spec = template["spec"]
            container = pod_spec["containers"][0]
            container["env"] = [{"name": "MASTER_PORT", "value": str(PORT)},
                                {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
                                {"name": "WORLD_SIZE", "value": str(world)},
                                {"name": "RANK", "value": str(rank)},
                                {"name": "PYTHONUNBUFFERED", "value": "1"}]
            container["ports"] = [{"name": "pytorchjob-port", "containerPort": PORT, "protocol": "TCP"}]
            if rtype == "Worker":
                pod_spec["initContainers"] = [{
                    "name": "init-pytorch", "image": "alpine:3.10",
                    "command": ["sh", "-c", f"until nslookup {name}-master-0; do echo waiting for master; "
                                            f"sleep 2; done;"],
                    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                                  "requests": {"cpu": "50m", "memory": "10Mi"}}}]
            pod_spec["restartPolicy"] = spec.get("restartPolicy") or pod_spec.get("restartPolicy") or "Never"
            pods.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{name}-{role}-{index}", "labels": labels,
                                      "annotations": dict(template["metadata"].get("annotations") or {}),
                                      "ownerReferences": [_owner(job)]},
                         "spec": pod_spec})
            rank += 1
    return pods


def master_service(job: dict[str, Any]) -> dict[str, Any]:
    """The headless Service the operator makes for the master (MASTER_ADDR resolves through it)."""
    name = job["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{name}-master-0", "ownerReferences": [_owner(job)],
                         "labels": {f"{GROUP}/job-name": name, f"{GROUP}/operator-name": OPERATOR,
                                    f"{GROUP}/replica-type": "master", f"{GROUP}/replica-index": "0"}},
            "spec": {"clusterIP": "None", "ports": [{"name": "pytorchjob-port", "port": PORT}],
                     "selector": {f"{GROUP}/job-name": name, f"{GROUP}/replica-type": "master",
                                  f"{GROUP}/replica-index": "0"}}}
