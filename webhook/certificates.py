"""``--manage-certs``: the webhook keeps its own serving certificate.

At start-up and then every ``--cert-check-interval`` (sooner when the certificate
asks to be renewed earlier), :func:`certs.ensure` settles the Secret and the
``caBundle`` of the webhook configurations, and :func:`certs.write_files` puts the
result into ``--cert-dir``, which the server re-reads. Until the first success the
server answers ``/readyz`` with 503; failures are retried with a growing delay.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path
from typing import Any, Callable

from cryptography import x509

from podgang.certs import pki
from podgang.certs import kube as cert_store

log = logging.getLogger("podgang.webhook")

RETRY_FIRST, RETRY_MAX = 1.0, 60.0


def _held_back(bundle, cert_dir: str) -> str:
    """Why the new serving certificate must not replace the one in ``cert_dir`` while
    the ``caBundle`` could not be patched ('' when it may): a leaf of a CA other than
    those written with the certificate served now (and published then) is not trusted
    by the API server until the patch goes through. Before anything was written,
    anything is better than the placeholder."""
    try:
        trusted = pki.load_certs((Path(cert_dir) / "ca.crt").read_bytes())
        (Path(cert_dir) / "tls.crt").stat()
    except (OSError, pki.CertError):
        return ""
    new = x509.load_pem_x509_certificate(bundle.cert_pem)
    if any(pki.issued_by(new, ca) for ca in trusted):
        return ""
    return (
        f"not serving the new certificate (issued by {new.issuer.rfc4514_string()}) until caBundle carries "
        f"its CA; the one served now stays"
    )


class CertificateKeeper:
    """Keeps ``config.cert_dir`` filled from the Secret; ``on_written`` re-reads it."""

    def __init__(self, config: Any, api_client: Any, on_written: Callable[[], None]):
        self.config = config
        self.api_client = api_client
        self.on_written = on_written
        self.problem = ""
        self.runs = 0

    async def ensure_once(self) -> float:
        """One ensure + write; the seconds until the next check."""
        cfg = self.config
        bundle = await cert_store.ensure(
            self.api_client,
            namespace=cfg.namespace,
            secret=cfg.secret,
            service=cfg.service,
            webhook_configs=cfg.webhook_configs,
            mutating_configs=cfg.mutating_webhook_configs,
            validating_configs=cfg.validating_webhook_configs,
            request_timeout=max(cfg.api_timeout, 5.0),
        )
        if bundle.errors:
            held = _held_back(bundle, cfg.cert_dir)
            if held:
                raise RuntimeError(f"{held}: {'; '.join(bundle.errors)}")
        # on the loop, on purpose: the certificate watcher never sees the new key beside the old leaf
        written = cert_store.write_files(bundle, cfg.cert_dir)
        self.on_written()
        self.runs += 1
        fields = {"secret": f"{cfg.namespace}/{cfg.secret}", "actions": list(bundle.actions), "files": written}
        if bundle.errors:
            fields["errors"] = list(bundle.errors)
            log.warning("certificates settled, some webhook configurations not patched", extra={"fields": fields})
        else:
            log.info("certificates settled", extra={"fields": fields})
        wait = cfg.cert_check_interval
        if bundle.renew_at is not None:
            until = (bundle.renew_at - dt.datetime.now(dt.timezone.utc)).total_seconds()
            wait = min(wait, max(until, 1.0))
        return wait

    async def run(self) -> None:
        retry = RETRY_FIRST
        while True:
            try:
                wait = await self.ensure_once()
                self.problem = ""
                retry = RETRY_FIRST
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # EnsureError, transport errors, anything: retry
                self.problem = f"{type(exc).__name__}: {exc}"
                log.error(
                    "cannot settle the serving certificate",
                    extra={"fields": {"error": self.problem, "retry_in_s": retry}},
                )
                wait, retry = retry, min(retry * 2, RETRY_MAX)
            await asyncio.sleep(wait)
