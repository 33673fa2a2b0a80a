"""``podgang certs generate``: a CA and a serving certificate in a directory.

Files: ``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` (PEM, keys mode 0600). An
existing CA in the directory is kept (the leaf is renewed under it), so re-running
the command rotates the serving certificate without touching what clients trust.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from cryptography import x509

from podgang.certs import pki
from podgang.certs.files import CERT_MODE, KEY_MODE, atomic_write
from podgang.certs.pki import CertError

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


@dataclass
class GenerateResult:
    out_dir: Path
    ca_cert: x509.Certificate
    leaf_cert: x509.Certificate
    ca_created: bool
    messages: list[str] = field(default_factory=list)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CertError(f"cannot read {path}: {exc.strerror or exc}") from None


def load_ca(out_dir: Path, now: dt.datetime) -> tuple[x509.Certificate, pki.PrivateKey] | None:
    """The CA already in ``out_dir``, checked; None when there is none."""
    cert_path, key_path = out_dir / CA_CERT, out_dir / CA_KEY
    has_cert, has_key = cert_path.exists(), key_path.exists()
    if not has_cert and not has_key:
        return None
    if not has_key:
        raise CertError(f"{cert_path} exists but {key_path} does not: restore the CA key or remove {cert_path} to create a new CA")
    if not has_cert:
        raise CertError(f"{key_path} exists but {cert_path} does not: restore the CA certificate or remove {key_path} to create a new CA")
    certs = pki.load_certs(_read(cert_path), f"existing CA {cert_path}")
    key = pki.load_key(_read(key_path), f"existing CA key {key_path}")
    matching = [c for c in certs if pki.key_matches(c, key)]
    if not matching:
        raise CertError(f"CA key {key_path} does not match CA certificate {cert_path}")
    ca = max(matching, key=lambda c: c.not_valid_before_utc)
    if not pki.is_ca(ca):
        raise CertError(f"{cert_path} is not a CA certificate (BasicConstraints ca=True missing)")
    if now >= ca.not_valid_after_utc:
        raise CertError(
            f"existing CA {cert_path} expired at {ca.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}: "
            f"remove {cert_path} and {key_path} to create a new CA"
        )
    return ca, key


def generate(
    out_dir: str | os.PathLike,
    *,
    dns_names: Sequence[str] = (),
    ips: Sequence[str] = (),
    days: int = 365,
    ca_days: int = 3650,
    key_type: str = "ec",
    now: dt.datetime | None = None,
) -> GenerateResult:
    """Write ``ca.crt``/``ca.key`` (kept if present) and a fresh ``tls.crt``/``tls.key``.

    Raises :class:`certs.pki.CertError` with a one-line message on bad input or a
    broken existing CA; nothing is written in that case.
    """
    now = pki.as_utc(now or pki.utcnow())
    if key_type not in pki.KEY_TYPES:
        raise CertError(f"--key-type {key_type!r}: expected one of {', '.join(pki.KEY_TYPES)}")
    if days < 1:
        raise CertError(f"--days must be at least 1, got {days}")
    if ca_days < 1:
        raise CertError(f"--ca-days must be at least 1, got {ca_days}")
    ip_list = pki.parse_ips(ips)
    dns_list = [n.strip() for n in dns_names if n.strip()]
    if not dns_list and not ip_list:
        raise CertError("no subject alternative name: give at least one --dns-name or --ip")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CertError(f"--out {out} exists and is not a directory")

    existing = load_ca(out, now) if out.is_dir() else None
    messages: list[str] = []
    if existing is None:
        ca_cert, ca_key = pki.make_ca(now=now, days=ca_days, key_type=key_type)
    else:
        ca_cert, ca_key = existing
    leaf, leaf_key = pki.make_leaf(ca_cert, ca_key, dns_names=dns_list, ips=ip_list, now=now, days=days, key_type=key_type)

    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)
        if existing is None:
            atomic_write(out / CA_KEY, pki.key_pem(ca_key), KEY_MODE)
            atomic_write(out / CA_CERT, pki.cert_pem(ca_cert), CERT_MODE)
            messages.append(f"created CA {out / CA_CERT} and {out / CA_KEY}: {pki.describe(ca_cert)}")
        else:
            messages.append(f"kept CA {out / CA_CERT}: {pki.describe(ca_cert)}")
        # key first, certificate last: a reader that watches tls.crt sees a matching pair
        atomic_write(out / TLS_KEY, pki.key_pem(leaf_key), KEY_MODE)
        atomic_write(out / TLS_CERT, pki.cert_pem(leaf), CERT_MODE)
    except OSError as exc:
        raise CertError(f"cannot write to {out}: {exc.strerror or exc}") from None
    if now + dt.timedelta(days=days) > ca_cert.not_valid_after_utc:
        messages.append(
            f"warning: tls.crt is cut short to the CA's expiry {ca_cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
        )
    messages.append(f"wrote {out / TLS_CERT}: {pki.describe(leaf)}")
    messages.append(f"wrote {out / TLS_KEY} ({pki.key_type_of(leaf_key)}, mode 0600)")
    return GenerateResult(out, ca_cert, leaf, existing is None, messages)
