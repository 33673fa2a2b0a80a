"""What a backend checks its PodGroup settings against (KAI: which PriorityClasses and
queues exist) and the never-placed verdicts read (queues' bounds, nodes — slimmed as soon
as listed), for the groups the webhook creates itself: listed in the background (queues
and PriorityClasses at most every 5 s, nodes every minute), never by an admission waiting
for it. Until the first list answers
(or while it is refused) the facts are unknown and values are taken as written."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from podgang.api import Api, ApiError
from podgang.backends import Backend
from podgang.backends.base import ClusterFacts, slim_fact
from podgang.nodes import NODES, node_facts
from podgang.objects import Resource

log = logging.getLogger("podgang.webhook")

#: the most objects of one kind kept (a list is paged no further)
MAX_FACTS = 5000


class ClusterFactsCache:
    """The facts as last listed, per backend. Small kinds (PriorityClasses, queues) are listed
    again when ``ttl`` old, nodes when ``node_ttl`` old (a large list: parsed once per list, so
    a queue's quota raised costs no node parsing); an admission only ever reads what is here."""

    def __init__(self, api: Api | None, *, ttl: float = 5.0, node_ttl: float = 60.0, timeout: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.api = api
        self.ttl = ttl
        self.node_ttl = node_ttl
        self.timeout = timeout
        self.clock = clock
        self._facts: dict[str, ClusterFacts] = {}
        #: (API group, kind) -> (when listed, its objects slimmed — nodes parsed — or None: not known)
        self._listed: dict[tuple[str, str], tuple[float, list[Any] | None]] = {}
        self._refreshing: dict[str, asyncio.Task] = {}

    def _stale(self, backend: Backend) -> list[Resource]:
        now = self.clock()
        return [r for r in backend.fact_resources
                if (at := self._listed.get((r.group, r.kind), (None, None))[0]) is None
                or now - at > (self.node_ttl if r.kind == NODES.kind else self.ttl)]

    def get(self, backend: Backend) -> ClusterFacts:
        """The facts as last listed; a refresh of what is old starts in the background."""
        if not backend.fact_resources or self.api is None:
            return ClusterFacts()
        if backend.name not in self._refreshing and self._stale(backend):
            task = asyncio.get_running_loop().create_task(self.refresh(backend))
            self._refreshing[backend.name] = task
            task.add_done_callback(lambda _: self._refreshing.pop(backend.name, None))
        return self._facts.get(backend.name, ClusterFacts())

    async def refresh(self, backend: Backend) -> ClusterFacts:
        assert self.api is not None
        for resource in self._stale(backend):
            self._listed[(resource.group, resource.kind)] = (self.clock(), await self._list(resource))
        found = {r.kind: self._listed.get((r.group, r.kind), (0.0, None))[1] for r in backend.fact_resources}
        facts = backend.cluster_facts(found)
        self._facts[backend.name] = facts
        return facts

    async def _list(self, resource: Resource) -> list[Any] | None:
        assert self.api is not None
        try:
            answer = await self.api.get(resource.path(), timeout=self.timeout, limit=MAX_FACTS)
        except ApiError as exc:
            log.info("cannot list %s: its values are taken as written", resource.label,
                     extra={"fields": {"error": str(exc)}})
            return None
        if (answer.get("metadata") or {}).get("continue"):
            # more than one page: a part of the nodes (or queues) would prove what the whole
            # would not; left unknown
            log.info("too many %s to list at once: their values are taken as written", resource.label)
            return None
        raw = [item for item in answer.get("items") or [] if isinstance(item, dict)]
        if resource.kind == NODES.kind:
            # thousands of nodes take tens of milliseconds to read: off the event loop, so that
            # no admission waits behind them
            return await asyncio.to_thread(_node_facts, raw)
        return [slim_fact(item, resource.kind) for item in raw]


def _node_facts(raw: list[dict[str, Any]]) -> list[Any]:
    """Nodes as the verdicts read them (what else a Node holds is dropped here)."""
    return [n for item in raw if (n := node_facts(item)) is not None]
