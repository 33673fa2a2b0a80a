"""The webhook's HTTPS server as the apiserver meets it: real TLS on 127.0.0.1 with
certificates from ``podgang certs generate``, bad input, certificate rotation,
readiness, metrics. (Owner look-ups and PodGroups: test_webhook_kube.py.)"""

from __future__ import annotations

import asyncio
import gzip
import json
import ssl

import orjson
import pytest
from hypothesis import HealthCheck, given, settings as hyp_settings, strategies as st

from podgang import rules
from tests.webhook_support import (
    TEST_SETTINGS,
    ThreadedWebhook,
    client_context,
    decoded_patch,
    handshake,
    eventually,
    leaf_in,
    patched,
    peer_certificate,
    podgang_certs_generate,
    review,
    running_webhook,
    with_annotations,
)
from podgang.webhook.server import MAX_BODY


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
async def test_health_readiness_and_tls_versions(tmp_path):
    async with running_webhook(tmp_path) as wh:
        assert await wh.get("/healthz") == (200, "ok\n")
        assert await wh.get("/readyz") == (200, "ok\n")
        assert wh.server.certificate.context.minimum_version == ssl.TLSVersion.TLSv1_2
        # a TLS 1.2-only client gets in, and sees the leaf podgang certs generate wrote
        ctx = client_context(wh.ca_file)
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        version, _ = await asyncio.to_thread(handshake, wh.port, ctx)
        assert version == "TLSv1.2"
        assert (await peer_certificate(wh.port, wh.ca_file)).serial_number == leaf_in(tmp_path / "certs").serial_number
        # TLS 1.1 is refused
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.check_hostname, old.verify_mode = False, ssl.CERT_NONE
        old.set_ciphers("ALL:@SECLEVEL=0")
        old.minimum_version = ssl.TLSVersion.TLSv1_1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises(ssl.SSLError):
            await asyncio.to_thread(handshake, wh.port, old)


async def test_a_gpu_conflict_is_refused_with_the_rules_message(tmp_path):
    doc = with_annotations(review("pod-create-bare-gpu"), {"gpu-memory": "4000"})
    async with running_webhook(tmp_path) as wh:
        resp = await wh.validate(doc)
    assert resp["uid"] == doc["request"]["uid"]
    assert resp["allowed"] is False
    expected = rules.gpu_problem(doc["request"]["object"], TEST_SETTINGS)
    assert expected.startswith(rules.MSG_FRACTION_AND_GPU + ": ")  # KAI v0.18 (the default): gpu-memory is a fraction
    assert resp["status"]["message"] == expected
    assert resp["status"]["code"] == 403 and "patch" not in resp


async def test_a_hand_made_group_is_copied_to_the_missing_key_and_reinvocation_changes_nothing(tmp_path):
    doc = review("pod-create-labelled-gpu-memory")
    async with running_webhook(tmp_path) as wh:  # no API: the group's existence cannot be checked
        first = await wh.mutate(doc)
        pod = patched(doc["request"]["object"], first)
        # no subgroup key: nothing says the group lists one (KAI ignores a pod naming a missing one)
        assert pod["metadata"]["labels"] == {"kai.scheduler/podgroup": "app-with-models"}
        assert pod["metadata"]["annotations"] == {"gpu-memory": "4000", "pod-group-name": "app-with-models",
                                                  "kai.scheduler/skip-podgrouper": "true"}
        again = json.loads(json.dumps(doc))
        again["request"]["object"] = pod
        second = await wh.mutate(again)
        assert second["allowed"] is True and decoded_patch(second) == []
        assert "warnings" not in first  # unknown is not "missing": no false warning


BAD_INPUT = [
    (b"", "the body is empty"),
    (b"not json", "the body is not JSON"),
    (b"[]", "the body is JSON list, not an AdmissionReview object"),
    (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}', "apiVersion"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview", "request": {"uid": "u"}}', "kind 'ConversionReview'"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "the AdmissionReview has no request object"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"operation": "CREATE"}}', "the AdmissionReview request has no uid"),
    # a lone UTF-16 surrogate is no Unicode text: it can be neither echoed nor logged
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "\\ud800"}}', "surrogate"),
    (
        json.dumps(review("pod-create-bare-gpu")).replace('"bare"', '"\\udc00bare"', 1).encode(),
        "surrogate",
    ),
]


@pytest.mark.parametrize("path", ["/mutate-pods", "/validate-pods"])
async def test_bad_input_gets_400_with_one_line_and_the_server_keeps_serving(tmp_path, path):
    async with running_webhook(tmp_path) as wh:
        for body, reason in BAD_INPUT:
            status, text = await wh.post_raw(path, body)
            assert status == 400, body
            line = text.decode()
            assert line.endswith("\n") and line.count("\n") == 1 and reason in line, (body, line)
        # too large: refused by its declared length, and by what actually arrives
        status, text = await wh.post_raw(path, b"x" * (MAX_BODY + 1))
        assert status == 413 and text.decode().count("\n") == 1
        # exactly 3 MiB is not "larger than 3 MiB": it is read (and is not JSON)
        status, _ = await wh.post_raw(path, b" " * MAX_BODY)
        assert status == 400
        # a gzip body is decompressed like any other
        doc = review("pod-create-dry-run")
        status, body = await wh.post_raw(
            path, gzip.compress(json.dumps(doc).encode()), {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        )
        assert status == 200 and orjson.loads(body)["response"]["uid"] == doc["request"]["uid"]
        # a request for another kind is allowed untouched
        for name in ("deployment-create", "deployment-update-scale-subresource", "pod-delete"):
            resp = await wh.review(path, review(name))
            assert resp == {"uid": review(name)["request"]["uid"], "allowed": True}
        assert await wh.get("/healthz") == (200, "ok\n")
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="invalid") == len(BAD_INPUT) + 1
        assert await wh.metric("podgang_webhook_bad_requests_total", reason="too-large") == 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
REQUEST_FIELDS = ["uid", "kind", "operation", "namespace", "object", "oldObject", "dryRun", "subResource", "name"]
POD_FIELDS = ["metadata", "spec", "kind", "apiVersion"]
META_FIELDS = ["name", "generateName", "labels", "annotations", "ownerReferences", "namespace"]


@st.composite
def damaged_reviews(draw):
    """A recorded review with some fields replaced by arbitrary JSON."""
    doc = review(draw(st.sampled_from(["pod-create-by-replicaset", "pod-create-labelled-gpu-memory", "pod-update-label", "pod-create-bare-gpu"])))
    req = doc["request"]
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["request", "object", "metadata", "container"]))
        if where == "request":
            req[draw(st.sampled_from(REQUEST_FIELDS))] = draw(json_values)
        elif where == "object" and isinstance(req.get("object"), dict):
            req["object"][draw(st.sampled_from(POD_FIELDS))] = draw(json_values)
        elif where == "metadata" and isinstance(req.get("object"), dict) and isinstance(req["object"].get("metadata"), dict):
            req["object"]["metadata"][draw(st.sampled_from(META_FIELDS))] = draw(json_values)
        elif isinstance(req.get("object"), dict) and isinstance(req["object"].get("spec"), dict):
            req["object"]["spec"]["containers"] = draw(json_values)
    return json.dumps(doc).encode()


bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(
        lambda req: json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode(),
        st.dictionaries(st.sampled_from(REQUEST_FIELDS), json_values, max_size=6),
    ),
    damaged_reviews(),
)


@pytest.fixture(scope="module")
def threaded_webhook(tmp_path_factory):
    with ThreadedWebhook(tmp_path_factory.mktemp("threaded")) as wh:
        yield wh


@hyp_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(body=bodies, path=st.sampled_from(["/mutate-pods", "/validate-pods"]))
def test_random_bodies_never_get_a_5xx(threaded_webhook, body, path):
    status, answer = threaded_webhook.request("POST", path, body, {"Content-Type": "application/json"})
    assert status in (200, 400), (status, answer[:300])
    if status == 200:
        doc = orjson.loads(answer)
        sent = json.loads(body)
        assert doc["response"]["uid"] == sent["request"]["uid"]
        assert isinstance(doc["response"]["allowed"], bool)
    else:
        assert answer.count(b"\n") == 1
    assert threaded_webhook.request("GET", "/healthz") == (200, b"ok\n")


async def test_certificate_rotation_presents_the_new_leaf_on_the_next_handshake(tmp_path):
    cert_dir = tmp_path / "certs"
    podgang_certs_generate(cert_dir)
    async with running_webhook(tmp_path, cert_dir=cert_dir, cert_poll_interval=0.05) as wh:
        first = await peer_certificate(wh.port, wh.ca_file)
        assert first.serial_number == leaf_in(cert_dir).serial_number
        status, _ = await wh.get("/healthz")  # a kept-alive connection from before the rotation
        assert status == 200
        podgang_certs_generate(cert_dir)  # same CA, new leaf: what rotation does
        new = leaf_in(cert_dir)
        assert new.serial_number != first.serial_number
        await eventually(lambda: same_serial(wh, new), what="new leaf served")
        assert await wh.get("/healthz") == (200, "ok\n")
        assert await wh.metric("podgang_webhook_certificate_reloads_total", result="loaded") == 2
        # a broken pair (a key that does not match) keeps the certificate in use
        (cert_dir / "tls.key").write_bytes((tmp_path / "certs" / "ca.key").read_bytes())
        await eventually(lambda: wh.metric("podgang_webhook_certificate_reloads_total", result="failed"), what="failed reload counted")
        assert (await peer_certificate(wh.port, wh.ca_file)).serial_number == new.serial_number
        assert await wh.get("/readyz") == (200, "ok\n")


async def same_serial(wh, cert) -> bool:
    return (await peer_certificate(wh.port, wh.ca_file)).serial_number == cert.serial_number


async def test_not_ready_until_the_certificate_exists(tmp_path):
    cert_dir = tmp_path / "later"
    cert_dir.mkdir()
    async with running_webhook(tmp_path, cert_dir=cert_dir, cert_poll_interval=0.05) as wh:
        # a placeholder certificate serves health checks meanwhile (probes do not verify)
        insecure = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        async with wh.session.get(wh.url("/readyz"), ssl=insecure) as resp:
            assert resp.status == 503
            assert f"waiting for {cert_dir}/tls.crt" in await resp.text()
        async with wh.session.get(wh.url("/healthz"), ssl=insecure) as resp:
            assert resp.status == 200
        podgang_certs_generate(cert_dir)
        await eventually(lambda: wh.server.certificate.loaded, what="certificate loaded")
        assert await wh.get("/readyz") == (200, "ok\n")
        assert (await peer_certificate(wh.port, cert_dir / "ca.crt")).serial_number == leaf_in(cert_dir).serial_number


async def test_metrics_count_requests_by_operation_and_verdict(tmp_path):
    async with running_webhook(tmp_path) as wh:
        await wh.mutate(review("pod-create-dry-run"))  # owner-less, dry run: patched, nothing created
        await wh.mutate(review("deployment-create"))  # another kind: skipped
        await wh.validate(with_annotations(review("pod-create-bare-gpu"), {"gpu-memory": "1"}))  # denied
        await wh.validate(review("pod-update-label"))  # allowed
        assert await wh.metric("podgang_webhook_admission_requests_total", endpoint="/mutate-pods", operation="CREATE", verdict="patched") == 1
        assert await wh.metric("podgang_webhook_admission_requests_total", endpoint="/mutate-pods", operation="CREATE", verdict="skipped") == 1
        assert await wh.metric("podgang_webhook_admission_requests_total", endpoint="/validate-pods", operation="CREATE", verdict="denied") == 1
        assert await wh.metric("podgang_webhook_admission_requests_total", endpoint="/validate-pods", operation="UPDATE", verdict="allowed") == 1
        assert await wh.metric("podgang_webhook_admission_duration_seconds_count", endpoint="/validate-pods", operation="CREATE", verdict="denied") == 1
        assert await wh.metric("podgang_webhook_podgroups_created_total", source="owner-less") == 0
        status, _ = await wh.get("/metrics")
        assert status == 200


async def test_one_json_log_line_per_decision(tmp_path, caplog):
    import logging

    caplog.set_level(logging.INFO, logger="podgang.webhook.decision")
    doc = review("pod-create-dry-run")
    async with running_webhook(tmp_path) as wh:
        await wh.mutate(doc)
    records = [r for r in caplog.records if r.name == "podgang.webhook.decision"]
    assert len(records) == 1
    fields = records[0].fields
    assert fields["uid"] == doc["request"]["uid"]
    assert (fields["namespace"], fields["pod"], fields["group"], fields["verdict"]) == ("cap", "dryrun-pod", "pg-dryrun-pod", "patched")
    assert fields["patch_bytes"] > 0 and fields["duration_ms"] >= 0 and fields["dry_run"] is True
    from podgang.logs import JsonFormatter

    line = JsonFormatter().format(records[0])
    assert "\n" not in line and json.loads(line)["group"] == "pg-dryrun-pod"


async def test_the_fast_decision_log_writes_the_same_json_line_in_batches(tmp_path, caplog):
    import io
    import logging
    import re as regex

    from podgang.webhook.decisions import DecisionLog

    caplog.set_level(logging.INFO, logger="podgang.webhook.decision")  # --log-level INFO

    out = io.BytesIO()
    docs = [review("pod-create-dry-run"), review("deployment-create")]
    async with running_webhook(tmp_path, decision_log=DecisionLog(out, flush_interval=0.02)) as wh:
        for doc in docs:
            await wh.mutate(doc)
        assert out.getvalue() == b""  # batched: nothing written per request
        await eventually(lambda: out.getvalue().count(b"\n") == 2, what="two decision lines flushed")
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["uid"] for e in entries] == [d["request"]["uid"] for d in docs]
    first = entries[0]
    assert regex.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert (first["level"], first["logger"], first["msg"]) == ("info", "podgang.webhook.decision", "admission")
    assert (first["pod"], first["group"], first["verdict"], first["dry_run"]) == ("dryrun-pod", "pg-dryrun-pod", "patched", True)
    assert entries[1]["verdict"] == "skipped" and entries[1]["kind"] == "Deployment"


def test_a_rotation_seen_halfway_is_not_reported_as_a_broken_certificate(tmp_path):
    """``podgang certs generate`` (and ``--manage-certs``) replace tls.key, then tls.crt.
    A check that falls between the two sees a new key beside the old leaf: that is a
    rotation in progress, not a failed load (which would page whoever alerts on it)."""
    from podgang.metrics import WebhookMetrics
    from podgang.webhook.tls import ServingCertificate

    cert_dir, other = tmp_path / "certs", tmp_path / "next"
    podgang_certs_generate(cert_dir)
    metrics = WebhookMetrics()
    cert = ServingCertificate(cert_dir, metrics)
    first = cert.serial
    assert cert.loaded and first == leaf_in(cert_dir).serial_number
    podgang_certs_generate(other)
    (cert_dir / "tls.key").write_bytes((other / "tls.key").read_bytes())  # halfway
    assert cert.reload() is True and cert.serial == first
    (cert_dir / "tls.crt").write_bytes((other / "tls.crt").read_bytes())  # done
    assert cert.reload() is True and cert.serial == leaf_in(other).serial_number
    failed = metrics.registry.get_sample_value("podgang_webhook_certificate_reloads_total", {"result": "failed"})
    assert failed == 0
