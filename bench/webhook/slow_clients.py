"""``make bench-slow-clients``: the flood of issue 11 (item 3) against ``podgang webhook``:
``--clients`` TLS connections (3,000) that send their headers and part of a body, then
trickle the rest a byte at a time, connecting again whenever the webhook cuts them, for
``--duration`` seconds, while the apiserver's reviews (the recorded owned-pod CREATE,
one after another on a keep-alive connection) keep coming.

It reports the webhook's RSS (before, peak, at the end), the reviews answered during the
flood and their latency, and how many slow connections were cut. 127.0.0.1 only,
bounded in count and time. The webhook runs with its defaults (``--max-connections``
500, ``--read-header-timeout`` 2s, ``--read-timeout`` 4s) unless ``--webhook-arg`` says
otherwise. Results go to ``bench/out/slow-clients.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from tests.webhook_processes import (ApiserverReviews, closed_by_webhook, rss_mb, trickling_client,  # noqa: E402
                                     webhook_process)

OUT = ROOT / "bench" / "out"


async def main(args: argparse.Namespace) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="podgang-slow-"))
    async with webhook_process(work, *args.webhook_arg) as (wh, port, ctx):
        pid = wh.proc.pid
        async with aiohttp.ClientSession() as session:
            reviews = ApiserverReviews(session, port, ctx)
            await reviews.warm()
            before = rss_mb(pid)
            peak = before
            cut: list[int] = []
            began = time.monotonic()
            stop_at = began + args.duration
            print(f"[slow-clients] RSS before {before:.0f} MB; {args.clients} trickling clients for {args.duration:g}s", file=sys.stderr)
            flood = [asyncio.create_task(trickling_client(port, ctx, stop_at, cut)) for _ in range(args.clients)]
            n = 0
            next_report = began + 5
            while time.monotonic() < stop_at:
                await reviews.review(1000 + n)
                n += 1
                peak = max(peak, rss_mb(pid))
                if time.monotonic() >= next_report:
                    next_report += 5
                    print(f"[slow-clients] {time.monotonic() - began:4.0f}s RSS {rss_mb(pid):.0f} MB, cut {len(cut)}, "
                          f"reviews {len(reviews.latencies)} ok / {len(reviews.failures)} failed", file=sys.stderr)
                await asyncio.sleep(0.02)
            await asyncio.wait_for(asyncio.gather(*flood), 60)
            end = rss_mb(pid)
            async with session.get(f"https://127.0.0.1:{port}/metrics", ssl=ctx) as resp:
                metrics = await resp.text()
    report = {
        "clients": args.clients,
        "duration_s": args.duration,
        "webhook_args": args.webhook_arg,
        "rss_mb": {"before": round(before, 1), "peak": round(peak, 1), "end": round(end, 1)},
        "reviews": reviews.report(),
        "slow_connections_cut_seen_by_clients": len(cut),
        "closed_by_webhook": closed_by_webhook(metrics),
    }
    (OUT / "slow-clients.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0 if report["reviews"]["answered"] and peak < args.rss_limit_mb else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=3000)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--rss-limit-mb", type=float, default=256.0, help="fail when the peak RSS reaches this (the chart's limit)")
    parser.add_argument("--webhook-arg", action="append", default=[], help="extra flag for podgang webhook (repeatable)")
    sys.exit(asyncio.run(main(parser.parse_args())))
