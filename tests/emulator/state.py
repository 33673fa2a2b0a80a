"""The emulator's state as tests and the verbs change it: the resource registry, direct
access without HTTP, watch notifications, garbage collection and namespace deletion.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Callable
from typing import Any



from tests.emulator.resources import Obj, ResourceType
from tests.emulator.selectors import ListFilter, parse_field_selector, parse_label_selector
from tests.emulator.storage import Table, WatchEvent, object_key
from tests.emulator.wire import CLOSE_STREAM, cloned, merge_patch, metadata_of, rfc3339_now


class State:
    """The emulator's state as tests and the verbs change it: the resource registry, direct (a part of :class:`KubeEmulator`)."""

    # ----------------------------------------------------------------- resource registry

    def register(self, res: ResourceType) -> None:
        """Add (or re-add) a resource type; its endpoints and discovery entries appear."""
        self._routes[(res.group, res.version, res.plural)] = res
        self._tables.setdefault(res.key, Table(res))
        self._resolved.clear()
        self._removed.pop(res.key, None)

    def remove_crd(self, name: str) -> None:
        """Uninstall a resource by ``plural.group`` or plural: its objects are deleted,
        open watches end and its endpoints (and discovery) 404."""
        res = self.resource(name)
        table = self._tables.pop(res.key)
        del self._routes[(res.group, res.version, res.plural)]
        self._removed[res.key] = res
        self._resolved.clear()
        for watcher in table.watchers:
            watcher.offer(CLOSE_STREAM)

    def add_crd(self, name: str) -> None:
        """Re-install a resource removed with ``remove_crd``."""
        for res in self._removed.values():
            if name in (res.qualified, res.plural):
                self.register(res)
                return
        raise KeyError(name)

    @property
    def resources(self) -> list[ResourceType]:
        return [t.res for t in self._tables.values()]

    def resource(self, kind_or_plural: str, api_version: str | None = None) -> ResourceType:
        """Resolve ``pods``/``Pod``/``pod``/``deployments.apps``/``podgroups.scheduling.run.ai``
        (core wins on ambiguity, e.g. ``events``)."""
        cached = self._resolved.get((kind_or_plural, api_version))
        if cached is not None:
            return cached
        wanted = kind_or_plural.lower()
        group = None if api_version is None else (
            api_version.rsplit("/", 1)[0] if "/" in api_version else "")
        candidates = []
        for table in self._tables.values():
            res = table.res
            names = {res.plural, res.kind.lower(), res.qualified, f"{res.kind.lower()}.{res.group}"}
            if wanted in names and (group is None or res.group == group):
                candidates.append(res)
        if not candidates:
            raise KeyError(f"unknown resource {kind_or_plural!r}")
        res = self._resolved[(kind_or_plural, api_version)] = min(
            candidates, key=lambda r: r.group != "")
        return res

    def _table(self, kind_or_plural: str, api_version: str | None = None) -> Table:
        return self._tables[self.resource(kind_or_plural, api_version).key]

    # ----------------------------------------------------------------- direct state access

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def put(self, obj: Obj) -> Obj:
        """Create or replace any object (by apiVersion/kind) without HTTP; returns a copy."""
        obj = cloned(obj)
        table = self._table(obj["kind"], obj.get("apiVersion", "v1"))
        meta = obj.setdefault("metadata", {})
        if table.res.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        obj["apiVersion"] = table.res.api_version
        old = table.objects.get(object_key(obj))
        if old is None:
            return cloned(self._insert(table, self._stamp_new(obj)))
        for preserved in ("uid", "creationTimestamp"):
            meta.setdefault(preserved, metadata_of(old).get(preserved))
        meta.pop("resourceVersion", None)
        return cloned(self._update(table, old, obj, subresource="*"))

    def get(self, kind_or_plural: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._table(kind_or_plural).objects.get((namespace or "", name))
        return None if obj is None else cloned(obj)

    def list(self, kind_or_plural: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        table = self._table(kind_or_plural)
        flt = ListFilter(namespace, parse_label_selector(label_selector),
                      parse_field_selector(field_selector))
        return [cloned(o) for _, o in sorted(table.objects.items()) if flt(o)]

    def delete(self, kind_or_plural: str, namespace: str | None, name: str,
               propagation: str = "Background") -> Obj | None:
        """Delete like the API would (finalizers, GC); returns the last state or None."""
        table = self._table(kind_or_plural)
        obj = table.objects.get((namespace or "", name))
        if obj is None:
            return None
        return cloned(self._delete(table, obj, propagation))

    def patch_object(self, kind_or_plural: str, namespace: str | None, name: str,
                     patch: Obj) -> Obj:
        """Merge-patch any part of an object (status included); KeyError if absent."""
        table = self._table(kind_or_plural)
        old = table.objects[(namespace or "", name)]
        new = merge_patch(old, cloned(patch))
        return cloned(self._update(table, old, new, subresource="*"))

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0,
                       message: str | None = None) -> Any:
        """Re-check ``predicate`` (sync or async) whenever state changes or a request
        arrives (and at least every 50 ms) until it is truthy; TimeoutError at deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(message or f"condition not met within {timeout}s")
            fut = loop.create_future()
            self._waiters.add(fut)
            try:
                await asyncio.wait([fut], timeout=min(remaining, 0.05))
            finally:
                self._waiters.discard(fut)

    def _notify(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    # ----------------------------------------------------------------- watch hooks

    def compact(self) -> None:
        """Forget all history: lists/watches at any older resourceVersion now get 410."""
        for table in self._tables.values():
            table.history.clear()
            table.history_rvs.clear()
            table.floor = self._rv

    async def send_bookmarks(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every watch that allows them,
        and wait until they were written."""
        watchers = [w for t in self._tables.values() for w in t.watchers if w.bookmarks]
        for watcher in watchers:
            watcher.offer(self._bookmark(watcher.res))
        if watchers:
            tasks = [asyncio.ensure_future(w.idle.wait()) for w in watchers]
            _, pending = await asyncio.wait(tasks, timeout=5)
            for task in pending:
                task.cancel()

    def close_watches(self) -> int:
        """End every open watch stream (clients see EOF and reconnect); returns how many."""
        watchers = [w for t in self._tables.values() for w in t.watchers]
        for watcher in watchers:
            watcher.offer(CLOSE_STREAM)
        return len(watchers)

    @property
    def watch_count(self) -> int:
        return sum(len(t.watchers) for t in self._tables.values())

    def _bookmark(self, res: ResourceType, annotations: Obj | None = None) -> tuple[str, Obj]:
        meta: Obj = {"resourceVersion": str(self._rv)}
        if annotations:
            meta["annotations"] = annotations
        return ("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta})

    # ----------------------------------------------------------------- store primitives

    def _stamp_new(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", rfc3339_now())
        meta.setdefault("generation", 1)
        meta.pop("resourceVersion", None)
        return obj

    def _emit(self, table: Table, ev: WatchEvent) -> None:
        table.history.append(ev)
        table.history_rvs.append(ev.rv)
        if len(table.history) > self.history_limit:
            drop = len(table.history) // 2
            table.floor = table.history_rvs[drop - 1]
            del table.history[:drop], table.history_rvs[:drop]
        for watcher in table.watchers:
            item = watcher.translate(ev)
            if item is not None:
                watcher.offer(item)
        self._notify()

    def _index_owners(self, table: Table, obj: Obj, add: bool) -> None:
        ref = (table.res.key, object_key(obj))
        for owner in metadata_of(obj).get("ownerReferences") or []:
            uid = owner.get("uid")
            if not uid:
                continue
            if add:
                self._dependents.setdefault(uid, set()).add(ref)
            elif uid in self._dependents:
                self._dependents[uid].discard(ref)
                if not self._dependents[uid]:
                    del self._dependents[uid]

    def _store(self, table: Table, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if old is not None:
            self._index_owners(table, old, add=False)
        table.set(obj)
        self._index_owners(table, obj, add=True)
        self._emit(table, WatchEvent(self._rv, "MODIFIED" if old else "ADDED", obj, old))
        return obj

    def _insert(self, table: Table, obj: Obj) -> Obj:
        return self._store(table, obj, None)

    def _update(self, table: Table, old: Obj, new: Obj, subresource: str | None) -> Obj:
        """Commit ``new`` over ``old``: keep identity fields, apply subresource rules, bump
        generation on spec change, skip no-ops, finish deletion once finalizers are gone."""
        new = dict(new)
        meta = new["metadata"] = dict(new.get("metadata") or {})
        old_meta = metadata_of(old)
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in old_meta:
                meta[k] = old_meta[k]
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if subresource != "*":
                meta.pop(k, None)
                if k in old_meta:
                    meta[k] = old_meta[k]
        new["kind"], new["apiVersion"] = old.get("kind"), old.get("apiVersion")
        if subresource == "status":
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                del new["status"]
            meta = new["metadata"] = dict(old_meta)
        elif subresource is None and table.res.status:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        meta["generation"] = old_meta.get("generation", 1)
        if subresource != "status" and new.get("spec") != old.get("spec"):
            meta["generation"] += 1
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return old
        if subresource != "*" and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(table, new)  # the last finalizer was removed
        return self._store(table, new, old)

    def _remove(self, table: Table, obj: Obj) -> Obj:
        self._rv += 1
        final = {**obj, "metadata": {**metadata_of(obj), "resourceVersion": str(self._rv)}}
        table.discard(object_key(obj))
        self._index_owners(table, obj, add=False)
        self._emit(table, WatchEvent(self._rv, "DELETED", final))
        self._collect_garbage(metadata_of(obj).get("uid"))
        if table.res.key == ("", "namespaces"):
            self._purge_namespace(metadata_of(obj)["name"])
        return final

    def _delete(self, table: Table, obj: Obj, propagation: str = "Background") -> Obj:
        if propagation == "Orphan":
            self._orphan_dependents(metadata_of(obj).get("uid"))
        if metadata_of(obj).get("finalizers"):
            if metadata_of(obj).get("deletionTimestamp"):
                return obj
            new = {**obj, "metadata": {**metadata_of(obj), "deletionTimestamp": rfc3339_now(),
                                       "deletionGracePeriodSeconds": 0}}
            return self._update(table, obj, new, subresource="*")
        return self._remove(table, obj)

    def _collect_garbage(self, uid: str | None) -> None:
        for res_key, key in sorted(self._dependents.pop(uid or "", set())):
            table = self._tables.get(res_key)
            dependent = table.objects.get(key) if table else None
            if dependent is not None:
                self._delete(table, dependent)

    def _orphan_dependents(self, uid: str | None) -> None:
        for res_key, key in sorted(self._dependents.pop(uid or "", set())):
            table = self._tables.get(res_key)
            dependent = table.objects.get(key) if table else None
            if dependent is None:
                continue
            refs = [r for r in metadata_of(dependent).get("ownerReferences", []) if r.get("uid") != uid]
            new = {**dependent, "metadata": {**metadata_of(dependent), "ownerReferences": refs}}
            if not refs:
                new["metadata"].pop("ownerReferences")
            self._update(table, dependent, new, subresource="*")

    def _purge_namespace(self, namespace: str) -> None:
        for table in list(self._tables.values()):
            if table.res.namespaced:
                for key in sorted(k for k in table.objects if k[0] == namespace):
                    if key in table.objects:  # GC may already have taken it
                        self._delete(table, table.objects[key])
