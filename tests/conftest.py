"""Fixtures shared across the suite: the real clusters (``tests/realcluster.py``) and the
API emulator (``tests/emulator/``).

The suite is in three tiers, a folder each, and each test is marked by its folder:
``tests/unit/`` (``unit``: no server, no cluster), ``tests/emulated/`` (``emulated``: the
HTTP API emulator, podgang's processes on real TLS) and ``tests/real/`` (``real_cluster``: a
test there asks for ``cluster`` — Kubernetes 1.36 with KAI, its binder and pod-grouper,
Volcano and coscheduling; kube-scheduler does native gangs — or ``cluster_135``, Kubernetes
1.35, seed 002's Workload API). A test that asks for a tier's fixture outside its folder is
refused at collection. ``make test-fast`` leaves the real cluster out, ``make test`` runs
everything. One cluster per version serves the whole session;
podgang (``podgang`` fixture) is installed once on it. When a real-cluster test fails, the
tail of every process's log is attached to its report.
"""

from __future__ import annotations

import pytest

from tests import realcluster, realnode
from tests.paths import TESTS as HERE
from tests.emulator import kube_emulator_fixture

CLUSTER_FIXTURES = {"cluster", "cluster_135", "podgang", "podgang_135", "real_node", "operators", "soak"}
#: tier folder -> (its marker, the fixtures only its tests may ask for)
TIERS = {
    "unit": ("unit", frozenset()),
    "emulated": ("emulated", frozenset({"emu"})),
    "real": ("real_cluster", frozenset(CLUSTER_FIXTURES)),
}
_started: list[realcluster.Cluster] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "unit: tests/unit/, no server and no cluster")
    config.addinivalue_line("markers", "emulated: tests/emulated/, the HTTP API emulator or podgang's processes")
    config.addinivalue_line("markers", "real_cluster: tests/real/, needs ../shared/kube-bin (a real control plane "
                                       "and schedulers)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.parent.name
        if tier not in TIERS or item.path.parent.parent != HERE:
            raise pytest.UsageError(f"{item.nodeid}: a test lives in one of tests/{{{','.join(TIERS)}}}/")
        marker, _ = TIERS[tier]
        item.add_marker(marker)
        asked = set(getattr(item, "fixturenames", ()))
        for other, (_, fixtures) in TIERS.items():
            if other != tier and asked & fixtures and not (tier == "real" and other == "emulated"):
                raise pytest.UsageError(f"{item.nodeid} asks for {', '.join(sorted(asked & fixtures))}: "
                                        f"it belongs in tests/{other}/")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.failed and _started and CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
        for cluster in _started:
            report.sections.append((f"process logs of the {cluster.version} cluster", cluster.log_tails()))
    return report


def _start(tmp_path_factory: pytest.TempPathFactory, version: str, schedulers: tuple[str, ...]):
    if not realcluster.HAVE_KUBE_BIN:
        pytest.skip(realcluster.SKIP_REASON)
    cluster = realcluster.Cluster.up(tmp_path_factory.mktemp(f"cluster-{version}"), version=version,
                                     schedulers=schedulers)
    _started.append(cluster)
    return cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """Kubernetes 1.36: kube-scheduler (native gangs), KAI with its binder and its own
    pod-grouper (every KAI install runs one), Volcano and coscheduling."""
    started = _start(tmp_path_factory, "1.36", ("kai", "kai-podgrouper", "volcano", "coscheduling"))
    started.install_kai_extras()
    yield started
    started.down()
    _started.remove(started)


@pytest.fixture(scope="session")
def podgang(cluster, tmp_path_factory):
    """podgang's webhook and grouper on ``cluster``, as the chart deploys them with every
    backend mapped (staleness grace period 5s, so that evictions come within a test).
    The workload kinds' real CRDs are installed first, as the operators a user runs would."""
    cluster.apply_crds(*realcluster.workload_crds())
    installed = realcluster.Podgang(cluster, tmp_path_factory.mktemp("podgang"), {
        "backends": realcluster.BACKENDS, "grouper": {"stalenessGracePeriod": "5s"},
        "excludedNamespaces": ["kube-system", realcluster.TEST_OWN_NAMESPACE]}).install()
    yield installed
    installed.stop()


@pytest.fixture(scope="session")
def cluster_135(tmp_path_factory):
    """Kubernetes 1.35 (seed 002's Workload API): kube-scheduler does the gang work, no other scheduler."""
    started = _start(tmp_path_factory, "1.35", ())
    yield started
    started.down()
    _started.remove(started)


@pytest.fixture(scope="session")
def podgang_135(cluster_135, tmp_path_factory):
    """podgang on ``cluster_135`` as the chart deploys it with default-scheduler=native (in the
    namespaces labelled podgang.io/native=enabled); the grouper finds 1.35's Workloads by discovery."""
    installed = realcluster.Podgang(cluster_135, tmp_path_factory.mktemp("podgang-135"), {
        "backends": {"kai-scheduler": None, "default-scheduler": "native"},
        "grouper": {"stalenessGracePeriod": "5s"}}).install()
    yield installed
    installed.stop()


@pytest.fixture(scope="module")
def operators(tmp_path_factory):
    """A 1.36 cluster of the module's own with KAI and Volcano, the workloads' real controllers
    on it (``../shared/kube-bin-operators``: LWS v0.10, JobSet, KubeRay, with their own pod
    webhooks; LWS first with its own Volcano gang management) and podgang as the chart deploys
    it (staleness grace period 5s: a fight with an operator would be an eviction within a
    test). Its own cluster: the real controllers act on every LWS, JobSet and RayCluster, which
    the other modules play by hand. Skips with one reason where the kit is absent."""
    if not realcluster.HAVE_KUBE_BIN:
        pytest.skip(realcluster.SKIP_REASON)
    if not realcluster.HAVE_OPERATORS:
        pytest.skip(realcluster.OPERATORS_SKIP_REASON)
    cluster = _start(tmp_path_factory, "1.36", ("kai", "volcano"))
    installed = None
    ops = realcluster.Operators(cluster)
    try:
        cluster.install_kai_extras()
        ops.up(lws_gang="volcano")
        installed = realcluster.Podgang(cluster, tmp_path_factory.mktemp("podgang-operators"), {
            "backends": {"kai-scheduler": "kai", "volcano": "volcano"}, "grouper": {"stalenessGracePeriod": "5s"},
            "excludedNamespaces": ["kube-system"]}).install()
        yield realcluster.OperatorsKit(cluster, ops, installed)
    finally:
        if installed is not None:
            installed.stop()
        ops.down()
        cluster.down()
        _started.remove(cluster)


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    """A 1.36 cluster of the module's own with KAI, podgang installed as the chart does it
    (staleness grace period 5s), its one grouper replaced by two with a short Lease
    (:data:`realcluster.SOAK_GROUPERS`: the first leading, the second standing by). Its own
    cluster: the soak kills, pauses and restarts processes, the apiserver's included."""
    cluster = _start(tmp_path_factory, "1.36", ("kai",))
    installed = None
    try:
        cluster.install_kai_extras()
        installed = realcluster.Podgang(cluster, tmp_path_factory.mktemp("podgang-soak"), {
            "backends": {"kai-scheduler": "kai"}, "grouper": {"stalenessGracePeriod": "5s"},
            "excludedNamespaces": ["kube-system"]}).install()
        installed.stop_grouper()
        first, second = realcluster.SOAK_GROUPERS
        installed.start_grouper(*realcluster.SOAK_LEASE, identity=first, component=first)
        installed.start_grouper(*realcluster.SOAK_LEASE, identity=second, component=second, leading=False)
        yield installed
    finally:
        if installed is not None:
            installed.stop()
        cluster.down()
        _started.remove(cluster)


@pytest.fixture(scope="module")
def real_node(tmp_path_factory):
    """podgang as a user installs it: its image built from the Dockerfile, loaded on a real node
    (``../shared/kube-bin-node``) of a 1.36 control plane with KAI and no fake nodes, and the
    chart installed with its defaults by Helm's engine. Skips with one reason without root or
    the node's Debian packages. One module uses it: its kubelet and containerd stop with it,
    and the base image stays in Buildah's store for the next session."""
    reason = realnode.skip_reason()
    if reason:
        pytest.skip(reason)
    node = realnode.RealNode.up(tmp_path_factory.mktemp("real-node"))
    _started.append(node.cluster)
    try:
        node.helm_install()
        yield node
    finally:
        _started.remove(node.cluster)
        node.down()


@pytest.fixture
async def emu():
    """A fresh HTTP API emulator (tests/emulator/) for one test."""
    async for e in kube_emulator_fixture():
        yield e
