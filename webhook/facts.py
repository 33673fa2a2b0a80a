"""What a backend checks its PodGroup settings against (KAI: which PriorityClasses and
queues exist) and the never-placed verdicts read (queues' bounds, nodes — slimmed as soon
as listed), for the groups the webhook creates itself: listed in the background at
most once a minute, never by an admission waiting for it. Until the first list answers
(or while it is refused) the facts are unknown and values are taken as written."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from podgang.api import Api, ApiError
from podgang.backends import Backend
from podgang.backends.base import ClusterFacts, slim_fact

log = logging.getLogger("podgang.webhook")

#: the most objects of one kind kept (a list is paged no further)
MAX_FACTS = 5000


class ClusterFactsCache:
    def __init__(self, api: Api | None, *, ttl: float = 60.0, timeout: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self.api = api
        self.ttl = ttl
        self.timeout = timeout
        self.clock = clock
        self._facts: dict[str, tuple[float, ClusterFacts]] = {}
        self._refreshing: dict[str, asyncio.Task] = {}

    def get(self, backend: Backend) -> ClusterFacts:
        """The facts as last listed; a refresh starts in the background when they are old."""
        if not backend.fact_resources or self.api is None:
            return ClusterFacts()
        at, facts = self._facts.get(backend.name, (None, ClusterFacts()))
        if (at is None or self.clock() - at > self.ttl) and backend.name not in self._refreshing:
            task = asyncio.get_running_loop().create_task(self.refresh(backend))
            self._refreshing[backend.name] = task
            task.add_done_callback(lambda _: self._refreshing.pop(backend.name, None))
        return facts

    async def refresh(self, backend: Backend) -> ClusterFacts:
        assert self.api is not None
        found: dict[str, Any] = {}
        for resource in backend.fact_resources:
            try:
                answer = await self.api.get(resource.path(), timeout=self.timeout, limit=MAX_FACTS)
                if (answer.get("metadata") or {}).get("continue"):
                    # more than one page: a part of the nodes (or queues) would prove what the
                    # whole would not; left unknown
                    found[resource.kind] = None
                    log.info("too many %s to list at once: their values are taken as written", resource.label)
                    continue
                found[resource.kind] = [slim_fact(item, resource.kind) for item in answer.get("items") or []
                                        if isinstance(item, dict)]
            except ApiError as exc:
                found[resource.kind] = None
                log.info("cannot list %s: its values are taken as written", resource.label,
                         extra={"fields": {"error": str(exc)}})
        facts = backend.cluster_facts(found)
        self._facts[backend.name] = (self.clock(), facts)
        return facts
