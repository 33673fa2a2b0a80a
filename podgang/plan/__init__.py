"""``podgang plan``: what podgang would do with a set of manifests, with no cluster.

A plan is what the two processes would do, through their own code: each pod is
admitted as the webhook admits it (the rules decide its gang and check its GPU
requests), then the manifests fill the grouper's own cache and every PodGroup is
what the grouper's :func:`podgang.gang.desired_group` says — the same
function the running grouper calls, so the plan is what the cluster will do.
This module only turns manifests into those inputs and the answers into a report.
No I/O.

Modules, each importing only those before it: ``model``, ``cluster``, ``output``, ``build``,
``scale``; every name is importable from ``podgang.plan``.
"""

from __future__ import annotations

from podgang.plan.model import (  # noqa: F401
    _SUFFIX_DIGITS,
    _SUFFIX_TOKEN,
    _UID_DIGITS,
    _UID_TOKEN,
    CHECKS,
    Finding,
    GANGS_NAMED,
    Known,
    MAX_SCALE,
    Member,
    Plan,
    PlannedGroup,
    ScaleError,
    UNKNOWN_SUFFIX,
    UNKNOWN_UID,
)
from podgang.plan.cluster import (  # noqa: F401
    _admitted_gang,
    _api_group,
    _ns,
    _Objects,
    _what,
    made_by_operators,
    shown,
)
from podgang.plan.output import (  # noqa: F401
    min_text,
    podgroup_manifests,
)
from podgang.plan.build import (  # noqa: F401
    _admit_pod,
    _as_written,
    _did_you_mean,
    _edits,
    _grace_taken_over,
    _KEY,
    _key_typos,
    _kind_typo,
    _known_keys,
    _known_kinds,
    _not_checked,
    _note_fixed_size,
    _only,
    _OPTION_FIELDS,
    _ORIGINS,
    _own_workload,
    _planned_group,
    _plural,
    _say_absent,
    _show_uids,
    _users_tree_drawn,
    _typo_of,
    _under_missing_owner,
    _unfollowed_workload,
    _workload_member,
    build_plan,
    native_version_in,
    TYPO_EDITS,
)
from podgang.plan.scale import (  # noqa: F401
    _as_followed,
    apply_scale,
    plan_with_scale,
)
