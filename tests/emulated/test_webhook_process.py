"""``podgang webhook`` / ``python -m podgang.webhook`` as a process: flags and PODGANG_*
variables, JSON and text logs, and SIGTERM (stop accepting, finish what is in
flight, exit 0)."""

from __future__ import annotations

import asyncio
import signal

import aiohttp
import pytest

from tests.emulator import KubeEmulator
from tests.webhook_processes import WebhookProcess
from tests.webhook_support import (
    DEPLOYMENT_UID,
    client_context,
    eventually,
    group_after,
    owned_pod_review,
    podgang_certs_generate,
    review,
    seed_owners,
)


async def test_sigterm_finishes_the_request_in_flight_then_exits_0(tmp_path):
    certs = tmp_path / "certs"
    podgang_certs_generate(certs)
    async with KubeEmulator() as kube:
        seed_owners(kube)
        kube.delay(3.0, r"/replicasets/")  # the first owner look-up is slow: a request stays in flight
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        async with WebhookProcess(
            "-m", "podgang.webhook", "--port", "0", "--bind-address", "127.0.0.1", "--cert-dir", str(certs),
            "--kubeconfig", kubeconfig, "--scheduler-name", "default-scheduler", "--api-timeout", "5s",
        ) as wh:
            port = await wh.port()
            ctx = client_context(certs / "ca.crt")
            async with aiohttp.ClientSession() as session:
                url = f"https://127.0.0.1:{port}/mutate-pods?timeout=10s"

                async def post():
                    async with session.post(url, json=owned_pod_review(0), ssl=ctx) as resp:
                        return resp.status, await resp.json()

                in_flight = asyncio.create_task(post())
                await eventually(lambda: kube.count("GET", r"/replicasets/") == 1, what="look-up under way")
                wh.proc.send_signal(signal.SIGTERM)

                async def refused():
                    try:
                        _, writer = await asyncio.open_connection("127.0.0.1", port)
                    except ConnectionRefusedError:
                        return True
                    except ConnectionResetError:
                        return False  # queued as the listener closed: the next try is refused
                    writer.close()
                    return False

                await eventually(refused, what="no longer accepting connections")
                assert not in_flight.done()
                status, answer = await asyncio.wait_for(in_flight, 10)
            assert status == 200
            assert answer["response"]["uid"] == "scale-up-0"
            assert group_after(owned_pod_review(0), answer["response"]) == f"pg-web-{DEPLOYMENT_UID}"
            assert await asyncio.wait_for(wh.proc.wait(), 15) == 0
        messages = [entry.get("msg") for entry in wh.json_lines()]
        assert messages.index("stopping: finishing requests in flight") < messages.index("admission")
        assert messages[-1] == "webhook stopped"


async def test_podgang_webhook_reads_podgang_variables_and_logs_text(tmp_path):
    certs = tmp_path / "certs"
    podgang_certs_generate(certs)
    async with KubeEmulator() as kube:
        kubeconfig = kube.write_kubeconfig(tmp_path / "kubeconfig")
        env = {
            "PODGANG_PORT": "0",
            "PODGANG_BIND_ADDRESS": "127.0.0.1",
            "PODGANG_CERT_DIR": str(certs),
            "PODGANG_KUBECONFIG": kubeconfig,
            "PODGANG_SCHEDULER_NAME": "kai-scheduler,default-scheduler",
            "PODGANG_EXCLUDE_NAMESPACE": "kube-system,other",
            "PODGANG_LOG_FORMAT": "text",
        }
        async with WebhookProcess("-m", "podgang.cli", "webhook", env=env) as wh:
            port = await wh.port()
            async with aiohttp.ClientSession() as session:
                async with session.post(
                    f"https://127.0.0.1:{port}/mutate-pods", json=review("pod-create-dry-run"), ssl=client_context(certs / "ca.crt")
                ) as resp:
                    answer = await resp.json()
            assert group_after(review("pod-create-dry-run"), answer["response"]) == "pg-dryrun-pod"  # default-scheduler in scope
            await eventually(lambda: any("podgang.webhook.decision: admission" in line for line in wh.lines), what="decision line")
            line = next(line for line in wh.lines if "podgang.webhook.decision: admission" in line)
            assert "group=pg-dryrun-pod" in line and "verdict=patched" in line and "pod=dryrun-pod" in line
            wh.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(wh.proc.wait(), 15) == 0
        assert kube.count("POST") == 0  # a dry run creates nothing


async def test_without_any_kubeconfig_it_says_what_to_do(tmp_path):
    env = {"HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing"), "KUBERNETES_SERVICE_HOST": ""}
    async with WebhookProcess("-m", "podgang.webhook", "--port", "0", "--cert-dir", str(tmp_path), env=env) as wh:
        assert await asyncio.wait_for(wh.proc.wait(), 30) == 2
    await wh._reader
    errors = [e for e in wh.json_lines() if e.get("level") == "error"]
    assert errors and "--kubeconfig" in errors[0]["error"]


@pytest.mark.parametrize("bad", [["--port", "70000"], ["--log-format", "xml"], ["--api-timeout", "soon"]])
async def test_bad_flags_are_refused(tmp_path, bad):
    async with WebhookProcess("-m", "podgang.webhook", *bad) as wh:
        assert await asyncio.wait_for(wh.proc.wait(), 30) == 2
    await wh._reader
    assert any(bad[0] in line for line in wh.lines)


async def test_a_lower_case_log_level_variable_works_and_a_bad_variable_is_one_line(tmp_path):
    """``PODGANG_LOG_LEVEL=info`` (as Helm values usually spell it) used to end in a
    traceback: variables skip argparse's choices check and ``logging`` wants upper case."""
    certs = tmp_path / "certs"
    podgang_certs_generate(certs)
    async with KubeEmulator() as kube:
        env = {
            "PODGANG_PORT": "0",
            "PODGANG_BIND_ADDRESS": "127.0.0.1",
            "PODGANG_CERT_DIR": str(certs),
            "PODGANG_KUBECONFIG": kube.write_kubeconfig(tmp_path / "kubeconfig"),
            "PODGANG_LOG_LEVEL": "info",
        }
        async with WebhookProcess("-m", "podgang.cli", "webhook", env=env) as wh:
            await wh.port()
            wh.proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(wh.proc.wait(), 15) == 0
        async with WebhookProcess("-m", "podgang.cli", "webhook", env={**env, "PODGANG_LOG_FORMAT": "yaml"}) as wh:
            assert await asyncio.wait_for(wh.proc.wait(), 30) == 2
        await wh._reader
        assert not any("Traceback" in line for line in wh.lines), wh.lines
        assert any("PODGANG_LOG_FORMAT" in line and "yaml" in line for line in wh.lines), wh.lines
