"""KAI v0.18 against the emulator: the grouper finds the KAI release in the PodGroup CRD, and
holds the size of a semi-preemptible group instead of sending the raise KAI's webhook refuses.

KAI's PodGroup webhook is played (``emu.admit``): like KAI v0.18's
``validateSemiPreemptibleImmutability`` (#1804), it refuses any update of a semi-preemptible
group that raises a minMember (the root's, unset = 1, or a subgroup's, unset = 0), in KAI's
words, answered as the apiserver answers a webhook's denial (403). It is written here apart
from podgang's own rule, so that a grouper sending the raise is refused and seen to be.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import aiohttp
import yaml

from podgang import cli, status_cli

from tests.emulator.resources import ResourceType
from tests.grouper_support import NS, deploy_with_pods, events, min_member, podgroup, podgroup_writes, running_grouper, scale
from tests.paths import TESTS

CRDS = TESTS / "fixtures" / "crds" / "kai-versions"
GROUP = "serving"
KAI_WORDS = "on a semi-preemptible PodGroup: it would reclassify running elastic pods or subgroups as core"


def kai_podgroup_webhook(old: dict | None, new: dict) -> str | None:
    """KAI v0.18's refusal of a raised minimum on a semi-preemptible group (None: allowed)."""
    if old is None or (old.get("spec") or {}).get("preemptibility") != "semi-preemptible":
        return None
    was, now = old["spec"].get("minMember", 1), (new.get("spec") or {}).get("minMember", 1)
    if now > was:
        return f"cannot increase minMember ({was} -> {now}) {KAI_WORDS}"
    before = {s["name"]: s.get("minMember", 0) for s in old["spec"].get("subGroups") or []}
    for s in (new.get("spec") or {}).get("subGroups") or []:
        was, now, name = before.get(s["name"]), s.get("minMember", 0), s["name"]
        if was is not None and now > was:
            return (f'cannot increase minMember ({was} -> {now}) on subgroup "{name}" of a semi-preemptible '
                    f'PodGroup: it would reclassify running elastic pods or subgroups as core')
    return None


def semi_preemptible(name: str, size: int, subgroups: list[dict] | None = None) -> dict:
    group = podgroup(name, size)
    group["spec"]["preemptibility"] = "semi-preemptible"
    if subgroups is not None:
        group["spec"]["subGroups"] = subgroups
    return group


async def wait_event(emu, reason: str, text: str) -> dict:
    found = await emu.wait_for(lambda: [e for e in events(emu, reason) if text in e["message"]], 5.0,
                               f"no {reason} event with {text!r}: {[(e['reason'], e['message']) for e in events(emu)]}")
    return found[0]


async def test_the_played_webhook_refuses_a_raise_as_the_apiserver_answers_a_denial(emu):
    emu.admit("podgroups.scheduling.run.ai", kai_podgroup_webhook)
    emu.put(semi_preemptible(GROUP, 2))
    url = f"{emu.url}/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/{GROUP}"
    merge = {"Content-Type": "application/merge-patch+json"}
    async with aiohttp.ClientSession() as http:
        async with http.patch(url, json={"spec": {"minMember": 3}}, headers=merge) as resp:
            body = await resp.json()
        async with http.patch(url, json={"spec": {"minMember": 1}}, headers=merge) as lowered:
            pass
    assert resp.status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == (f'admission webhook "validate.podgroups.example" denied the request: '
                               f"cannot increase minMember (2 -> 3) {KAI_WORDS}")
    assert lowered.status == 200 and min_member(emu, GROUP) == 1


async def test_a_semi_preemptible_group_keeps_its_size_on_a_scale_up_and_says_why_once(emu):
    emu.admit("podgroups.scheduling.run.ai", kai_podgroup_webhook)
    emu.put(semi_preemptible(GROUP, 2))
    dep, _, _ = deploy_with_pods(emu, "model", 2, group=GROUP)
    async with running_grouper(emu):
        # found at its members' total: followed from now on
        await emu.wait_for(lambda: (emu.get("podgroups", NS, GROUP)["metadata"].get("annotations") or {}).get(
            "podgang.io/followed-min-member") == "2", 5.0)
        scale(emu, dep, 3)
        held = await wait_event(emu, "MinMemberHeld", "minMember stays 2 (wanted 3)")
        assert held["type"] == "Warning"
        assert "semi-preemptible" in held["message"] and f"cannot increase minMember (2 -> 3) {KAI_WORDS}" in held[
            "message"] and len(held["message"]) <= 1024
        scale(emu, dep, 4)  # another look at the group: still no raise sent
        await wait_event(emu, "MinMemberHeld", "minMember stays 2 (wanted 4)")
        assert emu.denied == [] and min_member(emu, GROUP) == 2
        assert [e["message"] for e in events(emu, "MinMemberHeld")].count(held["message"]) == 1
        # lowering is allowed: it is written
        scale(emu, dep, 1)
        await emu.wait_for(lambda: min_member(emu, GROUP) == 1, 5.0, "minMember was not lowered to 1")
    assert emu.denied == []
    assert all((w.body or {}).get("spec", {}).get("minMember", 0) <= 2 for w in podgroup_writes(emu, GROUP, "PATCH"))


async def test_a_semi_preemptible_shared_group_does_not_raise_a_subgroup(emu):
    emu.admit("podgroups.scheduling.run.ai", kai_podgroup_webhook)
    emu.put(semi_preemptible(GROUP, 2, [{"name": "prefill", "minMember": 1}, {"name": "decode", "minMember": 1}]))
    prefill, _, _ = deploy_with_pods(emu, "prefill", 1, group=GROUP)
    deploy_with_pods(emu, "decode", 1, group=GROUP)
    async with running_grouper(emu):
        await emu.wait_for(lambda: (emu.get("podgroups", NS, GROUP)["metadata"].get("annotations") or {}).get(
            "podgang.io/followed-min-member") == "2", 5.0)
        scale(emu, prefill, 2)
        held = await wait_event(emu, "MinMemberHeld", "semi-preemptible")
        assert "minMember stays 2 (wanted 3)" in held["message"]
        assert emu.denied == []
    spec = emu.get("podgroups", NS, GROUP)["spec"]
    assert spec["minMember"] == 2 and {s["name"]: s["minMember"] for s in spec["subGroups"]} == {"prefill": 1, "decode": 1}


def install_crd(emu, name: str) -> None:
    emu.register(ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
                              namespaced=False))
    emu.put(yaml.safe_load(Path(CRDS / name).read_text()))


async def test_the_grouper_applies_the_release_the_crd_shows(emu, caplog):
    caplog.set_level("INFO", logger="podgang")
    install_crd(emu, "podgroups-v0.17.0.yaml")
    async with running_grouper(emu) as grouper:
        controller = await grouper.wait_ready(emu)
        assert controller.settings.kai_version == "v0.17"
        assert "spec.preemptibility has no semi-preemptible" in controller.settings.kai_version_source
    assert emu.count("GET", r"/customresourcedefinitions/podgroups\.scheduling\.run\.ai$") == 1


async def test_the_grouper_finds_v018_in_its_crd_and_a_flag_wins_over_the_cluster(emu):
    install_crd(emu, "podgroups-pr1804.yaml")
    async with running_grouper(emu) as grouper:
        assert (await grouper.wait_ready(emu)).settings.kai_version == "v0.18"
    emu.clear_requests()
    async with running_grouper(emu, kai_version="v0.17") as grouper:
        settings = (await grouper.wait_ready(emu)).settings
        assert (settings.kai_version, settings.kai_version_source) == ("v0.17", "--kai-version")
    assert emu.count("GET", r"/customresourcedefinitions/") == 0  # not asked


async def test_without_a_readable_crd_the_default_is_v018(emu):
    emu.fail("GET", r"/customresourcedefinitions/", 403, times=None)
    async with running_grouper(emu) as grouper:
        settings = (await grouper.wait_ready(emu)).settings
    assert (settings.kai_version, settings.kai_version_source) == (
        "v0.18", "the default: cannot read the podgroups.scheduling.run.ai CRD (HTTP 403 Forbidden)")


async def test_podgang_status_says_why_a_semi_preemptible_group_keeps_its_size(emu, tmp_path):
    emu.put(semi_preemptible(GROUP, 2))
    deploy_with_pods(emu, "model", 3, group=GROUP)  # one more than the protected minimum
    emu.patch_object("podgroups", NS, GROUP, {"metadata": {"annotations": {"podgang.io/followed-min-member": "2"}}})
    parser, _ = cli.command_parser("status")
    args = parser.parse_args(["--kubeconfig", str(emu.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)),
                              "-o", "json"])
    out, err = io.StringIO(), io.StringIO()
    await status_cli.run_async(args, out, err)
    gang = next(g for g in json.loads(out.getvalue())["gangs"] if g["group"] == GROUP)
    assert any(p.startswith("minMember stays 2 (wanted 3): a semi-preemptible KAI group keeps its minimum")
               and f"cannot increase minMember (2 -> 3) {KAI_WORDS}" in p for p in gang["problems"]), gang["problems"]
