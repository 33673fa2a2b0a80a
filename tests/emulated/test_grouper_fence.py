"""Fenced writes (issue 44): a grouper paused past its Lease — SIGSTOP, as a frozen VM or a
long GC would — that resumes after a standby took over writes nothing, though it had Events
queued and a reconcile half-way. Two real ``python -m podgang.grouper`` processes against the
API emulator, each with a token of its own so that every request says whose it is."""

from __future__ import annotations

import asyncio
import os
import signal

import yaml

from tests.grouper_support import NS, deploy_with_pods, min_member, owned_group, scale
from tests.webhook_processes import WebhookProcess

WRITES = ("POST", "PUT", "PATCH", "DELETE")
LEASE = dict(duration="3", renew="2", retry="1")


def kubeconfig(emu, path, token: str) -> str:
    emu.write_kubeconfig(path)
    with open(path, encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["users"][0]["user"]["token"] = token
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(config, fh)
    return str(path)


def grouper(config: str, identity: str) -> WebhookProcess:
    return WebhookProcess("-m", "podgang.grouper", "--kubeconfig", config, "--leader-elect",
                          "--leader-election-identity", identity, "--leader-election-lease-duration", LEASE["duration"],
                          "--leader-election-renew-deadline", LEASE["renew"],
                          "--leader-election-retry-period", LEASE["retry"], "--metrics-port", "0",
                          "--log-format", "text", "--staleness-grace-period", "30s", "--orphan-timeout", "60s")


def holder(emu) -> str | None:
    lease = emu.get("leases", "default", "podgang-grouper")
    return lease and lease["spec"].get("holderIdentity")


def by(token: str):
    return lambda r: r.headers.get("Authorization") == f"Bearer {token}"


async def test_a_leader_paused_past_its_lease_writes_nothing_after_it_resumes(emu, tmp_path):
    dep, _, _ = deploy_with_pods(emu, "web", 2)
    group = owned_group(dep)
    old = by("grouper-a")
    async with grouper(kubeconfig(emu, tmp_path / "a", "grouper-a"), "a") as a:
        await emu.wait_for(lambda: holder(emu) == "a" and min_member(emu, group) == 2, 20.0,
                           f"the first grouper did not lead: {a.lines[-5:]}")
        # Events held at the apiserver (the writers busy, more queued behind them) and a
        # reconcile half-way: its PATCH held, to be refused as stale, so that it re-reads and
        # plans again once it resumes
        events = emu.hold(rf"/namespaces/{NS}/events$")
        patch = emu.hold(rf"/podgroups/{group}$")
        emu.fail("PATCH", rf"/podgroups/{group}$", 409, times=1, body={
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": "Conflict",
            "message": "the object has been modified", "code": 409})
        scale(emu, dep, 3)
        more = [deploy_with_pods(emu, f"more-{i}", 1)[0] for i in range(8)]
        await emu.wait_for(lambda: all(min_member(emu, owned_group(d)) == 1 for d in more), 10.0)
        for d in more:  # a MinMemberChanged Event each: four writers held, the rest queued behind them
            scale(emu, d, 2)
        await emu.wait_for(lambda: any(old(r) for r in emu.find_requests("PATCH", rf"/podgroups/{group}$"))
                           and all(min_member(emu, owned_group(d)) == 2 for d in more)
                           and len([r for r in emu.find_requests("POST", r"/events$") if old(r)]) >= 4, 10.0,
                           "no reconcile half-way or no Events held")
        a.proc.send_signal(signal.SIGSTOP)
        try:
            events.release()  # what was sent before the pause lands now, before anyone else leads
            patch.release()  # answered 409, the answer waiting in the paused process's socket
            await emu.wait_for(lambda: not emu._faults, 5.0)  # the 409 was taken
            emu.clear_faults()
            async with grouper(kubeconfig(emu, tmp_path / "b", "grouper-b"), "b") as b:
                await emu.wait_for(lambda: holder(emu) == "b" and min_member(emu, group) == 3, 20.0,
                                   f"the standby did not take over: {b.lines[-5:]}")
                resumed = len(emu.requests)
                a.proc.send_signal(signal.SIGCONT)
                code = await asyncio.wait_for(a.proc.wait(), 20.0)
                late = [f"{r.method} {r.path}" for r in emu.requests[resumed:] if old(r) and r.method in WRITES]
                assert late == [], f"the old leader wrote after it resumed: {late}" + "\n".join(a.lines[-40:])
                assert code == 1, a.lines[-10:]
                assert any("queued events dropped" in line for line in a.lines), a.lines[-20:]
        finally:
            if a.proc.returncode is None:
                os.kill(a.proc.pid, signal.SIGCONT)
