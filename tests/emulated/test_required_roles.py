"""Issue 30 item 4, seed 004 "every role before any extra, whatever order they arrive in":
``podgang.io/required-roles`` on a hand-made group makes each declared role part of the
gang's minimum from the start — a role no workload fills yet is a part of its own, so
nothing is placed before its pods come — and `plan`, `status` and the webhook name it."""

from __future__ import annotations

from datetime import datetime, timezone

import jsonschema
import pytest
import yaml

from podgang import rules
from podgang.backends import GangSpec
from podgang.backends.coscheduling import COSCHEDULING
from podgang.backends.kai import KAI
from podgang.backends.volcano import VOLCANO
from podgang.gang import Cache
from podgang.gang import desired_group, plan_writes
from podgang.settings import DEFAULT, Settings
from podgang.status import Snapshot, build_report
from tests.grouper_support import LABEL, NS, podgroup
from tests.emulator import merge_patch
from tests.unit.test_grouper_units import feed
from tests.unit.test_plan_cli import plan, write
from tests.emulated.test_replica_tree import WORKER_INDEX, kai_schema, lws, lws_pods, tree
from tests.unit.test_subgroups import workload
from tests.emulated.test_webhook_kube import managed_podgroup
from tests.webhook_support import mutate_once, owned_pod_review, seed_owners

REQUIRED = DEFAULT.required_roles_annotation
AWAITED = DEFAULT.awaited_roles_annotation
KEY = f"{NS}/shared"


def declaring(roles: str | None, min_member: int = 1) -> dict:
    """The hand-made group ``shared`` as a user writes it: minMember 1, the roles declared."""
    return podgroup("shared", min_member, annotations={REQUIRED: roles} if roles is not None else None)


def pending(pod: dict) -> dict:
    """A pod as its controller made it, before any scheduler placed it."""
    pod["spec"].pop("nodeName", None)
    pod["status"]["phase"] = "Pending"
    return pod


def with_pods(workload: dict) -> list[dict]:
    return [obj for part in lws_pods(workload) for obj in part]


def apply(cache: Cache, backend=KAI) -> dict:
    """The group after the grouper's writes, as the apiserver keeps it (fed back to the cache)."""
    group = cache.podgroups.of(backend, KEY)
    for write in plan_writes(desired_group(cache, KEY), group, cache.settings):
        group = merge_patch(group, write.body)
    feed(cache, group)
    return group


# ---------------------------------------------------------------------------- the annotation


@pytest.mark.parametrize("raw, roles, bad", [
    ("prefill,decode", ("prefill", "decode"), 0),
    (" prefill , decode,,prefill ", ("prefill", "decode"), 0),  # spaces, empties and repeats are nothing
    ("prefill,Decode_1", ("prefill",), 1),  # a role is a subgroup's name: a DNS label
    ("", (), 0),
])
def test_the_declared_roles_are_read_and_a_bad_name_is_said(raw, roles, bad):
    found, problems = rules.declared_roles(declaring(raw), DEFAULT)
    assert found == roles and len(problems) == bad
    if bad:
        assert problems[0].startswith(f'{REQUIRED} on podgroup/shared: "Decode_1" is ignored')


# ---------------------------------------------------------------------------- KAI: a tree


def test_a_group_that_declares_its_roles_is_a_gang_of_them_before_any_workload_comes():
    """Written before its workloads (as a user applies it first): each declared role is a part
    of minimum 1 at once, so the first role's pods, however soon they come, wait for the others
    (the webhook leaves their subgroup out until it is listed; KAI places none before the gang)."""
    cache = feed(Cache(), declaring("prefill,decode"))
    desired = desired_group(cache, KEY)
    assert [(s.name, s.min_member) for s in desired.subgroups] == [("decode", 1), ("prefill", 1)]
    assert desired.min_member.value == 2 and desired.awaited_roles == ("prefill", "decode")
    group = apply(cache)
    assert group["spec"]["minMember"] == 2 and group["metadata"]["annotations"][AWAITED] == "prefill,decode"
    assert desired_group(feed(Cache(), declaring(None)), KEY).min_member is None  # one that declares none: left alone


def test_a_declared_role_no_lws_fills_yet_is_required_so_the_first_role_waits_for_it():
    """The seed's failure: prefill and its pods first, decode's LWS 2 s later. Without the
    annotation the root needs prefill alone (minSubGroup 1) and KAI places both its
    replicas; with it, decode is a part of the root from the start."""
    cache = Cache()
    prefill = lws("prefill", 2, 2)
    feed(cache, prefill, declaring(None), *with_pods(prefill))
    alone = desired_group(cache, KEY)
    assert alone.min_subgroup == 1 and alone.min_member.value == 2  # what KAI was given: prefill alone
    assert alone.advice == () and alone.awaited_roles is None  # one workload: nothing to advise

    feed(cache, declaring("prefill,decode"))
    desired = desired_group(cache, KEY)
    assert tree(desired) == [("decode", 1, None, False), ("prefill", 1, None, True),
                             ("prefill-0", 2, "prefill", False), ("prefill-1", 2, "prefill", False)]
    assert desired.min_subgroup == 2 and desired.min_member.value == 3  # no prefill replica alone
    assert desired.awaited_roles == ("decode",)
    assert desired.problems[-1] == (f"{REQUIRED} on podgroup/shared requires role decode, which no workload "
                                    f"fills yet: none of the gang's pods is placed until decode has pods")
    group = apply(cache)
    jsonschema.validate(group, kai_schema())
    assert group["spec"]["minSubGroup"] == 2 and "minMember" not in group["spec"]
    assert {"name": "decode", "minMember": 1} in group["spec"]["subGroups"]
    assert group["metadata"]["annotations"][AWAITED] == "decode"

    # decode's LWS comes: its own part replaces the placeholder (a role of complete replicas,
    # its leaves once its pods are made), and the awaited roles are none
    decode = lws("decode", 2, 2)
    feed(cache, decode)
    desired = desired_group(cache, KEY)
    # decode's LWS fills the role: no longer awaited, and one part needing its minimum's pods until they are made
    assert tree(desired)[0] == ("decode", 2, None, False) and desired.awaited_roles == ()
    assert not any(REQUIRED in p for p in desired.problems)

    # the real LWS controller makes each group's leader before its workers: with decode's leaders
    # alone, no replica is whole, yet the role stays counted — a leaf per replica it needs, by the
    # indexes being made, each needing all its pods (a parent with no leaf is no part to KAI, which
    # then placed prefill's two replicas whole and decode never fit: issue 44)
    owners, pods = lws_pods(decode)
    leaders = [pending(p) for p in pods if p["metadata"]["labels"][WORKER_INDEX] == "0"]
    feed(cache, *owners[:1], leaders[1])  # replica 1's leader first: its index is the one being made
    desired = desired_group(cache, KEY)
    assert [s for s in tree(desired) if s[0].startswith("decode")] == [("decode", 1, None, True),
                                                                       ("decode-1", 2, "decode", False)]
    assert desired.min_subgroup == 2 and not rules.tree_problems(desired.subgroups, desired.min_subgroup)
    feed(cache, leaders[0])
    assert [s for s in tree(desired_group(cache, KEY)) if s[0].startswith("decode")] == [("decode", 1, None, True),
                                                                                      ("decode-0", 2, "decode", False)]
    feed(cache, *with_pods(decode))
    group = apply(cache)
    jsonschema.validate(group, kai_schema())
    assert group["spec"]["minSubGroup"] == 2
    assert [e for e in group["spec"]["subGroups"] if e["name"] == "decode"] == [{"name": "decode", "minSubGroup": 1}]
    assert AWAITED not in group["metadata"]["annotations"]
    assert plan_writes(desired_group(cache, KEY), group, DEFAULT) == []


def test_a_declared_deployment_role_is_a_flat_part_counted_in_minmember_and_never_elastic():
    """decode a Deployment, not made yet: a flat part of minimum 1 beside prefill's; the
    user's minMember 1 below the total is not an elastic gang once roles are declared."""
    cache = Cache()
    feed(cache, workload("prefill", 2, min_available="1"), declaring("prefill,decode"))
    desired = desired_group(cache, KEY)
    assert [s.shape for s in desired.subgroups] == [("decode", 1, None, False), ("prefill", 1, None, False)]
    assert desired.min_subgroup is None and desired.min_member.value == 2
    assert "decode 1 (required, no workload yet)" in desired.min_member.reason
    group = apply(cache)
    assert group["spec"]["minMember"] == 2 and {"name": "decode", "minMember": 1} in group["spec"]["subGroups"]
    feed(cache, workload("decode", 3))
    group = apply(cache)
    assert group["spec"]["minMember"] == 4 and {"name": "decode", "minMember": 3} in group["spec"]["subGroups"]
    assert AWAITED not in group["metadata"]["annotations"]


def test_a_role_the_group_declares_that_pods_fill_themselves_is_not_awaited():
    cache = Cache()
    feed(cache, workload("prefill", 2), workload("decode-v2", 1, subgroup="decode"), declaring("prefill,decode"))
    desired = desired_group(cache, KEY)
    assert desired.awaited_roles == () and [s.name for s in desired.subgroups] == ["decode", "prefill"]
    assert desired.min_member.value == 3


# ---------------------------------------------------------------------------- other backends


def on(backend) -> Cache:
    """A cache whose one scheduler is ``backend``, the workloads' templates naming ``shared`` in its key."""
    return Cache(settings=Settings(backends=(("kai-scheduler", backend),)))


def named_for(backend, dep: dict) -> dict:
    template = dep["spec"]["template"]["metadata"]
    del template["labels"][LABEL]
    template.setdefault(backend.section, {})[backend.key] = "shared"
    return dep


def backend_group(backend, roles: str) -> dict:
    group = backend.build_podgroup(GangSpec("shared", NS, 1))
    group["metadata"]["annotations"] = {REQUIRED: roles}
    return group


def test_volcano_holds_the_declared_role_as_a_task_minimum():
    cache = on(VOLCANO)
    feed(cache, named_for(VOLCANO, workload("prefill", 2, min_available="1")), backend_group(VOLCANO, "prefill,decode"))
    desired = desired_group(cache, KEY)
    assert desired.min_member.value == 2 and desired.awaited_roles == ("decode",)
    group = apply(cache, VOLCANO)
    assert group["spec"]["minMember"] == 2 and group["spec"]["minTaskMember"] == {"decode": 1, "prefill": 1}


def test_without_subgroups_the_declared_role_still_counts_in_minmember():
    cache = on(COSCHEDULING)
    feed(cache, named_for(COSCHEDULING, workload("prefill", 2, min_available="1")),
         backend_group(COSCHEDULING, "prefill,decode"))
    desired = desired_group(cache, KEY)
    # not prefill's minimum 1 + decode's 1: prefill's second pod would stand in for decode. Every
    # pod prefill will have, and one more: nothing is placed before a pod of another part comes
    assert desired.min_member.value == 3 and "cannot tell its parts apart" in desired.min_member.reason
    assert any("cannot express subgroups" in p for p in desired.problems)
    assert apply(cache, COSCHEDULING)["spec"]["minMember"] == 3
    decode = named_for(COSCHEDULING, workload("decode", 3, min_available="1"))
    feed(cache, decode)
    assert desired_group(cache, KEY).min_member.value == 2  # decode came: the minimums again


# ---------------------------------------------------------------------------- advice


def test_several_workloads_sharing_a_group_that_declares_no_role_are_advised_to():
    cache = Cache()
    feed(cache, workload("prefill", 2), workload("decode", 3), declaring(None))
    [advice] = desired_group(cache, KEY).advice
    assert advice.startswith(f"2 workloads share this group (decode, prefill) and it declares no {REQUIRED}")
    assert advice.endswith(f'declare them: {REQUIRED}: "decode,prefill"')
    feed(cache, declaring("prefill,decode"))
    assert desired_group(cache, KEY).advice == ()


# ---------------------------------------------------------------------------- the webhook


async def test_a_pod_joining_a_group_that_awaits_a_role_is_told_which(tmp_path, emu):
    seed_owners(emu)
    group = managed_podgroup("prefill-decode", managed=False)
    group["metadata"]["annotations"] = {REQUIRED: "web,decode", AWAITED: "decode"}  # as the grouper records it
    emu.put(group)
    doc = owned_pod_review(0)  # a pod of Deployment web
    doc["request"]["object"]["metadata"].setdefault("labels", {})["kai.scheduler/podgroup"] = "prefill-decode"
    answer = await mutate_once(tmp_path, emu, doc)
    assert answer["allowed"] and answer["warnings"] == [
        f"PodGroup prefill-decode requires role decode ({REQUIRED}), which no workload filled when podgang last "
        f"looked: none of its pods is placed until it has pods"]


def test_nothing_is_said_once_every_declared_role_is_filled_or_none_is_declared():
    assert rules.required_roles_warning(declaring("prefill,decode"), "shared") is None  # nothing awaited
    assert rules.required_roles_warning(podgroup("shared", 1, annotations={AWAITED: "decode"}), "shared") is None


# ---------------------------------------------------------------------------- plan and status


def test_plan_names_the_awaited_role_and_advises_the_annotation(tmp_path):
    path = write(tmp_path, "roles.yaml", yaml.safe_dump_all([declaring("prefill,decode"), lws("prefill", 2, 2)]))
    out = plan(path).stdout
    assert f"{REQUIRED} on podgroup/shared requires role decode, which no workload fills yet" in out  # a warning
    assert f"minimum 1  [required by {REQUIRED}; no workload fills it yet]" in out  # decode's part in the tree

    shared = write(tmp_path, "shared.yaml", yaml.safe_dump_all(
        [declaring(None), workload("prefill", 2), workload("decode", 3)]))
    out = plan(shared).stdout
    assert f'declare them: {REQUIRED}: "decode,prefill"' in out


def test_status_names_the_awaited_role_and_advises_the_annotation():
    def report(group: dict, *deployments: dict):
        snapshot = Snapshot([], {"kai": [group]}, {"Deployment": list(deployments)}, [], datetime.now(timezone.utc))
        (gang,) = build_report(snapshot, DEFAULT).gangs
        return gang
    gang = report(declaring("prefill,decode"), workload("prefill", 2, min_available="1"))
    assert gang.wanted == 2 and any("requires role decode, which no workload fills yet" in p for p in gang.problems)
    gang = report(declaring(None), workload("prefill", 2), workload("decode", 3))
    assert any(p.endswith(f'declare them: {REQUIRED}: "decode,prefill"') for p in gang.problems)
