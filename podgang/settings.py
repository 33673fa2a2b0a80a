"""podgang's configuration as plain data.

Every key, name and number in the product contract is a default here; the
processes build one :class:`Settings` from flags and environment and hand it to
the rules. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from podgang.backends import KAI, Backend
from podgang.backends import kai


@dataclass(frozen=True)
class Settings:
    backend: Backend = KAI
    scheduler_names: tuple[str, ...] = (kai.SCHEDULER_NAME,)
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    # podgang's own keys
    min_member_annotation: str = "podgang.io/min-member"
    grace_period_annotation: str = "podgang.io/staleness-grace-period"
    skip_label: str = "podgang.io/skip"
    managed_by_label: str = "podgang.io/managed-by"
    managed_by_value: str = "podgang"
    # GPU keys (KAI's GPU sharing, whatever the backend)
    gpu_memory_annotation: str = kai.GPU_MEMORY_ANNOTATION
    gpu_fraction_annotation: str = kai.GPU_FRACTION_ANNOTATION
    gpu_resource: str = "nvidia.com/gpu"
    # naming
    group_prefix: str = "pg"
    # timing (seconds)
    staleness_grace_period: float = 60.0
    orphan_timeout: float = 120.0

    def with_changes(self, **changes) -> "Settings":
        return replace(self, **changes)

    @property
    def managed_labels(self) -> dict[str, str]:
        """Labels podgang puts on every PodGroup it creates."""
        return {self.managed_by_label: self.managed_by_value}


DEFAULT = Settings()
