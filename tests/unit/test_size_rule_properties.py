"""Properties of the rule that says whose number a hand-made group's minMember is
(:func:`podgang.rules.hand_made_size_rule`), over its inputs: the written value, the
members' sizes and histories (made before or after the group, scaled or not, dated or
not), what podgang recorded on the group, a pin, and a restart after the decision."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podgang.backends.base import GangSpec
from podgang.backends.kai import KAI
from podgang.gang import Cache
from podgang.gang import desired_group
from podgang.rules import MinMember, SizeRule, hand_made_size_rule, shared_min_member
from podgang.settings import DEFAULT
from tests.unit.test_grouper_units import feed

GROUP_MADE = datetime(2026, 11, 28, 10, 0, tzinfo=timezone.utc)
NS = "team"


def stamp(minutes: int) -> str:
    return (GROUP_MADE + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


#: a member's history: made some minutes from the group (negative: before it), then its
#: replicas written at these minutes (None: a scale subresource write, which has no time)
HISTORY = st.tuples(st.integers(-120, 30), st.lists(st.one_of(st.none(), st.integers(-120, 60)), max_size=3))


def member(name: str, replicas: int, history: tuple[int, list[int | None]] | None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}"}
    if history is not None:
        made, writes = history
        entries = [{"manager": "kubectl-client-side-apply", "operation": "Update", "time": stamp(made),
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
        entries += [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:replicas": {}}},
                     **({"subresource": "scale"} if at is None else {"time": stamp(max(at, made))})} for at in writes]
        md.update(creationTimestamp=stamp(made), generation=1 + len(writes), managedFields=entries)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name, KAI.label: "shared"}},
                                  "spec": {"schedulerName": "kai-scheduler",
                                           "containers": [{"name": "c", "image": "x"}]}}}}


def scaled_after_the_group(history: tuple[int, list[int | None]] | None) -> bool:
    """What the rule must find: a dated write after the group (not the member's making), or
    an undated one on a member made after the group."""
    if history is None:
        return False
    made, writes = history
    return any((at is None and made >= 0) or (at is not None and max(at, made) >= 0 and not (made >= 0 and at <= made))
               for at in writes)


def group(written: int, notes: dict[str, str] | None = None) -> dict[str, Any]:
    pg = KAI.build_podgroup(GangSpec("shared", NS, written))
    pg["metadata"]["creationTimestamp"] = stamp(0)
    if notes:
        pg["metadata"]["annotations"] = dict(notes)
    return pg


MEMBERS = st.lists(st.tuples(st.integers(1, 8), st.one_of(st.none(), HISTORY)), min_size=1, max_size=3)
RECORDS = st.sampled_from(["none", "followed-at-written", "followed-elsewhere", "elastic"])


def decide(written: int, members: list[tuple[int, Any]], record: str = "none") -> tuple[SizeRule, MinMember]:
    objs = [member(f"m{i}", replicas, history) for i, (replicas, history) in enumerate(members)]
    total = shared_min_member(objs)
    notes = {"none": {}, "followed-at-written": {DEFAULT.followed_size_annotation: str(written)},
             "followed-elsewhere": {DEFAULT.followed_size_annotation: str(written + 1)},
             "elastic": {DEFAULT.elastic_size_annotation: str(written)}}[record]
    return hand_made_size_rule(group(written, notes), written, total, objs), total


@given(st.integers(0, 30), MEMBERS, RECORDS)
def test_the_rule_always_decides_and_says_why(written, members, record):
    rule, total = decide(written, members, record)
    assert rule.written == written and isinstance(rule.follows, bool)
    assert 0 < len(rule.why) <= 300
    if written >= total.value:
        assert rule.follows  # at the total, or a gang larger than its pods: never left so
    elif record in ("followed-elsewhere", "elastic"):
        assert not rule.follows and not rule.first_look  # the user's number, as recorded
    elif record == "followed-at-written":
        assert rule.follows and not rule.first_look


@given(st.integers(0, 30), MEMBERS)
def test_at_the_first_look_the_evidence_decides(written, members):
    rule, total = decide(written, members)
    if written >= total.value:
        return
    assert rule.first_look
    scaled = any(scaled_after_the_group(history) for _, history in members)
    undated = any(history is not None and None in history[1] for _, history in members)
    if written <= 1:
        assert rule.follows and "placeholder" in rule.why
    elif scaled:
        assert rule.follows and "was scaled to" in rule.why
    elif not undated:  # nobody scaled anything since the group was written: the number is on purpose
        assert not rule.follows and "elastic gang" in rule.why
    else:  # an undated scale of a member older than the group: an old total
        assert rule.follows and "old total" in rule.why


@given(st.integers(0, 30), MEMBERS, st.lists(st.integers(1, 8), min_size=3, max_size=3), st.one_of(st.none(), HISTORY))
def test_a_decision_survives_a_restart_and_any_later_scale(written, members, scaled_to, later):
    """Recorded as the grouper records it, re-read by a restarted grouper after any scale
    (with any history): followed stays followed, elastic stays elastic — unless its written
    number is now at or over the members' total (a gang larger than its pods is lowered)."""
    rule, total = decide(written, members)
    if rule.follows:
        now_written, record = total.value, "followed-at-written"  # podgang wrote the total and recorded it
    else:
        now_written, record = written, "elastic"
    after = [(scaled_to[i], later) for i in range(len(members))]
    again, total_after = decide(now_written, after, record)
    assert again.follows == rule.follows or (not rule.follows and now_written >= total_after.value)
    assert not again.first_look or now_written >= total_after.value


@given(st.integers(1, 30), st.integers(0, 30), MEMBERS)
def test_a_pin_on_the_group_is_its_size_whatever_the_evidence(pin, written, members):
    objs = [member(f"m{i}", replicas, history) for i, (replicas, history) in enumerate(members)]
    pinned = group(written, {DEFAULT.min_member_annotation: str(pin)})
    desired = desired_group(feed(Cache(DEFAULT), pinned, *objs), f"{NS}/shared")
    assert desired.min_member is not None and desired.min_member.value == pin and desired.min_member.pinned
    assert desired.size_rule is None
