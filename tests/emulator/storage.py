"""The emulator's store: a table per resource, watchers with their history, the
requests it recorded and the faults it was told to inject.
"""

from __future__ import annotations

import asyncio
import bisect
import re
from dataclasses import dataclass, field
from typing import Any



from tests.emulator.resources import Obj, ResourceType
from tests.emulator.selectors import ListFilter
from tests.emulator.wire import metadata_of


# --------------------------------------------------------------------------- storage

@dataclass
class WatchEvent:
    rv: int
    type: str
    obj: Obj
    old: Obj | None = None


class Watcher:
    """One open watch connection; events are queued by the store, written by the handler."""

    def __init__(self, res: ResourceType, flt: ListFilter, bookmarks: bool) -> None:
        self.res, self.filter, self.bookmarks = res, flt, bookmarks
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.idle = asyncio.Event()
        self.idle.set()

    def translate(self, ev: WatchEvent) -> tuple[str, Obj] | None:
        """Apply the filter the way the apiserver's watch cache does (objects leaving the
        selection become DELETED, objects entering it become ADDED)."""
        now = self.filter(ev.obj)
        if ev.type != "MODIFIED":
            return (ev.type, ev.obj) if now else None
        before = self.filter(ev.old)
        if now:
            return ("MODIFIED" if before else "ADDED", ev.obj)
        if before:
            old = dict(ev.old or {})
            old["metadata"] = {**metadata_of(old), "resourceVersion": str(ev.rv)}
            return ("DELETED", old)
        return None

    def offer(self, item: Any) -> None:
        self.queue.put_nowait(item)
        self.idle.clear()


@dataclass
class Table:
    """Objects, history and watchers of one resource."""

    res: ResourceType
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    history: list[WatchEvent] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    floor: int = 0  # every event with rv > floor is still in history
    watchers: set[Watcher] = field(default_factory=set)
    # the keys in list order, built by the first list and kept in step after it, so a
    # page is a bisect and a short walk instead of a sort of the whole table
    _order: list[tuple[str, str]] | None = field(default=None, repr=False)

    def set(self, obj: Obj) -> None:
        key = object_key(obj)
        if self._order is not None and key not in self.objects:
            bisect.insort(self._order, key)
        self.objects[key] = obj

    def discard(self, key: tuple[str, str]) -> None:
        if self.objects.pop(key, None) is not None and self._order is not None:
            del self._order[bisect.bisect_left(self._order, key)]

    def ordered_keys(self) -> list[tuple[str, str]]:
        if self._order is None:
            self._order = sorted(self.objects)
        return self._order


def object_key(obj: Obj) -> tuple[str, str]:
    meta = metadata_of(obj)
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any
    headers: dict[str, str]
    at: float = field(default_factory=lambda: asyncio.get_running_loop().time())  # when it arrived


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int | None
    body: Obj | None
    headers: dict[str, str] | None


@dataclass
class Call:
    """Everything a verb handler needs about the request it serves."""

    table: Table
    namespace: str | None
    name: str | None
    sub: str | None
    query: dict[str, str]
    record: RecordedRequest
