"""Evicting the remaining members of a stale gang through the Eviction API (spec §5).

``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` with a policy/v1 Eviction, so
PodDisruptionBudgets are respected. Per pod:

- 200/201: evicted.
- 404: already gone; counts as success.
- 409 with the pod's uid as a precondition: the pod was deleted and recreated under
  the same name (a StatefulSet pod, or an earlier attempt that timed out had worked);
  a GET tells: a different uid or none means the pod we meant is gone.
  Otherwise (a PDB update conflict) it is retried.
- 429 (a PDB refuses), any other error, timeouts and connection failures: retried
  with exponential backoff, ``attempts`` tries in all; then refused with the
  API's message and causes (:class:`podgang.api.ApiError` says it in one line).

``stop`` is asked before every try, the first and each retry: a reason (the gang
recovered while a PDB held its pods) ends the eviction of the pods not evicted yet,
which are then *kept*; None goes on.

Pods are evicted concurrently, at most ``concurrency`` at a time. ``sleep`` is
injectable so tests need not wait.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from podgang.api import Api, ApiError, Conflict, NotFound
from podgang.fence import Fence, Fenced
from podgang.kinds import POD

MAX_BACKOFF = 30.0


@dataclass
class EvictionResult:
    evicted: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (pod name, reason)
    gone: list[str] = field(default_factory=list)  # 404: already gone counts as success
    kept: list[str] = field(default_factory=list)  # not evicted: ``stop`` said why before a try
    stopped: str = ""  # that reason (the first one given)

    @property
    def ok(self) -> bool:
        """Every pod is evicted or gone."""
        return not self.refused and not self.kept


def eviction_body(name: str, namespace: str, uid: str | None = None) -> dict[str, Any]:
    """A policy/v1 Eviction; with ``uid`` it only applies to that incarnation of the pod."""
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
    }
    if uid:
        body["deleteOptions"] = {"preconditions": {"uid": uid}}
    return body


def _pod_key(pod: Any) -> tuple[str, str, str | None]:
    md = pod.get("metadata") if isinstance(pod, Mapping) else None
    md = md if isinstance(md, Mapping) else {}
    name, namespace, uid = md.get("name"), md.get("namespace"), md.get("uid")
    return (
        name if isinstance(name, str) else "",
        namespace if isinstance(namespace, str) else "",
        uid if isinstance(uid, str) and uid else None,
    )


EVICTED, GONE, REFUSED, KEPT = "evicted", "gone", "refused", "kept"


async def _evict_one(
    api: Api,
    name: str,
    namespace: str,
    uid: str | None,
    *,
    attempts: int,
    backoff: float,
    sleep: Callable[[float], Awaitable[Any]],
    stop: Callable[[], str | None],
) -> tuple[str, str]:
    body = eviction_body(name, namespace, uid)
    last = "not attempted"
    for attempt in range(1, attempts + 1):
        why = stop()
        if why:
            return KEPT, why
        try:
            await api.create(f"{POD.path(namespace, name)}/eviction", body)
            return EVICTED, ""
        except NotFound:
            return GONE, ""
        except Fenced as exc:  # no longer leading: kept, not retried
            return KEPT, str(exc)
        except ApiError as exc:  # 429 (a PDB refuses), 5xx, no answer: retried
            last = str(exc)
            if isinstance(exc, Conflict) and uid and await _replaced(api, name, namespace, uid):
                return GONE, ""
        if attempt < attempts:
            await sleep(min(backoff * 2 ** (attempt - 1), MAX_BACKOFF))
    return REFUSED, f"{last} (gave up after {attempts} attempt{'s' if attempts != 1 else ''})"


async def _replaced(api: Api, name: str, namespace: str, uid: str) -> bool:
    """After a 409: is the pod with ``uid`` gone (deleted, or recreated under its name)?"""
    try:
        pod = await api.get(POD.path(namespace, name))
    except NotFound:
        return True
    except ApiError:
        return False  # cannot tell: retry the eviction
    current = (pod.get("metadata") or {}).get("uid") if isinstance(pod, Mapping) else None
    return current != uid


async def evict_pods(
    api_client: Any,
    pods: list[dict],
    *,
    timeout: float,
    attempts: int = 5,
    backoff: float = 1.0,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    concurrency: int = 10,
    stop: Callable[[], str | None] = lambda: None,
    fence: Fence | None = None,
) -> EvictionResult:
    """Evict ``pods`` (objects as the API serves them; name, namespace and uid are
    used). Results keep the order of ``pods``; a pod listed twice is evicted once.
    ``stop``: asked before each try; a reason keeps the pods not evicted yet. ``fence``:
    checked as each eviction is sent (:mod:`podgang.fence`); refused, the pod is kept."""
    api = Api(api_client, timeout=timeout, fence=fence)
    attempts = max(int(attempts), 1)
    limit = asyncio.Semaphore(max(int(concurrency), 1))
    targets: list[tuple[str, str, str | None]] = []
    seen: set[tuple[str, str]] = set()
    result = EvictionResult()
    for pod in pods:
        name, namespace, uid = _pod_key(pod)
        if not name or not namespace:
            result.refused.append((name or "?", "the pod has no metadata.name or metadata.namespace"))
            continue
        if (namespace, name) in seen:
            continue
        seen.add((namespace, name))
        targets.append((name, namespace, uid))

    async def one(name: str, namespace: str, uid: str | None) -> tuple[str, str]:
        async with limit:
            return await _evict_one(
                api, name, namespace, uid, attempts=attempts, backoff=backoff, sleep=sleep, stop=stop
            )

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(*t), name=f"evict {t[1]}/{t[0]}") for t in targets]
    for (name, _ns, _uid), task in zip(targets, tasks):
        outcome, reason = task.result()
        if outcome == EVICTED:
            result.evicted.append(name)
        elif outcome == GONE:
            result.gone.append(name)
        elif outcome == KEPT:
            result.kept.append(name)
            result.stopped = result.stopped or reason
        else:
            result.refused.append((name, reason))
    return result
