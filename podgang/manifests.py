"""Reading Kubernetes manifests from files and directories, for ``podgang plan``.

Every object remembers where it came from (file and document number), so that a
problem is reported where the user can find it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import yaml

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(Exception):
    """Input that cannot be read as Kubernetes objects; the message names file and document."""


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
    if kind.endswith("List") and isinstance(obj.get("items"), list):
        for item in obj["items"]:
            yield from _expand(item, source)
        return
    yield Manifest(obj, source)


def read_manifests(paths: list[str]) -> list[Manifest]:
    """All Kubernetes objects in ``paths`` (files, directories, or ``-`` for stdin)."""
    out: list[Manifest] = []
    for file in manifest_files(paths):
        try:
            text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as exc:
            raise ManifestError(f"{file}: cannot read: {exc}") from exc
        number = 0
        try:
            for number, obj in enumerate(yaml.safe_load_all(text), start=1):
                out.extend(_expand(obj, Source(file, number)))
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            line = f" (line {where.line + 1})" if where is not None else ""
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ManifestError(f"{file}: document {number + 1}{line}: cannot parse YAML: {problem}") from exc
    return out
