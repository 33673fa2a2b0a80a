"""PodGroups created at admission are a side effect on behalf of whoever sends the review:
each namespace has a budget of them per webhook replica, and a group admission made that no
pod ever names is deleted soon (``--admission-orphan-timeout``), never one a pod named.

Beyond the budget the pod is still patched, and the grouper creates its group once the pod
exists: a burst of owner-less pods larger than the budget ends with every pod grouped, in
every backend's spelling (native gangs included)."""

from __future__ import annotations

import asyncio
import copy
import io
import logging

import jsonpatch
import orjson
import pytest

from podgang.backends import KAI
from podgang.grouper.controller import Controller, Options
from podgang.settings import Settings
from podgang.webhook.decisions import DecisionLog
from tests.backend_support import SCHEDULERS, bare_pod_review, podgroup_of, resource
from tests.emulator import KubeEmulator
from tests.grouper_support import NS as GROUPER_NS, pod, podgroup, running_grouper
from tests.webhook_support import decoded_patch, running_webhook

MARK = "podgang.io/created-by-admission"
BACKENDS = {**SCHEDULERS, "kai": (KAI, "kai-scheduler")}


def _decisions(stream: io.BytesIO) -> list[dict]:
    return [orjson.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.parametrize("name", sorted(BACKENDS))
async def test_a_burst_beyond_the_budget_ends_with_every_pod_grouped(tmp_path, name, caplog):
    caplog.set_level(logging.INFO, logger="podgang.webhook.decision")
    backend, scheduler = BACKENDS[name]
    budget, burst = 2, 5
    async with KubeEmulator() as emu:
        if name != "kai":
            emu.register(resource(backend))
        client = emu.api_client()
        stream = io.BytesIO()
        try:
            async with running_webhook(tmp_path, api_client=client, settings=Settings(backends=((scheduler, backend),)),
                                       decision_log=DecisionLog(stream), podgroup_budget=budget,
                                       podgroup_budget_window=3600.0) as wh:
                ns = None
                for i in range(burst):
                    doc = copy.deepcopy(bare_pod_review(scheduler))
                    doc["request"]["uid"] = f"uid-{i}"
                    obj = doc["request"]["object"]
                    obj["metadata"]["name"] = f"bare-{i}"
                    ns = doc["request"]["namespace"]
                    response = await wh.mutate(doc)
                    assert response["allowed"] is True
                    emu.put(jsonpatch.apply_patch(obj, decoded_patch(response)))  # the apiserver stores it
                wh.server.decision_log.flush()
                over = wh.server.metrics.podgroups_over_budget._value.get()
        finally:
            await client.close()
        # the first `budget` groups made at admission (marked so), the rest left to the grouper
        made = [n for i in range(burst) if podgroup_of(emu, backend, ns, n := f"pg-bare-{i}") is not None]
        assert made == ["pg-bare-0", "pg-bare-1"]
        assert all(podgroup_of(emu, backend, ns, n)["metadata"]["annotations"][MARK] == "true" for n in made)
        assert over == burst - budget
        lines = [d for d in _decisions(stream) if d.get("pod", "").startswith("bare-")]
        spent = [d for d in lines if "budget of PodGroups created by admission is spent" in d["reason"]]
        assert [d["pod"] for d in spent] == ["bare-2", "bare-3", "bare-4"]
        assert {d["verdict"] for d in spent} == {"degraded"} and all("the grouper creates it" in d["reason"]
                                                                     for d in spent)
        # the grouper, once the pods exist: every pod's group, adopted by its pod
        client = emu.api_client()
        settings = Settings(backends=((scheduler, backend),), orphan_timeout=60.0)
        controller = Controller(client, settings, Options(resync_period=300.0, request_timeout=5.0))
        task = asyncio.create_task(controller.run())
        try:
            for i in range(burst):
                group = await emu.wait_for(lambda i=i: _adopted(emu, backend, ns, f"pg-bare-{i}"), 10,
                                           f"pg-bare-{i} not created and adopted")
                assert backend.min_member(backend.gang_view(group, f"pg-bare-{i}")) == 1
                assert backend.group_of(emu.get("pods", ns, f"bare-{i}")) == f"pg-bare-{i}"
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await client.close()


def _adopted(emu, backend, ns: str, name: str) -> dict | None:
    group = podgroup_of(emu, backend, ns, name)
    return group if group is not None and group["metadata"].get("ownerReferences") else None


async def test_a_group_made_at_admission_that_no_pod_names_is_reaped_fast(emu):
    """Marked by admission, never named: gone after --admission-orphan-timeout. Marked and named
    (adopted by its pod): kept however long. Unmarked (made before, or by hand with podgang's
    label): the ordinary --orphan-timeout."""
    marked = {MARK: "true"}
    emu.put(podgroup("pg-crafted", 1, managed=True, annotations=marked))
    emu.put(podgroup("pg-old", 1, managed=True))
    solo = emu.put(pod("solo", group="pg-solo"))
    emu.put(podgroup("pg-solo", 1, managed=True, annotations=marked))
    async with running_grouper(emu, orphan_timeout=60.0, admission_orphan_timeout=0.5):
        await emu.wait_for(lambda: emu.get("podgroups", GROUPER_NS, "pg-crafted") is None, 5.0,
                           "the group admission made for no pod was not reaped")
        refs = emu.get("podgroups", GROUPER_NS, "pg-solo")["metadata"].get("ownerReferences") or [{}]
        assert refs[0].get("uid") == solo["metadata"]["uid"]
        assert emu.get("podgroups", GROUPER_NS, "pg-old") is not None  # 60 s


async def test_the_fast_timeout_never_exceeds_the_orphan_timeout(emu):
    emu.put(podgroup("pg-crafted", 1, managed=True, annotations={MARK: "true"}))
    async with running_grouper(emu, orphan_timeout=0.5, admission_orphan_timeout=60.0):
        await emu.wait_for(lambda: emu.get("podgroups", GROUPER_NS, "pg-crafted") is None, 5.0, "not reaped")
