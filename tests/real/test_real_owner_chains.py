"""Owner chains (issue 32) on the real apiserver and the real schedulers: a pod's gang belongs
to the highest owner whose kind defines one.

A wrapper (LWS's DisaggregatedSet) and a schedule (KubeRay's RayCronJob, spark-operator's
ScheduledSparkApplication) define none: each LeaderWorkerSet, RayJob or SparkApplication they
make keeps the gangs of its own kind, and each run of a schedule is a gang of its own. Grove's
kinds (PodCliqueSet, PodCliqueScalingGroup, PodClique) make their own gang (Grove's PodGang):
podgang leaves their pods alone. The kinds' real CRDs are installed
(tests/fixtures/crds/workloads); their operators do not run here and are played as
``tests/real/test_real_journeys.py`` plays LWS and the training operators: the objects each
controller makes, with the ownerReferences and labels it sets (/work/research32/FACTS.md names
the upstream code of each).
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest

from tests.crd_support import crd_valid
from tests.realcluster import Corner, FakeKubelet, corner, until
from tests.real.test_real_journeys import (KAI, VOLCANO, Flavor, controller_ref, create_deployment, owned_group,
                                      play_lws_pods, play_pod, pod_template, podgroup, wait_bound, wait_size)
from tests.real.test_real_workloads import assert_podgangs, spark_labels, wait_ready

#: the schedulers these chains are placed by (the chain is the same for every backend)
CHAIN_FLAVORS = [f.param() for f in (KAI, VOLCANO)]

MANAGED_BY = "podgang.io/managed-by"


async def podgang_groups(here: Corner, flavor: Flavor) -> list[str]:
    """The names of the PodGroups podgang made in the test's namespace."""
    groups = (await here.api.get(f"{flavor.podgroups}/namespaces/{here.namespace}/{flavor.plural}"))["items"]
    return sorted(g["metadata"]["name"] for g in groups if MANAGED_BY in (g["metadata"].get("labels") or {}))


async def create(here: Corner, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (of a CRD kind), checked against its real CRD, created in the test's namespace."""
    obj["metadata"]["namespace"] = here.namespace
    return await here.api.create(f"/apis/{obj['apiVersion']}/namespaces/{here.namespace}/{plural}", crd_valid(obj))


# ---------------------------------------------------------------------------
# a DisaggregatedSet: one LeaderWorkerSet per role, each LWS group its own gang


def ds_labels(ds: str, role: str, revision: str, slice_index: int = 0) -> dict[str, str]:
    """What the DisaggregatedSet controller writes on each LeaderWorkerSet and merges into
    both its pod templates (kubernetes-sigs/lws pkg/utils/disaggregatedset GenerateLabels)."""
    return {"disaggregatedset.x-k8s.io/name": ds, "disaggregatedset.x-k8s.io/role": role,
            "disaggregatedset.x-k8s.io/slice": str(slice_index), "disaggregatedset.x-k8s.io/revision": revision,
            "app": f"{ds}-{slice_index}-{role}"}


def lws_spec(here: Corner, flavor: Flavor, replicas: int, size: int, gpus: int,
             labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = pod_template(here, flavor, (labels or {}).get("app", "lws"), gpus=gpus, labels=labels)
    return {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "leaderTemplate": template,
                                                           "workerTemplate": template}}


async def play_role(here: Corner, flavor: Flavor, ds: dict[str, Any], role: str, revision: str, gpus: int) -> dict:
    """The DisaggregatedSet controller's part for one role of slice 0: the LeaderWorkerSet
    ``<ds>-0-<revision>-<role>``, controlled by the set (lws_manager.go builds that reference
    by hand, controller: true), its spec the role's with the set's labels on it and its pods.
    Then the LWS controller's part (``play_lws_pods``), with the set's labels on its pods."""
    ds_name = ds["metadata"]["name"]
    written = next(r for r in ds["spec"]["roles"] if r["name"] == role)["spec"]
    replicas, size = written["replicas"], written["leaderWorkerTemplate"]["size"]
    labels = ds_labels(ds_name, role, revision)
    name = f"{ds_name}-0-{revision}-{role}"
    lws = await create(here, "leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "labels": {**flavor.workload_labels, **labels},
                     "ownerReferences": [controller_ref(ds)]},
        "spec": lws_spec(here, flavor, replicas, size, gpus, labels)})
    await play_lws_pods(here, flavor, lws, gpus, labels, {"leaderworkerset.sigs.k8s.io/size": str(size)})
    return lws


@pytest.mark.parametrize("flavor", CHAIN_FLAVORS)
async def test_each_leaderworkerset_group_of_a_disaggregatedset_is_its_own_gang(cluster, podgang, flavor):
    """A DisaggregatedSet of prefill (2 groups of 2) and decode (1 group of 2): each of its
    LeaderWorkerSets keeps the gangs a lone LWS has, one per group, of its size, and the
    scheduler places each; no gang is the set's (before issue 32: one gang of 1 for the set)."""
    async with corner(cluster, f"ds-{flavor.backend}", nodes=2) as here:
        revision = "6d4f9b7c8"
        ds = await create(here, "disaggregatedsets", {
            "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": "pd", "labels": flavor.workload_labels},
            "spec": {"roles": [{"name": role, "metadata": {"labels": flavor.workload_labels},
                                "spec": lws_spec(here, flavor, replicas, 2, 1)}
                               for role, replicas in (("prefill", 2), ("decode", 1))]}})
        lwss = {role: await play_role(here, flavor, ds, role, revision, gpus=1) for role in ("prefill", "decode")}
        expected = {role: [f"{owned_group(lws)}-group-{i}" for i in range(lws["spec"]["replicas"])]
                    for role, lws in lwss.items()}
        for role, groups in expected.items():
            for group in groups:
                await wait_size(here, flavor, group, 2)
            pods = await wait_bound(here, f"pd-0-{role}", 2 * len(groups))
            for i, group in enumerate(groups):
                await assert_podgangs(here, flavor, group, [
                    p for p in pods if p["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/group-index"] == str(i)])
        made = await podgang_groups(here, flavor)
        assert made == sorted(g for groups in expected.values() for g in groups), made
        assert await podgroup(here, flavor, owned_group(ds)) is None
        assert not [g for g in made if ds["metadata"]["uid"] in g], made


# ---------------------------------------------------------------------------
# a schedule's runs: each a gang of its own


def ray_cluster_spec(here: Corner, flavor: Flavor, app: str, workers: int) -> dict[str, Any]:
    return {"headGroupSpec": {"rayStartParams": {}, "template": pod_template(here, flavor, app, gpus=1)},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": workers, "minReplicas": 0, "maxReplicas": workers,
                                  "rayStartParams": {}, "template": pod_template(here, flavor, app, gpus=1)}]}


async def play_ray_run(here: Corner, flavor: Flavor, cron: dict[str, Any], minutes: int) -> dict[str, Any]:
    """One run of a RayCronJob as KubeRay makes it: the RayJob ``<cronjob>-<minutes>`` from
    ``jobTemplate``, labelled ``ray.io/cronjob-name``, controlled by the RayCronJob
    (raycronjob_controller.go constructRayJob); its RayCluster ``<rayjob>-raycluster-<5>``
    with the RayJob's labels, controlled by the RayJob and named in its status
    (rayjob_controller.go); the head and worker pods, controlled by the cluster, with Ray's
    labels. Returns the RayCluster."""
    ns, cron_name = here.namespace, cron["metadata"]["name"]
    name = f"{cron_name}-{minutes}"
    job = await create(here, "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": name, "labels": {**flavor.workload_labels, "ray.io/cronjob-name": cron_name},
                     "annotations": {"ray.io/cronjob-scheduled-timestamp": time.strftime(
                         "%Y-%m-%dT%H:%M:%SZ", time.gmtime(minutes * 60))},
                     "ownerReferences": [controller_ref(cron)]},
        "spec": copy.deepcopy(cron["spec"]["jobTemplate"])})
    cluster_name = f"{name}-raycluster-{minutes % 100000:05d}"
    ray = await create(here, "rayclusters", {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": cluster_name, "labels": {**job["metadata"]["labels"], "ray.io/originated-from-crd": "RayJob",
                                                      "ray.io/originated-from-cr-name": name},
                     "ownerReferences": [controller_ref(job)]},
        "spec": job["spec"]["rayClusterSpec"]})
    await here.api.merge_patch(f"/apis/ray.io/v1/namespaces/{ns}/rayjobs/{name}/status", {"status": {
        "rayClusterName": cluster_name, "jobDeploymentStatus": "Initializing"}})
    pod_labels = {"ray.io/cluster": cluster_name, "ray.io/originated-from-crd": "RayJob",
                  "ray.io/originated-from-cr-name": name}
    await play_pod(here, flavor, f"{cluster_name}-head", ray, name,
                   {**pod_labels, "ray.io/group": "headgroup", "ray.io/node-type": "head"}, gpus=1)
    for i in range(cron_workers(cron)):
        await play_pod(here, flavor, f"{cluster_name}-gpu-worker-{i}", ray, name,
                       {**pod_labels, "ray.io/group": "gpu", "ray.io/node-type": "worker"}, gpus=1)
    return ray


def cron_workers(cron: dict[str, Any]) -> int:
    return cron["spec"]["jobTemplate"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"]


@pytest.mark.parametrize("flavor", CHAIN_FLAVORS)
async def test_each_run_of_a_raycronjob_is_its_own_gang(cluster, podgang, flavor):
    """Two runs of a RayCronJob (a head and 2 workers each): two gangs, one per run's
    cluster, each of 3 and placed whole; none is the schedule's. (A guard more than a fix:
    a RayJob's cluster is one of its runs, so the walk stopped there before issue 32 too.)"""
    async with corner(cluster, f"raycron-{flavor.backend}", nodes=2) as here:
        cron = await create(here, "raycronjobs", {
            "apiVersion": "ray.io/v1", "kind": "RayCronJob",
            "metadata": {"name": "nightly", "labels": flavor.workload_labels},
            "spec": {"schedule": "0 * * * *", "jobTemplate": {
                "entrypoint": "python /home/ray/samples/sample_code.py", "shutdownAfterJobFinishes": True,
                "rayClusterSpec": ray_cluster_spec(here, flavor, "nightly", 2)}}})
        runs = [await play_ray_run(here, flavor, cron, minutes) for minutes in (29_425_620, 29_425_680)]
        groups = [owned_group(ray) for ray in runs]
        assert len(set(groups)) == 2
        for ray, group in zip(runs, groups):
            await wait_size(here, flavor, group, 3)
            run = ray["metadata"]["labels"]["ray.io/originated-from-cr-name"]
            await assert_podgangs(here, flavor, group, await wait_bound(here, run, 3))
        assert await podgang_groups(here, flavor) == sorted(groups)
        assert await podgroup(here, flavor, owned_group(cron)) is None


@pytest.mark.parametrize("flavor", CHAIN_FLAVORS)
async def test_each_run_of_a_scheduled_spark_application_is_its_own_gang(cluster, podgang, flavor):
    """Two runs of a ScheduledSparkApplication: SparkApplications it owns without being their
    controller (spark-operator sets no ``controller`` on that reference). Each is a gang of
    its own, staged as a SparkApplication: its driver first (1); the run that starts running
    grows to its driver and executor while the other stays at its driver."""
    async with corner(cluster, f"sspark-{flavor.backend}", nodes=1) as here, FakeKubelet(here):
        ns = here.namespace
        part = {"cores": 1, "memory": "512m", "schedulerName": flavor.scheduler}
        schedule = await create(here, "scheduledsparkapplications", {
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "ScheduledSparkApplication",
            "metadata": {"name": "pi-nightly", "labels": flavor.workload_labels},
            "spec": {"schedule": "@every 10m", "concurrencyPolicy": "Allow", "template": {
                "type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
                "mainClass": "org.apache.spark.examples.SparkPi",
                "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                "driver": part, "executor": {**part, "instances": 1}}}})
        owner = {"apiVersion": schedule["apiVersion"], "kind": schedule["kind"], "name": "pi-nightly",
                 "uid": schedule["metadata"]["uid"], "blockOwnerDeletion": True}  # no controller (controller.go)
        apps = []
        for stamp in (1764300000, 1764300600):
            apps.append(await create(here, "sparkapplications", {
                "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
                "metadata": {"name": f"pi-nightly-{stamp}", "ownerReferences": [owner],
                             "labels": {**flavor.workload_labels, "sparkoperator.k8s.io/scheduled-app-name": "pi-nightly"}},
                "spec": schedule["spec"]["template"]}))
        groups = [owned_group(app) for app in apps]
        assert len(set(groups)) == 2
        drivers = {}
        for app, group in zip(apps, groups):
            name = app["metadata"]["name"]
            await wait_size(here, flavor, group, 1)
            drivers[name] = await play_pod(here, flavor, f"{name}-driver", app, f"{name}-driver",
                                           spark_labels(name, "driver"))
            await assert_podgangs(here, flavor, group, await wait_bound(here, f"{name}-driver", 1))
        first = apps[0]["metadata"]["name"]
        await wait_ready(here, 1, app=f"{first}-driver")
        await here.api.merge_patch(f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications/{first}/status",
                                   {"status": {"applicationState": {"state": "RUNNING"},
                                               "driverInfo": {"podName": f"{first}-driver"}}})
        await wait_size(here, flavor, groups[0], 2)
        executor = await play_pod(here, flavor, f"{first}-exec-1", drivers[first], f"{first}-exec",
                                  spark_labels(first, "executor", **{"spark-exec-id": "1"}))
        await wait_bound(here, f"{first}-exec", 1)
        await assert_podgangs(here, flavor, groups[0], [drivers[first], executor])
        assert flavor.size(await podgroup(here, flavor, groups[1])) == 1  # the other run: its driver alone
        assert await podgang_groups(here, flavor) == sorted(groups)
        assert await podgroup(here, flavor, owned_group(schedule)) is None


# ---------------------------------------------------------------------------
# Grove: its pods are left alone


def grove_pod(here: Corner, clique: dict[str, Any], pcs: str, index: int) -> dict[str, Any]:
    """A pod as Grove's PodClique controller makes it (operator/internal/controller/podclique/
    components/pod/pod.go): ``generateName: <pclq>-``, controlled by the PodClique, Grove's
    labels (its PodGang: the base one of replica 0, ``<pcs>-0``), the clique's pod spec, and
    the scheduling gate Grove lifts once the PodGang exists. Grove's released KAI backend sets
    only ``schedulerName``."""
    name = clique["metadata"]["name"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{name}-", "namespace": here.namespace,
                         "labels": {**clique["metadata"]["labels"], "grove.io/podclique": name,
                                    "grove.io/podgang": f"{pcs}-0", "grove.io/podclique-pod-index": str(index),
                                    "app": pcs},
                         "ownerReferences": [controller_ref(clique)]},
            "spec": {**clique["spec"]["podSpec"], "schedulingGates": [{"name": "grove.io/podgang-pending-creation"}]}}


async def test_kai_grove_pods_are_left_as_grove_made_them(cluster, podgang):
    """A PodCliqueSet's pods, of a standalone PodClique and of a PodClique in a
    PodCliqueScalingGroup: the webhook admits them unchanged (no ``pod-group-name``, no
    ``kai.scheduler/skip-podgrouper``) and says why; the grouper makes no PodGroup for them
    nor writes on them, though it has seen them (it has placed a gang made after them)."""
    async with corner(cluster, "grove-kai", nodes=1) as here, FakeKubelet(here):
        ns = here.namespace
        pod_spec = {**pod_template(here, KAI, "serve")["spec"]}
        common = {"app.kubernetes.io/managed-by": "grove-operator", "app.kubernetes.io/part-of": "serve",
                  "grove.io/podcliqueset-replica-index": "0"}
        pcs = await create(here, "podcliquesets", {
            "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
            "metadata": {"name": "serve", "labels": KAI.workload_labels},
            "spec": {"replicas": 1, "template": {
                "cliques": [{"name": clique, "spec": {"roleName": clique, "replicas": count, "podSpec": pod_spec}}
                            for clique, count in (("frontend", 2), ("leader", 1))],
                "podCliqueScalingGroups": [{"name": "prefill", "cliqueNames": ["leader"], "replicas": 1}]}}})
        pcsg = await create(here, "podcliquescalinggroups", {
            "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueScalingGroup",
            "metadata": {"name": "serve-0-prefill", "labels": common, "ownerReferences": [controller_ref(pcs)]},
            "spec": {"cliqueNames": ["leader"], "replicas": 1, "minAvailable": 1}})
        cliques = [await create(here, "podcliques", {
            "apiVersion": "grove.io/v1alpha1", "kind": "PodClique",
            "metadata": {"name": name, "labels": {**common, **extra}, "ownerReferences": [controller_ref(owner)]},
            "spec": {"roleName": role, "replicas": count, "minAvailable": count, "podSpec": pod_spec}})
            for name, owner, role, count, extra in (
                ("serve-0-frontend", pcs, "frontend", 2, {}),
                ("serve-0-prefill-0-leader", pcsg, "leader", 1,
                 {"grove.io/podcliquescalinggroup": "serve-0-prefill",
                  "grove.io/podcliquescalinggroup-replica-index": "0"}))]
        sent, made = [], []
        for clique in cliques:
            for i in range(clique["spec"]["replicas"]):
                pod = grove_pod(here, clique, "serve", i)
                sent.append(pod)
                made.append(await here.api.create(f"/api/v1/namespaces/{ns}/pods", pod))
        for pod, admitted in zip(sent, made):  # what the webhook answered: nothing to change
            assert (admitted["metadata"].get("annotations") or {}) == {}, admitted["metadata"]
            assert admitted["metadata"]["labels"] == pod["metadata"]["labels"]
            assert admitted["spec"].get("schedulingGates") == pod["spec"]["schedulingGates"]
        log = podgang.processes["webhook"].log

        async def said_why() -> list[str]:  # the decision log: one skip per pod, with the reason
            lines = [line for line in log.read_text(errors="replace").splitlines()
                     if f"namespace={ns}" in line and "endpoint=/mutate-pods" in line and "verdict=skipped" in line]
            return lines if len(lines) >= len(made) else []
        for line in await until(said_why, f"the webhook's {len(made)} skips logged"):
            assert "its gang is Grove" in line and "podgang leaves it alone" in line, line
        # a gang made after them: once the grouper has placed it, it has seen every Grove pod
        after = await create_deployment(here, KAI, "after", 2)
        await podgang.wait_logged("placed: 2 of minMember 2 members active", ns)
        assert await podgang_groups(here, KAI) == [owned_group(after)]
        for owner in (pcs, pcsg, *cliques):
            assert await podgroup(here, KAI, owned_group(owner)) is None
        for admitted in made:
            now = await here.api.get(f"/api/v1/namespaces/{ns}/pods/{admitted['metadata']['name']}")
            notes = now["metadata"].get("annotations") or {}
            assert "kai.scheduler/skip-podgrouper" not in notes, notes
            writers = {m.get("manager") for m in now["metadata"].get("managedFields") or []}
            assert not [w for w in writers if w and w.startswith("podgang")], writers


# ---------------------------------------------------------------------------
# an AppWrapper: the PyTorchJob it wraps keeps its own gang


@pytest.mark.parametrize("flavor", CHAIN_FLAVORS)
async def test_a_pytorchjob_in_an_appwrapper_is_its_own_gang(cluster, podgang, flavor):
    """An AppWrapper's one component, a PyTorchJob of a master and 2 workers, created as written
    and controlled by the AppWrapper (project-codeflare/appwrapper createComponent), its pods
    played as training-operator makes them: the job's gang of 3 with its roles, placed whole;
    none is the AppWrapper's (before issue 32: one gang of 1 for the wrapper)."""
    async with corner(cluster, f"aw-{flavor.backend}", nodes=1) as here:
        template = pod_template(here, flavor, "train")
        replica = {"replicas": 1, "restartPolicy": "OnFailure", "template": template}
        job_spec = {"pytorchReplicaSpecs": {"Master": replica, "Worker": {**replica, "replicas": 2}}}
        wrapper = await create(here, "appwrappers", {
            "apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": "wrapped", "labels": flavor.workload_labels},
            "spec": {"components": [{"template": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                                                   "metadata": {"name": "train"}, "spec": job_spec}}]}})
        job = await create(here, "pytorchjobs", {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "train", "ownerReferences": [controller_ref(wrapper)],
                         "labels": {**flavor.workload_labels, "workload.codeflare.dev/appwrapper": "wrapped"}},
            "spec": job_spec})
        group = owned_group(job)
        for name, role in (("train-master-0", "master"), ("train-worker-0", "worker"), ("train-worker-1", "worker")):
            await play_pod(here, flavor, name, job, "train", {
                "training.kubeflow.org/job-name": "train", "training.kubeflow.org/replica-type": role,
                "training.kubeflow.org/replica-index": name[-1]})
        await wait_size(here, flavor, group, 3)
        await assert_podgangs(here, flavor, group, await wait_bound(here, "train", 3))
        assert await podgang_groups(here, flavor) == [group]
        assert await podgroup(here, flavor, owned_group(wrapper)) is None


# ---------------------------------------------------------------------------
# a SparkConnect: its server, then its server and executors


@pytest.mark.parametrize("flavor", CHAIN_FLAVORS)
async def test_a_spark_connect_places_its_server_then_its_executors(cluster, podgang, flavor):
    """A SparkConnect's server pod (controlled by it, spark-operator's reconciler) is the gang
    alone until the SparkConnect is Ready; then the 2 executors the server makes (owned by the
    server pod) grow it to 3, one gang named after the SparkConnect."""
    async with corner(cluster, f"sconn-{flavor.backend}", nodes=1) as here, FakeKubelet(here):
        ns = here.namespace
        part = {"template": {"spec": {"schedulerName": flavor.scheduler}}}
        conn = await create(here, "sparkconnects", {
            "apiVersion": "sparkoperator.k8s.io/v1alpha1", "kind": "SparkConnect",
            "metadata": {"name": "conn", "labels": flavor.workload_labels},
            "spec": {"sparkVersion": "4.0.0", "server": part, "executor": {**part, "instances": 2}}})
        group = owned_group(conn)
        connect = {"sparkoperator.k8s.io/connect-name": "conn", "sparkoperator.k8s.io/launched-by-spark-operator": "true"}
        server = await play_pod(here, flavor, "conn-server", conn, "conn-server",
                                {**connect, "spark-role": "connect-server"})
        await wait_size(here, flavor, group, 1)
        await assert_podgangs(here, flavor, group, await wait_bound(here, "conn-server", 1))
        await wait_ready(here, 1, app="conn-server")
        await here.api.merge_patch(f"/apis/sparkoperator.k8s.io/v1alpha1/namespaces/{ns}/sparkconnects/conn/status",
                                   {"status": {"state": "Ready"}})
        await wait_size(here, flavor, group, 3)
        executors = [await play_pod(here, flavor, f"conn-exec-{i}", server, "conn-exec",
                                    {**connect, "spark-role": "executor", "spark-exec-id": str(i)}) for i in (1, 2)]
        await wait_bound(here, "conn-exec", 2)
        await assert_podgangs(here, flavor, group, [server, *executors])
        assert await podgang_groups(here, flavor) == [group]
