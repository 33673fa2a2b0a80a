"""Trainer v2's TrainJob: no pods of its own; the JobSet the Trainer makes for it from its
runtime is its one gang, which ``podgang plan`` builds (:func:`trainjob_jobset`) where the
Trainer has not run yet. Tested in tests/unit/test_kinds_trainjob.py."""

from __future__ import annotations

import copy
from typing import Any, Mapping

from podgang.kinds.jobset import _TRAINER_POD_GROUP_KEYS
from podgang.kinds.model import ONE_PER_RUN, KindDoc, Obj, SlimTemplate, WorkloadKind, _whole_number
from podgang.objects import Resource, as_dict, as_int, as_list, spec


#: read on a runtime's replicated job: the Trainer stage it belongs to (dataset-initializer, model-initializer, trainer…); initializers form the first stage
TRAINER_ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
_TRAINER_ONE_REPLICA = ("dataset-initializer", "model-initializer", "trainer")  # the Trainer makes 1 of each


def _trainjob_size(obj: Any) -> tuple[int, str]:
    nodes = max(as_int(as_dict(spec(obj).get("trainer")).get("numNodes"), 1), 0)
    return nodes, (f"trainer.numNodes {nodes}: the JobSet the trainer makes from its runtime is the gang "
                   f"(one subgroup per replicated job)")


def trainjob_runtime(trainjob: Any) -> tuple[str, str]:
    """The (kind, name) of the runtime a TrainJob's ``runtimeRef`` names (a
    ClusterTrainingRuntime unless it says TrainingRuntime, which is in its namespace)."""
    ref = as_dict(spec(trainjob).get("runtimeRef"))
    kind = ref.get("kind") if ref.get("kind") in TRAINER_RUNTIME_KINDS else TRAINER_RUNTIME_KINDS[0]
    return str(kind), str(ref.get("name") or "")


def trainer_pod_group_policy(runtime: Any) -> str | None:
    """The scheduler whose PodGroup the Trainer makes itself for a TrainJob of ``runtime``
    (its ``podGroupPolicy``: coscheduling or volcano), or None."""
    policy = as_dict(spec(runtime).get("podGroupPolicy"))
    return next((k for k in _TRAINER_POD_GROUP_KEYS if k in policy), None)


def trainjob_jobset(trainjob: Any, runtime: Any) -> Obj:
    """The JobSet the Trainer makes for ``trainjob`` from its ``runtime`` (kubeflow/trainer
    pkg/runtime/core/trainingruntime.go and the jobset, torch, plainml and mpi plugins): the
    runtime's JobSet template, named after the TrainJob and owned by it; one replica of each
    initializer and of the trainer; the trainer's Job as wide as ``trainer.numNodes`` (else the
    runtime's ``mlPolicy.numNodes``) — for MPI, the ``node`` Job (one fewer with
    ``runLauncherAsNode``); the runtime's ``dependsOn`` kept (its initializers first); the
    labels and annotations of the runtime's template and of the TrainJob's ``runtimePatches``
    (the TrainJob's own are lent to it where podgang reads them: ``lends_metadata``); with a
    ``podGroupPolicy``, its pods naming the PodGroup the Trainer makes (named after the TrainJob)."""
    runtime_spec = as_dict(spec(runtime))
    template = as_dict(runtime_spec.get("template"))
    js_spec: Obj = copy.deepcopy(dict(as_dict(template.get("spec"))))
    ml = as_dict(runtime_spec.get("mlPolicy"))
    mpi = as_dict(ml.get("mpi")) if "mpi" in ml else None
    trainer = as_dict(spec(trainjob).get("trainer"))
    nodes = _whole_number(trainer.get("numNodes"))
    md = as_dict(trainjob.get("metadata")) if isinstance(trainjob, Mapping) else {}
    policy = trainer_pod_group_policy(runtime)
    patches = [as_dict(as_dict(as_dict(p).get("trainingRuntimeSpec")).get("template"))
               for p in as_list(spec(trainjob).get("runtimePatches"))]
    js_md: Obj = {k: dict(as_dict(as_dict(template.get("metadata")).get(k))) for k in ("labels", "annotations")}
    for patch in patches:  # the TrainJob's runtimePatches: metadata on the JobSet, its Jobs and pods
        for k in js_md:
            js_md[k].update(as_dict(as_dict(patch.get("metadata")).get(k)))
    job_patches: dict[str, list[Mapping[str, Any]]] = {}
    for patch in patches:
        for rpatch in as_list(as_dict(patch.get("spec")).get("replicatedJobs")):
            job_patches.setdefault(str(as_dict(rpatch).get("name")), []).append(as_dict(as_dict(rpatch).get("template")))
    rjobs = []
    for rjob in as_list(js_spec.get("replicatedJobs")):
        rjob = dict(as_dict(rjob))
        job = dict(as_dict(rjob.get("template")))
        for jpatch in job_patches.get(str(rjob.get("name")), []):
            job = _patched_metadata(job, as_dict(jpatch.get("metadata")))
            pod_patch = as_dict(as_dict(jpatch.get("spec")).get("template"))
            job_spec_now = dict(as_dict(job.get("spec")))
            pod = _patched_metadata(as_dict(job_spec_now.get("template")), as_dict(pod_patch.get("metadata")))
            job = {**job, "spec": {**job_spec_now, "template": pod}}
        job_spec = dict(as_dict(job.get("spec")))
        ancestor = as_dict(as_dict(job.get("metadata")).get("labels")).get(TRAINER_ANCESTOR_LABEL)
        if ancestor in _TRAINER_ONE_REPLICA:
            rjob["replicas"] = 1
        count = max(as_int(job_spec.get("parallelism"), 1), 0)
        if ancestor == "trainer" and ml and mpi is None:
            count = nodes if nodes is not None else max(as_int(ml.get("numNodes"), 1), 0)
        elif ancestor == "trainer" and mpi is not None:
            count = 1  # MPI's launcher
        elif mpi is not None and rjob.get("name") == "node" and nodes is not None:
            count = max(nodes - 1, 1) if mpi.get("runLauncherAsNode") is True else nodes
        job_spec["parallelism"] = job_spec["completions"] = count
        if policy is not None:
            pod = dict(as_dict(job_spec.get("template")))
            pod_md = dict(as_dict(pod.get("metadata")))
            section, key = _TRAINER_POD_GROUP_KEYS[policy]
            pod_md[section] = {**as_dict(pod_md.get(section)), key: md.get("name")}
            job_spec["template"] = {**pod, "metadata": pod_md}
        rjobs.append({**rjob, "template": {**job, "spec": job_spec}})
    js_spec["replicatedJobs"] = rjobs
    if spec(trainjob).get("suspend") is True:
        js_spec["suspend"] = True
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": md.get("name"), "namespace": md.get("namespace"), **{k: v for k, v in js_md.items() if v},
                         "ownerReferences": [{"apiVersion": str(as_dict(trainjob).get("apiVersion")),
                                              "kind": "TrainJob", "name": md.get("name"),
                                              **({"uid": md["uid"]} if md.get("uid") else {}),
                                              "controller": True}]},
            "spec": js_spec}


def _patched_metadata(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> Obj:
    """``obj`` with a patch's labels and annotations over its own."""
    md = dict(as_dict(obj.get("metadata")))
    for k in ("labels", "annotations"):
        if as_dict(patch.get(k)):
            md[k] = {**as_dict(md.get(k)), **as_dict(patch.get(k))}
    return {**obj, "metadata": md} if md else dict(obj)


def _slim_trainjob(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    s = as_dict(s)
    out: Obj = {"suspend": s["suspend"]} if "suspend" in s else {}
    if "numNodes" in as_dict(s.get("trainer")):
        out["trainer"] = {"numNodes": as_dict(s.get("trainer"))["numNodes"]}
    return out


#: Trainer v2: the trainer makes one JobSet per TrainJob (named after it) from the runtime; that
#: JobSet is the TrainJob's one gang, sized and split into subgroups as a JobSet
TRAIN_JOB = WorkloadKind(
    Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", optional=True), _trainjob_size,
    lambda obj: [], _slim_trainjob, aliases=("trainjob", "trainjobs"), layout=ONE_PER_RUN, runs=("JobSet",),
    lends_metadata=True,
    doc=KindDoc("the JobSet the trainer makes for it (named after it) is its one gang, sized as a JobSet; its KAI "
                "queue, priority and preemptibility are read from the TrainJob's labels and annotations where the "
                "JobSet has none of its own", roles="as the JobSet", staging="as the JobSet"),
)
