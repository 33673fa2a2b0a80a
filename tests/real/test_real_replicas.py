"""Seed 004 in full on the real KAI (v0.17, ``../shared/kube-bin``): two LeaderWorkerSet
roles of multi-pod replicas sharing one hand-made PodGroup. podgang writes the tree (root →
roles → a leaf per replica), KAI binds only complete replicas, and podgang — not KAI, whose
v0.17 would call the tree stale and evict it — is the one evictor: a broken replica loses
only its own pods, a role without its minimum takes the gang with it.

The LWS controller is played as it makes pods: per group a leader (with LWS's labels),
then the group's workers."""

from __future__ import annotations

import contextlib
from typing import Any

from podgang.api import NotFound
from tests.realcluster import KAI_TEAM_QUEUE, Corner, FakeKubelet, bound, corner, holds, until
from tests.real.test_real_journeys import KAI, controller_ref, pod_template

LWS_API = "/apis/leaderworkerset.x-k8s.io/v1"
KAI_GROUPS = "/apis/scheduling.run.ai/v2alpha2"
NAME, GROUP_INDEX, WORKER_INDEX = ("leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index",
                                   "leaderworkerset.sigs.k8s.io/worker-index")
GROUP = "serve"


def members(here: Corner, app: str) -> dict[str, Any]:
    """A pod template of a member of the shared group: 4 CPU (a node of 8 holds two)."""
    template = pod_template(here, KAI, app, labels={"kai.scheduler/podgroup": GROUP,
                                                    "kai.scheduler/queue": KAI_TEAM_QUEUE})
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "4"}}
    return template


class PlayedLws:
    """What the LWS controller makes for one LeaderWorkerSet: a leader StatefulSet, per group
    its leader pod (group-index, worker-index 0), a worker StatefulSet the leader owns and
    its workers — each group leader first, then its workers."""

    def __init__(self, here: Corner, name: str, size: int):
        self.here, self.name, self.size = here, name, size
        self.lws: dict[str, Any] = {}
        self.leaders: dict[str, Any] = {}
        self.annotations: dict[str, str] = {}
        self.group_label: str | None = GROUP  # the shared group its template names (None: its own)

    async def create(self, replicas: int) -> None:
        await self.make(replicas)
        await self.fill()

    async def make(self, replicas: int) -> None:
        """The LeaderWorkerSet and its leader StatefulSet, no pod yet."""
        ns = self.here.namespace
        self.lws = await self.here.api.create(f"{LWS_API}/namespaces/{ns}/leaderworkersets", {
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": self.name, "namespace": ns, "annotations": self.annotations},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": self.size, "workerTemplate": self.template()}}})
        self.leaders = await self._statefulset(self.name, self.lws)

    async def fill(self) -> None:
        """Every group's pods, then the status of a settled LWS."""
        for group in range(self.lws["spec"]["replicas"]):
            await self.group(group)
        await self.settled()

    def template(self) -> dict[str, Any]:
        template = members(self.here, self.name)
        if self.group_label is None:
            del template["metadata"]["labels"]["kai.scheduler/podgroup"]
        return template

    async def scale(self, replicas: int) -> None:
        self.lws = await self.here.api.merge_patch(
            f"{LWS_API}/namespaces/{self.here.namespace}/leaderworkersets/{self.name}", {"spec": {"replicas": replicas}})

    async def settled(self) -> None:
        """The status LWS's controller writes once every group is made from the current spec
        (no rollout under way: a loss is then a loss)."""
        replicas = self.lws["spec"]["replicas"]
        self.lws = await self.here.api.merge_patch(
            f"{LWS_API}/namespaces/{self.here.namespace}/leaderworkersets/{self.name}/status",
            {"status": {"observedGeneration": self.lws["metadata"]["generation"], "replicas": replicas,
                        "updatedReplicas": replicas, "readyReplicas": replicas}})

    async def group(self, index: int) -> None:
        await self.workers(index, await self.leader(index))

    async def leader(self, index: int) -> dict[str, Any]:
        """A group's leader pod alone (LWS makes each leader before its workers)."""
        return await self._pod(f"{self.name}-{index}", self.leaders, index, 0)

    async def workers(self, index: int, leader: dict[str, Any]) -> None:
        """The worker StatefulSet the leader owns, and its pods."""
        workers = await self._statefulset(f"{self.name}-{index}", leader)
        for worker in range(1, self.size):
            await self._pod(f"{self.name}-{index}-{worker}", workers, index, worker)

    async def _statefulset(self, sts_name: str, owner: dict[str, Any]) -> dict[str, Any]:
        ns = self.here.namespace
        return await self.here.api.create(f"/apis/apps/v1/namespaces/{ns}/statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": sts_name, "namespace": ns, "ownerReferences": [controller_ref(owner)]},
            "spec": {"replicas": 0, "serviceName": self.name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": {"played": sts_name}},
                     "template": {"metadata": {"labels": {"played": sts_name}},
                                  "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]}}}})

    def pod_labels(self, group: int, worker: int) -> dict[str, str]:
        """The labels LWS's pod webhook writes on a group's pod (tests/real/test_real_operators.py
        checks them against the real LWS's)."""
        return {NAME: self.name, GROUP_INDEX: str(group), WORKER_INDEX: str(worker),
                "leaderworkerset.sigs.k8s.io/group-key": f"{self.name}{group}"}

    async def _pod(self, pod_name: str, owner: dict[str, Any], group: int, worker: int) -> dict[str, Any]:
        template = self.template()
        template["metadata"]["labels"].update(self.pod_labels(group, worker))
        template["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/size"] = str(self.size)
        # its StatefulSet is named as owner without controlling it: the real StatefulSet
        # controller, whose selector matches none of them, leaves the played pods alone
        ref = {**controller_ref(owner), "controller": False}
        return await self.here.api.create(f"/api/v1/namespaces/{self.here.namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {**template["metadata"], "name": pod_name, "ownerReferences": [ref]},
            "spec": template["spec"]})


def by_replica(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in pods:
        labels = p["metadata"].get("labels") or {}
        if not p["metadata"].get("deletionTimestamp") and NAME in labels:
            out.setdefault(f"{labels[NAME]}-{labels[GROUP_INDEX]}", []).append(p)
    return out


async def placement(here: Corner) -> dict[str, int]:
    """Bound pods per replica (KAI's binder binds a gang's pods one by one: a replica is
    seen in part while its binding is under way, never once it settles)."""
    return {replica: len(bound(pods)) for replica, pods in by_replica(await here.pods()).items()}


def whole(placed: dict[str, int], size: int = 2) -> list[str]:
    assert all(n in (0, size) for n in placed.values()), f"a replica bound in part: {placed}"
    return [r for r, n in placed.items() if n == size]


async def serve_group(here: Corner) -> dict[str, Any]:
    return await here.api.get(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups/{GROUP}")


async def test_kai_binds_only_complete_replicas_and_podgang_alone_evicts_by_the_tree(cluster, podgang):
    async with corner(cluster, "replicas", nodes=3) as here, FakeKubelet(here):
        # a hand-made group the two roles share; KAI's own default grace period (no -1s) until podgang writes it
        await here.api.create(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": here.namespace},
            "spec": {"minMember": 1, "queue": KAI_TEAM_QUEUE}})
        prefill, decode = PlayedLws(here, "prefill", 2), PlayedLws(here, "decode", 2)
        await prefill.create(2)
        await decode.create(2)

        async def the_tree():
            spec = (await serve_group(here))["spec"]
            leaves = {e["name"]: e.get("parent") for e in spec.get("subGroups") or [] if "parent" in e}
            return (spec.get("minSubGroup") == 2 and "minMember" not in spec and spec.get("stalenessGracePeriod") == "-1s"
                    and leaves == {"prefill-0": "prefill", "prefill-1": "prefill", "decode-0": "decode",
                                   "decode-1": "decode"})
        await until(the_tree, "podgang's tree in the shared group: root minSubGroup 2, a leaf per replica, -1s")
        pods = await here.pods()
        assert {p["metadata"]["labels"]["kai.scheduler/subgroup-name"] for p in pods} == {
            "prefill-0", "prefill-1", "decode-0", "decode-1"}  # every pod in its replica's leaf

        # room for 6 pods of 8: three whole replicas, at least one of each role, none in part
        async def six_bound():
            placed = await placement(here)
            return sum(placed.values()) == 6 and placed
        placed = await until(six_bound, "six pods bound")
        complete = whole(placed)  # three whole replicas, none in part
        assert len(complete) == 3 and {r.rsplit("-", 1)[0] for r in complete} == {"prefill", "decode"}, placed
        uids = {p["metadata"]["uid"] for p in bound(await here.pods())}

        async def still_the_same():
            now = await placement(here)
            return now == placed and {p["metadata"]["uid"] for p in bound(await here.pods())} == uids
        # KAI v0.17 calls the tree stale (a leaf below its minMember: it says StaleJob) and, but for
        # the -1s podgang wrote, would evict all six within its 60s grace period
        await holds(still_the_same, "the same six pods bound, none evicted", 120)

        # room for more: the fourth replica is bound whole
        await here.add_node()
        await until(lambda: _all_whole(here, 4), "all four replicas bound whole")

        # decode scaled 2 -> 3: its leaf is added with its pods (once all are made: KAI would place a
        # leader alone), the new replica placed whole once there is room
        await decode.scale(3)
        await decode.group(2)

        async def leaf_added():
            spec = (await serve_group(here))["spec"]
            return "decode-2" in {e["name"] for e in spec["subGroups"]} and spec["minSubGroup"] == 2
        await until(leaf_added, "the leaf decode-2 in the group")
        await decode.settled()
        await here.add_node()
        await until(lambda: _all_whole(here, 5), "decode-2 bound whole")

        # one worker of prefill-1 deleted: after the grace period only prefill-1's leader goes
        before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in bound(await here.pods())}
        await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/prefill-1-1", {"gracePeriodSeconds": 0})
        await here.wait_events("ReplicaEvicted", "prefill-1")

        async def only_prefill_1_gone():
            now = {p["metadata"]["name"]: p["metadata"]["uid"] for p in bound(await here.pods())
                   if not p["metadata"].get("deletionTimestamp")}
            kept = {n: u for n, u in before.items() if not n.startswith("prefill-1")}
            return "prefill-1" not in now and all(now.get(n) == u for n, u in kept.items())
        await until(only_prefill_1_gone, "prefill-1's leader evicted, every other replica untouched")

        # every decode replica lost: the role is below its minimum, the gang is stale, the rest evicted —
        # judged while its leaves are listed (no complete replica), or once none of its pods is left (the
        # role is then one part needing its minimum's pods, as before any was made)
        for p in await here.pods(**{NAME: "decode"}):
            with contextlib.suppress(NotFound):  # gone already: its replica was broken and evicted
                await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/{p['metadata']['name']}",
                                      {"gracePeriodSeconds": 0})
        stale = await here.wait_events("GangStale", "decode: 0 of minimum")
        assert any(said in stale[0]["message"] for said in (
            "role decode: 0 of minimum 1 complete replicas", "decode: 0 of minimum 2 active")), stale[0]["message"]
        await here.wait_events("GangEvicted")

        async def prefill_evicted():
            return not [p for p in await here.pods(**{NAME: "prefill"}) if not p["metadata"].get("deletionTimestamp")]
        await until(prefill_evicted, "the prefill pods evicted with the stale gang")


async def _all_whole(here: Corner, replicas: int) -> bool:
    placed = await placement(here)
    return sum(placed.values()) == 2 * replicas and len(whole(placed)) == replicas


async def test_kai_a_hand_made_groups_own_tree_is_left_as_written_and_kais_eviction_is_said(cluster, podgang):
    """Issue 23 item 2: a hand-made KAI group whose user wrote a tree (root minSubGroup,
    subgroups each with its minimum). podgang writes no field of it — never a minMember
    beside minSubGroup, which KAI refuses — and warns that KAI v0.17 would evict the gang."""
    async with corner(cluster, "usertree", nodes=1) as here, FakeKubelet(here):
        spec = {"minSubGroup": 2, "queue": KAI_TEAM_QUEUE,
                "subGroups": [{"name": "web", "minMember": 2}, {"name": "cache", "minMember": 1}]}
        await here.api.create(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "mine", "namespace": here.namespace}, "spec": spec})
        for name, replicas in (("web", 3), ("cache", 1)):
            template = pod_template(here, KAI, name, labels={"kai.scheduler/podgroup": "mine",
                                                             "kai.scheduler/subgroup-name": name})
            await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": here.namespace},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": template}})
        said = await here.wait_events("PodGroupProblem", "KAI v0.17 judges a tree stale")
        assert "set spec.stalenessGracePeriod: -1s on the group" in said[0]["message"]

        async def all_bound():
            return len(bound(await here.pods())) == 4
        await until(all_bound, "the four pods bound by KAI under the user's tree")
        group = await here.api.get(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups/mine")
        assert group["spec"] == spec  # as written: no minMember added, nothing resized
        managers = {m.get("manager") for m in group["metadata"].get("managedFields") or []}
        assert not any(m and m.startswith("podgang") for m in managers), managers


async def test_kai_a_lone_lws_asking_for_two_complete_replicas_gets_two_whole_and_keeps_them(cluster, podgang):
    """A lone LWS of 3 replicas × 2 pods with podgang.io/min-available: 2, room for 4 pods:
    one group, a leaf per replica; two replicas bound whole, the third waits whole, and
    nothing is evicted past KAI's own grace period."""
    async with corner(cluster, "lonelws", nodes=2) as here, FakeKubelet(here):
        serve = PlayedLws(here, "serve", 2)
        serve.annotations = {"podgang.io/min-available": "2"}
        serve.group_label = None
        await serve.create(3)
        group = f"pg-serve-{serve.lws['metadata']['uid']}"

        async def the_tree():
            try:
                spec = (await here.api.get(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups/{group}"))["spec"]
            except NotFound:
                return False
            return (spec.get("minSubGroup") == 2 and "minMember" not in spec
                    and [e["name"] for e in spec["subGroups"]] == ["serve-0", "serve-1", "serve-2"])
        await until(the_tree, "one group for the LWS: minSubGroup 2, a leaf per replica")
        assert {p["metadata"]["annotations"]["pod-group-name"] for p in await here.pods()} == {group}

        async def four_bound():
            placed = await placement(here)
            return sum(placed.values()) == 4 and placed
        placed = await until(four_bound, "four pods bound")
        assert len(whole(placed)) == 2, placed
        await holds(lambda: _same_placement(here, placed), "two whole replicas kept, none evicted", 75)


async def test_kai_an_lws_and_a_deployment_share_a_gang_and_each_role_gets_its_minimum(cluster, podgang):
    """prefill: an LWS of 2 replicas × 2 pods; decode: a Deployment of 3 (at least 1); room
    for 4: a whole prefill replica and decode pods, never prefill alone or a replica in part."""
    async with corner(cluster, "lwsdeploy", nodes=2) as here, FakeKubelet(here):
        await here.api.create(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": here.namespace},
            "spec": {"minMember": 1, "queue": KAI_TEAM_QUEUE}})
        template = members(here, "decode")
        await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "decode", "namespace": here.namespace,
                         "annotations": {"podgang.io/min-available": "1"}},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "decode"}}, "template": template}})
        prefill = PlayedLws(here, "prefill", 2)
        await prefill.create(2)

        async def four_bound():
            pods = [p for p in await here.pods() if not p["metadata"].get("deletionTimestamp")]
            return len(bound(pods)) == 4 and pods
        pods = await until(four_bound, "the room for four filled")
        placed = await placement(here)
        # one whole prefill replica and two decode pods: never two prefill replicas without decode, none in part
        assert len(whole(placed)) == 1, placed
        assert len(bound([p for p in pods if p["metadata"]["labels"].get("app") == "decode"])) == 2
        spec = (await serve_group(here))["spec"]
        assert spec["minSubGroup"] == 2 and {"name": "decode", "minMember": 1} in spec["subGroups"]
        await holds(lambda: _same_placement(here, placed), "kept, none evicted", 75)


async def _same_placement(here: Corner, placed: dict[str, int]) -> bool:
    return await placement(here) == placed


# ---------------------------------------------------------------------------- issue 30 item 4: the roles' order


async def five_pods_of_room(here: Corner, annotations: dict[str, str] | None = None) -> None:
    """Room for exactly 5 pods of 4 CPU (two nodes of 8, one of 4) and the hand-made group
    ``serve`` the roles share, minMember 1 as a user writes it."""
    await here.add_node(cpu="4")
    await here.api.create(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups", {
        "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
        "metadata": {"name": GROUP, "namespace": here.namespace, "annotations": annotations or {}},
        "spec": {"minMember": 1, "queue": KAI_TEAM_QUEUE}})


async def serve_spec(here: Corner) -> tuple[int | None, dict[str, dict[str, Any]]]:
    spec = (await serve_group(here))["spec"]
    return spec.get("minSubGroup"), {e["name"]: e for e in spec.get("subGroups") or []}


async def one_whole_replica_of_each(here: Corner) -> None:
    """Four pods bound — one whole prefill replica and one whole decode replica, none in
    part — and kept so, with room for a fifth pod that no whole replica fits."""
    async def four_bound():
        placed = await placement(here)
        return sum(placed.values()) == 4 and placed
    placed = await until(four_bound, "four pods bound")
    assert sorted(r.rsplit("-", 1)[0] for r in whole(placed)) == ["decode", "prefill"], placed
    await holds(lambda: _same_placement(here, placed), "one whole replica of each kept, nothing more", 30)


async def test_kai_roles_one_after_the_other_each_get_a_whole_replica_when_the_group_requires_them(cluster, podgang):
    """The seed's "2 prefills before 1 decode": prefill and its pods come while decode's LWS
    does not exist yet. The group declares both roles (podgang.io/required-roles): decode is
    part of the gang from the start, so no prefill replica is placed before decode's come,
    and then one whole replica of each is — not prefill's two, with decode never fitting."""
    async with corner(cluster, "roles", nodes=2) as here, FakeKubelet(here):
        await five_pods_of_room(here, {"podgang.io/required-roles": "prefill,decode"})
        prefill, decode = PlayedLws(here, "prefill", 2), PlayedLws(here, "decode", 2)
        await prefill.create(2)

        async def prefill_listed():
            return {"prefill-0", "prefill-1"} <= set((await serve_spec(here))[1])
        await until(prefill_listed, "the grouper wrote prefill's replicas into the group")

        async def nothing_bound():
            return not any((await placement(here)).values())
        await holds(nothing_bound, "no prefill pod placed while decode has none", 10)
        root, parts = await serve_spec(here)  # decode a part of the gang before its LWS exists
        assert root == 2 and parts["decode"] == {"name": "decode", "minMember": 1}, parts
        group = await serve_group(here)
        assert group["metadata"]["annotations"]["podgang.io/awaited-roles"] == "decode"

        # issue 44: decode's LWS well before its pods, then its leaders before their workers (as the
        # real LWS makes them). decode stays a part KAI counts all along: no gap for prefill
        await decode.make(2)

        async def decode_a_part_of_its_pods():
            return (await serve_spec(here))[1].get("decode") == {"name": "decode", "minMember": 2}
        await until(decode_a_part_of_its_pods, "decode's LWS a part needing its minimum's pods (1 replica × 2)")
        await holds(nothing_bound, "no prefill pod placed while decode's LWS has no pod", 10)
        leaders = [await decode.leader(index) for index in range(2)]

        async def decode_of_replicas():
            return (await serve_spec(here))[1].get("decode") == {"name": "decode", "minSubGroup": 1}
        await until(decode_of_replicas, "decode's leaders made: decode a role of complete replicas")
        await holds(nothing_bound, "no pod placed while decode's leaders wait for their workers", 10)
        root, parts = await serve_spec(here)  # the replica it needs listed, needing both its pods
        assert root == 2 and parts.get("decode-0") == {"name": "decode-0", "parent": "decode", "minMember": 2}, parts
        for index, leader in enumerate(leaders):
            await decode.workers(index, leader)
        await decode.settled()
        await one_whole_replica_of_each(here)
        root, parts = await serve_spec(here)
        assert root == 2 and "minMember" not in parts["decode"] and {"decode-0", "decode-1"} <= set(parts)
        assert "podgang.io/awaited-roles" not in (await serve_group(here))["metadata"].get("annotations", {})


async def test_kai_a_declared_deployment_role_holds_the_other_roles_pods_until_it_comes(cluster, podgang):
    """The flat form: prefill a Deployment of 2 (at least 1), decode a Deployment not made yet;
    room for 2 pods. decode's part (minimum 1, counted in minMember) keeps prefill's pods
    Pending; once decode comes, one of each is bound — not prefill's two."""
    async with corner(cluster, "flatroles", nodes=1) as here, FakeKubelet(here):
        await here.api.create(f"{KAI_GROUPS}/namespaces/{here.namespace}/podgroups", {
            "apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": GROUP, "namespace": here.namespace,
                         "annotations": {"podgang.io/required-roles": "prefill,decode"}},
            "spec": {"minMember": 1, "queue": KAI_TEAM_QUEUE}})

        async def declared_parts():  # a gang of its declared roles from the start, before any workload
            spec = (await serve_group(here))["spec"]
            return {s["name"] for s in spec.get("subGroups") or []} == {"prefill", "decode"}
        await until(declared_parts, "the group made a gang of its two declared roles by the grouper")

        async def deployment(name: str, replicas: int, paused: bool = False) -> None:
            await here.api.create(f"/apis/apps/v1/namespaces/{here.namespace}/deployments", {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": here.namespace,
                             "annotations": {"podgang.io/min-available": "1"}},
                "spec": {"replicas": replicas, "paused": paused, "selector": {"matchLabels": {"app": name}},
                         "template": members(here, name)}})
        await deployment("prefill", 2)

        async def prefill_seen():  # its pods made, and the grouper has sized the group for prefill
            notes = (await serve_group(here))["metadata"].get("annotations", {})
            return len(await here.pods(app="prefill")) == 2 and "podgang.io/followed-min-member" in notes
        await until(prefill_seen, "prefill's two pods made and the group sized by the grouper")

        async def prefill_pending():
            return not bound(await here.pods(app="prefill"))
        await holds(prefill_pending, "prefill's two pods Pending while decode has none", 10)
        spec = (await serve_group(here))["spec"]  # decode's part before decode exists, counted in minMember
        assert spec["minMember"] == 2 and {"name": "decode", "minMember": 1} in spec["subGroups"], spec

        # issue 44: decode's Deployment well before its pods (created paused: the controller makes no
        # ReplicaSet until it resumes) — still a part needing its pod, prefill's still Pending
        await deployment("decode", 1, paused=True)

        async def decode_filled():
            notes = (await serve_group(here))["metadata"].get("annotations", {})
            return "podgang.io/awaited-roles" not in notes
        await until(decode_filled, "decode's Deployment fills its declared role")
        await holds(prefill_pending, "prefill's pods Pending while decode's Deployment has no pod", 10)
        spec = (await serve_group(here))["spec"]
        assert spec["minMember"] == 2 and {"name": "decode", "minMember": 1} in spec["subGroups"], spec
        await here.api.merge_patch(f"/apis/apps/v1/namespaces/{here.namespace}/deployments/decode",
                                   {"spec": {"paused": False}})

        async def one_of_each():
            pods = bound(await here.pods())
            return len(pods) == 2 and sorted(p["metadata"]["labels"]["app"] for p in pods)
        assert await until(one_of_each, "two pods bound") == ["decode", "prefill"]


async def test_kai_roles_applied_together_each_get_a_whole_replica_without_the_annotation(cluster, podgang):
    """Both LWS objects before any pod, no podgang.io/required-roles: the grouper knows both
    roles before any pod is placed, and KAI places one whole replica of each."""
    async with corner(cluster, "together", nodes=2) as here, FakeKubelet(here):
        await five_pods_of_room(here)
        prefill, decode = PlayedLws(here, "prefill", 2), PlayedLws(here, "decode", 2)
        await prefill.make(2)
        await decode.make(2)

        async def both_roles():
            root, parts = await serve_spec(here)
            return root == 2 and {"prefill", "decode"} <= set(parts)
        await until(both_roles, "the group needs both roles")
        await prefill.fill()
        await decode.fill()
        await one_whole_replica_of_each(here)
