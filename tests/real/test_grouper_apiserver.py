"""``podgang grouper`` against a real kube-apiserver + etcd, run in-process.

The cluster is the session's real control plane (``tests/realcluster.py``; skipped with
one reason where ``../shared/kube-bin`` is absent). The test plays the Deployment
controller's objects itself (ReplicaSets and pods), as with the emulator; what the real
server adds is the true wire format, the KAI PodGroup CRD's schema, resourceVersion
semantics, merge patches and watch behaviour. Its namespace is left out of the session's
own podgang install (``tests/conftest.py``), so this grouper is the only one acting there.
"""

from __future__ import annotations

import asyncio

import yaml

from podgang.api import Api, ApiError, make_api_client
from podgang.grouper import cli
from podgang.kinds import OWNER_KINDS
from tests.grouper_support import args, deployment, owned_group, podgroup
from tests.realcluster import ROOT, TEST_OWN_NAMESPACE, until

POLL_INTERVAL = 0.1  # seconds between two looks of a poll with a deadline

NS = TEST_OWN_NAMESPACE
CRD = ROOT / "tests" / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml"


async def test_real_apiserver_shared_group_and_deployment_group(cluster):
    api_client = await make_api_client(cluster.kubeconfig)
    api = Api(api_client, timeout=10)
    try:
        crd = yaml.safe_load(CRD.read_text())
        try:
            await api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        except ApiError as exc:
            if exc.status != 409:
                raise

        async def established():
            try:
                got = await api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.run.ai")
            except ApiError:
                return False
            return any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (got.get("status") or {}).get("conditions") or [])

        await until(established, "the PodGroup CRD was not established", 30)
        try:
            await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        except ApiError as exc:
            if exc.status != 409:  # tests/real/test_real_backfill.py uses it too
                raise

        async def put(obj):
            kind = obj["kind"]
            if kind == "PodGroup":
                path = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
            else:
                path = OWNER_KINDS[kind].path(NS) if kind in OWNER_KINDS else f"/api/v1/namespaces/{NS}/pods"
            obj["metadata"].pop("uid", None)
            status = obj.pop("status", None)
            created = await api.create(path, obj)
            if status and kind != "PodGroup":
                created = await api.merge_patch(f"{path}/{created['metadata']['name']}/status", {"status": status})
            return created

        async def min_member(name):
            try:
                return (await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/{name}"))[
                    "spec"].get("minMember")
            except ApiError:
                return None

        # the real controller-manager makes the ReplicaSets and pods (no webhook here: the
        # grouper backfills the Deployment's pods into their group)
        await put(podgroup("shared", 3, ns=NS))
        for name in ("app-server", "model-1", "model-2"):
            await put(deployment(name, 1, group="shared", ns=NS))
        web = await put(deployment("web", 2, ns=NS))

        stop = asyncio.Event()
        task = asyncio.create_task(cli.serve(args(kubeconfig=cluster.kubeconfig, namespaces=[NS]), stop=stop))
        try:
            await until(lambda: _eq(min_member(owned_group(web)), 2), "the Deployment's group was not created", 15)
            pg = await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/{owned_group(web)}")
            assert pg["metadata"]["ownerReferences"][0]["uid"] == web["metadata"]["uid"]
            assert pg["metadata"]["labels"]["podgang.io/managed-by"] == "podgang"

            async def followed():  # found at its members' total (3): podgang follows it from now on
                shared = await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/shared")
                return (shared["metadata"].get("annotations") or {}).get("podgang.io/followed-min-member") == "3"

            await until(followed, "the shared group was not marked followed", 5)
            await api.merge_patch(f"/apis/apps/v1/namespaces/{NS}/deployments/model-1", {"spec": {"replicas": 2}})
            await until(lambda: _eq(min_member("shared"), 4), "shared minMember did not become 4", 5)
            await api.merge_patch(f"/apis/apps/v1/namespaces/{NS}/deployments/model-1", {"spec": {"replicas": 1}})
            await until(lambda: _eq(min_member("shared"), 3), "shared minMember did not go back to 3", 5)

            async def changed_event():
                evs = await api.get(f"/api/v1/namespaces/{NS}/events")
                return [e for e in evs.get("items") or [] if e.get("reason") == "MinMemberChanged"
                        and "deployment model-1 scaled 1 → 2" in e.get("message", "")]

            await until(changed_event, "no MinMemberChanged event", 5)
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 15) in (0, 1)
    finally:
        await api_client.close()


async def _eq(awaitable, value):
    return (await awaitable) == value
