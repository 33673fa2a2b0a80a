"""podgang.kube.EventRecorder against the HTTP API emulator: what `kubectl describe`
shows, repeats counted on one Event, memory bounded, and never an exception."""

from __future__ import annotations

import pytest

from podgang.kube import EventRecorder
from tests.kube_emulator import kube_emulator_fixture

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
