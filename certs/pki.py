"""Pure X.509 helpers: make a CA and a serving leaf, load and check them.

No I/O, no Kubernetes: everything takes and returns PEM bytes or cryptography
objects, and every function that depends on the time takes ``now`` explicitly.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from typing import Iterable, Sequence, Union

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = Union[ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]
IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]

KEY_TYPES = ("ec", "rsa")
CA_NAME_PREFIX = "podgang-ca"
#: certificates start this long before "now" so a peer whose clock is behind accepts them
BACKDATE = dt.timedelta(minutes=5)
#: renew when less than this fraction of a certificate's validity is left
RENEW_FRACTION = 1 / 3


class CertError(Exception):
    """A certificate or key is missing, unreadable or inconsistent (one-line message)."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def as_utc(when: dt.datetime) -> dt.datetime:
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    return when.astimezone(dt.timezone.utc)


# ---------------------------------------------------------------- keys


def new_key(key_type: str = "ec") -> PrivateKey:
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise CertError(f"unknown key type {key_type!r}: expected one of {', '.join(KEY_TYPES)}")


def key_type_of(key) -> str:
    if isinstance(key, (ec.EllipticCurvePrivateKey, ec.EllipticCurvePublicKey)):
        return "ec"
    if isinstance(key, (rsa.RSAPrivateKey, rsa.RSAPublicKey)):
        return "rsa"
    return type(key).__name__


def key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def bundle_pem(certs: Iterable[x509.Certificate]) -> bytes:
    return b"".join(cert_pem(c) for c in certs)


def load_key(data: bytes, what: str = "private key") -> PrivateKey:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise CertError(f"{what} is not a readable unencrypted PEM private key ({_short(exc)})") from None
    if not isinstance(key, (ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey)):
        raise CertError(f"{what} is a {type(key).__name__}: only EC and RSA keys are supported")
    return key


def load_certs(data: bytes, what: str = "certificate") -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise CertError(f"{what} is not a readable PEM certificate ({_short(exc)})") from None
    if not certs:
        raise CertError(f"{what} holds no certificate")
    return certs


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _spki(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_matches(cert: x509.Certificate, key: PrivateKey) -> bool:
    return _spki(cert.public_key()) == _spki(key.public_key())


def fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


# ---------------------------------------------------------------- making certificates


def make_ca(
    *,
    now: dt.datetime | None = None,
    days: int = 3650,
    key_type: str = "ec",
    key: PrivateKey | None = None,
    common_name: str | None = None,
) -> tuple[x509.Certificate, PrivateKey]:
    """A self-signed CA: BasicConstraints ca=True (critical), KeyUsage keyCertSign+cRLSign."""
    now = as_utc(now or utcnow())
    if days < 1:
        raise CertError(f"CA validity must be at least 1 day, got {days}")
    key = key or new_key(key_type)
    # a unique subject per CA keeps an old and a new CA apart in one caBundle
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or f"{CA_NAME_PREFIX}@{int(now.timestamp())}")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def parse_ips(values: Iterable[str]) -> list[IPAddress]:
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise CertError(f"--ip {value!r} is not an IPv4 or IPv6 address") from None
    return out


def make_leaf(
    ca_cert: x509.Certificate,
    ca_key: PrivateKey,
    *,
    dns_names: Sequence[str] = (),
    ips: Sequence[IPAddress | str] = (),
    now: dt.datetime | None = None,
    days: int = 365,
    key_type: str = "ec",
    key: PrivateKey | None = None,
) -> tuple[x509.Certificate, PrivateKey]:
    """A serving certificate for ``dns_names`` and ``ips``, signed by the CA.

    Its validity starts :data:`BACKDATE` before ``now`` and never outlasts the CA.
    """
    now = as_utc(now or utcnow())
    if days < 1:
        raise CertError(f"certificate validity must be at least 1 day, got {days}")
    dns_names = [n.strip() for n in dns_names if n and n.strip()]
    ip_list = [ipaddress.ip_address(i) if isinstance(i, str) else i for i in ips]
    if not dns_names and not ip_list:
        raise CertError("no subject alternative name: give at least one --dns-name or --ip")
    for name in dns_names:
        _check_dns_name(name)
    key = key or new_key(key_type)
    cn = dns_names[0] if dns_names else str(ip_list[0])
    # a common name longer than 64 characters is not allowed: the SANs carry the names anyway
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if len(cn) <= 64 else [])
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    san = x509.SubjectAlternativeName(
        [x509.DNSName(n) for n in _unique(dns_names)] + [x509.IPAddress(i) for i in _unique(ip_list)]
    )
    is_rsa = isinstance(key, rsa.RSAPrivateKey)
    try:
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(
            ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        )
    except x509.ExtensionNotFound:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=is_rsa,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
        .add_extension(san, critical=len(subject) == 0)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _unique(items):
    seen, out = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _check_dns_name(name: str) -> None:
    label_ok = lambda s: 0 < len(s) <= 63 and all(c.isalnum() or c == "-" for c in s) and s[0] != "-" and s[-1] != "-"  # noqa: E731
    labels = name.split(".")
    if labels and labels[0] == "*":
        labels = labels[1:]
    if len(name) > 253 or not labels or not all(label_ok(label) and label.isascii() for label in labels):
        raise CertError(f"--dns-name {name!r} is not a valid DNS name")


# ---------------------------------------------------------------- checking


def is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def issued_by(leaf: x509.Certificate, ca: x509.Certificate) -> bool:
    """True if ``ca`` signed ``leaf`` (issuer name and signature)."""
    try:
        leaf.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def san_names(cert: x509.Certificate) -> tuple[set[str], set[IPAddress]]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return {n.lower() for n in san.get_values_for_type(x509.DNSName)}, set(san.get_values_for_type(x509.IPAddress))


def remaining_fraction(cert: x509.Certificate, now: dt.datetime) -> float:
    """Share of the certificate's validity still ahead at ``now`` (<= 0 once expired)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    total = (end - start).total_seconds()
    if total <= 0:
        return 0.0
    return (end - as_utc(now)).total_seconds() / total


def renew_at(cert: x509.Certificate) -> dt.datetime:
    """The moment less than :data:`RENEW_FRACTION` of the validity is left."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return end - (end - start) * RENEW_FRACTION


def needs_renewal(cert: x509.Certificate, now: dt.datetime) -> str | None:
    """Why ``cert`` should be renewed at ``now``, or None."""
    now = as_utc(now)
    if now >= cert.not_valid_after_utc:
        return f"expired at {cert.not_valid_after_utc.isoformat()}"
    if now < cert.not_valid_before_utc:
        return f"not valid before {cert.not_valid_before_utc.isoformat()}"
    if now >= renew_at(cert):
        return f"less than a third of its validity left (expires {cert.not_valid_after_utc.isoformat()})"
    return None


def leaf_problem(
    leaf: x509.Certificate,
    leaf_key: PrivateKey,
    ca: x509.Certificate,
    *,
    dns_names: Iterable[str] = (),
    ips: Iterable[IPAddress] = (),
    now: dt.datetime,
) -> str | None:
    """Why ``leaf`` cannot keep serving ``dns_names``/``ips`` under ``ca`` at ``now``, or None."""
    if not key_matches(leaf, leaf_key):
        return "tls.key does not match tls.crt"
    if not issued_by(leaf, ca):
        return "tls.crt does not verify against the CA"
    if is_ca(leaf):
        return "tls.crt is a CA certificate, not a serving certificate"
    have_dns, have_ips = san_names(leaf)
    missing = [n for n in dns_names if n.lower() not in have_dns] + [str(i) for i in ips if i not in have_ips]
    if missing:
        return f"tls.crt does not cover {', '.join(missing)}"
    return needs_renewal(leaf, now)


def describe(cert: x509.Certificate) -> str:
    dns, ips = san_names(cert)
    names = sorted(dns) + sorted(str(i) for i in ips)
    subject = cert.subject.rfc4514_string() or "(empty subject)"
    sans = f", SANs {','.join(names)}" if names else ""
    return f"{subject}{sans}, serial {cert.serial_number:x}, expires {cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
