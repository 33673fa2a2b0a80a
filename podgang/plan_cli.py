"""Show, with no cluster, what podgang would do with some manifests: each pod's
gang, every PodGroup with its minMember and where that number comes from, every
denial with its exact message, every warning.

Exit status: 0 nothing denied, 1 something denied, 2 unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from podgang.options import add_flag
from podgang.settings import DEFAULT

OUTPUTS = ("text", "yaml", "json")


def _scale(text: str) -> tuple[str, int]:
    target, sep, count = text.rpartition("=")
    if not sep or not target or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KIND/NAME=N, e.g. deployment/model-1=2")
    return target.strip(), int(count)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR", help="manifest files or directories ('-' for stdin)")
    parser.add_argument("-o", "--output", choices=OUTPUTS, default="text",
                        help="text (default); yaml: the PodGroups as manifests to apply; json: the whole plan")
    parser.add_argument("--scale", action="append", type=_scale, default=[], metavar="KIND/NAME=N",
                        help="show what minMember becomes after scaling a workload (repeatable)")
    add_flag(parser, "--scheduler-name", default=list(DEFAULT.scheduler_names), repeat=True,
             help="pods with this spec.schedulerName are in scope (repeatable)")
    add_flag(parser, "--exclude-namespace", default=["kube-system"], repeat=True,
             help="namespaces podgang leaves alone (repeatable)")
    parser.add_argument("--namespace", default="default", help="namespace of manifests that name none (default: default)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from podgang.manifests import ManifestError, read_manifests
    from podgang.plan import ScaleError, plan_with_scale
    from podgang.settings import Settings

    out = out or sys.stdout
    err = err or sys.stderr
    settings = Settings(
        scheduler_names=tuple(args.scheduler_name),
        excluded_namespaces=tuple(args.exclude_namespace),
    )
    try:
        manifests = read_manifests(args.paths)
        plan = plan_with_scale(manifests, dict(args.scale), settings, args.namespace)
    except (ManifestError, ScaleError) as exc:
        print(f"podgang plan: {exc}", file=err)
        return 2
    if args.output == "json":
        import orjson

        out.write(orjson.dumps(plan_as_dict(plan), option=orjson.OPT_INDENT_2).decode() + "\n")
    elif args.output == "yaml":
        write_yaml(plan, settings, out)
    else:
        write_text(plan, out)
    return 1 if plan.denials else 0


# ---------------------------------------------------------------------------
# output


def _min_text(group) -> str:
    value = group.min_member.value
    if group.before is not None and group.before.value != value:
        return f"minMember {group.before.value} → {value}"
    return f"minMember {value}"


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
            elif m.group is None:
                out.write(f"  {m.what.ljust(width)}  denied (see below)\n")
            else:
                out.write(f"  {m.what.ljust(width)}  → {m.group}{size}   [{m.why}]\n")
        out.write("\n")

    groups = [plan.groups[k] for k in sorted(plan.groups)]
    out.write(f"PodGroups ({len(groups)})\n")
    if groups:
        name_w = max(len(f"{g.namespace}/{g.name}") for g in groups)
        min_w = max(len(_min_text(g)) for g in groups)
        for g in groups:
            origin = _origin_text(g)
            out.write(f"  {f'{g.namespace}/{g.name}'.ljust(name_w)}  {_min_text(g).ljust(min_w)}  "
                      f"{g.min_member.reason}   [{origin}]\n")
    out.write("\n")
    for title, findings in (("Denied", plan.denials), ("Warnings", plan.warnings), ("Notes", plan.notes)):
        if title == "Notes" and not findings:
            continue
        out.write(f"{title} ({len(findings)})\n")
        for f in findings:
            where = f"{f.source} " if f.source else ""
            out.write(f"  {where}{f.what}\n    {f.message}\n")
        out.write("\n")
    verdict = "nothing denied" if not plan.denials else f"{len(plan.denials)} denied"
    out.write(f"{len(plan.members)} pods/workloads, {len(groups)} PodGroups, {verdict}, "
              f"{len(plan.warnings)} warning{'s' if len(plan.warnings) != 1 else ''}\n")


def _origin_text(g) -> str:
    if g.origin == "hand-made":
        if not g.exists:
            return "hand-made, NOT DEFINED in these manifests"
        text = f"hand-made, defined at {g.defined_at}"
        if g.cluster_min_member is not None and g.cluster_min_member != g.min_member.value:
            text += f"; written as minMember {g.cluster_min_member}, the grouper sets {g.min_member.value}"
        return text
    if g.origin == "owner-less":
        return f"created by the webhook for {g.owner_text}"
    if g.per_run:
        return f"created by the grouper for {g.owner_text}"
    return f"created by the grouper, owned by {g.owner_text}"


def plan_as_dict(plan) -> dict[str, Any]:
    def finding(f):
        return {"source": str(f.source) if f.source else None, "object": f.what, "message": f.message}

    return {
        "scaled": plan.scaled,
        "members": [
            {"source": str(m.source), "object": m.what, "namespace": m.namespace, "group": m.group,
             "reason": m.why, "pods": m.pods, "skipped": m.skipped}
            for m in plan.members
        ],
        "podGroups": [
            {"namespace": g.namespace, "name": g.name, "nameKnown": g.name_known, "minMember": g.min_member.value,
             "minMemberBefore": g.before.value if g.before else None, "reason": g.min_member.reason,
             "pinned": g.min_member.pinned, "origin": g.origin, "exists": g.exists,
             "definedAt": str(g.defined_at) if g.defined_at else None, "owner": g.owner_text or None}
            for g in (plan.groups[k] for k in sorted(plan.groups))
        ],
        "denials": [finding(f) for f in plan.denials],
        "warnings": [finding(f) for f in plan.warnings],
        "notes": [finding(f) for f in plan.notes],
    }


def write_yaml(plan, settings, out: TextIO) -> None:
    import yaml

    from podgang.plan import podgroup_manifests

    docs, comments = podgroup_manifests(plan, settings)
    out.write("# PodGroups planned by podgang\n")
    for comment in comments:
        out.write(f"# {comment}\n")
    for doc in docs:
        out.write("---\n")
        out.write(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False))
