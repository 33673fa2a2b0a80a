"""Seed 004 end to end against the HTTP API emulator: a prefill Deployment (2, at
least 1) and a decode Deployment (3, at least 1) share one hand-made KAI group; the
grouper writes the subgroups, keeps them on scale, adds a joining workload, and
evicts the prefill pods once every decode pod is gone (but not after one loss)."""

from __future__ import annotations

import asyncio

from tests.grouper_support import NS, deploy_with_pods, events, min_member, podgroup, running_grouper, scale

GROUP = "prefill-decode"
MIN_AVAILABLE = {"podgang.io/min-available": "1"}


def subgroups(emu) -> list | None:
    pg = emu.get("podgroups", NS, GROUP)
    return pg["spec"].get("subGroups") if pg else None


def seed_004(emu):
    emu.put(podgroup(GROUP, 5))
    prefill = deploy_with_pods(emu, "prefill", 2, group=GROUP, annotations=MIN_AVAILABLE)
    decode = deploy_with_pods(emu, "decode", 3, group=GROUP, annotations=MIN_AVAILABLE)
    return prefill, decode


def names(pods: list[dict]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


ONE_EACH = [{"name": "decode", "minMember": 1}, {"name": "prefill", "minMember": 1}]


async def wait_subgroups(emu, wanted):
    await emu.wait_for(lambda: subgroups(emu) == wanted and min_member(emu, GROUP) == sum(
        s["minMember"] for s in wanted), 3.0, f"subgroups are {subgroups(emu)}, minMember {min_member(emu, GROUP)}")


async def test_subgroups_written_kept_on_scale_and_a_joining_workload_added(emu):
    (_, _, _), (decode, _, _) = seed_004(emu)
    async with running_grouper(emu):
        await wait_subgroups(emu, ONE_EACH)
        await emu.wait_for(lambda: [e["message"] for e in events(emu, "SubgroupsChanged")] == [
            "subgroups set: decode 1, prefill 1 (each workload's minimum inside the gang)"], 3.0,
            f"events: {[e['message'] for e in events(emu)]}")
        scale(emu, decode, 5)  # above its minimum a workload scales freely
        deploy_with_pods(emu, "router", 1, group=GROUP)
        await wait_subgroups(emu, [*ONE_EACH, {"name": "router", "minMember": 1}])
        assert subgroups(emu)[0] == {"name": "decode", "minMember": 1}


async def test_every_decode_pod_lost_evicts_the_prefill_pods_after_the_grace_period(emu):
    loop = asyncio.get_running_loop()
    (_, _, prefill_pods), (_, _, decode_pods) = seed_004(emu)
    async with running_grouper(emu, staleness_grace_period=0.5):
        await wait_subgroups(emu, ONE_EACH)
        for name in names(decode_pods):
            emu.delete("pods", NS, name)
        lost = loop.time()
        await emu.wait_for(lambda: any("decode: 0 of minimum 1 active" in e["message"]
                                       for e in events(emu, "GangStale")), 3.0, f"no GangStale: {events(emu)}")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names(prefill_pods)), 4.0,
                           "the prefill pods were not evicted")
        assert loop.time() - lost >= 0.5
        assert len(emu.find_requests("POST", r"/eviction$")) == 2


async def test_one_decode_pod_lost_is_not_stale_and_the_last_one_is(emu):
    (_, _, prefill_pods), (_, _, decode_pods) = seed_004(emu)
    key = f"{NS}/{GROUP}"
    async with running_grouper(emu, staleness_grace_period=0.3) as g:
        await wait_subgroups(emu, ONE_EACH)
        first, *rest = names(decode_pods)
        emu.delete("pods", NS, first)
        # the grouper has seen the loss and judged the group since: a loss is judged at once
        await emu.wait_for(lambda: first not in names(g.controller.cache.members(key)), 3.0)
        start = g.controller.reconciles
        await emu.wait_for(lambda: g.controller.reconciles > start, 3.0)
        assert g.controller.tracker.stale_groups() == []
        assert events(emu, "GangStale") == [] and emu.find_requests("POST", r"/eviction$") == []
        # decode 2 of minimum 1: still whole; losing the rest is not
        for name in rest:
            emu.delete("pods", NS, name)
        await emu.wait_for(lambda: events(emu, "GangStale"), 3.0)
        [stale] = events(emu, "GangStale")
        assert stale["message"].startswith("decode: 0 of minimum 1 active, minMember 2: evicting the rest in")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names(prefill_pods)), 4.0)


async def test_a_workload_leaving_takes_its_subgroups_off_the_podgroup(emu):
    """prefill is deleted: decode alone is the whole gang; a prefill subgroup no pod can
    meet any more would keep KAI from ever placing it."""
    (prefill, prefill_rs, prefill_pods), _ = seed_004(emu)
    async with running_grouper(emu):
        await wait_subgroups(emu, ONE_EACH)
        for name in names(prefill_pods):
            emu.delete("pods", NS, name)
        emu.delete("replicasets", NS, prefill_rs["metadata"]["name"])
        emu.delete("deployments", NS, prefill["metadata"]["name"])
        await emu.wait_for(lambda: subgroups(emu) is None and min_member(emu, GROUP) == 1, 3.0,
                           f"subgroups are {subgroups(emu)}, minMember {min_member(emu, GROUP)}")
        annotations = emu.get("podgroups", NS, GROUP)["metadata"].get("annotations") or {}
        assert "podgang.io/subgroups" not in annotations
        said = "subgroups set: none (the group has one part again: the one minMember is the gang)"
        await emu.wait_for(lambda: said in [e["message"] for e in events(emu, "SubgroupsChanged")], 3.0,
                           f"events: {[e['message'] for e in events(emu)]}")


async def test_every_decode_pod_lost_while_no_grouper_watched_is_still_found_stale(emu):
    """The grouper restarts (or another replica leads) after every decode pod is gone:
    prefill's two pods still make minMember 2 in all, but they were placed with decode
    under a PodGroup holding both subgroups, so the gang is stale, not waiting."""
    (_, _, prefill_pods), (_, _, decode_pods) = seed_004(emu)
    async with running_grouper(emu):
        await wait_subgroups(emu, ONE_EACH)
    for name in names(decode_pods):
        emu.delete("pods", NS, name)
    async with running_grouper(emu, staleness_grace_period=0.3):
        await emu.wait_for(lambda: any("decode: 0 of minimum 1 active" in e["message"]
                                       for e in events(emu, "GangStale")), 3.0, f"no GangStale: {events(emu)}")
        await emu.wait_for(lambda: all(emu.get("pods", NS, n) is None for n in names(prefill_pods)), 4.0,
                           "the prefill pods were not evicted")
