"""The Spark operator's SparkApplication: manifests the real CRD accepts, and a staged gang —
the driver first, then (once spark-operator says the driver runs) the driver and its
executors, with subgroups ``driver`` and ``executor``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from podgang import kinds, rules
from tests.crd_support import crd_valid, gang_and_parts


def spark(executor: dict[str, Any] | None = None, *, state: str | None = None, **spec: Any) -> dict[str, Any]:
    app = crd_valid({
        "apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication",
        "metadata": {"name": "pi", "namespace": "team"},
        "spec": {"type": "Scala", "mode": "cluster", "sparkVersion": "3.5.3", "image": "spark:3.5.3",
                 "mainClass": "org.apache.spark.examples.SparkPi",
                 "mainApplicationFile": "local:///opt/spark/examples/jars/spark-examples.jar",
                 "driver": {"cores": 1, "memory": "512m", "schedulerName": "kai-scheduler"},
                 "executor": {"cores": 1, "memory": "512m", "schedulerName": "kai-scheduler", **(executor or {})},
                 **spec}})
    if state:
        app["status"] = {"applicationState": {"state": state}}
    return app


TABLE = [
    pytest.param(lambda: spark({"instances": 4}), 1,
                 "sparkapplication/pi driver 1; the executors (executor.instances 4) join once the driver runs: the "
                 "driver makes them", [], id="submitted: the driver alone"),
    pytest.param(lambda: spark({"instances": 4}, state="RUNNING"), 5, "sparkapplication/pi driver 1 + executor 4",
                 [("driver", 1), ("executor", 4)], id="running: the driver and its executors"),
    pytest.param(lambda: spark({"instances": 10}, state="RUNNING",
                               dynamicAllocation={"enabled": True, "minExecutors": 2, "maxExecutors": 10}),
                 3, "sparkapplication/pi driver 1 + executor 2", [("driver", 1), ("executor", 2)],
                 id="dynamic allocation: minExecutors"),
    pytest.param(lambda: spark(state="RUNNING"), 2, "sparkapplication/pi driver 1 + executor 1",
                 [("driver", 1), ("executor", 1)], id="instances default to 1"),
]


@pytest.mark.parametrize("build,size,reason,subgroups", TABLE)
def test_the_gang_of_a_spark_application(build, size, reason, subgroups):
    assert gang_and_parts(build()) == (size, reason, subgroups)


def test_the_pods_of_an_application_are_its_gang_and_in_their_roles_subgroups():
    """spark-operator owns the driver pod by the application; Spark owns each executor by the
    driver pod: the walk ends at the application, whatever the pod."""
    app = spark({"instances": 2}, state="RUNNING")
    app["metadata"]["uid"] = "app-1"
    driver = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pi-driver", "namespace": "team", "uid": "drv-1", "labels": {"spark-role": "driver"},
        "ownerReferences": [{"apiVersion": "sparkoperator.k8s.io/v1beta2", "kind": "SparkApplication", "name": "pi",
                             "uid": "app-1", "controller": True}]}, "spec": {"schedulerName": "kai-scheduler"}}
    executor = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "pi-exec-1", "namespace": "team", "labels": {"spark-role": "executor"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pi-driver", "uid": "drv-1",
                             "controller": True}]}, "spec": {"schedulerName": "kai-scheduler"}}
    assert (rules.gang_for_pod(driver, [app]).name, rules.gang_for_pod(driver, [app]).subgroup) == (
        "pg-pi-app-1", "driver")
    gang = rules.gang_for_pod(executor, [driver, app])
    assert (gang.name, gang.subgroup) == ("pg-pi-app-1", "executor")


def test_a_finished_application_wants_no_pods():
    for state, done in (("COMPLETED", True), ("FAILED", True), ("RUNNING", False), ("SUBMITTED", False)):
        assert kinds.is_finished(spark(state=state)) is done, state


def test_the_executors_template_is_its_scope():
    app = spark()
    assert [(p, t["spec"]["schedulerName"]) for p, t in kinds.pod_templates(app)] == [
        ("spec.driver", "kai-scheduler"), ("spec.executor", "kai-scheduler")]
    other = copy.deepcopy(app)
    other["spec"]["executor"]["schedulerName"] = "default-scheduler"
    assert rules.partial_scope_problem(other) is not None  # its gang could never be complete
