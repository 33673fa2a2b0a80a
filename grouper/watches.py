"""The grouper's watches: which informers feed the cache, and what each change queues.
"""

from __future__ import annotations

import logging
from typing import Any

from podgang import rules
from podgang.backends import Backend
from podgang.backends.base import slim_fact
from podgang.nodes import NODES
from podgang import kinds as _kinds
from podgang.objects import NAMESPACE, POD, Resource

from podgang.grouper.gangs import GROUP, POD_KEY
from podgang.grouper.informer import Informer
from podgang.gang import Obj, key_of, obj_key, resource_version, split_key

log = logging.getLogger("podgang.grouper")


class Watches:
    """Informers and what their changes queue (part of :class:`~podgang.grouper.controller.Controller`)."""

    def _build_informers(self) -> list[Informer]:
        namespaces: tuple[str | None, ...] = tuple(self.options.namespaces) or (None,)
        backends = self.settings.enabled_backends
        kinds: list[tuple[Resource, bool, str | Backend]] = [(POD, False, POD.kind)]
        # with several backends, one whose CRD is not installed is waited for, not fatal
        kinds += [(b.podgroup, b.podgroup.optional or len(backends) > 1, b) for b in backends]
        kinds += [(k.resource, k.resource.optional, k.resource.kind) for k in _kinds.FOLLOWED]
        out = []
        for resource, optional, source in kinds:
            kind = resource.kind
            for namespace in namespaces:
                informer = Informer(
                    self.api, resource, namespace,
                    store=self.cache.store_for(source),
                    slim=self.cache.slimmer_for(source),
                    keep=lambda obj, kind=kind: self.cache.keep(kind, obj),
                    handler=self._on_change,
                    metrics=self.metrics,
                    watch_timeout=self.options.watch_timeout,
                    page_size=self.options.page_size,
                    optional=optional,
                    absent_probe_interval=self.options.absent_probe_interval,
                )
                if optional:
                    informer.on_presence = lambda present, source=source: self._presence(source, present)
                if isinstance(source, Backend):
                    self.podgroup_informers.setdefault(source.name, []).append(informer)
                else:
                    self.informers.setdefault(kind, []).append(informer)
                out.append(informer)
        for resource in dict.fromkeys(r for b in backends for r in b.fact_resources):
            informer = Informer(
                self.api, resource, None, store=self.cache.fact_stores[resource.label],
                slim=lambda raw, kind=resource.kind: slim_fact(raw, kind),
                keep=lambda obj: True, metrics=self.metrics,
                handler=lambda kind, old, new, label=resource.label: self._fact_changed(label, old, new),
                watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
                optional=True, absent_probe_interval=self.options.absent_probe_interval)
            informer.on_presence = lambda present, label=resource.label: self._fact_presence(label, present)
            self.refining_informers.append(informer)
            out.append(informer)
        # a namespace being deleted takes its gangs with it: their members go on purpose (not
        # needed either: a grouper that may not list namespaces works all the same)
        deleting = Informer(
            self.api, NAMESPACE, None, store=self.deleted_namespaces, slim=_namespace_name,
            keep=lambda obj: True, handler=self._namespace_deleted, metrics=self.metrics,
            watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
            query={"fieldSelector": "status.phase=Terminating"},
        )
        self.refining_informers.append(deleting)
        out.append(deleting)
        if self.selected_namespaces is not None:
            selector = Informer(
                self.api, NAMESPACE, None, store=self.selected_namespaces, slim=_namespace_name,
                keep=lambda obj: True, handler=self._namespace_changed, metrics=self.metrics,
                watch_timeout=self.options.watch_timeout, page_size=self.options.page_size,
                query={"labelSelector": self.options.namespace_selector},
            )
            out.append(selector)
        return out

    def _fact_presence(self, label: str, present: bool) -> None:
        """Values are checked against a kind of fact once its first list is complete,
        and no longer while it is not served."""
        if present:
            self.cache.known_facts.add(label)
        else:
            self.cache.known_facts.discard(label)
            self.cache.fact_stores[label].clear()
        self.cache.facts_version += 1
        if self.synced:  # the gangs judged before these facts were known: judge them again
            self._enqueue_everything()

    def _fact_changed(self, label: str, old: Obj | None, new: Obj | None) -> None:
        """A PriorityClass, queue or node came, went or changed what the verdicts read (a node's
        heartbeat changes none of it). The gangs said never placed are judged again at once (a
        node added, a quota raised: said so within seconds); after a queue or a PriorityClass
        changed — rare, and any gang may be in that queue — every gang is."""
        if _without_version(old) == _without_version(new):
            return
        self.cache.facts_version += 1
        if label == NODES.label:
            for key in self.gangs.never_placed():
                self.queue.add((GROUP, key))
        elif self.synced and label in self.cache.known_facts:
            self._enqueue_everything()

    def _namespace_deleted(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A namespace began to be deleted: its gangs are let go. (Once it is gone there is
        nothing to look at there: its pods went first.)"""
        if new is not None and old is None:
            namespace = obj_key(new).partition("/")[2]
            groups = [key for key in self.cache.all_group_keys() if split_key(key)[0] == namespace]
            log.info("namespace being deleted: its gangs are let go, not judged stale nor written",
                     extra={"fields": {"namespace": namespace, "action": "namespace-deleted", "groups": len(groups)}})
            self._namespace_changed(kind, old, new)

    def being_deleted(self, namespace: str) -> bool:
        """Whether ``namespace`` is being deleted: nothing new can be made in it, and every
        pod in it goes on purpose."""
        return key_of("", namespace) in self.deleted_namespaces

    def _namespace_changed(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        """A namespace was selected or left the selection, or began to be deleted: look at its
        groups and pods again."""
        namespace = obj_key(new or old or {}).partition("/")[2]
        for key in self.cache.all_group_keys():
            if split_key(key)[0] == namespace:
                self.queue.add((GROUP, key))
        for key in list(self.cache.unlabelled):
            if split_key(key)[0] == namespace:
                self.queue.add((POD_KEY, key))

    def touches(self, namespace: str, backend: Backend | None) -> bool:
        """Whether the grouper may act for ``backend`` in ``namespace`` (``--namespace-selector``)."""
        if self.selected_namespaces is None or backend is None:
            return True
        if self.options.selector_backends and backend.name not in self.options.selector_backends:
            return True
        return key_of("", namespace) in self.selected_namespaces

    def _presence(self, kind: str | Backend, present: bool) -> None:
        if not isinstance(kind, Backend):  # a workload kind: owner walks may end at it, or not
            self.cache.set_watched(kind, present)
        if present:
            self._enqueue_everything()

    def _on_change(self, kind: str, old: Obj | None, new: Obj | None) -> None:
        changes = self.cache.apply(kind, old, new)
        if kind == "Pod" and old is None and new is not None and self._pods_listed():
            self._pod_created()
        if new is not None and old is None:
            self._probe_unserved_owners(new)
        if new is None and old is not None:
            # gone: forget the warnings about it (a bounded memory, and a new
            # object of the same name is warned about afresh)
            if kind == "Pod":
                self._warned.pop((POD_KEY, obj_key(old)), None)
                owner = rules.controller_ref(old)
                if owner is not None and owner.uid and owner.uid not in self.cache.pods_by_owner:
                    self._forget_owner(owner.uid)  # its last pod: an owner read for its metadata is let go
            elif kind in self.cache.workloads:
                self._warned.pop(("w", old["metadata"].get("uid")), None)
                self._warned.pop(("partial", old["metadata"].get("uid")), None)
                self._warned.pop(("staged", old["metadata"].get("uid")), None)
        if new is not None and kind in self.cache.workloads:
            named = rules.template_group(new, self.settings)
            if isinstance(named, rules.Denial) or (old is not None and ("w", old["metadata"].get("uid")) in self._warned):
                problems = (named.message,) if isinstance(named, rules.Denial) else ()
                self._warn_once(("w", new["metadata"].get("uid")), problems, [new], "InvalidPodGroupReference")
            for tag, problem, reason in (
                    ("partial", rules.partial_scope_problem(new, None, self.settings), "GangNeverComplete"),
                    ("staged", rules.staged_problem(new, self.settings), "GangStaged")):
                if problem or (old is not None and (tag, old["metadata"].get("uid")) in self._warned):
                    self._warn_once((tag, new["metadata"].get("uid")), (problem,) if problem else (), [new], reason)
        delay = 0.0 if changes.urgent else self.options.pod_debounce
        if kind == "Pod" and obj_key(new or old or {}) in self._patching_pods:
            # the grouper's own backfill of the gang's pods (its answer, or the watch's echo of it first)
            delay = max(delay, self.options.backfill_settle)
        group_changed = bool(changes.groups) and self.cache.is_podgroup_kind(kind)
        for key in changes.groups:
            record = self.gangs.get(key) if group_changed else None
            if record is not None and record.writing is not None:
                # while its reconcile writes it: its own write, unless the answer says otherwise
                record.writing = resource_version(new) if new is not None else "gone"
                continue
            self.queue.add((GROUP, key), delay)
        for key in changes.pods:
            self.queue.add((POD_KEY, key), delay)

    def _probe_unserved_owners(self, obj: Obj) -> None:
        """A new object owned by a kind podgang follows but found not served: its operator
        (its CRD) was installed since that kind was last probed for. Look now, or its pods
        would wait for the next probe without a PodGroup."""
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
            kind = ref.get("kind")
            if kind in self.cache.watched_kinds or not isinstance(ref.get("apiVersion"), str):
                continue
            group = ref["apiVersion"].rpartition("/")[0]
            for informer in self.informers.get(kind, ()):
                if informer.resource.group == group:
                    informer.probe_soon()

    def _enqueue_everything(self) -> None:
        for key in self.cache.all_group_keys():
            self.queue.add((GROUP, key))
        for key in list(self.cache.unlabelled):
            self.queue.add((POD_KEY, key))

    def _upsert(self, kind: str | Backend, raw: dict[str, Any]) -> None:
        """Put what the grouper just wrote in the cache. A write that worked is also word that
        the resource is served: a scheduler (its PodGroup CRD) installed after the grouper
        started is watched from its first group on, not from the next probe."""
        informers = self._informers_of(kind)
        if informers:
            informers[0].upsert(raw)
            for informer in informers:
                informer.probe_soon()

    def _forget(self, kind: str | Backend, raw: dict[str, Any]) -> None:
        informers = self._informers_of(kind)
        if informers:
            informers[0].remove(raw)

    def _informers_of(self, kind: str | Backend) -> list[Informer] | None:
        """The informers of a kind, or of a backend's PodGroups."""
        if isinstance(kind, Backend):
            return self.podgroup_informers.get(kind.name)
        return self.informers.get(kind)


def _namespace_name(raw: Any) -> Obj:
    """A selected namespace, as the selector's store keeps it: its name."""
    md = raw.get("metadata") or {}
    return {"metadata": {"name": md.get("name"), "namespace": "", "resourceVersion": md.get("resourceVersion")}}


def _without_version(obj: Obj | None) -> Any:
    """A slimmed fact without its resourceVersion: what the verdicts read of it."""
    if obj is None:
        return None
    md = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": md}
