"""The chart's Grafana dashboard (charts/podgang/dashboards/podgang.json) and alerts
(templates/prometheusrule.yaml) query only series the processes really export, with
labels those series have. The exported names come from the processes' own metric
registries (tests/metrics_support.py), so a renamed metric or label fails here.

The files are checked directly (JSON, and the template's text with Helm's actions
replaced by a placeholder), and rendered through Helm's own engine.
"""

from __future__ import annotations

import copy
import json
import re

import jsonschema
import pytest
import yaml

from tests.chart_support import render
from tests.metrics_support import all_exported_series
from tests.paths import ROOT

CHART = ROOT / "charts" / "podgang"
DASHBOARD = CHART / "dashboards" / "podgang.json"
DASHBOARD_TEMPLATE = CHART / "templates" / "dashboards.yaml"
RULES_TEMPLATE = CHART / "templates" / "prometheusrule.yaml"
VALUES = yaml.safe_load((CHART / "values.yaml").read_text())
SCHEMA = json.loads((CHART / "values.schema.json").read_text())

PROMETHEUS_OWN = {"up": frozenset()}  # per-target series Prometheus itself records
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "container", "service", "endpoint"})
PROMQL_WORDS = frozenset({
    "sum", "min", "max", "avg", "count", "rate", "irate", "increase", "histogram_quantile", "absent", "time",
    "vector", "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
    "offset", "clamp_min", "clamp_max", "label_values", "changes",
})


# -- a small PromQL reader: metric names, their label matchers, grouping labels -------

def _without_ranges_and_actions(expr: str) -> str:
    expr = re.sub(r"\{\{.*?\}\}", "X", expr)  # Helm actions inside the rules' label values
    return re.sub(r"\[[^\]]*\]", "", expr)  # range selectors: [5m], [$__rate_interval]


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched) for every selector with a ``{…}`` block."""
    found = []
    for name, block in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", _without_ranges_and_actions(expr)):
        found.append((name, set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"', block))))
    return found


def grouping_labels(expr: str) -> set[str]:
    clauses = re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr)
    return {label.strip() for clause in clauses for label in clause.split(",") if label.strip()}


def metric_names(expr: str) -> set[str]:
    text = _without_ranges_and_actions(expr)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r'"[^"]*"', " ", text)
    return {t for t in re.findall(r"(?<![0-9.])\b[a-zA-Z_:][a-zA-Z0-9_:]*", text) if t not in PROMQL_WORDS}


def test_the_promql_reader_finds_names_matchers_and_grouping():
    expr = ('histogram_quantile(0.99, sum by (le, kind) (rate(podgang_a_bucket{namespace=~"$namespace", '
            'result="error", job="{{ $grouper }}"}[$__rate_interval]))) > 1 and on (job) up - time() < 7 * 86400')
    assert metric_names(expr) == {"podgang_a_bucket", "up"}
    assert selectors(expr) == [("podgang_a_bucket", {"namespace", "result", "job"})]
    assert grouping_labels(expr) == {"le", "kind", "job"}


def problems(expr: str, exported: dict[str, frozenset[str]]) -> list[str]:
    """What is wrong with ``expr``: unknown series, or labels the series do not have."""
    known = {**exported, **PROMETHEUS_OWN}
    names = metric_names(expr)
    if not names:
        return [f"no metric in {expr!r}"]
    found = [f"{name}: not exported" for name in sorted(names - set(known))]
    for name, labels in selectors(expr):
        for label in sorted(labels - known.get(name, frozenset()) - TARGET_LABELS):
            found.append(f"{name}: no label {label}")
    available = TARGET_LABELS.union(*(known.get(name, frozenset()) for name in names))
    for label in sorted(grouping_labels(expr) - available):
        found.append(f"grouping by {label}, which none of {sorted(names)} has")
    return found


def test_the_check_catches_a_wrong_name_and_a_wrong_label():
    exported = all_exported_series()
    assert problems('sum by (call) (rate(podgang_grouper_api_errors_total{code="409"}[5m]))', exported) == []
    assert problems("rate(podgang_grouper_api_error_total[5m])", exported) == [
        "podgang_grouper_api_error_total: not exported"]
    assert problems('sum by (action) (podgang_grouper_api_errors_total{verdict="x"})', exported) == [
        "podgang_grouper_api_errors_total: no label verdict", "grouping by action, which none of "
        "['podgang_grouper_api_errors_total'] has"]


# -- the dashboard ------------------------------------------------------------------

def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def dashboard_queries(board: dict) -> list[str]:
    queries = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
            queries.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", query))
    return queries


def test_every_dashboard_query_names_exported_series_and_labels():
    exported = all_exported_series()
    queries = dashboard_queries(dashboard())
    assert len(queries) > 20
    found = [f"{expr}: {problem}" for expr in queries for problem in problems(expr, exported)]
    assert not found, "\n".join(found)


def test_the_dashboard_shows_what_an_operator_asks_about():
    queried = set().union(*(metric_names(q) for q in dashboard_queries(dashboard())))
    wanted = {
        "admission rate and verdicts": "podgang_webhook_admission_requests_total",
        "admission latency": "podgang_webhook_admission_duration_seconds_bucket",
        "PodGroups created": "podgang_grouper_podgroups_created_total",
        "minMember changes": "podgang_grouper_min_member_changes_total",
        "stale gangs": "podgang_grouper_stale_gangs_current",
        "evicted gangs": "podgang_grouper_evictions_total",
        "reconcile latency": "podgang_grouper_reconcile_duration_seconds_bucket",
        "watch restarts": "podgang_grouper_watch_restarts_total",
        "webhook API errors": "podgang_webhook_api_errors_total",
        "grouper API errors": "podgang_grouper_api_errors_total",
        "memory": "process_resident_memory_bytes",
    }
    missing = {what: name for what, name in wanted.items() if name not in queried}
    assert not missing


def test_the_dashboard_is_well_formed_for_grafana():
    board = dashboard()
    assert board["uid"] == "podgang" and board["title"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "namespace"} <= variables
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["description"], panel["title"]
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert 'namespace=~"$namespace"' in target["expr"], (panel["title"], target["expr"])
    # panels do not overlap
    cells = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_the_dashboard_configmap_ships_the_json_for_the_sidecar():
    text = DASHBOARD_TEMPLATE.read_text()
    assert text.startswith("{{- if .Values.dashboards.enabled }}") and text.rstrip().endswith("{{- end }}")
    (path,) = re.findall(r'\.Files\.Get "([^"]+)"', text)
    assert (CHART / path).resolve() == DASHBOARD.resolve()
    assert "{{ .Values.dashboards.label }}: {{ .Values.dashboards.labelValue | quote }}" in text
    assert (VALUES["dashboards"]["label"], VALUES["dashboards"]["labelValue"]) == ("grafana_dashboard", "1")
    assert VALUES["dashboards"]["enabled"] is False


# -- the alerts -----------------------------------------------------------------------

def rules_from_template_text() -> dict:
    """The PrometheusRule template as YAML: comments and action-only lines dropped,
    inline actions replaced by X."""
    text = re.sub(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", "", RULES_TEMPLATE.read_text(), flags=re.S)
    lines = [line for line in text.splitlines() if not re.fullmatch(r"\s*\{\{.*\}\}\s*", line)]
    return yaml.safe_load(re.sub(r"\{\{.*?\}\}", "X", "\n".join(lines)))


def alerts() -> list[dict]:
    return [rule for group in rules_from_template_text()["spec"]["groups"] for rule in group["rules"]]


def test_every_alert_names_exported_series_and_labels():
    exported = all_exported_series()
    found = [f"{rule['alert']}: {problem}" for rule in alerts() for problem in problems(rule["expr"], exported)]
    assert not found, "\n".join(found)


def test_every_alert_is_scoped_to_this_release_and_documented():
    for rule in alerts():
        assert re.fullmatch(r"Podgang[A-Za-z]+", rule["alert"])
        for name, labels in selectors(rule["expr"]):
            assert {"job", "namespace"} <= labels, f"{rule['alert']}: {name} is not scoped to this release"
        assert rule["labels"]["severity"] in ("warning", "critical", "XcriticalXwarningX")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]
        assert "{{" not in json.dumps(rule["annotations"]).replace("X", "")


def test_the_alerts_cover_what_the_issue_asks_for():
    by_name = {rule["alert"]: rule["expr"] for rule in alerts()}
    wanted = {
        "PodgangWebhookDown": "up",
        "PodgangWebhookSlow": "podgang_webhook_admission_duration_seconds_bucket",
        "PodgangGangsEvicted": "podgang_grouper_evictions_total",
        "PodgangGangsStale": "podgang_grouper_stale_gangs_current",
        "PodgangReconcileErrors": "podgang_grouper_reconcile_duration_seconds_count",
        "PodgangGrouperLeaderLost": "podgang_grouper_leader",
        "PodgangGangsNeverPlaced": "podgang_grouper_never_placed_gangs",
    }
    for alert, metric in wanted.items():
        assert metric in metric_names(by_name[alert]), alert


def test_the_rules_render_with_the_release_services_as_jobs():
    """Through Helm's own engine: the job selectors are the Service names the
    chart's ServiceMonitors scrape, and the webhook-down severity follows failurePolicy."""
    values = {"prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}}}
    for policy, severity in (("Ignore", "warning"), ("Fail", "critical")):
        docs = render({**values, "webhook": {"failurePolicy": policy}}, release="podgang", namespace="gang-system")
        (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
        assert rule["metadata"]["labels"]["release"] == "prometheus"
        assert rule["metadata"]["namespace"] == "gang-system"
        services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
        rendered = [r for g in rule["spec"]["groups"] for r in g["rules"]]
        jobs = {job for r in rendered for job in re.findall(r'job="([^"]+)"', r["expr"])}
        assert jobs == {"podgang-webhook", "podgang-grouper-metrics"} and jobs <= services
        assert all('namespace="gang-system"' in r["expr"] for r in rendered)
        (down,) = [r for r in rendered if r["alert"] == "PodgangWebhookDown"]
        assert down["labels"]["severity"] == severity
    assert not [d for d in render({}) if d["kind"] in ("PrometheusRule", "ConfigMap")]


# -- values -----------------------------------------------------------------------------

@pytest.mark.parametrize("path, value", [
    ("dashboards.enabled", "yes"),
    ("dashboards.label", "not a label key!"),
    ("dashboards.namespace", "Monitoring"),
    ("dashboards.colour", "blue"),
    ("prometheusRule.enabled", 1),
    ("prometheusRule.labels", {"release": 1}),
])
def test_the_schema_rejects_bad_dashboard_and_rule_values(path, value):
    values = copy.deepcopy(VALUES)
    node = values
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(values, SCHEMA)


def test_the_schema_accepts_both_turned_on():
    values = copy.deepcopy(VALUES)
    values["dashboards"].update(enabled=True, namespace="monitoring", annotations={"grafana_folder": "podgang"})
    values["prometheusRule"].update(enabled=True, labels={"release": "kube-prometheus-stack"})
    jsonschema.validate(values, SCHEMA)
    assert VALUES["prometheusRule"]["enabled"] is False


def test_the_dashboard_configmap_carries_the_json_file_as_it_is():
    """Through Helm's own engine (``.Files.Get``): the ConfigMap Grafana's sidecar loads."""
    docs = render({"dashboards": {"enabled": True}})
    (configmap,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (text,) = configmap["data"].values()
    assert json.loads(text) == json.loads(DASHBOARD.read_text())
