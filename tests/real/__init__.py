"""Tests on a real control plane and real schedulers (``../shared/kube-bin``): each asks for the ``cluster`` or ``cluster_135`` fixture and skips, with one reason, where the binaries are absent."""
