"""Kubernetes' own workloads: ReplicaSet, Deployment, StatefulSet, Job, CronJob and
DaemonSet (and a bare pod's size and template), one gang per object or, for a CronJob,
per run. Tested in tests/unit/test_rules.py, test_rollouts.py and test_what_gets_a_gang.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang import rollouts
from podgang.kinds.model import (_REPLICATED_STATUS, _RUN_STATUS, ONE_PER_RUN, KindDoc, Obj, SlimTemplate, Template,
                                 WorkloadKind, _slim_job, _spec_template, job_size)
from podgang.objects import Resource, as_dict, as_int, spec, status


def _replicas_size(obj: Any) -> tuple[int, str]:
    replicas = max(as_int(spec(obj).get("replicas"), 1), 0)
    return replicas, f"spec.replicas {replicas}"


def _statefulset_stages(obj: Any) -> str | None:
    replicas = max(as_int(spec(obj).get("replicas"), 1), 0)
    policy = spec(obj).get("podManagementPolicy") or "OrderedReady"
    if policy == "Parallel" or replicas <= 1:
        return None
    return (f"podManagementPolicy {policy}{' (the default)' if policy == 'OrderedReady' else ''} makes its "
            f"{replicas} pods one at a time, each only once the one before is Ready; "
            f"podManagementPolicy: Parallel makes them one gang")


def _statefulset_size(obj: Any) -> tuple[int, str]:
    replicas, why = _replicas_size(obj)
    if _statefulset_stages(obj) is None:
        return replicas, why
    return 1, f"{why}, made one at a time (OrderedReady): a gang of 1"


def _job_kind_size(obj: Any) -> tuple[int, str]:
    return job_size(spec(obj), status(obj))


def _cronjob_size(obj: Any) -> tuple[int, str]:
    size, why = job_size(_job_template_spec(obj))
    return size, f"per run: jobTemplate {why}"


def _one_pod(obj: Any) -> tuple[int, str]:
    return 1, "a single pod"


def _per_node(obj: Any) -> tuple[int, str]:
    return 1, "a DaemonSet is not a gang: one pod at a time, one per node, each placed on its own"


def _job_template_spec(obj: Any) -> Mapping[str, Any]:
    return as_dict(as_dict(spec(obj).get("jobTemplate")).get("spec"))


def _pod_itself(obj: Any) -> list[tuple[str, Template]]:
    return [("", as_dict(obj))]


def _cronjob_templates(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.jobTemplate.spec.template", as_dict(_job_template_spec(obj).get("template")))]


def _slim_replicas(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {"replicas": s["replicas"]} if "replicas" in s else {}
    out["template"] = slim_template(s.get("template"))
    return out


def _slim_deployment(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out = _slim_replicas(s, slim_template)
    if "type" in as_dict(s.get("strategy")):  # Recreate or RollingUpdate: how a rollout looks
        out["strategy"] = {"type": s["strategy"]["type"]}
    return out


def _slim_statefulset(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out = _slim_replicas(s, slim_template)
    if "podManagementPolicy" in s:  # OrderedReady makes its pods one at a time: the gang's size
        out["podManagementPolicy"] = s["podManagementPolicy"]
    if "updateStrategy" in s:  # its type and partition: where a rollout ends
        strategy = as_dict(s["updateStrategy"])
        out["updateStrategy"] = {"type": strategy.get("type"), "rollingUpdate": {
            "partition": as_dict(strategy.get("rollingUpdate")).get("partition")}}
    return out


def _slim_cronjob(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"jobTemplate": {"spec": _slim_job(as_dict(as_dict(s.get("jobTemplate")).get("spec")), slim_template)}}


def _slim_template_only(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(s.get("template"))} if "template" in s else {}


REPLICA_SET = WorkloadKind(
    Resource("apps", "v1", "replicasets", "ReplicaSet"), _replicas_size, _spec_template, _slim_replicas,
    aliases=("replicaset", "replicasets", "rs"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.replica_set_rollout, status_fields=_REPLICATED_STATUS,
    doc=KindDoc("`spec.replicas`"),
)
DEPLOYMENT = WorkloadKind(
    Resource("apps", "v1", "deployments", "Deployment"), _replicas_size, _spec_template, _slim_deployment,
    aliases=("deployment", "deployments", "deploy"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.deployment_rollout, status_fields=_REPLICATED_STATUS, kept_conditions=("Progressing",),
    doc=KindDoc("`spec.replicas`"),
)
STATEFUL_SET = WorkloadKind(
    Resource("apps", "v1", "statefulsets", "StatefulSet"), _statefulset_size, _spec_template, _slim_statefulset,
    aliases=("statefulset", "statefulsets", "sts"), scale_path=("spec", "replicas"),
    rolling_out=rollouts.statefulset_rollout, status_fields=_REPLICATED_STATUS, stages=_statefulset_stages,
    doc=KindDoc("`spec.replicas` with `podManagementPolicy: Parallel`, else 1",
                staging="`OrderedReady` (the default) makes pod N+1 only once pod N is Ready: a gang of 1 and a "
                        "`GangStaged` warning"),
)
JOB = WorkloadKind(
    Resource("batch", "v1", "jobs", "Job"), _job_kind_size, _spec_template, _slim_job,
    aliases=("job", "jobs"), scale_path=("spec", "parallelism"), status_fields=_RUN_STATUS,
    doc=KindDoc("`parallelism` capped by the completions still to come (`completions` − `status.succeeded`)"),
)
CRON_JOB = WorkloadKind(
    Resource("batch", "v1", "cronjobs", "CronJob"), _cronjob_size, _cronjob_templates, _slim_cronjob,
    aliases=("cronjob", "cronjobs", "cj"), scale_path=("spec", "jobTemplate", "spec", "parallelism"),
    layout=ONE_PER_RUN, runs=("Job",),
    doc=KindDoc("per Job run (one PodGroup each): its `jobTemplate` sized as a Job"),
)


DAEMON_SET = WorkloadKind(
    Resource("apps", "v1", "daemonsets", "DaemonSet"), _per_node, _spec_template, _slim_template_only,
    aliases=("daemonset", "daemonsets", "ds"), followed=False, gang=False,
    doc=KindDoc("no gang: one pod per node, each placed on its own; in scope, each pod's group is of 1 and a "
                "`podgang.io/min-member` pin is ignored with a warning (not followed: the top owner of its pods)"),
)
