"""Some backends speak the API version the cluster serves (native Kubernetes gangs:
``v1beta1`` where served, else ``v1alpha2``), so each process asks API discovery
once at start-up, ``GET /apis/<group>`` for every enabled backend, and runs with
the backend that answer picks (:meth:`podgang.backends.base.Backend.for_discovery`).
A discovery that fails leaves the backend as configured: it is said in the log,
never fatal.
"""

from __future__ import annotations

import logging

from podgang.api import Api, ApiError, NotFound
from podgang.backends import Backend
from podgang.settings import Settings

log = logging.getLogger("podgang")


async def discovered(api: Api, settings: Settings) -> Settings:
    """``settings`` with each enabled backend as the cluster's discovery picks it."""
    chosen: dict[str, Backend] = {}
    for backend in settings.enabled_backends:
        group = backend.podgroup.group
        document = None
        if group:
            try:
                document = await api.get(f"/apis/{group}")
            except NotFound:
                document = None  # not served (yet): the backend says what that means
            except ApiError as exc:
                log.warning("API discovery failed: using the backend as configured", extra={"fields": {
                    "backend": backend.name, "group": group, "error": str(exc)}})
        try:
            picked = backend.for_discovery(document)
        except ValueError as exc:  # served, but no version this backend speaks
            log.warning(f"{exc}: using the backend as configured", extra={"fields": {"backend": backend.name}})
            picked = backend
        chosen[backend.name] = picked
        if picked.podgroup != backend.podgroup:
            log.info("backend version from API discovery", extra={"fields": {
                "backend": backend.name, "podgroup": picked.podgroup.api_version}})
    return settings.with_changes(backends=tuple((name, chosen[b.name]) for name, b in settings.backends))
