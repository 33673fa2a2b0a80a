"""Talking to the Kubernetes API, shared by the webhook, the grouper and ``certs``:
building an API client from flags, and recording events.

kubernetes_asyncio 36 traps handled here and to keep in mind elsewhere: there is no
default request timeout (pass ``_request_timeout`` on every call); a dict given to
``CustomObjectsApi.patch_*`` is sent as JSON-patch unless
``_content_type='application/merge-patch+json'`` is passed.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Mapping

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.rest import ApiException

log = logging.getLogger("podgang.kube")

IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


async def make_api_client(kubeconfig: str | None = None) -> client.ApiClient:
    """An API client from ``kubeconfig`` if given, else in-cluster config when
    running in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``.

    Raises RuntimeError with what to do when none of them works.
    """
    configuration = client.Configuration()
    try:
        if kubeconfig:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(IN_CLUSTER_TOKEN):
            config.load_incluster_config(client_configuration=configuration)
        else:
            await config.load_kube_config(client_configuration=configuration)
    except Exception as exc:  # the loaders raise several unrelated types
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise RuntimeError(
            f"cannot configure Kubernetes API access from {where} or in-cluster config: {exc}; "
            f"pass --kubeconfig PATH or run inside a pod with a service account"
        ) from exc
    return client.ApiClient(configuration=configuration)


def status_reason(exc: BaseException) -> str:
    """A one-line description of an API failure for logs and events."""
    if isinstance(exc, ApiException):
        message = ""
        try:
            import orjson

            message = orjson.loads(exc.body or b"{}").get("message", "")
        except Exception:
            message = (exc.body or "")[:200] if isinstance(exc.body, str) else ""
        return f"HTTP {exc.status} {exc.reason}: {message}".strip()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


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
        self._core = client.CoreV1Api(api)
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
                await self._core.patch_namespaced_event(
                    entry.name,
                    entry.namespace,
                    {"count": entry.count, "lastTimestamp": now},
                    _request_timeout=self.timeout,
                    _content_type="application/merge-patch+json",
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
            created = await self._core.create_namespaced_event(namespace, body, _request_timeout=self.timeout)
            name = created.metadata.name if hasattr(created, "metadata") else created["metadata"]["name"]
            self._seen[key] = (mono, _Seen(name, namespace, 1, now))
        except Exception as exc:  # events are best effort by design
            self._seen.pop(key, None)
            log.warning(
                "could not record event",
                extra={"fields": {"reason": reason, "object": ref.get("name"), "error": status_reason(exc)}},
            )

    def _forget_old(self, now: float) -> None:
        """Drop repeats older than the window, and the oldest beyond the bound."""
        while self._seen:
            key, (seen_at, _) = next(iter(self._seen.items()))
            if now - seen_at <= self.REPEAT_WINDOW and len(self._seen) < self.MAX_REMEMBERED:
                break
            del self._seen[key]
