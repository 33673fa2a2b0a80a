"""`podgang plan` as a user runs it: a subprocess over the examples and over
manifests written here, checking what it prints and its exit status."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from podgang import rules
from podgang.rules import is_valid_group_name
from tests.crd_support import kai_webhook_refusals
from tests.paths import ROOT

REPO = ROOT
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
    # (the columns are as wide as the widest group's: only the words are checked)
    assert re.search(r"minMember 3 +as written: only standalone pods use it \(3 here\)",
                     group_line(out, "models-pods/app-with-models"))
    # three Deployments share a group
    line = group_line(out, "models-deploys/shared-app-podgroup")
    assert "minMember 3" in line and "deployment/model-1 1" in line
    # LeaderWorkerSet of size 4, two groups
    for index in (0, 1):
        assert "minMember 4" in group_line(out, f"gang-demo/pg-gang-test-<uid>-group-{index}")
    # the plain 4-replica Deployment gets its own gang of 4
    assert re.search(r"minMember 4 +deployment/web spec.replicas 4", group_line(out, "web/pg-web-<uid>"))
    # the GPU conflict is denied with KAI's message (v0.18's, the default) and the specifics
    assert (
        'cannot have both GPU fraction request and whole GPU resource request/limit: container "train" limits '
        'nvidia.com/gpu: 1 and annotation gpu-memory: "4000"; remove nvidia.com/gpu to share a GPU, or remove the '
        "gpu-memory annotation to use whole GPUs" in out
    )
    assert "KAI v0.18's (GPU requests, semi-preemptible groups): the default (v0.18: nothing says otherwise)" in out
    assert "examples/03-gpu-conflict.yaml#1 pod gpu/gpu-and-memory" in out
    assert out.rstrip().endswith("1 denied, 0 warnings")


def test_scaling_model_1_turns_the_shared_group_from_3_into_4():
    result = plan("examples/02-shared-podgroup-deployments.yaml", "--scale", "deployment/model-1=2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("After scaling deployment/model-1 replicas 1 → 2")
    line = group_line(result.stdout, "models-deploys/shared-app-podgroup")
    assert "minMember 3 → 4" in line
    assert "deployment/app-server 1 + deployment/model-1 2 + deployment/model-2 1 = 4" in line


PLACEHOLDER = """\
    apiVersion: scheduling.run.ai/v2alpha2
    kind: PodGroup
    metadata: {name: serve, namespace: team}
    spec: {minMember: 1, queue: team-gpu, stalenessGracePeriod: 5m}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: prefill, namespace: team}
    spec:
      replicas: 2
      selector: {matchLabels: {app: prefill}}
      template:
        metadata: {labels: {app: prefill, kai.scheduler/podgroup: serve}}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
    ---
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {name: nginx, namespace: team}
    spec:
      replicas: 6
      selector: {matchLabels: {app: nginx}}
      template:
        metadata: {labels: {app: nginx, kai.scheduler/podgroup: nginx}}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
    ---
    apiVersion: scheduling.run.ai/v2alpha2
    kind: PodGroup
    metadata: {name: nginx, namespace: team}
    spec: {minMember: 3, queue: team-gpu}
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: decode, namespace: team}
    spec:
      replicas: 3
      selector: {matchLabels: {app: decode}}
      template:
        metadata: {labels: {app: decode, kai.scheduler/podgroup: serve}}
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
    """


def test_plan_says_whose_number_each_hand_made_size_is_and_keeps_a_users_grace(tmp_path):
    """No history in manifests: applied together. The demo (3 of a ReplicaSet of 6) is the
    user's elastic gang, with how to pin it; a placeholder of 1 is planned at its members'
    total with its subgroups; the group's own stalenessGracePeriod, which podgang's -1s
    replaces, is shown and kept as podgang's grace in -o yaml."""
    path = write(tmp_path, "serve.yaml", PLACEHOLDER)
    result = plan(path)
    assert result.returncode == 0, result.stderr
    demo = group_line(result.stdout, "team/nginx")
    assert "minMember 3" in demo and "no member was scaled since the group was written" in demo
    assert 'pin it: podgang.io/min-member: "3" on the group' in demo
    serve = group_line(result.stdout, "team/serve")
    assert "minMember 5" in serve and "written 1, a placeholder" in serve
    assert "stalenessGracePeriod -1s  [podgang evicts the gang by its subgroups, after the group's own 5m" in (
        result.stdout)
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(plan(path, "-o", "yaml").stdout) if d}
    assert docs["serve"]["spec"]["stalenessGracePeriod"] == "-1s"
    assert docs["serve"]["metadata"]["annotations"]["podgang.io/staleness-grace-period"] == "5m"
    assert docs["nginx"]["spec"]["minMember"] == 3
    scaled = plan(path, "--scale", "rs/nginx=8", "--scale", "deploy/decode=4")
    assert re.search(r"minMember 3 +as written", group_line(scaled.stdout, "team/nginx"))
    assert "minMember 5 → 6" in group_line(scaled.stdout, "team/serve")


def test_scaling_back_turns_4_into_3(tmp_path):
    text = (EXAMPLES / "02-shared-podgroup-deployments.yaml").read_text()
    scaled = text.replace("name: model-1\n  namespace: models-deploys\nspec:\n  replicas: 1",
                          "name: model-1\n  namespace: models-deploys\nspec:\n  replicas: 2")
    # the group as podgang left it after the scale-up (issue 23: 3 of 4 as written would be the user's elastic gang)
    scaled = scaled.replace("spec:\n  minMember: 3\n", "spec:\n  minMember: 4\n")
    assert scaled.count("minMember: 4") == 1
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
    assert set(names) == {("models-deploys", "shared-app-podgroup"), ("models-pods", "app-with-models"),
                          ("inference", "prefill-decode"), ("inference", "serving"),
                          ("inference", "pg-embed-5c1d2e3f-0000-4000-8000-000000000019"),
                          ("team-a", "pg-train-6a1f1d64-0c3e-4b8e-9d53-2f0a9c1e7b11")}  # KAI's grouper's, taken over
    serving = names[("inference", "serving")]["spec"]  # seed 004's tree of complete replicas (example 19)
    assert "minMember" not in serving and serving["minSubGroup"] == 2 and serving["stalenessGracePeriod"] == "-1s"
    for doc in docs:
        assert doc["apiVersion"] == "scheduling.run.ai/v2alpha2" and doc["kind"] == "PodGroup"
        assert is_valid_group_name(doc["metadata"]["name"])
        jsonschema.validate(doc, schema)
    assert names[("models-pods", "app-with-models")]["spec"] == {
        "minMember": 3, "priorityClassName": "inference", "queue": "test",
    }
    # seed 004: one subgroup per Deployment, each with its podgang.io/min-available
    assert names[("inference", "prefill-decode")]["spec"] == {
        "minMember": 2, "queue": "default",
        "subGroups": [{"name": "decode", "minMember": 1}, {"name": "prefill", "minMember": 1}],
        "stalenessGracePeriod": "-1s",  # podgang judges the parts and is the one evictor
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


TRAIN_JOBSET = """
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
    """


def test_jobset_and_cronjob_sizes(tmp_path):
    path = write(tmp_path, "batch.yaml", textwrap.dedent(TRAIN_JOBSET) + textwrap.dedent("""
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
    """))
    out = plan(path).stdout
    # workers: 2 Jobs of 3 pods, each counted whole (issue 24): a tree whose root needs both roles
    assert "minSubGroup 2 (≥ 7 pods)  jobset/train replicatedJobs driver 1×1 + workers 2×3" in group_line(
        out, "default/pg-train-<uid>")
    assert " ".join(group_line(out, "default/pg-nightly-<run>-<uid>").split()).startswith(
        "default/pg-nightly-<run>-<uid> minMember 3 cronjob/nightly per run: jobTemplate parallelism 3")
    assert "one PodGroup per Job it starts" in out


# --------------------------------------------------------------------- in CI pipelines

DENIED_POD = """
    apiVersion: v1
    kind: Pod
    metadata: {name: both, namespace: gpu, annotations: {gpu-memory: "4000"}}
    spec:
      schedulerName: kai-scheduler
      containers: [{name: train, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
MISSING_GROUP_POD = """
    apiVersion: v1
    kind: Pod
    metadata: {name: lonely, namespace: team-a, labels: {kai.scheduler/podgroup: missing-group}}
    spec: {schedulerName: kai-scheduler}
"""


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_machine_output_still_tells_the_user_every_denial_and_warning_on_stderr(tmp_path, output):
    denied = write(tmp_path, "denied.yaml", DENIED_POD)
    missing = write(tmp_path, "missing.yaml", MISSING_GROUP_POD)
    result = plan(denied, missing, "-o", output)
    assert result.returncode == 1
    err = result.stderr.splitlines()
    assert f"podgang plan: denied: {denied}#1 pod gpu/both: {rules.MSG_FRACTION_AND_GPU}" in err[0]
    assert err[1] == (f"podgang plan: warning: {missing}#1 podgroup team-a/missing-group: PodGroup missing-group "
                      "not found in namespace team-a: the pod stays Pending until it exists")
    assert err[2].startswith("podgang plan: not checked: priorityclasses.scheduling.k8s.io, queues.scheduling.run.ai, "
                             "nodes: none in the input and no --kubeconfig: ")
    assert err[3:] == ["podgang plan: 1 denied, 1 warning"]
    # stdout stays clean for the next tool in the pipeline
    if output == "json":
        assert len(json.loads(result.stdout)["denials"]) == 1
    else:
        assert all(d["kind"] == "PodGroup" for d in yaml.safe_load_all(result.stdout) if d)


def test_text_output_says_it_all_on_stdout_and_nothing_twice(tmp_path):
    result = plan(write(tmp_path, "denied.yaml", DENIED_POD))
    assert result.returncode == 1
    assert rules.MSG_FRACTION_AND_GPU in result.stdout
    assert result.stderr == ""


def many_pods(tmp_path: Path, count: int) -> str:
    """Enough output to fill any pipe buffer several times, and one denied pod."""
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"worker-{i:05d}", "namespace": "big"},
             "spec": {"schedulerName": "kai-scheduler"}} for i in range(count)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump_all(pods) + "---\n" + textwrap.dedent(DENIED_POD))
    return str(path)


@pytest.mark.parametrize("output", ["text", "yaml", "json"])
def test_a_reader_that_stops_early_ends_the_output_quietly(tmp_path, output):
    path = many_pods(tmp_path, 3000)
    producer = subprocess.Popen([sys.executable, "-m", "podgang.cli", "plan", path, "-o", output], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    head = subprocess.run(["head", "-1"], stdin=producer.stdout, capture_output=True, text=True, timeout=60)
    producer.stdout.close()
    err = producer.stderr.read()
    producer.stderr.close()
    assert producer.wait(timeout=60) == 1  # the plan's verdict, not a crash
    assert len(head.stdout.splitlines()) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
    if output != "text":  # stderr is still open: the denial reaches the user
        assert "podgang plan: denied: " in err and err.endswith("podgang plan: 1 denied, 0 warnings\n")


@pytest.mark.parametrize("output", ["text", "yaml"])
def test_a_stdout_nobody_reads_is_not_a_crash(output):
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to stdout fails with EPIPE, however small the output
    try:
        result = subprocess.run([sys.executable, "-m", "podgang.cli", "plan", "examples/", "-o", output], cwd=REPO,
                                stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
    if output == "yaml":
        assert "podgang plan: denied: examples/03-gpu-conflict.yaml#1 pod gpu/gpu-and-memory: " in result.stderr


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n" + "[" * 500 + "]" * 500 + "\n"),
        ("deep.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkey: " + "[" * 500 + "\n"),
        ("deep.json", '{"apiVersion": "v1", "kind": "Pod"}\n' + '{"a": ' * 500 + "1" + "}" * 500),
        ("deep.json", '{"apiVersion": "v1", "kind": "Pod"}' + '{"a": ' * 5000 + "1" + "}" * 5000),
        ("deep.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n" + "[" * 250 + "]" * 250 + "\n"),
    ],
)
def test_deeply_nested_input_exits_2_naming_file_and_document(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    result = plan(str(path))
    assert result.returncode == 2
    assert result.stderr == f"podgang plan: {path}: document 2: nested more than 200 levels deep; no Kubernetes object is\n"
    assert result.stdout == ""


def test_nesting_up_to_200_levels_is_read_copied_and_written(tmp_path):
    nested: object = "leaf"
    for _ in range(197):  # the PodGroup (1), spec (2), extra (3) … the leaf at 200
        nested = [nested]
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "deep", "namespace": "default"}, "spec": {"minMember": 1, "extra": nested}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                  "spec": {"replicas": 1, "template": {"metadata": {"labels": {"kai.scheduler/podgroup": "deep"}},
                                                       "spec": {"schedulerName": "kai-scheduler"}}}}
    path = write(tmp_path, "deep.yaml", yaml.safe_dump_all([group, deployment]))
    result = plan(path, "-o", "yaml", "--scale", "deploy/d=3")
    assert result.returncode == 0, result.stderr
    (doc,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert doc["spec"]["minMember"] == 3 and doc["spec"]["extra"] == nested


POD_A = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"schedulerName": "kai-scheduler"}}'
POD_B = '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}, "spec": {"schedulerName": "kai-scheduler"}}'


@pytest.mark.parametrize("text", [POD_A + POD_B, POD_A + "\n" + POD_B + "\n", "\ufeff " + POD_A + "\r\n\t" + POD_B,
                                  POD_A + "\n---\n" + POD_B, "{apiVersion: v1, kind: Pod, metadata: {name: a}, "
                                  "spec: {schedulerName: kai-scheduler}}\n---\n" + POD_B])
def test_a_json_stream_is_read_as_kubectl_reads_it(tmp_path, text):
    path = tmp_path / "pods.json"
    path.write_text(text, encoding="utf-8")
    result = plan(str(path))
    assert result.returncode == 0, result.stderr
    assert f"{path}\n  pod default/a  → pg-a" in result.stdout and "  pod default/b  → pg-b" in result.stdout
    assert plan("-", stdin=text).returncode == 0


def test_a_broken_object_in_a_json_stream_is_named(tmp_path):
    path = tmp_path / "pods.json"
    path.write_text(POD_A + "\n" + '{"apiVersion": "v1", "kind": Pod}\n')
    result = plan(str(path))
    assert result.returncode == 2
    assert result.stderr == f"podgang plan: {path}: document 2 (line 2): cannot parse JSON: Expecting value\n"


def test_a_number_too_long_to_convert_is_unreadable_input(tmp_path):
    path = write(tmp_path, "big.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {x: " + "9" * 5000 + "}\n")
    result = plan(path)
    assert result.returncode == 2
    assert f"{path}: document 1: cannot parse YAML: Exceeds the limit (4300 digits)" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("""
         apiVersion: apps/v1
         kind: Deployment
         metadata: {name: web, annotations: {podgang.io/min-member: 2}}
         spec: {replicas: 3, template: {spec: {schedulerName: kai-scheduler}}}
         """, 'deployment/web: the apiserver refuses this object: metadata.annotations.podgang.io/min-member '
              'must be a string (quote it: "2")'),
        ("""
         apiVersion: v1
         kind: Pod
         metadata: {name: p, annotations: {gpu-memory: 0}}
         spec: {schedulerName: kai-scheduler}
         """, 'pod/p: the apiserver refuses this object: metadata.annotations.gpu-memory must be a string '
              '(quote it: "0")'),
        ("""
         apiVersion: apps/v1
         kind: Deployment
         metadata: {name: web, labels: {podgang.io/skip: true}}
         spec: {template: {spec: {schedulerName: kai-scheduler}}}
         """, 'deployment/web: the apiserver refuses this object: metadata.labels.podgang.io/skip must be a string '
              '(quote it: "true")'),
        ("""
         {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"template": {
          "metadata": {"annotations": {"gpu-fraction": 0.5}}, "spec": {"schedulerName": "kai-scheduler"}}}}
         """, 'statefulset/db: the apiserver refuses this object: spec.template.metadata.annotations.gpu-fraction '
              'must be a string (quote it: "0.5")'),
        ("""
         apiVersion: batch/v1
         kind: CronJob
         metadata: {name: nightly}
         spec:
           jobTemplate: {spec: {template: {metadata: {labels: {podgang.io/skip: false}}}}}
         """, "cronjob/nightly: the apiserver refuses this object: spec.jobTemplate.spec.template.metadata.labels."
              'podgang.io/skip must be a string (quote it: "false")'),
        ("""
         apiVersion: leaderworkerset.x-k8s.io/v1
         kind: LeaderWorkerSet
         metadata: {name: lws}
         spec: {leaderWorkerTemplate: {workerTemplate: {metadata: {annotations: {podgang.io/min-member: 4}}}}}
         """, "leaderworkerset/lws: the apiserver refuses this object: spec.leaderWorkerTemplate.workerTemplate."
              'metadata.annotations.podgang.io/min-member must be a string (quote it: "4")'),
        ("""
         apiVersion: kubeflow.org/v1
         kind: PyTorchJob
         metadata: {name: torch}
         spec: {pytorchReplicaSpecs: {Worker: {template: {metadata: {labels: {tier: [a, b]}}}}}}
         """, "pytorchjob/torch: the apiserver refuses this object: spec.pytorchReplicaSpecs.Worker.template."
              "metadata.labels.tier must be a string"),
        ("""
         apiVersion: v1
         kind: List
         items:
           - {apiVersion: v1, kind: Pod, metadata: {name: fine}}
           - {apiVersion: v1, kind: Pod, metadata: {name: p, labels: [kai.scheduler/podgroup]}}
         """, "pod/p: the apiserver refuses this object: metadata.labels must be a map of strings, not list"),
    ],
)
def test_values_the_apiserver_refuses_are_reported_naming_file_document_and_field(tmp_path, text, expected):
    path = write(tmp_path, "refused.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: first}\n---\n"
                 + textwrap.dedent(text).strip() + "\n")
    result = plan(path)
    assert result.returncode == 2
    assert result.stderr == f"podgang plan: {path}: document 2: {expected}\n"
    assert result.stdout == ""


def test_every_refusal_in_every_file_is_reported_at_once(tmp_path):
    first = write(tmp_path, "a.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {x: 1, y: 2}}\n")
    second = write(tmp_path, "b.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: b, annotations: {z: 3}}\n")
    result = plan(first, second, "-o", "json")
    assert result.returncode == 2
    assert [line.split(": the apiserver refuses this object: ")[1] for line in result.stderr.splitlines()] == [
        'metadata.labels.x must be a string (quote it: "1")',
        'metadata.labels.y must be a string (quote it: "2")',
        'metadata.annotations.z must be a string (quote it: "3")',
    ]


def test_string_and_null_values_and_schemas_are_accepted(tmp_path):
    path = write(tmp_path, "ok.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: p, labels: {podgang.io/skip: "false"}, annotations: {note: }}
        spec: {schedulerName: kai-scheduler}
        ---
        apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata: {name: things.example.com}
        spec:
          versions:
            - name: v1
              schema:
                openAPIV3Schema:
                  properties:
                    template:
                      properties:
                        metadata: {type: object, properties: {labels: {type: object, maxProperties: 3}}}
    """)
    result = plan(path)
    assert result.returncode == 0, result.stderr
    assert "pod default/p  → pg-p" in result.stdout


# --------------------------------------------------------------------- int32 bounds


@pytest.mark.parametrize("count", ["2147483648", "99999999999999999999999", "4294967296"])
def test_a_scale_beyond_int32_is_a_usage_error(count):
    result = plan("examples/", "--scale", f"deployment/model-1={count}")
    assert result.returncode == 2
    assert "N must be at most 2147483647, what a PodGroup's minMember holds" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("count", ["٣", "-1", "1.5", ""])
def test_a_scale_that_is_not_a_count_is_a_usage_error(count):
    result = plan("examples/", "--scale", f"deployment/model-1={count}")
    assert result.returncode == 2
    assert "expected KIND/NAME=N" in result.stderr and "Traceback" not in result.stderr


def test_the_largest_minmember_is_planned(tmp_path):
    path = write(tmp_path, "web.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, uid: 0f4c7a36-5a8e-4e09-9d2e-7a1f61f3e001}
        spec: {replicas: 1, template: {spec: {schedulerName: kai-scheduler}}}
    """)
    result = plan(path, "--scale", "deploy/web=2147483647", "-o", "yaml")
    assert result.returncode == 0, result.stderr
    (doc,) = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert doc["spec"]["minMember"] == 2147483647


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--scale", "deployment/model-1=2147483647"],
         "podgang plan: examples/02-shared-podgroup-deployments.yaml#1: PodGroup models-deploys/shared-app-podgroup: "
         "minMember 2147483649 (deployment/app-server 1 + "
         "deployment/model-1 2147483647 + deployment/model-2 1 = 2147483649) is outside what a PodGroup holds "
         "(0 to 2147483647)\n"),
    ],
)
def test_a_minmember_beyond_int32_exits_2(args, expected):
    result = plan("examples/02-shared-podgroup-deployments.yaml", *args)
    assert result.returncode == 2
    assert result.stderr == expected and result.stdout == ""


def test_a_pin_or_a_written_minmember_beyond_int32_exits_2(tmp_path):
    path = write(tmp_path, "groups.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, annotations: {podgang.io/min-member: "99999999999"}}
        spec: {template: {spec: {schedulerName: kai-scheduler}}}
        ---
        apiVersion: scheduling.run.ai/v2alpha2
        kind: PodGroup
        metadata: {name: negative}
        spec: {minMember: -1}
    """)
    result = plan(path)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"podgang plan: {path}#2: PodGroup default/negative: the apiserver refuses this object: spec.minMember -1 "
        "is outside 0 to 2147483647",
    ]
    # a pin no PodGroup can hold is ignored, as the grouper ignores it, and said so
    pin_only = write(tmp_path, "pin.yaml", Path(path).read_text().split("---")[0])
    pinned = plan(pin_only)
    assert pinned.returncode == 0, pinned.stderr
    assert ('deployment/web: podgang.io/min-member="99999999999" is ignored: a PodGroup holds at most 2147483647 '
            "members") in pinned.stdout


# --------------------------------------------------------------------- what a new user tried (issue 11)


def test_only_real_list_kinds_are_unpacked(tmp_path):
    path = write(tmp_path, "lists.yaml", """
        apiVersion: v1
        kind: PodList
        items:
          - metadata: {name: from-the-api, namespace: team}
            spec: {schedulerName: kai-scheduler}
        ---
        apiVersion: policy.example.com/v1
        kind: AllowList
        metadata: {name: allowed}
        items:
          - {apiVersion: v1, kind: Pod, metadata: {name: not-a-pod}, spec: {schedulerName: kai-scheduler}}
    """)
    result = plan(path, "-o", "json")
    assert result.returncode == 0, result.stderr
    objects = [m["object"] for m in json.loads(result.stdout)["members"]]
    assert objects == ["pod team/from-the-api"]  # the API's PodList items; the AllowList is not a list


def test_a_kind_podgang_does_not_know_is_listed_as_a_gang_of_one(tmp_path):
    path = write(tmp_path, "workbench.yaml", """
        apiVersion: research.example.com/v1
        kind: Workbench
        metadata: {name: lab, namespace: ml}
        spec:
          template: {spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}
    """)
    result = plan(path)
    assert result.returncode == 0, result.stderr
    assert "workbench ml/lab" in result.stdout
    assert ("podgang does not follow the size of a Workbench: it assumed its pods need not run together (a gang "
            "of 1) — if N of them must, pin it with podgang.io/min-member=N on workbench/lab") in result.stdout


def test_a_workload_only_partly_in_scope_is_a_warning(tmp_path):
    path = write(tmp_path, "lws.yaml", """
        apiVersion: leaderworkerset.x-k8s.io/v1
        kind: LeaderWorkerSet
        metadata: {name: half, namespace: ml}
        spec:
          replicas: 1
          leaderWorkerTemplate:
            size: 4
            leaderTemplate: {spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}
            workerTemplate: {spec: {containers: [{name: c, image: x}]}}
    """)
    out = plan(path).stdout
    assert "only some of its pod templates are in scope" in out
    assert "its gang can never be complete" in out


def test_generate_name_pods_get_groups_of_their_own_shown_as_comments_in_yaml(tmp_path):
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: worker-, namespace: ml}\nspec: {schedulerName: kai-scheduler}\n"
    path = write(tmp_path, "gen.yaml", pod + "---\n" + pod)
    data = json.loads(plan(path, "-o", "json").stdout)
    groups = [m["group"] for m in data["members"]]
    assert len(set(groups)) == 2 and all(g.startswith("pg-worker-") for g in groups)
    result = plan(path, "-o", "yaml")
    assert [d for d in yaml.safe_load_all(result.stdout) if d] == []
    assert result.stdout.count("its name ends in a random suffix the webhook picks") == 2


def test_a_pod_of_a_workload_labelled_skip_is_skipped_not_denied(tmp_path):
    path = write(tmp_path, "skip.yaml", """
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: opt-out, namespace: ml, uid: 6b0c7c1e-0b1e-4a8e-9d57-1f0a3c2b9e11,
                   labels: {podgang.io/skip: "true"}}
        spec:
          replicas: 1
          template:
            metadata: {annotations: {gpu-memory: "4000"}}
            spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
        ---
        apiVersion: v1
        kind: Pod
        metadata:
          name: opt-out-0
          namespace: ml
          annotations: {gpu-memory: "4000"}
          ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: opt-out,
                             uid: 6b0c7c1e-0b1e-4a8e-9d57-1f0a3c2b9e11, controller: true}]
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
    """)
    result = plan(path)
    assert result.returncode == 0, result.stdout
    (line,) = [x for x in result.stdout.splitlines() if "pod ml/opt-out-0" in x]
    assert line.endswith("skipped: deployment/opt-out is labelled podgang.io/skip=true")
    assert "Denied (0)" in result.stdout


def test_text_shows_the_subgroup_tree_and_json_holds_it():
    result = plan("examples/06-prefill-decode.yaml", "--scale", "deployment/decode=5")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  inference/prefill-decode"))
    assert "minMember 2  deployment/decode 1 + deployment/prefill 1 = 2" in lines[at]
    assert lines[at + 1] == "    ├ decode   minimum 1  [podgang.io/min-available on deployment/decode]"
    assert lines[at + 2] == "    └ prefill  minimum 1  [podgang.io/min-available on deployment/prefill]"
    data = json.loads(plan("examples/06-prefill-decode.yaml", "-o", "json").stdout)
    [group] = data["podGroups"]
    assert group["subgroups"] == [
        {"name": "decode", "minMember": 1, "reason": "podgang.io/min-available on deployment/decode"},
        {"name": "prefill", "minMember": 1, "reason": "podgang.io/min-available on deployment/prefill"},
    ]


# ------------------------------------------------------ owner references, as the cluster resolves them

OWNED_RS = """
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata:
      name: x-7d9f
      namespace: ns
      uid: 22222222-2222-2222-2222-222222222222
      ownerReferences:
      - {apiVersion: OWNER_API, kind: Deployment, name: x, OWNER_UID controller: true}
    spec:
      replicas: 2
      template:
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: i}]}
    ---
    apiVersion: v1
    kind: Pod
    metadata:
      name: x-7d9f-a
      namespace: ns
      annotations: {gpu-fraction: "0.5", gpu-memory: "1024"}
      ownerReferences:
      - {apiVersion: apps/v1, kind: ReplicaSet, name: x-7d9f, uid: 22222222-2222-2222-2222-222222222222, controller: true}
    spec: {schedulerName: kai-scheduler, containers: [{name: c, image: i}]}
"""
SKIPPED_DEPLOYMENT = """
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: x, namespace: DEPLOYMENT_NS, DEPLOYMENT_UID labels: {podgang.io/skip: "true"}}
    spec:
      replicas: 2
      template:
        spec: {schedulerName: kai-scheduler, containers: [{name: c, image: i}]}
"""
REF_UID = "11111111-1111-1111-1111-111111111111"


def owner_case(tmp_path: Path, *, owner_api: str = "apps/v1", ref_uid: str | None = REF_UID,
               deployment_ns: str | None = "ns", deployment_uid: str | None = None) -> dict:
    text = OWNED_RS.replace("OWNER_API", owner_api).replace("OWNER_UID", f"uid: {ref_uid}," if ref_uid else "")
    if deployment_ns is not None:
        text += SKIPPED_DEPLOYMENT.replace("DEPLOYMENT_NS", deployment_ns).replace(
            "DEPLOYMENT_UID", f"uid: {deployment_uid}," if deployment_uid else "")
    path = write(tmp_path, "case.yaml", text)
    text_out, json_out = plan(path), plan(path, "-o", "json")
    assert text_out.returncode == json_out.returncode, (text_out, json_out)
    assert "→  (" not in text_out.stdout and "→ (" not in text_out.stdout, text_out.stdout  # never an empty name
    data = json.loads(json_out.stdout)
    for member in data["members"]:
        assert member["group"] or member["skipped"] or member["noGroup"] or member["object"].startswith("pod "), member
    data["returncode"], data["text"] = json_out.returncode, text_out.stdout
    return data


def member(data: dict, what: str) -> dict:
    [found] = [m for m in data["members"] if m["object"] == what]
    return found


def test_a_skip_label_on_an_owner_written_without_a_uid_reaches_its_pods(tmp_path):
    """The Deployment has no metadata.uid (written by hand), the ReplicaSet's reference
    has one: the cluster matches them by kind and name, and so does the plan."""
    data = owner_case(tmp_path)
    assert data["returncode"] == 0 and data["denials"] == []
    assert member(data, "pod ns/x-7d9f-a")["skipped"] == "deployment/x is labelled podgang.io/skip=true"
    assert [m["object"] for m in data["members"]] == ["pod ns/x-7d9f-a", "deployment ns/x"]  # the ReplicaSet is its
    assert data["podGroups"] == []


def test_an_owner_with_the_uid_the_reference_names_is_that_owner(tmp_path):
    data = owner_case(tmp_path, deployment_uid=REF_UID)
    assert data["returncode"] == 0
    assert member(data, "pod ns/x-7d9f-a")["skipped"] == "deployment/x is labelled podgang.io/skip=true"


def test_a_reference_without_a_uid_is_linked_by_name(tmp_path):
    data = owner_case(tmp_path, ref_uid=None)
    assert data["returncode"] == 0
    assert member(data, "pod ns/x-7d9f-a")["skipped"] == "deployment/x is labelled podgang.io/skip=true"


@pytest.mark.parametrize("where", [dict(deployment_ns="other"), dict(deployment_ns=None)],
                         ids=["owner-in-another-namespace", "owner-not-in-the-manifests"])
def test_a_reference_that_names_no_object_here_leaves_the_owner_to_the_cluster(tmp_path, where):
    """An owner in another namespace, or of the same kind in another API group, is not
    the one the reference names: the pod's gang is named after the reference (the top,
    as far as the manifests tell) and its GPU contradiction is denied."""
    data = owner_case(tmp_path, **where)
    assert data["returncode"] == 1
    assert [d["message"] for d in data["denials"]] == [
        'cannot request both gpu-fraction and GPU memory request: annotations gpu-memory: "1024" and '
        'gpu-fraction: "0.5"; keep only one of them']
    rs = member(data, "replicaset ns/x-7d9f")
    assert rs["group"] == f"pg-x-{REF_UID}"
    assert rs["reason"].startswith("top owner deployment/x, not in these manifests")


def test_an_owner_of_a_kind_podgang_does_not_know_is_passed_through_to_the_known_one_below(tmp_path):
    """A "Deployment" of another API group owning the ReplicaSet is no Deployment podgang knows:
    a wrapper of the ReplicaSet, whose gang it keeps (issue 32's owner-chain rule)."""
    data = owner_case(tmp_path, owner_api="example.com/v1")
    assert data["returncode"] == 1  # the GPU contradiction
    rs = member(data, "replicaset ns/x-7d9f")
    assert rs["group"] == "pg-x-7d9f-22222222-2222-2222-2222-222222222222"
    assert rs["reason"] == "top owner replicaset/x-7d9f"


def test_an_owner_whose_uid_disagrees_is_not_the_owner_and_the_plan_says_why(tmp_path):
    """Both have a uid and they differ: the webhook's look-up by name finds another
    object (the owner was replaced) and admits the pod without a group."""
    data = owner_case(tmp_path, deployment_uid="99999999-9999-9999-9999-999999999999")
    rs = member(data, "replicaset ns/x-7d9f")
    assert rs["group"] is None
    assert rs["noGroup"] == (f"the ownerReference to deployment/x has uid {REF_UID}, but deployment ns/x in these "
                             f"manifests has uid 99999999-9999-9999-9999-999999999999 (the owner was replaced)")
    assert f"replicaset ns/x-7d9f  no group: the ownerReference to deployment/x has uid {REF_UID}" in data["text"]
    assert any("the owner was replaced" in w["message"] for w in data["warnings"])


def test_a_group_name_that_cannot_be_known_is_said_so(tmp_path):
    """The owner is not in the manifests and the reference has no uid: no name is made up."""
    data = owner_case(tmp_path, ref_uid=None, deployment_ns=None)
    rs = member(data, "replicaset ns/x-7d9f")
    assert rs["group"] is None
    assert rs["noGroup"].startswith("its owner deployment/x is not in these manifests and its ownerReference has no uid")


# ------------------------------------------------------ a user's tree, generateName, names from templates

USERS_TREE = """\
    apiVersion: scheduling.run.ai/v2alpha2
    kind: PodGroup
    metadata: {name: tree, namespace: ml}
    spec:
      queue: team
      minSubGroup: 2
      subGroups:
      - {name: prefill, minSubGroup: 1}
      - {name: prefill-0, parent: prefill, minMember: 2}
      - {name: decode, minMember: 1}
    """
TREE_POD = """\
    ---
    apiVersion: v1
    kind: Pod
    metadata: {{name: {name}, namespace: ml, annotations: {{pod-group-name: tree}},
               labels: {{kai.scheduler/subgroup-name: {part}}}}}
    spec: {{schedulerName: kai-scheduler, containers: [{{name: c, image: x}}]}}
    """
TREE_DEPLOYMENT = """\
    ---
    {apiVersion: apps/v1, kind: Deployment, metadata: {name: decode, namespace: ml},
     spec: {replicas: 1, selector: {matchLabels: {app: decode}},
            template: {metadata: {labels: {app: decode, kai.scheduler/podgroup: tree, kai.scheduler/subgroup-name: decode}},
                       spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}}}
    """
NAMED_BY = {
    "standalone pods": textwrap.dedent(TREE_POD.format(name="p0", part="prefill-0"))
    + textwrap.dedent(TREE_POD.format(name="p1", part="decode")),
    "a workload": textwrap.dedent(TREE_DEPLOYMENT),
    "nothing": "",
}


@pytest.mark.parametrize("named_by", NAMED_BY)
def test_a_users_kai_tree_is_kept_as_written_whoever_names_it(tmp_path, named_by):
    """KAI refuses minMember beside minSubGroup: the plan writes the user's group as written
    and shows its tree, whether standalone pods, a workload or nothing names it."""
    path = write(tmp_path, "tree.yaml", textwrap.dedent(USERS_TREE) + NAMED_BY[named_by])
    [doc] = [d for d in yaml.safe_load_all(plan(path, "-o", "yaml").stdout) if d]
    assert doc["spec"] == yaml.safe_load(textwrap.dedent(USERS_TREE))["spec"]
    [group] = json.loads(plan(path, "-o", "json").stdout)["podGroups"]
    assert group["minSubGroup"] == 2 and group["minMember"] == 3  # the fewest pods the tree takes
    assert [(s["name"], s.get("parent"), s.get("minMember", s.get("minSubGroup"))) for s in group["subgroups"]] == [
        ("prefill", None, 1), ("prefill-0", "prefill", 2), ("decode", None, 1)]
    assert "minSubGroup 2 (≥ 3 pods)" in group_line(plan(path).stdout, "ml/tree")


#: trees podgang writes itself, beside the examples: a JobSet's roles, a PyTorchJob's segments
PODGANG_TREES = {
    "jobset": TRAIN_JOBSET.replace("{name: train}", "{name: train, uid: 0f4c7a36-5a8e-4e09-9d2e-7a1f61f3e002}"),
    "pytorchjob segments": """\
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: seg, uid: 0f4c7a36-5a8e-4e09-9d2e-7a1f61f3e003}
        spec:
          pytorchReplicaSpecs:
            Master: {replicas: 1, template: {spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}}}
            Worker:
              replicas: 4
              template:
                metadata: {annotations: {kai.scheduler/segment-size: "2"}}
                spec: {schedulerName: kai-scheduler, containers: [{name: c, image: x}]}
        """,
}
KAI_OUTPUTS = ([pytest.param([str(p)], id=p.name) for p in sorted(EXAMPLES.glob("*.yaml"))]
               + [pytest.param(["users-tree", named_by], id=f"users tree named by {named_by}") for named_by in NAMED_BY]
               + [pytest.param(["podgang-tree", name], id=f"podgang's tree of a {name}") for name in PODGANG_TREES])


@pytest.mark.parametrize("source", KAI_OUTPUTS)
def test_every_kai_podgroup_in_yaml_output_is_one_kai_accepts(tmp_path, source):
    """Each KAI PodGroup ``-o yaml`` writes passes KAI's CRD and its webhook's rules (never
    minMember beside minSubGroup), for every example and every kind of tree."""
    written_here = source[0] in ("users-tree", "podgang-tree")
    if source[0] == "users-tree":
        source = [write(tmp_path, "tree.yaml", textwrap.dedent(USERS_TREE) + NAMED_BY[source[1]])]
    elif source[0] == "podgang-tree":
        source = [write(tmp_path, "tree.yaml", PODGANG_TREES[source[1]])]
    result = plan(*source, "-o", "yaml", "--backend", "kai-scheduler=kai", "--backend", "default-scheduler=native")
    assert result.returncode in (0, 1), result.stderr
    schema = yaml.safe_load(CRD.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    docs = [d for d in yaml.safe_load_all(result.stdout) if d and d["apiVersion"] == "scheduling.run.ai/v2alpha2"]
    assert docs or not written_here, result.stdout
    for doc in docs:
        jsonschema.validate(doc, schema)
        assert kai_webhook_refusals(doc) == [], doc


def test_generate_name_workloads_are_planned_one_group_each_at_their_size(tmp_path):
    """Kueue's samples: Jobs with only metadata.generateName. The apiserver names each
    (generateName and 5 random characters): one group each, named with placeholders."""
    job = ("apiVersion: batch/v1\nkind: Job\nmetadata: {{generateName: sample-job-, namespace: ml}}\n"
           "spec:\n  parallelism: {n}\n  completions: {n}\n  template:\n    spec: {{schedulerName: kai-scheduler, "
           "restartPolicy: Never, containers: [{{name: c, image: x}}]}}\n")
    path = write(tmp_path, "jobs.yaml", job.format(n=3) + "---\n" + job.format(n=2))
    data = json.loads(plan(path, "-o", "json").stdout)
    assert [(m["object"], m["group"], m["pods"]) for m in data["members"]] == [
        ("job ml/sample-job-<random>", "pg-sample-job-<random>-<uid>", 3),
        ("job ml/sample-job-<random>", "pg-sample-job-<random>-<uid>", 2)]
    assert sorted((g["name"], g["minMember"], g["nameKnown"]) for g in data["podGroups"]) == [
        ("pg-sample-job-<random>-<uid>", 2, False), ("pg-sample-job-<random>-<uid>", 3, False)]
    text = plan(path).stdout
    assert "job ml/sample-job-<random>  → pg-sample-job-<random>-<uid> (3 pods)" in text
    assert "PodGroups (2)" in text and "owned by job/sample-job-<random>" in text
    result = plan(path, "-o", "yaml")
    assert [d for d in yaml.safe_load_all(result.stdout) if d] == []
    assert result.stdout.count("# PodGroup ml/pg-sample-job-<random>-<uid>") == 2


@pytest.mark.parametrize("name, template", [("process-item-$ITEM", "$ITEM"), ("{{ .Values.name }}", "{{ .Values.name }}"),
                                            ("train-${RUN}", "${RUN}"), ("Train_Job", None)])
def test_a_name_the_apiserver_refuses_is_a_finding_not_a_mangled_group(tmp_path, name, template):
    """The Kubernetes docs' "Parallel processing using expansions" Job template, a Helm chart
    not rendered: the object is never created, so it has no gang; the plan says why."""
    path = write(tmp_path, "job.yaml", f"""
        apiVersion: batch/v1
        kind: Job
        metadata: {{name: {json.dumps(name)}, namespace: ml}}
        spec:
          template:
            spec: {{schedulerName: kai-scheduler, restartPolicy: Never, containers: [{{name: c, image: x}}]}}
    """)
    data = json.loads(plan(path, "-o", "json").stdout)
    assert data["podGroups"] == []
    [member] = data["members"]
    assert member["group"] is None and "not a valid name" in member["skipped"]
    [warning] = [w for w in data["warnings"] if w["code"] == "invalid-name"]
    assert f"metadata.name {json.dumps(name)} is not a valid name" in warning["message"]
    if template:
        assert f"it looks like an unexpanded template variable ({template})" in warning["message"]
    else:
        assert "template" not in warning["message"]


def test_a_native_groups_fields_are_shown_as_written(tmp_path):
    """A hand-made v1alpha2 PodGroup (the shape of ../shared/fixtures/native): its
    priorityClassName and every other field it carries are shown, not null."""
    pod = ("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {0}, namespace: training}}\nspec: {{schedulerName: "
           "default-scheduler, schedulingGroup: {{podGroupName: gang}}, containers: [{{name: c, image: x}}]}}\n")
    path = write(tmp_path, "native.yaml", textwrap.dedent("""\
        apiVersion: v1
        kind: Namespace
        metadata: {name: training, labels: {podgang.io/native: enabled}}
        ---
        apiVersion: scheduling.k8s.io/v1alpha2
        kind: PodGroup
        metadata: {name: gang, namespace: training}
        spec:
          priorityClassName: high-priority
          disruptionMode: Pod
          schedulingPolicy: {gang: {minCount: 2}}
        """) + pod.format("m") + pod.format("w"))
    args = (path, "--backend", "default-scheduler=native")
    [group] = json.loads(plan(*args, "-o", "json").stdout)["podGroups"]
    assert group["priorityClassName"] == "high-priority"
    assert {"field": "disruptionMode", "value": "Pod", "from": "as written in the PodGroup at "
            f"{path}#2"} in group["settings"]
    text = plan(*args).stdout
    assert f"priorityClassName high-priority  [as written in the PodGroup at {path}#2]" in text
    assert f"disruptionMode Pod  [as written in the PodGroup at {path}#2]" in text


def test_every_field_of_a_hand_made_kai_group_is_shown(tmp_path):
    pod = ("---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {0}, namespace: ml, annotations: {{pod-group-name: g}}}}"
           "\nspec: {{schedulerName: kai-scheduler, containers: [{{name: c, image: x}}]}}\n")
    path = write(tmp_path, "kai.yaml", textwrap.dedent("""\
        apiVersion: scheduling.run.ai/v2alpha2
        kind: PodGroup
        metadata: {name: g, namespace: ml}
        spec:
          minMember: 2
          queue: team
          priorityClassName: inference
          preemptibility: non-preemptible
          markUnschedulable: false
          preemptionDelay: 10m
          topologyConstraint: {topology: t, requiredTopologyLevel: rack}
        """) + pod.format("p0") + pod.format("p1"))
    text = plan(path).stdout
    for shown in ("queue team", "priorityClassName inference", "preemptibility non-preemptible",
                  "markUnschedulable false", "preemptionDelay 10m", "topologyConstraint topology=t, requiredTopologyLevel=rack"):
        assert f"    {shown}  [as written in the PodGroup at {path}#1]" in text, text
