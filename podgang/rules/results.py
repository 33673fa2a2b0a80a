"""What the rules answer: the gang a pod joins (:class:`Gang`) and a gang's size (:class:`MinMember`).
"""

from __future__ import annotations

from dataclasses import dataclass

from podgang.objects import OwnerRef, annotations



@dataclass(frozen=True)
class Gang:
    """The PodGroup a pod belongs to, and why."""

    name: str
    source: str  # "hand-made" | "owner" | "owner-less"
    reason: str
    owner: OwnerRef | None = None  # the PodGroup's owner: the top owner (None for hand-made/owner-less)
    top_owner: OwnerRef | None = None
    subgroup: str | None = None
    #: ``subgroup`` is the pod's replica's leaf (``<role>-<index>``): the pod carries it from
    #: admission, over what its template names (its role, a parent the scheduler places no pod in)
    leaf: bool = False

    @property
    def hand_made(self) -> bool:
        return self.source == HAND_MADE

    @property
    def owner_less(self) -> bool:
        return self.source == OWNER_LESS


@dataclass(frozen=True)
class MinMember:
    """A gang's size and where the number comes from."""

    value: int
    reason: str
    pinned: bool = False
    #: the workload wants no pods (scaled to 0): the 1 is a floor, not a gang's size
    idle: bool = False


HAND_MADE = "hand-made"


#: the subgroup of the pods that name a hand-made group and have no owner
STANDALONE = "standalone"


OWNED = "owner"


OWNER_LESS = "owner-less"
