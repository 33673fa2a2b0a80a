"""A real Kubernetes control plane with real gang schedulers, and podgang installed on it
as a user installs it — for the tests that end where podgang's promises end: a scheduler
placing a gang all at once, or not at all.

``../shared/kube-bin/cluster`` (beside the project's checkout, or ``$PODGANG_KUBE_BIN``)
starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler (native gangs) and
any of KAI (scheduler, binder, pod-grouper), Volcano and coscheduling, with fake nodes and
no kubelet. Where it is absent — a user's clone — the tests that need it skip with one
reason (:data:`SKIP_REASON`).

podgang runs as the chart deploys it: the webhook and the grouper as processes with the
container arguments the chart renders, each under its own ServiceAccount's token and the
chart's RBAC, the webhook behind the chart's Mutating- and ValidatingWebhookConfiguration
(matchConditions and selectors included) pointed at 127.0.0.1 with its own certificates
from ``podgang certs generate``.

Tests share a cluster and isolate themselves: a namespace each, and fake nodes of their own
(a ``pool`` label every test pod selects), so one test's gang never takes another's room.
There is no kubelet: :class:`FakeKubelet` marks bound pods Running and Ready and finishes
their deletions, as a kubelet would.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import yaml

from podgang.api import Api, Conflict, Gone, NotFound, Unavailable, make_api_client

ROOT = Path(__file__).resolve().parent.parent
KUBE_BIN = Path(os.environ.get("PODGANG_KUBE_BIN") or ROOT.parent / "shared" / "kube-bin")
CLUSTER = KUBE_BIN / "cluster"
WORKLOAD_CRDS = Path(os.environ.get("PODGANG_WORKLOAD_CRDS") or ROOT.parent / "shared" / "fixtures" / "crds" / "workloads")
#: the workload CRDs recorded in this repository (wrappers, schedules, Grove: tests/fixtures/crds/workloads/SOURCES.md)
REPO_WORKLOAD_CRDS = ROOT / "tests" / "fixtures" / "crds" / "workloads"

SKIP_REASON = (f"no real Kubernetes binaries at {KUBE_BIN} (the project's ../shared/kube-bin; "
               "set PODGANG_KUBE_BIN to another copy): the real-cluster tests need them")
HAVE_KUBE_BIN = os.access(CLUSTER, os.X_OK)

#: pods of a test select (and tolerate) nodes of their own pool
POOL_LABEL = "podgang.test/pool"
#: how long a test waits for a scheduler to act; generous on a busy 2-core machine
SCHEDULING_TIMEOUT = 90.0
POLL_INTERVAL = 0.2
LOG_TAIL_LINES = 120

#: podgang's own namespace and the chart release the tests install
PODGANG_NS = "podgang-system"
RELEASE = "podgang"

#: the one namespace the session's podgang leaves alone: tests/real/test_grouper_apiserver.py runs
#: a grouper of its own there
TEST_OWN_NAMESPACE = "gang-real"

#: scheduler name -> podgang backend, as a user's values.yaml maps them
BACKENDS = {"kai-scheduler": "kai", "volcano": "volcano",
            "scheduler-plugins-scheduler": "coscheduling", "default-scheduler": "native"}
NATIVE_NAMESPACE_LABELS = {"podgang.io/native": "enabled"}

#: the queues a KAI admin made for the tests' teams: a parent, and a leaf with a GPU quota
KAI_TEAMS_QUEUE, KAI_TEAM_QUEUE = "podgang-tests", "team-gpu"


def kai_queue(name: str, parent: str | None = None, gpus: int = 1000) -> dict[str, Any]:
    """A KAI Queue with a GPU quota (CPU and memory unlimited)."""
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    spec: dict[str, Any] = {"resources": {"cpu": unlimited, "memory": unlimited,
                                          "gpu": {"quota": gpus, "limit": -1, "overQuotaWeight": 1}}}
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


#: where KAI's binder places a GPU reservation pod per shared GPU (GPU sharing: gpu-memory,
#: gpu-fraction); a node agent (NVIDIA's, or fake-gpu-operator) names its GPU on it
KAI_RESERVATION_NAMESPACE = "kai-resource-reservation"
KAI_RESERVED_GPU_ANNOTATION = "run.ai/reserve_for_gpu_index"

#: KAI's chart installs these PriorityClasses (deployments/kai-scheduler/templates/priorityclasses)
KAI_PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}


# ---------------------------------------------------------------------------
# the control plane


@dataclass
class Cluster:
    """One control plane started by ``cluster up`` in ``directory``."""

    directory: Path
    version: str
    schedulers: tuple[str, ...]
    extra_logs: list[Path] = field(default_factory=list)

    @property
    def kubeconfig(self) -> str:
        return str(self.directory / "kubeconfig")

    @classmethod
    def up(cls, directory: Path, *, version: str = "1.36", schedulers: tuple[str, ...] = (), nodes: int = 1) -> "Cluster":
        """Start it; a start that fails is tried once more from scratch. ``cluster up`` can fail
        for a moment's reasons: its ``kubectl wait --for=condition=Established`` errors out when
        it reads a CRD before the apiserver gave it any condition (".status.conditions accessor
        error: <nil>"), which took down every real test of a run once."""
        env = {**os.environ, "KUBE_VERSION": version, "SCHEDULERS": ",".join(schedulers), "NODES": str(nodes)}
        cluster = cls(directory, version, schedulers)
        failed = ""
        for attempt in (1, 2):
            done = subprocess.run([str(CLUSTER), "up", str(directory)], env=env, capture_output=True, text=True,
                                  timeout=300)
            if done.returncode == 0:
                return cluster
            failed += f"attempt {attempt}: cluster up failed ({done.returncode}): {done.stderr[-2000:]}\n"
            tails = cluster.log_tails()
            cluster.down()
            shutil.rmtree(directory)
            directory.mkdir()
        raise RuntimeError(f"{failed}{tails}")

    def down(self) -> None:
        subprocess.run([str(CLUSTER), "down", str(self.directory)], capture_output=True, text=True, timeout=120)

    def kubectl_run(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        """kubectl as a user runs it: its exit status, output and warnings (stderr)."""
        return subprocess.run(["kubectl", f"--kubeconfig={self.kubeconfig}", *args], input=input,
                              capture_output=True, text=True, timeout=120)

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        done = self.kubectl_run(*args, input=input)
        if check and done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def apply_crds(self, *paths: Path) -> None:
        """Server-side apply (large CRDs do not fit a client-side apply's annotation), then
        wait until they are served. ``kubectl wait`` fails at once on a CRD the apiserver has
        not given conditions yet (``.status.conditions accessor error``): that is asked again."""
        for path in paths:
            self.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
        for path in paths:
            def established(path: Path = path) -> bool:
                done = self.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "-f", str(path))
                if done.returncode != 0 and "accessor error" not in done.stderr:
                    raise RuntimeError(f"kubectl wait for {path.name}: {done.stderr.strip()}")
                return done.returncode == 0
            wait_sync(established, f"CRD {path.name} established", 60.0)

    def logs(self) -> dict[str, Path]:
        found = {p.stem: p for p in sorted(self.directory.glob("*.log"))}
        found.update({p.stem: p for p in self.extra_logs if p.exists()})
        return found

    def log_tails(self, lines: int = LOG_TAIL_LINES) -> str:
        parts = []
        for name, path in self.logs().items():
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError as error:
                text = [f"(unreadable: {error})"]
            parts.append(f"----- {name} (last {lines} lines of {path}) -----\n" + "\n".join(text))
        return "\n".join(parts)

    @contextlib.asynccontextmanager
    async def api(self) -> AsyncIterator[Api]:
        """podgang's own API layer as cluster admin, for a test's reads and writes."""
        client = await make_api_client(self.kubeconfig)
        try:
            yield Api(client, timeout=15)
        finally:
            await client.close()

    # -- set-up a scheduler's own installation does

    def install_kai_extras(self) -> None:
        """What KAI's Helm chart installs beside the binaries (its PriorityClasses), and
        what a KAI admin sets up for a team: a leaf queue with a GPU quota under a parent
        of its own (:data:`KAI_TEAM_QUEUE`). KAI's default queue has a quota of 0, and a
        non-preemptible gang (priority 100 or more: KAI's ``inference``, which KAI's own
        grouper gives Deployments) never goes over quota."""
        docs: list[dict[str, Any]] = [
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
             "value": value, "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False}
            for name, value in KAI_PRIORITY_CLASSES.items()]
        docs += [kai_queue(KAI_TEAMS_QUEUE), kai_queue(KAI_TEAM_QUEUE, KAI_TEAMS_QUEUE),
                 {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KAI_RESERVATION_NAMESPACE}}]
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def workload_crd_files() -> list[Path]:
    """Every workload CRD file: the shared ones (:data:`WORKLOAD_CRDS`, where present), then
    the repository's own (:data:`REPO_WORKLOAD_CRDS`) that the shared folder does not hold."""
    shared = sorted(WORKLOAD_CRDS.glob("*.yaml")) if WORKLOAD_CRDS.is_dir() else []
    names = {p.name for p in shared}
    return shared + [p for p in sorted(REPO_WORKLOAD_CRDS.glob("*.yaml")) if p.name not in names]


def workload_crds() -> list[Path]:
    """The workload kinds' real CRDs (Kubeflow, Ray, Spark, JobSet, LWS, Trainer; and the
    repository's: AppWrapper, DisaggregatedSet, RayCronJob, ScheduledSparkApplication,
    SparkConnect, Grove's). Two define mpijobs.kubeflow.org: the training-operator's (v1) is
    installed, mpi-operator's (v2beta1) only by a test that swaps it in."""
    return [p for p in workload_crd_files() if "mpi-operator" not in p.name]


# ---------------------------------------------------------------------------
# podgang, installed as the chart does it


def chart_objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart rendered by Helm's own engine (helm-python-sdk)."""
    import helm_python as helm

    files = helm.Chart.load(ROOT / "charts" / "podgang").render(values, name=RELEASE, namespace=PODGANG_NS,
                                                                 is_install=True)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def _container_args(docs: list[dict[str, Any]], component: str) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-{component}")
    return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])


def _without(args: list[str], *flags: str) -> list[str]:
    return [a for a in args if a.split("=", 1)[0] not in flags]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode


#: the soak's two groupers (tests/real/test_real_soak.py) and their short Lease, so that a
#: fault is over in seconds
SOAK_GROUPERS = ("soak-a", "soak-b")
SOAK_LEASE = ("--leader-election-lease-duration=6s", "--leader-election-renew-deadline=4s",
              "--leader-election-retry-period=1s")


@dataclass
class Podgang:
    """podgang's webhook and grouper running against a :class:`Cluster`."""

    cluster: Cluster
    work: Path
    values: dict[str, Any]
    webhook_port: int = 0
    processes: dict[str, Process] = field(default_factory=dict)
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    docs: list[dict[str, Any]] = field(default_factory=list)

    def install(self) -> "Podgang":
        self.docs = chart_objects(self.values)
        self.cluster.kubectl("create", "namespace", PODGANG_NS, check=False)
        rbac = [d for d in self.docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                                       "RoleBinding")]
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(rbac))
        for component in ("webhook", "grouper"):
            self.kubeconfigs[component] = self._service_account_kubeconfig(f"{RELEASE}-{component}")
        certs = self.work / "certs"
        done = subprocess.run([sys.executable, "-m", "podgang.cli", "certs", "generate", "--out", str(certs),
                               "--dns-name", "localhost", "--ip", "127.0.0.1"], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"podgang certs generate: {done.stderr}")
        self.webhook_port = free_port()
        self.start_webhook()
        self._register_webhooks((certs / "ca.crt").read_text())
        self.start_grouper()
        return self

    def _service_account_kubeconfig(self, account: str) -> str:
        token = self.cluster.kubectl("create", "token", account, "-n", PODGANG_NS, "--duration=24h").strip()
        admin = yaml.safe_load(Path(self.cluster.kubeconfig).read_text())
        config = copy.deepcopy(admin)
        config["users"] = [{"name": account, "user": {"token": token}}]
        config["contexts"][0]["context"]["user"] = account
        path = self.work / f"{account}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return str(path)

    def _spawn(self, component: str, args: list[str]) -> Process:
        log = self.work / f"podgang-{component}.log"
        self.cluster.extra_logs.append(log)
        handle = open(log, "ab")
        popen = subprocess.Popen([sys.executable, "-m", "podgang.cli", *args], stdout=handle, stderr=subprocess.STDOUT,
                                 cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        handle.close()
        process = Process(component, popen, log)
        self.processes[component] = process
        return process

    async def wait_logged(self, text: str, *also: str, component: str = "grouper",
                          timeout: float = SCHEDULING_TIMEOUT) -> str:
        """The first line of ``component``'s log holding ``text`` and every one of ``also``."""
        log = self.processes[component].log

        async def found():
            lines = log.read_text(errors="replace").splitlines()
            return next((line for line in lines if text in line and all(a in line for a in also)), None)
        return await until(found, f"{component} logged {text!r}", timeout)

    def start_webhook(self) -> Process:
        args = _without(_container_args(self.docs, "webhook"), "--port", "--health-port", "--cert-dir", "--manage-certs",
                        "--secret", "--service", "--mutating-webhook-config", "--validating-webhook-config",
                        "--log-format")
        # the chart's fixed health port would clash between clusters side by side: any free one
        process = self._spawn("webhook", [*args, f"--port={self.webhook_port}", "--health-port=0",
                                          "--bind-address=127.0.0.1",
                                          f"--cert-dir={self.work / 'certs'}", "--log-format=text",
                                          f"--kubeconfig={self.kubeconfigs['webhook']}"])
        wait_for_port(self.webhook_port, process)
        return process

    def start_grouper(self, *extra: str, identity: str = "test-grouper", component: str = "grouper",
                      leading: bool = True) -> Process:
        """A grouper (``identity`` its leader-election identity, ``component`` its name among
        the processes), returned once it is ready: it holds the Lease and has done its first
        reconcile (its own /readyz) — or, not ``leading`` (a standby), once it answers /healthz."""
        args = _without(_container_args(self.docs, "grouper"), "--metrics-port", "--metrics-bind-address",
                        "--log-format")
        port = free_port()
        process = self._spawn(component, [*args, f"--metrics-port={port}", "--metrics-bind-address=127.0.0.1",
                                          "--log-format=text", f"--leader-election-identity={identity}",
                                          f"--kubeconfig={self.kubeconfigs['grouper']}", *extra])
        wait_until_ready(f"http://127.0.0.1:{port}/{'readyz' if leading else 'healthz'}", process)
        return process

    def stop_grouper(self) -> None:
        process = self.processes.pop("grouper", None)
        if process:
            process.stop()

    def _register_webhooks(self, ca_pem: str) -> None:
        import base64

        bundle = base64.b64encode(ca_pem.encode()).decode()
        configs = []
        for doc in self.docs:
            if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue
            doc = copy.deepcopy(doc)
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.webhook_port}{path}", "caBundle": bundle}
                # the apiserver and the webhook share this machine: a test fails on a webhook
                # that is down rather than pass on pods it never saw
                hook["failurePolicy"] = "Fail"
            configs.append(doc)
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(configs))

    def check_alive(self) -> None:
        dead = [p for p in self.processes.values() if not p.alive()]
        if dead:
            raise AssertionError("podgang exited: " + ", ".join(f"{p.name} ({p.popen.returncode})" for p in dead))

    def stop(self) -> None:
        for process in self.processes.values():
            process.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: Process, timeout: float = 30.0) -> None:
    import socket

    def listening() -> bool:
        _still_running(process)
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0
    wait_sync(listening, f"{process.name} listening on {port}", timeout)


def wait_until_ready(url: str, process: Process, timeout: float = 60.0) -> None:
    import urllib.error
    import urllib.request

    def ready() -> bool:
        _still_running(process)
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False
    wait_sync(ready, f"{process.name} ready at {url}", timeout)


def _still_running(process: Process) -> None:
    if not process.alive():
        raise RuntimeError(f"{process.name} exited: {process.log.read_text()[-2000:]}")


def wait_sync(check: Callable[[], Any], what: str, timeout: float) -> Any:
    """Poll ``check`` (blocking: for start-up outside any event loop) until it returns something
    truthy; TimeoutError with ``what`` at the deadline. The one blocking poll of the suite."""
    deadline = time.monotonic() + timeout
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f}s: {what}")
        time.sleep(POLL_INTERVAL)


# ---------------------------------------------------------------------------
# a test's own corner of the cluster


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = SCHEDULING_TIMEOUT) -> Any:
    """Poll ``check`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s: {what} (last: {last!r})")
        await asyncio.sleep(POLL_INTERVAL)


async def holds(check: Callable[[], Awaitable[Any]], what: str, seconds: float) -> None:
    """Poll ``check`` for ``seconds``: it must stay truthy all that time (``what`` says what)."""
    deadline = time.monotonic() + seconds
    while True:
        last = await check()
        if not last:
            raise AssertionError(f"no longer true after {seconds - (deadline - time.monotonic()):.0f}s: {what}")
        if time.monotonic() > deadline:
            return
        await asyncio.sleep(POLL_INTERVAL)


@dataclass
class Corner:
    """A namespace and a node pool of one test."""

    api: Api
    namespace: str
    pool: str
    nodes: list[str] = field(default_factory=list)

    @property
    def placement(self) -> dict[str, Any]:
        """The pod spec fields that keep a pod on this test's nodes."""
        return {"nodeSelector": {POOL_LABEL: self.pool},
                "tolerations": [{"key": POOL_LABEL, "operator": "Equal", "value": self.pool, "effect": "NoSchedule"}]}

    async def add_node(self, *, cpu: str = "8", memory: str = "32Gi", gpu: str = "4") -> str:
        """A fake Ready node in this test's pool (tainted, so other tests' pods stay off it)."""
        name = f"{self.pool}-{len(self.nodes) + 1}"
        await self.api.create("/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, POOL_LABEL: self.pool,
                                                  # what NVIDIA's GPU feature discovery labels a GPU node with
                                                  # (KAI's GPU sharing reads the memory per GPU)
                                                  "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": gpu,
                                                  "nvidia.com/gpu.memory": "81920"}},
            "spec": {"taints": [{"key": POOL_LABEL, "value": self.pool, "effect": "NoSchedule"}]}})
        self.nodes.append(name)
        capacity = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": gpu}
        now = "2026-01-01T00:00:00Z"
        await self.api.merge_patch(f"/api/v1/nodes/{name}/status", {"status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "fake node",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}]}})
        node = await self.api.get(f"/api/v1/nodes/{name}")
        taints = [t for t in node["spec"].get("taints") or [] if t["key"] != "node.kubernetes.io/not-ready"]
        await self.api.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": taints}})
        return name

    async def remove_node(self, name: str) -> None:
        await self.api.delete(f"/api/v1/nodes/{name}")
        self.nodes.remove(name)

    async def pods(self, **labels: str) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in labels.items())
        query = {"labelSelector": selector} if selector else {}
        return (await self.api.get(f"/api/v1/namespaces/{self.namespace}/pods", **query)).get("items") or []

    async def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        items = (await self.api.get(f"/api/v1/namespaces/{self.namespace}/events")).get("items") or []
        return [e for e in items if reason is None or e.get("reason") == reason]

    async def wait_events(self, reason: str, contains: str = "", timeout: float = SCHEDULING_TIMEOUT) -> list[dict]:
        async def found():
            return [e for e in await self.events(reason) if contains in e.get("message", "")]
        return await until(found, f"an event {reason!r} containing {contains!r} in {self.namespace}", timeout)

    async def cleanup(self) -> None:
        for pod in await self.pods():
            with contextlib.suppress(NotFound):
                await self.api.delete(f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}",
                                      {"gracePeriodSeconds": 0})
        with contextlib.suppress(NotFound):
            await self.api.delete(f"/api/v1/namespaces/{self.namespace}")
        for name in list(self.nodes):
            with contextlib.suppress(NotFound):
                await self.remove_node(name)


@contextlib.asynccontextmanager
async def corner(cluster: Cluster, name: str, *, nodes: int = 1, labels: dict[str, str] | None = None,
                 gpu: str = "4") -> AsyncIterator[Corner]:
    """A fresh namespace ``<name>-<random>`` with ``nodes`` fake nodes of its own."""
    suffix = uuid.uuid4().hex[:5]
    async with cluster.api() as api:
        here = Corner(api, f"{name}-{suffix}"[:63], f"{name}-{suffix}"[:50])
        await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": here.namespace, "labels": labels or {}}})
        try:
            for _ in range(nodes):
                await here.add_node(gpu=gpu)
            yield here
        finally:
            await here.cleanup()


def example(name: str, namespace: str, placement: dict[str, Any]) -> list[dict[str, Any]]:
    """An example manifest of ``examples/``, moved to a test's namespace and nodes (its own
    Namespace left out)."""
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / name).read_text()) if d and d["kind"] != "Namespace"]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
        spec = doc.get("spec") or {}
        target = spec if doc["kind"] == "Pod" else (spec.get("template") or {}).get("spec")
        if target is not None:
            target.update(placement)
    return docs


async def create_all(here: "Corner", docs: list[dict[str, Any]]) -> None:
    """Create ``docs`` in the test's namespace, in order, as ``kubectl create`` would."""
    for doc in docs:
        api_version = doc["apiVersion"]
        root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        await here.api.create(f"{root}/namespaces/{here.namespace}/{doc['kind'].lower()}s", doc)


async def scheduler_caught_up(here: "Corner") -> None:
    """Wait until the scheduler binds a pod created now, outside every gang: pods created
    before it have had their turn. Then a gang none of whose pods is bound was kept whole —
    on 1.35 nothing else says so (no condition, no event on a gang's waiting pods)."""
    name = f"probe-{uuid.uuid4().hex[:6]}"
    await here.api.create(f"/api/v1/namespaces/{here.namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"podgang.io/skip": "true", "podgang.test/probe": "true"}},
        "spec": {**here.placement, "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "registry.example/probe:1"}]}})

    async def probe_bound():
        pod = await here.api.get(f"/api/v1/namespaces/{here.namespace}/pods/{name}")
        return bool((pod.get("spec") or {}).get("nodeName"))
    await until(probe_bound, f"the scheduler to bind probe pod {name}")
    await here.api.delete(f"/api/v1/namespaces/{here.namespace}/pods/{name}", {"gracePeriodSeconds": 0})


def bound(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


class FakeKubelet:
    """What the kubelets of a test's nodes would do: a bound pod becomes Running and
    Ready, and a pod being deleted goes once its grace period is asked for. For KAI's
    GPU sharing it also plays the GPU node agent: a GPU reservation pod on one of its
    nodes is told which GPU it holds, as NVIDIA's agent (or fake-gpu-operator) does."""

    def __init__(self, here: Corner):
        self.here = here
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> "FakeKubelet":
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        """List, then watch, as a kubelet follows its pods: the test's namespace, and
        KAI's reservation namespace for the GPU reservation pods on this test's nodes."""
        await asyncio.gather(self._follow(f"/api/v1/namespaces/{self.here.namespace}/pods", self.tend),
                             self._follow(f"/api/v1/namespaces/{KAI_RESERVATION_NAMESPACE}/pods", self.reserve_gpu))

    async def _follow(self, path: str, tend: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        while True:
            try:
                listed = await self.here.api.get(path)
            except NotFound:
                return  # no such namespace (no KAI in this cluster)
            for pod in listed.get("items") or []:
                await tend(pod)
            try:
                async for event in self.here.api.watch(path, resource_version=listed["metadata"]["resourceVersion"],
                                                       timeout_seconds=60):
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        await tend(event["object"])
            except (Gone, Unavailable):
                pass  # list again

    async def tend(self, pod: dict[str, Any]) -> None:
        api, ns = self.here.api, self.here.namespace
        name, spec, status = pod["metadata"]["name"], pod.get("spec") or {}, pod.get("status") or {}
        if spec.get("nodeName") not in self.here.nodes:
            return
        try:
            if pod["metadata"].get("deletionTimestamp"):
                await api.delete(f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 0})
            elif status.get("phase") in (None, "Pending"):  # a pod that ended stays ended
                await mark_running(api, pod)
        except (NotFound, Conflict):
            pass  # gone, or changed meanwhile: its next event is tended

    async def reserve_gpu(self, pod: dict[str, Any]) -> None:
        path = f"/api/v1/namespaces/{KAI_RESERVATION_NAMESPACE}/pods/{pod['metadata']['name']}"
        node = (pod.get("spec") or {}).get("nodeName")
        notes = pod["metadata"].get("annotations") or {}
        if node not in self.here.nodes or KAI_RESERVED_GPU_ANNOTATION in notes:
            return
        gpu = f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, node + '/' + pod['metadata']['name'])}"
        try:
            await self.here.api.merge_patch(path, {"metadata": {"annotations": {KAI_RESERVED_GPU_ANNOTATION: gpu}}})
            await mark_running(self.here.api, pod)
        except (NotFound, Conflict):
            pass

async def mark_running(api: Api, pod: dict[str, Any]) -> dict[str, Any]:
    """Patch a bound pod's status (the status subresource) to Running and Ready."""
    md = pod["metadata"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    containers = (pod.get("spec") or {}).get("containers") or []
    return await api.merge_patch(f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}/status", {"status": {
        "phase": "Running", "startTime": now, "podIP": "10.244.0.10", "hostIP": "10.0.0.1",
        "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                       for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")],
        "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": True,
                               "started": True, "restartCount": 0, "state": {"running": {"startedAt": now}}}
                              for c in containers]}})


# ---------------------------------------------------------------------------
# the workloads' real controllers (../shared/kube-bin-operators)

OPERATORS_KIT = Path(os.environ.get("PODGANG_KUBE_BIN_OPERATORS") or ROOT.parent / "shared" / "kube-bin-operators")
OPERATORS = OPERATORS_KIT / "operators"
HAVE_OPERATORS = os.access(OPERATORS, os.X_OK)
OPERATORS_SKIP_REASON = (f"no real workload controllers at {OPERATORS_KIT} (the project's ../shared/kube-bin-operators; "
                         "set PODGANG_KUBE_BIN_OPERATORS to another copy): the real-controller tests need them")
LWS_CONTROLLER = "lws-controller-manager"
KUBERAY_CONTROLLER = "kuberay-operator"


@dataclass
class Operators:
    """The real LWS, JobSet and KubeRay controllers run by ``operators up`` against a
    :class:`Cluster`, their admission webhooks served from this machine. KubeRay runs without
    its webhooks (validation only; their port is fixed, one cluster on the machine may have
    them), with or without a batch scheduler; LWS with or without its own Volcano gang management."""

    cluster: Cluster
    lws_gang: str | None = None
    kuberay_batch_scheduler: str | None = None

    def _run(self, command: str, *names: str) -> None:
        env = {**os.environ, "KUBECONFIG": self.cluster.kubeconfig, "KUBERAY_WEBHOOKS": "off",
               "LWS_GANG": self.lws_gang or "", "KUBERAY_BATCH_SCHEDULER": self.kuberay_batch_scheduler or ""}
        done = subprocess.run([str(OPERATORS), command, str(self.cluster.directory), *names], env=env,
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"operators {command} {' '.join(names)} failed ({done.returncode}): "
                               f"{done.stderr[-2000:]}")

    def up(self, lws_gang: str | None) -> "Operators":
        self.lws_gang = lws_gang
        self._run("up")
        for name in (LWS_CONTROLLER, "jobset-controller-manager", KUBERAY_CONTROLLER):
            self.cluster.extra_logs.append(self.cluster.directory / f"{name}.log")
        return self

    def _restart(self, operator: str, process: str) -> None:
        """Stop one controller — its webhooks deregistered first (they fail closed), the process
        stopped by its pid — and start it again with the settings now held."""
        directory = self.cluster.directory
        hooks = directory / f"{operator}-webhooks.yaml"
        if hooks.exists():
            self.cluster.kubectl("delete", "--ignore-not-found", "-f", str(hooks))
            hooks.unlink()
        pid_file = directory / f"{process}.pid"
        pid = int(pid_file.read_text())
        os.kill(pid, 15)
        wait_sync(lambda: not _pid_alive(pid), f"{process} ({pid}) stopped", 30.0)
        pid_file.unlink()
        self._run("up", operator)

    def use_lws_gang(self, lws_gang: str | None) -> None:
        """LWS with (``"volcano"``) or without (None) its own gang management: a setting of the
        controller, not of the LeaderWorkerSet, so LWS alone is restarted when it changes."""
        if lws_gang != self.lws_gang:
            self.lws_gang = lws_gang
            self._restart("lws", LWS_CONTROLLER)

    def use_kuberay_batch_scheduler(self, name: str | None) -> None:
        """KubeRay with a batch scheduler (``volcano``, ``kai-scheduler``) or none: a flag of the
        controller (``--batch-scheduler``) for every RayCluster, so KubeRay alone is restarted
        when it changes."""
        if name != self.kuberay_batch_scheduler:
            self.kuberay_batch_scheduler = name
            self._restart("kuberay", KUBERAY_CONTROLLER)

    def down(self) -> None:
        subprocess.run([str(OPERATORS), "down", str(self.cluster.directory)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "KUBECONFIG": self.cluster.kubeconfig})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class OperatorsKit:
    """One module's cluster with the real workload controllers and podgang on it."""

    cluster: Cluster
    operators: Operators
    podgang: Podgang
