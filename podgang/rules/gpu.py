"""GPU requests that contradict each other, in KAI's words.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any, Iterator, Mapping

from podgang import quantities
from podgang.backends.kai import keys as kai_keys
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
    """The first contradiction among a pod's GPU requests (spec §4), or None.

    The KAI-compatible message comes first, then which container, which values,
    and what to change.
    """
    notes = annotations(pod)
    mem_key, frac_key = settings.gpu_memory_annotation, settings.gpu_fraction_annotation
    memory, fraction = notes.get(mem_key), notes.get(frac_key)
    whole = whole_gpu_requests(pod, settings)
    # the order of KAI's own checks, so a pod with several problems gets KAI's message
    if fraction is not None and whole:
        return (
            f"{MSG_FRACTION_AND_GPU}: {whole[0]} and annotation {frac_key}: {_q(fraction)}; "
            f"remove {settings.gpu_resource} to share a GPU, or remove the {frac_key} annotation to use whole GPUs"
        )
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
