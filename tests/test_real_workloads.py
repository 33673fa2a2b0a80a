"""The checks of issues 17 and 18 that the journeys did not cover, on the real schedulers.

Issue 17: a Job, a LeaderWorkerSet and seed 004's prefill + decode group, each placed all
at once by the real KAI scheduler, in the queue and at the priority KAI's own pod-grouper
would have chosen. Issue 18: an MPIJob, a TrainJob and a SparkApplication, their operators
played as they make their pods (owner references, labels, the stages they go through), each
placed all at once by KAI and by Volcano at every stage podgang says it has. Where a real
controller runs here (batch Jobs: the Job controller makes their pods) it does the work;
the rest is played, as ``tests/test_real_journeys.py`` plays the LWS and training operators.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from tests.crd_support import crd_valid
from tests.realcluster import WORKLOAD_CRDS, Corner, FakeKubelet, corner, create_all, example, until, workload_crds
from tests.test_real_journeys import (KAI, VOLCANO, Flavor, _all_running, controller_ref, ensure_kai_queue,
                                      owned_group, play_leaderworkerset, play_operator_pods, play_pod, pod_template,
                                      podgroup, wait_bound, wait_held_whole, wait_size)

TRAINING_FLAVORS = [f.param() for f in (KAI, VOLCANO)]
MPI_OPERATOR_CRD = WORKLOAD_CRDS / "kubeflow.org_mpijobs.v2beta1-mpi-operator.yaml"
MPIJOBS_CRD = "customresourcedefinition/mpijobs.kubeflow.org"


# ---------------------------------------------------------------------------
# looks and builders


def job_pod_template(here: Corner, flavor: Flavor, app: str, *, gpus: int = 0,
                     labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Job's pod template: the Job API wants a restartPolicy of Never or OnFailure."""
    template = pod_template(here, flavor, app, gpus=gpus, labels=labels)
    template["spec"]["restartPolicy"] = "Never"
    return template


#: where each scheduler reads a pod's PodGroup
GROUP_KEYS = {"kai": "pod-group-name", "volcano": "scheduling.k8s.io/group-name"}


def kai_settings(group: dict[str, Any]) -> tuple[str | None, str | None]:
    return group["spec"].get("queue"), group["spec"].get("priorityClassName")


async def assert_podgangs(here: Corner, flavor: Flavor, group: str, pods: list[dict[str, Any]], *,
                          hand_made: bool = False) -> None:
    """Every one of ``pods`` is in ``group``, and the group is podgang's (KAI's own grouper
    would have named a Job's or a JobSet's group the same) unless a user made it."""
    made = await podgroup(here, flavor, group)
    assert made is not None, f"no PodGroup {group}"
    assert hand_made or "podgang.io/managed-by" in (made["metadata"].get("labels") or {}), made["metadata"]
    outside = [p["metadata"]["name"] for p in pods
               if (p["metadata"].get("annotations") or {}).get(GROUP_KEYS[flavor.backend]) != group]
    assert not outside, f"pods outside {group}: {outside}"


async def wait_parts(here: Corner, flavor: Flavor, name: str, size: int,
                     parts: dict[str, int]) -> dict[str, Any]:
    """The group of ``size`` with one part per role as its scheduler spells them: KAI's
    ``spec.subGroups``, Volcano's ``spec.minTaskMember`` (none listed for a one-part gang)."""
    async def shaped():
        group = await podgroup(here, flavor, name)
        if not group or flavor.size(group) != size:
            return None
        spec = group["spec"]
        if flavor is KAI:
            listed = {s["name"]: s.get("minMember") for s in spec.get("subGroups") or []}
        else:
            listed = dict(spec.get("minTaskMember") or {})
        return group if listed == parts else None
    return await until(shaped, f"{flavor.backend} PodGroup {name} of {size} with parts {parts}")


async def wait_ready(here: Corner, count: int, **labels: str) -> list[dict[str, Any]]:
    """``count`` pods with ``labels`` Running and Ready (the FakeKubelet's doing)."""
    async def ready():
        pods = await here.pods(**labels)
        return pods if len(pods) == count and all(
            any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []) for p in pods) else None
    return await until(ready, f"{count} pods {labels} Ready")


async def create_job(here: Corner, name: str, spec: dict[str, Any], *, labels: dict[str, str] | None = None,
                     owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """A batch Job; the real Job controller makes its pods."""
    md: dict[str, Any] = {"name": name, "namespace": here.namespace, "labels": labels or {}}
    if owner:
        md["ownerReferences"] = [controller_ref(owner)]
    return await here.api.create(f"/apis/batch/v1/namespaces/{here.namespace}/jobs",
                                 {"apiVersion": "batch/v1", "kind": "Job", "metadata": md, "spec": spec})


# ---------------------------------------------------------------------------
# issue 17: KAI places each gang, in the queue and at the priority KAI's grouper would pick


async def test_kai_job_stays_whole_then_is_placed_in_its_queue_at_train_priority(cluster, podgang):
    """A Job of 3 × 2 GPUs (one node has 4): none starts until a second node makes room for
    all three. KAI's grouper would queue it by the Job's kai.scheduler/queue label and give
    a Job its ``train`` priority; podgang's group says the same."""
    async with corner(cluster, "kai-job", nodes=1) as here:
        job = await create_job(here, "sweep", {
            "parallelism": 3, "completions": 3, "template": job_pod_template(here, KAI, "sweep", gpus=2)},
            labels=KAI.workload_labels)
        group = await wait_size(here, KAI, owned_group(job), 3)
        assert kai_settings(group) == (KAI.workload_labels["kai.scheduler/queue"], "train")
        await wait_held_whole(here, "sweep", 3)
        await here.add_node()
        await assert_podgangs(here, KAI, owned_group(job), await wait_bound(here, "sweep", 3))


async def test_kai_leaderworkerset_group_is_placed_in_its_queue_at_train_priority(cluster, podgang):
    """One LWS group of a leader and 3 workers: KAI's own grouper (LwsGrouper, default
    metadata) would take the queue from the LWS's label and fall back to ``train``."""
    async with corner(cluster, "kai-lws", nodes=1) as here:
        lws = await play_leaderworkerset(here, KAI, "llm", replicas=1, size=4, gpus=1)
        group = await wait_size(here, KAI, f"{owned_group(lws)}-group-0", 4)
        assert kai_settings(group) == (KAI.workload_labels["kai.scheduler/queue"], "train")
        await assert_podgangs(here, KAI, group["metadata"]["name"], await wait_bound(here, "llm", 4))


async def test_kai_prefill_decode_shared_group_is_placed_as_written(cluster, podgang):
    """Seed 004 (examples/06-prefill-decode.yaml): two Deployments name one hand-made
    PodGroup in queue ``default``. podgang sizes it and writes a subgroup per Deployment,
    but never its queue or priority: a hand-made group's settings are its author's."""
    async with corner(cluster, "kai-pd", nodes=2) as here:
        await ensure_kai_queue(here, "default")  # the queue the example's group names
        docs = example("06-prefill-decode.yaml", here.namespace, here.placement)
        written = copy.deepcopy(next(d for d in docs if d["kind"] == "PodGroup")["spec"])
        await create_all(here, docs)
        group = await wait_parts(here, KAI, "prefill-decode", 2, {"decode": 1, "prefill": 1})
        assert kai_settings(group) == (written["queue"], written.get("priorityClassName"))

        async def five_bound():
            pods = [p for p in await here.pods() if p["metadata"]["labels"].get("app") in ("prefill", "decode")]
            return len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods)
        await until(five_bound, "the 2 prefill and 3 decode pods bound")
        members = await here.pods(**{"kai.scheduler/podgroup": "prefill-decode"})
        assert len(members) == 5
        await assert_podgangs(here, KAI, "prefill-decode", members, hand_made=True)


# ---------------------------------------------------------------------------
# issue 18: MPIJob v2beta1 (mpi-operator), launcherCreationPolicy WaitForWorkersReady


@pytest.fixture(scope="module")
def mpi_operator(cluster, podgang):
    """mpi-operator's MPIJob CRD (v2beta1) in place of training-operator's (v1): one CRD
    name, so a cluster runs one of the two. The grouper starts again after each swap: between
    the delete and the create no version is served, and it probes for a kind served at none
    only every 10 minutes (a version replaced by another while served is followed at once:
    the emulator test shows it). The v1 CRD comes back afterwards for the rest of the session."""
    def swap(path):
        cluster.kubectl("delete", MPIJOBS_CRD, "--ignore-not-found", "--wait=true")
        cluster.apply_crds(path)
        podgang.stop_grouper()
        podgang.start_grouper()
    swap(MPI_OPERATOR_CRD)
    yield
    swap(next(p for p in workload_crds() if p.name == "kubeflow.org_mpijobs.yaml"))


def mpi_labels(job: str, role: str) -> dict[str, str]:
    """mpi-operator's defaultLabels (pkg/controller/mpi_job_controller.go)."""
    return {"training.kubeflow.org/operator-name": "mpi-operator", "training.kubeflow.org/job-name": job,
            "training.kubeflow.org/job-role": role}


@pytest.mark.parametrize("flavor", TRAINING_FLAVORS)
async def test_an_mpijob_places_its_workers_then_its_launcher(cluster, podgang, mpi_operator, flavor):
    """mpi-operator makes the workers (pods it owns), and — WaitForWorkersReady — the
    launcher Job only once every worker is Ready. The gang is the two workers first, placed
    together; it grows to 3 with a launcher part once mpi-operator reports the launcher."""
    async with corner(cluster, f"mpi-{flavor.backend}", nodes=1) as here, FakeKubelet(here):
        ns = here.namespace
        job = await here.api.create(f"/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs", crd_valid({
            "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": "allreduce", "namespace": ns, "labels": flavor.workload_labels},
            "spec": {"slotsPerWorker": 1, "launcherCreationPolicy": "WaitForWorkersReady", "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": job_pod_template(here, flavor, "allreduce")},
                "Worker": {"replicas": 2, "template": pod_template(here, flavor, "allreduce", gpus=2)}}}}))
        group = owned_group(job)
        await wait_parts(here, flavor, group, 2, {})
        await play_operator_pods(here, flavor, job, "allreduce", [
            ("allreduce-worker", 2, mpi_labels("allreduce", "worker"), 2)],
            index_label="training.kubeflow.org/replica-index")
        await wait_bound(here, "allreduce", 2)
        await wait_ready(here, 2, **{"training.kubeflow.org/job-role": "worker"})
        # every worker Ready: mpi-operator makes the launcher Job and reports it in its status
        await create_job(here, "allreduce-launcher", {
            "backoffLimit": 6, "template": job_pod_template(here, flavor, "allreduce",
                                                              labels=mpi_labels("allreduce", "launcher"))},
            owner=job)
        await here.api.merge_patch(f"/apis/kubeflow.org/v2beta1/namespaces/{ns}/mpijobs/allreduce/status", {
            "status": {"replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 2}}}})
        await wait_parts(here, flavor, group, 3, {"launcher": 1, "worker": 2})
        await assert_podgangs(here, flavor, group, await wait_bound(here, "allreduce", 3))
        if flavor is KAI:
            assert kai_settings(await podgroup(here, KAI, group)) == (
                KAI.workload_labels["kai.scheduler/queue"], "train")


# ---------------------------------------------------------------------------
# issue 18: a TrainJob, through the JobSet the trainer makes and the Jobs JobSet makes


def jobset_labels(jobset: str, rjob: str, replicas: int, index: int, ns: str) -> dict[str, str]:
    """What JobSet's labelAndAnnotateObject puts on each Job and its pod template."""
    job_name = f"{jobset}-{rjob}-{index}"
    return {"jobset.sigs.k8s.io/jobset-name": jobset, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
            "jobset.sigs.k8s.io/restart-attempt": "0", "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
            "jobset.sigs.k8s.io/job-index": str(index),
            "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest()}


async def play_trainer_and_jobset(here: Corner, flavor: Flavor, train: dict[str, Any],
                                  parts: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The trainer's part: a JobSet named after the TrainJob, controlled by it, one
    replicated job per ``parts`` entry (name -> (pods per Job, GPUs each)), one Job each, as
    the mpi-distributed runtime lays them out; its labels are the runtime template's (none
    here), not the TrainJob's (kubeflow/trainer's jobset plugin). JobSet's part: those Jobs, controlled by the
    JobSet, labelled (and their pod templates) as JobSet labels them. The real Job
    controller makes the pods."""
    ns, name = here.namespace, train["metadata"]["name"]

    def job_spec(pods: int, gpus: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
        return {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
                "template": job_pod_template(here, flavor, name, gpus=gpus, labels=labels)}

    jobset = await here.api.create(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets", crd_valid({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [controller_ref(train)]},
        "spec": {"replicatedJobs": [{"name": rjob, "replicas": 1, "template": {"spec": job_spec(pods, gpus)}}
                                    for rjob, (pods, gpus) in parts.items()]}}))
    for rjob, (pods, gpus) in parts.items():
        labels = jobset_labels(name, rjob, 1, 0, ns)
        await create_job(here, f"{name}-{rjob}-0", job_spec(pods, gpus, labels), labels=labels, owner=jobset)
    return jobset


@pytest.mark.parametrize("flavor", TRAINING_FLAVORS)
async def test_a_trainjob_is_one_gang_placed_all_at_once_or_not_at_all(cluster, podgang, flavor):
    """A TrainJob of 2 nodes on an MPI runtime: its JobSet has a launcher and a node
    replicated job (2 GPUs each pod, 6 in all; one node has 4). One gang for the TrainJob
    (its JobSet's), a part per replicated job, kept whole until a second node makes room."""
    async with corner(cluster, f"trainjob-{flavor.backend}", nodes=1) as here:
        ns = here.namespace
        train = await here.api.create(f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs", crd_valid({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "llama", "namespace": ns, "labels": flavor.workload_labels},
            "spec": {"runtimeRef": {"name": "mpi-distributed"}, "trainer": {"numNodes": 2}}}))
        jobset = await play_trainer_and_jobset(here, flavor, train, {"launcher": (1, 2), "node": (2, 2)})
        await wait_parts(here, flavor, owned_group(jobset), 3, {"launcher": 1, "node": 2})
        groups = (await here.api.get(f"{flavor.podgroups}/namespaces/{ns}/podgroups"))["items"]
        assert [g["metadata"]["name"] for g in groups] == [owned_group(jobset)], "one gang per TrainJob"
        await wait_held_whole(here, "llama", 3)
        await here.add_node()
        await assert_podgangs(here, flavor, owned_group(jobset), await wait_bound(here, "llama", 3))
        if flavor is KAI:  # KAI's grouper skips the TrainJob for its JobSet, whose labels it takes
            # the TrainJob's (kai.scheduler/queue) into; the JobSet's default priority, train
            assert kai_settings(groups[0]) == (KAI.workload_labels["kai.scheduler/queue"], "train")


# ---------------------------------------------------------------------------
# issue 18: a SparkApplication, the driver first, its executors once it runs


def spark_labels(app: str, role: str, **extra: str) -> dict[str, str]:
    """What spark-submit (launched by spark-operator) labels the driver and executors with."""
    return {"spark-role": role, "spark-app-selector": f"spark-{app}", "spark-app-name": app,
            "sparkoperator.k8s.io/app-name": app, "sparkoperator.k8s.io/launched-by-spark-operator": "true",
            "sparkoperator.k8s.io/submission-id": "00000000-0000-0000-0000-000000000001", "spark-version": "3.5.3",
            **extra}


@pytest.mark.parametrize("flavor", TRAINING_FLAVORS)
async def test_a_spark_application_places_its_driver_then_all_its_executors(cluster, podgang, flavor):
    """The driver alone is the gang first (it makes the executors only once it runs), and is
    placed; then the application RUNNING and its 3 executors of 2 GPUs (owned by the driver
    pod) grow the gang to 4: none of them starts until a second node makes room for all."""
    async with corner(cluster, f"spark-{flavor.backend}", nodes=1) as here, FakeKubelet(here):
        ns = here.namespace
        part = {"cores": 1, "memory": "512m", "schedulerName": flavor.scheduler}
        app = await here.api.create(f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications", crd_valid({
            "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
            "metadata": {"name": "pi", "namespace": ns, "labels": flavor.workload_labels},
            "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
                     "mainClass": "org.apache.spark.examples.SparkPi",
                     "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                     "driver": part, "executor": {**part, "instances": 3}}}))
        group = owned_group(app)
        await wait_parts(here, flavor, group, 1, {})
        if flavor is VOLCANO:  # the whole application from the driver on, each pod as Spark sizes it (JVM overhead:
            # max(10% of 512Mi, 384Mi)), so the driver does not start where its executors could never fit
            assert (await podgroup(here, flavor, group))["spec"]["minResources"] == {
                "cpu": "4", "memory": f"{4 * (512 + 384)}Mi"}
        driver = await play_pod(here, flavor, "pi-driver", app, "pi-driver", spark_labels("pi", "driver"))
        await wait_bound(here, "pi-driver", 1)
        await wait_ready(here, 1, app="pi-driver")
        # spark-operator sees the driver run; the driver asks for its executors
        await here.api.merge_patch(f"/apis/sparkoperator.k8s.io/v1beta2/namespaces/{ns}/sparkapplications/pi/status",
                                   {"status": {"applicationState": {"state": "RUNNING"},
                                               "driverInfo": {"podName": "pi-driver"}}})
        await wait_parts(here, flavor, group, 4, {"driver": 1, "executor": 3})
        for i in range(1, 4):
            await play_pod(here, flavor, f"pi-exec-{i}", driver, "pi-exec",
                           spark_labels("pi", "executor", **{"spark-exec-id": str(i)}), gpus=2)
        await wait_held_whole(here, "pi-exec", 3)
        await here.add_node()
        executors = await wait_bound(here, "pi-exec", 3)
        await assert_podgangs(here, flavor, group, [driver, *executors])
        await until(lambda: _all_running(here, "pi-driver", 1), "the driver still running")
        if flavor is KAI:  # the queue labelled on the application; no Spark plugin in KAI: train
            assert kai_settings(await podgroup(here, KAI, group)) == (
                KAI.workload_labels["kai.scheduler/queue"], "train")
