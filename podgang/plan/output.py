"""``podgang plan -o yaml``: the PodGroups that would exist, as manifests to apply.
"""

from __future__ import annotations

import copy
from typing import Any


from podgang.backends.base import gang_spec
from podgang.gang import kept_grace
from podgang.objects import merge_patch as _merge
from podgang.settings import DEFAULT, Settings

from podgang.plan.model import _UID_TOKEN, Plan, PlannedGroup, UNKNOWN_SUFFIX


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
                   else "the grouper creates it once the cluster names its owner (generateName) and assigns the UID"
                   if UNKNOWN_SUFFIX in group.name else "the grouper creates it once the cluster assigns the UID")
            comments.append(f"PodGroup {group.namespace}/{group.name} ({min_text(group)}, "
                            f"{group.owner_text}): {why}")
            continue
        # an owner-less pod's group is owned by the pod once it exists (the webhook makes the group
        # before the pod has a UID; the grouper adds the pod as its owner): known only with the UID
        owned = group.origin in ("owned", "owner-less") and group.owner is not None and group.owner.uid \
            and _UID_TOKEN not in group.owner.uid
        options = group.options
        if any(_UID_TOKEN in str(v) for v in (options.get("annotations") or {}).values()):
            options = {**options, "annotations": {k: v for k, v in options["annotations"].items()
                                                  if _UID_TOKEN not in str(v)}}
        docs.append(backend.build_podgroup(gang_spec(
            group.name, group.namespace, group.min_member.value, labels=settings.managed_labels,
            options=options, owner=group.owner if owned else None,
            subgroups=group.subgroups, min_subgroup=group.min_subgroup)))
    return docs, comments
