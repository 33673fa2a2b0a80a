"""Slim copies of the objects the gang model reads: each pruned to the few fields the rules need
(a pod costs a few hundred bytes, not the tens of kilobytes of a full PodSpec), kept as plain
dicts in the shape the API serves them so that :mod:`podgang.rules` reads them unchanged; and
facts about one cached workload. No I/O.

Keys: objects by ``"namespace/name"``; groups by ``"namespace/group"``.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Mapping

from podgang import kinds, rollouts, rules
from podgang.backends import Backend
from podgang.kinds import LWS_GROUP_INDEX_LABEL, LWS_NAME_LABEL, LWS_WORKER_INDEX_LABEL
from podgang.objects import LAST_APPLIED_ANNOTATION, OwnerRef, field_writers
from podgang.settings import DEFAULT, Settings


Obj = dict[str, Any]


_intern = sys.intern


_REF_FIELDS = ("apiVersion", "kind", "name", "uid", "controller")  # what the grouper reads of an ownerReference


_MAX_SHARED = 100_000


_ABSENT = object()  # an ownerReference field that is not there (unlike one that is null)


#: in a slim PodGroup's metadata, instead of its managedFields: who else wrote its size fields
#: (``objects.field_writers``), on the groups podgang made only
SIZE_WRITERS = "podgang.io/size-writers"


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


def _resources_only(spec: Mapping[str, Any]) -> Obj:
    """What a pod spec requests (its containers' resources, sidecars, overhead), nothing
    else: what minResources is computed from."""
    out: Obj = {}
    for field in ("containers", "initContainers"):
        kept = []
        for c in spec.get(field) or ():
            c = _d(c)
            resources = {k: v for k, v in _d(c.get("resources")).items() if k in ("requests", "limits") and v}
            if resources:  # a container that requests nothing adds nothing
                slim: Obj = {"name": c.get("name"), "resources": resources}
                if c.get("restartPolicy") is not None:
                    slim["restartPolicy"] = c["restartPolicy"]
                kept.append(slim)
        if kept:
            out[field] = kept
    if isinstance(spec.get("overhead"), Mapping):
        out["overhead"] = spec["overhead"]
    return out


def _placement_only(spec: Mapping[str, Any]) -> Obj:
    """Where a pod template's pods may go and their priority class: what the never-placed
    verdicts read (podgang.feasibility), nothing else."""
    out: Obj = {}
    for key in ("nodeSelector", "tolerations", "priorityClassName"):
        if spec.get(key):
            out[key] = spec[key]
    required = _d(_d(_d(spec.get("affinity")).get("nodeAffinity")).get("requiredDuringSchedulingIgnoredDuringExecution"))
    if required:
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    return out


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


class Slimmer:
    """Prunes API objects to the fields the grouper needs, per kind."""

    def __init__(self, settings: Settings = DEFAULT):
        backends = settings.enabled_backends
        label_keys = tuple(dict.fromkeys(k for b in backends for k in b.pod_label_keys))
        annotation_keys = tuple(dict.fromkeys(k for b in backends for k in b.pod_annotation_keys))
        self.settings = settings
        self.pod_labels = (settings.skip_label, *label_keys, LWS_GROUP_INDEX_LABEL, LWS_NAME_LABEL,
                           LWS_WORKER_INDEX_LABEL, *kinds.ROLE_LABELS, *kinds.SEGMENT_INDEX_LABELS, *kinds.REPLICA_LABELS,
                           *kinds.REPLACED_LABELS,
                           rollouts.POD_TEMPLATE_HASH, rollouts.CONTROLLER_REVISION_HASH, rollouts.POD_INDEX)
        self.pod_annotations = (*annotation_keys, settings.min_member_annotation,
                                settings.grace_period_annotation)
        self.pod_spec_keys = tuple(dict.fromkeys(k for b in backends for k in b.pod_spec_keys))
        self.object_labels = (settings.skip_label, settings.managed_by_label, rollouts.POD_TEMPLATE_HASH,
                              *label_keys,  # a backend's per-gang settings may sit on the workload (a queue label)
                              *kinds.OPERATOR_GANG_LABELS)
        self.object_annotations = (settings.min_member_annotation, settings.min_available_annotation,
                                   settings.grace_period_annotation,
                                   settings.desired_size_annotation, settings.subgroups_annotation,
                                   settings.min_resources_annotation, settings.followed_size_annotation,
                                   settings.elastic_size_annotation, settings.admission_created_annotation,
                                   settings.required_roles_annotation, settings.awaited_roles_annotation,
                                   settings.adopted_from_annotation,
                                   rollouts.REVISION_ANNOTATION,
                                   *annotation_keys)  # a backend's per-gang settings may sit on the workload
        self.template_labels = (settings.skip_label, *label_keys)
        # a backend that copies the top owner's labels and annotations (KAI) needs them all
        self.all_owner_metadata = any(b.reads_owner_metadata for b in backends)
        self.template_annotations = (*annotation_keys, settings.min_available_annotation)  # a role's minimum
        self._shared: dict[tuple, Obj] = {}  # read-only parts many objects have in common: see _share

    def _metadata(self, md: Mapping[str, Any], labels: tuple[str, ...], annotations: tuple[str, ...]) -> Obj:
        out: Obj = {
            "name": md.get("name"),
            "namespace": _intern(md.get("namespace") or ""),
            "uid": md.get("uid"),
            "resourceVersion": md.get("resourceVersion"),
        }
        for k in ("generation", "creationTimestamp", "deletionTimestamp"):
            value = md.get(k)
            if value is not None:  # a timestamp interned: the pods made in one second share it
                out[k] = _intern(value) if isinstance(value, str) else value
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

    @staticmethod
    def _every_key(md: Mapping[str, Any], meta: Obj) -> None:
        """Every label and annotation of ``md`` into ``meta`` (but kubectl's last-applied copy)."""
        for section in ("labels", "annotations"):
            every = {k: v for k, v in _d(md.get(section)).items()
                     if isinstance(v, str) and k != LAST_APPLIED_ANNOTATION}
            if every:
                meta[section] = every
            else:
                meta.pop(section, None)

    def owner(self, raw: Mapping[str, Any]) -> Obj:
        """An owner of a kind podgang does not follow, read for its metadata alone (what a
        backend copies from a gang's top owner: KAI's queue, priority, labels and annotations)."""
        md = _d(raw.get("metadata"))
        meta = self._metadata(md, self.object_labels, self.object_annotations)
        if self.all_owner_metadata:
            self._every_key(md, meta)
        return {"apiVersion": raw.get("apiVersion"), "kind": raw.get("kind"), "metadata": meta}

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
        try:
            shared = self._shared.get(key)
        except TypeError:  # a nested value (a field some backend keeps in the pod spec): keep it unshared
            return value
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
        spec: Obj = self._membership_spec(_d(t.get("spec")))
        scheduler = _d(t.get("spec")).get("schedulerName")
        if isinstance(scheduler, str):
            spec["schedulerName"] = _intern(scheduler)
        spec.update(_resources_only(_d(t.get("spec"))))
        spec.update(_placement_only(_d(t.get("spec"))))
        return {"metadata": meta, "spec": spec}

    def _membership_spec(self, spec: Mapping[str, Any]) -> Obj:
        """The pod spec fields a backend reads membership from (most keep it in metadata)."""
        return {k: spec[k] for k in self.pod_spec_keys if k in spec}

    def pod(self, raw: Mapping[str, Any]) -> Obj | None:
        md = _d(raw.get("metadata"))
        spec = _d(raw.get("spec"))
        status = _d(raw.get("status"))
        out_spec: Obj = self._membership_spec(spec)
        if isinstance(spec.get("schedulerName"), str):
            out_spec["schedulerName"] = _intern(spec["schedulerName"])
        if spec.get("nodeName"):
            out_spec["nodeName"] = _intern(str(spec["nodeName"]))
        if not any(_d(ref).get("controller") for ref in md.get("ownerReferences") or ()):
            # a standalone pod (no workload's template says what it requests): what it requests,
            # for the never-placed verdicts of the group it names (podgang.feasibility)
            out_spec.update(_resources_only(spec))
        meta = self._metadata(md, self.pod_labels, self.pod_annotations)
        if self.all_owner_metadata and not md.get("ownerReferences"):
            self._every_key(md, meta)  # an owner-less pod is its own top owner, whose metadata KAI copies
        if isinstance(md.get("generateName"), str) and md["generateName"]:
            meta["generateName"] = md["generateName"]  # how the webhook named an owner-less pod's group
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": self._share(out_spec),
            "status": self._share({"phase": _intern(str(status.get("phase") or "Pending"))}),
        }

    def podgroup(self, raw: Mapping[str, Any], backend: Backend | None = None) -> Obj | None:
        backend = backend or self.settings.default_backend
        md = _d(raw.get("metadata"))
        slim_md = self._metadata(md, self.object_labels, self.object_annotations)
        if _d(slim_md.get("labels")).get(self.settings.managed_by_label) == self.settings.managed_by_value:
            # the answer, never the managedFields themselves (kilobytes on every group)
            writers = field_writers(raw, backend.size_fields, self.settings.own_field_managers)
            if writers:
                slim_md[SIZE_WRITERS] = writers
        return {
            "apiVersion": raw.get("apiVersion") or backend.podgroup.api_version,
            "kind": raw.get("kind") or backend.podgroup.kind,
            "metadata": slim_md,
            "spec": backend.slim_podgroup_spec(_d(raw.get("spec"))),
        }

    def workload(self, raw: Mapping[str, Any], kind: str | None = None) -> Obj | None:
        kind = raw.get("kind") or kind
        md = _d(raw.get("metadata"))
        spec = _d(raw.get("spec"))
        status = _d(raw.get("status"))
        entry = kinds.workload_kind(kind)
        if entry is not None:
            out_spec = entry.slim_spec(spec, self._template)
            kept = entry.status_fields
        else:
            out_spec = {"template": self._template(spec.get("template"))} if "template" in spec else {}
            kept = ()
        out_status: Obj = {k: status[k] for k in kept if k in status}
        finished = [
            _d(c).get("type") for c in status.get("conditions") or ()
            if _d(c).get("type") in kinds.FINISHED_CONDITIONS and _d(c).get("status") == "True"
        ]
        if finished:
            out_status["conditions"] = [{"type": t, "status": "True"} for t in finished]
        for condition_type in entry.kept_conditions if entry is not None else ():
            found = rollouts.condition(raw, condition_type)
            if found is not None:  # e.g. a Deployment's Progressing reason tells a rollout from a lost pod
                out_status.setdefault("conditions", []).append(
                    {k: _intern(found[k]) for k in rollouts.CONDITION_FIELDS if isinstance(found.get(k), str)})
        meta = self._metadata(md, self.object_labels, self.object_annotations)
        if isinstance(md.get("generation"), int) and md["generation"] > 1:
            # when its size was written, never the managedFields themselves: a hand-made
            # group's first look asks whether a member was scaled after the group was written
            writes = kinds.size_writes(raw)
            if writes:
                meta[kinds.SIZE_WRITES] = writes
        if self.all_owner_metadata:
            self._every_key(md, meta)
        return {
            "apiVersion": raw.get("apiVersion"),
            "kind": kind,
            "metadata": meta,
            "spec": out_spec,
            "status": out_status,
        }


def workload_ref(workload: Mapping[str, Any]) -> OwnerRef:
    return OwnerRef.of(workload)


def pod_ref(pod: Mapping[str, Any]) -> OwnerRef:
    return OwnerRef.of({"apiVersion": "v1", "kind": "Pod", **pod}, controller=False)


def template_in_scope(workload: Mapping[str, Any], settings: Settings) -> bool:
    """Whether the pods a workload makes would be in podgang's scope."""
    if rules.workload_skip_problem(workload, settings):
        return False
    namespace = _d(workload.get("metadata")).get("namespace") or ""
    if namespace in settings.excluded_namespaces:
        return False
    return any(
        rules.scope_problem(template, namespace, settings) is None
        for _, template in kinds.pod_templates(workload)
    )


def template_backend(workload: Mapping[str, Any], settings: Settings) -> Backend | None:
    """The backend of the pods a workload makes: its first pod template in scope's."""
    return rules.workload_backend(workload, settings)


def display_name(obj: Mapping[str, Any]) -> str:
    """``deployment model-1`` (for messages such as ``deployment model-1 scaled 1 → 2``)."""
    return f"{str(obj.get('kind') or 'object').lower()} {_d(obj.get('metadata')).get('name') or '?'}"
