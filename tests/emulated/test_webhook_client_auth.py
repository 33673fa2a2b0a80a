"""The apiserver authenticated by its client certificate (``--client-ca-file``), over real
TLS: a caller without a certificate, or with one another CA signed, is refused at the
handshake (no HTTP, no review, no PodGroup); the apiserver's certificate is served. The CA
file is re-read when it changes, and until it can be read no caller is served."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from podgang.certs import pki
from podgang.webhook import cli
from tests.webhook_support import client_pair, eventually, running_webhook


def write_ca(path: Path, ca: tuple[x509.Certificate, object]) -> None:
    """Replace ``path`` as a Secret or ConfigMap volume does: a new file renamed over it."""
    tmp = path.with_suffix(".new")
    tmp.write_bytes(pki.cert_pem(ca[0]))
    os.replace(tmp, path)


def review_over_tls(port: int, server_ca: Path | None, client: tuple[Path, Path] | None) -> str:
    """One POST of a review over a fresh connection (blocking): ``served <status line>``, or
    ``refused: <why>`` when the handshake (or the first read after it, TLS 1.3) fails.
    ``server_ca`` None: the server's certificate is not checked (it serves a placeholder until
    its files load), so that a refusal is the server's."""
    ctx = ssl.create_default_context(cafile=str(server_ca)) if server_ca else ssl._create_unverified_context()
    if client is not None:
        ctx.load_cert_chain(*map(str, client))
    body = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}'
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"POST /mutate-pods HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
                answer = tls.recv(4096)  # with TLS 1.3 the server's verdict on our certificate comes here
        if not answer:
            return "refused: closed without an answer"
        return "served " + answer.split(b"\r\n", 1)[0].decode()
    except (ssl.SSLError, ConnectionError, OSError) as exc:
        return f"refused: {exc}"


async def served_now(call, client) -> bool:
    return (await call(client)).startswith("served")


@pytest.fixture
def cas() -> dict[str, tuple[x509.Certificate, object]]:
    return {name: pki.make_ca(common_name=f"test-{name}") for name in ("apiserver", "other", "next")}


async def test_only_a_client_certificate_from_the_configured_ca_is_served(tmp_path, cas):
    ca_file = tmp_path / "client-ca" / "ca.crt"
    ca_file.parent.mkdir()
    write_ca(ca_file, cas["apiserver"])
    apiserver = client_pair(tmp_path / "apiserver", cas["apiserver"])
    stranger = client_pair(tmp_path / "stranger", cas["other"])
    async with running_webhook(tmp_path, client_ca_file=str(ca_file), cert_poll_interval=0.05) as wh:
        server_ca = wh.ca_file
        call = lambda client: asyncio.to_thread(review_over_tls, wh.port, server_ca, client)  # noqa: E731
        served = await call(apiserver)
        assert served.startswith("served HTTP/1.1 400"), served  # reached HTTP: the review itself is judged
        assert (await call(None)).startswith("refused"), "a caller without a certificate was served"
        assert (await call(stranger)).startswith("refused"), "a certificate from another CA was served"
        assert wh.server.metrics.requests._metrics == {}  # nothing refused reached admission

        # the CA rotates (a Secret or ConfigMap volume updated): new handshakes trust the new CA only
        write_ca(ca_file, cas["next"])
        successor = client_pair(tmp_path / "successor", cas["next"])
        await eventually(lambda: served_now(call, successor), what="the rotated CA's client served")
        assert (await call(apiserver)).startswith("refused"), "the old CA is still trusted after rotation"


async def test_without_the_ca_file_no_caller_is_served_and_not_ready(tmp_path, cas):
    ca_file = tmp_path / "client-ca" / "ca.crt"
    apiserver = client_pair(tmp_path / "apiserver", cas["apiserver"])
    async with running_webhook(tmp_path, client_ca_file=str(ca_file), cert_poll_interval=0.05) as wh:
        call = lambda client: asyncio.to_thread(review_over_tls, wh.port, None, client)  # noqa: E731
        assert (await call(apiserver)).startswith("refused"), "served without a client CA to check against"
        assert (await call(None)).startswith("refused"), "served a caller without a certificate"
        assert not wh.server.certificate.loaded and str(ca_file) in wh.server.certificate.problem
        ca_file.parent.mkdir()
        write_ca(ca_file, cas["apiserver"])
        await eventually(lambda: wh.server.certificate.loaded, what="the client CA loaded")
        assert (await call(apiserver)).startswith("served")


async def test_without_a_client_ca_any_caller_is_served_as_before(tmp_path):
    async with running_webhook(tmp_path) as wh:
        answer = await asyncio.to_thread(review_over_tls, wh.port, wh.ca_file, None)
        assert answer.startswith("served HTTP/1.1 400"), answer


def test_the_cli_passes_the_client_ca(monkeypatch, tmp_path):
    def config():
        parser = argparse.ArgumentParser()
        cli.add_arguments(parser)
        return cli.config_from_args(parser.parse_args([]))

    monkeypatch.setenv("PODGANG_CLIENT_CA_FILE", str(tmp_path / "ca.crt"))
    assert config().client_ca_file == str(tmp_path / "ca.crt")
    monkeypatch.delenv("PODGANG_CLIENT_CA_FILE")
    assert config().client_ca_file is None
