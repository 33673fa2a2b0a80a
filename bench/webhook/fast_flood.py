"""``make bench-fast-flood``: the fast flood of issue 35 (item 1) against ``podgang webhook``,
beside the trickling one of ``slow_clients.py``. Two runs, each on a fresh process:

- ``held``: ``--clients`` TLS connections (100) that each send a 3 MiB body but its last
  byte at full speed, then wait, connecting again whenever the webhook cuts them;
- ``whole``: ``--clients`` connections that each send whole 3 MiB reviews (an owned pod
  with a long annotation) back to back, as fast as the webhook answers them.

Meanwhile the apiserver's reviews (the recorded owned-pod CREATE, a few KiB, one after
another on a keep-alive connection) keep coming. Each mode runs twice, side by side: with the default budget, and with ``--body-budget
1Ti`` (as before there was one). Each run reports the webhook's RSS
(before, peak, at the end), those reviews' latency (p50, p99, max) and failures, what the
flood got (answered, shed with a 503, cut) and the webhook's own counts of closed
connections. The webhook runs with its defaults (``--body-budget`` 32Mi,
``--max-connections`` 500) unless ``--webhook-arg`` says otherwise. 127.0.0.1 only,
bounded in count and time. Results go to ``bench/out/fast-flood.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from podgang.webhook.connections import MAX_BODY  # noqa: E402
from tests.webhook_processes import (ApiserverReviews, closed_by_webhook, open_tls, request_head,  # noqa: E402
                                     rss_mb, webhook_process)
from tests.webhook_support import owned_pod_review  # noqa: E402

OUT = ROOT / "bench" / "out"
UNBOUNDED = "1Ti"  # --body-budget of the run beside each: as if there were none


def big_review(size: int) -> bytes:
    doc = owned_pod_review(7)
    doc["request"]["object"]["metadata"]["annotations"] = {"example.com/pad": "x" * size}
    return json.dumps(doc).encode()


async def held_client(port: int, ctx: ssl.SSLContext, stop_at: float, got: dict[str, int]) -> None:
    """Send a 3 MiB body but its last byte, then wait; again when cut; until ``stop_at``."""
    payload = request_head(MAX_BODY) + b" " * (MAX_BODY - 1)
    while time.monotonic() < stop_at:
        try:
            reader, writer = await asyncio.wait_for(open_tls(port, ctx), 5)
            writer.write(payload)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(64), max(stop_at - time.monotonic(), 0.01))
            got["shed" if answer.startswith(b"HTTP/1.1 503") else "cut"] += 1
        except asyncio.TimeoutError:
            got["held to the end"] += 1
            writer.close()
            return
        except (OSError, ssl.SSLError):
            got["cut"] += 1


async def whole_client(port: int, ctx: ssl.SSLContext, stop_at: float, got: dict[str, int], body: bytes) -> None:
    """Send whole 3 MiB reviews back to back on one connection (a new one when closed)."""
    head = request_head(len(body), "/mutate-pods")
    while time.monotonic() < stop_at:
        try:
            reader, writer = await asyncio.wait_for(open_tls(port, ctx), 5)
            while time.monotonic() < stop_at:
                writer.write(head + body)
                await writer.drain()
                status_line = await asyncio.wait_for(reader.readuntil(b"\r\n"), 30)
                rest = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                length = next(int(line.split(b":", 1)[1]) for line in rest.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                if status_line.startswith(b"HTTP/1.1 200"):
                    got["answered"] += 1
                else:
                    got["shed" if b" 503 " in status_line else "refused"] += 1
                    break  # the webhook closes after a refusal
            writer.close()
        except (OSError, ssl.SSLError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            got["cut"] += 1


async def run(mode: str, budget: str | None, args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"podgang-flood-{mode}-"))
    extra = ["--body-budget", budget] if budget else []
    async with webhook_process(work, "--health-port", "0", *extra, *args.webhook_arg) as (wh, port, ctx):
        pid = wh.proc.pid
        async with aiohttp.ClientSession() as session:
            reviews = ApiserverReviews(session, port, ctx)
            await reviews.warm()
            before = peak = rss_mb(pid)
            got: dict[str, int] = {"answered": 0, "shed": 0, "cut": 0, "refused": 0, "held to the end": 0}
            began = time.monotonic()
            stop_at = began + args.duration
            body = big_review(MAX_BODY - 8 * 1024)
            print(f"[fast-flood] {mode}: RSS before {before:.0f} MiB; {args.clients} clients for {args.duration:g}s",
                  file=sys.stderr)
            flood = [asyncio.create_task(held_client(port, ctx, stop_at, got) if mode == "held"
                                         else whole_client(port, ctx, stop_at, got, body)) for _ in range(args.clients)]
            n = 0
            while time.monotonic() < stop_at:
                await reviews.review(1000 + n)
                n += 1
                peak = max(peak, rss_mb(pid))
                await asyncio.sleep(0.02)  # the apiserver's pace, about 50 reviews a second
            await asyncio.wait_for(asyncio.gather(*flood), 60)
            end = rss_mb(pid)
            async with session.get(f"https://127.0.0.1:{port}/metrics", ssl=ctx) as resp:
                metrics = await resp.text()
    return {
        "mode": mode,
        "body_budget": budget or "default",
        "rss_mib": {"before": round(before, 1), "peak": round(peak, 1), "end": round(end, 1)},
        "apiserver_reviews": reviews.report(),
        "flood": got,
        "closed_by_webhook": closed_by_webhook(metrics),
    }


async def main(args: argparse.Namespace) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    runs = []
    for mode in args.mode:  # side by side: with the budget, and without one (what it buys)
        runs.append(await run(mode, None, args))
        if args.unbounded:
            runs.append(await run(mode, UNBOUNDED, args))
    report = {"clients": args.clients, "duration_s": args.duration, "webhook_args": args.webhook_arg, "runs": runs}
    (OUT / "fast-flood.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    ok = all(r["apiserver_reviews"]["answered"] and r["rss_mib"]["peak"] < args.rss_limit_mb
             for r in runs if r["body_budget"] != UNBOUNDED)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--mode", action="append", choices=("held", "whole"), help="default: both")
    parser.add_argument("--no-unbounded", dest="unbounded", action="store_false",
                        help="skip the run beside each with --body-budget 1Ti (as before the budget)")
    parser.add_argument("--rss-limit-mb", type=float, default=256.0, help="fail when a peak RSS reaches this (the chart's limit)")
    parser.add_argument("--webhook-arg", action="append", default=[], help="extra flag for podgang webhook (repeatable)")
    parsed = parser.parse_args()
    parsed.mode = parsed.mode or ["held", "whole"]
    sys.exit(asyncio.run(main(parsed)))
