"""The Helm chart charts/podgang, rendered, linted and schema-checked by Helm's own engine.

helm-python-sdk carries Helm v4's engine as a library (no helm binary), so the manifests
here are the ones `helm template` prints. Every rendered built-in
object is validated against the Kubernetes OpenAPI schema of the newest version
kubernetes_validate knows; cert-manager and Prometheus Operator objects are checked by hand.
"""

from __future__ import annotations

import copy
import re

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from podgang.backends import BACKENDS, KAI
from podgang.cli import command_parser
from podgang.kinds import FOLLOWED, OWNER_KINDS, POD, WORKLOADS
from podgang.settings import DEFAULT
from tests.emulator.rbac import allows, rules_for
from tests.chart_support import (
    CHART,
    CRD_KINDS,
    DEFAULT_VALUES,
    HELM_CHART,
    K8S_VERSION,
    NAMESPACE,
    NOTES,
    RELEASE,
    ManifestLoader,
    lint,
    render,
    render_files,
)
from tests.paths import ROOT

VARIANTS = {
    "defaults": {},
    "cert-manager": {"certManager": {"enabled": True}},
    "cert-manager-own-issuer": {"certManager": {"enabled": True, "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
    "crds": {"crds": {"install": True}},
    "crds-not-kept": {"crds": {"install": True, "keep": False}},
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}}},
    "schedulers": {"schedulerNames": ["kai-scheduler", "gang-scheduler", "team-a.example.com"]},
    "fail-closed": {"webhook": {"failurePolicy": "Fail", "timeoutSeconds": 10}},
    "watch-namespaces": {"grouper": {"watchNamespaces": ["team-a", "team-b"]}},
    "no-leader-election": {"grouper": {"replicas": 1, "leaderElection": {"enabled": False}}},
    "read-owners": {"grouper": {"readOwners": [{"group": "argoproj.io", "resources": ["workflows"]},
                                               {"group": "tekton.dev", "resources": ["taskruns", "pipelineruns"]}]}},
    "operator-role": {"operatorRole": {"enabled": True, "subjects": [{"kind": "Group", "name": "sre",
                                                                      "apiGroup": "rbac.authorization.k8s.io"}]}},
    "taught-kinds": {"kinds": {"karta": False, "kartaKinds": [{"apiVersion": "serving.example.com/v1", "kind": "Graph"}],
                               "declared": [{"apiVersion": "e2e.example.com/v1", "kind": "CustomJob", "components": [
                                   {"name": "worker", "replicas": "spec.worker.replicas", "roleLabel": "role"}]}]}},
    "everything": {
        "certManager": {"enabled": True},
        "crds": {"install": True},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "schedulerNames": ["kai-scheduler", "other"],
        "excludedNamespaces": ["kube-system", "gang-system", "monitoring"],
        "imagePullSecrets": [{"name": "regcred"}],
        "image": {"digest": "sha256:" + "a" * 64},
        "webhook": {
            "failurePolicy": "Fail",
            "priorityClassName": "infra-critical",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}],
            "podAnnotations": {"example.com/team": "infra"},
            "podLabels": {"team": "infra"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "infra", "operator": "Exists"}]}]}}},
        },
        "grouper": {"watchNamespaces": ["team-a"], "stalenessGracePeriod": "90s", "orphanTimeout": "5m",
                    "kubeApi": {"qps": 0, "burst": 1}},
        "flowControl": {"enabled": True, "queues": 1, "handSize": 1, "lendablePercent": 0},
        "logFormat": "text",
    },
}


def find(docs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def deployment(docs: list[dict], component: str) -> dict:
    return one(docs, "Deployment", f"{RELEASE}-{component}")


def container(docs: list[dict], component: str) -> dict:
    containers = deployment(docs, component)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def args_of(docs: list[dict], component: str) -> list[str]:
    return container(docs, component)["args"]


def flag_values(args: list[str], flag: str) -> list[str]:
    """Values of ``--flag=value`` (or ``--flag value``) occurrences."""
    out = []
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            out.append(arg.split("=", 1)[1])
        elif arg == flag and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append(args[i + 1])
    return out


def webhook_configs(docs: list[dict]) -> list[dict]:
    return find(docs, "MutatingWebhookConfiguration") + find(docs, "ValidatingWebhookConfiguration")


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def variant(request) -> tuple[str, dict, list[dict]]:
    values = VARIANTS[request.param]
    return request.param, values, render(values)


@pytest.fixture(scope="module")
def defaults() -> list[dict]:
    return render()


# --------------------------------------------------------------------------- lint, values schema


def test_helm_lint_passes(variant):
    _name, values, _docs = variant
    report = lint(values)
    assert report["total_charts_linted"] == 1
    findings = [m for m in report["messages"] if m["severity"] >= 2]  # 2 warning, 3 error; 1 is info
    assert not findings and not report["errors"], findings or report["errors"]


def test_helm_lint_reports_bad_values():
    """Guards the lint test: a value outside the schema is a lint error."""
    report = lint({"webhook": {"timeoutSeconds": 0}})
    assert any(m["severity"] == 3 and "/webhook/timeoutSeconds" in m["error"] for m in report["messages"]), report


def test_values_yaml_is_valid_against_the_schema():
    """Helm checks values.schema.json against the draft-07 meta-schema, then the values."""
    assert HELM_CHART.values == DEFAULT_VALUES
    HELM_CHART.validate_schema(DEFAULT_VALUES)
    HELM_CHART.validate_schema({})


def test_every_value_is_documented_in_the_chart_readme():
    OPAQUE = ("resources", "podSecurityContext", "containerSecurityContext",  # Kubernetes objects
              "backends", "nativeNamespaceSelector")  # maps of names the user picks
    readme = (CHART / "README.md").read_text()

    def keys(node, prefix=""):
        for key, value in node.items():
            path = f"{prefix}{key}"
            if isinstance(value, dict) and value and key not in OPAQUE:
                yield from keys(value, path + ".")
            else:
                yield path

    missing = [k for k in keys(DEFAULT_VALUES) if f"`{k}`" not in readme]
    assert not missing, f"values not documented in charts/podgang/README.md: {missing}"


def _with(path: str, value):
    values = copy.deepcopy(DEFAULT_VALUES)
    node = values
    *parents, last = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return values


BAD_VALUES = [
    ("webhook.timeoutSeconds", 0),
    ("webhook.timeoutSeconds", 31),
    ("webhook.timeoutSeconds", 2.5),
    ("webhook.timeoutSeconds", "5"),
    ("webhook.failurePolicy", "ignore"),
    ("webhook.failurePolicy", "Retry"),
    ("webhook.replicas", 0),
    ("webhook.replicas", "2"),
    ("grouper.replicas", 0),
    ("grouper.readOwners", [{"group": "argoproj.io"}]),
    ("grouper.readOwners", [{"group": "argoproj.io", "resources": ["Workflows"]}]),
    ("grouper.readOwners", [{"group": "argoproj.io", "resources": []}]),
    ("grouper.readOwners", [{"group": "argoproj.io", "resources": ["workflows"], "verbs": ["delete"]}]),
    ("logFormat", "xml"),
    ("image.pullPolicy", "Sometimes"),
    ("image.repository", 42),
    ("image.digest", "latest"),
    ("backends", {"volcano": "volcanoo"}),
    ("nativeNamespaceSelector", {"podgang.io/native": 1}),
    ("schedulerNames", "kai-scheduler"),
    ("schedulerNames", ["kai-scheduler", "x']||true||['"]),
    ("excludedNamespaces", ["Not_A_Namespace"]),
    ("grouper.stalenessGracePeriod", "sixty seconds"),
    ("grouper.stalenessGracePeriod", 60),
    ("grouper.orphanTimeout", "2 minutes"),
    ("certManager.enabled", "yes"),
    ("certManager.issuerRef", {"kind": "ClusterIssuer"}),
    ("crds.install", "true"),
    ("metrics.serviceMonitor.enabled", 1),
    ("webhook.tolerations", [{"key": "k", "operator": "Maybe"}]),
    ("webhook.nodeSelector", {"a": 1}),
    ("webhook.resources", {"requets": {"cpu": "1"}}),
    ("imagePullSecrets", ["regcred"]),
    ("unknownTopLevel", True),
    ("webhook.unknown", True),
    ("grouper.leaderElection.unknown", True),
    ("metrics.serviceMonitor.unknown", True),
    ("certManager.unknown", True),
    ("image.unknown", True),
    ("operatorRole.enabled", "true"),
    ("operatorRole.subjects", [{"kind": "ServiceAccount", "name": "ops"}]),  # a ServiceAccount needs its namespace
    ("operatorRole.subjects", [{"kind": "Robot", "name": "ops"}]),
    ("grouper.kubeApi.qps", -1),
    ("grouper.kubeApi.qps", "fast"),
    ("grouper.kubeApi.burst", 0),
    ("grouper.kubeApi.burst", 2.5),
    ("flowControl.nominalConcurrencyShares", 0),
    ("flowControl.lendablePercent", 101),
    ("flowControl.matchingPrecedence", 1),  # the exempt schema's
    ("flowControl.matchingPrecedence", 10001),
    ("flowControl.unknown", True),
]


@pytest.mark.parametrize("path,value", BAD_VALUES, ids=[f"{p}={v!r}" for p, v in BAD_VALUES])
def test_schema_rejects_bad_values(path, value):
    with pytest.raises(helm.HelmValuesError) as rejected:
        HELM_CHART.validate_schema(_with(path, value))
    message = str(rejected.value)  # names the value: at '/webhook/timeoutSeconds', or the unknown key
    assert "/" + path.replace(".", "/") in message or f"'{path.rsplit('.', 1)[-1]}' not allowed" in message, message


def test_schema_rejects_extra_labels_the_chart_sets_itself():
    """A second copy of one of the chart's own labels would be a duplicate key: Helm
    renders it without a word, the parser decides which value wins, and an overridden
    selector label no longer matches. The schema refuses them by name."""
    docs = render(VARIANTS["service-monitor"])
    own_labels = {
        "webhook.podLabels": deployment(docs, "webhook")["spec"]["template"]["metadata"]["labels"],
        "grouper.podLabels": deployment(docs, "grouper")["spec"]["template"]["metadata"]["labels"],
        "metrics.serviceMonitor.labels": one(docs, "ServiceMonitor", f"{RELEASE}-webhook")["metadata"]["labels"],
    }
    for path, labels in own_labels.items():
        chart_keys = [key for key in labels if key != "release"]  # "release" is the variant's own extra label
        assert "app.kubernetes.io/instance" in chart_keys
        for key in chart_keys:
            with pytest.raises(helm.HelmValuesError, match=f"invalid propertyName '{re.escape(key)}'"):
                HELM_CHART.validate_schema(_with(path, {key: "x"}))
        HELM_CHART.validate_schema(_with(path, {"team": "infra", "example.com/owner": "a"}))


def test_schema_requires_leader_election_for_several_groupers():
    bad = _with("grouper.leaderElection", {"enabled": False})
    with pytest.raises(helm.HelmValuesError, match="/grouper"):
        HELM_CHART.validate_schema(bad)
    bad["grouper"]["replicas"] = 1
    HELM_CHART.validate_schema(bad)


def test_schema_refuses_one_webhook_replica_behind_a_budget_that_blocks_drains():
    """Issue 35: one replica with a PodDisruptionBudget of minAvailable 1 can never be evicted,
    so no node running it could be drained. The schema refuses it, and its message lists each
    way out; lint says the same."""
    ways_out = ("at '/webhook/replicas': minimum: got 1, want 2",
                "at '/webhook/podDisruptionBudget/enabled': value must be false",
                "at '/webhook/podDisruptionBudget/minAvailable': value must be 0")
    with pytest.raises(helm.HelmValuesError) as refused:
        HELM_CHART.validate_schema(_with("webhook.replicas", 1))
    assert all(way in str(refused.value) for way in ways_out), refused.value
    report = lint({"webhook": {"replicas": 1}})
    assert any(m["severity"] == 3 and all(way in m["error"] for way in ways_out) for m in report["messages"]), report
    for budget in ({"enabled": False, "minAvailable": 1}, {"enabled": True, "minAvailable": 0}):
        values = _with("webhook.podDisruptionBudget", budget)
        values["webhook"]["replicas"] = 1
        HELM_CHART.validate_schema(values)


@pytest.mark.parametrize("replicas, min_available", [(2, 2), (3, 5)])
def test_a_budget_that_blocks_every_drain_is_refused_with_a_clear_message(replicas, min_available):
    """What the schema cannot compare (minAvailable ≥ replicas, for any count) the chart
    refuses when it renders (helm install, upgrade, template), saying why and what to do.
    (helm lint renders in lint mode, where a template's fail is only logged.)"""
    values = {"webhook": {"replicas": replicas, "podDisruptionBudget": {"enabled": True, "minAvailable": min_available}}}
    with pytest.raises(helm.HelmRenderError) as refused:
        render(values)
    assert (f"webhook.podDisruptionBudget.minAvailable {min_available} with webhook.replicas {replicas}: no webhook "
            f"pod could ever be evicted, so no node running one could be drained; keep minAvailable below replicas"
            in str(refused.value)), refused.value
    fine = {"webhook": {"replicas": replicas, "podDisruptionBudget": {"enabled": True, "minAvailable": replicas - 1}}}
    assert one(render(fine), "PodDisruptionBudget")["spec"]["minAvailable"] == replicas - 1


@pytest.mark.parametrize("timeout", [1, 30])
def test_schema_accepts_timeout_bounds(timeout):
    HELM_CHART.validate_schema(_with("webhook.timeoutSeconds", timeout))


def test_rendering_validates_the_values():
    with pytest.raises(helm.HelmValuesError, match="schema"):
        render({"webhook": {"timeoutSeconds": 0}})
    # null deletes a key in Helm; keys the templates rely on are required
    with pytest.raises(helm.HelmValuesError, match="leaderElection"):
        render({"grouper": {"leaderElection": None}})


# --------------------------------------------------------------------------- every variant


def test_kubernetes_validate_is_strict():
    """The schema validation below would catch a misspelt field (guards the test itself)."""
    docs = render()
    broken = copy.deepcopy(deployment(docs, "webhook"))
    broken["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_rendered_yaml_with_a_duplicate_key_is_refused():
    """The loader behind render() refuses a key given twice (guards the tests themselves)."""
    with pytest.raises(yaml.constructor.ConstructorError, match=r"duplicate keys \['team'\]"):
        yaml.load("labels:\n  team: a\n  app: b\n  team: c\n", Loader=ManifestLoader)
    assert yaml.load("a: {b: 1}\nc: {b: 2}\n", Loader=ManifestLoader) == {"a": {"b": 1}, "c": {"b": 2}}


def test_every_builtin_object_passes_the_kubernetes_schema(variant):
    name, _, docs = variant
    assert docs
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_objects_are_namespaced_in_the_release_namespace_and_uniquely_named(variant):
    name, values, docs = variant
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                      "ValidatingWebhookConfiguration", "CustomResourceDefinition", "FlowSchema",
                      "PriorityLevelConfiguration"}
    watched = set(values.get("grouper", {}).get("watchNamespaces", []))
    seen = set()
    for doc in docs:
        meta = doc["metadata"]
        key = (doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"])
        assert key not in seen, f"duplicate object {key}"
        seen.add(key)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", meta["name"]) and len(meta["name"]) <= 253
        if doc["kind"] in cluster_scoped:
            assert "namespace" not in meta
        elif doc["kind"] == "RoleBinding" and meta["namespace"] in watched:
            assert doc["roleRef"]["kind"] == "ClusterRole"
        else:
            assert meta["namespace"] == NAMESPACE, (doc["kind"], meta["name"])
        assert meta["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_no_wildcards_in_rbac(variant):
    _, _, docs = variant
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole"):
            continue
        for rule in doc["rules"]:
            for field in ("verbs", "resources", "apiGroups", "resourceNames"):
                assert "*" not in rule.get(field, []), (doc["metadata"]["name"], rule)
                assert not any("*" in item for item in rule.get(field, [])), (doc["metadata"]["name"], rule)
            assert "nonResourceURLs" not in rule


def test_caBundle_is_never_rendered(variant):
    """The webhook or cert-manager's injector owns caBundle; a rendered one would be
    reset by every `helm upgrade`."""
    _, _, docs = variant
    for config in webhook_configs(docs):
        for hook in config["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]


def test_restricted_pod_security(variant):
    _, _, docs = variant
    for component in ("webhook", "grouper"):
        pod = deployment(docs, component)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is True
        assert "hostNetwork" not in pod and "hostPID" not in pod
        sc = container(docs, component)["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["runAsNonRoot"] is True
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
        mounts = {m["mountPath"]: m["name"] for m in container(docs, component)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]]


def test_notes_render(variant):
    name, values, _ = variant
    notes = render_files(values)[NOTES]
    assert f"{RELEASE}-webhook" in notes and "{{" not in notes


# --------------------------------------------------------------------------- defaults


def test_default_object_set(defaults):
    kinds = sorted(d["kind"] for d in defaults)
    assert kinds == sorted([
        "ServiceAccount", "ServiceAccount",
        "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",  # webhook
        "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",  # grouper
        "ClusterRole", "ClusterRoleBinding",  # grouper: namespaces, cluster-scoped
        "ClusterRole", "ClusterRoleBinding",  # both: PriorityClasses, KAI queues and nodes they check against
        "Deployment", "Service", "PodDisruptionBudget",  # webhook
        "Deployment", "Service",  # grouper
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
        "FlowSchema", "PriorityLevelConfiguration",  # the grouper's own priority level
        "ResourceQuota",  # for the pods of their PriorityClass
        "NetworkPolicy", "NetworkPolicy",  # who may reach each (docs/operate/security.md)
    ])
    assert not find(defaults, "CustomResourceDefinition")
    assert not find(defaults, "Certificate") and not find(defaults, "Issuer")
    assert not find(defaults, "ServiceMonitor")
    assert not find(defaults, "Secret"), "the webhook creates its Secret at runtime"


FACTS = (("scheduling.k8s.io", "priorityclasses"), ("", "nodes"))  # every backend's never-placed verdicts


def test_both_processes_may_read_what_settings_and_verdicts_are_checked_against(defaults):
    """Cluster-scoped, so bound cluster-wide even when the grouper watches some namespaces only:
    the PriorityClasses and nodes for every backend, KAI's queues with KAI; read, never written."""
    for values in ({}, {"grouper": {"watchNamespaces": ["team-a"]}}):
        docs = render(values)
        for component in ("webhook", "grouper"):
            rules = rules_for(docs, f"{RELEASE}-{component}", NAMESPACE)
            for group, resource in (*FACTS, ("scheduling.run.ai", "queues")):
                assert all(allows(rules, group, resource, verb, namespace=None) for verb in ("get", "list", "watch")), \
                    (values, component, resource)
            assert not any(allows(rules, "", "nodes", verb, namespace=None) for verb in ("patch", "update", "delete"))
    volcano = render({"backends": {"kai-scheduler": None, "volcano": "volcano"}})
    rules = rules_for(volcano, f"{RELEASE}-grouper", NAMESPACE)
    assert all(allows(rules, group, resource, "watch", namespace=None) for group, resource in FACTS)
    assert not allows(rules, "scheduling.run.ai", "queues", "list", namespace=None)
    assert allows(rules, "scheduling.volcano.sh", "queues", "watch", namespace=None)  # their capability
    assert not allows(rules_for(render({}), f"{RELEASE}-grouper", NAMESPACE), "scheduling.volcano.sh", "queues",
                      "list", namespace=None)


def test_the_grouper_may_read_namespaces_cluster_wide(variant):
    """Which namespaces are being deleted, and which opted in to native gangs: cluster-scoped,
    so bound cluster-wide also when its other rights are bound per namespace."""
    name, values, docs = variant
    rules = rules_for(docs, f"{RELEASE}-grouper", NAMESPACE)
    assert all(allows(rules, "", "namespaces", verb, namespace=None) for verb in ("list", "watch")), name
    assert not any(allows(rules, "", "namespaces", verb, namespace=None) for verb in ("get", "patch", "delete"))


def test_webhook_deployment(defaults):
    dep = deployment(defaults, "webhook")
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = dep["spec"]["template"]["spec"]
    selector = dep["spec"]["selector"]["matchLabels"]
    assert selector.items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == f"{RELEASE}-webhook"
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert anti["topologyKey"] == "kubernetes.io/hostname" and anti["labelSelector"]["matchLabels"] == selector
    spread = pod["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "kubernetes.io/hostname" and spread["labelSelector"]["matchLabels"] == selector
    c = container(defaults, "webhook")
    assert c["image"] == "podgang:0.1.0"
    assert c["ports"] == [{"name": "https", "containerPort": 9443, "protocol": "TCP"},
                          {"name": "health", "containerPort": 8081, "protocol": "TCP"}]
    # the probes on the health port, never behind admission traffic for a slot (issue 35)
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/healthz")):
        assert c[probe]["httpGet"] == {"path": path, "port": "health"}
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    certs = next(m for m in c["volumeMounts"] if m["mountPath"] == "/certs")
    assert "emptyDir" in volumes[certs["name"]] and not certs.get("readOnly")


def test_webhook_args(defaults):
    args = args_of(defaults, "webhook")
    assert args[0] == "webhook"
    assert flag_values(args, "--port") == ["9443"]
    assert flag_values(args, "--health-port") == ["8081"]
    assert flag_values(args, "--body-budget") == ["32Mi"]
    assert flag_values(args, "--cert-dir") == ["/certs"]
    assert flag_values(args, "--backend") == ["kai-scheduler=kai"]
    assert flag_values(args, "--exclude-namespace") == ["kube-system", NAMESPACE]
    assert flag_values(args, "--log-format") == ["json"]
    assert flag_values(args, "--api-timeout") == ["2s"]
    assert "--manage-certs" in args
    assert flag_values(args, "--namespace") == [NAMESPACE]
    assert flag_values(args, "--secret") == [f"{RELEASE}-webhook-tls"]
    assert flag_values(args, "--service") == [f"{RELEASE}-webhook"]
    names = {c["kind"]: c["metadata"]["name"] for c in webhook_configs(defaults)}
    assert flag_values(args, "--mutating-webhook-config") == [names["MutatingWebhookConfiguration"]]
    assert flag_values(args, "--validating-webhook-config") == [names["ValidatingWebhookConfiguration"]]
    assert not flag_values(args, "--webhook-config")  # looked up as both kinds: forbidden by the chart's RBAC


def test_webhook_service_and_pdb(defaults):
    svc = one(defaults, "Service", f"{RELEASE}-webhook")
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"},
                                    {"name": "http-metrics", "port": 8081, "targetPort": "health", "protocol": "TCP"}]
    dep = deployment(defaults, "webhook")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    pdb = one(defaults, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]


def test_both_deployments_run_at_system_cluster_critical_within_a_quota_that_admits_them(defaults):
    """Issue 35: an admission webhook and the grouper gangs wait on must not be preempted by
    the workloads they serve (Gatekeeper runs its webhook and audit at system-cluster-critical,
    a class every cluster has). Where the apiserver admits that class outside kube-system only
    under a quota naming it (GKE), the chart's own quota is that one."""
    for component in ("webhook", "grouper"):
        assert deployment(defaults, component)["spec"]["template"]["spec"]["priorityClassName"] == \
            "system-cluster-critical"
    quota = one(defaults, "ResourceQuota")
    assert quota["metadata"]["name"] == f"{RELEASE}-priority-classes"
    assert quota["spec"] == {"hard": {"pods": "8"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}]}}
    none = render({"webhook": {"priorityClassName": ""}, "grouper": {"priorityClassName": ""}})
    assert "priorityClassName" not in deployment(none, "webhook")["spec"]["template"]["spec"]
    assert not find(none, "ResourceQuota")
    assert not find(render({"priorityClassQuota": {"enabled": False}}), "ResourceQuota")


def test_grouper_deployment(defaults):
    dep = deployment(defaults, "grouper")
    assert dep["spec"]["replicas"] == 2
    c = container(defaults, "grouper")
    args = c["args"]
    assert args[0] == "grouper"
    assert "--leader-elect" in args
    assert flag_values(args, "--leader-election-name") == [f"{RELEASE}-grouper"]
    assert flag_values(args, "--leader-election-namespace") == [NAMESPACE]
    assert flag_values(args, "--backend") == ["kai-scheduler=kai"]
    assert not flag_values(args, "--namespace-selector")  # no native backend: every namespace
    assert flag_values(args, "--exclude-namespace") == ["kube-system", NAMESPACE]
    assert flag_values(args, "--staleness-grace-period") == ["60s"]
    assert flag_values(args, "--orphan-timeout") == ["2m"]
    assert flag_values(args, "--metrics-port") == ["8080"]
    assert flag_values(args, "--log-format") == ["json"]
    assert flag_values(args, "--watch-namespace") == [], "default: watch all namespaces"
    assert flag_values(args, "--kube-api-qps") == ["500"] and flag_values(args, "--kube-api-burst") == ["1000"]
    assert c["ports"] == [{"name": "http-metrics", "containerPort": 8080, "protocol": "TCP"}]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert c[probe]["httpGet"] == {"path": path, "port": "http-metrics"}
    svc = one(defaults, "Service", f"{RELEASE}-grouper-metrics")
    assert svc["spec"]["ports"][0]["port"] == 8080 and svc["spec"]["ports"][0]["targetPort"] == "http-metrics"
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert deployment(defaults, "webhook")["spec"]["selector"] != dep["spec"]["selector"], "selectors must not overlap"


def test_the_grouper_has_a_priority_level_of_its_own(defaults):
    """API Priority and Fairness: the grouper's requests — and only its — go to its own
    limited level, matched before the built-in service-accounts schema and after the
    system ones, flows told apart by namespace."""
    level = one(defaults, "PriorityLevelConfiguration")
    schema = one(defaults, "FlowSchema")
    assert level["apiVersion"] == schema["apiVersion"] == "flowcontrol.apiserver.k8s.io/v1"
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == level["metadata"]["name"]
    assert level["metadata"]["name"] not in ("workload-low", "global-default", "catch-all", "exempt")
    assert level["spec"]["type"] == "Limited"
    limited = level["spec"]["limited"]
    assert limited["nominalConcurrencyShares"] == 10 and limited["limitResponse"]["type"] == "Queue"
    assert 100 < schema["spec"]["matchingPrecedence"] < 9000
    assert schema["spec"]["distinguisherMethod"] == {"type": "ByNamespace"}
    (rule,) = schema["spec"]["rules"]
    grouper_account = deployment(defaults, "grouper")["spec"]["template"]["spec"]["serviceAccountName"]
    assert rule["subjects"] == [{"kind": "ServiceAccount",
                                 "serviceAccount": {"name": grouper_account, "namespace": NAMESPACE}}]
    assert rule["resourceRules"][0]["clusterScope"] is True and rule["resourceRules"][0]["namespaces"] == ["*"]


def test_flow_control_and_the_client_limit_come_from_values():
    docs = render({"flowControl": {"enabled": True, "nominalConcurrencyShares": 40, "queues": 1, "handSize": 1,
                                   "matchingPrecedence": 500},
                   "grouper": {"kubeApi": {"qps": 12.5, "burst": 30}}})
    level = one(docs, "PriorityLevelConfiguration")["spec"]["limited"]
    assert level["nominalConcurrencyShares"] == 40
    assert level["limitResponse"]["queuing"]["queues"] == 1
    assert one(docs, "FlowSchema")["spec"]["matchingPrecedence"] == 500
    args = args_of(docs, "grouper")
    assert flag_values(args, "--kube-api-qps") == ["12.5"] and flag_values(args, "--kube-api-burst") == ["30"]
    off = render({"flowControl": {"enabled": False}})
    assert not find(off, "FlowSchema") and not find(off, "PriorityLevelConfiguration")


def test_separate_service_accounts_without_automount(defaults):
    sas = {sa["metadata"]["name"]: sa for sa in find(defaults, "ServiceAccount")}
    assert set(sas) == {f"{RELEASE}-webhook", f"{RELEASE}-grouper"}
    assert all(sa["automountServiceAccountToken"] is False for sa in sas.values())
    assert deployment(defaults, "grouper")["spec"]["template"]["spec"]["serviceAccountName"] == f"{RELEASE}-grouper"


def _rules_for(docs, service_account):
    return rules_for(docs, service_account, NAMESPACE)


_allowed = allows


def test_webhook_rbac_is_least_privilege(defaults):
    rules = _rules_for(defaults, f"{RELEASE}-webhook")
    for group, resource in [("", "pods"), ("apps", "replicasets"), ("apps", "deployments"), ("apps", "statefulsets"),
                            ("batch", "jobs"), ("batch", "cronjobs"), ("leaderworkerset.x-k8s.io", "leaderworkersets"),
                            ("jobset.x-k8s.io", "jobsets"), ("scheduling.run.ai", "podgroups")]:
        assert _allowed(rules, group, resource, "get", namespace="team-a")
        assert not _allowed(rules, group, resource, "list", namespace="team-a")
        assert not _allowed(rules, group, resource, "watch", namespace="team-a")
    assert _allowed(rules, "scheduling.run.ai", "podgroups", "create", namespace="team-a")
    assert not _allowed(rules, "scheduling.run.ai", "podgroups", "delete", namespace="team-a")
    for group in ("", "events.k8s.io"):
        assert _allowed(rules, group, "events", "create", namespace="team-a")
    assert not _allowed(rules, "", "pods", "patch", namespace="team-a")
    # The certificate Secret: by name, and only in the release namespace.
    secret = f"{RELEASE}-webhook-tls"
    for verb in ("get", "update"):
        assert _allowed(rules, "", "secrets", verb, name=secret, namespace=NAMESPACE)
        assert not _allowed(rules, "", "secrets", verb, name="other", namespace=NAMESPACE)
        assert not _allowed(rules, "", "secrets", verb, name=secret, namespace="team-a")
    assert _allowed(rules, "", "secrets", "create", namespace=NAMESPACE)
    assert not _allowed(rules, "", "secrets", "create", namespace="team-a")
    assert not _allowed(rules, "", "secrets", "list", namespace=NAMESPACE)
    # caBundle patches: its own two configurations only.
    names = {c["kind"]: c["metadata"]["name"] for c in webhook_configs(defaults)}
    for kind, resource in (("MutatingWebhookConfiguration", "mutatingwebhookconfigurations"),
                           ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations")):
        assert _allowed(rules, "admissionregistration.k8s.io", resource, "patch", name=names[kind])
        assert not _allowed(rules, "admissionregistration.k8s.io", resource, "patch", name="someone-elses")
        for scope, rule in rules:
            if resource in rule["resources"]:
                assert rule["resourceNames"] == [names[kind]]


def test_webhook_rbac_with_cert_manager_has_no_secret_or_webhook_config_access():
    docs = render({"certManager": {"enabled": True}})
    rules = _rules_for(docs, f"{RELEASE}-webhook")
    for verb in ("get", "create", "update"):
        assert not _allowed(rules, "", "secrets", verb, name=f"{RELEASE}-webhook-tls", namespace=NAMESPACE)
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for _, r in rules)


def test_grouper_rbac_is_least_privilege(defaults):
    rules = _rules_for(defaults, f"{RELEASE}-grouper")
    ns = "team-a"
    for group, resource in [("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"), ("batch", "jobs"),
                            ("batch", "cronjobs"), ("leaderworkerset.x-k8s.io", "leaderworkersets"),
                            ("jobset.x-k8s.io", "jobsets"), ("", "pods")]:
        for verb in ("get", "list", "watch"):
            assert _allowed(rules, group, resource, verb, namespace=ns), (resource, verb)
    assert _allowed(rules, "", "pods", "patch", namespace=ns)
    assert not _allowed(rules, "", "pods", "delete", namespace=ns)
    assert not _allowed(rules, "apps", "deployments", "patch", namespace=ns)
    assert _allowed(rules, "", "pods/eviction", "create", namespace=ns)
    for verb in ("get", "list", "watch", "create", "patch", "update", "delete"):
        assert _allowed(rules, "scheduling.run.ai", "podgroups", verb, namespace=ns)
    for group in ("", "events.k8s.io"):
        assert _allowed(rules, group, "events", "create", namespace=ns)
    assert not any("policy" in r["apiGroups"] for _, r in rules), "PodDisruptionBudgets are not needed"
    assert not any("secrets" in r["resources"] for _, r in rules)
    lease = f"{RELEASE}-grouper"
    for verb in ("get", "update"):
        assert _allowed(rules, "coordination.k8s.io", "leases", verb, name=lease, namespace=NAMESPACE)
        assert not _allowed(rules, "coordination.k8s.io", "leases", verb, name="kube-scheduler", namespace=NAMESPACE)
        assert not _allowed(rules, "coordination.k8s.io", "leases", verb, name=lease, namespace="kube-system")
    assert _allowed(rules, "coordination.k8s.io", "leases", "create", namespace=NAMESPACE)
    assert not _allowed(rules, "coordination.k8s.io", "leases", "create", namespace="kube-system")


def test_grouper_watch_namespaces_binds_rbac_per_namespace():
    docs = render(VARIANTS["watch-namespaces"])
    assert flag_values(args_of(docs, "grouper"), "--watch-namespace") == ["team-a", "team-b"]
    assert not find(docs, "ClusterRoleBinding", f"{RELEASE}-grouper")
    rules = _rules_for(docs, f"{RELEASE}-grouper")
    assert _allowed(rules, "", "pods", "watch", namespace="team-a")
    assert _allowed(rules, "", "pods", "watch", namespace="team-b")
    assert not _allowed(rules, "", "pods", "watch", namespace="team-c")


def test_grouper_read_owners_grants_get_list_watch_of_those_kinds_only():
    """grouper.readOwners: owner kinds podgang has no watch for, read for their metadata (issue 43)."""
    default_rules = _rules_for(render(), f"{RELEASE}-grouper")
    assert not _allowed(default_rules, "argoproj.io", "workflows", "get", namespace="team-a")
    rules = _rules_for(render(VARIANTS["read-owners"]), f"{RELEASE}-grouper")
    for group, resource in [("argoproj.io", "workflows"), ("tekton.dev", "taskruns"), ("tekton.dev", "pipelineruns")]:
        for verb in ("get", "list", "watch"):
            assert _allowed(rules, group, resource, verb, namespace="team-a"), (resource, verb)
        for verb in ("create", "patch", "update", "delete"):
            assert not _allowed(rules, group, resource, verb, namespace="team-a"), (resource, verb)
    assert not _allowed(rules, "argoproj.io", "cronworkflows", "get", namespace="team-a")
    scoped = _rules_for(render({"grouper": {**VARIANTS["read-owners"]["grouper"], "watchNamespaces": ["team-a"]}}),
                        f"{RELEASE}-grouper")
    assert _allowed(scoped, "argoproj.io", "workflows", "get", namespace="team-a")
    assert not _allowed(scoped, "argoproj.io", "workflows", "get", namespace="team-b")


def test_grouper_without_leader_election():
    docs = render(VARIANTS["no-leader-election"])
    args = args_of(docs, "grouper")
    assert "--leader-elect" not in args and not flag_values(args, "--leader-election-name")
    assert deployment(docs, "grouper")["spec"]["replicas"] == 1
    assert not _allowed(_rules_for(docs, f"{RELEASE}-grouper"), "coordination.k8s.io", "leases", "create", namespace=NAMESPACE)


def test_webhook_configurations(defaults):
    mutating = one(defaults, "MutatingWebhookConfiguration")
    validating = one(defaults, "ValidatingWebhookConfiguration")
    (mhook,) = mutating["webhooks"]
    (vhook,) = validating["webhooks"]
    assert mhook["clientConfig"]["service"] == {"name": f"{RELEASE}-webhook", "namespace": NAMESPACE, "path": "/mutate-pods", "port": 443}
    assert vhook["clientConfig"]["service"]["path"] == "/validate-pods"
    assert mhook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]
    assert vhook["rules"][0]["operations"] == ["CREATE", "UPDATE"] and vhook["rules"][0]["resources"] == ["pods"]
    assert mhook["reinvocationPolicy"] == "IfNeeded"
    for hook in (mhook, vhook):
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["failurePolicy"] == "Ignore"
        assert hook["timeoutSeconds"] == 5
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
        assert set(expr["values"]) == {"kube-system", NAMESPACE}
        assert hook["objectSelector"]["matchExpressions"] == [{"key": "podgang.io/skip", "operator": "NotIn", "values": ["true"]}]
        (cond,) = hook["matchConditions"]
        assert "object.spec.schedulerName" in cond["expression"] and "'kai-scheduler'" in cond["expression"]
    for config in (mutating, validating):
        assert "annotations" not in config["metadata"] or "cert-manager.io/inject-ca-from" not in config["metadata"]["annotations"]


def _cel_scheduler_list(expression: str) -> list[str]:
    """The list literal the expression checks schedulerName against (a small CEL parse)."""
    m = re.fullmatch(
        r"object != null && has\(object\.spec\.schedulerName\) && object\.spec\.schedulerName in \[(.*)\]",
        expression,
    )
    assert m, expression
    items = [item.strip() for item in m.group(1).split(",")]
    assert all(re.fullmatch(r"'[^'\\]*'", item) for item in items), items
    return [item[1:-1] for item in items]


def test_match_conditions_list_every_scheduler_name():
    names = sorted(VARIANTS["schedulers"]["schedulerNames"])  # each NAME is NAME: kai
    docs = render(VARIANTS["schedulers"])
    for config in webhook_configs(docs):
        (hook,) = config["webhooks"]
        (cond,) = hook["matchConditions"]
        assert _cel_scheduler_list(cond["expression"]) == names
    for component in ("webhook", "grouper"):
        assert flag_values(args_of(docs, component), "--backend") == [f"{n}=kai" for n in names]


# ---------------------------------------------------------------------------
# backends

#: where each backend's PodGroups live (the resource is ``podgroups`` in all of them)
BACKEND_GROUPS = {"kai": "scheduling.run.ai", "volcano": "scheduling.volcano.sh",
                  "coscheduling": "scheduling.x-k8s.io", "native": "scheduling.k8s.io"}
BACKEND_CRDS = {"kai": "podgroups.scheduling.run.ai", "volcano": "podgroups.scheduling.volcano.sh",
                "coscheduling": "podgroups.scheduling.x-k8s.io"}


def only(backend: str, scheduler: str = "gang-scheduler", **values) -> dict:
    """Values mapping one scheduler name to ``backend``, and nothing else."""
    return {"backends": {"kai-scheduler": None, scheduler: backend}, **values}


def test_the_registry_and_the_chart_agree_on_every_backend():
    """Each backend podgang knows has its API group in the chart (RBAC, CRDs)."""
    for name, backend in BACKENDS.items():
        assert BACKEND_GROUPS.get(name) == backend.podgroup.group, f"the chart does not know backend {name}"
        assert backend.podgroup.plural == "podgroups"


@pytest.mark.parametrize("backend", sorted(BACKEND_GROUPS))
def test_rbac_covers_only_the_enabled_backends_podgroups(backend):
    docs = render(only(backend))
    for component, verbs in (("grouper", ("list", "watch", "create", "patch", "delete")), ("webhook", ("get", "create"))):
        rules = _rules_for(docs, f"{RELEASE}-{component}")
        for other, group in BACKEND_GROUPS.items():
            for verb in verbs:
                assert _allowed(rules, group, "podgroups", verb, namespace="team-a") == (other == backend), (
                    f"{component} {verb} podgroups.{group} with only {backend} enabled")
    # mapped twice, granted once
    both = render({"backends": {"a": backend, "b": backend, "kai-scheduler": None}})
    (rule,) = [r for _, r in _rules_for(both, f"{RELEASE}-grouper") if "podgroups" in r["resources"]]
    assert rule["apiGroups"] == [BACKEND_GROUPS[backend]]


def test_native_rbac_covers_1_35_workloads_too():
    """Which native API a cluster serves is found at start-up (1.35: Workloads, 1.36+:
    PodGroups), so native grants both; no other backend grants Workloads."""
    for values, granted in ((only("native", "default-scheduler"), True), (only("volcano"), False)):
        docs = render(values)
        for component, verbs in (("grouper", ("list", "watch", "create", "patch", "delete")),
                                 ("webhook", ("get", "create"))):
            rules = _rules_for(docs, f"{RELEASE}-{component}")
            for verb in verbs:
                assert _allowed(rules, "scheduling.k8s.io", "workloads", verb, namespace="team-a") is granted
            assert not _allowed(rules, "scheduling.k8s.io", "workloads", "deletecollection", namespace="team-a")


@pytest.mark.parametrize("backend", sorted(BACKEND_GROUPS))
def test_the_crd_option_installs_each_enabled_backends_crd(backend):
    crds = {c["metadata"]["name"]: c for c in find(render(only(backend, crds={"install": True})),
                                                    "CustomResourceDefinition")}
    expected = {BACKEND_CRDS[backend]} if backend in BACKEND_CRDS else set()
    assert set(crds) == expected
    for crd in crds.values():
        assert crd["spec"]["group"] == BACKEND_GROUPS[backend]
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE
        kubernetes_validate.validate(crd, "1.33", strict=True)
    mixed = render({"backends": {"volcano": "volcano", "cos": "coscheduling"}, "crds": {"install": True, "keep": False}})
    assert {c["metadata"]["name"] for c in find(mixed, "CustomResourceDefinition")} == set(BACKEND_CRDS.values())
    assert all("helm.sh/resource-policy" not in (c["metadata"].get("annotations") or {})
               for c in find(mixed, "CustomResourceDefinition"))


def test_the_volcano_and_coscheduling_crds_are_the_ones_their_projects_publish():
    fixtures = ROOT.parent / "shared" / "fixtures" / "crds"
    for name in ("scheduling.volcano.sh_podgroups.yaml", "scheduling.x-k8s.io_podgroups.yaml"):
        shipped = CHART / "files" / "crds" / name
        if fixtures.exists():
            assert shipped.read_text() == (fixtures / name).read_text()
        assert yaml.safe_load(shipped.read_text())["kind"] == "CustomResourceDefinition"


def test_native_gets_its_own_webhook_entry_with_the_namespace_selector():
    docs = render({"backends": {"volcano": "volcano", "default-scheduler": "native"},
                   "nativeNamespaceSelector": {"example.com/gangs": "native"}})
    for config in webhook_configs(docs):
        shared, native = config["webhooks"]
        assert native["name"].endswith("-native.podgang.io") and not shared["name"].endswith("-native.podgang.io")
        assert _cel_scheduler_list(shared["matchConditions"][0]["expression"]) == ["kai-scheduler", "volcano"]
        assert _cel_scheduler_list(native["matchConditions"][0]["expression"]) == ["default-scheduler"]
        assert "matchLabels" not in shared["namespaceSelector"]
        assert native["namespaceSelector"]["matchLabels"] == {"example.com/gangs": "native"}
        assert native["namespaceSelector"]["matchExpressions"] == shared["namespaceSelector"]["matchExpressions"]
        assert {k: v for k, v in native.items() if k not in ("name", "namespaceSelector", "matchConditions")} == {
            k: v for k, v in shared.items() if k not in ("name", "namespaceSelector", "matchConditions")}
    args = args_of(docs, "grouper")
    assert flag_values(args, "--backend") == ["default-scheduler=native", "kai-scheduler=kai", "volcano=volcano"]
    assert flag_values(args, "--namespace-selector") == ["example.com/gangs=native"]
    assert flag_values(args, "--namespace-selector-backend") == ["native"]
    rules = _rules_for(docs, f"{RELEASE}-grouper")
    assert _allowed(rules, "", "namespaces", "watch") and not _allowed(rules, "", "namespaces", "patch")
    default_labels = webhook_configs(render({"backends": {"default-scheduler": "native"}}))[0]["webhooks"][1]
    assert default_labels["namespaceSelector"]["matchLabels"] == {"podgang.io/native": "enabled"}
    # the native example's namespace carries exactly what the chart selects by default
    example = ROOT / "examples" / "08-native-training.yaml"
    (namespace,) = [d for d in yaml.safe_load_all(example.read_text()) if d and d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"] == default_labels["namespaceSelector"]["matchLabels"]
    # only native: no entry for the others at all
    for config in webhook_configs(render(only("native", "default-scheduler"))):
        (hook,) = config["webhooks"]
        assert hook["name"].endswith("-native.podgang.io")


def test_backend_args_are_accepted_by_the_real_command_line(monkeypatch):
    """The chart's --backend and --namespace-selector flags parse in both commands, for
    every backend name the chart knows (stand-ins where the module is not there)."""
    for name in BACKEND_GROUPS:
        monkeypatch.setitem(BACKENDS, name, BACKENDS.get(name, KAI))
    docs = render({"backends": {n: n for n in BACKEND_GROUPS}})
    for component in ("webhook", "grouper"):
        parser, _run = command_parser(component)
        errors: list[str] = []
        parser.error = errors.append
        parsed = parser.parse_args(args_of(docs, component)[1:])
        assert errors == []
        assert sorted(parsed.backends) == sorted([("kai-scheduler", "kai"), *((n, n) for n in BACKEND_GROUPS)])


def test_failure_policy_and_timeout_come_from_values():
    docs = render(VARIANTS["fail-closed"])
    for config in webhook_configs(docs):
        hook = config["webhooks"][0]
        assert hook["failurePolicy"] == "Fail" and hook["timeoutSeconds"] == 10
        assert hook["matchConditions"], "Fail must still only ever apply to our schedulers' pods"


def test_excluded_namespaces_are_deduplicated_and_always_include_the_release_namespace():
    docs = render({"excludedNamespaces": ["kube-system", NAMESPACE, "monitoring"]})
    for config in webhook_configs(docs):
        assert config["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", NAMESPACE, "monitoring"]
    docs = render({"excludedNamespaces": []})
    for config in webhook_configs(docs):
        assert config["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == [NAMESPACE]
    assert flag_values(args_of(docs, "webhook"), "--exclude-namespace") == [NAMESPACE]


# --------------------------------------------------------------------------- cert-manager


@pytest.mark.parametrize("variant_name", ["cert-manager", "cert-manager-own-issuer"])
def test_cert_manager_mode(variant_name):
    docs = render(VARIANTS[variant_name])
    secret = f"{RELEASE}-webhook-tls"
    service = f"{RELEASE}-webhook"
    cert = one(docs, "Certificate", f"{RELEASE}-webhook")
    assert cert["apiVersion"] == "cert-manager.io/v1"
    assert cert["spec"]["secretName"] == secret
    assert set(cert["spec"]["dnsNames"]) >= {f"{service}.{NAMESPACE}.svc", f"{service}.{NAMESPACE}.svc.cluster.local"}
    assert "server auth" in cert["spec"]["usages"]
    issuer = cert["spec"]["issuerRef"]
    if variant_name == "cert-manager":
        # self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificate
        selfsigned = one(docs, "Issuer", f"{RELEASE}-selfsigned")
        assert selfsigned["spec"] == {"selfSigned": {}}
        ca = one(docs, "Certificate", f"{RELEASE}-ca")
        assert ca["spec"]["isCA"] is True and ca["spec"]["issuerRef"]["name"] == f"{RELEASE}-selfsigned"
        ca_issuer = one(docs, "Issuer", f"{RELEASE}-ca")
        assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
        assert issuer == {"group": "cert-manager.io", "kind": "Issuer", "name": f"{RELEASE}-ca"}
    else:
        assert not find(docs, "Issuer")
        assert issuer == {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "corp-ca"}
    for doc in find(docs, "Certificate") + find(docs, "Issuer"):
        assert doc["metadata"]["namespace"] == NAMESPACE
        assert set(doc["spec"]) <= {"selfSigned", "ca", "isCA", "commonName", "secretName", "duration", "renewBefore",
                                    "privateKey", "issuerRef", "dnsNames", "usages"}
    for config in webhook_configs(docs):
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/{cert['metadata']['name']}"
    args = args_of(docs, "webhook")
    assert "--manage-certs" not in args and not flag_values(args, "--secret") and not flag_values(args, "--webhook-config")
    assert not flag_values(args, "--mutating-webhook-config") and not flag_values(args, "--validating-webhook-config")
    assert flag_values(args, "--cert-dir") == ["/certs"]
    assert flag_values(args, "--namespace") == [NAMESPACE]
    pod = deployment(docs, "webhook")["spec"]["template"]["spec"]
    mount = next(m for m in container(docs, "webhook")["volumeMounts"] if m["mountPath"] == "/certs")
    assert mount["readOnly"] is True
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == secret
    assert not find(docs, "Role", f"{RELEASE}-webhook"), "no Secret access needed"


# --------------------------------------------------------------------------- CRD, metrics


def test_crd_is_opt_in_and_well_formed(defaults):
    assert not find(defaults, "CustomResourceDefinition")
    docs = render({"crds": {"install": True}})
    crd = one(docs, "CustomResourceDefinition", "podgroups.scheduling.run.ai")
    spec = crd["spec"]
    assert spec["group"] == "scheduling.run.ai" and spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == "podgroups" and spec["names"]["kind"] == "PodGroup"
    assert spec["names"]["shortNames"] == ["pg"]
    (version,) = spec["versions"]
    assert version["name"] == "v2alpha2" and version["served"] is True and version["storage"] is True
    assert version["subresources"] == {"status": {}}
    schema = version["schema"]["openAPIV3Schema"]
    pg_spec = schema["properties"]["spec"]
    assert pg_spec["properties"]["minMember"]["type"] == "integer"
    assert pg_spec["properties"]["minMember"]["minimum"] == 0
    assert pg_spec["properties"]["queue"]["type"] == "string"
    assert pg_spec["properties"]["priorityClassName"]["type"] == "string"
    assert pg_spec["x-kubernetes-preserve-unknown-fields"] is True
    assert schema["properties"]["status"]["x-kubernetes-preserve-unknown-fields"] is True
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert "annotations" not in one(render({"crds": {"install": True, "keep": False}}), "CustomResourceDefinition")["metadata"]


def test_crd_accepts_a_kai_podgroup():
    """A PodGroup as the fixtures' KAI CRD describes it validates against our CRD's schema."""
    crd = one(render({"crds": {"install": True}}), "CustomResourceDefinition")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "pg-a"},
          "spec": {"minMember": 3, "queue": "default", "priorityClassName": "train", "markUnschedulable": True},
          "status": {"phase": "Running"}}
    jsonschema.Draft4Validator(schema).validate(pg)
    for bad in ({"minMember": -1}, {"minMember": "3"}, {"queue": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.Draft4Validator(schema).validate({**pg, "spec": bad})


def test_service_monitors(defaults):
    assert not find(defaults, "ServiceMonitor")
    docs = render(VARIANTS["service-monitor"])
    monitors = {m["metadata"]["name"]: m for m in find(docs, "ServiceMonitor")}
    assert set(monitors) == {f"{RELEASE}-webhook", f"{RELEASE}-grouper"}
    services = {s["metadata"]["name"]: s for s in find(docs, "Service")}
    for name, monitor in monitors.items():
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"] == "prometheus"
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
        selector = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services.values() if selector.items() <= s["metadata"]["labels"].items()]
        assert len(matched) == 1, name
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] in {p["name"] for p in matched[0]["spec"]["ports"]}
        assert endpoint["path"] == "/metrics"
        assert set(endpoint) == {"port", "path", "scheme", "interval", "scrapeTimeout"}
        assert endpoint["scheme"] == "http"  # both on a plain-HTTP port of their own


# --------------------------------------------------------------------------- other values


def test_everything_variant_applies_the_values():
    docs = render(VARIANTS["everything"])
    pod = deployment(docs, "webhook")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "infra-critical"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    quota = one(docs, "ResourceQuota")["spec"]["scopeSelector"]["matchExpressions"]
    assert quota == [{"scopeName": "PriorityClass", "operator": "In",
                      "values": ["infra-critical", "system-cluster-critical"]}]
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert "nodeAffinity" in pod["affinity"] and "podAntiAffinity" not in pod["affinity"]
    meta = deployment(docs, "webhook")["spec"]["template"]["metadata"]
    assert meta["annotations"] == {"example.com/team": "infra"} and meta["labels"]["team"] == "infra"
    assert container(docs, "webhook")["image"] == "podgang@sha256:" + "a" * 64
    assert flag_values(args_of(docs, "webhook"), "--log-format") == ["text"]
    assert flag_values(args_of(docs, "webhook"), "--exclude-namespace") == ["kube-system", NAMESPACE, "monitoring"]
    gargs = args_of(docs, "grouper")
    assert flag_values(gargs, "--staleness-grace-period") == ["90s"]
    assert flag_values(gargs, "--orphan-timeout") == ["5m"]
    assert flag_values(gargs, "--watch-namespace") == ["team-a"]


def test_names_follow_release_and_overrides():
    docs = render({}, "prod", "ns")
    assert {d["metadata"]["name"] for d in find(docs, "Deployment")} == {"prod-podgang-webhook", "prod-podgang-grouper"}
    docs = render({"fullnameOverride": "gang"}, "prod", "ns")
    assert {d["metadata"]["name"] for d in find(docs, "Deployment")} == {"gang-webhook", "gang-grouper"}
    long_release = "a" * 53
    docs = render({}, long_release, "ns")
    for doc in find(docs, "Service") + find(docs, "Deployment"):
        assert len(doc["metadata"]["name"]) <= 63 and not doc["metadata"]["name"].endswith("-")


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "podgang"
    assert chart["appVersion"] == "0.1.0"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


# ---------------------------------------------------------------------------
# the chart and the code agree


@pytest.mark.parametrize("component", ["webhook", "grouper"])
def test_container_args_are_accepted_by_the_real_command_line(variant, component):
    """Every flag the chart passes exists in `podgang <command>`, with a valid value."""
    _name, _values, docs = variant
    args = args_of(docs, component)
    assert args[0] == component
    parser, _run = command_parser(component)
    errors: list[str] = []
    parser.error = errors.append  # argparse reports here instead of exiting
    parsed = parser.parse_args(args[1:])
    assert errors == [], f"the chart passes {args[1:]} and podgang {component} refuses: {errors}"
    if component == "grouper":
        assert parsed.leader_elect == (_values.get("grouper", {}).get("leaderElection", {}).get("enabled", True))


def test_webhook_rbac_covers_every_owner_kind_it_looks_up(defaults):
    """The webhook fetches each kind in podgang.kinds.OWNER_KINDS; a 403 would leave
    those pods without a gang on every admission."""
    rules = _rules_for(defaults, f"{RELEASE}-webhook")
    for resource in OWNER_KINDS.values():
        assert _allowed(rules, resource.group, resource.plural, "get"), f"webhook cannot get {resource.plural}"


def test_grouper_rbac_covers_every_kind_it_watches(defaults):
    rules = _rules_for(defaults, f"{RELEASE}-grouper")
    for resource in (POD, *(k.resource for k in FOLLOWED)):
        for verb in ("list", "watch"):
            assert _allowed(rules, resource.group, resource.plural, verb), f"grouper cannot {verb} {resource.plural}"


@pytest.mark.parametrize("component", ["webhook", "grouper"])
def test_rbac_names_no_workload_kind_the_registry_does_not_follow(defaults, component):
    """The registry and the chart agree both ways: a kind dropped from (or never in)
    podgang.kinds has no read rule left behind in the chart."""
    known = {(POD.group, POD.plural), (DEFAULT.default_backend.podgroup.group, DEFAULT.default_backend.podgroup.plural),
             *((k.resource.group, k.resource.plural) for k in FOLLOWED)}
    workload_groups = {k.resource.group for k in WORKLOADS.values()}
    for _scope, rule in _rules_for(defaults, f"{RELEASE}-{component}"):
        if not {"get", "list", "watch"} & set(rule["verbs"]):
            continue
        for group in rule["apiGroups"]:
            if group not in workload_groups:
                continue
            for resource in rule["resources"]:
                if "/" in resource or (group, resource) in known:
                    continue
                raise AssertionError(f"the {component} may read {resource}.{group}, which podgang.kinds does not follow")
