"""podgang.fence (issue 44): a write is allowed only within its own term of leadership and
before that term's renew deadline, by the local monotonic clock, at the moment it is sent."""

from __future__ import annotations

import asyncio

import pytest

from podgang.api import Api
from podgang.fence import OPEN, Fenced, Leadership


def test_a_term_holds_until_its_renew_deadline_and_moves_with_each_renewal():
    now = [100.0]
    leadership = Leadership(10.0, clock=lambda: now[0])
    fence = leadership.begin(renewed_at=99.0)
    assert fence.held and fence.problem() is None
    now[0] = 108.9
    assert fence.held
    now[0] = 109.0  # 10 s after the renewal was sent: another may take the Lease 5 s later
    assert "renew deadline" in fence.problem()
    with pytest.raises(Fenced):
        fence.check()
    leadership.renewed(108.5)
    assert fence.held


def test_a_fence_of_an_ended_or_older_term_never_holds_again():
    now = [0.0]
    leadership = Leadership(10.0, clock=lambda: now[0])
    first = leadership.begin()
    leadership.end()
    assert "lost or given back" in first.problem()
    leadership.renewed(0.0)  # a renewal answered late does not reopen it
    assert not first.held
    second = leadership.begin()
    assert second.held and "term 1 is over (term 2 began since)" in first.problem()


def test_without_leader_election_the_fence_is_open():
    assert OPEN.held
    OPEN.check()


class NoCalls:
    async def call_api(self, *args, **kwargs):  # pragma: no cover: the fence refuses first
        raise AssertionError("sent")


def test_the_api_checks_the_fence_for_every_change_as_it_is_sent():
    leadership = Leadership(1.0, clock=lambda: 5.0)
    fence = leadership.begin(renewed_at=0.0)  # past its deadline
    api = Api(NoCalls(), timeout=1, fence=fence)
    for call in (api.create("/x", {}), api.merge_patch("/x", {}), api.replace("/x", {}), api.delete("/x")):
        with pytest.raises(Fenced):
            asyncio.run(call)
