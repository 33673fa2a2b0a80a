"""PodGroups the webhook touches: it creates the group of an owner-less pod (in the
backend's spelling, labelled as podgang's, minMember 1, no ownerReference: the pod has no uid
yet, the grouper adopts the group once the pod exists), and checks that a
hand-made group a pod names exists.

A PodGroup podgang does not manage is never changed: the caller picks another name.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from podgang import feasibility, rules
from podgang.api import Api, ApiError, Conflict, NotFound
from podgang.backends import Backend
from podgang.backends.base import GangSource, gang_spec
from podgang.metrics import WebhookMetrics
from podgang.settings import Settings
from podgang.webhook.facts import ClusterFactsCache

log = logging.getLogger("podgang.webhook")


class Outcome(enum.Enum):
    CREATED = "created"
    REUSED = "reused"  # exists and podgang manages it
    TAKEN = "taken"  # exists and podgang does not manage it: use another name
    FAILED = "failed"  # the API failed; the grouper creates it later


@dataclass(frozen=True)
class CreateResult:
    outcome: Outcome
    detail: str = ""
    podgroup: dict[str, Any] | None = None


class Existence(enum.Enum):
    EXISTS = "exists"
    MISSING = "missing"
    UNKNOWN = "unknown"


class PodGroups:
    """Creates and checks PodGroups through the API, in the backend's spelling."""

    def __init__(
        self,
        api: Api | None,
        settings: Settings,
        metrics: WebhookMetrics,
        *,
        exists_ttl: float = 30.0,
        missing_ttl: float = 5.0,
        max_size: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.api = api
        self.facts = ClusterFactsCache(api)
        self.settings = settings
        self.metrics = metrics
        self.exists_ttl = exists_ttl
        self.missing_ttl = missing_ttl
        self.max_size = max_size
        self.clock = clock
        self._seen: OrderedDict[tuple[str, str, str], tuple[float, Existence, str]] = OrderedDict()
        # the subgroups an existing group lists, as last read (empty: none)
        self._subgroups: dict[tuple[str, str, str], frozenset[str]] = {}
        self._inflight: dict[tuple[str, str, str], asyncio.Future] = {}

    def is_managed(self, podgroup: Any) -> bool:
        labels = ((podgroup or {}).get("metadata") or {}).get("labels") or {}
        return isinstance(labels, dict) and labels.get(self.settings.managed_by_label) == self.settings.managed_by_value

    def options_for(self, pod: Any, backend: Backend) -> dict[str, Any]:
        """The scheduler's own settings for an owner-less pod's group (a KAI queue, a
        priority class), checked against what is known of the cluster; their ``problems``
        are the admission's warnings; and what the one pod requests, for a scheduler that
        reads a gang's minimum resources."""
        options = backend.gang_options(GangSource(pods=(pod,), facts=self.facts.get(backend)))
        wanted = backend.min_resources_for(((1, pod),))
        return {**options, "min_resources": wanted} if wanted else options

    def never_placed(self, pod: Any, backend: Backend, options: Mapping[str, Any]) -> list[str]:
        """Why an owner-less pod's gang of one will never be placed (podgang.feasibility),
        from the facts as last listed (never read for the admission), as admission warnings:
        what holds, then the fix (each warning is cut at 256 characters)."""
        verdicts = feasibility.never_placed(backend, options, ((1, pod),), self.facts.get(backend))
        out: list[str] = []
        for verdict in verdicts:
            says = f" ({verdict.scheduler_says})" if verdict.scheduler_says else ""
            out += [f"never placed: {verdict.what}{says}", f"never placed ({verdict.kind}), fix: {verdict.fix}"]
        return out

    def manifest_for_owner_less(self, namespace: str, name: str, backend: Backend,
                                options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The group of one of an owner-less pod, with the backend's settings (:meth:`options_for`)."""
        return backend.build_podgroup(gang_spec(name, namespace, 1, labels=self.settings.managed_labels,
                                                options=options or {}))

    async def create_for_pod(
        self, namespace: str, name: str, backend: Backend, *, options: Mapping[str, Any] | None = None,
        timeout: float | Callable[[], float] | None = None
    ) -> CreateResult:
        """Create PodGroup ``name`` for an owner-less pod, or say why not.

        ``timeout``: seconds per call, or a function giving the seconds left for the
        next call (a create that answers 409 is followed by a read: the two together
        must fit the time the review has).
        """
        left = timeout if callable(timeout) else (lambda: timeout)
        if self.api is None:
            return CreateResult(Outcome.FAILED, "no Kubernetes API access configured")
        body = self.manifest_for_owner_less(namespace, name, backend, options)
        try:
            created = await self.api.create(backend.podgroup.path(namespace), body, timeout=left())
        except Conflict:
            pass  # it exists: ours to reuse, or someone else's?
        except ApiError as exc:
            self.metrics.api_error("create_podgroup", exc.status or None)
            return CreateResult(Outcome.FAILED, f"create {name}: {exc}" if exc.status else str(exc))
        else:
            self.metrics.podgroups_created.inc()
            self._remember((namespace, name, backend.name), Existence.EXISTS)
            return CreateResult(Outcome.CREATED, podgroup=created if isinstance(created, dict) else None)
        try:
            existing = await self.api.get(backend.podgroup.path(namespace, name), timeout=left())
        except NotFound:
            return CreateResult(Outcome.TAKEN, f"{name} existed a moment ago and is gone now")
        except ApiError as exc:
            self.metrics.api_error("get_podgroup", exc.status or None)
            return CreateResult(Outcome.FAILED, f"{name} exists; reading it failed: {exc}")
        if self.is_managed(existing):
            self.metrics.podgroups_reused.inc()
            return CreateResult(Outcome.REUSED, podgroup=existing)
        return CreateResult(
            Outcome.TAKEN,
            f"PodGroup {name} exists and is not labelled {self.settings.managed_by_label}={self.settings.managed_by_value}",
        )

    async def exists(self, namespace: str, name: str, backend: Backend, *,
                     timeout: float | None = None) -> tuple[Existence, str]:
        """Whether ``backend``'s PodGroup ``name`` exists (cached briefly; concurrent checks share one call),
        and what is wrong (a missing group: the backend's words, e.g. a 1.35 Workload without that pod group;
        one that exists: what a pod joining it is told of its required roles, or "")."""
        key = (namespace, name, backend.name)
        seen = self._seen.get(key)
        if seen is not None and seen[0] > self.clock():
            return seen[1], seen[2]
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self._check(key, backend, timeout)
        except BaseException:
            future.set_result((Existence.UNKNOWN, "check interrupted"))
            raise
        else:
            future.set_result(result)
            return result
        finally:
            self._inflight.pop(key, None)

    async def _check(self, key: tuple[str, str, str], backend: Backend,
                     timeout: float | None) -> tuple[Existence, str]:
        namespace, name, _ = key
        if self.api is None:
            return Existence.UNKNOWN, "no Kubernetes API access configured"
        holder = backend.holder_name(name)  # a 1.35 Workload holds its gangs as pod groups
        try:
            found = await self.api.get(backend.podgroup.path(namespace, holder), timeout=timeout)
        except NotFound as exc:
            if exc.names(holder):
                missing = backend.missing_group(name, namespace, None)
                self._remember(key, Existence.MISSING, missing)
                return Existence.MISSING, missing
            self.metrics.api_error("get_podgroup", exc.status or None)
            return Existence.UNKNOWN, str(exc)
        except ApiError as exc:
            self.metrics.api_error("get_podgroup", exc.status or None)
            return Existence.UNKNOWN, str(exc)
        if backend.gang_view(found, name) is None:
            missing = backend.missing_group(name, namespace, found)
            self._remember(key, Existence.MISSING, missing)
            return Existence.MISSING, missing
        listed = backend.subgroups_of(found) if backend.subgroup_key is not None else None
        roles = rules.required_roles_warning(found, name, self.settings) or ""
        self._remember(key, Existence.EXISTS, roles, subgroups=frozenset(listed or ()))
        return Existence.EXISTS, roles

    def listed_subgroups(self, namespace: str, name: str, backend: Backend) -> frozenset[str] | None:
        """The subgroups ``name`` listed when :meth:`exists` last found it (empty: none);
        None when it was not found or not read."""
        return self._subgroups.get((namespace, name, backend.name))

    def _remember(self, key: tuple[str, str, str], state: Existence, detail: str = "",
                  subgroups: frozenset[str] | None = None) -> None:
        ttl = self.exists_ttl if state is Existence.EXISTS else self.missing_ttl
        if ttl <= 0:
            self._seen.pop(key, None)
            self._subgroups.pop(key, None)
            return
        self._seen[key] = (self.clock() + ttl, state, detail)
        self._seen.move_to_end(key)
        if subgroups is not None:
            self._subgroups[key] = subgroups
        else:
            self._subgroups.pop(key, None)
        while len(self._seen) > self.max_size:
            gone, _ = self._seen.popitem(last=False)
            self._subgroups.pop(gone, None)

