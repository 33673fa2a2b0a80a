"""podgang.metrics, the one metrics module of both processes: each process's
/metrics carries the process metrics and no ``*_created`` series, and a concept
the two processes share has the same label names in both."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from podgang.metrics import GrouperMetrics, WebhookMetrics
from tests.grouper_support import deploy_with_pods, min_member, owned_group, running_grouper
from tests.emulator import kube_emulator_fixture
from tests.metrics_support import exported_series
from tests.webhook_support import eventually, review, running_webhook

PROCESS_SERIES = ("process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total")


@pytest.fixture
async def emu():
    async for emulator in kube_emulator_fixture():
        yield emulator


def sample_names(exposition: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in exposition.splitlines() if line and not line.startswith("#")}


def assert_process_metrics_and_no_created(exposition: str) -> None:
    names = sample_names(exposition)
    for series in PROCESS_SERIES:
        assert series in names, f"{series} missing from /metrics"
    resident = next(line for line in exposition.splitlines() if line.startswith("process_resident_memory_bytes "))
    assert float(resident.split()[1]) > 1_000_000  # a Python process holds megabytes
    assert not [n for n in names if n.endswith("_created")], "client library *_created series are exported"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_webhook_exports_process_metrics_and_no_created_series(tmp_path):
    async with running_webhook(tmp_path) as wh:
        await wh.mutate(review("pod-create-bare-gpu"))  # labelled counters and the histogram get series
        status, text = await wh.get("/metrics")
    assert status == 200
    assert "podgang_webhook_admission_duration_seconds_bucket{" in text
    assert_process_metrics_and_no_created(text)


async def test_the_grouper_exports_process_metrics_and_no_created_series(emu):
    port = free_port()
    async with running_grouper(emu, metrics_port=port, metrics_bind_address="127.0.0.1") as grouper:
        dep, _, _ = deploy_with_pods(emu, "web", 3)
        await eventually(lambda: min_member(emu, owned_group(dep)) == 3, what="the Deployment's PodGroup")
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
        assert grouper.controller is not None
    assert 'podgang_grouper_podgroups_created_total{source="owner"} 1.0' in text
    assert_process_metrics_and_no_created(text)


def by_concept(metrics) -> dict[str, frozenset[str]]:
    """Series name without the process prefix -> label names (podgang's own series)."""
    prefix = metrics.PREFIX + "_"
    return {name[len(prefix):]: labels for name, labels in exported_series(metrics).items() if name.startswith(prefix)}


def test_a_concept_in_both_processes_has_the_same_label_names():
    webhook, grouper = by_concept(WebhookMetrics()), by_concept(GrouperMetrics())
    shared = set(webhook) & set(grouper)
    assert {"api_errors_total", "events_dropped_total", "podgroups_created_total"} <= shared
    for name in shared:
        assert webhook[name] == grouper[name], f"{name}: webhook labels {set(webhook[name])}, grouper {set(grouper[name])}"
    assert webhook["api_errors_total"] == {"call", "code"}


def test_an_api_error_without_an_answer_has_code_none():
    metrics = GrouperMetrics()
    metrics.api_error("patch", 409)
    metrics.api_error("patch", None)
    metrics.api_error("patch", 0)  # kubernetes_asyncio's status of a request that got no answer
    get = metrics.registry.get_sample_value
    assert get("podgang_grouper_api_errors_total", {"call": "patch", "code": "409"}) == 1
    assert get("podgang_grouper_api_errors_total", {"call": "patch", "code": "none"}) == 2


def test_each_process_object_has_its_own_counts():
    first, second = WebhookMetrics(), WebhookMetrics()
    first.observe("/mutate-pods", "CREATE", "patched", 0.001)
    key = {"endpoint": "/mutate-pods", "operation": "CREATE", "verdict": "patched"}
    assert first.registry.get_sample_value("podgang_webhook_admission_requests_total", key) == 1
    assert second.registry.get_sample_value("podgang_webhook_admission_requests_total", key) is None
