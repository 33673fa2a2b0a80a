"""`podgang certs ensure` against the HTTP Kubernetes API emulator: Secret, caBundle, rotation."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import stat
import ssl

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError
from kubernetes_asyncio.client import ApiClient

from podgang.certs import pki
from podgang.certs.kube import CertBundle, EnsureError, decide, ensure, published_bundle, service_dns_names, write_files
from tests.emulator import KubeEmulator

NS, SECRET, SVC = "podgang-system", "podgang-webhook-tls", "podgang-webhook"
HOST = f"{SVC}.{NS}.svc"
T0 = dt.datetime(2031, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
DAY = dt.timedelta(days=1)
WRITES = r"^/api/v1/namespaces/[^/]+/secrets|^/apis/admissionregistration"


@pytest.fixture
async def emu():
    async with KubeEmulator() as emulator:
        yield emulator


@pytest.fixture
async def api(emu):
    async with ApiClient(emu.configuration()) as client:
        yield client


def webhook_config(kind: str, name: str, hooks: list[str], ca_bundle: bytes | None = None) -> dict:
    webhooks = []
    for hook in hooks:
        client_config = {"service": {"name": SVC, "namespace": NS, "path": f"/{hook}", "port": 443}}
        if ca_bundle is not None:
            client_config["caBundle"] = base64.b64encode(ca_bundle).decode()
        webhooks.append({
            "name": f"{hook}.podgang.io",
            "clientConfig": client_config,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "matchConditions": [{"name": "kai", "expression": "object.spec.schedulerName == 'kai-scheduler'"}],
            "admissionReviewVersions": ["v1"],
            "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
        })
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": webhooks}


def put_configs(emu: KubeEmulator, name: str = "podgang", ca_bundle: bytes | None = None) -> None:
    emu.put(webhook_config("MutatingWebhookConfiguration", name, ["mutate-pods", "mutate-pods-2"], ca_bundle))
    emu.put(webhook_config("ValidatingWebhookConfiguration", name, ["validate-pods"], ca_bundle))


def secret_data(emu: KubeEmulator) -> dict[str, bytes]:
    obj = emu.get("secrets", NS, SECRET)
    assert obj is not None, "the Secret does not exist"
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


def ca_bundles(emu: KubeEmulator, name: str = "podgang") -> list[bytes]:
    out = []
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        obj = emu.get(kind, None, name)
        for hook in obj["webhooks"]:
            out.append(base64.b64decode(hook["clientConfig"].get("caBundle", "")))
    return out


def verify(leaf_pem: bytes, bundle_pem: bytes, when: dt.datetime, name: str = HOST) -> list[x509.Certificate]:
    leaf = x509.load_pem_x509_certificate(leaf_pem)
    store = Store(x509.load_pem_x509_certificates(bundle_pem))
    return PolicyBuilder().store(store).time(when).build_server_verifier(x509.DNSName(name)).verify(leaf, [])


def leaf_of(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def cas_of(pem: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem)


async def run(api, when: dt.datetime = T0, **kw) -> CertBundle:
    kw.setdefault("webhook_configs", ["podgang"])
    return await ensure(api, namespace=NS, secret=SECRET, service=SVC, now=when, **kw)


def writes(emu: KubeEmulator) -> int:
    return sum(emu.count(m, WRITES) for m in ("POST", "PUT", "PATCH"))


# ---------------------------------------------------------------- create and re-run


async def test_creates_the_secret_and_patches_every_webhook(emu, api):
    put_configs(emu)
    bundle = await run(api)

    obj = emu.get("secrets", NS, SECRET)
    assert obj["type"] == "kubernetes.io/tls"
    data = secret_data(emu)
    assert set(data) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
    assert (bundle.cert_pem, bundle.key_pem, bundle.ca_pem) == (data["tls.crt"], data["tls.key"], data["ca.crt"])
    # the leaf serves the Service under all its names and chains to the published CA
    leaf = leaf_of(data["tls.crt"])
    assert pki.san_names(leaf)[0] == {HOST, SVC, f"{SVC}.{NS}", f"{HOST}.cluster.local"}
    for name in service_dns_names(SVC, NS):
        verify(data["tls.crt"], data["ca.crt"], T0, name)
    assert pki.key_matches(leaf, pki.load_key(data["tls.key"]))
    assert pki.key_matches(cas_of(data["ca.crt"])[0], pki.load_key(data["ca.key"]))
    # every webhook of both kinds got the bundle; nothing else in them changed
    assert ca_bundles(emu) == [data["ca.crt"]] * 3
    hook = emu.get("mutatingwebhookconfigurations", None, "podgang")["webhooks"][1]
    assert hook["clientConfig"]["service"] == {"name": SVC, "namespace": NS, "path": "/mutate-pods-2", "port": 443}
    assert hook["matchConditions"][0]["name"] == "kai" and hook["failurePolicy"] == "Ignore"
    # one line per action
    assert any("created CA" in a for a in bundle.actions)
    assert "patched caBundle of MutatingWebhookConfiguration podgang (2 of 2 webhook(s))" in bundle.actions
    assert "patched caBundle of ValidatingWebhookConfiguration podgang (1 of 1 webhook(s))" in bundle.actions
    assert bundle.errors == () and bundle.changed
    # the patch was sent as a JSON patch, deliberately
    patches = emu.find_requests("PATCH", "webhookconfigurations")
    assert patches and all(r.content_type == "application/json-patch+json" for r in patches)
    # run again no later than the leaf's renewal point
    assert bundle.renew_at == pki.renew_at(leaf)


async def test_rerun_with_nothing_to_do_writes_nothing(emu, api):
    put_configs(emu)
    first = await run(api)
    emu.clear_requests()
    rv = emu.get("secrets", NS, SECRET)["metadata"]["resourceVersion"]

    second = await run(api, T0 + 100 * DAY)
    assert writes(emu) == 0, [(r.method, r.path) for r in emu.requests]
    assert emu.count("GET") == 3  # the Secret and the two configurations
    assert emu.get("secrets", NS, SECRET)["metadata"]["resourceVersion"] == rv
    assert (second.cert_pem, second.key_pem, second.ca_pem) == (first.cert_pem, first.key_pem, first.ca_pem)
    assert not second.changed
    assert any(a.startswith(f"secret {NS}/{SECRET}: unchanged") for a in second.actions)
    assert "caBundle of MutatingWebhookConfiguration podgang unchanged (2 webhook(s))" in second.actions


async def test_every_call_carries_a_timeout(emu, api):
    emu.delay(3.0, r"/secrets/")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(EnsureError, match="cannot reach the API server to get secrets/"):
        await run(api, request_timeout=0.2)
    assert loop.time() - started < 2.5


# ---------------------------------------------------------------- leaf renewal


async def test_leaf_is_renewed_when_less_than_a_third_is_left(emu, api):
    put_configs(emu)
    first = await run(api)
    emu.clear_requests()

    # 200 days into 365: 165 left, more than a third
    same = await run(api, T0 + 200 * DAY)
    assert same.cert_pem == first.cert_pem and writes(emu) == 0

    # 250 days in: 115 left, less than a third -> new leaf, same CA, caBundle untouched
    renewed = await run(api, T0 + 250 * DAY)
    assert renewed.changed
    assert any("renewed leaf: less than a third of its validity left" in a for a in renewed.actions)
    old_leaf, new_leaf = leaf_of(first.cert_pem), leaf_of(renewed.cert_pem)
    assert new_leaf.serial_number != old_leaf.serial_number and renewed.key_pem != first.key_pem
    assert renewed.ca_pem == first.ca_pem
    assert secret_data(emu)["ca.key"] == pki.key_pem(pki.load_key(secret_data(emu)["ca.key"]))
    assert new_leaf.not_valid_before_utc == T0 + 250 * DAY - pki.BACKDATE
    verify(renewed.cert_pem, first.ca_pem, T0 + 250 * DAY)
    assert emu.count("PATCH", "webhookconfigurations") == 0
    assert emu.count("PUT", "/secrets/") == 1 and emu.count("POST") == 0


async def test_leaf_is_renewed_when_it_does_not_cover_the_service(emu, api):
    first = await run(api, webhook_configs=[])
    renewed = await ensure(api, namespace=NS, secret=SECRET, service="other", now=T0 + DAY)
    assert any("does not cover other.podgang-system.svc" in a for a in renewed.actions)
    assert renewed.ca_pem == first.ca_pem
    verify(renewed.cert_pem, renewed.ca_pem, T0 + DAY, "other.podgang-system.svc")


async def test_leaf_that_does_not_verify_against_the_ca_is_renewed(emu, api):
    await run(api, webhook_configs=[])
    foreign_ca, foreign_key = pki.make_ca(now=T0)
    leaf, key = pki.make_leaf(foreign_ca, foreign_key, dns_names=service_dns_names(SVC, NS), now=T0)
    emu.patch_object("secrets", NS, SECRET, {"data": {
        "tls.crt": base64.b64encode(pki.cert_pem(leaf)).decode(),
        "tls.key": base64.b64encode(pki.key_pem(key)).decode(),
    }})
    renewed = await run(api, T0 + DAY, webhook_configs=[])
    assert any("tls.crt does not verify against the CA" in a for a in renewed.actions)
    verify(renewed.cert_pem, renewed.ca_pem, T0 + DAY)
    assert secret_data(emu)["tls.crt"] == renewed.cert_pem


async def test_an_existing_secret_with_other_keys_is_filled_in_and_keeps_them(emu, api):
    emu.put({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
             "metadata": {"name": SECRET, "namespace": NS, "labels": {"team": "x"}},
             "data": {"note": base64.b64encode(b"keep me").decode()}})
    bundle = await run(api, webhook_configs=[])
    obj = emu.get("secrets", NS, SECRET)
    assert obj["metadata"]["labels"] == {"team": "x"} and obj["type"] == "Opaque"
    assert secret_data(emu)["note"] == b"keep me"
    verify(bundle.cert_pem, secret_data(emu)["ca.crt"], T0)


# ---------------------------------------------------------------- CA renewal


async def test_ca_renewal_keeps_the_old_ca_in_the_bundle_until_it_expires(emu, api):
    put_configs(emu)
    first = await run(api)
    old_ca = cas_of(first.ca_pem)
    assert len(old_ca) == 1

    # a replica renews its leaf late in the CA's life and keeps serving it
    t1 = T0 + 2300 * DAY
    serving_old = await run(api, t1)
    assert any("renewed leaf" in a for a in serving_old.actions)
    assert serving_old.ca_pem == first.ca_pem

    # less than a third of the CA's 3650 days left: new CA, old one kept in the bundle
    t2 = T0 + 2450 * DAY
    rotated = await run(api, t2)
    assert any(a.startswith(f"secret {NS}/{SECRET}: renewed CA: CA less than a third") for a in rotated.actions)
    bundle_cas = cas_of(rotated.ca_pem)
    assert len(bundle_cas) == 2
    new_ca = bundle_cas[0]
    assert pki.fingerprint(bundle_cas[1]) == pki.fingerprint(old_ca[0])
    assert pki.fingerprint(new_ca) != pki.fingerprint(old_ca[0])
    assert pki.key_matches(new_ca, pki.load_key(secret_data(emu)["ca.key"]))
    # the new leaf chains to the new CA, and the leaf still served by other replicas
    # (old CA) still verifies against the published caBundle during the rollout
    assert verify(rotated.cert_pem, rotated.ca_pem, t2)[-1] == new_ca
    assert verify(serving_old.cert_pem, rotated.ca_pem, t2)[-1] == old_ca[0]
    assert ca_bundles(emu) == [rotated.ca_pem] * 3
    with pytest.raises(VerificationError):
        verify(rotated.cert_pem, first.ca_pem, t2)

    # nothing to do until something expires: a re-run writes nothing
    emu.clear_requests()
    await run(api, t2 + 10 * DAY)
    assert writes(emu) == 0

    # once the old CA expired it leaves the bundle (the leaf renews too: it is old by now)
    t3 = T0 + 3651 * DAY
    pruned = await run(api, t3)
    assert [pki.fingerprint(c) for c in cas_of(pruned.ca_pem)] == [pki.fingerprint(new_ca)]
    assert ca_bundles(emu) == [pruned.ca_pem] * 3
    verify(pruned.cert_pem, pruned.ca_pem, t3)


async def test_broken_ca_in_the_secret_is_replaced(emu, api):
    await run(api, webhook_configs=[])
    emu.patch_object("secrets", NS, SECRET, {"data": {"ca.key": base64.b64encode(pki.key_pem(pki.new_key())).decode()}})
    bundle = await run(api, T0 + DAY, webhook_configs=[])
    assert any("renewed CA: ca.key matches no CA certificate in ca.crt" in a for a in bundle.actions)
    assert len(cas_of(bundle.ca_pem)) == 2  # the unusable CA stays trusted until it expires
    verify(bundle.cert_pem, bundle.ca_pem, T0 + DAY)
    assert pki.key_matches(cas_of(bundle.ca_pem)[0], pki.load_key(secret_data(emu)["ca.key"]))


# ---------------------------------------------------------------- concurrency


async def _replicas(emu: KubeEmulator, when: dt.datetime, n: int = 5) -> list[CertBundle]:
    """``n`` replicas starting at once. Every call on the Secret is held for a moment,
    so all of them have read it before the first write lands (on a loaded machine a
    replica used to start late, find the winner's Secret and never race)."""
    emu.delay(0.5, r"/namespaces/[^/]+/secrets")
    clients = [ApiClient(emu.configuration()) for _ in range(n)]
    try:
        return await asyncio.gather(*(run(c, when) for c in clients))
    finally:
        for c in clients:
            await c.close()


async def test_concurrent_replicas_end_with_one_consistent_secret(emu):
    put_configs(emu)
    results = await _replicas(emu, T0)
    data = secret_data(emu)
    assert {r.cert_pem for r in results} == {data["tls.crt"]}
    assert {r.ca_pem for r in results} == {data["ca.crt"]}
    assert {r.key_pem for r in results} == {data["tls.key"]}
    assert len(cas_of(data["ca.crt"])) == 1
    assert sum(r.changed for r in results) == 1  # exactly one replica wrote the Secret
    assert emu.count("POST", "/secrets") == 5  # the other four got 409 and re-read
    verify(data["tls.crt"], data["ca.crt"], T0)
    assert ca_bundles(emu) == [data["ca.crt"]] * 3
    assert all(r.errors == () for r in results)


async def test_concurrent_ca_renewal_produces_one_new_ca(emu, api):
    put_configs(emu)
    first = await run(api)
    t = T0 + 2500 * DAY
    results = await _replicas(emu, t)
    data = secret_data(emu)
    cas = cas_of(data["ca.crt"])
    assert len(cas) == 2 and pki.fingerprint(cas[1]) == pki.fingerprint(cas_of(first.ca_pem)[0])
    assert {r.ca_pem for r in results} == {data["ca.crt"]}
    assert {r.cert_pem for r in results} == {data["tls.crt"]}
    assert sum(r.changed for r in results) == 1
    assert emu.count("PUT", "/secrets/") >= 5  # one winner, four conflicts
    verify(data["tls.crt"], data["ca.crt"], t)
    for published in ca_bundles(emu):
        verify(data["tls.crt"], published, t)
        assert published == data["ca.crt"]


# ---------------------------------------------------------------- conflicts and errors


async def test_conflict_on_update_is_reread_and_retried(emu, api):
    await run(api, webhook_configs=[])
    emu.clear_requests()
    emu.fail("PUT", r"/secrets/" + SECRET + "$", 409)
    bundle = await run(api, T0 + 300 * DAY, webhook_configs=[])
    assert emu.count("PUT", "/secrets/") == 2
    assert emu.count("GET", "/secrets/") == 2
    assert secret_data(emu)["tls.crt"] == bundle.cert_pem
    verify(bundle.cert_pem, bundle.ca_pem, T0 + 300 * DAY)


async def test_conflict_on_create_is_reread(emu, api):
    emu.fail("POST", r"/secrets$", 409)
    bundle = await run(api, webhook_configs=[])
    assert emu.count("POST", "/secrets") == 2
    assert secret_data(emu)["tls.crt"] == bundle.cert_pem


async def test_endless_conflicts_give_up_with_a_clear_error(emu, api):
    emu.fail("POST", r"/secrets$", 409, times=None)
    with pytest.raises(EnsureError, match=r"gave up on secrets/podgang-webhook-tls .* after 3 conflicting writes"):
        await run(api, webhook_configs=[], max_attempts=3)


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", r"/secrets/", "forbidden: cannot get secrets/podgang-webhook-tls in namespace podgang-system: "
                              "the service account needs get/update on secrets/podgang-webhook-tls"),
        ("POST", r"/secrets$", "forbidden: cannot create secrets/podgang-webhook-tls in namespace podgang-system: "
                               "the service account needs create on secrets"),
    ],
)
async def test_forbidden_names_the_missing_permission(emu, api, method, path, expected):
    emu.fail(method, path, 403)
    with pytest.raises(EnsureError) as info:
        await run(api)
    assert str(info.value).startswith(expected)
    assert "\n" not in str(info.value)


async def test_missing_webhook_configuration_is_reported_but_the_secret_is_ensured(emu, api):
    emu.put(webhook_config("ValidatingWebhookConfiguration", "only-validating", ["validate-pods"]))
    bundle = await run(api, webhook_configs=["only-validating", "nope"])
    assert secret_data(emu)["tls.crt"] == bundle.cert_pem
    assert bundle.errors == (
        "webhook configuration nope not found: there is no MutatingWebhookConfiguration "
        "or ValidatingWebhookConfiguration named nope",
    )
    assert not bundle.ok
    assert "patched caBundle of ValidatingWebhookConfiguration only-validating (1 of 1 webhook(s))" in bundle.actions
    hook = emu.get("validatingwebhookconfigurations", None, "only-validating")["webhooks"][0]
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == bundle.ca_pem


async def test_forbidden_webhook_patch_is_reported_and_others_still_patched(emu, api):
    put_configs(emu)
    emu.fail("PATCH", r"/mutatingwebhookconfigurations/podgang$", 403)
    bundle = await run(api)
    assert bundle.errors == (
        "forbidden: cannot patch mutatingwebhookconfigurations/podgang: "
        "the service account needs get/patch on mutatingwebhookconfigurations/podgang",
    )
    assert ca_bundles(emu)[2] == bundle.ca_pem  # the validating one


async def test_stale_caBundle_is_replaced_and_reordered_webhooks_are_handled(emu, api):
    stale_ca, _ = pki.make_ca(now=T0 - 10 * DAY, common_name="someone-else")
    put_configs(emu, ca_bundle=pki.cert_pem(stale_ca))
    # the first patch fails its test (as if the list changed meanwhile): read again, patch again
    emu.fail("PATCH", r"/validatingwebhookconfigurations/podgang$", 422)
    bundle = await run(api)
    assert ca_bundles(emu) == [bundle.ca_pem] * 3
    assert emu.count("PATCH", r"/validatingwebhookconfigurations/podgang$") == 2
    assert bundle.errors == ()


def test_published_bundle_never_drops_a_newer_podgang_ca():
    old, _ = pki.make_ca(now=T0)
    newer, _ = pki.make_ca(now=T0 + 2450 * DAY)
    foreign, _ = pki.make_ca(now=T0 + 2450 * DAY, common_name="not-ours")
    # a replica that still sees the old Secret must not take away what a newer one published
    published = pki.bundle_pem([newer, old, foreign])
    out = published_bundle([old], published, T0 + 2451 * DAY)
    assert [pki.fingerprint(c) for c in cas_of(out)] == [pki.fingerprint(newer), pki.fingerprint(old)]
    # once that newer CA is what the Secret says, the bundle is exactly the Secret's
    assert published_bundle([newer, old], pki.bundle_pem([newer, old]), T0 + 2451 * DAY) == pki.bundle_pem([newer, old])


def test_a_secret_made_anew_keeps_the_still_valid_podgang_cas_the_configurations_trust():
    names = service_dns_names(SVC, NS)
    trusted, _ = pki.make_ca(now=T0)
    expired, _ = pki.make_ca(now=T0 - 4000 * DAY)
    made = decide(None, dns_names=names, now=T0 + DAY, published=[trusted, expired])
    assert [pki.fingerprint(c) for c in made.bundle] == [pki.fingerprint(made.ca), pki.fingerprint(trusted)]
    assert "kept 1 CA(s) still in caBundle until they expire" in made.actions[0]
    # a Secret that exists decides from its own bundle, never from what is published
    again = decide(made.data, dns_names=names, now=T0 + 2 * DAY, published=[expired])
    assert again.actions == [] and again.data == made.data


def test_decide_is_stable_on_its_own_output():
    names = service_dns_names(SVC, NS)
    first = decide(None, dns_names=names, now=T0)
    again = decide(first.data, dns_names=names, now=T0 + 200 * DAY)
    assert again.actions == [] and again.data == first.data


# ---------------------------------------------------------------- files and CLI


async def test_write_files_is_atomic_and_loadable(emu, api, tmp_path):
    bundle = await run(api, webhook_configs=[])
    cert_dir = tmp_path / "certs"
    assert write_files(bundle, cert_dir) == ["ca.crt", "tls.key", "tls.crt"]
    assert stat.S_IMODE((cert_dir / "tls.key").stat().st_mode) == 0o600
    assert (cert_dir / "tls.crt").read_bytes() == bundle.cert_pem
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    inode = (cert_dir / "tls.crt").stat().st_ino
    assert write_files(bundle, cert_dir) == []  # unchanged: nothing rewritten
    assert (cert_dir / "tls.crt").stat().st_ino == inode

    renewed = await run(api, T0 + 300 * DAY, webhook_configs=[])
    assert write_files(renewed, cert_dir) == ["tls.key", "tls.crt"]
    assert (cert_dir / "tls.crt").stat().st_ino != inode  # replaced, not rewritten in place
    assert sorted(os.listdir(cert_dir)) == ["ca.crt", "tls.crt", "tls.key"]  # no temp files left
    ctx.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")


def _cli(argv: list[str]) -> int:
    from podgang import cli

    saved = cli.SUBCOMMANDS
    cli.SUBCOMMANDS = {"certs": saved["certs"]}
    try:
        return cli.main(argv)
    finally:
        cli.SUBCOMMANDS = saved


async def test_cli_ensure_prints_one_line_per_action(emu, tmp_path, capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith("PODGANG_")]:
        monkeypatch.delenv(key)
    put_configs(emu)
    kubeconfig = emu.write_kubeconfig(tmp_path / "kubeconfig")
    argv = ["certs", "ensure", "--kubeconfig", kubeconfig, "--namespace", NS, "--secret", SECRET,
            "--service", SVC, "--webhook-config", "podgang"]
    assert await asyncio.to_thread(_cli, argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"secret {NS}/{SECRET}: created CA")
    assert out[1:] == ["patched caBundle of MutatingWebhookConfiguration podgang (2 of 2 webhook(s))",
                       "patched caBundle of ValidatingWebhookConfiguration podgang (1 of 1 webhook(s))"]

    assert await asyncio.to_thread(_cli, argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"secret {NS}/{SECRET}: unchanged")
    assert len(out) == 3 and all("unchanged" in line for line in out)

    # a missing configuration: the rest is done, exit code 1, the name in the message
    monkeypatch.setenv("PODGANG_WEBHOOK_CONFIG", "podgang,missing-one")
    assert await asyncio.to_thread(_cli, argv[:-2]) == 1
    err = capsys.readouterr().err
    assert "webhook configuration missing-one not found" in err

    emu.fail("GET", r"/secrets/", 403)
    assert await asyncio.to_thread(_cli, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"podgang certs ensure: error: forbidden: cannot get secrets/{SECRET} in namespace {NS}: "
                   f"the service account needs get/update on secrets/{SECRET}"]


def test_cli_ensure_requires_its_flags(capsys, monkeypatch):
    for key in [k for k in os.environ if k.startswith("PODGANG_")]:
        monkeypatch.delenv(key)
    assert _cli(["certs", "ensure", "--namespace", NS]) == 2
    assert capsys.readouterr().err.strip() == "podgang certs ensure: error: --secret, --service required"
