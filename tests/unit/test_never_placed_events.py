"""The grouper says each never-placed verdict once per subject (not per pod, nor per
reconcile), takes it back with a Normal event when it no longer holds, and counts gangs per
verdict in its metric."""

from __future__ import annotations

from podgang import feasibility
from podgang.grouper.controller import NEVER_PLACED, PLACEABLE, Controller
from podgang.gang import Desired
from podgang.settings import DEFAULT


def sample(registry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


class Recorder:
    def __init__(self):
        self.said: list[tuple[str, str, str, str]] = []

    def emit(self, obj, reason, message, type="Normal"):
        self.said.append((obj["kind"], reason, type, message))


OVER = feasibility.Verdict(feasibility.OVER_QUOTA, "over the quota", "raise it", "KAI: NonPreemptibleOverQuota")
SMALL = feasibility.Verdict(feasibility.CLUSTER_TOO_SMALL, "9 pods, room for 3", "add nodes")
DEPLOYMENT = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "team", "uid": "u"}}
GROUP = {"kind": "PodGroup", "metadata": {"name": "pg-web-u", "namespace": "team"}}


def desired(*verdicts: feasibility.Verdict) -> Desired:
    return Desired("team", "pg-web-u", "owner", workloads=(DEPLOYMENT,), verdicts=verdicts)


def test_each_verdict_is_said_once_per_subject_and_taken_back_when_it_ends():
    events = Recorder()
    controller = Controller(None, DEFAULT, events=events)  # type: ignore[arg-type]
    key = "team/pg-web-u"
    controller._say_never(key, desired(OVER), None)  # before the PodGroup exists: the workload
    controller._say_never(key, desired(OVER), GROUP)  # then the PodGroup too, once
    controller._say_never(key, desired(OVER), GROUP)  # a reconcile more: nothing new
    assert [(k, r, t) for k, r, t, _ in events.said] == [("Deployment", NEVER_PLACED, "Warning"),
                                                         ("PodGroup", NEVER_PLACED, "Warning")]
    assert sample(controller.metrics.registry, "podgang_grouper_never_placed_gangs", verdict="over-quota") == 1

    events.said.clear()
    controller._say_never(key, desired(OVER, SMALL), GROUP)
    assert [(k, m) for k, _, _, m in events.said] == [("Deployment", SMALL.message), ("PodGroup", SMALL.message)]

    events.said.clear()
    controller._say_never(key, desired(SMALL), GROUP)  # the quota was raised
    assert [(k, r, t) for k, r, t, _ in events.said] == [("Deployment", PLACEABLE, "Normal"),
                                                         ("PodGroup", PLACEABLE, "Normal")]
    assert all("over-quota" in m for *_, m in events.said)
    assert sample(controller.metrics.registry, "podgang_grouper_never_placed_gangs", verdict="over-quota") == 0
    assert sample(controller.metrics.registry, "podgang_grouper_never_placed_gangs",
                  verdict="cluster-too-small") == 1

    controller._unwatch(key, contributions=True)  # the gang is gone: no longer counted
    assert sample(controller.metrics.registry, "podgang_grouper_never_placed_gangs",
                  verdict="cluster-too-small") == 0


def test_an_owner_less_pods_verdict_is_said_on_the_pod_and_its_podgroup():
    events = Recorder()
    controller = Controller(None, DEFAULT, events=events)  # type: ignore[arg-type]
    pod = {"kind": "Pod", "metadata": {"name": "solo", "namespace": "team"}}
    controller._say_never("team/pg-solo", Desired("team", "pg-solo", "owner-less", members=(pod,), verdicts=(OVER,)),
                          GROUP)
    assert sorted(k for k, *_ in events.said) == ["Pod", "PodGroup"]


# -- the webhook's facts: listed in the background, small kinds often, nodes seldom


class FakeApi:
    def __init__(self, answers):
        self.answers = answers
        self.asked: list[str] = []

    async def get(self, path, timeout=None, limit=None):
        self.asked.append(path)
        return self.answers[path]


async def test_the_webhook_lists_queues_often_and_nodes_seldom_and_never_for_an_admission():
    from podgang.backends import KAI
    from podgang.webhook.facts import ClusterFactsCache

    node = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "8"}}}
    queue = {"metadata": {"name": "default-queue"}, "spec": {"resources": {"cpu": {"quota": 0}}}}
    api = FakeApi({"/apis/scheduling.k8s.io/v1/priorityclasses": {"items": []},
                   "/apis/scheduling.run.ai/v2/queues": {"items": [queue]},
                   "/api/v1/nodes": {"items": [node]}})
    now = [0.0]
    cache = ClusterFactsCache(api, clock=lambda: now[0])  # type: ignore[arg-type]
    assert cache.get(KAI).nodes is None  # not listed yet: nothing known, and the admission does not wait
    await cache.refresh(KAI)
    facts = cache.get(KAI)
    assert [n.name for n in facts.nodes] == ["n1"] and facts.queue_bounds["default-queue"].quota["cpu"] == 0
    api.asked.clear()
    now[0] = 6.0  # queues and PriorityClasses are old, the nodes are not
    queue["spec"]["resources"]["cpu"]["quota"] = 4000
    await cache.refresh(KAI)
    assert sorted(api.asked) == ["/apis/scheduling.k8s.io/v1/priorityclasses", "/apis/scheduling.run.ai/v2/queues"]
    assert cache.get(KAI).queue_bounds["default-queue"].quota["cpu"] == 4
    assert [n.name for n in cache.get(KAI).nodes] == ["n1"]
    api.answers["/api/v1/nodes"] = {"metadata": {"continue": "more"}, "items": [node]}
    now[0] = 70.0
    await cache.refresh(KAI)
    assert cache.get(KAI).nodes is None  # a part of the nodes proves nothing
