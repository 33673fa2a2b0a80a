"""``podgang plan``: what podgang would do with a set of manifests, with no cluster.

Every pod and pod template gets the gang it joins, every PodGroup its minMember
and where that number comes from, every denial its exact message. The decisions
are made by :mod:`podgang.rules`, the same functions the webhook and the grouper
call; this module only gathers the manifests into the inputs those functions take.
No I/O.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Iterable

from podgang import rules
from podgang.dialect import OwnerRef
from podgang.manifests import Manifest, Source
from podgang.settings import DEFAULT, Settings

WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "LeaderWorkerSet", "JobSet")
UNKNOWN_UID = "<uid>"

# --scale: kind aliases and the field each kind scales
SCALE_ALIASES = {
    "deployment": "Deployment", "deployments": "Deployment", "deploy": "Deployment",
    "replicaset": "ReplicaSet", "replicasets": "ReplicaSet", "rs": "ReplicaSet",
    "statefulset": "StatefulSet", "statefulsets": "StatefulSet", "sts": "StatefulSet",
    "job": "Job", "jobs": "Job",
    "cronjob": "CronJob", "cronjobs": "CronJob", "cj": "CronJob",
    "leaderworkerset": "LeaderWorkerSet", "leaderworkersets": "LeaderWorkerSet", "lws": "LeaderWorkerSet",
}  # fmt: skip
SCALE_FIELDS = {
    "Deployment": ("spec", "replicas"),
    "ReplicaSet": ("spec", "replicas"),
    "StatefulSet": ("spec", "replicas"),
    "LeaderWorkerSet": ("spec", "replicas"),
    "Job": ("spec", "parallelism"),
    "CronJob": ("spec", "jobTemplate", "spec", "parallelism"),
}


class ScaleError(ValueError):
    """A ``--scale`` that names nothing in the manifests, or cannot apply."""


@dataclass
class Member:
    """A pod, or a workload's pod template, and the gang it joins."""

    source: Source
    what: str  # "pod default/app-server" / "deployment default/web"
    namespace: str
    group: str | None = None
    why: str = ""
    skipped: str | None = None
    pods: int = 1


@dataclass
class PlannedGroup:
    namespace: str
    name: str
    min_member: rules.MinMember
    origin: str  # "hand-made" | "owned" | "owner-less"
    exists: bool = True  # False: a hand-made group no manifest defines
    owner: OwnerRef | None = None
    owner_text: str = ""
    defined_at: Source | None = None
    defined_obj: dict[str, Any] | None = None
    cluster_min_member: int | None = None  # minMember written in the manifest, if defined
    per_run: bool = False  # CronJob: one such group per Job run
    before: rules.MinMember | None = None  # with --scale: the value before

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def name_known(self) -> bool:
        return UNKNOWN_UID not in self.name and not self.per_run


@dataclass
class Finding:
    source: Source | None
    what: str
    message: str


@dataclass
class Plan:
    members: list[Member] = field(default_factory=list)
    groups: dict[tuple[str, str], PlannedGroup] = field(default_factory=dict)
    denials: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------


def _ns(obj: dict[str, Any], default_namespace: str) -> str:
    return rules.metadata(obj).get("namespace") or default_namespace


def _what(obj: dict[str, Any], namespace: str) -> str:
    md = rules.metadata(obj)
    return f"{str(obj.get('kind')).lower()} {namespace}/{md.get('name') or md.get('generateName') or '?'}"


class _Index:
    """The manifests' objects by namespace, kind and name (for owner chains)."""

    def __init__(self, manifests: Iterable[Manifest], default_namespace: str):
        self.by_key: dict[tuple[str, str, str], dict[str, Any]] = {}
        for m in manifests:
            name = rules.metadata(m.obj).get("name")
            if name:
                self.by_key[(_ns(m.obj, default_namespace), m.obj["kind"], name)] = m.obj

    def get(self, namespace: str, ref: OwnerRef) -> dict[str, Any] | None:
        obj = self.by_key.get((namespace, ref.kind, ref.name))
        if obj is None:
            return None
        uid = rules.metadata(obj).get("uid")
        return obj if not uid or not ref.uid or uid == ref.uid else None

    def chain(self, obj: dict[str, Any], namespace: str) -> list[dict[str, Any]]:
        chain: list[dict[str, Any]] = []
        for _ in range(10):
            ref = rules.owner_to_look_up(obj, chain)
            found = self.get(namespace, ref) if ref else None
            if found is None:
                break
            chain.append(found)
        return chain


def _owned_name(kind_obj: dict[str, Any], suffix: str, settings: Settings) -> tuple[str, OwnerRef]:
    md = rules.metadata(kind_obj)
    name = str(md.get("name") or "?")
    uid = md.get("uid")
    ref = OwnerRef(str(kind_obj.get("apiVersion") or ""), str(kind_obj.get("kind")), name, str(uid or ""))
    if uid:
        return rules.owned_group_name(ref, suffix, settings), ref
    return f"{settings.group_prefix}-{name}-{UNKNOWN_UID}{suffix}", ref


def apply_scale(manifests: list[Manifest], scales: dict[str, int]) -> tuple[list[Manifest], list[str]]:
    """Copies of ``manifests`` with ``KIND/NAME=N`` scales applied, and what changed."""
    out = [Manifest(copy.deepcopy(m.obj), m.source) for m in manifests]
    done: list[str] = []
    for target, count in scales.items():
        kind_text, _, name = target.partition("/")
        kind = SCALE_ALIASES.get(kind_text.lower())
        if kind is None or not name:
            raise ScaleError(
                f"--scale {target}={count}: expected KIND/NAME=N with KIND one of "
                f"{', '.join(sorted(set(SCALE_ALIASES.values())))}"
            )
        if count < 0:
            raise ScaleError(f"--scale {target}={count}: a count cannot be negative")
        hits = [m for m in out if m.obj.get("kind") == kind and rules.metadata(m.obj).get("name") == name]
        if not hits:
            raise ScaleError(f"--scale {target}={count}: no {kind} named {name!r} in the manifests")
        path = SCALE_FIELDS[kind]
        for m in hits:
            node = m.obj
            for step in path[:-1]:
                node = node.setdefault(step, {}) if isinstance(node, dict) else {}
            old = node.get(path[-1]) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node[path[-1]] = count
            shown = old if old is not None else 1
            done.append(f"{kind.lower()}/{name} {'.'.join(path[1:])} {shown} → {count}")
    return out, done


def build_plan(
    manifests: list[Manifest],
    settings: Settings = DEFAULT,
    default_namespace: str = "default",
) -> Plan:
    """Decide, for every object in ``manifests``, what podgang would do."""
    plan = Plan()
    index = _Index(manifests, default_namespace)
    dialect = settings.dialect
    defined: dict[tuple[str, str], Manifest] = {}
    shared: dict[tuple[str, str], list[Any]] = {}  # hand-made group -> workloads
    standalone: dict[tuple[str, str], list[Any]] = {}  # hand-made group -> pods no workload here owns
    first_seen: dict[tuple[str, str], Source] = {}

    def hand_made(key: tuple[str, str], source: Source) -> None:
        shared.setdefault(key, [])
        first_seen.setdefault(key, source)

    def add_group(group: PlannedGroup) -> None:
        plan.groups.setdefault(group.key, group)

    for m in manifests:
        obj, src = m.obj, m.source
        if dialect.is_podgroup(obj):
            name = rules.metadata(obj).get("name")
            if name:
                defined[(_ns(obj, default_namespace), name)] = m

    for m in manifests:
        obj, src = m.obj, m.source
        kind = obj.get("kind")
        ns = _ns(obj, default_namespace)
        if kind == "Pod":
            _plan_pod(plan, obj, src, ns, index, settings, hand_made, standalone, add_group)
        elif kind in WORKLOAD_KINDS:
            parent = rules.controller_ref(obj)
            if parent is not None and index.get(ns, parent) is not None:
                continue  # its owner's template covers it (Deployment → ReplicaSet, CronJob → Job, ...)
            _plan_workload(plan, obj, src, ns, settings, hand_made, shared, add_group)

    for key in sorted(shared):
        ns, name = key
        pg = defined.get(key)
        pods = standalone.get(key, [])
        written = dialect.min_member(pg.obj) if pg else None
        if not shared[key] and written is not None:
            # only standalone pods name it: the user's size stands (as the grouper does)
            mm = rules.MinMember(written, f"as written: only standalone pods use it ({len(pods)} here)")
        else:
            mm = rules.shared_min_member([*shared[key], *pods], 0, pg.obj if pg else None, settings)
        group = PlannedGroup(ns, name, mm, "hand-made", exists=pg is not None)
        if pg is not None:
            group.defined_at, group.defined_obj = pg.source, pg.obj
            group.cluster_min_member = dialect.min_member(pg.obj)
        else:
            plan.warnings.append(
                Finding(first_seen.get(key), f"podgroup {ns}/{name}",
                        f"PodGroup {name} not found in namespace {ns}: the pod stays Pending until it exists")
            )
        for problem in _pin_problems([pg.obj] if pg else [], shared[key], settings):
            plan.warnings.append(Finding(pg.source if pg else first_seen.get(key), f"podgroup {ns}/{name}", problem))
        plan.groups[key] = group

    for key, pg in sorted(defined.items()):
        if key not in plan.groups:
            ns, name = key
            value = dialect.min_member(pg.obj)
            group = PlannedGroup(
                ns, name, rules.MinMember(value or 1, "as written: no pod or workload in these manifests uses it"),
                "hand-made", defined_at=pg.source, defined_obj=pg.obj, cluster_min_member=value,
            )
            plan.groups[key] = group
            plan.notes.append(Finding(pg.source, f"podgroup {ns}/{name}", "no pod or workload in these manifests uses it"))
    return plan


def _pin_problems(podgroups: list[Any], workloads: list[Any], settings: Settings) -> list[str]:
    problems = []
    for obj in [*podgroups, *workloads]:
        _value, problem = rules.pinned_min_member(obj, settings)
        if problem:
            problems.append(problem)
    return problems


def _plan_pod(plan, obj, src, ns, index, settings, hand_made, standalone, add_group) -> None:
    what = _what(obj, ns)
    member = Member(src, what, ns)
    plan.members.append(member)
    skip = rules.scope_problem(obj, ns, settings)
    if skip:
        member.skipped = skip
        return
    chain = index.chain(obj, ns)
    gang = rules.gang_for_pod(obj, chain, settings=settings)
    denied = [gang.message] if isinstance(gang, rules.Denial) else []
    gpu = rules.gpu_problem(obj, settings)
    if gpu:
        denied.append(gpu)
    if denied:
        plan.denials.extend(Finding(src, what, message) for message in denied)
        return
    top = rules.top_owner(obj, chain)
    top_obj = chain[-1] if chain and top and rules.metadata(chain[-1]).get("name") == top.name else None
    member.why = gang.reason
    if gang.hand_made:
        member.group = gang.name
        hand_made((ns, gang.name), src)
        if top_obj is None:  # standalone (or its owner is not in these manifests)
            standalone.setdefault((ns, gang.name), []).append(obj)
        return
    if gang.owner_less:
        member.group = gang.name
        add_group(PlannedGroup(ns, gang.name, rules.min_member_for(obj, None, settings), "owner-less",
                               owner_text=f"pod/{rules.metadata(obj).get('name')}"))
        return
    member.group = gang.name
    if top_obj is not None:  # its workload is in the manifests: the workload's entry makes the group
        return
    add_group(PlannedGroup(ns, gang.name, rules.MinMember(1, f"{top.kind.lower()}/{top.name} is not in these manifests"),
                           "owned", owner=top, owner_text=f"{top.kind.lower()}/{top.name}"))


def _plan_workload(plan, obj, src, ns, settings, hand_made, shared, add_group) -> None:
    what = _what(obj, ns)
    member = Member(src, what, ns, pods=rules.desired_size(obj)[0])
    plan.members.append(member)
    if rules.is_skipped(obj, settings):
        member.skipped = f"labelled {settings.skip_label}=true"
        return
    templates = rules.pod_templates(obj)
    problems = [rules.scope_problem(t, ns, settings) for _, t in templates]
    if not templates or all(problems):
        member.skipped = next((p for p in problems if p), "no pod template")
        return
    for path, template in templates:
        gpu = rules.gpu_problem(template, settings)
        if gpu:
            plan.denials.append(Finding(src, f"{what} {path}", gpu))
    named = rules.template_group(obj, settings)
    if isinstance(named, rules.Denial):
        plan.denials.append(Finding(src, what, named.message))
        member.why = "denied"
        return
    if named is not None:
        member.group, member.why = named, f"hand-made: its pod template names PodGroup {named}"
        hand_made((ns, named), src)
        shared[(ns, named)].append(obj)
        return
    mm = rules.min_member_for(obj, None, settings)
    plan.warnings.extend(Finding(src, what, problem) for problem in _pin_problems([], [obj], settings))
    owner_text = f"{str(obj.get('kind')).lower()}/{rules.metadata(obj).get('name')}"
    kind = obj.get("kind")
    if kind == "LeaderWorkerSet":
        replicas = max(rules._int(rules._dict(obj.get("spec")).get("replicas"), 1), 0)
        names = []
        for i in range(replicas):
            name, ref = _owned_name(obj, f"-group-{i}", settings)
            names.append(name)
            add_group(PlannedGroup(ns, name, mm, "owned", owner=ref, owner_text=owner_text))
        member.group = ", ".join(names) if names else "(no groups: 0 replicas)"
        member.why = f"one PodGroup per LeaderWorkerSet group ({replicas})"
        member.pods = replicas * mm.value
        return
    if kind == "CronJob":
        name = f"{settings.group_prefix}-{rules.metadata(obj).get('name')}-<run>-{UNKNOWN_UID}"
        member.group, member.why = name, "one PodGroup per Job run, owned by that Job"
        add_group(PlannedGroup(ns, name, mm, "owned", owner_text=f"each Job of {owner_text}", per_run=True))
        return
    name, ref = _owned_name(obj, "", settings)
    member.group, member.why = name, f"top owner {owner_text}"
    add_group(PlannedGroup(ns, name, mm, "owned", owner=ref, owner_text=owner_text))


def plan_with_scale(
    manifests: list[Manifest],
    scales: dict[str, int],
    settings: Settings = DEFAULT,
    default_namespace: str = "default",
) -> Plan:
    """The plan after ``scales``; each group remembers its minMember before them."""
    if not scales:
        return build_plan(manifests, settings, default_namespace)
    before = build_plan(manifests, settings, default_namespace)
    scaled, changes = apply_scale(manifests, scales)
    after = build_plan(scaled, settings, default_namespace)
    after.scaled = changes
    for key, group in after.groups.items():
        old = before.groups.get(key)
        group.before = old.min_member if old else None
    return after


def podgroup_manifests(plan: Plan, settings: Settings = DEFAULT) -> tuple[list[dict[str, Any]], list[str]]:
    """The PodGroups that would exist, as manifests to apply, and comments for the
    ones that cannot be written out here (name depends on a UID the cluster assigns,
    or a hand-made group no manifest defines).
    """
    dialect = settings.dialect
    docs: list[dict[str, Any]] = []
    comments: list[str] = []
    for key in sorted(plan.groups):
        group = plan.groups[key]
        if group.origin == "hand-made":
            if group.defined_obj is None:
                comments.append(f"PodGroup {group.namespace}/{group.name} (minMember {group.min_member.value}) is "
                                f"referenced but no manifest defines it: create it, or the pods stay Pending")
                continue
            doc = copy.deepcopy(group.defined_obj)
            md = doc.setdefault("metadata", {})
            for noise in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
                md.pop(noise, None)
            md.setdefault("namespace", group.namespace)
            doc.pop("status", None)
            doc.setdefault("spec", {})[dialect.min_member_field] = group.min_member.value
            docs.append(doc)
            continue
        if not group.name_known:
            comments.append(f"PodGroup {group.namespace}/{group.name} (minMember {group.min_member.value}, "
                            f"{group.owner_text}): the grouper creates it once the cluster assigns the UID")
            continue
        docs.append(dialect.manifest(
            group.name, group.namespace, group.min_member.value,
            owner=group.owner if group.owner and group.owner.uid else None,
            labels=settings.managed_labels,
        ))
    return docs, comments
