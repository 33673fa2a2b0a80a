"""List-then-watch for one resource (in one namespace or all), feeding the cache.

- Lists in pages, then watches from the list's resourceVersion with bookmarks.
- Every event moves the resourceVersion on (BOOKMARKs only do that); a watch the
  server ends is resumed from there.
- 410 Gone (an expired resourceVersion, as an HTTP status or an ERROR event)
  relists; the relist is diffed against the store, so nothing that happened
  while disconnected is lost and deletions are noticed.
- Errors back off exponentially with jitter, capped; every restart is counted. An error is
  logged when it begins or changes, and the recovery once: a watch RBAC forbids is one
  warning, not one every 30 s.
- A resource that is not served (a CRD that is not installed) is logged once and
  probed again rarely — or soon, when an object names an owner of its kind or one of it was
  just written (``probe_soon``: the operator or the scheduler was installed meanwhile), at
  most every ``probe_spacing``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from podgang.api import Api, ApiError, Gone, NotFound
from podgang.kinds import Resource
from podgang.waits import event_set_within

from podgang.gang import Obj, is_newer, key_of, resource_version

log = logging.getLogger("podgang.grouper.informer")

Handler = Callable[[str, Obj | None, Obj | None], None]


class Informer:
    def __init__(
        self,
        api: Api,
        resource: Resource,
        namespace: str | None,
        *,
        store: dict[str, Obj],
        slim: Callable[[Mapping[str, Any]], Obj | None],
        keep: Callable[[Obj], bool],
        handler: Handler,
        metrics: Any = None,
        watch_timeout: int = 300,
        page_size: int = 500,
        backoff_base: float = 0.2,
        backoff_cap: float = 30.0,
        optional: bool = False,
        absent_probe_interval: float = 600.0,
        probe_spacing: float = 5.0,
        query: Mapping[str, str] | None = None,
    ):
        self.api = api
        self.resource = resource
        self._versions = resource.versions
        self._versions_asked = 0  # versions asked for (and not served) since the last list
        self.namespace = namespace
        self.store = store
        self.slim = slim
        self.keep = keep
        self.handler = handler
        self.metrics = metrics
        self.watch_timeout = watch_timeout
        self.page_size = page_size
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.optional = optional
        self.absent_probe_interval = absent_probe_interval
        self.probe_spacing = probe_spacing
        self._probe = asyncio.Event()  # set: probe an absent resource now
        self._probed_at = 0.0
        self.query = dict(query or {})  # e.g. a labelSelector, on every list and watch
        self.resource_version: str | None = None
        self._watch_started: float | None = None  # when the current watch request began
        self._delivered = 0  # events the current watch request delivered
        self._failing: str | None = None  # the error last logged, until the resource is listed again
        self.synced = asyncio.Event()
        self.absent = False
        self.on_presence: Callable[[bool], None] | None = None
        self.lists = 0
        self.watches = 0
        self.name = resource.plural if not resource.group else f"{resource.plural}.{resource.group}"
        if namespace:
            self.name += f" in {namespace}"

    @property
    def path(self) -> str:
        return self.resource.path(self.namespace)

    def _restart(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.watch_restarts.labels(resource=self.resource.plural, reason=reason).inc()

    def _failed(self, failures: int) -> int:
        """The failure count after an error. A watch that had been working (it
        delivered events) and then broke, e.g. a load balancer cutting long
        connections, starts the count afresh: otherwise every such cut would double
        the wait before the next reconnect, up to the cap."""
        watching, self._watch_started = self._watch_started, None
        if watching is not None and self._delivered:
            return 1
        return failures + 1

    def _backoff(self, failures: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * (2 ** min(failures, 16)))
        return random.uniform(ceiling / 2, ceiling)

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                if self.resource_version is None:
                    await self._relist()
                    self._versions_asked = 0  # served at this version: a later 404 asks every version again
                    self._recovered()
                    if self.absent or not self.synced.is_set():
                        if self.absent:
                            log.info("resource is served now: watching it", extra={"fields": {"resource": self.name}})
                        self.absent = False
                        if self.on_presence:
                            self.on_presence(True)
                    self.synced.set()
                started = time.monotonic()
                self._watch_started = started
                got = await self._watch()
                self._watch_started = None
                if got or time.monotonic() - started > 1.0:
                    failures = 0
                    self._recovered()
                    self._restart("closed")
                    continue
                failures += 1  # closed at once with nothing in it: do not spin
                self._restart("closed")
            except asyncio.CancelledError:
                raise
            except Gone:
                log.info("resourceVersion expired: relisting",
                         extra={"fields": {"resource": self.name, "resourceVersion": self.resource_version}})
                self.resource_version = None
                self._restart("expired")
                failures = 0
                continue
            except ApiError as exc:
                if isinstance(exc, NotFound):
                    if self.resource_version is None:
                        if self._next_version():
                            continue  # the kind may be served at another of its versions
                        await self._absent(exc)
                    else:
                        self.resource_version = None  # stopped being served? relist to find out
                        self._restart("http_404")
                    continue
                failures = self._failed(failures)
                self._restart(f"http_{exc.status}" if exc.status else "error")
                said, self._failing = self._failing, str(exc)
                log.log(logging.WARNING if said != self._failing else logging.DEBUG,
                        "watch failed: backing off (said again when the error changes)", extra={"fields": {
                            "resource": self.name, "error": str(exc), "failures": failures}})
            await asyncio.sleep(self._backoff(failures))

    def _recovered(self) -> None:
        """Listed or watched again after an error that was logged: say so, once."""
        if self._failing is not None:
            log.info("watching again", extra={"fields": {"resource": self.name, "after": self._failing}})
            self._failing = None

    async def _absent(self, exc: ApiError) -> None:
        if not self.absent:
            self.absent = True
            level = logging.INFO if self.optional else logging.ERROR
            log.log(level, f"{self.name} is not served (CRD not installed?): not watching it; "
                           f"probing again every {int(self.absent_probe_interval)}s, or when an object it "
                           f"owns comes",
                    extra={"fields": {"resource": self.name, "error": str(exc)}})
            if self.on_presence:
                self.on_presence(False)
            # everything we had is gone
            for key in [k for k in self.store if self._mine(k)]:
                old = self.store.pop(key)
                self.handler(self.resource.kind, old, None)
        self.synced.set()
        await event_set_within(self._probe, self.absent_probe_interval)
        # asked for by an event: not more often than every probe_spacing, however many ask
        await asyncio.sleep(max(0.0, self._probed_at + self.probe_spacing - time.monotonic()))
        self._probe.clear()
        self._probed_at = time.monotonic()
        self._versions_asked = 0  # the next probe asks every version again

    def probe_soon(self) -> None:
        """Something names an object of this resource: if it is not served, look again now
        (its CRD may have been installed since the last probe) instead of at the next
        ``absent_probe_interval``."""
        if self.absent:
            self._probe.set()

    def _next_version(self) -> bool:
        """Move on to the resource's next version (MPIJob: v2beta1, else v1); False once
        every version was asked for since it was last served — whichever it was served at
        (training-operator's MPIJob CRD replaced by mpi-operator's is found at once)."""
        versions = self._versions
        at = versions.index(self.resource.version)
        self.resource = replace(self.resource, version=versions[(at + 1) % len(versions)])
        self._versions_asked += 1
        return self._versions_asked < len(versions)

    def _mine(self, key: str) -> bool:
        return self.namespace is None or key.startswith(self.namespace + "/")

    async def _page(self, cont: str | None) -> Any:
        return await self.api.get(self.path, limit=str(self.page_size), **self.query,
                                  **({"continue": cont} if cont else {}))

    def _fold_page(self, body: Mapping[str, Any], fresh: dict[str, Obj]) -> None:
        """Slim one page's items into ``fresh``."""
        for raw in body.get("items") or ():
            if not raw.get("kind"):
                raw["kind"] = self.resource.kind
                raw["apiVersion"] = self.resource.api_version
            slim = self.slim(raw)
            if slim is not None and self.keep(slim):
                md = slim["metadata"]
                fresh[key_of(md.get("namespace") or "", md.get("name") or "")] = slim
        if not self.synced.is_set():
            # While the first list fills the cache, every full collection walked the
            # whole cache again: 3 of the 5 s it took to load 100,000 pods. Everything
            # that exists now is exempted from collection: it is still freed by
            # reference counting (the cache holds no cycles); only cycles alive at
            # start-up are never collected, once.
            gc.freeze()

    async def _relist(self) -> None:
        self.lists += 1
        fresh: dict[str, Obj] = {}
        list_rv = ""
        page = asyncio.ensure_future(self._page(None))
        try:
            while True:
                body = await page
                meta = body.get("metadata") or {}
                list_rv = str(meta.get("resourceVersion") or list_rv)
                cont = meta.get("continue")
                if cont:
                    # ask for the next page before slimming this one: the server encodes it
                    # meanwhile (a list of 100,000 pods is 200 pages, each a wait otherwise)
                    page = asyncio.ensure_future(self._page(cont))
                self._fold_page(body, fresh)
                if not cont:
                    break
        finally:
            if not page.done():
                page.cancel()  # cancelled or failed while a page was on its way
            elif not page.cancelled():
                page.exception()  # looked at: a failed page nobody awaited is not logged as lost
        # diff against what we had: adds, changes and deletions since the last watch
        for key in [k for k in self.store if self._mine(k) and k not in fresh]:
            old = self.store.pop(key)
            self.handler(self.resource.kind, old, None)
        for key, new in fresh.items():
            old = self.store.get(key)
            if old is not None and resource_version(old) == resource_version(new):
                continue
            self.store[key] = new
            self.handler(self.resource.kind, old, new)
        self.resource_version = list_rv
        log.debug("listed", extra={"fields": {"resource": self.name, "count": len(fresh), "resourceVersion": list_rv}})

    async def _watch(self) -> int:
        self.watches += 1
        count = 0
        self._delivered = 0
        async for event in self.api.watch(self.path, resource_version=self.resource_version or "",
                                          timeout_seconds=self.watch_timeout, query=self.query):
            kind = event.get("type")
            obj = event.get("object") or {}
            rv = resource_version(obj)
            if rv:
                self.resource_version = rv
            count += 1
            self._delivered = count
            if kind == "BOOKMARK":
                continue
            if not obj.get("kind"):
                obj["kind"] = self.resource.kind
                obj["apiVersion"] = self.resource.api_version
            if kind == "DELETED":
                self.remove(obj)
            elif kind in ("ADDED", "MODIFIED"):
                self.upsert(obj)
        return count

    # -- also used for write-through of the grouper's own writes

    def upsert(self, raw: Mapping[str, Any]) -> None:
        """Put a (full) object from the API into the store, unless the store
        already holds a newer version."""
        slim = self.slim(raw)
        md = (slim or raw).get("metadata") or {}
        key = key_of(md.get("namespace") or "", md.get("name") or "")
        old = self.store.get(key)
        if slim is None or not self.keep(slim):
            if old is not None:
                del self.store[key]
                self.handler(self.resource.kind, old, None)
            return
        if old is not None and not is_newer(resource_version(slim), resource_version(old)):
            return
        self.store[key] = slim
        self.handler(self.resource.kind, old, slim)

    def remove(self, raw: Mapping[str, Any]) -> None:
        md = raw.get("metadata") or {}
        key = key_of(md.get("namespace") or "", md.get("name") or "")
        old = self.store.get(key)
        if old is None:
            return
        uid = md.get("uid")
        if uid and old["metadata"].get("uid") and uid != old["metadata"].get("uid"):
            return  # an older incarnation
        del self.store[key]
        self.handler(self.resource.kind, old, None)
