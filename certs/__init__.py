"""podgang certs: the webhook's serving certificates.

- :func:`generate` (``certs.directory``): a CA + serving certificate as files.
- :func:`ensure` (``certs.kube``): the same, kept in a ``kubernetes.io/tls`` Secret,
  published as ``caBundle`` and rotated before expiry; :func:`write_files` puts the
  result into a directory a server hot-reloads from.
- ``certs.pki``: the pure X.509 helpers both use.

Importing this package is cheap: the names above are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ensure": "podgang.certs.kube",
    "write_files": "podgang.certs.kube",
    "service_dns_names": "podgang.certs.kube",
    "CertBundle": "podgang.certs.kube",
    "EnsureError": "podgang.certs.kube",
    "generate": "podgang.certs.directory",
    "GenerateResult": "podgang.certs.directory",
    "CertError": "podgang.certs.pki",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'certs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
