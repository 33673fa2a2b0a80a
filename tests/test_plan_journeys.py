"""Issue 33: `podgang plan` as a new user runs it — fresh clone, docs only, own manifests.
Each test is one of the journeys where the plan guessed silently or spoke unclearly."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

POD = """
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  schedulerName: kai-scheduler
  containers: [{name: c, image: busybox}]
"""


def plan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "podgang.cli", "plan", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=60)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


# --------------------------------------------------------------------- CLI conventions


def test_flags_and_files_come_in_any_order(tmp_path):
    first = write(tmp_path, "a.yaml", POD)
    second = write(tmp_path, "b.yaml", POD.replace("trainer", "other"))
    result = plan(first, "-o", "json", second)
    assert result.returncode == 0, result.stderr
    sources = {m["source"].split("#")[0] for m in json.loads(result.stdout)["members"]}
    assert sources == {first, second}


def test_a_usage_error_is_one_line_and_a_pointer_to_help(tmp_path):
    result = plan(write(tmp_path, "a.yaml", POD), "--outptu", "json")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["podgang plan: error: unrecognized arguments: --outptu json",
                                          "Run 'podgang plan --help' for usage."]
    assert result.stdout == ""


def test_help_shows_no_empty_default():
    result = plan("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "default: ]" not in text
    assert "[env PODGANG_BACKEND]" in text
