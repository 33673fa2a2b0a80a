"""An in-process HTTP emulator of the Kubernetes API server, for tests and benchmarks.

It speaks real Kubernetes JSON over real HTTP, so code under test talks to it through
the ordinary ``kubernetes_asyncio`` client (or raw ``aiohttp``) instead of patched
client objects.  Wire formats follow the recordings in ``tests/fixtures/api/``.

Typical use::

    from tests.emulator import KubeEmulator

    async def test_something():
        async with KubeEmulator() as emu:                # binds 127.0.0.1:<free port>
            emu.put({"apiVersion": "v1", "kind": "Pod",   # direct state access, no HTTP
                     "metadata": {"name": "p", "namespace": "ns"},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}})
            async with ApiClient(emu.configuration()) as api:
                pod = await CoreV1Api(api).read_namespaced_pod("p", "ns")
            emu.fail("GET", r"/pods$", 500)                # next matching request -> 500
            await emu.wait_for(lambda: emu.get("pods", "ns", "p") is None)

The suite's ``emu`` fixture (``tests/conftest.py``) is::

    @pytest.fixture
    async def emu():
        async for e in kube_emulator_fixture():
            yield e

What it emulates: discovery (/api, /apis, /version), CRUD on the registered resources (a GET
asking for ``as=PartialObjectMetadata`` gets the metadata alone)
(``DEFAULT_RESOURCES``; optional CRDs can be removed so their endpoints 404), label and
field selectors, limit/continue, global monotonic resourceVersions, 409 on stale
resourceVersions, merge/JSON/strategic(=merge) patches, status and scale subresources,
pod eviction honouring PodDisruptionBudgets, finalizers, ownerReference garbage
collection (synchronous), namespace deletion, and chunked watch streams with history
replay, bookmarks, timeouts and 410 Expired after ``compact()``.

Authorisation, when asked for: ``grant(rules)`` with RBAC rules (``tests/emulator/rbac.py``)
answers every request they do not allow with 403 Forbidden, worded as the apiserver
does, and records it in ``forbidden``.

A validating admission webhook, when asked for: ``admit(resource, check)`` plays one on the
writes of a resource (a scheduler's own PodGroup webhook), answering as the apiserver does.

Not emulated: authentication, admission webhooks other than those played, server-side apply,
schema validation (only metadata.name and pod spec.containers are checked), historical
reads (a list at an old resourceVersion serves the current state), controllers/kubelet
(nothing reconciles; pods are deleted immediately unless they carry finalizers), and
core/v1 vs events.k8s.io/v1 events are separate stores.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

import yaml
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.emulator import rbac
from tests.emulator.faults import Faults
from tests.emulator.resources import DEFAULT_RESOURCES, OPTIONAL_CRDS, ResourceType
from tests.emulator.selectors import label_selector_matches, parse_label_selector
from tests.emulator.serving import Serving
from tests.emulator.state import State
from tests.emulator.storage import Fault, RecordedRequest, Table
from tests.emulator.wire import merge_patch
from tests.emulator.writing import Writing

__all__ = [
    "DEFAULT_RESOURCES",
    "OPTIONAL_CRDS",
    "KubeEmulator",
    "RecordedRequest",
    "ResourceType",
    "kube_emulator_fixture",
    "label_selector_matches",
    "merge_patch",
    "parse_label_selector",
]


# --------------------------------------------------------------------------- the emulator

class KubeEmulator(Writing, Serving, State, Faults):
    """See the module docstring."""

    def __init__(self, *, crds: Iterable[str] | None = None,
                 resources: Iterable[ResourceType] = DEFAULT_RESOURCES,
                 host: str = "127.0.0.1", port: int = 0, history_limit: int = 200_000) -> None:
        self.host, self.port, self.history_limit = host, port, history_limit
        self._tables: dict[tuple[str, str], Table] = {}
        self._routes: dict[tuple[str, str, str], ResourceType] = {}
        self._removed: dict[tuple[str, str], ResourceType] = {}
        self._resolved: dict[tuple[str, str | None], ResourceType] = {}
        resources = tuple(resources)
        for res in resources:
            self.register(res)
        if crds is not None:
            keep = set(crds)
            for res in [r for r in resources if r.crd]:
                if res.qualified not in keep and res.plural not in keep:
                    self.remove_crd(res.qualified)
        self._rv = 0
        self._dependents: dict[str, set[tuple[tuple[str, str], tuple[str, str]]]] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._faults: list[Fault] = []
        self._delays: list[tuple[re.Pattern[str] | None, float]] = []
        self._holds: list[tuple[re.Pattern[str], asyncio.Event]] = []  # see Faults.hold
        self._refuse_evictions = 0
        self._admission: list[tuple[str, str, Any]] = []  # (resource, webhook, check): see admit()
        self.requests: list[RecordedRequest] = []
        self._grants: tuple[list[rbac.Rule], str] | None = None
        self.forbidden: list[str] = []  # one line per request refused under grant()
        self.denied: list[str] = []  # one line per write a played admission webhook refused (admit())
        self._runner: web.AppRunner | None = None

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> KubeEmulator:
        if self._runner is not None:
            return self
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0,
                               handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        """Stop serving (state is kept; ``start()`` again reuses the same port)."""
        if self._runner is None:
            return
        self.close_watches()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def __aenter__(self) -> KubeEmulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._runner is not None

    def configuration(self) -> Configuration:
        return Configuration(host=self.url)

    def api_client(self) -> ApiClient:
        """A new kubernetes_asyncio ApiClient pointing here (the caller closes it)."""
        return ApiClient(configuration=self.configuration())

    def write_kubeconfig(self, path: Any, namespace: str = "default") -> str:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "kube-emulator",
            "clusters": [{"name": "kube-emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "kube-emulator", "user": {"token": "kube-emulator"}}],
            "contexts": [{"name": "kube-emulator", "context": {
                "cluster": "kube-emulator", "user": "kube-emulator", "namespace": namespace}}],
        }
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(config, fh)
        return str(path)


async def kube_emulator_fixture(**kwargs: Any) -> AsyncIterator[KubeEmulator]:
    """Async-generator fixture body: ``async for emu in kube_emulator_fixture(): yield emu``."""
    emu = KubeEmulator(**kwargs)
    await emu.start()
    try:
        yield emu
    finally:
        await emu.stop()
