"""Issue 44's soak: churn and faults on the real apiserver and KAI, with the promises a platform
team relies on checked at the end — and the fence checked all along: a grouper paused past its
Lease writes nothing once it resumes.

Two groupers with leader election (a short Lease, so that a fault is over in seconds) and the
webhook, as the chart runs them, in a cluster of the module's own; :class:`FakeKubelet` for the
kubelets. While Deployments and Jobs are created, scaled and deleted, owner-less gangs made
and broken, and GPU-conflicting pods refused, the leader is SIGKILLed, then SIGSTOPped past its
Lease (the standby takes over; the old leader is resumed), the kube-apiserver is paused twice
(each time until the leader has given up its term), and the webhook is restarted. Nothing waits
a fixed time: each step waits for its effect, each fault for its consequence. Then: every pod in its documented group, every size right, no
orphan group, no whole gang evicted, every broken gang evicted after its grace, no Event written
by a grouper after it lost the Lease, no unexplained error line, memory flat.

``PODGANG_SOAK_SECONDS`` sets the churn's length (75 s in the suite, the whole test within
3 minutes); ``make soak MINUTES=N`` runs it for N minutes (docs/operate/grouper.md has the
figures of a long run).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

from podgang.api import ApiError, NotFound
from tests.grouper_support import LABEL
from tests.realcluster import (KAI_TEAM_QUEUE, PODGANG_NS, SOAK_GROUPERS as IDENTITIES, SOAK_LEASE as LEASE, Corner,
                               FakeKubelet, Podgang, bound, corner, until)
from tests.real.test_real_journeys import KAI, owned_group

SECONDS = float(os.environ.get("PODGANG_SOAK_SECONDS", "75"))
EFFECT_TIMEOUT = 15.0  # how long a user waits to see a change take effect before the next one
GRACE = 5.0  # the groupers' staleness grace period (the soak fixture's chart value)
KAI_GROUPS = KAI.podgroups
#: the error lines a fault explains: a leader that cannot renew its Lease (the apiserver paused)
#: stops, and the leader election's client says why it could not read the Lease
EXPLAINED = re.compile(r"podgang\.grouper\.leader: no renewal of the leader Lease within the renew deadline|"
                       r"leaderelection: Error retrieving resource lock podgang-grouper")


# ---------------------------------------------------------------------------
# what the run did, and what it must find at the end


@dataclass
class Record:
    """What the run did that the end checks read."""

    broken: dict[str, float] = field(default_factory=dict)  # owner-less gangs a member was taken from: when
    whole: set[str] = field(default_factory=set)  # owner-less gangs left whole
    conflicts: int = 0  # GPU-conflicting pods the apiserver answered for while the webhook was up
    refused: int = 0  # those the webhook refused
    admitted_conflicts: list[str] = field(default_factory=list)
    #: identity -> the moment (wall clock) it was resumed after losing the Lease while paused
    resumed: dict[str, float] = field(default_factory=dict)
    slow: int = 0  # churn steps whose effect a fault held up past EFFECT_TIMEOUT
    faults: list[str] = field(default_factory=list)
    rss: dict[str, list[int]] = field(default_factory=dict)  # process -> RSS samples (KiB)


def rss_kib(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


async def holder(here: Corner) -> str | None:
    try:
        lease = await here.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{PODGANG_NS}/leases/podgang-grouper")
    except NotFound:
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def template(here: Corner, app: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"schedulerName": KAI.scheduler, **here.placement, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.example/soak:1",
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


class Churn:
    """The workload side: what users do while podgang is faulted. A seeded random walk, so a
    failure can be replayed (the seed is in the assertion messages)."""

    def __init__(self, here: Corner, record: Record, seed: int):
        self.here, self.record, self.rng = here, record, random.Random(seed)
        self.seed = seed
        self.deployments: dict[str, int] = {}
        self.jobs: dict[str, int] = {}
        self.bare = 0
        self.webhook_up = asyncio.Event()
        self.webhook_up.set()

    @property
    def ns(self) -> str:
        return self.here.namespace

    @staticmethod
    def tick(schedule: Schedule) -> None:
        """Tell the faults whose time has come (the churn's loop is the run's clock)."""
        now = time.monotonic()
        for when, due, _ in schedule:
            if when <= now:
                due.set()

    async def step(self) -> None:
        """One thing a user does, then — as a user would before the next — its effect waited for
        (at most :data:`EFFECT_TIMEOUT`: a fault may hold a controller up; the end checks judge)."""
        actions = [self.gpu_conflict]
        if len(self.deployments) < 6:
            actions.append(self.create_deployment)
        if len(self.jobs) < 3:
            actions.append(self.create_job)
        if self.bare < 3 + SECONDS // 25:
            actions.append(self.bare_gang)
        if self.deployments:
            actions += [self.scale_deployment, self.scale_deployment, self.delete_deployment]
        if self.jobs:
            actions.append(self.delete_job)
        if self.record.whole:
            actions.append(self.delete_bare_gang)
        action = self.rng.choice(actions)
        try:
            effect = await action()
        except ApiError as error:  # the apiserver paused, a webhook restarting: a user would try again
            if getattr(error, "status", 0) not in (0, 500, 503, 504):
                raise
            return
        if effect is not None:
            try:
                await until(effect, f"{action.__name__} took effect", EFFECT_TIMEOUT)
            except AssertionError:
                self.record.slow += 1

    def pods_of(self, app: str, count: int) -> Callable[[], Awaitable[bool]]:
        async def made():
            return len([p for p in await self.here.pods(app=app) if not p["metadata"].get("deletionTimestamp")]) == count
        return made

    def gone(self, path: str) -> Callable[[], Awaitable[bool]]:
        async def deleted():
            try:
                await self.here.api.get(path)
            except NotFound:
                return True
            return False
        return deleted

    async def create_workload(self, plural: str, api: str, kind: str, name: str, spec: dict[str, Any]) -> None:
        await self.here.api.create(f"{api}/namespaces/{self.ns}/{plural}", {
            "apiVersion": api.removeprefix("/apis/"), "kind": kind,
            "metadata": {"name": name, "labels": KAI.workload_labels}, "spec": spec})

    async def delete_workload(self, plural: str, api: str, names: dict[str, int]) -> Callable[[], Awaitable[bool]]:
        name = self.rng.choice(sorted(names))
        path = f"{api}/namespaces/{self.ns}/{plural}/{name}"
        await self.here.api.delete(path, {"propagationPolicy": "Background"})
        del names[name]
        return self.gone(path)

    async def create_deployment(self) -> Callable[[], Awaitable[bool]]:
        name, replicas = f"d{len(self.deployments)}-{self.rng.randrange(10**6)}", self.rng.randint(1, 3)
        await self.create_workload("deployments", "/apis/apps/v1", "Deployment", name, {
            "replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template(self.here, name)})
        self.deployments[name] = replicas
        return self.pods_of(name, replicas)

    async def scale_deployment(self, name: str | None = None) -> Callable[[], Awaitable[bool]]:
        """To another size than it has (1 to 4)."""
        name = name or self.rng.choice(sorted(self.deployments))
        replicas = self.rng.choice([r for r in range(1, 5) if r != self.deployments[name]])
        await self.here.api.merge_patch(f"/apis/apps/v1/namespaces/{self.ns}/deployments/{name}",
                                        {"spec": {"replicas": replicas}})
        self.deployments[name] = replicas
        return self.pods_of(name, replicas)

    async def delete_deployment(self) -> Callable[[], Awaitable[bool]]:
        return await self.delete_workload("deployments", "/apis/apps/v1", self.deployments)

    async def create_job(self) -> Callable[[], Awaitable[bool]]:
        name, parallelism = f"j{self.rng.randrange(10**6)}", self.rng.randint(2, 3)
        pods = template(self.here, name)
        pods["spec"]["restartPolicy"] = "Never"
        await self.create_workload("jobs", "/apis/batch/v1", "Job", name,
                                   {"parallelism": parallelism, "completions": parallelism, "template": pods})
        self.jobs[name] = parallelism
        return self.pods_of(name, parallelism)

    async def delete_job(self) -> Callable[[], Awaitable[bool]]:
        return await self.delete_workload("jobs", "/apis/batch/v1", self.jobs)

    async def bare_gang(self) -> None:
        """Three owner-less pods in a group of their own (hand-made, minMember 3, KAI's own
        eviction off); every other one loses a member once whole: a broken gang."""
        self.bare += 1
        group = f"bare-{self.bare}"
        await self.here.api.create(f"{KAI_GROUPS}/namespaces/{self.ns}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": group}, "spec": {"minMember": 3, "queue": KAI_TEAM_QUEUE,
                                                   "stalenessGracePeriod": "-1s"}})
        for i in range(3):
            pod = template(self.here, group)
            pod["metadata"]["labels"]["kai.scheduler/podgroup"] = group
            await self.here.api.create(f"/api/v1/namespaces/{self.ns}/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {**pod["metadata"], "name": f"{group}-{i}"},
                "spec": pod["spec"]})
        if self.bare % 2:
            asyncio.get_running_loop().create_task(self.break_when_whole(group))
        else:
            self.record.whole.add(group)

    async def delete_bare_gang(self) -> Callable[[], Awaitable[bool]]:
        """A user deleting a whole gang: its pods, then its group (nothing is evicted)."""
        group = self.rng.choice(sorted(self.record.whole))
        self.record.whole.discard(group)
        for i in range(3):
            with contextlib.suppress(NotFound):
                await self.here.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{group}-{i}", {"gracePeriodSeconds": 0})
        with contextlib.suppress(NotFound):
            await self.here.api.delete(f"{KAI_GROUPS}/namespaces/{self.ns}/podgroups/{group}")
        return self.pods_of(group, 0)

    async def break_when_whole(self, group: str) -> None:
        async def whole():
            pods = await self.here.pods(app=group)
            return len(bound(pods)) == 3
        with contextlib.suppress(AssertionError, ApiError):
            await until(whole, f"{group} placed whole", 60)
            await self.here.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{group}-0", {"gracePeriodSeconds": 0})
            self.record.broken[group] = time.time()
            return
        self.record.whole.add(group)  # never placed whole (a fault in the way): not broken, must stay

    async def gpu_conflict(self) -> None:
        """Example 03: a whole GPU and GPU memory at once. Refused, whenever the webhook is up."""
        await self.webhook_up.wait()
        name = f"conflict-{self.rng.randrange(10**6)}"
        pod = template(self.here, "conflict")
        pod["metadata"]["annotations"] = {"gpu-memory": "4000"}
        pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        try:
            await self.here.api.create(f"/api/v1/namespaces/{self.ns}/pods", {
                "apiVersion": "v1", "kind": "Pod", "metadata": {**pod["metadata"], "name": name}, "spec": pod["spec"]})
        except ApiError as error:
            if "denied the request" in str(error):
                self.record.conflicts += 1
                self.record.refused += 1
                return
            raise  # no answer (the apiserver paused): not counted
        self.record.conflicts += 1
        if self.webhook_up.is_set():
            self.record.admitted_conflicts.append(name)
        await self.here.api.delete(f"/api/v1/namespaces/{self.ns}/pods/{name}", {"gracePeriodSeconds": 0})


# ---------------------------------------------------------------------------
# the faults


class Faults:
    """The operator's side: processes killed, paused and restarted, at fixed points of the run."""

    def __init__(self, here: Corner, installed: Podgang, record: Record, churn: Churn):
        self.here, self.podgang, self.record, self.churn = here, installed, record, churn

    async def restart_exited(self) -> None:
        """What the grouper's Deployment does: a grouper that exited (it does on losing the
        Lease, to restart clean) is started again, as a standby."""
        for identity in IDENTITIES:
            process = self.podgang.processes[identity]
            if not process.alive():
                self.record.faults.append(f"{identity} exited {process.popen.returncode}: restarted")
                await asyncio.to_thread(self.podgang.start_grouper, *LEASE, identity=identity,
                                        component=identity, leading=False)

    def log_since(self, identity: str, offset: int) -> str:
        return self.podgang.processes[identity].log.read_bytes()[offset:].decode(errors="replace")

    def log_size(self, identity: str) -> int:
        return self.podgang.processes[identity].log.stat().st_size

    def pid(self, name: str) -> int:
        return self.podgang.processes[name].popen.pid

    async def leader(self) -> str:
        async def held():
            found = await holder(self.here)
            return found in IDENTITIES and self.podgang.processes[found].alive() and found
        return await until(held, "a grouper holding the Lease", 60)

    async def kill_leader(self) -> None:
        old = await self.leader()
        os.kill(self.pid(old), signal.SIGKILL)
        self.podgang.processes[old].popen.wait(10)
        self.record.faults.append(f"SIGKILL {old}")
        other = IDENTITIES[1 - IDENTITIES.index(old)]

        async def taken():
            return await holder(self.here) == other
        await until(taken, f"{other} took the Lease after {old} was killed", 60)
        await asyncio.to_thread(self.podgang.start_grouper, *LEASE, identity=old, component=old, leading=False)

    async def pause_leader(self) -> None:
        """SIGSTOP past the Lease: the standby takes it; then SIGCONT. From then on the resumed
        one must write nothing (the end check reads its Events)."""
        old = await self.leader()
        # work for it right before the pause, stopped the moment it has begun acting on it:
        # reconciles under way and Events queued when it stops
        offset, scaled = self.log_size(old), []
        for name in sorted(self.churn.deployments)[:3]:
            if name in self.churn.deployments:  # the churn goes on meanwhile: it may have deleted it
                with contextlib.suppress(NotFound):
                    await self.churn.scale_deployment(name)
                    scaled.append(name)

        async def acting():
            text = self.log_since(old, offset)
            return any(f"/pg-{name}-" in text for name in scaled)
        if scaled:
            await until(acting, f"{old} acting on the scales of {scaled}", 30)
        os.kill(self.pid(old), signal.SIGSTOP)
        self.record.faults.append(f"SIGSTOP {old}")
        other = IDENTITIES[1 - IDENTITIES.index(old)]
        try:
            # and while it is stopped: changes its watches hold for it, read the moment it resumes
            for name in sorted(self.churn.deployments)[-2:]:
                if name in self.churn.deployments:
                    with contextlib.suppress(ApiError):
                        await self.churn.scale_deployment(name)

            async def taken():
                return await holder(self.here) == other
            await until(taken, f"{other} took the Lease while {old} was paused", 60)
        finally:
            self.record.resumed[old] = time.time()
            os.kill(self.pid(old), signal.SIGCONT)

    async def pause_apiserver(self) -> None:
        """SIGSTOP the kube-apiserver until the leader, unable to renew, has stopped leading
        (its log says so, or it exited): a pause past the renew deadline, however long that takes."""
        old = await self.leader()
        offset = self.log_size(old)
        pid = int((self.podgang.cluster.directory / "kube-apiserver.pid").read_text())
        began = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        try:
            async def gave_up():
                return ("no renewal of the leader Lease" in self.log_since(old, offset)
                        or not self.podgang.processes[old].alive())
            await until(gave_up, f"{old} stopping to lead while the apiserver is paused", 60)
        finally:
            os.kill(pid, signal.SIGCONT)
        self.record.faults.append(f"apiserver paused {time.monotonic() - began:.0f}s ({old} gave up the Lease)")

    async def restart_webhook(self) -> None:
        self.churn.webhook_up.clear()
        try:
            self.podgang.processes["webhook"].stop()
            await asyncio.to_thread(self.podgang.start_webhook)
        finally:
            self.churn.webhook_up.set()
        self.record.faults.append("webhook restarted")

    def sample_memory(self) -> None:
        for name, process in self.podgang.processes.items():
            if process.alive():
                found = rss_kib(process.popen.pid)
                if found is not None:
                    self.record.rss.setdefault(f"{name}:{process.popen.pid}", []).append(found)


#: one round of faults, at these fractions of a round (the suite's run is one round; a long
#: ``make soak`` repeats it every :data:`ROUND` seconds)
ROUND = 75.0


Schedule = list[tuple[float, asyncio.Event, Callable[[], Awaitable[None]]]]


def fault_schedule(faults: Faults, started: float) -> Schedule:
    """(when by the monotonic clock, set once that time has come, the fault), in order."""
    plan = [(0.15, faults.kill_leader), (0.3, faults.pause_apiserver), (0.45, faults.pause_leader),
            (0.6, faults.restart_webhook), (0.75, faults.pause_apiserver)]
    rounds = max(1, int(SECONDS // ROUND))
    length = SECONDS / rounds
    return [(started + (round_ + at) * length, asyncio.Event(), fault) for round_ in range(rounds) for at, fault in plan]


async def run_faults(faults: Faults, schedule: Schedule) -> None:
    """Each fault once the churn says its time has come (:meth:`Churn.tick`), the groupers that
    exited restarted before each."""
    for _, due, fault in schedule:
        await due.wait()
        await faults.restart_exited()
        await fault()


def regained(installed: Podgang, identity: str, since: float) -> float:
    """When ``identity`` next began to lead after ``since`` (wall clock), from its processes'
    log lines ``became the leader … at=<time>``; infinity if it never did."""
    found = [datetime.fromisoformat(m).timestamp() for m in re.findall(
        rf"became the leader .*identity={re.escape(identity)} at=(\S+)", installed.processes[identity].log.read_text())]
    return min((t for t in found if t >= since), default=float("inf"))


# ---------------------------------------------------------------------------
# the end checks


async def groups(here: Corner) -> dict[str, dict[str, Any]]:
    listed = await here.api.get(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups")
    return {g["metadata"]["name"]: g for g in listed.get("items") or []}


async def settled(here: Corner, churn: Churn, record: Record) -> list[str]:
    """What is still wrong with the cluster, once the churn stopped (empty: nothing)."""
    wrong: list[str] = []
    found = await groups(here)
    pods = [p for p in await here.pods() if not p["metadata"].get("deletionTimestamp")]
    owners: dict[str, dict[str, Any]] = {}
    for kind, path in (("Deployment", "/apis/apps/v1"), ("Job", "/apis/batch/v1")):
        listed = await here.api.get(f"{path}/namespaces/{here.namespace}/{kind.lower()}s")
        for obj in listed.get("items") or []:
            if not obj["metadata"].get("deletionTimestamp"):
                owners[obj["metadata"]["name"]] = obj
    for name, size in sorted({**churn.deployments, **churn.jobs}.items()):
        obj = owners.get(name)
        if obj is None:
            wrong.append(f"{name}: gone")
            continue
        group = owned_group(obj)
        live = [p for p in pods if p["metadata"]["labels"].get("app") == name]
        if len(live) != size or len(bound(live)) != size:
            wrong.append(f"{name}: {len(bound(live))} of {len(live)} pods bound, {size} wanted")
        if group not in found:
            wrong.append(f"{name}: no PodGroup {group}")
        elif KAI.size(found[group]) != size:
            wrong.append(f"{name}: PodGroup {group} of size {KAI.size(found[group])}, {size} wanted")
        strays = [p["metadata"]["name"] for p in live if (p["metadata"].get("labels") or {}).get(LABEL) != group]
        if strays:
            wrong.append(f"{name}: pods outside {group}: {strays}")
    owned = {owned_group(o) for o in owners.values()}
    for group_name, group in found.items():
        if group_name.startswith("pg-") and group_name not in owned:
            wrong.append(f"orphan PodGroup {group_name}")
    for group_name in sorted(record.broken):
        left = [p["metadata"]["name"] for p in pods if p["metadata"]["labels"].get("app") == group_name]
        if left:
            wrong.append(f"broken gang {group_name} not evicted: {left}")
    for group_name in sorted(record.whole):
        live = [p for p in pods if p["metadata"]["labels"].get("app") == group_name]
        if len(live) != 3:
            wrong.append(f"whole gang {group_name} lost pods: {len(live)} of 3 left")
    return wrong


def stamp(value: str | None) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp() if value else 0.0


async def writes_after_losing(here: Corner, installed: Podgang, record: Record) -> list[str]:
    """Events a grouper wrote after it was resumed with the Lease another held (the Event's
    creation is the apiserver's clock: a write queued before the pause and sent after it shows)."""
    out = []
    for namespace in (here.namespace, PODGANG_NS):
        listed = await here.api.get(f"/api/v1/namespaces/{namespace}/events")
        for event in listed.get("items") or []:
            who = event.get("reportingInstance") or ""
            resumed, created = record.resumed.get(who), stamp(event["metadata"].get("creationTimestamp"))
            # between its resumption and its next term (creation times are whole seconds)
            if resumed is not None and int(resumed) <= created < int(regained(installed, who, resumed)):
                out.append(f"{who} after resuming: {event.get('reason')} {event['involvedObject'].get('name')}")
    return out


def error_lines(installed: Podgang) -> list[str]:
    out = []
    for process in installed.processes.values():
        for line in process.log.read_text(errors="replace").splitlines():
            if (" ERROR " in line or " CRITICAL " in line or "Traceback" in line) and not EXPLAINED.search(line):
                out.append(f"{process.name}: {line[:300]}")
    return out


def summary(seed: int, churn: Churn, record: Record, events: list[dict[str, Any]]) -> str:
    reasons: dict[str, int] = {}
    for event in events:
        reasons[event.get("reason", "?")] = reasons.get(event.get("reason", "?"), 0) + event.get("count", 1)
    rss = {name: f"{samples[0] // 1024}→{max(samples) // 1024}→{samples[-1] // 1024} MiB"
           for name, samples in record.rss.items() if len(samples) > 1}
    failed = sorted({e.get("message", "")[:160] for e in events if e.get("reason") == "FailedCreate"})[:3]
    return (f"\nsoak: {SECONDS:g}s churn, seed {seed}\n  faults: {'; '.join(record.faults)}\n"
            f"  at the end: {len(churn.deployments)} deployments, {len(churn.jobs)} jobs; "
            f"{len(record.broken)} gangs broken (evicted), {len(record.whole)} left whole; "
            f"{record.refused} of {record.conflicts} GPU conflicts refused; "
            f"{record.slow} steps whose effect a fault held up past {EFFECT_TIMEOUT:g}s\n"
            f"  events: {', '.join(f'{k} {v}' for k, v in sorted(reasons.items()))}\n"
            f"  RSS (first→max→last): {rss}\n  pods a controller failed to create, e.g.: {failed}")


async def test_churn_and_faults_keep_every_promise(soak):
    seed = int(os.environ.get("PODGANG_SOAK_SEED", str(int(time.time()))))
    record = Record()
    async with corner(soak.cluster, "soak", nodes=3) as here, FakeKubelet(here):
        churn = Churn(here, record, seed)
        faults = Faults(here, soak, record, churn)
        started = time.monotonic()
        schedule = fault_schedule(faults, started)
        faulting = asyncio.create_task(run_faults(faults, schedule))
        try:  # users go on while the faults happen: the churn's clock tells the faults when
            while not faulting.done() or time.monotonic() < started + SECONDS:
                faults.sample_memory()
                churn.tick(schedule)
                if faulting.done() or time.monotonic() >= started + SECONDS:
                    await faulting  # its failure at once; else the last faults
                else:
                    await churn.step()
        finally:
            faulting.cancel()
        await faults.restart_exited()
        faults.sample_memory()

        async def nothing_wrong():
            return not await settled(here, churn, record)
        try:
            await until(nothing_wrong, "the cluster settled", 90)
        except AssertionError:
            wrong = await settled(here, churn, record)
            raise AssertionError(f"seed {seed}, faults {record.faults}:\n" + "\n".join(wrong)) from None
        print(summary(seed, churn, record, await here.events()))  # make soak's figures

        assert len([f for f in record.faults if "exited" not in f]) == 5 * max(1, int(SECONDS // ROUND)), record.faults
        assert record.resumed, "no grouper was paused past its Lease"
        assert not await writes_after_losing(here, soak, record), f"seed {seed}: a grouper wrote after losing the Lease"
        evicted = {e["involvedObject"]["name"]: stamp(e["metadata"].get("creationTimestamp"))
                   for e in await here.events("GangEvicted")}
        assert set(evicted) <= set(record.broken), f"seed {seed}: whole gangs evicted: {set(evicted) - set(record.broken)}"
        early = {g: round(evicted[g] - record.broken[g], 1) for g in evicted if evicted[g] < record.broken[g] + GRACE - 1}
        assert not early, f"seed {seed}: evicted before their grace ({GRACE:g}s), seconds after the break: {early}"
        assert record.broken, f"seed {seed}: no gang was broken (the run was too short to test eviction)"
        assert not record.admitted_conflicts, f"seed {seed}: GPU conflicts admitted: {record.admitted_conflicts}"
        assert record.refused == record.conflicts, f"seed {seed}: {record.refused} of {record.conflicts} refused"
        assert not error_lines(soak), "unexplained error lines:\n" + "\n".join(error_lines(soak))
        for process, samples in record.rss.items():
            # flat: the last sample within 1.2× (+16 MiB) of the most of its first half — a process
            # is sampled from its spawn on, so its start-up (a few MiB while it imports) is not the base
            if len(samples) >= 10:
                base = max(samples[: len(samples) // 2])
                assert samples[-1] <= base * 1.2 + 16 * 1024, f"{process}: RSS {base} → {samples[-1]} KiB"
