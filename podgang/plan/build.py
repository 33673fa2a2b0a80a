"""The plan itself: the grouper's desired state over a cache filled from manifests, each gang's
size and settings, and what a user should know of them (findings, Not checked).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from typing import Any, Collection, Mapping

import jsonpatch

from podgang import feasibility, kinds, rules
from podgang import plan_codes as codes
from podgang.backends import BACKENDS, Backend, GangSpec, native
from podgang.backends.base import PATCH, slim_fact
from podgang.gang import Cache, key_of, split_key, template_backend
from podgang.gang import Desired, desired_group, gang_options, kept_grace, owned_subgroups, users_tree
from podgang.manifests import Manifest, Source, object_metas, schema_checked
from podgang.objects import POD, OwnerRef, Resource, as_dict, clip, metadata, quoted
from podgang.settings import DEFAULT, Settings

from podgang.plan.cluster import _admitted_gang, _ns, _Objects, _what, made_by_operators, shown
from podgang.plan.model import (CHECKS, Finding, GANGS_NAMED, Known, Member, Plan, PlannedGroup, UNKNOWN_SUFFIX,
                                UNKNOWN_UID)


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
    made = made_by_operators(manifests, default_namespace)
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
    for label, resource in fact_resources.items():
        if resource.plural in known.complete:  # all of them are in the manifests: none there is none at all
            cache.known_facts.add(label)
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
        if kind != POD.kind and backend is None and kind not in cache.workloads:
            cache.remember_owner(obj)  # an owner of any kind: a gang's settings are read from its metadata
        if (refused := rules.name_problem(obj)) is not None:  # never created: no gang, and no mangled name
            plan.warnings.append(Finding(codes.INVALID_NAME, m.source, _what(obj, ns), refused))
            if kind == POD.kind or kinds.any_pod_templates(obj):
                plan.members.append(Member(m.source, _what(obj, ns), ns,
                                           skipped="not a valid name: the apiserver never creates it (see Warnings)"))
        elif backend is None and native_planned and (problem := native.version_problem(obj, native_planned)):
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


def _show_uids(plan: Plan) -> None:
    """Every text of the plan with the stand-ins for an unassigned UID and a ``generateName``'s
    random part shown as ``<uid>`` and ``<random>``: they are the plan's own and never reach
    its output."""
    for group in plan.groups.values():
        group.min_member = dataclasses.replace(group.min_member, reason=shown(group.min_member.reason))
        group.owner_text = shown(group.owner_text)
    for findings in (plan.denials, plan.warnings, plan.notes):
        findings[:] = [dataclasses.replace(f, what=shown(f.what), message=shown(f.message)) for f in findings]
    for member in plan.members:
        member.what = shown(member.what)
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
    member.group, member.why, member.subgroup = shown(gang.name), gang.reason, gang.subgroup
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
    entry = kinds.workload_kind(obj)
    if entry is not None and entry.layout == kinds.WRAPPER:  # what it makes is planned below, each on its own
        made = [_what(m, ns) for m in kinds.made_by(obj)]
        member.no_group = f"{entry.size(obj)[1]}: {', '.join(made[:10]) or 'none yet'}{' …' if len(made) > 10 else ''}"
        return
    if entry is not None and entry.gang_maker:
        member.no_group = f"its gang is {entry.gang_maker}: podgang leaves its pods alone"
        plan.notes.append(Finding(codes.OPERATOR_GANG, member.source, member.what, member.no_group))
        return
    made_from = kinds.template_of(obj)
    if made_from is not None:
        member.no_group = f"a template, not a workload: it owns no pods; {made_from} get the gangs"
        return
    own = _own_workload(obj)
    if own is not None:
        member.no_group = f"{own}; podgang makes none"
        return
    skipped = rules.workload_skip_problem(obj, settings)
    if skipped:
        member.skipped = skipped
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
    pinned, _ = rules.pinned_min_member(obj, settings)
    if entry is None:
        member.why = f"podgang does not know the kind {obj.get('kind')}: a gang of {mm.value}"
        if not mm.pinned:
            plan.warnings.append(Finding(codes.UNKNOWN_KIND, source, member.what, (
                f"podgang does not follow the size of a {obj.get('kind')}: it assumed its pods need not run "
                f"together (a gang of 1) — if N of them must, pin it with {settings.min_member_annotation}=N on "
                f"{rules.kind_name(obj)}")))
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
    ref = rules.controller_ref(obj)
    if (rules.next_owner(obj) is not None or kinds.run_kinds(ref)) and objects.owner(ref, ns) is not None:
        return  # its owner's entry covers it (Deployment → ReplicaSet, CronJob → Job, ...); a wrapper's does not
    entry = kinds.workload_kind(obj)
    assert entry is not None
    member.pods = kinds.desired_size(obj)[0]
    units = kinds.replica_units(obj)
    if units is not None:  # replicas of several pods (an LWS): all of them
        member.pods = units.count * units.pods
    plan.members.append(member)
    skipped = rules.workload_skip_problem(obj, settings)
    if skipped:
        member.skipped = skipped
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
        name = shown(f"{settings.group_prefix}-{metadata(obj).get('name')}-<run>-{UNKNOWN_UID}")
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
        plan.groups[(ns, name)] = _users_tree_drawn(backend, actual, PlannedGroup(
            ns, name, rules.MinMember(written or 1, "as written: no pod or workload in these manifests uses it"),
            "hand-made", defined_at=at, defined_obj=as_written, cluster_min_member=written, backend=backend,
            users_tree=users_tree(backend, actual, settings)))
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
                         users_tree=desired.users_tree, adopted=desired.adopted)
    _users_tree_drawn(backend, actual, group)
    if desired.users_tree and not desired.users_tree.startswith("KAI"):
        plan.notes.append(Finding(codes.USERS_TREE, at, f"podgroup {ns}/{name}", desired.users_tree))
    _note_fixed_size(plan, backend, group)
    if desired.source == rules.OWNER_LESS and desired.owner is not None:
        group.owner_text = f"pod/{desired.owner.name}"
    elif desired.owner is not None:
        group.owner_text = f"{desired.owner.kind.lower()}/{desired.owner.name}"
    # keyed as shown, but for a generateName's: two of them are two groups, though shown alike
    plan.groups[(ns, name if UNKNOWN_SUFFIX in group.name else group.name)] = group
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
    if desired.adopted is not None:
        plan.notes.append(Finding(codes.ADOPTED, where, what, (
            f"made by {desired.adopted} for {group.owner_text or 'its pods'}: podgang takes it over (labels it "
            f"{settings.managed_by_label}={settings.managed_by_value}, annotates it {settings.adopted_from_annotation}="
            f"{desired.adopted}) and sizes it as its own; no second group is made")))
    for problem in group.options.get("problems") or ():
        plan.warnings.append(Finding(codes.SETTING_PROBLEM, where, what, problem))
    for verdict in desired.verdicts:
        if verdict.kind in unconcluded and absent is not None:
            absent.setdefault((feasibility.ABSENT[verdict.kind], verdict.missing), []).append(f"{ns}/{shown(name)}")
            continue
        plan.warnings.append(Finding(codes.never_placed(verdict.kind), where, what, verdict.message))


def _users_tree_drawn(backend: Backend, actual: dict[str, Any] | None, group: PlannedGroup) -> PlannedGroup:
    """``group`` with the tree its user wrote, when it holds one, drawn as written."""
    if group.users_tree and actual is not None:
        root, tree = backend.subgroup_tree_of(actual) or (None, ())
        group.min_subgroup = root
        group.subgroups = tuple(dataclasses.replace(s, reason="as written") for s in tree)
    return group


_OPTION_FIELDS = {"queue": "queue", "priority_class": "priorityClassName"}


def _as_written(backend: Backend, options: dict[str, Any], podgroup: dict[str, Any],
                at: Source | None) -> dict[str, Any]:
    """A hand-made group's settings: its own queue and priority class as written (podgang
    never changes them) and every other field it carries besides its size and subgroups
    (a native group's ``disruptionMode``, KAI's ``preemptibility`` …), each shown as written;
    the rest as its pods and workloads give them."""
    written = backend.written_options(podgroup)
    sized = {path[1] for path in backend.size_fields if len(path) == 2 and path[0] == "spec"}
    own = {f for f in (backend.queue_field, backend.priority_field) if f is not None}
    others = {f: v for f, v in as_dict(podgroup.get("spec")).items() if f not in sized | own and v is not None}
    if not written and not others:
        return options
    said = {_OPTION_FIELDS[k] for k in written} | set(others)
    where = f"as written in the PodGroup at {at}"
    origins = [(setting, origin) for setting, origin in options.get("origins") or () if setting not in said]
    origins += [(_OPTION_FIELDS[k], where) for k in written] + [(f, where) for f in others]
    return {**options, **written, "extra_spec": {**(options.get("extra_spec") or {}), **others},
            "origins": tuple(origins)}


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
    origins = [(setting, where) for setting, where in options.get("origins") or () if setting != field]
    return {**options, "extra_spec": {**(options.get("extra_spec") or {}), field: patch["spec"][field]},
            "origins": (*origins, (field, f"podgang evicts the gang by its subgroups, after the group's own "
                                          f"{kept} (kept as {settings.grace_period_annotation})"))}


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
