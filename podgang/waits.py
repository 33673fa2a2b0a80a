"""Waiting for an :class:`asyncio.Event` with a timeout, without losing a cancellation.

``asyncio.wait_for(event.wait(), t)`` on Python 3.11 returns the event's result and
swallows a cancellation that arrives as the event is set: a loop written with it
outlives its task's cancellation, and whoever awaits that task on shutdown hangs
(seen once in 17 runs of the certificate keeper's tests). ``asyncio.wait`` never
swallows one.
"""

from __future__ import annotations

import asyncio


async def event_set_within(event: asyncio.Event, seconds: float | None) -> bool:
    """Whether ``event`` is set within ``seconds`` (None: no limit)."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        waiter.cancel()
    return event.is_set()
