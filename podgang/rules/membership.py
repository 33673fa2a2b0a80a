"""What a pod or pod template names: its PodGroup and subgroup by the backend's keys, the leaf
of its replica, the backend its scheduler maps to.
"""

from __future__ import annotations

from typing import Any, Sequence

from podgang.backends import Backend
from podgang.kinds import pod_templates, roles, whole_roles
from podgang.objects import Denial, annotations, clip, kind_name, metadata
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, Settings

from podgang.rules.names import _short_hash, _trim_edges, is_valid_group_name, MAX_NAME, MAX_SUBGROUP_NAME
from podgang.rules.scope import workload_backend


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


def roles_in_hand_made_group(workload: Any, settings: Settings = DEFAULT) -> dict[str, str]:
    """The roles of a workload whose pod templates name a hand-made group, by role, when only
    some of its roles do (Volcano's Spark example: the executors name ``spark-pi-group``, the
    driver names none): those count in that group, the others are the workload's own gang.
    Empty when all or none do."""
    found = {r.name: hand_made_group(r.template, settings) for r in whole_roles(workload)}
    named = {role: group for role, group in found.items() if isinstance(group, str)}
    return named if named and len(named) < len(found) else {}


def _segmenting_backend(template: Any, settings: Settings) -> Backend | None:
    backend = _keys_of(template, settings)
    return backend if backend.holds_trees else None


def scheduler_pin_problems(workload: Any, settings: Settings = DEFAULT) -> tuple[str, ...]:
    """A scheduler's own size annotation on a workload or its roles that it would ignore."""
    backend = workload_backend(workload, settings)
    if backend is None:
        return ()
    found = [backend.size_pin(workload)[1] if backend.size_pin(workload)[0] is None else ""]
    found += [why for role in roles(workload) for value, why in [backend.role_pin(role)] if value is None]
    return tuple(f for f in found if f)
