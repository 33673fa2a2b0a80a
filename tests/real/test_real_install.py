"""podgang installed as a user installs it, on a real node (issue 34): the image built from the
Dockerfile by buildah, the chart installed with its defaults by Helm's engine next to KAI, the
webhook and grouper run by a real kubelet, and the kube-apiserver calling the webhook through
its Service. Nothing is played by the test: containers are killed in containerd, the gang is
placed by KAI, the pods really run (``registry.k8s.io/pause``, the node's one image besides
podgang's).

Where the real node cannot run (no root, no Debian packages: ``tests/realnode.py``) every test
here skips with one reason.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import socket
import ssl
import subprocess
import time
from typing import Any, AsyncIterator

from cryptography import x509

from podgang.api import ApiError
from podgang.certs import pki
from podgang.certs.kube import decide, service_dns_names
from tests.realcluster import until
from tests.realnode import NAMESPACE, NODE_NAME, RELEASE, RealNode

PAUSE = "registry.k8s.io/pause:3.10.2"
KAI = "kai-scheduler"
WEBHOOK_LABEL = "app.kubernetes.io/component=webhook"
GROUPER_LABEL = "app.kubernetes.io/component=grouper"
WEBHOOK_SECRET, WEBHOOK_SERVICE, WEBHOOK_PORT = f"{RELEASE}-webhook-tls", f"{RELEASE}-webhook", 9443
#: the chart's default staleness grace period, and the slack a test allows around it
GRACE_PERIOD, SLACK = 60.0, 45.0


def pod_manifest(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulerName": KAI, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "main", "image": PAUSE}], **spec}}


def pods(node: RealNode, namespace: str, selector: str) -> list[dict[str, Any]]:
    return json.loads(node.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json"))["items"]


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions", []))


def started(pod: dict[str, Any]) -> bool:
    """Its containers run in containerd (the kubelet says so), not merely a pod bound."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def events(node: RealNode, namespace: str, reason: str) -> list[dict[str, Any]]:
    items = json.loads(node.kubectl("get", "events", "-n", namespace, "-o", "json"))["items"]
    return [e for e in items if e.get("reason") == reason]


def event_time(event: dict[str, Any]) -> dt.datetime:
    stamp = event.get("eventTime") or event.get("lastTimestamp") or event["metadata"]["creationTimestamp"]
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def logs(node: RealNode, selector: str) -> str:
    return node.kubectl("logs", "-n", NAMESPACE, "-l", selector, "--tail=-1", "--prefix", "--max-log-requests=10",
                        check=False)


def served_certificate(ip: str, port: int = WEBHOOK_PORT) -> x509.Certificate:
    """The leaf a webhook pod serves (pod IPs are on the node's bridge, reachable from here)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((ip, port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def apiserver_webhook_failures(node: RealNode) -> int:
    """How often the kube-apiserver logged a failed call of podgang's webhooks (with
    ``failurePolicy: Ignore`` such a pod is admitted without its gang)."""
    log = node.cluster.logs().get("kube-apiserver")
    if log is None:
        raise AssertionError(f"no kube-apiserver log in {sorted(node.cluster.logs())}")
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if "failed calling webhook" in line and ".podgang.io" in line)


class Admissions:
    """Pods created one after the other while something happens to podgang, as server-side dry
    runs: the apiserver calls the webhook (``sideEffects: NoneOnDryRun``) and stores nothing.
    Every answer must carry the webhook's patch: with ``failurePolicy: Ignore`` a failed call
    would admit the pod without it."""

    def __init__(self, node: RealNode, namespace: str):
        self.node, self.namespace = node, namespace
        self.patched: list[str] = []
        self.unpatched: list[str] = []
        self.refused: list[str] = []
        self._stop = asyncio.Event()

    async def _run(self, api) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            name = f"in-flight-{n}"
            try:
                got = await api.request("POST", f"/api/v1/namespaces/{self.namespace}/pods", query={"dryRun": "All"},
                                        body=pod_manifest(name, self.namespace), timeout=30)
            except ApiError as exc:
                self.refused.append(f"{name}: {exc.describe()}")
                continue
            annotated = (got["metadata"].get("annotations") or {}).get("pod-group-name")
            (self.patched if annotated else self.unpatched).append(name)  # the next one when this one is answered

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator["Admissions"]:
        async with self.node.cluster.api() as api:
            task = asyncio.create_task(self._run(api))
            try:
                await until(lambda: _true(len(self.patched) >= 3), "the first admissions patched", 60)
                yield self
            finally:
                self._stop.set()
                await task

    def check(self, what: str) -> None:
        assert not self.refused and not self.unpatched, (
            f"during {what}: {len(self.refused)} refused {self.refused[:3]}, {len(self.unpatched)} admitted "
            f"without the webhook's patch {self.unpatched[:3]} (of {len(self.patched)} patched)")
        assert len(self.patched) >= 20, f"only {len(self.patched)} admissions during {what}"


async def _true(value: bool) -> bool:
    return value


async def wait_pods(node: RealNode, namespace: str, selector: str, count: int, what: str,
                    check=started, timeout: float = 120.0) -> list[dict[str, Any]]:
    async def enough():
        found = [p for p in pods(node, namespace, selector) if check(p)]
        return found if len(found) == count else None
    return await until(enough, what, timeout)


def group_of(pod: dict[str, Any]) -> str:
    return pod["metadata"]["annotations"]["pod-group-name"]


def podgroup(node: RealNode, namespace: str, name: str) -> dict[str, Any] | None:
    done = node.cluster.kubectl_run("get", "podgroups.scheduling.run.ai", "-n", namespace, name, "-o", "json")
    return json.loads(done.stdout) if done.returncode == 0 else None


async def webhook_ready_through_service(node: RealNode, namespace: str) -> None:
    """Ready pods are not yet a Service that answers (EndpointSlice, then kube-proxy's rules):
    a server-side dry run comes back patched once the apiserver reaches a pod through it."""
    async with node.cluster.api() as api:
        async def patched():
            got = await api.request("POST", f"/api/v1/namespaces/{namespace}/pods", query={"dryRun": "All"},
                                    body=pod_manifest("probe", namespace))
            return (got["metadata"].get("annotations") or {}).get("pod-group-name")
        await until(patched, "the webhook answering through its Service", 60)


# ---------------------------------------------------------------------------------------------


async def test_installed_with_its_defaults_it_runs_and_the_apiserver_calls_it_through_its_service(real_node):
    node = real_node
    webhooks = await wait_pods(node, NAMESPACE, WEBHOOK_LABEL, 2, "2 webhook pods Ready", check=ready)
    groupers = await wait_pods(node, NAMESPACE, GROUPER_LABEL, 2, "2 grouper pods Ready", check=ready)
    assert {p["spec"]["nodeName"] for p in webhooks + groupers} == {NODE_NAME}

    # the kubelet ran the chart's probes against the processes, and they succeeded
    async def probed() -> dict[tuple[str, str], float] | None:
        seen: dict[tuple[str, str], float] = {}
        for line in node.node_metrics("metrics/probes").splitlines():
            if line.startswith("prober_probe_total{") and f'namespace="{NAMESPACE}"' in line \
                    and 'result="successful"' in line:
                labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.index("}")].split(","))
                key = (labels["container"].strip('"'), labels["probe_type"].strip('"'))
                seen[key] = seen.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
        wanted = {(c, t) for c in ("webhook", "grouper") for t in ("Startup", "Readiness", "Liveness")}
        return seen if wanted <= set(seen) else None
    await until(probed, "successful startup, readiness and liveness probes of both containers", 90)

    # the chart's certificates are trusted by the apiserver: the webhook is called through its Service
    node.wait_namespace_ready("first-gang")
    await webhook_ready_through_service(node, "first-gang")
    node.kubectl("create", "-f", "-", input=json.dumps(pod_manifest("gang-member", "first-gang")))
    [pod] = await wait_pods(node, "first-gang", "", 1, "the pod's container started")
    assert podgroup(node, "first-gang", group_of(pod)) is not None
    service_ip = node.kubectl("get", "service", "-n", NAMESPACE, WEBHOOK_SERVICE, "-o", "jsonpath={.spec.clusterIP}")
    webhook_ips = {p["status"]["podIP"] for p in webhooks}
    # the apiserver's connections to the ClusterIP, answered (kube-proxy's DNAT) by a webhook pod
    conntrack = subprocess.run(["conntrack", "-L", "-p", "tcp", "-d", service_ip], capture_output=True, text=True,
                               timeout=30).stdout
    answered = [line for line in conntrack.splitlines() if "dport=443" in line
                and any(f"src={ip} " in line and f"sport={WEBHOOK_PORT}" in line for ip in webhook_ips)]
    assert answered, f"no connection to {service_ip}:443 answered by a webhook pod: {conntrack!r}"
    # (two replicas' logs, one after the other: the validating call's line may come first)
    decision = [line for line in logs(node, WEBHOOK_LABEL).splitlines()
                if '"pod":"gang-member"' in line and '"endpoint":"/mutate-pods","operation":"CREATE"' in line
                and '"dry_run":false' in line]
    assert decision and '"verdict":"patched"' in decision[0], decision
    # they started clean on the node: read-only root filesystem, the chart's limits, RBAC, TLS
    for component in (WEBHOOK_LABEL, GROUPER_LABEL):
        noisy = [line for line in logs(node, component).splitlines()
                 if '"level":"warning"' in line or '"level":"error"' in line or '"level":"critical"' in line]
        assert not noisy, f"{component}: {noisy[:5]}"


async def test_a_gang_placed_by_kai_that_loses_a_container_is_evicted_after_the_grace_period(real_node):
    """A training Job that does not retry a failed index (``backoffLimitPerIndex: 0``): when one
    worker's container is killed, the others wait for it for ever. podgang judges the gang
    stale and, after the chart's grace period, evicts the rest."""
    node, ns = real_node, "ring"
    node.wait_namespace_ready(ns)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "ring", "namespace": ns},
           "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 0,
                    "maxFailedIndexes": 3,
                    "template": {"metadata": {"labels": {"app": "ring"}},
                                 "spec": {**pod_manifest("x", ns)["spec"], "restartPolicy": "Never"}}}}
    node.kubectl("create", "-f", "-", input=json.dumps(job))
    workers = await wait_pods(node, ns, "app=ring", 3, "the gang's 3 containers started")
    group = group_of(workers[0])
    assert podgroup(node, ns, group)["spec"]["minMember"] == 3

    async def seen_whole():  # a loss before the grouper's first look is a gang still being placed
        return any("placed: 3 of minMember 3 members active" in line and ns in line
                   for line in logs(node, GROUPER_LABEL).splitlines())
    await until(seen_whole, "the grouper saw the gang whole", 60)
    [lost] = [p for p in workers if p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "0"]
    node.kill_container(lost, "main")
    survivors = {p["metadata"]["name"] for p in workers} - {lost["metadata"]["name"]}

    stale = await until(lambda: _true(events(node, ns, "GangStale")), "GangStale", 60)
    evicted = await until(lambda: _true(events(node, ns, "GangEvicted")), "GangEvicted",
                          GRACE_PERIOD + SLACK)
    waited = (event_time(evicted[0]) - event_time(stale[0])).total_seconds()
    assert GRACE_PERIOD - 2 <= waited <= GRACE_PERIOD + SLACK, (waited, stale[0]["message"], evicted[0]["message"])
    assert "2 of 3 members active" in stale[0]["message"]

    async def survivors_gone():
        return not ({p["metadata"]["name"] for p in pods(node, ns, "app=ring")} & survivors)
    await until(survivors_gone, f"the rest of the gang {sorted(survivors)} evicted")
    # the evicted pods stopped (their containers exit 0 on SIGTERM): not a recovery
    assert not events(node, ns, "GangRecovered")


async def test_the_grouper_leader_killed_the_other_replica_takes_over_and_a_scale_meanwhile_lands(real_node):
    node, ns = real_node, "leader"
    node.wait_namespace_ready(ns)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve", "namespace": ns},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
                           "template": {"metadata": {"labels": {"app": "serve"}},
                                        "spec": pod_manifest("x", ns)["spec"]}}}
    node.kubectl("create", "-f", "-", input=json.dumps(deployment))
    running = await wait_pods(node, ns, "app=serve", 2, "the Deployment's 2 containers started")
    group = group_of(running[0])
    assert podgroup(node, ns, group)["spec"]["minMember"] == 2

    lease = json.loads(node.kubectl("get", "lease", "-n", NAMESPACE, f"{RELEASE}-grouper", "-o", "json"))
    holder = lease["spec"]["holderIdentity"]
    [leader] = [p for p in pods(node, NAMESPACE, GROUPER_LABEL) if holder.startswith(p["metadata"]["name"] + "_")]
    node.kill_container(leader, "grouper")
    node.kubectl("scale", "-n", ns, "deployment/serve", "--replicas=4")

    async def grown():
        got = podgroup(node, ns, group)
        return got if got and got["spec"].get("minMember") == 4 else None
    await until(grown, "minMember 4 after the scale, written by the new leader", 120)
    now = json.loads(node.kubectl("get", "lease", "-n", NAMESPACE, f"{RELEASE}-grouper", "-o", "json"))
    assert now["spec"]["holderIdentity"] != holder
    assert int(now["spec"].get("leaseTransitions") or 0) > int(lease["spec"].get("leaseTransitions") or 0)

    async def restarted():  # the container was killed, not the pod: the kubelet started it again
        [again] = [p for p in pods(node, NAMESPACE, GROUPER_LABEL) if p["metadata"]["name"] == leader["metadata"]["name"]]
        return again["status"]["containerStatuses"][0]["restartCount"] >= 1 and ready(again)
    await until(restarted, "the killed grouper container restarted and Ready", 120)
    await wait_pods(node, ns, "app=serve", 4, "the 4 containers started")


def _secret(node: RealNode) -> dict[str, Any]:
    return json.loads(node.kubectl("get", "secret", "-n", NAMESPACE, WEBHOOK_SECRET, "-o", "json"))


def _secret_cas(node: RealNode) -> list[x509.Certificate]:
    return pki.load_certs(base64.b64decode(_secret(node)["data"]["ca.crt"]))


async def test_the_webhooks_ca_rotated_in_the_cluster_with_no_failed_admission(real_node):
    """The Secret is given a CA with less than a third of its validity left (as time would):
    the webhooks see it through their watch of the Secret, one renews it, caBundle gets the new
    CA before any replica serves a leaf of it, and both replicas serve the new leaf — while pods
    are admitted, none without the webhook's patch."""
    node, ns = real_node, "rotation"
    node.wait_namespace_ready(ns)
    await webhook_ready_through_service(node, ns)
    failures = apiserver_webhook_failures(node)
    before = _secret_cas(node)
    async with Admissions(node, ns).running() as admissions:
        secret = _secret(node)
        aged = decide(None, dns_names=service_dns_names(WEBHOOK_SERVICE, NAMESPACE),
                      now=pki.utcnow() - dt.timedelta(days=3000), ca_days=3650, days=3650)
        data = dict(aged.data)
        data["ca.crt"] = pki.bundle_pem([aged.ca, *before])  # the CAs served now stay trusted
        secret["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
        node.kubectl("replace", "-f", "-", input=json.dumps(secret))

        async def renewed() -> x509.Certificate | None:
            ca = _secret_cas(node)[0]
            return ca if ca.serial_number not in {c.serial_number for c in [aged.ca, *before]} else None
        new_ca = await until(renewed, "the aged CA renewed by a webhook replica", 60)

        async def both_serve_it() -> bool:
            ips = [p["status"]["podIP"] for p in pods(node, NAMESPACE, WEBHOOK_LABEL) if ready(p)]
            leaves = [await asyncio.to_thread(served_certificate, ip) for ip in ips]
            return len(leaves) == 2 and all(pki.issued_by(leaf, new_ca) for leaf in leaves)
        await until(both_serve_it, "both webhook pods serving a leaf of the new CA (not at their hourly check)", 60)
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            config = json.loads(node.kubectl("get", kind, "-o", "json"))["items"]
            bundles = [base64.b64decode(h["clientConfig"]["caBundle"]) for c in config
                       if c["metadata"]["name"].startswith(RELEASE) for h in c["webhooks"]]
            assert bundles and all(new_ca.serial_number in {c.serial_number for c in pki.load_certs(b)}
                                   for b in bundles), kind
        settled = time.monotonic()
        await until(lambda: _true(time.monotonic() - settled > 5), "admissions after the rotation", 30)
    admissions.check("the CA rotation")
    assert apiserver_webhook_failures(node) == failures


async def test_helm_upgrade_to_a_new_image_loses_no_admission_and_uninstall_blocks_nothing(real_node):
    node, ns = real_node, "upgrade"
    node.wait_namespace_ready(ns)
    await webhook_ready_through_service(node, ns)
    tag = node.upgrade_image()
    failures = apiserver_webhook_failures(node)
    pdb = json.loads(node.kubectl("get", "pdb", "-n", NAMESPACE, "-o", "json"))["items"]
    [min_available] = [p["spec"]["minAvailable"] for p in pdb if p["metadata"]["name"] == f"{RELEASE}-webhook"]
    fewest = []

    async def watch_ready(stop: asyncio.Event) -> None:
        while not stop.is_set():  # one sample after the other, each a kubectl call off the loop
            listed = await asyncio.to_thread(pods, node, NAMESPACE, WEBHOOK_LABEL)
            fewest.append(sum(1 for p in listed if ready(p) and not p["metadata"].get("deletionTimestamp")))

    async with Admissions(node, ns).running() as admissions:
        stop = asyncio.Event()
        watcher = asyncio.create_task(watch_ready(stop))
        release = await asyncio.to_thread(node.helm_upgrade, {"image": {"tag": tag}})
        stop.set()
        await watcher
        assert release["status"] == "deployed"
        await wait_pods(node, NAMESPACE, WEBHOOK_LABEL, 2, "2 webhook pods of the new image",
                        check=lambda p: ready(p) and p["spec"]["containers"][0]["image"].endswith(f":{tag}"))
        settled = time.monotonic()
        await until(lambda: _true(time.monotonic() - settled > 5), "admissions after the rollout", 30)
    admissions.check("helm upgrade")
    assert apiserver_webhook_failures(node) == failures
    assert min(fewest) >= min_available, f"ready webhook pods fell to {min(fewest)} (the PDB's minAvailable {min_available})"
    for component in (WEBHOOK_LABEL, GROUPER_LABEL):
        assert {p["spec"]["containers"][0]["image"] for p in pods(node, NAMESPACE, component)
                if not p["metadata"].get("deletionTimestamp")} == {f"podgang:{tag}"}

    await asyncio.to_thread(node.helm_uninstall)
    try:
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            left = [c["metadata"]["name"] for c in json.loads(node.kubectl("get", kind, "-o", "json"))["items"]
                    if c["metadata"]["name"].startswith(RELEASE)]
            assert not left, f"{kind} left behind: {left}"
        # an in-scope pod is admitted at once, unpatched: nothing is left to call
        node.kubectl("create", "-f", "-", input=json.dumps(pod_manifest("after-uninstall", ns)))
        got = json.loads(node.kubectl("get", "pod", "-n", ns, "after-uninstall", "-o", "json"))
        assert "pod-group-name" not in (got["metadata"].get("annotations") or {})
    finally:
        await asyncio.to_thread(node.helm_install)  # as the session found it, for the other tests
