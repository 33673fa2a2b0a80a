"""JobSet: a subgroup per replicated job, each Job of several pods a replica counted
whole, replicated jobs joining in the order ``dependsOn`` and ``startupPolicy`` make them.
The JobSet the Trainer makes for a TrainJob is one of these (its own gang, when its
runtime has a ``podGroupPolicy``, is said here; :mod:`podgang.kinds.trainjob` builds it).
Tested in tests/unit/test_kinds_trainjob.py and test_replica_tree.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang.backends.coscheduling import GROUP_LABEL as COSCHEDULING_GROUP_LABEL
from podgang.backends.volcano import GROUP_ANNOTATION as VOLCANO_GROUP_ANNOTATION
from podgang.kinds.model import (_RUN_STATUS, KindDoc, Obj, Role, SlimTemplate, Template, WorkloadKind, _only_part,
                                 _slim_job, job_size)
from podgang import rollouts
from podgang.objects import EMPTY, Resource, as_dict, as_int, as_list, labels, metadata, spec, status


#: read on a pod: its replicated job (subgroup) in a JobSet
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
#: read on a pod: the index of its Job in its replicated job (a replica's leaf under its role)
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


#: read on a pod: its JobSet (set by the JobSet controller)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
#: read on a pod: the restart attempt its Jobs were made for (the JobSet's `status.restarts` then)
JOBSET_RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
#: the condition the JobSet controller sets True when its failure policy restarts the JobSet
#: (every Job deleted and made again) and False once every new Job is Ready
JOBSET_RESTARTING = "RestartingJobSet"


def _jobset_restart_attempt(pod: Any) -> int | None:
    value = labels(pod).get(JOBSET_RESTART_ATTEMPT_LABEL)
    return int(value) if isinstance(value, str) and value.isdigit() and len(value) <= 9 else None


def _jobset_replaced(obj: Any, pod: Any) -> str | None:
    """A pod of a restart attempt before the JobSet's ``status.restarts``: its failure policy
    restarted the JobSet, and its controller deletes the old attempt's Jobs and makes new
    ones — the operator's own recovery; the gang is the new attempt's pods
    (tests/real/test_real_operators.py)."""
    name = metadata(obj).get("name")
    restarts = status(obj).get("restarts")
    attempt = _jobset_restart_attempt(pod)
    if (not name or labels(pod).get(JOBSET_NAME_LABEL) != name or attempt is None
            or not isinstance(restarts, int) or isinstance(restarts, bool) or attempt >= restarts):
        return None
    return f"jobset {name} restarted (attempt {restarts}): its controller replaces the pods of attempt {attempt}"


def _jobset_rollout(obj: Any, seen: rollouts.WorkloadPods = rollouts.NO_PODS) -> str | None:
    """A JobSet its failure policy is restarting: ``RestartingJobSet`` True until every Job of
    the new attempt is Ready."""
    found = rollouts.condition(obj, JOBSET_RESTARTING)
    if found is None or found.get("status") != "True":
        return None
    restarts = status(obj).get("restarts")
    attempt = f"attempt {restarts}, " if isinstance(restarts, int) and not isinstance(restarts, bool) else ""
    return (f"jobset {metadata(obj).get('name') or '?'} is restarting ({attempt}{JOBSET_RESTARTING}: "
            f"{found.get('reason') or '?'}): its controller makes its Jobs again")

#: a replicated job's Job's leaf under its replicated job: ``<replicated job>-replica-<job index>`` (KAI's name)
JOBSET_LEAF_INFIX = "replica"

#: JobSet's startupPolicy that makes each replicated job only once the one before is Ready
JOBSET_IN_ORDER = "InOrder"


def _jobset_stages(obj: Any) -> list[tuple[Mapping[str, Any], int, str, str | None]]:
    """Each replicated job, its pods (replicas × its Job's size), why that size, and why it
    is not counted now (None: counted). A replicated job that ``dependsOn`` another is made
    only once that one is Ready or Complete (Trainer v2's initializers, then its nodes): it
    joins the gang then; one that others wait to see Complete leaves it once complete. Under
    ``startupPolicy: InOrder`` each replicated job is made only once the one before it is
    Ready, as if it depended on it."""
    rjobs = [as_dict(r) for r in as_list(spec(obj).get("replicatedJobs"))]
    if as_dict(spec(obj).get("startupPolicy")).get("startupPolicyOrder") == JOBSET_IN_ORDER:
        rjobs = [r if i == 0 or r.get("dependsOn") else
                 {**r, "dependsOn": [{"name": rjobs[i - 1].get("name"), "status": "Ready"}]}
                 for i, r in enumerate(rjobs)]
    replicas_of = {str(r.get("name", "?")): max(as_int(r.get("replicas"), 1), 0) for r in rjobs}
    progress = {str(as_dict(st).get("name")): as_dict(st) for st in as_list(status(obj).get("replicatedJobsStatus"))}

    def reached(name: str, wanted: str) -> bool:
        st = progress.get(name, EMPTY)
        done = as_int(st.get("succeeded"), 0)
        if wanted == "Ready":
            done += as_int(st.get("ready"), 0)
        return replicas_of.get(name, 0) > 0 and done >= replicas_of.get(name, 0)

    awaited = {str(as_dict(d).get("name")) for r in rjobs for d in as_list(r.get("dependsOn"))
               if as_dict(d).get("status") == "Complete"}
    out = []
    for rjob in rjobs:
        name = str(rjob.get("name", "?"))
        size, why = job_size(as_dict(as_dict(rjob.get("template")).get("spec")))
        unmet = [as_dict(d) for d in as_list(rjob.get("dependsOn"))
                 if not reached(str(as_dict(d).get("name")), str(as_dict(d).get("status")))]
        left_out = None
        if unmet:
            left_out = f"{name} is made once {unmet[0].get('name')} is {unmet[0].get('status')}"
        elif name in awaited and reached(name, "Complete"):
            left_out = f"{name} is complete"
        out.append((rjob, replicas_of[name] * size, f"{replicas_of[name]} × {why}", left_out))
    return out


def _jobset_size(obj: Any) -> tuple[int, str]:
    total, parts, later = 0, [], []
    for rjob, size, _why, left_out in _jobset_stages(obj):
        if left_out:
            later.append(left_out)
            continue
        replicas = max(as_int(rjob.get("replicas"), 1), 0)
        total += size
        parts.append(f"{rjob.get('name', '?')} {replicas}×{size // replicas if replicas else 0}")
    return total, "replicatedJobs " + (" + ".join(parts) if parts else "none") + "".join(f"; {w}" for w in later)


def _jobset_templates(obj: Any) -> list[tuple[str, Template]]:
    out: list[tuple[str, Template]] = []
    for i, rjob in enumerate(as_list(spec(obj).get("replicatedJobs"))):
        job_spec = as_dict(as_dict(as_dict(rjob).get("template")).get("spec"))
        out.append((f"spec.replicatedJobs[{i}].template.spec.template", as_dict(job_spec.get("template"))))
    return out


def _slim_jobset(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    out: Obj = {k: s[k] for k in ("suspend", "startupPolicy") if k in s}
    out["replicatedJobs"] = [
        {
            "name": as_dict(r).get("name"),
            "replicas": as_dict(r).get("replicas", 1),
            **({"dependsOn": as_dict(r)["dependsOn"]} if "dependsOn" in as_dict(r) else {}),
            "template": {**_slim_metadata(as_dict(as_dict(r).get("template")), slim_template),
                         "spec": _slim_job(as_dict(as_dict(as_dict(r).get("template")).get("spec")), slim_template)},
        }
        for r in as_list(s.get("replicatedJobs")) if isinstance(r, Mapping)
    ]
    return out


def _slim_metadata(template: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    """The metadata of an object template (a replicated job's Job template) a pod template's
    would keep: the keys a backend reads there (a scheduler's own size annotation)."""
    kept = as_dict(slim_template({"metadata": as_dict(template.get("metadata"))}).get("metadata"))
    return {"metadata": kept} if kept else {}


def _jobset_roles(obj: Any) -> list[Role]:
    out = []
    for i, (rjob, size, why, left_out) in enumerate(_jobset_stages(obj)):
        if left_out is None and size > 0:
            job_spec = as_dict(as_dict(rjob.get("template")).get("spec"))
            replicas = max(as_int(rjob.get("replicas"), 1), 1)
            each = size // replicas
            # several Jobs of several pods each: each Job a replica, counted whole (as KAI's own
            # JobSet grouper makes a leaf per Job); one Job, or Jobs of one pod: its pods
            out.append(Role(str(rjob.get("name", "?")), size, why, as_dict(job_spec.get("template")),
                            f"spec.replicatedJobs[{i}].template.spec.template",
                            max(as_int(rjob.get("replicas"), 1), 0), as_dict(rjob.get("template")),
                            per_replica=each if replicas >= 2 and each >= 2 else None))
    return out


#: the Trainer's podGroupPolicy: the pod key it names the TrainJob's own PodGroup with, by scheduler
_TRAINER_POD_GROUP_KEYS = {"coscheduling": ("labels", COSCHEDULING_GROUP_LABEL),
                           "volcano": ("annotations", VOLCANO_GROUP_ANNOTATION)}


def _trainer_own_gang(obj: Any) -> tuple[str, str] | None:
    """A JobSet the Trainer made for a TrainJob whose runtime has a ``podGroupPolicy``: its pod
    templates name the PodGroup the Trainer makes itself, named after the TrainJob."""
    owner = next((as_dict(r) for r in as_list(as_dict(as_dict(obj).get("metadata")).get("ownerReferences"))
                  if as_dict(r).get("kind") == "TrainJob" and as_dict(r).get("controller") is True), None)
    name = owner.get("name") if owner is not None else None
    if not isinstance(name, str) or not name:
        return None
    for _, template in _jobset_templates(obj):
        md = as_dict(template.get("metadata"))
        for policy, (section, key) in _TRAINER_POD_GROUP_KEYS.items():
            if as_dict(md.get(section)).get(key) == name:
                return name, (f"the TrainJob's runtime podGroupPolicy {policy}: the Trainer makes PodGroup {name} "
                              f"itself and names it on the TrainJob's pods")
    return None


JOB_SET = WorkloadKind(
    Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", optional=True),
    _jobset_size, _jobset_templates, _slim_jobset, aliases=("jobset", "jobsets"),
    scale_parts=lambda obj: {str(as_dict(r).get("name", "")).lower(): ("spec", "replicatedJobs", i, "replicas")
                             for i, r in enumerate(as_list(spec(obj).get("replicatedJobs")))},
    scale_parts_doc="spec.replicatedJobs[<i>].replicas",
    default_scale_part=lambda obj: _only_part(JOB_SET, obj),
    status_fields=(*_RUN_STATUS, "replicatedJobsStatus", "restarts"), own_gang=_trainer_own_gang,
    kept_conditions=(JOBSET_RESTARTING,), rolling_out=_jobset_rollout, replaced=_jobset_replaced,
    replaced_labels=(JOBSET_NAME_LABEL, JOBSET_RESTART_ATTEMPT_LABEL),
    roles=_jobset_roles, role_labels=(JOBSET_REPLICATED_JOB_LABEL,), role_replica_label=JOBSET_JOB_INDEX_LABEL,
    role_leaf_infix=JOBSET_LEAF_INFIX,
    doc=KindDoc("Σ `replicas × min(parallelism, completions)` over the replicated jobs made now",
                roles="one per replicated job (label `jobset.sigs.k8s.io/replicatedjob-name`)",
                staging="a replicated job that `dependsOn` another (Trainer's nodes after its initializers) joins "
                        "once that one is Ready or Complete, one "
                        "others wait to see Complete leaves once it is; under `startupPolicy: InOrder` each joins "
                        "once the one before it is Ready"),
)
