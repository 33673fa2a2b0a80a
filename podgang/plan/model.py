"""What a plan is made of: the gangs it plans, the pods and workloads it places, its findings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping


from podgang import rules
from podgang.backends import Backend
from podgang.manifests import Source
from podgang.objects import OwnerRef


UNKNOWN_UID = "<uid>"


MAX_SCALE = rules.MAX_MIN_MEMBER


#: stands in for a UID the cluster has not assigned yet (a valid name part as long as a
#: UID, so that a name's length is what the cluster's will be; never shown: <uid>)
_UID_TOKEN = "x0uid0x"


_UID_DIGITS = 36 - len(_UID_TOKEN)


UNKNOWN_SUFFIX = "<random>"


#: stands in for the random part the apiserver adds to a ``generateName`` (5 characters, as
#: long as the real one; its digits tell two such objects apart; never shown: <random>)
_SUFFIX_TOKEN = "zq"


_SUFFIX_DIGITS = 5 - len(_SUFFIX_TOKEN)


class ScaleError(ValueError):
    """A ``--scale`` that names nothing in the manifests, or cannot apply."""


@dataclass
class Member:
    """A pod, or a workload's pod template, and the gang it joins."""

    source: Source
    what: str  # "pod default/app-server" / "deployment default/web"
    namespace: str
    group: str | None = None
    why: str = ""
    skipped: str | None = None
    pods: int = 1
    no_group: str | None = None  # why it gets no group (or none whose name can be known here)
    subgroup: str | None = None  # a pod's subgroup in its gang, as the webhook labels it


@dataclass
class PlannedGroup:
    namespace: str
    name: str
    min_member: rules.MinMember
    origin: str  # "hand-made" | "owned" | "owner-less"
    exists: bool = True  # False: a hand-made group no manifest defines
    owner: OwnerRef | None = None
    owner_text: str = ""
    defined_at: Source | None = None
    defined_obj: dict[str, Any] | None = None
    cluster_min_member: int | None = None  # minMember written in the manifest, if defined
    per_run: bool = False  # CronJob: one such group per Job run
    random_name: bool = False  # named from generateName plus the webhook's random suffix
    before: rules.MinMember | None = None  # with --scale: the value before
    backend: Backend | None = None  # whose PodGroup it is (None: the first mapped backend)
    options: dict[str, Any] = field(default_factory=dict)  # the backend's own per-gang settings
    subgroups: tuple[rules.Subgroup, ...] = ()  # one per workload of a shared hand-made group, or a tree
    min_subgroup: int | None = None  # a tree's root: the parts it needs (KAI's minSubGroup)
    users_tree: str | None = None  # a hand-made group's own tree, which podgang leaves as written
    adopted: str | None = None  # made by the scheduler's own pod-grouper (KAI's): podgang takes it over

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def name_known(self) -> bool:
        return (UNKNOWN_UID not in self.name and UNKNOWN_SUFFIX not in self.name and not self.per_run
                and not self.random_name)


@dataclass
class Finding:
    code: str  # what kind of finding, for scripts (podgang.plan_codes)
    source: Source | None
    what: str
    message: str


@dataclass
class Plan:
    members: list[Member] = field(default_factory=list)
    groups: dict[tuple[str, str], PlannedGroup] = field(default_factory=dict)
    denials: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    #: what the plan could not check, and why (no Queues given, a cluster that could not be read …)
    not_checked: list[Finding] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Known:
    """What the plan is told of the cluster besides the manifests."""

    #: fact objects read from the cluster, by resource label: complete lists
    facts: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the fact resources the cluster was asked for and could not give: label -> why
    unread: Mapping[str, str] = field(default_factory=dict)
    #: where they were read (``--kubeconfig PATH``)
    cluster: str = ""
    #: fact resources (by plural: ``queues``) the user says the manifests hold all of
    complete: Collection[str] = ()


#: what the never-placed verdicts check with the facts of each kind
CHECKS = {
    "Queue": "gangs' queues (they exist, are leaves, hold the gangs within quota and limit)",
    "PriorityClass": "the PriorityClasses pods name (they exist, whether a gang may be preempted)",
    "Node": "whether gangs fit on the nodes they may use",
}


#: the most gangs named in one note
GANGS_NAMED = 3
