"""``podgang plan`` for native gangs per API version: seed 002 as written (what the 1.35
apiserver refuses, in its words; the Spark exercise's OrderedReady deadlock), seed 002's
exercises as examples/10-13, and --native-version choosing the dialect offline."""

from __future__ import annotations

import json

import yaml

from tests.unit.test_plan_cli import EXAMPLES, plan, write
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "native-1.35"
SEED_AS_WRITTEN = str(FIXTURES / "seed-002-as-written.yaml")
NATIVE = ("--backend", "default-scheduler=native")
SEED_EXAMPLES = [str(EXAMPLES / f) for f in ("10-seed002-basic-gang.yaml", "11-seed002-large-gang.yaml",
                                             "12-seed002-pytorch.yaml", "13-seed002-spark.yaml")]


def said(name: str) -> str:
    """The apiserver's words in a recorded refusal (kubectl prints them after ``exit 1``)."""
    return (FIXTURES / f"{name}.txt").read_text().split("exit 1\n", 1)[1].splitlines()[0]


def as_json(*args: str) -> dict:
    done = plan(*args, "-o", "json")
    return json.loads(done.stdout)


def test_seed_002_as_written_is_refused_where_the_apiserver_refuses_it():
    """Each of the seed's Workloads sets gang.timeout: kubectl's strict validation refuses
    the object (recorded), so the plan denies it with those words and exits 1."""
    done = plan(SEED_AS_WRITTEN, *NATIVE, "-o", "json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    recorded = said("workload-seed-timeout-strict").removeprefix(
        'Error from server (BadRequest): error when creating "STDIN": ')
    denied = {d["object"]: d["message"] for d in result["denials"]}
    assert set(denied) == {"workload default/training-job-basic", "workload default/large-training-job",
                           "workload default/pytorch-training", "workload default/spark-job"}
    assert all(message.startswith(recorded) for message in denied.values())
    assert "podgang plan: denied: " in done.stderr and "gang.timeout" in done.stderr


def test_seed_002_s_spark_exercise_is_found_to_never_form():
    result = as_json(SEED_AS_WRITTEN, *NATIVE)
    [deadlock] = [w for w in result["warnings"] if "the gang never forms" in w["message"]]
    assert deadlock["object"] == "podgroup default/spark-job/spark-gang"
    assert deadlock["message"] == (
        "statefulset spark-executor has podManagementPolicy OrderedReady (the default): it creates spark-executor-1 "
        "only once spark-executor-0 is Ready, and no pod of the gang is placed before 5 exist, but only 2 ever "
        "will: the gang never forms. Set podManagementPolicy: Parallel (it cannot change on a live StatefulSet: "
        "recreate it)")
    groups = {g["name"]: g for g in result["podGroups"]}
    assert groups["spark-job/spark-gang"]["minMember"] == 2  # what the executors can make before one runs: issue 18
    assert groups["spark-job/spark-gang"]["reason"] == "statefulset/spark-executor 1 + 1 standalone pod = 2"


def test_the_seed_002_examples_plan_clean():
    done = plan(*SEED_EXAMPLES, *NATIVE, "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["denials"] == [] and not any("OrderedReady" in w["message"] for w in result["warnings"])
    sizes = {g["name"]: (g["minMember"], g["exists"]) for g in result["podGroups"]}
    assert sizes == {"training-job-basic/training-gang": (4, True), "large-training-job/large-gang": (10, True),
                     "pytorch-training/pytorch-gang": (4, True), "spark-job/spark-gang": (5, True)}
    [version] = [n["message"] for n in result["notes"] if n["object"] == "native gangs"]
    assert version.startswith("planned for scheduling.k8s.io/v1alpha1 (Kubernetes 1.35): workload "
                              "training-job-basic (")


def test_more_than_8_pod_groups_and_min_count_0_in_the_apiserver_s_words(tmp_path):
    groups = [{"name": f"g{i}", "policy": {"gang": {"minCount": 0 if i == 0 else 2}}} for i in range(9)]
    path = write(tmp_path, "nine.yaml", yaml.safe_dump({
        "apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
        "metadata": {"name": "nine", "namespace": "ml"}, "spec": {"podGroups": groups}}))
    done = plan(path, *NATIVE, "-o", "json")
    assert done.returncode == 1
    [denial] = json.loads(done.stdout)["denials"]
    too_many = said("workload-9-podgroups").removeprefix('The Workload "nine" is invalid: ')
    zero = said("workload-mincount-0").removeprefix('The Workload "zero" is invalid: ')
    assert denial["message"] == f'The Workload "nine" is invalid: {too_many}; {zero}'


def test_the_native_version_is_chosen_offline(tmp_path):
    deployment = write(tmp_path, "web.yaml", """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: web, namespace: ml, uid: 5b1c4e0a-6a9e-4d57-9d2b-1b7e9f3c2a10}
        spec:
          replicas: 3
          template:
            spec: {schedulerName: default-scheduler, containers: [{name: c, image: busybox}]}
        """)
    out = {}
    for version in ("v1alpha1", "v1alpha2", "v1beta1"):
        done = plan(deployment, *NATIVE, "--native-version", version, "-o", "yaml")
        assert done.returncode == 0, done.stderr
        [doc] = [d for d in yaml.safe_load_all(done.stdout) if d]
        out[version] = doc
    name = "pg-web-5b1c4e0a-6a9e-4d57-9d2b-1b7e9f3c2a10"
    assert out["v1alpha1"]["kind"] == "Workload" and out["v1alpha1"]["spec"] == {
        "podGroups": [{"name": name, "policy": {"gang": {"minCount": 3}}}]}
    assert out["v1alpha2"]["apiVersion"] == "scheduling.k8s.io/v1alpha2" and out["v1beta1"]["kind"] == "PodGroup"
    # nothing in the manifests says a version: 1.36's, and the plan says how to pick another
    notes = as_json(deployment, *NATIVE)["notes"]
    assert notes[0]["message"] == ("planned for scheduling.k8s.io/v1alpha2 (Kubernetes 1.36): the default "
                                   "(--native-version, or --kubeconfig to ask a cluster)")
    # a pod template naming a Workload is written for 1.35
    assert as_json(*SEED_EXAMPLES[3:], *NATIVE)["notes"][0]["message"].startswith(
        "planned for scheduling.k8s.io/v1alpha1 (Kubernetes 1.35)")


def test_1_36_manifests_plan_for_v1alpha2_and_the_flag_overrides_it():
    result = as_json(str(EXAMPLES / "08-native-training.yaml"), *NATIVE)
    assert result["notes"][0]["message"].startswith("planned for scheduling.k8s.io/v1alpha2 (Kubernetes 1.36): "
                                                    "podgroup training-gang")
    forced = as_json(str(EXAMPLES / "08-native-training.yaml"), *NATIVE, "--native-version", "v1beta1")
    assert forced["notes"][0]["message"] == "planned for scheduling.k8s.io/v1beta1 (Kubernetes 1.37): --native-version"


def test_a_kubeconfig_that_cannot_be_read_is_a_clear_error(tmp_path):
    done = plan(SEED_EXAMPLES[0], *NATIVE, "--kubeconfig", str(tmp_path / "nope"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(f"podgang plan: --kubeconfig {tmp_path / 'nope'}: ")


def test_without_native_the_version_is_not_mentioned():
    result = as_json(str(EXAMPLES / "05-plain-deployment.yaml"))
    assert not any(n["object"] == "native gangs" for n in result["notes"])
