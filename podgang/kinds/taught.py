"""Kinds you teach podgang: a workload kind with no built-in entry, declared once — by a
``run.ai/v1alpha1 Karta`` (the object KAI's pod-grouper falls back to for a kind it has no
plugin for) or by podgang's own ``kinds:`` declaration (a ConfigMap or chart values, for a
cluster without Karta) — made into a :class:`WorkloadKind` entry the hub consults.

A declaration names the kind's components (each a pod template at a path, a count at its
``replicasPath`` and the pod label that tells its pods), and the gang is what it says: the
sum of the components' replicas (their ``minReplicasPath`` where set, as KAI reads it), a
subgroup per component the instruction lists. What cannot be read is a :class:`Problem`
naming the object and field; the kinds whose declarations are sound are taught all the
same (:func:`read_declarations`). Tested in tests/unit/test_kinds_taught.py. No I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import yaml

from podgang.kinds.model import KindDoc, Obj, Role, SlimTemplate, Template, WorkloadKind, _conditions_finished
from podgang.objects import Resource, as_dict, as_list, labels, metadata

# a Karta (run-ai/karta's CRD, API group run.ai, version v1alpha1), the object KAI's pod-grouper falls back to for
# a kind it has no plugin for; podgang reads one as KAI does (docs/workloads/teach-your-kind.md)
KARTA_GROUP, KARTA_VERSION = "run.ai", "v1alpha1"
KARTA_KIND = "Karta"
#: on a Karta: the API group of the kind it teaches. KAI lists a kind's Kartas by this label and the two below, so a
#: Karta without them teaches KAI nothing: podgang names it (kind-not-taught) and does not use it either
KARTA_GROUP_LABEL = "run.ai/karta-group"
#: on a Karta: the API version of the kind it teaches (see run.ai/karta-group)
KARTA_VERSION_LABEL = "run.ai/karta-version"
#: on a Karta: the kind it teaches (see run.ai/karta-group)
KARTA_KIND_LABEL = "run.ai/karta-kind"
#: podgang's own declaration: a document of this kind, or a ConfigMap's data key of this name
DECLARATION_KIND = "PodgangKinds"
DECLARATION_KEY = "kinds.yaml"

Path = tuple[str | int, ...]

_STEP = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_-]*)|\["([^"\\]*)"\]|\[([0-9]{1,6})\]')


class PathError(ValueError):
    pass


def parse_path(text: Any) -> Path:
    """``("spec", "worker", "replicas")`` of ``.spec.worker.replicas`` (Karta's jq) or
    ``spec.worker.replicas`` (podgang's), ``.metadata.labels["a/b"]``, ``items[0]``. Anything
    else jq could say (a pipe, a function) podgang does not evaluate: :class:`PathError`."""
    if not isinstance(text, str) or not text.strip():
        raise PathError("must be a path such as .spec.worker.replicas")
    text, pos, out = text.strip(), 0, []
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None or (pos == 0 and m.group(1) is None and text[0] != "."
                         and not text.startswith("[")) or m.end() == pos:
            raise PathError(f"{text[:80]!r} is not a path podgang reads (steps .name, [\"key\"], [N]; "
                            f"no other jq) at character {pos + 1}")
        name, key, index = m.groups()
        out.append(int(index) if index is not None else (name if name is not None else key))
        pos = m.end()
    return tuple(out)


def declared_path_text(path: Path) -> str:
    return "".join(f"[{s}]" if isinstance(s, int) else (f".{s}" if re.fullmatch(r"[A-Za-z_][\w-]*", s)
                                                         else f'["{s}"]') for s in path).lstrip(".")


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for step in path:
        if isinstance(step, int):
            node = node[step] if isinstance(node, list) and 0 <= step < len(node) else None
        else:
            node = node.get(step) if isinstance(node, Mapping) else None
    return node


@dataclass(frozen=True)
class Problem:
    """A declaration podgang cannot use, by its object and field."""

    source: str  # "Karta customjob" or "kinds.yaml kinds[0]"
    field: str  # "spec.structureDefinition.childComponents[1].scaleDefinition.replicasPath"
    message: str

    def __str__(self) -> str:
        return f"{self.source}: {self.field}: {self.message}" if self.field else f"{self.source}: {self.message}"


@dataclass(frozen=True)
class Component:
    name: str
    template: Path | None  # its pod template
    replicas: Path | None  # its count
    min_replicas: Path | None  # its minimum, where it has one (KAI reads it first)
    role_label: str | None  # the pod label that tells its pods
    role_value: str | None  # the label's value on its pods (None: any value, the label's own)


@dataclass(frozen=True)
class Declaration:
    """One taught kind, as its source declares it."""

    group: str
    version: str
    kind: str
    plural: str
    source: str  # where it comes from, in words: "Karta customjob", "kinds.yaml kinds[0]"
    components: tuple[Component, ...]
    subgroups: tuple[str, ...]  # the components that are each a subgroup (none: one part)
    group_name: str = ""  # Karta's podGroup.name (KAI names the group pg-<uid>-<name>)

    @property
    def key(self) -> tuple[str, str]:
        return self.group, self.kind

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def plural_of(kind: str) -> str:
    """The resource name a CRD's generator gives a kind by default (``customjobs``)."""
    lower = kind.lower()
    if re.search(r"(s|x|z|ch|sh)$", lower):
        return lower + "es"
    if re.search(r"[^aeiou]y$", lower):
        return lower[:-1] + "ies"
    return lower + "s"


# --- reading a Karta -------------------------------------------------------------------------

def _label_selector(key_path: Any) -> str:
    path = parse_path(key_path)
    if len(path) == 3 and path[:2] == ("metadata", "labels") and isinstance(path[2], str):
        return path[2]
    raise PathError(f"{str(key_path)[:80]!r}: podgang tells a component's pods by a pod label "
                    f"(.metadata.labels[\"KEY\"]) only")


def _path_or_problem(value: Any, problems: list[Problem], source: str, where: str) -> Path | None:
    if value is None:
        return None
    try:
        path = parse_path(value)
    except PathError as exc:
        problems.append(Problem(source, where, str(exc)))
        return None
    if not path or path[0] != "spec":
        problems.append(Problem(source, where, f"{str(value)[:80]!r} must be under .spec"))
        return None
    return path


def read_karta(obj: Any) -> tuple[Declaration | None, list[Problem]]:
    """A Karta's kind as podgang reads it (None when it teaches nothing: no gang-scheduling
    instruction, as KAI skips it), and what in it cannot be used."""
    name = str(metadata(obj).get("name") or "?")[:63]
    source, problems = f"Karta {name}", []
    if not isinstance(obj, Mapping) or not isinstance(obj.get("spec"), Mapping):
        return None, [Problem(source, "spec", "missing: not a Karta podgang can read")]
    structure = as_dict(obj["spec"].get("structureDefinition"))
    root = as_dict(structure.get("rootComponent"))
    gang = as_dict(as_dict(obj["spec"].get("optimizationInstructions")).get("gangScheduling"))
    if not gang or not (gang.get("podGroup") or gang.get("podGroups")):
        return None, []  # KAI skips a Karta with no gang scheduling instruction, so does podgang
    if metadata(obj).get("deletionTimestamp"):
        return None, []  # nor one being deleted
    base = "spec.structureDefinition"
    gvk = as_dict(root.get("kind"))
    if not root.get("name"):
        problems.append(Problem(source, f"{base}.rootComponent.name", "missing"))
    if not gvk.get("kind") or not gvk.get("version"):
        problems.append(Problem(source, f"{base}.rootComponent.kind", "missing: the kind it teaches "
                                "(group, version, kind)"))
    found = labels(obj)
    for label, want in ((KARTA_GROUP_LABEL, gvk.get("group") or ""), (KARTA_VERSION_LABEL, gvk.get("version")),
                        (KARTA_KIND_LABEL, gvk.get("kind"))):
        if gvk and found.get(label) != want:
            problems.append(Problem(source, f"metadata.labels[{label}]", f"{found.get(label)!r}, not {want!r}: "
                                    "KAI finds a kind's Karta by this label, so neither uses it"))
    if not isinstance(gang.get("podGroup"), Mapping):
        problems.append(Problem(source, "spec.optimizationInstructions.gangScheduling.podGroups",
                                "the deprecated podGroups (grouping keys and jq filters) is not read by podgang: "
                                "write podGroup with a subgroup per component"))
    components: list[Component] = []
    for i, child in enumerate(as_list(structure.get("childComponents"))):
        where = f"{base}.childComponents[{i}]"
        child = as_dict(child)
        cname = child.get("name")
        if not isinstance(cname, str) or not cname:
            problems.append(Problem(source, f"{where}.name", "missing"))
            continue
        if child.get("ownerRef") != root.get("name"):
            problems.append(Problem(source, f"{where}.ownerRef", f"{str(child.get('ownerRef'))[:63]!r}: podgang "
                                    f"reads components directly under the root ({root.get('name')!r}) only"))
            continue
        scale = as_dict(child.get("scaleDefinition"))
        template = _path_or_problem(as_dict(child.get("specDefinition")).get("podTemplateSpecPath"), problems,
                                    source, f"{where}.specDefinition.podTemplateSpecPath")
        replicas = _path_or_problem(scale.get("replicasPath"), problems, source,
                                    f"{where}.scaleDefinition.replicasPath")
        minimum = _path_or_problem(scale.get("minReplicasPath"), problems, source,
                                   f"{where}.scaleDefinition.minReplicasPath")
        selector = as_dict(as_dict(child.get("podSelector")).get("componentTypeSelector"))
        label = None
        if selector:
            try:
                label = _label_selector(selector.get("keyPath"))
            except PathError as exc:
                problems.append(Problem(source, f"{where}.podSelector.componentTypeSelector.keyPath", str(exc)))
        value = selector.get("value")
        components.append(Component(cname, template, replicas, minimum, label,
                                    value if isinstance(value, str) else None))
    pod_group = as_dict(gang.get("podGroup"))
    subgroups = []
    for i, sub in enumerate(as_list(pod_group.get("subGroups"))):
        cname = as_dict(sub).get("componentName")
        where = f"spec.optimizationInstructions.gangScheduling.podGroup.subGroups[{i}].componentName"
        if not cname:
            problems.append(Problem(source, where, "missing"))
        elif cname not in {c.name for c in components}:
            problems.append(Problem(source, where, f"{str(cname)[:63]!r} is not a child component"))
        else:
            subgroups.append(cname)
    if problems:
        return None, problems
    declaration = Declaration(str(gvk.get("group") or ""), str(gvk["version"]), str(gvk["kind"]),
                              plural_of(str(gvk["kind"])), source, tuple(components), tuple(subgroups),
                              str(pod_group.get("name") or ""))
    return declaration, _checked(declaration, base + ".childComponents")


# --- reading podgang's own declaration -------------------------------------------------------

_KIND_KEYS = {"apiVersion", "kind", "resource", "components", "subgroups"}
_COMPONENT_KEYS = {"name", "podTemplate", "replicas", "minReplicas", "roleLabel", "roleValue"}


def read_declaration(entry: Any, source: str) -> tuple[Declaration | None, list[Problem]]:
    """One entry of podgang's ``kinds:`` list (its schema: docs/workloads/teach-your-kind.md)."""
    problems: list[Problem] = []
    if not isinstance(entry, Mapping):
        return None, [Problem(source, "", "must be a mapping with apiVersion, kind and components")]
    for key in sorted(set(entry) - _KIND_KEYS):
        problems.append(Problem(source, str(key), f"unknown field (fields: {', '.join(sorted(_KIND_KEYS))})"))
    api_version, kind = entry.get("apiVersion"), entry.get("kind")
    if not isinstance(api_version, str) or not re.fullmatch(r"([a-z0-9.-]+/)?v[a-z0-9]+", api_version):
        problems.append(Problem(source, "apiVersion", "missing or not GROUP/VERSION"))
    if not isinstance(kind, str) or not re.fullmatch(r"[A-Z][A-Za-z0-9]*", kind):
        problems.append(Problem(source, "kind", "missing or not a kind name"))
    components: list[Component] = []
    for i, comp in enumerate(as_list(entry.get("components"))):
        where = f"components[{i}]"
        if not isinstance(comp, Mapping):
            problems.append(Problem(source, where, "must be a mapping"))
            continue
        for key in sorted(set(comp) - _COMPONENT_KEYS):
            problems.append(Problem(source, f"{where}.{key}", "unknown field"))
        cname = comp.get("name")
        if not isinstance(cname, str) or not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", cname):
            problems.append(Problem(source, f"{where}.name", "missing or not a lower-case name"))
            continue
        template = _path_or_problem(comp.get("podTemplate"), problems, source, f"{where}.podTemplate")
        replicas = _path_or_problem(comp.get("replicas"), problems, source, f"{where}.replicas")
        minimum = _path_or_problem(comp.get("minReplicas"), problems, source, f"{where}.minReplicas")
        label = comp.get("roleLabel")
        if label is not None and not isinstance(label, str):
            problems.append(Problem(source, f"{where}.roleLabel", "must be a label key"))
            label = None
        value = comp.get("roleValue", cname if label else None)
        components.append(Component(cname, template, replicas, minimum, label, str(value) if value else None))
    if not components and "components" not in entry:
        problems.append(Problem(source, "components", "missing: at least one component"))
    subgroups = entry.get("subgroups", True)
    if not isinstance(subgroups, bool):
        problems.append(Problem(source, "subgroups", "must be true (a subgroup per component) or false"))
    if problems:
        return None, problems
    group, _, version = str(api_version).rpartition("/")
    resource = entry.get("resource") or plural_of(str(kind))
    declaration = Declaration(group, version, str(kind), str(resource), source, tuple(components),
                              tuple(c.name for c in components) if subgroups else ())
    return declaration, _checked(declaration, "components")


def _checked(declaration: Declaration, where: str) -> list[Problem]:
    problems = []
    names = [c.name for c in declaration.components]
    for i, comp in enumerate(declaration.components):
        if names.index(comp.name) != i:
            problems.append(Problem(declaration.source, f"{where}[{i}].name", f"{comp.name!r} named twice"))
        if comp.replicas is None and comp.min_replicas is None:
            problems.append(Problem(declaration.source, f"{where}[{i}]", f"component {comp.name!r} names no "
                                    "replicas path: its pods cannot be counted"))
        if comp.name in declaration.subgroups and comp.role_label is None:
            problems.append(Problem(declaration.source, f"{where}[{i}]", f"component {comp.name!r} is a subgroup "
                                    "but names no pod label its pods are told by"))
    if not declaration.components:
        problems.append(Problem(declaration.source, where, "no components: nothing to count"))
    return problems


# --- the entry -------------------------------------------------------------------------------

def _count(obj: Any, comp: Component) -> tuple[int, str]:
    spec_root = {"spec": as_dict(as_dict(obj).get("spec"))}
    for path, what in ((comp.min_replicas, "minimum"), (comp.replicas, "replicas")):
        if path is None:
            continue
        value = value_at(spec_root, path)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, f"{declared_path_text(path)} {value}"
    shown = declared_path_text(comp.replicas or comp.min_replicas or ())
    return 1, f"{shown} not set: 1"


def _templates(declaration: Declaration, obj: Any) -> list[tuple[str, Template]]:
    spec_root = {"spec": as_dict(as_dict(obj).get("spec"))}
    return [(declared_path_text(c.template), as_dict(value_at(spec_root, c.template)))
            for c in declaration.components if c.template is not None
            and isinstance(value_at(spec_root, c.template), Mapping)]


def _roles(declaration: Declaration, obj: Any) -> list[Role]:
    by_name = {c.name: c for c in declaration.components}
    out = []
    for name in declaration.subgroups:
        comp = by_name[name]
        size, why = _count(obj, comp)
        spec_root = {"spec": as_dict(as_dict(obj).get("spec"))}
        template = as_dict(value_at(spec_root, comp.template)) if comp.template else {}
        out.append(Role(name, size, why, template, declared_path_text(comp.template) if comp.template else ""))
    return out


def _size(declaration: Declaration, obj: Any) -> tuple[int, str]:
    """The sum of the subgroups' components where the instruction lists subgroups (a component
    it leaves out is not in the gang's minimum, as in KAI), else of every component."""
    counted = set(declaration.subgroups) or {c.name for c in declaration.components}
    counts = [_count(obj, c) for c in declaration.components if c.name in counted]
    total = sum(n for n, _ in counts)
    return total, f"{declaration.source}: " + " + ".join(why for _, why in counts)


def _put(out: Obj, path: Path, value: Any) -> None:
    node: Any = out
    for step in path[:-1]:
        if not isinstance(step, str):
            return  # a list on the way: kept whole by its first key instead
        node = node.setdefault(step, {})
        if not isinstance(node, dict):
            return
    if isinstance(path[-1], str):
        node[path[-1]] = value


def _slim(declaration: Declaration, spec_: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    root = {"spec": as_dict(spec_)}
    out: Obj = {}
    for comp in declaration.components:
        for path in (comp.replicas, comp.min_replicas):
            if path is not None and value_at(root, path) is not None:
                _put(out, path[1:], value_at(root, path))
        if comp.template is not None and isinstance(value_at(root, comp.template), Mapping):
            _put(out, comp.template[1:], slim_template(value_at(root, comp.template)))
    return out


def _pod_role(declaration: Declaration, pod: Any) -> str | None:
    found = labels(pod)
    for comp in declaration.components:
        if comp.role_label and comp.role_label in found:
            if comp.role_value is None or found[comp.role_label] == comp.role_value:
                return comp.name
    return None


def taught_entry(declaration: Declaration) -> WorkloadKind:
    """The hub entry of a taught kind: one gang per object, the sum of its components."""
    d = declaration
    role_labels = tuple(dict.fromkeys(c.role_label for c in d.components if c.role_label))
    counted = " + ".join(declared_path_text(c.min_replicas or c.replicas or ()) for c in d.components
                         if not d.subgroups or c.name in d.subgroups)
    return WorkloadKind(
        resource=Resource(d.group, d.version, d.plural, d.kind, optional=True),
        size=lambda obj: _size(d, obj),
        templates=lambda obj: _templates(d, obj),
        slim_spec=lambda s, slim_template: _slim(d, s, slim_template),
        aliases=(d.kind.lower(), d.plural),
        scale_parts=lambda obj: {c.name: c.replicas for c in d.components if c.replicas is not None},
        scale_parts_doc=", ".join(declared_path_text(c.replicas) for c in d.components if c.replicas is not None),
        default_scale_part=lambda obj: d.components[-1].name if d.components[-1].replicas else None,
        roles=(lambda obj: _roles(d, obj)) if d.subgroups else (lambda obj: []),
        role_labels=role_labels,
        pod_role=lambda pod: _pod_role(d, pod),
        finished=_conditions_finished,
        taught_from=d.source,
        doc=KindDoc(f"taught by {d.source}: {counted}",
                    roles=f"a subgroup per component: {', '.join(d.subgroups)}" if d.subgroups else ""),
    )


@dataclass(frozen=True)
class Taught:
    """What a set of declarations teaches: the entries by (API group, kind), and the problems."""

    entries: dict[tuple[str, str], WorkloadKind]
    declarations: dict[tuple[str, str], Declaration]
    problems: tuple[Problem, ...]


def read_declarations(objects: Iterable[tuple[str, Any]], built_in: Iterable[tuple[str, str]]) -> Taught:
    """Every kind the ``objects`` teach — each a ``(where, object)``: a Karta, a
    ``PodgangKinds`` document, or a ConfigMap holding one under ``kinds.yaml`` — with what cannot
    be taught: a declaration that does not read, one for a kind the hub has an entry for, and
    every declaration of a kind declared twice (as KAI refuses a kind two Kartas match). The
    others are taught all the same."""
    built = set(built_in)
    built_names = {kind: group for group, kind in built}
    found: list[Declaration] = []
    problems: list[Problem] = []
    for where, obj in objects:
        for declaration, its_problems in _read_one(where, obj):
            problems.extend(its_problems)
            if declaration is not None and not its_problems:
                found.append(declaration)
    by_key: dict[tuple[str, str], list[Declaration]] = {}
    for declaration in found:
        by_key.setdefault(declaration.key, []).append(declaration)
    entries, kept = {}, {}
    for key, declarations in by_key.items():
        shown = f"{key[1]}.{key[0]}" if key[0] else key[1]
        if key in built:
            problems.extend(Problem(d.source, "kind", f"{shown} is a kind podgang knows: its built-in entry is "
                                    "used, this declaration is not") for d in declarations)
        elif key[1] in built_names or sum(k[1] == key[1] for k in by_key) > 1:
            problems.extend(Problem(d.source, "kind", f"{shown}: another kind of the name {key[1]} is known or "
                                    "declared, and podgang tells kinds of the same name apart by their API group "
                                    "only in the hub: rename neither, declare one") for d in declarations)
        elif len(declarations) > 1:
            others = ", ".join(d.source for d in declarations)
            problems.extend(Problem(d.source, "kind", f"{shown} is declared {len(declarations)} times ({others}): "
                                    "none is used until one is left") for d in declarations)
        else:
            entries[key], kept[key] = taught_entry(declarations[0]), declarations[0]
    return Taught(entries, kept, tuple(problems))


def _read_one(where: str, obj: Any) -> list[tuple[Declaration | None, list[Problem]]]:
    if not isinstance(obj, Mapping):
        return [(None, [Problem(where, "", "not an object")])]
    if obj.get("kind") == KARTA_KIND and str(obj.get("apiVersion", "")).startswith("run.ai/"):
        return [read_karta(obj)]
    if obj.get("kind") == "ConfigMap":
        text = as_dict(obj.get("data")).get(DECLARATION_KEY)
        name = f"ConfigMap {str(metadata(obj).get('name'))[:63]}"
        if text is None:
            return []
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            return [(None, [Problem(name, f"data[{DECLARATION_KEY}]", f"does not parse: {str(exc)[:200]}")])]
        return _read_list(name, f"data[{DECLARATION_KEY}].kinds", doc)
    if obj.get("kind") == DECLARATION_KIND:
        return _read_list(where, "kinds", obj)
    return []


def _read_list(source: str, where: str, doc: Any) -> list[tuple[Declaration | None, list[Problem]]]:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kinds"), list):
        return [(None, [Problem(source, where, "missing: a list of kinds")])]
    return [read_declaration(entry, f"{source} {where}[{i}]") for i, entry in enumerate(doc["kinds"])]


def is_declaration(obj: Any) -> bool:
    """A Karta, a PodgangKinds document or a ConfigMap holding one: read for the kinds it teaches."""
    d = as_dict(obj)
    return ((d.get("kind") == KARTA_KIND and str(d.get("apiVersion", "")).startswith("run.ai/"))
            or d.get("kind") == DECLARATION_KIND
            or (d.get("kind") == "ConfigMap" and DECLARATION_KEY in as_dict(d.get("data"))))
