"""The chart's part of the slow-client hardening (issue 11, item 3): the webhook gets its
read deadlines and connection bound as flags, and an optional NetworkPolicy admits only
the listed peers. Rendered with Helm's own engine and checked against the Kubernetes
schema, as tests/unit/test_chart.py does for the rest of the chart."""

from __future__ import annotations

import argparse
import json

import jsonschema
import kubernetes_validate
import pytest
import yaml

from podgang.webhook import cli as webhook_cli
from tests.chart_support import render as render_chart
from tests.paths import ROOT

CHART = ROOT / "charts" / "podgang"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
RELEASE, NAMESPACE = "podgang", "gang-system"
APISERVER = [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
PROMETHEUS = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]


def render(values: dict | None = None) -> list[dict]:
    return render_chart(values or {}, release=RELEASE, namespace=NAMESPACE)


def webhook_args(docs: list[dict]) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-webhook")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def policies(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "NetworkPolicy"}


def test_the_webhook_gets_the_limits_and_they_are_ones_it_accepts():
    args = webhook_args(render())
    passed = [a for a in args if a.split("=")[0] in
              ("--read-header-timeout", "--read-timeout", "--idle-timeout", "--max-connections")]
    assert passed == ["--read-header-timeout=2s", "--read-timeout=4s", "--idle-timeout=120s", "--max-connections=500"]
    parser = argparse.ArgumentParser()
    webhook_cli.add_arguments(parser)
    parsed = parser.parse_args(passed)
    assert webhook_cli._choice_problem(parsed) is None
    # below the API server's own timeout for one review, as values.yaml says
    assert parsed.read_timeout < DEFAULTS["webhook"]["timeoutSeconds"]


def test_no_network_policy_when_turned_off():
    assert policies(render({"networkPolicy": {"enabled": False}})) == {}


def test_the_network_policies_admit_only_the_listed_peers():
    docs = render({"networkPolicy": {"webhookFrom": APISERVER, "metricsFrom": PROMETHEUS}})
    found = policies(docs)
    assert set(found) == {f"{RELEASE}-webhook", f"{RELEASE}-grouper"}
    for doc in found.values():
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert doc["spec"]["policyTypes"] == ["Ingress"]
        plain = {k: v for k, v in doc.items() if k != "__source__"}  # the renderer's note of the file
        kubernetes_validate.validate(plain, kubernetes_validate.latest_version(), strict=True)
    webhook = found[f"{RELEASE}-webhook"]["spec"]
    assert webhook["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "webhook"
    assert webhook["ingress"] == [
        {"from": APISERVER, "ports": [{"port": "https", "protocol": "TCP"}]},
        {"from": PROMETHEUS, "ports": [{"port": "health", "protocol": "TCP"}]},
    ]
    grouper = found[f"{RELEASE}-grouper"]["spec"]
    assert grouper["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "grouper"
    assert grouper["ingress"] == [{"from": PROMETHEUS, "ports": [{"port": "http-metrics", "protocol": "TCP"}]}]
    # the named ports exist on the containers they select
    for component, port in (("webhook", "https"), ("webhook", "health"), ("grouper", "http-metrics")):
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-{component}")
        assert port in [p["name"] for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]]


def test_without_metrics_peers_the_grouper_admits_nothing():
    docs = render({"networkPolicy": {"webhookFrom": APISERVER, "metricsFrom": []}})
    found = policies(docs)
    assert found[f"{RELEASE}-grouper"]["spec"]["ingress"] == []
    assert len(found[f"{RELEASE}-webhook"]["spec"]["ingress"]) == 1


@pytest.mark.parametrize(
    "network_policy",
    [
        {"enabled": True, "apiserver": {"cidrs": ["10.0.0.10"], "lookup": True}, "webhookFrom": [], "metricsFrom": []},
        {"enabled": True, "apiserver": {"cidrs": [], "lookup": True}, "webhookFrom": [{"ipBlok": {"cidr": "10.0.0.0/8"}}],
         "metricsFrom": []},
        {"enabled": True, "apiserver": {"cidrs": [], "lookup": True}, "webhookFrom": [{}], "metricsFrom": []},
        {"enabled": True, "apiserver": {"cidrs": [], "lookup": "yes"}, "webhookFrom": [], "metricsFrom": []},
    ],
)
def test_the_schema_refuses_a_policy_that_would_lock_the_api_server_out(network_policy):
    values = {**DEFAULTS, "networkPolicy": network_policy}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(values)


@pytest.mark.parametrize("key,value", [("maxConnections", 0), ("readTimeout", "4"), ("idleTimeout", "soon")])
def test_the_schema_refuses_bad_limits(key, value):
    values = {**DEFAULTS, "webhook": {**DEFAULTS["webhook"], key: value}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(values)
