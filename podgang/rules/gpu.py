"""GPU requests that contradict each other, in KAI's words: the rules of the KAI release
``settings.kai_version`` names (v0.17's legacy annotations; v0.18's per-container
"NvFractions" annotations beside them, checked in KAI's order so that a pod with several
problems gets the message KAI would give). docs/schedulers/kai.md says what each version
refuses and how sure each fact is.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Iterator, Mapping

from podgang import quantities
from podgang.backends.kai import keys as kai_keys
from podgang.backends.kai.versions import V0_17
from podgang.objects import annotations, clip
from podgang.objects import as_dict as _dict
from podgang.objects import as_list as _list
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.names import _WHOLE_NUMBER


# KAI's own texts come first in every GPU denial (its webhook's words)
MSG_GPU_AND_MEMORY = kai_keys.MSG_GPU_AND_MEMORY


MSG_FRACTION_AND_GPU = kai_keys.MSG_FRACTION_AND_GPU


MSG_BAD_MEMORY = kai_keys.MSG_BAD_MEMORY


MSG_BAD_FRACTION = kai_keys.MSG_BAD_FRACTION


quantity = quantities.quantity


_DECIMAL = re.compile(r"^[0-9]*\.?[0-9]+$")


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field, what in (("initContainers", "init container"), ("containers", "container")):
        for c in _list(pod_spec.get(field)):
            c = _dict(c)
            yield f"{what} {_q(c.get('name', '?'))}", c


def whole_gpu_requests(pod: Any, settings: Settings = DEFAULT) -> list[str]:
    """Where the pod asks for whole GPUs: ``container 'x' limits nvidia.com/gpu: 1``."""
    found = []
    for where, container in _containers(_dict(_dict(pod).get("spec"))):
        resources = _dict(container.get("resources"))
        for section in ("requests", "limits"):
            value = _dict(resources.get(section)).get(settings.gpu_resource)
            amount = quantity(value)
            if value is not None and (amount is None or amount > 0):
                found.append(f"{where} {section} {settings.gpu_resource}: {clip(str(value))}")
    return found


def gpu_problem(pod: Any, settings: Settings = DEFAULT) -> str | None:
    """The first contradiction among a pod's GPU requests (spec §4) by the rules of KAI
    ``settings.kai_version``, or None.

    The KAI-compatible message comes first, then which container, which values,
    and what to change.
    """
    if settings.kai_version == V0_17:
        return _legacy_problem(pod, settings)
    return _nv_fractions_problem(pod, settings) or _legacy_problem(pod, settings)


def _whole_and_shared(whole: str, key: str, value: str, settings: Settings) -> str:
    """KAI's message for whole GPUs beside a shared GPU request (annotation ``key``)."""
    return (f"{MSG_FRACTION_AND_GPU}: {whole} and annotation {key}: {_q(value)}; "
            f"remove {settings.gpu_resource} to share a GPU, or remove the {key} annotation to use whole GPUs")


def _legacy_problem(pod: Any, settings: Settings) -> str | None:
    """KAI v0.17's checks of the legacy annotations; v0.18 keeps their values' checks (that it
    no longer makes them is not verified)."""
    notes = annotations(pod)
    mem_key, frac_key = settings.gpu_memory_annotation, settings.gpu_fraction_annotation
    memory, fraction = notes.get(mem_key), notes.get(frac_key)
    whole = whole_gpu_requests(pod, settings)
    # the order of KAI's own checks, so a pod with several problems gets KAI's message
    if fraction is not None and whole:
        return _whole_and_shared(whole[0], frac_key, fraction, settings)
    if whole and memory is not None:
        return (
            f"{MSG_GPU_AND_MEMORY}: {whole[0]} and annotation {mem_key}: {_q(memory)}; "
            f"remove {settings.gpu_resource} to share a GPU by memory, or remove the {mem_key} annotation "
            f"to use whole GPUs"
        )
    if memory is not None and fraction is not None:
        return (
            f"{MSG_GPU_AND_MEMORY}: annotations {mem_key}: {_q(memory)} and {frac_key}: {_q(fraction)}; "
            f"keep only one of them"
        )
    if memory is not None:
        text = memory.strip()
        if not (_WHOLE_NUMBER.fullmatch(text) and int(text) > 0):
            return (
                f"{MSG_BAD_MEMORY}: {mem_key}: {_q(memory)}; give the GPU memory in MiB as a whole number, "
                f'e.g. {mem_key}: "4000"'
            )
    if fraction is not None:
        text = fraction.strip()
        ok = False
        if _DECIMAL.match(text):
            value = Decimal(text)
            ok = Decimal(0) < value < Decimal(1)
        if not ok:
            return (
                f"{MSG_BAD_FRACTION}: {frac_key}: {_q(fraction)}; give a decimal between 0 and 1, "
                f'e.g. {frac_key}: "0.5", or request whole GPUs with {settings.gpu_resource}'
            )
    return None


# --- KAI v0.18: per-container requests (nvidia.com/container.<name>.<suffix>)

_REQUEST, _LIMIT = kai_keys.NV_FRACTIONS_REQUEST_ANNOTATION_SUFFIX, kai_keys.NV_FRACTIONS_LIMIT_ANNOTATION_SUFFIX
_MIB = Decimal(1024 * 1024)


def nv_fractions(pod: Any) -> tuple[dict[str, dict[str, str]], str | None]:
    """A pod's per-container GPU sharing annotations as ``{container: {suffix: value}}``, and
    KAI v0.18's message for the first key (in key order) it cannot parse, else None."""
    found: dict[str, dict[str, str]] = {}
    for key, value in sorted(annotations(pod).items()):
        if not key.startswith(kai_keys.NV_FRACTIONS_PREFIX):
            continue
        rest = key[len(kai_keys.NV_FRACTIONS_PREFIX):]
        suffix = next((x for x in kai_keys.NV_FRACTIONS_SUFFIXES if rest.endswith(x)), None)
        if suffix is None or not rest[:-len(suffix)]:
            return found, kai_keys.MSG_V18_INVALID_KEY.format(key=clip(key))
        if suffix in (_REQUEST, _LIMIT):
            amount = quantity(value)
            if amount is None or amount <= 0:
                return found, (f"{kai_keys.MSG_V18_BAD_QUANTITY.format(key=clip(key))}: {_q(value)}; give a "
                               f"memory such as {_q('1Gi')}")
        found.setdefault(rest[:-len(suffix)], {})[suffix] = value
    return found, None


def _memory(entry: Mapping[str, str], suffix: str) -> Decimal | None:
    value = entry.get(suffix)
    return None if value is None else quantity(value)


def _nv_fractions_problem(pod: Any, settings: Settings) -> str | None:
    """KAI v0.18's ValidateGPUFractionRequest, in its order (rule numbers of docs/schedulers/kai.md)."""
    notes = annotations(pod)
    mem_key, frac_key = settings.gpu_memory_annotation, settings.gpu_fraction_annotation
    memory, fraction = notes.get(mem_key) or None, notes.get(frac_key) or None
    per_container, invalid = nv_fractions(pod)
    if invalid:
        return invalid
    requested = {c: e for c, e in per_container.items() if _REQUEST in e or _LIMIT in e}
    if not requested and memory is None and fraction is None:
        devices = notes.get(kai_keys.GPU_FRACTION_DEVICES_ANNOTATION)
        if devices is not None:
            return (f"{kai_keys.MSG_V18_DEVICES_WITHOUT_FRACTION}: {kai_keys.GPU_FRACTION_DEVICES_ANNOTATION}: "
                    f"{_q(devices)}; add {frac_key} or a {kai_keys.NV_FRACTIONS_PREFIX}<container>{_REQUEST} annotation")
        return None
    if requested:
        names = {_dict(c).get("name") for field in ("initContainers", "containers")
                 for c in _list(_dict(_dict(pod).get("spec")).get(field))}
        for container in per_container:
            if container not in names:
                return kai_keys.MSG_V18_NO_CONTAINER.format(container=clip(container))
        for container, entry in requested.items():
            request, limit = _memory(entry, _REQUEST), _memory(entry, _LIMIT)
            if request is not None and limit is not None and request > limit:
                return (f"{kai_keys.MSG_V18_REQUEST_OVER_LIMIT.format(container=clip(container))} "
                        f"({_q(entry[_REQUEST])} > {_q(entry[_LIMIT])})")
        if len(per_container) > 1:
            return (f"{kai_keys.MSG_V18_MULTIPLE_CONTAINERS}: {', '.join(_q(c) for c in list(per_container)[:5])}; "
                    f"share a GPU from one container")
        named = notes.get(kai_keys.GPU_FRACTION_CONTAINER_ANNOTATION)
        container = next(iter(per_container))
        if named and named != container:
            return kai_keys.MSG_V18_CONTAINER_NAME.format(name=clip(named), container=clip(container))
    whole = whole_gpu_requests(pod, settings)
    if whole:  # (v0.18: gpu-memory and the per-container memory are fractions too)
        key, value = ((frac_key, fraction) if fraction is not None else (mem_key, memory) if memory is not None else
                      next((f"{kai_keys.NV_FRACTIONS_PREFIX}{c}{x}", e[x]) for c, e in requested.items()
                           for x in (_REQUEST, _LIMIT) if x in e))
        return _whole_and_shared(whole[0], key, value, settings)
    if any(_LIMIT in e for e in requested.values()) and (fraction is not None or memory is not None):
        return (f"{kai_keys.MSG_V18_LIMIT_WITH_LEGACY}: {frac_key if fraction is not None else mem_key}: "
                f"{_q(fraction if fraction is not None else memory)}; keep the per-container annotations only")
    if fraction is not None and memory is not None:
        return (f"{kai_keys.MSG_V18_FRACTION_AND_MEMORY}: annotations {mem_key}: {_q(memory)} and {frac_key}: "
                f"{_q(fraction)}; keep only one of them")
    if memory is not None and requested and _WHOLE_NUMBER.fullmatch(memory.strip()) and int(memory.strip()) > 0:
        entry = next(iter(requested.values()))
        value = entry.get(_REQUEST, entry.get(_LIMIT))
        if quantity(value) != int(memory.strip()) * _MIB:
            return kai_keys.MSG_V18_MEMORY_MISMATCH.format(request=clip(str(value)), annotation=mem_key,
                                                           mib=int(memory.strip()))
    return None
