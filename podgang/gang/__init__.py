"""The gang model: what podgang knows of the cluster's gangs and what each should be, pure (no
I/O) and shared by the grouper, ``podgang plan`` and ``podgang status`` alike.

Modules, each importing only those before it: ``slim`` (objects pruned to what the rules
read), ``cache`` (the objects and their indexes), ``desired`` (:func:`desired_group`),
``writing`` (:func:`plan_writes`), ``counts`` (a gang's members as counted for staleness),
and ``stale`` (the stale-gang and broken-replica trackers, their clock injected).
"""

from __future__ import annotations

from podgang.gang.slim import (  # noqa: F401
    _ABSENT,
    _d,
    _intern,
    _MAX_SHARED,
    _pick,
    _placement_only,
    _REF_FIELDS,
    _resources_only,
    display_name,
    is_newer,
    key_of,
    Obj,
    obj_key,
    pod_ref,
    resource_version,
    SIZE_WRITERS,
    Slimmer,
    split_key,
    template_backend,
    template_in_scope,
    workload_ref,
)
from podgang.gang.cache import (  # noqa: F401
    _discard,
    Cache,
    Changes,
    PodGroupStores,
)
from podgang.gang.desired import (  # noqa: F401
    _desired_group,
    _live,
    _md,
    _missing,
    _named_from_generate_name,
    _pin_problems,
    _standalone,
    changed_by_others,
    Desired,
    desired_group,
    gang_options,
    group_backend,
    is_managed,
    judged_settings,
    lent_metadata,
    MANAGER_CHARS,
    MANAGERS_NAMED,
    minimum_pods,
    natural_gang,
    operator_named,
    owned_parts,
    owned_subgroups,
    pod_gang,
    pod_leaf,
    pod_subgroup,
    replica_counts,
    replicas_present,
    replicas_unexpressed,
    size_rule,
    size_writers,
    subgroups_unexpressed,
    users_tree,
    with_owners,
)
from podgang.gang.writing import (  # noqa: F401
    _annotate,
    _merged_metadata,
    _min_resources_write,
    _size_fixed,
    _subgroups_write,
    describe_tree,
    follows_hand_made,
    is_orphan_candidate,
    kept_grace,
    plan_writes,
    retired_by,
    size_held,
    subgroup_sizes,
    Write,
)
from podgang.gang.counts import (  # noqa: F401
    counted_members,
    describe_change,
    finished_workloads,
    gang_counts,
    GangCounts,
    rollout_reason,
)
