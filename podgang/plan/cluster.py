"""The manifests as the cluster would hold them (UIDs the cluster would assign, the names it
gives a ``generateName``, the objects an operator makes from them) and admission as the
webhook does it.
"""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any, Mapping


from podgang import kinds, rules
from podgang.manifests import Manifest, Source
from podgang.objects import POD, OwnerRef, clip, metadata
from podgang.settings import Settings

from podgang.plan.model import (_SUFFIX_DIGITS, _SUFFIX_TOKEN, _UID_DIGITS, _UID_TOKEN, UNKNOWN_SUFFIX,
                                UNKNOWN_UID)


def _ns(obj: dict[str, Any], default_namespace: str) -> str:
    return metadata(obj).get("namespace") or default_namespace


def _what(obj: dict[str, Any], namespace: str) -> str:
    """``job default/train``; a kind named as one podgang knows but of another API group
    with its group (``job.batch.volcano.sh default/train``: not a batch/v1 Job)."""
    md = metadata(obj)
    kind = str(obj.get('kind')).lower()
    if obj.get("kind") in kinds.WORKLOADS and kinds.workload_kind(obj) is None:
        kind = f"{kind}.{kinds.api_group(obj) or 'core'}"
    return shown(f"{kind} {namespace}/{md.get('name') or md.get('generateName') or '?'}")


_STAND_INS = re.compile(f"{_UID_TOKEN}[0-9]{{{_UID_DIGITS},}}|{_SUFFIX_TOKEN}[0-9]{{{_SUFFIX_DIGITS},}}")


def shown(name: str) -> str:
    """A name with the stand-ins for what the cluster has not assigned yet shown as they
    are: ``<uid>`` for a UID, ``<random>`` for the random part of a ``generateName``, and
    what only an operator knows of the objects it makes (a run's time: ``<time>``)."""
    for token, words in kinds.MADE_NAME_PLACEHOLDERS.items():
        name = name.replace(token, words)
    return _STAND_INS.sub(lambda m: UNKNOWN_UID if m.group(0).startswith(_UID_TOKEN) else UNKNOWN_SUFFIX, name)


def _api_group(api_version: Any) -> str:
    """``apps`` of ``apps/v1``, ``""`` of ``v1``: an owner reference names an object by
    its API group and kind, whatever the version."""
    return str(api_version or "").rpartition("/")[0]


def made_by_operators(manifests: list[Manifest], default_namespace: str) -> list[Manifest]:
    """What an operator makes from the manifests before any pod exists, where they hold all
    it reads: the workloads a wrapper or schedule makes (an AppWrapper's components, a
    DisaggregatedSet's LeaderWorkerSets, a RayCronJob's next run), and the JobSet the Trainer
    makes for a TrainJob whose runtime is among them (or among what a wrapper makes)."""
    out: list[Manifest] = []
    wrapped = manifests
    for _ in range(3):  # a wrapper around a wrapper (a RayCronJob in an AppWrapper): a level at a time
        wrapped = [Manifest(made, m.source) for m in wrapped
                   for made in kinds.made_by({**m.obj, "metadata": {**metadata(m.obj),
                                                                   "namespace": _ns(m.obj, default_namespace)}})]
        out += wrapped
    runtimes = {(str(m.obj.get("kind")), str(metadata(m.obj).get("name")), _ns(m.obj, default_namespace)): m.obj
                for m in manifests if m.obj.get("kind") in kinds.TRAINER_RUNTIME_KINDS}
    for m in [*manifests, *out]:
        if m.obj.get("kind") != kinds.TRAIN_JOB.kind or not metadata(m.obj).get("name"):
            continue
        kind, name = kinds.trainjob_runtime(m.obj)
        ns = _ns(m.obj, default_namespace)
        runtime = runtimes.get((kind, name, ns)) or (next(
            (r for (k, n, _), r in runtimes.items() if (k, n) == (kind, name)), None)
            if kind == kinds.TRAINER_RUNTIME_KINDS[0] else None)  # cluster-scoped: any namespace it was read in
        if runtime is not None:
            trainjob = {**m.obj, "metadata": {**metadata(m.obj), "namespace": ns}}
            out.append(Manifest(kinds.trainjob_jobset(trainjob, runtime), m.source))
    return out


class _Objects:
    """Copies of the manifests' objects completed as the apiserver would complete
    them (a namespace, a UID, owner references that carry it), indexed for owner walks.

    An owner reference names an object as the cluster resolves it: the same API group,
    kind and name in the referrer's namespace, and the same UID. A manifest written by
    hand (or exported in part) often has no ``metadata.uid`` while references to it
    carry one: such an object takes the UID the first reference gives it (the cluster
    can only have matched them so); a reference without a UID takes its owner's."""

    def __init__(self, manifests: list[Manifest], default_namespace: str):
        #: (ignored, the one that wins) of every object defined more than once: the last
        #: definition is what the cluster holds after applying them in order
        self.duplicates: list[tuple[Manifest, Manifest]] = []
        manifests = self._last_of_each(manifests, default_namespace)
        self.items: list[tuple[Manifest, dict[str, Any], str]] = []  # (manifest, completed copy, namespace)
        self.sources: dict[str, Source] = {}  # by UID
        self.by_name: dict[tuple[str, str, str, str], dict[str, Any]] = {}  # (namespace, API group, kind, name)
        self.by_uid: dict[str, dict[str, Any]] = {}
        for m in manifests:
            obj = copy.deepcopy(m.obj)
            if not isinstance(obj.get("metadata"), dict):
                obj["metadata"] = {}
            md = obj["metadata"]
            ns = _ns(obj, default_namespace)
            md["namespace"] = ns
            if not isinstance(md.get("uid"), str) or not md["uid"]:
                md.pop("uid", None)
            else:
                self.by_uid.setdefault(md["uid"], obj)
            self.items.append((m, obj, ns))
            if isinstance(md.get("name"), str):
                self.by_name[(ns, _api_group(obj.get("apiVersion")), str(obj.get("kind")), md["name"])] = obj
        for _, obj, ns in self.items:  # an owner written without a UID has the one its references give it
            for ref in self._refs(obj):
                owner = self.named(ref, ns)
                uid = ref.get("uid")
                if owner is not None and "uid" not in owner["metadata"] and isinstance(uid, str) and uid \
                        and uid not in self.by_uid:
                    owner["metadata"]["uid"] = uid
                    self.by_uid[uid] = owner
        numbers, suffixes = itertools.count(1), itertools.count(1)
        for m, obj, _ in self.items:
            md = obj["metadata"]
            generate = md.get("generateName")
            if not md.get("name") and isinstance(generate, str) and generate and obj.get("kind") != POD.kind:
                # named by the apiserver as it creates it (a pod's is the webhook's to see: _admit_pod)
                md["name"] = f"{generate[:rules.MAX_GENERATE_NAME]}{_SUFFIX_TOKEN}{next(suffixes):0{_SUFFIX_DIGITS}d}"
            if "uid" not in md:
                md["uid"] = f"{_UID_TOKEN}{next(numbers):0{_UID_DIGITS}d}"
                self.by_uid[md["uid"]] = obj
            self.sources.setdefault(md["uid"], m.source)
        for _, obj, ns in self.items:  # references by name get the UID the object was given
            for ref in self._refs(obj):
                owner = self.named(ref, ns)
                if owner is not None and not ref.get("uid"):
                    ref["uid"] = owner["metadata"]["uid"]

    def _last_of_each(self, manifests: list[Manifest], default_namespace: str) -> list[Manifest]:
        """The manifests with each object (API group, kind, namespace, name) once: its last
        definition; the others are remembered in :attr:`duplicates`."""
        last: dict[tuple[str, str, str, str], Manifest] = {}
        for m in manifests:
            name = metadata(m.obj).get("name")
            if isinstance(name, str) and name:
                key = (_ns(m.obj, default_namespace), _api_group(m.obj.get("apiVersion")), str(m.obj.get("kind")), name)
                if key in last:
                    self.duplicates.append((last[key], m))
                last[key] = m
        ignored = {id(first) for first, _ in self.duplicates}
        return [m for m in manifests if id(m) not in ignored]

    @staticmethod
    def _refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
        refs = metadata(obj).get("ownerReferences")
        return [r for r in refs if isinstance(r, dict)] if isinstance(refs, list) else []

    def named(self, ref: Mapping[str, Any] | OwnerRef, namespace: str) -> dict[str, Any] | None:
        """The object of the manifests in ``namespace`` with the API group, kind and
        name ``ref`` gives, whatever its UID."""
        if isinstance(ref, OwnerRef):
            api_version, kind, name = ref.api_version, ref.kind, ref.name
        else:
            api_version, kind, name = ref.get("apiVersion"), ref.get("kind"), ref.get("name")
        return self.by_name.get((namespace, _api_group(api_version), str(kind), str(name)))

    def owner(self, ref: OwnerRef | None, namespace: str) -> dict[str, Any] | None:
        """The object ``ref`` (a reference held by an object in ``namespace``) names, when
        it is in the manifests: same namespace, API group, kind, name and UID."""
        if ref is None:
            return None
        found = self.named(ref, namespace)
        return found if found is not None and found["metadata"]["uid"] == ref.uid else None

    def replaced(self, ref: OwnerRef | None, namespace: str) -> str | None:
        """Why ``ref`` finds no owner although the manifests hold an object of its
        kind and name (another UID: the owner the reference meant was replaced), or None."""
        found = self.named(ref, namespace) if ref is not None else None
        if ref is None or found is None or found["metadata"]["uid"] == ref.uid:
            return None
        ref_uid = f"uid {clip(ref.uid, 64)}" if ref.uid else "no uid"
        return (f"the ownerReference to {clip(f'{ref.kind.lower()}/{ref.name}')} has {ref_uid}, but "
                f"{clip(f'{ref.kind.lower()} {namespace}/{ref.name}')} in these manifests has uid "
                f"{shown(clip(found['metadata']['uid'], 64))} (the owner was replaced)")

    def source_of(self, objs) -> Source | None:
        """Where the first of ``objs`` is written."""
        return next((self.sources[uid] for o in objs if (uid := metadata(o).get("uid")) in self.sources), None)

    def chain(self, obj: dict[str, Any]) -> tuple[list[dict[str, Any]], OwnerRef | None]:
        """The owners of ``obj`` found in the manifests, nearest first, and the
        reference the walk stopped at (None: it reached the top)."""
        chain: list[dict[str, Any]] = []
        namespace = metadata(obj).get("namespace") or ""
        for _ in range(16):
            ref = rules.owner_to_look_up(obj, chain)
            found = self.owner(ref, namespace)
            if found is None:
                return chain, ref
            chain.append(found)
        return chain, None


def _admitted_gang(pod: dict[str, Any], chain: list[dict[str, Any]], settings: Settings,
                   suffix: str) -> rules.Gang | rules.Denial:
    """The gang the webhook gives ``pod``. A pod that already names the very group
    podgang gives it (an exported pod) is in that gang, not in a hand-made one."""
    gang = rules.gang_for_pod(pod, chain, settings=settings, name_suffix=suffix)
    if isinstance(gang, rules.Gang) and gang.hand_made:
        natural = rules.gang_for_pod(rules.without_membership(pod, settings), chain, settings=settings)
        if isinstance(natural, rules.Gang) and natural.name == gang.name:
            return rules.Gang(natural.name, natural.source, f"{natural.reason}; already named {gang.name} by podgang",
                              natural.owner, natural.top_owner, natural.subgroup)
    return gang
