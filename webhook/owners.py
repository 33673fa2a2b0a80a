"""Owner look-ups for the mutating webhook: a bounded cache with a time to live.

Admitting a 1,000-replica scale-up must cost one API call per distinct owner, not
one per pod: entries are keyed by (namespace, kind, name, uid), concurrent misses
for the same owner share one call, and only what the rules need of an owner is
kept (kind, name, uid, ownerReferences), so a full cache stays small.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Callable

from podgang.api import Api, ApiError, Forbidden, NotFound, Unauthorized
from podgang.kinds import resource_for, workload_kind
from podgang.metrics import WebhookMetrics
from podgang.objects import OwnerRef

Key = tuple[str, str, str, str]


class OwnerLookupFailed(Exception):
    """An owner could not be fetched; the message says which and why (one line)."""


class _Refused(OwnerLookupFailed):
    """The API answered, and the answer will not change in a moment (remembered briefly)."""


FAILURE_TTL = 5.0
REMEMBERED = (Unauthorized, Forbidden, NotFound)  # answers that will not change in a moment


#: where a trimmed owner keeps what the admission of its pods should tell (an OrderedReady
#: StatefulSet is not one gang), computed from the whole object before it is trimmed
NOTE = "podgangNote"


def trimmed(obj: dict[str, Any], keep_labels: tuple[str, ...] = (),
            note: Callable[[dict[str, Any]], str | None] | None = None,
            keep_annotations: tuple[str, ...] = ()) -> dict[str, Any]:
    """The parts of an owner the grouping rules read (and the labels ``keep_labels``,
    e.g. ``podgang.io/skip``, the annotations ``keep_annotations``), and ``note(obj)`` under
    :data:`NOTE` when it says something. A kind of multi-pod replicas (an LWS) keeps its
    spec's sizes and its pod templates' labels and scheduler: its pods' gang and replica
    leaf depend on them (one group for all replicas, the role its template names)."""
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    kept: dict[str, Any] = {"name": md.get("name"), "namespace": md.get("namespace"), "uid": md.get("uid")}
    refs = md.get("ownerReferences")
    if isinstance(refs, list) and refs:
        kept["ownerReferences"] = refs
    labels = md.get("labels")
    if keep_labels and isinstance(labels, dict):
        wanted = {k: labels[k] for k in keep_labels if k in labels}
        if wanted:
            kept["labels"] = wanted
    notes = md.get("annotations")
    if keep_annotations and isinstance(notes, dict):
        wanted = {k: notes[k] for k in keep_annotations if k in notes}
        if wanted:
            kept["annotations"] = wanted
    out = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": kept}
    entry = workload_kind(obj)
    if entry is not None and (entry.replica_label or entry.role_replica_label) and isinstance(obj.get("spec"), dict):
        out["spec"] = entry.slim_spec(obj["spec"], _template_keys)
    said = note(obj) if note is not None else None
    if said:
        out[NOTE] = said
    return out


def _template_keys(template: Any) -> dict[str, Any]:
    """What of a pod template decides its pods' gang: its labels and its scheduler."""
    template = template if isinstance(template, dict) else {}
    md = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
    spec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    out: dict[str, Any] = {"metadata": {"labels": dict(md.get("labels") or {})}}
    if spec.get("schedulerName"):
        out["spec"] = {"schedulerName": spec["schedulerName"]}
    return out


class OwnerCache:
    """Owners by (namespace, kind, name, uid), fetched at most once per ``ttl``."""

    def __init__(
        self,
        api: Api | None,
        metrics: WebhookMetrics,
        *,
        max_size: int = 10_000,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        keep_labels: tuple[str, ...] = ("podgang.io/skip",),
        note: Callable[[dict[str, Any]], str | None] | None = None,
        keep_annotations: tuple[str, ...] = ("podgang.io/min-available", "podgang.io/min-member"),
    ):
        self.keep_labels = tuple(keep_labels)
        self.keep_annotations = tuple(keep_annotations)
        self.note = note
        self.api = api
        self.metrics = metrics
        self.max_size = max(1, max_size)
        self.ttl = ttl
        self.clock = clock
        self._entries: OrderedDict[Key, tuple[float, dict[str, Any]]] = OrderedDict()
        # owners the API answered with an error (403, 404, another uid): asked again only
        # after failure_ttl, so a scale-up under a missing RBAC rule is not one call per pod.
        # A timeout or an unreachable API is not remembered: the next pod tries again.
        self.failure_ttl = min(FAILURE_TTL, ttl)
        self._failures: OrderedDict[Key, tuple[float, str]] = OrderedDict()
        self._inflight: dict[Key, asyncio.Future] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, namespace: str, obj: dict[str, Any]) -> None:
        """Remember an owner (pre-warming, tests)."""
        slim = trimmed(obj, self.keep_labels, self.note, self.keep_annotations)
        md = slim["metadata"]
        self._store((namespace, str(slim.get("kind")), str(md.get("name")), str(md.get("uid") or "")), slim)

    async def get(self, namespace: str, ref: OwnerRef, *, timeout: float | None = None) -> dict[str, Any]:
        """The owner ``ref`` points at, from the cache or the API.

        Raises :class:`OwnerLookupFailed` when it cannot be fetched, does not exist,
        or is another object of the same name (a different uid).
        """
        key = (namespace, ref.kind, ref.name, ref.uid)
        entry = self._entries.get(key)
        if entry is not None:
            if entry[0] > self.clock():
                self.metrics.owner_cache_hits.inc()
                return entry[1]
            del self._entries[key]
        failed = self._failures.get(key)
        if failed is not None:
            if failed[0] > self.clock():
                raise OwnerLookupFailed(f"{failed[1]} (remembered for {self.failure_ttl:g}s)")
            del self._failures[key]
        self.metrics.owner_cache_misses.inc()
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            obj = await self._fetch(namespace, ref, timeout)
        except _Refused as exc:
            error = OwnerLookupFailed(str(exc))
            if self.failure_ttl > 0:
                self._failures[key] = (self.clock() + self.failure_ttl, str(exc))
                while len(self._failures) > self.max_size:
                    self._failures.popitem(last=False)
            future.set_exception(error)
            future.exception()
            raise error from None
        except BaseException as exc:
            error = exc if isinstance(exc, OwnerLookupFailed) else OwnerLookupFailed(
                f"{ref.kind}/{ref.name}: look-up interrupted"
            )
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waits
            raise
        else:
            self._store(key, obj)
            future.set_result(obj)
            return obj
        finally:
            self._inflight.pop(key, None)

    async def _fetch(self, namespace: str, ref: OwnerRef, timeout: float | None) -> dict[str, Any]:
        resource = resource_for(ref.api_version, ref.kind)
        what = f"{ref.kind.lower()}/{ref.name} in namespace {namespace}"
        if resource is None:
            raise OwnerLookupFailed(f"{what}: podgang cannot look up {ref.api_version} {ref.kind}")
        if self.api is None:
            raise OwnerLookupFailed(f"{what}: no Kubernetes API access configured")
        try:
            body = await self.api.get(resource.path(namespace, ref.name), timeout=timeout)
        except ApiError as exc:
            self.metrics.api_error("get_owner", exc.status or None)
            failure = _Refused if isinstance(exc, REMEMBERED) else OwnerLookupFailed
            raise failure(f"{what}: {exc}") from None
        if not isinstance(body, dict):
            self.metrics.api_error("get_owner", 200)
            raise OwnerLookupFailed(f"{what}: the answer is not an object")
        obj = trimmed(body, self.keep_labels, self.note, self.keep_annotations)
        uid = obj["metadata"].get("uid")
        if ref.uid and uid != ref.uid:
            raise _Refused(f"{what}: found uid {uid}, the pod points at uid {ref.uid} (the owner was replaced)")
        return obj

    def expiry(self, namespace: str, chain: list[dict[str, Any]]) -> float:
        """When the first of ``chain``'s cached owners expires (a decision derived
        from them is good until then)."""
        soonest = self.clock() + self.ttl
        for obj in chain:
            md = obj.get("metadata") or {}
            entry = self._entries.get((namespace, str(obj.get("kind")), str(md.get("name")), str(md.get("uid") or "")))
            soonest = min(soonest, entry[0]) if entry is not None else self.clock()
        return soonest

    def _store(self, key: Key, obj: dict[str, Any]) -> None:
        self._entries[key] = (self.clock() + self.ttl, obj)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_size:
            self._entries.popitem(last=False)
