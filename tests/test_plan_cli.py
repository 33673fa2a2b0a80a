"""`podgang plan` as a user runs it: a subprocess over the examples and over
manifests written here, checking what it prints and its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from podgang.rules import is_valid_group_name

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CRD = REPO / "tests" / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml"


def plan(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "podgang.cli", "plan", *args],
        cwd=REPO, input=stdin, capture_output=True, text=True, timeout=60,
    )


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def group_line(output: str, name: str) -> str:
    lines = [line for line in output.splitlines() if line.strip().startswith(name) or f"/{name} " in line]
    assert lines, f"no PodGroup line for {name} in:\n{output}"
    return lines[-1]


# --------------------------------------------------------------------- examples


def test_examples_print_every_scenario_and_exit_1_for_the_denied_pod():
    result = plan("examples/")
    assert result.returncode == 1, result.stderr
    out = result.stdout
    # seed 003 trio: three pods, one hand-made group of 3
    assert "pod models-pods/app-server  → app-with-models" in out
    assert "minMember 3  as written: only standalone pods use it (3 here)" in group_line(out, "models-pods/app-with-models")
    # three Deployments share a group
    line = group_line(out, "models-deploys/shared-app-podgroup")
    assert "minMember 3" in line and "deployment/model-1 1" in line
    # LeaderWorkerSet of size 4, two groups
    for index in (0, 1):
        assert "minMember 4" in group_line(out, f"gang-demo/pg-gang-test-<uid>-group-{index}")
    # the plain 4-replica Deployment gets its own gang of 4
    assert "minMember 4  deployment/web spec.replicas 4" in group_line(out, "web/pg-web-<uid>")
    # the GPU conflict is denied with KAI's message and the specifics
    assert (
        'cannot request both GPU and GPU memory: container "train" limits nvidia.com/gpu: 1 and annotation '
        'gpu-memory: "4000"; remove nvidia.com/gpu to share a GPU by memory, or remove the gpu-memory '
        "annotation to use whole GPUs" in out
    )
    assert "examples/03-gpu-conflict.yaml#1 pod gpu/gpu-and-memory" in out
    assert out.rstrip().endswith("1 denied, 0 warnings")


def test_scaling_model_1_turns_the_shared_group_from_3_into_4():
    result = plan("examples/02-shared-podgroup-deployments.yaml", "--scale", "deployment/model-1=2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("After scaling deployment/model-1 replicas 1 → 2")
    line = group_line(result.stdout, "models-deploys/shared-app-podgroup")
    assert "minMember 3 → 4" in line
    assert "deployment/app-server 1 + deployment/model-1 2 + deployment/model-2 1 = 4" in line


def test_scaling_back_turns_4_into_3(tmp_path):
    text = (EXAMPLES / "02-shared-podgroup-deployments.yaml").read_text()
    scaled = text.replace("name: model-1\n  namespace: models-deploys\nspec:\n  replicas: 1",
                          "name: model-1\n  namespace: models-deploys\nspec:\n  replicas: 2")
    assert scaled != text
    path = write(tmp_path, "shared.yaml", scaled)
    result = plan(path, "--scale", "deploy/model-1=1")
    assert result.returncode == 0, result.stderr
    assert "minMember 4 → 3" in group_line(result.stdout, "models-deploys/shared-app-podgroup")


def test_yaml_output_is_podgroups_the_kai_crd_accepts():
    result = plan("examples/", "-o", "yaml")
    assert result.returncode == 1  # the denial still decides the exit status
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    names = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in docs}
    assert set(names) == {("models-deploys", "shared-app-podgroup"), ("models-pods", "app-with-models")}
    for doc in docs:
        assert doc["apiVersion"] == "scheduling.run.ai/v2alpha2" and doc["kind"] == "PodGroup"
        assert is_valid_group_name(doc["metadata"]["name"])
        jsonschema.validate(doc, schema)
    assert names[("models-pods", "app-with-models")]["spec"] == {
        "minMember": 3, "priorityClassName": "inference", "queue": "test",
    }
    # the groups whose names need a UID the cluster assigns are explained, not invented
    assert "# PodGroup web/pg-web-<uid> (minMember 4, deployment/web): the grouper creates it" in result.stdout


def test_json_output_holds_the_whole_plan():
    result = plan("examples/", "-o", "json")
    data = json.loads(result.stdout)
    groups = {(g["namespace"], g["name"]): g for g in data["podGroups"]}
    assert groups[("web", "pg-web-<uid>")]["minMember"] == 4
    assert groups[("web", "pg-web-<uid>")]["nameKnown"] is False
    assert groups[("models-deploys", "shared-app-podgroup")]["origin"] == "hand-made"
    assert [d["object"] for d in data["denials"]] == ["pod gpu/gpu-and-memory"]
    members = {m["object"]: m for m in data["members"]}
    assert members["deployment web/web"]["pods"] == 4


# --------------------------------------------------------------------- other manifests


def test_workloads_with_uids_get_applyable_owned_groups(tmp_path):
    path = write(tmp_path, "job.yaml", """
        apiVersion: batch/v1
        kind: Job
        metadata: {name: train, namespace: ml, uid: c64e554b-f9d2-4870-aa19-0062565c3d59}
        spec:
          parallelism: 4
          completions: 2
          template:
            spec:
              schedulerName: kai-scheduler
              restartPolicy: Never
              containers: [{name: t, image: busybox}]
    """)
    result = plan(path, "-o", "yaml")
    assert result.returncode == 0, result.stderr
    (doc,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert doc["metadata"]["name"] == "pg-train-c64e554b-f9d2-4870-aa19-0062565c3d59"
    assert doc["metadata"]["labels"] == {"podgang.io/managed-by": "podgang"}
    assert doc["metadata"]["ownerReferences"][0]["uid"] == "c64e554b-f9d2-4870-aa19-0062565c3d59"
    assert doc["spec"]["minMember"] == 2  # parallelism 4 capped by completions 2
    text = plan(path).stdout
    assert "minMember 2  job/train parallelism 4 capped by completions 2" in text


def test_a_hand_made_group_no_manifest_defines_is_a_warning(tmp_path):
    path = write(tmp_path, "pods.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: lonely, namespace: team-a, labels: {kai.scheduler/podgroup: missing-group}}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: busybox}]}
    """)
    result = plan(path)
    assert result.returncode == 0
    assert "PodGroup missing-group not found in namespace team-a: the pod stays Pending until it exists" in result.stdout
    assert "hand-made, NOT DEFINED in these manifests" in result.stdout


def test_conflicting_hand_made_keys_are_denied_naming_both(tmp_path):
    path = write(tmp_path, "pod.yaml", """
        apiVersion: v1
        kind: Pod
        metadata:
          name: torn
          labels: {kai.scheduler/podgroup: group-a}
          annotations: {pod-group-name: group-b}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: busybox}]}
    """)
    result = plan(path)
    assert result.returncode == 1
    assert 'annotation pod-group-name="group-b" and label kai.scheduler/podgroup="group-a"' in result.stdout


def test_pods_of_other_schedulers_and_skipped_ones_are_left_alone(tmp_path):
    path = write(tmp_path, "pods.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: plain}
        spec: {containers: [{name: c, image: busybox}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: opted-out, labels: {podgang.io/skip: "true"}}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: busybox}]}
    """)
    result = plan(path)
    assert result.returncode == 0
    assert 'skipped: schedulerName "default-scheduler" is not one of kai-scheduler' in result.stdout
    assert "skipped: labelled podgang.io/skip=true" in result.stdout
    assert "PodGroups (0)" in result.stdout
    # ... unless the scheduler is named
    assert "pg-plain" in plan(path, "--scheduler-name", "default-scheduler").stdout


def test_manifests_from_stdin(tmp_path):
    result = plan("-", stdin="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulerName: kai-scheduler}\n")
    assert result.returncode == 0
    assert "pod default/p  → pg-p" in result.stdout


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: [unclosed\n", "bad.yaml: document 2"),
        ("- just\n- a list\n", "bad.yaml: document 1: expected a Kubernetes object"),
        ("apiVersion: v1\nmetadata: {name: a}\n", "bad.yaml: document 1: the object has no 'kind'"),
    ],
)
def test_unreadable_input_exits_2_naming_file_and_document(tmp_path, text, expected):
    path = write(tmp_path, "bad.yaml", text)
    result = plan(path)
    assert result.returncode == 2
    assert expected in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr


def test_missing_path_and_bad_scale_exit_2(tmp_path):
    missing = plan(str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    unknown = plan("examples/", "--scale", "deployment/nope=2")
    assert unknown.returncode == 2 and "no Deployment named \"nope\"" in unknown.stderr.replace("'", '"')
    malformed = plan("examples/", "--scale", "deployment/web")
    assert malformed.returncode == 2 and "expected KIND/NAME=N" in malformed.stderr


def test_environment_variables_configure_scope(tmp_path):
    path = write(tmp_path, "pod.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulerName: other}\n")
    import os

    env = {**os.environ, "PODGANG_SCHEDULER_NAME": "other,kai-scheduler"}
    result = subprocess.run([sys.executable, "-m", "podgang.cli", "plan", path], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=60)
    assert "→ pg-p" in result.stdout


def test_pins_apply_and_a_malformed_pin_is_a_warning(tmp_path):
    path = write(tmp_path, "pins.yaml", """
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: db, annotations: {podgang.io/min-member: "2"}}
        spec:
          replicas: 5
          template: {spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: bad-pin, annotations: {podgang.io/min-member: "lots"}}
        spec:
          replicas: 2
          template: {spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}
    """)
    result = plan(path)
    assert result.returncode == 0
    assert "minMember 2  pinned by podgang.io/min-member on statefulset/db" in group_line(result.stdout, "default/pg-db-<uid>")
    assert "minMember 2  deployment/bad-pin spec.replicas 2" in group_line(result.stdout, "default/pg-bad-pin-<uid>")
    assert 'deployment/bad-pin: podgang.io/min-member="lots" is ignored: it must be a whole number ≥ 1' in result.stdout


def test_jobset_and_cronjob_sizes(tmp_path):
    path = write(tmp_path, "batch.yaml", """
        apiVersion: jobset.x-k8s.io/v1alpha2
        kind: JobSet
        metadata: {name: train}
        spec:
          replicatedJobs:
            - name: driver
              replicas: 1
              template: {spec: {parallelism: 1, template: {spec: {schedulerName: kai-scheduler}}}}
            - name: workers
              replicas: 2
              template: {spec: {parallelism: 4, completions: 3, template: {spec: {schedulerName: kai-scheduler}}}}
        ---
        apiVersion: batch/v1
        kind: CronJob
        metadata: {name: nightly}
        spec:
          schedule: "0 1 * * *"
          jobTemplate:
            spec:
              parallelism: 3
              template: {spec: {schedulerName: kai-scheduler, restartPolicy: Never}}
    """)
    out = plan(path).stdout
    assert "minMember 7  jobset/train replicatedJobs driver 1×1 + workers 2×3" in group_line(out, "default/pg-train-<uid>")
    assert "minMember 3  cronjob/nightly per run: jobTemplate parallelism 3" in group_line(out, "default/pg-nightly-<run>-<uid>")
    assert "one PodGroup per Job run" in out
