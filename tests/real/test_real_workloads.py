"""The checks of issues 17 and 18 that the journeys did not cover, on the real schedulers.

Issue 17: a Job, a LeaderWorkerSet and seed 004's prefill + decode group, each placed all
at once by the real KAI scheduler, in the queue and at the priority KAI's own pod-grouper
would have chosen. Issue 18: an MPIJob, a TrainJob and a SparkApplication, their operators
played as they make their pods (owner references, labels, the stages they go through), each
placed all at once by KAI and by Volcano at every stage podgang says it has. Where a real
controller runs here (batch Jobs: the Job controller makes their pods) it does the work;
the rest is played, as ``tests/real/test_real_journeys.py`` plays the LWS and training operators.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest

from podgang.backends import BACKENDS
from tests.crd_support import crd_valid
from tests.realcluster import (WORKLOAD_CRDS, Corner, FakeKubelet, corner, create_all, example, until, wait_sync,
                               workload_crds)
from tests.real.test_real_journeys import (COSCHEDULING, FLAVORS, KAI, VOLCANO, Flavor, _all_running, controller_ref,
                                      ensure_kai_queue, owned_group, play_leaderworkerset, play_operator_pods, play_pod, pod_template,
                                      podgroup, wait_bound, wait_held_whole, wait_size)

#: the schedulers whose gang can grow while it lives (native 1.36's minCount cannot: a staged gang's
#: later stage is held, see the README)
TRAINING_FLAVORS = [f.param() for f in (KAI, VOLCANO, COSCHEDULING)]
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
               if BACKENDS[flavor.backend].group_of(p) != group]
    assert not outside, f"pods outside {group}: {outside}"


async def wait_parts(here: Corner, flavor: Flavor, name: str, size: int,
                     parts: dict[str, int]) -> dict[str, Any]:
    """The group of ``size`` with one part per role as its scheduler spells them: KAI's
    ``spec.subGroups``, Volcano's ``spec.minTaskMember`` (none listed for a one-part gang);
    a scheduler without subgroups (coscheduling) has only the size."""
    if BACKENDS[flavor.backend].subgroup_key is None:
        parts = {}
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
    name, so a cluster runs one of the two — swapped under the running grouper, as a user
    swaps operators. The new CRD is applied only once the grouper has found no version served
    (as after installing an operator some time after podgang): it finds v2beta1 when the first
    pod an MPIJob owns comes, not at its next probe 10 minutes on. The v1 CRD comes back
    afterwards for the rest of the session."""
    log = podgang.processes["grouper"].log

    def absences() -> int:
        return log.read_text(errors="replace").count("mpijobs.kubeflow.org is not served")

    def swap(path):
        before = absences()
        cluster.kubectl("delete", MPIJOBS_CRD, "--ignore-not-found", "--wait=true")
        wait_sync(lambda: absences() > before, "the grouper found MPIJobs not served", 30.0)
        cluster.apply_crds(path)
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
        await play_operator_pods(here, flavor, job, "allreduce", [
            ("allreduce-worker", 2, mpi_labels("allreduce", "worker"), 2)],
            index_label="training.kubeflow.org/replica-index")
        await wait_parts(here, flavor, group, 2, {})  # the grouper looked for MPIJobs when these pods came
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
        # KAI: its JobSet tree, a parent per replicated job and a leaf per Job (minSubGroup on parents)
        await wait_parts(here, flavor, owned_group(jobset), 3, {
            "launcher": None, "launcher-replica-0": 1, "node": None, "node-replica-0": 2} if flavor is KAI
            else {"launcher": 1, "node": 2})
        groups = (await here.api.get(f"{flavor.podgroups}/namespaces/{ns}/{flavor.plural}"))["items"]
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


# ---------------------------------------------------------------------------
# issue 18: what a job's lifecycle does to its gang is not staleness; a lost role is


async def create_pytorchjob(here: Corner, flavor: Flavor, name: str, workers: int, **spec: Any) -> dict[str, Any]:
    """A PyTorchJob of a master and ``workers``, and its pods as training-operator makes them."""
    job = await here.api.create(f"/apis/kubeflow.org/v1/namespaces/{here.namespace}/pytorchjobs", crd_valid({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": here.namespace},
        "spec": {**spec, "pytorchReplicaSpecs": {
            rtype: {"replicas": count, "template": pod_template(here, flavor, name)}
            for rtype, count in (("Master", 1), ("Worker", workers))}}}))
    labels = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller"}
    await play_operator_pods(here, flavor, job, name, [
        (f"{name}-master", 1, {**labels, "training.kubeflow.org/replica-type": "master"}, 0),
        (f"{name}-worker", workers, {**labels, "training.kubeflow.org/replica-type": "worker"}, 0)],
        index_label="training.kubeflow.org/replica-index")
    return job


@pytest.mark.parametrize("flavor", FLAVORS)
async def test_suspension_completion_and_an_elastic_scale_down_are_not_stale_but_a_lost_master_is(
        cluster, podgang, flavor):
    """Four PyTorchJobs running: one suspended (training-operator deletes its pods), one
    finished (its master Succeeded, its workers cleaned up), one elastic job scaled down
    above its minimum, and one whose only master is lost. Only the last is a stale gang: its
    workers are evicted after the grace period; the three others get no GangStale event —
    judged before it, since a loss is judged at once and the grace period runs after."""
    async with corner(cluster, f"life-{flavor.backend}", nodes=2, labels=flavor.namespace_labels) as here, \
            FakeKubelet(here):
        ns = here.namespace
        jobs = {name: await create_pytorchjob(here, flavor, name, workers, **extra) for name, workers, extra in (
            ("paused", 2, {}), ("done", 2, {}), ("lost", 2, {}),
            ("elastic", 3, {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 3}}))}
        await wait_size(here, flavor, owned_group(jobs["elastic"]), 2)  # elastic: master 1 + worker 1
        for name, job in jobs.items():
            await wait_ready(here, 1 + job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], app=name)
            # seen whole by the grouper: a loss from here on is judged, not taken for a gang being placed
            await podgang.wait_logged("placed:", owned_group(job))
        path = f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"

        async def delete_pods(*names: str) -> None:
            for pod in names:
                await here.api.delete(f"/api/v1/namespaces/{ns}/pods/{pod}", {"gracePeriodSeconds": 0})

        await here.api.merge_patch(f"{path}/paused", {"spec": {"runPolicy": {"suspend": True}}})
        await delete_pods("paused-master-0", "paused-worker-0", "paused-worker-1")
        await here.api.merge_patch(f"/api/v1/namespaces/{ns}/pods/done-master-0/status",
                                   {"status": {"phase": "Succeeded"}})
        await here.api.merge_patch(f"{path}/done/status", {"status": {"conditions": [
            {"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded",
             "message": "PyTorchJob done is successfully completed."}], "replicaStatuses": {}}})
        await delete_pods("done-worker-0", "done-worker-1")
        await here.api.merge_patch(f"{path}/elastic", {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}})
        await delete_pods("elastic-worker-2")
        await delete_pods("lost-master-0")

        lost = {owned_group(jobs["lost"]), "lost"}  # its PodGroup, and the job the events are said on too

        async def workers_evicted():
            return not await here.pods(app="lost")
        await until(workers_evicted, "the workers of the job that lost its master evicted")
        # the event is written after the evictions, by the event writers: wait for it, not for the pods
        evicted = {e["involvedObject"]["name"] for e in await here.wait_events("GangEvicted")}
        assert evicted and evicted <= lost, f"GangEvicted for {evicted - lost}"
        # the grace period ran out for the lost master after the others' losses were judged: no other
        # gang was stale then (the pods' deletion may reach the grouper before the suspension or the
        # job's end; a gang judged stale for that moment is taken back, never evicted)
        recovered = {e["involvedObject"]["name"] for e in await here.events("GangRecovered")}
        stale = {e["involvedObject"]["name"] for e in await here.events("GangStale")} - lost
        assert stale <= recovered, f"GangStale and not recovered: {stale - recovered}"
        assert len(await here.pods(app="elastic")) == 3  # the elastic job's master and 2 workers run on
