"""The resources the emulator serves (``ResourceType``) and the default set: the
built-in kinds podgang reads and the CRDs of the schedulers and workload operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any




Obj = dict[str, Any]

# --------------------------------------------------------------------------- resources

@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives, what it is called, which subresources it has."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False
    scale: bool = False
    crd: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``plural.group`` as used in messages and CRD names (``pods`` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _r(group: str, version: str, plural: str, kind: str, **kw: bool) -> ResourceType:
    return ResourceType(group, version, plural, kind, **kw)


DEFAULT_RESOURCES: tuple[ResourceType, ...] = (
    _r("", "v1", "pods", "Pod", status=True),
    _r("", "v1", "events", "Event"),
    _r("", "v1", "secrets", "Secret"),
    _r("", "v1", "services", "Service", status=True),
    _r("", "v1", "namespaces", "Namespace", namespaced=False, status=True),
    _r("", "v1", "configmaps", "ConfigMap"),
    _r("apps", "v1", "deployments", "Deployment", status=True, scale=True),
    _r("apps", "v1", "replicasets", "ReplicaSet", status=True, scale=True),
    _r("apps", "v1", "statefulsets", "StatefulSet", status=True, scale=True),
    _r("apps", "v1", "daemonsets", "DaemonSet", status=True),
    _r("batch", "v1", "jobs", "Job", status=True),
    _r("batch", "v1", "cronjobs", "CronJob", status=True),
    _r("coordination.k8s.io", "v1", "leases", "Lease"),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status=True),
    _r("events.k8s.io", "v1", "events", "Event"),
    _r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", namespaced=False),
    _r("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", namespaced=False),
    _r("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", status=True, crd=True),
    _r("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet",
       status=True, scale=True, crd=True),
    _r("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", status=True, crd=True),
    # Kubeflow's training jobs; MPIJob at training-operator's v1 (mpi-operator's v2beta1 is
    # the same CRD name: a cluster serves one of them)
    *(_r("kubeflow.org", "v1", plural, kind, status=True, crd=True) for plural, kind in (
        ("pytorchjobs", "PyTorchJob"), ("tfjobs", "TFJob"), ("mpijobs", "MPIJob"), ("xgboostjobs", "XGBoostJob"),
        ("jaxjobs", "JAXJob"), ("paddlejobs", "PaddleJob"))),
    *(_r("ray.io", "v1", plural, kind, status=True, crd=True) for plural, kind in (
        ("rayclusters", "RayCluster"), ("rayjobs", "RayJob"), ("rayservices", "RayService"))),
    _r("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", status=True, crd=True),
    _r("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication", status=True, crd=True),
    _r("sparkoperator.k8s.io", "v1alpha1", "sparkconnects", "SparkConnect", status=True, crd=True),
    # the kinds KAI's own grouper has plugins for: a Kubeflow Notebook, a Knative Revision, AML, SPOT
    _r("kubeflow.org", "v1beta1", "notebooks", "Notebook", status=True, crd=True),
    _r("serving.knative.dev", "v1", "revisions", "Revision", status=True, crd=True),
    _r("amlarc.azureml.com", "v1alpha1", "amljobs", "AmlJob", status=True, crd=True),
    _r("egx.nvidia.io", "v1", "spotrequests", "SPOTRequest", status=True, crd=True),
)
OPTIONAL_CRDS = tuple(r.qualified for r in DEFAULT_RESOURCES if r.crd)
# Status the apiserver writes on create (required, non-omitempty fields serialise as 0).
CREATE_STATUS: dict[tuple[str, str], Obj] = {
    ("", "pods"): {"phase": "Pending"},
    ("", "namespaces"): {"phase": "Active"},
    ("", "services"): {"loadBalancer": {}},
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "daemonsets"): {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                             "desiredNumberScheduled": 0, "numberReady": 0},
    ("policy", "poddisruptionbudgets"): {"disruptionsAllowed": 0, "currentHealthy": 0,
                                         "desiredHealthy": 0, "expectedPods": 0},
}
