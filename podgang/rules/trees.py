"""Gangs of complete multi-pod replicas: a workload's replica tree, its root's minimum, and the
problems of a tree that can never be satisfied.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

from podgang.backends.base import Subgroup
from podgang.kinds import ONE_PER_REPLICA, pod_templates, replica_suffix, replica_units, workload_kind
from podgang.objects import OwnerRef, annotations, kind_name
from podgang.objects import as_dict as _dict
from podgang.settings import DEFAULT, Settings

from podgang.rules.membership import leaf_name, workload_subgroup
from podgang.rules.pins import min_available, min_replicas


def owned_suffix(top: OwnerRef, top_obj: Any, pod: Any, settings: Settings = DEFAULT) -> tuple[str, str]:
    """The suffix of the group a pod of ``top`` joins, and why: a LeaderWorkerSet's
    ``-group-N`` (one gang per replica, as KAI's and LWS's own integrations make them),
    except for one that asks for a number of complete replicas (``podgang.io/min-available``
    on it): one group for the whole LWS, a leaf per replica (``top_obj``: the top owner
    object, when looked up)."""
    if top_obj is not None and whole_workload_tree(top_obj, settings):
        return "", ""
    return replica_suffix(top, pod)


def owned_group_suffixes(workload: Any, settings: Settings = DEFAULT) -> list[str]:
    """The name suffix of each PodGroup a top workload owns itself."""
    entry = workload_kind(workload)
    if entry is None:
        return [""]
    if whole_workload_tree(workload, settings):
        return [""]
    return entry.replica_suffixes(workload)


def whole_workload_tree(workload: Any, settings: Settings = DEFAULT) -> bool:
    """A workload of multi-pod replicas that asks for N complete replicas itself
    (``podgang.io/min-available``), under a scheduler that holds trees (KAI): one gang over
    all its replicas instead of one per replica. Elsewhere each replica stays a gang of its
    own (whole replicas, without "at least N of them": :func:`replicas_not_held`)."""
    entry = workload_kind(workload)
    if (entry is None or entry.layout != ONE_PER_REPLICA or replica_units(workload) is None
            or min_available(workload, settings)[0] is None):
        return False
    templates = pod_templates(workload)
    backend = settings.backend_for(templates[-1][1]) if templates else None
    return backend is not None and backend.holds_trees


def replicas_not_held(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """What a user is told when a workload asks for N complete replicas and its scheduler
    cannot say so (Volcano, coscheduling, native gangs): each replica is its own gang."""
    entry = workload_kind(workload)
    wanted = min_available(workload, settings)[0]
    if (entry is None or entry.layout != ONE_PER_REPLICA or replica_units(workload) is None or wanted is None
            or whole_workload_tree(workload, settings)):
        return None
    templates = pod_templates(workload)
    backend = settings.backend_for(templates[-1][1]) if templates else None
    name = backend.name if backend is not None else "this"
    return (f"{kind_name(workload)}: {settings.min_available_annotation}={wanted} complete replicas is not held: the "
            f"{name} backend cannot say \"N complete replicas\", so each replica stays a gang of its own (always "
            f"whole), and nothing makes {wanted} of them start together (KAI can: a leaf per replica)")


def ordered_ready_problem(workload: Any, gang_size: int, others: int) -> str | None:
    """Why a StatefulSet's gang can never form, or None. With ``podManagementPolicy:
    OrderedReady`` (the default) its controller creates pod N+1 only once pod N is Ready,
    and under a gang scheduler pod 0 is not placed before ``gang_size`` pods exist: only
    ``others`` (the gang's other pods) and its pod 0 ever do (seed 002's Spark executors,
    recorded on a real 1.35 control plane)."""
    if _dict(workload).get("kind") != "StatefulSet":
        return None
    spec = _dict(_dict(workload).get("spec"))
    policy = spec.get("podManagementPolicy") or "OrderedReady"  # the apiserver's default
    replicas = spec.get("replicas", 1)
    if policy != "OrderedReady" or not isinstance(replicas, int) or replicas < 2 or others + 1 >= gang_size:
        return None
    name = _dict(_dict(workload).get("metadata")).get("name") or "?"
    default = "" if spec.get("podManagementPolicy") else " (the default)"
    return (f"statefulset {name} has podManagementPolicy OrderedReady{default}: "
            f"it creates {name}-1 only once {name}-0 is Ready, and no pod of the gang is placed before "
            f"{gang_size} exist, but only {others + 1} ever will: the gang never forms. Set podManagementPolicy: "
            f"Parallel (it cannot change on a live StatefulSet: recreate it)")


def replica_tree(workload: Any, settings: Settings = DEFAULT,
                 present: Mapping[int, tuple[int, int]] | None = None) -> tuple[Subgroup, ...]:
    """A workload's part of a gang when its replicas are several pods each: its role, a
    parent needing its minimum of complete replicas (:func:`min_replicas`), and one leaf
    per replica (``<role>-<index>``, needing the replica's pods); empty for any other.

    ``present``: replica index -> (its live pods, those bound), as the cluster has them;
    None: the tree as it will be (``podgang plan``). A replica's leaf is listed once all its
    pods exist — KAI places the pods of a leaf beyond its role's minimum one by one, and
    ignores a pod whose leaf the group does not list, so a replica whose workers are not
    made yet is never started in part — and kept while any of its pods is bound (a replica
    scaled away keeps it until they are gone). While some of its pods exist but fewer replicas
    are whole than its minimum (an LWS's leaders made before their workers), the replicas still
    needed are listed ahead, by the indexes being made, each a leaf needing all its pods. A role none of whose pods
    exist (not made yet, or all deleted) is one part needing its minimum's pods (no leaves): the
    gang waits for the role. So a role is counted from its declaration to its last pod, with no
    gap in which KAI would see a parent with no leaf (which it does not count)."""
    replicas = min_replicas(workload, settings)
    unit = replica_units(workload)
    if replicas is None or unit is None:
        return ()
    count, why, pinned = replicas
    role = workload_subgroup(workload, settings)
    if present is None:
        indices = list(range(unit.count))
    else:
        indices = sorted(i for i, (live, placed) in present.items() if isinstance(i, int) and 0 <= i < 10**6
                         and ((i < unit.count and live >= unit.pods) or placed > 0))
        if not any(live > 0 or placed > 0 for live, placed in present.values()):
            # none of its pods exist (not made yet, or all deleted and being made again): the role as one
            # part needing its minimum's pods, which the gang waits for — a parent with no leaf is no part
            # to KAI, and the other roles' replicas would take the room meanwhile (roles applied together,
            # their pods made one after the other)
            return (Subgroup(role, count * unit.pods, f"{why} × {unit.reason}: none of its pods exist", pinned),)
    if present is None or not unit.leader_first:
        waiting: dict[int, int] = {}
    else:  # LeaderReady: a replica's leader alone, placed first (its workers come once it is Ready)
        waiting = {i: live for i, (live, placed) in present.items() if i not in indices and i < unit.count
                   and 0 < live < unit.pods and placed == 0}
    coming: set[int] = set()
    have = {i for i in (*indices, *waiting) if i < unit.count}
    if present is not None and len(have) < count:
        # fewer replicas whole than the role needs (an LWS's leaders are made before their workers):
        # a parent short of leaves is no part to KAI, or one it can never satisfy, and the other
        # roles would take the room meanwhile. The replicas still needed, by the indexes its
        # controller is making (those under way first, then the lowest), each a leaf needing all
        # its pods: counted from the first pod, never half-placed
        started = sorted(i for i, (live, _) in present.items()
                         if isinstance(i, int) and 0 <= i < unit.count and live and i not in have)
        rest = [i for i in range(unit.count) if i not in have and i not in started]
        coming = set((started + rest)[:count - len(have)])
    leaves = tuple(Subgroup(leaf_name(role, i), waiting.get(i, unit.pods),
                            (f"replica {i}: its leader first (startupPolicy LeaderReady)" if i in waiting else
                             f"replica {i}: {unit.reason}, its pods being made" if i in coming else
                             f"replica {i}: {unit.reason}" if i < unit.count else
                             f"replica {i}: scaled away, kept while its pods are"), parent=role)
                   for i in sorted({*indices, *waiting, *coming}))
    return (Subgroup(role, count, why, pinned, of_subgroups=True), *leaves)


def owned_tree(workload: Any, settings: Settings = DEFAULT,
               present: Mapping[int, tuple[int, int]] | None = None) -> tuple[tuple[Subgroup, ...], int | None]:
    """The tree of a workload's own gang over all its replicas (a lone LWS with
    ``podgang.io/min-available: N``): a leaf per replica directly under the group, and the
    root needing N of them; ((), None) for any other workload."""
    if not whole_workload_tree(workload, settings):
        return (), None
    parts = replica_tree(workload, settings, present)
    if not parts:
        return (), None
    role = parts[0]
    return tuple(replace(leaf, parent=None) for leaf in parts[1:]), role.min_member


def root_min_subgroup(subgroups: Sequence[Subgroup], pinned: int | None = None) -> int | None:
    """The root's minimum of direct subgroups when the gang is a tree (some part counts
    complete replicas): every part required (``pinned``: what the user set); None for a
    flat list of parts (the root counts pods)."""
    if not any(s.of_subgroups or s.parent for s in subgroups):
        return None
    return pinned if pinned is not None else sum(1 for s in subgroups if s.parent is None)


def tree_problems(subgroups: Sequence[Subgroup], min_subgroup: int | None) -> tuple[str, ...]:
    """A tree that can never be satisfied: a node needing more children than it has."""
    children: dict[str | None, int] = {}
    for s in subgroups:
        children[s.parent] = children.get(s.parent, 0) + 1
    out = [f"subgroup {s.name} needs {s.min_member} complete replicas and has {children.get(s.name, 0)}: "
           f"the gang is not placed until there are {s.min_member}" for s in subgroups
           if s.of_subgroups and s.min_member > children.get(s.name, 0)]
    if min_subgroup is not None and min_subgroup > children.get(None, 0):
        out.append(f"the group needs {min_subgroup} parts and has {children.get(None, 0)}")
    return tuple(out)
