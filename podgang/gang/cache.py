"""The gang model's state: the slim objects and the indexes that turn "this object changed"
into "these PodGroups need a look". Filled by the grouper's watches, by ``podgang status``
from a cluster read, and by ``podgang plan`` from manifests. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from podgang import kinds, rollouts, rules
from podgang.backends import Backend
from podgang.backends.base import ClusterFacts
from podgang import kinds as _kinds
from podgang.kinds import is_finished
from podgang.objects import OwnerRef, is_active
from podgang.settings import DEFAULT, Settings

from podgang.gang.slim import (
    _d,
    display_name,
    key_of,
    Obj,
    obj_key,
    Slimmer,
    split_key,
    template_in_scope,
    workload_ref,
)


class PodGroupStores(Mapping[str, Obj]):
    """The cached PodGroups, one store per enabled backend (several backends may
    name their kind ``PodGroup``: the store is the backend's, never the kind's).

    As a mapping it is every store at once, by ``namespace/name`` (the first
    backend's group wins should two backends hold the same name)."""

    def __init__(self, backends: Iterable[Backend]):
        self.backends = {b.name: b for b in backends}
        self.stores: dict[str, dict[str, Obj]] = {name: {} for name in self.backends}

    def store(self, backend: Backend) -> dict[str, Obj]:
        return self.stores[backend.name]

    def backend_of(self, key: str) -> Backend | None:
        """The backend whose store holds PodGroup ``key``."""
        return next((b for b in self.backends.values() if self.of(b, key) is not None), None)

    def holder(self, backend: Backend | None, key: str) -> Obj | None:
        """The object in ``backend``'s store that holds gang ``key`` (its PodGroup; a 1.35
        Workload holds one gang per pod group), whether or not it holds that gang."""
        if backend is None or backend.name not in self.stores:
            return None
        namespace, name = split_key(key)
        return self.stores[backend.name].get(key_of(namespace, backend.holder_name(name)))

    def of(self, backend: Backend | None, key: str) -> Obj | None:
        """PodGroup ``key`` in ``backend``'s store (as that gang's own)."""
        holder = self.holder(backend, key)
        return backend.gang_view(holder, split_key(key)[1]) if holder is not None and backend is not None else None

    def __getitem__(self, key: str) -> Obj:
        for backend in self.backends.values():
            found = self.of(backend, key)
            if found is not None:
                return found
        raise KeyError(key)

    def keys_of(self, backend: Backend, obj: Mapping[str, Any]) -> list[str]:
        """The gang keys one cached object of ``backend`` holds."""
        namespace = _d(obj.get("metadata")).get("namespace") or ""
        return [key_of(namespace, gang) for gang in backend.gangs_in(obj)]

    def __iter__(self) -> Iterator[str]:
        return iter({k: None for name, store in self.stores.items() for obj in store.values()
                     for k in self.keys_of(self.backends[name], obj)})

    def __len__(self) -> int:
        return sum(len(store) for store in self.stores.values())


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
        #: its pods are the cluster's (the grouper); False: only what manifests hold (``podgang
        #: plan``), so a gang's tree is drawn as it will be, not as the pods made so far allow
        self.pods_observed = True
        self.slim = Slimmer(settings)
        self.pods: dict[str, Obj] = {}
        self.podgroups = PodGroupStores(settings.enabled_backends)
        self.workloads: dict[str, dict[str, Obj]] = {k.kind: {} for k in _kinds.FOLLOWED}
        # indexes
        self.by_uid: dict[str, Obj] = {}  # pods and workloads, for owner walks
        #: owners of kinds podgang does not follow, by uid: their metadata alone, read for the
        #: settings a backend takes from a gang's top owner (KAI's queue and priority labels)
        self.owners_read: dict[str, Obj] = {}
        # the walk above a pod's owner, by that owner: the pods of one ReplicaSet share it. Only
        # complete walks through workloads, forgotten whenever a workload changes
        self._walks: dict[tuple[str, str], tuple[list[Obj], bool]] = {}  # (the walk, an owner skipped)
        self.pods_by_group: dict[str, set[str]] = {}  # group key -> pod keys
        self.pods_by_owner: dict[str, set[str]] = {}  # owner uid -> pod keys
        self.unlabelled: set[str] = set()  # pod keys without membership (backfill)
        self.template_refs: dict[str, set[tuple[str, str]]] = {}  # group key -> {(kind, key)} naming it
        self.owned_group: dict[tuple[str, str], set[str]] = {}  # (kind, key) -> group keys it owns
        self.group_owner: dict[str, tuple[str, str]] = {}  # group key -> (kind, key)
        self.workload_children: dict[str, set[tuple[str, str]]] = {}  # owner uid -> {(kind, key)}
        self.replaced_revisions: dict[str, dict[str, str]] = {}  # StatefulSet uid -> {pod name: revision deleted}
        self.watched_kinds: set[str] = {k.kind for k in _kinds.FOLLOWED if not k.resource.optional}
        # cluster-scoped objects backends check values against (PriorityClasses, queues),
        # by kind; a kind is known once its list arrived (else its facts are unknown)
        self.fact_stores: dict[str, dict[str, Obj]] = {  # by resource label: KAI's and Volcano's Queue differ
            r.label: {} for b in settings.enabled_backends for r in b.fact_resources}
        self.known_facts: set[str] = set()
        #: bumped whenever a fact store changes: the facts worked out from them are kept until then
        self.facts_version = 0
        self._facts: dict[str, tuple[int, ClusterFacts]] = {}

    # -- stores

    def is_podgroup_kind(self, kind: str | Backend) -> bool:
        return self._podgroup_backend(kind) is not None

    def _podgroup_backend(self, kind: str | Backend) -> Backend | None:
        """``kind`` as a backend's PodGroups: a backend, or the kind of the first
        enabled backend's PodGroup of that kind."""
        if isinstance(kind, Backend):
            return kind
        return next((b for b in self.settings.enabled_backends if b.podgroup.kind == kind), None)

    def store_for(self, kind: str | Backend) -> dict[str, Obj]:
        """The store of a kind, or of a backend's PodGroups."""
        if kind == "Pod":
            return self.pods
        backend = self._podgroup_backend(kind)
        if backend is not None:
            return self.podgroups.store(backend)
        return self.workloads[kind]  # type: ignore[index]

    def slimmer_for(self, kind: str | Backend):
        if kind == "Pod":
            return self.slim.pod
        backend = self._podgroup_backend(kind)
        if backend is not None:
            return lambda raw: self.slim.podgroup(raw, backend)
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
        self._walks.clear()  # a walk ended at a kind not watched, or waits for one that is
        if watched:
            self.watched_kinds.add(kind)
        else:
            self.watched_kinds.discard(kind)

    def facts_for(self, backend: Backend) -> ClusterFacts:
        """What is known of the cluster objects ``backend`` checks its settings against
        (worked out once per change of them: every reconcile asks)."""
        kept = self._facts.get(backend.name)
        if kept is not None and kept[0] == self.facts_version:
            return kept[1]
        facts = backend.cluster_facts({r.kind: list(self.fact_stores[r.label].values())
                                       if r.label in self.known_facts else None for r in backend.fact_resources})
        self._facts[backend.name] = (self.facts_version, facts)
        return facts

    def workload(self, kind: str, key: str) -> Obj | None:
        store = self.workloads.get(kind)
        return store.get(key) if store is not None else None

    # -- index maintenance

    def group_key_of_pod(self, pod: Mapping[str, Any]) -> str | None:
        name = rules.group_of(pod, self.settings)
        if not name:
            return None
        return key_of(_d(pod.get("metadata")).get("namespace") or "", name)

    def owned_group_names(self, workload: Mapping[str, Any]) -> list[str]:
        """The PodGroups a workload owns itself (it is a top owner, its pods are in
        scope and its templates name no hand-made group): one, or one per replica
        group (a LeaderWorkerSet), or none (a CronJob: each Job run is a top owner)."""
        entry = kinds.workload_kind(workload)
        if entry is None or _d(workload.get("metadata")).get("deletionTimestamp"):
            return []
        if rules.next_owner(workload) is not None:
            return []
        if not template_in_scope(workload, self.settings):
            return []
        if kinds.operator_gang(workload) is not None:  # its operator makes its PodGroup: no second one
            return []
        if rules.template_group(workload, self.settings) is not None and not rules.roles_in_hand_made_group(
                workload, self.settings):  # all its pods are in the hand-made group (not only some roles)
            return []
        ref = workload_ref(workload)
        if not ref.uid:
            return []
        return [rules.owned_group_name(ref, suffix, self.settings)
                for suffix in rules.owned_group_suffixes(workload, self.settings)]

    def template_group_name(self, workload: Mapping[str, Any]) -> str | None:
        """The hand-made group a workload's templates name, when it counts toward
        that group's size: a top workload (not a ReplicaSet of a Deployment, not
        a CronJob or a RayService: its runs, the Jobs or clusters, count), in scope, not finished, not being deleted."""
        entry = kinds.workload_kind(workload)
        if entry is not None and entry.layout == kinds.ONE_PER_RUN:
            return None
        if _d(workload.get("metadata")).get("deletionTimestamp"):
            return None
        if rules.next_owner(workload) is not None:
            return None  # counted through its owner (a Deployment's ReplicaSet, a JobSet's Job)
        if kinds.operator_gang(workload) is not None:  # its operator's group: the operator sizes it
            return None
        named = rules.template_group(workload, self.settings)
        if not isinstance(named, str):
            return None
        if not template_in_scope(workload, self.settings) or is_finished(workload):
            return None
        return named

    def apply(self, kind: str | Backend, old: Obj | None, new: Obj | None) -> Changes:
        """Update the indexes for one object going from ``old`` to ``new`` (either
        may be None) and say what needs a look. The store itself is already updated."""
        if kind == "Pod":
            return self._apply_pod(old, new)
        backend = self._podgroup_backend(kind)
        if backend is not None:  # a PodGroup is no pod's owner: the owner walks still hold
            changes = Changes(urgent=True)
            for obj in (old, new):
                if obj is not None:
                    changes.groups.update(self.podgroups.keys_of(backend, obj))
            return changes
        self._walks.clear()
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
                if (old is None or new is None) and owner is not None and group not in self.group_owner \
                        and group not in self.template_refs:
                    # a pod its operator put in the operator's own group: its workload's own group
                    # (made before the pods came) may no longer be wanted
                    changes.groups.update(self._owner_groups(owner, _d(pod.get("metadata")).get("namespace") or ""))
        self._remember_replaced(old, new)
        if new is not None:
            backend = self.settings.backend_for(new)
            if (backend is not None and backend.needs_backfill(new)
                    and not _d(new.get("metadata")).get("deletionTimestamp")):
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
                owned = {key_of(md.get("namespace") or "", g) for g in self.owned_group_names(obj)}
                if owned:
                    self.owned_group[wid] = owned
                for gkey in owned:
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
                for gkey in self.owned_group.pop(wid, ()):
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
        if uid and new is None:
            self.replaced_revisions.pop(uid, None)
        # a workload's status (rollout) matters to the groups of its pods
        if uid:
            self._descendant_groups(uid, changes, depth=0)
        return changes

    def _remember_replaced(self, old: Obj | None, new: Obj | None) -> None:
        """A StatefulSet pod's successor keeps its name: remember the revision of a
        deleted one until the successor runs (a rollout check tells an update from a loss by it)."""
        if new is not None and not self.replaced_revisions:
            return  # nothing remembered: the common case, kept cheap
        owner = rules.controller_ref(new or old)
        if owner is None or owner.kind != "StatefulSet" or not owner.uid:
            return
        name = str(_d((new or old or {}).get("metadata")).get("name") or "")
        if new is None:
            revision = rules.labels(old).get(rollouts.CONTROLLER_REVISION_HASH)
            if revision and owner.uid in self.by_uid:  # not the pods of a deleted StatefulSet
                self.replaced_revisions.setdefault(owner.uid, {})[name] = revision
        elif is_active(new) and (replaced := self.replaced_revisions.get(owner.uid)) is not None:
            replaced.pop(name, None)
            if not replaced:
                del self.replaced_revisions[owner.uid]

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

    def _pods_of(self, owner_uid: str) -> list[Obj]:
        return [p for k in self.pods_by_owner.get(owner_uid, ()) if (p := self.pods.get(k)) is not None]

    def _owner_groups(self, owner: OwnerRef, namespace: str) -> set[str]:
        """The groups the workload owning a pod (or the workload above it) owns itself."""
        out: set[str] = set()
        obj = self.by_uid.get(owner.uid) if owner.uid else None
        for _ in range(2):
            if obj is None or not kinds.workload_kind(obj):
                break
            out.update(key_of(namespace, n) for n in self.owned_group_names(obj))
            above = rules.controller_ref(obj)
            obj = self.by_uid.get(above.uid) if above is not None and above.uid else None
        return out

    def pods_under(self, workload: Mapping[str, Any]) -> list[Obj]:
        """The pods a workload owns, and those of the workloads it owns (an LWS's StatefulSets)."""
        uid = str(_d(workload.get("metadata")).get("uid") or "")
        pods = self._pods_of(uid)
        for kind, key in self.workload_children.get(uid, ()):
            child = self.workload(kind, key)
            if child is not None:
                pods += self._pods_of(str(_d(child.get("metadata")).get("uid") or ""))
        return pods

    def workload_pods(self, workload: Mapping[str, Any]) -> rollouts.WorkloadPods:
        """A Deployment's pods (through its ReplicaSets) and its newest ReplicaSet's
        hash, or a StatefulSet's pods and the revisions of its deleted ones: what
        :func:`rolling_out` needs besides the workload."""
        uid = _d(workload.get("metadata")).get("uid")
        kind = workload.get("kind")
        if not uid or kind not in ("Deployment", "StatefulSet"):
            return rollouts.NO_PODS
        if kind == "StatefulSet":
            return rollouts.WorkloadPods(self._pods_of(uid), replaced=self.replaced_revisions.get(uid, {}))
        sets = [rs for k, key in self.workload_children.get(uid, ()) if k == "ReplicaSet"
                and (rs := self.workload(k, key)) is not None]
        pods = [p for rs in sets for p in self._pods_of(str(_d(rs.get("metadata")).get("uid") or ""))]
        return rollouts.WorkloadPods(pods, newest_hash=rollouts.newest_hash(sets))

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
        memo = self._walk_key(pod)
        if memo is not None and memo in self._walks:
            return list(self._walks[memo][0]), True
        chain: list[Obj] = []
        for _ in range(16):
            ref = rules.owner_to_look_up(pod, chain)
            if ref is None:
                break
            obj = self.by_uid.get(ref.uid) if ref.uid else None
            if obj is None or obj.get("kind") != ref.kind:
                if ref.kind in self.watched_kinds:
                    return chain, False
                # a kind podgang does not watch (or a pod out of scope): it is the top
                break
            chain.append(obj)
        if memo is not None and all(o.get("kind") != "Pod" for o in chain):
            self._walks[memo] = (list(chain), rules.owner_skip_problem(chain, self.settings) is not None)
        return chain, True

    def remember_owner(self, raw: Mapping[str, Any]) -> Obj | None:
        """Keep the metadata of an owner of a kind podgang does not follow (None: it has no uid)."""
        uid = _d(raw.get("metadata")).get("uid")
        if not uid:
            return None
        slim = self.slim.owner(raw)
        self.owners_read[uid] = slim
        return slim

    def owner_object(self, uid: str | None) -> Obj | None:
        """The cached object with ``uid``: a pod or workload, else an owner read for its metadata."""
        if not uid:
            return None
        found = self.by_uid.get(uid)
        return found if found is not None else self.owners_read.get(uid)

    def metadata_chain(self, pod: Mapping[str, Any]) -> list[Obj]:
        """The pod's owners nearest first, up its controller references as far as the cache
        holds them (workloads, and owners read for their metadata): where a backend reads
        a gang's settings (KAI reads each owner's labels, the top owner's first)."""
        chain: list[Obj] = []
        obj: Any = pod
        for _ in range(16):
            ref = rules.controller_ref(obj)
            found = self.owner_object(ref.uid) if ref is not None else None
            if found is None or found.get("kind") != ref.kind or any(found is c for c in chain):
                break
            chain.append(found)
            obj = found
        return chain

    def not_skipped(self, pods: list[Obj]) -> list[Obj]:
        """``pods`` without those whose owner is labelled podgang.io/skip. Pods naming the same
        owner the same way share one reference object (the Slimmer's): asked once per owner."""
        verdicts: dict[int, bool] = {}  # by id of that object, alive for the whole call
        out = []
        for pod in pods:
            refs = _d(pod.get("metadata")).get("ownerReferences")
            shared = refs[0] if isinstance(refs, list) and len(refs) == 1 else None
            if shared is None:
                skipped = self.owner_skipped(pod)
            elif id(shared) in verdicts:
                skipped = verdicts[id(shared)]
            else:
                skipped = verdicts[id(shared)] = self.owner_skipped(pod)
            if not skipped:
                out.append(pod)
        return out

    def owner_skipped(self, pod: Mapping[str, Any]) -> bool:
        """Whether an owner of ``pod`` (as far as the cache holds them) is labelled podgang.io/skip."""
        key = self._walk_key(pod)
        walked = self._walks.get(key) if key is not None else None
        if walked is not None:
            return walked[1]
        return rules.owner_skip_problem(self.owner_chain(pod)[0], self.settings) is not None

    @staticmethod
    def _walk_key(pod: Mapping[str, Any]) -> tuple[str, str] | None:
        first = rules.owner_to_look_up(pod)
        return (first.uid, first.kind) if first is not None and first.uid and first.kind != "Pod" else None


def _discard(index: dict[str, set], key: str, member: Any) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(member)
        if not members:
            del index[key]
