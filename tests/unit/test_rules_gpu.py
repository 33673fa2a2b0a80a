"""GPU request rules (spec §4, validate) of KAI v0.17 (``--kai-version v0.17``): the messages,
exact text — the KAI-compatible message first, then container, values and what to change.
KAI v0.18's rules, against KAI's own test cases: test_rules_gpu_kai_v018.py."""

from __future__ import annotations

import json

import pytest

from podgang.rules import (
    MSG_BAD_FRACTION,
    MSG_BAD_MEMORY,
    MSG_FRACTION_AND_GPU,
    MSG_GPU_AND_MEMORY,
    gpu_problem as any_version_problem,
    quantity,
    whole_gpu_requests,
)
from podgang.settings import Settings
from tests.paths import TESTS

ADMISSION = TESTS / "fixtures" / "admission"
V17 = Settings(kai_version="v0.17", kai_version_auto=False)


def gpu_problem(pod, settings: Settings = V17):
    """The v0.17 rules' verdict."""
    assert settings.kai_version == "v0.17"
    return any_version_problem(pod, settings)


def admitted(name: str) -> dict:
    return json.loads((ADMISSION / name).read_text())["request"]["object"]


def gpu_pod(*, requests=None, limits=None, init=None, memory=None, fraction=None, name="app") -> dict:
    annotations = {}
    if memory is not None:
        annotations["gpu-memory"] = memory
    if fraction is not None:
        annotations["gpu-fraction"] = fraction
    resources = {}
    if requests is not None:
        resources["requests"] = {"nvidia.com/gpu": requests}
    if limits is not None:
        resources["limits"] = {"nvidia.com/gpu": limits}
    spec: dict = {"schedulerName": "kai-scheduler", "containers": [{"name": name, "image": "x", "resources": resources}]}
    if init is not None:
        spec["initContainers"] = [{"name": "setup", "image": "x", "resources": {"requests": {"nvidia.com/gpu": init}}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations}, "spec": spec}


def test_kai_messages():
    # verbatim from KAI-Scheduler's admission webhook
    assert MSG_GPU_AND_MEMORY == "cannot request both GPU and GPU memory"
    assert MSG_FRACTION_AND_GPU == "cannot have both GPU fraction request and whole GPU resource request/limit"
    assert MSG_BAD_MEMORY == "gpu-memory annotation value must be a positive integer greater than 0"
    assert MSG_BAD_FRACTION == "gpu-fraction annotation value must be a positive number smaller than 1.0"


# ---------------------------------------------------------------------------
# whole GPU + gpu-memory


def test_whole_gpu_in_requests_with_memory():
    assert gpu_problem(gpu_pod(requests="1", memory="4000")) == (
        'cannot request both GPU and GPU memory: container "app" requests nvidia.com/gpu: 1 and annotation '
        'gpu-memory: "4000"; remove nvidia.com/gpu to share a GPU by memory, or remove the gpu-memory '
        "annotation to use whole GPUs"
    )


def test_whole_gpu_in_limits_with_memory():
    assert gpu_problem(gpu_pod(limits=2, memory="4000")) == (
        'cannot request both GPU and GPU memory: container "app" limits nvidia.com/gpu: 2 and annotation '
        'gpu-memory: "4000"; remove nvidia.com/gpu to share a GPU by memory, or remove the gpu-memory '
        "annotation to use whole GPUs"
    )


def test_whole_gpu_in_init_container_with_memory():
    assert gpu_problem(gpu_pod(init="1", memory="4000")) == (
        'cannot request both GPU and GPU memory: init container "setup" requests nvidia.com/gpu: 1 and annotation '
        'gpu-memory: "4000"; remove nvidia.com/gpu to share a GPU by memory, or remove the gpu-memory '
        "annotation to use whole GPUs"
    )


def test_recorded_statefulset_gpu_pod_with_memory():
    p = admitted("pod-create-by-statefulset-gpu.json")
    assert gpu_problem(p) is None
    p["metadata"]["annotations"] = {"gpu-memory": "8000"}
    assert gpu_problem(p) == (
        'cannot request both GPU and GPU memory: container "c" requests nvidia.com/gpu: 1 and annotation '
        'gpu-memory: "8000"; remove nvidia.com/gpu to share a GPU by memory, or remove the gpu-memory '
        "annotation to use whole GPUs"
    )


def test_whole_gpu_with_bad_memory_reports_the_conflict():
    assert gpu_problem(gpu_pod(requests="1", memory="")).startswith(
        'cannot request both GPU and GPU memory: container "app" requests nvidia.com/gpu: 1 and annotation gpu-memory: ""'
    )


# ---------------------------------------------------------------------------
# gpu-memory + gpu-fraction


def test_memory_and_fraction():
    assert gpu_problem(gpu_pod(memory="4000", fraction="0.5")) == (
        'cannot request both GPU and GPU memory: annotations gpu-memory: "4000" and gpu-fraction: "0.5"; '
        "keep only one of them"
    )


def test_all_three_report_what_kai_reports_first_fraction_and_whole_gpu():
    # KAI's own validation checks gpu-fraction + whole GPU before gpu-memory
    assert gpu_problem(gpu_pod(requests="1", memory="4000", fraction="0.5")).startswith(
        'cannot have both GPU fraction request and whole GPU resource request/limit: '
        'container "app" requests nvidia.com/gpu: 1'
    )


def test_a_conflict_is_reported_before_a_malformed_value():
    assert gpu_problem(gpu_pod(limits="1", memory="abc")).startswith("cannot request both GPU and GPU memory: ")


# ---------------------------------------------------------------------------
# gpu-fraction + whole GPU


def test_fraction_and_whole_gpu_in_requests():
    assert gpu_problem(gpu_pod(requests="1", fraction="0.5")) == (
        'cannot have both GPU fraction request and whole GPU resource request/limit: container "app" requests '
        'nvidia.com/gpu: 1 and annotation gpu-fraction: "0.5"; remove nvidia.com/gpu to share a GPU, '
        "or remove the gpu-fraction annotation to use whole GPUs"
    )


def test_fraction_and_whole_gpu_in_limits():
    assert gpu_problem(gpu_pod(limits="1", fraction="0.5")) == (
        'cannot have both GPU fraction request and whole GPU resource request/limit: container "app" limits '
        'nvidia.com/gpu: 1 and annotation gpu-fraction: "0.5"; remove nvidia.com/gpu to share a GPU, '
        "or remove the gpu-fraction annotation to use whole GPUs"
    )


def test_fraction_and_whole_gpu_in_init_container():
    assert gpu_problem(gpu_pod(init="1", fraction="0.25")) == (
        'cannot have both GPU fraction request and whole GPU resource request/limit: init container "setup" requests '
        'nvidia.com/gpu: 1 and annotation gpu-fraction: "0.25"; remove nvidia.com/gpu to share a GPU, '
        "or remove the gpu-fraction annotation to use whole GPUs"
    )


# ---------------------------------------------------------------------------
# bad values


@pytest.mark.parametrize("value", ["0", "-1", "2000Mi", "1.5", "", "abc", "4GB", " "])
def test_bad_gpu_memory(value):
    assert gpu_problem(gpu_pod(memory=value)) == (
        f"gpu-memory annotation value must be a positive integer greater than 0: gpu-memory: {json.dumps(value)}; "
        'give the GPU memory in MiB as a whole number, e.g. gpu-memory: "4000"'
    )


@pytest.mark.parametrize("value", ["0", "1", "1.5", "NaN", "abc", "", "-0.5", "1.0", "0.0", "inf", "1e-1"])
def test_bad_gpu_fraction(value):
    assert gpu_problem(gpu_pod(fraction=value)) == (
        f"gpu-fraction annotation value must be a positive number smaller than 1.0: gpu-fraction: {json.dumps(value)}; "
        'give a decimal between 0 and 1, e.g. gpu-fraction: "0.5", or request whole GPUs with nvidia.com/gpu'
    )


@pytest.mark.parametrize("value", ["²", "1²", "٣"])
def test_gpu_memory_with_unicode_digits_does_not_raise(value):
    # str.isdigit() accepts these; int() refuses '²' and '1²'
    problem = gpu_problem(gpu_pod(memory=value))
    assert problem is None or problem.startswith(MSG_BAD_MEMORY)


def test_gpu_memory_with_thousands_of_digits_does_not_raise():
    # int() refuses strings of more than 4300 digits
    problem = gpu_problem(gpu_pod(memory="9" * 5000))
    assert problem is None or problem.startswith(MSG_BAD_MEMORY)


# ---------------------------------------------------------------------------
# accepted


@pytest.mark.parametrize("value", ["4000", "1", "81920"])
def test_good_gpu_memory(value):
    assert gpu_problem(gpu_pod(memory=value)) is None


@pytest.mark.parametrize("value", ["0.5", "0.25", "0.999", ".5"])
def test_good_gpu_fraction(value):
    assert gpu_problem(gpu_pod(fraction=value)) is None


def test_recorded_gpu_memory_pod_is_accepted():
    assert gpu_problem(admitted("pod-create-labelled-gpu-memory.json")) is None


def test_whole_gpus_alone_are_accepted():
    assert gpu_problem(gpu_pod(requests="1", limits="1")) is None
    assert gpu_problem(admitted("pod-create-bare-gpu.json")) is None


@pytest.mark.parametrize("zero", [0, "0", "0.0"])
def test_zero_gpus_is_not_a_whole_gpu_request(zero):
    assert whole_gpu_requests(gpu_pod(requests=zero, limits=zero)) == []
    assert gpu_problem(gpu_pod(requests=zero, limits=zero, memory="4000")) is None
    assert gpu_problem(gpu_pod(requests=zero, fraction="0.5")) is None


def test_no_gpu_at_all():
    assert gpu_problem(gpu_pod()) is None
    assert gpu_problem({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}) is None


def test_whole_gpu_requests_lists_every_place():
    p = gpu_pod(requests="1", limits="1", init="2")
    assert whole_gpu_requests(p) == [
        'init container "setup" requests nvidia.com/gpu: 2',
        'container "app" requests nvidia.com/gpu: 1',
        'container "app" limits nvidia.com/gpu: 1',
    ]


def test_custom_keys():
    settings = Settings(gpu_memory_annotation="example.com/vram", gpu_resource="amd.com/gpu", kai_version="v0.17")
    p = gpu_pod(memory="4000")  # the default key means nothing now
    assert gpu_problem(p, settings) is None
    p = {
        "metadata": {"annotations": {"example.com/vram": "4000"}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"amd.com/gpu": "1"}}}]},
    }
    assert gpu_problem(p, settings).startswith(
        'cannot request both GPU and GPU memory: container "c" limits amd.com/gpu: 1 and annotation example.com/vram: "4000"'
    )


@pytest.mark.parametrize(
    "text,value",
    [("1", 1), ("0", 0), ("500m", 0.5), ("2k", 2000), ("1Ki", 1024), ("1e3", 1000), (3, 3), (1.5, 1.5), ("+2", 2),
     ("3P", 3 * 10**15), ("1E", 10**18), ("2Ei", 2 * 2**60), ("1Mi", 2**20)],
)  # fmt: skip
def test_quantity(text, value):
    from decimal import Decimal

    assert quantity(text) == Decimal(str(value))


@pytest.mark.parametrize("text", ["", "abc", "1 GiB", "1.2.3", ".", None, True, [], {}, float("nan"), float("inf")])
def test_quantity_rejects(text):
    assert quantity(text) is None


@pytest.mark.parametrize("text", ["1e9999999", "99e999999", "1E1000000"])
def test_quantity_with_a_huge_exponent_does_not_raise(text):
    # decimal.Overflow escapes from quantity(), and from gpu_problem() through whole_gpu_requests()
    quantity(text)
    gpu_problem(gpu_pod(limits=text, memory="4000"))


@pytest.mark.parametrize("text", ["1E", "2Ei"])
def test_exa_quantities_do_not_raise(text):
    # "E" (exa) and "Ei" (exbi) are valid Kubernetes suffixes, not exponents
    assert whole_gpu_requests(gpu_pod(limits=text)) == [f'container "app" limits nvidia.com/gpu: {text}']
    assert gpu_problem(gpu_pod(limits=text, memory="4000")).startswith(MSG_GPU_AND_MEMORY)
