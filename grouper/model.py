"""The grouper's in-memory state: slim copies of the objects it watches, and the
indexes that turn "this object changed" into "these PodGroups need a look".

Objects are kept as plain dicts in the shape the API serves them (so the pure
rules in :mod:`podgang.rules` read them unchanged) but pruned to the few fields
the grouper needs: a pod costs a few hundred bytes, not the tens of kilobytes of
a full PodSpec. No I/O here.

Keys: objects by ``"namespace/name"``; groups by ``"namespace/group"``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from podgang import rules
from podgang.dialect import OwnerRef
from podgang.kinds import OWNER_KINDS, WORKLOAD_KINDS, Resource
from podgang.settings import DEFAULT, Settings

Obj = dict[str, Any]

_intern = sys.intern

_REF_FIELDS = ("apiVersion", "kind", "name", "uid", "controller")  # what the grouper reads of an ownerReference
_MAX_SHARED = 100_000
_ABSENT = object()  # an ownerReference field that is not there (unlike one that is null)

# Job / JobSet conditions that mean "this run is over".
_FINISHED_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget", "Completed"})


def key_of(namespace: str, name: str) -> str:
    return f"{namespace}/{name}"


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


def obj_key(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    return key_of(md.get("namespace") or "", md.get("name") or "")


def _d(value: Any) -> Mapping[str, Any]:
    if type(value) is dict:  # what orjson gives: skip the slow ABC check of typing.Mapping
        return value
    return value if isinstance(value, Mapping) else {}


def _pick(source: Any, keys: Iterable[str]) -> dict[str, str]:
    src = _d(source)
    return {k: src[k] for k in keys if isinstance(src.get(k), str)}


def resource_version(obj: Mapping[str, Any] | None) -> str:
    return str(_d(_d(obj).get("metadata")).get("resourceVersion") or "")


def is_newer(candidate: str, current: str) -> bool:
    """Whether resourceVersion ``candidate`` is newer than ``current``.

    resourceVersions are opaque, but every real apiserver serves etcd revisions
    (integers); when both are integers compare them, otherwise any change counts.
    """
    if not current:
        return True
    if candidate.isdigit() and current.isdigit():
        return int(candidate) > int(current)
    return candidate != current


# ---------------------------------------------------------------------------
# pruning: keep only what the grouper reads


class Slimmer:
    """Prunes API objects to the fields the grouper needs, per kind."""

    def __init__(self, settings: Settings = DEFAULT):
        d = settings.dialect
        self.settings = settings
        self.pod_labels = (settings.skip_label, d.pod_group_label, d.subgroup_label,
                           rules.LWS_GROUP_INDEX_LABEL, rules.LWS_NAME_LABEL)
        self.pod_annotations = (d.pod_group_annotation, settings.min_member_annotation,
                                settings.grace_period_annotation)
        self.object_labels = (settings.skip_label, settings.managed_by_label)
        self.object_annotations = (settings.min_member_annotation, settings.grace_period_annotation)
        self.template_labels = (settings.skip_label, d.pod_group_label, d.subgroup_label)
        self.template_annotations = (d.pod_group_annotation,)
        self._shared: dict[tuple, Obj] = {}  # read-only parts many objects have in common: see _share

    def _metadata(self, md: Mapping[str, Any], labels: tuple[str, ...], annotations: tuple[str, ...]) -> Obj:
        out: Obj = {
            "name": md.get("name"),
            "namespace": _intern(md.get("namespace") or ""),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
        }
        for k in ("generation", "creationTimestamp", "deletionTimestamp"):
            if md.get(k) is not None:
                out[k] = md[k]
        picked = _pick(md.get("labels"), labels)
        if picked:
            out["labels"] = self._share(picked)
        picked = _pick(md.get("annotations"), annotations)
        if picked:
            out["annotations"] = self._share(picked)
        refs = [self._owner_ref(r) for r in md.get("ownerReferences") or () if isinstance(r, Mapping)]
        if refs:
            out["ownerReferences"] = refs
        return out

    def _owner_ref(self, ref: Mapping[str, Any]) -> Obj:
        """One slim owner reference, shared by every object naming the same owner the
        same way (the pods of one ReplicaSet): building one is a dict lookup."""
        key = (_ABSENT, *(ref.get(k, _ABSENT) for k in _REF_FIELDS))  # _ABSENT first: not a _share key
        try:
            shared = self._shared.get(key)
        except TypeError:  # a value the API would not serve (a list for a name): keep it unshared
            return {k: ref[k] for k in _REF_FIELDS if k in ref}
        if shared is None:
            shared = self._remember(key, {
                k: (_intern(ref[k]) if k in ("apiVersion", "kind") and isinstance(ref[k], str) else ref[k])
                for k in _REF_FIELDS if k in ref
            })
        return shared

    def _share(self, value: Obj) -> Obj:
        """An equal dict seen before, else ``value`` (a flat dict of strings). The ten
        pods of a gang then hold one labels dict, one spec and one status between them:
        a slim pod goes from about 2 KB to about 1.2 KB. Shared parts are read-only, as
        everything in the cache is."""
        key = tuple(value.items())
        shared = self._shared.get(key)
        return shared if shared is not None else self._remember(key, value)

    def _remember(self, key: tuple, value: Obj) -> Obj:
        if len(self._shared) >= _MAX_SHARED:
            self._shared.clear()  # owners and groups come and go: start over rather than grow
        self._shared[key] = value
        return value

    def _template(self, template: Any) -> Obj:
        t = _d(template)
        md = _d(t.get("metadata"))
        meta: Obj = {}
        picked = _pick(md.get("labels"), self.template_labels)
        if picked:
            meta["labels"] = picked
        picked = _pick(md.get("annotations"), self.template_annotations)
        if picked:
            meta["annotations"] = picked
        spec: Obj = {}
        scheduler = _d(t.get("spec")).get("schedulerName")
        if isinstance(scheduler, str):
            spec["schedulerName"] = _intern(scheduler)
        return {"metadata": meta, "spec": spec}

    @staticmethod
    def _job_spec(spec: Any, slim_template) -> Obj:
        s = _d(spec)
        out: Obj = {k: s[k] for k in ("parallelism", "completions", "suspend") if k in s}
        if "template" in s:
            out["template"] = slim_template(s.get("template"))
        return out

    def pod(self, raw: Mapping[str, Any]) -> Obj | None:
        md = _d(raw.get("metadata"))
        spec = _d(raw.get("spec"))
        status = _d(raw.get("status"))
        out_spec: Obj = {}
        if isinstance(spec.get("schedulerName"), str):
            out_spec["schedulerName"] = _intern(spec["schedulerName"])
        if spec.get("nodeName"):
            out_spec["nodeName"] = _intern(str(spec["nodeName"]))
        meta = self._metadata(md, self.pod_labels, self.pod_annotations)
        if isinstance(md.get("generateName"), str) and md["generateName"]:
            meta["generateName"] = md["generateName"]  # how the webhook named an owner-less pod's group
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": self._share(out_spec),
            "status": self._share({"phase": _intern(str(status.get("phase") or "Pending"))}),
        }

    def podgroup(self, raw: Mapping[str, Any]) -> Obj | None:
        d = self.settings.dialect
        md = _d(raw.get("metadata"))
        spec = _d(raw.get("spec"))
        out_spec: Obj = {}
        if d.min_member_field in spec:
            out_spec[d.min_member_field] = spec[d.min_member_field]
        return {
            "apiVersion": raw.get("apiVersion") or d.api_version,
            "kind": raw.get("kind") or d.kind,
            "metadata": self._metadata(md, self.object_labels, self.object_annotations),
            "spec": out_spec,
        }

    def workload(self, raw: Mapping[str, Any], kind: str | None = None) -> Obj | None:
        kind = raw.get("kind") or kind
        md = _d(raw.get("metadata"))
        spec = _d(raw.get("spec"))
        status = _d(raw.get("status"))
        out_spec: Obj = {}
        if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
            if "replicas" in spec:
                out_spec["replicas"] = spec["replicas"]
            out_spec["template"] = self._template(spec.get("template"))
        elif kind == "Job":
            out_spec = self._job_spec(spec, self._template)
        elif kind == "CronJob":
            job_template = _d(spec.get("jobTemplate"))
            out_spec["jobTemplate"] = {"spec": self._job_spec(job_template.get("spec"), self._template)}
        elif kind == "LeaderWorkerSet":
            if "replicas" in spec:
                out_spec["replicas"] = spec["replicas"]
            lwt = _d(spec.get("leaderWorkerTemplate"))
            slim_lwt: Obj = {}
            if "size" in lwt:
                slim_lwt["size"] = lwt["size"]
            for k in ("leaderTemplate", "workerTemplate"):
                if k in lwt:
                    slim_lwt[k] = self._template(lwt.get(k))
            out_spec["leaderWorkerTemplate"] = slim_lwt
        elif kind == "JobSet":
            if "suspend" in spec:
                out_spec["suspend"] = spec["suspend"]
            out_spec["replicatedJobs"] = [
                {
                    "name": _d(r).get("name"),
                    "replicas": _d(r).get("replicas", 1),
                    "template": {"spec": self._job_spec(_d(_d(r).get("template")).get("spec"), self._template)},
                }
                for r in spec.get("replicatedJobs") or () if isinstance(r, Mapping)
            ]
        elif "template" in spec:
            out_spec["template"] = self._template(spec.get("template"))
        out_status: Obj = {
            k: status[k]
            for k in ("observedGeneration", "replicas", "updatedReplicas", "currentRevision",
                      "updateRevision", "completionTime", "active", "succeeded")
            if k in status
        }
        finished = [
            _d(c).get("type") for c in status.get("conditions") or ()
            if _d(c).get("type") in _FINISHED_CONDITIONS and _d(c).get("status") == "True"
        ]
        if finished:
            out_status["conditions"] = [{"type": t, "status": "True"} for t in finished]
        return {
            "apiVersion": raw.get("apiVersion"),
            "kind": kind,
            "metadata": self._metadata(md, self.object_labels, self.object_annotations),
            "spec": out_spec,
            "status": out_status,
        }


# ---------------------------------------------------------------------------
# facts about one cached workload


def workload_ref(workload: Mapping[str, Any]) -> OwnerRef:
    md = _d(workload.get("metadata"))
    return OwnerRef(
        api_version=str(workload.get("apiVersion") or ""),
        kind=str(workload.get("kind") or ""),
        name=str(md.get("name") or ""),
        uid=str(md.get("uid") or ""),
        controller=True,
    )


def pod_ref(pod: Mapping[str, Any]) -> OwnerRef:
    md = _d(pod.get("metadata"))
    return OwnerRef("v1", "Pod", str(md.get("name") or ""), str(md.get("uid") or ""), controller=False)


def is_finished(workload: Mapping[str, Any]) -> bool:
    """A Job or JobSet run that is over (it wants no pods any more)."""
    status = _d(workload.get("status"))
    if status.get("completionTime"):
        return True
    return any(_d(c).get("type") in _FINISHED_CONDITIONS for c in status.get("conditions") or ())


def template_in_scope(workload: Mapping[str, Any], settings: Settings) -> bool:
    """Whether the pods a workload makes would be in podgang's scope."""
    if rules.is_skipped(workload, settings):
        return False
    namespace = _d(workload.get("metadata")).get("namespace") or ""
    if namespace in settings.excluded_namespaces:
        return False
    return any(
        rules.scope_problem(template, namespace, settings) is None
        for _, template in rules.pod_templates(workload)
    )


def rolling_out(workload: Mapping[str, Any]) -> str | None:
    """Why a workload is rolling out right now (its controller replaces pods on
    purpose), or None. Deployment/StatefulSet/ReplicaSet/LeaderWorkerSet:
    ``status.observedGeneration < metadata.generation``, updated replicas below
    the desired count, or (StatefulSet) ``currentRevision != updateRevision``."""
    kind = workload.get("kind")
    if kind not in ("Deployment", "StatefulSet", "ReplicaSet", "LeaderWorkerSet"):
        return None
    md = _d(workload.get("metadata"))
    status = _d(workload.get("status"))
    spec = _d(workload.get("spec"))
    generation = md.get("generation")
    observed = status.get("observedGeneration")
    if isinstance(generation, int) and (not isinstance(observed, int) or observed < generation):
        return f"{kind.lower()} {md.get('name')}: observedGeneration {observed} < generation {generation}"
    if kind != "ReplicaSet":
        replicas = spec.get("replicas", 1)
        updated = status.get("updatedReplicas") or 0
        if isinstance(replicas, int) and updated < replicas:
            return f"{kind.lower()} {md.get('name')}: {updated} of {replicas} replicas updated"
    if kind == "StatefulSet":
        current, update = status.get("currentRevision"), status.get("updateRevision")
        if current and update and current != update:
            return f"statefulset {md.get('name')}: revision {current} → {update}"
    return None


def needs_backfill(pod: Mapping[str, Any], settings: Settings) -> bool:
    """Whether a pod lacks a key of its membership (the label only where the group
    name fits in one: :func:`podgang.rules.membership_keys`)."""
    md = _d(pod.get("metadata"))
    named = _d(md.get("annotations")).get(settings.dialect.pod_group_annotation)
    if named is None:
        return True
    return any(_d(md.get(section)).get(key) is None for section, key in rules.membership_keys(str(named), settings))


def display_name(obj: Mapping[str, Any]) -> str:
    """``deployment model-1`` (for messages such as ``deployment model-1 scaled 1 → 2``)."""
    return f"{str(obj.get('kind') or 'object').lower()} {_d(obj.get('metadata')).get('name') or '?'}"


# ---------------------------------------------------------------------------
# the cache


@dataclass
class Changes:
    """What a change to the cache means for the work queue."""

    groups: set[str] = field(default_factory=set)  # "ns/group" keys to reconcile
    pods: set[str] = field(default_factory=set)  # "ns/pod" keys to backfill
    urgent: bool = False  # a workload or PodGroup changed: react at once


class Cache:
    """Slim objects by kind plus the indexes the reconciler needs.

    The informers write into :attr:`stores` and then call :meth:`apply` with the
    old and new version; :meth:`apply` keeps the indexes in step and says which
    groups and pods need a look.
    """

    def __init__(self, settings: Settings = DEFAULT):
        self.settings = settings
        self.slim = Slimmer(settings)
        self.pods: dict[str, Obj] = {}
        self.podgroups: dict[str, Obj] = {}
        self.workloads: dict[str, dict[str, Obj]] = {r.kind: {} for r in WORKLOAD_KINDS}
        # indexes
        self.by_uid: dict[str, Obj] = {}  # pods and workloads, for owner walks
        self.pods_by_group: dict[str, set[str]] = {}  # group key -> pod keys
        self.pods_by_owner: dict[str, set[str]] = {}  # owner uid -> pod keys
        self.unlabelled: set[str] = set()  # pod keys without membership (backfill)
        self.template_refs: dict[str, set[tuple[str, str]]] = {}  # group key -> {(kind, key)} naming it
        self.owned_group: dict[tuple[str, str], str] = {}  # (kind, key) -> group key it owns
        self.group_owner: dict[str, tuple[str, str]] = {}  # group key -> (kind, key)
        self.workload_children: dict[str, set[tuple[str, str]]] = {}  # owner uid -> {(kind, key)}
        self.watched_kinds: set[str] = {r.kind for r in WORKLOAD_KINDS if not r.optional}

    # -- stores

    def store_for(self, kind: str) -> dict[str, Obj]:
        if kind == "Pod":
            return self.pods
        if kind == self.settings.dialect.kind:
            return self.podgroups
        return self.workloads[kind]

    def slimmer_for(self, kind: str):
        if kind == "Pod":
            return self.slim.pod
        if kind == self.settings.dialect.kind:
            return self.slim.podgroup
        return lambda raw: self.slim.workload(raw, kind)

    def keep(self, kind: str, obj: Mapping[str, Any]) -> bool:
        """Whether an object belongs in the cache at all (scope, excluded namespaces)."""
        namespace = _d(obj.get("metadata")).get("namespace") or ""
        if namespace in self.settings.excluded_namespaces:
            return False
        if kind == "Pod":
            return rules.scope_problem(obj, namespace, self.settings) is None
        return True

    def set_watched(self, kind: str, watched: bool) -> None:
        """Record whether a workload kind is being watched (optional CRDs may be absent)."""
        if watched:
            self.watched_kinds.add(kind)
        else:
            self.watched_kinds.discard(kind)

    def workload(self, kind: str, key: str) -> Obj | None:
        store = self.workloads.get(kind)
        return store.get(key) if store is not None else None

    # -- index maintenance

    def group_key_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        name = rules.group_of(pod, self.settings)
        if not name:
            return None
        return key_of(_d(pod.get("metadata")).get("namespace") or "", name)

    def owned_group_name(self, workload: Mapping[str, Any]) -> str | None:
        """The PodGroup a workload owns itself (it is a top owner, its pods are in
        scope and its templates name no hand-made group), else None."""
        kind = workload.get("kind")
        if kind in ("CronJob", "LeaderWorkerSet"):
            return None  # one group per Job run / per LWS group: found through the pods
        if _d(workload.get("metadata")).get("deletionTimestamp"):
            return None
        if rules.next_owner(workload) is not None:
            return None
        if not template_in_scope(workload, self.settings):
            return None
        if rules.template_group(workload, self.settings) is not None:
            return None
        ref = workload_ref(workload)
        if not ref.uid:
            return None
        return rules.owned_group_name(ref, "", self.settings)

    def template_group_name(self, workload: Mapping[str, Any]) -> str | None:
        """The hand-made group a workload's templates name, when it counts toward
        that group's size: a top workload (not a ReplicaSet of a Deployment, not
        a CronJob: its runs, the Jobs, count), in scope, not finished, not being deleted."""
        if workload.get("kind") == "CronJob":
            return None
        if _d(workload.get("metadata")).get("deletionTimestamp"):
            return None
        owner = rules.controller_ref(workload)
        if owner is not None and owner.kind in OWNER_KINDS and owner.kind not in rules.RUN_OWNERS:
            return None  # counted through its owner (a Deployment's ReplicaSet, a JobSet's Job)
        named = rules.template_group(workload, self.settings)
        if not isinstance(named, str):
            return None
        if not template_in_scope(workload, self.settings) or is_finished(workload):
            return None
        return named

    def apply(self, kind: str, old: Obj | None, new: Obj | None) -> Changes:
        """Update the indexes for one object going from ``old`` to ``new`` (either
        may be None) and say what needs a look. The store itself is already updated."""
        if kind == "Pod":
            return self._apply_pod(old, new)
        if kind == self.settings.dialect.kind:
            changes = Changes(urgent=True)
            changes.groups.add(obj_key(new or old or {}))
            return changes
        return self._apply_workload(kind, old, new)

    def _apply_pod(self, old: Obj | None, new: Obj | None) -> Changes:
        changes = Changes()
        key = obj_key(new or old or {})
        for pod, add in ((old, False), (new, True)):
            if pod is None:
                continue
            md = _d(pod.get("metadata"))
            uid = md.get("uid")
            group = self.group_key_of_pod(pod)
            owner = rules.controller_ref(pod)
            if add:
                if uid:
                    self.by_uid[uid] = pod
                if group:
                    self.pods_by_group.setdefault(group, set()).add(key)
                    self.unlabelled.discard(key)
                if owner and owner.uid:
                    self.pods_by_owner.setdefault(owner.uid, set()).add(key)
            else:
                if uid and self.by_uid.get(uid) is pod:
                    del self.by_uid[uid]
                if group:
                    _discard(self.pods_by_group, group, key)
                if owner and owner.uid:
                    _discard(self.pods_by_owner, owner.uid, key)
                self.unlabelled.discard(key)
            if group:
                changes.groups.add(group)
        if new is not None:
            if needs_backfill(new, self.settings) and not _d(new.get("metadata")).get("deletionTimestamp"):
                self.unlabelled.add(key)
                changes.pods.add(key)
            # pods owned by this pod (LeaderWorkerSet workers) may now resolve
            uid = _d(new.get("metadata")).get("uid")
            if old is None and uid:
                self._children_need_look(uid, changes)
        return changes

    def _apply_workload(self, kind: str, old: Obj | None, new: Obj | None) -> Changes:
        changes = Changes(urgent=True)
        key = obj_key(new or old or {})
        wid = (kind, key)
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            md = _d(obj.get("metadata"))
            uid = md.get("uid")
            owner = rules.controller_ref(obj)
            if add:
                if uid:
                    self.by_uid[uid] = obj
                if owner and owner.uid:
                    self.workload_children.setdefault(owner.uid, set()).add(wid)
                group = self.owned_group_name(obj)
                if group:
                    gkey = key_of(md.get("namespace") or "", group)
                    self.owned_group[wid] = gkey
                    self.group_owner[gkey] = wid
                    changes.groups.add(gkey)
                named = self.template_group_name(obj)
                if named:
                    gkey = key_of(md.get("namespace") or "", named)
                    self.template_refs.setdefault(gkey, set()).add(wid)
                    changes.groups.add(gkey)
            else:
                if uid and self.by_uid.get(uid) is obj:
                    del self.by_uid[uid]
                if owner and owner.uid:
                    _discard(self.workload_children, owner.uid, wid)
                gkey = self.owned_group.pop(wid, None)
                if gkey:
                    if self.group_owner.get(gkey) == wid:
                        del self.group_owner[gkey]
                    changes.groups.add(gkey)
                named = rules.template_group(obj, self.settings)
                if isinstance(named, str):
                    gkey = key_of(md.get("namespace") or "", named)
                    _discard(self.template_refs, gkey, wid)
                    changes.groups.add(gkey)
        obj = new or old or {}
        uid = _d(obj.get("metadata")).get("uid")
        if uid and (old is None or new is None):
            self._children_need_look(uid, changes)
        # a workload's status (rollout) matters to the groups of its pods
        if uid:
            self._descendant_groups(uid, changes, depth=0)
        return changes

    def _children_need_look(self, uid: str, changes: Changes) -> None:
        """Pods whose owner chain runs through ``uid`` may resolve (or change) now."""
        self._descendant_groups(uid, changes, depth=0, unlabelled_too=True)

    def _descendant_groups(self, uid: str, changes: Changes, depth: int, unlabelled_too: bool = False) -> None:
        if depth > 4:
            return
        for pkey in self.pods_by_owner.get(uid, ()):
            pod = self.pods.get(pkey)
            if pod is None:
                continue
            group = self.group_key_of_pod(pod)
            if group:
                changes.groups.add(group)
            if unlabelled_too and pkey in self.unlabelled:
                changes.pods.add(pkey)
        for kind, wkey in self.workload_children.get(uid, ()):
            child = self.workload(kind, wkey)
            child_uid = _d(_d(child).get("metadata")).get("uid") if child else None
            if child_uid:
                self._descendant_groups(child_uid, changes, depth + 1, unlabelled_too)

    # -- queries

    def members(self, group_key: str) -> list[Obj]:
        return [p for k in self.pods_by_group.get(group_key, ()) if (p := self.pods.get(k)) is not None]

    def template_workloads(self, group_key: str) -> list[Obj]:
        out = []
        for kind, wkey in self.template_refs.get(group_key, ()):
            w = self.workload(kind, wkey)
            if w is not None:
                out.append(w)
        return sorted(out, key=display_name)

    def group_owner_workload(self, group_key: str) -> Obj | None:
        wid = self.group_owner.get(group_key)
        return self.workload(*wid) if wid else None

    def all_group_keys(self) -> set[str]:
        keys = set(self.pods_by_group) | set(self.template_refs) | set(self.group_owner) | set(self.podgroups)
        return keys

    def owner_chain(self, pod: Mapping[str, Any]) -> tuple[list[Obj], bool]:
        """The cached owner objects of a pod, nearest first, and whether the walk is
        complete. It is incomplete when an owner of a watched kind is not (yet)
        in the cache; owners of kinds the grouper does not watch end the walk."""
        chain: list[Obj] = []
        for _ in range(16):
            ref = rules.owner_to_look_up(pod, chain)
            if ref is None:
                return chain, True
            obj = self.by_uid.get(ref.uid) if ref.uid else None
            if obj is None or obj.get("kind") != ref.kind:
                if ref.kind in self.watched_kinds:
                    return chain, False
                # a kind podgang does not watch (or a pod out of scope): it is the top
                return chain, True
            chain.append(obj)
        return chain, True


def _discard(index: dict[str, set], key: str, member: Any) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(member)
        if not members:
            del index[key]


def resource_label(resource: Resource) -> str:
    return resource.plural if not resource.group else f"{resource.plural}.{resource.group}"
