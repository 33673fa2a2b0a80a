"""KAI v0.18's GPU request rules (``--kai-version v0.18``, the default), table-driven.

The cases of the first tables are KAI's own unit tests, their inputs and verdicts taken as
facts (``pkg/common/resources/gpu_sharing_validation_test.go`` @df5ca7ec and the parser test
beside it; /work/research36/GPU-RULES.md): KAI asserts only error or no error there, so the
message is checked where KAI's source words it. The next table pins each message of
``ValidateGPUFractionRequest`` (@911784db) against an input that reaches it, in KAI's words:
from KAI's source, not from its tests (docs/schedulers/kai.md, "GPU requests"). The last
tables are what podgang keeps from v0.17 where v0.18's behaviour is not verified, and where
the two versions differ.
"""

from __future__ import annotations

import pytest

from podgang.backends.kai import keys as kai_keys
from podgang.rules import gpu_problem, nv_fractions
from podgang.settings import DEFAULT, Settings

V18 = DEFAULT.with_changes(kai_version="v0.18", kai_version_auto=False, kai_version_source="--kai-version")
V17 = DEFAULT.with_changes(kai_version="v0.17", kai_version_auto=False, kai_version_source="--kai-version")


def REQ(c: str) -> str:
    return f"nvidia.com/container.{c}.gpu-memory.request"


def LIM(c: str) -> str:
    return f"nvidia.com/container.{c}.gpu-memory.limit"


def CM(c: str) -> str:
    return f"nvidia.com/container.{c}.gpu-compute.mode"


def PL(c: str) -> str:
    return f"kai.scheduler/container.{c}.gpu-memory.portion.limit"


def pod(notes: dict[str, str], containers=("container-0",), init=(), gpus: dict[str, str] | None = None) -> dict:
    def container(name):
        out = {"name": name, "image": "x"}
        if gpus and name in gpus:
            out["resources"] = {"limits": {"nvidia.com/gpu": gpus[name]}}
        return out
    spec = {"schedulerName": "kai-scheduler", "containers": [container(c) for c in containers]}
    if init:
        spec["initContainers"] = [container(c) for c in init]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": notes}, "spec": spec}


# --- TestValidateGPUFractionRequest_ComputeSharingMode: KAI's cases (annotations, containers, error?)

COMPUTE_MODE_CASES = [
    pytest.param({}, ("container-0",), None, id="no annotations"),
    pytest.param({REQ("container-0"): "1Gi", CM("container-0"): "sm-sharing"}, ("container-0",), None,
                 id="request and compute mode on the same container"),
    pytest.param({REQ("missing-container"): "1Gi", CM("missing-container"): "sm-sharing"}, ("container-0",),
                 kai_keys.MSG_V18_NO_CONTAINER.format(container="missing-container"), id="container not in the pod"),
    # KAI's test asserts an error only; its words for a compute mode on another container are not known:
    # podgang's is KAI's message for two containers with GPU sharing annotations
    pytest.param({REQ("container-0"): "1Gi", CM("container-1"): "sm-sharing"}, ("container-0", "container-1"),
                 kai_keys.MSG_V18_MULTIPLE_CONTAINERS, id="compute mode on another container than the request"),
    pytest.param({REQ("container-1"): "1Gi", CM("container-1"): "sm-sharing",
                  "gpu-fraction-container-name": "container-1"}, ("container-0", "container-1"), None,
                 id="gpu-fraction-container-name names the request's container"),
    pytest.param({REQ("container-1"): "1Gi", CM("container-1"): "sm-sharing",
                  "gpu-fraction-container-name": "container-0"}, ("container-0", "container-1"),
                 kai_keys.MSG_V18_CONTAINER_NAME.format(name="container-0", container="container-1"),
                 id="gpu-fraction-container-name names another container"),
    pytest.param({"gpu-fraction": "0.5", CM("missing-container"): "sm-sharing"}, ("container-0",), None,
                 id="compute mode ignored beside a legacy fraction"),
    pytest.param({CM("missing-container"): "sm-sharing"}, ("container-0",), None,
                 id="compute mode ignored without a fraction request"),
]


@pytest.mark.parametrize("notes, containers, refused", COMPUTE_MODE_CASES)
def test_kai_compute_sharing_mode_cases(notes, containers, refused):
    problem = gpu_problem(pod(notes, containers), V18)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(refused)


# --- TestValidateContainerExists: containers [main], init containers [init-main]

@pytest.mark.parametrize("container, refused", [
    ("main", None),
    ("init-main", None),
    ("missing", "container missing not found in pod spec"),
])
def test_kai_container_exists_cases(container, refused):
    problem = gpu_problem(pod({REQ(container): "1Gi"}, ("main",), init=("init-main",)), V18)
    assert problem is None if refused is None else refused in problem


# --- the parser test's two pods, through the whole validator

def test_kai_parser_case_with_every_kind_of_request_is_refused_for_its_limit_beside_legacy_annotations():
    notes = {REQ("main"): "1Gi", LIM("main"): "2Gi", "gpu-fraction-num-devices": "3", "gpu-fraction": "0.25",
             "gpu-memory": "2048"}
    fractions, invalid = nv_fractions(pod(notes, ("main",)))
    assert invalid is None and fractions == {"main": {".gpu-memory.request": "1Gi", ".gpu-memory.limit": "2Gi"}}
    # NvFractions wins the parse; KAI's rule 5 (limit beside gpu-fraction or gpu-memory) refuses the pod
    assert gpu_problem(pod(notes, ("main",)), V18).startswith(kai_keys.MSG_V18_LIMIT_WITH_LEGACY + ": ")


def test_kai_parser_case_compute_mode_does_not_break_the_request():
    notes = {REQ("main"): "1Gi", CM("main"): "sm-sharing"}
    assert nv_fractions(pod(notes, ("main",))) == (
        {"main": {".gpu-memory.request": "1Gi", ".gpu-compute.mode": "sm-sharing"}}, None)
    assert gpu_problem(pod(notes, ("main",)), V18) is None


# --- each message of ValidateGPUFractionRequest (from KAI's source), in KAI's order

MESSAGE_CASES = [
    pytest.param({"nvidia.com/container.main.gpu-memory.requested": "1Gi"}, {},
                 "invalid NvFractions annotation key: nvidia.com/container.main.gpu-memory.requested",
                 id="1 an unknown suffix"),
    pytest.param({"nvidia.com/container..gpu-memory.request": "1Gi"}, {},
                 "invalid NvFractions annotation key: nvidia.com/container..gpu-memory.request",
                 id="1 an empty container name"),
    pytest.param({REQ("main"): "lots"}, {},
                 f"{REQ('main')} annotation value must be a valid Kubernetes memory quantity greater than 0",
                 id="1 a request that is no quantity"),
    pytest.param({LIM("main"): "0"}, {},
                 f"{LIM('main')} annotation value must be a valid Kubernetes memory quantity greater than 0",
                 id="1 a limit of 0"),
    pytest.param({"gpu-fraction-num-devices": "2"}, {},
                 "cannot request multiple fractional devices without specifying fraction details (portion or memory)",
                 id="2 a device count without a fraction"),
    pytest.param({REQ("main"): "2Gi", LIM("main"): "1Gi"}, {},
                 "invalid fraction request for container main: request is greater than limit",
                 id="3 request above limit"),
    pytest.param({REQ("main"): "1Gi", REQ("sidecar"): "1Gi"}, {},
                 "currently, kai doesn't support multiple containers with fractional GPU requests",
                 id="3 two containers"),
    pytest.param({REQ("main"): "1Gi"}, {"main": "1"},
                 "cannot have both GPU fraction request and whole GPU resource request/limit",
                 id="4 a per-container request beside a whole GPU"),
    pytest.param({"gpu-memory": "4000"}, {"sidecar": "1"},
                 "cannot have both GPU fraction request and whole GPU resource request/limit",
                 id="4 gpu-memory beside a whole GPU (v0.17: cannot request both GPU and GPU memory)"),
    pytest.param({LIM("main"): "2Gi", "gpu-fraction": "0.5"}, {},
                 "cannot combine nvidia.com/container. limit annotation with gpu-fraction or gpu-memory annotation",
                 id="5 a per-container limit beside gpu-fraction"),
    pytest.param({"gpu-fraction": "0.5", "gpu-memory": "4000"}, {},
                 "cannot request both gpu-fraction and GPU memory request",
                 id="6 gpu-fraction with gpu-memory (v0.17: cannot request both GPU and GPU memory)"),
    pytest.param({REQ("main"): "1Gi", "gpu-memory": "2048"}, {},
                 "NvFractions memory request (1Gi) does not match gpu-memory annotation value (2048 MiB)",
                 id="7 gpu-memory unlike the per-container request"),
]


@pytest.mark.parametrize("notes, gpus, message", MESSAGE_CASES)
def test_each_kai_v018_message(notes, gpus, message):
    problem = gpu_problem(pod(notes, ("main", "sidecar"), gpus=gpus), V18)
    assert problem is not None and problem.startswith(message)


@pytest.mark.parametrize("notes", [
    pytest.param({REQ("main"): "1Gi", "gpu-memory": "1024"}, id="gpu-memory equal to the request in MiB"),
    pytest.param({LIM("main"): "1Gi"}, id="a limit alone: the request defaults to it"),
    pytest.param({REQ("main"): "1Gi", LIM("main"): "2Gi"}, id="request below limit"),
    pytest.param({REQ("main"): "1Gi", "gpu-fraction-container-name": "main"}, id="the container named alike"),
    pytest.param({"nvidia.com/container.main.gpus.devices": "GPU-1"}, id="the binder's device annotation alone"),
    pytest.param({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2"}, id="a fraction on two devices"),
])
def test_what_kai_v018_allows(notes):
    assert gpu_problem(pod(notes, ("main", "sidecar")), V18) is None


# --- not verified for v0.18: podgang keeps v0.17's behaviour

def test_the_portion_limit_annotation_is_not_judged():
    """``kai.scheduler/container.<c>.gpu-memory.portion.limit`` is checked in a KAI commit of
    unknown date, maybe after v0.18.0: podgang judges it under neither version (KAI's cases with
    it would be refused by that commit; podgang lets KAI say so)."""
    for notes in ({PL("container-0"): "0.8"}, {"gpu-fraction": "0.5", PL("container-0"): "0.4"}):
        assert gpu_problem(pod(notes), V18) is None and gpu_problem(pod(notes), V17) is None


@pytest.mark.parametrize("notes, message", [
    ({"gpu-memory": "abc"}, kai_keys.MSG_BAD_MEMORY),
    ({"gpu-fraction": "1.5"}, kai_keys.MSG_BAD_FRACTION),
])
def test_v017_value_checks_are_kept(notes, message):
    """Whether v0.18's admission still checks the legacy values is not verified: kept, in v0.17's words."""
    assert gpu_problem(pod(notes), V18).startswith(message + ": ")
    assert gpu_problem(pod(notes), V17).startswith(message + ": ")


# --- v0.17 against v0.18

@pytest.mark.parametrize("notes, gpus, v17, v18", [
    ({"gpu-memory": "4000"}, {"container-0": "1"}, kai_keys.MSG_GPU_AND_MEMORY, kai_keys.MSG_FRACTION_AND_GPU),
    ({"gpu-memory": "4000", "gpu-fraction": "0.5"}, {}, kai_keys.MSG_GPU_AND_MEMORY,
     kai_keys.MSG_V18_FRACTION_AND_MEMORY),
    ({REQ("container-0"): "1Gi"}, {"container-0": "1"}, None, kai_keys.MSG_FRACTION_AND_GPU),
    ({"nvidia.com/container.container-0.gpu-memory": "1Gi"}, {}, None, "invalid NvFractions annotation key"),
])
def test_the_two_versions_differ(notes, gpus, v17, v18):
    """v0.17 has no per-container annotations at all (it lets them through), and words two refusals
    otherwise."""
    said17, said18 = gpu_problem(pod(notes, gpus=gpus), V17), gpu_problem(pod(notes, gpus=gpus), V18)
    assert (said17 is None) if v17 is None else said17.startswith(v17 + ": ")
    assert said18.startswith(v18)


def test_the_default_is_v018():
    assert DEFAULT.kai_version == Settings().kai_version == "v0.18"
