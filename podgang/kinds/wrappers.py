"""Kinds that define no gang of their own but make workloads that do: a wrapper (Kueue's
AppWrapper around a PyTorchJob or an LWS; LWS's DisaggregatedSet, one LeaderWorkerSet per
role) or a schedule (a RayCronJob's RayJobs, a ScheduledSparkApplication's SparkApplications).
Each workload it makes keeps the gangs of its own kind, as if it stood alone, and every run of
a schedule is its own gang: the owner walk stops below these kinds
(:func:`podgang.rules.next_owner`). Each entry says what its controller makes
(:attr:`WorkloadKind.makes`), so that ``podgang plan`` plans those workloads in its place.
Tested in tests/unit/test_kinds_wrappers.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang.kinds.model import WRAPPER, KindDoc, Obj, WorkloadKind
from podgang.objects import Resource, as_dict, as_int, as_list, metadata, spec


#: stand-ins for the parts of a made object's name only its controller knows (a run's time, a
#: revision's hash): valid name characters, shown by ``podgang plan`` as their key's words
RUN_PLACEHOLDER = "x0run0x"
REVISION_PLACEHOLDER = "x0rev0x"
MADE_NAME_PLACEHOLDERS = {RUN_PLACEHOLDER: "<time>", REVISION_PLACEHOLDER: "<revision>"}

#: set by the AppWrapper controller on each component it creates: the AppWrapper's name
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
#: set by the DisaggregatedSet controller on each LeaderWorkerSet and its pods: the set's name
DS_NAME_LABEL = "disaggregatedset.x-k8s.io/name"
#: set beside it: the role (prefill, decode …) the LeaderWorkerSet plays
DS_ROLE_LABEL = "disaggregatedset.x-k8s.io/role"
#: set beside it: the slice (a copy of the whole role set) the LeaderWorkerSet belongs to
DS_SLICE_LABEL = "disaggregatedset.x-k8s.io/slice"
#: set beside it: the revision of the set the LeaderWorkerSet was made from
DS_REVISION_LABEL = "disaggregatedset.x-k8s.io/revision"
#: set by KubeRay on each RayJob a RayCronJob starts: the RayCronJob's name
RAY_CRON_JOB_LABEL = "ray.io/cronjob-name"
#: set by spark-operator on each SparkApplication a ScheduledSparkApplication starts: its name
SCHEDULED_SPARK_APP_LABEL = "sparkoperator.k8s.io/scheduled-app-name"

_MAX_MADE = 256  # objects planned in a wrapper's place: a DisaggregatedSet has at most 100 slices × 10 roles


def _owned_by(wrapper: Any, obj: Mapping[str, Any], labels: Mapping[str, str], controller: bool = True) -> Obj:
    """``obj`` as the wrapper's controller creates it: in the wrapper's namespace, with
    ``labels`` over its own and an ownerReference to the wrapper."""
    md, own = metadata(wrapper), dict(as_dict(obj.get("metadata")))
    ref: Obj = {"apiVersion": str(as_dict(wrapper).get("apiVersion") or ""), "kind": str(as_dict(wrapper).get("kind")),
                "name": md.get("name"), "blockOwnerDeletion": True}
    if md.get("uid"):
        ref["uid"] = md["uid"]
    if controller:
        ref["controller"] = True
    own["labels"] = {**as_dict(own.get("labels")), **labels}
    if md.get("namespace"):
        own["namespace"] = md["namespace"]
    own["ownerReferences"] = [ref]
    return {**obj, "metadata": own}


def _appwrapper_components(obj: Any) -> list[Obj]:
    """Each component's ``template`` (any kind), created as it is written, labelled with the
    AppWrapper's name and owned by it (project-codeflare/appwrapper ``createComponent``)."""
    name = str(metadata(obj).get("name") or "")
    out = []
    for component in as_list(spec(obj).get("components"))[:_MAX_MADE]:
        template = as_dict(as_dict(component).get("template"))
        if isinstance(template.get("kind"), str):
            out.append(_owned_by(obj, template, {APPWRAPPER_LABEL: name}))
    return out


def _with_pod_labels(lws_spec: Mapping[str, Any], labels: Mapping[str, str]) -> Obj:
    """An LWS spec with ``labels`` merged into its leader's and workers' pod templates."""
    template = dict(as_dict(lws_spec.get("leaderWorkerTemplate")))
    for part in ("leaderTemplate", "workerTemplate"):
        if part in template or part == "workerTemplate":  # no leaderTemplate: the leader is a worker's copy
            pod = dict(as_dict(template.get(part)))
            md = dict(as_dict(pod.get("metadata")))
            md["labels"] = {**as_dict(md.get("labels")), **labels}
            template[part] = {**pod, "metadata": md}
    return {**lws_spec, "leaderWorkerTemplate": template}


def _disaggregated_roles(obj: Any) -> list[Obj]:
    """One LeaderWorkerSet per slice and role, named ``<set>-<slice>-<revision>-<role>``,
    its spec the role's, its replicas the role's per slice, labelled (and its pods) with the
    set, role, slice and revision (kubernetes-sigs/lws ``pkg/utils/disaggregatedset``)."""
    name = str(metadata(obj).get("name") or "")
    slices = min(max(as_int(spec(obj).get("slices"), 1), 1), 100)
    out: list[Obj] = []
    for index in range(slices):
        for role in as_list(spec(obj).get("roles")):
            role = as_dict(role)
            role_name = str(role.get("name") or "")
            labels = {DS_NAME_LABEL: name, DS_ROLE_LABEL: role_name, DS_SLICE_LABEL: str(index),
                      DS_REVISION_LABEL: REVISION_PLACEHOLDER, "app": f"{name}-{index}-{role_name}"}
            role_md = as_dict(role.get("metadata"))
            lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                   "metadata": {"name": f"{name}-{index}-{REVISION_PLACEHOLDER}-{role_name}",
                                **{k: dict(as_dict(role_md.get(k))) for k in ("labels", "annotations")
                                   if role_md.get(k)}},
                   "spec": _with_pod_labels(as_dict(role.get("spec")), labels)}
            out.append(_owned_by(obj, lws, labels))
            if len(out) >= _MAX_MADE:
                return out
    return out


def _ray_cron_run(obj: Any) -> list[Obj]:
    """A run: the RayJob ``<cronjob>-<minutes since the epoch>`` made from ``jobTemplate``
    (ray-project/kuberay ``raycronjob_controller.go``)."""
    name = str(metadata(obj).get("name") or "")
    job = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": f"{name}-{RUN_PLACEHOLDER}"},
           "spec": dict(as_dict(spec(obj).get("jobTemplate")))}
    return [_owned_by(obj, job, {RAY_CRON_JOB_LABEL: name})]


def _scheduled_spark_run(obj: Any) -> list[Obj]:
    """A run: the SparkApplication ``<name>-<time>`` made from ``template``, with the
    schedule's labels; its ownerReference is no controller's (kubeflow/spark-operator
    ``scheduledsparkapplication/controller.go``)."""
    name = str(metadata(obj).get("name") or "")
    app = {"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
           "metadata": {"name": f"{name}-{RUN_PLACEHOLDER}", "labels": dict(as_dict(metadata(obj).get("labels")))},
           "spec": dict(as_dict(spec(obj).get("template")))}
    return [_owned_by(obj, app, {SCHEDULED_SPARK_APP_LABEL: name}, controller=False)]


def _no_gang(made: str) -> Any:
    return lambda obj: (0, f"no gang of its own: {made}, each keeping the gangs of its kind")


def _nothing_kept(s: Mapping[str, Any], slim_template: Any) -> Obj:
    return {}


def _wrapper(resource: Resource, makes: Any, made: str, aliases: tuple[str, ...], doc: str) -> WorkloadKind:
    return WorkloadKind(resource, _no_gang(made), lambda obj: [], _nothing_kept, aliases=aliases, layout=WRAPPER,
                        followed=False, makes=makes, doc=KindDoc(doc))


APP_WRAPPER = _wrapper(
    Resource("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper", optional=True),
    _appwrapper_components, "the workloads it wraps", ("appwrapper", "appwrappers", "aw"),
    "a wrapper: each component it creates (a PyTorchJob, a LeaderWorkerSet, a JobSet …) keeps the gangs of its own "
    "kind, as if it stood alone; a component podgang does not know is a gang of 1 unless pinned")
DISAGGREGATED_SET = _wrapper(
    Resource("disaggregatedset.x-k8s.io", "v1", "disaggregatedsets", "DisaggregatedSet", optional=True),
    _disaggregated_roles, "one LeaderWorkerSet per slice and role", ("disaggregatedset", "disaggregatedsets"),
    "a wrapper: each LeaderWorkerSet it makes (one per slice and role, `<set>-<slice>-<revision>-<role>`) keeps its "
    "own gangs, one per LWS group (or its tree of complete groups), sized as a LeaderWorkerSet")
RAY_CRON_JOB = _wrapper(
    Resource("ray.io", "v1", "raycronjobs", "RayCronJob", optional=True), _ray_cron_run,
    "one RayJob per run", ("raycronjob", "raycronjobs"),
    "a schedule: each RayJob it starts (`<name>-<minutes>`) is a run of its own, ganged as a RayJob (its cluster "
    "is one gang, its submitter Job another)")
SCHEDULED_SPARK_APPLICATION = _wrapper(
    Resource("sparkoperator.k8s.io", "v1beta2", "scheduledsparkapplications", "ScheduledSparkApplication",
             optional=True), _scheduled_spark_run, "one SparkApplication per run",
    ("scheduledsparkapplication", "scheduledsparkapplications", "scheduledsparkapp"),
    "a schedule: each SparkApplication it starts (`<name>-<time>`) is a run of its own, ganged as a "
    "SparkApplication (its ownerReference names no controller: podgang stops at the application all the same)")
