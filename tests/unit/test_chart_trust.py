"""The chart's part of "no write on behalf of a caller podgang cannot trust" (issue 35, item 2),
rendered with Helm's own engine and checked against the Kubernetes schema: a NetworkPolicy on
by default that admits the webhook's HTTPS port from the API server as configured (and says when
nothing is known, as when `helm template` renders without a cluster), the client CA mounted and
passed when client authentication is on, and the admission budget passed as flags the webhook
and grouper accept. The lookup of the API server's addresses at install is
tests/emulated/test_chart_lookup.py."""

from __future__ import annotations

import argparse
import copy
import json

import jsonschema
import kubernetes_validate
import pytest
import yaml

from podgang.grouper import cli as grouper_cli
from podgang.webhook import cli as webhook_cli
from tests.chart_support import NOTES, render as render_chart, render_files
from tests.paths import ROOT

CHART = ROOT / "charts" / "podgang"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((CHART / "values.yaml").read_text())
RELEASE, NAMESPACE = "podgang", "gang-system"


def render(values: dict | None = None) -> list[dict]:
    return render_chart(values or {}, release=RELEASE, namespace=NAMESPACE)


def deployment(docs: list[dict], component: str) -> dict:
    return next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-{component}")


def webhook_policy(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["name"] == f"{RELEASE}-webhook")


def valid(doc: dict) -> None:
    kubernetes_validate.validate({k: v for k, v in doc.items() if k != "__source__"},
                                 kubernetes_validate.latest_version(), strict=True)


def with_values(path: str, value) -> dict:
    values = copy.deepcopy(DEFAULTS)
    *parents, last = path.split(".")
    node = values
    for key in parents:
        node = node[key]
    node[last] = value
    return values


# ---------------------------------------------------------------------------- NetworkPolicy


def test_the_network_policy_is_on_by_default_and_says_when_the_api_server_is_unknown():
    """`helm template` (no cluster: lookup finds nothing) with no CIDRs given: the HTTPS port is
    left open, the rendered policy says so, the health port admits every pod in the cluster."""
    docs = render()
    policy = webhook_policy(docs)
    valid(policy)
    assert policy["spec"]["ingress"] == [
        {"ports": [{"port": "https", "protocol": "TCP"}]},
        {"from": [{"namespaceSelector": {}}], "ports": [{"port": "health", "protocol": "TCP"}]},
    ]
    files = render_files({}, RELEASE, NAMESPACE)
    assert "NONE WAS KNOWN" in files["podgang/templates/networkpolicy.yaml"]
    assert "HTTPS port is open to every pod. Set networkPolicy.apiserver.cidrs" in files[NOTES]


def test_the_https_port_admits_the_api_server_cidrs_and_the_listed_peers_only():
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "konnectivity"}}}
    docs = render({"networkPolicy": {"apiserver": {"cidrs": ["10.0.0.10/32", "fd00::10/128", "10.0.0.10/32"]},
                                     "webhookFrom": [peer]}})
    policy = webhook_policy(docs)
    valid(policy)
    https = policy["spec"]["ingress"][0]
    assert https["ports"] == [{"port": "https", "protocol": "TCP"}]
    assert https["from"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "fd00::10/128"}}, peer]
    files = render_files({"networkPolicy": {"apiserver": {"cidrs": ["10.0.0.10/32"]}}}, RELEASE, NAMESPACE)
    assert "NONE WAS KNOWN" not in files["podgang/templates/networkpolicy.yaml"]
    assert "open to every pod" not in files[NOTES]


@pytest.mark.parametrize("cidr", ["10.0.0.10", "10.0.0.0/8,10.1.0.0/16", "any", ""])
def test_the_schema_refuses_what_is_no_cidr(cidr):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(with_values("networkPolicy.apiserver.cidrs", [cidr]))


def test_the_schema_accepts_the_defaults_and_cidrs():
    jsonschema.Draft7Validator(SCHEMA).validate(DEFAULTS)
    jsonschema.Draft7Validator(SCHEMA).validate(with_values("networkPolicy.apiserver.cidrs",
                                                            ["10.0.0.0/24", "2001:db8::/64"]))


# ---------------------------------------------------------------------------- client certificates


def test_client_auth_is_off_by_default():
    webhook = deployment(render(), "webhook")["spec"]["template"]["spec"]
    assert not [a for a in webhook["containers"][0]["args"] if a.startswith("--client-ca-file")]
    assert "client-ca" not in [v["name"] for v in webhook["volumes"]]


@pytest.mark.parametrize("source, volume", [
    ({"caConfigMap": "apiserver-client-ca"}, {"configMap": {"name": "apiserver-client-ca",
                                                            "items": [{"key": "ca.crt", "path": "ca.crt"}]}}),
    ({"caSecret": "apiserver-client-ca", "caKey": "client-ca.pem"},
     {"secret": {"secretName": "apiserver-client-ca", "items": [{"key": "client-ca.pem", "path": "client-ca.pem"}]}}),
])
def test_client_auth_mounts_the_ca_and_passes_it(source, volume):
    values = {"webhook": {"clientAuth": {"enabled": True, **source}}}
    docs = render(values)
    dep = deployment(docs, "webhook")
    valid(dep)
    pod = dep["spec"]["template"]["spec"]
    key = source.get("caKey", "ca.crt")
    args = pod["containers"][0]["args"]
    assert f"--client-ca-file=/client-ca/{key}" in args
    assert {"name": "client-ca", "mountPath": "/client-ca", "readOnly": True} in pod["containers"][0]["volumeMounts"]
    assert {"name": "client-ca", **volume} in pod["volumes"]
    parser = argparse.ArgumentParser()
    webhook_cli.add_arguments(parser)
    parsed = parser.parse_args([a for a in args if a.startswith("--client-ca-file")])
    assert webhook_cli.config_from_args(parsed).client_ca_file == f"/client-ca/{key}"
    # the kubelet has no client certificate: its probes must not use the HTTPS port
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert pod["containers"][0][probe]["httpGet"]["port"] == "health"


@pytest.mark.parametrize("client_auth", [
    {"enabled": True, "caConfigMap": "", "caSecret": "", "caKey": "ca.crt"},  # where is the CA?
    {"enabled": True, "caConfigMap": "a", "caSecret": "b", "caKey": "ca.crt"},  # which one?
    {"enabled": True, "caConfigMap": "a", "caSecret": "", "caKey": "a/b"},
    {"enabled": "yes", "caConfigMap": "a", "caSecret": "", "caKey": "ca.crt"},
])
def test_the_schema_refuses_client_auth_without_one_ca(client_auth):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(with_values("webhook.clientAuth", client_auth))


# ---------------------------------------------------------------------------- the admission budget


def test_the_budget_and_the_fast_reap_are_flags_the_processes_accept():
    docs = render()
    webhook_args = [a for a in deployment(docs, "webhook")["spec"]["template"]["spec"]["containers"][0]["args"]
                    if a.startswith("--podgroup-budget")]
    assert webhook_args == ["--podgroup-budget=30", "--podgroup-budget-window=1m"]
    parser = argparse.ArgumentParser()
    webhook_cli.add_arguments(parser)
    config = webhook_cli.config_from_args(parser.parse_args(webhook_args))
    assert (config.podgroup_budget, config.podgroup_budget_window) == (30, 60.0)
    grouper_args = [a for a in deployment(docs, "grouper")["spec"]["template"]["spec"]["containers"][0]["args"]
                    if "orphan-timeout" in a]
    assert grouper_args == ["--orphan-timeout=2m", "--admission-orphan-timeout=30s"]
    parser = argparse.ArgumentParser()
    grouper_cli.add_arguments(parser)
    settings = grouper_cli.settings_from(parser.parse_args(grouper_args))
    assert (settings.orphan_timeout, settings.admission_orphan_timeout) == (120.0, 30.0)


@pytest.mark.parametrize("path, value", [("webhook.podGroupBudget", -1), ("webhook.podGroupBudgetWindow", "1"),
                                         ("grouper.admissionOrphanTimeout", "soon")])
def test_the_schema_refuses_a_bad_budget(path, value):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(with_values(path, value))
