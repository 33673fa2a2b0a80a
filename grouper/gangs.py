"""What the grouper keeps between looks: its work items, and one record per gang.

A worker is handed a PodGroup to reconcile (``(GROUP, "namespace/group")``), a pod to
backfill (``(POD_KEY, "namespace/pod")``) or a gang whose news is due (``(NEWS, gang
key)``). Whatever the grouper remembers of a gang from one look to the next — what its
workloads contributed, the size it was judged by, when that went down, the verdicts it
said, its eviction — sits in that gang's :class:`GangRecord`, so forgetting a gang is
forgetting one record (:meth:`GangRecords.forget`), never a dict missed among many.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields
from typing import Iterator

GROUP = "g"
POD_KEY = "p"
NEWS = "b"  # say what the grouper did for gangs (created groups, backfilled pods): one event per namespace


@dataclass
class GangRecord:
    """What the grouper remembers of one gang between its looks."""

    #: what each workload contributed to its size at the last look (None: not looked at yet),
    #: and which of them were pinned: a size change is said as the difference
    contributions: dict[str, int] | None = None
    pinned: frozenset[str] = frozenset()
    observed_min: int | None = None  # the size it was judged by at the last look
    lowered_at: float | None = None  # when that size last went down: a scale-down settling
    orphan_seen: float | None = None  # when its group was first seen with nothing naming it
    woken: float | None = None  # when its held gang was last woken (a scheduler that waits for events)
    never: dict[str, str] = field(default_factory=dict)  # never-placed verdicts said of it: kind -> message
    never_on_group: dict[str, str] = field(default_factory=dict)  # ... the ones said on its PodGroup
    gauged: frozenset[str] = frozenset()  # its roles that have a complete-replicas gauge
    #: while its reconcile writes its group: the resourceVersion the watch brought meanwhile ("": none)
    writing: str | None = None
    #: its evictions running: of the whole gang (key None), or of one broken replica (its leaf)
    evicting: dict[str | None, asyncio.Task] = field(default_factory=dict)

    def idle(self) -> bool:
        """Nothing remembered: the record may go."""
        return all(getattr(self, f.name) == getattr(_EMPTY, f.name) for f in fields(self))


_EMPTY = GangRecord()


class GangRecords:
    """The records of the gangs the grouper remembers anything of, by gang key. A record
    that holds nothing any more is dropped (:meth:`tidy`): memory stays bounded by the gangs
    that exist."""

    def __init__(self) -> None:
        self._by_key: dict[str, GangRecord] = {}

    def get(self, key: str) -> GangRecord | None:
        return self._by_key.get(key)

    def of(self, key: str) -> GangRecord:
        """The gang's record, made when it has none."""
        record = self._by_key.get(key)
        if record is None:
            record = self._by_key[key] = GangRecord()
        return record

    def tidy(self, key: str) -> None:
        record = self._by_key.get(key)
        if record is not None and record.idle():
            del self._by_key[key]

    def forget(self, key: str, *names: str) -> None:
        """Forget these fields of a gang's record (every field: the whole record)."""
        record = self._by_key.get(key)
        if record is None:
            return
        for name in names or tuple(f.name for f in fields(GangRecord)):
            setattr(record, name, getattr(_EMPTY, name) if name not in ("never", "never_on_group", "evicting")
                    else type(getattr(_EMPTY, name))())
        self.tidy(key)

    def __iter__(self) -> Iterator[tuple[str, GangRecord]]:
        return iter(list(self._by_key.items()))

    def __len__(self) -> int:
        return len(self._by_key)

    def never_placed(self) -> list[str]:
        """The gangs said never placed."""
        return [key for key, record in self._by_key.items() if record.never]

    def evictions(self) -> list[asyncio.Task]:
        """Every eviction running."""
        return [task for record in self._by_key.values() for task in record.evicting.values()]
