"""Events against the HTTP API emulator. podgang.events.EventRecorder: what `kubectl
describe` shows, repeats counted on one Event, memory bounded, and never an exception.
podgang.events.EventSink, the one event queue of both processes: bounded (a full queue
drops and counts), written in the background, written out on stop, and a stop that
cannot finish is still bounded."""

from __future__ import annotations

import asyncio

import pytest

from podgang.events import EventRecorder, EventSink
from podgang.fence import Leadership
from tests.emulator import kube_emulator_fixture
from tests.webhook_support import eventually

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "team", "uid": "u-1"}}


@pytest.fixture
async def emu():
    async for emulator in kube_emulator_fixture():
        yield emulator


@pytest.fixture
async def recorder(emu):
    api = emu.api_client()
    yield EventRecorder(api, "podgang-test", instance="test-0", timeout=2)
    await api.close()


async def test_an_event_names_the_object_reason_and_message(emu, recorder):
    await recorder.emit(POD, "Backfilled", "pod-group-name set", type="Normal")
    (event,) = emu.list("events", "team")
    assert event["involvedObject"]["name"] == "web-0" and event["involvedObject"]["uid"] == "u-1"
    assert (event["reason"], event["message"], event["type"], event["count"]) == (
        "Backfilled", "pod-group-name set", "Normal", 1)
    assert event["source"] == {"component": "podgang-test"}


async def test_a_repeat_counts_on_the_same_event(emu, recorder):
    for _ in range(3):
        await recorder.emit(POD, "GangStale", "2 of 3 members active", type="Normal")
    (event,) = emu.list("events", "team")
    assert event["count"] == 3


async def test_remembered_repeats_are_bounded(emu, recorder):
    recorder.MAX_REMEMBERED = 16
    for i in range(40):
        await recorder.emit(POD, "MinMemberChanged", f"minMember {i} → {i + 1}")
    assert len(recorder._seen) <= 16
    assert len(emu.list("events", "team")) == 40


async def test_an_api_failure_is_logged_not_raised(emu, recorder, caplog):
    emu.fail("POST", r".*/events$", 403, times=1)
    await recorder.emit(POD, "GangEvicted", "evicting 2 remaining members")
    assert emu.list("events", "team") == []
    assert "could not record event" in caplog.text


# -- EventSink ----------------------------------------------------------------

def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "namespace": "team", "uid": f"u-{i}"}}


def names(emu) -> list[str]:
    return sorted(e["involvedObject"]["name"] for e in emu.list("events", "team"))


async def test_events_are_written_in_the_background(emu, recorder):
    sink = EventSink(recorder, writers=2)
    sink.start()
    try:
        for i in range(5):
            sink.emit(pod(i), "Backfilled", f"pod {i} joined its group")
        await eventually(lambda: len(emu.list("events", "team")) == 5 or None, what="5 events written")
        assert names(emu) == [f"web-{i}" for i in range(5)]
    finally:
        await sink.stop()


async def test_a_full_queue_drops_and_counts_the_rest(emu, recorder):
    counted = []
    sink = EventSink(recorder, writers=1, capacity=3, on_drop=lambda: counted.append(1))
    for i in range(5):  # no writer yet: the queue fills up
        sink.emit(pod(i), "GangStale", "2 of 3 members active")
    assert sink.dropped == 2 and len(counted) == 2
    sink.start()
    await sink.stop()
    assert names(emu) == ["web-0", "web-1", "web-2"]


async def test_stop_writes_what_is_queued(emu, recorder):
    sink = EventSink(recorder, writers=1)
    sink.start()
    for i in range(20):
        sink.emit(pod(i), "MinMemberChanged", f"minMember {i} → {i + 1}")
    await sink.stop()
    assert len(names(emu)) == 20
    assert sink._tasks == []


async def test_a_stop_that_cannot_write_gives_up_after_its_timeout(emu, recorder, caplog):
    emu.delay(3, r"/events$")  # slower than the stop allows (and than the recorder's own 2 s)
    sink = EventSink(recorder, writers=1)
    sink.start()
    sink.emit(pod(0), "GangEvicted", "evicting 2 remaining members")
    await asyncio.wait_for(sink.stop(timeout=0.1), timeout=1.5)
    assert "stopping with events not written" in caplog.text
    assert sink._tasks == []


async def test_a_failed_write_does_not_stop_the_writers(emu, recorder):
    emu.fail("POST", r"/events$", 500, times=1)
    sink = EventSink(recorder, writers=1)
    sink.start()
    sink.emit(pod(0), "Backfilled", "lost to the 500")
    sink.emit(pod(1), "Backfilled", "written after it")
    await sink.stop()
    assert names(emu) == ["web-1"]


async def test_without_a_recorder_events_are_discarded():
    sink = EventSink(None)
    sink.start()
    sink.emit(pod(0), "Backfilled", "nowhere to write")
    assert sink.dropped == 0 and sink._tasks == []
    await sink.stop()


def test_a_sink_needs_a_writer_and_room():
    with pytest.raises(ValueError, match="at least one writer"):
        EventSink(None, writers=0)
    with pytest.raises(ValueError, match="capacity=0"):
        EventSink(None, capacity=0)


async def test_queued_events_are_dropped_not_flushed_once_the_fence_is_down(emu):
    """Issue 44: a leader that lost its Lease stops with Events queued: they are dropped, and
    an Event sent after its term is refused at the moment it is sent."""
    now = [0.0]
    leadership = Leadership(2.0, clock=lambda: now[0])
    fence = leadership.begin()
    api = emu.api_client()
    try:
        sink = EventSink(EventRecorder(api, "podgang-test", instance="test-0", timeout=2, fence=fence), writers=1)
        for i in range(5):  # no writer yet: queued
            sink.emit(pod(i), "GangStale", "2 of 3 members active")
        now[0] = 2.5  # paused past the renew deadline
        sink.start()
        await sink.stop()
        sink.emit(pod(9), "GangStale", "said after the term")
        assert emu.list("events", "team") == [] and sink.fenced == 6
        assert emu.count("POST", r"/events$") == 0
    finally:
        await api.close()
