"""A coalescing work queue in the client-go spirit.

A key added while it waits is not added twice; a key added while a worker holds
it is handed out again once that worker is done (never to two workers at once).
``add(key, delay)`` hands it out no earlier than ``delay`` seconds from now
unless it is (or gets) queued sooner. So a thousand pod events for one gang cost
one reconcile, not a thousand.

Keys ``behind`` says are handed out only when no other key waits: the grouper queues
its pod backfills behind its group writes, so a gang's PodGroup (and the subgroups its
pods are labelled with) comes before the pods, and a catching-up backfill never holds
up a scale. ``hold_back_lane(seconds)`` keeps that lane shut for a while: the grouper
holds its backfills while a workload's controller creates pods in a burst.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from typing import Callable, Hashable


class WorkQueue:
    def __init__(self, clock: Callable[[], float] | None = None,
                 behind: Callable[[Hashable], bool] | None = None):
        self._clock = clock
        self._behind = behind
        self._queue: deque[Hashable] = deque()
        self._later: deque[Hashable] = deque()  # keys handed out once _queue is empty
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}
        self._counter = itertools.count()
        self._wakeup = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self._held_until = float("-inf")  # the back lane is shut until then
        self._reopen: asyncio.TimerHandle | None = None

    def _now(self) -> float:
        return self._clock() if self._clock else asyncio.get_running_loop().time()

    def __len__(self) -> int:
        return len(self._queue) + len(self._later)

    def hold_back_lane(self, seconds: float) -> None:
        """Hand out no key of the back lane for ``seconds`` from now (a hold only grows)."""
        until = self._now() + seconds
        if until <= self._held_until:
            return
        self._held_until = until
        if self._reopen is not None:
            self._reopen.cancel()
        self._reopen = asyncio.get_running_loop().call_later(seconds, self._wakeup.set)

    @property
    def back_lane_held(self) -> bool:
        return self._now() < self._held_until

    @property
    def waiting_behind(self) -> int:
        """Keys of the back lane queued now (not delayed, not being worked on)."""
        return len(self._later)

    def _append(self, key: Hashable) -> None:
        (self._later if self._behind is not None and self._behind(key) else self._queue).append(key)
        self._wakeup.set()

    @property
    def delayed(self) -> int:
        return len(self._due)

    def add(self, key: Hashable, delay: float = 0.0) -> None:
        if delay > 0:
            self._add_later(key, delay)
            return
        self._due.pop(key, None)
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._idle.clear()
        if key not in self._processing:
            self._append(key)

    def _add_later(self, key: Hashable, delay: float) -> None:
        if key in self._dirty and key not in self._processing:
            return  # already queued for now
        when = self._now() + delay
        due = self._due.get(key)
        if due is not None and due <= when:
            return
        self._due[key] = when
        heapq.heappush(self._delayed, (when, next(self._counter), key))
        self._arm()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._delayed and self._due.get(self._delayed[0][2]) != self._delayed[0][0]:
            heapq.heappop(self._delayed)  # superseded entries
        if not self._delayed:
            return
        loop = asyncio.get_running_loop()
        wait = max(self._delayed[0][0] - self._now(), 0.0)
        self._timer = loop.call_later(wait, self._release)

    def _release(self) -> None:
        self._timer = None
        now = self._now()
        while self._delayed and self._delayed[0][0] <= now:
            when, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == when:
                del self._due[key]
                self.add(key)
        self._arm()
        self._check_idle()

    async def get(self) -> Hashable:
        while not self._queue and not (self._later and not self.back_lane_held):
            self._wakeup.clear()
            await self._wakeup.wait()
        key = self._queue.popleft() if self._queue else self._later.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._append(key)
        self._check_idle()

    def _check_idle(self) -> None:
        if not self._queue and not self._later and not self._processing and not self._dirty:
            self._idle.set()

    def busy(self) -> bool:
        """Something is queued or being worked on now (delayed keys do not count)."""
        return bool(self._queue or self._later or self._processing or self._dirty)

    async def wait_idle(self) -> None:
        """Until nothing is queued or processing (delayed keys do not count)."""
        while self.busy():
            self._idle.clear()
            await self._idle.wait()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._reopen is not None:
            self._reopen.cancel()
            self._reopen = None
