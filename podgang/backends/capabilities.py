"""What only some gang schedulers have, each an optional capability of a
:class:`podgang.backends.base.Backend`: subgroups, KAI's segments and topology, the
scheduler's own per-gang settings, what the never-placed verdicts ask about queues and
nodes, a scheduler that evicts or forgets gangs itself, a gang's minimum resources, and an
object that holds several gangs.

Each class's defaults say "this scheduler has none of it", so every caller may ask any
backend; a backend that has the capability overrides its members. Kept apart from the
core so that what a new scheduler must answer (``base.py``) stays short. No I/O.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

from podgang import nodes, quantities
from podgang.backends.model import (PRIORITY_CLASSES, ClusterFacts, GangSource, Subgroup, common_facts, escape_key,
                                    string_value)
from podgang.objects import Resource, as_dict, metadata


class Subgroups:
    """Subgroups inside a gang (KAI's ``subGroups``, Volcano's ``minTaskMember``), and a tree
    of them (KAI): where a pod names its subgroup, and how a PodGroup holds them."""

    #: where a pod names its subgroup, ``(section, key)``; None: the scheduler has no subgroups
    subgroup_key: tuple[str, str] | None = None

    def subgroup_of(self, pod: Any) -> str | None:
        """The pod's subgroup inside its gang, where the scheduler has subgroups."""
        if self.subgroup_key is None:
            return None
        return string_value(pod, *self.subgroup_key) or None

    def with_subgroup(self, pod: Mapping[str, Any], patch: list[dict[str, Any]],
                      subgroup: str | None, *, over_own: bool = False) -> list[dict[str, Any]]:
        """``patch`` (the pod's membership operations) plus what names the pod's
        ``subgroup``; unchanged when the scheduler has no subgroups or the pod names
        one itself (a pod template that sets it keeps its own) — unless ``over_own``:
        a replica's leaf replaces its template's role."""
        own = self.subgroup_of(pod)
        if self.subgroup_key is None or not subgroup or own == subgroup or (own is not None and not over_own):
            return patch
        section, key = self.subgroup_key
        out = [dict(op) for op in patch]
        for op in out:  # a section the membership patch creates: put the subgroup in it too
            if op.get("op") == "add" and op.get("path") in ("/metadata", f"/metadata/{section}"):
                value = dict(op["value"])
                if op["path"] == "/metadata":
                    value[section] = {**as_dict(value.get(section)), key: subgroup}
                else:
                    value[key] = subgroup
                op["value"] = value
                return out
        md = pod.get("metadata")
        if not isinstance(md, dict):
            return [*out, {"op": "add", "path": "/metadata", "value": {section: {key: subgroup}}}]
        if not isinstance(md.get(section), dict):
            return [*out, {"op": "add", "path": f"/metadata/{section}", "value": {key: subgroup}}]
        return [*out, {"op": "add", "path": f"/metadata/{section}/{escape_key(key)}", "value": subgroup}]

    def subgroups_of(self, podgroup: Any) -> dict[str, int] | None:
        """The subgroups a PodGroup holds (name -> minimum); None when the scheduler
        cannot express subgroups (its gang has only the summed minimum)."""
        return None

    #: whether the scheduler holds a tree of subgroups (a role of complete replicas, each a
    #: leaf with its own minimum): KAI. Elsewhere a role is one flat part at its pod total.
    holds_trees: bool = False

    def subgroup_tree_of(self, podgroup: Any) -> tuple[int | None, tuple[Subgroup, ...]] | None:
        """The root's minimum of subgroups (None: it counts pods) and every subgroup a
        PodGroup holds, parents included; None when the scheduler has no subgroups."""
        flat = self.subgroups_of(podgroup)
        if flat is None:
            return None
        return None, tuple(Subgroup(n, v if isinstance(v, int) else 0) for n, v in flat.items())

    def is_users_tree(self, podgroup: Any) -> bool:
        """Whether a PodGroup holds a tree (a root or a subgroup counting subgroups) —
        on a hand-made group podgang did not write it, the user's own."""
        return False

    def subgroups_patch(self, podgroup: Any, subgroups: Sequence[Subgroup],
                        min_subgroup: int | None = None) -> dict[str, Any] | None:
        """A merge patch that gives a live PodGroup exactly ``subgroups`` (and, for a
        tree, the root's ``min_subgroup``); None when the scheduler cannot express them."""
        return None

    #: whether the scheduler ignores a pod naming a subgroup its PodGroup does not list
    #: (KAI): such a pod is given its subgroup key only once the group lists it
    subgroups_must_be_listed: bool = False


class Segments:
    """KAI's segments and topology: a role split into consecutive pods placed together."""

    def segment_size(self, objs: Sequence[Any]) -> tuple[int | None, str, str | None]:
        """The size of the segments the scheduler splits a role into (consecutive pods by
        index, each segment a leaf of its own), read from ``objs`` in the scheduler's order
        (a pod, its pod template, its workload): (size, where it is written, None), or
        (None, "", what is wrong with it), or (None, "", None) when none is asked for."""
        return None, "", None

    def segment_topology(self, objs: Sequence[Any], top: Any = None) -> tuple[tuple[str, str], ...]:
        """Where each segment's pods must be placed (:attr:`Subgroup.topology`), read from
        ``objs`` (a pod, its template) and the workload ``top``, as the scheduler reads it;
        empty when none is asked for."""
        return ()

    def role_topology(self, template: Any) -> tuple[tuple[tuple[str, str], ...], str | None]:
        """Where one role's pods must be placed together (:attr:`Subgroup.topology`), read
        from the role's pod template as the scheduler reads it (KAI: a Ray head's or worker
        group's), and what is wrong with it; ((), None) when none is asked for."""
        return (), None


class GangSettings:
    """The scheduler's own per-gang settings (queue, priority class, ...), read where its
    own grouper reads them, and the size pins its annotations set."""

    def gang_options(self, source: GangSource) -> dict[str, Any]:
        """The scheduler's own per-gang settings, as :class:`GangSpec` fields, read
        from ``source`` (its pods, pod templates and owners). Empty when the scheduler
        has none."""
        return {}

    def size_pin(self, workload: Any) -> tuple[int | None, str]:
        """The gang size the scheduler's own annotation on a workload sets (KAI's batch
        min-member annotation on a Job): ``(size, where)``, ``(None, problem)``
        for a value the scheduler ignores, ``(None, "")`` when there is none."""
        return None, ""

    def parts_pin(self, workload: Any) -> tuple[int | None, str]:
        """How many of a workload's parts (its roles, when they are a tree) the scheduler's
        own annotation on it asks for at least (KAI's batch-min-member on a JobSet: its
        group's root ``minSubGroup``), as :meth:`size_pin` says it."""
        return None, ""

    def role_pin(self, role: Any) -> tuple[int | None, str]:
        """The same for one role of a workload's gang (a :class:`podgang.kinds.Role`: a
        JobSet's replicated job, whose Job template KAI reads), for all its copies."""
        return None, ""

    #: whether :meth:`gang_options` reads every label and annotation of the top owner
    #: (the grouper then keeps them in its cache)
    reads_owner_metadata: bool = False

    def live_settings(self, podgroup: Any) -> dict[str, Any]:
        """The settings a live PodGroup holds that the scheduler reads (KAI's queue, which is
        never moved; a hand-made group's, which are the user's), as :meth:`gang_options` spells
        them: what the verdicts judge once the group exists."""
        return {}

    #: the scheduler's own pod-grouper, whose groups podgang takes over (adopts) rather than
    #: making a second one beside them; None: the scheduler has none
    peer_grouper: str | None = None

    def made_by_peer_grouper(self, podgroup: Any, owner_uid: str) -> bool:
        """Whether ``podgroup`` is what the scheduler's own pod-grouper made for the top owner
        of uid ``owner_uid`` (never true of a group podgang made)."""
        return False

    #: the annotations :meth:`opted_out` reads on an owner (what an owner looked up must keep)
    opt_out_annotations: tuple[str, ...] = ()

    def opted_out(self, obj: Any, is_pod: bool) -> str | None:
        """Why the scheduler's own grouping was told to leave this pod (``is_pod``) or owner
        alone — podgang, standing in for it, does too — or None (most schedulers: never)."""
        return None

    def settings_drift(self, podgroup: Any, options: Mapping[str, Any]) -> list[str]:
        """What differs between a live group podgang made and the settings it would give
        it now, that is never changed on a live group (KAI's queue); said, not written."""
        return []

    #: the PodGroup spec fields that hold the gang's queue and its priority class, where
    #: the scheduler has them
    queue_field: str | None = None
    priority_field: str | None = None

    def written_options(self, podgroup: Any) -> dict[str, Any]:
        """The queue and priority class a PodGroup holds as written (a hand-made group's
        own, which podgang never changes), in :meth:`gang_options`' keys."""
        found = as_dict(as_dict(podgroup).get("spec"))
        out: dict[str, Any] = {}
        for option, field_name in (("queue", self.queue_field), ("priority_class", self.priority_field)):
            if field_name is not None and isinstance(found.get(field_name), str) and found[field_name]:
                out[option] = found[field_name]
        return out


class Feasibility:
    """What the never-placed verdicts (:mod:`podgang.feasibility`) ask a scheduler: the
    cluster facts it reads, and how it counts a gang against its queues and nodes."""

    #: cluster-scoped resources :class:`ClusterFacts` are read from for this backend
    #: (PriorityClasses, queues, nodes); the grouper watches them, the webhook lists them
    fact_resources: tuple[Resource, ...] = (PRIORITY_CLASSES, nodes.NODES)

    def cluster_facts(self, found: Mapping[str, Any]) -> ClusterFacts:
        """:class:`ClusterFacts` from the objects of :attr:`fact_resources` (kind ->
        list of objects, or None when that kind could not be read)."""
        return common_facts(found)

    #: the scheduler's name in messages
    scheduler_title: str = "the scheduler"

    def queue_demand(self, parts: Iterable[tuple[int, Any]], facts: ClusterFacts | None = None) -> dict[str, Decimal]:
        """What a gang's minimum pods ``parts`` ((how many, pod or template)) count against
        its queue, in the units of :class:`QueueFacts` (by default: their requests), given
        what is known of the cluster."""
        return quantities.gang_requests(parts)

    def node_requests(self, pod_or_template: Any) -> dict[str, Decimal]:
        """What one pod takes of a node's allocatable resources (by default its requests)."""
        return quantities.pod_requests(pod_or_template)

    def node_pool(self, pod_or_template: Any) -> dict[str, str]:
        """Node labels the scheduler adds to a pod's node selector (KAI's node pool)."""
        return {}

    def non_preemptible(self, options: Mapping[str, Any], facts: ClusterFacts) -> str | None:
        """Why the scheduler never lets this gang go over its queue's quota (it may not be
        preempted: KAI's rule), or None when it may (or the scheduler has no such rule)."""
        return None

    def queue_words(self, resource: str, amount: Decimal) -> str:
        """``amount`` of ``resource`` as a queue counts it, for a message."""
        return f"{resource} {quantities.format_quantity(amount)}"

    def queue_fix(self, queue: str, bound: str, resource: str, amount: Decimal) -> str:
        """The change to queue ``queue`` that lets ``amount`` of ``resource`` through its ``bound``
        (``quota`` or ``limit``)."""
        return f"raise the {bound} of queue {queue} to at least {self.queue_words(resource, amount)}"

    def queue_verdict_words(self, bound: str) -> str:
        """What the scheduler itself says of a gang over a queue's ``bound``."""
        return ""


class OwnEviction:
    """A scheduler that acts on a gang by itself over time: evicts a stale one, or does not
    try a rejected one again when room appears."""

    #: seconds after which a gang held whole with every member unbound gets its PodGroup
    #: touched, for a scheduler that does not try it again when room appears (None: never)
    wake_interval: float | None = None

    def evicts_itself(self, podgroup: Any) -> str | None:
        """Why the scheduler itself evicts what is left of this stale gang (and podgang
        must not as well), or None when podgang is the one evictor."""
        return None

    #: the PodGroup field that sets how long the scheduler waits before it evicts a stale gang
    #: itself (None: it never does)
    eviction_grace_field: str | None = None

    def grace_taken_over(self, podgroup: Any, spec_patch: Mapping[str, Any]) -> str | None:
        """The grace period a user gave the scheduler's own eviction of ``podgroup`` that
        ``spec_patch`` (podgang's) turns off to evict the gang itself, or None: podgang keeps
        it as its own grace for the gang, so that it is never lost."""
        return None


class MinResources:
    """A PodGroup that says the resources its gang needs at least (Volcano's and
    coscheduling's ``minResources``)."""

    #: the spec field that holds the resources the gang needs at least (Volcano's and
    #: coscheduling's ``minResources``); None: the scheduler reads none
    min_resources_field: str | None = None

    def min_resources_for(self, minimum: Sequence[tuple[int, Any]] | None) -> dict[str, str] | None:
        """The resources a gang needs at least — Σ its minimum pods × their requests, as
        Volcano's and coscheduling's own controllers compute them — from ``minimum``, the
        pods it needs as (how many, a pod or pod template); None when the scheduler reads
        none, the pods are not known, or they request nothing."""
        if self.min_resources_field is None or minimum is None:
            return None
        return quantities.resource_list(quantities.gang_requests(minimum)) or None

    def min_resources_of(self, podgroup: Any) -> Any:
        """The resources a PodGroup says its gang needs (as written), None when it says none."""
        if self.min_resources_field is None:
            return None
        return as_dict(as_dict(podgroup).get("spec")).get(self.min_resources_field)

    def min_resources_patch(self, podgroup: Any, wanted: Mapping[str, str]) -> dict[str, Any] | None:
        """A merge patch that gives a live PodGroup exactly ``wanted`` as its minimum
        resources; None when the scheduler reads none."""
        if self.min_resources_field is None:
            return None
        gone = {name: None for name in as_dict(self.min_resources_of(podgroup)) if name not in wanted}
        return {"spec": {self.min_resources_field: {**gone, **wanted}}}


class GangHolders:
    """An object that holds several gangs (a 1.35 Workload's pod groups). Every other
    scheduler's PodGroup is one gang of the same name: these defaults."""

    #: where its PodGroups live (the core's)
    podgroup: Resource

    def holder_name(self, group: str) -> str:
        """The name of the object that holds gang ``group``."""
        return group

    def name_parts(self, group: str) -> tuple[str, ...]:
        """The object names gang ``group`` is made of (each must be a valid name)."""
        return (group,)

    def gangs_in(self, podgroup: Any) -> tuple[str, ...]:
        """The gangs one PodGroup object holds, by name."""
        name = metadata(podgroup).get("name")
        return (name,) if isinstance(name, str) and name else ()

    def gang_view(self, holder: Any, group: str) -> Any | None:
        """``holder`` (the object :meth:`holder_name` names) as gang ``group``'s PodGroup,
        None when it does not hold that gang."""
        return holder

    def missing_group(self, group: str, namespace: str, holder: Any | None) -> str:
        """What is said of gang ``group`` when it does not exist (``holder``: the object that
        should hold it, when that exists)."""
        return f"{self.podgroup.kind} {group} not found in namespace {namespace}"
