"""KAI-Scheduler: PodGroups ``scheduling.run.ai/v2alpha2``, membership in the pod
annotation ``pod-group-name`` (what the scheduler reads) mirrored in the label
``kai.scheduler/podgroup`` (what users select with ``-l``), sizes patched in place.

The one module in podgang that spells KAI's group, keys and fields. The GPU
sharing annotations are KAI's too; the rules read their names from here.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from decimal import Decimal
from typing import Any, Mapping, Sequence

import yaml

from podgang import quantities
from podgang.backends.base import (PRIORITY_CLASSES, ClusterFacts, GangSource, QueueFacts, SchedulerVerdict, Subgroup,
                                   escape_key, min_pods, one_line, string_value)
from podgang.backends.keyed import MIN_MEMBER, MinMemberPodGroups
from podgang.nodes import NODES
from podgang.objects import (LAST_APPLIED_ANNOTATION, Denial, Resource, annotations, as_dict, as_list, labels, metadata,
                             quoted, spec, status)

#: written (and read) on a pod: its PodGroup, what the KAI scheduler reads
GROUP_ANNOTATION = "pod-group-name"
#: written (and read) on a pod: its PodGroup, as `pod-group-name` (a name of at most 63 characters); select a gang
#: with `kubectl get pods -l kai.scheduler/podgroup=NAME`; set it on a pod or pod template to
#: put it into a hand-made group
GROUP_LABEL = "kai.scheduler/podgroup"
#: written on a pod: its subgroup inside a PodGroup (its workload's name or role, `standalone`
#: for a pod nothing owns); a pod template that sets it keeps its own
SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
SUBGROUPS = "subGroups"
#: read on a pod: GPU memory in MiB, a positive integer (KAI's GPU sharing, whatever the backend)
GPU_MEMORY_ANNOTATION = "gpu-memory"
#: read on a pod: a fraction of one GPU, 0 < x < 1
GPU_FRACTION_ANNOTATION = "gpu-fraction"
#: read on a pod with gpu-fraction: on how many GPUs it takes that fraction (KAI counts fraction × devices)
GPU_FRACTION_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
GPU_RESOURCE = "nvidia.com/gpu"
#: the memory of each GPU of a node, in MiB, as NVIDIA's GPU feature discovery labels it (KAI reads it)
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
#: KAI's queue resources and what their quota and limit are counted in (pkg/scheduler/plugins/proportion:
#: CPU in millicpus, memory in megabytes of 10^6 bytes, GPUs in GPUs and their fractions)
QUEUE_RESOURCES = (("cpu", Decimal("0.001")), ("memory", Decimal(10) ** 6), ("gpu", Decimal(1)))
#: KAI's rule (pkg/common/podgroup/preemptible.go): a gang of this priority or more, unless labelled
#: preemptible, is non-preemptible, and never placed over its queue's quota
NON_PREEMPTIBLE_PRIORITY = 100
SCHEDULER_NAME = "kai-scheduler"
MAX_LABEL_VALUE = 63  # the longest label value the apiserver accepts

# What KAI's own pod-grouper writes on the PodGroups it makes, and where it reads each
# value (pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go): podgang
# writes the same on the PodGroups it makes, so that KAI schedules them alike.
#: read on the top owner, then the pod: the KAI gang's `spec.queue`
QUEUE_LABEL = "kai.scheduler/queue"
#: read on the top owner, then the pod, without a queue label: the queue (`<project>-<node pool>`
#: with `kai.scheduler/node-pool`)
PROJECT_LABEL = "project"
#: read on the pod: the node pool a `project` queue is suffixed with
NODE_POOL_LABEL = "kai.scheduler/node-pool"
#: read on an owner (nearest first) or the pod: the KAI gang's `spec.priorityClassName`
PRIORITY_LABEL = "priorityClassName"
#: read on the top owner or pod: the KAI gang's `spec.preemptibility`
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PREEMPTIBILITY_VALUES = ("preemptible", "non-preemptible")
#: read on the top owner or pod: the KAI gang's `spec.preemptionDelay`
PREEMPTION_DELAY_ANNOTATION = "kai.scheduler/preemption-delay"
#: on a workload (KAI reads its top owner): the KAI Topology its gang is placed in; with a
#: required or preferred level it becomes the PodGroup's ``spec.topologyConstraint``, and it
#: also names the topology of the segments below
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
#: on a workload: the topology level (a node label) all of its gang's pods must share
TOPOLOGY_REQUIRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-required-placement"
#: on a workload: the topology level its gang's pods should share where they can
TOPOLOGY_PREFERRED_PLACEMENT_ANNOTATION = "kai.scheduler/topology-preferred-placement"
TOPOLOGY_FIELD = "topologyConstraint"
TOPOLOGY_ANNOTATIONS = ((TOPOLOGY_ANNOTATION, "topology"),
                        (TOPOLOGY_REQUIRED_PLACEMENT_ANNOTATION, "requiredTopologyLevel"),
                        (TOPOLOGY_PREFERRED_PLACEMENT_ANNOTATION, "preferredTopologyLevel"))
#: on a PyTorchJob's Worker pod template (or its pods), on a LeaderWorkerSet or its worker
#: template: KAI splits the workers into segments of this many consecutive pods, each a
#: subgroup that is placed whole (an LWS's ``subGroupPolicy.subGroupSize`` comes first)
SEGMENT_SIZE_ANNOTATION = "kai.scheduler/segment-size"
#: beside the segment size, on the worker template (or its pods): the topology level each
#: segment's pods must share (the topology is ``kai.scheduler/topology``)
SEGMENT_REQUIRED_PLACEMENT_ANNOTATION = "kai.scheduler/segment-topology-required-placement"
#: beside the segment size: the topology level each segment's pods should share where they can
SEGMENT_PREFERRED_PLACEMENT_ANNOTATION = "kai.scheduler/segment-topology-preferred-placement"
SEGMENT_ANNOTATIONS = (SEGMENT_SIZE_ANNOTATION, SEGMENT_REQUIRED_PLACEMENT_ANNOTATION,
                       SEGMENT_PREFERRED_PLACEMENT_ANNOTATION, TOPOLOGY_ANNOTATION)
#: written on a KAI PodGroup podgang makes: the top owner's metadata, as KAI's own pod-grouper writes it
TOP_OWNER_METADATA_ANNOTATION = "kai.scheduler/top-owner-metadata"
#: KAI's own gang size: on a batch/v1 Job (its grouper's minMember), on a JobSet replicated
#: job's Job template (each of its Jobs' minimum, KAI v0.16 and later) and on a JobSet (how
#: many of its replicated jobs must be placed)
BATCH_MIN_MEMBER = "kai.scheduler/batch-min-member"
#: KubeRay's label that KAI's grouper takes as a Ray cluster's priority class, unchecked
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
RAY_KINDS = ("RayCluster", "RayJob", "RayService")
STALENESS_GRACE_PERIOD = "stalenessGracePeriod"
MIN_SUBGROUP = "minSubGroup"
DISABLED_STALENESS = "-1s"  # a negative grace period: KAI never evicts the gang
#: written on a pod podgang puts into a KAI gang, `"true"`: KAI's own pod-grouper (v0.15 and
#: later) leaves it alone
SKIP_PODGROUPER_ANNOTATION = "kai.scheduler/skip-podgrouper"
DEFAULT_QUEUE = "default-queue"  # KAI's constants.DefaultQueueName
#: KAI's fallback priority per top-owner kind; every other kind gets TRAIN
DEFAULT_PRIORITY_CLASSES = (("Deployment", "inference"),)
TRAIN = "train"
#: the help of the flags that set the two defaults above (``podgang.options``)
DEFAULT_QUEUE_HELP = (f"kai: the queue of a gang whose top owner and pods name none (label {QUEUE_LABEL}, "
                      f"then {PROJECT_LABEL}), as KAI's own pod-grouper does")
DEFAULT_PRIORITY_HELP = ("kai: the priorityClassName of a gang of a top-owner KIND that names none (repeatable; "
                         f"KAI's own: {', '.join(f'{k}={v}' for k, v in DEFAULT_PRIORITY_CLASSES)}, "
                         f"any other kind {TRAIN})")
#: What KAI's own pod-grouper does with each top-owner kind (its gang, its size, its subgroups),
#: shown beside podgang's rule on the workload kinds reference page (``make reference``); a kind
#: not listed is grouped alike. From KAI v0.17's pkg/podgrouper plugins.
OWN_GROUPER_RULES: dict[str, str] = {
    "Deployment": "1: one PodGroup per pod (`pg-<pod>-<uid>`, owned by the pod), no gang",
    "ReplicaSet": "1 (the default grouper)",
    "StatefulSet": "1 for the whole set",
    "Job": "the annotation `kai.scheduler/batch-min-member`, else 1",
    "CronJob": "one PodGroup per Job run, size 1",
    "LeaderWorkerSet": "the same, but 1 while the leader is unbound under `startupPolicy: LeaderReady`",
    "JobSet": "`minSubGroup` over replicated jobs (1 under `InOrder`) and a leaf per Job; `dependsOn` not read",
    "DaemonSet": "1 (the default grouper)",
    "PyTorchJob": "the same size; subgroups `master`, `worker`",
    "TFJob": "the same size, no subgroups",
    "MPIJob": "the same size (it looks for the launcher pod), no subgroups",
    "XGBoostJob": "the same size, no subgroups",
    "JAXJob": "the same size, no subgroups",
    "PaddleJob": "no plugin, no RBAC: one PodGroup per pod, no gang",
    "TrainJob": ("the same (it skips the TrainJob, copies its labels and annotations onto the JobSet "
                 "without overwriting, and groups the JobSet)"),
    "RayCluster": ("the same size, but it checks a field `suspended` that KubeRay does not have "
                   "(KubeRay's is `suspend`): suspended groups still count"),
    "RayJob": "one PodGroup per RayJob that also holds the submitter; an error until `status.rayClusterName` is set",
    "RayService": "one PodGroup per RayService: the old and the new cluster in one gang",
    "SparkApplication": "no plugin, no RBAC: a Spark pod's group is its `spark-app-selector` label, minMember 1",
}
_GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$")

# the messages KAI's own webhook denies contradictory GPU requests with
MSG_GPU_AND_MEMORY = "cannot request both GPU and GPU memory"
MSG_FRACTION_AND_GPU = "cannot have both GPU fraction request and whole GPU resource request/limit"
MSG_BAD_MEMORY = f"{GPU_MEMORY_ANNOTATION} annotation value must be a positive integer greater than 0"
MSG_BAD_FRACTION = f"{GPU_FRACTION_ANNOTATION} annotation value must be a positive number smaller than 1.0"


QUEUES = Resource("scheduling.run.ai", "v2", "queues", "Queue", optional=True)


class KaiBackend(MinMemberPodGroups):
    name = "kai"
    podgroup = Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")
    fact_resources = (PRIORITY_CLASSES, QUEUES, NODES)
    scheduler_title = "KAI"
    subgroups_must_be_listed = True  # KAI v0.15+: "Pod references subgroup x, which does not exist in PodGroup"
    pod_spec_keys = ("priorityClassName",)
    queue_field = "queue"
    priority_field = "priorityClassName"
    #: KAI's grouper copies the top owner's labels and annotations onto its PodGroup
    reads_owner_metadata = True
    other_writer_hint = (f"KAI's own pod-grouper older than v0.15 ignores {SKIP_PODGROUPER_ANNOTATION} and "
                         f"rewrites the groups podgang makes: upgrade KAI, or turn its pod-grouper off")

    def __init__(self, annotation: str = GROUP_ANNOTATION, label: str = GROUP_LABEL,
                 subgroup_label: str = SUBGROUP_LABEL, *, default_queue: str = DEFAULT_QUEUE,
                 default_priority_classes: tuple[tuple[str, str], ...] = DEFAULT_PRIORITY_CLASSES):
        self.annotation = annotation
        self.label = label
        self.subgroup_label = subgroup_label
        self.subgroup_key = ("labels", subgroup_label)
        self.pod_label_keys = (label, subgroup_label, QUEUE_LABEL, PROJECT_LABEL, NODE_POOL_LABEL, PRIORITY_LABEL,
                               PREEMPTIBILITY_LABEL)
        self.pod_annotation_keys = (annotation, SKIP_PODGROUPER_ANNOTATION, PREEMPTION_DELAY_ANNOTATION,
                                    GPU_FRACTION_ANNOTATION, GPU_FRACTION_DEVICES_ANNOTATION, GPU_MEMORY_ANNOTATION,
                                    BATCH_MIN_MEMBER, *SEGMENT_ANNOTATIONS, *(key for key, _ in TOPOLOGY_ANNOTATIONS[1:]))
        self.default_queue = default_queue
        self.default_priority_classes = default_priority_classes

    def configured(self, options: Mapping[str, Any]) -> "KaiBackend":
        """``--default-queue`` and ``--default-priority-class KIND=NAME`` applied."""
        queue = options.get("default_queue") or self.default_queue
        given = tuple(options.get("default_priority_classes") or ())
        priorities = tuple({**dict(self.default_priority_classes), **dict(given)}.items())
        if queue == self.default_queue and priorities == self.default_priority_classes:
            return self
        return KaiBackend(self.annotation, self.label, self.subgroup_label, default_queue=queue,
                          default_priority_classes=priorities)

    # -- KAI's own size annotations, read where KAI's grouper reads them

    def size_pin(self, workload: Any) -> tuple[int | None, str]:
        """``kai.scheduler/batch-min-member`` on a batch/v1 Job: KAI's grouper makes it the
        Job's minMember (pkg/podgrouper/.../job/job_grouper.go)."""
        if as_dict(workload).get("kind") != "Job" or not str(as_dict(workload).get("apiVersion")).startswith("batch/"):
            return None, ""
        return _batch_min_member(annotations(workload), f"{_kind_name(workload)}")

    def role_pin(self, role: Any) -> tuple[int | None, str]:
        """``kai.scheduler/batch-min-member`` on a JobSet replicated job's Job template: each of
        its Jobs' minimum (KAI v0.16 and later), so the role's is that times its replicas."""
        template = as_dict(getattr(role, "owner_template", None))
        value, why = _batch_min_member(annotations(template), f"replicated job {getattr(role, 'name', '?')}")
        if value is None:
            return None, why
        replicas = max(int(getattr(role, "replicas", 1) or 0), 0)
        return value * replicas, f"{why} × replicas {replicas}"

    # -- what KAI's own grouper would write on a PodGroup podgang makes

    def cluster_facts(self, found: Mapping[str, Any]) -> ClusterFacts:
        common = super().cluster_facts(found)
        listed = cluster_facts(found.get(PRIORITY_CLASSES.kind), found.get(QUEUES.kind))
        queues = found.get(QUEUES.kind)
        bounds = None if queues is None else {b.name: b for q in as_list(queues) if (b := queue_bounds(q))}
        return dataclasses.replace(common, queues=listed.queues, queue_bounds=bounds)

    # -- what KAI counts against its queues and nodes (podgang.feasibility asks)

    def live_settings(self, podgroup: Any) -> dict[str, Any]:
        group_spec = spec(podgroup)
        out: dict[str, Any] = {}
        if isinstance(group_spec.get("queue"), str):
            out["queue"] = group_spec["queue"]
        if isinstance(group_spec.get("priorityClassName"), str) and group_spec["priorityClassName"]:
            out["priority_class"] = group_spec["priorityClassName"]
        # what the live group says, or that it says none (KAI then goes by its priority), whatever
        # the workload's labels say now: a live group's preemptibility is not rewritten
        value = group_spec.get("preemptibility")
        out["extra_spec"] = {"preemptibility": value if value in PREEMPTIBILITY_VALUES else None}
        return out

    def queue_demand(self, parts: Any, facts: ClusterFacts | None = None) -> dict[str, Decimal]:
        """CPU cores, memory bytes and GPUs as KAI's proportion plugin counts a gang's pods against
        its queue: whole GPUs, a fraction (``gpu-fraction`` × ``gpu-fraction-num-devices``) as that
        part of a GPU, and a ``gpu-memory`` request as its share of the largest GPU memory any
        node has (label ``nvidia.com/gpu.memory``, MiB; none labelled: not counted, as KAI)."""
        total = {"cpu": Decimal(0), "memory": Decimal(0), "gpu": Decimal(0)}
        largest = _largest_gpu_memory(facts)
        for count, pod in parts:
            requests = quantities.pod_requests(pod)
            n = max(int(count), 0)
            total["cpu"] += requests.get("cpu", Decimal(0)) * n
            total["memory"] += requests.get("memory", Decimal(0)) * n
            total["gpu"] += (requests.get(GPU_RESOURCE, Decimal(0)) + _gpu_fraction(pod)) * n
            memory = quantities.request(annotations(pod).get(GPU_MEMORY_ANNOTATION))
            if largest and memory:
                devices = quantities.request(annotations(pod).get(GPU_FRACTION_DEVICES_ANNOTATION) or "1") or 1
                total["gpu"] += devices * memory / largest * n
        return {name: amount for name, amount in total.items() if amount > 0}

    def node_requests(self, pod_or_template: Any) -> dict[str, Decimal]:
        """A pod's requests, a GPU fraction taking its share of a node's GPUs."""
        requests = quantities.pod_requests(pod_or_template)
        fraction = _gpu_fraction(pod_or_template)
        if fraction:
            requests[GPU_RESOURCE] = requests.get(GPU_RESOURCE, Decimal(0)) + fraction
        return requests

    def node_pool(self, pod_or_template: Any) -> dict[str, str]:
        pool = labels(pod_or_template).get(NODE_POOL_LABEL)
        return {NODE_POOL_LABEL: pool} if pool else {}

    def non_preemptible(self, options: Mapping[str, Any], facts: ClusterFacts) -> str | None:
        """KAI's rule: label ``kai.scheduler/preemptibility``, else a priority of 100 or more."""
        said = as_dict(options.get("extra_spec")).get("preemptibility")
        if said == "non-preemptible":
            return f"label {PREEMPTIBILITY_LABEL}=non-preemptible"
        if said == "preemptible":
            return None
        name = options.get("priority_class")
        value = (facts.priority_values or {}).get(name) if isinstance(name, str) else None
        if value is not None and value >= NON_PREEMPTIBLE_PRIORITY:
            return f"priority {name} {value} >= {NON_PREEMPTIBLE_PRIORITY}"
        return None

    def queue_words(self, resource: str, amount: Decimal) -> str:
        if resource == "cpu":
            return f"{_number(amount)} CPU cores" if amount != 1 else "1 CPU core"
        if resource == "memory":
            return f"{_number(amount / Decimal(10) ** 6)} MB memory"
        return f"{_number(amount)} GPUs"

    def queue_fix(self, queue: str, bound: str, resource: str, amount: Decimal) -> str:
        unit = dict(QUEUE_RESOURCES)[resource]
        value = (amount / unit).to_integral_value(rounding="ROUND_CEILING") if resource != "gpu" else amount
        fix = f"set spec.resources.{resource}.{bound} >= {_number(value)} (or -1) on Queue {queue}"
        if bound == "quota":
            fix += (f", or make the gang preemptible (label {PREEMPTIBILITY_LABEL}=preemptible, or a "
                    f"priorityClassName below {NON_PREEMPTIBLE_PRIORITY} such as {TRAIN}; a PodGroup made before "
                    f"keeps its own: delete it to have it made again)")
        return fix

    def queue_verdict_words(self, bound: str) -> str:
        return "NonPreemptibleOverQuota" if bound == "quota" else "OverLimit"

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        """Queue, priority class, preemptibility, preemption delay, topology, the top
        owner's labels and annotations — each read where KAI's pod-grouper reads it,
        in its order — and where each value comes from (``origins``) and what is wrong
        with them (``problems``)."""
        top = source.top_owner if isinstance(source.top_owner, Mapping) else None
        pods = [p for p in source.pod_like if _is_mapping(p)]
        origins: list[tuple[str, str]] = []
        problems: list[str] = []
        options: dict[str, Any] = {}
        queue, where = self._queue(top, pods)
        options["queue"] = queue
        origins.append(("queue", where))
        priority, where = self._priority(source)
        options["priority_class"] = priority
        origins.append(("priorityClassName", where))
        # podgang evicts what is left of a stale gang it made, knowing a rollout from a loss;
        # KAI (v0.17 and later) would evict it too, after its own grace period, unless told not to
        extra: dict[str, Any] = {STALENESS_GRACE_PERIOD: DISABLED_STALENESS}
        owners = [o for o in source.owners if _is_mapping(o)]
        value, who = _first([*owners, *pods], "labels", PREEMPTIBILITY_LABEL)
        if value is not None:
            if value in PREEMPTIBILITY_VALUES:
                extra["preemptibility"] = value
                origins.append(("preemptibility", f"label {PREEMPTIBILITY_LABEL} on {who}"))
            else:
                problems.append(f"label {PREEMPTIBILITY_LABEL}={quoted(value)} on {who} is ignored: KAI accepts "
                                f"{' or '.join(PREEMPTIBILITY_VALUES)}")
        delay, who = _first([*owners, *pods], "annotations", PREEMPTION_DELAY_ANNOTATION)
        if delay is not None:
            if _GO_DURATION.match(delay.strip()):
                extra["preemptionDelay"] = delay.strip()
                origins.append(("preemptionDelay", f"annotation {PREEMPTION_DELAY_ANNOTATION} on {who}"))
            else:
                problems.append(f"annotation {PREEMPTION_DELAY_ANNOTATION}={quoted(delay)} on {who} is ignored: "
                                f"not a duration such as 10m")
        if top is not None and as_dict(top).get("kind") == "JobSet":
            count = _batch_min_member(annotations(top), _kind_name(top))
            jobs = len(as_list(spec(top).get("replicatedJobs")))
            if count[0] is not None and count[0] < jobs:
                problems.append(f"annotation {BATCH_MIN_MEMBER}={count[0]} on {_kind_name(top)}: KAI's own grouper "
                                f"places the JobSet once {count[0]} of its {jobs} replicated jobs can run; podgang's "
                                f"gang waits for every replicated job")
            elif count[0] is None and count[1]:
                problems.append(count[1])
        if top is not None:
            topology = {field: value for key, field in TOPOLOGY_ANNOTATIONS
                        if isinstance(value := annotations(top).get(key), str) and value}
            if topology:
                extra[TOPOLOGY_FIELD] = topology
                origins.append((TOPOLOGY_FIELD, f"annotations {', '.join(k for k, f in TOPOLOGY_ANNOTATIONS if f in topology)} "
                                                f"on {_kind_name(top)}"))
            options["labels"] = {k: v for k, v in labels(top).items() if isinstance(v, str)}
            md = metadata(top)
            api_version = str(top.get("apiVersion") or "")
            group, _, version = api_version.rpartition("/")
            owner = _top_owner_metadata(str(md.get("name") or ""), str(md.get("uid") or ""), group, version,
                                        str(top.get("kind") or ""))
            options["annotations"] = {TOP_OWNER_METADATA_ANNOTATION: owner,
                                      **{k: v for k, v in annotations(top).items()
                                         if isinstance(v, str) and k != LAST_APPLIED_ANNOTATION}}
        if extra:
            options["extra_spec"] = extra
        options["origins"] = tuple(origins)
        if problems:
            options["problems"] = tuple(problems)
        return options

    def settings_drift(self, podgroup: Any, options: Mapping[str, Any]) -> list[str]:
        """KAI's own grouper never moves a live group to another queue; podgang neither."""
        live = as_dict(spec(podgroup)).get("queue")
        wanted = options.get("queue")
        if not isinstance(live, str) or not isinstance(wanted, str) or not wanted or live == wanted:
            return []
        origins = options.get("origins")
        where = next((str(o[1]) for o in (origins if isinstance(origins, (list, tuple)) else ())
                      if isinstance(o, (list, tuple)) and len(o) == 2 and o[0] == "queue"), "")
        return [f"the gang stays in KAI queue {quoted(live)}: its labels now name {quoted(wanted)} ({where}), and "
                f"a live PodGroup's queue is never moved (KAI's own pod-grouper does not either); the next group made "
                f"for this workload takes the new queue"]

    def evicts_itself(self, podgroup: Any) -> str | None:
        """KAI (v0.17 and later) evicts a stale gang after ``spec.stalenessGracePeriod``
        (its global default when unset) unless that is negative. podgang's own groups say
        -1s; a group that does not (hand-made, or made by an older podgang) is left to KAI."""
        value = spec(podgroup).get(STALENESS_GRACE_PERIOD)
        if isinstance(value, str) and value.strip().startswith("-"):
            return None
        when = f"stalenessGracePeriod {value}" if isinstance(value, str) else "its default grace period (60s)"
        return (f"KAI evicts the rest itself after {when}, so podgang does not (set "
                f"spec.{STALENESS_GRACE_PERIOD}: -1s on the group to leave it to podgang)")

    eviction_grace_field = STALENESS_GRACE_PERIOD

    def grace_taken_over(self, podgroup: Any, spec_patch: Mapping[str, Any]) -> str | None:
        """A user's ``stalenessGracePeriod`` (not negative) that podgang's ``-1s`` replaces."""
        value = spec(podgroup).get(STALENESS_GRACE_PERIOD)
        if spec_patch.get(STALENESS_GRACE_PERIOD) != DISABLED_STALENESS or not isinstance(value, str):
            return None
        return None if value.strip().startswith("-") or not value.strip() else value.strip()

    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        kept = super().slim_podgroup_spec(spec)
        for key in ("queue", STALENESS_GRACE_PERIOD, "priorityClassName", "preemptibility"):  # what KAI judges it by
            if isinstance(spec.get(key), str):
                kept[key] = spec[key]
        if _is_int(spec.get(MIN_SUBGROUP)):
            kept[MIN_SUBGROUP] = spec[MIN_SUBGROUP]
        return kept

    @property
    def size_fields(self) -> tuple[tuple[str, ...], ...]:
        return (*super().size_fields, ("spec", MIN_SUBGROUP))

    def _queue(self, top: Any, pods: list[Any]) -> tuple[str, str]:
        for obj, who in ((top, "the top owner"), *((p, "the pod") for p in pods[:1])):
            value = labels(obj).get(QUEUE_LABEL) if obj is not None else None
            if value:
                return value, f"label {QUEUE_LABEL} on {who}"
        pool = next((v for p in pods[:1] if (v := labels(p).get(NODE_POOL_LABEL))), None)
        for obj, who in ((top, "the top owner"), *((p, "the pod") for p in pods[:1])):
            value = labels(obj).get(PROJECT_LABEL) if obj is not None else None
            if value:
                if pool:
                    return f"{value}-{pool}", f"label {PROJECT_LABEL} on {who} and {NODE_POOL_LABEL} on the pod"
                return value, f"label {PROJECT_LABEL} on {who}"
        return self.default_queue, "the default queue (--default-queue)"

    def _priority(self, source: GangSource) -> tuple[str, str]:
        top = as_dict(source.top_owner)
        ray = labels(top).get(RAY_PRIORITY_LABEL) if top.get("kind") in RAY_KINDS else None
        if isinstance(ray, str) and ray:  # KAI's Ray grouper sets it over all the others, unchecked
            return ray, f"label {RAY_PRIORITY_LABEL} on {_kind_name(top)}"
        exists = source.facts.priority_classes
        pods = source.pod_like[:1]
        candidates = [(labels(o).get(PRIORITY_LABEL), f"label {PRIORITY_LABEL} on {_kind_name(o)}")
                      for o in source.owners if _is_mapping(o)]
        candidates += [(labels(p).get(PRIORITY_LABEL), f"label {PRIORITY_LABEL} on the pod") for p in pods]
        candidates += [(spec(p).get("priorityClassName"), "the pod's spec.priorityClassName") for p in pods]
        for value, where in candidates:
            if isinstance(value, str) and value and (exists is None or value in exists):
                return value, where
        kind = str(as_dict(source.top_owner).get("kind") or "Pod")
        value = dict(self.default_priority_classes).get(kind, TRAIN)
        return value, f"the default for a {kind} (--default-priority-class)"

    # -- segments: KAI's grouper splits a PyTorchJob's workers (pytorch_grouper.go) and each
    # LWS replica (lws_grouper.go) into segments, each a leaf with its own topology

    def segment_size(self, objs: Sequence[Any]) -> tuple[int | None, str, str | None]:
        """``kai.scheduler/segment-size``: the first of ``objs`` that carries it decides."""
        found = [o for o in objs if isinstance(o, Mapping) and isinstance(annotations(o).get(SEGMENT_SIZE_ANNOTATION), str)
                 and annotations(o)[SEGMENT_SIZE_ANNOTATION]]
        if not found:
            return None, "", None
        value = annotations(found[0])[SEGMENT_SIZE_ANNOTATION]
        who = (_kind_name(found[0]) if as_dict(found[0]).get("kind") else
               "the pod" if metadata(found[0]).get("name") else "its pod template")
        text = value.strip()
        if text.isdigit() and 0 < int(text) <= 2**31 - 1:
            return int(text), f"annotation {SEGMENT_SIZE_ANNOTATION}={text} on {who}", None
        return None, "", (f"annotation {SEGMENT_SIZE_ANNOTATION}={quoted(value)} on {who} is not a whole number "
                          f"above 0: KAI's own pod-grouper refuses the workload; podgang gives it no segments")

    def segment_topology(self, objs: Sequence[Any], top: Any = None) -> tuple[tuple[str, str], ...]:
        """A segment's ``topologyConstraint``: the topology from ``objs`` or the workload,
        the levels from ``objs`` — nothing unless a topology and a level are both set."""
        near = [o for o in objs if isinstance(o, Mapping)]
        name, _ = _first([*near, *([top] if isinstance(top, Mapping) else [])], "annotations", TOPOLOGY_ANNOTATION)
        levels = [(field, value) for key, field in ((SEGMENT_REQUIRED_PLACEMENT_ANNOTATION, "requiredTopologyLevel"),
                                                    (SEGMENT_PREFERRED_PLACEMENT_ANNOTATION, "preferredTopologyLevel"))
                  if (value := _first(near, "annotations", key)[0]) is not None]
        if not name or not levels:
            return ()
        return (("topology", name), *levels)

    def role_topology(self, template: Any) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """A role's ``topologyConstraint`` from its template's topology annotations (KAI's
        Ray grouper): only with a required or preferred level, and then the topology is
        required (KAI refuses the workload without it)."""
        found = {field: value for key, field in TOPOLOGY_ANNOTATIONS
                 if isinstance(value := annotations(template).get(key), str) and value}
        if not found.keys() - {"topology"}:
            return (), None
        if "topology" not in found:
            return (), (f"annotation {TOPOLOGY_REQUIRED_PLACEMENT_ANNOTATION} or {TOPOLOGY_PREFERRED_PLACEMENT_ANNOTATION} "
                        f"without {TOPOLOGY_ANNOTATION}: KAI's own pod-grouper refuses it; podgang places the role "
                        f"anywhere")
        return tuple((field, found[field]) for _, field in TOPOLOGY_ANNOTATIONS if field in found), None

    # -- membership

    def membership_keys(self, group: str) -> tuple[tuple[str, str], ...]:
        """Where a pod of ``group`` carries its membership: ``(section, key)`` pairs.

        Both the annotation and the label, except for a name longer than a label value
        may be (``pg-<name>-<uid>`` of a workload named 24 characters or more): that one
        goes into the annotation only, which is what the scheduler reads; the apiserver
        would refuse the pod with such a label.
        """
        if len(group) > MAX_LABEL_VALUE:
            return (("annotations", self.annotation),)
        return (("annotations", self.annotation), ("labels", self.label))

    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        by_annotation = annotations(obj).get(self.annotation)
        by_label = labels(obj).get(self.label)
        if by_annotation is not None and by_label is not None and by_annotation != by_label:
            return Denial(
                f"the pod names two different PodGroups: annotation {self.annotation}={quoted(by_annotation)} "
                f"and label {self.label}={quoted(by_label)}; set both to the same PodGroup name, "
                f"or set only one and podgang copies it to the other"
            )
        if by_annotation is not None:
            return by_annotation, self.annotation
        if by_label is not None:
            return by_label, self.label
        return None

    def group_of(self, pod: Any) -> str | None:
        return annotations(pod).get(self.annotation) or labels(pod).get(self.label) or None

    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """Creates ``metadata.annotations`` / ``metadata.labels`` when absent; keys
        already holding their value are left alone (a reinvocation patches nothing).
        The pod also gets ``kai.scheduler/skip-podgrouper: "true"``: KAI's own
        pod-grouper (v0.15 and later, in every KAI install) then leaves it and its
        group to podgang instead of moving it to a group of its own."""
        md = pod.get("metadata")
        wanted = self._wanted(group)
        if not isinstance(md, dict):
            value: dict[str, Any] = {}
            for (section, key), v in wanted:
                value.setdefault(section, {})[key] = v
            return [{"op": "add", "path": "/metadata", "value": value}]
        ops: list[dict[str, Any]] = []
        created: dict[str, dict[str, Any]] = {}
        for (section, key), v in wanted:
            current = md.get(section)
            if not isinstance(current, dict):
                if section not in created:
                    created[section] = {}
                    ops.append({"op": "add", "path": f"/metadata/{section}", "value": created[section]})
                created[section][key] = v
            elif current.get(key) != v:
                ops.append({"op": "add", "path": f"/metadata/{section}/{escape_key(key)}", "value": v})
        return ops

    def _wanted(self, group: str) -> list[tuple[tuple[str, str], str]]:
        return [*((where, group) for where in self.membership_keys(group)),
                (("annotations", SKIP_PODGROUPER_ANNOTATION), "true")]

    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        patch: dict[str, Any] = {}
        for (section, key), value in self._wanted(group):
            patch.setdefault(section, {})[key] = value
        return {"metadata": patch}

    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        named = string_value(pod, "annotations", self.annotation)
        if named is None:
            return True
        return any(string_value(pod, section, key) != value for (section, key), value in self._wanted(named))

    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        md = pod.get("metadata")
        if not isinstance(md, dict):
            return dict(pod)
        md = dict(md)
        for section, key in (("annotations", self.annotation), ("labels", self.label)):
            if isinstance(md.get(section), dict) and key in md[section]:
                md[section] = {k: v for k, v in md[section].items() if k != key}
        return {**pod, "metadata": md}

    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """An UPDATE may add a pod's group but never change or remove it: neither key
        may change or disappear, nor may the other key be added with another value."""
        old = self.group_of(old_pod)
        if old is None:
            return None
        changed = []
        for what, section, key in (("annotation", "annotations", self.annotation), ("label", "labels", self.label)):
            was, now = string_value(old_pod, section, key), string_value(new_pod, section, key)
            if was is not None and now != was:
                changed.append(f"{what} {key} {quoted(was)} → {'removed' if now is None else quoted(now)}")
            elif was is None and now is not None and now != old:
                changed.append(f"{what} {key} added as {quoted(now)} while the pod is in {quoted(old)}")
        if not changed:
            return None
        return (
            f"a pod's PodGroup cannot change once it is set ({'; '.join(changed)}): "
            f"delete the pod and create it again in the other group"
        )

    def describe_membership(self, group: str) -> str:
        if len(self.membership_keys(group)) > 1:
            return f"{self.annotation}={group} and {self.label}={group} set"
        return (f"{self.annotation}={group} set (no {self.label} label: the name is longer than the "
                f"{MAX_LABEL_VALUE} characters a label value may have)")

    # -- subgroups: ``spec.subGroups[{name, parent, minMember | minSubGroup}]``, a root
    # ``minSubGroup`` for a tree (KAI refuses ``minMember`` beside ``minSubGroup``)

    subgroups_field = SUBGROUPS
    holds_trees = True

    def subgroups_spec(self, subgroups: Sequence[Subgroup], min_subgroup: int | None = None) -> dict[str, Any]:
        entries = [_entry(s) for s in _ordered(subgroups)]
        if min_subgroup is None:
            return {SUBGROUPS: entries, STALENESS_GRACE_PERIOD: DISABLED_STALENESS}
        return {MIN_MEMBER: None, MIN_SUBGROUP: int(min_subgroup), SUBGROUPS: entries,
                STALENESS_GRACE_PERIOD: DISABLED_STALENESS}

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        return {s.name: s.min_member for s in self._tree(podgroup)}

    def subgroup_tree_of(self, podgroup: Any) -> tuple[int | None, tuple[Subgroup, ...]] | None:
        root = spec(podgroup).get(MIN_SUBGROUP)
        return (root if _is_int(root) else None), self._tree(podgroup)

    @staticmethod
    def _tree(podgroup: Any) -> tuple[Subgroup, ...]:
        out = []
        for e in map(as_dict, as_list(spec(podgroup).get(SUBGROUPS))):
            name, parent = e.get("name"), e.get("parent")
            if not isinstance(name, str) or not name:
                continue
            parent = parent if isinstance(parent, str) and parent else None
            if _is_int(e.get(MIN_SUBGROUP)):
                out.append(Subgroup(name, e[MIN_SUBGROUP], parent=parent, of_subgroups=True))
            else:
                value = e.get(MIN_MEMBER)
                out.append(Subgroup(name, value if _is_int(value) else 0, parent=parent))
        return tuple(out)

    def is_users_tree(self, podgroup: Any) -> bool:
        root, tree = self.subgroup_tree_of(podgroup) or (None, ())
        return root is not None or any(s.parent is not None or s.of_subgroups for s in tree)

    def min_member(self, podgroup: Any) -> int | None:
        """``spec.minMember``; for a tree (a root ``minSubGroup``, no ``minMember``) the
        fewest pods that satisfy it, so that a size compares alike either way."""
        value = super().min_member(podgroup)
        if value is not None:
            return value
        root, tree = self.subgroup_tree_of(podgroup) or (None, ())
        return min_pods(tree, root) if root is not None else None

    def subgroups_patch(self, podgroup: Any, subgroups: Sequence[Subgroup],
                        min_subgroup: int | None = None) -> dict[str, Any] | None:
        """A merge patch replaces the whole list: an entry kept keeps its other fields
        (a topology constraint, say); none left removes the field. Subgroups podgang
        writes come with ``stalenessGracePeriod: -1s``: KAI v0.17 judges a group stale
        when any leaf is below its minMember (even a replica beyond the role's minimum),
        so podgang, which judges by the tree, is the one evictor. A tree's root gets
        ``minSubGroup`` and loses ``minMember``; a flat list's root the reverse."""
        live_root = spec(podgroup).get(MIN_SUBGROUP)
        if not subgroups:
            out: dict[str, Any] = {SUBGROUPS: None}
            if live_root is not None:
                out.update({MIN_SUBGROUP: None, MIN_MEMBER: self.min_member(podgroup) or 1})
            return {"spec": out}
        kept = {str(e.get("name")): e for e in map(as_dict, as_list(spec(podgroup).get(SUBGROUPS)))}
        entries = []
        for s in _ordered(subgroups):
            old = {k: v for k, v in kept.get(s.name, {}).items() if k not in (MIN_MEMBER, MIN_SUBGROUP, "parent")}
            entries.append({**old, **_entry(s)})
        body = self.subgroups_spec(subgroups, min_subgroup)
        body[SUBGROUPS] = entries
        if min_subgroup is None and live_root is not None:
            body.update({MIN_SUBGROUP: None, MIN_MEMBER: max(min_pods(subgroups), 1)})
        return {"spec": body}

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        """KAI's latest ``status.schedulingConditions`` entry: why it could not place
        the gang (its reasons' messages, and the node pool)."""
        entries = [as_dict(c) for c in as_list(status(podgroup).get("schedulingConditions"))]
        if not entries:
            return None
        latest = max(entries, key=lambda c: (str(c.get("lastTransitionTime") or ""), str(c.get("transitionID") or "")))
        reasons = [one_line(as_dict(r).get("message")) for r in as_list(latest.get("reasons"))]
        text = "; ".join(r for r in reasons if r) or one_line(latest.get("message"))
        pool = latest.get("nodePool")
        where = f" (node pool {pool})" if isinstance(pool, str) and pool else ""
        state = str(latest.get("type") or latest.get("reason") or "unschedulable")
        return SchedulerVerdict("unschedulable" if "unschedulable" in state.lower() else state, f"{text}{where}".strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(s: Subgroup) -> dict[str, Any]:
    """One ``spec.subGroups`` entry as KAI's CRD takes it: never both minimums."""
    out: dict[str, Any] = {"name": s.name}
    if s.parent:
        out["parent"] = s.parent
    out[MIN_SUBGROUP if s.of_subgroups else MIN_MEMBER] = max(int(s.min_member), 0)
    if s.topology:
        out[TOPOLOGY_FIELD] = dict(s.topology)
    return out


def _ordered(subgroups: Sequence[Subgroup]) -> list[Subgroup]:
    """A flat list by name (as always written); a tree each parent before its children,
    in the order the rules give them (replicas by index)."""
    if not any(s.parent or s.of_subgroups for s in subgroups):
        return sorted(subgroups, key=lambda s: s.name)
    return list(subgroups)


def cluster_facts(priority_classes: Any, queues: Any) -> ClusterFacts:
    """:class:`ClusterFacts` from listed PriorityClasses and KAI Queues (either None
    when not known): a queue is a leaf unless another names it as its parent."""
    def name(obj: Any) -> str | None:
        value = metadata(obj).get("name")
        return value if isinstance(value, str) and value else None

    names = None if priority_classes is None else frozenset(
        n for p in as_list(priority_classes) if (n := name(p)))
    if queues is None:
        return ClusterFacts(names, None)
    parents = {p for q in as_list(queues) if isinstance(p := spec(q).get("parentQueue"), str)}
    return ClusterFacts(names, {n: n not in parents for q in as_list(queues) if (n := name(q))})


def queue_bounds(queue: Any) -> QueueFacts | None:
    """A KAI Queue's quota and limit per resource, in :meth:`KaiBackend.queue_demand`'s units
    (-1, or a resource left out: unbounded)."""
    name = metadata(queue).get("name")
    if not isinstance(name, str) or not name:
        return None
    resources = as_dict(spec(queue).get("resources"))
    quota: dict[str, Decimal] = {}
    limit: dict[str, Decimal] = {}
    for resource, unit in QUEUE_RESOURCES:
        for bound, into in (("quota", quota), ("limit", limit)):
            amount = quantities.quantity(as_dict(resources.get(resource)).get(bound))
            if amount is not None and amount >= 0:
                into[resource] = amount * unit
    parent = spec(queue).get("parentQueue")
    return QueueFacts(name, parent if isinstance(parent, str) and parent else None, quota, limit)


def _largest_gpu_memory(facts: ClusterFacts | None) -> Decimal | None:
    """The most memory one GPU of any node has (MiB), as KAI reads it from the node label
    (a value of a TiB of MiB or more is bytes; floored to hundreds; 100 or less: unlabelled)."""
    if facts is None or not facts.nodes:
        return None
    if "largest-gpu-memory" not in facts.memo:  # once per set of facts
        facts.memo["largest-gpu-memory"] = _gpu_memory_of(facts)
    return facts.memo["largest-gpu-memory"]


def _gpu_memory_of(facts: ClusterFacts) -> Decimal | None:
    found = []
    for node in facts.nodes or ():
        try:
            value = int(node.labels.get(GPU_MEMORY_LABEL, ""))
        except ValueError:
            continue
        if value >= 2 ** 20:  # a TiB in MiB: the value is in bytes (NVIDIA's feature discovery bug)
            value //= 2 ** 20
        value -= value % 100
        if value > 100:
            found.append(value)
    return Decimal(max(found)) if found else None


def _gpu_fraction(pod: Any) -> Decimal:
    """The GPUs a pod's ``gpu-fraction`` annotation asks: fraction × devices (0 when none)."""
    fraction = quantities.request(annotations(pod).get(GPU_FRACTION_ANNOTATION))
    if fraction is None or not 0 < fraction < 1:
        return Decimal(0)
    devices = quantities.request(annotations(pod).get(GPU_FRACTION_DEVICES_ANNOTATION) or "1") or Decimal(1)
    return fraction * devices


def _number(amount: Decimal) -> str:
    """``9``, ``0.5``: a number without trailing zeros, to three decimals at most (rounded up:
    what is over a bound stays over it)."""
    return format(amount.quantize(Decimal("0.001"), rounding="ROUND_CEILING").normalize(), "f")


def _batch_min_member(notes: Mapping[str, Any], where: str) -> tuple[int | None, str]:
    """``kai.scheduler/batch-min-member`` in ``notes``: (value, why), (None, problem) or (None, "")."""
    raw = notes.get(BATCH_MIN_MEMBER)
    if raw is None:
        return None, ""
    text = str(raw).strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= 2**31 - 1:
        return int(text), f"{BATCH_MIN_MEMBER} {int(text)} on {where}"
    return None, f"annotation {BATCH_MIN_MEMBER}={quoted(raw)} on {where} is ignored: a whole number ≥ 1"


def _kind_name(obj: Any) -> str:
    return f"{str(as_dict(obj).get('kind') or 'object').lower()}/{metadata(obj).get('name') or '?'}"


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # the common case first: an ABC check is slow


def _first(objs: list[Any], section: str, key: str) -> tuple[str | None, str]:
    """The first non-empty ``key`` in ``metadata.<section>`` of ``objs``, and whose it is (one
    look-up per object: a gang's every pod is asked for every setting)."""
    for obj in objs:
        value = as_dict(metadata(obj).get(section)).get(key)
        if isinstance(value, str) and value:
            return value, _kind_name(obj) if as_dict(obj).get("kind") else "the pod"
    return None, ""


@functools.lru_cache(maxsize=16384)
def _top_owner_metadata(name: str, uid: str, group: str, version: str, kind: str) -> str:
    """KAI's top-owner-metadata annotation, as KAI's grouper writes it (YAML). Remembered, and
    written by libyaml where PyYAML has it: every reconcile of a gang asks for it again, and
    pure-Python YAML takes 0.35 ms a time (3.5 s of a first reconcile of 10,000 gangs)."""
    return yaml.dump({"name": name, "uid": uid, "group": group, "version": version, "kind": kind},
                     Dumper=_SAFE_DUMPER, sort_keys=True)


_SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


KAI = KaiBackend()

