"""podgang's configuration as plain data.

Every key, name and number in the product contract is a default here; the
processes build one :class:`Settings` from flags and environment and hand it to
the rules. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from podgang.backends import KAI, Backend
from podgang.backends.kai import keys as kai_keys
from podgang.backends.kai import versions as kai_versions
from podgang.objects import as_dict

#: the scheduler a pod names when its spec names none
DEFAULT_SCHEDULER = "default-scheduler"


@dataclass(frozen=True)
class Settings:
    #: scheduler name -> the backend that speaks for it; a pod is in scope when its
    #: ``spec.schedulerName`` is one of these (several names may share a backend)
    backends: tuple[tuple[str, Backend], ...] = ((kai_keys.SCHEDULER_NAME, KAI),)
    excluded_namespaces: tuple[str, ...] = ("kube-system",)
    # podgang's own keys (each ``#:`` comment is its line in docs/reference/keys.md)
    #: read on a workload (or an owner above it: a CronJob for its runs) or a PodGroup: pins
    #: `minMember`; the grouper stops reconciling that group's size
    min_member_annotation: str = "podgang.io/min-member"
    #: read on a workload: its minimum inside a group several workloads share (its subgroup's
    #: `minMember`), or on a role's pod template; default its replicas
    min_available_annotation: str = "podgang.io/min-available"
    #: read on a workload or PodGroup: how long a stale gang may stay incomplete (`90s`, `5m`;
    #: `-1` never evicts)
    grace_period_annotation: str = "podgang.io/staleness-grace-period"
    #: read on a hand-made PodGroup several workloads share, `"prefill,decode"`: the roles (subgroup
    #: names) the gang needs before any of its pods is placed, each counted in its minimum even
    #: while no workload fills it yet
    required_roles_annotation: str = "podgang.io/required-roles"
    #: written on a hand-made PodGroup that declares its required roles: those no workload fills
    #: yet (the webhook names them to the pods that join it)
    awaited_roles_annotation: str = "podgang.io/awaited-roles"
    #: written on a PodGroup whose backend cannot change its size while it lives: the size
    #: podgang wants for it
    desired_size_annotation: str = "podgang.io/desired-min-member"
    #: written on a shared hand-made PodGroup: the subgroups podgang wrote into it (so that it
    #: removes only those once the group has one part again, never a user's own)
    subgroups_annotation: str = "podgang.io/subgroups"
    #: written on a hand-made PodGroup: the minResources podgang last wrote (it keeps a user's own)
    min_resources_annotation: str = "podgang.io/min-resources"
    #: written on a hand-made PodGroup: the minMember podgang follows its workloads with, as it last
    #: wrote or found it; a minMember below its members' total that is not this one is the
    #: user's elastic gang, left as written
    followed_size_annotation: str = "podgang.io/followed-min-member"
    #: written on a hand-made PodGroup at podgang's first look when its minMember is below its
    #: members' total and no member was scaled since the group was made: the user's elastic
    #: gang, kept as written from then on (remove it to have podgang judge the group again)
    elastic_size_annotation: str = "podgang.io/elastic-min-member"
    #: written on a PodGroup the scheduler's own pod-grouper made (KAI's) for a gang podgang gives the
    #: same name, when podgang takes it over instead of making a second one: who made it
    #: (`kai-pod-grouper`); podgang manages it from then on
    adopted_from_annotation: str = "podgang.io/adopted-from"
    #: read on a pod or workload, `"true"`: podgang leaves it alone (the webhooks' objectSelector too)
    skip_label: str = "podgang.io/skip"
    #: written on a PodGroup, `podgang`: podgang created it and may change or delete it
    managed_by_label: str = "podgang.io/managed-by"
    managed_by_value: str = "podgang"
    #: written on a PodGroup the webhook created at admission for an owner-less pod, `"true"`:
    #: until its pod is seen and adopts it, the grouper deletes it after `--admission-orphan-timeout`
    #: (30s) rather than `--orphan-timeout`
    admission_created_annotation: str = "podgang.io/created-by-admission"
    # the field managers podgang's writes are recorded under (metadata.managedFields):
    # a PodGroup's size written by any other manager is someone else fighting podgang
    grouper_field_manager: str = "podgang-grouper"
    webhook_field_manager: str = "podgang-webhook"
    # what an older podgang's writes were recorded under (kubernetes_asyncio's User-Agent):
    # still podgang's own on the groups it made, or each would be warned about after an upgrade
    legacy_field_manager: str = "OpenAPI-Generator"
    # GPU keys (KAI's GPU sharing, whatever the backend)
    gpu_memory_annotation: str = kai_keys.GPU_MEMORY_ANNOTATION
    gpu_fraction_annotation: str = kai_keys.GPU_FRACTION_ANNOTATION
    gpu_resource: str = "nvidia.com/gpu"
    # the KAI-Scheduler release whose rules podgang applies (GPU requests, semi-preemptible groups:
    # docs/schedulers/kai.md), one for the webhook, the grouper and `podgang plan` alike;
    # ``--kai-version auto`` leaves ``kai_version_auto`` set: each process then asks the cluster's
    # PodGroup CRD at start (podgang.discovery) and says why in ``kai_version_source``
    kai_version: str = kai_versions.DEFAULT_VERSION
    kai_version_auto: bool = True
    kai_version_source: str = f"the default ({kai_versions.DEFAULT_VERSION}: nothing says otherwise)"
    # naming
    group_prefix: str = "pg"
    # timing (seconds)
    staleness_grace_period: float = 60.0
    orphan_timeout: float = 120.0
    admission_orphan_timeout: float = 30.0  # a group the webhook made (admission_created_annotation)

    def with_changes(self, **changes) -> "Settings":
        return replace(self, **changes)

    @property
    def scheduler_names(self) -> tuple[str, ...]:
        """The scheduler names in scope, in the order they were given."""
        return tuple(name for name, _ in self.backends)

    @property
    def enabled_backends(self) -> tuple[Backend, ...]:
        """Every backend some scheduler name maps to, each once, in order."""
        enabled: dict[str, Backend] = {}
        for _, backend in self.backends:
            enabled.setdefault(backend.name, backend)
        return tuple(enabled.values())

    @property
    def default_backend(self) -> Backend:
        """The first mapped backend: how a PodGroup nothing else places is spelled."""
        return self.backends[0][1] if self.backends else KAI

    def backend_for(self, obj: Any) -> Backend | None:
        """The backend of a pod or pod template: the one its ``spec.schedulerName``
        maps to, None when that scheduler is not mapped (the pod is out of scope).
        The one accessor for "this pod's backend"."""
        scheduler = as_dict(as_dict(obj).get("spec")).get("schedulerName") or DEFAULT_SCHEDULER
        return next((backend for name, backend in self.backends if name == scheduler), None)

    @property
    def own_field_managers(self) -> tuple[str, ...]:
        """The field managers of podgang's own writes: the grouper's, the webhook's, and
        the name an older podgang wrote under."""
        return (self.grouper_field_manager, self.webhook_field_manager, self.legacy_field_manager)

    @property
    def managed_labels(self) -> dict[str, str]:
        """Labels podgang puts on every PodGroup it creates."""
        return {self.managed_by_label: self.managed_by_value}


DEFAULT = Settings()
