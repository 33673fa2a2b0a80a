"""podgang installed for real: its image built from the ``Dockerfile``, its chart installed with
Helm's engine, its pods run by a real kubelet — for the tests that check what only a real node
shows (probes, containers killed, the apiserver calling the webhook through its Service).

``../shared/kube-bin-node/node`` (or ``$PODGANG_KUBE_BIN_NODE``) adds one real node (containerd,
runc, kubelet, kube-proxy) to a ``../shared/kube-bin`` control plane started with no fake
nodes, and builds the stand-in for the Dockerfile's base image offline. It needs root and a few
Debian packages (its README lists them; ``.ci/run`` installs them as root): where either is
missing, these tests skip with one reason (:func:`skip_reason`). One real node per machine: the
session starts one, and its tests run one after the other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.realcluster import HAVE_KUBE_BIN, ROOT, SKIP_REASON, Cluster, wait_sync

KUBE_BIN_NODE = Path(os.environ.get("PODGANG_KUBE_BIN_NODE") or ROOT.parent / "shared" / "kube-bin-node")
NODE = KUBE_BIN_NODE / "node"
#: the commands of the Debian packages the real node uses (kube-bin-node/README.md), and the CNI plugins
DEBIAN_COMMANDS = ("containerd", "runc", "iptables", "socat", "buildah", "debootstrap", "conntrack")
CNI_PLUGINS = Path("/usr/lib/cni")
DEBIAN_PACKAGES = ("containerd runc iptables socat containernetworking-plugins buildah debootstrap conntrack")

#: the release as a user installs it: the chart's defaults, in its own namespace
NAMESPACE = RELEASE = "podgang"
CHART = ROOT / "charts" / "podgang"
NODE_NAME = "real-node"
#: a second tag of the same build, for ``helm upgrade`` to roll to
UPGRADE_SUFFIX = "-upgrade"
BUILD_TIMEOUT = 900


def chart_app_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def skip_reason() -> str:
    """Why the real-node tests cannot run here ('' when they can)."""
    if not HAVE_KUBE_BIN:
        return SKIP_REASON
    missing = [c for c in DEBIAN_COMMANDS if shutil.which(c) is None]
    if not (CNI_PLUGINS / "bridge").exists():
        missing.append(f"{CNI_PLUGINS}/bridge")
    problems = []
    if not os.access(NODE, os.X_OK):
        problems.append(f"no {NODE} (set PODGANG_KUBE_BIN_NODE to another copy)")
    if os.geteuid() != 0:
        problems.append("not root (a kubelet, containerd and iptables need it)")
    if missing:
        problems.append(f"missing {', '.join(missing)} (apt-get install -y {DEBIAN_PACKAGES}; .ci/run does it as root)")
    return f"the real-node tests need a real node here: {'; '.join(problems)}" if problems else ""


def _run(*args: str, timeout: float = BUILD_TIMEOUT, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} … failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def build_image(tag: str) -> str:
    """The project's Dockerfile, unchanged, built by buildah (the base image's stand-in made once
    and kept in buildah's store). The machine's CA bundle is bound for the RUN steps only: pip
    may reach PyPI through a TLS-inspecting proxy whose CA only the host trusts."""
    _run(str(NODE), "base-image")
    ref = f"localhost/podgang:{tag}"
    _run("buildah", "bud", "--network", "host", "--pull=false", "-q",
         "--volume", "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro",
         "-t", ref, str(ROOT))
    return ref


@dataclass
class RealNode:
    """A control plane with KAI and one real node, the podgang image loaded on it."""

    cluster: Cluster
    tag: str
    kept: list[str] = field(default_factory=list)

    @property
    def directory(self) -> Path:
        return self.cluster.directory

    @classmethod
    def up(cls, directory: Path) -> "RealNode":
        tag = chart_app_version()
        image = build_image(tag)
        cluster = Cluster.up(directory, schedulers=("kai",), nodes=0)
        node = cls(cluster, tag)
        try:
            _run(str(NODE), "up", str(directory), timeout=300)
            node.load(image)
        except BaseException:
            node.down()
            raise
        node_dir = directory / "node"
        cluster.extra_logs += [node_dir / "kubelet.log", node_dir / "containerd.log", node_dir / "kube-proxy.log"]
        return node

    def load(self, image: str) -> None:
        _run(str(NODE), "load", str(self.directory), image, timeout=300)

    def upgrade_image(self) -> str:
        """The same build under a second tag, loaded on the node: what ``helm upgrade`` rolls to."""
        tag = self.tag + UPGRADE_SUFFIX
        _run("buildah", "tag", f"localhost/podgang:{self.tag}", f"localhost/podgang:{tag}", timeout=60)
        self.load(f"localhost/podgang:{tag}")
        return tag

    def down(self) -> None:
        subprocess.run([str(NODE), "down", str(self.directory)], capture_output=True, text=True, timeout=180)
        self.cluster.down()

    # -- Helm, as a user runs it (Helm's own engine, loaded by helm-python-sdk)

    def _helm(self) -> Any:
        import helm_python as helm

        return helm.Config(kubeconfig_path=self.cluster.kubeconfig, namespace=NAMESPACE)

    def helm_install(self, values: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._helm().install(CHART, RELEASE, values or {}, namespace=NAMESPACE, create_namespace=True,
                                    wait="watcher", timeout=300)

    def helm_upgrade(self, values: dict[str, Any]) -> dict[str, Any]:
        return self._helm().upgrade(CHART, RELEASE, values, namespace=NAMESPACE, wait="watcher", timeout=300,
                                    reuse_values=True)

    def helm_uninstall(self) -> dict[str, Any]:
        return self._helm().uninstall(RELEASE, wait="watcher", timeout=300)

    # -- what a user reads with kubectl

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        return self.cluster.kubectl(*args, input=input, check=check)

    def wait_namespace_ready(self, namespace: str) -> None:
        """A new namespace takes pods once its ``default`` ServiceAccount exists (ServiceAccount
        admission is on with a real node)."""
        self.kubectl("create", "namespace", namespace)
        wait_sync(lambda: self.cluster.kubectl_run("get", "serviceaccount", "-n", namespace, "default").returncode == 0,
                  f"namespace {namespace}'s default ServiceAccount", 30.0)

    def containerd(self, *args: str) -> str:
        """``ctr`` on the node's containerd (the kubelet's namespace)."""
        return _run("ctr", "-a", str(self.directory / "node" / "containerd.sock"), "-n", "k8s.io", *args, timeout=60)

    def kill_container(self, pod: dict[str, Any], container: str) -> str:
        """SIGKILL a container of ``pod`` in containerd, as an OOM kill or a crash would end it;
        the API object is left alone. Its container id."""
        status = next(s for s in pod["status"]["containerStatuses"] if s["name"] == container)
        ident = status["containerID"].split("://", 1)[1]
        self.containerd("task", "kill", "--signal", "SIGKILL", ident)
        return ident

    def node_metrics(self, path: str) -> str:
        return self.kubectl("get", "--raw", f"/api/v1/nodes/{NODE_NAME}/proxy/{path}")
