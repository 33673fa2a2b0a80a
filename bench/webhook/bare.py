"""The baseline: a bare aiohttp TLS endpoint that reads the body and returns a fixed
AdmissionReview answer (same event loop, TLS settings and response size class as
podgang webhook, none of its work). With ``--parse`` it also decodes the body with
orjson first: the least any webhook must do, as a second reference point."""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl

import orjson
from aiohttp import web

FIXED = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"fixed","allowed":true,'
    b'"patchType":"JSONPatch","patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2Fubm90YXRpb25zIiwidmFsdWUiOnsicG9kLWdyb3VwLW5hbWUiOiJwZy13ZWIifX1d"}}'
)


async def answer(request: web.Request) -> web.Response:
    await request.read()
    return web.Response(body=FIXED, content_type="application/json")


async def parse_and_answer(request: web.Request) -> web.Response:
    orjson.loads(await request.read())
    return web.Response(body=FIXED, content_type="application/json")


async def main(args: argparse.Namespace) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args.cert, args.key)
    app = web.Application(client_max_size=3 * 1024 * 1024 + 1)
    app.router.add_post("/mutate-pods", parse_and_answer if args.parse else answer)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port, ssl_context=ctx, backlog=1024).start()
    print(f"bare endpoint serving on {args.host}:{args.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--parse", action="store_true", help="decode the body with orjson before answering")
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.run(main(args))
    except ImportError:
        asyncio.run(main(args))
