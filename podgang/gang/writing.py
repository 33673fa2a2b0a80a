"""The smallest set of writes that makes a PodGroup what :func:`desired_group` says
(:func:`plan_writes`), and what holds a size back. Pure: the grouper does the I/O; the same
state twice plans no writes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Mapping

from podgang import kinds, quantities, rules
from podgang.backends import Backend
from podgang.backends.base import PATCH, REFUSE, REPLACE_WHEN_EMPTY, gang_spec, tree_shape
from podgang.objects import merge_patch
from podgang.rules import HAND_MADE
from podgang.settings import Settings

from podgang.gang.cache import Cache
from podgang.gang.slim import Obj, display_name
from podgang.gang.desired import Desired, _md, is_managed


@dataclass(frozen=True)
class Write:
    """One API write the controller performs."""

    #: "create" | "patch-min-member" | "patch-subgroups" | "record-size" | "record-elastic" | "adopt" | "replace"
    #: | "adopt-group" (a group the scheduler's own pod-grouper made, taken over)
    action: str
    body: dict[str, Any] | None = None
    old: int | None = None  # previous minMember (patch)
    new: int | None = None  # new minMember (create/patch)
    note: str = ""
    subgroups: str = ""  # patch-min-member: the subgroups set in the same patch (their sum is the minMember)
    resources: str = ""  # patch-min-member, patch-subgroups: the minResources set in the same patch


def plan_writes(desired: Desired, actual: Obj | None, settings: Settings) -> list[Write]:
    """The writes that make ``actual`` what ``desired`` says, and nothing else.

    A size change goes the way the backend says: a patch, or (a group whose size
    cannot change while it lives) a ``replace`` — delete it so that it is created
    again with the new size — once no pod names it; until then nothing is written
    and :func:`size_held` says why (the desired size is recorded on the group)."""
    backend = desired.backend or settings.default_backend
    if desired.pending:
        return []
    if actual is None:
        if desired.may_create and desired.min_member is not None:
            manifest = backend.build_podgroup(gang_spec(
                desired.name, desired.namespace, desired.min_member.value, labels=settings.managed_labels,
                options=desired.options, owner=desired.owner, subgroups=desired.subgroups,
                min_subgroup=desired.min_subgroup, min_resources=desired.min_resources))
            if desired.min_member.idle and _size_fixed(backend, manifest):
                return []  # a group of 1 now would hold the pods of a later scale-up to 1: wait for them
            if desired.subgroups:  # recorded as podgang's, as a patch records them: podgang may remove them
                manifest["metadata"].setdefault("annotations", {})[settings.subgroups_annotation] = ",".join(
                    s.name for s in desired.subgroups)
            return [Write("create", manifest, None, desired.min_member.value)]
        return []
    if _md(actual).get("deletionTimestamp"):
        return []
    managed = is_managed(actual, settings)
    writes: list[Write] = []
    rv = _md(actual).get("resourceVersion")
    current = backend.min_member(actual)
    if not managed and desired.adopted:  # the scheduler's own grouper made it: taken over, then planned again
        body = {"metadata": {"labels": dict(settings.managed_labels),
                             "annotations": {settings.adopted_from_annotation: desired.adopted}}}
        if rv:
            body["metadata"]["resourceVersion"] = rv
        return [Write("adopt-group", body, current, None, note=desired.adopted)]
    # a tree's root is sized by its subgroups (written with them below), never by a minMember beside them
    if desired.min_member is not None and current != desired.min_member.value and desired.min_subgroup is None:
        resize = backend.resize(actual, desired.min_member.value)
        if resize.action == PATCH and resize.body is not None and (managed or desired.source == HAND_MADE):
            body = dict(resize.body)
            if rv:
                body["metadata"] = {"resourceVersion": rv}
            note = "" if managed else "hand-made PodGroup: podgang changes only its minMember"
            if follows_hand_made(desired):  # remembered: a later scale is podgang's to follow, not elastic
                body["metadata"] = {**body.get("metadata", {}), "annotations": {
                    settings.followed_size_annotation: str(desired.min_member.value)}}
            writes.append(Write("patch-min-member", body, current, desired.min_member.value, note))
        elif resize.action == REPLACE_WHEN_EMPTY and managed and not desired.members:
            # scaled to 0 (idle): deleted, and created again only when the workload wants pods
            new = None if desired.min_member.idle else desired.min_member.value
            writes.append(Write("replace", None, current, new, resize.why))
    subgroups = _subgroups_write(desired, actual, backend, settings)
    if subgroups is not None and (managed or desired.source == HAND_MADE):
        at = next((i for i, w in enumerate(writes) if w.action == "patch-min-member"), None)
        if at is not None:  # one patch: a scheduler may refuse a minMember other than the subgroups' sum
            resized = writes[at]
            body = {**resized.body, "spec": {**resized.body["spec"], **subgroups.body["spec"]},
                    "metadata": _merged_metadata(resized.body.get("metadata"), subgroups.body["metadata"])}
            writes[at] = replace(resized, body=body, subgroups=subgroups.note)
        else:
            if rv:
                subgroups.body["metadata"]["resourceVersion"] = rv
            writes.append(subgroups)
    resources = _min_resources_write(desired, actual, backend, settings)
    if resources is not None and (managed or desired.source == HAND_MADE):
        at = next((i for i, w in enumerate(writes) if w.action in ("patch-min-member", "patch-subgroups")), None)
        if at is not None:  # one patch: the size and what it needs change together
            resized = writes[at]
            body = {**resized.body, "spec": {**resized.body["spec"], **resources.body["spec"]},
                    "metadata": _merged_metadata(resized.body.get("metadata"), resources.body.get("metadata"))}
            writes[at] = replace(resized, body=body, resources=resources.note)
        else:
            if rv:
                resources.body.setdefault("metadata", {})["resourceVersion"] = rv
            writes.append(resources)
    followed = (_md(actual).get("annotations") or {}).get(settings.followed_size_annotation)
    if (follows_hand_made(desired) and current == desired.min_member.value and followed != str(current)
            and _follows_scales(backend, actual, current)):  # found at its members' total: followed
        _annotate(writes, {settings.followed_size_annotation: str(current)}, rv, current)
    rule = desired.size_rule
    if (rule is not None and rule.first_look and not rule.follows and current is not None
            and _follows_scales(backend, actual, current)):  # the user's elastic gang, said once and recorded
        writes.append(Write("record-elastic", {"metadata": {
            "annotations": {settings.elastic_size_annotation: str(rule.written)}, **(
                {"resourceVersion": rv} if rv else {})}}, current, None, rule.why))
    awaited = None if desired.awaited_roles is None else ",".join(desired.awaited_roles) or None
    if desired.source == HAND_MADE and awaited != (_md(actual).get("annotations") or {}).get(
            settings.awaited_roles_annotation):  # the declared roles still to come, for the webhook to name
        _annotate(writes, {settings.awaited_roles_annotation: awaited}, rv, current)
    recorded = (_md(actual).get("annotations") or {}).get(settings.desired_size_annotation)
    held = size_held(desired, actual, settings) is not None
    wanted = str(desired.min_member.value) if held and desired.min_member is not None else None
    if managed and recorded != wanted and not any(w.action == "replace" for w in writes):
        body = {"metadata": {"annotations": {settings.desired_size_annotation: wanted}}}
        if rv:
            body["metadata"]["resourceVersion"] = rv
        writes.append(Write("record-size", body, current, desired.min_member.value if held else None))
    if managed and desired.owner is not None and not _md(actual).get("ownerReferences"):
        body = {"metadata": {"ownerReferences": [desired.owner.to_dict()]}}
        # what the backend reads from the owner, which a group made before its pod had a UID lacks
        # (KAI's top-owner-metadata of an owner-less pod): added, never overwriting
        have = _md(actual).get("annotations") or {}
        added = {k: v for k, v in (desired.options.get("annotations") or {}).items() if k not in have}
        if added:
            body["metadata"]["annotations"] = added
        if rv:
            body["metadata"]["resourceVersion"] = rv
        writes.append(Write("adopt", body, note=f"{desired.owner.kind.lower()} {desired.owner.name}"))
    # a change the scheduler's own admission refuses is not sent (again and again): size_held says why
    return [w for w in writes if not (w.body and "spec" in w.body and backend.update_refused(actual, _patched(actual, w.body)))]


def _patched(obj: Obj, patch: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    merge_patch(out, patch)
    return out


def subgroups_refused(desired: Desired, actual: Obj | None, settings: Settings) -> str | None:
    """What the scheduler's own admission answers to the subgroups podgang wants for ``actual``
    (KAI v0.18: a semi-preemptible group's minimums never go up), when it refuses them."""
    if actual is None or desired.pending:
        return None
    backend = desired.backend or settings.default_backend
    write = _subgroups_write(desired, actual, backend, settings)
    return None if write is None or write.body is None else backend.update_refused(actual, _patched(actual, write.body))


def _follows_scales(backend: Backend, actual: Obj, current: int) -> bool:
    """Whether a live group's size can follow its workloads' scales (a patch; a semi-preemptible
    KAI group's only down, and a refused raise is said)."""
    return backend.resize(actual, current + 1).action in (PATCH, REFUSE)


def _annotate(writes: list[Write], note: dict[str, str | None], rv: str | None, current: int | None) -> None:
    """Annotations set in the patch that is sent anyway, else in a write of their own."""
    at = next((i for i, w in enumerate(writes) if w.body is not None and w.action.startswith("patch-")), None)
    if at is not None:
        body = {**writes[at].body, "metadata": _merged_metadata(writes[at].body.get("metadata"),
                                                              {"annotations": note})}
        writes[at] = replace(writes[at], body=body)
    else:
        writes.append(Write("record-size", {"metadata": {"annotations": note, **(
            {"resourceVersion": rv} if rv else {})}}, current, None))


def follows_hand_made(desired: Desired) -> bool:
    """A hand-made group whose size in pods podgang follows (not pinned, not the user's elastic
    gang, not a tree: that counts complete replicas, and has no minMember to remember)."""
    return desired.source == HAND_MADE and desired.min_member is not None and not desired.min_member.pinned \
        and bool(desired.workloads) and desired.min_subgroup is None


def _subgroups_write(desired: Desired, actual: Obj, backend: Backend, settings: Settings) -> Write | None:
    """The patch that gives ``actual`` the subgroups of ``desired`` (a flat list, or a tree
    and its root), recording their names in ``podgang.io/subgroups``; or, once the group has
    one part again (a workload left), the one that removes those podgang wrote (never
    subgroups a user wrote)."""
    current = backend.subgroup_tree_of(actual)
    if current is None:
        return None  # the scheduler has no subgroups
    wanted = desired.subgroups
    written = (_md(actual).get("annotations") or {}).get(settings.subgroups_annotation)
    if not wanted and not (written and current[1]):
        return None
    if tree_shape(current[1], current[0]) == tree_shape(wanted, desired.min_subgroup):
        return None
    body = backend.subgroups_patch(actual, wanted, desired.min_subgroup)
    if body is None:
        return None
    body["metadata"] = {"annotations": {settings.subgroups_annotation: ",".join(s.name for s in wanted) or None,
                                        **kept_grace(backend, actual, body, settings)}}
    return Write("patch-subgroups", body, note=describe_tree(desired) if wanted else
                 "none (the group has one part again: the one minMember is the gang)")


def kept_grace(backend: Backend, actual: Obj, patch: Mapping[str, Any], settings: Settings) -> dict[str, str]:
    """The annotation that keeps a user's grace period as podgang's own
    (``podgang.io/staleness-grace-period``) when ``patch`` turns the scheduler's eviction of
    ``actual`` off for podgang's (KAI's ``stalenessGracePeriod: -1s``); empty when there is
    none, or the group already says podgang's."""
    taken = backend.grace_taken_over(actual, patch.get("spec") or {})
    if taken is None or settings.grace_period_annotation in (_md(actual).get("annotations") or {}):
        return {}
    return {settings.grace_period_annotation: taken}


def describe_tree(desired: Desired) -> str:
    """The subgroups podgang writes, in one line: ``prefill 1 of 2 replicas × 2 pods, decode 2``."""
    children: dict[str | None, list[rules.Subgroup]] = {}
    for s in desired.subgroups:
        children.setdefault(s.parent, []).append(s)
    parts = []
    for s in children.get(None, []):
        below = children.get(s.name, [])
        if s.of_subgroups:
            pods = sorted({c.min_member for c in below})
            each = f" × {pods[0]} pods" if len(pods) == 1 else ""
            parts.append(f"{s.name} {s.min_member} of {len(below)} replicas{each}")
        else:
            parts.append(f"{s.name} {s.min_member}")
    if desired.min_subgroup is not None:
        whole = "all" if desired.min_subgroup == len(children.get(None, [])) else str(desired.min_subgroup)
        parts.append(f"the group needs {whole} of {len(children.get(None, []))} (minSubGroup)")
    what = "workload's" if desired.source == HAND_MADE else "role's"
    return ", ".join(parts) + (f" (each {what} minimum inside the gang)" if desired.min_subgroup is None else "")


def _min_resources_write(desired: Desired, actual: Obj, backend: Backend, settings: Settings) -> Write | None:
    """The patch that brings ``actual``'s minimum resources to the gang's (a scale, a
    workload joining a shared group). A hand-made group's are the user's once they differ
    from what podgang last wrote there (``podgang.io/min-resources``): kept."""
    wanted = desired.min_resources
    if not wanted:
        return None
    current = backend.min_resources_of(actual)
    if current is not None and quantities.same_resources(current, wanted):
        return None
    body = backend.min_resources_patch(actual, wanted)
    if body is None:
        return None
    if desired.source == HAND_MADE:
        written = (_md(actual).get("annotations") or {}).get(settings.min_resources_annotation)
        if current is not None and not (written and quantities.same_resources(current, quantities.parse_compact(written))):
            return None  # the user's own
        body["metadata"] = {"annotations": {settings.min_resources_annotation: quantities.compact(wanted)}}
    return Write("patch-min-resources", body, note=quantities.describe(wanted))


def _merged_metadata(a: Any, b: Any) -> dict[str, Any]:
    """Two merge patches' metadata as one (annotations of both, the first's resourceVersion)."""
    a, b = dict(a or {}), dict(b or {})
    notes = {**(b.pop("annotations", None) or {}), **(a.pop("annotations", None) or {})}
    return {**b, **a, **({"annotations": notes} if notes else {})}


def _size_fixed(backend: Backend, podgroup: Obj) -> bool:
    """Whether ``backend`` cannot change the size of ``podgroup`` while it lives."""
    size = backend.min_member(podgroup) or 1
    return backend.resize(podgroup, size + 1).action == REPLACE_WHEN_EMPTY


def subgroup_sizes(desired: Desired) -> tuple[tuple[str, int], ...]:
    """(subgroup, minimum) of the group, as :meth:`Backend.subgroups_of` lists them."""
    return tuple((s.name, s.min_member) for s in desired.subgroups)


def size_held(desired: Desired, actual: Obj | None, settings: Settings) -> str | None:
    """Why ``actual`` keeps a size other than the desired one for now (the backend
    cannot change it on a live group, or not at all), or None."""
    if actual is None or desired.min_member is None or desired.pending:
        return None
    backend = desired.backend or settings.default_backend
    current = backend.min_member(actual)
    # (a tree is sized by its subgroups, written in place)
    resize = (backend.resize(actual, desired.min_member.value)
              if desired.min_subgroup is None and current != desired.min_member.value else None)
    if resize is None or resize.action == PATCH:
        refused = subgroups_refused(desired, actual, settings)
        return None if refused is None else (
            f"the subgroups keep their minimums (wanted: {describe_tree(desired)}): {refused}")
    managed = is_managed(actual, settings)
    if resize.action == REPLACE_WHEN_EMPTY and managed and not desired.members:
        return None  # replaced right away
    then = ""
    if resize.action == REPLACE_WHEN_EMPTY:  # podgang replaces only the groups it made
        then = (f"; podgang then replaces it with minMember {desired.min_member.value}" if managed
                else "; a hand-made group: recreate it to change its size")
    return f"minMember stays {current} (wanted {desired.min_member.value}): {resize.why}{then}"


def size_refused(desired: Desired, actual: Obj | None, settings: Settings) -> bool:
    """Whether the size podgang wants is refused for good (not just until the group is empty):
    the gang is then what the live group says (a semi-preemptible KAI group's protected core)."""
    if actual is None or desired.min_member is None or desired.pending:
        return False
    backend = desired.backend or settings.default_backend
    flat = desired.min_subgroup is None and backend.min_member(actual) != desired.min_member.value
    return ((flat and backend.resize(actual, desired.min_member.value).action == REFUSE)
            or subgroups_refused(desired, actual, settings) is not None)


def is_orphan_candidate(desired: Desired, actual: Obj | None, settings: Settings) -> bool:
    """A podgang group with no owner that no pod or workload references: the
    webhook created it for a pod that never appeared (e.g. the apiserver
    rejected the pod after admission)."""
    if actual is None or desired.source is not None or desired.pending or desired.members:
        return False
    if _md(actual).get("deletionTimestamp") or _md(actual).get("ownerReferences"):
        return False
    return is_managed(actual, settings)


def orphan_timeout(actual: Obj, settings: Settings) -> float:
    """How long an orphan candidate (:func:`is_orphan_candidate`) is kept: a group the webhook
    created at admission (marked so, never adopted: no pod was seen naming it) not long —
    anyone who reaches the webhook can make one —, any other ``settings.orphan_timeout``."""
    marked = (_md(actual).get("annotations") or {}).get(settings.admission_created_annotation) == "true"
    return min(settings.admission_orphan_timeout, settings.orphan_timeout) if marked else settings.orphan_timeout


def retired_by(desired: Desired, actual: Obj | None, cache: Cache) -> str | None:
    """Why a podgang group is no longer wanted although its owner still exists, or
    None: the owner no longer has it (a LeaderWorkerSet scaled down drops the groups
    of its removed replica groups) and no pod names it any more. Garbage collection
    only removes it with the owner, so the grouper does."""
    if actual is None or desired.source is not None or desired.pending or desired.members:
        return None
    if _md(actual).get("deletionTimestamp") or not is_managed(actual, cache.settings):
        return None
    for ref in _md(actual).get("ownerReferences") or ():
        owner = cache.by_uid.get(str((ref or {}).get("uid") or ""))
        if owner is not None and owner.get("kind") == (ref or {}).get("kind") and kinds.workload_kind(owner):
            return f"{display_name(owner)} no longer has it and no pod names it"
    return None
