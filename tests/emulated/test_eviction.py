"""grouper/eviction.py against the HTTP API emulator (tests/emulator/),
through the real kubernetes_asyncio client. Retries never wait: ``sleep`` is a fake
that records the backoff it was asked for."""

from __future__ import annotations

import inspect
import json

import pytest
from kubernetes_asyncio.client import ApiClient
from podgang.api import TooManyRequests, parse_status
from podgang.grouper.eviction import EvictionResult, evict_pods
from tests.emulator import KubeEmulator
from tests.paths import TESTS

NS = "team-a"
EVICTION = r"/api/v1/namespaces/team-a/pods/[^/]+/eviction$"
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
FIXTURES = TESTS / "fixtures" / "api"


class Client(ApiClient):
    """An ApiClient that counts requests in flight at once."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        self.peak = 0

    async def call_api(self, *args, **kwargs):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            return await super().call_api(*args, **kwargs)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def api(emu):
    async with Client(configuration=emu.configuration()) as client:
        yield client


class FakeSleep:
    """Records the requested delays; optionally runs a hook on each (no real waiting)."""

    def __init__(self, hook=None):
        self.delays: list[float] = []
        self.hook = hook

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.hook is not None:
            result = self.hook(len(self.delays))
            if inspect.isawaitable(result):
                await result


def pod(name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "gang", **labels}},
        "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "node-1"},
        "status": {"phase": "Running"},
    }


def put_pods(emu: KubeEmulator, *names: str) -> list[dict]:
    return [emu.put(pod(n)) for n in names]


def put_pdb(emu: KubeEmulator, min_available: int, name: str = "gang") -> None:
    emu.put({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "gang"}}},
    })


def remaining(emu: KubeEmulator) -> list[str]:
    return [p["metadata"]["name"] for p in emu.list("pods", NS)]


# ---------------------------------------------------------------------------


async def test_pods_are_evicted_and_gone_from_the_api(emu, api):
    pods = put_pods(emu, "w-0", "w-1", "w-2")
    emu.put({**pod("bystander"), "metadata": {"name": "bystander", "namespace": NS}})
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, sleep=sleep)

    assert result == EvictionResult(evicted=["w-0", "w-1", "w-2"], refused=[], gone=[])
    assert result.ok
    assert remaining(emu) == ["bystander"]
    assert sleep.delays == []
    posts = emu.find_requests("POST", EVICTION)
    assert sorted(r.path for r in posts) == [f"/api/v1/namespaces/{NS}/pods/w-{i}/eviction" for i in range(3)]
    by_name = {r.body["metadata"]["name"]: r.body for r in posts}
    for p in pods:
        body = by_name[p["metadata"]["name"]]
        assert body["apiVersion"] == "policy/v1" and body["kind"] == "Eviction"
        assert body["metadata"]["namespace"] == NS
        # only the incarnation we meant: a pod recreated under the same name is left alone
        assert body["deleteOptions"] == {"preconditions": {"uid": p["metadata"]["uid"]}}


async def test_pdb_refusing_then_allowing_is_retried_until_it_succeeds(emu, api):
    pods = put_pods(emu, "w-0", "w-1", "w-2")
    put_pdb(emu, 3)  # 3 healthy needed, 3 there: every eviction refused

    async def relax(calls: int) -> None:
        # the evictions run concurrently: relax the budget only once every pod has
        # been refused, so the count below does not depend on scheduling
        await emu.wait_for(lambda: emu.count("POST", EVICTION) >= 3, timeout=5)
        if calls == 1:
            put_pdb(emu, 0)  # e.g. the owner relaxed the budget while we backed off

    sleep = FakeSleep(relax)
    result = await evict_pods(api, pods, timeout=5, sleep=sleep)

    assert result.evicted == ["w-0", "w-1", "w-2"]
    assert result.refused == [] and result.gone == []
    assert remaining(emu) == []
    assert emu.count("POST", EVICTION) == 6  # each pod: refused once, then evicted
    assert sleep.delays == [1.0, 1.0, 1.0]


async def test_refused_evictions_back_off_exponentially(emu, api):
    pods = put_pods(emu, "w-0")
    emu.refuse_evictions(3)
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, attempts=5, backoff=0.5, sleep=sleep)

    assert result.evicted == ["w-0"]
    assert sleep.delays == [0.5, 1.0, 2.0]
    assert emu.count("POST", EVICTION) == 4
    assert remaining(emu) == []


async def test_pdb_refusing_throughout_is_refused_with_the_pdb_message(emu, api):
    pods = put_pods(emu, "w-0", "w-1", "w-2")
    put_pdb(emu, 3)
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, attempts=4, sleep=sleep)

    assert result.evicted == [] and result.gone == []
    assert [name for name, _ in result.refused] == ["w-0", "w-1", "w-2"]
    assert not result.ok
    for _, reason in result.refused:
        assert reason.startswith(f"HTTP 429 TooManyRequests: {PDB_MESSAGE}")
        assert "The disruption budget gang needs 3 healthy pods and has 3 currently" in reason
        assert "gave up after 4 attempts" in reason
    assert emu.count("POST", EVICTION) == 12
    assert sorted(sleep.delays) == sorted([1.0, 2.0, 4.0] * 3)
    assert remaining(emu) == ["w-0", "w-1", "w-2"]


async def test_a_pdb_lets_some_members_go_and_holds_the_rest(emu, api):
    pods = put_pods(emu, "w-0", "w-1", "w-2")
    put_pdb(emu, 2)  # one disruption allowed

    result = await evict_pods(api, pods, timeout=5, attempts=2, sleep=FakeSleep(), concurrency=1)

    assert result.evicted == ["w-0"]
    assert [name for name, _ in result.refused] == ["w-1", "w-2"]
    assert all("needs 2 healthy pods and has 2 currently" in reason for _, reason in result.refused)
    assert remaining(emu) == ["w-1", "w-2"]


async def test_a_gang_that_recovers_while_a_pdb_refuses_keeps_its_pods(emu, api):
    """Issue 35: ``stop`` is asked before every try. The gang came back while the budget
    refused its pods: the retries stop there, though the budget would now let one go."""
    pods = put_pods(emu, "w-0", "w-1")
    put_pdb(emu, 2)  # 2 healthy needed, 2 there: every eviction refused
    said: list[str] = []

    async def recover(calls: int) -> None:
        # once every pod was refused, the gang is whole again (a third member runs), and the
        # budget allows one disruption: a retry that did not ask would evict
        await emu.wait_for(lambda: emu.count("POST", EVICTION) >= 2, timeout=5)
        if calls == 1:
            emu.put(pod("w-2"))
            said.append("the gang is no longer stale")

    asked: list[str] = []

    def stop() -> str | None:
        asked.append("")
        return said[0] if said else None

    result = await evict_pods(api, pods, timeout=5, sleep=FakeSleep(recover), stop=stop)

    assert result.kept == ["w-0", "w-1"] and result.stopped == "the gang is no longer stale"
    assert result.evicted == [] and result.refused == [] and not result.ok
    assert emu.count("POST", EVICTION) == 2  # one try each, none after the gang recovered
    assert remaining(emu) == ["w-0", "w-1", "w-2"]
    assert len(asked) == 4  # each pod: before its first try, and before its retry


async def test_an_eviction_told_to_stop_before_its_first_try_posts_nothing(emu, api):
    pods = put_pods(emu, "w-0")
    result = await evict_pods(api, pods, timeout=5, sleep=FakeSleep(), stop=lambda: "the gang is no longer stale")
    assert result == EvictionResult(kept=["w-0"], stopped="the gang is no longer stale")
    assert emu.count("POST", EVICTION) == 0 and remaining(emu) == ["w-0"]


async def test_404_counts_as_gone(emu, api):
    pods = put_pods(emu, "w-0")
    missing = pod("w-1")  # already deleted (e.g. by its controller)

    sleep = FakeSleep()
    result = await evict_pods(api, [*pods, missing], timeout=5, sleep=sleep)

    assert result == EvictionResult(evicted=["w-0"], refused=[], gone=["w-1"])
    assert result.ok
    assert emu.count("POST", EVICTION) == 2  # a 404 is not retried
    assert sleep.delays == []


async def test_500_is_retried(emu, api):
    pods = put_pods(emu, "w-0", "w-1")
    emu.fail("POST", r"/pods/w-0/eviction$", 500, times=2)
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, sleep=sleep)

    assert result.evicted == ["w-0", "w-1"]
    assert result.refused == []
    assert emu.count("POST", r"/pods/w-0/eviction$") == 3
    assert emu.count("POST", r"/pods/w-1/eviction$") == 1
    assert sleep.delays == [1.0, 2.0]
    assert remaining(emu) == []


async def test_persistent_500_is_refused_after_the_attempts(emu, api):
    pods = put_pods(emu, "w-0")
    emu.fail("POST", EVICTION, 500, times=None)
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, attempts=3, sleep=sleep)

    assert result.evicted == [] and result.gone == []
    [(name, reason)] = result.refused
    assert name == "w-0"
    assert reason.startswith("HTTP 500 InternalError: kube-emulator: injected 500")
    assert "gave up after 3 attempts" in reason
    assert emu.count("POST", EVICTION) == 3
    assert sleep.delays == [1.0, 2.0]
    assert remaining(emu) == ["w-0"]


async def test_backoff_is_capped(emu, api):
    pods = put_pods(emu, "w-0")
    emu.fail("POST", EVICTION, 503, times=None)
    sleep = FakeSleep()

    await evict_pods(api, pods, timeout=5, attempts=8, backoff=4, sleep=sleep)

    assert sleep.delays == [4, 8, 16, 30, 30, 30, 30]


async def test_request_timeout_is_applied_and_retried(emu, api):
    pods = put_pods(emu, "w-0")
    emu.delay(5, EVICTION)  # the apiserver hangs; the request timeout must end each attempt
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=0.05, attempts=2, sleep=sleep)

    [(name, reason)] = result.refused
    assert name == "w-0"
    assert reason == "no answer within 50ms (gave up after 2 attempts)"
    assert emu.count("POST", EVICTION) == 2
    assert sleep.delays == [1.0]


async def test_conflict_for_a_pod_recreated_under_the_same_name_counts_as_gone(emu, api):
    [current] = put_pods(emu, "w-0")
    stale = pod("w-0")
    stale["metadata"]["uid"] = "uid-of-the-evicted-incarnation"
    # the apiserver's answer to a uid precondition that no longer matches
    emu.fail("POST", EVICTION, 409, times=1)
    sleep = FakeSleep()

    result = await evict_pods(api, [stale], timeout=5, sleep=sleep)

    assert result == EvictionResult(evicted=[], refused=[], gone=["w-0"])
    assert emu.get("pods", NS, "w-0")["metadata"]["uid"] == current["metadata"]["uid"]  # left alone
    assert emu.count("GET", r"/pods/w-0$") == 1
    assert sleep.delays == []


async def test_conflict_for_the_same_pod_is_retried(emu, api):
    pods = put_pods(emu, "w-0")
    emu.fail("POST", EVICTION, 409, times=1)  # e.g. a PDB update conflict
    sleep = FakeSleep()

    result = await evict_pods(api, pods, timeout=5, sleep=sleep)

    assert result.evicted == ["w-0"]
    assert sleep.delays == [1.0]
    assert remaining(emu) == []


async def test_evictions_run_concurrently_and_bounded(emu, api):
    names = [f"w-{i}" for i in range(6)]
    pods = put_pods(emu, *names)

    result = await evict_pods(api, pods, timeout=5, sleep=FakeSleep(), concurrency=2)

    assert result.evicted == names
    assert api.peak == 2


async def test_evictions_run_concurrently_by_default(emu, api):
    names = [f"w-{i}" for i in range(6)]
    pods = put_pods(emu, *names)

    result = await evict_pods(api, pods, timeout=5, sleep=FakeSleep())

    assert result.evicted == names
    assert api.peak == 6


async def test_duplicates_and_malformed_pods(emu, api):
    pods = put_pods(emu, "w-0")
    result = await evict_pods(api, [pods[0], pods[0], {"metadata": {"name": "x"}}], timeout=5, sleep=FakeSleep())
    assert result.evicted == ["w-0"]
    assert result.refused == [("x", "the pod has no metadata.name or metadata.namespace")]
    assert emu.count("POST", EVICTION) == 1


async def test_nothing_to_evict(emu, api):
    assert await evict_pods(api, [], timeout=5) == EvictionResult([], [], [])
    assert emu.count() == 0


def test_refusal_reason_reads_the_recorded_pdb_status():
    body = (FIXTURES / "429-eviction-blocked-by-pdb.json").read_text()
    exc = parse_status(429, body, "Too Many Requests")
    assert json.loads(body)["code"] == 429 and isinstance(exc, TooManyRequests)
    assert str(exc) == (
        f"HTTP 429 TooManyRequests: {PDB_MESSAGE} The disruption budget gang needs 3 healthy pods and has 3 currently"
    )
    assert str(parse_status(429, b"not json", "Too Many Requests")).startswith("HTTP 429 Too Many Requests")
