"""podgang's grouper head to head with KAI's own pod-grouper, on a real control plane.

Each run starts a fresh Kubernetes 1.36 control plane from ../shared/kube-bin (etcd,
kube-apiserver, controller-manager, kube-scheduler; one fake node; KAI's CRDs, queues and
PriorityClasses, the PyTorchJob CRD) and one grouper ("side"):

- ``kai``: KAI v0.17's ``kai-podgrouper`` at its defaults (client limit 50 QPS, burst 300);
- ``kai-lifted``: the same with its client limit lifted (``-qps``/``-burst`` 100000);
- ``podgang``: ``podgang grouper`` as the chart runs it (its RBAC, FlowSchema and priority
  level; its client limit at the chart's values), without the webhook;
- ``podgang-webhook``: podgang's normal install, the webhook on (it admits the pods into
  their gangs; the grouper makes the PodGroups and writes no pod).

Every process talks to the apiserver as a service account of its own (cluster-admin for
KAI's pod-grouper and the "operator"), so API Priority and Fairness classifies it as in a
cluster: none is exempt. The workload is PyTorchJobs of 1 master + 7 workers and their pods
and master Service, created as Kubeflow's training-operator makes them
(tests/training_operator.py) by 8 concurrent creators.

Two phases per run:

1. catch-up (not for ``podgang-webhook``): the jobs and pods are made with no grouper
   running; the grouper is started and timed until every job has a right-sized PodGroup and
   every pod names it (and, where the group lists subgroups, its subgroup);
2. burst: with the grouper running, the same number of jobs and pods again; the time the
   creates took beside it, and the lag from the last create until the gangs are complete.

Writes per pod come from etcd's own ``etcd_mvcc_put_total`` (the puts of the
window less the writes that are not the grouper's: the operator's creates, the endpoints the
controller-manager makes for the Services, the control plane's Leases — counted by the
apiserver's ``apiserver_request_total``, kept beside by verb and resource), 3 s after the
gangs are complete so that what a grouper says afterwards (events) counts too. The gangs each side
made are compared (minMember, subgroups, queue, priority class). Rounds alternate the sides'
order; the summary gives medians and their ratios.

Usage: python bench/vs-kai/bench.py [--pods 800] [--rounds 3] [--sides kai,kai-lifted,podgang,podgang-webhook]
Writes bench/out/vs-kai.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from podgang.api import Api, Conflict, TooManyRequests, make_api_client  # noqa: E402
from tests import realcluster  # noqa: E402
from tests.realcluster import KUBE_BIN, WORKLOAD_CRDS, Cluster, Podgang  # noqa: E402
from tests.training_operator import master_service, operator_pods, pytorchjob  # noqa: E402

SIDES = ("kai", "kai-lifted", "podgang", "podgang-webhook")
WORKERS = 7  # a job is 1 master + 7 workers
CREATORS = 8
POLL = 0.5
SETTLE = 3.0  # seconds after the gangs are complete before the writes are counted
ANNOTATION, SUBGROUP = "pod-group-name", "kai.scheduler/subgroup-name"
ACCOUNTS_NS = "bench-system"


# ------------------------------------------------------------------ the cluster


def kai_binary(name: str) -> str:
    """Unpacked as ``cluster`` does it (its cache), once."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "podgang-kube-bin" / \
        (KUBE_BIN / "VERSION").read_text().strip()
    out = cache / name
    if not os.access(out, os.X_OK):
        cache.mkdir(parents=True, exist_ok=True)
        with open(f"{out}.tmp", "wb") as handle:
            subprocess.run(["xz", "-d", "-c", str(KUBE_BIN / "bin" / f"{name}.xz")], stdout=handle, check=True)
        os.chmod(f"{out}.tmp", 0o755)
        os.replace(f"{out}.tmp", out)
    return str(out)


def start_cluster(directory: Path) -> Cluster:
    cluster = Cluster.up(directory, schedulers=(), nodes=1)
    cluster.apply_crds(*sorted((KUBE_BIN / "crds" / "kai").glob("*.yaml")), WORKLOAD_CRDS / "kubeflow.org_pytorchjobs.yaml")
    cluster.kubectl("apply", "-f", str(KUBE_BIN / "conf" / "kai-default-queues.yaml"))
    cluster.install_kai_extras()
    cluster.kubectl("create", "namespace", ACCOUNTS_NS)
    return cluster


def account_kubeconfig(cluster: Cluster, name: str, work: Path) -> str:
    """A service account bound to cluster-admin, and a kubeconfig with its token."""
    cluster.kubectl("create", "serviceaccount", name, "-n", ACCOUNTS_NS)
    cluster.kubectl("create", "clusterrolebinding", f"bench-{name}", "--clusterrole=cluster-admin",
                    f"--serviceaccount={ACCOUNTS_NS}:{name}")
    token = cluster.kubectl("create", "token", name, "-n", ACCOUNTS_NS, "--duration=24h").strip()
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["users"] = [{"name": name, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = name
    path = work / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def etcd_url(cluster: Cluster) -> str:
    pid = (cluster.directory / "kube-apiserver.pid").read_text().strip()
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return next(a.decode().split("=", 1)[1] for a in args if a.startswith(b"--etcd-servers="))


async def scrape(session: aiohttp.ClientSession, cluster: Cluster, etcd: str) -> dict[str, float]:
    """etcd's puts, and the apiserver's requests by verb and resource (writes only)."""
    out: dict[str, float] = {}
    async with session.get(f"{etcd}/metrics") as resp:
        for line in (await resp.text()).splitlines():
            if line.startswith("etcd_mvcc_put_total "):
                out["etcd_puts"] = float(line.split()[1])
    port = (cluster.directory / "port").read_text().strip()
    async with session.get(f"https://127.0.0.1:{port}/metrics", ssl=False,
                           headers={"Authorization": "Bearer podgang-admin"}) as resp:
        for line in (await resp.text()).splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if labels.get("verb") in ("POST", "PATCH", "PUT", "APPLY", "DELETE") and labels.get("code", "").startswith("2"):
                key = f"{labels['verb']} {labels.get('resource')}{'/' + labels['subresource'] if labels.get('subresource') else ''}"
                out[key] = out.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0.0) for k in after if after[k] - before.get(k, 0.0)}


#: etcd writes in a window that are not the grouper's: the operator's creates, the endpoints the
#: controller-manager makes for its Services, the control plane's own Leases
OTHERS = ("POST pods", "POST services", "POST pytorchjobs", "POST endpoints", "POST endpointslices", "PUT leases",
          "POST namespaces")


def grouper_writes(window: dict[str, float]) -> float:
    """The etcd puts of a window (successful writes; a no-op update is none) less the others'."""
    return window.get("etcd_puts", 0.0) - sum(window.get(k, 0.0) for k in OTHERS)


# ------------------------------------------------------------------ the groupers


#: --py-spy PREFIX: podgang's grouper runs under py-spy, its samples to PREFIX.<side>.<n>.txt
PY_SPY = {"prefix": "", "runs": 0}


class Process:
    def __init__(self, popen: subprocess.Popen, log: Path, spied: bool = False):
        self.popen, self.log, self.spied = popen, log, spied

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.popen.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        if self.popen.poll() is None and self.spied:
            self.popen.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT only
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(60)
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(20)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> Process:
    handle = open(log, "ab")
    popen = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT,
                             env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    handle.close()
    return Process(popen, log)


def free_port() -> int:
    return realcluster.free_port()


class Side:
    """How one side is installed and started on a fresh cluster."""

    def __init__(self, name: str, cluster: Cluster, work: Path, values: dict[str, Any] | None = None):
        self.name, self.cluster, self.work = name, cluster, work
        self.values = values or {}
        self.podgang: Podgang | None = None
        self.kubeconfig = ""

    def install(self) -> None:
        if self.name.startswith("kai"):
            self.kubeconfig = account_kubeconfig(self.cluster, "kai-podgrouper", self.work)
            return
        self.podgang = Podgang(self.cluster, self.work, {"backends": {"kai-scheduler": "kai"}, **self.values})
        self.podgang.docs = realcluster.chart_objects(self.podgang.values)
        self.cluster.kubectl("create", "namespace", realcluster.PODGANG_NS, check=False)
        installed = [d for d in self.podgang.docs if d["kind"] in (
            "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "FlowSchema",
            "PriorityLevelConfiguration")]
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(installed))
        for component in ("webhook", "grouper"):
            self.podgang.kubeconfigs[component] = self.podgang._service_account_kubeconfig(
                f"{realcluster.RELEASE}-{component}")

    def start_webhook(self) -> None:
        """podgang's normal install: the webhook admits every pod (registered as the chart does)."""
        assert self.podgang is not None
        pg = self.podgang
        certs = self.work / "certs"
        subprocess.run([sys.executable, "-m", "podgang.cli", "certs", "generate", "--out", str(certs),
                        "--dns-name", "localhost", "--ip", "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)
        pg.webhook_port = free_port()
        pg.start_webhook()
        pg._register_webhooks((certs / "ca.crt").read_text())

    def start(self) -> Process:
        if self.name.startswith("kai"):
            conf = (KUBE_BIN / "conf" / "kai-podgrouper.args").read_text().split()
            lifted = ["-qps=100000", "-burst=100000"] if self.name == "kai-lifted" else []
            return spawn([kai_binary("kai-podgrouper"), *conf, *lifted, f"--kubeconfig={self.kubeconfig}",
                          f"--metrics-bind-address=127.0.0.1:{free_port()}",
                          f"--health-probe-bind-address=127.0.0.1:{free_port()}"],
                         self.work / f"{self.name}.log")
        assert self.podgang is not None
        args = realcluster._without(realcluster._container_args(self.podgang.docs, "grouper"), "--metrics-port",
                                    "--metrics-bind-address", "--log-format", "--leader-elect")
        spy: list[str] = []
        if PY_SPY["prefix"]:
            PY_SPY["runs"] += 1
            spy = [shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy", "record", "--format",
                   "raw", "-r", "100", "-o", f"{PY_SPY['prefix']}.{self.name}.{PY_SPY['runs']}.txt", "--"]
        process = spawn([*spy, sys.executable, "-m", "podgang.cli", *args, f"--metrics-port={free_port()}",
                         "--metrics-bind-address=127.0.0.1", "--log-format=text", "--log-level=WARNING",
                         f"--kubeconfig={self.podgang.kubeconfigs['grouper']}"], self.work / f"{self.name}.log")
        process.spied = bool(spy)
        return process


# ------------------------------------------------------------------ the workload


async def create(api: Api, path: str, body: dict[str, Any], attempts: int = 40) -> dict[str, Any] | None:
    """A create as a controller makes it: retried after a 429 (priority and fairness, or a CRD's
    storage still initialising) or a timeout; None when it existed already."""
    for attempt in range(attempts):
        try:
            return await api.create(path, body)
        except Conflict:
            return None
        except Exception:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(min(0.1 * 2 ** attempt, 2.0))
    return None


async def make_workload(api: Api, namespace: str, jobs: int, prefix: str) -> tuple[float, int, list[dict[str, Any]]]:
    """The jobs, their pods and master Services, created as the operator would (8 creators at
    once): the seconds it took, the objects created, the jobs."""
    started = time.monotonic()
    made = [await create(api, f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs",
                         pytorchjob(f"{prefix}-{n:04d}", WORKERS)) for n in range(jobs)]
    objects = [(f"/api/v1/namespaces/{namespace}/services", master_service(job)) for job in made]
    objects += [(f"/api/v1/namespaces/{namespace}/pods", pod) for job in made for pod in operator_pods(job)]
    queue: asyncio.Queue = asyncio.Queue()
    for item in objects:
        queue.put_nowait(item)

    async def creator() -> None:
        while not queue.empty():
            path, body = queue.get_nowait()
            await create(api, path, body)

    await asyncio.gather(*(creator() for _ in range(CREATORS)))
    return time.monotonic() - started, len(made) + len(objects), made


def right_sized(group: dict[str, Any], size: int) -> bool:
    spec = group.get("spec") or {}
    parts = spec.get("subGroups") or []
    return spec.get("minMember") == size or (bool(parts) and sum(p.get("minMember") or 0 for p in parts) == size)


async def converged(api: Api, namespace: str, jobs: list[dict[str, Any]]) -> bool:
    groups = {g["metadata"]["name"]: g for g in (await api.get(
        f"/apis/scheduling.run.ai/v2alpha2/namespaces/{namespace}/podgroups", resourceVersion="0"))["items"]}
    want = {f"pg-{j['metadata']['name']}-{j['metadata']['uid']}": j for j in jobs}
    if any(name not in groups or not right_sized(groups[name], 1 + WORKERS) for name in want):
        return False
    pods = (await api.get(f"/api/v1/namespaces/{namespace}/pods", resourceVersion="0"))["items"]
    if len(pods) < len(jobs) * (1 + WORKERS):
        return False
    for pod in pods:
        md = pod["metadata"]
        name = (md.get("annotations") or {}).get(ANNOTATION)
        if name not in want:
            return False
        listed = {p.get("name") for p in groups[name]["spec"].get("subGroups") or []}
        if listed and (md.get("labels") or {}).get(SUBGROUP) not in listed:
            return False
    return True


async def _converged_or_not_yet(api: Api, namespace: str, jobs: list[dict[str, Any]]) -> bool:
    try:
        return await converged(api, namespace, jobs)
    except TooManyRequests:  # a CRD's watch cache still initialising: ask again
        return False


async def wait_converged(api: Api, namespace: str, jobs: list[dict[str, Any]], process: Process,
                         timeout: float) -> float | None:
    """When every gang in ``namespace`` was complete; None when not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while not await _converged_or_not_yet(api, namespace, jobs):
        if not process.alive():
            raise RuntimeError(f"the grouper exited; see {process.log}")
        if time.monotonic() > deadline:
            return None
        await asyncio.sleep(POLL)
    return time.monotonic()


async def ungrouped(api: Api, namespace: str) -> int:
    """Pods that name no PodGroup (the gangs a grouper left incomplete)."""
    pods = (await api.get(f"/api/v1/namespaces/{namespace}/pods"))["items"]
    return sum(1 for p in pods if not (p["metadata"].get("annotations") or {}).get(ANNOTATION))


async def gangs(api: Api, namespace: str) -> dict[str, Any]:
    """Each job's gang as its scheduler sees it, by job name."""
    out = {}
    for g in (await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{namespace}/podgroups"))["items"]:
        spec = g["spec"]
        job = next((r["name"] for r in g["metadata"].get("ownerReferences") or []), g["metadata"]["name"])
        out[job] = {"minMember": spec.get("minMember"), "queue": spec.get("queue"),
                    "priorityClassName": spec.get("priorityClassName"),
                    "subGroups": sorted((s["name"], s.get("minMember")) for s in spec.get("subGroups") or [])}
    return out


# ------------------------------------------------------------------ one run


async def run_side(name: str, pods: int, work: Path, timeout: float,
                   values: dict[str, Any] | None = None) -> dict[str, Any]:
    jobs_count = max(1, pods // (1 + WORKERS))
    cluster = start_cluster(work / "cluster")
    side = Side(name, cluster, work, values)
    process: Process | None = None
    clients: list[Any] = []
    result: dict[str, Any] = {"side": name, "pods": jobs_count * (1 + WORKERS), "load_before": os.getloadavg()}
    try:
        side.install()
        etcd = etcd_url(cluster)
        clients.append(await make_api_client(account_kubeconfig(cluster, "training-operator", work)))
        clients.append(await make_api_client(cluster.kubeconfig))
        api, watcher = Api(clients[0], timeout=30), Api(clients[1], timeout=30)
        async with aiohttp.ClientSession() as session:
            for ns in ("catch-up", "burst"):
                await create(watcher, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": ns}})
            if name == "podgang-webhook":
                side.start_webhook()
            else:  # 1. catch-up: the pods are there before the grouper
                took, created, jobs = await make_workload(api, "catch-up", jobs_count, "a")
                result["creates_alone_s"] = took
                await asyncio.sleep(2.0)  # the controller-manager's endpoints for the Services
                idle = await scrape(session, cluster, etcd)
                started = time.monotonic()
                process = side.start()
                done = await wait_converged(watcher, "catch-up", jobs, process, timeout)
                if done is None:
                    result["catch_up_incomplete_pods"] = await ungrouped(watcher, "catch-up")
                await asyncio.sleep(SETTLE)  # what a grouper says once it is done (events) is counted too
                after = await scrape(session, cluster, etcd)
                result["catch_up_s"] = (done - started) if done is not None else None
                result["catch_up_cpu_s"] = process.cpu_seconds()
                result["catch_up_requests"] = delta(after, idle)
                result["catch_up_writes_per_pod"] = grouper_writes(result["catch_up_requests"]) / result["pods"]
                result["gangs_catch_up"] = await gangs(watcher, "catch-up")
            if process is None:
                process = side.start()
                await asyncio.sleep(5.0)  # started and synced: its watches are open
            # 2. burst: the operator makes as many again beside the running grouper
            before = await scrape(session, cluster, etcd)
            started = time.monotonic()
            took, created, jobs = await make_workload(api, "burst", jobs_count, "b")
            creates_done = time.monotonic()
            done = await wait_converged(watcher, "burst", jobs, process, timeout)
            if done is None:
                result["burst_incomplete_pods"] = await ungrouped(watcher, "burst")
            await asyncio.sleep(SETTLE)
            after = await scrape(session, cluster, etcd)
            result["creates_beside_s"] = took
            result["burst_total_s"] = (done - started) if done is not None else None
            result["burst_lag_s"] = (done - creates_done) if done is not None else None
            if result.get("creates_alone_s"):  # the same creates on the same cluster minutes apart: load cancels out
                result["creates_slowdown"] = took / result["creates_alone_s"]
            result["burst_requests"] = delta(after, before)
            result["burst_writes_per_pod"] = grouper_writes(result["burst_requests"]) / result["pods"]
            result["cpu_s"] = process.cpu_seconds()
            result["peak_rss_mb"] = process.peak_rss_mb()
            result["gangs_burst"] = await gangs(watcher, "burst")
    finally:
        for client in clients:
            await client.close()
        if process is not None:
            process.stop()
        if side.podgang is not None:
            side.podgang.stop()
        cluster.down()
    result["load_after"] = os.getloadavg()
    return result


# ------------------------------------------------------------------ summary


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
    return statistics.median(values) if values else None


def normalized(gang_map: dict[str, Any]) -> dict[str, Any]:
    """Gangs by job name with the job's prefix letter kept: comparable across clusters."""
    return {job: gang for job, gang in sorted(gang_map.items())}


def markdown(results: dict[str, Any]) -> str:
    sides = results["sides"]
    by = {s: [r for r in results["runs"] if r["side"] == s] for s in sides}
    med = {s: {k: median(by[s], k) for k in ("catch_up_s", "catch_up_cpu_s", "catch_up_writes_per_pod",
                                              "creates_alone_s", "creates_beside_s", "burst_lag_s",
                                              "burst_total_s", "burst_writes_per_pod", "cpu_s", "peak_rss_mb",
                                              "creates_slowdown")}
           for s in sides}

    def f(value: float | None, digits: int = 1) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    lines = [f"{results['pods']} pods ({results['pods'] // (1 + WORKERS)} PyTorchJobs of 1 + {WORKERS}), "
             f"{results['rounds']} round(s), medians:", "",
             "| side | catch-up | catch-up CPU | writes/pod (catch-up) | creates alone | creates beside | "
             "beside / alone | burst lag | writes/pod (burst) | CPU (run) | peak RSS |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sides:
        m = med[s]
        lines.append(f"| {s} | {f(m['catch_up_s'])} s | {f(m['catch_up_cpu_s'])} s | {f(m['catch_up_writes_per_pod'], 2)} | "
                     f"{f(m['creates_alone_s'])} s | {f(m['creates_beside_s'])} s | {f(m['creates_slowdown'], 2)} | "
                     f"{f(m['burst_lag_s'])} s | "
                     f"{f(m['burst_writes_per_pod'], 2)} | {f(m['cpu_s'])} s | {f(m['peak_rss_mb'], 0)} MB |")
    for r in results["runs"]:
        for phase in ("catch_up", "burst"):
            if r.get(f"{phase}_incomplete_pods"):
                lines.append(f"- round {r['round']}, {r['side']}: {r[f'{phase}_incomplete_pods']} pods still without "
                             f"a group {results['timeout']:.0f} s into the {phase.replace('_', '-')}")
        if r.get("error"):
            lines.append(f"- round {r['round']}, {r['side']}: failed: {r['error']}")
    lines.append("")
    for mine in ("podgang", "podgang-webhook"):
        for theirs in ("kai", "kai-lifted"):
            if mine in med and theirs in med:
                for key, what in (("catch_up_s", "catch-up time"), ("burst_total_s", "burst, first create to complete"),
                                  ("creates_beside_s", "the operator's creates beside it")):
                    a, b = med[mine][key], med[theirs][key]
                    if a is not None and b:
                        lines.append(f"- {mine} / {theirs}, {what}: {a / b:.2f}")
    kai_gangs = next((r.get("gangs_burst") for r in results["runs"] if r["side"] == "kai"), None)
    for s in sides:
        if s.startswith("podgang") and kai_gangs is not None:
            mine = next((r.get("gangs_burst") for r in results["runs"] if r["side"] == s), None)
            if mine is not None:
                same = normalized(mine) == normalized(kai_gangs)
                lines.append(f"- gangs of {s} {'identical to' if same else 'DIFFERENT from'} KAI's "
                             f"(minMember, subgroups, queue, priority class)")
                if not same:
                    job = next(iter(sorted(mine)))
                    lines.append(f"  e.g. {job}: podgang {mine.get(job)} vs KAI {kai_gangs.get(job)}")
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    sides = [s for s in args.sides.split(",") if s]
    unknown = set(sides) - set(SIDES)
    if unknown:
        raise SystemExit(f"unknown sides {sorted(unknown)}: pick from {', '.join(SIDES)}")
    if not realcluster.HAVE_KUBE_BIN:
        raise SystemExit(realcluster.SKIP_REASON)
    results: dict[str, Any] = {"pods": (args.pods // (1 + WORKERS)) * (1 + WORKERS), "rounds": args.rounds,
                               "timeout": args.timeout, "command": " ".join(sys.argv), "qps": args.qps,
                               "sides": sides, "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                                           "python": platform.python_version()},
                               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": []}
    for round_ in range(args.rounds):
        order = sides[round_ % len(sides):] + sides[:round_ % len(sides)]  # alternate who goes first
        for name in order:
            work = Path(tempfile.mkdtemp(prefix=f"vs-kai-{name}-"))
            print(f"round {round_ + 1}: {name} (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            try:
                values = {"grouper": {"kubeApi": {"qps": args.qps, "burst": args.burst or max(1, int(2 * args.qps))}}} \
                    if args.qps is not None else {}
                result = await run_side(name, args.pods, work, args.timeout, values)
            except Exception as exc:
                traceback.print_exc()
                result = {"side": name, "error": f"{type(exc).__name__}: {exc}", "work": str(work)}
                print(f"  failed: {result['error']}", file=sys.stderr, flush=True)
            else:
                shutil.rmtree(work, ignore_errors=True)
                print("  " + json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in result.items()
                                         if not isinstance(v, dict)}), file=sys.stderr, flush=True)
            result["round"] = round_ + 1
            results["runs"].append(result)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds the gangs may take to be complete; a side that leaves some incomplete is "
                             "reported with the count of pods left without a group")
    parser.add_argument("--qps", type=float, default=None, help="podgang's grouper.kubeApi.qps (default: the chart's)")
    parser.add_argument("--burst", type=int, default=None, help="with --qps: grouper.kubeApi.burst")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "vs-kai.json"))
    parser.add_argument("--py-spy", metavar="PREFIX", default="",
                        help="run podgang's grouper under py-spy (pip install py-spy into the venv), its samples to "
                             "PREFIX.<side>.<n>.txt (collapsed stacks); its CPU and RSS figures are then py-spy's")
    options = parser.parse_args()
    PY_SPY["prefix"] = options.py_spy
    found = asyncio.run(main(options))
    Path(options.out).parent.mkdir(parents=True, exist_ok=True)
    Path(options.out).write_text(json.dumps(found, indent=1))
    print(markdown(found))
