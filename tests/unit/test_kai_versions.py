"""Which KAI release a cluster runs, from its PodGroup CRD, and the --kai-version values."""

from __future__ import annotations

import argparse
import io

import helm_python as helm
import pytest
import yaml

from podgang.backends.kai import keys as kai_keys
from podgang.backends.kai.versions import parse_version, version_from_crd
from podgang.cli import command_parser
from podgang.grouper import cli as grouper_cli
from podgang.webhook import cli as webhook_cli
from podgang.options import add_backend_flags, kai_version_settings
from tests.chart_support import NAMESPACE, RELEASE, render
from tests.emulator import rbac
from tests.paths import ROOT, TESTS

CRDS = TESTS / "fixtures" / "crds"


def crd(name: str) -> dict:
    return yaml.safe_load((CRDS / name).read_text())


@pytest.mark.parametrize("name, version", [
    ("kai-versions/podgroups-v0.17.0.yaml", "v0.17"),
    ("scheduling.run.ai_podgroups.yaml", "v0.17"),  # main after v0.17.0 (minMember 0 allowed), before #1804
    ("kai-versions/podgroups-pr1804.yaml", "v0.18"),
])
def test_kais_own_crds_say_their_release(name, version):
    assert version_from_crd(crd(name))[0] == version


def test_either_v018_addition_is_enough_and_a_crd_without_a_schema_says_nothing():
    v18 = crd("kai-versions/podgroups-pr1804.yaml")
    schema = v18["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    schema["spec"]["properties"]["preemptibility"]["enum"].remove("semi-preemptible")
    assert version_from_crd(v18) == ("v0.18", "its podgroups.scheduling.run.ai CRD has status.schedulingState.corePods")
    del schema["status"]["properties"]["schedulingState"]
    assert version_from_crd(v18)[0] == "v0.17"
    # podgang's own CRD (crds.install, no KAI): every field kept without a schema
    assert version_from_crd({"spec": {"versions": [{"name": "v2alpha2", "schema": {"openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}) is None
    assert version_from_crd(None) is None and version_from_crd({"spec": "x"}) is None


@pytest.mark.parametrize("text, version", [("v0.18", "v0.18"), ("0.17", "v0.17"), ("v0.18.3", "v0.18"),
                                           (" AUTO ", "auto")])
def test_versions_given(text, version):
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["v0.16", "v0.19", "latest", "v0.18.x", ""])
def test_versions_podgang_has_no_rules_for_are_refused(text):
    with pytest.raises(ValueError, match="expected v0.17, v0.18 or auto"):
        parse_version(text)


def test_the_flag_and_its_environment_variable(monkeypatch):
    def parsed(*argv):
        parser = argparse.ArgumentParser()
        add_backend_flags(parser)
        return kai_version_settings(parser.parse_args(list(argv)))

    assert parsed() == {}  # auto: the processes ask the cluster
    assert parsed("--kai-version", "v0.17.2") == {"kai_version": "v0.17", "kai_version_auto": False,
                                                   "kai_version_source": "--kai-version"}
    monkeypatch.setenv("PODGANG_KAI_VERSION", "0.17")
    assert parsed()["kai_version"] == "v0.17"
    with pytest.raises(SystemExit):
        parsed("--kai-version", "v0.16")


def _args(docs: list[dict], component: str) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-{component}")
    return deployment["spec"]["template"]["spec"]["containers"][0]["args"]


def _may_read_the_crd(docs: list[dict], component: str) -> bool:
    rules = rbac.rules_for(docs, f"{RELEASE}-{component}", NAMESPACE)
    return rbac.allows(rules, "apiextensions.k8s.io", "customresourcedefinitions", "get",
                       name="podgroups.scheduling.run.ai")


def test_the_chart_value_reaches_both_processes_and_auto_may_read_the_crd():
    auto = render()
    for component in ("webhook", "grouper"):
        assert not any(a.startswith("--kai-version") for a in _args(auto, component))  # auto: the default
        assert _may_read_the_crd(auto, component)
    pinned = render({"kai": {"version": "v0.17"}})
    for component in ("webhook", "grouper"):
        assert "--kai-version=v0.17" in _args(pinned, component)
        assert not _may_read_the_crd(pinned, component)  # not asked: not granted
    with pytest.raises(helm.HelmValuesError, match="version"):
        render({"kai": {"version": "latest"}})


def test_one_setting_for_the_webhook_the_grouper_and_plan():
    """--kai-version reaches each process's Settings the same way (the flag, else auto)."""
    webhook_args = command_parser("webhook")[0].parse_args(["--kai-version", "v0.17"])
    assert webhook_cli.config_from_args(webhook_args).settings.kai_version == "v0.17"
    grouper_args = command_parser("grouper")[0].parse_args(["--kai-version", "v0.17"])
    assert grouper_cli.settings_from(grouper_args).kai_version == "v0.17"
    auto = grouper_cli.settings_from(command_parser("grouper")[0].parse_args([]))
    assert (auto.kai_version, auto.kai_version_auto) == ("v0.18", True)  # until the cluster is asked
    example = str(ROOT / "examples" / "03-gpu-conflict.yaml")
    for version, words in (("v0.17", kai_keys.MSG_GPU_AND_MEMORY), ("v0.18", kai_keys.MSG_FRACTION_AND_GPU)):
        parser, run = command_parser("plan")
        out, err = io.StringIO(), io.StringIO()
        assert run(parser.parse_args([example, "--kai-version", version]), out, err) == 1
        assert f"{words}: " in out.getvalue()
        assert f"KAI {version}'s (GPU requests, semi-preemptible groups): --kai-version" in out.getvalue()
