"""``podgang grouper`` / ``python -m podgang.grouper``: flags, PODGANG_* variables, the
health/metrics server and start-up failures."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import aiohttp
import pytest

from podgang.backends import KAI
from podgang.grouper import cli
from podgang.grouper.health import HealthServer
from podgang.metrics import GrouperMetrics
from tests.paths import ROOT



def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(argv)


def test_defaults_follow_the_spec(monkeypatch):
    for name in list(os.environ):
        if name.startswith("PODGANG_") or name == "POD_NAMESPACE":
            monkeypatch.delenv(name)
    args = parse([])
    assert args.namespaces == [] and args.exclude_namespaces == ["kube-system"]
    assert args.scheduler_names == [] and args.backends == []
    assert cli.settings_from(args).backends == (("kai-scheduler", KAI),)
    assert args.staleness_grace_period == 60.0 and args.orphan_timeout == 120.0
    assert args.leader_elect is False and args.leader_election_name == "podgang-grouper"
    assert args.metrics_port == 8080 and args.log_format == "json"
    settings = cli.settings_from(args)
    assert settings.excluded_namespaces == ("kube-system",)
    assert cli.options_from(args).namespaces == ()


def test_flags_and_environment(monkeypatch):
    monkeypatch.setenv("PODGANG_STALENESS_GRACE_PERIOD", "90s")
    monkeypatch.setenv("PODGANG_WATCH_NAMESPACE", "a,b")
    monkeypatch.setenv("PODGANG_LEADER_ELECT", "true")
    monkeypatch.setenv("POD_NAMESPACE", "podgang-system")
    args = parse(["--orphan-timeout", "5m", "--scheduler-name", "kai-scheduler", "--scheduler-name", "other",
                  "--exclude-namespace", "infra"])
    assert args.staleness_grace_period == 90.0 and args.orphan_timeout == 300.0
    assert args.namespaces == ["a", "b"] and args.leader_elect is True
    settings = cli.settings_from(args)
    assert settings.scheduler_names == ("kai-scheduler", "other")
    assert settings.excluded_namespaces == ("infra", "podgang-system")  # its own namespace always
    assert parse(["--watch-namespace", "x"]).namespaces == ["x"]  # the command line wins
    # --namespace is podgang's own namespace, as in the webhook: excluded, and the Lease's home
    own = parse(["--namespace", "gang-system", "--leader-elect"])
    assert own.namespaces == ["a", "b"] and "gang-system" in cli.settings_from(own).excluded_namespaces


def test_bad_duration_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        parse(["--staleness-grace-period", "soon"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--staleness-grace-period" in err and "invalid duration" in err and "soon" in err


async def test_health_server_serves_metrics_healthz_and_readyz():
    metrics = GrouperMetrics()
    metrics.podgroups_created.labels(source="owner").inc()
    state = {"ready": (False, "waiting for the caches to sync")}
    server = HealthServer(metrics, lambda: state["ready"], host="127.0.0.1", port=0)
    port = await server.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/healthz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 503 and "caches" in await resp.text()
            state["ready"] = (True, "ok")
            async with http.get(f"http://127.0.0.1:{port}/readyz") as resp:
                assert resp.status == 200
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                text = await resp.text()
                assert 'podgang_grouper_podgroups_created_total{source="owner"} 1.0' in text
                assert "podgang_grouper_reconcile_duration_seconds" in text
    finally:
        await server.stop()


def test_python_m_grouper_fails_clearly_without_a_cluster(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KUBECONFIG", None)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = subprocess.run(
        [sys.executable, "-m", "podgang.grouper", "--kubeconfig", str(tmp_path / "missing"), "--metrics-port", "0",
         "--log-format", "text"], capture_output=True, text=True, timeout=60, env=env, cwd=str(ROOT))
    assert proc.returncode == 2
    assert "cannot configure Kubernetes API access" in proc.stderr
