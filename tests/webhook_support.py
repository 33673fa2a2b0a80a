"""Shared pieces of the webhook tests: certificates, recorded reviews, a real TLS
server on 127.0.0.1, and a client that trusts it."""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import aiohttp
import jsonpatch
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from podgang.backends import KAI
from podgang.certs import pki
from podgang.settings import DEFAULT, Settings
from podgang.webhook.server import WebhookConfig, WebhookServer

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
ADMISSION = FIXTURES / "admission"
API_FIXTURES = FIXTURES / "api"

#: most recordings use the default scheduler; the tests treat it as in scope
TEST_SETTINGS: Settings = DEFAULT.with_changes(backends=(("default-scheduler", KAI), ("kai-scheduler", KAI)))


# ---------------------------------------------------------------------------
# recorded data


def review(name: str) -> dict[str, Any]:
    """A recorded AdmissionReview, as the apiserver sent it (without ``_captured``)."""
    doc = json.loads((ADMISSION / f"{name}.json").read_text())
    doc.pop("_captured", None)
    return doc


def review_names() -> list[str]:
    return sorted(p.stem for p in ADMISSION.glob("*.json"))


def api_status(name: str) -> dict[str, Any]:
    return json.loads((API_FIXTURES / f"{name}.json").read_text())


def with_annotations(doc: dict[str, Any], notes: dict[str, str], *, uid: str | None = None) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    md = out["request"]["object"]["metadata"]
    md["annotations"] = {**(md.get("annotations") or {}), **notes}
    if uid:
        out["request"]["uid"] = uid
    return out


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    patch = response.get("patch")
    if patch is None:
        return []
    assert response.get("patchType") == "JSONPatch"
    return json.loads(base64.b64decode(patch))


def patched(obj: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """``obj`` after the response's JSONPatch, applied with the jsonpatch library."""
    return jsonpatch.apply_patch(obj, decoded_patch(response), in_place=False)


def group_after(doc: dict[str, Any], response: dict[str, Any]) -> str | None:
    """The group the review's pod is in once the response's patch is applied
    (label and annotation must agree)."""
    md = patched(doc["request"]["object"], response)["metadata"]
    label = (md.get("labels") or {}).get("kai.scheduler/podgroup")
    assert label == (md.get("annotations") or {}).get("pod-group-name"), md
    return label


# ---------------------------------------------------------------------------
# the owners behind the recorded pods, for an API emulator

NS = "cap"
DEPLOYMENT_UID = "2d14ca47-2cb2-410d-8124-0dd58f4b12e1"
REPLICASET_UID = "92b73ed6-0342-49a0-b17f-2357c512dad2"
JOB_UID = "c64e554b-f9d2-4870-aa19-0062565c3d59"
CRON_RUN_UID = "0d893176-6fc7-4b03-9ae5-572233f06285"
STATEFULSET_UID = "ea1fc0ff-c6c6-4aa9-a3f6-d9d6ed82f23e"


def recorded_object(name: str, uid: str) -> dict:
    obj = copy.deepcopy(review(name)["request"]["object"])
    obj["metadata"]["uid"] = uid
    obj["metadata"].pop("managedFields", None)
    return obj


def seed_owners(emu: Any) -> None:
    """Put the recordings' owners into a tests.emulator.KubeEmulator."""
    emu.put(recorded_object("deployment-create", DEPLOYMENT_UID))
    emu.put(recorded_object("replicaset-create-by-deployment", REPLICASET_UID))
    emu.put(recorded_object("statefulset-create", STATEFULSET_UID))
    emu.put(recorded_object("job-create-by-cronjob", CRON_RUN_UID))
    emu.put(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "train", "namespace": NS, "uid": JOB_UID},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"}}},
        }
    )


def owned_pod_review(i: int) -> dict:
    doc = review("pod-create-by-replicaset")
    doc["request"]["uid"] = f"scale-up-{i}"
    return doc


# ---------------------------------------------------------------------------
# certificates


def podgang_certs_generate(out: Path, *, dns_name: str = "localhost", ip: str = "127.0.0.1") -> Path:
    """``podgang certs generate`` as a user runs it: ca.crt, ca.key, tls.crt, tls.key
    in ``out``. Run again on the same directory, it keeps the CA and renews the leaf
    (a rotation). Returns the CA file."""
    done = subprocess.run(
        [sys.executable, "-m", "podgang.cli", "certs", "generate", "--out", str(out), "--dns-name", dns_name, "--ip", ip],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return out / "ca.crt"


def leaf_in(cert_dir: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate((cert_dir / "tls.crt").read_bytes())


def client_context(ca_file: Path | str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    return ctx


def handshake(port: int, ctx: ssl.SSLContext, *, host: str = "127.0.0.1") -> tuple[str, bytes]:
    """A fresh TLS handshake (blocking): the protocol version and the peer's leaf (DER)."""
    with socket.create_connection((host, port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as tls:
            return tls.version(), tls.getpeercert(binary_form=True)


def client_pair(directory: Path, ca: tuple[x509.Certificate, Any], name: str = "kube-apiserver") -> tuple[Path, Path]:
    """A client certificate (ExtendedKeyUsage clientAuth, as the apiserver's must carry) signed by ``ca``."""
    ca_cert, ca_key = ca
    key = pki.new_key()
    now = pki.utcnow()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    directory.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = directory / "client.crt", directory / "client.key"
    cert_file.write_bytes(pki.cert_pem(cert))
    key_file.write_bytes(pki.key_pem(key))
    return cert_file, key_file


async def peer_certificate(port: int, ca_file: Path | str, *, host: str = "127.0.0.1") -> x509.Certificate:
    """The leaf a fresh TLS handshake presents (verified against ``ca_file``); the
    blocking handshake runs in a thread so a server on this loop can answer."""
    _, der = await asyncio.to_thread(handshake, port, client_context(ca_file), host=host)
    return x509.load_der_x509_certificate(der)


# ---------------------------------------------------------------------------
# polling (no sleeps for synchronisation)


async def eventually(check: Callable[[], Any], *, timeout: float = 10.0, interval: float = 0.02, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = check()
            if asyncio.iscoroutine(last):
                last = await last
            if last:
                return last
        except AssertionError as exc:
            last = exc
            if time.monotonic() >= deadline:
                raise
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout}s: {what or check} (last: {last!r})")
        await asyncio.sleep(interval)


# ---------------------------------------------------------------------------
# a running webhook


class Webhook:
    """A started :class:`WebhookServer` and a session that trusts its CA."""

    def __init__(self, server: WebhookServer, session: aiohttp.ClientSession, ca_file: Path):
        self.server = server
        self.session = session
        self.ca_file = ca_file
        self._ssl: ssl.SSLContext | None = None

    @property
    def ssl(self) -> ssl.SSLContext:
        """A client context trusting ``ca_file`` (loaded when first needed: it may
        not exist when the server starts)."""
        if self._ssl is None:
            self._ssl = client_context(self.ca_file)
        return self._ssl

    @property
    def port(self) -> int:
        return self.server.port

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    async def post_raw(self, path: str, data: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        async with self.session.post(
            self.url(path), data=data, headers=headers or {"Content-Type": "application/json"}, ssl=self.ssl
        ) as resp:
            return resp.status, await resp.read()

    async def review(self, path: str, doc: dict[str, Any]) -> dict[str, Any]:
        status, body = await self.post_raw(path + "?timeout=5s", json.dumps(doc).encode())
        assert status == 200, (status, body)
        answer = json.loads(body)
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        return answer["response"]

    async def mutate(self, doc: dict[str, Any]) -> dict[str, Any]:
        return await self.review("/mutate-pods", doc)

    async def validate(self, doc: dict[str, Any]) -> dict[str, Any]:
        return await self.review("/validate-pods", doc)

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.url(path), ssl=self.ssl) as resp:
            return resp.status, await resp.text()

    async def metric(self, name: str, **labels: str) -> float:
        """The value of one sample on /metrics (0 when absent)."""
        _, text = await self.get("/metrics")
        want = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
        for line in text.splitlines():
            if line.startswith("#"):
                continue
            sample, _, value = line.rpartition(" ")
            if _canonical(sample) == want:
                return float(value)
        return 0.0


def _canonical(sample: str) -> str:
    if "{" not in sample:
        return sample
    name, _, rest = sample.partition("{")
    parts = sorted(p for p in rest.rstrip("}").split(",") if p)
    return name + "{" + ",".join(parts) + "}"


@asynccontextmanager
async def running_webhook(
    tmp_path: Path,
    *,
    api_client: Any = None,
    settings: Settings = TEST_SETTINGS,
    cert_dir: Path | None = None,
    decision_log: Any = None,
    **config: Any,
) -> AsyncIterator[Webhook]:
    """A real webhook on 127.0.0.1 over TLS, with certificates from
    ``podgang certs generate`` (made in ``tmp_path/certs`` unless ``cert_dir`` is given)."""
    if cert_dir is None:
        cert_dir = tmp_path / "certs"
        podgang_certs_generate(cert_dir)
    ca_file = cert_dir / "ca.crt"
    cfg = WebhookConfig(host="127.0.0.1", port=0, cert_dir=str(cert_dir), settings=settings, **config)
    server = WebhookServer(cfg, api_client, decision_log=decision_log)
    await server.start()
    session = aiohttp.ClientSession()
    try:
        yield Webhook(server, session, ca_file)
    finally:
        await session.close()
        await server.stop()


async def mutate_once(tmp_path: Path, emu: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """The answer of a webhook reading the emulator ``emu`` to one review."""
    client = emu.api_client()
    try:
        async with running_webhook(tmp_path, api_client=client) as wh:
            return await wh.mutate(doc)
    finally:
        await client.close()


class ThreadedWebhook:
    """A webhook running on its own event loop in a thread, for synchronous tests
    (hypothesis drives it through ``http.client``)."""

    def __init__(self, tmp_path: Path, **config: Any):

        self.tmp_path = tmp_path
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="webhook-under-test", daemon=True)
        self.server: WebhookServer | None = None
        self._conn = None

    def __enter__(self) -> "ThreadedWebhook":
        cert_dir = self.tmp_path / "certs"
        self.ca_file = podgang_certs_generate(cert_dir)
        cfg = WebhookConfig(host="127.0.0.1", port=0, cert_dir=str(cert_dir), settings=self.config.pop("settings", TEST_SETTINGS), **self.config)
        self.server = WebhookServer(cfg, None)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._conn is not None:
            self._conn.close()
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:

        for attempt in (1, 2):
            if self._conn is None:
                self._conn = http.client.HTTPSConnection("127.0.0.1", self.server.port, context=client_context(self.ca_file), timeout=10)
            try:
                self._conn.request(method, path, body=body, headers=headers or {})
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self._conn.close()
                    self._conn = None
                return resp.status, data
            except (http.client.HTTPException, ConnectionError):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
