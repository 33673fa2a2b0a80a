"""Recording core/v1 Events, shared by the webhook and the grouper: what
`kubectl describe` shows an operator about podgang's decisions."""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

from kubernetes_asyncio import client

from podgang.api import Api, describe

log = logging.getLogger("podgang.kube")


def object_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A core/v1 ObjectReference to ``obj`` (for an event's involvedObject)."""
    md = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "name": md.get("name"),
        "namespace": md.get("namespace"),
        "uid": md.get("uid"),
        "resourceVersion": md.get("resourceVersion"),
    }
    return {k: v for k, v in ref.items() if v}


@dataclass
class _Seen:
    name: str
    namespace: str
    count: int
    first: str


class EventRecorder:
    """Records core/v1 Events that tell an operator what happened and why.

    A repeat of the same (object, type, reason, message) within ten minutes
    increments the existing event's count instead of creating another. Never
    raises: an event that cannot be written is logged and dropped.
    """

    REPEAT_WINDOW = 600.0
    MAX_REMEMBERED = 4096  # events remembered for counting repeats; the oldest go first

    def __init__(self, api: client.ApiClient, component: str, *, instance: str = "", timeout: float = 5.0):
        self._api = Api(api, timeout=timeout)
        self.component = component
        self.instance = instance or os.environ.get("HOSTNAME", "") or component
        self.timeout = timeout
        self._seen: OrderedDict[tuple, tuple[float, _Seen]] = OrderedDict()

    async def emit(self, obj: Mapping[str, Any], reason: str, message: str, type: str = "Normal") -> None:
        ref = object_reference(obj)
        namespace = ref.get("namespace") or "default"
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        key = (ref.get("uid") or (ref.get("kind"), namespace, ref.get("name")), type, reason, message)
        mono = time.monotonic()
        self._forget_old(mono)
        try:
            seen = self._seen.get(key)
            if seen is not None:
                entry = seen[1]
                entry.count += 1
                await self._api.merge_patch(
                    f"/api/v1/namespaces/{entry.namespace}/events/{entry.name}",
                    {"count": entry.count, "lastTimestamp": now},
                )
                self._seen[key] = (mono, entry)
                self._seen.move_to_end(key)
                return
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{ref.get('name', 'podgang')}.", "namespace": namespace},
                "involvedObject": ref,
                "reason": reason,
                "message": message[:1024],
                "type": type,
                "source": {"component": self.component},
                "reportingComponent": f"podgang.io/{self.component}",
                "reportingInstance": self.instance[:128],
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            created = await self._api.create(f"/api/v1/namespaces/{namespace}/events", body)
            name = created["metadata"]["name"]
            self._seen[key] = (mono, _Seen(name, namespace, 1, now))
        except Exception as exc:  # events are best effort by design
            self._seen.pop(key, None)
            log.warning(
                "could not record event",
                extra={"fields": {"reason": reason, "object": ref.get("name"), "error": describe(exc)}},
            )

    def _forget_old(self, now: float) -> None:
        """Drop repeats older than the window, and the oldest beyond the bound."""
        while self._seen:
            key, (seen_at, _) = next(iter(self._seen.items()))
            if now - seen_at <= self.REPEAT_WINDOW and len(self._seen) < self.MAX_REMEMBERED:
                break
            del self._seen[key]
