"""A pod's owners, walked up by controller references to the workload that makes it.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from typing import Any, Mapping, Sequence

from podgang.kinds import gang_stops_at, resource_for
from podgang.objects import OwnerRef, annotations, metadata
from podgang.objects import as_dict as _dict
from podgang.objects import as_list as _list


def controller_ref(obj: Any) -> OwnerRef | None:
    """The ownerReference marked ``controller: true``, else the first one, else None
    (of those naming a kind and a name)."""
    chosen = None
    for r in _list(metadata(obj).get("ownerReferences")):
        if type(r) is not dict and not isinstance(r, AbcMapping):
            continue
        if not (r.get("kind") and r.get("name")):
            continue
        if r.get("controller") is True:
            chosen = r
            break
        if chosen is None:
            chosen = r
    return None if chosen is None else _owner_ref(chosen)


_OWNER_REFS: dict[tuple[str, str, str, str, bool], OwnerRef] = {}


_MAX_OWNER_REFS = 4096  # the owners of the pods being looked at; a bigger memo only costs memory


def _owner_ref(ref: Mapping[str, Any]) -> OwnerRef:
    """``OwnerRef.from_dict(ref)``, one shared (frozen) object per owner: the grouper asks
    for every pod's owner many times per reconcile."""
    key = (ref.get("apiVersion"), ref.get("kind"), ref.get("name"), ref.get("uid"), ref.get("controller", False))
    if not all(type(v) is str for v in key[:4]) or type(key[4]) is not bool:
        return OwnerRef.from_dict(ref)  # a field missing or not of its type: not worth remembering
    found = _OWNER_REFS.get(key)  # type: ignore[arg-type]
    if found is None:
        if len(_OWNER_REFS) >= _MAX_OWNER_REFS:
            _OWNER_REFS.clear()  # owners come and go: start over rather than grow
        found = _OWNER_REFS[key] = OwnerRef.from_dict(ref)  # type: ignore[index]
    return found


def next_owner(obj: Any) -> OwnerRef | None:
    """The owner to follow upwards from ``obj``, or None when ``obj`` is the top.

    The gang belongs to the highest owner whose kind defines one
    (:func:`podgang.kinds.gang_stops_at`): a run stops the walk (a Job started by a CronJob,
    a RayService's cluster, a TrainJob's JobSet: every run is its own gang), and so does a
    workload of a known kind under a wrapper or schedule (an AppWrapper, a RayCronJob, any
    kind podgang does not know): that workload keeps the gangs of its own kind.
    """
    ref = controller_ref(obj)
    if ref is None:
        return None
    if gang_stops_at(obj, ref):
        return None
    return ref


def _same(ref: OwnerRef, obj: Any) -> bool:
    md = metadata(obj)
    if ref.uid and md.get("uid"):
        return ref.uid == md.get("uid")
    return ref.name == md.get("name") and ref.kind == _dict(obj).get("kind")


def top_owner(pod: Any, chain: Sequence[Any] = ()) -> OwnerRef | None:
    """The top of the pod's ownerReference chain.

    ``chain`` holds the owner objects already looked up, nearest first (the pod's
    owner, then its owner, ...). The walk stops at the first owner with no owner
    of its own, or at the last one given.
    """
    ref = next_owner(pod)
    if ref is None:
        return None
    for obj in chain:
        if not _same(ref, obj):
            break
        higher = next_owner(obj)
        if higher is None:
            return ref
        ref = higher
    return ref


def owner_to_look_up(pod: Any, chain: Sequence[Any] = ()) -> OwnerRef | None:
    """The next owner to fetch to finish the walk to the top owner, or None when done.

    Walks like :func:`top_owner`; an owner of a kind podgang cannot fetch (not in
    :data:`podgang.kinds.OWNER_KINDS`) is taken as the top.
    """
    ref = next_owner(pod)
    for obj in chain:
        if ref is None or not _same(ref, obj):
            break
        ref = next_owner(obj)
    if ref is None or resource_for(ref.api_version, ref.kind) is None:
        return None
    return ref


def chain_objects(pod: Any, chain: Sequence[Any]) -> list[Any]:
    """The owner objects of ``chain`` that belong to the pod's walk, in order."""
    out = []
    ref = next_owner(pod)
    for obj in chain:
        if ref is None or not _same(ref, obj):
            break
        out.append(obj)
        ref = next_owner(obj)
    return out
