"""The workload kinds podgang knows: one :class:`WorkloadKind` entry per kind, in the hub
table :data:`HUB` (API group and kind → entry), and the lookups everything else asks.

An entry says everything kind-specific: where the kind lives in the API, how many
pods it wants together right now, where its pod templates are, which fields the
grouper keeps in its cache, when it is rolling out, finished or suspended, how
its gangs are laid out (one per object, one per run, one per replica group) and
which field ``--scale`` changes. The rules, the grouper's watches and cache,
``podgang plan`` and the chart's RBAC (checked by a test) all read this table, so
adding a kind (say Kubeflow's PyTorchJob) is one entry in its family's module and one
row in :data:`HUB`. No I/O.

One module per family, each beside its tests (as KAI's pod-grouper keeps a plugin per
kind behind its ``hub.go``), so that a family is read and changed on its own:

- ``model.py``: the entry and its parts, and the rules families share;
- ``core.py``: ReplicaSet, Deployment, StatefulSet, Job, CronJob, DaemonSet (tests/unit/test_rules.py);
- ``lws.py``: LeaderWorkerSet (tests/emulated/test_replica_tree.py, test_segments.py);
- ``jobset.py``: JobSet (tests/unit/test_kinds_trainjob.py, test_replica_tree.py);
- ``kubeflow.py``: PyTorchJob, TFJob, MPIJob, XGBoostJob, JAXJob, PaddleJob, Notebook (tests/unit/test_kinds_kubeflow.py);
- ``trainjob.py``: Trainer v2's TrainJob and the JobSet it gets (tests/unit/test_kinds_trainjob.py);
- ``ray.py``: RayCluster, RayJob, RayService (tests/unit/test_kinds_ray.py);
- ``spark.py``: SparkApplication, SparkConnect (tests/unit/test_kinds_spark.py);
- ``wrappers.py``: AppWrapper, DisaggregatedSet, RayCronJob, ScheduledSparkApplication — no gang
  of their own, the workloads they make keep theirs (tests/unit/test_kinds_wrappers.py);
- ``grove.py``: Grove's PodCliqueSet, PodCliqueScalingGroup, PodClique — Grove makes their gangs
  (tests/unit/test_kinds_wrappers.py);
- ``knative.py``: Knative Serving's Service, Configuration, Revision — a gang per Revision
  (tests/unit/test_kinds_knative.py);
- ``vendors.py``: Azure ML's AmlJob, NVIDIA's SPOTRequest (tests/unit/test_kinds_vendors.py).
- ``taught.py``: the kinds a Karta or a ``kinds:`` declaration teaches, entries made at start
  (:func:`teach`) beside the built-in ones (tests/unit/test_kinds_taught.py).

Families import ``model.py`` (``trainjob.py`` also ``jobset.py``), never this module;
every name is imported from here, ``podgang.kinds``.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from podgang import rollouts
from podgang.kinds.core import CRON_JOB, DAEMON_SET, DEPLOYMENT, JOB, REPLICA_SET, STATEFUL_SET, _one_pod, _pod_itself
from podgang.kinds.jobset import JOB_SET, JOBSET_IN_ORDER, JOBSET_JOB_INDEX_LABEL, JOBSET_REPLICATED_JOB_LABEL
from podgang.kinds.knative import (CONFIGURATION, KNATIVE_MIN_SCALE_ANNOTATION, KNATIVE_REVISION_LABEL,
                                   KNATIVE_SERVICE, REVISION)
from podgang.kinds.kubeflow import (JAX_JOB, KUBEFLOW_JOB_ROLE_LABEL, KUBEFLOW_REPLICA_INDEX_LABEL,
                                    KUBEFLOW_REPLICA_TYPE_LABEL, MPI_JOB, NOTEBOOK, PADDLE_JOB, PYTORCH_JOB,
                                    SCALING_ROLE, TF_JOB, XGBOOST_JOB)
from podgang.kinds.lws import (LEADER_WORKER_SET, LWS_GROUP_INDEX_LABEL, LWS_LEADER_EXCLUDED, LWS_LEADER_READY,
                               LWS_LEADER_WORKER, LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL, lws_subgroup_policy)
from podgang.kinds.model import (FINISHED_CONDITIONS, ONE_PER_OBJECT, ONE_PER_REPLICA, ONE_PER_RUN, WRAPPER, KindDoc, Obj,
                                 Replicas, Role, SlimTemplate, Stage, Template, WorkloadKind, _conditions_finished,
                                 _spec_template, job_size)
from podgang.kinds.ray import (OPERATOR_GANG_LABELS, RAY_CLUSTER, RAY_GANG_LABEL, RAY_GROUP_LABEL, RAY_HEAD_GROUP,
                               RAY_JOB, RAY_REPLICA_INDEX_LABEL, RAY_SERVICE, RAY_SIZE_RULE)
from podgang.kinds.grove import GROVE_PODGANG_LABEL, POD_CLIQUE, POD_CLIQUE_SCALING_GROUP, POD_CLIQUE_SET
from podgang.kinds.spark import SPARK_APPLICATION, SPARK_CONNECT, SPARK_ROLE_LABEL, spark_app_group
from podgang.kinds.taught import Problem, Taught, is_declaration, read_declarations
from podgang.kinds.trainjob import (TRAIN_JOB, TRAINER_ANCESTOR_LABEL, TRAINER_RUNTIME_KINDS, trainer_pod_group_policy,
                                    trainjob_jobset, trainjob_runtime)
from podgang.kinds.vendors import AML_JOB, SPOT_REQUEST
from podgang.kinds.wrappers import (APP_WRAPPER, DISAGGREGATED_SET, MADE_NAME_PLACEHOLDERS, RAY_CRON_JOB,
                                    SCHEDULED_SPARK_APPLICATION)
from podgang.objects import (POD, OwnerRef, Resource, as_dict, as_int, as_list, field_write_times, labels, metadata,
                             spec)

__all__ = [
    "AML_JOB", "CONFIGURATION", "KNATIVE_MIN_SCALE_ANNOTATION", "KNATIVE_REVISION_LABEL", "KNATIVE_SERVICE", "NOTEBOOK",
    "REVISION", "SPOT_REQUEST",
    "BUILT_IN_GROUPS", "INT32_MAX", "count_fields", "count_refusals", "path_text",
    "APP_WRAPPER", "DISAGGREGATED_SET", "GROVE_PODGANG_LABEL", "MADE_NAME_PLACEHOLDERS", "POD_CLIQUE",
    "POD_CLIQUE_SCALING_GROUP", "POD_CLIQUE_SET", "RAY_CRON_JOB", "SCHEDULED_SPARK_APPLICATION", "SPARK_CONNECT",
    "WRAPPER", "gang_maker", "gang_stops_at", "made_by",
    "CRON_JOB", "DAEMON_SET", "DEPLOYMENT", "FINISHED_CONDITIONS", "FOLLOWED", "HUB", "JAX_JOB", "JOB",
    "JOBSET_IN_ORDER", "JOBSET_JOB_INDEX_LABEL", "JOBSET_REPLICATED_JOB_LABEL", "JOB_SET", "KUBEFLOW_JOB_ROLE_LABEL",
    "KUBEFLOW_REPLICA_INDEX_LABEL", "KUBEFLOW_REPLICA_TYPE_LABEL", "KindDoc", "LEADER_WORKER_SET",
    "LWS_GROUP_INDEX_LABEL", "LWS_LEADER_EXCLUDED", "LWS_LEADER_READY", "LWS_LEADER_WORKER", "LWS_NAME_LABEL",
    "LWS_WORKER_INDEX_LABEL", "MPI_JOB", "ONE_PER_OBJECT", "ONE_PER_REPLICA", "ONE_PER_RUN", "OPERATOR_GANG_LABELS",
    "OWNER_KINDS", "Obj", "OwnerRef", "PADDLE_JOB", "POD", "PYTORCH_JOB", "RAY_CLUSTER", "RAY_GANG_LABEL",
    "RAY_GROUP_LABEL", "RAY_HEAD_GROUP", "RAY_JOB", "RAY_REPLICA_INDEX_LABEL", "RAY_SERVICE", "RAY_SIZE_RULE",
    "REPLACED_LABELS", "REPLICA_LABELS", "REPLICA_SET", "ROLE_LABELS", "RUN_OWNERS", "Replicas", "Resource", "Role", "SCALING_ROLE",
    "SEGMENT_INDEX_LABELS", "SIZE_WRITES", "SPARK_APPLICATION", "SPARK_ROLE_LABEL", "STATEFUL_SET", "SlimTemplate",
    "Stage", "TEMPLATE_KINDS", "TF_JOB", "TRAINER_ANCESTOR_LABEL", "TRAINER_RUNTIME_KINDS", "TRAIN_JOB", "Template",
    "WORKLOADS", "WorkloadKind", "BUILT_IN", "Problem", "Taught", "is_declaration", "read_declarations", "teach",
    "taught_kinds", "taught_problems", "XGBOOST_JOB", "any_pod_templates", "api_group", "carries_replica_label",
    "desired_size", "is_finished", "is_suspended", "job_size", "lws_subgroup_policy", "operator_gang", "pod_role",
    "pod_templates", "remade", "replaced", "replica_index", "replica_of", "replica_stage", "replica_suffix", "replica_units",
    "resource_for", "role_replica_index", "roles", "rolling_out", "run_kinds", "scale_field", "scale_target",
    "segment_index", "segmented_role", "size_writes", "spark_app_group", "stages", "template_of", "trainer_pod_group_policy",
    "trainjob_jobset", "trainjob_runtime", "whole_roles", "workload_kind",
]

#: the hub: every workload kind podgang knows, by (API group, kind), written out so that
#: what podgang follows is read in one place. Its order is the order of the generated
#: reference page and of the pod labels below.
HUB: dict[tuple[str, str], WorkloadKind] = {
    ("apps", "Deployment"): DEPLOYMENT,
    ("apps", "ReplicaSet"): REPLICA_SET,
    ("apps", "StatefulSet"): STATEFUL_SET,
    ("batch", "Job"): JOB,
    ("batch", "CronJob"): CRON_JOB,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): LEADER_WORKER_SET,
    ("jobset.x-k8s.io", "JobSet"): JOB_SET,
    ("apps", "DaemonSet"): DAEMON_SET,
    ("kubeflow.org", "PyTorchJob"): PYTORCH_JOB,
    ("kubeflow.org", "TFJob"): TF_JOB,
    ("kubeflow.org", "MPIJob"): MPI_JOB,
    ("kubeflow.org", "XGBoostJob"): XGBOOST_JOB,
    ("kubeflow.org", "JAXJob"): JAX_JOB,
    ("kubeflow.org", "PaddleJob"): PADDLE_JOB,
    ("kubeflow.org", "Notebook"): NOTEBOOK,
    ("trainer.kubeflow.org", "TrainJob"): TRAIN_JOB,
    ("ray.io", "RayCluster"): RAY_CLUSTER,
    ("ray.io", "RayJob"): RAY_JOB,
    ("ray.io", "RayService"): RAY_SERVICE,
    ("sparkoperator.k8s.io", "SparkApplication"): SPARK_APPLICATION,
    ("sparkoperator.k8s.io", "SparkConnect"): SPARK_CONNECT,
    # Knative Serving: a gang per Revision, a run of its Configuration
    ("serving.knative.dev", "Service"): KNATIVE_SERVICE,
    ("serving.knative.dev", "Configuration"): CONFIGURATION,
    ("serving.knative.dev", "Revision"): REVISION,
    # vendors' job kinds
    ("amlarc.azureml.com", "AmlJob"): AML_JOB,
    ("egx.nvidia.io", "SPOTRequest"): SPOT_REQUEST,
    # wrappers and schedules: no gang of their own, the workloads they make keep theirs
    ("workload.codeflare.dev", "AppWrapper"): APP_WRAPPER,
    ("disaggregatedset.x-k8s.io", "DisaggregatedSet"): DISAGGREGATED_SET,
    ("ray.io", "RayCronJob"): RAY_CRON_JOB,
    ("sparkoperator.k8s.io", "ScheduledSparkApplication"): SCHEDULED_SPARK_APPLICATION,
    # kinds whose operator makes their gangs: podgang leaves their pods alone
    ("grove.io", "PodCliqueSet"): POD_CLIQUE_SET,
    ("grove.io", "PodCliqueScalingGroup"): POD_CLIQUE_SCALING_GROUP,
    ("grove.io", "PodClique"): POD_CLIQUE,
}

#: the hub's own entries, before any kind is taught
BUILT_IN: dict[tuple[str, str], WorkloadKind] = dict(HUB)

#: every workload kind, by kind name (no two groups of the hub share a kind name)
WORKLOADS: dict[str, WorkloadKind] = {kind: entry for (_group, kind), entry in HUB.items()}


#: kinds that are templates for workloads, not workloads: they own no pods, so they get no
#: gang (the workloads made from them do), by (API group, kind)
TEMPLATE_KINDS: dict[tuple[str, str], str] = {
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): "the TrainJobs that name it (through their JobSets)",
    ("trainer.kubeflow.org", "TrainingRuntime"): "the TrainJobs that name it (through their JobSets)",
    ("", "PodTemplate"): "the workloads that copy it",
    ("kueue.x-k8s.io", "Workload"): "the job Kueue admits by it",
    ("kubeflow.org", "Experiment"): "the trials (Jobs, training jobs) it starts",
    ("serving.kserve.io", "ServingRuntime"): "the InferenceServices that use it",
    ("serving.kserve.io", "ClusterServingRuntime"): "the InferenceServices that use it",
}


def _derived() -> None:
    """The tables read from every entry, made again when kinds are taught."""
    global ROLE_LABELS, REPLICA_LABELS, SEGMENT_INDEX_LABELS, FOLLOWED, OWNER_KINDS, RUN_OWNERS
    ROLE_LABELS = tuple(dict.fromkeys(label for k in WORKLOADS.values() for label in k.role_labels))
    REPLICA_LABELS = tuple(label for k in WORKLOADS.values() for label in (k.replica_label, k.role_replica_label)
                           if label)
    SEGMENT_INDEX_LABELS = tuple(dict.fromkeys(k.segment_index_label for k in WORKLOADS.values()
                                               if k.segment_index_label))
    FOLLOWED = tuple(k for k in WORKLOADS.values() if k.followed)
    OWNER_KINDS = {POD.kind: POD, **{k.kind: k.resource for k in FOLLOWED}}
    RUN_OWNERS = {k.kind: k.runs for k in WORKLOADS.values() if k.layout == ONE_PER_RUN}


_TAUGHT: Taught = Taught({}, {}, ())


def teach(objects: Sequence[tuple[str, Any]]) -> Taught:
    """Teach the hub the kinds ``objects`` declare (Kartas, ``kinds:`` declarations: each a
    ``(where, object)``), in place of those taught before; what cannot be taught is in the
    answer's ``problems``, and every other kind keeps working. A process calls it at start,
    before its watches and caches are made (they read :data:`FOLLOWED` then)."""
    global _TAUGHT
    found = read_declarations(objects, BUILT_IN)
    HUB.clear()
    HUB.update(BUILT_IN)
    HUB.update(found.entries)
    WORKLOADS.clear()
    WORKLOADS.update({kind: entry for (_group, kind), entry in HUB.items()})
    _derived()
    _TAUGHT = found
    return found


def taught_kinds() -> Taught:
    """What the last :func:`teach` taught."""
    return _TAUGHT


def taught_problems() -> tuple[Problem, ...]:
    return _TAUGHT.problems


#: the pod labels that name a pod's role, of every kind
ROLE_LABELS: tuple[str, ...] = tuple(dict.fromkeys(label for k in WORKLOADS.values() for label in k.role_labels))

#: the pod labels that name a pod's multi-pod replica, of every kind
REPLICA_LABELS: tuple[str, ...] = tuple(label for k in WORKLOADS.values()
                                       for label in (k.replica_label, k.role_replica_label) if label)

#: the pod labels the kinds read to tell a pod their controller removes on purpose (a JobSet's restart attempt)
REPLACED_LABELS: tuple[str, ...] = tuple(dict.fromkeys(label for k in WORKLOADS.values() for label in k.replaced_labels))

#: the pod labels that hold a pod's index in a role or replica a scheduler may segment, of every kind
SEGMENT_INDEX_LABELS: tuple[str, ...] = tuple(dict.fromkeys(
    k.segment_index_label for k in WORKLOADS.values() if k.segment_index_label))

#: the workloads whose size the grouper follows (it watches these)
FOLLOWED: tuple[WorkloadKind, ...] = tuple(k for k in WORKLOADS.values() if k.followed)

#: owner kinds the webhook looks up to walk to the top owner. An owner of any other
#: kind (a DaemonSet, a custom controller's object) is taken as the top.
OWNER_KINDS: dict[str, Resource] = {POD.kind: POD, **{k.kind: k.resource for k in FOLLOWED}}

#: kinds whose every run (a Job a CronJob starts, a RayService's cluster) is a gang of its
#: own: owner kind -> the kinds of its runs
RUN_OWNERS: dict[str, tuple[str, ...]] = {k.kind: k.runs for k in WORKLOADS.values() if k.layout == ONE_PER_RUN}


def workload_kind(obj_or_kind: Any) -> WorkloadKind | None:
    """The registry entry of an object, an owner reference or a kind name. An object or
    reference is looked up in the hub by its API group and kind, never its kind alone: Volcano's
    ``batch.volcano.sh`` Job is not a ``batch/v1`` Job. A bare kind name (the grouper's
    own stores, filled by watches of the kind's resource), or an object whose apiVersion
    is left out (a list's items), is taken as the entry of that name."""
    if isinstance(obj_or_kind, str):
        kind, api_version = obj_or_kind, None
    elif isinstance(obj_or_kind, OwnerRef):
        kind, api_version = obj_or_kind.kind, obj_or_kind.api_version or None
    else:
        kind, api_version = as_dict(obj_or_kind).get("kind"), as_dict(obj_or_kind).get("apiVersion")
    if not isinstance(kind, str):
        return None
    if not isinstance(api_version, str):
        return WORKLOADS.get(kind)
    return HUB.get((api_version.rpartition("/")[0], kind))


#: the API groups whose kinds the apiserver validates itself: a count below 0 or beyond int32 is refused
#: (a custom resource's schema says only that it is an integer)
BUILT_IN_GROUPS = frozenset({"", "apps", "batch"})
INT32_MAX = 2**31 - 1


def path_text(path: tuple[str | int, ...]) -> str:
    """``workerGroupSpecs[0].replicas`` of ``("workerGroupSpecs", 0, "replicas")``."""
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).lstrip(".")


def count_fields(obj: Any) -> list[tuple[str | int, ...]]:
    """The fields of ``obj`` that count its pods or replicas, the ones ``--scale`` sets (a
    Deployment's ``spec.replicas``, each role's ``replicas`` of a PyTorchJob)."""
    entry = workload_kind(obj)
    if entry is None or not entry.scales:
        return []
    if entry.scale_parts is not None:
        return list(entry.scale_parts(obj).values())
    assert entry.scale_path is not None
    return [entry.scale_path]


def _at(obj: Any, path: tuple[str | int, ...]) -> Any:
    node = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, dict) else None
    return node


def count_refusals(obj: Any) -> list[str]:
    """What the apiserver refuses in ``obj``'s counts (:func:`count_fields`): a value that is not
    an integer (``replicas: "3"``), and in a built-in kind one below 0 or beyond int32 — rather
    than planned as a count it is not."""
    problems = []
    for path in count_fields(obj):
        value, where = _at(obj, path), path_text(path)
        if value is None:
            continue  # not set: the default
        if isinstance(value, str):
            unquoted = f" (write it unquoted: {value})" if re.fullmatch(r"-?[0-9]{1,12}", value) else ""
            problems.append(f'{where} must be an integer, not the string "{value[:40]}"{unquoted}')
        elif isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{where} must be an integer, not {str(value)[:40]}")
        elif api_group(obj) in BUILT_IN_GROUPS and value < 0:
            problems.append(f"{where} {value} must be 0 or more")
        elif api_group(obj) in BUILT_IN_GROUPS and value > INT32_MAX:
            problems.append(f"{where} {value} must be at most {INT32_MAX}")
    return problems


def api_group(obj: Any) -> str:
    """``apps`` of an ``apps/v1`` object, ``""`` of a ``v1`` one."""
    return str(as_dict(obj).get("apiVersion") or "").rpartition("/")[0]


def template_of(obj: Any) -> str | None:
    """For a kind that is a template for workloads (a Trainer runtime), what gets the gangs
    instead; None for anything else."""
    return TEMPLATE_KINDS.get((api_group(obj), str(as_dict(obj).get("kind"))))


def any_pod_templates(obj: Any) -> list[tuple[str, Template]]:
    """The pod templates of a workload, or of an object of a kind podgang does not know
    wherever they are in it (anything with a ``spec.containers``), with their path."""
    if workload_kind(obj) is not None or as_dict(obj).get("kind") == POD.kind:
        return pod_templates(obj)
    found: list[tuple[str, Template]] = []

    def walk(value: Any, path: str, depth: int) -> None:
        if depth > 10 or len(found) >= 16:
            return
        if isinstance(value, Mapping):
            if isinstance(value.get("spec"), Mapping) and "containers" in value["spec"]:
                found.append((path, value))
                return
            for k, v in value.items():
                if k != "metadata":
                    walk(v, f"{path}.{k}" if path else str(k), depth + 1)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]", depth + 1)

    walk(spec(obj), "spec", 0)
    return found


def run_kinds(owner: Any) -> tuple[str, ...]:
    """The kinds of the runs ``owner`` (an object or reference) starts, each a gang of its
    own (a CronJob's Jobs); none for a kind that is not laid out by run."""
    entry = workload_kind(owner)
    return entry.runs if entry is not None and entry.layout == ONE_PER_RUN else ()


def gang_stops_at(obj: Any, owner: OwnerRef) -> bool:
    """Whether the gang of ``obj``'s pods is ``obj``'s, not its ``owner``'s: ``obj`` is one of
    ``owner``'s runs (a CronJob's Job: :func:`run_kinds`), or ``obj`` is a workload of a kind podgang
    knows and ``owner`` defines no gang — a wrapper or schedule podgang lists (layout WRAPPER: an
    AppWrapper, a RayCronJob) or any kind it does not know (taken for one: a kind that makes a
    known workload wraps it; its pods' gang is that workload's)."""
    if as_dict(obj).get("kind") in run_kinds(owner):
        return True
    if workload_kind(obj) is None:
        return False  # a pod (a Spark executor's driver), or a kind podgang does not know: it climbs on
    above = workload_kind(owner)
    if above is not None:
        return above.layout == WRAPPER
    return (owner.kind, owner.api_version) != (POD.kind, POD.version)  # a pod owns an LWS group's workers: it climbs on


def gang_maker(pod: Any) -> str | None:
    """Who makes the gang of a pod whose owner's operator gangs its pods itself (Grove), in
    words; None for every other pod. Read from the pod's own ownerReferences: no look-up."""
    for ref in as_list(metadata(pod).get("ownerReferences")):
        entry = workload_kind(OwnerRef.from_dict(as_dict(ref))) if isinstance(ref, Mapping) else None
        if entry is not None and entry.gang_maker:
            return f"owned by {entry.kind} {str(as_dict(ref).get('name'))[:63]}: its gang is {entry.gang_maker}"
    return None


def made_by(obj: Any) -> list[Obj]:
    """The workloads a wrapper or schedule's controller makes from ``obj`` (an AppWrapper's
    components, a DisaggregatedSet's LeaderWorkerSets, a RayCronJob's next RayJob), owned by
    it; none for any other kind."""
    entry = workload_kind(obj)
    return entry.makes(obj) if entry is not None and entry.layout == WRAPPER else []


def resource_for(api_version: str, kind: str) -> Resource | None:
    """The known resource for an ownerReference's apiVersion and kind, if any."""
    resource = OWNER_KINDS.get(kind)
    if resource is None:
        return None
    return resource.at(api_version)


def pod_templates(obj: Any) -> list[tuple[str, Template]]:
    """The pod templates inside a pod or workload, with their path."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _pod_itself(obj)
    entry = workload_kind(obj)
    if entry is not None and entry.layout == WRAPPER:  # the templates of what it makes, named by it
        return [(f"{str(made.get('kind')).lower()}/{metadata(made).get('name')} {path}", template)
                for made in entry.makes(obj) for path, template in pod_templates(made)]
    return entry.templates(obj) if entry else _spec_template(obj)


def whole_roles(obj: Any) -> list[Role]:
    """The roles of a workload's whole run (a SparkApplication's driver and executors, while its
    gang counts the driver only); its :func:`roles` for a kind that is not staged."""
    entry = workload_kind(obj)
    if entry is None:
        return []
    return (entry.whole_roles or entry.roles)(obj)


def desired_size(obj: Any) -> tuple[int, str]:
    """How many pods a workload wants running together right now, and why."""
    kind = as_dict(obj).get("kind")
    if kind == POD.kind:
        return _one_pod(obj)
    entry = workload_kind(obj)
    if entry is None:
        return 1, f"{kind or 'unknown kind'}: one pod at a time"
    return entry.size(obj)


#: in a slim workload's metadata, instead of its managedFields: who last wrote its size and
#: when (:func:`size_writes`), kept only once its spec changed after it was made (generation > 1)
SIZE_WRITES = "podgang.io/size-writes"


def size_writes(obj: Any) -> tuple[tuple[str, str, str], ...]:
    """Who wrote ``obj``'s size fields (the ones ``--scale`` sets, or a ``scale``
    subresource write) and when: ``(manager, time or "", subresource)`` per managedFields
    entry (:func:`podgang.objects.field_write_times`), or the summary a slim copy keeps."""
    kept = metadata(obj).get(SIZE_WRITES)
    if kept is not None:
        return tuple(kept)
    entry = workload_kind(obj)
    if entry is None:
        paths: tuple[tuple[str | int, ...], ...] = (("spec", "replicas"),)
    elif entry.scale_parts is not None:
        paths = tuple(entry.scale_parts(obj).values())
    else:
        paths = (entry.scale_path,) if entry.scale_path is not None else ()
    return field_write_times(obj, paths)


def replica_stage(obj: Any, pods: Sequence[Any]) -> Stage | None:
    """The gang of a replica group of ``obj`` in an earlier stage than the whole group, given
    the group's pods (a LeaderReady LWS group whose leader is not placed: 1), or None."""
    entry = workload_kind(obj)
    return entry.replica_stage(obj, pods) if entry is not None else None


def operator_gang(obj: Any) -> tuple[str, str] | None:
    """The PodGroup a workload's operator makes itself (its own gang integration, turned on
    in the workload) and why; None when podgang makes the workload's gang."""
    entry = workload_kind(obj)
    return entry.own_gang(obj) if entry is not None else None


def stages(obj: Any) -> str | None:
    """Why a workload's controller makes its pods in stages (its gang counts only the
    stage it is in) and what makes it one gang, or None."""
    entry = workload_kind(obj)
    return entry.stages(obj) if entry is not None else None


def rolling_out(obj: Any, seen: rollouts.WorkloadPods = rollouts.NO_PODS) -> str | None:
    """Why a workload's controller replaces its pods on purpose right now, or None:
    its kind's entry decides, given what is known of its pods."""
    entry = workload_kind(obj)
    return entry.rolling_out(obj, seen) if entry is not None else None


def is_finished(obj: Any) -> bool:
    """A run that is over (it wants no pods any more): its kind's entry decides."""
    entry = workload_kind(obj)
    return entry.finished(obj) if entry is not None else _conditions_finished(obj)


def replaced(obj: Any, pod: Any) -> str | None:
    """Why ``obj``'s controller is removing ``pod`` on purpose (its own recovery or scale-down:
    an LWS group above ``spec.replicas``, a JobSet pod of an earlier restart attempt), or None;
    its kind's entry decides."""
    entry = workload_kind(obj)
    return entry.replaced(obj, pod) if entry is not None else None


def remade(obj: Any, pod: Any) -> str | None:
    """Why ``obj``'s controller is making ``pod``'s replica again whole on purpose (an LWS group
    recreated after a pod restart), or None; its kind's entry decides."""
    entry = workload_kind(obj)
    return entry.remade(obj, pod) if entry is not None else None


def is_suspended(obj: Any) -> bool:
    """A workload held back (a Job or JobSet by Kueue, a PyTorchJob's runPolicy.suspend):
    its pods are removed on purpose."""
    entry = workload_kind(obj)
    return entry.suspended(obj) if entry is not None else spec(obj).get("suspend") is True


def roles(obj: Any) -> list[Role]:
    """The parts of a workload's gang, each with its own minimum (none: one part)."""
    entry = workload_kind(obj)
    return entry.roles(obj) if entry is not None else []


def segmented_role(obj: Any) -> Role | None:
    """The role of a workload a scheduler may split into segments (a PyTorchJob's workers),
    as it is written: with its minimum, or, where the job's own minimum leaves it none (a
    ``minAvailable`` the master alone meets), with a minimum of 0 — its pods still exist and
    are still in their segments. None for another kind, or a workload without that role."""
    entry = workload_kind(obj)
    if entry is None or entry.segmented_role is None:
        return None
    found = next((r for r in entry.roles(obj) if r.name == entry.segmented_role), None)
    if found is not None:
        return found
    for path, template in entry.templates(obj):
        parts = path.split(".")
        if len(parts) == 4 and parts[2].lower() == entry.segmented_role:
            replicas = max(as_int(as_dict(as_dict(spec(obj).get(parts[1])).get(parts[2])).get("replicas"), 1), 0)
            return Role(entry.segmented_role, 0, f"{parts[2]} replicas {replicas}" + (
                ", none within the job's minimum" if replicas else ""), template, path, written=replicas)
    return None


def pod_role(top: Any, pod: Any) -> str | None:
    """The role a pod of the ``top`` workload (a reference or a kind name) plays (its
    subgroup), from the labels the kind's operator sets on it; None for a kind without roles."""
    entry = workload_kind(top)
    if entry is None:
        return None
    if entry.pod_role is not None:
        return entry.pod_role(pod)
    found = labels(pod)
    return next((found[k].lower() for k in entry.role_labels if found.get(k)), None)


def replica_units(obj: Any) -> Replicas | None:
    """A workload's replicas when each is several pods (an LWS's groups), else None."""
    entry = workload_kind(obj)
    return entry.replicas(obj) if entry is not None else None


def replica_index(top: Any, pod: Any) -> int | None:
    """The index of the replica a pod of the ``top`` workload (a reference or a kind name) belongs to (an LWS pod's
    group index), from the label its controller sets; None for a kind without such replicas."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.replica_label) if entry is not None and entry.replica_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def role_replica_index(top: Any, pod: Any) -> int | None:
    """The index of the replica of its role a pod of the ``top`` workload (a reference or a kind name) belongs to (a
    JobSet pod's Job index), from the label its controller sets; None elsewhere."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.role_replica_label) if entry is not None and entry.role_replica_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def replica_of(pod: Any) -> tuple[str, str, int] | None:
    """(kind, workload name, replica index) of the multi-pod replica a pod belongs to, from
    the labels its controller sets; None for any other pod."""
    found = labels(pod)
    for entry in WORKLOADS.values():
        if entry.replica_label and entry.replica_owner_label and entry.replica_owner_label in found:
            index = replica_index(entry.kind, pod)
            if index is not None:
                return entry.kind, found[entry.replica_owner_label], index
    return None


def segment_index(top: Any, pod: Any) -> int | None:
    """A pod's index in the role or replica its ``top`` workload's (a reference or a kind name) scheduler may split
    into segments (a PyTorchJob worker's replica index, an LWS pod's worker index), from the
    label its controller sets; None for another kind or a pod without it."""
    entry = workload_kind(top)
    value = labels(pod).get(entry.segment_index_label) if entry is not None and entry.segment_index_label else None
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def carries_replica_label(pod: Any) -> bool:
    """Whether a pod carries the label some kind names its multi-pod replicas with."""
    found = labels(pod)
    return any(label in found for label in REPLICA_LABELS)


def replica_suffix(top: Any, pod: Any) -> tuple[str, str]:
    """The suffix of the PodGroup a pod of the ``top`` workload (a reference or a kind
    name) joins, and why (``-group-3`` for a LeaderWorkerSet's fourth group); ``("", "")``
    otherwise."""
    entry = workload_kind(top)
    if entry is None or entry.layout != ONE_PER_REPLICA:
        return "", ""
    index = labels(pod).get(LWS_GROUP_INDEX_LABEL)
    if index is not None and index.isdigit():
        return f"-group-{index}", f", group {index}"
    return "", ""


def scale_target(alias: str) -> WorkloadKind | None:
    """The kind ``--scale`` means by ``alias`` (``deploy``, ``sts``, ``lws`` ...)."""
    alias = alias.lower()
    return next((k for k in WORKLOADS.values() if k.scales and alias in k.aliases), None)


def scale_field(entry: WorkloadKind, obj: Any, part: str | None) -> tuple[str | int, ...] | str:
    """The field ``--scale`` sets on ``obj`` (of kind ``entry``) for ``part`` (None: the
    kind's own), or why there is none."""
    if entry.scale_parts is None:
        if part:
            return f"a {entry.kind} has no parts to scale (scale it as {entry.kind.lower()}/NAME=N)"
        assert entry.scale_path is not None
        return entry.scale_path
    parts = entry.scale_parts(obj)
    wanted = part.lower() if part else entry.default_scale_part(obj)
    if wanted in parts:
        return parts[wanted]
    listed = ", ".join(parts) or "none"
    if part:
        return f"it has no part {part!r} (its parts: {listed})"
    return f"say which part: NAME:PART=N with PART one of {listed}"
