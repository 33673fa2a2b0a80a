"""Stale gangs (spec §5): podgang/gang/stale.py with a fake clock."""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings as hsettings, strategies as st

from podgang.gang.stale import GangObservation, StaleGangTracker, StaleVerdict, format_duration

G = "ns/pg-train"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def obs(active, min_member=3, *, succeeded=0, settling=False, grace=60.0, group=G) -> GangObservation:
    return GangObservation(
        group=group,
        min_member=min_member,
        active=active,
        succeeded=succeeded,
        workload_settling=settling,
        grace_period=grace,
    )


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def tracker(clock):
    return StaleGangTracker(clock)


def run(tracker, clock, steps):
    """steps: (seconds to advance, observation); returns the actions."""
    out = []
    for dt, o in steps:
        clock.advance(dt)
        out.append(tracker.observe(o).action)
    return out


# ---------------------------------------------------------------------------
# the basic life cycle


def test_satisfied_then_lost_member_is_stale_with_deadline_now_plus_grace(tracker, clock):
    assert tracker.observe(obs(3)).action == "none"
    clock.advance(5)
    v = tracker.observe(obs(2))
    assert v == StaleVerdict(
        "stale", clock.now + 60, "2 of 3 members active, minMember 3: evicting the rest in 60s unless it recovers"
    )
    assert tracker.stale_groups() == [G]


def test_eviction_only_once_the_deadline_has_passed(tracker, clock):
    tracker.observe(obs(3))
    stale = tracker.observe(obs(2))
    assert stale.action == "stale"
    clock.now = stale.deadline - 0.001
    waiting = tracker.observe(obs(2))
    assert waiting.action == "waiting"
    assert waiting.deadline == stale.deadline
    assert "evicting the rest in 1ms unless it recovers" in waiting.message
    clock.now = stale.deadline
    v = tracker.observe(obs(2))
    assert v.action == "evict"
    assert v.message == "evicting 2 remaining members: 2 of 3 members active for 60s, minMember 3"


def test_evict_repeats_until_the_caller_reports_the_eviction(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(1))
    clock.advance(61)
    assert tracker.observe(obs(1)).action == "evict"
    clock.advance(10)
    v = tracker.observe(obs(1))
    assert v.action == "evict"  # eviction was refused (PDB): try again
    assert v.message == "evicting 1 remaining member: 1 of 3 members active for 1m11s, minMember 3"


def test_recovery_inside_the_grace_period_cancels_the_eviction(tracker, clock):
    tracker.observe(obs(3))
    assert tracker.observe(obs(2)).action == "stale"
    clock.advance(30)
    v = tracker.observe(obs(3))
    assert v == StaleVerdict("recovered", None, "3 of 3 members active again, minMember 3")
    assert tracker.stale_groups() == []
    clock.advance(100)
    assert tracker.observe(obs(3)).action == "none"


def test_losing_members_again_after_recovery_starts_a_fresh_grace_period(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(2))
    clock.advance(50)
    tracker.observe(obs(3))
    clock.advance(50)
    v = tracker.observe(obs(2))
    assert (v.action, v.deadline) == ("stale", clock.now + 60)
    clock.advance(59)
    assert tracker.observe(obs(2)).action == "waiting"
    clock.advance(1)
    assert tracker.observe(obs(2)).action == "evict"


@pytest.mark.parametrize(
    "steps, expected",
    [
        # never satisfied: waiting for capacity, never stale
        ([(0, obs(0)), (100, obs(2)), (100, obs(1))], ["none", "none", "none"]),
        # satisfied at 3, scaled up to 4 and waiting for the 4th: not stale
        ([(0, obs(3)), (1, obs(3, 4)), (100, obs(3, 4)), (100, obs(3, 4))], ["none"] * 4),
        # ... but losing one of the 3 it had is stale
        ([(0, obs(3)), (1, obs(3, 4)), (1, obs(2, 4))], ["none", "none", "stale"]),
        # satisfied at 4 after the scale-up, then losing one is stale
        ([(0, obs(3)), (1, obs(4, 4)), (1, obs(3, 4))], ["none", "none", "stale"]),
        # minMember 1: no gang constraint, never stale
        ([(0, obs(1, 1)), (1, obs(0, 1)), (100, obs(0, 1))], ["none"] * 3),
        ([(0, obs(5, 1)), (1, obs(0, 1))], ["none", "none"]),
        # a minMember that dropped without a settling flag: satisfied at the lower level
        ([(0, obs(3)), (1, obs(2, 2)), (100, obs(2, 2))], ["none"] * 3),
    ],
    ids=[
        "never-satisfied",
        "scale-up-waiting",
        "scale-up-then-loss",
        "scale-up-satisfied-then-loss",
        "min-member-1",
        "min-member-1-all-gone",
        "min-member-lowered",
    ],
)
def test_table(tracker, clock, steps, expected):
    assert run(tracker, clock, steps) == expected


# ---------------------------------------------------------------------------
# Succeeded members


def test_any_succeeded_member_is_never_stale(tracker, clock):
    actions = run(
        tracker,
        clock,
        [(0, obs(3)), (1, obs(2, succeeded=1)), (100, obs(0, succeeded=3)), (100, obs(1, succeeded=1))],
    )
    assert actions == ["none", "none", "none", "none"]
    assert tracker.stale_groups() == []


def test_a_member_succeeding_while_stale_cancels_the_eviction(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(2))
    clock.advance(59)
    v = tracker.observe(obs(2, succeeded=1))
    assert v.action == "recovered"
    assert "succeeded" in v.message
    clock.advance(100)
    assert tracker.observe(obs(2, succeeded=1)).action == "none"


def test_a_finished_gang_whose_succeeded_pods_are_gone_is_not_stale(tracker, clock):
    # pods succeeded (level forgotten), then were garbage-collected: nothing to evict
    actions = run(tracker, clock, [(0, obs(3)), (1, obs(1, succeeded=2)), (1, obs(1)), (100, obs(1))])
    assert actions == ["none"] * 4


# ---------------------------------------------------------------------------
# settling workloads (rollouts, scale-downs)


def test_rolling_out_workload_is_not_stale(tracker, clock):
    actions = run(
        tracker,
        clock,
        [(0, obs(3)), (1, obs(2, settling=True)), (100, obs(1, settling=True)), (1, obs(3))],
    )
    assert actions == ["none"] * 4


def test_rollout_keeps_the_level_so_a_pod_still_missing_afterwards_is_stale(tracker, clock):
    actions = run(tracker, clock, [(0, obs(3)), (1, obs(2, settling=True)), (1, obs(2))])
    assert actions == ["none", "none", "stale"]


def test_finished_scale_down_is_not_mistaken_for_loss(tracker, clock):
    # satisfied at 4, scaled down to 2: the controller deletes two pods on purpose
    actions = run(
        tracker,
        clock,
        [
            (0, obs(4, 4)),
            (1, obs(4, 2, settling=True)),
            (1, obs(3, 2, settling=True)),
            (1, obs(2, 2, settling=True)),
            (1, obs(2, 2)),  # settled
            (100, obs(2, 2)),
        ],
    )
    assert actions == ["none"] * 6
    assert tracker.satisfied_at(G) == 2
    # ... but a loss after the scale-down is measured against the new size
    assert tracker.observe(obs(1, 2)).action == "stale"


def test_scale_down_level_follows_min_member_even_while_unsatisfied(tracker, clock):
    # satisfied at 4; lost members while minMember dropped to 3 and the pods are going
    actions = run(tracker, clock, [(0, obs(4, 4)), (1, obs(2, 3, settling=True)), (1, obs(2, 3))])
    assert tracker.satisfied_at(G) == 3
    assert actions == ["none", "none", "stale"]


def test_settling_while_stale_cancels_the_eviction(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(2))
    clock.advance(30)
    v = tracker.observe(obs(2, settling=True))
    assert v.action == "recovered"
    assert "rolling out or scaling down" in v.message
    assert tracker.stale_groups() == []


def test_a_gang_made_again_whole_is_a_new_gang_until_placed_again(tracker, clock):
    """Every member gone while its workload settles (an LWS group recreated, a JobSet restarted):
    the gang is made again whole. Its new pods are bound one by one; a part bound is not a loss —
    it is judged stale only once placed whole again."""
    tracker.observe(obs(3))
    assert tracker.satisfied_at(G) == 3
    assert tracker.observe(obs(1, settling=True)).action == "none"
    assert tracker.satisfied_at(G) == 3  # a rollout keeps the level while members remain
    assert tracker.observe(obs(0, settling=True)).action == "none"
    assert tracker.satisfied_at(G) is None
    assert tracker.observe(obs(1)).action == "none"  # the first new pod bound, the rest being bound
    assert tracker.observe(obs(3)).action == "none" and tracker.satisfied_at(G) == 3
    assert tracker.observe(obs(2)).action == "stale"  # placed again: a loss is a loss


def test_minmember_dropping_to_1_while_stale_cancels_the_eviction(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(1))
    v = tracker.observe(obs(1, 1))
    assert v.action == "recovered"
    clock.advance(100)
    assert tracker.observe(obs(0, 1)).action == "none"


# ---------------------------------------------------------------------------
# grace periods


def test_grace_none_is_stale_but_never_evicts(tracker, clock):
    tracker.observe(obs(3, grace=None))
    v = tracker.observe(obs(2, grace=None))
    assert v == StaleVerdict(
        "stale", None, "2 of 3 members active, minMember 3: not evicting (podgang.io/staleness-grace-period is -1)"
    )
    for _ in range(5):
        clock.advance(10_000)
        v = tracker.observe(obs(2, grace=None))
        assert (v.action, v.deadline) == ("waiting", None)
    assert tracker.stale_groups() == [G]
    assert tracker.observe(obs(3, grace=None)).action == "recovered"


def test_per_group_grace_period(tracker, clock):
    tracker.observe(obs(3, grace=300))
    v = tracker.observe(obs(2, grace=300))
    assert v.deadline == clock.now + 300
    assert "evicting the rest in 5m unless it recovers" in v.message
    clock.advance(299)
    assert tracker.observe(obs(2, grace=300)).action == "waiting"
    clock.advance(1)
    assert tracker.observe(obs(2, grace=300)).message.endswith("active for 5m, minMember 3")


def test_grace_changed_while_stale_counts_from_when_it_became_stale(tracker, clock):
    tracker.observe(obs(3, grace=None))
    tracker.observe(obs(2, grace=None))
    clock.advance(120)
    assert tracker.observe(obs(2, grace=60)).action == "evict"


def test_zero_grace_still_reports_stale_first(tracker, clock):
    tracker.observe(obs(3, grace=0))
    v = tracker.observe(obs(2, grace=0))
    assert (v.action, v.deadline) == ("stale", clock.now)
    assert tracker.observe(obs(2, grace=0)).action == "evict"


# ---------------------------------------------------------------------------
# resets and bookkeeping


def test_forget_drops_the_history(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(2))
    tracker.forget(G)
    assert tracker.stale_groups() == []
    clock.advance(100)
    # a new group of the same name starts unsatisfied
    assert tracker.observe(obs(2)).action == "none"


def test_evicted_resets_so_the_gang_must_be_satisfied_again(tracker, clock):
    tracker.observe(obs(3))
    tracker.observe(obs(2))
    clock.advance(60)
    assert tracker.observe(obs(2)).action == "evict"
    tracker.evicted(G)
    assert tracker.stale_groups() == []
    # pods recreated and pending, then scheduled one by one
    assert run(tracker, clock, [(1, obs(0)), (1, obs(2)), (1, obs(3)), (1, obs(2))]) == [
        "none",
        "none",
        "none",
        "stale",
    ]


def test_groups_are_independent(tracker, clock):
    other = "ns/pg-other"
    tracker.observe(obs(3))
    tracker.observe(obs(2, 2, group=other))
    tracker.observe(obs(1, 2, group=other))
    assert tracker.stale_groups() == [other]
    tracker.observe(obs(2))
    assert tracker.stale_groups() == sorted([G, other])
    tracker.forget(other)
    assert tracker.stale_groups() == [G]


@pytest.mark.parametrize(
    "seconds, text",
    [(60, "60s"), (300, "5m"), (90, "1m30s"), (5400, "1h30m"), (3600, "1h"), (0.5, "500ms"), (1.5, "1.5s"), (0, "0s"),
     (3661, "1h1m1s"), (45, "45s")],
)  # fmt: skip
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


# ---------------------------------------------------------------------------
# short when first seen (issue 35): after a restart, never taken as satisfied


def test_a_gang_short_when_first_seen_is_not_taken_as_satisfied(tracker, clock):
    tracker.short_at_start(G)
    v = tracker.observe(obs(2))
    assert (v.action, v.deadline) == ("stale", clock.now + 60)  # its grace period starts now
    assert v.message == ("2 of 3 members active, minMember 3, short of it since the grouper first saw the gang "
                         "(not known to have been whole): evicting the rest in 60s unless it recovers")
    assert tracker.satisfied_at(G) is None and tracker.is_stale(G)


def test_a_gang_short_when_first_seen_waits_the_full_grace_period(tracker, clock):
    tracker.short_at_start(G)
    assert run(tracker, clock, [(0, obs(2)), (59.9, obs(2)), (0.1, obs(2))]) == ["stale", "waiting", "evict"]
    tracker.evicted(G)
    assert run(tracker, clock, [(1, obs(0)), (1, obs(2))]) == ["none", "none"]  # starts over: not short


def test_a_gang_short_when_first_seen_is_judged_by_its_minimum_now(tracker, clock):
    tracker.short_at_start(G)
    tracker.observe(obs(2))
    # raised (a hand-made group edited): still short, of the new minimum
    assert tracker.observe(obs(2, 4)).message.startswith("2 of 4 members active, minMember 4, short of it")
    # reaching it: satisfied like any gang, and a later loss is a loss
    assert tracker.observe(obs(4, 4)).action == "recovered"
    assert tracker.satisfied_at(G) == 4
    assert tracker.observe(obs(3, 4)).message.startswith("3 of 4 members active, minMember 4: evicting")


def test_a_gang_short_when_first_seen_whose_minimum_drops_to_its_members_is_satisfied(tracker, clock):
    tracker.short_at_start(G)
    tracker.observe(obs(2))
    assert tracker.observe(obs(2, 2)).action == "recovered"
    assert tracker.satisfied_at(G) == 2 and not tracker.is_stale(G)


def test_settling_explains_a_gang_short_when_first_seen_for_good(tracker, clock):
    """Its workload removes pods on purpose: after that the gang is only not satisfied yet
    (taken as satisfied at its minimum, it was stale again once the rollout ended)."""
    tracker.short_at_start(G)
    assert run(tracker, clock, [(0, obs(2)), (1, obs(2, settling=True)), (1, obs(2)), (120, obs(2))]) == [
        "stale", "recovered", "none", "none"]
    assert tracker.observe(obs(2)).message.endswith("not satisfied yet")


def test_short_when_first_seen_changes_nothing_for_a_gang_the_tracker_knows(tracker, clock):
    tracker.observe(obs(3))
    tracker.short_at_start(G)
    assert tracker.satisfied_at(G) == 3
    assert tracker.observe(obs(2)).message.startswith("2 of 3 members active, minMember 3: evicting")


# ---------------------------------------------------------------------------
# property: eviction only after an uninterrupted, full grace period

GROUPS = ["ns/a", "ns/b"]

observation = st.builds(
    GangObservation,
    group=st.sampled_from(GROUPS),
    min_member=st.sampled_from([0, 1] + [2, 3, 3, 3, 3, 4] * 3),
    active=st.integers(0, 5),
    succeeded=st.sampled_from([0] * 15 + [1, 2]),
    workload_settling=st.sampled_from([False] * 12 + [True]),
    grace_period=st.sampled_from([None, 0.0, 10.0, 60.0, 60.0, 90.5]),
)
elapsed = st.sampled_from([0.0, 1.0, 9.999, 10.0, 30.0, 60.0, 90.5]) | st.floats(0, 100, allow_nan=False)
# mostly observations; now and then the caller reports an eviction or a deleted group
step = st.tuples(st.sampled_from(["observe"] * 10 + ["evicted", "forget", "short_at_start"]), elapsed, observation)


@hsettings(max_examples=400, deadline=None)
@given(st.lists(step, min_size=10, max_size=100))
def test_property_evict_only_after_an_uninterrupted_grace_period(steps):
    clock = FakeClock(0.0)
    tracker = StaleGangTracker(clock)
    # per group: when it went stale, and whether anything since then forbids eviction
    stale_at: dict[str, float] = {}
    tainted: dict[str, bool] = {}
    for kind, dt, arg in steps:
        clock.advance(dt)
        if kind == "short_at_start":  # a first look after a restart: never an eviction sooner
            tracker.short_at_start(arg.group)
            continue
        if kind != "observe":
            getattr(tracker, kind)(arg.group)
            stale_at.pop(arg.group, None)
            tainted.pop(arg.group, None)
            continue
        o: GangObservation = arg
        v = tracker.observe(o)
        event(v.action)
        g = o.group
        if o.succeeded > 0 or o.workload_settling or o.min_member <= 1:
            tainted[g] = True
        assert v.action in {"none", "stale", "recovered", "evict", "waiting"}
        if v.action == "stale":
            assert g not in stale_at, "stale twice without recovery"
            stale_at[g] = clock.now
            tainted[g] = False
            assert o.active < o.min_member and o.succeeded == 0 and not o.workload_settling
            assert v.deadline == (None if o.grace_period is None else clock.now + o.grace_period)
        elif v.action == "recovered":
            assert g in stale_at, "recovered without being stale"
            stale_at.pop(g)
        elif v.action == "evict":
            assert g in stale_at, "evict without a preceding stale"
            assert not tainted[g], "evict although a member succeeded or the workload settled since it went stale"
            assert o.grace_period is not None
            assert clock.now >= stale_at[g] + o.grace_period  # the deadline the tracker announced
            assert o.succeeded == 0 and not o.workload_settling and o.min_member > 1
        elif v.action == "waiting":
            assert g in stale_at
            if v.deadline is not None:
                assert v.deadline > clock.now
        else:
            assert g not in stale_at
        assert sorted(stale_at) == tracker.stale_groups()


def test_a_subgroup_whose_minimum_rose_waits_for_capacity_and_a_loss_below_its_old_level_is_one():
    """A Ray worker group's minReplicas raised 2 → 3 over its 2 running workers (seen with the
    real KubeRay, tests/real/test_real_operators.py): the part waits for its third worker, as a
    whole gang does after a scale-up; it lost nothing. Losing one of the two is a loss."""
    from podgang.gang.stale import SubgroupCount

    tracker = StaleGangTracker(clock=FakeClock())

    def look(active_workers: int, minimum: int) -> StaleVerdict:
        parts = (SubgroupCount("headgroup", 1, 1), SubgroupCount("workers", minimum, active_workers))
        return tracker.observe(GangObservation(G, 1 + minimum, 1 + active_workers, 0, False, 5.0, subgroups=parts))

    assert look(2, 2).action == "none"
    assert look(2, 3).action == "none"  # raised: waiting, not stale
    assert look(3, 3).action == "none"
    assert look(2, 3).action == "stale"  # one of three lost
    assert look(3, 3).action == "recovered"
    assert look(3, 4).action == "none" and look(2, 4).action == "stale"  # below the level it was satisfied at
