"""The corpus: manifests in the shapes the peer projects' own examples use, each planned
through ``podgang plan`` (the webhook's admission rules and the grouper's
``desired_group``) with the scheduler its ecosystem documents, against the verdict the
kind's own gang semantics give.

A case is ``tests/corpus/<ecosystem>/<name>.yaml`` (the manifests) with
``<name>.expect`` beside it (YAML): every gang by name (backend, minMember, subgroups,
queue, priority, members), every member that gets no gang with a word of why, and the
findings as words each must contain. Everything a case does not expect is an error: a
gang more, a warning more, a member unaccounted for. ``tests/corpus/ecosystems.yaml``
maps each ecosystem to the ``--backend`` its documents use. Layout and format:
``tests/corpus/README.md``.
"""

from __future__ import annotations

import argparse
import io
import itertools
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from podgang import plan_cli
from tests.paths import TESTS

CORPUS = TESTS / "corpus"
ECOSYSTEMS: dict[str, Any] = yaml.safe_load((CORPUS / "ecosystems.yaml").read_text())
CASES = sorted(CORPUS.glob("*/*.yaml"))
#: what no output may ever show: the stand-in for a UID the cluster has not assigned yet
PLACEHOLDER = re.compile(r"x0uid0x|Traceback")
GANG_FIELDS = {"minSubGroup", "backend", "minMember", "subgroups", "queue", "priority", "members", "origin", "reason"}
CASE_FIELDS = {"why", "backends", "scale", "gangs", "no_gang", "denied", "warnings", "notes"}


def run_plan(case: Path, extra: list[str], output: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    plan_cli.add_arguments(parser)
    args = parser.parse_args([str(case), "-o", output, *extra])
    out, err = io.StringIO(), io.StringIO()
    code = plan_cli.run(args, out, err)
    return code, out.getvalue(), err.getvalue()


def flags(case: Path, expect: dict[str, Any]) -> list[str]:
    eco = ECOSYSTEMS[case.parent.name]
    backends = expect.get("backends", eco["backends"])
    out = [arg for pair in backends for arg in ("--backend", pair)]
    for target in expect.get("scale") or ():
        out += ["--scale", target]
    return out


def expected(case: Path) -> dict[str, Any]:
    expect = yaml.safe_load(case.with_suffix(".expect").read_text()) or {}
    unknown = set(expect) - CASE_FIELDS
    assert not unknown, f"{case}: unknown keys {unknown}"
    return expect


def words_match(found: list[str], wanted: list[str], what: str) -> list[str]:
    """Each wanted finding is the one found message that holds all its words; none more, none less."""
    problems, left = [], list(found)
    for words in wanted:
        parts = [words] if isinstance(words, str) else list(words)
        hit = next((m for m in left if all(p.lower() in m.lower() for p in parts)), None)
        if hit is None:
            problems.append(f"{what}: none says {parts!r}")
        else:
            left.remove(hit)
    problems += [f"{what}: unexpected {m!r}" for m in left]
    return problems


def members_of(plan: dict[str, Any], gang: str) -> set[str]:
    return {m["object"] for m in plan["members"] if m["group"] and gang in m["group"].split(", ")}


def check(plan: dict[str, Any], expect: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    gangs = {f"{g['namespace']}/{g['name']}": g for g in plan["podGroups"]}
    wanted = expect.get("gangs") or {}
    for name in sorted(set(gangs) ^ set(wanted)):
        problems.append(f"gang {name}: {'unexpected' if name in gangs else 'missing'}")
    grouped: set[str] = set()
    for name, want in wanted.items():
        assert not set(want) - GANG_FIELDS, f"gang {name}: unknown keys {set(want) - GANG_FIELDS}"
        got = gangs.get(name)
        if got is None:
            continue
        members = members_of(plan, got["name"])
        grouped |= members
        actual = {"backend": got["backend"], "minMember": got["minMember"], "origin": got["origin"],
                  # a leaf's pods, or a parent's complete children (a tree: complete replicas)
                  "subgroups": {s["name"]: s["minMember"] if "minMember" in s else f"{s['minSubGroup']} complete"
                                for s in got["subgroups"]},
                  "minSubGroup": got.get("minSubGroup"),
                  "queue": got.get("queue"), "priority": got.get("priorityClassName"), "members": sorted(members)}
        want = {"subgroups": {}, "minSubGroup": None, **want}
        if "members" in want:
            want["members"] = sorted(want["members"])
        if "reason" in want and str(want.pop("reason")).lower() not in got["reason"].lower():
            problems.append(f"gang {name}: minMember {got['minMember']} because {got['reason']!r}, expected it "
                            f"to say so")
        for key, value in want.items():
            if actual[key] != value:
                problems.append(f"gang {name}: {key} is {actual[key]!r}, expected {value!r}")
    no_gang = expect.get("no_gang") or {}
    for m in plan["members"]:
        why = m["skipped"] or m["noGroup"]
        if m["object"] in no_gang:
            if m["group"] or not why:
                problems.append(f"{m['object']}: expected no gang, got {m['group']!r}")
            elif str(no_gang[m["object"]]).lower() not in why.lower():
                problems.append(f"{m['object']}: no gang because {why!r}, expected it to say {no_gang[m['object']]!r}")
        elif m["object"] not in grouped and m["group"] is not None:
            problems.append(f"{m['object']}: joins {m['group']!r}, which the case does not expect")
        elif m["object"] not in grouped:
            problems.append(f"{m['object']}: {why or 'denied'}, which the case does not expect")
    for missing in set(no_gang) - {m["object"] for m in plan["members"]}:
        problems.append(f"{missing}: not in the plan")
    def said(findings):  # what a finding is about and what it says
        return [f"{f['object']}: {f['message']}" for f in findings]

    problems += words_match(said(plan["denials"]), expect.get("denied") or [], "denied")
    problems += words_match(said(plan["warnings"]), expect.get("warnings") or [], "warnings")
    notes = said(plan["notes"])
    for words in expect.get("notes") or ():
        parts = [words] if isinstance(words, str) else list(words)
        if not any(all(p.lower() in n.lower() for p in parts) for n in notes):
            problems.append(f"notes: none says {parts!r}")
    return problems


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_corpus_case_plans_what_its_kinds_gang_semantics_say(case):
    expect = expected(case)
    args = flags(case, expect)
    code, out, err = run_plan(case, args, "json")
    assert code in (0, 1), err
    plan = orjson.loads(out)
    problems = check(plan, expect)
    assert not problems, f"{case.relative_to(CORPUS)} ({expect.get('why', '')}):\n  " + "\n  ".join(problems)
    assert code == (1 if expect.get("denied") else 0)
    for output in ("text", "yaml"):  # every output of the same plan is free of placeholders and tracebacks
        _, shown, said = run_plan(case, args, output)
        assert not PLACEHOLDER.search(shown + said), f"{output}: {PLACEHOLDER.search(shown + said)}"


def test_every_ecosystem_has_cases_and_every_case_its_expectation():
    assert {c.parent.name for c in CASES} == set(ECOSYSTEMS)
    assert all(c.with_suffix(".expect").exists() for c in CASES)
    strays = [p for p in CORPUS.glob("*/*") if p.suffix not in (".yaml", ".expect")]
    assert not strays


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_text_output_shows_each_gangs_queue_and_priority_as_json_has_them(case):
    args = flags(case, expected(case))
    plan = orjson.loads(run_plan(case, args, "json")[1])
    text = run_plan(case, args, "text")[1]
    for group in plan["podGroups"]:
        head = f"  {group['namespace']}/{group['name']} "
        assert head in text
        rest = text.split(head, 1)[1].split("\n")[1:]
        block = "\n" + "\n".join(itertools.takewhile(lambda line: line.startswith("    "), rest))  # its lines
        for field, key in (("queue", "queue"), ("priorityClassName", "priorityClassName")):
            if group[key]:
                assert f"\n    {field} {group[key]}" in block, (group["name"], field)
