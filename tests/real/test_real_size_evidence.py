"""Whose number is a hand-made group's minMember? Decided from the cluster's evidence, on a
real kube-apiserver, with the live grouper started when a user's would be.

Seed 003 — a group written at its Deployments' total, scaled before podgang first looked
(podgang installed, restarted or slow after the scale) — is followed to the new total; the
scheduler-plugins demo — a group of 3 applied with a ReplicaSet of 6 — is the user's elastic
gang, kept as written across a restart and a scale. The grouper runs in-process in the
namespace the session's own podgang leaves alone (``tests/conftest.py``); the real
controller-manager makes the ReplicaSets and pods, and ``kubectl scale`` scales, as a user
would (the apiserver records no time on a scale subresource write: the rule must cope).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator

import yaml

from podgang.api import Api, ApiError, NotFound, make_api_client
from podgang.grouper import cli
from podgang.grouper.controller import Controller
from tests.grouper_support import args, deployment, podgroup, template
from tests.realcluster import KAI_TEAM_QUEUE, ROOT, TEST_OWN_NAMESPACE, FakeKubelet, bound, corner, until
from tests.real.test_real_journeys import KAI, pod_template, wait_size

NS = TEST_OWN_NAMESPACE
CRD = ROOT / "tests" / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml"
GROUPS = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"


@contextlib.asynccontextmanager
async def apiserver(cluster) -> AsyncIterator[Api]:
    """The real apiserver with KAI's PodGroup CRD and this file's namespace."""
    client = await make_api_client(cluster.kubeconfig)
    api = Api(client, timeout=10)
    try:
        for path, obj in (("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(CRD.read_text())),
                          ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})):
            try:
                await api.create(path, obj)
            except ApiError as exc:
                if exc.status != 409:  # made by another test of the session
                    raise
        yield api
    finally:
        await client.close()


@contextlib.asynccontextmanager
async def grouper(cluster) -> AsyncIterator[list[Controller]]:
    """``podgang grouper`` on this file's namespace, from now until the block ends."""
    stop = asyncio.Event()
    started: list[Controller] = []
    task = asyncio.create_task(cli.serve(args(kubeconfig=cluster.kubeconfig, namespaces=[NS]), stop=stop,
                                         on_controller=started.append))
    try:
        yield started
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 15) in (0, 1)


async def put(api: Api, obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].pop("uid", None)
    obj.pop("status", None)
    kind = obj["kind"]
    path = GROUPS if kind == "PodGroup" else f"/apis/apps/v1/namespaces/{NS}/{kind.lower()}s"
    return await api.create(path, obj)


async def group(api: Api, name: str) -> dict[str, Any] | None:
    try:
        return await api.get(f"{GROUPS}/{name}")
    except NotFound:
        return None


async def wait_group(api: Api, name: str, what: str, check) -> dict[str, Any]:
    async def found():
        got = await group(api, name)
        return got if got is not None and check(got) else None
    return await until(found, what, 20)


def notes(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


async def events(api: Api, reason: str, name: str) -> list[dict[str, Any]]:
    items = (await api.get(f"/api/v1/namespaces/{NS}/events")).get("items") or []
    return [e for e in items if e.get("reason") == reason and (e.get("involvedObject") or {}).get("name") == name]


async def test_seed_003_scaled_before_podgang_first_looked_is_followed(cluster):
    """A group written at its three Deployments' total (3); ``kubectl scale`` of one to 2
    before any grouper runs (podgang installed after the scale). The grouper's first look
    finds 3 below the total 4 — and the scale after the group was written: an old total, so
    it follows to 4, says why, and follows the next scale too."""
    async with apiserver(cluster) as api:
        await put(api, podgroup("seed003-late", 3, ns=NS))
        for name in ("s3-app-server", "s3-model-1", "s3-model-2"):
            await put(api, deployment(name, 1, group="seed003-late", ns=NS))
        cluster.kubectl("-n", NS, "scale", "deployment/s3-model-1", "--replicas=2")
        async with grouper(cluster):
            followed = await wait_group(api, "seed003-late", "the group followed to 4",
                                        lambda g: g["spec"].get("minMember") == 4)
            assert notes(followed).get("podgang.io/followed-min-member") == "4"
            said = await until(lambda: events(api, "MinMemberChanged", "seed003-late"), "a MinMemberChanged event")
            assert "minMember 3 → 4: deployment s3-model-1 was scaled to 2 after the group was written with 3" in (
                said[0]["message"]), said[0]["message"]
            cluster.kubectl("-n", NS, "scale", "deployment/s3-model-2", "--replicas=3")
            await wait_group(api, "seed003-late", "the group followed to 6", lambda g: g["spec"].get("minMember") == 6)


async def test_a_script_scaling_right_after_it_applied_is_followed_whenever_the_grouper_looks(cluster):
    """The grouper running from the start; a script applies a group of 3 and three
    Deployments of 1, then scales each to 2 at once (an HPA would too). Whether the grouper's
    first look came before or after the scales, the group ends at 6, followed."""
    async with apiserver(cluster) as api, grouper(cluster):
        await put(api, podgroup("script", 3, ns=NS))
        for name in ("sc-a", "sc-b", "sc-c"):
            await put(api, deployment(name, 1, group="script", ns=NS))
        cluster.kubectl("-n", NS, "scale", "deployment/sc-a", "deployment/sc-b", "deployment/sc-c", "--replicas=2")
        got = await wait_group(api, "script", "the group followed to 6", lambda g: g["spec"].get("minMember") == 6)
        assert notes(got).get("podgang.io/followed-min-member") == "6"


async def test_the_demo_elastic_gang_stays_as_written_across_a_restart_and_a_scale(cluster):
    """The scheduler-plugins demo, applied together: a group of 3 and a ReplicaSet of 6. The
    grouper judges it the user's elastic gang at its first look, records it and says so once;
    restarted, and the ReplicaSet scaled to 8 meanwhile, it still leaves 3."""
    async with apiserver(cluster) as api:
        await put(api, podgroup("demo-elastic", 3, ns=NS))
        await put(api, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                        "metadata": {"name": "demo-elastic", "namespace": NS},
                        "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "demo-elastic"}},
                                 "template": template("demo-elastic", labels={"app": "demo-elastic"})}})
        async with grouper(cluster):
            judged = await wait_group(api, "demo-elastic", "the elastic gang recorded",
                                      lambda g: "podgang.io/elastic-min-member" in notes(g))
            assert judged["spec"]["minMember"] == 3 and notes(judged)["podgang.io/elastic-min-member"] == "3"
            said = await until(lambda: events(api, "ElasticGang", "demo-elastic"), "an ElasticGang event")
            assert "no member was scaled since the group was written" in said[0]["message"], said[0]["message"]
        cluster.kubectl("-n", NS, "scale", "replicaset/demo-elastic", "--replicas=8")
        async with grouper(cluster) as started:
            async def first_reconcile_done():  # it began with the ReplicaSet at 8
                return bool(started) and started[-1].initial_reconcile_done
            await until(first_reconcile_done, "the restarted grouper's first complete reconcile", 30)
            kept = await group(api, "demo-elastic")
            assert kept is not None and kept["spec"]["minMember"] == 3, kept
            assert len(await events(api, "ElasticGang", "demo-elastic")) == 1  # said once, at the first look


async def test_a_placeholder_of_one_is_followed(cluster):
    """A group written ``minMember: 1`` for Deployments of 2 and 3: a gang of 1 gangs nothing —
    a placeholder, followed to 5, and then with every scale."""
    async with apiserver(cluster) as api:
        await put(api, podgroup("placeholder", 1, ns=NS))
        await put(api, deployment("ph-prefill", 2, group="placeholder", ns=NS))
        await put(api, deployment("ph-decode", 3, group="placeholder", ns=NS))
        async with grouper(cluster):
            got = await wait_group(api, "placeholder", "the placeholder followed to 5",
                                   lambda g: g["spec"].get("minMember") == 5)
            assert {s["name"]: s["minMember"] for s in got["spec"]["subGroups"]} == {"ph-prefill": 2, "ph-decode": 3}
            cluster.kubectl("-n", NS, "scale", "deployment/ph-decode", "--replicas=4")
            await wait_group(api, "placeholder", "the placeholder followed to 6",
                             lambda g: g["spec"].get("minMember") == 6)



async def test_kai_prefill_and_decode_naming_a_placeholder_get_subgroups_follow_scale_and_go_stale(cluster, podgang):
    """Seed 004's single-node case as users write it: prefill and decode Deployments naming one
    group written ``minMember: 1``. podgang follows it (a placeholder), gives each Deployment
    its subgroup, follows a scale of decode, and once every decode pod is lost (their node
    gone) judges the gang stale and evicts the prefill pods left — a gang of 1 would have
    kept them holding their GPUs for ever."""
    async with corner(cluster, "placeholder", nodes=2) as here, FakeKubelet(here):
        prefill_node, decode_node = here.nodes
        await here.api.create(f"{KAI.podgroups}/namespaces/{here.namespace}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "serve", "namespace": here.namespace},
            "spec": {"minMember": 1, "queue": KAI_TEAM_QUEUE}})
        for name, replicas, node in (("prefill", 2, prefill_node), ("decode", 2, decode_node)):
            body = pod_template(here, KAI, name, gpus=1, labels={"kai.scheduler/podgroup": "serve"},
                                annotations={"pod-group-name": "serve"})
            body["spec"]["nodeSelector"] = {**body["spec"]["nodeSelector"], "kubernetes.io/hostname": node}
            await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": here.namespace, "labels": KAI.workload_labels},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": body}})
        placed = await wait_size(here, KAI, "serve", 4)
        assert {s["name"]: s["minMember"] for s in placed["spec"]["subGroups"]} == {"prefill": 2, "decode": 2}
        # the grouper has seen it whole (else a loss before its first look is a gang still being placed)
        await podgang.wait_logged("placed: 4 of minMember 4 members active", here.namespace)
        cluster.kubectl("-n", here.namespace, "scale", "deployment/decode", "--replicas=3")
        await wait_size(here, KAI, "serve", 5)
        await until(lambda: _running(here, 5), "the five pods running")
        decode = await here.pods(app="decode")
        placed_prefill = {p["metadata"]["name"] for p in bound(await here.pods(app="prefill"))}
        assert len(placed_prefill) == 2
        await here.remove_node(decode_node)
        for p in decode:
            await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/{p['metadata']['name']}",
                                  {"gracePeriodSeconds": 0})
        await here.wait_events("GangStale", "decode")
        await here.wait_events("GangEvicted")

        async def prefill_evicted():
            return not {p["metadata"]["name"] for p in await here.pods(app="prefill")} & placed_prefill
        await until(prefill_evicted, "the prefill pods left evicted")


async def _running(here, count: int) -> bool:
    pods = [p for p in await here.pods() if not p["metadata"].get("deletionTimestamp")]
    return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
