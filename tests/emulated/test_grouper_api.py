"""podgang.api and grouper.informer against the HTTP API emulator: the client's
session reads the proxy environment once (and requests still go where that
environment says); the first paged list exempts the growing cache from the
garbage collector, later relists do not."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from podgang.api import Api, resolve_environment_once
from podgang.grouper.informer import Informer
from podgang.kinds import POD as PODS, PYTORCH_JOB
from tests.emulator import kube_emulator_fixture

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "team"},
       "spec": {"containers": [{"name": "c", "image": "x"}]}}
PROXIED = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "from-the-proxy"}, "items": []}


@pytest.fixture
async def emu():
    async for emulator in kube_emulator_fixture():
        yield emulator


@pytest.fixture
async def proxy():
    """A stand-in HTTP proxy: answers every request itself and records the target."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(str(request.url))
        return web.json_response(PROXIED)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}", seen
    await runner.cleanup()


@pytest.fixture
def environment(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


async def test_no_proxy_means_direct_and_the_environment_is_not_read_again(emu, proxy, environment):
    emu.put(POD)
    environment.setenv("HTTP_PROXY", proxy[0])
    environment.setenv("NO_PROXY", "127.0.0.1")
    async with emu.api_client() as client:
        resolve_environment_once(client)
        assert not client.rest_client.pool_manager.trust_env and client.rest_client.proxy is None
        environment.delenv("NO_PROXY")  # read once: a later change does not apply
        body = await Api(client).get("/api/v1/namespaces/team/pods")
    assert [p["metadata"]["name"] for p in body["items"]] == ["web-0"]
    assert proxy[1] == []


async def test_a_proxy_in_the_environment_is_used(emu, proxy, environment):
    environment.setenv("HTTP_PROXY", proxy[0])
    async with emu.api_client() as client:
        resolve_environment_once(client)
        environment.delenv("HTTP_PROXY")  # read once: still proxied
        body = await Api(client).get("/api/v1/namespaces/team/pods")
    assert body == PROXIED
    assert proxy[1] == [f"{emu.url}/api/v1/namespaces/team/pods"]


async def test_a_proxy_in_the_configuration_wins(emu, proxy, environment):
    environment.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    configuration = emu.configuration()
    configuration.proxy = proxy[0]
    async with ApiClient(configuration=configuration) as client:
        resolve_environment_once(client)
        assert await Api(client).get("/api/v1/namespaces/team/pods") == PROXIED
    assert proxy[1] == [f"{emu.url}/api/v1/namespaces/team/pods"]


async def test_the_first_list_freezes_the_cache_later_relists_do_not(emu):
    for i in range(5):
        emu.put({**POD, "metadata": {"name": f"web-{i}", "namespace": "team"}})
    store: dict = {}
    gc.unfreeze()
    try:
        async with emu.api_client() as client:
            informer = Informer(Api(client), PODS, None, store=store, slim=lambda raw: raw,
                                keep=lambda obj: True, handler=lambda *change: None, page_size=2)
            task = asyncio.create_task(informer.run())
            try:
                await asyncio.wait_for(informer.synced.wait(), 5.0)
                frozen = gc.get_freeze_count()
                assert sorted(store) == [f"team/web-{i}" for i in range(5)]
                assert frozen > 0
                gc.unfreeze()
                await informer._relist()  # as after a 410: the process is warm, collect as usual
                assert gc.get_freeze_count() == 0 and len(store) == 5
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
    finally:
        gc.unfreeze()


async def test_an_absent_resource_is_probed_when_asked_at_most_every_probe_spacing(emu):
    """Pods of a kind whose CRD is not served may come by the thousand: each asks for a probe,
    the informer probes at most every ``probe_spacing``, and finds the CRD once it is there."""
    emu.remove_crd("pytorchjobs.kubeflow.org")
    async with emu.api_client() as client:
        informer = Informer(Api(client), PYTORCH_JOB.resource, None, store={}, slim=lambda raw: raw,
                            keep=lambda obj: True, handler=lambda *change: None, optional=True,
                            absent_probe_interval=600.0, probe_spacing=0.5)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 5.0)
            assert informer.absent and emu.count("GET", "/pytorchjobs") == 1
            loop = asyncio.get_running_loop()
            seen = []
            for probes in (2, 3):  # a hundred pods at once ask, twice in a row: one probe each time
                for _ in range(100):
                    informer.probe_soon()
                await emu.wait_for(lambda probes=probes: emu.count("GET", "/pytorchjobs") == probes, 5.0,
                                   f"probe {probes} never came")
                seen.append(loop.time())
            assert emu.count("GET", "/pytorchjobs") == 3
            assert seen[1] - seen[0] >= 0.4  # the second asked at once, but waited for probe_spacing (0.5 s)
            emu.add_crd("pytorchjobs.kubeflow.org")
            informer.probe_soon()
            await emu.wait_for(lambda: not informer.absent, 5.0, "the CRD installed was not found")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_a_failing_watch_is_logged_when_it_begins_and_once_it_ends(emu, caplog):
    """A list RBAC forbids (or any error that lasts) is one warning while it lasts, not one per
    retry; the recovery is said once."""
    caplog.set_level(logging.DEBUG, logger="podgang.grouper.informer")
    emu.fail("GET", r"^/api/v1/pods$", 403, times=5)
    async with emu.api_client() as client:
        informer = Informer(Api(client), PODS, None, store={}, slim=lambda raw: raw, keep=lambda obj: True,
                            handler=lambda *change: None, backoff_base=0.01, backoff_cap=0.05)
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 5.0)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    failed = [r for r in caplog.records if r.getMessage().startswith("watch failed")]
    assert len(failed) == 5 and [r.levelno for r in failed] == [logging.WARNING] + [logging.DEBUG] * 4
    assert "HTTP 403" in failed[0].fields["error"]
    assert [r.fields["after"] for r in caplog.records if r.getMessage() == "watching again"] == [failed[0].fields["error"]]
