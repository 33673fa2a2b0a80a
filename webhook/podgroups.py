"""PodGroups the webhook touches: it creates the group of an owner-less pod (in the
backend's spelling, labelled as podgang's and marked as made by admission, minMember 1, no
ownerReference: the pod has no uid yet, the grouper adopts the group once the pod exists), and
checks that a hand-made group a pod names exists.

Creating is a side effect of admission, on behalf of whoever sent the review: each namespace
has a budget of groups created a window (:class:`CreationBudget`, per replica); beyond it the
pod is still patched and the grouper creates its group once the pod exists. A group made by
admission that no pod ever names is deleted by the grouper after ``--admission-orphan-timeout``.

A PodGroup podgang does not manage is never changed: the caller picks another name.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from podgang import feasibility, rules
from podgang.api import Api, ApiError, Conflict, NotFound
from podgang.backends import Backend
from podgang.backends.base import GangSource, gang_spec
from podgang.gang.stale import format_duration
from podgang.metrics import WebhookMetrics
from podgang.objects import clip
from podgang.settings import Settings
from podgang.webhook.facts import ClusterFactsCache

log = logging.getLogger("podgang.webhook")


class Outcome(enum.Enum):
    CREATED = "created"
    REUSED = "reused"  # exists and podgang manages it
    TAKEN = "taken"  # exists and podgang does not manage it: use another name
    FAILED = "failed"  # the API failed; the grouper creates it later
    OVER_BUDGET = "over-budget"  # the namespace's budget is spent: not tried, the grouper creates it later


BUDGET_LOG_INTERVAL = 10.0  # seconds between two log lines about spent budgets (the metric counts each)
BUDGET_NAMESPACES = 10_000  # namespaces whose spending is remembered at once (the oldest is forgotten)


class CreationBudget:
    """How many PodGroups admission may create in one namespace: at most ``limit`` in any
    ``window`` seconds (a sliding window, per replica; 0: none at all). A slot is taken before
    the create is sent and given back when no group was created (it existed, or the API failed).

    Memory: at most ``limit`` timestamps for each namespace that created a group within the
    window, and at most :data:`BUDGET_NAMESPACES` namespaces.
    """

    def __init__(self, limit: int, window: float, *, clock: Callable[[], float] = time.monotonic):
        self.limit = max(0, int(limit))
        self.window = float(window)
        self.clock = clock
        self._spent: OrderedDict[str, deque[float]] = OrderedDict()

    def take(self, namespace: str) -> float | None:
        """Take a slot: None when taken, else the seconds until one is free again."""
        if self.limit == 0:
            return self.window
        now = self.clock()
        times = self._spent.get(namespace)
        if times is None:
            times = self._spent[namespace] = deque()
            while len(self._spent) > BUDGET_NAMESPACES:
                self._spent.popitem(last=False)
        self._spent.move_to_end(namespace)
        while times and times[0] <= now - self.window:
            times.popleft()
        if len(times) >= self.limit:
            return times[0] + self.window - now
        times.append(now)
        return None

    def give_back(self, namespace: str) -> None:
        """Return the slot last taken in ``namespace`` (no group was created with it)."""
        times = self._spent.get(namespace)
        if times:
            times.pop()
        if not times:
            self._spent.pop(namespace, None)

    def describe(self) -> str:
        return f"{self.limit} PodGroup{'s' if self.limit != 1 else ''} a namespace per {format_duration(self.window)}"


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
        budget: CreationBudget | None = None,
    ):
        self.api = api
        self.budget = budget  # None: no bound
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
        self._budget_said = -BUDGET_LOG_INTERVAL  # when a spent budget was last logged
        self._budget_unsaid = 0  # pods over budget since then

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
        """The group of one of an owner-less pod, with the backend's settings (:meth:`options_for`),
        marked as made by admission (the grouper deletes it sooner if no pod ever names it)."""
        options = dict(options or {})
        annotations = {**(options.pop("annotations", None) or {}), self.settings.admission_created_annotation: "true"}
        return backend.build_podgroup(gang_spec(name, namespace, 1, labels=self.settings.managed_labels,
                                                options=options, annotations=annotations))

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
        if self.budget is not None:
            wait = self.budget.take(namespace)
            if wait is not None:
                return self._over_budget(namespace, name, wait)
        body = self.manifest_for_owner_less(namespace, name, backend, options)
        try:
            created = await self.api.create(backend.podgroup.path(namespace), body, timeout=left())
        except Conflict:
            self._give_back(namespace)  # it exists: ours to reuse, or someone else's?
        except ApiError as exc:
            self._give_back(namespace)
            self.metrics.api_error("create_podgroup", exc.status or None)
            return CreateResult(Outcome.FAILED, f"create {name}: {exc}" if exc.status else str(exc))
        except BaseException:
            self._give_back(namespace)
            raise
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

    def _give_back(self, namespace: str) -> None:
        if self.budget is not None:
            self.budget.give_back(namespace)

    def _over_budget(self, namespace: str, name: str, wait: float) -> CreateResult:
        """Not created: the namespace's budget is spent. Counted each time, logged at most once
        per :data:`BUDGET_LOG_INTERVAL` (with how many were not said since)."""
        assert self.budget is not None
        self.metrics.podgroups_over_budget.inc()
        detail = (f"the namespace's budget of PodGroups created by admission is spent "
                  f"({self.budget.describe()}, per webhook replica; the next in {wait:.1f}s)")
        self._budget_unsaid += 1
        now = self.clock()
        if now - self._budget_said >= BUDGET_LOG_INTERVAL:
            log.warning("PodGroup not created at admission: budget spent", extra={"fields": {
                "namespace": clip(namespace), "group": clip(name), "budget": self.budget.describe(),
                "over_budget_since_last_line": self._budget_unsaid,
                "then": "the pod is patched; the grouper creates its group once the pod exists"}})
            self._budget_said, self._budget_unsaid = now, 0
        return CreateResult(Outcome.OVER_BUDGET, detail)

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

