"""Command-line flags that also read ``PODGANG_*`` environment variables.

Every flag ``--some-flag`` can be given as ``PODGANG_SOME_FLAG`` instead; a flag on
the command line wins over the environment, the environment over the built-in
default. Repeatable flags take a comma-separated list from the environment.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Callable

from podgang.backends import BACKENDS, Backend
from podgang.backends.kai import keys as kai_keys
from podgang.backends.kai import versions as kai_versions
from podgang.quantities import quantity
from podgang.rules import parse_duration
from podgang.settings import DEFAULT


def env_name(flag: str) -> str:
    """``--scheduler-name`` -> ``PODGANG_SCHEDULER_NAME``."""
    return "PODGANG_" + flag.lstrip("-").replace("-", "_").upper()


class _AppendReplacingDefault(argparse.Action):
    """``append`` whose first use on the command line replaces the default list."""

    def __call__(self, parser, namespace, values, option_string=None):
        current = getattr(namespace, self.dest, None)
        if current is None or current is self.default:
            current = []
        setattr(namespace, self.dest, [*current, values])


def _truthy(text: str) -> bool:
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_flag(
    parser: argparse.ArgumentParser,
    flag: str,
    *,
    default: Any = None,
    type: Callable[[str], Any] = str,
    repeat: bool = False,
    switch: bool = False,
    help: str = "",
    **kwargs: Any,
) -> None:
    """Add ``flag`` to ``parser`` with its default taken from ``PODGANG_*`` if set.

    ``repeat``: may be given several times (a list). ``switch``: a boolean flag;
    ``--no-<flag>`` turns it off again.
    """
    env = env_name(flag)
    raw = os.environ.get(env)
    if raw is not None:
        try:
            if switch:
                default = _truthy(raw)
            elif repeat:
                default = [type(item.strip()) for item in raw.split(",") if item.strip()]
            else:
                default = type(raw)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise SystemExit(f"podgang: environment variable {env}={raw!r} is invalid: {exc}")
    shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
    suffix = f"[env {env}; default: {shown}]" if shown not in (None, "") else f"[env {env}]"
    text = f"{help} {suffix}" if help else suffix
    if switch:
        parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=bool(default), help=text, **kwargs)
    elif repeat:
        parser.add_argument(
            flag, action=_AppendReplacingDefault, type=type, default=list(default or []), help=text, **kwargs
        )
    else:
        parser.add_argument(flag, type=type, default=default, help=text, **kwargs)


# --- value types and defaults shared by the sub-commands

SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def duration(text: str) -> float:
    """An argparse type: ``90s``, ``5m``, ``1h30m``, ``500ms`` or plain seconds."""
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate(text: str) -> float:
    """An argparse type: calls a second, 0 or more (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected calls a second, e.g. 50, not {text[:40]!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"calls a second must be 0 (no limit) or more, not {text[:40]!r}")
    return value


def positive(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected 1 or more, not {value}")
    return value


def byte_size(text: str) -> int:
    """An argparse type: bytes, as a Kubernetes quantity (``32Mi``, ``50M``) or a number."""
    value = quantity(text)
    if value is None or value < 0 or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"expected bytes, e.g. 32Mi, not {text[:40]!r}")
    return int(value)


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 meaning "any" or "off" as the flag says."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is outside 0-65535")
    return value


def own_namespace() -> str | None:
    """The namespace podgang runs in: ``POD_NAMESPACE``, else the service account's."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


# --- which scheduler names are in scope, and the backend of each

KAI_BY_NAME = "kai"  # what --scheduler-name NAME means: NAME=kai


def scheduler_backend(text: str) -> tuple[str, str]:
    """An argparse type: ``SCHEDULER=BACKEND`` with a backend podgang knows."""
    scheduler, sep, backend = (part.strip() for part in text.partition("="))
    if not sep or not scheduler or not backend:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: expected SCHEDULER=BACKEND, e.g. volcano=volcano")
    if backend not in BACKENDS:
        raise argparse.ArgumentTypeError(
            f"unknown backend {backend[:40]!r} in {text[:80]!r}: expected one of {', '.join(sorted(BACKENDS))}")
    return scheduler, backend


def add_kinds_flags(parser: Any) -> None:
    """``--kinds FILE`` and ``--karta``: the kinds a process is taught at its start."""
    add_flag(parser, "--kinds", repeat=True, default=[], dest="kinds_files", metavar="FILE",
             help="kinds podgang has no entry for, taught at start: a file (or directory) of podgang's kinds: "
                  "declarations (a PodgangKinds document or a ConfigMap holding one under kinds.yaml; the chart "
                  "mounts its kinds ConfigMap here) or Karta objects (repeatable)")
    add_flag(parser, "--karta", switch=True, default=True,
             help="also read the cluster's run.ai/v1alpha1 Kartas at start, as KAI's pod-grouper falls back to them "
                  "(none when their CRD is not installed); --no-karta: only --kinds")


def add_backend_flags(parser: Any) -> None:
    """``--backend SCHEDULER=BACKEND`` and its older form ``--scheduler-name NAME`` (``NAME=kai``)."""
    default = ",".join(f"{name}={backend.name}" for name, backend in DEFAULT.backends)
    add_flag(parser, "--backend", type=scheduler_backend, repeat=True, default=[], dest="backends",
             metavar="SCHEDULER=BACKEND",
             help=f"pods with spec.schedulerName SCHEDULER are in scope and their gangs are BACKEND's "
                  f"PodGroups (repeatable; backends: {', '.join(sorted(BACKENDS))}; "
                  f"without this flag and --scheduler-name: {default})")
    add_flag(parser, "--scheduler-name", repeat=True, default=[], dest="scheduler_names", metavar="NAME",
             help=f"the same as --backend NAME={KAI_BY_NAME} (repeatable)")
    add_flag(parser, "--default-queue", default=kai_keys.DEFAULT_QUEUE, metavar="QUEUE",
             help=kai_keys.DEFAULT_QUEUE_HELP)
    add_flag(parser, "--default-priority-class", type=kind_priority, repeat=True, default=[],
             dest="default_priority_classes", metavar="KIND=CLASS",
             help=kai_keys.DEFAULT_PRIORITY_HELP)
    add_flag(parser, "--default-preemptibility", type=kind_preemptibility, repeat=True, default=[],
             dest="default_preemptibility", metavar="KIND=VALUE", help=kai_keys.DEFAULT_PREEMPTIBILITY_HELP)
    add_flag(parser, "--kai-version", type=kai_version, default=kai_versions.AUTO, metavar="VERSION",
             help=kai_versions.VERSION_HELP)


def kai_version(text: str) -> str:
    """An argparse type: ``v0.17``, ``v0.18`` (``0.18.3`` is v0.18) or ``auto``."""
    try:
        return kai_versions.parse_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def kai_version_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields ``--kai-version`` gives: a version, or ``auto`` (the default until
    the cluster is asked)."""
    if args.kai_version == kai_versions.AUTO:
        return {}
    return {"kai_version": args.kai_version, "kai_version_auto": False, "kai_version_source": "--kai-version"}


def kind_priority(text: str) -> tuple[str, str]:
    """An argparse type: ``KIND[.GROUP]=CLASS`` (``Deployment=inference``, ``TrainJob.trainer.kubeflow.org=train``)."""
    kind, sep, name = (part.strip() for part in text.partition("="))
    if not sep or not kind or not name:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: expected KIND[.GROUP]=PRIORITYCLASS, e.g. "
                                         f"Deployment=inference")
    return kind, name


def kind_preemptibility(text: str) -> tuple[str, str]:
    """An argparse type: ``KIND[.GROUP]=preemptible|non-preemptible``."""
    kind, sep, value = (part.strip() for part in text.partition("="))
    if not sep or not kind or value not in kai_keys.PREEMPTIBILITY_VALUES:
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: expected KIND[.GROUP]="
                                         f"{'|'.join(kai_keys.PREEMPTIBILITY_VALUES)}, e.g. Job=preemptible")
    return kind, value


def backends_from(args: argparse.Namespace) -> tuple[tuple[str, Backend], ...]:
    """The scheduler name -> backend map the flags give, in order; a name given twice
    keeps its first backend. Neither flag: the default (kai-scheduler=kai)."""
    pairs = [*args.backends, *((name, KAI_BY_NAME) for name in args.scheduler_names)]
    options = vars(args)
    if not pairs:
        return tuple((name, backend.configured(options)) for name, backend in DEFAULT.backends)
    chosen: dict[str, Backend] = {}
    for scheduler, backend in pairs:
        chosen.setdefault(scheduler, BACKENDS[backend].configured(options))
    return tuple(chosen.items())
