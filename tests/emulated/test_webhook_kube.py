"""The webhook against an HTTP Kubernetes API (tests/emulator/), over real TLS:
every recorded AdmissionReview end to end, owner look-ups through the cache,
PodGroups of owner-less pods, API failures that must never deny a pod, and
self-managed certificates."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import time

import pytest

from podgang import rules
from tests.emulator import KubeEmulator
from tests.webhook_support import (
    CRON_RUN_UID,
    DEPLOYMENT_UID,
    JOB_UID,
    NS,
    STATEFULSET_UID,
    owned_pod_review,
    seed_owners,
    api_status,
    decoded_patch,
    eventually,
    group_after,
    patched,
    client_context,
    handshake,
    review,
    review_names,
    running_webhook,
    with_annotations,
)

PODGROUPS = r"/apis/scheduling\.run\.ai/v2alpha2/namespaces/cap/podgroups"

#: recorded review -> the group its pod must end up in (None: nothing to change)
EXPECTED = {
    "pod-create-by-replicaset": f"pg-web-{DEPLOYMENT_UID}",
    "pod-create-by-job": f"pg-train-{JOB_UID}",
    "pod-create-by-cronjob-job": f"pg-nightly-29922453-{CRON_RUN_UID}",  # one group per CronJob run
    "pod-create-by-statefulset-gpu": f"pg-db-{STATEFULSET_UID}",
    "pod-create-bare-gpu": "pg-bare",
    "pod-create-dry-run": "pg-dryrun-pod",
    "pod-create-labelled-gpu-memory": "app-with-models",
    "pod-create-native-scheduling-group": "pg-native-0",
    "pod-create-that-later-fails-already-exists": "pg-app-server",
    "pod-create-that-later-fails-validation": rules.owner_less_group_name("Bad_Name"),
    "deployment-create": None,
    "deployment-update-scale-subresource": None,
    "job-create-by-cronjob": None,
    "pod-delete": None,
    "pod-update-label": None,
    "replicaset-create-by-deployment": None,
    "replicaset-update-scale": None,
    "statefulset-create": None,
}
#: owner-less pods whose PodGroup the webhook creates (not the dry run)
CREATED = {"pg-bare", "pg-native-0", "pg-app-server", rules.owner_less_group_name("Bad_Name")}

#: an owner-less pod's KAI group as KAI's own grouper fills it (no PriorityClass is known
#: to the emulator, so none is checked), with KAI's own stale-gang eviction off
OWNER_LESS_KAI_SPEC = {"minMember": 1, "queue": "default-queue", "priorityClassName": "train",
                       "stalenessGracePeriod": "-1s"}


def managed_podgroup(name: str, *, managed: bool = True) -> dict:
    labels = {"podgang.io/managed-by": "podgang"} if managed else {"team": "someone-else"}
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"minMember": 3},
    }


def owner_less_generate_name_review(uid: str = "gen-1") -> dict:
    doc = review("pod-create-by-job")
    doc["request"]["uid"] = uid
    md = doc["request"]["object"]["metadata"]
    md.pop("ownerReferences")
    md["labels"] = {"app": "train"}
    return doc


@pytest.fixture
async def kube():
    async with KubeEmulator() as emu:
        seed_owners(emu)
        yield emu


@pytest.fixture
async def api_client(kube):
    client = kube.api_client()
    yield client
    await client.close()


async def test_every_recorded_review_end_to_end(tmp_path, kube, api_client):
    assert set(EXPECTED) == set(review_names()), "a new recording needs an expectation here"
    pod_labels = {}
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        for name, group in EXPECTED.items():
            doc = review(name)
            obj = doc["request"]["object"]
            resp = await wh.mutate(doc)
            assert resp["uid"] == doc["request"]["uid"], name
            assert resp["allowed"] is True, (name, resp)
            if group is None:
                assert "patch" not in resp, name
                continue
            pod = patched(obj, resp)
            before_labels = (obj["metadata"].get("labels") or {})
            pod_labels.setdefault(group, before_labels)
            before_notes = (obj["metadata"].get("annotations") or {})
            # no subgroup key: the recorded hand-made groups do not exist here, so list none
            assert pod["metadata"]["labels"] == {**before_labels, "kai.scheduler/podgroup": group}, name
            assert pod["metadata"]["annotations"] == {**before_notes, "pod-group-name": group,
                                                      "kai.scheduler/skip-podgrouper": "true"}, name
            assert {k: v for k, v in pod.items() if k != "metadata"} == {k: v for k, v in obj.items() if k != "metadata"}
            # reinvocation sees the patched pod and asks for nothing more
            again = copy.deepcopy(doc)
            again["request"]["object"] = pod
            assert "patch" not in await wh.mutate(again), name
            # the validating webhook runs after the mutation and lets it through
            after = copy.deepcopy(doc)
            after["request"]["object"] = pod
            checked = await wh.validate(after)
            assert checked["allowed"] is True and checked["uid"] == doc["request"]["uid"], (name, checked)
        # hand-made group that does not exist: allowed, with a warning
        resp = await wh.mutate(review("pod-create-labelled-gpu-memory"))
        assert resp["warnings"] == [
            "PodGroup app-with-models not found in namespace cap: the pod stays Pending until it exists"
        ]
        # validation of the recorded UPDATE and DELETE
        assert (await wh.validate(review("pod-update-label")))["allowed"] is True
        assert (await wh.validate(review("pod-delete")))["allowed"] is True
    groups = {pg["metadata"]["name"]: pg for pg in kube.list("podgroups", NS)}
    # owner-less pods got their PodGroup (the dry run and owned pods did not)
    assert set(groups) == CREATED
    for name, pg in groups.items():
        # an owner-less pod is its own top owner, as in KAI's grouper: its labels are the group's
        assert pg["metadata"]["labels"] == {**pod_labels[name], "podgang.io/managed-by": "podgang"}
        assert pg["spec"] == OWNER_LESS_KAI_SPEC
        assert "ownerReferences" not in pg["metadata"]
    # the CronJob above a run is never looked up: every run is its own gang
    assert kube.count("GET", r"/cronjobs/") == 0


async def test_the_dry_run_creates_nothing(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(review("pod-create-dry-run"))
    assert patched(review("pod-create-dry-run")["request"]["object"], resp)["metadata"]["labels"] == {
        "kai.scheduler/podgroup": "pg-dryrun-pod"
    }
    assert kube.count("POST") == 0 and kube.list("podgroups", NS) == []


async def test_a_hand_made_group_that_exists_gets_no_warning(tmp_path, kube, api_client):
    kube.put(managed_podgroup("app-with-models", managed=False))
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(review("pod-create-labelled-gpu-memory"))
    assert "warnings" not in resp
    assert decoded_patch(resp) == [
        {"op": "add", "path": "/metadata/annotations/pod-group-name", "value": "app-with-models"},
        {"op": "add", "path": "/metadata/annotations/kai.scheduler~1skip-podgrouper", "value": "true"},
    ]  # a group of one part: no subgroup label (KAI would ignore a pod naming one the group lacks)
    assert kube.list("podgroups", NS)[0]["spec"] == {"minMember": 3}  # looked at, not touched


async def test_no_false_warning_when_the_podgroup_crd_is_missing(tmp_path, api_client):
    async with KubeEmulator(crds=[]) as emu:
        client = emu.api_client()
        try:
            async with running_webhook(tmp_path, api_client=client) as wh:
                resp = await wh.mutate(review("pod-create-labelled-gpu-memory"))
        finally:
            await client.close()
    assert resp["allowed"] is True and "warnings" not in resp


async def test_a_scale_up_costs_one_look_up_per_owner(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client, owner_cache_ttl=300.0) as wh:
        # 200 pods of one ReplicaSet at once: concurrent misses share one call per owner
        answers = await asyncio.gather(*(wh.mutate(owned_pod_review(i)) for i in range(200)))
        for i, resp in enumerate(answers):
            assert resp["uid"] == f"scale-up-{i}"
            assert group_after(owned_pod_review(i), resp) == f"pg-web-{DEPLOYMENT_UID}"
        assert kube.count("GET", r"/replicasets/web-7887448d46$") == 1
        assert kube.count("GET", r"/deployments/web$") == 1
        # besides: the PriorityClasses, KAI queues and nodes, listed once at start (in the background), never per pod
        assert kube.count("GET") - kube.count("GET", r"/(priorityclasses|queues|nodes)$") == 2
        assert kube.count("GET", r"/priorityclasses$") <= 1 and kube.count("GET", r"/queues$") <= 1
        assert kube.count("GET", r"/nodes$") <= 1
        assert await wh.metric("podgang_webhook_owner_cache_misses_total") >= 2
        # the next 200 are identical to a pod decided before: answered without the rules walk
        before = await wh.metric("podgang_webhook_decisions_replayed_total")
        answers = await asyncio.gather(*(wh.mutate(owned_pod_review(i)) for i in range(200, 400)))
        assert all(group_after(owned_pod_review(0), r) == f"pg-web-{DEPLOYMENT_UID}" for r in answers)
        assert await wh.metric("podgang_webhook_decisions_replayed_total") - before == 200
        assert kube.count("GET") - kube.count("GET", r"/(priorityclasses|queues|nodes)$") == 2
        # a pod that differs (another label) is decided afresh, from the cached owners
        other = owned_pod_review(999)
        other["request"]["object"]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "workers"
        resp = await wh.mutate(other)
        assert patched(other["request"]["object"], resp)["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "workers"
        assert await wh.metric("podgang_webhook_decisions_replayed_total") - before == 200
        assert kube.count("GET") - kube.count("GET", r"/(priorityclasses|queues|nodes)$") == 2


async def test_cached_owners_expire(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client, owner_cache_ttl=0.2) as wh:
        await wh.mutate(owned_pod_review(0))
        assert kube.count("GET", r"/replicasets/") == 1

        async def looked_up_again():
            await wh.mutate(owned_pod_review(1))
            return kube.count("GET", r"/replicasets/") == 2

        await eventually(looked_up_again, what="owner fetched again after its TTL")


async def test_an_owner_that_was_replaced_is_not_guessed(tmp_path, kube, api_client):
    rs = kube.get("replicasets", NS, "web-7887448d46")
    kube.delete("replicasets", NS, "web-7887448d46")
    rs["metadata"]["uid"] = "another-uid"
    rs["metadata"].pop("resourceVersion", None)
    kube.put(rs)
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(owned_pod_review(0))
    assert resp == {"uid": "scale-up-0", "allowed": True}


async def test_owner_less_pod_reuses_a_group_podgang_manages(tmp_path, kube, api_client):
    kube.put(managed_podgroup("pg-bare"))
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(review("pod-create-bare-gpu"))
        assert await wh.metric("podgang_webhook_podgroups_reused_total") == 1
    assert group_after(review("pod-create-bare-gpu"), resp) == "pg-bare"
    assert kube.count("POST", PODGROUPS + "$") == 1  # tried, got 409, read it, reused it
    assert [pg["metadata"]["name"] for pg in kube.list("podgroups", NS)] == ["pg-bare"]
    assert kube.get("podgroups", NS, "pg-bare")["spec"] == {"minMember": 3}


async def test_an_owner_less_pod_its_own_rules_refuse_gets_no_group(tmp_path, kube, api_client):
    """Issue 44: a GPU conflict is refused by the validating webhook, so the pod never exists;
    the mutating webhook makes no PodGroup for it (it used to, and the grouper reaped it later)."""
    conflict = with_annotations(review("pod-create-bare-gpu"), {"gpu-fraction": "0.5"})
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(conflict)
        checked = await wh.validate(conflict)
    assert resp["allowed"] is True and checked["allowed"] is False  # the validating webhook says no
    assert kube.count("POST", PODGROUPS + "$") == 0 and kube.list("podgroups", NS) == []
    async with running_webhook(tmp_path, api_client=api_client) as wh:  # the same pod without it: made
        await wh.mutate(review("pod-create-bare-gpu"))
    assert [pg["metadata"]["name"] for pg in kube.list("podgroups", NS)] == ["pg-bare"]


async def test_owner_less_pod_never_takes_over_a_foreign_group(tmp_path, kube, api_client):
    foreign = kube.put(managed_podgroup("pg-bare", managed=False))
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(review("pod-create-bare-gpu"))
    group = group_after(review("pod-create-bare-gpu"), resp)
    assert re.fullmatch(r"pg-bare-[a-z0-9]{5}", group), group
    pod = patched(review("pod-create-bare-gpu")["request"]["object"], resp)
    assert pod["metadata"]["annotations"]["pod-group-name"] == group
    assert kube.get("podgroups", NS, "pg-bare") == foreign  # untouched
    created = kube.get("podgroups", NS, group)
    # the pod is its own top owner, as in KAI's grouper: its labels are its group's
    assert created["metadata"]["labels"] == {"run": "bare", "podgang.io/managed-by": "podgang"}
    assert created["spec"] == OWNER_LESS_KAI_SPEC


async def test_recorded_409_and_404_bodies(tmp_path, kube, api_client):
    """The API's own Status bodies, as recorded from a real apiserver."""
    conflict = api_status("409-create-exists")
    conflict["details"] = {"name": "pg-bare", "group": "scheduling.run.ai", "kind": "podgroups"}
    conflict["message"] = 'podgroups.scheduling.run.ai "pg-bare" already exists'
    kube.fail("POST", PODGROUPS + "$", 409, body=conflict)
    missing = api_status("404-get-pod")
    missing["details"] = {"name": "pg-bare", "group": "scheduling.run.ai", "kind": "podgroups"}
    missing["message"] = 'podgroups.scheduling.run.ai "pg-bare" not found'
    kube.fail("GET", PODGROUPS + "/pg-bare$", 404, body=missing)
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(review("pod-create-bare-gpu"))
    # it "existed", then was gone: another name, created
    group = group_after(review("pod-create-bare-gpu"), resp)
    assert re.fullmatch(r"pg-bare-[a-z0-9]{5}", group)
    assert kube.get("podgroups", NS, group) is not None


async def test_generate_name_only_pod_gets_a_random_suffix_written_into_it(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        first = await wh.mutate(owner_less_generate_name_review("g1"))
        second = await wh.mutate(owner_less_generate_name_review("g2"))
    names = [group_after(owner_less_generate_name_review(), r) for r in (first, second)]
    for name in names:
        assert re.fullmatch(r"pg-train-[a-z0-9]{5}", name), name
        assert kube.get("podgroups", NS, name)["metadata"]["labels"] == {"app": "train", "podgang.io/managed-by": "podgang"}
    assert names[0] != names[1]
    # recorded in managedFields under the webhook's own name, not the client library's
    assert [r.query.get("fieldManager") for r in kube.find_requests("POST", PODGROUPS + "$")] == ["podgang-webhook"] * 2


async def test_a_podgroup_created_event_is_recorded(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        await wh.mutate(review("pod-create-bare-gpu"))

        def created_event():
            return [
                e for e in kube.list("events", NS)
                if e.get("reason") == "PodGroupCreated" and e["involvedObject"].get("name") == "pg-bare"
            ]

        events = await eventually(created_event, what="PodGroupCreated event")
    assert events[0]["involvedObject"]["kind"] == "PodGroup"
    assert events[0]["involvedObject"].get("uid") == kube.get("podgroups", NS, "pg-bare")["metadata"]["uid"]
    assert "bare" in events[0]["message"]


async def test_with_the_api_down_every_pod_is_still_allowed_in_time(tmp_path, kube, api_client):
    async with running_webhook(tmp_path, api_client=api_client, api_timeout=0.5) as wh:
        await kube.stop()
        started = time.monotonic()
        owned = await wh.mutate(owned_pod_review(0))
        owner_less = await wh.mutate(review("pod-create-bare-gpu"))
        hand_made = await wh.mutate(review("pod-create-labelled-gpu-memory"))
        assert time.monotonic() - started < 3 * 0.5 + 1
        # owned: the group name needs the owner: no guess, the grouper backfills it
        assert owned == {"uid": "scale-up-0", "allowed": True}
        # owner-less: the name is known: written into the pod, the grouper creates the group
        assert group_after(review("pod-create-bare-gpu"), owner_less) == "pg-bare" and owner_less["allowed"] is True
        assert hand_made["allowed"] is True and "warnings" not in hand_made
        assert await wh.metric("podgang_webhook_api_errors_total", call="get_owner", code="none") == 1
        assert await wh.metric("podgang_webhook_api_errors_total", call="create_podgroup", code="none") == 1
        assert await wh.metric("podgang_webhook_owner_lookup_failures_total") == 1
        assert await wh.metric(
            "podgang_webhook_admission_requests_total", endpoint="/mutate-pods", operation="CREATE", verdict="degraded"
        ) == 2
        # back up: the next pod gets its group
        await kube.start()
        assert group_after(owned_pod_review(1), await wh.mutate(owned_pod_review(1))) == f"pg-web-{DEPLOYMENT_UID}"


async def test_with_the_api_slow_the_answer_comes_within_the_timeout(tmp_path, kube, api_client):
    kube.delay(5.0)
    async with running_webhook(tmp_path, api_client=api_client, api_timeout=0.3) as wh:
        started = time.monotonic()
        owned, owner_less = await asyncio.gather(wh.mutate(owned_pod_review(0)), wh.mutate(review("pod-create-bare-gpu")))
        took = time.monotonic() - started
    assert took < 2.0, took
    assert owned == {"uid": "scale-up-0", "allowed": True}
    assert owner_less["allowed"] is True and group_after(review("pod-create-bare-gpu"), owner_less) == "pg-bare"


async def test_the_apiservers_timeout_bounds_the_look_ups(tmp_path, kube, api_client):
    kube.delay(5.0, r"/replicasets/")
    async with running_webhook(tmp_path, api_client=api_client, api_timeout=10.0) as wh:
        started = time.monotonic()
        status, body = await wh.post_raw("/mutate-pods?timeout=1s", json.dumps(owned_pod_review(0)).encode())
        took = time.monotonic() - started
    assert status == 200 and json.loads(body)["response"]["allowed"] is True
    assert took < 2.0, took  # well before the 5 s the owner look-up would take


async def test_manage_certs_writes_the_secret_and_files_and_becomes_ready(tmp_path, kube, api_client):
    kube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podgang"}})
    kube.put(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "podgang"},
            "webhooks": [
                {
                    "name": "pods.podgang.io",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "NoneOnDryRun",
                    "clientConfig": {"service": {"name": "podgang-webhook", "namespace": "podgang", "path": "/mutate-pods"}},
                }
            ],
        }
    )
    cert_dir = tmp_path / "managed"
    cert_dir.mkdir()
    async with running_webhook(
        tmp_path,
        api_client=api_client,
        cert_dir=cert_dir,
        cert_poll_interval=0.05,
        manage_certs=True,
        namespace="podgang",
        secret="podgang-webhook-tls",
        service="podgang-webhook",
        webhook_configs=["podgang"],
    ) as wh:
        await eventually(lambda: wh.server.certificate.loaded, what="managed certificate loaded")
        # the leaf names the Service, not 127.0.0.1: check the chain only from here
        trusting = client_context(cert_dir / "ca.crt")
        trusting.check_hostname = False
        wh._ssl = trusting
        assert await wh.get("/readyz") == (200, "ok\n")
        secret = kube.get("secrets", "podgang", "podgang-webhook-tls")
        assert secret is not None and set(secret["data"]) >= {"tls.crt", "tls.key", "ca.crt"}
        config = kube.get("mutatingwebhookconfigurations", None, "podgang")
        ca_bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
        assert base64.b64decode(ca_bundle) == (cert_dir / "ca.crt").read_bytes()
        from cryptography import x509

        written = x509.load_pem_x509_certificate((cert_dir / "tls.crt").read_bytes())
        # the leaf served verifies against the CA the webhook configuration now carries
        _, der = await asyncio.to_thread(handshake, wh.port, trusting)
        assert x509.load_der_x509_certificate(der).serial_number == written.serial_number
        dns = written.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
        assert "podgang-webhook.podgang.svc" in dns


def test_the_namespace_flag_excludes_podgangs_own_namespace():
    import argparse

    from podgang.webhook import cli

    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args(["--namespace", "podgang-system", "--scheduler-name", "a", "--scheduler-name", "b"])
    config = cli.config_from_args(args)
    assert config.settings.excluded_namespaces == ("kube-system", "podgang-system")
    assert config.settings.scheduler_names == ("a", "b")
    assert config.namespace == "podgang-system"


async def test_the_apiservers_timeout_bounds_create_then_read_of_an_owner_less_group(tmp_path, kube, api_client):
    """A create that answers 409 late, then a slow read of the existing group: the two
    calls together must still end before the apiserver's ``?timeout=`` (each call used
    to get the whole time that was left before the first)."""
    kube.put(managed_podgroup("pg-bare", managed=False))
    kube.delay(1.0, PODGROUPS + "$")  # the create
    kube.delay(5.0, PODGROUPS + "/pg-bare$")  # the read after its 409
    async with running_webhook(tmp_path, api_client=api_client, api_timeout=10.0) as wh:
        started = time.monotonic()
        status, body = await wh.post_raw("/mutate-pods?timeout=2s", json.dumps(review("pod-create-bare-gpu")).encode())
        took = time.monotonic() - started
    assert status == 200 and json.loads(body)["response"]["allowed"] is True
    assert took < 2.0, took  # the apiserver gives up at 2 s (the webhook answers at 1.5 s)


async def test_manage_certs_keeps_serving_the_trusted_leaf_while_the_new_ca_is_not_published(tmp_path, kube, api_client):
    """A CA rotation whose caBundle patch fails must not swap the served leaf: the API
    server would no longer trust it, and every admission would fail its TLS handshake.
    The new files are written once the patch goes through."""
    import datetime as dt

    from cryptography import x509

    from podgang.certs import pki
    from podgang.certs.kube import decide, service_dns_names
    from podgang.webhook.certificates import CertificateKeeper
    from podgang.webhook.server import WebhookConfig

    kube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podgang"}})
    kube.put(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "podgang"},
            "webhooks": [{"name": "pods.podgang.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "clientConfig": {"service": {"name": "podgang-webhook", "namespace": "podgang"}}}],
        }
    )
    cert_dir = tmp_path / "managed"
    config = WebhookConfig(cert_dir=str(cert_dir), manage_certs=True, namespace="podgang", webhook_configs=["podgang"])
    keeper = CertificateKeeper(config, api_client, on_written=lambda: None)
    await keeper.ensure_once()
    served = (cert_dir / "tls.crt").read_bytes()
    first_ca = pki.load_certs((cert_dir / "ca.crt").read_bytes())[0]

    # the Secret now holds a CA with less than a third of its validity left: ensure renews it
    aged = decide(
        None,
        dns_names=service_dns_names("podgang-webhook", "podgang"),
        now=pki.utcnow() - dt.timedelta(days=3000),
        ca_days=3650,
        days=3650,
    )
    secret = kube.get("secrets", "podgang", "podgang-webhook-tls")
    secret["data"] = {k: base64.b64encode(v).decode() for k, v in aged.data.items()}
    kube.put(secret)
    kube.fail("PATCH", r"/mutatingwebhookconfigurations/podgang$", 403, times=None)
    with pytest.raises(Exception, match="caBundle|mutatingwebhookconfigurations"):
        await keeper.ensure_once()
    assert (cert_dir / "tls.crt").read_bytes() == served  # still the leaf the API server trusts

    kube.clear_faults()
    await keeper.ensure_once()
    leaf = x509.load_pem_x509_certificate((cert_dir / "tls.crt").read_bytes())
    published = base64.b64decode(kube.get("mutatingwebhookconfigurations", None, "podgang")["webhooks"][0]["clientConfig"]["caBundle"])
    assert not pki.issued_by(leaf, first_ca)  # the renewed CA's leaf ...
    assert any(pki.issued_by(leaf, ca) for ca in pki.load_certs(published))  # ... whose CA is published


def reinvoked(doc: dict, response: dict, uid: str) -> dict:
    """The review the webhook gets when another mutating webhook changed the pod after
    it (``reinvocationPolicy: IfNeeded``): its own patch applied, plus that change."""
    again = copy.deepcopy(doc)
    again["request"]["uid"] = uid
    pod = patched(doc["request"]["object"], response)
    pod["metadata"].setdefault("annotations", {})["sidecar.example.com/injected"] = "true"
    again["request"]["object"] = pod
    return again


@pytest.mark.parametrize("name", ["pod-create-by-replicaset", "pod-create-dry-run"])
async def test_reinvocation_does_not_take_podgangs_own_group_for_a_missing_hand_made_one(tmp_path, kube, api_client, name):
    """The group podgang itself wrote (a Deployment's, which the grouper creates; a dry
    run's, which is never created) is no hand-made group: no "not found" warning."""
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        first = await wh.mutate(review(name))
        group = group_after(review(name), first)
        assert group in (f"pg-web-{DEPLOYMENT_UID}", "pg-dryrun-pod")
        again = reinvoked(review(name), first, "again-1")
        second = await wh.mutate(again)
    assert second["allowed"] is True and "warnings" not in second, second
    assert decoded_patch(second) == []
    assert kube.list("podgroups", NS) == []


async def test_an_exported_owner_less_pod_applied_again_gets_its_group_back(tmp_path, kube, api_client):
    """``kubectl get pod bare -o yaml`` carries podgang's keys; applied again after the pod
    (and with it its group) was deleted, the pod gets its group created, not a warning
    that it stays Pending until someone else creates it."""
    doc = review("pod-create-bare-gpu")
    md = doc["request"]["object"]["metadata"]
    md.setdefault("annotations", {})["pod-group-name"] = "pg-bare"
    md.setdefault("labels", {})["kai.scheduler/podgroup"] = "pg-bare"
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(doc)
    assert resp["allowed"] is True and "warnings" not in resp, resp
    created = kube.get("podgroups", NS, "pg-bare")
    assert created is not None and created["metadata"]["labels"] == {"run": "bare", "podgang.io/managed-by": "podgang"}


async def test_an_owner_less_pod_naming_an_existing_foreign_group_like_podgangs_joins_it(tmp_path, kube, api_client):
    foreign = kube.put(managed_podgroup("pg-bare", managed=False))
    doc = review("pod-create-bare-gpu")
    doc["request"]["object"]["metadata"].setdefault("labels", {})["kai.scheduler/podgroup"] = "pg-bare"
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(doc)
    assert resp["allowed"] is True and "warnings" not in resp
    assert group_after(doc, resp) == "pg-bare"
    assert kube.get("podgroups", NS, "pg-bare") == foreign and len(kube.list("podgroups", NS)) == 1


async def test_a_pod_of_a_workload_labelled_skip_is_left_alone(tmp_path, kube, api_client):
    """``podgang.io/skip=true`` on the workload (spec §1: pod *or workload* label): its
    pods get no group, as the grouper and ``podgang plan`` leave the workload alone."""
    deployment = kube.get("deployments", NS, "web")
    deployment["metadata"].setdefault("labels", {})["podgang.io/skip"] = "true"
    kube.put(deployment)
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        first = await wh.mutate(owned_pod_review(0))
        second = await wh.mutate(owned_pod_review(1))
        assert await wh.metric(
            "podgang_webhook_admission_requests_total", endpoint="/mutate-pods", operation="CREATE", verdict="skipped"
        ) == 2
    assert first == {"uid": "scale-up-0", "allowed": True}
    assert second == {"uid": "scale-up-1", "allowed": True}


async def test_a_pod_of_a_workload_annotated_kais_skip_podgrouper_is_left_alone(tmp_path, kube, api_client):
    """``kai.scheduler/skip-podgrouper: "true"`` on the Deployment: the user told KAI's grouper to
    leave its pods alone, so podgang, standing in for it, does too — the webhook keeps that
    annotation on the owners it looks up (found on the real KAI: it did not)."""
    deployment = kube.get("deployments", NS, "web")
    deployment["metadata"].setdefault("annotations", {})["kai.scheduler/skip-podgrouper"] = "true"
    kube.put(deployment)
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        assert await wh.mutate(owned_pod_review(0)) == {"uid": "scale-up-0", "allowed": True}
        assert await wh.metric(
            "podgang_webhook_admission_requests_total", endpoint="/mutate-pods", operation="CREATE", verdict="skipped"
        ) == 1


async def test_a_pod_owned_by_a_pod_podgang_grouped_is_not_taken_for_opted_out(tmp_path, kube, api_client):
    """A Spark driver carries podgang's kai.scheduler/skip-podgrouper (podgang grouped it) and
    owns its executors: that is no user's opt-out, so its executors are grouped (found by the
    real Spark tests once the webhook kept the opt-out on owners it looks up)."""
    driver = kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "driver", "namespace": NS, "uid": "driver-uid",
        "annotations": {"pod-group-name": "pg-app", "kai.scheduler/skip-podgrouper": "true"},
        "labels": {"kai.scheduler/podgroup": "pg-app"}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]}})
    doc = review("pod-create-bare-gpu")
    doc["request"]["object"]["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "Pod", "name": "driver", "uid": driver["metadata"]["uid"], "controller": True}]
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(doc)
    assert resp["allowed"] is True and "patch" in resp, resp


async def test_an_owner_the_api_refuses_is_asked_for_once_per_scale_up_not_once_per_pod(tmp_path, kube, api_client):
    """RBAC without ``get`` on an owner kind: every pod is admitted without a group (the
    grouper backfills), and a 1,000-pod scale-up must not become 1,000 refused calls."""
    kube.fail("GET", r"/replicasets/web-7887448d46$", 403, times=None)
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        for i in range(5):  # one after the other, as a ReplicaSet's slow start sends them
            assert await wh.mutate(owned_pod_review(i)) == {"uid": f"scale-up-{i}", "allowed": True}
        assert await wh.metric("podgang_webhook_owner_lookup_failures_total") == 5
    assert kube.count("GET", r"/replicasets/web-7887448d46$") == 1


async def test_a_workload_labelled_skip_is_skipped_by_validate_as_by_mutate(tmp_path, kube, api_client):
    """One scope decision for both endpoints: a Deployment labelled podgang.io/skip=true
    whose pod asks for a whole GPU and gpu-memory is left alone by /validate-pods too."""
    doc = with_annotations(owned_pod_review(0), {"gpu-memory": "4000"})
    container = doc["request"]["object"]["spec"]["containers"][0]
    container.setdefault("resources", {})["limits"] = {"nvidia.com/gpu": "1"}
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        denied = await wh.validate(doc)
        assert denied["allowed"] is False and rules.MSG_FRACTION_AND_GPU in denied["status"]["message"]
        kube.patch_object("deployments", NS, "web", {"metadata": {"labels": {"podgang.io/skip": "true"}}})
        skipped_review = copy.deepcopy(doc)
        skipped_review["request"]["uid"] = "skipped"
    # a fresh webhook: the owner cache of the first still holds the Deployment without the label
    async with running_webhook(tmp_path / "again", api_client=api_client) as wh:
        assert await wh.validate(skipped_review) == {"uid": "skipped", "allowed": True}
        assert await wh.mutate(skipped_review) == {"uid": "skipped", "allowed": True}


async def test_a_workload_labelled_skip_is_not_denied_by_mutate_for_a_group_named_two_ways(tmp_path, kube, api_client):
    """Mutate's own denials (label and annotation naming two groups) wait for the
    owners too: a skipped Deployment's pod is allowed by both endpoints."""
    doc = with_annotations(owned_pod_review(0), {"pod-group-name": "a"})
    doc["request"]["object"]["metadata"].setdefault("labels", {})["kai.scheduler/podgroup"] = "b"
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        for answer in (await wh.mutate(doc), await wh.validate(doc)):
            assert answer["allowed"] is False and "two different PodGroups" in answer["status"]["message"]
    kube.patch_object("deployments", NS, "web", {"metadata": {"labels": {"podgang.io/skip": "true"}}})
    async with running_webhook(tmp_path / "again", api_client=api_client) as wh:
        assert await wh.mutate(doc) == {"uid": doc["request"]["uid"], "allowed": True}
        assert await wh.validate(doc) == {"uid": doc["request"]["uid"], "allowed": True}


async def test_a_workload_pod_of_a_hand_made_group_is_labelled_with_its_subgroup(tmp_path, kube, api_client):
    group = managed_podgroup("prefill-decode", managed=False)
    group["spec"] = {"minMember": 3, "subGroups": [{"name": "web", "minMember": 2}, {"name": "prefill", "minMember": 1}]}
    kube.put(group)
    doc = owned_pod_review(0)  # a pod of ReplicaSet web-7887448d46 of Deployment web
    doc["request"]["object"]["metadata"].setdefault("labels", {})["kai.scheduler/podgroup"] = "prefill-decode"
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        resp = await wh.mutate(doc)
        pod = patched(doc["request"]["object"], resp)
        # its subgroup is named after the workload at the top of its owners, looked up for it
        assert pod["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "web"
        assert pod["metadata"]["annotations"]["pod-group-name"] == "prefill-decode"
        again = copy.deepcopy(doc)
        again["request"]["object"] = pod
        assert "patch" not in await wh.mutate(again)
        # a template that names its subgroup keeps it
        own = copy.deepcopy(doc)
        own["request"]["object"]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "prefill"
        answer = await wh.mutate(own)
        mine = patched(own["request"]["object"], answer)
        assert mine["metadata"]["labels"]["kai.scheduler/subgroup-name"] == "prefill"
        assert "warnings" not in answer
        # one the group does not list: kept, and the user is told KAI ignores the pod
        stray = copy.deepcopy(doc)
        stray["request"]["object"]["metadata"]["labels"]["kai.scheduler/subgroup-name"] = "decode"
        answer = await wh.mutate(stray)
        assert any('subgroup "decode"' in w and "does not list" in w for w in answer["warnings"]), answer


async def test_a_pod_of_a_one_part_hand_made_group_gets_no_subgroup(tmp_path, kube, api_client):
    """KAI ignores a pod whose subgroup its PodGroup does not list: a group with no
    subGroups gets pods without the key (seed 003 would never start otherwise)."""
    kube.put(managed_podgroup("prefill-decode", managed=False))
    doc = owned_pod_review(0)
    doc["request"]["object"]["metadata"].setdefault("labels", {})["kai.scheduler/podgroup"] = "prefill-decode"
    async with running_webhook(tmp_path, api_client=api_client) as wh:
        pod = patched(doc["request"]["object"], await wh.mutate(doc))
    assert "kai.scheduler/subgroup-name" not in pod["metadata"]["labels"]
    assert pod["metadata"]["annotations"]["pod-group-name"] == "prefill-decode"


async def test_a_pod_of_an_ordered_statefulset_is_admitted_with_a_warning_that_says_why_it_is_no_gang(
        tmp_path, kube, api_client):
    """The recorded StatefulSet db (OrderedReady, 2 replicas): its controller makes db-1 only
    once db-0 is Ready, so podgang sizes its gang 1 and the admission says why; with
    podManagementPolicy Parallel it is a gang of 2 and nothing is said."""
    async with running_webhook(tmp_path, api_client=api_client, owner_cache_ttl=0.0) as wh:
        resp = await wh.mutate(review("pod-create-by-statefulset-gpu"))
        assert resp["allowed"] is True
        (warning,) = resp["warnings"]
        assert warning.startswith("statefulset/db is not one gang (its gang counts 1): podManagementPolicy "
                                  "OrderedReady (the default) makes its 2 pods one at a time"), warning
        assert warning.endswith("podManagementPolicy: Parallel makes them one gang")
        kube.patch_object("statefulsets", NS, "db", {"spec": {"podManagementPolicy": "Parallel"}})
        again = await wh.mutate(review("pod-create-by-statefulset-gpu"))
        assert again["allowed"] is True and "warnings" not in again, again
