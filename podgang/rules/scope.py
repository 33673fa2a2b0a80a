"""Which pods podgang looks at at all: scheduler, namespace, ``podgang.io/skip``, and not
those whose operator gangs them itself (Grove's).
"""

from __future__ import annotations

from typing import Any, Sequence

from podgang.kinds import gang_maker, pod_templates
from podgang.objects import annotations, kind_name, labels, metadata
from podgang.objects import as_dict as _dict
from podgang.objects import quoted as _q
from podgang.settings import DEFAULT, DEFAULT_SCHEDULER, Settings


def is_skipped(obj: Any, settings: Settings = DEFAULT) -> bool:
    """Labelled ``podgang.io/skip=true``: podgang leaves it alone."""
    return labels(obj).get(settings.skip_label, "").lower() == "true"


def scope_problem(pod: Any, namespace: str | None = None, settings: Settings = DEFAULT,
                  owners: Sequence[Any] = ()) -> str | None:
    """Why podgang leaves this pod alone, or None when it is in scope.

    ``owners``: the pod's owner objects looked up so far; one labelled
    ``podgang.io/skip=true`` (spec §1: a pod *or workload* label) puts the pod out of
    scope too. The webhook's mutate and validate and ``podgang plan`` all ask here."""
    backend = settings.backend_for(pod)
    if backend is None:
        scheduler = _dict(_dict(pod).get("spec")).get("schedulerName") or DEFAULT_SCHEDULER
        return f"schedulerName {_q(scheduler)} is not one of {', '.join(settings.scheduler_names)}"
    ns = namespace or metadata(pod).get("namespace") or ""
    if ns in settings.excluded_namespaces:
        return f"namespace {_q(ns)} is excluded"
    if is_skipped(pod, settings):
        return f"labelled {settings.skip_label}=true"
    opted = backend.opted_out(pod, True)
    if opted is not None:  # the user told the scheduler's own grouper to leave it: podgang stands in for it
        return f"{opted}: its scheduler's grouping is turned off for it"
    made = gang_maker(pod)
    if made is not None:  # a gang of podgang's would take the pod from the one that places it
        return f"{made}: podgang leaves it alone"
    return owner_skip_problem(owners, settings, backend)


def owner_skip_problem(owners: Sequence[Any], settings: Settings = DEFAULT, backend: Any = None) -> str | None:
    """The part of :func:`scope_problem` that needs the pod's owners: one labelled
    ``podgang.io/skip=true``, or one that tells the pod's scheduler's own grouping to leave it
    (``Backend.opted_out``; any enabled backend's when ``backend`` is not known), puts the pod
    out of scope."""
    for owner in owners:
        if is_skipped(owner, settings):
            return f"{kind_name(owner)} is labelled {settings.skip_label}=true"
        for judge in (backend,) if backend is not None else settings.enabled_backends:
            opted = judge.opted_out(owner, False)
            if opted is not None:
                return f"{kind_name(owner)} is {opted}: its scheduler's grouping is turned off for it"
    return None


def workload_skip_problem(workload: Any, settings: Settings = DEFAULT) -> str | None:
    """Why podgang leaves a workload's pods alone for the workload's own labels and
    annotations (``podgang.io/skip``, or the scheduler's own opt-out), or None."""
    return owner_skip_problem((workload,), settings, workload_backend(workload, settings))


def workload_backend(workload: Any, settings: Settings = DEFAULT) -> Any:
    """The backend of the pods a workload makes: its first pod template with a mapped scheduler's."""
    for _, template in pod_templates(workload):
        backend = settings.backend_for(template)
        if backend is not None:
            return backend
    return None


def partial_scope_problem(workload: Any, namespace: str | None = None, settings: Settings = DEFAULT) -> str | None:
    """Why a workload whose pod templates are only partly in scope (an LWS whose leader
    names the gang scheduler and whose workers do not) can never have a complete gang,
    or None: its gang counts every pod, but only some of them ever join it."""
    templates = pod_templates(workload)
    problems = [scope_problem(t, namespace or metadata(workload).get("namespace"), settings) for _, t in templates]
    if not any(problems) or all(problems):
        return None
    inside = [path for (path, _), problem in zip(templates, problems) if not problem]
    outside = [path for (path, _), problem in zip(templates, problems) if problem]
    return (f"{kind_name(workload)}: only some of its pod templates are in scope ({', '.join(inside)}; not "
            f"{', '.join(outside)}: {next(p for p in problems if p)}): its gang can never be complete — give every "
            f"template the same schedulerName")


def in_scope(pod: Any, namespace: str | None = None, settings: Settings = DEFAULT) -> bool:
    return scope_problem(pod, namespace, settings) is None
