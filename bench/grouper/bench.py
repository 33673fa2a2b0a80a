"""Benchmark ``podgang grouper`` against the HTTP API emulator.

Per size: N gangs of 10 pods (N Deployments × 10 replicas, each with its
ReplicaSet; pods already carry their group, as the webhook sets it; no PodGroup
exists yet). The grouper runs as its own process (``python -m grouper``), so its
memory is its own. The default run measures 1,000 and 10,000 gangs (10,000 and
100,000 pods) side by side, so that the per-pod cost at both sizes is compared
under the same machine load. Measured per size:

- first complete reconcile: from starting the process until all PodGroups
  exist with minMember 10 (and the grouper's own figure from its log), and the
  CPU time the grouper process used until then;
- reaction: from a Deployment scale being served by the API (``kubectl scale``)
  to the PodGroup patch arriving at the API, p50/p99 over many scales, and the
  number of patches per scale;
- peak RSS of the grouper process (VmHWM).

Usage: python bench/grouper/bench.py [--gangs 1000 10000] [--pods-per-gang 10] [--scales 300] [--rounds 1]
(``--rounds 2`` runs the sizes interleaved twice: small, big, small, big.)
Writes bench/out/grouper.json and prints a Markdown table with the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import signal
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.emulator import KubeEmulator  # noqa: E402

from podgang.backends import KAI  # noqa: E402
from podgang.objects import OwnerRef  # noqa: E402
from podgang.rules import owned_group_name  # noqa: E402

NS = "bench"


def admitted(app: str, group: str) -> dict:
    """A pod's labels and annotations as podgang's webhook admits it into ``group`` (the KAI
    backend's own membership keys, so that the grouper finds nothing to backfill)."""
    membership = KAI.backfill_patch({}, group)["metadata"]
    return {"labels": {"app": app, **membership.get("labels", {})}, "annotations": membership.get("annotations", {})}


def populate(emu: KubeEmulator, gangs: int, per_gang: int) -> list[tuple[str, str]]:
    """Deployments, ReplicaSets and pods; returns (deployment name, group name)."""
    out = []
    for g in range(gangs):
        name = f"gang-{g:04d}"
        dep_uid = str(uuid.uuid4())
        tmpl = {"metadata": {"labels": {"app": name}},
                "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "busybox"}]}}
        emu.put({"apiVersion": "apps/v1", "kind": "Deployment",
                 "metadata": {"name": name, "namespace": NS, "uid": dep_uid},
                 "spec": {"replicas": per_gang, "selector": {"matchLabels": {"app": name}}, "template": tmpl},
                 "status": {"observedGeneration": 1, "replicas": per_gang, "updatedReplicas": per_gang}})
        rs_uid = str(uuid.uuid4())
        rs_name = f"{name}-7c9f8d"
        owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name, "uid": dep_uid, "controller": True}
        emu.put({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                 "metadata": {"name": rs_name, "namespace": NS, "uid": rs_uid, "ownerReferences": [owner]},
                 "spec": {"replicas": per_gang, "template": tmpl}, "status": {"replicas": per_gang}})
        group = owned_group_name(OwnerRef("apps/v1", "Deployment", name, dep_uid))
        rs_owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs_name, "uid": rs_uid, "controller": True}
        for i in range(per_gang):
            emu.put({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{rs_name}-{i:03d}", "namespace": NS, "ownerReferences": [rs_owner],
                                  **admitted(name, group)},
                     "spec": {"schedulerName": "kai-scheduler", "nodeName": f"node-{i % 50}",
                              "containers": [{"name": "c", "image": "busybox",
                                              "resources": {"requests": {"cpu": "100m"}}}]},
                     "status": {"phase": "Running"}})
        out.append((name, group))
    return out


def vm_hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (/proc/PID/stat, fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


async def measure(args: argparse.Namespace, size: int) -> dict:
    emu = KubeEmulator(history_limit=1_000_000)
    await emu.start()
    t = time.perf_counter()
    gangs = populate(emu, size, args.pods_per_gang)
    print(f"populated {size * args.pods_per_gang} pods in {size} gangs "
          f"in {time.perf_counter() - t:.1f}s", file=sys.stderr)
    gc.freeze()  # the driver's collector must not walk 100,000 emulated pods while the grouper works
    podgroups = emu._table("podgroups")

    def complete() -> bool:
        if len(podgroups.objects) < len(gangs):
            return False
        return all((pg.get("spec") or {}).get("minMember") == args.pods_per_gang for pg in podgroups.objects.values())

    fd, kubeconfig = tempfile.mkstemp(suffix=".kubeconfig")
    os.close(fd)
    emu.write_kubeconfig(kubeconfig)
    log_path = ROOT / "bench" / "out" / "grouper-bench.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loop = asyncio.get_running_loop()
    with open(log_path, "w") as log:
        started = loop.time()
        started_wall = time.time()
        spy_bin = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
        spy = ([spy_bin, "record", "--nonblocking", "--rate", "200", "--format", "raw", "--output",
                f"{args.py_spy}.{size}.txt", "--"] if args.py_spy else [])
        proc = subprocess.Popen(
            # no client limit: this measures the grouper's own path (at the default 100 calls a
            # second, 10,000 PodGroup creates alone would take 100 s; see docs/operate/api-load.md)
            [*spy, sys.executable, "-m", "grouper", "--kubeconfig", kubeconfig, "--metrics-port", "0",
             "--log-format", "json", "--log-level", "INFO", "--staleness-grace-period", "60s",
             "--kube-api-qps", "0"],
            stdout=log, stderr=log, env=env, cwd=str(ROOT),
        )
        try:
            await emu.wait_for(complete, args.timeout, "the first reconcile did not complete")
            first = loop.time() - started
            first_cpu = cpu_seconds(proc.pid)
            print(f"first complete reconcile: {first:.2f}s ({first_cpu}s CPU)", file=sys.stderr)
            # the grouper's own view (from cache sync start, without interpreter start-up)
            own = synced = synced_at = None
            for _ in range(100):
                for line in log_path.read_text().splitlines():
                    if "first complete reconcile done" in line:
                        own = json.loads(line).get("duration_ms")
                    elif "caches synced" in line:
                        record = json.loads(line)
                        synced = record.get("duration_ms")
                        synced_at = datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()
                if own is not None:
                    break
                await asyncio.sleep(0.05)
            # where the time went, until the bench saw the groups right: interpreter and client
            # start-up (until the grouper's clock started), the lists until the caches synced, the
            # reconcile. (The grouper's own "first complete reconcile done" waits for its queue to
            # be idle: it may come after the groups are right.)
            list_s = (synced or 0) / 1000
            startup_s = (synced_at - list_s - started_wall) if synced_at is not None else first - (own or 0) / 1000
            phases = {"start-up": startup_s, "list and sync": list_s, "reconcile": first - startup_s - list_s}
            print("phases: " + ", ".join(f"{name} {value:.2f}s ({value / first:.0%})" for name, value in phases.items()),
                  file=sys.stderr)
            rss_after_sync = vm_hwm_mb(proc.pid)

            # reactions: scale one Deployment at a time, wait for its PodGroup patch
            latencies = []
            patch_count_before = len([r for r in emu.requests if r.method == "PATCH" and "/podgroups/" in r.path])
            for n in range(args.scales):
                dep, group = gangs[(n * 7) % len(gangs)]
                current = emu.get("deployments", NS, dep)["spec"]["replicas"]
                target = current + 1 if current == args.pods_per_gang else args.pods_per_gang
                t0 = loop.time()
                emu.patch_object("deployments", NS, dep, {"spec": {"replicas": target}})
                await emu.wait_for(lambda: (emu.get("podgroups", NS, group) or {}).get("spec", {})
                                   .get("minMember") == target, 5.0, f"no patch for {dep}")
                latencies.append((loop.time() - t0) * 1000)
            patches = len([r for r in emu.requests if r.method == "PATCH" and "/podgroups/" in r.path])
            patches -= patch_count_before

            # a scale-up that brings its pods in a burst: still one patch
            dep, group = gangs[1]
            rs_name = f"{dep}-7c9f8d"
            before = len([r for r in emu.requests if r.method == "PATCH" and r.path.endswith(f"/{group}")])
            t0 = loop.time()
            emu.patch_object("deployments", NS, dep, {"spec": {"replicas": 1000}})
            rs = emu.get("replicasets", NS, rs_name)
            for i in range(args.pods_per_gang, 1000):
                emu.put({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": f"{rs_name}-{i:03d}", "namespace": NS,
                                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                           "name": rs_name, "uid": rs["metadata"]["uid"],
                                                           "controller": True}],
                                      **admitted(dep, group)},
                         "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
                         "status": {"phase": "Pending"}})
            await emu.wait_for(lambda: emu.get("podgroups", NS, group)["spec"]["minMember"] == 1000, 5.0)
            burst_ms = (loop.time() - t0) * 1000
            # give stray reconciles a moment to show up, then count
            await emu.wait_for(lambda: False if loop.time() - t0 < 2.0 else True, 5.0)
            burst_patches = len([r for r in emu.requests if r.method == "PATCH" and r.path.endswith(f"/{group}")])
            burst_patches -= before
            peak = vm_hwm_mb(proc.pid)
        finally:
            if args.py_spy:
                proc.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT only
            else:
                proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            os.unlink(kubeconfig)
            await emu.stop()
            gc.unfreeze()
    pods = size * args.pods_per_gang
    result = {
        "gangs": size,
        "pods": pods,
        "first_reconcile_s": round(first, 3),
        "first_reconcile_grouper_ms": own,
        "first_reconcile_cpu_s": first_cpu,
        "phases_s": {name: round(value, 3) for name, value in phases.items()},
        "first_reconcile_us_per_pod": round(first / pods * 1e6, 1),
        "first_reconcile_grouper_us_per_pod": own and round(own / pods * 1e3, 1),
        "first_reconcile_cpu_us_per_pod": first_cpu and round(first_cpu / pods * 1e6, 1),
        "reaction_p50_ms": round(statistics.median(latencies), 2),
        "reaction_p99_ms": round(percentile(latencies, 99), 2),
        "reaction_max_ms": round(max(latencies), 2),
        "scales": len(latencies),
        "patches_per_scale": round(patches / max(1, len(latencies)), 3),
        "burst_1000_pods_ms": round(burst_ms, 1),
        "burst_patches": burst_patches,
        "rss_after_first_reconcile_mb": rss_after_sync and round(rss_after_sync, 1),
        "peak_rss_mb": peak and round(peak, 1),
    }
    return result


# per-pod first-reconcile costs compared between the largest and the smallest size
RATIOS = {
    "first_reconcile_us_per_pod": "wall, from process start",
    "first_reconcile_grouper_us_per_pod": "wall, the grouper's own log",
    "first_reconcile_cpu_us_per_pod": "CPU time of the grouper",
}


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def main(args: argparse.Namespace) -> dict:
    runs = []
    for _ in range(args.rounds):
        for size in args.gangs:
            load_before = load_average()
            result = await measure(args, size)
            result["load_average_before"] = load_before
            result["load_average_after"] = load_average()
            runs.append(result)
    ratios: dict[str, list[float]] = {}  # per round: the largest size's per-pod cost / the smallest's
    smallest, largest = min(args.gangs), max(args.gangs)
    if smallest != largest:
        small = [r for r in runs if r["gangs"] == smallest]
        big = [r for r in runs if r["gangs"] == largest]
        for measure_name in RATIOS:
            ratios[measure_name] = [round(b[measure_name] / s[measure_name], 2) for s, b in zip(small, big)
                                    if s[measure_name] and b[measure_name]]
    return {"runs": runs, "ratios": ratios, "python": platform.python_version(), "cpus": os.cpu_count()}


def _span(values: list[float], digits: int) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if round(low, digits) == round(high, digits) else f"{low:.{digits}f}–{high:.{digits}f}"


def markdown(results: dict) -> str:
    """One column per size; with several rounds each cell is the range over them."""
    ok = lambda cond: "✅" if cond else "❌"  # noqa: E731
    runs = results["runs"]
    sizes = sorted({r["gangs"] for r in runs})
    by_size = {size: [r for r in runs if r["gangs"] == size] for size in sizes}

    def row(label: str, target: str, key, digits: int = 1, unit: str = "", limit=None) -> str:
        cells = []
        for size in sizes:
            values = [key(r) for r in by_size[size]]
            cell = f"{_span(values, digits)}{unit}"
            if limit is not None:
                cell += " " + ok(max(values) <= limit(by_size[size][0]["pods"]))
            cells.append(cell)
        return f"| {label} | {target} | " + " | ".join(cells) + " |"

    rounds = len(by_size[sizes[0]])
    lines = [
        "| measure | target | " + " | ".join(
            f"{by_size[s][0]['pods']:,} pods, {s:,} gangs" for s in sizes) + " |",
        "|---|---|" + "---|" * len(sizes),
        row("first complete reconcile (process start → all PodGroups right)", "≤ 10 s (10k), ≤ 12 s (100k)",
            lambda r: r["first_reconcile_s"], 2, " s", lambda pods: 10 if pods <= 10_000 else 12),
        row("… the grouper's own log (from cache sync start)", "",
            lambda r: (r["first_reconcile_grouper_ms"] or 0) / 1000, 2, " s"),
        row("… CPU time of the grouper until then", "", lambda r: r["first_reconcile_cpu_s"], 1, " s"),
        *(row(f"… {phase} (share of the first reconcile)", "",
              lambda r, phase=phase: 100 * r["phases_s"][phase] / r["first_reconcile_s"], 0, " %")
          for phase in ("start-up", "list and sync", "reconcile")),
        row("… per pod, wall from process start", "", lambda r: r["first_reconcile_us_per_pod"], 0, " µs"),
        row("… per pod, CPU", "", lambda r: r["first_reconcile_cpu_us_per_pod"], 0, " µs"),
        row("scale served → PodGroup patch, p50", "", lambda r: r["reaction_p50_ms"], 1, " ms"),
        row(f"scale served → PodGroup patch, p99 ({runs[0]['scales']} scales)", "≤ 200 ms",
            lambda r: r["reaction_p99_ms"], 1, " ms", lambda pods: 200),
        row("PodGroup patches per scale", "1", lambda r: r["patches_per_scale"], 2),
        row("scale to 1,000 replicas, pods arriving in a burst → patch", "",
            lambda r: r["burst_1000_pods_ms"], 0, " ms"),
        row("… PodGroup patches for that burst", "1", lambda r: r["burst_patches"], 0),
        row("peak RSS of the grouper", "≤ 200 MB (10k), ≤ 350 MB (100k)", lambda r: r["peak_rss_mb"] or 0, 0,
            " MB", lambda pods: 200 if pods <= 10_000 else 350),
        row("load average (1 min) when the size started", "", lambda r: r["load_average_before"][0], 2),
    ]
    if any(results["ratios"].values()):
        lines += ["", f"| per-pod first-reconcile cost, {sizes[-1]:,} / {sizes[0]:,} gangs "
                      f"({rounds} round{'s' if rounds != 1 else ''}) | target | ratio |", "|---|---|---|"]
    for name, values in results["ratios"].items():
        if values:
            lines.append(f"| {RATIOS[name]} | ≤ 1.5 | {_span(values, 2)} {ok(max(values) <= 1.5)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gangs", type=int, nargs="+", default=[1000, 10000],
                        help="gang counts to measure, each in its own run (default: 1000 10000)")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the sizes, interleaved")
    parser.add_argument("--pods-per-gang", type=int, default=10)
    parser.add_argument("--scales", type=int, default=300)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--py-spy", metavar="PREFIX", default="",
                        help="run the grouper under py-spy (pip install py-spy into the venv), its samples to "
                             "PREFIX.<gangs>.txt (collapsed stacks); the CPU and RSS figures are then py-spy's")
    parsed = parser.parse_args()
    res = asyncio.run(main(parsed))
    out = ROOT / "bench" / "out" / "grouper.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    print()
    print(markdown(res))
