"""`podgang certs generate`: files, X.509 profile, CA reuse, errors, a real TLS handshake."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import os
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from podgang.certs import pki
from podgang.certs.directory import generate
from tests.paths import ROOT

REPO = ROOT

# The real `podgang` entry point (podgang.cli.main), limited to the certs sub-command so
# this test does not depend on the other sub-commands' modules being importable.
RUNNER = (
    "import sys\n"
    "from podgang import cli\n"
    "cli.SUBCOMMANDS = {'certs': cli.SUBCOMMANDS['certs']}\n"
    "sys.exit(cli.main(sys.argv[1:]))\n"
)


def podgang(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PODGANG_")}
    environ["PYTHONPATH"] = str(REPO) + os.pathsep + environ.get("PYTHONPATH", "")
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, env=environ, timeout=60, cwd=REPO
    )


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def ext(cert: x509.Certificate, cls):
    return cert.extensions.get_extension_for_class(cls)


def verify(leaf: x509.Certificate, cas: list[x509.Certificate], name: str, when: dt.datetime | None = None):
    """Full RFC 5280 / web PKI path validation with cryptography's verifier."""
    subject = x509.IPAddress(ipaddress.ip_address(name)) if _is_ip(name) else x509.DNSName(name)
    verifier = PolicyBuilder().store(Store(cas)).time(when or pki.utcnow()).build_server_verifier(subject)
    return verifier.verify(leaf, [])


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------- the command


def test_generate_writes_a_ca_and_a_serving_certificate(tmp_path):
    out = tmp_path / "pki"
    before = pki.utcnow()
    result = podgang(
        "certs", "generate", "--out", str(out),
        "--dns-name", "podgang.podgang-system.svc", "--dns-name", "podgang",
        "--ip", "127.0.0.1", "--ip", "::1",
    )
    assert result.returncode == 0, result.stderr
    for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
        assert str(out / name) in result.stdout, result.stdout
        assert (out / name).is_file()
    assert stat.S_IMODE((out / "ca.key").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "tls.key").stat().st_mode) == 0o600

    ca, leaf = load(out / "ca.crt"), load(out / "tls.crt")
    # the CA is a proper CA
    bc = ext(ca, x509.BasicConstraints)
    assert bc.critical and bc.value.ca is True
    ku = ext(ca, x509.KeyUsage).value
    assert ku.key_cert_sign and ku.crl_sign and not ku.digital_signature
    ski = ext(ca, x509.SubjectKeyIdentifier).value
    assert ca.subject == ca.issuer
    # the leaf is a server certificate issued by it
    assert ext(leaf, x509.BasicConstraints).value.ca is False
    leaf_ku = ext(leaf, x509.KeyUsage).value
    assert leaf_ku.digital_signature and not leaf_ku.key_encipherment and not leaf_ku.key_cert_sign
    assert list(ext(leaf, x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert ext(leaf, x509.AuthorityKeyIdentifier).value.key_identifier == ski.digest
    san = ext(leaf, x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["podgang.podgang-system.svc", "podgang"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "podgang.podgang-system.svc"
    assert leaf.issuer == ca.subject
    # default key type: EC P-256, for both
    for cert in (ca, leaf):
        assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        assert cert.public_key().curve.name == "secp256r1"
    # tolerates clock skew: valid from a few minutes before it was made
    assert leaf.not_valid_before_utc <= before - dt.timedelta(minutes=2)
    assert leaf.not_valid_after_utc - before > dt.timedelta(days=364)
    assert ca.not_valid_after_utc - before > dt.timedelta(days=3649)
    # the chain validates for every name
    for name in ("podgang.podgang-system.svc", "podgang", "127.0.0.1", "::1"):
        assert verify(leaf, [ca], name)[-1] == ca
    with pytest.raises(VerificationError):
        verify(leaf, [ca], "other.podgang-system.svc")
    # the keys belong to the certificates
    assert pki.key_matches(ca, pki.load_key((out / "ca.key").read_bytes()))
    assert pki.key_matches(leaf, pki.load_key((out / "tls.key").read_bytes()))


def test_rsa_keys_and_validity_flags(tmp_path):
    result = podgang(
        "certs", "generate", "--out", str(tmp_path), "--dns-name", "hook.ns.svc",
        "--key-type", "rsa", "--days", "30", "--ca-days", "90",
    )
    assert result.returncode == 0, result.stderr
    ca, leaf = load(tmp_path / "ca.crt"), load(tmp_path / "tls.crt")
    assert isinstance(leaf.public_key(), rsa.RSAPublicKey) and leaf.public_key().key_size == 2048
    assert isinstance(ca.public_key(), rsa.RSAPublicKey)
    ku = ext(leaf, x509.KeyUsage).value
    assert ku.digital_signature and ku.key_encipherment
    assert dt.timedelta(days=29) < leaf.not_valid_after_utc - leaf.not_valid_before_utc <= dt.timedelta(days=30, minutes=6)
    assert dt.timedelta(days=89) < ca.not_valid_after_utc - ca.not_valid_before_utc <= dt.timedelta(days=90, minutes=6)
    verify(leaf, [ca], "hook.ns.svc")


def test_flags_can_come_from_podgang_environment_variables(tmp_path):
    result = podgang(
        "certs", "generate",
        env={"PODGANG_OUT": str(tmp_path), "PODGANG_DNS_NAME": "a.ns.svc,a", "PODGANG_IP": "10.0.0.7"},
    )
    assert result.returncode == 0, result.stderr
    leaf = load(tmp_path / "tls.crt")
    dns, ips = pki.san_names(leaf)
    assert dns == {"a.ns.svc", "a"} and ips == {ipaddress.ip_address("10.0.0.7")}


def test_rerun_keeps_the_ca_and_renews_the_leaf(tmp_path):
    first = podgang("certs", "generate", "--out", str(tmp_path), "--dns-name", "hook.ns.svc")
    assert first.returncode == 0, first.stderr
    ca1, leaf1 = load(tmp_path / "ca.crt"), load(tmp_path / "tls.crt")
    ca_key1 = (tmp_path / "ca.key").read_bytes()
    leaf_key1 = (tmp_path / "tls.key").read_bytes()

    second = podgang("certs", "generate", "--out", str(tmp_path), "--dns-name", "hook.ns.svc", "--dns-name", "hook")
    assert second.returncode == 0, second.stderr
    assert "kept CA" in second.stdout
    ca2, leaf2 = load(tmp_path / "ca.crt"), load(tmp_path / "tls.crt")
    assert pki.fingerprint(ca2) == pki.fingerprint(ca1)
    assert (tmp_path / "ca.key").read_bytes() == ca_key1
    assert leaf2.serial_number != leaf1.serial_number
    assert (tmp_path / "tls.key").read_bytes() != leaf_key1
    assert pki.san_names(leaf2)[0] == {"hook.ns.svc", "hook"}
    # clients that trust the CA from the first run trust the renewed leaf
    verify(leaf2, [ca1], "hook")


@pytest.mark.parametrize(
    ("setup", "args", "expected"),
    [
        (None, ["--dns-name", "a.ns.svc", "--ip", "1.2.3"], "'1.2.3' is not an IPv4 or IPv6 address"),
        (None, ["--dns-name", "a.ns.svc", "--ip", "localhost"], "'localhost' is not an IPv4 or IPv6 address"),
        (None, [], "no subject alternative name"),
        (None, ["--dns-name", "bad_name!"], "is not a valid DNS name"),
        (None, ["--dns-name", "a.ns.svc", "--key-type", "dsa"], "invalid choice: 'dsa'"),
        (None, ["--dns-name", "a.ns.svc", "--days", "0"], "--days must be at least 1"),
        (None, ["--dns-name", "a.ns.svc", "--days", "ten"], "invalid int value: 'ten'"),
        ("corrupt-ca", ["--dns-name", "a.ns.svc"], "is not a readable PEM certificate"),
        ("corrupt-key", ["--dns-name", "a.ns.svc"], "is not a readable unencrypted PEM private key"),
        ("mismatched-key", ["--dns-name", "a.ns.svc"], "does not match CA certificate"),
        ("missing-key", ["--dns-name", "a.ns.svc"], "exists but"),
        ("not-a-ca", ["--dns-name", "a.ns.svc"], "is not a CA certificate"),
        ("unreadable-ca", ["--dns-name", "a.ns.svc"], "cannot read"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, setup, args, expected):
    out = tmp_path / "pki"
    if setup:
        generate(out, dns_names=["seed.ns.svc"])
        if setup == "corrupt-ca":
            (out / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        elif setup == "corrupt-key":
            (out / "ca.key").write_bytes(b"garbage")
        elif setup == "mismatched-key":
            (out / "ca.key").write_bytes(pki.key_pem(pki.new_key("ec")))
        elif setup == "missing-key":
            (out / "ca.key").unlink()
        elif setup == "not-a-ca":
            # the leaf and its key posing as the CA
            (out / "ca.crt").write_bytes((out / "tls.crt").read_bytes())
            (out / "ca.key").write_bytes((out / "tls.key").read_bytes())
        elif setup == "unreadable-ca":
            (out / "ca.crt").unlink()
            (out / "ca.crt").mkdir()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} if out.exists() else {}
    result = podgang("certs", "generate", "--out", str(out), *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("podgang certs generate: error: ")
    assert expected in lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} if out.exists() else {}
    assert after == before  # nothing was written


def test_expired_ca_is_refused(tmp_path):
    long_ago = pki.utcnow() - dt.timedelta(days=40)
    generate(tmp_path, dns_names=["a.ns.svc"], ca_days=30, now=long_ago)
    result = podgang("certs", "generate", "--out", str(tmp_path), "--dns-name", "a.ns.svc")
    assert result.returncode == 2
    assert "expired" in result.stderr and len(result.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- the Python API


def test_python_api_with_an_injected_clock(tmp_path):
    now = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    result = generate(tmp_path, dns_names=["x.ns.svc"], ips=["192.0.2.1"], days=10, ca_days=20, now=now)
    assert result.ca_created
    leaf = load(tmp_path / "tls.crt")
    assert leaf.not_valid_before_utc == now - pki.BACKDATE
    assert leaf.not_valid_after_utc == now + dt.timedelta(days=10)
    assert result.leaf_cert.serial_number == leaf.serial_number
    verify(leaf, [load(tmp_path / "ca.crt")], "192.0.2.1", when=now)
    # a leaf never outlives its CA
    later = now + dt.timedelta(days=15)
    again = generate(tmp_path, dns_names=["x.ns.svc"], days=10, now=later)
    assert not again.ca_created
    assert again.leaf_cert.not_valid_after_utc == result.ca_cert.not_valid_after_utc
    assert any("cut short" in m for m in again.messages)


def test_python_api_raises_cert_error(tmp_path):
    with pytest.raises(pki.CertError, match="no subject alternative name"):
        generate(tmp_path, dns_names=[], ips=[])
    with pytest.raises(pki.CertError, match="not an IPv4 or IPv6 address"):
        generate(tmp_path, dns_names=["a"], ips=["300.1.1.1"])
    assert list(tmp_path.iterdir()) == []


def test_long_first_dns_name_has_no_common_name(tmp_path):
    long_name = ".".join(["a" * 60, "b" * 60, "svc"])
    generate(tmp_path, dns_names=[long_name])
    leaf = load(tmp_path / "tls.crt")
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME) == []
    assert ext(leaf, x509.SubjectAlternativeName).critical
    verify(leaf, [load(tmp_path / "ca.crt")], long_name)


# ---------------------------------------------------------------- a real TLS handshake


async def _handshake(cert_dir: Path, client_ctx: ssl.SSLContext, server_hostname: str,
                     server_max: ssl.TLSVersion | None = None) -> tuple[str, bytes]:
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if server_max is not None:
        server_ctx.maximum_version = server_max
    server_ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            data = await reader.readline()
            writer.write(b"echo " + data)
            await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname=server_hostname), 10
        )
        try:
            version = writer.get_extra_info("ssl_object").version()
            writer.write(b"hello\n")
            await writer.drain()
            reply = await asyncio.wait_for(reader.readline(), 10)
        finally:
            writer.close()
        return version, reply
    finally:
        server.close()
        await server.wait_closed()


def _client(cafile: Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(cafile))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@pytest.mark.parametrize("key_type", ["ec", "rsa"])
async def test_tls_server_with_generated_leaf_is_trusted_through_ca_crt_only(tmp_path, key_type):
    generate(tmp_path, dns_names=["podgang.podgang-system.svc", "podgang"], ips=["127.0.0.1"], key_type=key_type)
    client = _client(tmp_path / "ca.crt")
    assert client.verify_mode == ssl.CERT_REQUIRED and client.check_hostname
    version, reply = await _handshake(tmp_path, client, "podgang.podgang-system.svc")
    assert reply == b"echo hello\n"
    assert version in ("TLSv1.2", "TLSv1.3")

    # TLS 1.2 as the floor works: a server capped at 1.2 still completes the handshake
    version, reply = await _handshake(tmp_path, client, "podgang", server_max=ssl.TLSVersion.TLSv1_2)
    assert (version, reply) == ("TLSv1.2", b"echo hello\n")


async def test_tls_handshake_fails_for_a_foreign_ca_or_a_wrong_name(tmp_path):
    good, other = tmp_path / "good", tmp_path / "other"
    generate(good, dns_names=["podgang.podgang-system.svc"])
    generate(other, dns_names=["podgang.podgang-system.svc"])
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(good, _client(other / "ca.crt"), "podgang.podgang-system.svc")
    with pytest.raises(ssl.SSLCertVerificationError):
        await _handshake(good, _client(good / "ca.crt"), "evil.podgang-system.svc")
    # a renewed leaf under the same CA keeps working for the old client trust
    generate(good, dns_names=["podgang.podgang-system.svc"])
    _, reply = await _handshake(good, _client(good / "ca.crt"), "podgang.podgang-system.svc")
    assert reply == b"echo hello\n"
