"""The grouper's memory of each gang is one record (``grouper/gangs.py``): forgetting a gang
forgets all of it, and a gang the grouper no longer remembers anything of takes no memory."""

from __future__ import annotations

import asyncio

from podgang.grouper.gangs import GangRecord, GangRecords


def test_a_record_that_holds_nothing_is_dropped():
    records = GangRecords()
    record = records.of("team/a")
    record.observed_min, record.lowered_at, record.never = 4, 10.0, {"queue": "no queue"}
    records.forget("team/a", "observed_min", "lowered_at")
    assert records.get("team/a") is record and record.observed_min is None and record.never
    assert records.never_placed() == ["team/a"]
    records.forget("team/a", "never")
    assert records.get("team/a") is None and len(records) == 0  # nothing left: gone
    records.of("team/b").contributions = {"deployment web": 2}
    records.forget("team/b")  # every field
    assert len(records) == 0


def test_forgetting_never_shares_a_mutable_default():
    records = GangRecords()
    records.of("team/a").never_on_group = {"queue": "x"}
    records.forget("team/a", "never_on_group")
    again = records.of("team/a")
    again.never_on_group["node"] = "y"
    assert GangRecord().never_on_group == {} and records.of("team/c").never_on_group == {}


async def test_evictions_running_are_listed_for_cancellation():
    records = GangRecords()
    never = asyncio.Event()  # evictions that last until cancelled
    task = asyncio.create_task(never.wait())
    records.of("team/a").evicting[None] = task
    records.of("team/a").evicting["decode-1"] = replica = asyncio.create_task(never.wait())
    assert set(records.evictions()) == {task, replica}
    for t in (task, replica):
        t.cancel()
    await asyncio.gather(task, replica, return_exceptions=True)
