"""The grouping rules: which gang a pod joins, how large a gang must be, which GPU
requests contradict each other, and which pods podgang looks at at all.

Pure functions over plain dicts (objects as the API serves them). No I/O, no
clock, no randomness: whatever varies is a parameter. The webhook, the grouper
and ``podgang plan`` all decide through these functions.

Every function takes untrusted input: a malformed object yields a decision or a
:class:`Denial` that says what is wrong, never an exception.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any, Iterable, Iterator, Mapping, Sequence

from podgang import quantities
from podgang.backends import Backend, kai
from podgang.backends.base import Subgroup
from podgang.kinds import (LWS_LEADER_EXCLUDED, ONE_PER_REPLICA, Role, desired_size, lws_subgroup_policy, pod_role,
                           pod_templates, replica_index, replica_stage, replica_suffix, replica_units, resource_for,
                           role_replica_index, roles, run_kinds, segment_index, segmented_role, size_writes, stages,
                           whole_roles, workload_kind)
from podgang.objects import (
    Denial,
    OwnerRef,
    annotations,
    clip,
    kind_name,
    labels,
    metadata,
)
from podgang.objects import as_dict as _dict
from podgang.objects import as_list as _list
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, DEFAULT_SCHEDULER, Settings

# ---------------------------------------------------------------------------
# results


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

# ---------------------------------------------------------------------------
# scope


def is_skipped(obj: Any, settings: Settings = DEFAULT) -> bool:
    """Labelled ``podgang.io/skip=true``: podgang leaves it alone."""
    return labels(obj).get(settings.skip_label, "").lower() == "true"


def scope_problem(pod: Any, namespace: str | None = None, settings: Settings = DEFAULT,
                  owners: Sequence[Any] = ()) -> str | None:
    """Why podgang leaves this pod alone, or None when it is in scope.

    ``owners``: the pod's owner objects looked up so far; one labelled
    ``podgang.io/skip=true`` (spec §1: a pod *or workload* label) puts the pod out of
    scope too. The webhook's mutate and validate and ``podgang plan`` all ask here."""
    if settings.backend_for(pod) is None:
        scheduler = _dict(_dict(pod).get("spec")).get("schedulerName") or DEFAULT_SCHEDULER
        return f"schedulerName {_q(scheduler)} is not one of {', '.join(settings.scheduler_names)}"
    ns = namespace or metadata(pod).get("namespace") or ""
    if ns in settings.excluded_namespaces:
        return f"namespace {_q(ns)} is excluded"
    if is_skipped(pod, settings):
        return f"labelled {settings.skip_label}=true"
    return owner_skip_problem(owners, settings)


def owner_skip_problem(owners: Sequence[Any], settings: Settings = DEFAULT) -> str | None:
    """The part of :func:`scope_problem` that needs the pod's owners: one labelled
    ``podgang.io/skip=true`` puts the pod out of scope."""
    skipped = next((o for o in owners if is_skipped(o, settings)), None)
    return f"{kind_name(skipped)} is labelled {settings.skip_label}=true" if skipped is not None else None


def partial_scope_problem(workload: Any, namespace: str | None = None, settings: Settings = DEFAULT) -> str | None:
    """Why a workload whose pod templates are only partly in scope (an LWS whose leader
    names the gang scheduler and whose workers do not) can never have a complete gang,
    or None: its gang counts every pod, but only some of them ever join it."""
    templates = pod_templates(workload)
    problems = [scope_problem(t, namespace or metadata(workload).get("namespace"), settings) for _, t in templates]
    if not any(problems) or all(problems):
        return None
    inside = [path for (path, _), problem in zip(templates, problems) if not problem]
    outside = [path for (path, _), problem in zip(templates, problems) if problem]
    return (f"{kind_name(workload)}: only some of its pod templates are in scope ({', '.join(inside)}; not "
            f"{', '.join(outside)}: {next(p for p in problems if p)}): its gang can never be complete — give every "
            f"template the same schedulerName")


def in_scope(pod: Any, namespace: str | None = None, settings: Settings = DEFAULT) -> bool:
    return scope_problem(pod, namespace, settings) is None


# ---------------------------------------------------------------------------
# names

MAX_NAME = 253
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")  # ASCII digits only; more than 18 is nonsense here
_NOT_NAME_CHARS = re.compile(r"[^a-z0-9.-]+")
HASH_LEN = 8
MAX_MIN_MEMBER = 2**31 - 1  # a PodGroup's size is an int32


def is_valid_group_name(name: str) -> bool:
    """A DNS-1123 subdomain of at most 253 characters (what a PodGroup name must be)."""
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME and _DNS_SUBDOMAIN.fullmatch(name) is not None


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LEN]


def _trim_edges(text: str) -> str:
    return text.strip("-.")


def _clean_name(text: str) -> str:
    """``text`` with what a DNS-1123 subdomain cannot hold replaced or trimmed."""
    clean = _NOT_NAME_CHARS.sub("-", text.lower())
    clean = re.sub(r"[-.]*\.[-.]*", ".", clean)  # no empty labels, no '-' next to '.'
    return _trim_edges(clean)


def group_name(base: str, suffix: str = "", settings: Settings = DEFAULT) -> str:
    """``<prefix>-<base><suffix>`` as a valid DNS-1123 subdomain.

    A name that is already valid is kept as it is (KAI-compatible names stay
    exact). Any other is cleaned and cut to fit, and ends in a short hash of the
    whole so that different inputs keep different names: ``<head>-<hash>-<suffix>``
    (a suffix such as ``-group-3`` is kept readable at the end).
    """
    prefix = f"{settings.group_prefix}-" if settings.group_prefix else ""
    full = f"{prefix}{base}{suffix}"
    if is_valid_group_name(full):
        return full
    digest = _short_hash(full)
    tail = _trim_edges(_clean_name(suffix)[: MAX_NAME // 4])
    budget = MAX_NAME - HASH_LEN - 1 - (len(tail) + 1 if tail else 0)
    head = _trim_edges(_clean_name(f"{prefix}{base}")[:budget])
    return "-".join(part for part in (head, digest, tail) if part)


def owned_group_name(top: OwnerRef, suffix: str = "", settings: Settings = DEFAULT) -> str:
    """KAI-compatible ``pg-<topOwnerName>-<topOwnerUID>`` (+ suffix, e.g. an LWS group)."""
    return group_name(f"{top.name}-{top.uid}", suffix, settings)


def owner_less_group_name(pod_name: str, settings: Settings = DEFAULT) -> str:
    """``pg-<podName>`` for a pod nothing owns."""
    return group_name(pod_name, "", settings)


def generated_suffix(seed: str, length: int = 5) -> str:
    """A stable ``[a-z0-9]{length}`` derived from ``seed``.

    The webhook passes real randomness instead; this is for callers that need the
    same answer twice (``podgang plan``).
    """
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # like the apiserver's: no vowels, no 0/1/3
    number = int(hashlib.sha256(seed.encode()).hexdigest(), 16)
    out = []
    for _ in range(length):
        number, index = divmod(number, len(alphabet))
        out.append(alphabet[index])
    return "".join(out)


# ---------------------------------------------------------------------------
# owners


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

    A run stops the walk (a Job started by a CronJob, a RayService's cluster, a
    TrainJob's JobSet): every run is its own gang (:func:`podgang.kinds.run_kinds`).
    """
    ref = controller_ref(obj)
    if ref is None:
        return None
    if _dict(obj).get("kind") in run_kinds(ref):
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


# ---------------------------------------------------------------------------
# which gang


def hand_made_group(obj: Any, settings: Settings = DEFAULT) -> str | Denial | None:
    """The group a pod (or pod template) names itself, via label and/or annotation.

    None when it names none; a :class:`Denial` when label and annotation disagree
    or the name can never be a PodGroup's.
    """
    named = _keys_of(obj, settings).named_group(obj)
    if named is None or isinstance(named, Denial):
        return named
    name, key = named
    if not all(is_valid_group_name(part) for part in _keys_of(obj, settings).name_parts(name)):
        return Denial(
            f"{key}={_q(name)} is not a valid PodGroup name: use lower-case letters, digits, '-' and '.', "
            f"starting and ending with a letter or digit, at most {MAX_NAME} characters"
        )
    return name


def _keys_of(obj: Any, settings: Settings) -> Backend:
    """The backend whose keys a pod or template is read with: its own, or for one out
    of scope (its scheduler is not mapped) the first mapped backend's."""
    return settings.backend_for(obj) or settings.default_backend


def _subgroup(obj: Any, settings: Settings) -> str | None:
    return _keys_of(obj, settings).subgroup_of(obj)


def gang_for_pod(
    pod: Any,
    chain: Sequence[Any] = (),
    *,
    settings: Settings = DEFAULT,
    name_suffix: str | None = None,
) -> Gang | Denial:
    """The gang a pod joins (spec §2).

    ``chain``: the owner objects looked up so far, nearest first (see
    :func:`top_owner`). ``name_suffix``: the 5 characters completing the name of
    an owner-less pod that has only ``generateName`` (the webhook passes random
    ones; without it a stable suffix is derived from the pod).
    """
    if not isinstance(pod, Mapping):
        return Denial("the object is not a pod: expected a JSON object")
    subgroup = _subgroup(pod, settings)
    named = hand_made_group(pod, settings)
    if isinstance(named, Denial):
        return named
    top = top_owner(pod, chain)
    top_obj = next((o for o in chain if top is not None and _same(top, o)), None)
    if named is not None:
        own = bool(top is not None and top.uid and named == owned_group_name(
            top, owned_suffix(top, top_obj, pod, settings)[0], settings))
        if subgroup is None and own and top is not None:
            subgroup = pod_role(top, pod)  # podgang's own name for it: its role in its workload's gang
            segment = pod_segment(top, top_obj, pod, subgroup, settings)
            if segment is not None:  # its segment's leaf in podgang's own group
                return Gang(named, HAND_MADE, "the pod names its PodGroup", top_owner=top, subgroup=segment, leaf=True)
        index = replica_index(top, pod) if top is not None else None
        if own and not (top_obj is not None and whole_workload_tree(top_obj, settings)):
            index = None  # podgang's own group of one replica: no leaves in it
        if index is not None and top is not None:  # a replica of several pods: its leaf under its role
            role = (template_subgroup(top_obj, settings) or top.name) if top_obj is not None else None
            return Gang(named, HAND_MADE, "the pod names its PodGroup", top_owner=top,
                        subgroup=pod_leaf(subgroup, role, top.name, index), leaf=True)
        if subgroup is None:  # one subgroup per workload, one for the standalone pods
            subgroup = top.name if top is not None else STANDALONE
        return Gang(named, HAND_MADE, "the pod names its PodGroup", top_owner=top, subgroup=subgroup)

    if top is not None:
        if not top.uid:
            return Denial(f"ownerReference {clip(f'{top.kind}/{top.name}')} has no uid; podgang cannot name its gang")
        suffix, which = owned_suffix(top, top_obj, pod, settings)
        reason = f"top owner {clip(f'{top.kind.lower()}/{top.name}')}{which}"
        name = owned_group_name(top, suffix, settings)
        # a pod of a workload with roles (a PyTorchJob's master) is in its role's subgroup
        subgroup = subgroup or pod_role(top, pod)
        role_index = role_replica_index(top, pod)
        role_name = pod_role(top, pod)
        if role_index is not None and role_name and top_obj is not None and _keys_of(pod, settings).holds_trees \
                and any(r.parent == role_name for r in role_tree(top_obj, settings)):
            # a replica of several pods of its role (a JobSet's Job): its leaf under the role
            return Gang(name, OWNED, reason, owner=top, top_owner=top, subgroup=leaf_name(role_name, role_index),
                        leaf=True)
        segment = pod_segment(top, top_obj, pod, subgroup, settings)
        if segment is not None:  # its segment's leaf, as the scheduler's own grouper labels it
            return Gang(name, OWNED, reason, owner=top, top_owner=top, subgroup=segment, leaf=True)
        index = replica_index(top, pod)
        if not suffix and index is not None:
            # one group for the whole workload (a lone LWS with podgang.io/min-available): a leaf per replica
            role = (template_subgroup(top_obj, settings) or top.name) if top_obj is not None else None
            return Gang(name, OWNED, reason, owner=top, top_owner=top, subgroup=pod_leaf(subgroup, role, top.name, index),
                        leaf=True)
        return Gang(name, OWNED, reason, owner=top, top_owner=top, subgroup=subgroup)

    md = metadata(pod)
    pod_name = md.get("name")
    if isinstance(pod_name, str) and pod_name:
        return Gang(owner_less_group_name(pod_name, settings), OWNER_LESS, "the pod has no owner", subgroup=subgroup)
    generate = md.get("generateName")
    if isinstance(generate, str) and generate:
        suffix = name_suffix if name_suffix is not None else generated_suffix(repr(sorted(_dict(pod).items(), key=str)))
        return Gang(
            group_name(generate, suffix, settings),
            OWNER_LESS,
            "the pod has no owner and no name yet: named from generateName",
            subgroup=subgroup,
        )
    return Denial("the pod has neither metadata.name nor metadata.generateName")


def owned_suffix(top: OwnerRef, top_obj: Any, pod: Any, settings: Settings = DEFAULT) -> tuple[str, str]:
    """The suffix of the group a pod of ``top`` joins, and why: a LeaderWorkerSet's
    ``-group-N`` (one gang per replica, as KAI's and LWS's own integrations make them),
    except for one that asks for a number of complete replicas (``podgang.io/min-available``
    on it): one group for the whole LWS, a leaf per replica (``top_obj``: the top owner
    object, when looked up)."""
    if top_obj is not None and whole_workload_tree(top_obj, settings):
        return "", ""
    return replica_suffix(top, pod)


def owned_group_suffixes(workload: Any, settings: Settings = DEFAULT) -> list[str]:
    """The name suffix of each PodGroup a top workload owns itself."""
    entry = workload_kind(workload)
    if entry is None:
        return [""]
    if whole_workload_tree(workload, settings):
        return [""]
    return entry.replica_suffixes(workload)


def whole_workload_tree(workload: Any, settings: Settings = DEFAULT) -> bool:
    """A workload of multi-pod replicas that asks for N complete replicas itself
    (``podgang.io/min-available``), under a scheduler that holds trees (KAI): one gang over
    all its replicas instead of one per replica. Elsewhere each replica stays a gang of its
    own (whole replicas, without "at least N of them": :func:`replicas_not_held`)."""
    entry = workload_kind(workload)
    if (entry is None or entry.layout != ONE_PER_REPLICA or replica_units(workload) is None
            or min_available(workload, settings)[0] is None):
        return False
    templates = pod_templates(workload)
    backend = settings.backend_for(templates[-1][1]) if templates else None
    return backend is not None and backend.holds_trees


def replicas_not_held(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """What a user is told when a workload asks for N complete replicas and its scheduler
    cannot say so (Volcano, coscheduling, native gangs): each replica is its own gang."""
    entry = workload_kind(workload)
    wanted = min_available(workload, settings)[0]
    if (entry is None or entry.layout != ONE_PER_REPLICA or replica_units(workload) is None or wanted is None
            or whole_workload_tree(workload, settings)):
        return None
    templates = pod_templates(workload)
    backend = settings.backend_for(templates[-1][1]) if templates else None
    name = backend.name if backend is not None else "this"
    return (f"{kind_name(workload)}: {settings.min_available_annotation}={wanted} complete replicas is not held: the "
            f"{name} backend cannot say \"N complete replicas\", so each replica stays a gang of its own (always "
            f"whole), and nothing makes {wanted} of them start together (KAI can: a leaf per replica)")


def leaf_name(role: str, index: int) -> str:
    """The leaf of replica ``index`` of ``role``: ``<role>-<index>``, a DNS label stable
    across scale. A role too long for that keeps its head and a hash of the whole
    (``<head>-<hash>-<index>``), so that two roles never share a leaf."""
    tail = f"-{int(index)}"
    name = f"{role}{tail}"
    if len(name) <= MAX_SUBGROUP_NAME:
        return name
    digest = _short_hash(role)[:6]
    head = _trim_edges(role[: MAX_SUBGROUP_NAME - len(tail) - len(digest) - 1])
    return f"{head}-{digest}{tail}"


def pod_leaf(own: str | None, role: str | None, workload_name: str, index: int) -> str:
    """The leaf a pod of replica ``index`` carries. ``role``: its workload's role (the
    subgroup its pod template names, else the workload's name), when the workload was
    looked up; else told from what the pod carries itself (its template's role, or the
    leaf podgang gave it already)."""
    if role is None:
        if own is not None and own.endswith(f"-{index}"):
            return own  # given before (the webhook's patch seen again)
        role = own or workload_name
    return leaf_name(role, index)


def missing_group_warning(name: str, namespace: str, missing: str | None = None) -> str:
    """What a user is told when a pod names a PodGroup that does not exist (``missing``:
    what is missing, in the backend's words: :meth:`Backend.missing_group`)."""
    missing = missing or f"PodGroup {name} not found in namespace {namespace}"
    return f"{missing}: the pod stays Pending until it exists"


def unlisted_subgroup_warning(subgroup: str, group: str, listed: Sequence[str]) -> str:
    """What a user is told when a pod names a subgroup its PodGroup does not list."""
    lists = f"lists {', '.join(_q(clip(s)) for s in listed[:5])}" if listed else "lists no subgroups"
    return (f"the pod names subgroup {_q(clip(subgroup))}, which PodGroup {clip(group)} does not list ({lists}): "
            f"the scheduler ignores this pod until the group lists it or the pod names one it does")


def group_of(pod: Any, settings: Settings = DEFAULT) -> str | None:
    """The group a pod already carries, if any."""
    return _keys_of(pod, settings).group_of(pod)


def without_membership(pod: Any, settings: Settings = DEFAULT) -> Any:
    """The pod as if it named no group (to find its natural gang)."""
    return _keys_of(pod, settings).without_membership(pod)


# ---------------------------------------------------------------------------
# pod templates of workloads


def template_group(workload: Any, settings: Settings = DEFAULT) -> str | Denial | None:
    """The hand-made group a workload's pod templates name, if any.

    Templates that disagree with each other are a :class:`Denial`.
    """
    found: dict[str, str] = {}
    for path, template in pod_templates(workload):
        named = hand_made_group(template, settings)
        if isinstance(named, Denial):
            return Denial(f"{kind_name(workload)} {path or 'pod'}: {named.message}")
        if named is not None:
            found[path] = named
    names = set(found.values())
    if len(names) > 1:
        listed = ", ".join(f"{p}: {_q(n)}" for p, n in sorted(found.items()))
        return Denial(f"{kind_name(workload)} names different PodGroups in its pod templates ({listed})")
    return names.pop() if names else None


# ---------------------------------------------------------------------------
# minMember


def pinned_min_member(obj: Any, settings: Settings = DEFAULT) -> tuple[int | None, str | None]:
    """``podgang.io/min-member`` on an object: (value, None), (None, problem) or (None, None)."""
    raw = annotations(obj).get(settings.min_member_annotation)
    if raw is None:
        return None, None
    text = raw.strip()
    if _WHOLE_NUMBER.fullmatch(text) and int(text) > MAX_MIN_MEMBER:
        return None, (f"{kind_name(obj)}: {settings.min_member_annotation}={_q(raw)} is ignored: "
                      f"a PodGroup holds at most {MAX_MIN_MEMBER} members")
    if _WHOLE_NUMBER.fullmatch(text) and int(text) >= 1:
        return int(text), None
    return None, f"{kind_name(obj)}: {settings.min_member_annotation}={_q(raw)} is ignored: it must be a whole number ≥ 1"


def min_member_for(
    workload: Any, podgroup: Any = None, settings: Settings = DEFAULT, owners: Sequence[Any] = (),
    pods: Sequence[Any] | None = None,
) -> MinMember:
    """minMember of the group a workload owns (spec §3).

    ``podgang.io/min-member`` on the PodGroup, then on the workload, then on the
    objects above it (``owners``, nearest first: the CronJob above a Job run) pins it.
    ``pods``: the group's pods, for a kind that makes a replica group in stages (a
    LeaderReady LWS group is its leader alone until the leader is placed).
    A gang is never smaller than 1; a kind that is not a gang (a DaemonSet) is always 1.
    """
    entry = workload_kind(workload)
    if entry is not None and not entry.gang:
        return MinMember(1, f"{kind_name(workload)}: {desired_size(workload)[1]}")
    for source in (podgroup, workload, *owners):
        pinned, _problem = pinned_min_member(source, settings)
        if pinned is not None:
            return MinMember(pinned, f"pinned by {settings.min_member_annotation} on {kind_name(source)}", True)
    backend = workload_backend(workload, settings)
    if backend is not None:  # the scheduler's own size annotation (KAI's batch-min-member on a Job)
        value, why = backend.size_pin(workload)
        if value is not None:
            return MinMember(value, f"pinned by {why}", True)
    if whole_workload_tree(workload, settings):
        return subgroup_min_member(workload, settings)
    staged = replica_stage(workload, pods) if pods is not None else None
    if staged is not None:
        return MinMember(staged.size, f"{kind_name(workload)} {staged.reason}")
    parts = _role_parts(workload, settings)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere or any(s.pinned for s in parts):  # a role pinned or in a hand-made group: the sum of the others
        total = sum(s.min_member for s in parts)
        away = f"; {', '.join(sorted(elsewhere))} in hand-made PodGroup {_q(next(iter(elsewhere.values())))}" \
            if elsewhere else ""
        return MinMember(max(total, 1), f"{kind_name(workload)} " + (" + ".join(
            f"{s.name} {s.min_member}{' (pinned)' if s.pinned else ''}" for s in parts) or "no role of its own") + away)
    size, why = desired_size(workload)
    if size < 1:
        return MinMember(1, f"{kind_name(workload)} {why}; a gang is never smaller than 1", idle=True)
    return MinMember(size, f"{kind_name(workload)} {why}")


def staged_problem(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """What a user is told about a workload whose controller makes its pods in stages
    (an OrderedReady StatefulSet), or None: its gang counts only the stage it is in, and a
    ``podgang.io/min-member`` above that stage is a gang that never forms."""
    note = stages(workload)
    if note is None or next_owner(workload) is not None:  # an owned one is part of its owner's gang
        return None
    namespace = metadata(workload).get("namespace")
    if all(scope_problem(t, namespace, settings) for _, t in pod_templates(workload)):
        return None
    size, _ = desired_size(workload)
    pinned, _problem = pinned_min_member(workload, settings)
    if pinned is not None and pinned > size:
        return (f"{kind_name(workload)}: {settings.min_member_annotation}={pinned} waits for pods its controller "
                f"makes only in stages, a gang that never forms: {note}")
    return f"{kind_name(workload)} is not one gang (its gang counts {size}): {note}"


def shared_min_member(
    workloads: Iterable[Any],
    standalone_pods: int = 0,
    podgroup: Any = None,
    settings: Settings = DEFAULT,
) -> MinMember:
    """minMember of a hand-made group several workloads point at:
    Σ their desired sizes, plus the standalone pods labelled with it.
    """
    pinned, _problem = pinned_min_member(podgroup, settings)
    if pinned is not None:
        return MinMember(pinned, f"pinned by {settings.min_member_annotation} on {kind_name(podgroup)}", True)
    total, parts = 0, []
    for workload in sorted(workloads, key=kind_name):
        size = subgroup_min_member(workload, settings).value
        total += size
        parts.append(f"{kind_name(workload)} {size}")
    if standalone_pods:
        total += standalone_pods
        parts.append(f"{standalone_pods} standalone pod{'s' if standalone_pods != 1 else ''}")
    if not parts:
        return MinMember(1, "no workload or pod references it yet")
    reason = " + ".join(parts) + (f" = {total}" if len(parts) > 1 else "")
    if total < 1:
        return MinMember(1, f"{reason}; a gang is never smaller than 1")
    return MinMember(total, reason)


# ---------------------------------------------------------------------------
# a hand-made group's size: whose number is it?

#: what a member's history says of its size since a group was made
SCALED_SINCE = "scaled"
NO_RECORD = "no record"


@dataclass(frozen=True)
class SizeRule:
    """Whose number a hand-made group's written minMember is: the total of its members that
    podgang keeps true (``follows``), or the user's elastic gang, kept as written. Decided
    once per group from evidence, and recorded on it."""

    #: the minMember written on the group
    written: int
    follows: bool
    #: the rule that decided and its evidence, in words (plan, status, the event)
    why: str
    #: decided at this look, nothing being recorded on the group yet (podgang's first look)
    first_look: bool = False


def hand_made_size_rule(group: Any, written: int, total: MinMember, members: Sequence[Any],
                        settings: Settings = DEFAULT) -> SizeRule:
    """The rule for a hand-made ``group`` written with ``written`` whose ``members``
    (the workloads naming it) total ``total``, not pinned:

    - at or above the total: followed (a gang larger than its pods never forms);
    - a number podgang recorded: followed at it (``podgang.io/followed-min-member``); another
      number written later below the total, or the elastic record
      (``podgang.io/elastic-min-member``): the user's elastic gang;
    - else, podgang's first look: 0 or 1 is a placeholder (a gang of 1 gangs nothing):
      followed; a member scaled after the group was made, or whose size has no dated
      record, makes the number an old total: followed; with no member scaled since, the
      number below the total is on purpose: the user's elastic gang (the scheduler-plugins
      demo, a group of 3 applied with a ReplicaSet of 6)."""
    notes = annotations(group)
    if written >= total.value:
        return SizeRule(written, True, "at its members' total" if written == total.value else
                        f"written {written}, over its members' {total.value}: a gang larger than its pods never forms")
    followed = notes.get(settings.followed_size_annotation)
    if followed == str(written):
        return SizeRule(written, True, f"followed since podgang found it at its members' total "
                                       f"({settings.followed_size_annotation})")
    if followed is not None:
        return SizeRule(written, False, f"set to {written} after podgang followed it at {clip(followed, 16)}: "
                                        f"an elastic gang, the user's number")
    if settings.elastic_size_annotation in notes:
        return SizeRule(written, False, f"an elastic gang, the user's number, as judged at podgang's first "
                                        f"look ({settings.elastic_size_annotation})")
    if written <= 1:
        return SizeRule(written, True, f"written {written}, a placeholder (a gang of {written} gangs nothing): "
                                       f"followed", True)
    since = metadata(group).get("creationTimestamp")
    pin = f'{settings.min_member_annotation}: "{written}" on the group'
    for member in sorted(members, key=kind_name):
        found = scaled_since(member, since if isinstance(since, str) else None)
        if found is None:
            continue
        verdict, how = found
        name = f"{str(_dict(member).get('kind') or 'object').lower()} {metadata(member).get('name')}"
        scaled = f"{name} was scaled to {subgroup_min_member(member, settings).value}"
        if verdict == SCALED_SINCE:
            return SizeRule(written, True, f"{scaled} after the group was written with {written}", True)
        return SizeRule(written, True, f"{scaled} {how}: the written {written} is taken for an old total (if "
                                       f"{written} is on purpose, pin it: {pin})", True)
    return SizeRule(written, False, f"below its members' total and no member was scaled since the group was "
                                    f"written: an elastic gang, the user's number (to be sure, pin it: {pin})", True)


def scaled_since(workload: Any, since: str | None) -> tuple[str, str] | None:
    """Whether ``workload``'s size was written after the time ``since`` (a group's
    ``creationTimestamp``; None: not made yet, so nothing came after it), by its history
    (:func:`podgang.kinds.size_writes`): ``(SCALED_SINCE, by whom)``, ``(NO_RECORD, why)``
    when a write has no time and may have come after, or None. A workload whose spec never
    changed since it was made (``generation`` 1, or none: manifests applied together)
    counts with its size as made, whenever that was."""
    md = metadata(workload)
    generation = md.get("generation")
    if since is None or not isinstance(generation, int) or generation <= 1:
        return None
    group_made, made = _instant(since), _instant(md.get("creationTimestamp"))
    made_after = group_made is not None and made is not None and made >= group_made
    for manager, time, subresource in size_writes(workload):
        how = f"by {clip(manager, 48)}" + (f" through its {subresource} subresource" if subresource else "")
        at = _instant(time)
        if at is None:  # the apiserver dates no scale subresource write (kubectl scale, an HPA)
            if made_after:
                return SCALED_SINCE, how
            return NO_RECORD, f"{how} at a time its managedFields do not record"
        if group_made is not None and at >= group_made and not (made_after and at == made):
            return SCALED_SINCE, how
    return None


def _instant(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as the apiserver writes it, or None."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


# ---------------------------------------------------------------------------
# subgroups: the parts of a hand-made group several workloads share

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_SUBGROUP_NAME = 63


def template_subgroup(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """The subgroup a workload's pod template names itself (in its backend's own
    key, e.g. KAI's subgroup label), if any."""
    for _, template in pod_templates(workload):
        named = _subgroup(template, settings)
        if named:
            return named
    return None


def workload_subgroup(workload: Any, settings: Settings = DEFAULT) -> str:
    """A workload's subgroup: the one its pod template names, else the workload's name."""
    return template_subgroup(workload, settings) or str(metadata(workload).get("name") or "")


def ordered_ready_problem(workload: Any, gang_size: int, others: int) -> str | None:
    """Why a StatefulSet's gang can never form, or None. With ``podManagementPolicy:
    OrderedReady`` (the default) its controller creates pod N+1 only once pod N is Ready,
    and under a gang scheduler pod 0 is not placed before ``gang_size`` pods exist: only
    ``others`` (the gang's other pods) and its pod 0 ever do (seed 002's Spark executors,
    recorded on a real 1.35 control plane)."""
    if _dict(workload).get("kind") != "StatefulSet":
        return None
    spec = _dict(_dict(workload).get("spec"))
    policy = spec.get("podManagementPolicy") or "OrderedReady"  # the apiserver's default
    replicas = spec.get("replicas", 1)
    if policy != "OrderedReady" or not isinstance(replicas, int) or replicas < 2 or others + 1 >= gang_size:
        return None
    name = _dict(_dict(workload).get("metadata")).get("name") or "?"
    default = "" if spec.get("podManagementPolicy") else " (the default)"
    return (f"statefulset {name} has podManagementPolicy OrderedReady{default}: "
            f"it creates {name}-1 only once {name}-0 is Ready, and no pod of the gang is placed before "
            f"{gang_size} exist, but only {others + 1} ever will: the gang never forms. Set podManagementPolicy: "
            f"Parallel (it cannot change on a live StatefulSet: recreate it)")


def min_available(obj: Any, settings: Settings = DEFAULT) -> tuple[int | None, str | None]:
    """``podgang.io/min-available`` on a workload: (value, None), (None, problem) or (None, None)."""
    raw = annotations(obj).get(settings.min_available_annotation)
    if raw is None:
        return None, None
    text = raw.strip()
    if _WHOLE_NUMBER.fullmatch(text) and 1 <= int(text) <= MAX_MIN_MEMBER:
        return int(text), None
    return None, (f"{kind_name(obj)}: {settings.min_available_annotation}={_q(raw)} is ignored: "
                  f"it must be a whole number from 1 to {MAX_MIN_MEMBER}")


def subgroup_min_member(workload: Any, settings: Settings = DEFAULT) -> MinMember:
    """A workload's minimum inside a shared group and where it comes from:
    ``podgang.io/min-available``, else ``podgang.io/min-member`` (both pinned: set by
    the user, not the workload's size), else its desired size. For a workload of
    multi-pod replicas (an LWS) ``podgang.io/min-available`` counts complete replicas
    (default 1): its minimum is that many replicas' pods."""
    replicas = min_replicas(workload, settings)
    if replicas is not None:
        count, why, pinned = replicas
        unit = replica_units(workload)
        assert unit is not None
        return MinMember(count * unit.pods, f"{why} × {unit.reason}", pinned=pinned)
    for value, key in ((min_available(workload, settings)[0], settings.min_available_annotation),
                       (pinned_min_member(workload, settings)[0], settings.min_member_annotation)):
        if value is not None:
            return MinMember(value, f"{key} on {kind_name(workload)}", pinned=True)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere:  # only some roles name the group (Spark's executors, not its driver): those count
        parts = [r for r in roles(workload) if r.name in elsewhere]
        return MinMember(sum(r.size for r in parts), f"{kind_name(workload)} " + (
            " + ".join(f"{r.name} {r.size}" for r in parts) or f"{', '.join(sorted(elsewhere))} 0 (not made yet)")
            + " (the roles that name it)")
    size, why = desired_size(workload)
    return MinMember(size, f"{kind_name(workload)} {why}")


def own_subgroup_names(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """The subgroups of a workload's own gang by name — its roles — none while
    ``podgang.io/min-member`` on it pins the whole gang (the pin is the gang)."""
    if pinned_min_member(workload, settings)[0] is not None:
        return ()
    return tuple(part.name for part in role_subgroups(workload, settings))


def roles_in_hand_made_group(workload: Any, settings: Settings = DEFAULT) -> dict[str, str]:
    """The roles of a workload whose pod templates name a hand-made group, by role, when only
    some of its roles do (Volcano's Spark example: the executors name ``spark-pi-group``, the
    driver names none): those count in that group, the others are the workload's own gang.
    Empty when all or none do."""
    found = {r.name: hand_made_group(r.template, settings) for r in whole_roles(workload)}
    named = {role: group for role, group in found.items() if isinstance(group, str)}
    return named if named and len(named) < len(found) else {}


def min_replicas(workload: Any, settings: Settings = DEFAULT) -> tuple[int, str, bool] | None:
    """How many complete replicas a workload of multi-pod replicas needs at least, why, and
    whether the user set it: ``podgang.io/min-available`` on it, else 1. None for a kind
    whose pods are its units, or one whose size ``podgang.io/min-member`` pins in pods."""
    if replica_units(workload) is None or pinned_min_member(workload, settings)[0] is not None:
        return None
    value, _problem = min_available(workload, settings)
    if value is not None:
        return value, f"{settings.min_available_annotation}={value} complete replicas on {kind_name(workload)}", True
    return 1, f"1 complete replica of {kind_name(workload)} (the default)", False


def replica_tree(workload: Any, settings: Settings = DEFAULT,
                 present: Mapping[int, tuple[int, int]] | None = None) -> tuple[Subgroup, ...]:
    """A workload's part of a gang when its replicas are several pods each: its role, a
    parent needing its minimum of complete replicas (:func:`min_replicas`), and one leaf
    per replica (``<role>-<index>``, needing the replica's pods); empty for any other.

    ``present``: replica index -> (its live pods, those bound), as the cluster has them;
    None: the tree as it will be (``podgang plan``). A replica's leaf is listed once all its
    pods exist — KAI places the pods of a leaf beyond its role's minimum one by one, and
    ignores a pod whose leaf the group does not list, so a replica whose workers are not
    made yet is never started in part — and kept while any of its pods is bound (a replica
    scaled away keeps it until they are gone)."""
    replicas = min_replicas(workload, settings)
    unit = replica_units(workload)
    if replicas is None or unit is None:
        return ()
    count, why, pinned = replicas
    role = workload_subgroup(workload, settings)
    if present is None:
        indices = list(range(unit.count))
    else:
        indices = sorted(i for i, (live, placed) in present.items() if isinstance(i, int) and 0 <= i < 10**6
                         and ((i < unit.count and live >= unit.pods) or placed > 0))
    if present is None or not unit.leader_first:
        waiting: dict[int, int] = {}
    else:  # LeaderReady: a replica's leader alone, placed first (its workers come once it is Ready)
        waiting = {i: live for i, (live, placed) in present.items() if i not in indices and i < unit.count
                   and 0 < live < unit.pods and placed == 0}
    leaves = tuple(Subgroup(leaf_name(role, i), waiting.get(i, unit.pods),
                            (f"replica {i}: its leader first (startupPolicy LeaderReady)" if i in waiting else
                             f"replica {i}: {unit.reason}" if i < unit.count else
                             f"replica {i}: scaled away, kept while its pods are"), parent=role)
                   for i in sorted({*indices, *waiting}))
    return (Subgroup(role, count, why, pinned, of_subgroups=True), *leaves)


def owned_tree(workload: Any, settings: Settings = DEFAULT,
               present: Mapping[int, tuple[int, int]] | None = None) -> tuple[tuple[Subgroup, ...], int | None]:
    """The tree of a workload's own gang over all its replicas (a lone LWS with
    ``podgang.io/min-available: N``): a leaf per replica directly under the group, and the
    root needing N of them; ((), None) for any other workload."""
    if not whole_workload_tree(workload, settings):
        return (), None
    parts = replica_tree(workload, settings, present)
    if not parts:
        return (), None
    role = parts[0]
    return tuple(replace(leaf, parent=None) for leaf in parts[1:]), role.min_member


def root_min_subgroup(subgroups: Sequence[Subgroup], pinned: int | None = None) -> int | None:
    """The root's minimum of direct subgroups when the gang is a tree (some part counts
    complete replicas): every part required (``pinned``: what the user set); None for a
    flat list of parts (the root counts pods)."""
    if not any(s.of_subgroups or s.parent for s in subgroups):
        return None
    return pinned if pinned is not None else sum(1 for s in subgroups if s.parent is None)


def tree_problems(subgroups: Sequence[Subgroup], min_subgroup: int | None) -> tuple[str, ...]:
    """A tree that can never be satisfied: a node needing more children than it has."""
    children: dict[str | None, int] = {}
    for s in subgroups:
        children[s.parent] = children.get(s.parent, 0) + 1
    out = [f"subgroup {s.name} needs {s.min_member} complete replicas and has {children.get(s.name, 0)}: "
           f"the gang is not placed until there are {s.min_member}" for s in subgroups
           if s.of_subgroups and s.min_member > children.get(s.name, 0)]
    if min_subgroup is not None and min_subgroup > children.get(None, 0):
        out.append(f"the group needs {min_subgroup} parts and has {children.get(None, 0)}")
    return tuple(out)


def role_tree(workload: Any, settings: Settings = DEFAULT) -> tuple[Subgroup, ...]:
    """A workload's own gang as a tree where some role is several replicas of several pods
    each (a JobSet's replicated job of 2+ Jobs of 2+ pods): such a role a parent needing all
    its replicas complete (as KAI's own JobSet grouper asks), a leaf ``<role>-<index>`` per
    replica; every other role a flat part. Empty when no role is such, a role's minimum is
    pinned (``podgang.io/min-available`` counts pods there) or the gang is pinned whole."""
    if pinned_min_member(workload, settings)[0] is not None:
        return ()
    found = roles(workload)
    parts = _role_parts(workload, settings)
    if not any(r.per_replica for r in found) or any(p.pinned for p in parts) or any(
            not _role_name_ok(r.name) for r in found):
        return ()
    out: list[Subgroup] = []
    placed = {p.name: p.topology for p in parts}  # a role's own placement (a Ray group's topology)
    for role in found:
        if not role.per_replica:
            out.append(Subgroup(role.name, role.size, role.reason, topology=placed.get(role.name, ())))
            continue
        count = role.size // role.per_replica
        now = max(role.replica_count or 0, count)
        out.append(Subgroup(role.name, count, f"{count} of its {now} replicas complete ({role.reason})",
                            of_subgroups=True, topology=placed.get(role.name, ())))
        out += [Subgroup(leaf_name(role.name, i), role.per_replica, f"replica {i}: {role.per_replica} pods",
                         parent=role.name) for i in range(now)]
    return tuple(out)


def role_subgroups(workload: Any, settings: Settings = DEFAULT) -> tuple[Subgroup, ...]:
    """The subgroups of a workload's own gang, one per role its kind knows (a PyTorchJob's
    replica types, a RayCluster's head and worker groups), each at the role's minimum:
    ``podgang.io/min-available`` on the role's pod template, else what the kind says; a role
    its scheduler splits into segments (:func:`role_segments`) is a parent of them.
    None for a kind without roles, or a workload with a single unsegmented role (one part is
    the whole)."""
    found = _role_parts(workload, settings)
    if any(not _role_name_ok(s.name) for s in found):
        return ()
    by_name = {r.name: r for r in roles(workload)}
    out: list[Subgroup] = []
    for part in found:
        role = by_name.get(part.name)
        out += role_segments(workload, role, part, settings)[0] if role is not None else (part,)
    segmented = segmented_role(workload)
    if segmented is not None and segmented.name not in by_name:  # none of its pods required, all in segments
        parts = role_segments(workload, segmented, Subgroup(segmented.name, 0, segmented.reason), settings)[0]
        out += parts if len(parts) > 1 else ()
    if len(out) < 2:
        return ()
    return tuple(out)


#: the most segments one role is split into (KAI's own pod-grouper refuses more)
MAX_SEGMENTS = 10000


def _segmenting_backend(template: Any, settings: Settings) -> Backend | None:
    backend = _keys_of(template, settings)
    return backend if backend.holds_trees else None


def role_segments(workload: Any, role: Role, part: Subgroup,
                  settings: Settings = DEFAULT) -> tuple[tuple[Subgroup, ...], str | None]:
    """A role its scheduler splits into segments of consecutive pods (KAI's
    ``segment-size`` on a PyTorchJob's Worker template), as KAI's own pod-grouper writes
    them (``pytorch_grouper.go``): the role a parent needing every segment, and a leaf
    ``<role>-<i>`` per segment of ``size`` pods (the last one the rest), with the segments'
    topology; a segment wholly beyond the role's minimum (``part``) needs no pods. Else
    ``(part,)``. And what is wrong with the annotation, if anything."""
    entry = workload_kind(workload)
    if entry is None or entry.segmented_role != role.name:
        return (part,), None
    backend = _segmenting_backend(role.template, settings)
    if backend is None:
        return (part,), None
    size, where, problem = backend.segment_size([role.template])
    written = role.written if role.written is not None else role.size
    if size is None or written <= 0:
        return (part,), problem
    count = -(-written // size)
    if count > MAX_SEGMENTS:
        return (part,), (f"{kind_name(workload)}: {where} makes {count} segments, more than the {MAX_SEGMENTS} KAI "
                         f"allows: no segments")
    topology = backend.segment_topology([role.template], workload)
    mandatory = -(-int(part.min_member) // size)
    rest = written % size
    leaves = []
    for i in range(count):
        need = 0 if i >= mandatory else (rest if rest and i == count - 1 else size)
        last = min((i + 1) * size, written) - 1
        why = (f"pod{f's {i * size}-' if last > i * size else ' '}{last} of {role.name}"
               + ("" if need else f", beyond its minimum {part.min_member}"))
        leaves.append(Subgroup(leaf_name(role.name, i), need, why, parent=role.name, topology=topology))
    parent = replace(part, min_member=count, of_subgroups=True, counts="segments",
                     reason=f"{part.reason}; {where}: {count} segment{'s' if count != 1 else ''}")
    return (parent, *leaves), problem


def pod_segment(top: Any, top_obj: Any, pod: Any, role: str | None,
                settings: Settings = DEFAULT) -> str | None:
    """The segment leaf a pod is in, as the scheduler's own grouper labels it: a PyTorchJob
    worker by its replica index over the segment size (read from the pod, then its
    template), an LWS pod by its worker index within its replica (:func:`lws_segments`);
    None for any other pod."""
    entry = workload_kind(top)
    index = segment_index(top, pod)
    if entry is None or index is None:
        return None
    if entry.segmented_role is not None:
        if role != entry.segmented_role:
            return None
        backend = _segmenting_backend(pod, settings)
        if backend is None:
            return None
        written = segmented_role(top_obj) if top_obj is not None else None
        template = written.template if written is not None else None
        size, _, _ = backend.segment_size([pod, *([template] if template is not None else [])])
        return leaf_name(role, index // size) if size is not None else None
    if entry.replicas is not None and top_obj is not None and not whole_workload_tree(top_obj, settings):
        # (a lone LWS's one group over all its replicas has a leaf per replica, not segments)
        shape = lws_segments(top_obj, settings)
        if shape is None:
            return None
        return shape.leaf_of(index)
    return None


@dataclass(frozen=True)
class ReplicaSegments:
    """One multi-pod replica split into segments (an LWS group under KAI's segment size)."""

    subgroups: tuple[Subgroup, ...]
    size: int  # pods per segment
    pods: int  # pods per replica
    leader_excluded: bool

    def segment_of(self, index: int) -> int:
        """KAI's segment index of pod ``index`` (0: the leader, always in the first)."""
        if index <= 0:
            return 0
        if (self.pods - 1) % self.size == 0:  # the leader is the first segment's extra pod
            return (index - 1) // self.size
        return index // self.size

    def pods_in(self, segment: int) -> int:
        """How many of the replica's pods segment ``segment`` holds (the leader counted in the first)."""
        if (self.pods - 1) % self.size == 0:  # pods 1.., shifted by the leader
            first, end = segment * self.size + 1, min((segment + 1) * self.size + 1, self.pods)
            return max(end - first, 0) + (1 if segment == 0 else 0)
        return max(min((segment + 1) * self.size, self.pods) - segment * self.size, 0)

    def leaf_of(self, index: int) -> str:
        if index == 0:
            return LEADER
        segment = self.segment_of(index)
        if segment == 0 and not self.leader_excluded:
            return WORKERS
        return f"{SEGMENT}-{segment}"


LEADER, WORKERS, SEGMENT = "leader", "workers", "segment"  # KAI's names in an LWS replica's group


def lws_segments(workload: Any, settings: Settings = DEFAULT) -> ReplicaSegments | None:
    """The subgroups of one replica's gang of an LWS split into segments, as KAI's own
    pod-grouper writes them (``lws_grouper.go``): the segment size from
    ``subGroupPolicy.subGroupSize``, else the scheduler's annotation on the LWS, then on its
    worker template; segments ``segment-<i>`` of that many pods (the last the rest);
    ``LeaderWorker``: ``segment-0`` a parent of ``leader`` (1) and ``workers`` (its other
    pods), ``LeaderExcluded``: ``leader`` a subgroup of its own. None without segments or
    with a size KAI refuses (:func:`role_problems` says why)."""
    shape, _problem = _lws_segments(workload, settings)
    return shape


def _lws_segments(workload: Any, settings: Settings) -> tuple[ReplicaSegments | None, str | None]:
    unit = replica_units(workload)
    templates = dict(pod_templates(workload))
    worker = templates.get("spec.leaderWorkerTemplate.workerTemplate")
    if unit is None or worker is None:
        return None, None
    backend = _segmenting_backend(worker, settings)
    if backend is None:
        return None, None
    written, policy = lws_subgroup_policy(workload)
    if written is not None:
        size, where, problem = written, f"subGroupPolicy.subGroupSize {written}", None
    else:
        size, where, problem = backend.segment_size([workload, worker])
    if size is None:
        return None, problem
    pods = unit.pods
    if size <= 1 or size > pods:
        return None, (f"{kind_name(workload)}: {where} is not above 1 and at most leaderWorkerTemplate.size {pods}: "
                      f"KAI's own pod-grouper refuses it; podgang gives its replicas no segments")
    excluded = policy == LWS_LEADER_EXCLUDED
    if excluded and (pods - 1) % size:
        return None, (f"{kind_name(workload)}: subGroupPolicyType {LWS_LEADER_EXCLUDED} needs size - 1 ({pods - 1}) "
                      f"divisible by the segment size {size}: KAI's own pod-grouper refuses it; podgang gives its "
                      f"replicas no segments")
    shape = ReplicaSegments((), size, pods, excluded)
    count = shape.segment_of(pods - 1) + 1
    if count > MAX_SEGMENTS:
        return None, f"{kind_name(workload)}: {where} makes {count} segments, more than the {MAX_SEGMENTS} KAI allows"
    topology = backend.segment_topology([worker], workload)
    members = [shape.pods_in(i) for i in range(count)]
    leaves: list[Subgroup] = []
    if excluded:
        members[0] -= 1  # the leader is a subgroup of its own
        leaves.append(Subgroup(LEADER, 1, "the leader (subGroupPolicyType LeaderExcluded)"))
    for i in range(count):
        why = f"segment {i} of {where}"
        if i == 0 and not excluded:
            leaves.append(Subgroup(f"{SEGMENT}-0", 2, f"{why}: the leader and its first workers",
                                   of_subgroups=True, counts="parts", topology=topology))
            leaves.append(Subgroup(LEADER, 1, "the leader", parent=f"{SEGMENT}-0"))
            leaves.append(Subgroup(WORKERS, members[0] - 1, f"the workers of {SEGMENT}-0", parent=f"{SEGMENT}-0"))
        else:
            leaves.append(Subgroup(f"{SEGMENT}-{i}", members[i], why, topology=topology))
    return replace(shape, subgroups=tuple(leaves)), None


def _role_name_ok(name: str) -> bool:
    return len(name) <= MAX_SUBGROUP_NAME and _DNS_LABEL.fullmatch(name) is not None


def _role_parts(workload: Any, settings: Settings) -> tuple[Subgroup, ...]:
    """The roles of a workload's own gang (not those in a hand-made group), each at its minimum."""
    found = []
    backend = workload_backend(workload, settings)
    elsewhere = roles_in_hand_made_group(workload, settings)
    entry = workload_kind(workload)
    for role in roles(workload):
        if role.name in elsewhere:
            continue
        value, _problem = min_available(role.template, settings)
        own, why = backend.role_pin(role) if backend is not None else (None, "")
        if value is not None:
            part = Subgroup(role.name, value, f"{settings.min_available_annotation} on {role.path}", True)
        elif own is not None:  # the scheduler's own annotation (KAI's batch-min-member on a replicated job)
            part = Subgroup(role.name, own, why, True)
        else:
            part = Subgroup(role.name, role.size, role.reason)
        placed = _role_topology(entry is not None and entry.placed_roles, role, settings)[0]
        found.append(replace(part, topology=placed) if placed else part)
    return tuple(found)


def workload_backend(workload: Any, settings: Settings = DEFAULT) -> Backend | None:
    """The backend of a workload's gang: its first pod template's in scope (None: none is)."""
    for _, template in pod_templates(workload):
        backend = settings.backend_for(template)
        if backend is not None:
            return backend
    return None


def scheduler_pin_problems(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """A scheduler's own size annotation on a workload or its roles that it would ignore."""
    backend = workload_backend(workload, settings)
    if backend is None:
        return ()
    found = [backend.size_pin(workload)[1] if backend.size_pin(workload)[0] is None else ""]
    found += [why for role in roles(workload) for value, why in [backend.role_pin(role)] if value is None]
    return tuple(f for f in found if f)


def _role_topology(placed: bool, role: Role, settings: Settings) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """Where a role's own pod template asks its scheduler to place it together (a Ray group's
    topology, for a scheduler that holds trees), and what is wrong with that."""
    backend = _segmenting_backend(role.template, settings) if placed else None
    return backend.role_topology(role.template) if backend is not None else ((), None)


def lent_metadata(workload: Any, owner: Any) -> Any:
    """``workload`` as a gang's settings are read from it: when its owner is a kind that
    lends its metadata (a TrainJob, to its JobSet — as KAI's pod-grouper, which skips the
    TrainJob, copies them), the owner's labels and annotations where it has none of its own."""
    entry = workload_kind(owner)
    if entry is None or not entry.lends_metadata:
        return workload
    md = dict(metadata(workload))
    for section in ("labels", "annotations"):
        merged = {**_dict(metadata(owner).get(section)), **_dict(md.get(section))}
        if merged:
            md[section] = merged
    return {**_dict(workload), "metadata": md}


def minimum_pods(workload: Any, size: int, subgroups: Sequence[Subgroup] = (),
                 settings: Settings = DEFAULT, group: str | None = None) -> tuple[tuple[int, Any], ...] | None:
    """The pods a workload's gang of ``size`` needs at least, as (how many, pod template)
    pairs — what its minimum resources are summed from: each role at its subgroup's
    minimum (a staged kind's whole run: the driver *and* the executors it will make, as
    spark-operator reserves them), else ``size`` pods of its one template. None when that
    cannot be told: templates that request differently and no roles to tell their counts
    (a LeaderWorkerSet's leader and workers), or a size pinned across roles."""
    by_name = {s.name: s.min_member for s in subgroups}
    parts = whole_roles(workload)
    elsewhere = roles_in_hand_made_group(workload, settings)
    if elsewhere:  # the roles of this gang: those that name ``group``, else those that name none
        parts = [r for r in parts if elsewhere.get(r.name) == group]
        return tuple((by_name.get(r.name, r.size), r.template) for r in parts if by_name.get(r.name, r.size) > 0)
    if len(parts) == 1:
        return ((size, parts[0].template),)
    if parts and (by_name or sum(r.size for r in roles(workload)) == size):  # else a pin across the roles
        return tuple((by_name.get(r.name, r.size), r.template) for r in parts)
    templates = [template for _, template in pod_templates(workload)]
    if not templates:
        return None
    requests = quantities.pod_requests(templates[0])
    if any(quantities.pod_requests(t) != requests for t in templates[1:]):
        return None
    return ((size, templates[0]),)


def role_problems(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """A malformed ``podgang.io/min-available`` on a role's pod template."""
    out = []
    for role in roles(workload):
        problem = min_available(role.template, settings)[1]
        if problem:
            out.append(f"{kind_name(workload)} {role.path}: {problem.split(': ', 1)[-1]}")
        entry = workload_kind(workload)
        placed = _role_topology(entry is not None and entry.placed_roles, role, settings)[1]
        if placed:
            out.append(f"{kind_name(workload)} {role.path}: {placed}")
        segments = role_segments(workload, role, Subgroup(role.name, role.size), settings)[1]
        if segments:
            out.append(f"{kind_name(workload)} {role.path}: {segments}")
        if not _role_name_ok(role.name):
            out.append(f"{kind_name(workload)}: {_q(clip(role.name))} cannot name a subgroup (a DNS label: lower-case "
                       f"letters, digits and '-', at most {MAX_SUBGROUP_NAME} characters): the gang has no subgroups, "
                       f"only its summed minimum")
    replica_segments = _lws_segments(workload, settings)[1]
    if replica_segments:
        out.append(replica_segments)
    return tuple(out)


def shared_subgroups(
    workloads: Iterable[Any],
    standalone: Mapping[str, int] | None = None,
    settings: Settings = DEFAULT,
    holds_trees: bool = True,
    present: Mapping[str, Mapping[int, tuple[int, int]]] | None = None,
    awaited: Sequence[Subgroup] = (),
) -> tuple[tuple[Subgroup, ...], tuple[str, ...]]:
    """The subgroups of a hand-made group the ``workloads`` name, and what a user
    should fix; none unless there are several parts or a workload of multi-pod replicas.
    Each workload is one subgroup (named after it, or what its pod template names); one of
    multi-pod replicas (an LWS), where the scheduler ``holds_trees``, is a parent needing
    its minimum of complete replicas with a leaf per replica (:func:`replica_tree`), else
    one flat part at that many replicas' pods; ``standalone``: subgroup name -> the
    standalone pods in it; ``awaited``: the parts of required roles no one fills yet
    (:func:`required_roles`).
    Two workloads landing in one subgroup, or a name that cannot be a subgroup's,
    is a problem, and then there are no subgroups (the summed minimum still holds)."""
    found: dict[str, Subgroup] = {}
    owners: dict[str, list[str]] = {}
    problems = []
    trees: dict[str, tuple[Subgroup, ...]] = {}
    for workload in sorted(workloads, key=kind_name):
        name = workload_subgroup(workload, settings)
        own = subgroup_min_member(workload, settings)
        owners.setdefault(name, []).append(kind_name(workload))
        found[name] = Subgroup(name, own.value, own.reason, own.pinned)
        tree = replica_tree(workload, settings, None if present is None else
                            present.get(str(metadata(workload).get("name")), {})) if holds_trees else ()
        if tree:
            trees[name] = tree
            found[name] = tree[0]
        problem = min_available(workload, settings)[1]
        if problem:
            problems.append(problem)
    for name, count in sorted((standalone or {}).items()):
        if count > 0:
            owners.setdefault(name, []).append(f"{count} standalone pod{'s' if count != 1 else ''}")
            found[name] = Subgroup(name, count, f"{count} standalone pod{'s' if count != 1 else ''}")
    for part in awaited:
        owners.setdefault(part.name, []).append(settings.required_roles_annotation)
        found[part.name] = part
    if sum(map(len, owners.values())) < 2 and not trees:  # one part is the whole gang: as it always was
        return (), tuple(problems)
    broken = []
    for name, who in sorted(owners.items()):
        if len(who) > 1:
            broken.append(f"subgroup {_q(name)} is claimed by {', '.join(who)}: give each its own "
                          f"subgroup name in its pod template")
        elif len(name) > MAX_SUBGROUP_NAME or not _DNS_LABEL.fullmatch(name) or any(
                leaf.name in owners for leaf in trees.get(name, ())[1:]):
            broken.append(f"{who[0]}: {_q(clip(name))} cannot name a subgroup (a DNS label: lower-case letters, "
                          f"digits and '-', at most {MAX_SUBGROUP_NAME} characters): set a subgroup name in its "
                          f"pod template")
    if broken:
        return (), (*problems, *(f"{b}; the group has no subgroups until then" for b in broken))
    return tuple(part for n in sorted(found) for part in trees.get(n, (found[n],))), tuple(problems)


@dataclass(frozen=True)
class RequiredRoles:
    """What ``podgang.io/required-roles`` on a hand-made group asks of its gang: the roles
    declared, a part for each no workload fills yet (:func:`required_roles`), what a user
    should fix and what they might add."""

    declared: tuple[str, ...] = ()
    #: one part per declared role no workload (nor standalone pod) fills yet, at minimum 1: the
    #: gang needs it, so nothing is placed before its pods come
    awaited: tuple[Subgroup, ...] = ()
    problems: tuple[str, ...] = ()
    #: the annotation advised: several workloads share a group that declares no role
    advice: tuple[str, ...] = ()

    @property
    def awaited_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.awaited)


def declared_roles(podgroup: Any, settings: Settings = DEFAULT) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``podgang.io/required-roles`` on a group, ``"prefill,decode"``: the role names, in
    order, each once, and a problem per name that cannot be a subgroup's (ignored)."""
    raw = annotations(podgroup).get(settings.required_roles_annotation)
    if not isinstance(raw, str):
        return (), ()
    names, problems = [], []
    for name in (n.strip() for n in raw.split(",")):
        if not name or name in names:
            continue
        if len(name) > MAX_SUBGROUP_NAME or not _DNS_LABEL.fullmatch(name):
            problems.append(f"{settings.required_roles_annotation} on {kind_name(podgroup)}: {_q(clip(name))} is "
                            f"ignored: a role is a subgroup's name (a DNS label: lower-case letters, digits and '-', "
                            f"at most {MAX_SUBGROUP_NAME} characters)")
            continue
        names.append(name)
    return tuple(names), tuple(problems)


def required_roles(podgroup: Any, workloads: Sequence[Any], standalone: Mapping[str, int] | None = None,
                   settings: Settings = DEFAULT) -> RequiredRoles:
    """A hand-made group's required roles (seed 004: "at least one prefill AND one decode,
    whatever order they come in"). A role is the subgroup podgang gives a workload
    (:func:`workload_subgroup`) or standalone pods; a declared role no one fills yet is a
    part of the gang at minimum 1 — counted by the root's minimum of subgroups in a tree,
    by ``minMember`` in a flat list or where the scheduler has no subgroups — so that no pod
    is placed before its pods come; once a workload fills it, that workload's own part
    replaces it. Without the annotation, a group several workloads share is advised to
    declare it: a role whose pods come last may find the room taken."""
    declared, problems = declared_roles(podgroup, settings)
    key = settings.required_roles_annotation
    filled = {workload_subgroup(w, settings) for w in workloads} | {
        name for name, count in (standalone or {}).items() if count > 0}
    if not declared:
        if len(filled) < 2 or problems:
            return RequiredRoles(problems=problems)
        roles_now = ",".join(sorted(filled))
        return RequiredRoles(advice=(
            f"{len(filled)} workloads share this group ({', '.join(sorted(filled))}) and it declares no {key}: "
            f"if each is needed, one whose pods come after the others' may find their room taken and never be "
            f"placed; declare them: {key}: {_q(roles_now)}",))
    awaited = tuple(Subgroup(role, 1, f"required by {key}; no workload fills it yet") for role in declared
                    if role not in filled)
    if awaited:
        names = ", ".join(s.name for s in awaited)
        problems += (f"{key} on {kind_name(podgroup)} requires role{'s' if len(awaited) > 1 else ''} {names}, which "
                     f"no workload fills yet: none of the gang's pods is placed until {names} ha"
                     f"{'ve' if len(awaited) > 1 else 's'} pods",)
    return RequiredRoles(declared, awaited, problems)


def required_roles_warning(podgroup: Any, name: str, settings: Settings = DEFAULT) -> str | None:
    """What a pod joining hand-made group ``name`` is told of the roles it declares: those the
    grouper last found no workload fills (``podgang.io/awaited-roles``, its record). None:
    nothing to say. (The annotation is advised by ``podgang plan`` and ``podgang status``, not
    here: by the time a group lists several parts they have all come, and every pod of every
    shared group would hear it.)"""
    if not declared_roles(podgroup, settings)[0]:
        return None
    awaited = [r for r in str(annotations(podgroup).get(settings.awaited_roles_annotation) or "").split(",") if r]
    if not awaited:
        return None
    names = ", ".join(awaited)
    return (f"PodGroup {name} requires role{'s' if len(awaited) > 1 else ''} {clip(names)} "
            f"({settings.required_roles_annotation}), which no workload filled when podgang last looked: none of "
            f"its pods is placed until {'each has' if len(awaited) > 1 else 'it has'} pods")


def with_awaited(mm: MinMember, required: RequiredRoles, min_subgroup: int | None, workloads: Sequence[Any] = (),
                 standalone: int = 0, parts_told: bool = True) -> MinMember:
    """A flat gang's minimum with its awaited roles counted, 1 each (a tree counts them
    already: each is a part its root needs); a pinned minimum stays as pinned. Where the
    scheduler cannot tell the parts apart (``parts_told`` False: no subgroups, as on
    coscheduling or native gangs) the known parts' pods beyond their minimums would stand in
    for the awaited role: the gang then needs every pod the known parts will have, and one
    more per awaited role."""
    if not required.awaited or min_subgroup is not None or mm.pinned:
        return mm
    extra = " + ".join(f"{s.name} 1 (required, no workload yet)" for s in required.awaited)
    if parts_told:
        return MinMember(mm.value + len(required.awaited), f"{mm.reason} + {extra}")
    known = max(sum(desired_size(w)[0] for w in workloads) + standalone, mm.value)
    return MinMember(known + len(required.awaited), f"every pod of its workloads {known} + {extra}: the scheduler "
                                                    f"cannot tell its parts apart")


# ---------------------------------------------------------------------------
# GPU requests

# KAI's own texts come first in every GPU denial (its webhook's words)
MSG_GPU_AND_MEMORY = kai.MSG_GPU_AND_MEMORY
MSG_FRACTION_AND_GPU = kai.MSG_FRACTION_AND_GPU
MSG_BAD_MEMORY = kai.MSG_BAD_MEMORY
MSG_BAD_FRACTION = kai.MSG_BAD_FRACTION
quantity = quantities.quantity

_DECIMAL = re.compile(r"^[0-9]*\.?[0-9]+$")


def _containers(pod_spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for field, what in (("initContainers", "init container"), ("containers", "container")):
        for c in _list(pod_spec.get(field)):
            c = _dict(c)
            yield f"{what} {_q(c.get('name', '?'))}", c


def whole_gpu_requests(pod: Any, settings: Settings = DEFAULT) -> list[str]:
    """Where the pod asks for whole GPUs: ``container 'x' limits nvidia.com/gpu: 1``."""
    found = []
    for where, container in _containers(_dict(_dict(pod).get("spec"))):
        resources = _dict(container.get("resources"))
        for section in ("requests", "limits"):
            value = _dict(resources.get(section)).get(settings.gpu_resource)
            amount = quantity(value)
            if value is not None and (amount is None or amount > 0):
                found.append(f"{where} {section} {settings.gpu_resource}: {clip(str(value))}")
    return found


def gpu_problem(pod: Any, settings: Settings = DEFAULT) -> str | None:
    """The first contradiction among a pod's GPU requests (spec §4), or None.

    The KAI-compatible message comes first, then which container, which values,
    and what to change.
    """
    notes = annotations(pod)
    mem_key, frac_key = settings.gpu_memory_annotation, settings.gpu_fraction_annotation
    memory, fraction = notes.get(mem_key), notes.get(frac_key)
    whole = whole_gpu_requests(pod, settings)
    # the order of KAI's own checks, so a pod with several problems gets KAI's message
    if fraction is not None and whole:
        return (
            f"{MSG_FRACTION_AND_GPU}: {whole[0]} and annotation {frac_key}: {_q(fraction)}; "
            f"remove {settings.gpu_resource} to share a GPU, or remove the {frac_key} annotation to use whole GPUs"
        )
    if whole and memory is not None:
        return (
            f"{MSG_GPU_AND_MEMORY}: {whole[0]} and annotation {mem_key}: {_q(memory)}; "
            f"remove {settings.gpu_resource} to share a GPU by memory, or remove the {mem_key} annotation "
            f"to use whole GPUs"
        )
    if memory is not None and fraction is not None:
        return (
            f"{MSG_GPU_AND_MEMORY}: annotations {mem_key}: {_q(memory)} and {frac_key}: {_q(fraction)}; "
            f"keep only one of them"
        )
    if memory is not None:
        text = memory.strip()
        if not (_WHOLE_NUMBER.fullmatch(text) and int(text) > 0):
            return (
                f"{MSG_BAD_MEMORY}: {mem_key}: {_q(memory)}; give the GPU memory in MiB as a whole number, "
                f'e.g. {mem_key}: "4000"'
            )
    if fraction is not None:
        text = fraction.strip()
        ok = False
        if _DECIMAL.match(text):
            value = Decimal(text)
            ok = Decimal(0) < value < Decimal(1)
        if not ok:
            return (
                f"{MSG_BAD_FRACTION}: {frac_key}: {_q(fraction)}; give a decimal between 0 and 1, "
                f'e.g. {frac_key}: "0.5", or request whole GPUs with {settings.gpu_resource}'
            )
    return None


# ---------------------------------------------------------------------------
# pod state and durations


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: Any) -> float:
    """``90s``, ``5m``, ``1h30m``, ``500ms`` or a bare number of seconds -> seconds.

    Raises ValueError with a message that says what is accepted.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0 or not math.isfinite(text):
            raise ValueError(f"invalid duration {_q(text)}: must be ≥ 0")
        return float(text)
    raw = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    if raw and re.fullmatch(r"(\d+(?:\.\d+)?(?:ms|h|m|s))+", raw):
        return sum(float(n) * _UNIT[u] for n, u in _DURATION_PART.findall(raw))
    raise ValueError(f"invalid duration {_q(text)}: use e.g. 90s, 5m, 1h30m or a number of seconds")


def grace_period_for(objs: Iterable[Any], default: float | None, settings: Settings = DEFAULT) -> tuple[float | None, str]:
    """The staleness grace period (seconds; None = never evict) from the first of
    ``objs`` (e.g. PodGroup, then workload) that sets the annotation, else ``default``.
    A malformed annotation is skipped, and the reason says so.
    """
    notes = []
    for obj in objs:
        raw = annotations(obj).get(settings.grace_period_annotation)
        if raw is None:
            continue
        if raw.strip() == "-1":
            return None, f"{settings.grace_period_annotation}=-1 on {kind_name(obj)}: never evicts"
        try:
            return parse_duration(raw), f"{settings.grace_period_annotation}={clip(raw)} on {kind_name(obj)}"
        except ValueError as exc:
            notes.append(f"ignored {kind_name(obj)}: {exc}")
    text = "default" if not notes else "default (" + "; ".join(notes) + ")"
    return default, text
