"""A KAI gang's settings, each read where KAI's own pod-grouper reads it: queue,
priority class, preemptibility, preemption delay, topology, the top owner's metadata,
the size annotations (``batch-min-member``) and the segments a role is split into. Apart
from the backend's membership and PodGroups: this is what follows KAI's grouper, version
by version. No I/O.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Mapping, Sequence

import yaml

from podgang.backends.base import GangSource
from podgang.backends.capabilities import GangSettings, Segments
from podgang.backends.kai.keys import (BATCH_MIN_MEMBER, DISABLED_STALENESS, MIN_MEMBER_ANNOTATION, NODE_POOL_LABEL,
                                       PREEMPTIBILITY_LABEL,
                                       PREEMPTIBILITY_VALUES, PREEMPTION_DELAY_ANNOTATION, PRIORITY_LABEL,
                                       SEMI_PREEMPTIBLE,
                                       PROJECT_LABEL, QUEUE_LABEL, RAY_KINDS, RAY_PRIORITY_LABEL,
                                       SEGMENT_PREFERRED_PLACEMENT_ANNOTATION, SEGMENT_REQUIRED_PLACEMENT_ANNOTATION,
                                       SEGMENT_SIZE_ANNOTATION, SKIP_PODGROUPER_ANNOTATION, STALENESS_GRACE_PERIOD,
                                       TOP_OWNER_METADATA_ANNOTATION, USER_KEY,
                                       TOPOLOGY_ANNOTATION, TOPOLOGY_ANNOTATIONS, TOPOLOGY_FIELD,
                                       TOPOLOGY_PREFERRED_PLACEMENT_ANNOTATION, TOPOLOGY_REQUIRED_PLACEMENT_ANNOTATION,
                                       TRAIN)
from podgang.objects import LAST_APPLIED_ANNOTATION, annotations, as_dict, as_list, labels, metadata, quoted, spec

_GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^0$")


class KaiGrouping(Segments, GangSettings):
    """KAI's side of :class:`~podgang.backends.capabilities.GangSettings` and
    :class:`~podgang.backends.capabilities.Segments`; the defaults it falls back on
    (``default_queue``, ``default_priority_classes``) are the backend's."""

    default_queue: str
    #: KAI's own fallbacks per top-owner kind (not checked against the PriorityClasses, as in KAI)
    default_priority_classes: tuple[tuple[str, str], ...]
    #: the user's per-kind defaults (``Kind`` or ``Kind.group``), as KAI's defaults ConfigMap gives
    #: them: a priority class only if it exists, then a preemptibility
    given_priority_classes: tuple[tuple[str, str], ...] = ()
    default_preemptibility: tuple[tuple[str, str], ...] = ()
    queue_field = "queue"
    priority_field = "priorityClassName"
    #: KAI's grouper copies the top owner's labels and annotations onto its PodGroup
    reads_owner_metadata = True

    # -- KAI's own size annotations, read where KAI's grouper reads them

    def size_pin(self, workload: Any) -> tuple[int | None, str]:
        """``kai.scheduler/batch-min-member`` on a batch/v1 Job: KAI's grouper makes it the
        Job's minMember (pkg/podgrouper/.../job/job_grouper.go). On a Deployment (KAI v0.18's
        one PodGroup per Deployment) or a ``Parallel`` StatefulSet, that key or
        ``kai.scheduler/min-member``: which of the two v0.18.0 reads there is not verified,
        so both are, in that order."""
        kind, api_version = as_dict(workload).get("kind"), str(as_dict(workload).get("apiVersion"))
        if kind == "Job" and api_version.startswith("batch/"):
            return _batch_min_member(annotations(workload), f"{_kind_name(workload)}")
        if api_version.startswith("apps/") and (kind == "Deployment" or (
                kind == "StatefulSet" and spec(workload).get("podManagementPolicy") == "Parallel")):
            for key in (BATCH_MIN_MEMBER, MIN_MEMBER_ANNOTATION):
                value, why = _batch_min_member(annotations(workload), f"{_kind_name(workload)}", key)
                if value is not None or why:
                    return value, why
        return None, ""

    def parts_pin(self, workload: Any) -> tuple[int | None, str]:
        """``kai.scheduler/batch-min-member`` on a JobSet: how many of its replicated jobs
        KAI's grouper places it with (its root ``minSubGroup``, at most their number)."""
        if as_dict(workload).get("kind") != "JobSet" or not str(as_dict(workload).get("apiVersion")).startswith(
                "jobset.x-k8s.io/"):
            return None, ""
        return _batch_min_member(annotations(workload), _kind_name(workload))

    def role_pin(self, role: Any) -> tuple[int | None, str]:
        """``kai.scheduler/batch-min-member`` on a JobSet replicated job's Job template: each of
        its Jobs' minimum (KAI v0.16 and later), so the role's is that times its replicas."""
        template = as_dict(getattr(role, "owner_template", None))
        value, why = _batch_min_member(annotations(template), f"replicated job {getattr(role, 'name', '?')}")
        if value is None:
            return None, why
        replicas = max(int(getattr(role, "replicas", 1) or 0), 0)
        return value * replicas, f"{why} × replicas {replicas}"

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
        out["extra_spec"] = {"preemptibility": value if value in (*PREEMPTIBILITY_VALUES, SEMI_PREEMPTIBLE) else None}
        return out

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        """Queue, priority class, preemptibility, preemption delay, topology, the top
        owner's labels and annotations — each read where KAI's pod-grouper reads it,
        in its order — and where each value comes from (``origins``) and what is wrong
        with them (``problems``)."""
        top = source.top_owner if isinstance(source.top_owner, Mapping) else None
        pods = [p for p in source.pod_like if _is_mapping(p)]
        if top is None and len(source.pods) == 1 and not source.templates and _is_mapping(source.pods[0]) \
                and not metadata(source.pods[0]).get("ownerReferences"):
            top = source.pods[0]  # an owner-less pod is its own top owner (KAI's pod grouper)
        owner_less = top is not None and as_dict(top).get("kind", "Pod") == "Pod" and not source.owners
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
        # an invalid value is said and passed over: the next owner's (or the pod's) may be valid, as in KAI
        for value, who in _every([*owners, *pods], "labels", PREEMPTIBILITY_LABEL):
            if value in PREEMPTIBILITY_VALUES:
                extra["preemptibility"] = value
                origins.append(("preemptibility", f"label {PREEMPTIBILITY_LABEL} on {who}"))
                break
            problems.append(f"label {PREEMPTIBILITY_LABEL}={quoted(value)} on {who} is ignored: KAI accepts "
                            f"{' or '.join(PREEMPTIBILITY_VALUES)}")
        else:
            value, key = self._kind_default(self.default_preemptibility, source.top_owner)
            if value in PREEMPTIBILITY_VALUES:
                extra["preemptibility"] = value
                origins.append(("preemptibility", f"the default for a {key} (--default-preemptibility)"))
        for delay, who in _every([*owners, *pods], "annotations", PREEMPTION_DELAY_ANNOTATION):
            if _GO_DURATION.match(delay.strip()):
                extra["preemptionDelay"] = delay.strip()
                origins.append(("preemptionDelay", f"annotation {PREEMPTION_DELAY_ANNOTATION} on {who}"))
                break
            problems.append(f"annotation {PREEMPTION_DELAY_ANNOTATION}={quoted(delay)} on {who} is ignored: "
                            f"not a duration such as 10m")
        if top is not None and as_dict(top).get("kind") == "JobSet":
            count = _batch_min_member(annotations(top), _kind_name(top))
            if count[0] is None and count[1]:
                problems.append(count[1])
        if top is not None:
            topology = {field: value for key, field in TOPOLOGY_ANNOTATIONS
                        if isinstance(value := annotations(top).get(key), str) and value}
            if topology:
                extra[TOPOLOGY_FIELD] = topology
                origins.append((TOPOLOGY_FIELD, f"annotations {', '.join(k for k, f in TOPOLOGY_ANNOTATIONS if f in topology)} "
                                                f"on {_kind_name(top)}"))
            own = self._own_pod_keys()
            options["labels"] = {k: v for k, v in labels(top).items() if isinstance(v, str) and k not in own}
            md = metadata(top)
            api_version = str(top.get("apiVersion") or "")
            group, _, version = api_version.rpartition("/")
            owner = _top_owner_metadata(str(md.get("name") or ""), str(md.get("uid") or ""), group, version,
                                        str(top.get("kind") or ""))
            options["annotations"] = {**({USER_KEY: user} if isinstance(user := next(
                                          (annotations(p).get(USER_KEY) for p in source.pods[:1]), None), str) else {}),
                                      # not while an owner-less pod has no uid (its group is made at its admission)
                                      **({} if owner_less and not md.get("uid") else
                                         {TOP_OWNER_METADATA_ANNOTATION: owner}),
                                      **{k: v for k, v in annotations(top).items()
                                         if isinstance(v, str) and k != LAST_APPLIED_ANNOTATION and k not in own}}
            user = next((labels(p).get(USER_KEY) for p in source.pods[:1]), None)
            if isinstance(user, str) and USER_KEY not in options["labels"]:
                options["labels"][USER_KEY] = user  # the pod's user, when the top owner names none (KAI)
        pool = next((v for p in pods[:1] if isinstance(v := labels(p).get(NODE_POOL_LABEL), str) and v), None)
        if pool is not None and NODE_POOL_LABEL not in (options.get("labels") or {}):
            # KAI's scheduler shards by the group's node pool: the pod's, unless the top owner names one
            options["labels"] = {**(options.get("labels") or {}), NODE_POOL_LABEL: pool}
            origins.append(("nodePool", f"label {NODE_POOL_LABEL}={pool} on the pod"))
        if extra:
            options["extra_spec"] = extra
        options["origins"] = tuple(origins)
        if problems:
            options["problems"] = tuple(problems)
        return options

    def _own_pod_keys(self) -> frozenset[str]:
        """The keys podgang itself writes on the pods it groups: never copied onto their group."""
        return frozenset((getattr(self, "annotation", ""), getattr(self, "label", ""),
                          getattr(self, "subgroup_label", ""), SKIP_PODGROUPER_ANNOTATION))

    peer_grouper = "kai-pod-grouper"

    @property
    def opt_out_annotations(self) -> tuple[str, ...]:
        """The opt-out, and the group annotation that says a Pod owner carrying it is one podgang
        grouped (a Spark driver owning its executors), not one a user opted out."""
        return (SKIP_PODGROUPER_ANNOTATION, getattr(self, "annotation", ""))

    def made_by_peer_grouper(self, podgroup: Any, owner_uid: str) -> bool:
        """KAI's grouper owns each group it makes by the gang's top owner (every version the
        conformance rows cover), and podgang gives most gangs KAI's name for them: a group of
        that name owned by the same top owner, without podgang's label, is KAI's."""
        refs = metadata(podgroup).get("ownerReferences")
        return bool(owner_uid) and isinstance(refs, list) and any(
            isinstance(r, dict) and r.get("uid") == owner_uid for r in refs)

    def opted_out(self, obj: Any, is_pod: bool) -> str | None:
        """``kai.scheduler/skip-podgrouper: "true"`` on a pod or any of its owners: the user
        asked KAI's grouper to leave it alone, so podgang, standing in for it, does too. On a
        pod only while it names no group: podgang writes the same key on the pods it groups."""
        if str(annotations(obj).get(SKIP_PODGROUPER_ANNOTATION, "")).lower() != "true":
            return None
        if (is_pod or as_dict(obj).get("kind") == "Pod") and self.group_of(obj):  # type: ignore[attr-defined]
            return None  # a pod podgang grouped (an owner too: a Spark driver owns its executors)
        return f"annotated {SKIP_PODGROUPER_ANNOTATION}=true"

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
        given, key = self._kind_default(self.given_priority_classes, source.top_owner)
        if given and (exists is None or given in exists):
            return given, f"the default for a {key} (--default-priority-class)"
        kind = str(as_dict(source.top_owner).get("kind") or "Pod")
        value = dict(self.default_priority_classes).get(kind, TRAIN)
        if given:  # KAI passes over a default that names no PriorityClass, to its own fallback
            return value, f"KAI's default for a {kind} (--default-priority-class {key}={given} names no PriorityClass)"
        return value, f"the default for a {kind} (--default-priority-class)"

    @staticmethod
    def _kind_default(defaults: Sequence[tuple[str, str]], top: Any) -> tuple[str | None, str]:
        """A per-kind default for the top owner: ``Kind.group`` first, then ``Kind`` (KAI's order)."""
        if not defaults:
            return None, ""
        kind = str(as_dict(top).get("kind") or "Pod")
        group = str(as_dict(top).get("apiVersion") or "v1").rpartition("/")[0]
        found = dict(defaults)
        for key in ((f"{kind}.{group}", kind) if group else (kind,)):
            if found.get(key):
                return found[key], key
        return None, kind

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


def _batch_min_member(notes: Mapping[str, Any], where: str, key: str = BATCH_MIN_MEMBER) -> tuple[int | None, str]:
    """KAI's size annotation ``key`` in ``notes``: (value, why), (None, problem) or (None, "")."""
    raw = notes.get(key)
    if raw is None:
        return None, ""
    text = str(raw).strip()
    if text.isascii() and text.isdigit() and 1 <= int(text) <= 2**31 - 1:
        return int(text), f"{key} {int(text)} on {where}"
    return None, f"annotation {key}={quoted(raw)} on {where} is ignored: a whole number ≥ 1"


def _kind_name(obj: Any) -> str:
    return f"{str(as_dict(obj).get('kind') or 'object').lower()}/{metadata(obj).get('name') or '?'}"


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # the common case first: an ABC check is slow


def _every(objs: list[Any], section: str, key: str) -> list[tuple[str, str]]:
    """Every non-empty ``key`` in ``metadata.<section>`` of ``objs``, in order, and whose it is."""
    return [(value, _kind_name(obj) if as_dict(obj).get("kind") else "the pod") for obj in objs
            if isinstance(value := as_dict(metadata(obj).get(section)).get(key), str) and value]


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
    """KAI's top-owner-metadata annotation, byte for byte as KAI's grouper writes it: Go's
    yaml.v3 of its struct (pkg/podgrouper/topowner/metadata.go), so the fields in its order and
    a value YAML would read as something else than a string double-quoted (a uid "1").
    Remembered: every reconcile of a gang asks for it again."""
    return "".join(f"{key}: {_yaml_v3_scalar(value)}\n" for key, value in (
        ("name", name), ("uid", uid), ("group", group), ("version", version), ("kind", kind)))


def _yaml_v3_scalar(value: str) -> str:
    plain = bool(value) and value == value.strip() and not value.startswith(_YAML_INDICATORS) \
        and ": " not in value and " #" not in value and "\n" not in value
    if plain:
        try:
            plain = yaml.load(value, Loader=_SAFE_LOADER) == value
        except yaml.YAMLError:
            plain = False
    return value if plain else json.dumps(value, ensure_ascii=False)


_YAML_INDICATORS = tuple("-?:,[]{}#&*!|>'\"%@`")
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
