"""The emulator's write verbs: create, replace, patch, delete, and the scale and
eviction subresources (PodDisruptionBudgets honoured).
"""

from __future__ import annotations

import math
import random
from typing import Any

import jsonpatch
from aiohttp import web


from tests.emulator.resources import CREATE_STATUS, Obj, ResourceType
from tests.emulator.selectors import ListFilter, label_selector_matches
from tests.emulator.storage import Call, object_key
from tests.emulator.wire import (
    DNS1123_SUBDOMAIN,
    JSON_PATCH_TYPE,
    MERGE_PATCH_TYPES,
    NAME_ALPHABET,
    ApiError,
    InvalidBody,
    bad_request,
    conflict,
    invalid,
    json_response,
    merge_patch,
    metadata_of,
    namespace_terminating,
    status_body,
    status_details,
)


class Writing:
    """The emulator's write verbs: create, replace, patch, delete, and the scale and (a part of :class:`KubeEmulator`)."""

    # ----------------------------------------------------------------- write verbs

    def _body(self, call: Call, required: bool = True) -> Any:
        body = call.record.body
        if isinstance(body, InvalidBody):
            raise bad_request(f"the body of the request could not be decoded: {body.raw[:80]!r}")
        if body is None and required:
            raise bad_request("the request body is empty")
        return body

    def _object_body(self, call: Call) -> Obj:
        body = self._body(call)
        res = call.table.res
        if not isinstance(body, dict):
            raise bad_request(f"the body must be a {res.kind} object")
        if body.get("kind", res.kind) != res.kind:
            raise bad_request(f"the kind in the data ({body['kind']}) does not match the "
                              f"expected kind ({res.kind})")
        if body.get("apiVersion", res.api_version) != res.api_version:
            raise bad_request(f"the API version in the data ({body['apiVersion']}) does not "
                              f"match the expected API version ({res.api_version})")
        body["kind"], body["apiVersion"] = res.kind, res.api_version
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if call.namespace is not None:
            if meta.get("namespace") not in (None, "", call.namespace):
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = call.namespace
        elif not res.namespaced:
            meta.pop("namespace", None)
        return body

    @staticmethod
    def _dry_run(call: Call) -> bool:
        return call.query.get("dryRun") == "All"

    async def _create(self, call: Call) -> web.Response:
        table, res = call.table, call.table.res
        obj = self._object_body(call)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(NAME_ALPHABET, k=5))
        self._validate(res, obj)
        namespace = self._table("namespaces").objects.get(("", meta.get("namespace") or "")) if res.namespaced else None
        if namespace is not None and metadata_of(namespace).get("deletionTimestamp"):
            raise namespace_terminating(res, meta["name"], meta["namespace"])
        if object_key(obj) in table.objects:
            name = meta["name"]
            raise ApiError(status_body(409, f'{res.qualified} "{name}" already exists',
                                       "AlreadyExists", status_details(res, name)))
        self._apply_create_defaults(res, obj)
        self._admit(res, None, obj)
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        self._stamp_new(obj)
        if self._dry_run(call):
            return json_response(obj, 201)
        return json_response(self._insert(table, obj), 201)

    @staticmethod
    def _validate(res: ResourceType, obj: Obj) -> None:
        name = metadata_of(obj).get("name") or ""
        causes = []
        if not name:
            causes.append({"reason": "FieldValueRequired", "field": "metadata.name",
                           "message": "Required value: name or generateName is required"})
        elif len(name) > 253 or not DNS1123_SUBDOMAIN.match(name):
            causes.append({"reason": "FieldValueInvalid", "field": "metadata.name",
                           "message": f'Invalid value: "{name}": a lowercase RFC 1123 '
                           "subdomain must consist of lower case alphanumeric characters, "
                           "'-' or '.', and must start and end with an alphanumeric character"})
        if res.key == ("", "pods") and not (obj.get("spec") or {}).get("containers"):
            causes.append({"reason": "FieldValueRequired", "field": "spec.containers",
                           "message": "Required value"})
        if causes:
            raise invalid(res, name, causes)

    @staticmethod
    def _apply_create_defaults(res: ResourceType, obj: Obj) -> None:
        """The few server-side defaults tests rely on; status is server-owned on create."""
        if res.crd and res.status:
            obj.pop("status", None)
        elif res.status:
            obj["status"] = dict(CREATE_STATUS.get(res.key, {}))
        if res.key == ("", "pods"):
            obj["spec"].setdefault("schedulerName", "default-scheduler")
        if res.scale and isinstance(obj.get("spec"), dict):
            obj["spec"].setdefault("replicas", 1)

    def _check_precondition(self, call: Call, old: Obj, wanted_rv: Any) -> None:
        if wanted_rv not in (None, "") and wanted_rv != metadata_of(old).get("resourceVersion"):
            raise conflict(call.table.res, call.name or "")

    def _commit(self, call: Call, old: Obj, new: Obj) -> web.Response:
        self._check_precondition(call, old, metadata_of(new).get("resourceVersion"))
        if call.sub is None:
            self._admit(call.table.res, old, new)
        if self._dry_run(call):
            return json_response(new)
        return json_response(self._update(call.table, old, new, call.sub))

    async def _replace(self, call: Call) -> web.Response:
        old = self._lookup(call)
        new = self._object_body(call)
        if metadata_of(new).get("name") not in (None, call.name):
            raise bad_request("the name of the object does not match the name on the URL")
        return self._commit(call, old, new)

    def _apply_patch(self, call: Call, target: Obj) -> Obj:
        patch = self._body(call)
        content_type = call.record.content_type
        if content_type in MERGE_PATCH_TYPES:
            if not isinstance(patch, dict):
                raise bad_request("a merge patch must be a JSON object")
            return merge_patch(target, patch)
        if content_type == JSON_PATCH_TYPE:
            if not isinstance(patch, list):
                raise bad_request("a JSON patch must be a JSON array of operations")
            try:
                return jsonpatch.apply_patch(target, patch, in_place=False)
            except jsonpatch.JsonPatchTestFailed as exc:
                raise ApiError(status_body(422, f"the server rejected our request due to an "
                                           f"error in our request: {exc}", "Invalid")) from None
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise bad_request(f"invalid JSON patch: {exc}") from None
        raise ApiError(status_body(
            415, f"the body of the request was in an unknown format - accepted media types "
            f"include: {JSON_PATCH_TYPE}, application/merge-patch+json, "
            "application/strategic-merge-patch+json", "UnsupportedMediaType"))

    async def _patch(self, call: Call) -> web.Response:
        old = self._lookup(call)
        new = self._apply_patch(call, old)
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise bad_request("the patch produced an invalid object")
        return self._commit(call, old, new)

    async def _delete_one(self, call: Call) -> web.Response:
        obj = self._lookup(call)
        options = self._body(call, required=False) or {}
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be an object")
        preconditions = options.get("preconditions") or {}
        for field_name in ("uid", "resourceVersion"):
            wanted = preconditions.get(field_name)
            if wanted and wanted != metadata_of(obj).get(field_name):
                raise ApiError(status_body(
                    409, f"Precondition failed: {field_name} in precondition: {wanted}, "
                    f"{field_name} in object meta: {metadata_of(obj).get(field_name)}", "Conflict",
                    status_details(call.table.res, call.name or "")))
        if self._dry_run(call) or options.get("dryRun") == ["All"]:
            return json_response(obj)
        propagation = call.query.get("propagationPolicy") or options.get(
            "propagationPolicy") or "Background"
        final = self._delete(call.table, obj, propagation)
        return self._deleted_response(call.table.res, final)

    @staticmethod
    def _deleted_response(res: ResourceType, final: Obj) -> web.Response:
        if res.crd or res.key in (("", "pods"), ("", "namespaces")) or metadata_of(final).get(
                "deletionTimestamp"):
            return json_response(final)
        details = status_details(res, metadata_of(final).get("name", ""))
        details["uid"] = metadata_of(final).get("uid")
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": details})

    async def _delete_collection(self, call: Call) -> web.Response:
        table, res = call.table, call.table.res
        flt = ListFilter.from_query(call.namespace, call.query)
        doomed = [obj for _, obj in sorted(table.objects.items()) if flt(obj)]
        deleted = [self._delete(table, obj) for obj in doomed
                   if object_key(obj) in table.objects and not self._dry_run(call)]
        return json_response({"kind": f"{res.kind}List", "apiVersion": res.api_version,
                               "metadata": {"resourceVersion": str(self._rv)},
                               "items": deleted})

    # ----------------------------------------------------------------- scale subresource

    @staticmethod
    def _scale_of(obj: Obj) -> Obj:
        meta = metadata_of(obj)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))},
        }

    async def _get_scale(self, call: Call) -> web.Response:
        return json_response(self._scale_of(self._lookup(call)))

    def _commit_scale(self, call: Call, old: Obj, scale: Any) -> web.Response:
        if not isinstance(scale, dict):
            raise bad_request("the body must be a Scale object")
        self._check_precondition(call, old, metadata_of(scale).get("resourceVersion"))
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid(call.table.res, call.name or "", [{
                "reason": "FieldValueInvalid", "field": "spec.replicas",
                "message": f"Invalid value: {replicas!r}: must be greater than or equal to 0"}])
        new = {**old, "spec": {**(old.get("spec") or {}), "replicas": replicas}}
        updated = old if self._dry_run(call) else self._update(call.table, old, new, "*")
        return json_response(self._scale_of(updated))

    async def _replace_scale(self, call: Call) -> web.Response:
        return self._commit_scale(call, self._lookup(call), self._body(call))

    async def _patch_scale(self, call: Call) -> web.Response:
        old = self._lookup(call)
        return self._commit_scale(call, old, self._apply_patch(call, self._scale_of(old)))

    # ----------------------------------------------------------------- eviction subresource

    async def _evict(self, call: Call) -> web.Response:
        body = self._body(call)
        if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
            raise bad_request("the body must be an Eviction object")
        pod = self._lookup(call)
        if self._refuse_evictions > 0:
            self._refuse_evictions -= 1
            raise self._eviction_refused("Eviction refused by KubeEmulator.refuse_evictions()")
        if not metadata_of(pod).get("deletionTimestamp"):
            self._check_disruption_budgets(pod)
        dry_run = (body.get("deleteOptions") or {}).get("dryRun") == ["All"]
        if not (dry_run or self._dry_run(call)):
            self._delete(call.table, pod)
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "code": 201}, 201)

    @staticmethod
    def _eviction_refused(message: str) -> ApiError:
        return ApiError(status_body(
            429, "Cannot evict pod as it would violate the pod's disruption budget.",
            "TooManyRequests", {"causes": [{"reason": "DisruptionBudget", "message": message}]}))

    def _check_disruption_budgets(self, pod: Obj) -> None:
        namespace = metadata_of(pod).get("namespace")
        labels = metadata_of(pod).get("labels") or {}
        pdbs = [p for (ns, _), p in sorted(self._tables[("policy", "poddisruptionbudgets")]
                                           .objects.items())
                if ns == namespace and label_selector_matches(
                    (p.get("spec") or {}).get("selector"), labels)]
        if len(pdbs) > 1:
            raise ApiError(status_body(500, "This pod has more than one PodDisruptionBudget, "
                                       "which the eviction subresource does not support.",
                                       "InternalError"))
        for pdb in pdbs:
            selector = (pdb.get("spec") or {}).get("selector")
            matching = [p for (ns, _), p in self._tables[("", "pods")].objects.items()
                        if ns == namespace
                        and label_selector_matches(selector, metadata_of(p).get("labels") or {})]
            healthy = sum(1 for p in matching if not metadata_of(p).get("deletionTimestamp"))
            needed = self._pdb_needed(pdb.get("spec") or {}, len(matching))
            if healthy - 1 < needed:
                raise self._eviction_refused(
                    f"The disruption budget {metadata_of(pdb)['name']} needs {needed} healthy pods "
                    f"and has {healthy} currently")

    @staticmethod
    def _pdb_needed(spec: Obj, expected: int) -> int:
        def scaled(value: Any) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return math.ceil(int(value[:-1]) * expected / 100)
            return int(value)

        if spec.get("minAvailable") is not None:
            return scaled(spec["minAvailable"])
        if spec.get("maxUnavailable") is not None:
            return max(0, expected - scaled(spec["maxUnavailable"]))
        return 0
