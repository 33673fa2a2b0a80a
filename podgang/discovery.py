"""Some backends speak the API version the cluster serves (native Kubernetes gangs:
``v1beta1`` where served, else ``v1alpha2``), so each process asks API discovery
once at start-up, ``GET /apis/<group>`` for every enabled backend, and runs with
the backend that answer picks (:meth:`podgang.backends.base.Backend.for_discovery`).
A discovery that fails leaves the backend as configured: it is said in the log,
never fatal.

With the kai backend and ``--kai-version auto`` it also reads KAI's PodGroup CRD, whose
schema says the KAI release (:func:`podgang.backends.kai.versions.version_from_crd`): the
rules of that release apply, v0.18 when the CRD cannot be read or does not say.
"""

from __future__ import annotations

import logging

from podgang.api import Api, ApiError, NotFound
from podgang.backends import KAI, Backend
from podgang.backends.kai import versions as kai_versions
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
    settings = settings.with_changes(backends=tuple((name, chosen[b.name]) for name, b in settings.backends))
    return await kai_version_discovered(api, settings)


async def kai_version_discovered(api: Api, settings: Settings) -> Settings:
    """``settings`` with the KAI release the cluster's PodGroup CRD shows (``--kai-version auto``
    and the kai backend enabled), said in the log either way."""
    if not settings.kai_version_auto or not any(b.name == KAI.name for b in settings.enabled_backends):
        return settings
    try:
        found = kai_versions.version_from_crd(await api.get(kai_versions.CRD_PATH))
        why = None if found is not None else f"its {kai_versions.CRD_NAME} CRD does not say (not KAI's)"
    except NotFound:
        found, why = None, f"no {kai_versions.CRD_NAME} CRD"
    except ApiError as exc:
        found, why = None, f"cannot read the {kai_versions.CRD_NAME} CRD (HTTP {exc.status} {exc.reason})"
        log.warning("cannot tell the KAI version from the cluster", extra={"fields": {"error": str(exc)}})
    if found is not None:
        version, source = found[0], f"the cluster: {found[1]}"
    else:
        version, source = kai_versions.DEFAULT_VERSION, f"the default: {why}"
    log.info("KAI version whose rules apply", extra={"fields": {"kai_version": version, "why": source}})
    return settings.with_changes(kai_version=version, kai_version_auto=False, kai_version_source=source)


class KindResources:
    """Which resource serves a kind, from API discovery of its group version (``GET
    /apis/<group>/<version>``): how the grouper finds where to read an owner of a kind it
    knows nothing else of. One list per group version, asked again when a kind is not in it
    (a CRD installed since); the caller asks at most once per owner."""

    def __init__(self, api: Api):
        self.api = api
        self._served: dict[str, dict[str, tuple[str, bool]]] = {}  # apiVersion -> kind -> (plural, namespaced)

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool] | None:
        """``(plural, namespaced)`` of ``kind`` in ``api_version``, None when not served there."""
        served = self._served.get(api_version)
        if served is None or kind not in served:
            path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            try:
                document = await self.api.get(path)
            except NotFound:
                document = {}
            served = {r["kind"]: (r["name"], bool(r.get("namespaced")))
                      for r in document.get("resources") or ()
                      if isinstance(r, dict) and isinstance(r.get("name"), str) and "/" not in r["name"]
                      and isinstance(r.get("kind"), str)}
            self._served[api_version] = served
        return served.get(kind)


def object_path(api_version: str, plural: str, namespaced: bool, namespace: str, name: str) -> str:
    """The REST path of one object."""
    base = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    return f"{base}/namespaces/{namespace}/{plural}/{name}" if namespaced else f"{base}/{plural}/{name}"
