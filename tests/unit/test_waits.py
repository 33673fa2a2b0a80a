"""podgang.waits: an event waited for with a timeout never swallows a cancellation."""

from __future__ import annotations

import asyncio

import pytest

from podgang.waits import event_set_within


async def test_a_cancellation_that_comes_as_the_event_is_set_ends_the_loop():
    """A loop like the informer's probe wait: on Python 3.11, asyncio.wait_for returned
    the event's result here and the loop ran on after its task was cancelled."""
    event, waiting = asyncio.Event(), asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            waiting.set()  # the same step goes on into the wait: it is there when the test resumes
            await event_set_within(event, 10)
            event.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    await waiting.wait()
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert rounds == 0


async def test_set_within_the_time_or_not():
    event = asyncio.Event()
    assert await event_set_within(event, 0.01) is False
    asyncio.get_running_loop().call_soon(event.set)
    assert await event_set_within(event, 5) is True
    assert await event_set_within(event, 0) is True  # already set
