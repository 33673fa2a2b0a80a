"""Issue 33: `podgang plan` as a new user runs it — fresh clone, docs only, own manifests.
Each test is one of the journeys where the plan guessed silently or spoke unclearly."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from podgang import cli, plan_codes
from tests.emulator import ResourceType
from tests.paths import ROOT

REPO = ROOT

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


# --------------------------------------------------------------------- values the apiserver refuses


def refused(tmp_path: Path, text: str, *args: str) -> list[str]:
    path = write(tmp_path, "app.yaml", text)
    result = plan(path, *args)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    return [line.replace(path, "app.yaml") for line in result.stderr.splitlines()]


def test_a_replica_count_written_as_a_string_is_refused_naming_file_and_document(tmp_path):
    text = "---\n" + deployment("ok") + "---\n" + deployment("web").replace("replicas: 2", 'replicas: "3"')
    assert refused(tmp_path, text) == [
        'podgang plan: app.yaml: document 2: deployment/web: the apiserver refuses this object: spec.replicas '
        'must be an integer, not the string "3" (write it unquoted: 3)']


def test_any_value_the_apiservers_schema_refuses_is_refused_naming_file_document_and_field(tmp_path):
    """A field a built-in kind does not have (a typo), or a value of the wrong type anywhere in it,
    is what kubectl apply refuses (strict field validation): plan says so rather than plan it."""
    typo = deployment("web").replace("schedulerName: kai-scheduler", "schedulerName: kai-scheduler\n"
                                                                     "      nodeSelectr: {gpu: a100}")
    assert "nodeSelectr" in typo
    assert refused(tmp_path, typo) == [
        "podgang plan: app.yaml: document 1: deployment/web: the apiserver refuses this object: spec.template.spec: "
        "Additional properties are not allowed ('nodeSelectr' was unexpected)"]


def test_a_field_one_supported_kubernetes_version_has_is_not_refused(tmp_path):
    """A 1.35 pod naming its native gang by ``spec.workloadRef`` (a field 1.36 dropped) is planned."""
    path = write(tmp_path, "pod.yaml", """
        apiVersion: v1
        kind: Pod
        metadata: {name: worker-0}
        spec:
          workloadRef: {name: training, podGroup: workers}
          containers: [{name: c, image: busybox}]
        """)
    assert plan(path, "--backend", "default-scheduler=native").returncode in (0, 1)


def test_a_negative_replica_count_is_refused(tmp_path):
    assert refused(tmp_path, deployment("web").replace("replicas: 2", "replicas: -3")) == [
        "podgang plan: app.yaml: document 1: deployment/web: the apiserver refuses this object: spec.replicas -3 "
        "must be 0 or more"]


def test_a_role_count_of_a_custom_kind_must_be_an_integer(tmp_path):
    assert refused(tmp_path, """
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: train}
        spec:
          pytorchReplicaSpecs:
            Master: {replicas: 1, template: {spec: {schedulerName: kai-scheduler}}}
            Worker: {replicas: "7", template: {spec: {schedulerName: kai-scheduler}}}
    """) == ["podgang plan: app.yaml: document 1: pytorchjob/train: the apiserver refuses this object: "
             'spec.pytorchReplicaSpecs.Worker.replicas must be an integer, not the string "7" (write it unquoted: 7)']


def test_a_gang_too_large_for_a_podgroup_names_where_it_comes_from():
    result = plan("examples/02-shared-podgroup-deployments.yaml", "--scale", "deployment/model-1=2147483647")
    assert result.returncode == 2
    assert result.stderr.startswith("podgang plan: examples/02-shared-podgroup-deployments.yaml#")


# --------------------------------------------------------------------- mistakes users make


def test_an_empty_input_says_so(tmp_path):
    for name, text in (("empty.yaml", ""), ("dashes.yaml", "---\n---\n# nothing yet\n")):
        path = write(tmp_path, name, text)
        result = plan(path)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == f"podgang plan: {path}: no objects (empty, or only '---' and comments)\n"


def test_a_scheduler_name_close_to_a_configured_one_gets_a_did_you_mean(tmp_path):
    path = write(tmp_path, "pod.yaml", POD.replace("kai-scheduler", "kai-schedular"))
    result = plan(path, "-o", "json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["members"][0]["skipped"] == 'schedulerName "kai-schedular" is not one of kai-scheduler'
    assert [(w["source"], w["message"]) for w in data["warnings"]] == [
        (f"{path}#1", 'schedulerName "kai-schedular": did you mean "kai-scheduler"? (podgang leaves pods of '
                      'other schedulers alone: this one gets no gang)')]
    # a scheduler of its own, far from any configured one, is left alone without a word
    other = plan(write(tmp_path, "other.yaml", POD.replace("kai-scheduler", "default-scheduler")), "-o", "json")
    assert json.loads(other.stdout)["warnings"] == []


def test_a_kind_close_to_a_known_kind_of_its_group_gets_a_did_you_mean(tmp_path):
    path = write(tmp_path, "app.yaml", deployment("web").replace("kind: Deployment", "kind: Deploymnet"))
    result = plan(path, "-o", "json")
    data = json.loads(result.stdout)
    said = 'apps/v1 has no kind "Deploymnet" podgang knows: did you mean "Deployment"?'
    assert [(w["source"], w["message"]) for w in data["warnings"]] == [(f"{path}#1", said)]
    assert [(m["skipped"], m["group"]) for m in data["members"]] == [(said, None)]  # not a gang of 1
    assert data["podGroups"] == []
    # a kind far from every known one (a custom controller's) is planned as before: an unknown kind's gang
    custom = plan(write(tmp_path, "custom.yaml", deployment("web").replace("apiVersion: apps/v1", "apiVersion: x.io/v1")
                        .replace("kind: Deployment", "kind: Trainer")), "-o", "json")
    assert ["did you mean" not in w["message"] for w in json.loads(custom.stdout)["warnings"]] == [True]
    assert len(json.loads(custom.stdout)["podGroups"]) == 1


# --------------------------------------------------------------------- a pod users create directly


def gpu_pod(gpus: str) -> str:
    return POD.replace("containers: [{name: c, image: busybox}]",
                       f"containers: [{{name: c, image: busybox, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}]")


NODES = "".join(textwrap.dedent(f"""\
    ---
    apiVersion: v1
    kind: Node
    metadata: {{name: gpu-{i}}}
    status: {{allocatable: {{nvidia.com/gpu: "8", cpu: "64", memory: 512Gi, pods: "110"}}}}
    """) for i in range(2))


def test_a_bare_pod_larger_than_every_node_is_never_placed(tmp_path):
    """docs/concepts/never-placed.md promises the verdict for pods users create directly; the
    same pod in a Job already had it."""
    result = plan(write(tmp_path, "pod.yaml", gpu_pod("16") + NODES), "-o", "json")
    assert result.returncode == 0, result.stderr
    (warning,) = json.loads(result.stdout)["warnings"]
    assert warning["object"] == "podgroup default/pg-trainer"
    assert warning["message"].startswith("never placed: one pod requests nvidia.com/gpu 16, more than any node it "
                                         "may use has (2 nodes: gpu-0, gpu-1; the most any has: nvidia.com/gpu 8)")
    fits = plan(write(tmp_path, "fits.yaml", gpu_pod("8") + NODES), "-o", "json")
    assert json.loads(fits.stdout)["warnings"] == []


# --------------------------------------------------------------------- verdicts count the whole gang


def pytorchjob(workers: int, gpus: int) -> str:
    role = ("      replicas: {n}\n      template:\n        spec:\n          schedulerName: kai-scheduler\n"
            "          containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}]\n")
    return ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: train, uid: 0f4c7a36-5a8e-4e09-9d2e-"
            "7a1f61f3e001}\nspec:\n  pytorchReplicaSpecs:\n    Master:\n" + role.format(n=1, gpus=gpus)
            + "    Worker:\n" + role.format(n=workers, gpus=gpus))


def test_a_gang_too_large_for_the_nodes_is_counted_whole(tmp_path):
    """An 8-pod PyTorchJob (a master and 7 workers alike) on two 8-GPU nodes: it needs 8 pods, not 7."""
    result = plan(write(tmp_path, "job.yaml", pytorchjob(7, 8) + NODES), "-o", "json")
    (warning,) = json.loads(result.stdout)["warnings"]
    assert warning["message"].startswith("never placed: its minimum of 8 pods of nvidia.com/gpu 8 exceeds what the "
                                         "nodes it may use hold even empty: 2 such pods (2 nodes: gpu-0, gpu-1)")


def test_a_tree_is_counted_alike_in_text_and_in_the_yaml_comment(tmp_path):
    workers = "{spec: {parallelism: 3, completions: 3, template: {spec: {schedulerName: kai-scheduler}}}}"
    path = write(tmp_path, "js.yaml", "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: js}\n"
                                      f"spec: {{replicatedJobs: [{{name: workers, replicas: 3, template: {workers}}}]}}\n")
    text = plan(path).stdout
    assert "minSubGroup 1 (≥ 9 pods)" in text
    comments = [line for line in plan(path, "-o", "yaml").stdout.splitlines() if line.startswith("# PodGroup ")]
    assert comments == ["# PodGroup default/pg-js-<uid> (minSubGroup 1 (≥ 9 pods), jobset/js): the grouper creates "
                        "it once the cluster assigns the UID"]


# --------------------------------------------------------------------- machine-readable codes


def findings(data: dict) -> list[dict]:
    return [f for section in ("denials", "warnings", "notes", "notChecked") for f in data[section]]


def test_every_finding_in_json_has_a_stable_documented_code(tmp_path):
    (tmp_path / "queues.yaml").write_text(queue("team-a"))
    (tmp_path / "apps.yaml").write_text("---\n".join([deployment("x", "team-x"), gpu_pod("16"), NODES]))
    examples = json.loads(plan("examples/", "-o", "json").stdout)
    mine = json.loads(plan(str(tmp_path), "-o", "json").stdout)
    meanings = plan_codes.MEANINGS
    for data in (examples, mine):
        for section in ("denials", "warnings", "notes", "notChecked"):
            for finding in data[section]:
                assert meanings.get(finding["code"], ("",))[0] == section, finding
    assert {f["code"] for f in findings(mine)} == {
        "not-in-input", "never-placed/pod-too-large", "facts-not-given", "facts-partial"}
    documented = (REPO / "docs" / "reference" / "plan-codes.md").read_text()
    assert all(f"`{code}`" in documented for code in meanings)


def test_every_code_has_a_meaning():
    constants = {v for k, v in vars(plan_codes).items() if k.isupper() and isinstance(v, str)}
    assert constants - {plan_codes.NEVER_PLACED} <= set(plan_codes.MEANINGS)


def test_a_key_close_to_one_podgang_or_kai_reads_gets_a_did_you_mean(tmp_path):
    text = deployment("web").replace("metadata: {name: web, labels: {}}",
                                     'metadata: {name: web, labels: {}, annotations: {podgang.io/min-members: "3"}}')
    text = text.replace("metadata: {labels: {app: web}}", "metadata: {labels: {app: web, kai.scheduler/queu: team}}")
    data = json.loads(plan(write(tmp_path, "app.yaml", text), "-o", "json").stdout)
    assert [(w["code"], w["message"]) for w in data["warnings"]] == [
        ("key-typo", 'metadata.annotations: "podgang.io/min-members" is no key podgang or KAI reads: did you mean '
                     '"podgang.io/min-member"?'),
        ("key-typo", 'spec.template.metadata.labels: "kai.scheduler/queu" is no key podgang or KAI reads: did you '
                     'mean "kai.scheduler/queue"?')]


# --------------------------------------------------------------------- a cluster read in part


async def test_a_list_the_cluster_does_not_give_is_not_checked_and_the_rest_is(emu, tmp_path):
    """The cluster's nodes judge the bare pod; its Queues, refused, are said not checked — not
    taken as 'no queue exists'."""
    emu.register(ResourceType("", "v1", "nodes", "Node", namespaced=False))
    emu.register(ResourceType("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False))
    emu.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-0"},
             "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64", "pods": "110"}}})
    emu.fail("GET", r"/queues", 403, times=None)
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    parser, run = cli.command_parser("plan")
    out, err = io.StringIO(), io.StringIO()
    args = parser.parse_args([write(tmp_path, "pod.yaml", gpu_pod("16")), "--kubeconfig", kubeconfig, "-o", "json"])
    assert await asyncio.to_thread(run, args, out, err) == 0, err.getvalue()
    data = json.loads(out.getvalue())
    assert [w["code"] for w in data["warnings"]] == ["never-placed/pod-too-large"]
    (unread,) = data["notChecked"]
    assert (unread["code"], unread["object"]) == ("cluster-unread", "queues.scheduling.run.ai")
    assert unread["message"].startswith(f"not read from --kubeconfig {kubeconfig} (HTTP 403 Forbidden"), unread
