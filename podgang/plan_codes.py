"""The machine-readable code of every finding ``podgang plan`` reports (``code`` in ``-o json``).

A code names the kind of finding, never its wording: scripts match on it, and it stays the
same while the message is improved. ``docs/reference/plan-codes.md`` is generated from
:data:`MEANINGS` (``make reference``), where each code is defined with its meaning.
"""

from __future__ import annotations

from podgang import feasibility

#: every code: where it is reported (``denials``, ``warnings``, ``notes``, ``notChecked``), what it means
MEANINGS: dict[str, tuple[str, str]] = {}


def _code(code: str, section: str, meaning: str) -> str:
    MEANINGS[code] = (section, meaning)
    return code


DENIED = _code("denied", "denials", "the webhook would refuse a pod: the gang it would join cannot be decided as "
                                    "written (conflicting group keys, a group name that is not valid …)")
GPU_CONFLICT = _code("gpu-conflict", "denials", "a pod or pod template asks GPUs in two ways that contradict each other")
REFUSED = _code("refused", "denials", "the apiserver would refuse this PodGroup or Workload as written")

KIND_TAUGHT = _code("kind-taught", "notes", "a kind podgang has no entry for, taught by a Karta or a kinds: "
                                           "declaration in the input or --kinds: where it comes from")
SIZE_REFUSED = _code("size-refused", "warnings",
                     "a size the scheduler refuses on this group (KAI v0.18: a semi-preemptible PodGroup's minimum "
                     "never goes up): podgang keeps the size the group has, and says why")
DEFINED_TWICE = _code("defined-twice", "warnings", "the same object is in the input twice: the later one wins")
NATIVE_VERSION = _code("native-version", "warnings",
                       "a native gang object written for another API version than the one planned for")
KIND_TYPO = _code("kind-typo", "warnings",
                  "a kind one typo away from a kind podgang knows in the same API group: skipped")
KEY_TYPO = _code("key-typo", "warnings",
                 "a label or annotation key one typo away from one podgang or KAI reads: it does nothing")
SCHEDULER_TYPO = _code("scheduler-name-typo", "warnings",
                       "a schedulerName one typo away from a mapped scheduler's: its pods get no gang")
OWNER_REPLACED = _code("owner-replaced", "warnings", "an owner reference names an object of another UID: the pod is "
                                                     "admitted without a group and deleted by the garbage collector")
INVALID_NAME = _code("invalid-name", "warnings", "an object's name the apiserver refuses (not a DNS-1123 name), often "
                                                 "a template variable never expanded: it is never created, no gang")
UNKNOWN_KIND = _code("unknown-kind", "warnings", "a kind podgang does not know: its pods form a gang of 1 unless pinned")
KIND_NOT_TAUGHT = _code("kind-not-taught", "warnings",
                        "a Karta or kinds: declaration podgang cannot use (does not read, names no path, a built-in "
                        "kind, a kind declared twice), named by object and field: every other kind still works")
PIN_IGNORED = _code("pin-ignored", "warnings",
                    "a podgang.io/min-member pin that does not apply (a kind that is no gang)")
PARTLY_IN_SCOPE = _code("partly-in-scope", "warnings",
                        "only some of a workload's pod templates are in scope: its gang can never be complete")
STAGED = _code("staged", "warnings",
               "a workload whose controller makes its pods in stages: its gang counts only the stage it is in")
PODGROUP_MISSING = _code("podgroup-missing", "warnings",
                         "pods name a hand-made PodGroup that no manifest defines: they stay Pending")
GANG_PROBLEM = _code("gang-problem", "warnings", "something about a gang's size or subgroups its user should know "
                                                 "(a malformed pin, subgroups the backend cannot express …)")
SETTING_PROBLEM = _code("setting-problem", "warnings",
                        "a scheduler setting of a gang (queue, priority class …) that is ignored or malformed")
#: a never-placed verdict's code is this, ``/`` and the verdict (:func:`never_placed`)
NEVER_PLACED = "never-placed"


def never_placed(verdict: str) -> str:
    """The code of a never-placed verdict: ``never-placed/pod-too-large``."""
    return f"{NEVER_PLACED}/{verdict}"


for _verdict in feasibility.VERDICTS:
    _code(never_placed(_verdict), "warnings",
          f"the gang is never placed: `{_verdict}` ([never placed](../concepts/never-placed.md))")

NOT_IN_INPUT = _code("not-in-input", "notes", "a queue or PriorityClass gangs name is not in the input, which "
                                              "holds only some: whether it exists is not checked")
ADOPTED = _code("adopted", "notes", "a PodGroup the scheduler's own pod-grouper made (KAI's) under the name podgang "
                "gives the gang: podgang takes it over, no second group")
OPERATOR_GANG = _code("operator-gang", "notes", "the workload's operator makes its gang itself: podgang makes none")
PODGROUP_UNUSED = _code("podgroup-unused", "notes", "a PodGroup in the input that no pod or workload uses")
GANG_ADVICE = _code("gang-advice", "notes", "what a gang's user might add, not fix (podgang.io/required-roles on a "
                                            "group several workloads share)")
USERS_TREE = _code("users-tree", "notes", "a hand-made PodGroup's own subgroup tree, left as written")
FIXED_SIZE = _code("fixed-size", "notes",
                   "a backend that cannot resize a live group: a scale replaces it once no pod names it")
NATIVE_PLANNED = _code("native-planned", "notes", "which native gang API version the plan is for, and why")
KAI_PLANNED = _code("kai-planned", "notes", "which KAI-Scheduler release's rules the plan applies (GPU requests, "
                                          "semi-preemptible groups), and why; said when they matter to the plan or "
                                          "were chosen (--kai-version, --kubeconfig)")

CLUSTER_UNREAD = _code("cluster-unread", "notChecked",
                       "a --kubeconfig cluster, or one of its lists, that could not be read")
FACTS_NOT_GIVEN = _code("facts-not-given", "notChecked", "queues, PriorityClasses or nodes neither in the input nor "
                                                         "read from a cluster: the checks that need them are not made")
SCHEMAS_NOT_INSTALLED = _code("schemas-not-installed", "notChecked", "the Kubernetes API's schemas "
                              "(kubernetes-validate, the CLI's plan extra) are not installed: built-in kinds are "
                              "checked only in their counts, labels and annotations")
FACTS_PARTIAL = _code("facts-partial", "notChecked", "queues, PriorityClasses or nodes only from the input: what "
                                                     "they can tell is judged on those alone")
