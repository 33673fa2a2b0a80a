"""Tests for tests/emulator/, driven through the real kubernetes_asyncio client and
raw aiohttp, checked against the recorded apiserver responses in tests/fixtures/api/."""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import orjson
import pytest
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio import watch
from kubernetes_asyncio.client import ApiClient, ApiException, AppsV1Api, CoreV1Api, CustomObjectsApi

from hypothesis import given
from hypothesis import strategies as st

from tests.emulator import KubeEmulator, merge_patch, parse_label_selector
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "api"
NS = "team-a"
PG = ("scheduling.run.ai", "v2alpha2")


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def pod(name: str, ns: str = NS, labels: dict | None = None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


def deployment(name: str, replicas: int = 3, ns: str = NS) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}


def podgroup(name: str, min_member: int = 2, ns: str = NS) -> dict:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member}}


def error_body(exc: ApiException) -> dict:
    return json.loads(exc.body)


@pytest.fixture
async def api(emu):
    async with ApiClient(emu.configuration()) as client:
        yield client


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


async def read_events(resp: aiohttp.ClientResponse, n: int) -> list[dict]:
    events = []
    async with asyncio.timeout(5):
        while len(events) < n:
            line = await resp.content.readline()
            assert line, f"stream ended after {events}"
            events.append(orjson.loads(line))
    return events


# --------------------------------------------------------------------------- lifecycle, discovery

async def test_discovery_and_version(emu, http):
    async with http.get(f"{emu.url}/version") as r:
        assert (await r.json())["gitVersion"].startswith("v1.")
    async with http.get(f"{emu.url}/api") as r:
        assert (await r.json())["versions"] == ["v1"]
    async with http.get(f"{emu.url}/api/v1") as r:
        names = {x["name"]: x for x in (await r.json())["resources"]}
    assert names["pods"]["kind"] == "Pod" and names["pods"]["namespaced"]
    assert names["pods/eviction"]["group"] == "policy"
    assert not names["namespaces"]["namespaced"]
    async with http.get(f"{emu.url}/apis") as r:
        groups = {g["name"] for g in (await r.json())["groups"]}
    assert {"apps", "scheduling.run.ai", "leaderworkerset.x-k8s.io", "jobset.x-k8s.io"} <= groups
    async with http.get(f"{emu.url}/apis/apps/v1") as r:
        data = await r.json()
    assert data["kind"] == "APIResourceList" and data["groupVersion"] == "apps/v1"
    assert "deployments/scale" in {x["name"] for x in data["resources"]}


async def test_missing_crd_endpoints_404(emu, api, http):
    emu.put({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "metadata": {"name": "lws", "namespace": NS}, "spec": {}})
    emu.remove_crd("leaderworkersets.leaderworkerset.x-k8s.io")
    emu.remove_crd("jobsets")
    async with http.get(f"{emu.url}/apis/leaderworkerset.x-k8s.io/v1") as r:
        assert r.status == 404
    async with http.get(f"{emu.url}/apis") as r:
        groups = {g["name"] for g in (await r.json())["groups"]}
    assert "jobset.x-k8s.io" not in groups and "scheduling.run.ai" in groups
    with pytest.raises(ApiException) as err:
        await CustomObjectsApi(api).list_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", NS, "leaderworkersets")
    assert err.value.status == 404
    assert error_body(err.value)["message"] == "the server could not find the requested resource"
    emu.add_crd("leaderworkersets")
    listed = await CustomObjectsApi(api).list_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", NS, "leaderworkersets")
    assert listed["items"] == []  # uninstalling the CRD deleted its objects


async def test_crds_constructor_argument():
    async with KubeEmulator(crds=["podgroups.scheduling.run.ai"]) as emu:
        groups = {r.group for r in emu.resources}
    assert "scheduling.run.ai" in groups
    assert not groups & {"leaderworkerset.x-k8s.io", "jobset.x-k8s.io"}


async def test_stop_and_start_on_same_port_keeps_state(emu, http):
    emu.put(pod("survivor"))
    port = emu.port
    await emu.stop()
    with pytest.raises(aiohttp.ClientConnectionError):
        async with http.get(f"{emu.url}/api/v1/pods"):
            pass
    await emu.start()
    assert emu.port == port
    async with ApiClient(emu.configuration()) as client:
        got = await CoreV1Api(client).read_namespaced_pod("survivor", NS)
    assert got.metadata.name == "survivor"


async def test_kubeconfig_points_at_emulator(emu, tmp_path):
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "from-kubeconfig"}})
    path = emu.write_kubeconfig(tmp_path / "kubeconfig")
    await kube_config.load_kube_config(config_file=path, client_configuration=(
        cfg := type(emu.configuration())()))
    assert cfg.host == emu.url
    async with ApiClient(cfg) as client:
        names = [n.metadata.name for n in (await CoreV1Api(client).list_namespace()).items]
    assert names == ["from-kubeconfig"]


# --------------------------------------------------------------------------- create / get / errors

async def test_create_get_and_404(api):
    core = CoreV1Api(api)
    created = await core.create_namespaced_pod(NS, pod("app-server"))
    meta = created.metadata
    assert meta.uid and meta.resource_version.isdigit() and meta.generation == 1
    assert meta.creation_timestamp is not None and created.status.phase == "Pending"
    got = await core.read_namespaced_pod("app-server", NS)
    assert got.metadata.uid == meta.uid
    with pytest.raises(ApiException) as err:
        await core.read_namespaced_pod("nope", NS)
    assert err.value.status == 404
    assert error_body(err.value) == fixture("404-get-pod.json")


async def test_404_names_group(api):
    with pytest.raises(ApiException) as err:
        await AppsV1Api(api).read_namespaced_deployment("gone", NS)
    body = error_body(err.value)
    assert body["message"] == 'deployments.apps "gone" not found'
    assert body["details"] == {"name": "gone", "group": "apps", "kind": "deployments"}


async def test_create_conflict_matches_fixture(api):
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("app-server"))
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_pod(NS, pod("app-server"))
    assert err.value.status == 409
    assert error_body(err.value) == fixture("409-create-exists.json")


async def test_a_create_in_a_namespace_being_deleted_matches_fixture(emu, api):
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed",
                                                                   "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    core = CoreV1Api(api)
    with pytest.raises(ApiException) as err:
        await core.create_namespaced_config_map("doomed", {"metadata": {"name": "x"}})
    assert err.value.status == 403
    assert error_body(err.value) == fixture("403-create-in-terminating-namespace.json")
    await core.create_namespaced_config_map(NS, {"metadata": {"name": "x"}})  # elsewhere: as ever


async def test_generate_name_dry_run_and_owner_refs(emu, api):
    core = CoreV1Api(api)
    body = pod("")
    body["metadata"] = {"generateName": "web-", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid"}]}
    created = await core.create_namespaced_pod(NS, body)
    assert created.metadata.name.startswith("web-") and len(created.metadata.name) == 9
    assert created.metadata.owner_references[0].uid == "rs-uid"
    dry = await core.create_namespaced_pod(NS, pod("dry"), dry_run="All")
    assert dry.metadata.name == "dry"
    assert emu.get("pods", NS, "dry") is None
    assert [p["metadata"]["name"] for p in emu.list("pods")] == [created.metadata.name]


async def test_invalid_object_422(api):
    bad = pod("Bad_Name")
    del bad["spec"]["containers"]
    with pytest.raises(ApiException) as err:
        await CoreV1Api(api).create_namespaced_pod(NS, bad)
    body, recorded = error_body(err.value), fixture("422-invalid.json")
    assert err.value.status == 422
    assert body["reason"] == recorded["reason"] and body["details"]["kind"] == "Pod"
    assert [c["field"] for c in body["details"]["causes"]] == ["metadata.name", "spec.containers"]


async def test_bad_requests_never_crash(emu, http):
    cases = [
        ("POST", f"/api/v1/namespaces/{NS}/pods", b"{not json", "application/json", 400),
        ("POST", f"/api/v1/namespaces/{NS}/pods", b"[1, 2]", "application/json", 400),
        ("GET", "/api/v1/pods?labelSelector=a%20in%20(", None, None, 400),
        ("GET", "/api/v1/pods?resourceVersion=abc", None, None, 400),
        ("GET", "/api/v1/nothings", None, None, 404),
        ("GET", "/what/ever", None, None, 404),
        ("PUT", f"/api/v1/namespaces/{NS}/pods", b"{}", "application/json", 405),
        ("GET", f"/api/v1/namespaces/{NS}/pods/x/exec", None, None, 404),
    ]
    for method, path, data, ctype, status in cases:
        headers = {"Content-Type": ctype} if ctype else {}
        async with http.request(method, emu.url + path, data=data, headers=headers) as r:
            body = await r.json()
        assert (r.status, body["kind"], body["code"]) == (status, "Status", status), path


# --------------------------------------------------------------------------- update / patch

async def test_replace_conflict_and_generation(api):
    apps = AppsV1Api(api)
    created = await apps.create_namespaced_deployment(NS, deployment("gang"))
    stale = created.metadata.resource_version
    created.spec.replicas = 5
    updated = await apps.replace_namespaced_deployment("gang", NS, created)
    assert updated.metadata.generation == 2
    assert int(updated.metadata.resource_version) > int(stale)
    updated.metadata.labels = {"only": "metadata"}
    relabelled = await apps.replace_namespaced_deployment("gang", NS, updated)
    assert relabelled.metadata.generation == 2
    created.metadata.resource_version = stale
    with pytest.raises(ApiException) as err:
        await apps.replace_namespaced_deployment("gang", NS, created)
    body = error_body(err.value)
    assert err.value.status == 409 and body["reason"] == "Conflict"
    assert set(body) == set(fixture("409-update-conflict.json"))
    assert body["details"] == {"name": "gang", "group": "apps", "kind": "deployments"}
    assert body["message"].startswith('Operation cannot be fulfilled on deployments.apps "gang"')


async def test_noop_update_keeps_resource_version(emu, api):
    created = await CoreV1Api(api).create_namespaced_pod(NS, pod("same"))
    again = await CoreV1Api(api).patch_namespaced_pod("same", NS, {"metadata": {"labels": {}}})
    assert again.metadata.resource_version == created.metadata.resource_version


async def test_merge_json_and_strategic_patches(emu, api):
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*PG, NS, "podgroups", podgroup("gang"))
    merged = await custom.patch_namespaced_custom_object(
        *PG, NS, "podgroups", "gang", {"spec": {"queue": "q1", "minMember": None}},
        _content_type="application/merge-patch+json")
    assert merged["spec"] == {"queue": "q1"} and merged["metadata"]["generation"] == 2
    patched = await custom.patch_namespaced_custom_object(
        *PG, NS, "podgroups", "gang", [{"op": "add", "path": "/spec/minMember", "value": 4}])
    assert patched["spec"] == {"queue": "q1", "minMember": 4}
    assert emu.find_requests("PATCH")[-1].content_type == "application/json-patch+json"
    strategic = await CoreV1Api(api).create_namespaced_pod(NS, pod("p"))
    strategic = await CoreV1Api(api).patch_namespaced_pod(
        "p", NS, {"metadata": {"labels": {"gang": "g1"}}})
    assert strategic.metadata.labels == {"gang": "g1"}
    assert emu.find_requests("PATCH")[-1].content_type == "application/strategic-merge-patch+json"


async def test_patch_errors(emu, api, http):
    custom = CustomObjectsApi(api)
    created = await custom.create_namespaced_custom_object(*PG, NS, "podgroups", podgroup("g"))
    await custom.patch_namespaced_custom_object(
        *PG, NS, "podgroups", "g", {"spec": {"minMember": 3}},
        _content_type="application/merge-patch+json")
    with pytest.raises(ApiException) as err:
        await custom.patch_namespaced_custom_object(
            *PG, NS, "podgroups", "g",
            {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
             "spec": {"minMember": 9}}, _content_type="application/merge-patch+json")
    assert err.value.status == 409 and error_body(err.value)["details"]["group"] == PG[0]
    url = f"{emu.url}/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/g"
    async with http.patch(url, data=b"{}", headers={"Content-Type": "text/plain"}) as r:
        assert (r.status, (await r.json())["reason"]) == (415, "UnsupportedMediaType")
    async with http.patch(url, data=b"{", headers={
            "Content-Type": "application/merge-patch+json"}) as r:
        assert r.status == 400
    async with http.patch(url, json=[{"op": "test", "path": "/spec/minMember", "value": 1}],
                          headers={"Content-Type": "application/json-patch+json"}) as r:
        assert r.status == 422
    assert emu.get("podgroups", NS, "g")["spec"]["minMember"] == 3


async def test_status_subresource_is_separate(emu, api):
    custom = CustomObjectsApi(api)
    await custom.create_namespaced_custom_object(*PG, NS, "podgroups", podgroup("g"))
    after = await custom.patch_namespaced_custom_object_status(
        *PG, NS, "podgroups", "g", {"status": {"phase": "Running"}, "spec": {"minMember": 7}},
        _content_type="application/merge-patch+json")
    assert after["status"] == {"phase": "Running"} and after["spec"]["minMember"] == 2
    assert after["metadata"]["generation"] == 1
    main = await custom.patch_namespaced_custom_object(
        *PG, NS, "podgroups", "g", {"status": {"phase": "Lost"}, "spec": {"minMember": 3}},
        _content_type="application/merge-patch+json")
    assert main["status"] == {"phase": "Running"} and main["spec"]["minMember"] == 3


async def test_scale_subresource(emu, api):
    apps = AppsV1Api(api)
    await apps.create_namespaced_deployment(NS, deployment("web", replicas=3))
    scale = await apps.read_namespaced_deployment_scale("web", NS)
    assert (scale.kind, scale.spec.replicas, scale.status.selector) == ("Scale", 3, "app=web")
    patched = await apps.patch_namespaced_deployment_scale("web", NS, {"spec": {"replicas": 5}})
    assert patched.spec.replicas == 5
    stored = emu.get("deployments", NS, "web")
    assert stored["spec"]["replicas"] == 5 and stored["metadata"]["generation"] == 2
    scale.spec.replicas = 1
    with pytest.raises(ApiException) as err:  # scale carries the stale resourceVersion
        await apps.replace_namespaced_deployment_scale("web", NS, scale)
    assert err.value.status == 409


async def test_finalizers_delay_deletion(emu, api):
    core = CoreV1Api(api)
    body = pod("held")
    body["metadata"]["finalizers"] = ["podgang.io/cleanup"]
    await core.create_namespaced_pod(NS, body)
    await core.delete_namespaced_pod("held", NS)
    held = emu.get("pods", NS, "held")
    assert held["metadata"]["deletionTimestamp"]
    await core.patch_namespaced_pod("held", NS, {"metadata": {"finalizers": None}})
    assert emu.get("pods", NS, "held") is None


# --------------------------------------------------------------------------- list & selectors

SELECTOR_CASES = [
    ("app=web", {"w1", "w2"}),
    ("app==web,tier=gpu", {"w2"}),
    ("app!=web", {"d1", "bare"}),
    ("tier", {"w2", "d1"}),
    ("!tier", {"w1", "bare"}),
    ("app in (web, db)", {"w1", "w2", "d1"}),
    ("app notin (web)", {"d1", "bare"}),
    ("app in (web,db),tier notin (gpu)", {"w1", "d1"}),
]


@pytest.mark.parametrize(("selector", "expected"), SELECTOR_CASES)
async def test_label_selectors(emu, api, selector, expected):
    emu.put(pod("w1", labels={"app": "web"}))
    emu.put(pod("w2", labels={"app": "web", "tier": "gpu"}))
    emu.put(pod("d1", labels={"app": "db", "tier": "cpu"}))
    emu.put(pod("bare"))
    got = await CoreV1Api(api).list_namespaced_pod(NS, label_selector=selector)
    assert {p.metadata.name for p in got.items} == expected
    assert got.metadata.resource_version == emu.resource_version


def test_parse_label_selector_directly():
    match = parse_label_selector("a in (x,y), !b, c != z")
    assert match({"a": "x"}) and match({"a": "y", "c": "q"})
    assert not match({"a": "x", "b": ""}) and not match({"a": "x", "c": "z"})


JSON = st.recursive(st.none() | st.integers(-1000, 1000) | st.text(max_size=3),
                    lambda inner: st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
                    max_leaves=8)


@given(JSON, JSON)
def test_merge_patch_is_idempotent_and_pure(target, patch):
    before = orjson.dumps(target)
    once = merge_patch(target, patch)
    assert orjson.dumps(target) == before
    assert merge_patch(once, patch) == once


async def test_field_selectors_and_all_namespaces(emu, api):
    emu.put(pod("a", ns="ns1", nodeName="node-1", schedulerName="kai-scheduler"))
    emu.put(pod("b", ns="ns2", nodeName="node-2"))
    emu.patch_object("pods", "ns2", "b", {"status": {"phase": "Running"}})
    core = CoreV1Api(api)
    everything = await core.list_pod_for_all_namespaces()
    assert [(p.metadata.namespace, p.metadata.name) for p in everything.items] == [
        ("ns1", "a"), ("ns2", "b")]
    cases = {"spec.nodeName=node-1": ["a"], "status.phase=Running": ["b"],
             "metadata.namespace!=ns1": ["b"], "spec.schedulerName=kai-scheduler": ["a"],
             "metadata.name=b,metadata.namespace=ns2": ["b"], "spec.nodeName=": []}
    for selector, names in cases.items():
        got = await core.list_pod_for_all_namespaces(field_selector=selector)
        assert [p.metadata.name for p in got.items] == names, selector


async def test_limit_and_continue(emu, api):
    for i in range(7):
        emu.put(pod(f"p{i}"))
    core, names, token = CoreV1Api(api), [], None
    while True:
        page = await core.list_namespaced_pod(NS, limit=3, _continue=token)
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert names == [f"p{i}" for i in range(7)]


async def test_list_at_compacted_resource_version_is_410(emu, api):
    emu.put(pod("a"))
    old = emu.resource_version
    emu.put(pod("b"))
    core = CoreV1Api(api)
    assert len((await core.list_namespaced_pod(NS, resource_version=old)).items) == 2
    emu.compact()
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod(NS, resource_version=old)
    assert err.value.status == 410 and error_body(err.value) == fixture("410-list-expired.json")
    assert len((await core.list_namespaced_pod(NS, resource_version="0")).items) == 2


async def test_paginated_list_returns_every_object_once_in_order(emu, http):
    for i in range(3_000):
        emu.put(pod(f"pod-{i:05d}", ns=f"ns-{i % 7}", labels={"half": str(i % 2)}))
    emu.put(podgroup("not-a-pod", ns="ns-3"))

    async def walk(path: str, limit: int = 250, **query: str) -> tuple[list[tuple[str, str]], list[dict]]:
        keys, metas, token = [], [], None
        while True:
            params = {**query, "limit": str(limit), **({"continue": token} if token else {})}
            async with http.get(f"{emu.url}{path}", params=params) as r:
                assert r.status == 200
                body = await r.json()
            keys += [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in body["items"]]
            metas.append(body["metadata"])
            token = body["metadata"].get("continue")
            if not token:
                return keys, metas

    every = sorted((f"ns-{i % 7}", f"pod-{i:05d}") for i in range(3_000))
    keys, metas = await walk("/api/v1/pods")
    assert keys == every
    assert len(metas) == 12 and {m["resourceVersion"] for m in metas} == {metas[0]["resourceVersion"]}
    assert [m.get("remainingItemCount") for m in metas] == [3_000 - 250 * n for n in range(1, 12)] + [None]

    keys, metas = await walk("/api/v1/namespaces/ns-3/pods")
    assert keys == [k for k in every if k[0] == "ns-3"]
    assert metas[0]["remainingItemCount"] == len(keys) - 250

    keys, metas = await walk("/api/v1/namespaces/ns-3/pods", 50, labelSelector="half=1",
                             fieldSelector="metadata.name!=pod-00003")
    wanted = [k for k in every if k[0] == "ns-3" and int(k[1][4:]) % 2 and k[1] != "pod-00003"]
    assert keys == wanted and len(metas) == 1 + (len(wanted) - 1) // 50
    assert all("remainingItemCount" not in m for m in metas)  # unknown under a selector

    # pods created and deleted between pages: the walk goes on from where it stood
    first = await (await http.get(f"{emu.url}/api/v1/pods", params={"limit": "1000"})).json()
    emu.delete("pods", "ns-0", "pod-00000")  # already served
    emu.delete("pods", "ns-6", "pod-02995")  # not yet served
    emu.put(pod("pod-99999", ns="ns-5"))
    rest = await (await http.get(f"{emu.url}/api/v1/pods", params={
        "continue": first["metadata"]["continue"]})).json()
    served = [[(p["metadata"]["namespace"], p["metadata"]["name"]) for p in page["items"]]
              for page in (first, rest)]
    assert served[0] == every[:1000]
    assert served[1] == sorted({*every[1000:], ("ns-5", "pod-99999")} - {("ns-6", "pod-02995")})


async def test_list_ten_thousand_pods(emu, http):
    template = pod("x", labels={"app": "bench"}, schedulerName="kai-scheduler")
    for i in range(10_000):
        template["metadata"]["name"] = f"pod-{i:05d}"
        template["metadata"]["namespace"] = f"ns-{i % 10}"
        emu.put(template)
    for i in range(1_000):
        emu.put(podgroup(f"pg-{i}", ns=f"ns-{i % 10}"))
    async with http.get(f"{emu.url}/api/v1/pods") as r:
        data = orjson.loads(await r.read())
    assert len(data["items"]) == 10_000  # how fast: bench/grouper lists ten times as many
    async with http.get(f"{emu.url}/api/v1/namespaces/ns-3/pods?labelSelector=app%3Dbench") as r:
        assert len((await r.json())["items"]) == 1_000


# --------------------------------------------------------------------------- watch

async def test_watch_events_and_bookmarks_via_client(emu, api):
    core = CoreV1Api(api)
    await core.create_namespaced_pod(NS, pod("before"))
    start_rv = (await core.list_namespaced_pod(NS)).metadata.resource_version
    events = []
    w = watch.Watch()
    async with asyncio.timeout(5):
        stream = w.stream(core.list_namespaced_pod, NS, resource_version=start_rv,
                          allow_watch_bookmarks=True, timeout_seconds=30)
        await core.create_namespaced_pod(NS, pod("after"))
        await core.patch_namespaced_pod("after", NS, {"metadata": {"labels": {"x": "1"}}})
        await core.delete_namespaced_pod("after", NS)
        async for event in stream:
            events.append(event)
            if len(events) == 3:
                await emu.send_bookmarks()
            if event["type"] == "BOOKMARK":
                break
    await w.close()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
    assert events[0]["object"].metadata.name == "after"
    rvs = [int(e["raw_object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs)
    bookmark = events[3]["raw_object"]
    recorded = json.loads((FIXTURES / "watch-pods-scale-down-with-bookmarks.jsonl")
                          .read_text().splitlines()[-1])["object"]
    assert {k: bookmark[k] for k in ("kind", "apiVersion")} == {
        k: recorded[k] for k in ("kind", "apiVersion")}
    assert bookmark["metadata"] == {"resourceVersion": emu.resource_version}


async def test_watch_custom_objects_via_client(emu, api):
    custom = CustomObjectsApi(api)
    emu.put(podgroup("existing"))
    w = watch.Watch()
    seen = []
    async with asyncio.timeout(5):
        async for event in w.stream(custom.list_cluster_custom_object, *PG, "podgroups",
                                    allow_watch_bookmarks=True, timeout_seconds=30):
            seen.append((event["type"], event["object"]["metadata"]["name"]))
            if len(seen) == 1:
                emu.patch_object("podgroups", NS, "existing", {"spec": {"minMember": 4}})
            else:
                break
    await w.close()
    assert seen == [("ADDED", "existing"), ("MODIFIED", "existing")]
    assert w.resource_version == emu.resource_version


async def test_watch_replays_history_and_filters_selectors(emu, http):
    emu.put(pod("a", labels={"gang": "g1"}))
    start = emu.resource_version
    emu.put(pod("b", labels={"gang": "g1"}))
    emu.patch_object("pods", NS, "a", {"metadata": {"labels": {"gang": "g2"}}})
    emu.put(pod("other", ns="elsewhere", labels={"gang": "g1"}))
    url = (f"{emu.url}/api/v1/namespaces/{NS}/pods?watch=true&resourceVersion={start}"
           "&labelSelector=gang%3Dg1")
    async with http.get(url) as resp:
        events = await read_events(resp, 2)
        emu.patch_object("pods", NS, "a", {"metadata": {"labels": {"gang": "g1"}}})
        events += await read_events(resp, 1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"), ("DELETED", "a"), ("ADDED", "a")]


async def test_watch_without_resource_version_lists_first(emu, http):
    emu.put(podgroup("pg1"))
    url = f"{emu.url}/apis/scheduling.run.ai/v2alpha2/podgroups?watch=1"
    async with http.get(url) as resp:
        first = await read_events(resp, 1)
        emu.delete("podgroups", NS, "pg1")
        second = await read_events(resp, 1)
    assert (first[0]["type"], second[0]["type"]) == ("ADDED", "DELETED")
    assert first[0]["object"]["kind"] == "PodGroup"


async def test_watch_at_compacted_rv_gets_410_error_event(emu, api, http):
    emu.put(pod("a"))
    old = emu.resource_version
    emu.put(pod("b"))
    emu.compact()
    async with http.get(f"{emu.url}/api/v1/pods?watch=true&resourceVersion={old}") as resp:
        assert resp.status == 200
        lines = (await resp.read()).splitlines()
    assert len(lines) == 1
    event = orjson.loads(lines[0])
    assert event["type"] == "ERROR"
    assert (event["object"]["code"], event["object"]["reason"]) == (410, "Expired")
    w = watch.Watch()
    with pytest.raises(ApiException) as err:
        async with asyncio.timeout(5):
            async for _ in w.stream(CoreV1Api(api).list_namespaced_pod, NS,
                                    resource_version=old, timeout_seconds=5):
                pass
    await w.close()
    assert err.value.status == 410


async def test_watch_timeout_closes_stream(emu, http):
    started = time.perf_counter()
    async with http.get(f"{emu.url}/api/v1/pods?watch=true&timeoutSeconds=1") as resp:
        async with asyncio.timeout(5):
            assert await resp.read() == b""
    assert 0.9 < time.perf_counter() - started < 4
    assert emu.watch_count == 0


async def test_close_watches_makes_client_reconnect(emu, api):
    core = CoreV1Api(api)
    w = watch.Watch()
    seen = []
    async with asyncio.timeout(5):
        stream = w.stream(core.list_namespaced_pod, NS, resource_version=emu.resource_version)
        emu.put(pod("one"))
        async for event in stream:
            seen.append(event["object"].metadata.name)
            if len(seen) == 1:
                await emu.wait_for(lambda: emu.watch_count == 1)
                assert emu.close_watches() == 1
                emu.put(pod("two"))  # happens while the client is disconnected
            else:
                break
    await w.close()
    assert seen == ["one", "two"]
    assert emu.count("GET", r"/namespaces/team-a/pods$") == 2
    assert emu.find_requests("GET")[-1].query["resourceVersion"] != "0"


# --------------------------------------------------------------------------- eviction & GC

async def test_eviction_accepted(emu, api):
    emu.put(pod("victim"))
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "victim", "namespace": NS}}
    async with asyncio.timeout(5):
        await CoreV1Api(api).create_namespaced_pod_eviction("victim", NS, body)
    assert emu.get("pods", NS, "victim") is None
    assert emu.find_requests("POST", "/eviction$")[0].body["kind"] == "Eviction"


async def test_eviction_raw_body_matches_fixture(emu, http):
    emu.put(pod("victim"))
    url = f"{emu.url}/api/v1/namespaces/{NS}/pods/victim/eviction"
    async with http.post(url, json={"apiVersion": "policy/v1", "kind": "Eviction",
                                    "metadata": {"name": "victim"}}) as r:
        assert r.status == 201
        assert await r.json() == fixture("201-eviction-accepted.json")
    async with http.post(url, json={"kind": "Eviction"}) as r:
        assert r.status == 404


async def test_eviction_blocked_by_pdb(emu, api, http):
    for i in range(4):
        emu.put(pod(f"gang-{i}", labels={"app": "gang"}))
    emu.put(pod("unrelated", labels={"app": "other"}))
    emu.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "gang", "namespace": NS},
             "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "gang"}}}})
    url = f"{emu.url}/api/v1/namespaces/{NS}/pods/{{}}/eviction"
    evict = {"apiVersion": "policy/v1", "kind": "Eviction"}
    async with http.post(url.format("gang-0"), json=evict) as r:
        assert r.status == 201
    async with http.post(url.format("gang-1"), json=evict) as r:
        assert r.status == 429
        assert await r.json() == fixture("429-eviction-blocked-by-pdb.json")
    async with http.post(url.format("unrelated"), json=evict) as r:
        assert r.status == 201
    assert {p["metadata"]["name"] for p in emu.list("pods", NS)} == {"gang-1", "gang-2", "gang-3"}
    with pytest.raises(ApiException) as err:
        await CoreV1Api(api).create_namespaced_pod_eviction("gang-2", NS, evict)
    assert err.value.status == 429


async def test_pdb_does_not_count_terminating_pods(emu, http):
    for i in range(5):
        emu.put(pod(f"gang-{i}", labels={"app": "gang"}))
    for i in (3, 4):  # terminating pods stay listed but are not healthy
        emu.patch_object("pods", NS, f"gang-{i}",
                         {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})
    assert len(emu.list("pods", NS)) == 5
    emu.put({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
             "metadata": {"name": "gang", "namespace": NS},
             "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "gang"}}}})
    async with http.post(f"{emu.url}/api/v1/namespaces/{NS}/pods/gang-0/eviction",
                         json={"kind": "Eviction"}) as r:
        body = await r.json()
    assert r.status == 429
    assert body["details"]["causes"][0]["message"] == (
        "The disruption budget gang needs 3 healthy pods and has 3 currently")


async def test_forced_eviction_refusal(emu, http):
    emu.put(pod("p"))
    emu.refuse_evictions(2)
    url = f"{emu.url}/api/v1/namespaces/{NS}/pods/p/eviction"
    statuses = []
    for _ in range(3):
        async with http.post(url, json={"kind": "Eviction"}) as r:
            statuses.append(r.status)
    assert statuses == [429, 429, 201]


async def test_garbage_collection_cascades(emu, api):
    apps, core = AppsV1Api(api), CoreV1Api(api)
    dep = await apps.create_namespaced_deployment(NS, deployment("web"))

    def owner(o, kind):
        return [{"apiVersion": "apps/v1", "kind": kind, "name": o.metadata.name,
                 "uid": o.metadata.uid, "controller": True}]

    rs_body = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "web-1", "ownerReferences": owner(dep, "Deployment")},
               "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    rs = await apps.create_namespaced_replica_set(NS, rs_body)
    for i in range(3):
        body = pod(f"web-1-{i}")
        body["metadata"]["ownerReferences"] = owner(rs, "ReplicaSet")
        await core.create_namespaced_pod(NS, body)
    await core.create_namespaced_pod(NS, pod("standalone"))
    status = await apps.delete_namespaced_deployment("web", NS)
    assert status.status == "Success"
    await emu.wait_for(lambda: emu.list("replicasets") == [])
    assert [p["metadata"]["name"] for p in emu.list("pods")] == ["standalone"]


async def test_orphan_propagation_keeps_dependents(emu, api):
    apps = AppsV1Api(api)
    dep = await apps.create_namespaced_deployment(NS, deployment("web"))
    emu.put({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "web-1", "namespace": NS, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
             "uid": dep.metadata.uid}]}, "spec": {}})
    await apps.delete_namespaced_deployment("web", NS, propagation_policy="Orphan")
    rs = emu.get("replicasets", NS, "web-1")
    assert rs is not None and "ownerReferences" not in rs["metadata"]


async def test_namespace_deletion_removes_contents(emu, api):
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    emu.put(pod("p"))
    emu.put(podgroup("g"))
    emu.put(pod("keep", ns="other"))
    await CoreV1Api(api).delete_namespace(NS)
    assert emu.list("pods", NS) == [] and emu.list("podgroups") == []
    assert emu.get("pods", "other", "keep") is not None


async def test_delete_collection(emu, http):
    emu.put(pod("a", labels={"gang": "x"}))
    emu.put(pod("b", labels={"gang": "y"}))
    url = f"{emu.url}/api/v1/namespaces/{NS}/pods?labelSelector=gang%3Dx"
    async with http.delete(url) as r:
        assert [i["metadata"]["name"] for i in (await r.json())["items"]] == ["a"]
    assert [p["metadata"]["name"] for p in emu.list("pods")] == ["b"]


# --------------------------------------------------------------------------- faults, direct access

async def test_fault_injection_and_recording(emu, api):
    core = CoreV1Api(api)
    emu.put(pod("p"))
    emu.fail("GET", r"/pods/p$", 503, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            await core.read_namespaced_pod("p", NS)
        assert err.value.status == 503
        body = error_body(err.value)
        assert (body["kind"], body["code"], body["reason"]) == ("Status", 503, "ServiceUnavailable")
    assert (await core.read_namespaced_pod("p", NS)).metadata.name == "p"
    emu.fail("*", r"/pods", 429, body={"kind": "Status", "code": 429, "message": "slow down"},
             headers={"Retry-After": "1"})
    with pytest.raises(ApiException) as err:
        await core.list_namespaced_pod(NS, label_selector="a=b")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"
    assert emu.count("GET", r"/pods/p$") == 3
    last = emu.requests[-1]
    assert (last.method, last.query) == ("GET", {"labelSelector": "a=b"})
    emu.clear_requests()
    assert emu.count() == 0


async def test_delay_injection(emu, http):
    emu.delay(0.3, r"/api/v1/namespaces$")
    started = time.perf_counter()
    async with http.get(f"{emu.url}/api/v1/namespaces") as r:
        assert r.status == 200
    assert time.perf_counter() - started >= 0.3
    started = time.perf_counter()
    async with http.get(f"{emu.url}/version") as r:
        assert r.status == 200
    assert time.perf_counter() - started < 0.3
    emu.clear_faults()


async def test_direct_access_emits_watch_events(emu, http):
    url = f"{emu.url}/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups?watch=true" \
          f"&resourceVersion={emu.resource_version}"
    async with http.get(url) as resp:
        created = emu.put(podgroup("g"))
        assert created["metadata"]["uid"] and created["metadata"]["generation"] == 1
        emu.put({**podgroup("g", min_member=5)})
        emu.patch_object("podgroups", NS, "g", {"status": {"phase": "Running"}})
        emu.delete("PodGroup", NS, "g")
        events = await read_events(resp, 4)
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["metadata"]["uid"] == created["metadata"]["uid"]
    assert events[1]["object"]["metadata"]["generation"] == 2
    assert events[2]["object"]["status"] == {"phase": "Running"}


async def test_wait_for_wakes_on_change_and_times_out(emu):
    async def later():
        emu.put(pod("late"))

    task = asyncio.create_task(later())  # runs once wait_for below is waiting
    found = await emu.wait_for(lambda: emu.get("pods", NS, "late"), timeout=2)
    assert found["metadata"]["name"] == "late"
    await task
    with pytest.raises(TimeoutError):
        await emu.wait_for(lambda: False, timeout=0.1)


async def test_resource_versions_are_global_and_monotonic(emu):
    rvs = [emu.put(pod("a"))["metadata"]["resourceVersion"],
           emu.put(podgroup("g"))["metadata"]["resourceVersion"],
           emu.put(deployment("d"))["metadata"]["resourceVersion"]]
    assert all(isinstance(rv, str) for rv in rvs)
    assert [int(rv) for rv in rvs] == sorted(int(rv) for rv in rvs) and len(set(rvs)) == 3
