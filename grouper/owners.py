"""Owners the grouper has no watch for, read for their metadata alone.

KAI's grouper reads a gang's settings from its top owner first, whatever its kind (its
queue, priority, preemptibility, topology, labels, annotations). The grouper watches only
the kinds podgang knows; an owner of any other kind (a Tekton TaskRun, an Argo Workflow, a
CRD of the user's own) — or of a known kind whose CRD is not served — is read once, when a
gang of its pods is reconciled: its REST resource from API discovery, then a GET of the object
as ``PartialObjectMetadata`` (its metadata only), kept in the cache (``Cache.remember_owner``)
until its last pod is gone. Where that read is refused (RBAC: 403), the object is gone (404) or
no resource serves the kind, the grouper says so once per owner: a Warning event
``OwnerNotRead`` on the gang's PodGroup (``podgang status --explain`` shows the group's events),
and the group takes those settings from the pod and the defaults, as KAI does when it may
not read an owner. The chart's ``grouper.readOwners`` grants the read.
"""

from __future__ import annotations

import logging

from podgang import rules
from podgang.api import Forbidden, NotFound, Unauthorized
from podgang.discovery import KindResources, object_path
from podgang.objects import POD, OwnerRef

from podgang.gang import Obj

log = logging.getLogger("podgang.grouper")

OWNER_NOT_READ = "OwnerNotRead"  # the Warning event's reason


class OwnerReads:
    """Reads of owners the grouper does not watch (part of :class:`~podgang.grouper.controller.Controller`)."""

    _kind_resources: KindResources | None = None

    def _owner_reads_init(self) -> None:
        self._kind_resources = KindResources(self.api)
        #: owners that could not be read, by uid: (the owner, why) — until their pods are gone
        self.owners_unread: dict[str, tuple[OwnerRef, str]] = {}

    async def _read_owners(self, key: str) -> list[str]:
        """Read the owners of the gang's pods that the cache does not hold and no watch brings;
        the uids of those that cannot be read."""
        unread: list[str] = []
        firsts: set[str] = set()
        for pod in self.cache.members(key):
            first = rules.controller_ref(pod)
            if first is None or not first.uid or first.uid in firsts:
                continue  # the pods of one owner share their walk above it
            firsts.add(first.uid)
            namespace = (pod.get("metadata") or {}).get("namespace") or ""
            obj: Obj = pod
            for _ in range(16):
                ref = rules.controller_ref(obj)
                if ref is None or not ref.uid or ref.kind == POD.kind:
                    break
                found = self.cache.owner_object(ref.uid)
                if found is not None and found.get("kind") == ref.kind:
                    obj = found
                    continue
                if ref.kind in self.cache.watched_kinds:
                    break  # its watch brings it
                if ref.uid in self.owners_unread:
                    unread.append(ref.uid)
                    break
                read = await self._read_owner(ref, namespace)
                if read is None:
                    unread.append(ref.uid)
                    break
                obj = read
        return unread

    async def _read_owner(self, ref: OwnerRef, namespace: str) -> Obj | None:
        """The owner's metadata, read and cached; None (and why, remembered) when it cannot be
        read. Other failures (a timeout, a 5xx) raise: the gang's reconcile is retried."""
        assert self._kind_resources is not None
        why = None
        try:
            served = await self._kind_resources.resource(ref.api_version, ref.kind)
            if served is None:
                why = f"the API serves no kind {ref.kind} in {ref.api_version}"
            else:
                plural, namespaced = served
                raw = await self.api.get_metadata(object_path(ref.api_version, plural, namespaced, namespace, ref.name))
                if (raw.get("metadata") or {}).get("uid") != ref.uid:
                    why = "it is gone (an object of that name with another uid is there)"
                else:
                    slim = self.cache.remember_owner({**raw, "apiVersion": ref.api_version, "kind": ref.kind})
                    log.debug("owner read for its metadata", extra={"fields": {
                        "owner": f"{ref.kind}/{ref.name}", "namespace": namespace}})
                    return slim
        except (Forbidden, Unauthorized) as exc:
            why = f"the grouper may not read it (HTTP {exc.status}: {exc.message or exc.reason})"
        except NotFound:
            why = "it does not exist (deleted, or not yet visible)"
        self.owners_unread[ref.uid] = (ref, why)
        log.warning("cannot read an owner: its metadata is not used", extra={"fields": {
            "owner": f"{ref.kind}/{ref.name}", "api_version": ref.api_version, "namespace": namespace,
            "why": why}})
        return None

    def _say_unread(self, key: str, unread: list[str], actual: Obj | None) -> None:
        """One Warning event per owner that could not be read, on the gang's PodGroup once it exists."""
        if actual is None:
            return
        for uid in dict.fromkeys(unread):
            ref, why = self.owners_unread.get(uid, (None, ""))
            if ref is None:
                continue
            message = owner_not_read_message(ref, why)
            self._warn_once(("owner", uid), (message,), [actual], OWNER_NOT_READ)

    def _forget_owner(self, uid: str) -> None:
        """The last pod of an owner is gone: read it afresh if it makes pods again."""
        self.cache.owners_read.pop(uid, None)
        if self.owners_unread.pop(uid, None) is not None:
            self._warned.pop(("owner", uid), None)


def owner_not_read_message(ref: OwnerRef, why: str) -> str:
    kind = ref.kind
    return (f"podgang cannot read {kind.lower()}/{ref.name} ({ref.api_version}), an owner of these pods: {why}. "
            f"Its labels and annotations (queue, priority, preemptibility, topology, node pool) are not read: "
            f"the group takes them from the pod and the defaults. Grant the grouper get on it "
            f"(chart value grouper.readOwners)")
