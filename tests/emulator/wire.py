"""How the emulator speaks: the apiserver's constants, Status bodies and errors, and
small helpers on objects (merge patch, cloning, metadata).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import orjson
from aiohttp import web


from tests.emulator.resources import Obj, ResourceType


ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
K8S_VERSION = {
    "major": "1", "minor": "36", "gitVersion": "v1.36.0", "gitCommit": "kube-emulator",
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25",
    "compiler": "gc", "platform": "linux/amd64",
}
REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType",
    422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
    504: "Timeout",
}
MERGE_PATCH_TYPES = {"application/merge-patch+json", "application/strategic-merge-patch+json"}
JSON_PATCH_TYPE = "application/json-patch+json"
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what the apiserver uses for generateName
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CLOSE_STREAM = object()  # sentinel telling a watch stream to end

# --------------------------------------------------------------------------- small helpers

class ApiError(Exception):
    """Raised inside handlers; rendered as a ``Status`` response with ``code``."""

    def __init__(self, status: Obj, headers: dict[str, str] | None = None) -> None:
        super().__init__(status.get("message", ""))
        self.status = status
        self.headers = headers


def status_body(code: int, message: str, reason: str | None = None,
                details: Obj | None = None) -> Obj:
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                 "status": "Success" if code < 400 else "Failure", "message": message,
                 "reason": reason or REASONS.get(code, "Unknown")}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def status_details(res: ResourceType, name: str, kind: str | None = None) -> Obj:
    details: Obj = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = kind or res.plural
    return details


def not_found(res: ResourceType, name: str) -> ApiError:
    return ApiError(status_body(404, f'{res.qualified} "{name}" not found', "NotFound",
                                status_details(res, name)))


def no_route() -> ApiError:
    return ApiError(status_body(404, "the server could not find the requested resource",
                                "NotFound", {}))


def conflict(res: ResourceType, name: str) -> ApiError:
    msg = (f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
           "modified; please apply your changes to the latest version and try again")
    return ApiError(status_body(409, msg, "Conflict", status_details(res, name)))


def namespace_terminating(res: ResourceType, name: str, namespace: str) -> ApiError:
    """What a 1.36 apiserver answers a create in a namespace being deleted
    (tests/fixtures/api/403-create-in-terminating-namespace.json)."""
    details = status_details(res, name)
    details["causes"] = [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being terminated",
                          "field": "metadata.namespace"}]
    return ApiError(status_body(403, f'{res.qualified} "{name}" is forbidden: unable to create new content in '
                                     f"namespace {namespace} because it is being terminated", "Forbidden", details))


def bad_request(message: str) -> ApiError:
    return ApiError(status_body(400, message, "BadRequest"))


def invalid(res: ResourceType, name: str, causes: list[Obj]) -> ApiError:
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    joined = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    label = f"{res.kind}.{res.group}" if res.group else res.kind
    details = status_details(res, name, kind=res.kind)
    details["causes"] = causes
    return ApiError(status_body(422, f'{label} "{name}" is invalid: {joined}', "Invalid", details))


def expired(message: str = "The resourceVersion for the provided list is too old.") -> ApiError:
    return ApiError(status_body(410, message, "Expired"))


def rfc3339_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def cloned(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None
                   ) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, headers=headers,
                        content_type="application/json")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, never mutates ``target``."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def truthy(value: str | None) -> bool:
    """Go's strconv.ParseBool, which the apiserver uses for boolean query parameters."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def metadata_of(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def parse_resource_version(value: str | None) -> int | None:
    """'' / None / '0' mean "any"; anything else must be an integer string."""
    if value in (None, "", "0"):
        return None
    if not value.isdigit():
        raise bad_request(f"invalid resource version: {value!r}")
    return int(value)

@dataclass
class InvalidBody:
    raw: bytes
