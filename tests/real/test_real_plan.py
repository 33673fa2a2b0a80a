"""``podgang plan`` says what the cluster does: the same objects through the real
apiserver, controller-manager and podgang's webhook, and through ``podgang plan`` as a
new user writes them (partial exports: owner references with UIDs, owners without)."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.realcluster import ROOT, corner, until

CONTRADICTION = {"annotations": {"gpu-memory": "4000"}, "limits": {"nvidia.com/gpu": "1"}}


def deployment(ns: str, name: str, *, skip: bool, placement: dict) -> dict:
    labels = {"podgang.io/skip": "true"} if skip else {}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": CONTRADICTION["annotations"]},
                                  "spec": {"schedulerName": "kai-scheduler", **placement,
                                           "containers": [{"name": "main", "image": "registry.example/x:1",
                                                           "resources": {"limits": CONTRADICTION["limits"]}}]}}}}


def partial_export(dep: dict) -> list[dict]:
    """The Deployment as written (no uid), its ReplicaSet and pod as exported (their
    owner references carry UIDs the Deployment's manifest does not)."""
    ns, name = dep["metadata"]["namespace"], dep["metadata"]["name"]
    template = dep["spec"]["template"]
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": f"{name}-5d8f7", "namespace": ns, "uid": "11111111-2222-3333-4444-555555555555",
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": name,
                                            "uid": "99999999-8888-7777-6666-555555555555", "controller": True}]},
          "spec": {"replicas": 1, "selector": dep["spec"]["selector"], "template": template}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{name}-5d8f7-abcde", "namespace": ns, "labels": template["metadata"]["labels"],
                        "annotations": template["metadata"]["annotations"],
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
                                             "uid": rs["metadata"]["uid"], "controller": True}]},
           "spec": template["spec"]}
    return [dep, rs, pod]


def plan(docs: list[dict], tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return subprocess.run([sys.executable, "-m", "podgang.cli", "plan", str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


async def test_plan_and_the_cluster_agree_on_a_skipped_owner_and_a_gpu_contradiction(cluster, podgang, tmp_path):
    async with corner(cluster, "newuser", nodes=1) as here:
        skipped = deployment(here.namespace, "legacy", skip=True, placement=here.placement)
        judged = deployment(here.namespace, "judged", skip=False, placement=here.placement)
        for dep in (skipped, judged):
            await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", dep)

        # the cluster: the skipped Deployment's pod is created and left to KAI's own
        # pod-grouper (a group of its own per pod); the other's is refused
        async def grouped_by_kai():
            pods = await here.pods(app="legacy")
            return [p for p in pods if (p["metadata"].get("annotations") or {}).get("pod-group-name")
                    == f"pg-{p['metadata']['name']}-{p['metadata']['uid']}"]
        (pod,) = await until(grouped_by_kai, "the skipped Deployment's pod, grouped by KAI's pod-grouper")
        assert "kai.scheduler/skip-podgrouper" not in pod["metadata"]["annotations"]  # podgang did not touch it
        assert not await here.events("Backfilled")

        async def refused():
            events = await here.events("FailedCreate")
            return [e for e in events if "judged" in e["involvedObject"]["name"] and "denied" in e["message"]]
        (denial,) = (await until(refused, "the contradicting pod refused by the webhook"))[:1]
        assert not await here.pods(app="judged")

        # plan, on the same objects written as a new user has them
        said = plan(partial_export(skipped), tmp_path)
        assert said.returncode == 0, said.stdout + said.stderr
        assert "skip" in said.stdout and "Denied (0)" in said.stdout, said.stdout
        said = plan(partial_export(judged), tmp_path)
        assert said.returncode == 1, said.stdout + said.stderr
        assert "Denied (0)" not in said.stdout and "denied" in said.stdout, said.stdout
        assert "GPU" in said.stdout or "gpu" in said.stdout
        assert "denied" in denial["message"]
