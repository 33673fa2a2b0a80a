"""The grouping rules: which gang a pod joins, how large a gang must be, which GPU
requests contradict each other, and which pods podgang looks at at all.

Pure functions over plain dicts (objects as the API serves them). No I/O, no
clock, no randomness: whatever varies is a parameter. The webhook, the grouper
and ``podgang plan`` all decide through these functions.

Every function takes untrusted input: a malformed object yields a decision or a
:class:`Denial` that says what is wrong, never an exception.

A package along its concerns, each module importing only those listed before it:
``names``, ``scope``, ``owners``, ``results``, ``durations``, ``gpu``, ``pins``, ``membership``,
``trees``, ``roles``, ``sizes``, ``shared``, ``gangs``. Every name is importable from here, as before.
"""

from __future__ import annotations

# what callers have always reached through the rules: the objects and settings they decide on
from podgang.backends.base import Subgroup  # noqa: F401
from podgang.kinds import desired_size, pod_templates, replica_units  # noqa: F401
from podgang.objects import Denial, OwnerRef, clip, kind_name, labels, metadata  # noqa: F401
from podgang.settings import DEFAULT, Settings  # noqa: F401
from podgang.rules.names import (  # noqa: F401
    _clean_name,
    _DNS_LABEL,
    _DNS_SUBDOMAIN,
    _NOT_NAME_CHARS,
    _role_name_ok,
    _short_hash,
    _trim_edges,
    _TEMPLATE_VARIABLE,
    _WHOLE_NUMBER,
    generated_suffix,
    group_name,
    HASH_LEN,
    is_valid_group_name,
    MAX_GENERATE_NAME,
    MAX_MIN_MEMBER,
    MAX_NAME,
    MAX_SUBGROUP_NAME,
    name_problem,
    owned_group_name,
    owner_less_group_name,
)
from podgang.rules.scope import (  # noqa: F401
    in_scope,
    is_skipped,
    owner_skip_problem,
    partial_scope_problem,
    scope_problem,
    workload_skip_problem,
)
from podgang.rules.owners import (  # noqa: F401
    _MAX_OWNER_REFS,
    _owner_ref,
    _OWNER_REFS,
    _same,
    chain_objects,
    controller_ref,
    next_owner,
    owner_to_look_up,
    top_owner,
)
from podgang.rules.results import (  # noqa: F401
    Gang,
    HAND_MADE,
    MinMember,
    OWNED,
    OWNER_LESS,
    STANDALONE,
)
from podgang.rules.durations import (  # noqa: F401
    _DURATION_PART,
    _UNIT,
    grace_period_for,
    parse_duration,
)
from podgang.rules.gpu import (  # noqa: F401
    _containers,
    _DECIMAL,
    gpu_problem,
    MSG_BAD_FRACTION,
    MSG_BAD_MEMORY,
    MSG_FRACTION_AND_GPU,
    MSG_GPU_AND_MEMORY,
    nv_fractions,
    quantity,
    whole_gpu_requests,
)
from podgang.rules.pins import (  # noqa: F401
    min_available,
    min_replicas,
    pinned_min_member,
)
from podgang.rules.membership import (  # noqa: F401
    _keys_of,
    _segmenting_backend,
    _subgroup,
    group_of,
    hand_made_group,
    leaf_name,
    missing_group_warning,
    pod_leaf,
    roles_in_hand_made_group,
    scheduler_pin_problems,
    template_group,
    template_subgroup,
    unlisted_subgroup_warning,
    without_membership,
    workload_backend,
    workload_subgroup,
)
from podgang.rules.trees import (  # noqa: F401
    ordered_ready_problem,
    owned_group_suffixes,
    owned_suffix,
    owned_tree,
    replica_tree,
    replicas_not_held,
    root_min_subgroup,
    tree_problems,
    whole_workload_tree,
)
from podgang.rules.roles import (  # noqa: F401
    _lws_segments,
    _role_parts,
    _role_topology,
    LEADER,
    lent_metadata,
    lws_segments,
    MAX_SEGMENTS,
    minimum_pods,
    own_subgroup_names,
    pod_segment,
    ReplicaSegments,
    role_problems,
    role_segments,
    role_subgroups,
    role_leaf,
    role_tree,
    SEGMENT,
    WORKERS,
)
from podgang.rules.sizes import (  # noqa: F401
    _instant,
    hand_made_size_rule,
    min_member_for,
    NO_RECORD,
    SCALED_SINCE,
    scaled_since,
    shared_min_member,
    SizeRule,
    staged_problem,
    subgroup_min_member,
)
from podgang.rules.shared import (  # noqa: F401
    declared_roles,
    required_roles,
    required_roles_warning,
    RequiredRoles,
    shared_subgroups,
    with_awaited,
)
from podgang.rules.gangs import (  # noqa: F401
    gang_for_pod,
)
