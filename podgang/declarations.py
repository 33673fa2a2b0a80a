"""The kinds a running process is taught, read at its start: ``--kinds FILE`` (podgang's own
``kinds:`` declarations, a ConfigMap's mount, Karta objects in a file) and, with ``--karta``,
the cluster's ``run.ai/v1alpha1`` Kartas (the CRD KAI's pod-grouper falls back to; absent:
none). The webhook and the grouper read them once, before their caches and watches exist,
and teach the hub (:func:`podgang.kinds.teach`); a Karta changed later is read at the next
start (docs/workloads/teach-your-kind.md). What cannot be taught is logged by object and
field, and every other kind keeps working."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Sequence

from podgang import kinds
from podgang.api import Api, ApiError, Forbidden, NotFound
from podgang.kinds.taught import KARTA_GROUP, KARTA_KIND, KARTA_VERSION
from podgang.manifests import ManifestError, read_manifests

log = logging.getLogger("podgang.kinds")

KARTAS_PATH = f"/apis/{KARTA_GROUP}/{KARTA_VERSION}/kartas"


def read_files(files: Sequence[str]) -> tuple[list[tuple[str, Any]], list[str]]:
    """The declarations in ``files`` as ``(where, object)``, and the files that cannot be read."""
    if not files:
        return [], []
    try:
        return [(str(m.source), m.obj) for m in read_manifests(list(files)) if kinds.is_declaration(m.obj)], []
    except ManifestError as exc:
        return [], [str(exc)]


async def list_kartas(api: Api) -> tuple[list[dict[str, Any]], str | None]:
    """The cluster's Kartas, and why none could be read (None: read, or the CRD is not installed)."""
    try:
        answer = await api.get(KARTAS_PATH)
    except NotFound:
        return [], None  # no Karta CRD: no Kartas, as KAI's grouper finds when its CRD is missing
    except Forbidden as exc:
        return [], f"may not list {KARTA_KIND} objects ({exc}): the chart's kinds.karta grants it"
    except ApiError as exc:
        return [], f"could not list {KARTA_KIND} objects: {exc}"
    # a list's items carry no apiVersion and kind: each is a Karta (its events name it so)
    return [{"apiVersion": f"{KARTA_GROUP}/{KARTA_VERSION}", "kind": KARTA_KIND, **item}
            for item in answer.get("items") or () if isinstance(item, dict)], None


@dataclass(frozen=True)
class Learned:
    """What a process was taught at its start."""

    taught: kinds.Taught
    problems: tuple[str, ...]  # every problem in words: files, the Karta list, each declaration
    kartas: tuple[dict[str, Any], ...]  # the cluster's Kartas, as read

    def broken_kartas(self) -> list[tuple[dict[str, Any], str]]:
        """Each Karta that teaches nothing for a problem of its own, with the problem: an event on it."""
        by_source = {f"{KARTA_KIND} {str((k.get('metadata') or {}).get('name'))[:63]}": k for k in self.kartas}
        return [(by_source[p.source], f"{p.field}: {p.message}" if p.field else p.message)
                for p in self.taught.problems if p.source in by_source]


async def teach_at_start(api: Api | None, files: Sequence[str], karta: bool) -> Learned:
    """Teach the hub the kinds declared in ``files`` and (``karta``) the cluster's Kartas; what
    was taught, and every problem (also logged)."""
    objects, problems = read_files(files)
    kartas: list[dict[str, Any]] = []
    if karta and api is not None:
        kartas, why = await list_kartas(api)
        if why:
            problems.append(why)
    taught = kinds.teach([*objects, *((f"Karta {(k.get('metadata') or {}).get('name')}", k) for k in kartas)])
    for key, declaration in taught.declarations.items():
        log.info("kind taught", extra={"fields": {"kind": declaration.kind, "group": declaration.group,
                                                  "from": declaration.source, "size": kinds.HUB[key].doc.size}})
    for problem in taught.problems:
        log.warning("kind not taught", extra={"fields": {"object": problem.source, "field": problem.field,
                                                         "problem": problem.message}})
    for problem in problems:
        log.warning("kinds not read", extra={"fields": {"problem": problem}})
    return Learned(taught, (*problems, *(str(p) for p in taught.problems)), tuple(kartas))
