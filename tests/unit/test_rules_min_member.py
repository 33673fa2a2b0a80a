"""minMember (spec §3): every row of the table, pins, shared hand-made groups, and
the reason that says where each number comes from."""

from __future__ import annotations

import json

import pytest

from podgang import rules
from podgang.rules import MinMember, desired_size, min_member_for, pinned_min_member, shared_min_member
from podgang.settings import Settings
from tests.paths import TESTS

ADMISSION = TESTS / "fixtures" / "admission"
PIN = "podgang.io/min-member"


def admitted(name: str) -> dict:
    return json.loads((ADMISSION / name).read_text())["request"]["object"]


def workload(kind: str, name: str = "w", spec: dict | None = None, pin: str | None = None) -> dict:
    md: dict = {"name": name, "namespace": "ns"}
    if pin is not None:
        md["annotations"] = {PIN: pin}
    out: dict = {"kind": kind, "metadata": md}
    if spec is not None:
        out["spec"] = spec
    return out


def podgroup(name: str = "pg", pin: str | None = None, min_member: int = 1) -> dict:
    md: dict = {"name": name, "namespace": "ns"}
    if pin is not None:
        md["annotations"] = {PIN: pin}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": md, "spec": {"minMember": min_member}}


def deployment(name: str, replicas: int | None = 1, pin: str | None = None) -> dict:
    return workload("Deployment", name, {} if replicas is None else {"replicas": replicas}, pin)


def job_template(parallelism=None, completions=None) -> dict:
    spec: dict = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return spec


def jobset(*replicated) -> dict:
    return workload(
        "JobSet",
        "trainer",
        {
            "replicatedJobs": [
                {"name": name, "replicas": replicas, "template": {"spec": job_template(p, c)}}
                for name, replicas, p, c in replicated
            ]
        },
    )


# ---------------------------------------------------------------------------
# the table, row by row


class TestTable:
    def test_pod(self):
        mm = min_member_for(admitted("pod-create-dry-run.json"))
        assert mm == MinMember(1, "pod/dryrun-pod a single pod")

    @pytest.mark.parametrize("kind,extra", [("Deployment", {}), ("ReplicaSet", {}),
                                            ("StatefulSet", {"podManagementPolicy": "Parallel"})])
    @pytest.mark.parametrize("replicas", [1, 3, 1000])
    def test_replicas(self, kind, extra, replicas):
        mm = min_member_for(workload(kind, "web", {"replicas": replicas, **extra}))
        assert mm.value == replicas
        assert mm.reason == f"{kind.lower()}/web spec.replicas {replicas}"
        assert not mm.pinned

    @staticmethod
    def statefulset(spec: dict) -> dict:
        return workload("StatefulSet", "etcd", {**spec, "template": {"spec": {"schedulerName": "kai-scheduler"}}})

    @pytest.mark.parametrize("policy", [None, "OrderedReady"])
    def test_an_ordered_statefulset_is_a_gang_of_one(self, policy):
        """Its controller makes pod 1 only once pod 0 is Ready: a gang of 3 would never form."""
        spec = {"replicas": 3, **({"podManagementPolicy": policy} if policy else {})}
        sts = self.statefulset(spec)
        mm = min_member_for(sts)
        assert mm == MinMember(1, "statefulset/etcd spec.replicas 3, made one at a time (OrderedReady): a gang of 1")
        problem = rules.staged_problem(sts)
        assert problem is not None and problem.startswith("statefulset/etcd is not one gang (its gang counts 1): ")
        assert "podManagementPolicy: Parallel makes them one gang" in problem
        assert rules.staged_problem(self.statefulset({**spec, "podManagementPolicy": "Parallel"})) is None
        assert rules.staged_problem(self.statefulset({"replicas": 1})) is None  # one pod: nothing waits

    def test_a_pinned_ordered_statefulset_is_told_its_gang_never_forms(self):
        sts = self.statefulset({"replicas": 3})
        sts["metadata"]["annotations"] = {"podgang.io/min-member": "3"}
        assert min_member_for(sts) == MinMember(3, "pinned by podgang.io/min-member on statefulset/etcd", True)
        assert rules.staged_problem(sts).startswith(
            "statefulset/etcd: podgang.io/min-member=3 waits for pods its controller makes only in stages, a gang "
            "that never forms: podManagementPolicy OrderedReady (the default) makes its 3 pods one at a time")

    def test_an_ordered_statefulset_out_of_scope_or_owned_says_nothing(self):
        sts = self.statefulset({"replicas": 3})
        sts["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
        assert rules.staged_problem(sts) is None  # not podgang's: nothing to say
        owned = self.statefulset({"replicas": 3})
        owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "lead", "uid": "u1"}]
        assert rules.staged_problem(owned) is None  # its owner's gang counts its pods

    @pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet"])
    def test_replicas_default_to_one(self, kind):
        mm = min_member_for(workload(kind, "web", {}))
        assert mm == MinMember(1, f"{kind.lower()}/web spec.replicas 1")
        assert min_member_for(workload(kind, "web")).value == 1

    @pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet"])
    def test_zero_replicas_is_never_below_one(self, kind):
        mm = min_member_for(workload(kind, "web", {"replicas": 0}))
        assert mm == MinMember(1, f"{kind.lower()}/web spec.replicas 0; a gang is never smaller than 1", idle=True)

    def test_recorded_workloads(self):
        assert min_member_for(admitted("deployment-create.json")) == MinMember(3, "deployment/web spec.replicas 3")
        assert min_member_for(admitted("statefulset-create.json")) == MinMember(  # OrderedReady: one at a time
            1, "statefulset/db spec.replicas 2, made one at a time (OrderedReady): a gang of 1")
        assert min_member_for(admitted("replicaset-create-by-deployment.json")).value == 3
        assert min_member_for(admitted("replicaset-update-scale.json")).value == 4  # scaled 3 -> 4

    def test_job_parallelism(self):
        mm = min_member_for(workload("Job", "train", job_template(4)))
        assert mm == MinMember(4, "job/train parallelism 4")

    def test_job_parallelism_capped_by_completions(self):
        mm = min_member_for(workload("Job", "train", job_template(4, 2)))
        assert mm == MinMember(2, "job/train parallelism 4 capped by completions 2")

    def test_job_completions_above_parallelism(self):
        mm = min_member_for(workload("Job", "train", job_template(2, 10)))
        assert mm == MinMember(2, "job/train parallelism 2 (completions 10)")

    def test_job_defaults(self):
        assert min_member_for(workload("Job", "train", job_template())) == MinMember(1, "job/train parallelism 1")
        assert min_member_for(workload("Job", "train")).value == 1

    def test_job_parallelism_zero(self):
        # a suspended-by-parallelism Job: still never below 1
        mm = min_member_for(workload("Job", "train", job_template(0)))
        assert mm.value == 1
        assert "never smaller than 1" in mm.reason

    def test_recorded_cronjob_job(self):
        mm = min_member_for(admitted("job-create-by-cronjob.json"))
        assert mm == MinMember(1, "job/nightly-29922453 parallelism 1 (completions 1)")

    def test_cronjob_is_sized_per_run(self):
        cj = workload("CronJob", "nightly", {"jobTemplate": {"spec": job_template(3, 2)}})
        mm = min_member_for(cj)
        assert mm.value == 2
        assert mm.reason == "cronjob/nightly per run: jobTemplate parallelism 3 capped by completions 2"

    @pytest.mark.parametrize("size", [1, 2, 4, 16])
    def test_lws_size_per_group(self, size):
        lws = workload("LeaderWorkerSet", "gang-test", {"replicas": 3, "leaderWorkerTemplate": {"size": size}})
        mm = min_member_for(lws)
        assert mm.value == size  # not size × replicas: one PodGroup per LWS group
        assert mm.reason == f"leaderworkerset/gang-test leaderWorkerTemplate.size {size} per group"

    def test_lws_default_size(self):
        assert min_member_for(workload("LeaderWorkerSet", "l", {"leaderWorkerTemplate": {}})).value == 1

    def test_jobset_sum(self):
        js = jobset(("driver", 1, 1, 1), ("workers", 2, 4, 4))
        mm = min_member_for(js)
        assert mm.value == 1 * 1 + 2 * 4
        assert mm.reason == "jobset/trainer replicatedJobs driver 1×1 + workers 2×4"

    def test_jobset_parallelism_capped_by_completions(self):
        js = jobset(("workers", 3, 4, 2))
        assert min_member_for(js).value == 3 * 2
        js = jobset(("workers", 3, 2, 8))
        assert min_member_for(js).value == 3 * 2

    def test_jobset_defaults(self):
        js = jobset(("a", 2, None, None))
        assert min_member_for(js).value == 2
        assert min_member_for(workload("JobSet", "empty", {"replicatedJobs": []})) == MinMember(
            1, "jobset/empty replicatedJobs none; a gang is never smaller than 1", idle=True
        )

    @pytest.mark.parametrize("kind", ["DaemonSet", "Workbench", "InferenceService", None])
    def test_anything_else_is_one(self, kind):
        mm = min_member_for(workload(kind, "x", {"replicas": 7}))
        assert mm.value == 1
        assert "one pod at a time" in mm.reason

    def test_desired_size(self):
        assert desired_size(deployment("web", 5)) == (5, "spec.replicas 5")
        assert desired_size(deployment("web", 0)) == (0, "spec.replicas 0")  # the raw size; min_member_for clamps


# ---------------------------------------------------------------------------
# pins


class TestPins:
    def test_pin_on_workload(self):
        mm = min_member_for(deployment("web", 3, pin="2"))
        assert mm == MinMember(2, "pinned by podgang.io/min-member on deployment/web", True)

    def test_pin_on_podgroup(self):
        mm = min_member_for(deployment("web", 3), podgroup("pg-web-u", pin="5"))
        assert mm == MinMember(5, "pinned by podgang.io/min-member on podgroup/pg-web-u", True)

    def test_podgroup_pin_wins(self):
        mm = min_member_for(deployment("web", 3, pin="2"), podgroup("pg-web-u", pin="7"))
        assert mm.value == 7 and mm.pinned
        assert "podgroup/pg-web-u" in mm.reason

    def test_pin_above_replicas(self):
        assert min_member_for(deployment("web", 1, pin="8")).value == 8

    def test_pin_with_spaces(self):
        assert pinned_min_member(deployment("web", pin=" 4 ")) == (4, None)

    def test_unpinned_podgroup_does_not_pin(self):
        mm = min_member_for(deployment("web", 3), podgroup("pg-web-u", min_member=9))
        assert mm == MinMember(3, "deployment/web spec.replicas 3")

    @pytest.mark.parametrize("bad", ["0", "-1", "abc", "2.5", "", " ", "1e3", "+3", "three"])
    def test_bad_pin_is_ignored_with_a_problem(self, bad):
        dep = deployment("web", 3, pin=bad)
        assert pinned_min_member(dep) == (
            None,
            f"deployment/web: podgang.io/min-member={json.dumps(bad)} is ignored: it must be a whole number ≥ 1",
        )
        mm = min_member_for(dep)
        assert mm == MinMember(3, "deployment/web spec.replicas 3")

    @pytest.mark.parametrize("bad", ["0", "-1", "abc"])
    def test_bad_pin_on_podgroup_falls_back_to_workload_pin(self, bad):
        mm = min_member_for(deployment("web", 3, pin="2"), podgroup("pg", pin=bad))
        assert mm.value == 2 and mm.pinned

    def test_no_pin(self):
        assert pinned_min_member(deployment("web")) == (None, None)
        assert pinned_min_member(None) == (None, None)

    @pytest.mark.parametrize("bad", ["²", "¹²", "3²"])
    def test_superscript_digits_are_ignored_not_raised(self, bad):
        # str.isdigit() accepts '²', int() refuses it
        value, problem = pinned_min_member(deployment("web", pin=bad))
        assert value is None and problem is not None
        assert min_member_for(deployment("web", 3, pin=bad)).value == 3

    def test_huge_pin_does_not_raise(self):
        # int() refuses strings of more than 4300 digits (sys.get_int_max_str_digits)
        value, problem = pinned_min_member(deployment("web", pin="9" * 5000))
        assert (value is None) != (problem is None)
        assert min_member_for(deployment("web", 3, pin="9" * 5000)).value >= 1
        assert shared_min_member([deployment("web", 3)], podgroup=podgroup("g", pin="9" * 5000)).value >= 1

    def test_custom_annotation(self):
        settings = Settings(min_member_annotation="example.com/gang-size")
        dep = workload("Deployment", "web", {"replicas": 3})
        dep["metadata"]["annotations"] = {"example.com/gang-size": "2", PIN: "9"}
        assert min_member_for(dep, settings=settings).value == 2


# ---------------------------------------------------------------------------
# a hand-made group several workloads point at (seed 003)


class TestShared:
    def trio(self, model_1: int = 1) -> list[dict]:
        return [deployment("app-server", 1), deployment("model-1", model_1), deployment("model-2", 1)]

    def test_seed_003_trio(self):
        mm = shared_min_member(self.trio())
        assert mm == MinMember(3, "deployment/app-server 1 + deployment/model-1 1 + deployment/model-2 1 = 3")

    def test_scale_up_and_back(self):
        assert shared_min_member(self.trio(1)).value == 3
        up = shared_min_member(self.trio(2))
        assert up.value == 4
        assert up.reason == "deployment/app-server 1 + deployment/model-1 2 + deployment/model-2 1 = 4"
        assert shared_min_member(self.trio(1)).value == 3

    def test_order_does_not_matter(self):
        assert shared_min_member(reversed(self.trio(2))) == shared_min_member(self.trio(2))

    def test_standalone_pods_only(self):
        # seed 003's first form: three labelled pods app-server, model-1, model-2
        assert shared_min_member([], standalone_pods=3) == MinMember(3, "3 standalone pods")
        assert shared_min_member([], standalone_pods=1) == MinMember(1, "1 standalone pod")

    def test_workloads_plus_standalone_pods(self):
        mm = shared_min_member([deployment("model-1", 1), deployment("model-2", 1)], standalone_pods=1)
        assert mm == MinMember(3, "deployment/model-1 1 + deployment/model-2 1 + 1 standalone pod = 3")

    def test_mixed_kinds(self):
        mm = shared_min_member(
            [deployment("app", 2), workload("StatefulSet", "db", {"replicas": 3, "podManagementPolicy": "Parallel"}),
             workload("Job", "warmup", job_template(4, 2))]
        )
        assert mm.value == 2 + 3 + 2

    def test_podgroup_pin_wins(self):
        mm = shared_min_member(self.trio(2), podgroup=podgroup("app-with-models", pin="3"))
        assert mm == MinMember(3, "pinned by podgang.io/min-member on podgroup/app-with-models", True)

    def test_workload_pin_counts_for_that_workload(self):
        mm = shared_min_member([deployment("app-server", 1), deployment("model-1", 5, pin="2"), deployment("model-2", 1)])
        assert mm.value == 4
        assert "deployment/model-1 2" in mm.reason

    def test_bad_podgroup_pin_is_ignored(self):
        assert shared_min_member(self.trio(), podgroup=podgroup("g", pin="zero")).value == 3

    def test_nothing_references_it(self):
        assert shared_min_member([]) == MinMember(1, "no workload or pod references it yet")

    def test_all_scaled_to_zero_is_never_below_one(self):
        mm = shared_min_member([deployment("a", 0), deployment("b", 0)])
        assert mm.value == 1
        assert mm.reason == "deployment/a 0 + deployment/b 0 = 0; a gang is never smaller than 1"


def test_a_job_whose_last_run_is_smaller_than_parallelism_asks_only_for_what_remains():
    job = {"kind": "Job", "metadata": {"name": "train"}, "spec": {"parallelism": 3, "completions": 5},
           "status": {"succeeded": 3}}
    assert rules.min_member_for(job) == rules.MinMember(
        2, "job/train parallelism 3 capped by the 2 remaining completions (5 - 3 succeeded)"
    )
    job["status"] = {"succeeded": 1}  # 4 to come: a full gang of 3 still fits
    assert rules.min_member_for(job).value == 3
    job["status"] = {"succeeded": 5}  # all done: never below 1
    assert rules.min_member_for(job).value == 1


def test_a_pin_on_the_owner_above_applies_to_the_workload_below():
    cron = {"kind": "CronJob", "metadata": {"name": "nightly", "annotations": {"podgang.io/min-member": "2"}}}
    run = {"kind": "Job", "metadata": {"name": "nightly-1"}, "spec": {"parallelism": 5}}
    assert rules.min_member_for(run, None, owners=[cron]) == MinMember(
        2, "pinned by podgang.io/min-member on cronjob/nightly", True
    )
    run["metadata"]["annotations"] = {"podgang.io/min-member": "4"}  # the nearest pin wins
    assert rules.min_member_for(run, None, owners=[cron]).value == 4
