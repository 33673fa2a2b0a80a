"""Whether a workload's controller is replacing its pods on purpose (a rollout),
told from what the controllers themselves record rather than from replica counts.

A gang that lost a member is stale (spec §5) unless its workload is rolling out.
The replica counts cannot tell the two apart: in the last step of a
``maxSurge: 0, maxUnavailable: 1`` rollout the last new pod already counts as
updated while it is still Pending, exactly as the replacement of a lost pod does.
What differs is what the controllers write down:

- Deployment: the ``Progressing`` condition's reason (``NewReplicaSetCreated`` /
  ``FoundNewReplicaSet`` / ``ReplicaSetUpdated`` while a rollout runs,
  ``NewReplicaSetAvailable`` once it finished: the controller keeps that reason
  when a pod is merely lost or the Deployment scaled), and pods of an older
  ReplicaSet still running. Recreate first removes every old pod before the new
  ReplicaSet exists: nothing is updated yet while the condition still reads
  finished. Without a Progressing condition (``progressDeadlineSeconds:
  2147483647``) only the counts are left.
- StatefulSet, RollingUpdate without a partition: ``currentRevision`` becomes
  ``updateRevision`` only once every pod is updated and ready.
- StatefulSet with a partition, or OnDelete: the controller never records the end,
  so the pods tell: a pod of an older revision in the updated range (being
  deleted, or, under a partition, still to be replaced), or a pod not running yet
  whose predecessor under the same name was of an older revision (the memory of
  deleted pods comes from the caller).

Pure functions over slim workload and pod dicts (no I/O); each answers a reason
string ("deployment web: rollout in progress (Progressing: ReplicaSetUpdated)")
or None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from podgang.objects import annotations, is_active, is_terminating, labels, metadata, pod_phase

#: Labels and annotations the controllers put on what they create.
POD_TEMPLATE_HASH = "pod-template-hash"  # Deployment → ReplicaSet → pod
CONTROLLER_REVISION_HASH = "controller-revision-hash"  # StatefulSet pod: its revision's name
POD_INDEX = "apps.kubernetes.io/pod-index"  # StatefulSet pod: its ordinal
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"  # read on a Deployment and its ReplicaSets: 1, 2, ...

#: Progressing reasons of a Deployment whose rollout is under way.
ROLLOUT_REASONS = frozenset({"NewReplicaSetCreated", "FoundNewReplicaSet", "ReplicaSetUpdated"})

#: Condition fields worth keeping in a slim workload for the decision.
CONDITION_FIELDS = ("type", "status", "reason")


@dataclass(frozen=True)
class WorkloadPods:
    """What the caller knows of a workload's pods, besides the workload itself."""

    pods: Sequence[Mapping[str, Any]] = ()  # the workload's own pods, terminating ones too
    newest_hash: str | None = None  # Deployment: pod-template-hash of its newest ReplicaSet
    # StatefulSet: pod name → revision of the pod last deleted under that name (until it runs again)
    replaced: Mapping[str, str] = field(default_factory=dict)


NO_PODS = WorkloadPods()


def _d(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, and much cheaper than an ABC check
        return value
    return value if isinstance(value, Mapping) else {}


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _name(workload: Mapping[str, Any]) -> str:
    return f"{str(workload.get('kind') or 'workload').lower()} {metadata(workload).get('name') or '?'}"


def condition(workload: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in _d(workload.get("status")).get("conditions") or ():
        if _d(c).get("type") == kind:
            return _d(c)
    return None


def _running_or_due(pod: Mapping[str, Any]) -> bool:
    """Not terminating and not finished (a pod the kubelet evicted stays around as Failed)."""
    return not is_terminating(pod) and pod_phase(pod) not in ("Succeeded", "Failed")


def generation_lag(workload: Mapping[str, Any]) -> str | None:
    """The controller has not seen the latest spec yet (any change may be a rollout)."""
    generation = metadata(workload).get("generation")
    observed = _d(workload.get("status")).get("observedGeneration")
    if isinstance(generation, int) and (not isinstance(observed, int) or observed < generation):
        return f"{_name(workload)}: observedGeneration {observed} < generation {generation}"
    return None


def _updated_below_desired(workload: Mapping[str, Any]) -> str | None:
    replicas = _count(_d(workload.get("spec")).get("replicas"), 1)
    updated = _count(_d(workload.get("status")).get("updatedReplicas"), 0)
    if updated < replicas:
        return f"{_name(workload)}: {updated} of {replicas} replicas updated"
    return None


def deployment_rollout(deployment: Mapping[str, Any], seen: WorkloadPods = NO_PODS) -> str | None:
    """Why a Deployment is rolling out, or None (finished, merely scaled, or a pod lost)."""
    name = _name(deployment)
    lag = generation_lag(deployment)
    if lag:
        return lag
    progressing = condition(deployment, "Progressing")
    # its first revision replaces nothing: pods lost before that rollout is marked complete (a
    # node gone while the Deployment waits for the replacements) are lost, not replaced
    first = annotations(deployment).get(REVISION_ANNOTATION) == "1"
    if (progressing is not None and progressing.get("status") == "True"
            and progressing.get("reason") in ROLLOUT_REASONS and not first):
        return f"{name}: rollout in progress (Progressing: {progressing.get('reason')})"
    hashes = [h for p in seen.pods if _running_or_due(p) and (h := labels(p).get(POD_TEMPLATE_HASH))]
    if seen.newest_hash:
        old = sum(h != seen.newest_hash for h in hashes)
        if old:
            return f"{name}: {old} {'pod' if old == 1 else 'pods'} of an older revision still running"
    elif len(set(hashes)) > 1:  # the newest ReplicaSet unknown: pods of several revisions are enough
        return f"{name}: pods of {len(set(hashes))} revisions running"
    if progressing is None:
        return _updated_below_desired(deployment)  # no Progressing condition to go by: the counts
    spec = _d(deployment.get("spec"))
    replicas = _count(spec.get("replicas"), 1)
    updated = _count(_d(deployment.get("status")).get("updatedReplicas"), 0)
    if _d(spec.get("strategy")).get("type") == "Recreate" and updated == 0 < replicas:
        # the old pods go first; the condition changes only once the new ReplicaSet exists
        return f"{name}: recreating its pods (0 of {replicas} replicas updated)"
    return None


def ordinal(pod_name: str, statefulset_name: str, pod: Mapping[str, Any] | None = None) -> int | None:
    """A StatefulSet pod's ordinal: its pod-index label, else the suffix of ``<set>-<n>``."""
    text = labels(pod).get(POD_INDEX) if pod is not None else None
    if text is None:
        prefix = f"{statefulset_name}-"
        if not pod_name.startswith(prefix):
            return None
        text = pod_name[len(prefix):]
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


def statefulset_rollout(statefulset: Mapping[str, Any], seen: WorkloadPods = NO_PODS) -> str | None:
    """Why a StatefulSet is rolling out, or None (finished, merely scaled, or a pod lost)."""
    name = _name(statefulset)
    lag = generation_lag(statefulset)
    if lag:
        return lag
    spec = _d(statefulset.get("spec"))
    status = _d(statefulset.get("status"))
    current, update = status.get("currentRevision"), status.get("updateRevision")
    if not update:
        return _updated_below_desired(statefulset)  # no revisions recorded: the counts
    strategy = _d(spec.get("updateStrategy"))
    on_delete = strategy.get("type") == "OnDelete"
    partition = 0 if on_delete else max(_count(_d(strategy.get("rollingUpdate")).get("partition"), 0), 0)
    if not on_delete and partition == 0:
        # the controller sets currentRevision = updateRevision once every pod is updated and ready
        if current and current != update:
            return f"{name}: revision {current} → {update}"
        return None
    # A partition or OnDelete: the end is never recorded; the pods in the updated range tell.
    set_name = str(metadata(statefulset).get("name") or "")
    replicas = _count(spec.get("replicas"), 1)
    where = "OnDelete" if on_delete else f"partition {partition}"
    by_name: dict[str, Mapping[str, Any]] = {}
    for pod in seen.pods:
        pod_name = str(metadata(pod).get("name") or "")
        n = ordinal(pod_name, set_name, pod)
        if n is None or not partition <= n < replicas:
            continue
        by_name[pod_name] = pod
        revision = labels(pod).get(CONTROLLER_REVISION_HASH)
        if revision is None or revision == update:
            continue
        if is_terminating(pod):
            return f"{name}: pod {pod_name} of revision {revision} is being replaced by {update} ({where})"
        if not on_delete:
            return f"{name}: pod {pod_name} still at revision {revision}, {update} to come ({where})"
    for pod_name, revision in seen.replaced.items():
        n = ordinal(pod_name, set_name)
        if revision == update or n is None or not partition <= n < replicas:
            continue
        pod = by_name.get(pod_name)
        if pod is None or not is_active(pod):
            return f"{name}: pod {pod_name} replaced, revision {revision} → {update}, not running yet ({where})"
    return None


def replica_set_rollout(replica_set: Mapping[str, Any], seen: WorkloadPods = NO_PODS) -> str | None:
    """A ReplicaSet of its own: only the plain signal, a generation not observed yet."""
    return generation_lag(replica_set)


#: the condition a LeaderWorkerSet's controller sets True when a rolling update starts and
#: False only once every group is updated and Ready (its Available condition)
LWS_UPDATE_IN_PROGRESS = "UpdateInProgress"


def leader_worker_set_rollout(lws: Mapping[str, Any], seen: WorkloadPods = NO_PODS) -> str | None:
    """A LeaderWorkerSet: a generation not observed yet, its ``UpdateInProgress`` condition
    True, or fewer replicas updated than desired.

    ``status.updatedReplicas`` alone cannot tell the end of a rolling update: the real LWS
    (v0.10) counts a group updated as soon as its leader pod and its worker StatefulSet carry
    the new revision, while the workers are still being recreated (the last group rolled would
    look like a gang that lost every worker). Its ``UpdateInProgress`` condition stays True
    until every group is updated and Ready (tests/real/test_real_operators.py)."""
    lag = generation_lag(lws)
    if lag:
        return lag
    update = condition(lws, LWS_UPDATE_IN_PROGRESS)
    if update is not None and update.get("status") == "True":
        return f"{_name(lws)}: rolling update in progress ({LWS_UPDATE_IN_PROGRESS}: {update.get('reason') or '?'})"
    return _updated_below_desired(lws)


def newest_hash(replica_sets: Sequence[Mapping[str, Any]]) -> str | None:
    """The pod-template-hash of the newest of a Deployment's ReplicaSets (highest revision)."""
    best: tuple[int, str] | None = None
    for rs in replica_sets:
        revision = annotations(rs).get(REVISION_ANNOTATION) or ""
        template_hash = labels(rs).get(POD_TEMPLATE_HASH)
        if not template_hash or not revision.isdigit() or len(revision) > 18:
            continue
        if best is None or int(revision) > best[0]:
            best = (int(revision), template_hash)
    return best[1] if best else None
