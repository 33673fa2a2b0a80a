"""``podgang plan``: what podgang would do with a set of manifests, with no cluster.

A plan is what the two processes would do, through their own code: each pod is
admitted as the webhook admits it (the rules decide its gang and check its GPU
requests), then the manifests fill the grouper's own cache and every PodGroup is
what the grouper's :func:`podgang.gang.desired_group` says — the same
function the running grouper calls, so the plan is what the cluster will do.
This module only turns manifests into those inputs and the answers into a report.
No I/O.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

import jsonpatch

from podgang import feasibility, kinds, rules
from podgang import plan_codes as codes
from podgang.backends import BACKENDS, Backend, GangSpec, native
from podgang.backends.base import PATCH, gang_spec, slim_fact
from podgang.gang import Cache, key_of, split_key, template_backend
from podgang.gang import Desired, desired_group, gang_options, kept_grace, owned_subgroups
from podgang.manifests import Manifest, Source, object_metas, schema_checked
from podgang.objects import POD, OwnerRef, Resource, as_dict, clip, metadata, quoted
from podgang.settings import DEFAULT, Settings

UNKNOWN_UID = "<uid>"
MAX_SCALE = rules.MAX_MIN_MEMBER
#: stands in for a UID the cluster has not assigned yet (a valid name part as long as a
#: UID, so that a name's length is what the cluster's will be; never shown: <uid>)
_UID_TOKEN = "x0uid0x"
_UID_DIGITS = 36 - len(_UID_TOKEN)


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
    no_group: str | None = None  # why it gets no group (or none whose name can be known here)


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
    random_name: bool = False  # named from generateName plus the webhook's random suffix
    before: rules.MinMember | None = None  # with --scale: the value before
    backend: Backend | None = None  # whose PodGroup it is (None: the first mapped backend)
    options: dict[str, Any] = field(default_factory=dict)  # the backend's own per-gang settings
    subgroups: tuple[rules.Subgroup, ...] = ()  # one per workload of a shared hand-made group, or a tree
    min_subgroup: int | None = None  # a tree's root: the parts it needs (KAI's minSubGroup)
    users_tree: str | None = None  # a hand-made group's own tree, which podgang leaves as written

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def name_known(self) -> bool:
        return UNKNOWN_UID not in self.name and not self.per_run and not self.random_name


@dataclass
class Finding:
    code: str  # what kind of finding, for scripts (podgang.plan_codes)
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
    #: what the plan could not check, and why (no Queues given, a cluster that could not be read …)
    not_checked: list[Finding] = field(default_factory=list)
    scaled: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Known:
    """What the plan is told of the cluster besides the manifests."""

    #: fact objects read from the cluster, by resource label: complete lists
    facts: Mapping[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the fact resources the cluster was asked for and could not give: label -> why
    unread: Mapping[str, str] = field(default_factory=dict)
    #: where they were read (``--kubeconfig PATH``)
    cluster: str = ""
    #: fact resources (by plural: ``queues``) the user says the manifests hold all of
    complete: Collection[str] = ()


#: what the never-placed verdicts check with the facts of each kind
CHECKS = {
    "Queue": "gangs' queues (they exist, are leaves, hold the gangs within quota and limit)",
    "PriorityClass": "the PriorityClasses pods name (they exist, whether a gang may be preempted)",
    "Node": "whether gangs fit on the nodes they may use",
}
#: the most gangs named in one note
GANGS_NAMED = 3




# ---------------------------------------------------------------------------
# the manifests as the cluster would hold them


def _ns(obj: dict[str, Any], default_namespace: str) -> str:
    return metadata(obj).get("namespace") or default_namespace


def _what(obj: dict[str, Any], namespace: str) -> str:
    """``job default/train``; a kind named as one podgang knows but of another API group
    with its group (``job.batch.volcano.sh default/train``: not a batch/v1 Job)."""
    md = metadata(obj)
    kind = str(obj.get('kind')).lower()
    if obj.get("kind") in kinds.WORKLOADS and kinds.workload_kind(obj) is None:
        kind = f"{kind}.{kinds.api_group(obj) or 'core'}"
    return f"{kind} {namespace}/{md.get('name') or md.get('generateName') or '?'}"


def shown(name: str) -> str:
    """A name with the stand-in for a UID the cluster has not assigned shown as ``<uid>``."""
    if _UID_TOKEN not in name:
        return name
    head, _, rest = name.partition(_UID_TOKEN)
    digits = len(rest) - len(rest.lstrip("0123456789"))
    return shown(f"{head}{UNKNOWN_UID}{rest[digits:]}")


def _api_group(api_version: Any) -> str:
    """``apps`` of ``apps/v1``, ``""`` of ``v1``: an owner reference names an object by
    its API group and kind, whatever the version."""
    return str(api_version or "").rpartition("/")[0]


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
        numbers = itertools.count(1)
        for m, obj, _ in self.items:
            md = obj["metadata"]
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


# ---------------------------------------------------------------------------
# admission, as the webhook does it


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


# ---------------------------------------------------------------------------
# the plan


def build_plan(
    manifests: list[Manifest],
    settings: Settings = DEFAULT,
    default_namespace: str = "default",
    known: Known = Known(),
) -> Plan:
    """Decide, for every object in ``manifests``, what podgang would do. ``known``: the
    cluster's queues, PriorityClasses and nodes (``--kubeconfig``); the manifests' own
    objects of those kinds are added to them. A kind neither gives is not known, and no
    never-placed verdict is drawn from it; a kind only the manifests give is not complete
    (unless ``known.complete`` says so): that an object of it does not exist is not concluded."""
    plan = Plan()
    made = _made_by_operators(manifests, default_namespace)
    objects = _Objects([*manifests, *made], default_namespace)
    for ignored, wins in objects.duplicates:
        plan.warnings.append(Finding(codes.DEFINED_TWICE, ignored.source,
                                     _what(ignored.obj, _ns(ignored.obj, default_namespace)),
                                     f"defined twice: {wins.source} wins (applied after it, it replaces this one)"))
    cache = Cache(settings)
    cache.pods_observed = False
    cache.watched_kinds = set()  # an owner missing from the manifests ends the walk: it is the top
    fact_resources = {r.label: r for b in settings.enabled_backends for r in b.fact_resources}
    for label, listed in known.facts.items():
        if listed is not None and label in fact_resources:
            kind = fact_resources[label].kind
            cache.fact_stores[label].update({key_of("", str(metadata(f).get("name"))): slim_fact(f, kind)
                                             for f in listed})
            cache.known_facts.add(label)
    by_type = {(r.api_version, r.kind): r for r in fact_resources.values()}
    given: dict[str, int] = {}  # fact objects the manifests hold, by label
    for _, obj, _ in objects.items:
        resource = by_type.get((obj.get("apiVersion"), obj.get("kind")))
        if resource is not None and metadata(obj).get("name"):
            cache.fact_stores[resource.label][key_of("", str(metadata(obj)["name"]))] = slim_fact(obj, resource.kind)
            cache.known_facts.add(resource.label)
            given[resource.label] = given.get(resource.label, 0) + 1
    cache.facts_version += 1
    partial = {label: given[label] for label in given
               if known.facts.get(label) is None and fact_resources[label].plural not in known.complete}
    absent: dict[tuple[str, str], list[str]] = {}  # (kind, name) not in partial facts -> the gangs naming it
    defined: dict[str, Manifest] = {}  # group key -> its PodGroup as written
    named_by_pods: dict[str, Source] = {}  # hand-made group key -> first pod naming it
    random_names: set[str] = set()
    workloads: list[tuple[Member, dict[str, Any], str]] = []

    def put(kind: str | Backend, obj: dict[str, Any]) -> str:
        slim = cache.slimmer_for(kind)(obj)
        key = key_of(slim["metadata"]["namespace"], slim["metadata"]["name"])
        store = cache.store_for(kind)
        old = store.get(key)
        store[key] = slim
        cache.apply(kind, old, slim)
        return key

    native_planned = next((b.version for b in settings.enabled_backends if isinstance(b, native.NativeBackend)), None)
    for m, obj, ns in objects.items:
        kind = obj.get("kind")
        backend = next((b for b in settings.enabled_backends if b.is_podgroup(obj)), None)
        if backend is None and native_planned and (problem := native.version_problem(obj, native_planned)):
            plan.warnings.append(Finding(codes.NATIVE_VERSION, m.source, _what(obj, ns), problem))
        elif backend is not None and metadata(obj).get("name"):
            for refused in backend.refusals(obj):  # what the apiserver would not create
                plan.denials.append(Finding(codes.REFUSED, m.source, _what(obj, ns), refused))
            holder = put(backend, obj)
            for key in cache.podgroups.keys_of(backend, cache.store_for(backend)[holder]):
                defined[key] = m  # a 1.35 Workload defines a gang per pod group
        elif kind == POD.kind and kinds.api_group(obj) == POD.group:
            _admit_pod(plan, m.source, obj, ns, objects, settings, put, named_by_pods, random_names)
        elif kinds.workload_kind(obj) is not None and kind in cache.workloads and metadata(obj).get("name"):
            put(kind, obj)
            workloads.append((Member(m.source, _what(obj, ns), ns), obj, ns))
        elif meant := _kind_typo(obj):  # the apiserver knows no such kind: nothing of it is planned
            said = f"{obj.get('apiVersion')} has no kind {quoted(kind)} podgang knows: did you mean {quoted(meant)}?"
            plan.members.append(Member(m.source, _what(obj, ns), ns, skipped=said))
            plan.warnings.append(Finding(codes.KIND_TYPO, m.source, _what(obj, ns), said))
        elif (kinds.workload_kind(obj) is not None or kinds.template_of(obj) or _own_workload(obj)
              or kinds.any_pod_templates(obj)):
            _unfollowed_workload(plan, m.source, obj, ns, settings)

    for member, obj, ns in workloads:
        _workload_member(plan, member, obj, ns, objects, cache, settings)

    unconcluded = {kind for kind, fact in feasibility.ABSENT.items()
                   if any(fact_resources[label].kind == fact for label in partial)}
    for key in sorted(cache.all_group_keys()):
        _planned_group(plan, desired_group(cache, key), cache, settings, objects, defined, named_by_pods, random_names,
                       unconcluded, absent)
    _say_absent(plan, absent, [fact_resources[label] for label in partial])
    if plan.groups:
        plan.not_checked = _not_checked(known, fact_resources, cache.known_facts, partial)
    if not schema_checked():
        plan.not_checked.append(Finding(codes.SCHEMAS_NOT_INSTALLED, None, "the Kubernetes API's schemas", (
            "kubernetes-validate is not installed: of the built-in kinds, only the counts, labels and "
            "annotations are checked for what the apiserver refuses (pip install 'podgang[plan]')")))
    order = {m.source: i for i, m in enumerate(manifests)}
    plan.members.sort(key=lambda member: order.get(member.source, 0))  # as the manifests are written
    _did_you_mean(plan, objects, settings)
    _show_uids(plan)
    return plan


#: the most single-character edits (a letter wrong, missing, added, or two swapped) a typo is
TYPO_EDITS = 2


@functools.cache
def _known_kinds() -> dict[str, frozenset[str]]:
    """Every kind podgang knows, by API group: workloads, pods, PodGroups, the facts'."""
    resources = [POD, *(w.resource for w in kinds.WORKLOADS.values()),
                 *(b.podgroup for b in BACKENDS.values()), *(r for b in BACKENDS.values() for r in b.fact_resources)]
    known: dict[str, set[str]] = {}
    for group, kind in [*((r.group, r.kind) for r in resources), *kinds.TEMPLATE_KINDS]:
        known.setdefault(group, set()).add(kind)
    return {group: frozenset(names) for group, names in known.items()}


def _edits(a: str, b: str) -> int:
    """How many single-character edits turn ``a`` into ``b``, a swap of two neighbours one
    (the optimal string alignment distance)."""
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        previous, row = row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
        before = previous
    return row[len(b)]


def _typo_of(name: str, known: Collection[str]) -> str | None:
    """The known name ``name`` is a typo of: at most :data:`TYPO_EDITS` edits away (one for
    a name of five characters or fewer), the nearest; None when none is that near."""
    most = min(TYPO_EDITS, max(1, (len(name) - 1) // 4))
    near = sorted((_edits(name, k), k) for k in known if k != name)
    return near[0][1] if near and near[0][0] <= most else None


def _kind_typo(obj: dict[str, Any]) -> str | None:
    """The kind podgang knows in ``obj``'s API group that its unknown kind is a typo of
    (``Deployment`` for ``Deploymnet`` in ``apps/v1``), if any."""
    kind, known = obj.get("kind"), _known_kinds().get(kinds.api_group(obj))
    return _typo_of(kind, known) if isinstance(kind, str) and known and kind not in known else None


#: the label and annotation keys whose typos are said: podgang's and KAI's
_KEY = re.compile(r"(podgang\.io|kai\.scheduler)/[A-Za-z0-9][-A-Za-z0-9_.]*")


def _known_keys(settings: Settings) -> frozenset[str]:
    """The keys podgang and KAI read: the settings' and every such constant of the rules' modules."""
    modules = [kinds, rules, sys.modules[Cache.__module__],
               *(sys.modules[type(b).__module__] for b in BACKENDS.values())]
    spelled = [*(getattr(settings, f.name) for f in dataclasses.fields(settings)),
               *(value for module in modules for value in vars(module).values())]
    return frozenset(v for v in spelled if isinstance(v, str) and _KEY.fullmatch(v))


def _key_typos(obj: dict[str, Any], known: frozenset[str]) -> list[str]:
    """``podgang.io/min-members`` where ``podgang.io/min-member`` was meant, in the object's
    labels and annotations and its templates'."""
    out = []
    for path, meta in object_metas(obj):
        for field in ("labels", "annotations"):
            entries = meta.get(field) if isinstance(meta, dict) else None
            for key in entries if isinstance(entries, dict) else ():
                if not isinstance(key, str) or key in known or not _KEY.fullmatch(key):
                    continue
                if meant := _typo_of(key, known):
                    out.append(f"{path}.{field}: {quoted(key)} is no key podgang or KAI reads: did you mean "
                               f"{quoted(meant)}?")
    return out


def _did_you_mean(plan: Plan, objects: _Objects, settings: Settings) -> None:
    """A warning for a schedulerName one typo away from a mapped one (``kai-schedular``),
    whose pods would otherwise be left alone without a word, and for such a key of podgang's
    or KAI's (``podgang.io/min-members``)."""
    known = _known_keys(settings)
    for m, obj, ns in objects.items:
        plan.warnings.extend(Finding(codes.KEY_TYPO, m.source, _what(obj, ns), typo) for typo in _key_typos(obj, known))
        kind = obj.get("kind")
        is_pod = kind == POD.kind and kinds.api_group(obj) == POD.group
        templates = [obj] if is_pod else [t for _, t in kinds.any_pod_templates(obj)]
        names = dict.fromkeys(name for t in templates
                              if isinstance(name := as_dict(t.get("spec")).get("schedulerName"), str))
        for name in names:
            if name not in settings.scheduler_names and (meant := _typo_of(name, settings.scheduler_names)):
                plan.warnings.append(Finding(codes.SCHEDULER_TYPO, m.source, _what(obj, ns), (
                    f"schedulerName {quoted(name)}: did you mean {quoted(meant)}? (podgang leaves pods of other "
                    f"schedulers alone: this one gets no gang)")))


def _plural(kind: str) -> str:
    return f"{kind}es" if kind.endswith("s") else f"{kind}s"


def _only(count: int, kind: str) -> str:
    """``only the 2 Queues in the input are known``"""
    return (f"only the {count} {_plural(kind)} in the input are known" if count != 1
            else f"only the 1 {kind} in the input is known")


def _say_absent(plan: Plan, absent: dict[tuple[str, str], list[str]], partial: list[Resource]) -> None:
    """One note per queue or PriorityClass the gangs name that the manifests, which hold only
    some of the cluster's, do not hold: whether it exists is not known."""
    for (kind, name), gangs in sorted(absent.items()):
        resource = next(r for r in partial if r.kind == kind)
        named = ", ".join(gangs[:GANGS_NAMED]) + (f" and {len(gangs) - GANGS_NAMED} more"
                                                   if len(gangs) > GANGS_NAMED else "")
        noun = kind.lower() if kind == "Queue" else kind
        plan.notes.append(Finding(codes.NOT_IN_INPUT, None, f"{noun} {quoted(name)}", (
            f"not in the input, named by {len(gangs)} gang{'s' if len(gangs) != 1 else ''} ({named}): whether it "
            f"exists is not checked (the input holds only some {_plural(kind)}: --kubeconfig to read the "
            f"cluster's, or --complete {resource.plural} if it holds them all)")))


def _not_checked(known: Known, fact_resources: Mapping[str, Resource], listed: Collection[str],
                 partial: Mapping[str, int]) -> list[Finding]:
    """What the never-placed verdicts could not check, each said once with why."""
    out: list[Finding] = []
    unread: dict[str, list[str]] = {}  # why -> the labels it kept out
    for label in fact_resources:
        if label in known.unread:
            unread.setdefault(known.unread[label], []).append(label)
    if len(unread) == 1 and len(next(iter(unread.values()))) == len(fact_resources):
        why, labels = next(iter(unread.items()))
        out.append(Finding(codes.CLUSTER_UNREAD, None, known.cluster,
                           f"the cluster could not be read ({why}): {', '.join(labels)} are not checked"))
    else:
        out += [Finding(codes.CLUSTER_UNREAD, None, label, f"not read from {known.cluster} ({why})")
                for why, labels in unread.items() for label in labels]
    unknown = [label for label in fact_resources if label not in listed and label not in known.unread]
    if unknown:
        source = "and no --kubeconfig" if not known.cluster else f"nor read from {known.cluster}"
        checks = "; ".join(CHECKS[fact_resources[label].kind] for label in unknown)
        out.append(Finding(codes.FACTS_NOT_GIVEN, None, ", ".join(unknown),
                           f"none in the input {source}: {checks} — not checked"))
    for label, resource in fact_resources.items():
        kind = resource.kind
        if label in partial and kind in feasibility.ABSENT.values():
            out.append(Finding(codes.FACTS_PARTIAL, None, label, (
                f"{_only(partial[label], kind)}: one not among them is a note, "
                f"not a verdict (--kubeconfig to read the cluster's, or --complete {resource.plural} if the input "
                f"holds them all)")))
        elif label in partial:
            out.append(Finding(codes.FACTS_PARTIAL, None, label, (
                f"{_only(partial[label], kind)}: {CHECKS[kind]} is judged on "
                f"these alone (--kubeconfig to read the cluster's)")))
    return out


def _made_by_operators(manifests: list[Manifest], default_namespace: str) -> list[Manifest]:
    """What an operator makes from the manifests before any pod exists, where they hold all
    it reads: the JobSet the Trainer makes for a TrainJob whose runtime is among them."""
    runtimes = {(str(m.obj.get("kind")), str(metadata(m.obj).get("name")), _ns(m.obj, default_namespace)): m.obj
                for m in manifests if m.obj.get("kind") in kinds.TRAINER_RUNTIME_KINDS}
    out = []
    for m in manifests:
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


def _show_uids(plan: Plan) -> None:
    """Every text of the plan with the stand-in for an unassigned UID shown as ``<uid>``:
    the stand-in is the plan's own and never reaches its output."""
    for findings in (plan.denials, plan.warnings, plan.notes):
        findings[:] = [dataclasses.replace(f, what=shown(f.what), message=shown(f.message)) for f in findings]
    for member in plan.members:
        member.why = shown(member.why)
        member.no_group = shown(member.no_group) if member.no_group else member.no_group
        member.skipped = shown(member.skipped) if member.skipped else member.skipped


def _admit_pod(plan: Plan, source: Source, obj: dict[str, Any], ns: str, objects: _Objects, settings: Settings,
               put, named_by_pods: dict[str, Source], random_names: set[str]) -> None:
    member = Member(source, _what(obj, ns), ns)
    plan.members.append(member)
    chain, stopped_at = objects.chain(obj)
    replaced = objects.replaced(stopped_at, ns)
    if replaced:  # the webhook's owner look-up fails: it sees none of the owners, admits without a group
        chain = []
    skip = rules.scope_problem(obj, ns, settings, chain)
    if skip:
        member.skipped = skip
        return
    gpu = rules.gpu_problem(obj, settings)
    if replaced:
        if gpu:
            plan.denials.append(Finding(codes.GPU_CONFLICT, source, member.what, gpu))
            return
        member.no_group = replaced
        plan.warnings.append(Finding(codes.OWNER_REPLACED, source, member.what, f"{replaced}: the webhook admits "
                                     f"the pod without a group and the garbage collector deletes it"))
        return
    suffix = rules.generated_suffix(f"{source}")  # stands in for the webhook's random one: one per pod
    gang = _admitted_gang(obj, chain, settings, suffix)
    denied = [(codes.DENIED, gang.message)] if isinstance(gang, rules.Denial) else []
    if gpu:
        denied.append((codes.GPU_CONFLICT, gpu))
    if denied:
        plan.denials.extend(Finding(code, source, member.what, message) for code, message in denied)
        return
    assert isinstance(gang, rules.Gang)
    member.group, member.why = shown(gang.name), gang.reason
    md = obj["metadata"]
    if not md.get("name"):  # the apiserver names it when it is created
        md["name"] = f"{md.get('generateName') or 'pod-'}{rules.generated_suffix(f'name {source}')}"
        if gang.owner_less:
            random_names.add(key_of(ns, gang.name))
    if gang.hand_made:
        named_by_pods.setdefault(key_of(ns, gang.name), source)
    backend = settings.backend_for(obj)
    assert backend is not None  # in scope
    admitted = jsonpatch.apply_patch(obj, backend.membership_patch(obj, gang.name))
    put(POD.kind, admitted)


def _own_workload(obj: dict[str, Any]) -> str | None:
    """Why a scheduler's own workload (a Volcano Job, a 1.36 Workload) gets its gang from
    that scheduler's controllers, or None."""
    key = (kinds.api_group(obj), str(obj.get("kind")))
    return next((b.own_workloads[key] for b in BACKENDS.values() if key in b.own_workloads), None)


def _unfollowed_workload(plan: Plan, source: Source, obj: dict[str, Any], ns: str, settings: Settings) -> None:
    """An object with pod templates whose size podgang does not follow. A template for
    workloads (a Trainer runtime) owns no pods: no gang. A scheduler's own workload (a
    Volcano Job) is ganged by that scheduler's controller. Any other gets a gang only when
    its pod templates name a mapped scheduler: a DaemonSet's is always 1 (not a gang),
    an unknown kind's 1 unless pinned."""
    member = Member(source, _what(obj, ns), ns)
    plan.members.append(member)
    made_from = kinds.template_of(obj)
    if made_from is not None:
        member.no_group = f"a template, not a workload: it owns no pods; {made_from} get the gangs"
        return
    own = _own_workload(obj)
    if own is not None:
        member.no_group = f"{own}; podgang makes none"
        return
    if rules.is_skipped(obj, settings):
        member.skipped = f"labelled {settings.skip_label}=true"
        return
    templates = kinds.any_pod_templates(obj)
    in_scope = [t for _, t in templates if not rules.scope_problem(t, ns, settings)]
    if not in_scope:
        member.skipped = next((p for _, t in templates if (p := rules.scope_problem(t, ns, settings))),
                              "no pod template")
        return
    named = rules.template_group(obj, settings)
    if isinstance(named, str):
        member.group, member.why = named, f"hand-made: its pod template names PodGroup {named}"
        return
    name = rules.owned_group_name(OwnerRef.of(obj), "", settings)
    mm = rules.min_member_for(obj, None, settings)
    backend = settings.backend_for(in_scope[0]) or settings.default_backend
    member.group = shown(name)
    entry = kinds.workload_kind(obj)
    pinned, _ = rules.pinned_min_member(obj, settings)
    if entry is None:
        member.why = f"podgang does not know the kind {obj.get('kind')}: a gang of {mm.value}"
        if not mm.pinned:
            plan.warnings.append(Finding(codes.UNKNOWN_KIND, source, member.what, (
                f"podgang does not follow the size of a {obj.get('kind')}: its pods form a gang of 1 — "
                f"pin it with {settings.min_member_annotation}")))
    else:
        member.why = mm.reason
        if not entry.gang and pinned is not None:
            plan.warnings.append(Finding(codes.PIN_IGNORED, source, member.what, (
                f"{settings.min_member_annotation}={pinned} is ignored: {mm.reason}")))
    plan.groups.setdefault((ns, shown(name)), PlannedGroup(ns, shown(name), mm, "owned", owner=OwnerRef.of(obj),
                                                           owner_text=rules.kind_name(obj), backend=backend,
                                                           options=gang_options(backend, (), (obj,))))


def _workload_member(plan: Plan, member: Member, obj: dict[str, Any], ns: str, objects: _Objects, cache: Cache,
                     settings: Settings) -> None:
    if objects.owner(rules.controller_ref(obj), ns) is not None:
        return  # its owner's entry covers it (Deployment → ReplicaSet, CronJob → Job, ...)
    entry = kinds.workload_kind(obj)
    assert entry is not None
    member.pods = kinds.desired_size(obj)[0]
    units = kinds.replica_units(obj)
    if units is not None:  # replicas of several pods (an LWS): all of them
        member.pods = units.count * units.pods
    plan.members.append(member)
    if rules.is_skipped(obj, settings):
        member.skipped = f"labelled {settings.skip_label}=true"
        return
    templates = kinds.pod_templates(obj)
    problems = [rules.scope_problem(t, ns, settings) for _, t in templates]
    run = None if templates or not entry.runs else next(
        (o for _, o, _ in objects.items if o.get("kind") in entry.runs and (ref := rules.controller_ref(o)) is not None
         and ref.uid == metadata(obj).get("uid")), None)
    own = kinds.operator_gang(run) if run is not None else None
    if run is not None and own is not None:  # the Trainer's podGroupPolicy: its own PodGroup
        member.no_group = f"{own[1]}; podgang makes no second one"
        plan.notes.append(Finding(codes.OPERATOR_GANG, member.source, member.what, member.no_group))
        return
    if run is not None:  # made here from what the manifests hold (a TrainJob's runtime)
        named = rules.template_group(run, settings)
        owned = cache.owned_group_names(cache.store_for(run["kind"]).get(key_of(ns, metadata(run)["name"])) or run)
        member.group = named if isinstance(named, str) else ", ".join(shown(n) for n in owned)
        member.pods = kinds.desired_size(run)[0]
        member.why = (f"the {run['kind']} its operator makes from {'/'.join(kinds.trainjob_runtime(obj)).lower()} "
                      f"is its gang" + (f": {kinds.stages(run)}" if kinds.stages(run) else ""))
        return
    own = kinds.operator_gang(obj)
    if own is not None:  # the operator's own gang integration: one gang per workload, the operator's
        member.no_group = f"{own[1]}; podgang makes no second one"  # a gang, not podgang's
        plan.notes.append(Finding(codes.OPERATOR_GANG, member.source, member.what, member.no_group))
        return
    if not templates and entry.runs:  # a TrainJob: the trainer makes a JobSet, which makes the pods
        runs = " or ".join(entry.runs)
        member.no_group = f"its pods come through the {runs} it starts; that {runs}'s gang is its gang"
        return
    if not templates or all(problems):
        member.skipped = next((p for p in problems if p), "no pod template")
        return
    for code, problem in ((codes.PARTLY_IN_SCOPE, rules.partial_scope_problem(obj, ns, settings)),
                          (codes.STAGED, rules.staged_problem(obj, settings))):
        if problem:
            plan.warnings.append(Finding(code, member.source, member.what, problem))
    for path, template in templates:
        gpu = rules.gpu_problem(template, settings)
        if gpu:
            plan.denials.append(Finding(codes.GPU_CONFLICT, member.source, f"{member.what} {path}", gpu))
    named = rules.template_group(obj, settings)
    if isinstance(named, rules.Denial):
        plan.denials.append(Finding(codes.DENIED, member.source, member.what, named.message))
        member.why = "denied"
        return
    elsewhere = rules.roles_in_hand_made_group(obj, settings)
    if named is not None and not elsewhere:
        member.group, member.why = named, f"hand-made: its pod template names PodGroup {named}"
        return
    parent = rules.next_owner(obj)
    if parent is not None:  # an owner these manifests do not hold: its pods' gang is the owner's
        _under_missing_owner(plan, member, parent, objects.replaced(parent, ns), settings)
        return
    owned = cache.owned_group_names(cache.store_for(entry.kind)[key_of(ns, metadata(obj)['name'])])
    owner_text = rules.kind_name(obj)
    if entry.layout == kinds.ONE_PER_REPLICA and rules.whole_workload_tree(obj, settings):
        member.group = ", ".join(shown(n) for n in owned)
        member.why = (f"one PodGroup for all its {units.count if units else '?'} groups, a leaf per group: it asks "
                      f"for {rules.min_available(obj, settings)[0]} complete ({settings.min_available_annotation})")
    elif entry.layout == kinds.ONE_PER_REPLICA:
        member.group = ", ".join(shown(n) for n in owned) or "(no groups: 0 replicas)"
        member.why = f"one PodGroup per {entry.kind} group ({len(owned)})"
        member.pods = len(owned) * kinds.desired_size(obj)[0]
    elif entry.layout == kinds.ONE_PER_RUN:
        name = f"{settings.group_prefix}-{metadata(obj).get('name')}-<run>-{UNKNOWN_UID}"
        run = entry.runs[0]
        member.group, member.why = name, f"one PodGroup per {run} it starts, owned by that {run}"
        mm = rules.min_member_for(obj, None, settings)
        backend = template_backend(obj, settings) or settings.default_backend
        plan.groups[(ns, name)] = PlannedGroup(ns, name, mm, "owned", owner_text=f"each {run} of {owner_text}",
                                               per_run=True, backend=backend,
                                               options=gang_options(backend, (), (obj,)),
                                               subgroups=owned_subgroups(obj, mm, settings))
    elif owned:
        member.group, member.why = ", ".join(shown(n) for n in owned), f"top owner {owner_text}"
        if elsewhere:  # only some of its roles name a hand-made group: the others are its own gang
            member.group += f", {named}"
            member.why += (f" ({', '.join(r for r in sorted(elsewhere))} in hand-made PodGroup {named}: "
                           f"its pod template names it)")
    else:
        member.no_group = "it is being deleted: the grouper makes no PodGroup for it"


def _under_missing_owner(plan: Plan, member: Member, parent: OwnerRef, replaced: str | None,
                         settings: Settings) -> None:
    """A workload whose owner is not in the manifests (a ReplicaSet exported without its
    Deployment): its pods' gang is named after that owner, the top as far as the
    manifests tell; whether it is labelled ``podgang.io/skip`` they do not tell."""
    owner_text = clip(f"{parent.kind.lower()}/{parent.name}")
    if replaced:
        member.no_group = replaced
        plan.warnings.append(Finding(codes.OWNER_REPLACED, member.source, member.what, f"{replaced}: the webhook "
                                     f"admits its pods without a group and the garbage collector deletes it"))
        return
    entry = kinds.workload_kind(parent)
    if not parent.uid:
        member.no_group = (f"its owner {owner_text} is not in these manifests and its ownerReference has no "
                           f"uid: the group's name (pg-<name>-<uid>) cannot be known")
    elif entry is not None and entry.layout == kinds.ONE_PER_REPLICA:
        member.no_group = (f"its owner {owner_text} is not in these manifests: one PodGroup per {parent.kind} "
                           f"group, named by the group index its pods carry")
    else:
        member.group = shown(rules.owned_group_name(parent, "", settings))
        member.why = (f"top owner {owner_text}, not in these manifests (its pods are left alone if it is labelled "
                       f"{settings.skip_label}=true)")


_ORIGINS = {rules.OWNED: "owned", rules.OWNER_LESS: "owner-less", rules.HAND_MADE: "hand-made"}


def _planned_group(plan: Plan, desired: Desired, cache: Cache, settings: Settings, objects: _Objects,
                   defined: dict[str, Manifest], named_by_pods: dict[str, Source], random_names: set[str],
                   unconcluded: Collection[str] = (), absent: dict[tuple[str, str], list[str]] | None = None) -> None:
    """One PodGroup of the plan, from the grouper's desired state. A verdict of a kind in
    ``unconcluded`` (a queue that does not exist, where the input holds only some queues)
    goes into ``absent`` instead: the object it names may be in the cluster."""
    backend = desired.backend or settings.default_backend
    key = desired.key
    ns, name = split_key(key)
    actual = cache.podgroups.of(backend, key)
    written = backend.min_member(actual) if actual is not None else None
    manifest = defined.get(key)
    at, as_written = (manifest.source, manifest.obj) if manifest else (None, None)
    if desired.source is None:
        plan.groups[(ns, name)] = PlannedGroup(
            ns, name, rules.MinMember(written or 1, "as written: no pod or workload in these manifests uses it"),
            "hand-made", defined_at=at, defined_obj=as_written, cluster_min_member=written, backend=backend)
        plan.notes.append(Finding(codes.PODGROUP_UNUSED, at, f"podgroup {ns}/{name}",
                                  "no pod or workload in these manifests uses it"))
        return
    mm = desired.min_member
    top = desired.owner
    if (desired.source == rules.OWNED and not desired.workloads and top is not None and mm is not None
            and not mm.pinned and kinds.workload_kind(top) is not None):
        mm = dataclasses.replace(mm, reason=f"{clip(f'{top.kind.lower()}/{top.name}')} is not in these "
                                            f"manifests: the grouper sizes the gang by it (1 here)")
    if mm is None and desired.users_tree:
        mm = rules.MinMember(written or 1, "as written: the group's own subgroup tree, which podgang leaves alone")
    if mm is None:  # only standalone pods name it: the user's size stands
        mm = rules.MinMember(written or len(desired.members),
                             f"as written: only standalone pods use it ({len(desired.members)} here)")
    options = desired.options or gang_options(backend, desired.members, desired.workloads)
    if desired.source == rules.HAND_MADE and as_written is not None:
        options = _as_written(backend, options, as_written, at)
        options = _grace_taken_over(backend, options, desired, as_written, settings)
    group = PlannedGroup(ns, shown(name), mm, _ORIGINS[desired.source], exists=actual is not None,
                         owner=desired.owner, defined_at=at, defined_obj=as_written,
                         cluster_min_member=written, random_name=key in random_names, backend=backend,
                         options=options,
                         subgroups=desired.subgroups, min_subgroup=desired.min_subgroup,
                         users_tree=desired.users_tree)
    if desired.users_tree and actual is not None:  # drawn as its user wrote it
        root, tree = backend.subgroup_tree_of(actual) or (None, ())
        group.min_subgroup = root
        group.subgroups = tuple(dataclasses.replace(s, reason="as written") for s in tree)
    if desired.users_tree and not desired.users_tree.startswith("KAI"):
        plan.notes.append(Finding(codes.USERS_TREE, at, f"podgroup {ns}/{name}", desired.users_tree))
    _note_fixed_size(plan, backend, group)
    if desired.source == rules.OWNER_LESS and desired.owner is not None:
        group.owner_text = f"pod/{desired.owner.name}"
    elif desired.owner is not None:
        group.owner_text = f"{desired.owner.kind.lower()}/{desired.owner.name}"
    plan.groups[(ns, group.name)] = group
    missing = backend.missing_group(name, ns, cache.podgroups.holder(backend, key))
    where, what = at or objects.source_of(desired.workloads), f"podgroup {ns}/{name}"
    if desired.source == rules.HAND_MADE and actual is None:
        plan.warnings.append(Finding(codes.PODGROUP_MISSING, named_by_pods.get(key) or where, what,
                                     rules.missing_group_warning(name, ns, missing)))
    for problem in desired.problems:
        if actual is None and problem.startswith(missing):
            continue  # said once, as the webhook says it
        plan.warnings.append(Finding(codes.GANG_PROBLEM, where, what, problem))
    plan.notes.extend(Finding(codes.GANG_ADVICE, where, what, advice) for advice in desired.advice)
    for problem in group.options.get("problems") or ():
        plan.warnings.append(Finding(codes.SETTING_PROBLEM, where, what, problem))
    for verdict in desired.verdicts:
        if verdict.kind in unconcluded and absent is not None:
            absent.setdefault((feasibility.ABSENT[verdict.kind], verdict.missing), []).append(f"{ns}/{shown(name)}")
            continue
        plan.warnings.append(Finding(codes.never_placed(verdict.kind), where, what, verdict.message))


_OPTION_FIELDS = {"queue": "queue", "priority_class": "priorityClassName"}


def _as_written(backend: Backend, options: dict[str, Any], podgroup: dict[str, Any],
                at: Source | None) -> dict[str, Any]:
    """A hand-made group's settings: its own queue and priority class as written (podgang
    never changes them), the rest as its pods and workloads give them."""
    written = backend.written_options(podgroup)
    if not written:
        return options
    origins = [(setting, where) for setting, where in options.get("origins") or ()
               if setting not in {_OPTION_FIELDS[k] for k in written}]
    origins += [(_OPTION_FIELDS[k], f"as written in the PodGroup at {at}") for k in written]
    return {**options, **written, "origins": tuple(origins)}


def _grace_taken_over(backend: Backend, options: dict[str, Any], desired: Desired, podgroup: dict[str, Any],
                      settings: Settings) -> dict[str, Any]:
    """A hand-made group's own grace period where podgang takes its eviction over (the
    subgroups it writes come with KAI's ``stalenessGracePeriod: -1s``): shown, with where
    podgang keeps it."""
    if not desired.subgroups or backend.eviction_grace_field is None:
        return options
    patch = {"spec": backend.subgroups_spec(desired.subgroups, desired.min_subgroup)}
    kept = kept_grace(backend, podgroup, patch, settings).get(settings.grace_period_annotation)
    if kept is None:
        return options
    field = backend.eviction_grace_field
    assert field is not None  # a backend that takes a grace period over names its field
    return {**options, "extra_spec": {**(options.get("extra_spec") or {}), field: patch["spec"][field]},
            "origins": (*(options.get("origins") or ()), (field, f"podgang evicts the gang by its subgroups, after "
                                                                 f"the group's own {kept} (kept as "
                                                                 f"{settings.grace_period_annotation})"))}


def _note_fixed_size(plan: Plan, backend: Backend, group: PlannedGroup) -> None:
    """Say once per backend when its live PodGroups cannot follow a scale, with this
    group scaled by one as the example."""
    size = group.min_member.value
    if group.min_member.pinned:
        return
    resize = backend.resize(backend.build_podgroup(GangSpec(group.name, group.namespace, size)), size + 1)
    what = f"{backend.name} PodGroups"
    if resize.action != PATCH and not any(n.what == what for n in plan.notes):
        plan.notes.append(Finding(codes.FIXED_SIZE, None, what, f"a live group keeps its size after a scale "
                                  f"(say {group.namespace}/{group.name} {size} → {size + 1}): {resize.why}"))


def native_version_in(manifests: list[Manifest]) -> tuple[str, str] | None:
    """The native API version the manifests are written for, and the first object that
    says so (a 1.35 Workload, a pod or pod template setting ``spec.workloadRef``, a
    ``scheduling.k8s.io`` PodGroup); None when none says."""
    for m in manifests:
        for obj in (m.obj, *(template for _, template in kinds.pod_templates(m.obj))):
            version = native.written_for(obj)
            if version is not None:
                return version, f"{str(m.obj.get('kind')).lower()} {metadata(m.obj).get('name')} ({m.source})"
    return None


# ---------------------------------------------------------------------------
# --scale


def apply_scale(manifests: list[Manifest], scales: dict[str, int]) -> tuple[list[Manifest], list[str]]:
    """Copies of ``manifests`` with ``KIND/NAME[:PART]=N`` scales applied, and what changed.
    The kind's registry entry says which field a scale sets (a Kubeflow job's workers, a
    RayCluster's worker group, a JobSet's replicated job: ``PART``)."""
    out = [Manifest(copy.deepcopy(m.obj), m.source) for m in manifests]
    done: list[str] = []
    for target, count in scales.items():
        kind_text, _, named = target.partition("/")
        name, _, part = named.partition(":")
        entry = kinds.scale_target(kind_text)
        if entry is None or not name:
            scalable = sorted(k.kind for k in kinds.WORKLOADS.values() if k.scales)
            raise ScaleError(f"--scale {target}={count}: expected KIND/NAME=N with KIND one of {', '.join(scalable)}"
                             f" (KIND/NAME:PART=N for a part: a replica type, a worker group, a replicated job)")
        if not 0 <= count <= MAX_SCALE:
            raise ScaleError(f"--scale {target}={count}: a count is a whole number from 0 to {MAX_SCALE}")
        hits = [m for m in out if kinds.workload_kind(m.obj) is entry and metadata(m.obj).get("name") == name]
        if not hits:
            raise ScaleError(f"--scale {target}={count}: no {entry.kind} named {name!r} in the manifests")
        for m in hits:
            path = kinds.scale_field(entry, m.obj, part or None)
            if isinstance(path, str):
                raise ScaleError(f"--scale {target}={count}: {entry.kind.lower()}/{name}: {path}")
            node: Any = m.obj
            for step in path[:-1]:
                if isinstance(node, dict) and isinstance(step, str):
                    node = node.setdefault(step, {})
                elif isinstance(node, list) and isinstance(step, int) and step < len(node):
                    node = node[step]
                else:
                    node = {}
            old = node.get(path[-1]) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node[path[-1]] = count
            before = old if old is not None else 1
            done.append(f"{entry.kind.lower()}/{name} {kinds.path_text(path[1:])} {before} → {count}")
    return out, done


def plan_with_scale(
    manifests: list[Manifest],
    scales: dict[str, int],
    settings: Settings = DEFAULT,
    default_namespace: str = "default",
    known: Known = Known(),
) -> Plan:
    """The plan after ``scales``; each group remembers its minMember before them."""
    if not scales:
        return build_plan(manifests, settings, default_namespace, known)
    before = build_plan(manifests, settings, default_namespace, known)
    scaled, changes = apply_scale(_as_followed(manifests, before, settings), scales)
    after = build_plan(scaled, settings, default_namespace, known)
    after.scaled = changes
    for key, group in after.groups.items():
        old = before.groups.get(key)
        group.before = old.min_member if old else None
    return after


def _as_followed(manifests: list[Manifest], plan: Plan, settings: Settings) -> list[Manifest]:
    """The manifests as the grouper leaves them after its first look: each hand-made group
    whose size it follows at that size, marked followed (``podgang.io/followed-min-member``),
    so that a scale is followed, not taken for the user's elastic gang."""
    out = []
    for m in manifests:
        group = next((g for g in plan.groups.values() if g.defined_at == m.source and g.origin == "hand-made"), None)
        if group is None or group.min_member.pinned or group.defined_obj is None:
            out.append(m)
            continue
        backend = group.backend or settings.default_backend
        doc = copy.deepcopy(m.obj)
        resize = backend.resize(doc, group.min_member.value)
        if resize.action != PATCH:
            out.append(m)
            continue
        if resize.body is not None:
            _merge(doc, resize.body)
        doc.setdefault("metadata", {}).setdefault("annotations", {})[settings.followed_size_annotation] = str(
            group.min_member.value)
        out.append(Manifest(doc, m.source))
    return out


# ---------------------------------------------------------------------------
# -o yaml


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Apply a JSON merge patch (RFC 7386) to ``target`` in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def min_text(group: PlannedGroup) -> str:
    """A group's size as the plan shows it everywhere: ``minMember 3``, ``minMember 3 → 4``
    after a scale, or a tree's ``minSubGroup 2 (≥ 9 pods)``."""
    value = group.min_member.value
    if group.min_subgroup is not None:  # a tree: its root counts parts, the pods follow from them
        return f"minSubGroup {group.min_subgroup} (≥ {value} pods)"
    if group.before is not None and group.before.value != value:
        return f"minMember {group.before.value} → {value}"
    return f"minMember {value}"


def podgroup_manifests(plan: Plan, settings: Settings = DEFAULT) -> tuple[list[dict[str, Any]], list[str]]:
    """The PodGroups that would exist, as manifests to apply, and comments for the
    ones that cannot be written out here (a name that depends on a UID the cluster
    assigns or on a random suffix, or a hand-made group no manifest defines).
    """
    docs: list[dict[str, Any]] = []
    comments: list[str] = []
    for key in sorted(plan.groups):
        group = plan.groups[key]
        backend = group.backend or settings.default_backend
        if group.origin == "hand-made":
            if group.defined_obj is None:
                comments.append(f"PodGroup {group.namespace}/{group.name} ({min_text(group)}) is "
                                f"referenced but no manifest defines it: create it, or the pods stay Pending")
                continue
            doc = copy.deepcopy(group.defined_obj)
            md = doc.setdefault("metadata", {})
            for noise in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
                md.pop(noise, None)
            md.setdefault("namespace", group.namespace)
            doc.pop("status", None)
            if group.users_tree:  # the user's tree: as written
                docs.append(doc)
                continue
            if group.min_subgroup is None:
                resize = backend.resize(doc, group.min_member.value)
                if resize.body is not None:
                    _merge(doc, resize.body)
            subgroups = backend.subgroups_patch(doc, group.subgroups, group.min_subgroup)
            if group.subgroups and subgroups is not None:
                kept = kept_grace(backend, doc, subgroups, settings)
                _merge(doc, {**subgroups, "metadata": {"annotations": kept}} if kept else subgroups)
            docs.append(doc)
            continue
        if not group.name_known:
            why = ("its name ends in a random suffix the webhook picks" if group.random_name
                   else "the grouper creates it once the cluster assigns the UID")
            comments.append(f"PodGroup {group.namespace}/{group.name} ({min_text(group)}, "
                            f"{group.owner_text}): {why}")
            continue
        # an owner-less pod's group has no owner (the webhook makes it before the pod has a UID)
        owned = group.origin == "owned" and group.owner is not None and group.owner.uid \
            and _UID_TOKEN not in group.owner.uid
        docs.append(backend.build_podgroup(gang_spec(
            group.name, group.namespace, group.min_member.value, labels=settings.managed_labels,
            options=group.options, owner=group.owner if owned else None,
            subgroups=group.subgroups, min_subgroup=group.min_subgroup)))
    return docs, comments
