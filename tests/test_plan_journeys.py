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


# --------------------------------------------------------------------- what the plan does not know


def queue(name: str) -> str:
    return f"apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {{}}\n"


def deployment(name: str, queue_name: str | None = None) -> str:
    labels = f"{{kai.scheduler/queue: {queue_name}}}" if queue_name else "{}"
    return textwrap.dedent(f"""\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: {name}, labels: {labels}}}
        spec:
          replicas: 2
          selector: {{matchLabels: {{app: {name}}}}}
          template:
            metadata: {{labels: {{app: {name}}}}}
            spec:
              schedulerName: kai-scheduler
              containers: [{{name: c, image: busybox}}]
        """)


def section(output: str, title: str) -> list[str]:
    """The lines of one section of the text output (``Not checked (3)`` …), its title excluded."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{title} ("))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start + 1:end]


def test_with_no_queues_nodes_or_priority_classes_the_plan_says_it_checked_none(tmp_path):
    result = plan(write(tmp_path, "pod.yaml", POD))
    assert result.returncode == 0, result.stderr
    said = section(result.stdout, "Not checked")
    assert said[0] == "  priorityclasses.scheduling.k8s.io, queues.scheduling.run.ai, nodes"
    assert said[1].startswith("    none in the input and no --kubeconfig: ") and said[1].endswith(" — not checked")
    assert len(said) == 2  # said once


def test_a_cluster_that_cannot_be_read_is_said_once_with_why(tmp_path):
    kubeconfig = write(tmp_path, "kubeconfig", """
        apiVersion: v1
        kind: Config
        clusters: [{name: gone, cluster: {server: "http://127.0.0.1:9"}}]
        users: [{name: u, user: {token: x}}]
        contexts: [{name: gone, context: {cluster: gone, user: u}}]
        current-context: gone
    """)
    result = plan(write(tmp_path, "pod.yaml", POD), "--kubeconfig", kubeconfig)
    assert result.returncode == 0, result.stderr
    said = section(result.stdout, "Not checked")
    assert said[0] == f"  --kubeconfig {kubeconfig}", said
    assert said[1].startswith("    the cluster could not be read (") and "127.0.0.1:9" in said[1]
    assert "priorityclasses.scheduling.k8s.io, queues.scheduling.run.ai, nodes are not checked" in said[1]
    assert len(said) == 2


def test_a_queue_not_in_the_input_is_a_note_not_a_verdict(tmp_path):
    """A GitOps directory holds two of the cluster's queues: the others are not missing."""
    (tmp_path / "queues.yaml").write_text("---\n".join([queue("team-a"), queue("team-b")]))
    (tmp_path / "apps.yaml").write_text("---\n".join(
        [deployment("a", "team-a"), deployment("x", "team-x"), deployment("y"), deployment("z")]))
    result = plan(str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "never placed" not in result.stdout and "Warnings (0)" in result.stdout
    notes = section(result.stdout, "Notes")
    assert notes.count('  queue "default-queue"') == 1  # said once for the three gangs that name it
    said = notes[notes.index('  queue "default-queue"') + 1]
    assert said.startswith("    not in the input, named by 2 gangs (default/pg-y-")
    assert "whether it exists is not checked" in said and "--complete queues" in said
    assert '  queue "team-x"' in notes
    assert any("only the 2 Queues in the input are known" in line for line in section(result.stdout, "Not checked"))


def test_complete_queues_says_the_input_holds_them_all(tmp_path):
    (tmp_path / "queues.yaml").write_text("---\n".join([queue("team-a"), queue("default-queue")]))
    (tmp_path / "apps.yaml").write_text("---\n".join([deployment("a", "team-a"), deployment("x", "team-x")]))
    result = plan(str(tmp_path), "--complete", "queues", "-o", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [w["message"] for w in data["warnings"]] == [
        'never placed: KAI queue "team-x" (label kai.scheduler/queue on the top owner) does not exist '
        '(KAI: QueueDoesNotExist); fix: create a Queue named "team-x", or name an existing leaf queue']
    assert not [c for c in data["notChecked"] if c["object"] == "queues.scheduling.run.ai"]
