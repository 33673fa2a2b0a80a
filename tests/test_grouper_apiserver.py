"""``podgang grouper`` against a real kube-apiserver + etcd (envtest style).

Needs ``KUBEBUILDER_ASSETS``: a folder holding ``kube-apiserver`` and ``etcd``
(e.g. ``setup-envtest use 1.36 -p path``). Without it these tests are skipped —
the only skip in the grouper's suite. No controller-manager runs, so the tests
create ReplicaSets and pods themselves, as with the emulator; what the real
server adds is the true wire format, the KAI PodGroup CRD's schema, resourceVersion
semantics, merge patches and watch behaviour.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

POLL_INTERVAL = 0.1  # seconds between two looks of a poll with a deadline

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")
HAVE_ASSETS = bool(ASSETS) and all(os.access(Path(ASSETS) / b, os.X_OK) for b in ("kube-apiserver", "etcd"))
pytestmark = pytest.mark.skipif(
    not HAVE_ASSETS,
    reason="KUBEBUILDER_ASSETS is not set to a folder with executable kube-apiserver and etcd "
           "(e.g. `setup-envtest use 1.36 -p path`): the real-apiserver tests need them",
)

NS = "gang-real"
TOKEN = "podgang-test-token"
CRD_CANDIDATES = [
    Path(__file__).parent / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml",
    Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "crds" / "scheduling.run.ai_podgroups.yaml",
]
MINIMAL_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.run.ai"},
    "spec": {"group": "scheduling.run.ai", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "listKind": "PodGroupList"},
             "versions": [{"name": "v2alpha2", "served": True, "storage": True, "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                                        "properties": {"minMember": {"type": "integer", "minimum": 0}}},
                               "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _self_signed(directory: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    crt, pem = directory / "apiserver.crt", directory / "apiserver.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                      serialization.NoEncryption()))
    return crt, pem


@pytest.fixture(scope="module")
def apiserver():
    work = Path(tempfile.mkdtemp(prefix="podgang-envtest-"))
    procs: list[subprocess.Popen] = []
    try:
        etcd_port, peer_port, api_port = _free_port(), _free_port(), _free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        procs.append(subprocess.Popen(
            [str(Path(ASSETS) / "etcd"), "--data-dir", str(work / "etcd"), "--listen-client-urls", etcd_url,
             "--advertise-client-urls", etcd_url, "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-cluster", f"default=http://127.0.0.1:{peer_port}", "--unsafe-no-fsync=true"],
            stdout=open(work / "etcd.log", "w"), stderr=subprocess.STDOUT))
        crt, key = _self_signed(work)
        (work / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')
        procs.append(subprocess.Popen(
            [str(Path(ASSETS) / "kube-apiserver"), f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1",
             "--advertise-address=127.0.0.1", f"--secure-port={api_port}", f"--tls-cert-file={crt}",
             f"--tls-private-key-file={key}", f"--token-auth-file={work / 'tokens.csv'}",
             "--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24",
             "--service-account-issuer=https://kubernetes.default.svc", f"--service-account-key-file={key}",
             f"--service-account-signing-key-file={key}", "--disable-admission-plugins=ServiceAccount",
             f"--cert-dir={work / 'certs'}"],
            stdout=open(work / "apiserver.log", "w"), stderr=subprocess.STDOUT))
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
            "clusters": [{"name": "envtest", "cluster": {"server": f"https://127.0.0.1:{api_port}",
                                                          "insecure-skip-tls-verify": True}}],
            "users": [{"name": "admin", "user": {"token": TOKEN}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
        }))
        yield Envtest(str(kubeconfig), f"https://127.0.0.1:{api_port}", procs, work / "apiserver.log")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


@dataclass
class Envtest:
    kubeconfig: str
    url: str
    procs: list
    log: Path

    async def ready(self, timeout: float = 60.0) -> None:
        """Poll ``/readyz`` until the apiserver answers 200, or fail with its log."""
        import aiohttp

        async def answered() -> bool:
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError("etcd or kube-apiserver exited: " + self.log.read_text()[-3000:])
            try:
                async with aiohttp.ClientSession() as session:
                    async with session.get(f"{self.url}/readyz", ssl=False, timeout=aiohttp.ClientTimeout(total=2),
                                           headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
                        return resp.status == 200
            except (aiohttp.ClientError, asyncio.TimeoutError):
                return False

        await poll(answered, timeout, "kube-apiserver did not become ready")


async def poll(predicate, timeout=10.0, message="condition not met"):
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = await predicate()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(message)
        await asyncio.sleep(POLL_INTERVAL)


async def test_real_apiserver_shared_group_and_deployment_group(apiserver):
    from podgang.api import Api, ApiError, make_api_client
    from tests.grouper_support import args, deployment, owned_group, pod, podgroup, replicaset
    from podgang.grouper import cli

    await apiserver.ready()
    api_client = await make_api_client(apiserver.kubeconfig)
    api = Api(api_client, timeout=10)
    try:
        crd = next((yaml.safe_load(p.read_text()) for p in CRD_CANDIDATES if p.exists()), MINIMAL_CRD)
        try:
            await api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        except ApiError as exc:
            if exc.status != 409:
                raise

        async def established():
            try:
                got = await api.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podgroups.scheduling.run.ai")
            except ApiError:
                return False
            return any(c.get("type") == "Established" and c.get("status") == "True"
                       for c in (got.get("status") or {}).get("conditions") or [])

        await poll(established, 30, "the PodGroup CRD was not established")
        await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

        async def put(obj):
            from podgang.kinds import OWNER_KINDS

            kind = obj["kind"]
            if kind == "PodGroup":
                path = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
            else:
                path = OWNER_KINDS[kind].path(NS) if kind in OWNER_KINDS else f"/api/v1/namespaces/{NS}/pods"
            obj["metadata"].pop("uid", None)
            status = obj.pop("status", None)
            created = await api.create(path, obj)
            if status and kind != "PodGroup":
                created = await api.merge_patch(f"{path}/{created['metadata']['name']}/status", {"status": status})
            return created

        async def min_member(name):
            try:
                return (await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/{name}"))[
                    "spec"].get("minMember")
            except ApiError:
                return None

        await put(podgroup("shared", 3, ns=NS))
        deps = {}
        for name in ("app-server", "model-1", "model-2"):
            dep = await put(deployment(name, 1, group="shared", ns=NS))
            rs = await put(replicaset(dep))
            await put(pod(f"{name}-0", owner=rs, group="shared", ns=NS, node=None, phase="Pending"))
            deps[name] = dep
        web = await put(deployment("web", 2, ns=NS))
        web_rs = await put(replicaset(web))
        for i in range(2):
            await put(pod(f"web-{i}", owner=web_rs, group=owned_group(web), ns=NS, node=None, phase="Pending"))

        stop = asyncio.Event()
        task = asyncio.create_task(cli.serve(args(kubeconfig=apiserver.kubeconfig, namespaces=[NS]), stop=stop))
        try:
            await poll(lambda: _eq(min_member(owned_group(web)), 2), 15, "the Deployment's group was not created")
            pg = await api.get(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups/{owned_group(web)}")
            assert pg["metadata"]["ownerReferences"][0]["uid"] == web["metadata"]["uid"]
            assert pg["metadata"]["labels"]["podgang.io/managed-by"] == "podgang"
            await api.merge_patch(f"/apis/apps/v1/namespaces/{NS}/deployments/model-1", {"spec": {"replicas": 2}})
            await poll(lambda: _eq(min_member("shared"), 4), 5, "shared minMember did not become 4")
            await api.merge_patch(f"/apis/apps/v1/namespaces/{NS}/deployments/model-1", {"spec": {"replicas": 1}})
            await poll(lambda: _eq(min_member("shared"), 3), 5, "shared minMember did not go back to 3")

            async def changed_event():
                evs = await api.get(f"/api/v1/namespaces/{NS}/events")
                return [e for e in evs.get("items") or [] if e.get("reason") == "MinMemberChanged"
                        and "deployment model-1 scaled 1 → 2" in e.get("message", "")]

            await poll(changed_event, 5, "no MinMemberChanged event")
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 15) in (0, 1)
    finally:
        await api_client.close()


async def _eq(awaitable, value):
    return (await awaitable) == value
