"""The real-node tests' one skip reason (``tests/realnode.py``): on a user's clone without root
or the node's Debian packages it must say what is missing and how to get it, in one line."""

from __future__ import annotations

import pytest

from tests import realnode


@pytest.fixture
def kit_present(monkeypatch):
    monkeypatch.setattr(realnode, "HAVE_KUBE_BIN", True)
    monkeypatch.setattr(realnode.os, "access", lambda path, mode: True)


def test_without_root_or_packages_the_reason_names_both_and_the_install_line(kit_present, monkeypatch):
    monkeypatch.setattr(realnode.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(realnode.shutil, "which", lambda name: None if name in ("buildah", "conntrack") else "/bin/x")
    reason = realnode.skip_reason()
    assert "\n" not in reason and "not root" in reason and "missing buildah, conntrack" in reason
    assert f"apt-get install -y {realnode.DEBIAN_PACKAGES}" in reason and ".ci/run" in reason


def test_as_root_with_every_package_nothing_is_missing(kit_present, monkeypatch):
    monkeypatch.setattr(realnode.os, "geteuid", lambda: 0)
    monkeypatch.setattr(realnode.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(realnode.Path, "exists", lambda self: True)
    assert realnode.skip_reason() == ""


def test_without_the_kube_binaries_the_real_cluster_tiers_reason_is_given(monkeypatch):
    monkeypatch.setattr(realnode, "HAVE_KUBE_BIN", False)
    assert realnode.skip_reason() == realnode.SKIP_REASON
