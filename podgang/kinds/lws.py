"""LeaderWorkerSet: one gang per replica group (its leader and workers), counted in
complete groups, made leader first under ``startupPolicy: LeaderReady``. Tested in
tests/emulated/test_replica_tree.py and test_segments.py."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from podgang import rollouts
from podgang.kinds.model import (_REPLICATED_STATUS, ONE_PER_REPLICA, KindDoc, Obj, Replicas, SlimTemplate, Stage,
                                 Template, WorkloadKind)
from podgang.objects import Resource, as_dict, as_int, is_terminating, labels, metadata, pod_phase, spec


#: read on a pod: its LeaderWorkerSet (set by the LWS controller)
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
#: read on a pod: its LWS group, the suffix of its PodGroup (`…-group-<index>`)
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
#: "0" on a group's leader, "1".."size-1" on its workers
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
#: LWS's startupPolicy that makes a group's workers only once its leader is Ready
LWS_LEADER_READY = "LeaderReady"


def _lws_size(obj: Any) -> tuple[int, str]:
    size = max(as_int(as_dict(spec(obj).get("leaderWorkerTemplate")).get("size"), 1), 1)
    if spec(obj).get("startupPolicy") == LWS_LEADER_READY and size > 1:
        return size, f"leaderWorkerTemplate.size {size} per group, once the group's leader is placed (LeaderReady)"
    return size, f"leaderWorkerTemplate.size {size} per group"


def _lws_replica_stage(obj: Any, pods: Sequence[Any]) -> Stage | None:
    """A ``startupPolicy: LeaderReady`` group: LWS makes its workers only once its leader is
    Ready, so a gang of ``size`` never forms before the leader runs on its own. Its gang is
    the leader alone until the leader is placed (bound to a node) or a worker exists, then
    the whole group — as KAI's own grouper sizes it (LWS's Volcano integration keeps 1)."""
    size = max(as_int(as_dict(spec(obj).get("leaderWorkerTemplate")).get("size"), 1), 1)
    if spec(obj).get("startupPolicy") != LWS_LEADER_READY or size <= 1:
        return None
    for pod in pods:
        index = labels(pod).get(LWS_WORKER_INDEX_LABEL)
        if (index is not None and index != "0") or (index == "0" and spec(pod).get("nodeName")):
            return None  # the leader is placed, or its workers are being made: the whole group
    return Stage(1, f"startupPolicy LeaderReady: the leader first (a gang of 1); LWS makes the group's "
                    f"{size - 1} workers once it is Ready, and the gang is then the group's {size}", size)


def _lws_replicas(obj: Any) -> Replicas:
    size, why = _lws_size(obj)
    return Replicas(max(as_int(spec(obj).get("replicas"), 1), 0), size, why,
                    leader_first=spec(obj).get("startupPolicy") == LWS_LEADER_READY)


#: LWS's default ``leaderWorkerTemplate.restartPolicy`` (its CRD's and its webhook's): a group
#: that loses a pod is deleted and made again whole
LWS_RECREATE_GROUP = "RecreateGroupOnPodRestart"


def _lws_recreates(obj: Any) -> bool:
    """``restartPolicy: RecreateGroupOnPodRestart`` (LWS's default): once any pod of a group is
    being deleted (or a container restarted) LWS deletes the group's leader, in the foreground,
    and the workers go with it (their StatefulSet is the leader's); the leader's StatefulSet
    makes the leader again and LWS its workers, which the scheduler places with it — the
    operator's own recovery, not a loss (tests/real/test_real_operators.py: a worker's container
    restarted, a worker deleted). Under any other policy LWS leaves a lost pod to its
    StatefulSet, and the gang is judged as any other."""
    policy = as_dict(spec(obj).get("leaderWorkerTemplate")).get("restartPolicy") or LWS_RECREATE_GROUP
    return policy == LWS_RECREATE_GROUP


def _lws_group(obj: Any, pod: Any) -> tuple[str, str] | None:
    """The LWS's name and the pod's group index, when ``pod`` is in one of ``obj``'s groups."""
    name = metadata(obj).get("name")
    index = labels(pod).get(LWS_GROUP_INDEX_LABEL)
    if not name or labels(pod).get(LWS_NAME_LABEL) != name or not isinstance(index, str) or not index.isdigit():
        return None
    return str(name), index


def _lws_replaced(obj: Any, pod: Any) -> str | None:
    """A pod of a group at or above ``spec.replicas``: LWS scaled down (or reclaims a surge
    group of a rolling update) and removes that group, leader first: on purpose, not a loss
    (tests/real/test_real_operators.py: the real LWS removes group 1 of 2 when scaled to 1)."""
    found = _lws_group(obj, pod)
    if found is None:
        return None
    name, index = found
    replicas = max(as_int(spec(obj).get("replicas"), 1), 0)
    if len(index) > 9 or int(index) < replicas:
        return None
    return f"leaderworkerset {name} has {replicas} replicas: its controller removes group {index}"


def _lws_remade(obj: Any, pod: Any) -> str | None:
    """A pod of a group LWS is making again whole (:func:`_lws_recreates`): being deleted (LWS
    deletes the rest of the group), or the group's new leader not placed yet (its workers are
    made from it and placed with it)."""
    found = _lws_group(obj, pod)
    if found is None or not _lws_recreates(obj):
        return None
    head = f"leaderworkerset {found[0]} recreates group {found[1]} ({LWS_RECREATE_GROUP})"
    pod_name = metadata(pod).get("name") or "?"
    if is_terminating(pod):
        return f"{head}: pod {pod_name} is being deleted"
    if (labels(pod).get(LWS_WORKER_INDEX_LABEL) == "0" and not spec(pod).get("nodeName")
            and pod_phase(pod) == "Pending"):
        return f"{head}: its leader {pod_name} is not placed yet"
    return None


LWS_LEADER_WORKER = "LeaderWorker"  # subGroupPolicyType: the leader is in the first subgroup
LWS_LEADER_EXCLUDED = "LeaderExcluded"  # the leader is a subgroup of its own


def lws_subgroup_policy(obj: Any) -> tuple[int | None, str]:
    """An LWS's ``leaderWorkerTemplate.subGroupPolicy``: (``subGroupSize`` or None,
    ``subGroupPolicyType``, LeaderWorker by default as its CRD says)."""
    policy = as_dict(as_dict(spec(obj).get("leaderWorkerTemplate")).get("subGroupPolicy"))
    size = policy.get("subGroupSize")
    kind = policy.get("subGroupPolicyType")
    return (size if isinstance(size, int) and not isinstance(size, bool) else None,
            kind if isinstance(kind, str) and kind else LWS_LEADER_WORKER)


def _lws_templates(obj: Any) -> list[tuple[str, Template]]:
    lwt = as_dict(spec(obj).get("leaderWorkerTemplate"))
    out: list[tuple[str, Template]] = []
    if "leaderTemplate" in lwt:
        out.append(("spec.leaderWorkerTemplate.leaderTemplate", as_dict(lwt.get("leaderTemplate"))))
    out.append(("spec.leaderWorkerTemplate.workerTemplate", as_dict(lwt.get("workerTemplate"))))
    return out


def _slim_lws(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {k: s[k] for k in ("replicas", "startupPolicy") if k in s}
    lwt = as_dict(s.get("leaderWorkerTemplate"))
    slim_lwt: Obj = {k: lwt[k] for k in ("size", "restartPolicy") if k in lwt}
    for k in ("leaderTemplate", "workerTemplate"):
        if k in lwt:
            slim_lwt[k] = slim_template(lwt.get(k))
    if isinstance(lwt.get("subGroupPolicy"), Mapping):
        slim_lwt["subGroupPolicy"] = dict(lwt["subGroupPolicy"])
    out["leaderWorkerTemplate"] = slim_lwt
    return out


LEADER_WORKER_SET = WorkloadKind(
    Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", optional=True),
    _lws_size, _lws_templates, _slim_lws,
    aliases=("leaderworkerset", "leaderworkersets", "lws"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.leader_worker_set_rollout, layout=ONE_PER_REPLICA, status_fields=_REPLICATED_STATUS,
    replicas=_lws_replicas, replica_label=LWS_GROUP_INDEX_LABEL, replica_owner_label=LWS_NAME_LABEL, operator_gangs=True,
    replica_stage=_lws_replica_stage, replaced=_lws_replaced, remade=_lws_remade, kept_conditions=(rollouts.LWS_UPDATE_IN_PROGRESS,),
    doc=KindDoc("`leaderWorkerTemplate.size` per group (one PodGroup per LWS group, `…-group-<index>`)",
                staging="with `startupPolicy: LeaderReady` a group's gang is its leader alone until the leader is "
                        "bound (LWS makes the workers once it is Ready), then the whole group"),
    segment_index_label=LWS_WORKER_INDEX_LABEL,
)
