"""The Spark operator's SparkApplication and SparkConnect: a staged gang, the driver (a
Connect server) until it runs, then the driver and the executors it makes; its pods'
requests worked out as Spark sets them.
Tested in tests/unit/test_kinds_spark.py."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from podgang.kinds.model import KindDoc, Obj, Role, SlimTemplate, Template, WorkloadKind
from podgang.objects import Resource, as_dict, as_int, as_list, labels, spec, status


#: read on a pod: `driver` or `executor` (subgroup) of a SparkApplication
SPARK_ROLE_LABEL = "spark-role"
#: read on a pod Spark made without an operator (spark-submit's driver and executors): with the
#: selector, it marks a Spark pod (KAI's grouper then names its group after the selector)
SPARK_APP_NAME_LABEL = "spark-app-name"
#: read on such a pod: names its group (a driver nothing owns and its executors, which the driver owns)
SPARK_APP_SELECTOR_LABEL = "spark-app-selector"
_SPARK_DRIVER_RUNS = ("RUNNING",)
_SPARK_DONE = ("COMPLETED", "FAILED", "SUBMISSION_FAILED")


def _spark_state(obj: Any) -> str:
    return str(as_dict(status(obj).get("applicationState")).get("state") or "")


_SPARK_CONTAINER = "spark-kubernetes-{part}"  # the container Spark runs in the driver's and executors' pods
_SPARK_MIN_OVERHEAD = 384 * 2**20  # Spark's floor for a pod's memory overhead: 384MiB
_JAVA_MEMORY = re.compile(r"([0-9]+(?:\.[0-9]+)?)([kmgtp]?)b?")


def _spark_template(app_spec: Any, part_name: str) -> Obj:
    """A driver's or executor's pod as a pod template: its own template (if any) with the
    labels, annotations and schedulerName the SparkApplication sets on top, and the Spark
    container's requests as Spark sets them (cores, memory plus its overhead, GPUs)."""
    app_spec = as_dict(app_spec)
    part = as_dict(app_spec.get(part_name))
    base = as_dict(part.get("template"))
    md, pod_spec = as_dict(base.get("metadata")), as_dict(base.get("spec"))
    scheduler = part.get("schedulerName") or pod_spec.get("schedulerName")
    name = _SPARK_CONTAINER.format(part="driver" if part_name == "server" else part_name)  # a Connect server is a driver
    containers = as_list(pod_spec.get("containers"))
    if not any(as_dict(c).get("name") == name for c in containers):  # a template already worked out keeps it
        containers = [{"name": name, "resources": _spark_resources(app_spec, part)},
                      *(c for c in containers if as_dict(c).get("name") != name)]
    return {"metadata": {"labels": {**as_dict(md.get("labels")), **as_dict(part.get("labels"))},
                         "annotations": {**as_dict(md.get("annotations")), **as_dict(part.get("annotations"))}},
            "spec": {**pod_spec, "containers": containers, **({"schedulerName": scheduler} if scheduler else {})}}


def _spark_resources(app_spec: Mapping[str, Any], part: Mapping[str, Any]) -> Obj:
    """The Spark container's resources: ``coreRequest`` else ``cores`` CPUs (1 by default);
    ``memory`` (Java units: ``512m`` is 512MiB; 1g by default) plus ``memoryOverhead``, else
    plus the overhead factor's share of it (0.1 for the JVM, 0.4 for Python and R), at least
    384MiB; ``gpu.quantity`` of ``gpu.name``."""
    cpu = part.get("coreRequest") or str(part.get("cores") or 1)
    memory = _java_bytes(part.get("memory")) or 2**30
    overhead = _java_bytes(part.get("memoryOverhead"))
    if overhead is None:
        conf = as_dict(app_spec.get("sparkConf"))
        factor = (app_spec.get("memoryOverheadFactor") or conf.get("spark.kubernetes.memoryOverheadFactor")
                  or ("0.1" if app_spec.get("type") in ("Java", "Scala") else "0.4"))
        try:
            overhead = max(int(memory * float(factor)), _SPARK_MIN_OVERHEAD)
        except (ValueError, OverflowError):  # not a number, or none a pod could hold
            overhead = _SPARK_MIN_OVERHEAD
    out: Obj = {"requests": {"cpu": str(cpu), "memory": str(memory + overhead)}}
    gpu = as_dict(part.get("gpu"))
    if isinstance(gpu.get("name"), str) and as_int(gpu.get("quantity"), 0) > 0:
        out["limits"] = {gpu["name"]: str(as_int(gpu.get("quantity"), 0))}
    return out


def _java_bytes(text: Any) -> int | None:
    """A JVM memory size (``512m``, ``1.5g``, ``1024``: bytes) in bytes, None when it is not one."""
    found = _JAVA_MEMORY.fullmatch(str(text).strip().lower()) if text is not None else None
    if found is None:
        return None
    try:
        return int(float(found.group(1)) * 1024 ** "bkmgtp".index(found.group(2) or "b"))
    except OverflowError:  # more digits than any memory
        return None


def _spark_own_gang(obj: Any) -> tuple[str, str] | None:
    """``spec.batchScheduler``: spark-operator (run with batch scheduling on) makes the
    application's PodGroup itself — Volcano's ``spark-<name>-pg`` named on the driver and
    executors, or for a scheduler-plugins scheduler ``<name>-pg`` labelled on them (YuniKorn
    takes task groups, no PodGroup)."""
    scheduler = spec(obj).get("batchScheduler")
    name = str(as_dict(as_dict(obj).get("metadata")).get("name") or "")
    if not isinstance(scheduler, str) or not scheduler:
        return None
    group = f"spark-{name}-pg" if scheduler == "volcano" else f"{name}-pg"
    if scheduler == "yunikorn":
        return "", "spec.batchScheduler yunikorn: spark-operator gives YuniKorn the application's task groups"
    return group, (f"spec.batchScheduler {scheduler}: spark-operator makes PodGroup {group} and names it on the "
                   f"driver and executors")


def _spark_executors(obj: Any) -> tuple[int, str]:
    """``executor.instances`` (1 by default), or ``dynamicAllocation.minExecutors`` when on."""
    dynamic = as_dict(spec(obj).get("dynamicAllocation"))
    if dynamic.get("enabled") is True:
        count = max(as_int(dynamic.get("minExecutors"), 0), 0)
        return count, f"dynamicAllocation.minExecutors {count}"
    count = max(as_int(as_dict(spec(obj).get("executor")).get("instances"), 1), 0)
    return count, f"executor.instances {count}"


@dataclass(frozen=True)
class _Staged:
    """A Spark gang in two stages: its driver (an application's driver, a Connect server),
    then, once spark-operator reports the driver running, the driver and the executors it
    makes (a gang that counted them from the start would wait for ever for pods that come only
    after it runs)."""

    part: str  # the spec field of the driver's part
    role: str  # its subgroup, as its pods' spark-role label says
    word: str  # what it is called: driver, server
    runs: Callable[[Any], bool]  # spark-operator reports it running
    until: str  # when, in words: "runs", "is Ready"

    def whole(self, obj: Any) -> list[Role]:
        """The driver and its executors: the whole run."""
        count, why = _spark_executors(obj)
        parts = [Role(self.role, 1, f"the {self.word}", _spark_template(spec(obj), self.part), f"spec.{self.part}"),
                 Role("executor", count, why, _spark_template(spec(obj), "executor"), "spec.executor")]
        return [r for r in parts if r.size > 0]

    def roles(self, obj: Any) -> list[Role]:
        return self.whole(obj) if self.runs(obj) else self.whole(obj)[:1]

    def size(self, obj: Any) -> tuple[int, str]:
        parts = self.roles(obj)
        listed = " + ".join(f"{r.name} {r.size}" for r in parts)
        if not self.runs(obj):
            listed += (f"; the executors ({_spark_executors(obj)[1]}) join once the {self.word} {self.until}: the "
                       f"{self.word} makes them")
        return sum(r.size for r in parts), listed

    def templates(self, obj: Any) -> list[tuple[str, Template]]:
        return [(f"spec.{part}", _spark_template(spec(obj), part)) for part in (self.part, "executor")]

    def slim(self, s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
        s = as_dict(s)
        out: Obj = {part: {"template": slim_template(_spark_template(s, part))} for part in (self.part, "executor")}
        if "instances" in as_dict(s.get("executor")):
            out["executor"]["instances"] = as_dict(s.get("executor"))["instances"]
        dynamic = as_dict(s.get("dynamicAllocation"))
        if dynamic:
            out["dynamicAllocation"] = {k: dynamic[k] for k in ("enabled", "minExecutors") if k in dynamic}
        for key in ("suspend", "batchScheduler"):
            if key in s:
                out[key] = s[key]
        return out


_APPLICATION = _Staged("driver", "driver", "driver", lambda obj: _spark_state(obj) in _SPARK_DRIVER_RUNS, "runs")
_CONNECT = _Staged("server", "connect-server", "server",
                   lambda obj: str(status(obj).get("state") or "") == "Ready", "is Ready")


#: a staged gang: the driver, then (once spark-operator says it runs) the driver and the
#: executors it makes, which Spark owns by the driver pod
SPARK_APPLICATION = WorkloadKind(
    Resource("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication", optional=True),
    _APPLICATION.size, _APPLICATION.templates, _APPLICATION.slim,
    aliases=("sparkapplication", "sparkapplications", "sparkapp"), scale_path=("spec", "executor", "instances"),
    status_fields=("applicationState",), roles=_APPLICATION.roles, role_labels=(SPARK_ROLE_LABEL,),
    whole_roles=_APPLICATION.whole,
    finished=lambda obj: _spark_state(obj) in _SPARK_DONE, own_gang=_spark_own_gang,
    doc=KindDoc("the driver + `executor.instances` (or `dynamicAllocation.minExecutors`)",
                roles="`driver`, `executor` (label `spark-role`), once the executors are counted",
                staging="the driver (1) until spark-operator reports the application `RUNNING`; the executors are "
                        "owned by the driver pod, which podgang follows to the application"),
)


#: a long-running Spark Connect server and its executors: staged as an application is, the
#: server until spark-operator reports it Ready, then the server and the executors it makes
#: (owned by the server pod, which podgang follows to the SparkConnect)
SPARK_CONNECT = WorkloadKind(
    Resource("sparkoperator.k8s.io", "v1alpha1", "sparkconnects", "SparkConnect", optional=True),
    _CONNECT.size, _CONNECT.templates, _CONNECT.slim, aliases=("sparkconnect", "sparkconnects", "sparkconn"),
    scale_path=("spec", "executor", "instances"), status_fields=("state",), roles=_CONNECT.roles,
    role_labels=(SPARK_ROLE_LABEL,), whole_roles=_CONNECT.whole, finished=lambda obj: False,
    doc=KindDoc("the server + `executor.instances` (or `dynamicAllocation.minExecutors`)",
                roles="`connect-server`, `executor` (label `spark-role`), once the executors are counted",
                staging="the server (1) until spark-operator reports the SparkConnect `Ready`; the executors are "
                        "made by the server and owned by its pod, which podgang follows to the SparkConnect"),
)


def spark_app_group(pod: Any) -> str | None:
    """The group KAI's grouper gives a Spark pod run without an operator (a driver nothing owns,
    its executors owned by the driver pod): its ``spark-app-selector``, when it also carries
    ``spark-app-name`` (KAI's podjob and spark plugins); None for any other pod."""
    found = labels(pod)
    selector = found.get(SPARK_APP_SELECTOR_LABEL)
    if isinstance(selector, str) and selector and isinstance(found.get(SPARK_APP_NAME_LABEL), str):
        return selector
    return None
