"""The chart's taught kinds (issue 46): ``kinds.declared`` renders the ConfigMap both processes
read at start (``--kinds``) and RBAC to read exactly the declared kinds; ``kinds.kartaKinds``
the RBAC of the kinds the cluster's Kartas teach; ``kinds.karta`` lets both list Kartas."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from podgang import kinds
from podgang.cli import command_parser
from podgang.kinds.taught import plural_of
from tests.chart_support import NAMESPACE, RELEASE, render
from tests.emulator.rbac import allows, rules_for
from tests.taught_support import CUSTOM_JOB

#: kinds whose default plural is not kind + "s", and one that names its resource
ODD = [{"apiVersion": "search.example.com/v1", "kind": "Index", "components": [{"name": "shard", "replicas": "spec.n",
                                                                                 "roleLabel": "r"}]},
       {"apiVersion": "search.example.com/v1", "kind": "Policy", "components": [{"name": "p", "replicas": "spec.n",
                                                                                  "roleLabel": "r"}]},
       {"apiVersion": "ml.example.com/v2", "kind": "Run", "resource": "trainingruns",
        "components": [{"name": "w", "replicas": "spec.n", "roleLabel": "r"}]}]
KARTA_KINDS = [{"apiVersion": "serving.example.com/v1", "kind": "InferenceGraph"}]


@pytest.fixture(autouse=True)
def built_in_kinds_after():
    yield
    kinds.teach([])


def container(docs: list[dict], component: str) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-{component}"]
    return deployment["spec"]["template"]["spec"]


def rules(docs: list[dict], component: str):
    return rules_for(docs, f"{RELEASE}-{component}", NAMESPACE)


@pytest.fixture(scope="module")
def declared() -> list[dict]:
    return render({"kinds": {"declared": [CUSTOM_JOB, *ODD], "kartaKinds": KARTA_KINDS}})


def test_by_default_nothing_is_declared_and_both_processes_may_list_kartas():
    docs = render()
    assert not [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-kinds")]
    for component in ("webhook", "grouper"):
        spec = container(docs, component)
        args = spec["containers"][0]["args"]
        assert not [a for a in args if a.startswith("--kinds") or a == "--no-karta"]
        assert allows(rules(docs, component), "run.ai", "kartas", "list")
        assert not allows(rules(docs, component), "run.ai", "kartas", "watch")


def test_the_configmap_holds_a_declaration_podgang_reads(declared):
    (config_map,) = [d for d in declared if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{RELEASE}-kinds"]
    document = yaml.safe_load(config_map["data"]["kinds.yaml"])
    assert document["kind"] == "PodgangKinds"
    found = kinds.read_declarations([("chart", document)], kinds.BUILT_IN)
    assert not found.problems
    assert sorted(k for _, k in found.entries) == ["CustomJob", "Index", "Policy", "Run"]


def test_both_processes_mount_it_and_read_it_at_start(declared):
    for component in ("webhook", "grouper"):
        spec = container(declared, component)
        args = spec["containers"][0]["args"]
        assert "--kinds=/etc/podgang/kinds/kinds.yaml" in args
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        assert mounts["kinds"]["mountPath"] == "/etc/podgang/kinds" and mounts["kinds"]["readOnly"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["kinds"]["configMap"]["name"] == f"{RELEASE}-kinds"
        parser, _run = command_parser(component)
        errors: list[str] = []
        parser.error = errors.append  # argparse reports here instead of exiting
        parsed = parser.parse_args(args[1:])  # the real command line accepts them
        assert errors == [] and parsed.kinds_files == ["/etc/podgang/kinds/kinds.yaml"] and parsed.karta


def test_rbac_reads_exactly_the_declared_kinds(declared):
    grouper, webhook = rules(declared, "grouper"), rules(declared, "webhook")
    taught = [("e2e.example.com", "customjobs"), ("search.example.com", "indexes"),
              ("search.example.com", "policies"), ("ml.example.com", "trainingruns"),
              ("serving.example.com", "inferencegraphs")]
    for group, resource in taught:
        for verb in ("get", "list", "watch"):
            assert allows(grouper, group, resource, verb, namespace="team-a"), (resource, verb)
        assert allows(webhook, group, resource, "get", namespace="team-a")
        assert not allows(webhook, group, resource, "list", namespace="team-a")
        for verb in ("create", "patch", "delete"):
            assert not allows(grouper, group, resource, verb, namespace="team-a")
    assert not allows(grouper, "ml.example.com", "runs", "list", namespace="team-a")
    taught_groups = {g for g, _ in taught}
    for _scope, rule in [*grouper, *webhook]:
        for group in set(rule["apiGroups"]) & taught_groups:
            assert set(rule["resources"]) <= {r for g, r in taught if g == group}, rule


@pytest.mark.parametrize("kind", ["CustomJob", "Index", "Policy", "Batch", "Mesh", "Gateway", "Proxy"])
def test_the_charts_plural_is_podgangs(kind):
    docs = render({"kinds": {"kartaKinds": [{"apiVersion": "x.example.com/v1", "kind": kind}]}})
    assert allows(rules(docs, "grouper"), "x.example.com", plural_of(kind), "watch", namespace="team-a")


def test_without_karta_neither_process_lists_kartas():
    docs = render({"kinds": {"karta": False}})
    for component in ("webhook", "grouper"):
        args = container(docs, component)["containers"][0]["args"]
        assert "--no-karta" in args
        parser, _run = command_parser(component)
        assert parser.parse_args(args[1:]).karta is False
        assert not allows(rules(docs, component), "run.ai", "kartas", "list")


@pytest.mark.parametrize("bad", [
    {"declared": [{"apiVersion": "e2e.example.com/v1", "kind": "CustomJob"}]},  # no components
    {"declared": [{**CUSTOM_JOB, "replicas": "spec.n"}]},  # an unknown field
    {"kartaKinds": [{"apiVersion": "e2e.example.com/v1", "kind": "customjob"}]},  # not a kind name
])
def test_the_schema_refuses_a_malformed_declaration(bad):
    with pytest.raises(Exception, match="(?i)schema|kinds"):
        render({"kinds": bad})
