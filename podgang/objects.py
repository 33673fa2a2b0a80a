"""API objects as plain dicts: accessors that never raise, and the references
(an ownerReference, a REST resource) every layer passes around.

Everything podgang reads arrives as JSON from the apiserver or from a user's
manifest, so each accessor takes untrusted input and answers with an empty value
rather than an exception. No I/O, and no knowledge of any scheduler or workload.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, replace
from typing import Any, Iterator, Mapping

EMPTY: Mapping[str, Any] = {}


def as_dict(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    if type(value) is dict:  # the common case, and much cheaper than an ABC check
        return value
    return value if isinstance(value, AbcMapping) else EMPTY


def as_list(value: Any) -> list[Any]:
    return value if type(value) is list else []


def as_int(value: Any, default: int) -> int:
    """An integer field (never a bool), else ``default``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def str_map(value: Any) -> dict[str, str]:
    """A labels/annotations map; non-string entries are ignored."""
    return {k: v for k, v in as_dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def metadata(obj: Any) -> Mapping[str, Any]:
    return as_dict(as_dict(obj).get("metadata"))


def labels(obj: Any) -> dict[str, str]:
    return str_map(metadata(obj).get("labels"))


def annotations(obj: Any) -> dict[str, str]:
    return str_map(metadata(obj).get("annotations"))


def spec(obj: Any) -> Mapping[str, Any]:
    return as_dict(as_dict(obj).get("spec"))


def status(obj: Any) -> Mapping[str, Any]:
    return as_dict(as_dict(obj).get("status"))


def is_terminating(pod: Any) -> bool:
    return bool(metadata(pod).get("deletionTimestamp"))


def pod_phase(pod: Any) -> str:
    return str(as_dict(as_dict(pod).get("status")).get("phase") or "Pending")


def is_active(pod: Any) -> bool:
    """Counts toward a gang: bound to a node or running, and not terminating or finished."""
    if is_terminating(pod):
        return False
    phase = pod_phase(pod)
    if phase in ("Succeeded", "Failed"):
        return False
    return phase == "Running" or bool(as_dict(as_dict(pod).get("spec")).get("nodeName"))


MAX_QUOTED = 256  # characters of one user value a message or log line quotes (any valid name fits)


def clip(text: str, limit: int = MAX_QUOTED) -> str:
    """``text``, or its first ``limit`` characters and how long it was: a 100 KB
    annotation value must not become a 100 KB denial, warning or log line."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def quoted(value: Any) -> str:
    """A value quoted for messages, the way kubectl users read them: "like this"
    (at most :data:`MAX_QUOTED` characters of it)."""
    if not isinstance(value, str):
        return clip(str(value))
    if len(value) <= MAX_QUOTED:
        return json.dumps(value, ensure_ascii=False)
    return f"{json.dumps(value[:MAX_QUOTED], ensure_ascii=False)[:-1]}…\" ({len(value)} characters)"


def kind_name(obj: Any) -> str:
    """``deployment/web`` for messages."""
    kind = as_dict(obj).get("kind")
    name = metadata(obj).get("name") or metadata(obj).get("generateName") or "?"
    return clip(f"{str(kind or 'object').lower()}/{name}")


#: the managedFields operations that make a manager own the fields it wrote
OWNING_OPERATIONS = ("Apply", "Update")


def field_writers(obj: Any, fields: tuple[tuple[str, ...], ...],
                  ignore: tuple[str, ...] = ()) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Who owns which of ``fields`` (paths such as ``("spec", "minMember")``) in ``obj``,
    by its ``metadata.managedFields``: ``(manager, ("spec.minMember", …))`` for each
    manager not in ``ignore``, once, in the order the entries come. An entry counts when
    its operation is Apply or Update on the object itself (a ``status`` subresource entry
    is the scheduler reporting, not a writer of the spec) and its ``fieldsV1`` holds the
    field or any part of it (``{"f:spec": {"f:minMember": {}}}``; a list or map field
    has its items below it)."""
    found: dict[str, list[str]] = {}
    for entry, manager in _spec_writes(obj, ignore):
        owned = as_dict(entry.get("fieldsV1"))
        for path in fields:
            dotted = ".".join(path)
            if _owns(owned, path) and dotted not in found.setdefault(manager, []):
                found[manager].append(dotted)
    return tuple((manager, tuple(paths)) for manager, paths in found.items() if paths)


def field_write_times(obj: Any, fields: tuple[tuple[str | int, ...], ...]) -> tuple[tuple[str, str, str], ...]:
    """When ``obj``'s ``fields`` were last written, by its ``metadata.managedFields``:
    ``(manager, time, subresource)`` for each entry that owns one of them or is a ``scale``
    subresource write; ``time`` is ``""`` where the entry has none (the apiserver records
    no time on a ``scale`` subresource write: ``kubectl scale``, an HPA). An int in a path
    is a list item, any one of them (``spec.replicatedJobs[*].replicas``)."""
    out = []
    for entry, manager in _spec_writes(obj):
        subresource = entry.get("subresource") if isinstance(entry.get("subresource"), str) else ""
        owned = as_dict(entry.get("fieldsV1"))
        if subresource == "scale" or any(_owns(owned, path) for path in fields):
            time = entry.get("time")
            out.append((manager, time if isinstance(time, str) else "", subresource))
    return tuple(out)


def _spec_writes(obj: Any, ignore: tuple[str, ...] = ()) -> Iterator[tuple[Mapping[str, Any], str]]:
    """The managedFields entries of writers of ``obj`` (Apply or Update, not its status)."""
    for entry in as_list(metadata(obj).get("managedFields")):
        entry = as_dict(entry)
        manager = entry.get("manager")
        if (isinstance(manager, str) and manager not in ignore and entry.get("operation") in OWNING_OPERATIONS
                and entry.get("subresource") != "status"):
            yield entry, manager


def _owns(owned: Any, path: tuple[str | int, ...]) -> bool:
    """Whether a ``fieldsV1`` tree holds ``path`` or any part of it."""
    if not path:
        return True
    node = as_dict(owned)
    part, rest = path[0], path[1:]
    if isinstance(part, int):  # a list item: keyed (``k:{...}``), by index (``i:0``) or value
        return any(_owns(child, rest) for key, child in node.items() if key[:2] in ("k:", "i:", "v:"))
    child = node.get(f"f:{part}")
    return child is not None and _owns(child, rest)


@dataclass(frozen=True)
class Denial:
    """A pod or workload podgang refuses, with the message the user sees."""

    message: str


@dataclass(frozen=True)
class OwnerRef:
    """An ownerReference as data (what a PodGroup is owned by, what a pod points at)."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = True

    @classmethod
    def from_dict(cls, ref: Mapping[str, Any]) -> "OwnerRef":
        return cls(
            api_version=str(ref.get("apiVersion") or ""),
            kind=str(ref.get("kind") or ""),
            name=str(ref.get("name") or ""),
            uid=str(ref.get("uid") or ""),
            controller=bool(ref.get("controller", False)),
        )

    @classmethod
    def of(cls, obj: Mapping[str, Any], controller: bool = True) -> "OwnerRef":
        """A reference to ``obj`` itself."""
        md = metadata(obj)
        return cls(str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""),
                   str(md.get("name") or ""), str(md.get("uid") or ""), controller)

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": self.controller,
            "blockOwnerDeletion": False,
        }


#: kubectl's copy of a whole manifest in an annotation: never worth copying or keeping
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the REST API."""

    group: str
    version: str
    plural: str
    kind: str
    optional: bool = False  # served by a CRD that may not be installed
    #: other versions that serve the same kind with the fields podgang reads (MPIJob:
    #: mpi-operator's v2beta1 or training-operator's v1; the CRDs share a name, so a
    #: cluster serves one of them)
    also: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.also)

    @property
    def alternatives(self) -> tuple["Resource", ...]:
        """This resource at each of its versions, this one first."""
        return tuple(found for v in self.versions
                     if (found := self.at(f"{self.group}/{v}" if self.group else v)) is not None)

    def at(self, api_version: str) -> "Resource | None":
        """This resource at ``api_version`` (one of its versions), or None."""
        for version in self.versions:
            if api_version == (f"{self.group}/{version}" if self.group else version):
                if version == self.version:
                    return self
                return replace(self, version=version, also=tuple(v for v in self.versions if v != version))
        return None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The REST path of the collection (in ``namespace``, or cluster-wide), or of one object."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        base = f"{root}/namespaces/{namespace}/{self.plural}" if namespace else f"{root}/{self.plural}"
        return f"{base}/{name}" if name else base

    @property
    def label(self) -> str:
        """``deployments.apps`` (how RBAC and kubectl name it)."""
        return self.plural if not self.group else f"{self.plural}.{self.group}"


POD = Resource("", "v1", "pods", "Pod")
NAMESPACE = Resource("", "v1", "namespaces", "Namespace")


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Apply a JSON merge patch (RFC 7386) to ``target`` in place, as the apiserver does."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(target.get(k), dict):
            merge_patch(target[k], v)
        else:
            target[k] = copy.deepcopy(v)
