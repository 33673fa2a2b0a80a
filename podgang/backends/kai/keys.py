"""Every name KAI-Scheduler spells that podgang reads or writes: its pod keys, its
PodGroup's fields, its Queue resource, its own pod-grouper's defaults and rules, and the
messages of its webhook. The GPU sharing annotations are KAI's too; the rules read their
names from here. Apart from the backend (``kai/__init__.py``) so that the rules, the
options and the docs can name them without the backend's behaviour. No I/O.
"""

from __future__ import annotations

from decimal import Decimal

from podgang.objects import Resource

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
#: KAI v0.18's third preemptibility (#1804): the minimum protected, what is above it elastic
SEMI_PREEMPTIBLE = "semi-preemptible"
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
#: KAI v0.18's gang size on a Deployment (one PodGroup per Deployment, #2109) or a
#: `podManagementPolicy: Parallel` StatefulSet (#2098), as some of KAI's docs and code spell it;
#: podgang reads it there, after `kai.scheduler/batch-min-member`, as a pin of the gang's size
MIN_MEMBER_ANNOTATION = "kai.scheduler/min-member"
#: KubeRay's label that KAI's grouper takes as a Ray cluster's priority class, unchecked
RAY_PRIORITY_LABEL = "ray.io/priority-class-name"
RAY_KINDS = ("RayCluster", "RayJob", "RayService")
STALENESS_GRACE_PERIOD = "stalenessGracePeriod"
MIN_SUBGROUP = "minSubGroup"
DISABLED_STALENESS = "-1s"  # a negative grace period: KAI never evicts the gang
#: written on a pod podgang puts into a KAI gang, `"true"`: KAI's own pod-grouper (v0.15 and
#: later) leaves it alone
SKIP_PODGROUPER_ANNOTATION = "kai.scheduler/skip-podgrouper"
#: the label and annotation KAI's grouper copies from the pod to its group (its user), when the top owner has none
USER_KEY = "user"
DEFAULT_QUEUE = "default-queue"  # KAI's constants.DefaultQueueName
#: KAI's fallback priority per top-owner kind (its plugins': a Knative Revision's and a SPOTRequest's
#: inference, a Kubeflow Notebook's build); every other kind gets TRAIN
DEFAULT_PRIORITY_CLASSES = (("Deployment", "inference"), ("Revision", "inference"), ("SPOTRequest", "inference"),
                            ("Notebook", "build"))
TRAIN = "train"
#: the help of the flags that set the two defaults above (``podgang.options``)
DEFAULT_QUEUE_HELP = (f"kai: the queue of a gang whose top owner and pods name none (label {QUEUE_LABEL}, "
                      f"then {PROJECT_LABEL}), as KAI's own pod-grouper does")
DEFAULT_PRIORITY_HELP = ("kai: the priorityClassName of a gang of a top-owner KIND (or KIND.GROUP, which wins) "
                         "that names none, used only if that PriorityClass exists (repeatable; as KAI's defaults "
                         f"ConfigMap; else KAI's own: {', '.join(f'{k}={v}' for k, v in DEFAULT_PRIORITY_CLASSES)}, "
                         f"any other kind {TRAIN})")
DEFAULT_PREEMPTIBILITY_HELP = ("kai: the preemptibility of a gang of a top-owner KIND (or KIND.GROUP, which wins) "
                               "whose owners and pods set none (repeatable; as KAI's defaults ConfigMap; else KAI "
                               "decides by priority)")
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
    "SparkConnect": "no plugin: one PodGroup for the SparkConnect (the default grouper), minMember 1",
    "AppWrapper": ("no plugin: the AppWrapper is the top owner, one PodGroup for everything it wraps, minMember 1 "
                   "(the wrapped kind's plugin is never reached)"),
    "DisaggregatedSet": ("no plugin: one PodGroup for the whole set (every role, slice and LWS group), minMember 1 "
                         "(the LeaderWorkerSet plugin is never reached)"),
    "RayCronJob": "no plugin: one PodGroup for every run of the schedule together, minMember 1",
    "ScheduledSparkApplication": ("no plugin: it follows the first ownerReference, controller or not, to the "
                                  "schedule: one PodGroup for every run together, minMember 1"),
    "PodCliqueSet": ("its Grove plugin makes the PodGroup from the pod's PodGang (`pg-<podgang>-<uid>`), unless "
                     "Grove made it and marked the pods `kai.scheduler/skip-podgrouper`: podgang leaves both alone"),
    "PodCliqueScalingGroup": "as the PodCliqueSet (the top owner of its pods)",
    "PodClique": "as the PodCliqueSet (the top owner of its pods)",
    "Notebook": "1 (the default grouper), priority `build` (a `kubeflow.org/v1beta1` Notebook; a `v1` one: `train`)",
    "Service": ("the Revision's `autoscaling.knative.dev/min-scale`, else 1, one PodGroup per Revision; a Revision an "
                "older KAI grouped pod by pod (or `--knative-gang-schedule=false`) keeps one PodGroup per pod"),
    "Configuration": "no plugin: the default grouper, one PodGroup for all its Revisions, minMember 1",
    "Revision": "no plugin of its own: grouped by its Service's (above); with no Service, the default grouper",
    "AmlJob": "`spec.job.options.envs.AZUREML_NODE_COUNT`; without it an error: no PodGroup",
    "SPOTRequest": "1 (the default grouper), priority `inference`",
}

# the messages KAI's own webhook denies contradictory GPU requests with: v0.17.0's
# (pkg/binder/plugins/gpusharing/gpu-request/gpu_request_validator.go at the tag), the first two
# also v0.18's
MSG_GPU_AND_MEMORY = "cannot request both GPU and GPU memory"
MSG_FRACTION_AND_GPU = "cannot have both GPU fraction request and whole GPU resource request/limit"
MSG_BAD_MEMORY = f"{GPU_MEMORY_ANNOTATION} annotation value must be a positive integer greater than 0"
MSG_BAD_FRACTION = f"{GPU_FRACTION_ANNOTATION} annotation value must be a positive number smaller than 1.0"

# KAI v0.18's per-container GPU sharing ("NvFractions"): nvidia.com/container.<container><suffix>
NV_FRACTIONS_PREFIX = "nvidia.com/container."
#: read on a pod, per container (`nvidia.com/container.<name>.gpu-memory.request`): the GPU memory it
#: shares, a quantity such as `1Gi` (KAI v0.18)
NV_FRACTIONS_REQUEST_ANNOTATION_SUFFIX = ".gpu-memory.request"
#: read on a pod, per container (`nvidia.com/container.<name>.gpu-memory.limit`): the most GPU
#: memory it may use; the request defaults to it (KAI v0.18)
NV_FRACTIONS_LIMIT_ANNOTATION_SUFFIX = ".gpu-memory.limit"
#: written on a pod by KAI's binder, per container (`nvidia.com/container.<name>.gpus.devices`):
#: the GPUs it was given (KAI v0.18)
NV_FRACTIONS_DEVICES_ANNOTATION_SUFFIX = ".gpus.devices"
#: read on a pod, per container (`nvidia.com/container.<name>.gpu-compute.mode`): `time-slicing`
#: or `sm-sharing` (KAI v0.18)
GPU_COMPUTE_MODE_ANNOTATION_SUFFIX = ".gpu-compute.mode"
NV_FRACTIONS_SUFFIXES = (NV_FRACTIONS_REQUEST_ANNOTATION_SUFFIX, NV_FRACTIONS_LIMIT_ANNOTATION_SUFFIX,
                         NV_FRACTIONS_DEVICES_ANNOTATION_SUFFIX, GPU_COMPUTE_MODE_ANNOTATION_SUFFIX)
#: read on a pod: the container a legacy gpu-fraction or gpu-memory request is for (else the first)
GPU_FRACTION_CONTAINER_ANNOTATION = "gpu-fraction-container-name"
# KAI v0.18's words (ValidateGPUFractionRequest, pkg/common/resources/gpu_sharing_validation.go
# @911784db, its NvFractions parser @253c8275), formatted as KAI formats them
MSG_V18_DEVICES_WITHOUT_FRACTION = ("cannot request multiple fractional devices without specifying fraction details "
                                    "(portion or memory)")
MSG_V17_DEVICES_WITHOUT_FRACTION = ("cannot request multiple fractional devices without specifying fraction portion "
                                    "or gpu-memory")
MSG_V18_FRACTION_AND_MEMORY = "cannot request both gpu-fraction and GPU memory request"
MSG_V18_LIMIT_WITH_LEGACY = (f"cannot combine {NV_FRACTIONS_PREFIX} limit annotation with {GPU_FRACTION_ANNOTATION} "
                             f"or {GPU_MEMORY_ANNOTATION} annotation")
MSG_V18_MULTIPLE_CONTAINERS = "currently, kai doesn't support multiple containers with fractional GPU requests"
MSG_V18_INVALID_KEY = "invalid NvFractions annotation key: {key}"
MSG_V18_BAD_QUANTITY = "{key} annotation value must be a valid Kubernetes memory quantity greater than 0"
MSG_V18_NO_CONTAINER = "container {container} not found in pod spec, but a fractional annotation referencing it was found"
MSG_V18_REQUEST_OVER_LIMIT = "invalid fraction request for container {container}: request is greater than limit"
MSG_V18_CONTAINER_NAME = (f"{GPU_FRACTION_CONTAINER_ANNOTATION} annotation value {{name}} does not match container "
                          f"name {{container}}")
MSG_V18_MEMORY_MISMATCH = ("NvFractions memory request ({request}) does not match {annotation} annotation value "
                           "({mib} MiB)")
# KAI v0.18's PodGroup webhook (validateSemiPreemptibleImmutability, #1804): the minimum of a
# semi-preemptible group may shrink, never grow (the merged wording; three were seen in the PR)
MSG_SEMI_PREEMPTIBLE_INCREASE = ("cannot increase {field} ({old} -> {new}) on {scope} semi-preemptible PodGroup: it "
                                 "would reclassify running elastic pods or subgroups as core")


QUEUES = Resource("scheduling.run.ai", "v2", "queues", "Queue", optional=True)
