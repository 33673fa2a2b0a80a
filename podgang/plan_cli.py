"""Show, with no cluster, what podgang would do with some manifests: each pod's
gang, every PodGroup with its minMember and where that number comes from, every
denial with its exact message, every warning.

Exit status: 0 nothing denied, 1 something denied, 2 unreadable input (or input the
apiserver would refuse) or a usage error. With -o yaml or -o json the denials and
warnings also go to stderr, so a pipeline that keeps stdout for the manifests still
says why it failed.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import sys
from typing import Any, Callable, Mapping, TextIO

import orjson
import yaml

from podgang import api, kinds
from podgang import plan_codes as codes
from podgang.backends import KAI, native
from podgang.discovery import kai_version_discovered
from podgang.manifests import ManifestError, read_manifests
from podgang.options import add_backend_flags, add_flag, backends_from, kai_version_settings
from podgang.plan import (Finding, Known, ScaleError, min_text, native_version_in, plan_with_scale,
                          podgroup_manifests)
from podgang.settings import Settings

OUTPUTS = ("text", "yaml", "json")
#: the fact resources whose absence from a complete input is a verdict (``--complete``)
COMPLETE = ("queues", "priorityclasses")
INT32_MAX = 2**31 - 1  # what a PodGroup's minMember (and a replica count) holds
REASON_CHARS = 200  # of a minMember's reason quoted in an error
_COUNT = re.compile(r"[0-9]+")  # ASCII digits only


def _scale(text: str) -> tuple[str, int]:
    target, sep, count = text.rpartition("=")
    count = count.strip()
    if not sep or not target or not _COUNT.fullmatch(count):
        raise argparse.ArgumentTypeError(f"{text[:80]!r}: expected KIND/NAME=N, e.g. deployment/model-1=2")
    if len(count) > 10 or int(count) > INT32_MAX:
        shown = count if len(count) <= 12 else count[:12] + "…"
        raise argparse.ArgumentTypeError(f"{target[:60]}={shown}: N must be at most {INT32_MAX}, "
                                         f"what a PodGroup's minMember holds")
    return target.strip(), int(count)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR", help="manifest files or directories ('-' for stdin)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default); yaml: the PodGroups as manifests to apply; json: the whole plan")
    parser.add_argument("--scale", action="append", type=_scale, default=[], metavar="KIND/NAME[:PART]=N",
                        help="show what minMember becomes after scaling a workload (repeatable); PART: the "
                             "replica type, Ray worker group or JobSet replicated job (a Kubeflow job's workers "
                             "by default)")
    add_backend_flags(parser)
    add_flag(parser, "--kinds", default=[], repeat=True, metavar="FILE",
             help="kinds podgang has no entry for, taught: a file of Karta objects (run.ai/v1alpha1), a "
                  "PodgangKinds declaration or a ConfigMap holding one under kinds.yaml (repeatable; the same "
                  "objects among the manifests teach too)")
    add_flag(parser, "--native-version", choices=("auto", *native.VERSIONS), default="auto",
             help="the native gang API to plan for: v1beta1 (Kubernetes 1.37), v1alpha2 (1.36), v1alpha1 (1.35's "
                  "Workloads); auto (default): what API discovery picks with --kubeconfig, else what the "
                  "manifests are written for, else v1alpha2")
    parser.add_argument("--kubeconfig", help="read this cluster's queues, PriorityClasses and nodes, for the gangs "
                                             "its scheduler would never place (nothing else is read from it); with "
                                             "--native-version auto, ask its API discovery which native version it "
                                             "serves")
    parser.add_argument("--complete", action="append", default=[], choices=COMPLETE, metavar="RESOURCE",
                        help=f"the input holds every one of these the cluster has ({', '.join(COMPLETE)}; "
                             f"repeatable): one the gangs name that is not in the input does not exist, a "
                             f"never-placed verdict (without it, and without --kubeconfig, a note)")
    add_flag(parser, "--exclude-namespace", default=["kube-system"], repeat=True,
             help="namespaces podgang leaves alone (repeatable)")
    parser.add_argument("--namespace", default="default", help="namespace of manifests that name none (default: default)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    settings = Settings(
        backends=backends_from(args),
        excluded_namespaces=tuple(args.exclude_namespace),
        **kai_version_settings(args),
    )
    kai = any(b.name == KAI.name for b in settings.enabled_backends)
    chosen = not settings.kai_version_auto
    native_note = None
    try:
        manifests = read_manifests(args.paths)
        if not manifests:
            raise ManifestError(f"{', '.join(args.paths)}: no objects (empty, or only '---' and comments)")
        taught = teach_kinds(manifests, read_manifests(list(args.kinds)) if args.kinds else [])
        if any(b.name == native.NATIVE.name for b in settings.enabled_backends):
            version, why = _native_version(args, manifests)
            settings = settings.with_changes(backends=tuple(
                (name, native.native_backend(version) if b.name == native.NATIVE.name else b)
                for name, b in settings.backends))
            native_note = Finding(codes.NATIVE_PLANNED, None, "native gangs", f"planned for {native.GROUP}/{version} "
                                  f"(Kubernetes {native.KUBERNETES[version]}): {why}")
        if kai and args.kubeconfig and settings.kai_version_auto:
            settings, chosen = asyncio.run(_kai_version(args.kubeconfig, settings)), True
        known = asyncio.run(_cluster_facts(args.kubeconfig, settings)) if args.kubeconfig else Known()
        known = dataclasses.replace(known, complete=tuple(args.complete))
        plan = plan_with_scale(manifests, dict(args.scale), settings, args.namespace, known)
        problems = out_of_bounds(plan)
    except (ManifestError, ScaleError, NativeVersionError) as exc:
        problems = str(exc).splitlines()
    if problems:
        _report(err, [f"podgang plan: {problem}" for problem in problems])
        return 2
    if native_note is not None:
        plan.notes.insert(0, native_note)
    plan.warnings[:0] = [Finding(codes.KIND_NOT_TAUGHT, None, problem.source, f"{problem.field}: {problem.message}"
                                 if problem.field else problem.message) for problem in taught.problems]
    plan.notes[:0] = [Finding(codes.KIND_TAUGHT, None, f"{d.kind}.{d.group}" if d.group else d.kind,
                              f"taught by {d.source}: {kinds.HUB[key].doc.size.partition(': ')[2]}"
                              + (f"; {kinds.HUB[key].doc.roles}" if kinds.HUB[key].doc.roles else ""))
                      for key, d in taught.declarations.items()]
    if kai and (chosen or any(f.code in KAI_RULED for f in (*plan.denials, *plan.warnings))):
        plan.notes.insert(0, Finding(codes.KAI_PLANNED, None, "KAI rules", f"KAI {settings.kai_version}'s (GPU "
                                     f"requests, semi-preemptible groups): {settings.kai_version_source}"))
    if args.output == "json":
        _write(out, lambda s: s.write(orjson.dumps(plan_as_dict(plan), option=orjson.OPT_INDENT_2).decode() + "\n"))
    elif args.output == "yaml":
        _write(out, lambda s: write_yaml(plan, settings, s))
    else:
        _write(out, lambda s: write_text(plan, s))
    if args.output != "text":  # stdout holds manifests or data: the findings go to the user on stderr
        _report(err, findings_text(plan))
    return 1 if plan.denials else 0


def teach_kinds(manifests: list[Any], extra: list[Any]) -> kinds.Taught:
    """Teach the hub the kinds the input and ``--kinds`` declare (none: the built-in ones only)."""
    return kinds.teach([(str(m.source), m.obj) for m in (*manifests, *extra) if kinds.is_declaration(m.obj)])


#: the findings that follow the KAI release's rules: the plan then says which release
KAI_RULED = (codes.GPU_CONFLICT, codes.SIZE_REFUSED)


async def _kai_version(kubeconfig: str, settings: Settings) -> Settings:
    """``settings`` with the KAI release the cluster's PodGroup CRD shows (the processes' discovery)."""
    try:
        client = await api.make_api_client(kubeconfig)
    except Exception as exc:  # an unreadable kubeconfig: said, not a traceback
        raise NativeVersionError(f"--kubeconfig {kubeconfig}: {exc}") from exc
    try:
        return await kai_version_discovered(api.Api(client, timeout=10), settings)
    finally:
        await client.close()


class NativeVersionError(ValueError):
    """--native-version auto could not ask the cluster it was given."""


async def _cluster_facts(kubeconfig: str, settings: Settings) -> Known:
    """The enabled backends' fact objects (queues, PriorityClasses, nodes) of the cluster, by label;
    a kind that cannot be read in one page is not known (no verdict is drawn from it), and why is kept."""
    try:
        client = await api.make_api_client(kubeconfig)
    except Exception as exc:  # an unreadable kubeconfig: said, not a traceback
        raise NativeVersionError(f"--kubeconfig {kubeconfig}: {exc}") from exc
    found: dict[str, list[dict[str, Any]]] = {}
    unread: dict[str, str] = {}
    try:
        reader = api.Api(client, timeout=10)
        for resource in dict.fromkeys(r for b in settings.enabled_backends for r in b.fact_resources):
            try:
                page = await reader.get(resource.path(), limit=FACTS_PAGE)
            except api.ApiError as exc:
                unread[resource.label] = str(exc)
                continue
            if (page.get("metadata") or {}).get("continue"):
                unread[resource.label] = f"more than {FACTS_PAGE} of them"
                continue
            found[resource.label] = [i for i in page.get("items") or [] if isinstance(i, dict)]
    finally:
        await client.close()
    return Known(found, unread, f"--kubeconfig {kubeconfig}")


#: the most fact objects of one kind read from a cluster (more: that kind is not known)
FACTS_PAGE = 5000


def _native_version(args: argparse.Namespace, manifests) -> tuple[str, str]:
    """The native API version to plan for, and why."""
    if args.native_version != "auto":
        return args.native_version, "--native-version"
    if args.kubeconfig:
        return asyncio.run(_discovered_version(args.kubeconfig))
    found = native_version_in(manifests)
    if found is not None:
        return found[0], f"{found[1]} is written for it (--native-version to plan for another)"
    return native.V1ALPHA2, "the default (--native-version, or --kubeconfig to ask a cluster)"


async def _discovered_version(kubeconfig: str) -> tuple[str, str]:
    try:
        client = await api.make_api_client(kubeconfig)
    except Exception as exc:  # an unreadable kubeconfig: said, not a traceback
        raise NativeVersionError(f"--kubeconfig {kubeconfig}: {exc}") from exc
    try:
        document = await api.Api(client, timeout=10).get(native.DISCOVERY_PATH)
        return native.native_version(document), f"API discovery ({native.DISCOVERY_PATH}) of {kubeconfig}"
    except (api.ApiError, ValueError) as exc:
        raise NativeVersionError(f"cannot tell which native gang API the cluster serves: {exc}") from exc
    finally:
        await client.close()


def _write(stream: TextIO, write: Callable[[TextIO], None]) -> None:
    """Write and flush; a reader that went away (``| head``) ends the output quietly,
    as Unix tools do, and the exit status stays the plan's."""
    try:
        write(stream)
        stream.flush()
    except BrokenPipeError:
        # later writes and the interpreter's last flush go to /dev/null instead of raising again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):  # not a file: nothing is flushed at exit
            pass


def _report(stream: TextIO, lines: list[str]) -> None:
    _write(stream, lambda s: s.writelines(line + "\n" for line in lines))


def out_of_bounds(plan) -> list[str]:
    """The planned PodGroups whose minMember no PodGroup can hold (int32, never negative)."""
    problems = []
    for key in sorted(plan.groups):
        group = plan.groups[key]
        where = f"PodGroup {group.namespace}/{group.name}"
        written = group.cluster_min_member
        if written is not None and not 0 <= written <= INT32_MAX:
            problems.append(f"{group.defined_at}: {where}: the apiserver refuses this object: spec.minMember "
                            f"{written} is outside 0 to {INT32_MAX}")
        elif not 0 <= group.min_member.value <= INT32_MAX:
            reason = group.min_member.reason
            reason = reason if len(reason) <= REASON_CHARS else reason[:REASON_CHARS] + "…"
            source = group.defined_at or next((m.source for m in plan.members
                                               if (m.namespace, m.group) == (group.namespace, group.name)), None)
            at = f"{source}: " if source else ""
            problems.append(f"{at}{where}: minMember {group.min_member.value} ({reason}) is outside "
                            f"what a PodGroup holds (0 to {INT32_MAX})")
    return problems


def findings_text(plan) -> list[str]:
    """Every denial and warning, one line each, and the verdict: for stderr."""
    lines = []
    for title, findings in (("denied", plan.denials), ("warning", plan.warnings), ("not checked", plan.not_checked)):
        for f in findings:
            where = f"{f.source} " if f.source else ""
            lines.append(f"podgang plan: {title}: {where}{f.what}: {f.message}")
    lines.append(f"podgang plan: {_verdict(plan)}")
    return lines


def _verdict(plan) -> str:
    denied = "nothing denied" if not plan.denials else f"{len(plan.denials)} denied"
    return f"{denied}, {len(plan.warnings)} warning{'s' if len(plan.warnings) != 1 else ''}"


# ---------------------------------------------------------------------------
# output


def write_text(plan, out: TextIO) -> None:
    if plan.scaled:
        out.write("After scaling " + "; ".join(plan.scaled) + "\n\n")
    files: dict[str, list] = {}
    for member in plan.members:
        files.setdefault(member.source.file, []).append(member)
    for file, members in files.items():
        out.write(f"{file}\n")
        width = max(len(m.what) for m in members)
        for m in members:
            size = f" ({m.pods} pod{'s' if m.pods != 1 else ''})" if not m.what.startswith("pod ") else ""
            if m.skipped:
                out.write(f"  {m.what.ljust(width)}  skipped: {m.skipped}\n")
            elif m.no_group:
                out.write(f"  {m.what.ljust(width)}  no group: {m.no_group}\n")
            elif m.group is None:
                out.write(f"  {m.what.ljust(width)}  denied (see below)\n")
            else:
                out.write(f"  {m.what.ljust(width)}  → {m.group}{size}   [{m.why}]\n")
        out.write("\n")

    groups = [plan.groups[k] for k in sorted(plan.groups)]
    out.write(f"PodGroups ({len(groups)})\n")
    if groups:
        name_w = max(len(f"{g.namespace}/{g.name}") for g in groups)
        min_w = max(len(min_text(g)) for g in groups)
        for g in groups:
            origin = _origin_text(g, {x.backend.name for x in groups if x.backend is not None})
            out.write(f"  {f'{g.namespace}/{g.name}'.ljust(name_w)}  {min_text(g).ljust(min_w)}  "
                      f"{g.min_member.reason}   [{origin}]\n")
            for line in tree_lines(g.subgroups):
                out.write(f"    {line}\n")
            if g.users_tree:
                out.write("    subgroups as written by its user: podgang changes none of them\n")
            for setting, value, where in _settings(g.options):
                if isinstance(value, Mapping):
                    value = placement_text(value)
                elif isinstance(value, bool):  # as it is written in YAML
                    value = str(value).lower()
                out.write(f"    {setting} {value}" + (f"  [{where}]" if where else "") + "\n")
    out.write("\n")
    for title, findings in (("Denied", plan.denials), ("Warnings", plan.warnings), ("Notes", plan.notes),
                            ("Not checked", plan.not_checked)):
        if title in ("Notes", "Not checked") and not findings:
            continue
        out.write(f"{title} ({len(findings)})\n")
        for f in findings:
            where = f"{f.source} " if f.source else ""
            out.write(f"  {where}{f.what}\n    {f.message}\n")
        out.write("\n")
    out.write(f"{len(plan.members)} pods/workloads, {len(groups)} PodGroups, {_verdict(plan)}\n")


def _settings(options) -> list[tuple[str, Any, str]]:
    """The scheduler's settings of a gang to show, (field, value, where it comes from): every
    one with an origin, and the queue and priority class of any backend."""
    own = {"queue": options.get("queue"), "priorityClassName": options.get("priority_class")}
    out = [(setting, own.get(setting, (options.get("extra_spec") or {}).get(setting)), where)
           for setting, where in options.get("origins") or ()]
    said = {setting for setting, _, _ in out}
    return out + [(setting, value, "") for setting, value in own.items() if value and setting not in said]


def tree_lines(subgroups) -> list[str]:
    """A gang's subgroups drawn as a tree: each part, its replicas under it, each minimum
    and where it comes from."""
    children: dict[str | None, list] = {}
    for s in subgroups:
        children.setdefault(s.parent, []).append(s)
    width = max((len(s.name) + (2 if s.parent else 0) for s in subgroups), default=0)
    lines: list[str] = []

    def draw(parent, prefix: str) -> None:
        nodes = children.get(parent, [])
        for i, s in enumerate(nodes):
            last = i == len(nodes) - 1
            label = f"{prefix}{'└' if last else '├'} {s.name}"
            need = (f"{s.min_member} of {len(children.get(s.name, []))} {s.counts}"
                    if s.of_subgroups else f"minimum {s.min_member}")
            placed = f"  topology {placement_text(s.topology)}" if s.topology else ""
            lines.append(f"{label.ljust(width + len(prefix) + 2)}  {need}{placed}  [{s.reason}]")
            if s.of_subgroups:
                draw(s.name, prefix + ("  " if last else "│ "))

    draw(None, "")
    return lines


def placement_text(value: Any) -> str:
    """A placement constraint as ``field=value, …`` (a topology constraint, say)."""
    pairs = value.items() if isinstance(value, Mapping) else value
    return ", ".join(f"{k}={v}" for k, v in pairs)


def _origin_text(g, backends: set[str]) -> str:
    """How the group comes to be; with several backends in the plan, whose it is."""
    text = _origin(g)
    return f"{g.backend.name}: {text}" if len(backends) > 1 and g.backend is not None else text


def _origin(g) -> str:
    if g.origin == "hand-made":
        if not g.exists:
            return "hand-made, NOT DEFINED in these manifests"
        text = f"hand-made, defined at {g.defined_at}"
        if g.users_tree:
            text += "; its subgroup tree as written: podgang changes none of its fields"
        elif g.min_subgroup is not None:
            text += "; the grouper writes its subgroup tree (minSubGroup, no minMember) and stalenessGracePeriod -1s"
        elif g.cluster_min_member is not None and g.cluster_min_member != g.min_member.value:
            text += f"; written as minMember {g.cluster_min_member}, the grouper sets {g.min_member.value}"
        return text
    if g.adopted:
        return f"made by {g.adopted} for {g.owner_text}, taken over by the grouper"
    if g.origin == "owner-less":
        return f"created by the webhook for {g.owner_text}"
    if g.per_run:
        return f"created by the grouper for {g.owner_text}"
    return f"created by the grouper, owned by {g.owner_text}"


def plan_as_dict(plan) -> dict[str, Any]:
    def finding(f):
        return {"code": f.code, "source": str(f.source) if f.source else None, "object": f.what,
                "message": f.message}

    return {
        "scaled": plan.scaled,
        "members": [
            {"source": str(m.source), "object": m.what, "namespace": m.namespace, "group": m.group,
             "reason": m.why, "pods": m.pods, "skipped": m.skipped, "noGroup": m.no_group,
             **({"subgroup": m.subgroup} if m.subgroup else {})}
            for m in plan.members
        ],
        "podGroups": [
            {"namespace": g.namespace, "name": g.name, "nameKnown": g.name_known, "minMember": g.min_member.value,
             "minMemberBefore": g.before.value if g.before else None, "reason": g.min_member.reason,
             "pinned": g.min_member.pinned, "origin": g.origin, "exists": g.exists,
             "definedAt": str(g.defined_at) if g.defined_at else None, "owner": g.owner_text or None,
             "adoptedFrom": g.adopted,
             "backend": g.backend.name if g.backend is not None else None,
             "queue": g.options.get("queue"), "priorityClassName": g.options.get("priority_class"),
             "settings": [{"field": setting, "value": value, "from": where or None}
                          for setting, value, where in _settings(g.options)],
             "minSubGroup": g.min_subgroup,
             "subgroups": [{"name": s.name, **({"parent": s.parent} if s.parent else {}),
                            ("minSubGroup" if s.of_subgroups else "minMember"): s.min_member, "reason": s.reason,
                            **({"topology": dict(s.topology)} if s.topology else {})}
                           for s in g.subgroups]}
            for g in (plan.groups[k] for k in sorted(plan.groups))
        ],
        "denials": [finding(f) for f in plan.denials],
        "warnings": [finding(f) for f in plan.warnings],
        "notes": [finding(f) for f in plan.notes],
        "notChecked": [finding(f) for f in plan.not_checked],
    }


def write_yaml(plan, settings, out: TextIO) -> None:
    docs, comments = podgroup_manifests(plan, settings)
    out.write("# PodGroups planned by podgang\n")
    for comment in comments:
        out.write(f"# {comment}\n")
    for doc in docs:
        out.write("---\n")
        out.write(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
