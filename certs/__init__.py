"""podgang certs: the webhook's serving certificates.

- :func:`generate` (``certs.directory``): a CA + serving certificate as files.
- :func:`ensure` (``certs.kube``): the same, kept in a ``kubernetes.io/tls`` Secret,
  published as ``caBundle`` and rotated before expiry; :func:`write_files` puts the
  result into a directory a server hot-reloads from.
- ``certs.pki``: the pure X.509 helpers both use.
"""

from __future__ import annotations

from podgang.certs.directory import GenerateResult, generate
from podgang.certs.kube import CertBundle, EnsureError, ensure, service_dns_names, write_files
from podgang.certs.pki import CertError

__all__ = ["CertBundle", "CertError", "EnsureError", "GenerateResult", "ensure", "generate", "service_dns_names",
           "write_files"]
