"""The apiserver authenticated by its client certificate, end to end on a real Kubernetes 1.36
control plane: a second kube-apiserver on the same etcd is given, through
``--admission-control-config-file``, the AdmissionConfiguration and kubeconfig
docs/operate/security.md shows (a ``users`` entry named by the webhook's host and port, a
client certificate and key); the webhook runs with ``--client-ca-file``. A pod created through
that apiserver is admitted and put in its gang; the same pod created through the cluster's own
apiserver, which presents no certificate, is refused by the webhook at the TLS handshake, and
with ``failurePolicy: Fail`` not created.

The ``cluster`` script cannot add apiserver flags: the second apiserver is the first one's
command line with another port, certificate directory and the admission configuration."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml

from podgang.certs import pki
from tests import realcluster
from tests.realcluster import Cluster, free_port, wait_sync
from tests.webhook_support import client_pair

NS = "client-auth"
TEST_LABEL = "podgang.test/client-auth"


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory):
    """A 1.36 control plane of its own (no gang scheduler needed: admission is what is tested)."""
    if not realcluster.HAVE_KUBE_BIN:
        pytest.skip(realcluster.SKIP_REASON)
    cluster = Cluster.up(tmp_path_factory.mktemp("cluster-client-auth"), version="1.36", schedulers=())
    try:
        yield cluster
    finally:
        cluster.down()


def _token(cluster: Cluster) -> str:
    return yaml.safe_load(Path(cluster.kubeconfig).read_text())["users"][0]["user"]["token"]


def _ready(port: int, token: str) -> bool:
    request = urllib.request.Request(f"https://127.0.0.1:{port}/readyz", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2, context=ssl._create_unverified_context()) as answer:
            return answer.read().strip() == b"ok"
    except OSError:
        return False


def _second_apiserver(cluster: Cluster, work: Path, admission_config: Path) -> tuple[subprocess.Popen, int]:
    """The cluster's kube-apiserver started again on the same etcd, on another port, with
    ``--admission-control-config-file``; returns it once it is ready."""
    pid = int((cluster.directory / "kube-apiserver.pid").read_text().split()[0])
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    port = free_port()
    replaced = {"--secure-port": str(port), "--cert-dir": str(work / "apiserver2-certs")}
    args = [a.decode() for a in argv]
    args = [next((f"{flag}={value}" for flag, value in replaced.items() if a.startswith(flag + "=")), a) for a in args]
    args.append(f"--admission-control-config-file={admission_config}")
    log = work / "kube-apiserver-2.log"
    cluster.extra_logs.append(log)
    with open(log, "ab") as handle:
        process = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    token = _token(cluster)
    try:
        wait_sync(lambda: process.poll() is not None or _ready(port, token), "the second kube-apiserver ready", 90)
    except BaseException:
        process.terminate()
        raise
    if process.poll() is not None:
        raise AssertionError(f"the second kube-apiserver exited: {log.read_text()[-3000:]}")
    return process, port


def _kubeconfig_for(cluster: Cluster, port: int, path: Path) -> str:
    config = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def _pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "busybox"}]}}


def test_only_the_apiserver_with_the_client_certificate_is_served(control_plane, tmp_path):
    cluster = control_plane
    # the webhook: its serving certificate, and the CA of the apiserver's client certificate
    certs = tmp_path / "certs"
    done = subprocess.run([sys.executable, "-m", "podgang.cli", "certs", "generate", "--out", str(certs),
                           "--dns-name", "localhost", "--ip", "127.0.0.1"], capture_output=True, text=True,
                          timeout=60, cwd=realcluster.ROOT)
    assert done.returncode == 0, done.stderr
    client_ca = pki.make_ca(common_name="podgang-apiserver-client-ca")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(pki.cert_pem(client_ca[0]))
    client_cert, client_key = client_pair(tmp_path / "apiserver-client", client_ca)
    webhook_port = free_port()
    log = tmp_path / "podgang-webhook.log"
    cluster.extra_logs.append(log)
    with open(log, "ab") as handle:
        webhook = subprocess.Popen(
            [sys.executable, "-m", "podgang.cli", "webhook", f"--port={webhook_port}", "--bind-address=127.0.0.1",
             f"--cert-dir={certs}", f"--client-ca-file={ca_file}", f"--kubeconfig={cluster.kubeconfig}",
             "--log-format=text", "--podgroup-budget=0"],
            stdout=handle, stderr=subprocess.STDOUT, cwd=realcluster.ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    apiserver2 = None
    try:
        realcluster.wait_for_port(webhook_port, realcluster.Process("webhook", webhook, log))
        # the apiserver side, as docs/operate/security.md shows it: a users entry named by the
        # webhook's host (and its port, not being 443)
        kubeconfig = tmp_path / "webhook-kubeconfig.yaml"
        kubeconfig.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "users": [
            {"name": f"127.0.0.1:{webhook_port}",
             "user": {"client-certificate": str(client_cert), "client-key": str(client_key)}}]}))
        admission = tmp_path / "admission.yaml"
        admission.write_text(yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration",
                                             "plugins": [{"name": name, "configuration": {
                                                 "apiVersion": "apiserver.config.k8s.io/v1",
                                                 "kind": "WebhookAdmissionConfiguration",
                                                 "kubeConfigFile": str(kubeconfig)}}
                                                 for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")]}))
        cluster.kubectl("create", "namespace", NS)
        cluster.kubectl("label", "namespace", NS, f"{TEST_LABEL}=true")
        bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "podgang-client-auth-test"},
            "webhooks": [{"name": "pods.client-auth.podgang.io", "admissionReviewVersions": ["v1"],
                          "sideEffects": "NoneOnDryRun", "failurePolicy": "Fail", "timeoutSeconds": 5,
                          "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}/mutate-pods", "caBundle": bundle},
                          "namespaceSelector": {"matchLabels": {TEST_LABEL: "true"}},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                     "resources": ["pods"]}]}]}))
        # registered before it starts: the second apiserver loads it as it comes up
        apiserver2, port2 = _second_apiserver(cluster, tmp_path, admission)
        authenticated = _kubeconfig_for(cluster, port2, tmp_path / "apiserver2.kubeconfig")

        def create(kubeconfig: str, name: str) -> subprocess.CompletedProcess:
            return subprocess.run(["kubectl", f"--kubeconfig={kubeconfig}", "create", "-f", "-", "-o", "json"],
                                  input=json.dumps(_pod(name)), capture_output=True, text=True, timeout=60)

        # until its webhook informer has synced it answers "not yet ready to handle request": no pod then
        served = wait_sync(lambda: (lambda r: r if r.returncode == 0 else None)(create(authenticated, "through-auth")),
                           "a pod created through the apiserver that presents the certificate", 60)
        pod = json.loads(served.stdout)
        labels = pod["metadata"].get("labels") or {}
        assert labels.get("kai.scheduler/podgroup") == "pg-through-auth", pod["metadata"]

        refused = create(cluster.kubeconfig, "through-plain")
        assert refused.returncode != 0, "a pod was created through an apiserver without the client certificate"
        assert "pods.client-auth.podgang.io" in refused.stderr, refused.stderr
        assert "through-plain" not in cluster.kubectl("get", "pods", "-n", NS, "-o", "name")
        decided = log.read_text(errors="replace")
        assert "through-auth" in decided and "through-plain" not in decided  # never reached HTTP
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "podgang-client-auth-test", "--ignore-not-found",
                        check=False)
        if apiserver2 is not None:
            apiserver2.terminate()
            try:
                apiserver2.wait(30)
            except subprocess.TimeoutExpired:
                apiserver2.kill()
        webhook.terminate()
        webhook.wait(30)
