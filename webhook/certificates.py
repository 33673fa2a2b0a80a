"""``--manage-certs``: the webhook keeps its own serving certificate.

At start-up, then every ``--cert-check-interval`` (sooner when the certificate
asks to be renewed earlier) and whenever the Secret changes (another replica renewed
it, an admin replaced it: a watch of that one Secret), :func:`certs.ensure` settles the
Secret and the ``caBundle`` of the webhook configurations, and :func:`certs.write_files`
puts the result into ``--cert-dir``, which the server re-reads. Until the first success the
server answers ``/readyz`` with 503; failures are retried with a growing delay.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from pathlib import Path
from typing import Any, Callable

from cryptography import x509

from podgang.api import Api, Forbidden, Gone
from podgang.certs import pki
from podgang.certs import kube as cert_store
from podgang.waits import event_set_within

log = logging.getLogger("podgang.webhook")

RETRY_FIRST, RETRY_MAX = 1.0, 60.0
#: how long one watch request of the Secret lasts before it is made again
SECRET_WATCH_SECONDS = 300


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
        self.changed = asyncio.Event()  # the Secret changed since the last check began

    async def ensure_once(self) -> float:
        """One ensure + write; the seconds until the next check."""
        cfg = self.config
        self.changed.clear()
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
            await self._until_due(wait)

    async def _until_due(self, seconds: float) -> None:
        """``seconds``, or less when the Secret changes meanwhile."""
        await event_set_within(self.changed, seconds)

    async def follow_secret(self) -> None:
        """Wake the check whenever the Secret changes, so that every replica serves a renewed
        certificate within seconds of the one that renewed it (not at its next check, up to
        ``--cert-check-interval`` later), and an admin's replacement is settled at once. Our own
        writes come back too: the check they start finds nothing to do and writes nothing.
        Without ``list``/``watch`` on the Secret (an older chart's RBAC) the periodic check
        alone is left, and said once."""
        cfg = self.config
        api = Api(self.api_client, timeout=max(cfg.api_timeout, 5.0))
        path = f"/api/v1/namespaces/{cfg.namespace}/secrets"
        query = {"fieldSelector": f"metadata.name={cfg.secret}"}
        version, retry = "", RETRY_FIRST
        while True:
            try:
                if not version:
                    version = (await api.get(path, **query))["metadata"]["resourceVersion"]
                async for event in api.watch(path, resource_version=version, timeout_seconds=SECRET_WATCH_SECONDS,
                                             query=query):
                    version = event["object"]["metadata"].get("resourceVersion") or version
                    if event["type"] != "BOOKMARK":
                        self.changed.set()
                retry = RETRY_FIRST
            except asyncio.CancelledError:
                raise
            except Gone:
                version = ""
            except Forbidden as exc:
                log.warning("not watching the certificate Secret: renewals by other replicas are served at the "
                            "next check", extra={"fields": {"error": exc.describe(),
                                                            "check_interval_s": cfg.cert_check_interval}})
                return
            except Exception as exc:  # transport errors, anything: watch again after a growing delay
                log.warning("the watch of the certificate Secret broke off",
                            extra={"fields": {"error": f"{type(exc).__name__}: {exc}", "retry_in_s": retry}})
                await asyncio.sleep(retry)
                version, retry = "", min(retry * 2, RETRY_MAX)
