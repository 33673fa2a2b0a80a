"""Scheduler backends: one module per gang scheduler, all behind
:class:`podgang.backends.base.Backend`. Adding a scheduler is one module and one
entry in :data:`BACKENDS`.

``native`` is registered with its ``v1alpha2`` (Kubernetes 1.36) dialect; a
process that reaches an apiserver asks discovery which version is served
(:func:`podgang.backends.native.native_version`: ``v1beta1``, ``v1alpha2`` or 1.35's
``v1alpha1`` Workloads) and uses ``native_backend(version)`` instead.
"""

from __future__ import annotations

from podgang.backends.base import Backend, GangSpec, Resize
from podgang.backends.coscheduling import COSCHEDULING
from podgang.backends.kai import KAI
from podgang.backends.native import NATIVE, NativeBackend, NativeWorkloads, native_backend, native_version
from podgang.backends.volcano import VOLCANO

BACKENDS: dict[str, Backend] = {b.name: b for b in (KAI, VOLCANO, COSCHEDULING, NATIVE)}

__all__ = ["BACKENDS", "COSCHEDULING", "KAI", "NATIVE", "VOLCANO", "Backend", "GangSpec", "NativeBackend",
           "NativeWorkloads", "Resize", "native_backend", "native_version"]
