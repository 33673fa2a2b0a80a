"""The webhook's certificate keeper run as the chart installs it: the arguments of the
rendered webhook Deployment, and the API emulator allowing exactly what the chart's
RBAC allows the webhook's ServiceAccount. No call may be refused, and a CA rotation
must reach both webhook configurations and the served leaf (issue 11: looking each
name up as both kinds was refused on every check, and a rotated CA was never served).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from podgang.certs import pki
from podgang.certs.kube import decide, ensure, service_dns_names
from podgang.webhook import cli as webhook_cli
from podgang.webhook.server import WebhookServer
from tests.emulator import KubeEmulator
from tests.emulator.rbac import rules_for
from tests.chart_support import render
from tests.webhook_support import eventually, handshake
from tests.paths import ROOT

CHART = ROOT / "charts" / "podgang"
RELEASE, NAMESPACE = "podgang", "gang-system"
SERVICE_ACCOUNT = f"{RELEASE}-webhook"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
KINDS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
         "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}


@pytest.fixture(scope="module")
def chart() -> list[dict]:
    return render({}, release=RELEASE, namespace=NAMESPACE)


def webhook_args(docs: list[dict]) -> list[str]:
    [deployment] = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == f"{RELEASE}-webhook"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args = list(container["args"])
    assert args[0] == "webhook"  # podgang's sub-command
    return args[1:]


def configurations(docs: list[dict]) -> dict[str, dict]:
    return {d["kind"]: d for d in docs if d["kind"] in KINDS}


def published(emu: KubeEmulator, docs: list[dict]) -> list[bytes]:
    """The caBundle of every webhook of both configurations."""
    out = []
    for kind, config in configurations(docs).items():
        stored = emu.get(KINDS[kind], None, config["metadata"]["name"])
        out += [base64.b64decode(h["clientConfig"].get("caBundle") or "") for h in stored["webhooks"]]
    return out


@pytest.fixture
async def emu(chart):
    async with KubeEmulator() as emu:
        emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        for config in configurations(chart).values():
            emu.put(config)
        emu.grant(rules_for(chart, SERVICE_ACCOUNT, NAMESPACE), user=USER)
        yield emu


def config_from_chart(docs: list[dict], cert_dir: Path):
    parser = argparse.ArgumentParser()
    webhook_cli.add_arguments(parser)
    config = webhook_cli.config_from_args(parser.parse_args(webhook_args(docs)))
    config.host, config.port, config.cert_dir = "127.0.0.1", 0, str(cert_dir)
    config.health_port = 0  # replicas side by side: any free port each
    config.cert_check_interval = 3600.0  # the test drives the checks itself
    return config


def age_the_ca(emu: KubeEmulator, config) -> None:
    """Put a CA with less than a third of its validity left into the Secret: the next
    check renews it (a rotation)."""
    aged = decide(None, dns_names=service_dns_names(config.service, config.namespace),
                  now=pki.utcnow() - dt.timedelta(days=3000), ca_days=3650, days=3650)
    secret = emu.get("secrets", config.namespace, config.secret)
    secret["data"] = {k: base64.b64encode(v).decode() for k, v in aged.data.items()}
    emu.put(secret)


async def test_the_emulator_refuses_what_the_charts_rbac_does_not_allow(emu, chart):
    # the old way (each name looked up as both kinds) is refused here as on a real cluster
    names = [c["metadata"]["name"] for c in configurations(chart).values()]
    async with emu.api_client() as api_client:
        bundle = await ensure(api_client, namespace=NAMESPACE, secret=f"{RELEASE}-webhook-tls",
                              service=f"{RELEASE}-webhook", webhook_configs=names)
    assert len(emu.forbidden) == 2 and len(bundle.errors) == 2
    assert any(line.startswith(
        f'validatingwebhookconfigurations.admissionregistration.k8s.io "{RELEASE}-mutate-pods" is forbidden: '
        f'User "{USER}" cannot get resource "validatingwebhookconfigurations"') for line in emu.forbidden)
    assert all(e.startswith("forbidden: cannot get ") for e in bundle.errors)


async def test_the_keeper_under_the_charts_rbac_is_never_refused_and_serves_a_rotated_ca(emu, chart, tmp_path):
    config = config_from_chart(chart, tmp_path / "certs")
    assert config.manage_certs and config.namespace == NAMESPACE
    assert not config.webhook_configs  # no name the RBAC allows on one kind only is looked up as both
    api_client = emu.api_client()
    server = WebhookServer(config, api_client)
    await server.start()
    try:
        await eventually(lambda: server.keeper.runs >= 1, what="the first certificate check")
        first_ca = pki.load_certs((tmp_path / "certs" / "ca.crt").read_bytes())[0]
        assert published(emu, chart) == [(tmp_path / "certs" / "ca.crt").read_bytes()] * 2

        age_the_ca(emu, config)
        await server.keeper.ensure_once()
        ca_file = tmp_path / "certs" / "ca.crt"
        leaf = x509.load_pem_x509_certificate((tmp_path / "certs" / "tls.crt").read_bytes())
        assert not pki.issued_by(leaf, first_ca)
        for bundle in published(emu, chart):  # both configurations trust the new CA
            assert any(pki.issued_by(leaf, ca) for ca in pki.load_certs(bundle))

        trusting = ssl.create_default_context(cafile=str(ca_file))
        trusting.check_hostname = False  # the leaf names the Service, not 127.0.0.1

        async def serves_the_new_leaf() -> bool:
            _, der = await asyncio.to_thread(handshake, server.port, trusting)
            return x509.load_der_x509_certificate(der).serial_number == leaf.serial_number

        await eventually(serves_the_new_leaf, what="the rotated leaf served")
        assert server.keeper.problem == ""
    finally:
        await server.stop()
        await api_client.close()
    assert emu.forbidden == []


async def test_replicas_follow_the_secret_and_serve_one_rotated_ca_without_waiting_for_their_check(
        emu, chart, tmp_path):
    """Two replicas, their periodic check an hour away: an admin (here the test) puts a CA due
    for renewal into the Secret; both see it through their watch of that Secret, one renews it,
    the other takes the renewal, and both serve leaves of the one new CA within seconds."""
    configs = [config_from_chart(chart, tmp_path / f"certs-{i}") for i in (0, 1)]
    clients = [emu.api_client() for _ in configs]
    servers = [WebhookServer(config, api_client) for config, api_client in zip(configs, clients)]
    for server in servers:
        await server.start()
    try:
        await eventually(lambda: all(s.keeper.runs >= 1 for s in servers), what="the first certificate checks")
        age_the_ca(emu, configs[0])
        aged = pki.load_certs(base64.b64decode(emu.get("secrets", NAMESPACE, configs[0].secret)["data"]["ca.crt"]))[0]

        def renewed() -> x509.Certificate | None:
            ca = pki.load_certs(base64.b64decode(emu.get("secrets", NAMESPACE, configs[0].secret)["data"]["ca.crt"]))[0]
            return ca if ca.serial_number != aged.serial_number else None

        await eventually(renewed, what="the aged CA renewed in the Secret")
        new_ca = renewed()

        async def both_serve_the_new_ca() -> bool:
            for server in servers:  # what each serves, read unverified: the issuer is checked below
                context = ssl.create_default_context()
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
                _, der = await asyncio.to_thread(handshake, server.port, context)
                if not pki.issued_by(x509.load_der_x509_certificate(der), new_ca):
                    return False
            return True

        await eventually(both_serve_the_new_ca, what="both replicas serving a leaf of the new CA")
        for bundle in published(emu, chart):
            assert any(ca.serial_number == new_ca.serial_number for ca in pki.load_certs(bundle))
        assert all(s.keeper.problem == "" for s in servers)
    finally:
        for server, api_client in zip(servers, clients):
            await server.stop()
            await api_client.close()
    assert emu.forbidden == []


async def test_a_deleted_secret_is_made_anew_and_every_replica_stays_trusted_throughout(emu, chart, tmp_path):
    """Issue 35: the Secret deleted under two running replicas. Both see it gone, one makes it
    anew, the other takes that one; the CA the configurations trusted stays in the new bundle
    (as after a rotation), so at no moment does a replica serve a leaf the published caBundle
    does not trust — checked the way the apiserver checks, over and over while it happens."""
    configs = [config_from_chart(chart, tmp_path / f"certs-{i}") for i in (0, 1)]
    clients = [emu.api_client() for _ in configs]
    servers = [WebhookServer(config, api_client) for config, api_client in zip(configs, clients)]
    for server in servers:
        await server.start()
    distrusted: list[str] = []
    calls = 0
    done = asyncio.Event()

    reading = ssl.create_default_context()
    reading.check_hostname, reading.verify_mode = False, ssl.CERT_NONE

    async def as_the_apiserver_calls() -> None:
        """Each replica's leaf, checked against caBundle as published just before and just after
        the handshake (either may be the one in force at that moment); trusted by neither is a
        call the apiserver would have failed."""
        nonlocal calls
        while not done.is_set():
            for index, server in enumerate(servers):
                before = pki.load_certs(published(emu, chart)[0])
                _, der = await asyncio.to_thread(handshake, server.port, reading)
                leaf = x509.load_der_x509_certificate(der)
                if not any(pki.issued_by(leaf, ca) for ca in before + pki.load_certs(published(emu, chart)[0])):
                    distrusted.append(f"replica {index}: its leaf of {leaf.issuer.rfc4514_string()} is not trusted")
                calls += 1

    try:
        await eventually(lambda: all(s.keeper.runs >= 1 for s in servers), what="the first certificate checks")
        old_ca = pki.load_certs((tmp_path / "certs-0" / "ca.crt").read_bytes())[0]
        caller = asyncio.create_task(as_the_apiserver_calls())
        await eventually(lambda: calls >= 10, what="calls before the deletion")
        emu.delete("secrets", NAMESPACE, configs[0].secret)

        def made_anew() -> x509.Certificate | None:
            stored = emu.get("secrets", NAMESPACE, configs[0].secret)
            ca = pki.load_certs(base64.b64decode(stored["data"]["ca.crt"]))[0] if stored else None
            return ca if ca is not None and ca.serial_number != old_ca.serial_number else None

        new_ca = await eventually(made_anew, what="the Secret made anew with a new CA")

        def both_serve_it() -> bool:
            leaves = [x509.load_pem_x509_certificate((tmp_path / f"certs-{i}" / "tls.crt").read_bytes()) for i in (0, 1)]
            return all(pki.issued_by(leaf, new_ca) for leaf in leaves)

        await eventually(both_serve_it, what="both replicas on a leaf of the new CA")
        settled = calls
        await eventually(lambda: calls >= settled + 10, what="calls after the switch")
        done.set()
        await caller
        assert distrusted == [], distrusted[:3]
        for bundle in published(emu, chart):  # the old CA is still trusted, after the new one
            assert [c.serial_number for c in pki.load_certs(bundle)][:2] == [new_ca.serial_number, old_ca.serial_number]
    finally:
        done.set()
        for server, api_client in zip(servers, clients):
            await server.stop()
            await api_client.close()
    assert emu.forbidden == []
