"""Scheduler backends: one module per gang scheduler, all behind
:class:`podgang.backends.base.Backend`. Adding a scheduler is one module and one
entry in :data:`BACKENDS`."""

from __future__ import annotations

from podgang.backends.base import Backend, GangSpec, Resize
from podgang.backends.kai import KAI

BACKENDS: dict[str, Backend] = {KAI.name: KAI}

__all__ = ["BACKENDS", "KAI", "Backend", "GangSpec", "Resize"]
