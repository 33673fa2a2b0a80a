"""Which gang a pod joins: the group it names, its top owner's, or its own.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from podgang.kinds import pod_role, replica_index, role_replica_index, spark_app_group
from podgang.objects import POD, Denial, annotations, clip, metadata
from podgang.objects import as_dict as _dict
from podgang.settings import DEFAULT, Settings

from podgang.rules.membership import _keys_of, _subgroup, hand_made_group, pod_leaf, template_subgroup
from podgang.rules.names import (generated_suffix, group_name, is_valid_group_name, owned_group_name,
                                 owner_less_group_name)
from podgang.rules.owners import _same, top_owner
from podgang.rules.results import Gang, HAND_MADE, OWNED, OWNER_LESS, STANDALONE
from podgang.rules.roles import pod_segment, role_leaf, role_tree
from podgang.rules.trees import owned_suffix, whole_workload_tree


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

    spark = spark_app_group(pod) if top is None or (top.kind == POD.kind and top.api_version == "v1") else None
    if spark is not None and is_valid_group_name(spark):  # spark-submit's pods, no operator: KAI's name for them
        why = "a Spark pod run without an operator: named after its spark-app-selector, as KAI's grouper names it"
        if top is None:
            return Gang(spark, OWNER_LESS, why, subgroup=subgroup)
        if top.uid:
            return Gang(spark, OWNED, f"{why} (its driver pod/{clip(top.name)} owns it)", owner=top, top_owner=top,
                        subgroup=subgroup)
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
            return Gang(name, OWNED, reason, owner=top, top_owner=top, subgroup=role_leaf(top, role_name, role_index),
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
