"""What a gang scheduler's backend must answer, and nothing else.

podgang's rules decide *which* gang a pod joins and *how large* it must be; a
backend says how one scheduler spells that: where a pod carries its membership,
the patches that set it (at admission, or backfilled later), the PodGroup object
and its size field, and what happens when the size must change on a live group.
Everything outside ``podgang/backends/`` talks to a scheduler only through
:class:`Backend`, so a new scheduler is one new module: it answers the core below and
overrides only the optional capabilities it has (:mod:`podgang.backends.capabilities`).
The values they speak (:mod:`podgang.backends.model`) are importable from here too. No I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Mapping

from podgang.backends.capabilities import (Feasibility, GangHolders, GangSettings, MinResources, OwnEviction, Segments,
                                           Subgroups)
from podgang.backends.model import (PATCH, PRIORITY_CLASSES, REFUSE, REPLACE_WHEN_EMPTY, ClusterFacts, GangSource,
                                    GangSpec, QueueFacts, Resize, SchedulerVerdict, Subgroup, common_facts, escape_key,
                                    gang_spec, membership_change_message, min_pods, one_line, slim_fact, string_value,
                                    tree_shape)
from podgang.objects import Denial, Resource, as_dict

__all__ = ["PATCH", "PRIORITY_CLASSES", "REFUSE", "REPLACE_WHEN_EMPTY", "Backend", "ClusterFacts", "GangSource",
           "GangSpec", "QueueFacts", "Resize", "SchedulerVerdict", "Subgroup", "common_facts", "escape_key",
           "gang_spec", "membership_change_message", "min_pods", "one_line", "slim_fact", "string_value", "tree_shape"]


class Backend(Subgroups, Segments, GangSettings, Feasibility, OwnEviction, MinResources, GangHolders, ABC):
    """One gang scheduler's PodGroup and pod-membership dialect: the core every backend
    answers, plus the optional capabilities, which default to "none"."""

    #: the backend's name on the command line (``--backend SCHEDULER=NAME``)
    name: str
    #: where its PodGroups live
    podgroup: Resource
    #: pod (and pod template) labels and annotations the grouper must keep: the
    #: membership keys and the keys :meth:`gang_options` reads
    pod_label_keys: tuple[str, ...] = ()
    pod_annotation_keys: tuple[str, ...] = ()
    #: pod spec fields the grouper must keep (membership in the spec, the priority class)
    pod_spec_keys: tuple[str, ...] = ()
    #: the scheduler's verdict is read from the gang's pods (its PodGroup holds none)
    verdict_on_pods: bool = False
    #: (API group, kind) of the scheduler's own workloads, whose controller makes their
    #: PodGroup itself (Volcano's Job): podgang makes none, and says why
    own_workloads: Mapping[tuple[str, str], str] = {}

    # -- pod membership -------------------------------------------------------

    @abstractmethod
    def named_group(self, obj: Any) -> tuple[str, str] | Denial | None:
        """The group a pod or pod template names itself (a hand-made group) and the
        key that names it, None when it names none, a :class:`Denial` when its keys
        contradict each other."""

    @abstractmethod
    def group_of(self, pod: Any) -> str | None:
        """The group a pod already carries, whoever set it."""

    @abstractmethod
    def membership_patch(self, pod: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
        """JSONPatch operations that put ``pod`` into ``group`` at admission;
        empty when the pod already carries it."""

    @abstractmethod
    def backfill_patch(self, pod: Mapping[str, Any], group: str) -> dict[str, Any] | None:
        """A merge patch that puts an already created pod into ``group``, or None
        when the scheduler's membership cannot be set after creation."""

    def backfill(self, pod: Mapping[str, Any], group: str, subgroup: str | None = None,
                 over_own: bool = False) -> dict[str, Any] | None:
        """Everything a created pod lacks, as ONE merge patch: its membership in ``group``
        (:meth:`backfill_patch`) and, where the scheduler has subgroups and the pod names
        none (or ``over_own``: a replica's leaf over the role its template names), ``subgroup``;
        a key already holding its value is left out (so ``{}`` when the pod lacks nothing).
        None when the membership cannot be set after creation."""
        patch = self.backfill_patch(pod, group)
        if patch is None:
            return None
        md = {section: dict(values) for section, values in as_dict(patch.get("metadata")).items()}
        if subgroup and self.subgroup_key is not None and (over_own or self.subgroup_of(pod) is None):
            section, key = self.subgroup_key
            md.setdefault(section, {})[key] = subgroup
        lacking = {section: {k: v for k, v in values.items() if string_value(pod, section, k) != v}
                   for section, values in md.items()}
        lacking = {section: values for section, values in lacking.items() if values}
        rest = {k: v for k, v in patch.items() if k != "metadata"}
        return {**rest, "metadata": lacking} if lacking else rest

    @abstractmethod
    def needs_backfill(self, pod: Mapping[str, Any]) -> bool:
        """Whether a created pod lacks part of its membership."""

    @abstractmethod
    def without_membership(self, pod: Mapping[str, Any]) -> dict[str, Any]:
        """A shallow copy of ``pod`` without its membership (to find its natural gang)."""

    @abstractmethod
    def membership_change_problem(self, old_pod: Any, new_pod: Any) -> str | None:
        """Why an UPDATE may not make this change to a pod's membership, or None."""

    @abstractmethod
    def describe_membership(self, group: str) -> str:
        """What setting the membership wrote, for events: ``key=group set``."""

    def membership_problem(self, group: str) -> str | None:
        """Why a pod can never carry ``group`` in this scheduler (a name too long for
        the key that holds it), for a denial at admission; None when it can."""
        return None

    # -- PodGroups ------------------------------------------------------------

    def configured(self, options: Mapping[str, Any]) -> "Backend":
        """This backend with the process's backend-specific flags applied (KAI's default
        queue, say); itself when it has none."""
        return self

    @abstractmethod
    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        """A complete PodGroup object, ready to create."""

    @abstractmethod
    def min_member(self, podgroup: Any) -> int | None:
        """The PodGroup's current size, or None when it has none (or a bad one)."""

    def for_discovery(self, discovery: Mapping[str, Any] | None) -> "Backend":
        """This backend as the cluster serves it, from the discovery document of its
        PodGroup's API group (``GET /apis/<group>``; None when not served or unknown).
        A backend whose version depends on what is served returns that variant."""
        return self

    @abstractmethod
    def resize(self, podgroup: Any, value: int) -> Resize:
        """How to bring a live PodGroup to size ``value``."""

    def update_refused(self, old: Any, new: Any) -> str | None:
        """What the scheduler's own admission answers to updating live PodGroup ``old`` into
        ``new`` when it refuses it (its words), else None: podgang then does not send it,
        rather than send it again and again."""
        return None

    #: the PodGroup fields that hold the gang's size and subgroups (paths from the object's
    #: root): podgang writes them on the groups it makes, and another writer of any of them
    #: (``metadata.managedFields``) fights podgang for the gang's size
    size_fields: tuple[tuple[str, ...], ...] = ()

    #: what to tell the user about another writer of :attr:`size_fields` that is likely
    #: this scheduler's own (KAI's older pod-grouper); empty: nothing particular
    other_writer_hint: str = ""

    @abstractmethod
    def slim_podgroup_spec(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a PodGroup's spec the grouper keeps in its cache."""

    def scheduler_verdict(self, podgroup: Any) -> SchedulerVerdict | None:
        """What the scheduler last said about placing the gang (from the PodGroup's
        status), or None when it says nothing podgang can read."""
        return None

    def refusals(self, podgroup: Any) -> list[str]:
        """What the apiserver (or kubectl's strict validation) refuses in a PodGroup manifest
        as written, in its words; empty when it would be created."""
        return []

    def is_podgroup(self, obj: Any) -> bool:
        obj = as_dict(obj)
        return obj.get("kind") == self.podgroup.kind and obj.get("apiVersion") == self.podgroup.api_version

    @staticmethod
    def podgroup_metadata(gang: GangSpec) -> dict[str, Any]:
        """The metadata every backend's PodGroup carries."""
        md: dict[str, Any] = {"name": gang.name}
        if gang.namespace:
            md["namespace"] = gang.namespace
        if gang.labels:
            md["labels"] = dict(gang.labels)
        if gang.annotations:
            md["annotations"] = dict(gang.annotations)
        if gang.owner is not None:
            md["ownerReferences"] = [gang.owner.to_dict()]
        return md

    def __repr__(self) -> str:
        return f"<backend {self.name}: {self.podgroup.api_version} {self.podgroup.kind}>"

