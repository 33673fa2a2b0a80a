"""``podgang status`` (and ``kubectl podgang status``) against the HTTP API emulator:
each state a gang can be in, read through a kubeconfig the way a user runs it; the
stale and evicted gangs made by the real grouper, so the events read are its own."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from podgang import cli, status_cli
from podgang.status import events_about, scheduler_verdict
from podgang.backends import KAI, NATIVE
from podgang.settings import DEFAULT
from tests.emulator import rbac
from tests.backend_support import resource
from tests.grouper_support import (
    NS,
    deploy_with_pods,
    events,
    min_member,
    owned_group,
    pod,
    podgroup,
    running_grouper,
    scale,
)
from tests.chart_support import render
from tests.webhook_support import eventually
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures"
PIN = "podgang.io/min-member"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


@pytest.fixture
def kubeconfig(emu, tmp_path):
    return emu.write_kubeconfig(tmp_path / "kubeconfig", namespace=NS)


async def status(kubeconfig: str, *argv: str) -> tuple[int, str, str]:
    """``podgang status ARGV`` with the emulator's kubeconfig: exit status, stdout, stderr."""
    parser, _ = cli.command_parser("status")
    args = parser.parse_args(["--kubeconfig", kubeconfig, *argv])
    out, err = io.StringIO(), io.StringIO()
    code = await status_cli.run_async(args, out, err)
    return code, out.getvalue(), err.getvalue()


async def gangs(kubeconfig: str, *argv: str) -> dict[str, dict]:
    """The gangs of ``podgang status -o json ARGV`` by group name."""
    code, out, err = await status(kubeconfig, "-o", "json", *argv)
    assert code in (0, 1), err
    return {g["group"]: g for g in json.loads(out)["gangs"]}


def owned(emu, name: str, replicas: int, **kw):
    """A Deployment with its pods and the PodGroup the grouper made for it."""
    dep, rs, pods = deploy_with_pods(emu, name, replicas, **kw)
    group = owned_group(dep)
    emu.put(podgroup(group, replicas, managed=True, owner=dep,
                     ns=dep["metadata"]["namespace"]))
    return dep, group, pods


# ---------------------------------------------------------------------------- states


async def test_a_satisfied_gang(emu, kubeconfig):
    dep, group, _ = owned(emu, "web", 3)
    code, out, err = await status(kubeconfig)
    assert code == 0, err
    line = next(line for line in out.splitlines() if group in line)
    assert line.split()[:4] == [NS, group, "kai", "3"]
    assert "deployment/web spec.replicas 3" in line and "satisfied: 3 of 3 running" in line
    g = (await gangs(kubeconfig))[group]
    assert (g["state"], g["minMember"], g["wantedMinMember"], g["source"], g["owner"]) == (
        "satisfied", 3, 3, "owner", "deployment/web")
    assert g["members"] == {"running": 3, "pending": 0, "succeeded": 0, "failed": 0, "terminating": 0}
    assert g["managedByPodgang"] is True and g["stale"] is None and g["scheduler"] is None


async def test_a_waiting_gang_names_its_pending_pods_and_the_schedulers_verdict(emu, kubeconfig):
    dep, group, pods = owned(emu, "train", 3, phase="Pending")
    emu.patch_object("pods", NS, pods[0]["metadata"]["name"],  # one of them was bound and runs
                     {"spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}})
    pg = emu.get("podgroups", NS, group)
    pg["status"] = {"schedulingConditions": [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "status": "True",
        "lastTransitionTime": "2026-11-23T09:42:57Z", "transitionID": "0",
        "reasons": [{"reason": "NotEnoughResources", "message": "3 pods need 9 CPUs, 6 are free"}]}]}
    emu.put(pg)
    g = (await gangs(kubeconfig))[group]
    assert g["state"] == "waiting"
    assert g["members"]["running"] == 1 and g["members"]["pending"] == 2
    assert g["pendingPods"] == sorted(p["metadata"]["name"] for p in pods[1:])
    assert g["message"] == "waiting for 2 more members to be placed; 1 of 3 running"
    assert g["scheduler"] == {"state": "unschedulable", "message": "3 pods need 9 CPUs, 6 are free (node pool default)"}
    code, out, _ = await status(kubeconfig, "--explain", pods[1]["metadata"]["name"])
    assert code == 0
    assert f"Gang:       {group} — top owner deployment/train" in out
    assert f"2 more members placed by the scheduler (pending: {', '.join(g['pendingPods'])})" in out
    assert "Scheduler:  unschedulable: 3 pods need 9 CPUs, 6 are free (node pool default)" in out


async def test_a_pinned_gang_shows_the_pin_and_the_size_still_to_write(emu, kubeconfig):
    dep, group, _ = owned(emu, "infer", 4, annotations={PIN: "2"})
    g = (await gangs(kubeconfig))[group]
    assert (g["minMember"], g["wantedMinMember"]) == (4, 2)
    assert g["minMemberFrom"] == f"pinned by {PIN} on deployment/infer"
    code, out, _ = await status(kubeconfig, group)
    assert code == 0 and len(out.splitlines()) == 2  # the header and the one group asked for
    assert out.splitlines()[1].split()[1:4] == [group, "kai", "4→2"]
    assert "satisfied: 4 of 4 running" in out  # the scheduler holds the gang to 4 until the grouper writes 2


async def test_a_shared_hand_made_group_counts_every_workload_and_a_missing_one_is_said(emu, kubeconfig):
    emu.put(podgroup("shared", 3))
    deploy_with_pods(emu, "app-server", 1, group="shared")
    for p in deploy_with_pods(emu, "model", 2, group="shared")[2]:  # KAI subgroup "model" inside the gang
        emu.patch_object("pods", NS, p["metadata"]["name"], {"metadata": {"labels": {KAI.subgroup_label: "model"}}})
    deploy_with_pods(emu, "lonely", 1, group="nowhere", phase="Pending")
    found = await gangs(kubeconfig)
    shared = found["shared"]
    assert (shared["source"], shared["managedByPodgang"], shared["minMember"], shared["state"]) == (
        "hand-made", False, 3, "satisfied")
    assert shared["members"]["running"] == 3
    # two workloads share it: each is a subgroup with its minimum (its replicas), named as its pods are
    assert shared["subgroups"] == {
        "app-server": {"minMember": 1, "minMemberFrom": "deployment/app-server spec.replicas 1",
                       "members": {"running": 1, "pending": 0, "succeeded": 0, "failed": 0, "terminating": 0}},
        "model": {"minMember": 2, "minMemberFrom": "deployment/model spec.replicas 2",
                  "members": {"running": 2, "pending": 0, "succeeded": 0, "failed": 0, "terminating": 0}}}
    missing = found["nowhere"]
    assert (missing["state"], missing["exists"], missing["wantedMinMember"]) == ("missing", False, 1)
    assert any("PodGroup nowhere not found in namespace team" in p for p in missing["problems"])
    code, out, _ = await status(kubeconfig, "-o", "wide")
    assert code == 0 and "PodGroup nowhere not found" in out and "OWNER" in out.splitlines()[0]
    assert "app-server: 1 of minimum 1 running, model: 2 of minimum 2 running" in next(
        line for line in out.splitlines() if line.split()[1] == "shared")
    code, out, _ = await status(kubeconfig, "--explain", "lonely-abc12-0")
    assert code == 0 and "  - PodGroup nowhere to be created in namespace team (pods naming it stay Pending)" in out
    assert "Gang:       nowhere — the pod names its PodGroup" in out


async def test_status_says_whose_number_a_hand_made_size_is_and_on_what_evidence(emu, kubeconfig):
    """Seed 003 scaled before the grouper looked: ``--explain`` says the grouper will follow
    to 4 and why (the scale after the group was written); the demo the grouper judged
    elastic says so beside its size."""
    emu.put(podgroup("seed", 3))
    for name in ("s-app", "s-model", "s-other"):
        deploy_with_pods(emu, name, 1, group="seed")
    # kubectl scale deployment/s-model --replicas=2, as the apiserver records it (undated)
    scale(emu, emu.get("deployments", NS, "s-model"), 2)
    scaled = emu.patch_object("deployments", NS, "s-model", {"metadata": {"managedFields": [
        {"manager": "kubectl", "operation": "Update", "subresource": "scale",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}})
    assert scaled["metadata"]["generation"] == 2
    emu.put(pod("s-model-abc12-1", owner=emu.get("replicasets", NS, "s-model-abc12"), group="seed"))
    emu.put(podgroup("demo", 3, annotations={DEFAULT.elastic_size_annotation: "3"}))
    deploy_with_pods(emu, "web", 6, group="demo")
    code, out, _ = await status(kubeconfig, "--explain", "s-model-abc12-0")
    assert code == 0, out
    assert ("the grouper to change minMember 3 → 4 (deployment s-model was scaled to 2 after the group was "
            "written with 3; its members:") in out
    found = await gangs(kubeconfig)
    assert found["demo"]["minMember"] == 3 and "an elastic gang, the user's number, as judged at podgang's " \
        "first look (podgang.io/elastic-min-member)" in found["demo"]["minMemberFrom"]


def written_by(manager: str, *fields: str) -> list[dict]:
    """managedFields as a real apiserver records them: podgang made the group, ``manager``
    then wrote ``fields`` of its spec."""
    return [{"manager": "podgang-grouper", "operation": "Update", "apiVersion": "scheduling.run.ai/v2alpha2",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:minMember": {}, "f:queue": {}}}},
            {"manager": manager, "operation": "Update", "apiVersion": "scheduling.run.ai/v2alpha2",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {f"f:{f}": {} for f in fields}}}]


async def test_a_group_whose_size_another_manager_wrote_says_who(emu, kubeconfig):
    _, group, pods = owned(emu, "web", 2)
    _, quiet, _ = owned(emu, "api", 1)
    emu.patch_object("podgroups", NS, group, {"metadata": {"managedFields": written_by("pod-grouper", "minMember")}})
    emu.patch_object("podgroups", NS, quiet, {"metadata": {"managedFields": written_by("kubectl-label")[:1]}})
    found = await gangs(kubeconfig)
    assert found[group]["changedBy"] == [{"manager": "pod-grouper", "fields": ["spec.minMember"]}]
    assert any('"pod-grouper" (spec.minMember)' in p and "older than v0.15" in p for p in found[group]["problems"])
    assert (found[quiet]["changedBy"], found[quiet]["problems"]) == ([], [])
    code, out, _ = await status(kubeconfig)
    assert code == 0
    assert f"{NS}/{group}: another field manager wrote its size: pod-grouper (-o wide says what to do)" in out
    assert quiet + ":" not in out
    code, out, _ = await status(kubeconfig, "-o", "wide")
    row = next(line for line in out.splitlines() if line.split()[1] == group)
    assert code == 0 and '"pod-grouper" (spec.minMember)' in row and "-o wide says what to do" not in out
    code, out, _ = await status(kubeconfig, "--explain", pods[0]["metadata"]["name"])
    assert code == 0 and f'  - another field manager wrote the size of PodGroup {group}' in out


async def test_prefill_and_decode_show_their_subgroups_and_a_part_below_its_minimum_waits(emu, kubeconfig):
    """Seed 004: prefill 2 (at least 1) + decode 3 (at least 1), one gang of minMember 2.
    Both prefill pods run, which is minMember 2 in all, but no decode pod does: the gang
    is not satisfied, decode waits."""
    emu.put(podgroup("prefill-decode", 2))
    _, _, prefill = deploy_with_pods(emu, "prefill", 2, group="prefill-decode",
                                     annotations={"podgang.io/min-available": "1"})
    deploy_with_pods(emu, "decode", 3, group="prefill-decode", annotations={"podgang.io/min-available": "1"},
                     phase="Pending")
    g = (await gangs(kubeconfig))["prefill-decode"]
    assert {name: (part["minMember"], part["minMemberFrom"], part["members"]["running"])
            for name, part in g["subgroups"].items()} == {
        "decode": (1, "podgang.io/min-available on deployment/decode", 0),
        "prefill": (1, "podgang.io/min-available on deployment/prefill", 2)}
    assert (g["minMember"], g["state"]) == (2, "waiting")
    assert g["message"] == "waiting for decode: 0 of minimum 1 running; 2 of 2 running"
    code, out, err = await status(kubeconfig, "--explain", prefill[0]["metadata"]["name"])
    assert code == 0, err
    assert "subgroup decode to reach its minimum: 0 of minimum 1 running" in out


#: the grouper as the chart runs it: holding the Lease `podgang status` reads by default
LEADER = dict(leader_elect=True, leader_election_namespace="podgang", leader_election_name="podgang-grouper")


def lease(emu, *, holder: str = "grouper-abc_1234", renewed_ago: float = 1.0, duration: int = 15) -> dict:
    """The grouper's Lease in the emulator, as the leader last wrote it ``renewed_ago`` seconds ago."""
    renewed = datetime.now(timezone.utc) - timedelta(seconds=renewed_ago)
    return emu.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": "podgang-grouper", "namespace": "podgang"},
                    "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                             "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})


@contextlib.asynccontextmanager
async def gang_losing_a_member(emu, name: str, grace: float, until: str, **kw):
    """A 3-pod gang the real grouper watches (holding its Lease), after one member is
    lost and the grouper has recorded ``until`` (GangStale, GangEvicted): its group and ReplicaSet."""
    dep, rs, pods = deploy_with_pods(emu, name, 3, **kw)
    group = owned_group(dep)
    async with running_grouper(emu, staleness_grace_period=grace, **LEADER):
        await emu.wait_for(lambda: (emu.get("leases", "podgang", "podgang-grouper") or {}).get("spec", {})
                           .get("holderIdentity"), 10.0, "the grouper took no Lease")
        await emu.wait_for(lambda: min_member(emu, group) == 3, 3.0)
        emu.delete("pods", NS, pods[0]["metadata"]["name"])
        await emu.wait_for(lambda: events(emu, until), 5.0, f"no {until} event")
        yield group, rs


async def test_a_stale_gang_counts_down_to_its_eviction_and_exits_1(emu, kubeconfig):
    async with gang_losing_a_member(emu, "gang", 300.0, "GangStale") as (group, _):
        code, out, err = await status(kubeconfig, "-o", "json")
    assert code == 1, err
    g = {g["group"]: g for g in json.loads(out)["gangs"]}[group]
    assert g["state"] == "stale" and json.loads(out)["staleGangs"] == 1
    assert g["stale"]["gracePeriodSeconds"] == 300.0  # as the grouper's event says it ("5m")
    assert 290 <= g["stale"]["evictInSeconds"] <= 300
    assert g["stale"]["message"] == "2 of 3 members active, minMember 3: evicting the rest in 5m unless it recovers"
    assert g["message"].startswith("stale for ") and re.search(r", evicting in 4m5\ds;", g["message"])
    assert json.loads(out)["grouper"]["running"] is True and err == ""


@pytest.mark.parametrize("lease_state, says", [
    (None, "no grouper holds Lease podgang/podgang-grouper: it does not exist"),
    (dict(renewed_ago=600.0, duration=15), "no grouper holds Lease podgang/podgang-grouper: grouper-abc_1234 last "
                                           "renewed it 10m ago, it expired 9m45s ago"),  # when the Lease was written
    (dict(holder=""), "no grouper holds Lease podgang/podgang-grouper: it was handed back"),
])
async def test_a_stale_gang_whose_grouper_is_not_running_is_not_promised_an_eviction(emu, kubeconfig, lease_state,
                                                                                     says):
    """The GangStale event is there, the grace period has run out, and no grouper holds
    the Lease: nothing will evict the rest, so status says that instead of 'evicting now'."""
    async with gang_losing_a_member(emu, "orphan", 2.0, "GangStale") as (group, rs):
        pass  # the grouper stops (and hands its Lease back) before its grace period of 2s runs out
    emu.put(pod("orphan-abc12-new", owner=rs, group=group, phase="Pending"))  # what the ReplicaSet makes meanwhile
    if lease_state is None:
        emu.delete("leases", "podgang", "podgang-grouper")
    elif lease_state.get("holder") != "":
        lease(emu, **lease_state)
    async def due():  # until the grace period has run out: the eviction is due
        code, out, err = await status(kubeconfig, "-o", "json")
        doc = json.loads(out)
        g = {g["group"]: g for g in doc["gangs"]}[group]
        return (code, err, doc, g) if g["stale"]["evictInSeconds"] <= 0 else None
    code, err, doc, g = await eventually(due, timeout=10, interval=0.1, what="the eviction due")
    assert code == 1 and g["state"] == "stale" and g["stale"]["evictInSeconds"] <= 0
    assert not events(emu, "GangEvicted")
    assert "evicting" not in g["message"]
    assert re.search(r"^stale for \S+, no grouper to evict it \(due now\); 2 of 3 running$",
                     g["message"]), g["message"]
    assert doc["grouper"]["running"] is False
    if lease_state and "renewed_ago" in lease_state:  # seconds have passed since: 10m2s, 9m47s
        says = re.sub(r"(\d+)m(\d+s)?", lambda m: r"\d+m(\d+s)?", re.escape(says))
        assert re.fullmatch(says, doc["grouper"]["message"]), doc["grouper"]["message"]
    else:
        assert doc["grouper"]["message"] == says
        says = re.escape(says)
    assert re.fullmatch(f"podgang status: {says}\n", err), err
    code, out, err = await status(kubeconfig, "-o", "yaml")
    in_yaml = yaml.safe_load(out)["grouper"]  # the same, but for the seconds that passed between the two calls
    assert re.fullmatch(says, in_yaml.pop("message")) and in_yaml == {k: v for k, v in doc["grouper"].items()
                                                                      if k != "message"}
    code, out, _ = await status(kubeconfig, "--explain", "orphan-abc12-new")
    assert re.search(f"the rest is due for eviction now, but nothing evicts it: {says}$", out, re.M), out
    code, out, _ = await status(kubeconfig)
    assert "stale: stale for " in out and ", no grouper to evict it (due now)" in out and "evicting" not in out


async def test_a_live_lease_keeps_the_promise_and_one_status_cannot_read_is_said(emu, kubeconfig):
    owned(emu, "web", 1)
    lease(emu, renewed_ago=2.0)
    doc = json.loads((await status(kubeconfig, "-o", "json"))[1])
    assert doc["grouper"]["running"] is True and doc["grouper"]["holder"] == "grouper-abc_1234"
    assert re.fullmatch(r"grouper-abc_1234 holds Lease podgang/podgang-grouper, renewed [2-9]s ago",
                        doc["grouper"]["message"])  # 2s, and the time status took to start
    code, out, err = await status(kubeconfig, "--grouper-lease", "elsewhere/podgang-grouper")
    assert code == 0 and err == "podgang status: no grouper holds Lease elsewhere/podgang-grouper: it does not exist\n"
    emu.fail("GET", r"/leases/podgang-grouper$", 403, times=None)
    code, out, err = await status(kubeconfig, "-o", "json")
    assert code == 0 and json.loads(out)["grouper"]["running"] is None
    assert err.startswith("podgang status: cannot tell whether a grouper is running: Lease podgang/podgang-grouper: "
                          "permission missing: get leases.coordination.k8s.io in namespace")
    with pytest.raises(SystemExit):  # a usage error, as argparse says them
        await status(kubeconfig, "--grouper-lease", "no-slash")


async def test_a_grace_period_annotation_on_the_workload_wins_and_minus_one_never_evicts(emu, kubeconfig):
    never = {"podgang.io/staleness-grace-period": "-1"}
    async with gang_losing_a_member(emu, "keep", 300.0, "GangStale", annotations=never) as (group, _):
        g = (await gangs(kubeconfig))[group]
    assert g["state"] == "stale" and g["stale"]["evictInSeconds"] is None
    assert "never evicted" in g["message"]


async def test_an_evicted_gang(emu, kubeconfig):
    async with gang_losing_a_member(emu, "lost", 0.2, "GangEvicted") as (group, rs):
        # the ReplicaSet makes new pods; none is placed yet
        emu.put(pod("lost-abc12-new", owner=rs, group=group, phase="Pending"))
        code, out, err = await status(kubeconfig, "--explain", "lost-abc12-new")
        g = (await gangs(kubeconfig))[group]
    assert code == 0, err
    assert g["state"] == "evicted" and g["evictedAt"] and g["members"]["pending"] == 1
    assert "evicted" in g["message"] and "0 of 3 running" in g["message"]
    assert "GangEvicted: evicting 2 remaining members" in out and "GangStale" in out


async def test_watch_prints_again_when_a_gang_changes(emu, kubeconfig):
    dep, group, pods = owned(emu, "w", 2, phase="Pending")
    parser, _ = cli.command_parser("status")
    args = parser.parse_args(["--kubeconfig", kubeconfig, "--watch", "--interval", "0.05", "--count", "400"])
    out = io.StringIO()
    task = asyncio.create_task(status_cli.run_async(args, out, io.StringIO()))
    await emu.wait_for(lambda: "waiting for 2 more" in out.getvalue(), 5.0)
    for p in pods:
        emu.patch_object("pods", NS, p["metadata"]["name"], {"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    await emu.wait_for(lambda: "satisfied: 2 of 2" in out.getvalue() or task.done(), 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    tables = [chunk for chunk in out.getvalue().split("\n\n") if chunk.strip()]
    assert len(tables) >= 2  # printed once per change, not once per look (400 looks would be far more)
    assert len(tables) < 10


async def test_watch_goes_on_through_an_api_error(emu, kubeconfig):
    owned(emu, "c", 1)
    emu.fail("GET", r"/namespaces/team/pods$", 503, times=2)
    parser, _ = cli.command_parser("status")
    args = parser.parse_args(["--kubeconfig", kubeconfig, "-w", "--interval", "0.01", "--count", "4"])
    out, err = io.StringIO(), io.StringIO()
    assert await status_cli.run_async(args, out, err) == 0  # the last look succeeded
    assert err.getvalue().count("podgang status: cannot list pods: HTTP 503") == 1  # said once, not per look
    assert "satisfied: 1 of 1 running" in out.getvalue()


class _Ticking(datetime):
    """A clock a minute later at every look: each look's ``time`` differs."""
    ticks = 0

    @classmethod
    def now(cls, tz=None):
        cls.ticks += 1
        return datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=cls.ticks)


async def test_watch_stops_after_count_looks(emu, kubeconfig, monkeypatch):
    owned(emu, "c", 1)
    monkeypatch.setattr(status_cli, "datetime", _Ticking)  # only the time differs between the looks
    parser, _ = cli.command_parser("status")
    args = parser.parse_args(["--kubeconfig", kubeconfig, "-w", "--interval", "0.01", "--count", "3", "-o", "json"])
    out = io.StringIO()
    assert await status_cli.run_async(args, out, io.StringIO()) == 0
    assert emu.count("GET", r"/namespaces/team/pods$") == 3
    assert out.getvalue().count('"gangs"') == 1  # nothing changed: printed once


# ---------------------------------------------------------------------------- output and errors


async def test_json_output_schema(emu, kubeconfig):
    owned(emu, "web", 2)
    owned(emu, "job", 3, phase="Pending")
    emu.put(podgroup("unused-group", 2))
    code, out, _ = await status(kubeconfig, "-A", "-o", "json")
    assert code == 0
    doc = json.loads(out)
    assert set(doc) == {"time", "gangs", "staleGangs", "kindsNotServed", "grouper"}
    assert set(doc["grouper"]) == {"lease", "running", "holder", "renewTime", "message"}
    assert isinstance(doc["time"], str) and doc["staleGangs"] == 0 and doc["kindsNotServed"] == []
    types = {"namespace": str, "group": str, "kind": str, "backend": str, "state": str, "message": str, "exists": bool,
             "managedByPodgang": bool, "minMemberFrom": str, "members": dict, "pendingPods": list, "problems": list,
             "subgroups": dict, "changedBy": list, "neverPlaced": list}
    nullable = {"source": str, "owner": str, "minMember": int, "wantedMinMember": int, "stale": dict,
                "evictedAt": str, "scheduler": dict}
    assert len(doc["gangs"]) == 3
    for g in doc["gangs"]:
        assert set(g) == set(types) | set(nullable)
        for key, kind in types.items():
            assert isinstance(g[key], kind), (key, g[key])
        for key, kind in nullable.items():
            assert g[key] is None or isinstance(g[key], kind), (key, g[key])
        assert set(g["members"]) == {"running", "pending", "succeeded", "failed", "terminating"}
        assert all(isinstance(v, int) for v in g["members"].values())
    assert {g["state"] for g in doc["gangs"]} == {"satisfied", "waiting", "unused"}
    code, out_yaml, _ = await status(kubeconfig, "-A", "-o", "yaml")
    assert yaml.safe_load(out_yaml)["gangs"] == doc["gangs"]


async def test_a_missing_optional_crd_is_skipped(emu, kubeconfig):
    emu.remove_crd("jobsets.jobset.x-k8s.io")
    owned(emu, "web", 1)
    code, out, err = await status(kubeconfig, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["kindsNotServed"] == ["JobSet"]


async def test_forbidden_names_the_missing_permission(emu, kubeconfig):
    owned(emu, "web", 1)
    allowed = [(rbac.CLUSTER, {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]})]
    emu.grant(allowed, user="alice")
    code, out, err = await status(kubeconfig)
    assert code == 2 and out == ""
    assert err.startswith("podgang status: permission missing: list ")
    assert 'in namespace "team"' in err and 'the API server said: ' in err and 'User "alice" cannot list' in err
    emu.grant(None)
    emu.fail("GET", r"/events$", 403)
    code, _, err = await status(kubeconfig, "-A")
    assert code == 2
    assert err.splitlines() == ['podgang status: permission missing: list events in all namespaces (cluster-wide) — '
                                'grant verb "list" on resource "events" in API group "" (the chart\'s operatorRole '
                                'has it); the API server said: kube-emulator: injected 403']


async def test_the_charts_operator_role_is_enough(emu, kubeconfig):
    docs = render({"operatorRole": {"enabled": True}})
    role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-operator"))
    assert all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in role["rules"])
    emu.grant([(rbac.CLUSTER, rule) for rule in role["rules"]], user="operator")
    owned(emu, "web", 2)
    lease(emu)  # the chart's Lease (release podgang in namespace podgang), which it may read
    code, out, err = await status(kubeconfig, "-A")
    assert (code, err, emu.forbidden) == (0, "", [])
    assert "satisfied" in out
    assert not [d for d in render() if d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith("-operator")]


async def test_usage_errors_exit_2(emu, kubeconfig):
    code, _, err = await status(kubeconfig, "--explain", "p", "-A")
    assert code == 2 and "--explain takes one pod" in err
    code, _, err = await status(kubeconfig, "--explain", "nope")
    assert code == 2 and "pod nope not found in namespace team" in err
    code, _, err = await status(kubeconfig, "-w", "--interval", "0")
    assert code == 2 and "--interval more than 0" in err
    code, _, err = await status(kubeconfig, "no-such-group")
    assert code == 2 and "no gang named no-such-group in namespace team" in err
    code, _, err = await status(str(Path(kubeconfig).with_name("missing")))
    assert code == 2 and "cannot configure Kubernetes API access" in err


async def test_context_picks_the_cluster_and_its_namespace(emu, kubeconfig):
    owned(emu, "web", 1)
    owned(emu, "elsewhere", 1, ns="other")
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    doc["clusters"].append({"name": "gone", "cluster": {"server": "http://127.0.0.1:9"}})
    doc["contexts"].append({"name": "gone", "context": {"cluster": "gone", "user": "kube-emulator"}})
    doc["contexts"].append({"name": "other", "context": {"cluster": "kube-emulator", "user": "kube-emulator",
                                                         "namespace": "other"}})
    doc["current-context"] = "gone"
    Path(kubeconfig).write_text(yaml.safe_dump(doc))
    found = await gangs(kubeconfig, "--context", "other")
    assert [(g["namespace"], g["state"]) for g in found.values()] == [("other", "satisfied")]
    code, _, err = await status(kubeconfig, "--request-timeout", "2s")  # the current context: nothing answers
    assert code == 2 and "cannot list" in err


async def test_explain_a_pod_out_of_scope(emu, kubeconfig):
    emu.put(pod("plain", scheduler="default-scheduler"))
    code, out, _ = await status(kubeconfig, "--explain", "plain")
    assert code == 0
    assert "Gang:       none — podgang leaves it alone" in out and "default-scheduler" in out


# ---------------------------------------------------------------------------- the kubectl plugin


async def run_command(*argv: str, env: dict | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env=env)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def test_the_kubectl_plugin_entry_point(emu, kubeconfig):
    dep, group, _ = owned(emu, "web", 2)
    plugin = Path(sys.executable).parent / "kubectl-podgang"
    code, out, err = await run_command(str(plugin), "status", "-A", "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0, err
    assert [g["group"] for g in json.loads(out)["gangs"]] == [group]
    code, _, err = await run_command(str(plugin), "grouper")
    assert code == 2 and "kubectl podgang" in err  # only the user's commands are offered


@pytest.mark.parametrize("where", ["KUBECONFIG pointing nowhere", "HOME empty", "HOME with no .kube",
                                   "--kubeconfig pointing nowhere"])
async def test_without_a_kubeconfig_only_podgangs_one_line_reaches_the_terminal(tmp_path, where):
    """The client library's own ``Config not found: …`` (a warning it logs before
    failing) never shows: one line, saying what was tried and what to pass."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    nowhere = str(tmp_path / "nowhere" / "config")
    argv = ["status"]
    if where == "KUBECONFIG pointing nowhere":
        env["KUBECONFIG"], tried = nowhere, f"no kubeconfig file at {nowhere} ($KUBECONFIG)"
    elif where == "HOME empty":
        env["HOME"], tried = "", f"no kubeconfig file at {os.path.expanduser(os.path.join('/', '.kube', 'config'))}"
    elif where == "HOME with no .kube":
        env["HOME"] = str(tmp_path)
        tried = f"no kubeconfig file at {tmp_path / '.kube' / 'config'} (the default; KUBECONFIG is not set)"
    else:
        argv += ["--kubeconfig", nowhere]
        tried = f"no kubeconfig file at {nowhere} (--kubeconfig)"
    for program in ("podgang", "kubectl-podgang"):
        code, out, err = await run_command(str(Path(sys.executable).parent / program), *argv, env=env)
        assert (code, out) == (2, ""), (program, err)
        [line] = err.splitlines()
        assert line.startswith(f"podgang status: cannot configure Kubernetes API access: {tried}"), line
        assert line.endswith("pass --kubeconfig PATH, set KUBECONFIG, or run inside a pod with a service account")


async def test_kubectl_finds_the_plugin(emu, kubeconfig):
    kubectl = next((Path(d) / "kubectl" for d in os.environ.get("PATH", "").split(os.pathsep)
                    if (Path(d) / "kubectl").is_file()), None)
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    dep, group, _ = owned(emu, "web", 2)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "KUBECONFIG": kubeconfig}
    code, out, err = await run_command(str(kubectl), "podgang", "status", env=env)
    assert code == 0, err
    assert group in out and "satisfied: 2 of 2 running" in out


# ---------------------------------------------------------------------------- the scheduler's verdict


def test_a_native_podgroups_condition_is_the_verdict():
    unschedulable = json.loads((FIXTURES / "native" / "podgroup-unschedulable.json").read_text())
    verdict = scheduler_verdict(NATIVE, unschedulable)
    assert verdict is not None and verdict.state == "unschedulable"
    assert verdict.message.startswith("0/1 placements are available, first placement status: pod group is unschedulable")
    scheduled = json.loads((FIXTURES / "native" / "podgroup-scheduled.json").read_text())
    assert scheduler_verdict(NATIVE, scheduled).state == "scheduled"
    assert scheduler_verdict(NATIVE, {"status": {}}) is None
    # a backend with nothing of its own to read: a condition that is not True still speaks
    assert str(scheduler_verdict(KAI, {"status": {"conditions": [{"type": "Ready", "status": "False",
                                                                   "message": "queue full"}]}})) == "Ready=False: queue full"


def test_events_of_one_second_are_ordered_by_resource_version():
    def event(reason: str, rv: str) -> dict:
        return {"metadata": {"name": f"e{rv}", "namespace": NS, "resourceVersion": rv}, "reason": reason,
                "involvedObject": {"kind": "PodGroup", "name": "g", "namespace": NS},
                "lastTimestamp": "2026-11-23T10:00:00Z"}

    found = events_about([event("GangEvicted", "12"), event("GangStale", "9"), event("GangEvicted", "3")], "PodGroup", NS, "g")
    assert [e["metadata"]["resourceVersion"] for e in found] == ["3", "9", "12"]
    assert events_about(found, "PodGroup", NS, "other") == [] and events_about(found, "Pod", NS, "g") == []


def test_a_backend_that_reads_its_schedulers_status_is_asked_first():
    class Said:
        state, message = "Scheduled", "all 3 bound"

    class Reading(type(KAI)):
        def scheduler_verdict(self, podgroup):
            return Said() if podgroup.get("status") else None

    backend = Reading()
    assert (scheduler_verdict(backend, {"status": {"conditions": []}}).state,
            scheduler_verdict(backend, {"status": {"conditions": []}}).message) == ("Scheduled", "all 3 bound")
    assert scheduler_verdict(backend, {"metadata": {}}) is None


async def test_a_native_gang_the_scheduler_left_pending_shows_its_verdict(emu, kubeconfig):
    """With --backend default-scheduler=native: the recorded PodGroup of a gang of 7 that
    kube-scheduler could not place, and its 7 Pending pods, hand-made (the pod template
    names the group)."""
    emu.register(resource(NATIVE))
    recorded = json.loads((FIXTURES / "native" / "podgroup-unschedulable.json").read_text())
    group = recorded["metadata"]["name"]
    recorded["metadata"] = {"name": group, "namespace": NS}
    emu.put(recorded)
    for i in range(7):
        member = pod(f"big-{i}", scheduler="default-scheduler", phase="Pending", node=None)
        member["spec"]["schedulingGroup"] = {"podGroupName": group}
        emu.put(member)
    g = (await gangs(kubeconfig, "--backend", "default-scheduler=native"))[group]
    assert g["backend"] == "native" and g["minMember"] == 7
    assert g["members"]["pending"] == 7 and g["members"]["running"] == 0
    assert g["scheduler"]["state"] == "unschedulable"
    assert g["scheduler"]["message"].startswith("0/1 placements are available")


async def test_a_pytorchjob_shows_a_subgroup_per_replica_type_and_waits_for_its_master(emu, kubeconfig):
    """Three workers run, the master is Pending: status shows each role's subgroup, where its
    minimum comes from, and that the master is the part still missing."""
    job = emu.put({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "resnet", "namespace": NS},
                   "spec": {"pytorchReplicaSpecs": {
                       rtype: {"replicas": count, "template": {"spec": {"schedulerName": "kai-scheduler"}}}
                       for rtype, count in (("Master", 1), ("Worker", 3))}}})
    group = owned_group(job)
    emu.put(podgroup(group, 4, managed=True, owner=job))
    emu.put(pod("resnet-master-0", owner=job, group=group, phase="Pending", node=None,
                labels={"training.kubeflow.org/replica-type": "master"}))
    for i in range(3):
        emu.put(pod(f"resnet-worker-{i}", owner=job, group=group,
                    labels={"training.kubeflow.org/replica-type": "worker"}))
    g = (await gangs(kubeconfig))[group]
    assert {name: (part["minMember"], part["minMemberFrom"], part["members"]["running"])
            for name, part in g["subgroups"].items()} == {
        "master": (1, "Master replicas 1", 0), "worker": (3, "Worker replicas 3", 3)}
    assert (g["minMember"], g["state"]) == (4, "waiting")
    assert g["message"] == "waiting for 1 more member to be placed; 3 of 4 running"
    code, out, err = await status(kubeconfig, "--explain", "resnet-worker-0")
    assert code == 0, err
    assert "subgroup master to reach its minimum: 0 of minimum 1 running" in out


async def test_complete_replicas_per_role_and_the_incomplete_replica_a_pod_waits_for(emu, kubeconfig):
    """Issue 24: two LWS roles of 2 replicas × 2 pods in one group; decode-1's worker is
    not placed. status -o wide shows each role's complete replicas against its minimum,
    --explain names the pod's incomplete replica."""
    from tests.emulated.test_replica_tree import SUBGROUP, lws, lws_pods

    pg = podgroup("serve", 1)
    pg["metadata"]["annotations"] = {"podgang.io/subgroups": "decode,prefill"}
    pg["spec"] = {"minSubGroup": 2, "stalenessGracePeriod": "-1s", "subGroups": [
        {"name": role, "minSubGroup": 1} for role in ("decode", "prefill")] + [
        {"name": f"{role}-{i}", "parent": role, "minMember": 2} for role in ("decode", "prefill") for i in (0, 1)]}
    emu.put(pg)
    for name in ("prefill", "decode"):
        workload = lws(name, 2, 2, group="serve")
        owners, pods = lws_pods(workload, group="serve")
        emu.put(workload)
        for obj in (*owners, *pods):
            if obj["kind"] == "Pod":
                obj["metadata"]["labels"][SUBGROUP] = f"{name}-{obj['metadata']['labels'][GROUP_INDEX_LABEL]}"
                if obj["metadata"]["name"] == "decode-1-1":
                    obj["spec"].pop("nodeName", None)
                    obj["status"] = {"phase": "Pending"}
            emu.put(obj)
    g = (await gangs(kubeconfig))["serve"]
    assert {n: (p["minMember"], p.get("completeReplicas"), p.get("replicas")) for n, p in g["subgroups"].items()
            if "parent" not in p} == {"decode": (1, 1, 2), "prefill": (1, 2, 2)}
    assert g["state"] == "satisfied"
    code, out, err = await status(kubeconfig, "-o", "wide")
    assert code == 0, err
    line = next(line for line in out.splitlines() if " serve " in line)
    assert "decode: 1 of minimum 1 complete replicas (2 replicas)" in line
    assert "prefill: 2 of minimum 1 complete replicas (2 replicas)" in line
    assert "decode-1: 1 of minimum 2 running" in line  # the incomplete replica, only it
    code, out, err = await status(kubeconfig, "--explain", "decode-1-1")
    assert code == 0, err
    assert "its replica decode-1 (role decode) to be complete: 1 of its 2 pods running, 1 pending" in out
