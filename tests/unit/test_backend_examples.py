"""The backend examples planned with their backend: each gives the gangs its
comments promise (plan decides through the grouper's own code), and with the
default settings (KAI only) its pods are skipped, not broken."""

from __future__ import annotations


import pytest

from podgang.backends import COSCHEDULING, NATIVE, VOLCANO
from podgang.manifests import read_manifests
from podgang.plan import build_plan, podgroup_manifests
from podgang.settings import DEFAULT, Settings
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"

#: file -> (backend, scheduler name, {(namespace, group name or its prefix): minMember})
CASES = {
    "07-volcano-lws.yaml": (VOLCANO, "volcano", {("volcano-demo", "pg-gang-test-"): 4}),
    "08-native-training.yaml": (NATIVE, "default-scheduler", {("training", "pg-training-"): 4,
                                                              ("training", "training-gang"): 2}),
    "09-coscheduling.yaml": (COSCHEDULING, "scheduler-plugins-scheduler", {("inference", "pg-infer-"): 3}),
}


@pytest.mark.parametrize("file", sorted(CASES))
def test_example_with_its_backend(file):
    backend, scheduler, expected = CASES[file]
    settings = Settings(backends=((scheduler, backend),))
    plan = build_plan(read_manifests([str(EXAMPLES / file)]), settings)
    got = {(g.namespace, g.name): g.min_member.value for g in plan.groups.values()}
    assert len(got) == len(expected)
    for (ns, name), size in expected.items():
        [match] = [k for k in got if k[0] == ns and k[1].startswith(name)]
        assert got[match] == size
    docs, _ = podgroup_manifests(plan, settings)
    assert all(backend.is_podgroup(d) for d in docs)


def test_native_hand_made_group_as_written():
    settings = Settings(backends=(("default-scheduler", NATIVE),))
    plan = build_plan(read_manifests([str(EXAMPLES / "08-native-training.yaml")]), settings)
    docs, _ = podgroup_manifests(plan, settings)
    [doc] = [d for d in docs if d["metadata"]["name"] == "training-gang"]
    assert doc["spec"] == {"schedulingPolicy": {"gang": {"minCount": 2}}}


@pytest.mark.parametrize("file", sorted(CASES))
def test_example_is_skipped_by_default(file):
    plan = build_plan(read_manifests([str(EXAMPLES / file)]), DEFAULT)
    assert plan.groups == {}
