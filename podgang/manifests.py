"""Reading Kubernetes manifests from files and directories, for ``podgang plan``.

Every object remembers where it came from (file and document number), so that a
problem is reported where the user can find it. Input the apiserver would refuse
(a label or annotation value that is not a string, a replica count that is not an
integer) is refused here too: podgang's
rules read only string values, so such an entry would otherwise vanish silently
and the plan would describe a cluster that can never exist.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterator

import yaml

try:  # the Kubernetes API's own schemas, with the CLI's `plan` extra (70 MB: not in the image)
    import jsonschema
    import kubernetes_validate
    from kubernetes_validate.utils import all_versions, major_minor, schema_contents
    from referencing import Registry, Resource
except ImportError:  # pragma: no cover - said under plan's "Not checked"
    kubernetes_validate = None

from podgang.backends import BACKENDS
from podgang.kinds import WORKLOADS, count_refusals
from podgang.objects import POD

#: ``<Kind>List`` kinds the API serves for kinds podgang reads: their items are objects
#: of that kind (the API leaves kind and apiVersion out of each item)
LIST_KINDS = frozenset(f"{k}List" for k in {POD.kind, *WORKLOADS, *(b.podgroup.kind for b in BACKENDS.values())})

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

# Kubernetes objects are a few dozen levels deep at most (a CRD's schema included);
# deeper input is refused before anything recursive (copying, printing) touches it.
MAX_DEPTH = 200
MAX_REPORTED = 20  # refusals listed before "... and N more"
SHOWN_CHARS = 60  # of a key or value quoted in a message

_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON = json.JSONDecoder()


class ManifestError(Exception):
    """Input that cannot be read as Kubernetes objects; the message names file and document."""


class _TooDeep(ManifestError):
    """Nesting deeper than :data:`MAX_DEPTH`: not worth a second parser's attempt."""


@dataclass(frozen=True)
class Source:
    file: str
    document: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}#{self.document}"


@dataclass(frozen=True)
class Manifest:
    obj: dict[str, Any]
    source: Source


def manifest_files(paths: list[str]) -> list[str]:
    """The files named, and the manifest files below the directories named, sorted."""
    files: list[str] = []
    for path in paths:
        if path == "-":
            files.append(path)
        elif os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in names if n.endswith(MANIFEST_SUFFIXES)]
            if not found:
                raise ManifestError(f"{path}: no manifest files (*.yaml, *.yml, *.json) in this directory")
            files += sorted(found)
        elif os.path.exists(path):
            files.append(path)
        else:
            raise ManifestError(f"{path}: no such file or directory")
    return files


def _expand(obj: Any, source: Source) -> Iterator[Manifest]:
    if obj is None:  # an empty document between two '---'
        return
    if not isinstance(obj, dict):
        raise ManifestError(f"{source.file}: document {source.document}: expected a Kubernetes object "
                            f"(a mapping with apiVersion and kind), got {type(obj).__name__}")
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError(f"{source.file}: document {source.document}: the object has no 'kind'")
    if not isinstance(obj.get("apiVersion"), str):
        raise ManifestError(f"{source.file}: document {source.document}: {kind} has no 'apiVersion'")
    items = obj.get("items")
    if kind == "List" and isinstance(items, list):  # kubectl get -o yaml: items carry their own kind
        for item in items:
            yield from _expand(item, source)
        return
    if kind in LIST_KINDS and isinstance(items, list):  # the API's PodList, DeploymentList ...
        for item in items:
            if isinstance(item, dict):
                item = {"apiVersion": obj["apiVersion"], "kind": kind[: -len("List")], **item}
            yield from _expand(item, source)
        return
    yield Manifest(obj, source)  # any other kind, even one named ...List (a custom AllowList), is an object


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"


def _too_deep(file: str, document: int) -> _TooDeep:
    return _TooDeep(f"{file}: document {document}: nested more than {MAX_DEPTH} levels deep; no Kubernetes object is")


def _json_stream(text: str, file: str) -> list[Any]:
    """The values of a JSON stream, objects back to back (``{...}{...}``) as kubectl reads it."""
    values: list[Any] = []
    index = _JSON_SPACE.match(text, len(text) - len(text.lstrip("\ufeff"))).end()
    try:
        while index < len(text):
            value, index = _JSON.raw_decode(text, index)
            values.append(value)
            index = _JSON_SPACE.match(text, index).end()
    except RecursionError:
        raise _too_deep(file, len(values) + 1) from None
    except ValueError as exc:  # json.JSONDecodeError, or a number too long to convert
        line = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(";")[0]
        raise ManifestError(f"{file}: document {len(values) + 1}{line}: cannot parse JSON: {problem}") from exc
    return values


def _yaml_documents(text: str, file: str) -> list[Any]:
    documents: list[Any] = []
    try:
        for document in yaml.safe_load_all(text):
            documents.append(document)
    except RecursionError:
        raise _too_deep(file, len(documents) + 1) from None
    except (yaml.YAMLError, ValueError) as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        # a ValueError: a value the constructor cannot convert (a 5,000-digit number, 2026-13-45)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0].split(";")[0]
        raise ManifestError(f"{file}: document {len(documents) + 1}{line}: cannot parse YAML: {problem}") from exc
    return documents


def _documents(text: str, file: str) -> list[Any]:
    """The documents of one file: a JSON stream when it starts with ``{`` and reads as
    one, else YAML (which also covers flow-style YAML such as ``{kind: Pod}``)."""
    if not text.lstrip(" \t\r\n\ufeff").startswith("{"):
        return _yaml_documents(text, file)
    try:
        return _json_stream(text, file)
    except _TooDeep:
        raise
    except ManifestError as json_problem:
        try:
            return _yaml_documents(text, file)
        except ManifestError:
            raise json_problem from None


def _check_depth(document: Any, file: str, number: int) -> None:
    pending = deque([(document, 1)])
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise _too_deep(file, number)
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)


def _as_written(value: Any) -> str | None:
    """How a scalar the apiserver refuses as a label or annotation value reads as a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _shown(str(value))
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def object_metas(obj: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """Every ObjectMeta in ``obj`` and its path: the object's own, and those of the
    templates inside it (``spec.template``, ``jobTemplate``, ``leaderTemplate``,
    ``volumeClaimTemplates[i]``… of any kind, known to podgang or not)."""
    pending: deque[tuple[str, Any, bool]] = deque([("", obj, True)])
    while pending:
        path, node, is_object = pending.popleft()
        if isinstance(node, list):
            pending.extend((f"{path}[{i}]", item, is_object) for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        if is_object and "metadata" in node:
            yield _join(path, "metadata"), node["metadata"]
        for key, child in node.items():
            key = str(key)
            holds_objects = key == "template" or key.endswith(("Template", "Templates"))
            pending.append((_join(path, key), child, holds_objects))


#: what the schema check says at most of one object
SCHEMA_MESSAGE_CHARS = 200
#: the Kubernetes versions podgang supports (1.35's native gangs, 1.36's): a value is refused only
#: when every one of them refuses it — a field one of them has is not a mistake
SCHEMA_VERSIONS = ("1.35.0", "1.36.0")


def schema_refusal(obj: dict[str, Any]) -> str | None:
    """What the Kubernetes API's own schema (``kubernetes-validate``, strict as ``kubectl apply``
    is) refuses first in an object of a built-in kind — a field it does not have, a value of the
    wrong type — or None: nothing, a custom resource, or no schemas installed. A required field
    left out is not said: manifests sketched for a plan may omit what the plan does not need."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    if kubernetes_validate is None or not (group == "" or "." not in group or group.endswith(".k8s.io")):
        return None  # a custom resource: its schema is its CRD's, which plan does not have
    if group in {b.podgroup.group for b in BACKENDS.values()}:
        return None  # a gang object: its backend says what the apiserver refuses, in the apiserver's words
    # owner references are plan's own business: exported without their UIDs, they stand for the
    # owners among the manifests (a placeholder UID), as the cluster will fill them
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    checked = {**obj, "metadata": {k: v for k, v in meta.items() if k != "ownerReferences"}} if meta else obj
    first = None
    for version in (*SCHEMA_VERSIONS, kubernetes_validate.latest_version()):
        try:
            error = jsonschema.exceptions.best_match(
                _schema_validator(version, str(obj.get("kind")), str(obj.get("apiVersion"))).iter_errors(checked))
        except Exception:  # a custom resource's kind, a version without these schemas, an object they cannot take
            continue
        if error is None or error.validator == "required":
            return None  # a version podgang supports takes it (a value left out is not a value refused)
        where = ".".join(str(step) for step in error.absolute_path)
        message = str(error.message).splitlines()[0]
        first = first or (f"{where}: {message}" if where else message)
    if first is None:
        return None
    return first if len(first) <= SCHEMA_MESSAGE_CHARS else first[:SCHEMA_MESSAGE_CHARS - 1] + "…"


@functools.lru_cache(maxsize=256)
def _schema_validator(version: str, kind: str, api_version: str) -> Any:
    """The strict schema of ``kind`` in ``api_version`` at Kubernetes ``version``, as
    ``kubernetes-validate`` lays them out, loaded once (its own ``validate`` reads the schemas
    again for every object: 25 ms each, minutes for a few thousand pods)."""
    chosen = [v for v in all_versions() if major_minor(v) <= major_minor(version)][-1]
    folder = f"kubernetes-json-schema/v{chosen}-local-strict"
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = schema_contents(f"{folder}/{kind.lower()}-{group}.json", version)
    definitions = schema_contents(f"{folder}/_definitions.json", version)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def schema_checked() -> bool:
    """Whether ``plan`` checks built-in kinds against the Kubernetes API's schemas."""
    return kubernetes_validate is not None


def refusals(obj: dict[str, Any]) -> list[str]:
    """What the apiserver would refuse in ``obj``'s labels and annotations (and its templates'),
    in the fields that count its pods (``spec.replicas: "3"``), and — for a built-in kind, when
    nothing of that is wrong — anything else its schema refuses."""
    problems = count_refusals(obj)
    for path, meta in object_metas(obj):
        if not isinstance(meta, dict):
            continue
        for field in ("labels", "annotations"):
            entries = meta.get(field)
            if entries is None:
                continue
            if not isinstance(entries, dict):
                problems.append(f"{path}.{field} must be a map of strings, not {type(entries).__name__}")
                continue
            for key, value in entries.items():
                if isinstance(value, str) or value is None:  # null reads as "" on the apiserver
                    continue
                written = _as_written(value)
                fix = f" (quote it: {json.dumps(written)})" if written is not None else ""
                problems.append(f"{path}.{field}.{_shown(str(key))} must be a string{fix}")
    if not problems:
        schema = schema_refusal(obj)
        problems += [schema] if schema else []
    return problems


def _object_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{str(obj.get('kind')).lower()}/{_shown(str(name))}"


def read_manifests(paths: list[str]) -> list[Manifest]:
    """All Kubernetes objects in ``paths`` (files, directories, or ``-`` for stdin).

    A file that cannot be parsed stops the reading; values the apiserver would refuse
    are gathered from every file and reported together.
    """
    out: list[Manifest] = []
    refused: list[str] = []
    for file in manifest_files(paths):
        try:
            text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ManifestError(f"{file}: cannot read: {exc}") from exc
        for number, document in enumerate(_documents(text, file), start=1):
            _check_depth(document, file, number)
            for manifest in _expand(document, Source(file, number)):
                out.append(manifest)
                refused += [f"{file}: document {number}: {_object_name(manifest.obj)}: the apiserver refuses this "
                            f"object: {problem}" for problem in refusals(manifest.obj)]
    if refused:
        more = len(refused) - MAX_REPORTED
        raise ManifestError("\n".join(refused[:MAX_REPORTED] + ([f"... and {more} more"] if more > 0 else [])))
    return out
