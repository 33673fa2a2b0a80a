"""The serving certificate: TLS 1.2 or newer, re-read when the files change; and, when
configured (``--client-ca-file``), the CA whose client certificates the webhook requires.

The listening socket keeps one SSLContext for its whole life; each new handshake
is switched (``sni_callback``) to the context holding the newest certificate, so
a rotation (``podgang certs``, a Secret volume update, cert-manager) needs no
restart and connections already open are not disturbed.

Until ``tls.crt`` and ``tls.key`` can be loaded, a throw-away self-signed
certificate keeps the server answering ``/healthz`` (liveness) while ``/readyz``
says what is missing.

With a client CA, every handshake must present a client certificate that CA signed
(the apiserver's, configured in its AdmissionConfiguration): a caller without one, or
with one from another CA, is refused before any HTTP. The CA file is watched with the
serving pair: a new CA takes effect for new handshakes. Until it can be read no client
is accepted (the listening context requires a certificate and trusts nothing) and
``/readyz`` says so: it fails closed.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import ssl
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from podgang.metrics import WebhookMetrics

log = logging.getLogger("podgang.webhook")

CERT_FILE, KEY_FILE = "tls.crt", "tls.key"
ROTATION_WINDOW_NS = 2_000_000_000  # a pair younger than this that does not load may be mid-rotation

Signature = tuple[tuple[int, int, int, int], ...]


def _signature(*paths: Path) -> Signature | None:
    """What changes when a file is replaced or rewritten (None: a file is missing)."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)  # follows the symlinks of a Secret volume (..data)
        except OSError:
            return None
        out.append((st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev))
    return tuple(out)


def new_server_context(client_ca: str | os.PathLike | None = None, *, require_client: bool = False) -> ssl.SSLContext:
    """The webhook's TLS server context (the one place it is built). ``client_ca``: trust
    client certificates that CA file's CAs signed, and require one; ``require_client``:
    require one even though no CA is loaded (no client is then accepted)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_COMPRESSION
    ctx.set_alpn_protocols(["http/1.1"])
    if client_ca is not None or require_client:
        ctx.verify_mode = ssl.CERT_REQUIRED
    if client_ca is not None:
        ctx.load_verify_locations(cafile=os.fspath(client_ca))
    return ctx


def _placeholder_files(directory: str) -> tuple[str, str]:
    """A self-signed certificate for the time before the real one exists."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "podgang-webhook-waiting-for-certificates")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(directory, CERT_FILE), os.path.join(directory, KEY_FILE)
    with open(key_path, "wb") as handle:
        os.fchmod(handle.fileno(), 0o600)
        handle.write(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        )
    with open(cert_path, "wb") as handle:
        handle.write(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


class ServingCertificate:
    """The webhook's TLS identity, from ``cert_dir/tls.crt`` and ``cert_dir/tls.key``."""

    def __init__(self, cert_dir: str | os.PathLike, metrics: WebhookMetrics | None = None, *,
                 client_ca: str | os.PathLike | None = None):
        self.cert_dir = Path(cert_dir)
        self.cert_path = self.cert_dir / CERT_FILE
        self.key_path = self.cert_dir / KEY_FILE
        self.client_ca_path = Path(client_ca) if client_ca else None
        self.metrics = metrics
        self.loaded = False  # the real certificate (and the client CA, if any) is in use
        self.problem = self._waiting()
        self.not_after: dt.datetime | None = None
        self.serial: int | None = None
        self._signature: Signature | None = None
        self._current: ssl.SSLContext | None = None
        # the listening socket's context; with a client CA it requires a client certificate
        # from the start, and trusts none until the CA is loaded (the switch brings it)
        self.context = new_server_context(require_client=self.client_ca_path is not None)
        self.context.sni_callback = self._choose_context
        loaded = False
        if self.reload():  # the same pair serves a handshake that skips the switch
            try:
                self.context.load_cert_chain(self.cert_path, self.key_path)
                loaded = True
            except (OSError, ssl.SSLError):  # rotated in between: the switch serves the new pair
                pass
        if not loaded:
            with tempfile.TemporaryDirectory(prefix="podgang-placeholder-") as tmp:
                self.context.load_cert_chain(*_placeholder_files(tmp))

    def _choose_context(self, ssl_object: Any, server_name: str | None, listening: ssl.SSLContext) -> None:
        current = self._current
        if current is not None and current is not listening:
            ssl_object.context = current
        return None

    def _files(self) -> tuple[Path, ...]:
        return (self.cert_path, self.key_path, *((self.client_ca_path,) if self.client_ca_path else ()))

    def _waiting(self) -> str:
        *first, last = self._files()
        return f"waiting for {', '.join(map(str, first))} and {last}"

    def reload(self) -> bool:
        """Load the files if they changed since the last load; True when the real
        certificate is in use afterwards. A failed load keeps the previous one."""
        signature = _signature(*self._files())
        if signature is None:
            if not self.loaded:
                self.problem = self._waiting()
            return self.loaded
        if signature == self._signature:
            return self.loaded
        try:
            ctx = new_server_context(self.client_ca_path)
            ctx.load_cert_chain(self.cert_path, self.key_path)
            leaf = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
        except (OSError, ssl.SSLError, ValueError) as exc:
            if _signature(*self._files()) != signature:
                return self.loaded  # caught mid-rotation: the next check sees both new files
            if time.time_ns() - max(part[0] for part in signature) < ROTATION_WINDOW_NS:
                # just written: most likely the new key beside the old leaf, the new leaf
                # follows (podgang certs writes tls.key, then tls.crt); check again, and
                # report the pair only if it is still broken once it has settled
                return self.loaded
            self._signature = signature  # do not retry a broken pair until it changes again
            also = f" and client CA {self.client_ca_path}" if self.client_ca_path else ""
            self.problem = f"cannot load {self.cert_path} with {self.key_path}{also}: {exc}"
            log.error("serving certificate not loaded", extra={"fields": {"error": self.problem, "keeping": "previous"}})
            self._count("failed")
            return self.loaded
        if _signature(*self._files()) != signature:
            return self.loaded  # changed while loading: load again at the next check
        self._signature = signature
        self._current = ctx
        first = not self.loaded
        self.loaded = True
        self.problem = ""
        self.not_after = leaf.not_valid_after_utc
        self.serial = leaf.serial_number
        if self.metrics is not None:
            self.metrics.certificate_not_after.set(self.not_after.timestamp())
        self._count("loaded")
        log.info(
            "serving certificate loaded" if first else "serving certificate reloaded",
            extra={
                "fields": {
                    "cert": str(self.cert_path),
                    "subject": leaf.subject.rfc4514_string(),
                    "serial": format(leaf.serial_number, "x"),
                    "not_after": self.not_after.isoformat(),
                    "client_ca": str(self.client_ca_path) if self.client_ca_path else None,
                }
            },
        )
        return True

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.certificate_reloads.labels(result).inc()
