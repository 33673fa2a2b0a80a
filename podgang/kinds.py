"""The workload kinds podgang knows, as data: where each lives in the API.

Used by whoever must fetch or watch owners (the webhook's owner look-ups, the
grouper's watches); the rules only need the kind names. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    optional: bool = False  # served by a CRD that may not be installed

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        base = f"{root}/namespaces/{namespace}/{self.plural}" if namespace else f"{root}/{self.plural}"
        return f"{base}/{name}" if name else base


POD = Resource("", "v1", "pods", "Pod")
REPLICA_SET = Resource("apps", "v1", "replicasets", "ReplicaSet")
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
STATEFUL_SET = Resource("apps", "v1", "statefulsets", "StatefulSet")
JOB = Resource("batch", "v1", "jobs", "Job")
CRON_JOB = Resource("batch", "v1", "cronjobs", "CronJob")
LEADER_WORKER_SET = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", optional=True)
JOB_SET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", optional=True)

#: Owner kinds podgang looks up to walk to the top owner, by kind. An owner of any
#: other kind (a DaemonSet, a custom controller's object) is taken as the top.
OWNER_KINDS: dict[str, Resource] = {
    r.kind: r for r in (POD, REPLICA_SET, DEPLOYMENT, STATEFUL_SET, JOB, CRON_JOB, LEADER_WORKER_SET, JOB_SET)
}

#: Workloads whose size the grouper follows (it watches these).
WORKLOAD_KINDS: tuple[Resource, ...] = (DEPLOYMENT, REPLICA_SET, STATEFUL_SET, JOB, CRON_JOB, LEADER_WORKER_SET, JOB_SET)


def resource_for(api_version: str, kind: str) -> Resource | None:
    """The known resource for an ownerReference's apiVersion and kind, if any."""
    resource = OWNER_KINDS.get(kind)
    if resource is None or resource.api_version != api_version:
        return None
    return resource
