"""Messages within the apiserver's limits (issue 11, item 6): an admission warning is at
most 256 characters on one line, and a denial or log line quotes a bounded prefix of a
huge value (a 100 KB annotation value, pod name or ownerReference), saying how long it
was."""

from __future__ import annotations

import re

import copy
import json
import logging

import pytest

from podgang.backends.kai import keys as kai_keys
from podgang import objects, rules
from podgang.logs import JsonFormatter
from podgang.webhook.admission import MAX_WARNING, Verdict, encode_response
from tests.emulator import KubeEmulator
from tests.webhook_support import mutate_once, review, running_webhook, seed_owners, with_annotations

HUGE = 100_000
MESSAGE_BOUND = 2_000  # a message quotes a few values of at most objects.MAX_QUOTED characters
LOG_LINE_BOUND = 8_000


def pod(annotations=None, labels=None, name="p"):
    md = {"name": name, "namespace": "ns"}
    if annotations:
        md["annotations"] = annotations
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]}}


def test_clip_keeps_short_text_and_says_how_long_a_long_one_was():
    assert objects.clip("short") == "short"
    clipped = objects.clip("x" * HUGE)
    assert clipped.startswith("x" * objects.MAX_QUOTED + "…") and clipped.endswith(f"({HUGE} characters)")
    assert len(clipped) < objects.MAX_QUOTED + 30


@pytest.mark.parametrize(
    "notes,expected",
    [
        ({"gpu-fraction": "1." + "5" * HUGE}, rules.MSG_BAD_FRACTION),
        ({"gpu-memory": "4" * HUGE + "x"}, rules.MSG_BAD_MEMORY),
        ({"gpu-memory": "1" * HUGE, "gpu-fraction": "9" * HUGE}, kai_keys.MSG_V18_FRACTION_AND_MEMORY),
        ({"nvidia.com/container.c.gpu-memory.request": "1" * HUGE + "x"}, "nvidia.com/container.c.gpu-memory.request"),
        ({"nvidia.com/container." + "c" * HUGE + ".gpu-memory.request": "1Gi"}, "container " + "c" * 100),
        # not a number KAI parses (more than 64 bits): no NvFractions comparison, the value's own check
        ({"nvidia.com/container.c.gpu-memory.request": "1Gi", "gpu-memory": "1" * HUGE}, rules.MSG_BAD_MEMORY),
    ],
)
def test_a_gpu_denial_quotes_a_bounded_prefix_of_a_huge_annotation(notes, expected):
    message = rules.gpu_problem(pod(annotations=notes))
    assert message.startswith(expected)
    assert len(message) < MESSAGE_BOUND
    # the huge value (or the container name in a huge key) is quoted in part, and says how long it was
    assert any(int(n) >= HUGE for n in re.findall(r"… \((\d+) characters\)", message.replace('…"', "…")))


def test_a_huge_group_name_is_denied_in_a_bounded_message():
    label = rules.hand_made_group(pod(labels={"kai.scheduler/podgroup": "a" * HUGE}))
    assert isinstance(label, rules.Denial) and len(label.message) < MESSAGE_BOUND
    both = rules.hand_made_group(pod(labels={"kai.scheduler/podgroup": "a" * HUGE}, annotations={"pod-group-name": "b" * HUGE}))
    assert isinstance(both, rules.Denial) and len(both.message) < MESSAGE_BOUND
    assert f"({HUGE} characters)" in both.message


def test_a_huge_min_member_or_name_is_reported_in_a_bounded_message():
    obj = pod(annotations={"podgang.io/min-member": "7" * HUGE + "!"}, name="n" * HUGE)
    value, problem = rules.pinned_min_member(obj)
    assert value is None and len(problem) < MESSAGE_BOUND
    assert len(objects.kind_name(obj)) < objects.MAX_QUOTED + 30


def test_an_owner_reference_without_uid_and_a_huge_name_is_denied_in_a_bounded_message():
    owned = pod()
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r" * HUGE, "controller": True}]
    denial = rules.gang_for_pod(owned)
    assert isinstance(denial, rules.Denial) and len(denial.message) < MESSAGE_BOUND


def test_every_warning_in_an_answer_is_one_line_of_at_most_256_characters():
    verdict = Verdict(True, "patched", "r", warnings=["short", "w" * 1000, "line one\nline two\x00"])
    answer = json.loads(encode_response("uid-1", verdict)[0])
    warnings = answer["response"]["warnings"]
    assert MAX_WARNING == 256
    assert warnings[0] == "short"
    assert len(warnings[1]) == 256 and warnings[1].endswith("…")
    assert warnings[2] == "line one line two "
    assert all(len(w) <= 256 and w.isprintable() for w in warnings)


async def test_a_missing_hand_made_group_warning_fits_the_apiserver_limit(tmp_path):
    """A valid 253-character group in a 63-character namespace: the warning would be
    longer than 256 characters."""
    namespace, group = "n" * 63, "g" * 253
    doc = with_annotations(review("pod-create-bare-gpu"), {"pod-group-name": group})
    doc["request"]["namespace"] = namespace
    doc["request"]["object"]["metadata"]["namespace"] = namespace
    async with KubeEmulator() as kube:
        seed_owners(kube)
        response = await mutate_once(tmp_path, kube, doc)
    assert response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith(f"PodGroup {group[:50]}") and len(warning) == 256


async def test_huge_values_reach_neither_the_denial_nor_the_log_line_whole(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="podgang.webhook.decision")
    doc = copy.deepcopy(review("pod-create-labelled-gpu-memory"))
    md = doc["request"]["object"]["metadata"]
    md["annotations"] = {**(md.get("annotations") or {}), "gpu-memory": "8" * HUGE + "MiB"}
    md["name"] = "p" * HUGE  # the mutating and validating webhooks see names before the apiserver checks them
    doc["request"]["uid"] = "u" * HUGE  # not an apiserver's, but anyone who reaches the port can send one
    async with running_webhook(tmp_path) as wh:
        response = await wh.validate(doc)
    assert response["uid"] == "u" * HUGE  # echoed whole: the apiserver matches it
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert len(message) < MESSAGE_BOUND and f"({HUGE + 3} characters)" in message
    [record] = [r for r in caplog.records if r.name == "podgang.webhook.decision"]
    line = JsonFormatter().format(record)
    assert len(line) < LOG_LINE_BOUND, len(line)
    assert json.loads(line)["verdict"] == "denied"
