"""An in-process HTTP emulator of the Kubernetes API server, for tests and benchmarks.

It speaks real Kubernetes JSON over real HTTP, so code under test talks to it through
the ordinary ``kubernetes_asyncio`` client (or raw ``aiohttp``) instead of patched
client objects.  Wire formats follow the recordings in ``tests/fixtures/api/``.

Typical use::

    from tests.kube_emulator import KubeEmulator

    async def test_something():
        async with KubeEmulator() as emu:                # binds 127.0.0.1:<free port>
            emu.put({"apiVersion": "v1", "kind": "Pod",   # direct state access, no HTTP
                     "metadata": {"name": "p", "namespace": "ns"},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}})
            async with ApiClient(emu.configuration()) as api:
                pod = await CoreV1Api(api).read_namespaced_pod("p", "ns")
            emu.fail("GET", r"/pods$", 500)                # next matching request -> 500
            await emu.wait_for(lambda: emu.get("pods", "ns", "p") is None)

The suite's ``emu`` fixture (``tests/conftest.py``) is::

    @pytest.fixture
    async def emu():
        async for e in kube_emulator_fixture():
            yield e

What it emulates: discovery (/api, /apis, /version), CRUD on the registered resources
(``DEFAULT_RESOURCES``; optional CRDs can be removed so their endpoints 404), label and
field selectors, limit/continue, global monotonic resourceVersions, 409 on stale
resourceVersions, merge/JSON/strategic(=merge) patches, status and scale subresources,
pod eviction honouring PodDisruptionBudgets, finalizers, ownerReference garbage
collection (synchronous), namespace deletion, and chunked watch streams with history
replay, bookmarks, timeouts and 410 Expired after ``compact()``.

Authorisation, when asked for: ``grant(rules)`` with RBAC rules (``tests/rbac.py``)
answers every request they do not allow with 403 Forbidden, worded as the apiserver
does, and records it in ``forbidden``.

Not emulated: authentication, admission webhooks, server-side apply,
schema validation (only metadata.name and pod spec.containers are checked), historical
reads (a list at an old resourceVersion serves the current state), controllers/kubelet
(nothing reconciles; pods are deleted immediately unless they carry finalizers), and
core/v1 vs events.k8s.io/v1 events are separate stores.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import inspect
import math
import random
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import jsonpatch
import orjson
import yaml
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from tests import rbac

__all__ = [
    "DEFAULT_RESOURCES",
    "OPTIONAL_CRDS",
    "KubeEmulator",
    "RecordedRequest",
    "ResourceType",
    "kube_emulator_fixture",
    "label_selector_matches",
    "parse_label_selector",
]

Obj = dict[str, Any]
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
_CLOSE = object()  # sentinel telling a watch stream to end


# --------------------------------------------------------------------------- resources

@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives, what it is called, which subresources it has."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status: bool = False
    scale: bool = False
    crd: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        return (self.group, self.plural)

    @property
    def qualified(self) -> str:
        """``plural.group`` as used in messages and CRD names (``pods`` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _r(group: str, version: str, plural: str, kind: str, **kw: bool) -> ResourceType:
    return ResourceType(group, version, plural, kind, **kw)


DEFAULT_RESOURCES: tuple[ResourceType, ...] = (
    _r("", "v1", "pods", "Pod", status=True),
    _r("", "v1", "events", "Event"),
    _r("", "v1", "secrets", "Secret"),
    _r("", "v1", "services", "Service", status=True),
    _r("", "v1", "namespaces", "Namespace", namespaced=False, status=True),
    _r("", "v1", "configmaps", "ConfigMap"),
    _r("apps", "v1", "deployments", "Deployment", status=True, scale=True),
    _r("apps", "v1", "replicasets", "ReplicaSet", status=True, scale=True),
    _r("apps", "v1", "statefulsets", "StatefulSet", status=True, scale=True),
    _r("apps", "v1", "daemonsets", "DaemonSet", status=True),
    _r("batch", "v1", "jobs", "Job", status=True),
    _r("batch", "v1", "cronjobs", "CronJob", status=True),
    _r("coordination.k8s.io", "v1", "leases", "Lease"),
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", status=True),
    _r("events.k8s.io", "v1", "events", "Event"),
    _r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
       "MutatingWebhookConfiguration", namespaced=False),
    _r("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
       "ValidatingWebhookConfiguration", namespaced=False),
    _r("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", status=True, crd=True),
    _r("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet",
       status=True, scale=True, crd=True),
    _r("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", status=True, crd=True),
    # Kubeflow's training jobs; MPIJob at training-operator's v1 (mpi-operator's v2beta1 is
    # the same CRD name: a cluster serves one of them)
    *(_r("kubeflow.org", "v1", plural, kind, status=True, crd=True) for plural, kind in (
        ("pytorchjobs", "PyTorchJob"), ("tfjobs", "TFJob"), ("mpijobs", "MPIJob"), ("xgboostjobs", "XGBoostJob"),
        ("jaxjobs", "JAXJob"), ("paddlejobs", "PaddleJob"))),
    *(_r("ray.io", "v1", plural, kind, status=True, crd=True) for plural, kind in (
        ("rayclusters", "RayCluster"), ("rayjobs", "RayJob"), ("rayservices", "RayService"))),
    _r("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", status=True, crd=True),
    _r("sparkoperator.k8s.io", "v1beta2", "sparkapplications", "SparkApplication", status=True, crd=True),
)
OPTIONAL_CRDS = tuple(r.qualified for r in DEFAULT_RESOURCES if r.crd)
# Status the apiserver writes on create (required, non-omitempty fields serialise as 0).
CREATE_STATUS: dict[tuple[str, str], Obj] = {
    ("", "pods"): {"phase": "Pending"},
    ("", "namespaces"): {"phase": "Active"},
    ("", "services"): {"loadBalancer": {}},
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "daemonsets"): {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                             "desiredNumberScheduled": 0, "numberReady": 0},
    ("policy", "poddisruptionbudgets"): {"disruptionsAllowed": 0, "currentHealthy": 0,
                                         "desiredHealthy": 0, "expectedPods": 0},
}


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


def _details(res: ResourceType, name: str, kind: str | None = None) -> Obj:
    details: Obj = {"name": name}
    if res.group:
        details["group"] = res.group
    details["kind"] = kind or res.plural
    return details


def not_found(res: ResourceType, name: str) -> ApiError:
    return ApiError(status_body(404, f'{res.qualified} "{name}" not found', "NotFound",
                                _details(res, name)))


def no_route() -> ApiError:
    return ApiError(status_body(404, "the server could not find the requested resource",
                                "NotFound", {}))


def conflict(res: ResourceType, name: str) -> ApiError:
    msg = (f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been '
           "modified; please apply your changes to the latest version and try again")
    return ApiError(status_body(409, msg, "Conflict", _details(res, name)))


def namespace_terminating(res: ResourceType, name: str, namespace: str) -> ApiError:
    """What a 1.36 apiserver answers a create in a namespace being deleted
    (tests/fixtures/api/403-create-in-terminating-namespace.json)."""
    details = _details(res, name)
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
    details = _details(res, name, kind=res.kind)
    details["causes"] = causes
    return ApiError(status_body(422, f'{label} "{name}" is invalid: {joined}', "Invalid", details))


def expired(message: str = "The resourceVersion for the provided list is too old.") -> ApiError:
    return ApiError(status_body(410, message, "Expired"))


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clone(obj: Any) -> Any:
    return orjson.loads(orjson.dumps(obj))


def _json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None
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


def _truthy(value: str | None) -> bool:
    """Go's strconv.ParseBool, which the apiserver uses for boolean query parameters."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _parse_rv(value: str | None) -> int | None:
    """'' / None / '0' mean "any"; anything else must be an integer string."""
    if value in (None, "", "0"):
        return None
    if not value.isdigit():
        raise bad_request(f"invalid resource version: {value!r}")
    return int(value)


# --------------------------------------------------------------------------- selectors

_SELECTOR_TERM = re.compile(r"""^\s*(?:
      !\s*(?P<absent>[^\s,!=()]+)
    | (?P<skey>[^\s,!=()]+)\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\)
    | (?P<ekey>[^\s,!=()]+)\s*(?P<eqop>==|=|!=)\s*(?P<value>[^\s,!=()]*)
    | (?P<present>[^\s,!=()]+)
    )\s*$""", re.X)

Matcher = Callable[[dict[str, str]], bool]


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` parentheses."""
    terms, depth, current = [], 0, []
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _term_matcher(term: str) -> Matcher:
    m = _SELECTOR_TERM.match(term)
    if not m:
        raise bad_request(f"unable to parse requirement: {term.strip()!r}")
    if m["absent"]:
        key = m["absent"]
        return lambda labels: key not in labels
    if m["present"]:
        key = m["present"]
        return lambda labels: key in labels
    if m["skey"]:
        key, values = m["skey"], {v.strip() for v in m["values"].split(",") if v.strip()}
        if m["setop"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    key, value = m["ekey"], m["value"]
    if m["eqop"] == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value


def parse_label_selector(selector: str | None) -> Matcher:
    """Compile a label selector string (``=,==,!=,in,notin,key,!key``; comma = AND)."""
    matchers = [_term_matcher(t) for t in _split_terms(selector or "")]
    return lambda labels: all(m(labels) for m in matchers)


def label_selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Match a structured ``LabelSelector`` (matchLabels/matchExpressions); null matches none."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {"In": lambda: labels.get(key) in values,
              "NotIn": lambda: labels.get(key) not in values,
              "Exists": lambda: key in labels,
              "DoesNotExist": lambda: key not in labels}.get(op, lambda: False)()
        if not ok:
            return False
    return True


def _field_value(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(selector: str | None) -> Callable[[Obj], bool]:
    """Compile a field selector (``path=v``, ``path==v``, ``path!=v``; comma = AND)."""
    checks = []
    for term in _split_terms(selector or ""):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid field selector: {term!r}")
        path, op, value = m.groups()
        checks.append((path, op == "!=", value))
    return lambda obj: all((_field_value(obj, p) == v) != neg for p, neg, v in checks)


@dataclass
class _Filter:
    """What one list/watch request wants to see."""

    namespace: str | None
    labels: Matcher
    fields: Callable[[Obj], bool]

    @classmethod
    def from_query(cls, namespace: str | None, query: dict[str, str]) -> _Filter:
        return cls(namespace, parse_label_selector(query.get("labelSelector")),
                   parse_field_selector(query.get("fieldSelector")))

    def __call__(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = _meta(obj)
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels(meta.get("labels") or {}) and self.fields(obj)


# --------------------------------------------------------------------------- storage

@dataclass
class _Event:
    rv: int
    type: str
    obj: Obj
    old: Obj | None = None


class _Watcher:
    """One open watch connection; events are queued by the store, written by the handler."""

    def __init__(self, res: ResourceType, flt: _Filter, bookmarks: bool) -> None:
        self.res, self.filter, self.bookmarks = res, flt, bookmarks
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.idle = asyncio.Event()
        self.idle.set()

    def translate(self, ev: _Event) -> tuple[str, Obj] | None:
        """Apply the filter the way the apiserver's watch cache does (objects leaving the
        selection become DELETED, objects entering it become ADDED)."""
        now = self.filter(ev.obj)
        if ev.type != "MODIFIED":
            return (ev.type, ev.obj) if now else None
        before = self.filter(ev.old)
        if now:
            return ("MODIFIED" if before else "ADDED", ev.obj)
        if before:
            old = dict(ev.old or {})
            old["metadata"] = {**_meta(old), "resourceVersion": str(ev.rv)}
            return ("DELETED", old)
        return None

    def offer(self, item: Any) -> None:
        self.queue.put_nowait(item)
        self.idle.clear()


@dataclass
class _Table:
    """Objects, history and watchers of one resource."""

    res: ResourceType
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    history: list[_Event] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    floor: int = 0  # every event with rv > floor is still in history
    watchers: set[_Watcher] = field(default_factory=set)
    # the keys in list order, built by the first list and kept in step after it, so a
    # page is a bisect and a short walk instead of a sort of the whole table
    _order: list[tuple[str, str]] | None = field(default=None, repr=False)

    def set(self, obj: Obj) -> None:
        key = _key(obj)
        if self._order is not None and key not in self.objects:
            bisect.insort(self._order, key)
        self.objects[key] = obj

    def discard(self, key: tuple[str, str]) -> None:
        if self.objects.pop(key, None) is not None and self._order is not None:
            del self._order[bisect.bisect_left(self._order, key)]

    def ordered_keys(self) -> list[tuple[str, str]]:
        if self._order is None:
            self._order = sorted(self.objects)
        return self._order


def _key(obj: Obj) -> tuple[str, str]:
    meta = _meta(obj)
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    content_type: str | None
    body: Any
    headers: dict[str, str]
    at: float = field(default_factory=lambda: asyncio.get_running_loop().time())  # when it arrived


@dataclass
class _Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    remaining: int | None
    body: Obj | None
    headers: dict[str, str] | None


# --------------------------------------------------------------------------- the emulator

class KubeEmulator:
    """See the module docstring."""

    def __init__(self, *, crds: Iterable[str] | None = None,
                 resources: Iterable[ResourceType] = DEFAULT_RESOURCES,
                 host: str = "127.0.0.1", port: int = 0, history_limit: int = 200_000) -> None:
        self.host, self.port, self.history_limit = host, port, history_limit
        self._tables: dict[tuple[str, str], _Table] = {}
        self._routes: dict[tuple[str, str, str], ResourceType] = {}
        self._removed: dict[tuple[str, str], ResourceType] = {}
        self._resolved: dict[tuple[str, str | None], ResourceType] = {}
        resources = tuple(resources)
        for res in resources:
            self.register(res)
        if crds is not None:
            keep = set(crds)
            for res in [r for r in resources if r.crd]:
                if res.qualified not in keep and res.plural not in keep:
                    self.remove_crd(res.qualified)
        self._rv = 0
        self._dependents: dict[str, set[tuple[tuple[str, str], tuple[str, str]]]] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._faults: list[_Fault] = []
        self._delays: list[tuple[re.Pattern[str] | None, float]] = []
        self._refuse_evictions = 0
        self.requests: list[RecordedRequest] = []
        self._grants: tuple[list[rbac.Rule], str] | None = None
        self.forbidden: list[str] = []  # one line per request refused under grant()
        self._runner: web.AppRunner | None = None

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> KubeEmulator:
        if self._runner is not None:
            return self
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0,
                               handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        """Stop serving (state is kept; ``start()`` again reuses the same port)."""
        if self._runner is None:
            return
        self.close_watches()
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def __aenter__(self) -> KubeEmulator:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._runner is not None

    def configuration(self) -> Configuration:
        return Configuration(host=self.url)

    def api_client(self) -> ApiClient:
        """A new kubernetes_asyncio ApiClient pointing here (the caller closes it)."""
        return ApiClient(configuration=self.configuration())

    def write_kubeconfig(self, path: Any, namespace: str = "default") -> str:
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "kube-emulator",
            "clusters": [{"name": "kube-emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "kube-emulator", "user": {"token": "kube-emulator"}}],
            "contexts": [{"name": "kube-emulator", "context": {
                "cluster": "kube-emulator", "user": "kube-emulator", "namespace": namespace}}],
        }
        with open(path, "w", encoding="utf-8") as fh:
            yaml.safe_dump(config, fh)
        return str(path)

    # ----------------------------------------------------------------- resource registry

    def register(self, res: ResourceType) -> None:
        """Add (or re-add) a resource type; its endpoints and discovery entries appear."""
        self._routes[(res.group, res.version, res.plural)] = res
        self._tables.setdefault(res.key, _Table(res))
        self._resolved.clear()
        self._removed.pop(res.key, None)

    def remove_crd(self, name: str) -> None:
        """Uninstall a resource by ``plural.group`` or plural: its objects are deleted,
        open watches end and its endpoints (and discovery) 404."""
        res = self.resource(name)
        table = self._tables.pop(res.key)
        del self._routes[(res.group, res.version, res.plural)]
        self._removed[res.key] = res
        self._resolved.clear()
        for watcher in table.watchers:
            watcher.offer(_CLOSE)

    def add_crd(self, name: str) -> None:
        """Re-install a resource removed with ``remove_crd``."""
        for res in self._removed.values():
            if name in (res.qualified, res.plural):
                self.register(res)
                return
        raise KeyError(name)

    @property
    def resources(self) -> list[ResourceType]:
        return [t.res for t in self._tables.values()]

    def resource(self, kind_or_plural: str, api_version: str | None = None) -> ResourceType:
        """Resolve ``pods``/``Pod``/``pod``/``deployments.apps``/``podgroups.scheduling.run.ai``
        (core wins on ambiguity, e.g. ``events``)."""
        cached = self._resolved.get((kind_or_plural, api_version))
        if cached is not None:
            return cached
        wanted = kind_or_plural.lower()
        group = None if api_version is None else (
            api_version.rsplit("/", 1)[0] if "/" in api_version else "")
        candidates = []
        for table in self._tables.values():
            res = table.res
            names = {res.plural, res.kind.lower(), res.qualified, f"{res.kind.lower()}.{res.group}"}
            if wanted in names and (group is None or res.group == group):
                candidates.append(res)
        if not candidates:
            raise KeyError(f"unknown resource {kind_or_plural!r}")
        res = self._resolved[(kind_or_plural, api_version)] = min(
            candidates, key=lambda r: r.group != "")
        return res

    def _table(self, kind_or_plural: str, api_version: str | None = None) -> _Table:
        return self._tables[self.resource(kind_or_plural, api_version).key]

    # ----------------------------------------------------------------- faults / observation

    def fail(self, method: str, path_regex: str, status: int, times: int | None = 1,
             body: Obj | None = None, headers: dict[str, str] | None = None) -> None:
        """Answer the next ``times`` requests (None = forever) whose method matches (``*`` =
        any) and whose path matches ``path_regex`` (re.search) with ``status``."""
        self._faults.append(_Fault(method.upper(), re.compile(path_regex), status, times,
                                   body, headers))

    def delay(self, seconds: float, path_regex: str | None = None) -> None:
        """Add latency to every matching request (all requests if no regex)."""
        self._delays.append((re.compile(path_regex) if path_regex else None, seconds))

    def refuse_evictions(self, times: int = 1) -> None:
        """Make the next ``times`` evictions answer 429 as if a PDB refused them."""
        self._refuse_evictions += times

    def grant(self, rules: list[rbac.Rule] | None,
              user: str = "system:serviceaccount:podgang:podgang") -> None:
        """From now on, allow only what ``rules`` allow (None: everything again)."""
        self._grants = None if rules is None else (list(rules), user)

    def _authorize(self, method: str, query: dict[str, str], res: ResourceType,
                   namespace: str | None, name: str | None, sub: str | None) -> None:
        if self._grants is None:
            return
        rules, user = self._grants
        if name is None:
            verb = {"GET": "watch" if _truthy(query.get("watch")) else "list", "POST": "create",
                    "DELETE": "deletecollection"}.get(method, method.lower())
        else:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete",
                    "POST": "create"}.get(method, method.lower())
        resource = f"{res.plural}/{sub}" if sub else res.plural
        if rbac.allows(rules, res.group, resource, verb, name=name, namespace=namespace):
            return
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        subject = f'{res.qualified} "{name}"' if name else res.qualified
        message = (f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
                   f'in API group "{res.group}"{where}')
        self.forbidden.append(message)
        details: Obj = {"kind": res.plural}
        if name:
            details["name"] = name
        if res.group:
            details["group"] = res.group
        raise ApiError(status_body(403, message, "Forbidden", details))

    def clear_faults(self) -> None:
        self._faults.clear()
        self._delays.clear()
        self._refuse_evictions = 0

    def count(self, method: str | None = None, path_regex: str | None = None) -> int:
        return len(self.find_requests(method, path_regex))

    def find_requests(self, method: str | None = None, path_regex: str | None = None
                      ) -> list[RecordedRequest]:
        pattern = re.compile(path_regex) if path_regex else None
        return [r for r in self.requests
                if (method is None or r.method == method.upper())
                and (pattern is None or pattern.search(r.path))]

    def clear_requests(self) -> None:
        self.requests.clear()

    # ----------------------------------------------------------------- direct state access

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def put(self, obj: Obj) -> Obj:
        """Create or replace any object (by apiVersion/kind) without HTTP; returns a copy."""
        obj = _clone(obj)
        table = self._table(obj["kind"], obj.get("apiVersion", "v1"))
        meta = obj.setdefault("metadata", {})
        if table.res.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        obj["apiVersion"] = table.res.api_version
        old = table.objects.get(_key(obj))
        if old is None:
            return _clone(self._insert(table, self._stamp_new(obj)))
        for preserved in ("uid", "creationTimestamp"):
            meta.setdefault(preserved, _meta(old).get(preserved))
        meta.pop("resourceVersion", None)
        return _clone(self._update(table, old, obj, subresource="*"))

    def get(self, kind_or_plural: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._table(kind_or_plural).objects.get((namespace or "", name))
        return None if obj is None else _clone(obj)

    def list(self, kind_or_plural: str, namespace: str | None = None,
             label_selector: str | None = None, field_selector: str | None = None) -> list[Obj]:
        table = self._table(kind_or_plural)
        flt = _Filter(namespace, parse_label_selector(label_selector),
                      parse_field_selector(field_selector))
        return [_clone(o) for _, o in sorted(table.objects.items()) if flt(o)]

    def delete(self, kind_or_plural: str, namespace: str | None, name: str,
               propagation: str = "Background") -> Obj | None:
        """Delete like the API would (finalizers, GC); returns the last state or None."""
        table = self._table(kind_or_plural)
        obj = table.objects.get((namespace or "", name))
        if obj is None:
            return None
        return _clone(self._delete(table, obj, propagation))

    def patch_object(self, kind_or_plural: str, namespace: str | None, name: str,
                     patch: Obj) -> Obj:
        """Merge-patch any part of an object (status included); KeyError if absent."""
        table = self._table(kind_or_plural)
        old = table.objects[(namespace or "", name)]
        new = merge_patch(old, _clone(patch))
        return _clone(self._update(table, old, new, subresource="*"))

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0,
                       message: str | None = None) -> Any:
        """Re-check ``predicate`` (sync or async) whenever state changes or a request
        arrives (and at least every 50 ms) until it is truthy; TimeoutError at deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            result = predicate()
            if inspect.isawaitable(result):
                result = await result
            if result:
                return result
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(message or f"condition not met within {timeout}s")
            fut = loop.create_future()
            self._waiters.add(fut)
            try:
                await asyncio.wait([fut], timeout=min(remaining, 0.05))
            finally:
                self._waiters.discard(fut)

    def _notify(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    # ----------------------------------------------------------------- watch hooks

    def compact(self) -> None:
        """Forget all history: lists/watches at any older resourceVersion now get 410."""
        for table in self._tables.values():
            table.history.clear()
            table.history_rvs.clear()
            table.floor = self._rv

    async def send_bookmarks(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every watch that allows them,
        and wait until they were written."""
        watchers = [w for t in self._tables.values() for w in t.watchers if w.bookmarks]
        for watcher in watchers:
            watcher.offer(self._bookmark(watcher.res))
        if watchers:
            tasks = [asyncio.ensure_future(w.idle.wait()) for w in watchers]
            _, pending = await asyncio.wait(tasks, timeout=5)
            for task in pending:
                task.cancel()

    def close_watches(self) -> int:
        """End every open watch stream (clients see EOF and reconnect); returns how many."""
        watchers = [w for t in self._tables.values() for w in t.watchers]
        for watcher in watchers:
            watcher.offer(_CLOSE)
        return len(watchers)

    @property
    def watch_count(self) -> int:
        return sum(len(t.watchers) for t in self._tables.values())

    def _bookmark(self, res: ResourceType, annotations: Obj | None = None) -> tuple[str, Obj]:
        meta: Obj = {"resourceVersion": str(self._rv)}
        if annotations:
            meta["annotations"] = annotations
        return ("BOOKMARK", {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta})

    # ----------------------------------------------------------------- store primitives

    def _stamp_new(self, obj: Obj) -> Obj:
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        meta.setdefault("generation", 1)
        meta.pop("resourceVersion", None)
        return obj

    def _emit(self, table: _Table, ev: _Event) -> None:
        table.history.append(ev)
        table.history_rvs.append(ev.rv)
        if len(table.history) > self.history_limit:
            drop = len(table.history) // 2
            table.floor = table.history_rvs[drop - 1]
            del table.history[:drop], table.history_rvs[:drop]
        for watcher in table.watchers:
            item = watcher.translate(ev)
            if item is not None:
                watcher.offer(item)
        self._notify()

    def _index_owners(self, table: _Table, obj: Obj, add: bool) -> None:
        ref = (table.res.key, _key(obj))
        for owner in _meta(obj).get("ownerReferences") or []:
            uid = owner.get("uid")
            if not uid:
                continue
            if add:
                self._dependents.setdefault(uid, set()).add(ref)
            elif uid in self._dependents:
                self._dependents[uid].discard(ref)
                if not self._dependents[uid]:
                    del self._dependents[uid]

    def _store(self, table: _Table, obj: Obj, old: Obj | None) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        if old is not None:
            self._index_owners(table, old, add=False)
        table.set(obj)
        self._index_owners(table, obj, add=True)
        self._emit(table, _Event(self._rv, "MODIFIED" if old else "ADDED", obj, old))
        return obj

    def _insert(self, table: _Table, obj: Obj) -> Obj:
        return self._store(table, obj, None)

    def _update(self, table: _Table, old: Obj, new: Obj, subresource: str | None) -> Obj:
        """Commit ``new`` over ``old``: keep identity fields, apply subresource rules, bump
        generation on spec change, skip no-ops, finish deletion once finalizers are gone."""
        new = dict(new)
        meta = new["metadata"] = dict(new.get("metadata") or {})
        old_meta = _meta(old)
        for k in ("name", "namespace", "uid", "creationTimestamp"):
            if k in old_meta:
                meta[k] = old_meta[k]
        for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            if subresource != "*":
                meta.pop(k, None)
                if k in old_meta:
                    meta[k] = old_meta[k]
        new["kind"], new["apiVersion"] = old.get("kind"), old.get("apiVersion")
        if subresource == "status":
            new = {**old, "status": new.get("status")}
            if new["status"] is None:
                del new["status"]
            meta = new["metadata"] = dict(old_meta)
        elif subresource is None and table.res.status:
            new.pop("status", None)
            if "status" in old:
                new["status"] = old["status"]
        meta["generation"] = old_meta.get("generation", 1)
        if subresource != "status" and new.get("spec") != old.get("spec"):
            meta["generation"] += 1
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        if new == old:
            return old
        if subresource != "*" and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._remove(table, new)  # the last finalizer was removed
        return self._store(table, new, old)

    def _remove(self, table: _Table, obj: Obj) -> Obj:
        self._rv += 1
        final = {**obj, "metadata": {**_meta(obj), "resourceVersion": str(self._rv)}}
        table.discard(_key(obj))
        self._index_owners(table, obj, add=False)
        self._emit(table, _Event(self._rv, "DELETED", final))
        self._collect_garbage(_meta(obj).get("uid"))
        if table.res.key == ("", "namespaces"):
            self._purge_namespace(_meta(obj)["name"])
        return final

    def _delete(self, table: _Table, obj: Obj, propagation: str = "Background") -> Obj:
        if propagation == "Orphan":
            self._orphan_dependents(_meta(obj).get("uid"))
        if _meta(obj).get("finalizers"):
            if _meta(obj).get("deletionTimestamp"):
                return obj
            new = {**obj, "metadata": {**_meta(obj), "deletionTimestamp": _now(),
                                       "deletionGracePeriodSeconds": 0}}
            return self._update(table, obj, new, subresource="*")
        return self._remove(table, obj)

    def _collect_garbage(self, uid: str | None) -> None:
        for res_key, key in sorted(self._dependents.pop(uid or "", set())):
            table = self._tables.get(res_key)
            dependent = table.objects.get(key) if table else None
            if dependent is not None:
                self._delete(table, dependent)

    def _orphan_dependents(self, uid: str | None) -> None:
        for res_key, key in sorted(self._dependents.pop(uid or "", set())):
            table = self._tables.get(res_key)
            dependent = table.objects.get(key) if table else None
            if dependent is None:
                continue
            refs = [r for r in _meta(dependent).get("ownerReferences", []) if r.get("uid") != uid]
            new = {**dependent, "metadata": {**_meta(dependent), "ownerReferences": refs}}
            if not refs:
                new["metadata"].pop("ownerReferences")
            self._update(table, dependent, new, subresource="*")

    def _purge_namespace(self, namespace: str) -> None:
        for table in list(self._tables.values()):
            if table.res.namespaced:
                for key in sorted(k for k in table.objects if k[0] == namespace):
                    if key in table.objects:  # GC may already have taken it
                        self._delete(table, table.objects[key])

    # ----------------------------------------------------------------- HTTP entry point

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            record = await self._record(request)
            await self._apply_delays(request.path)
            fault = self._take_fault(request.method, request.path)
            if fault is not None:
                return self._fault_response(fault)
            return await self._dispatch(request, record)
        except ApiError as err:
            return _json_response(err.status, err.status["code"], err.headers)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:  # never crash: report like the apiserver would
            return _json_response(status_body(500, f"kube-emulator: {exc!r}", "InternalError"),
                                  500)

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read() if request.can_read_body else b""
        content_type = request.headers.get("Content-Type")
        body: Any = None
        if raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = _InvalidBody(raw)
        record = RecordedRequest(
            request.method, request.path, dict(request.query),
            content_type.split(";")[0].strip().lower() if content_type else None,
            body, dict(request.headers))
        self.requests.append(record)
        self._notify()
        return record

    async def _apply_delays(self, path: str) -> None:
        total = sum(s for pattern, s in self._delays if pattern is None or pattern.search(path))
        if total > 0:
            await asyncio.sleep(total)

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.method in ("*", method) and fault.pattern.search(path):
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    @staticmethod
    def _fault_response(fault: _Fault) -> web.Response:
        body = fault.body if fault.body is not None else status_body(
            fault.status, f"kube-emulator: injected {fault.status}")
        return _json_response(body, fault.status, fault.headers)

    async def _dispatch(self, request: web.Request, record: RecordedRequest
                        ) -> web.StreamResponse:
        segs = [s for s in request.path.split("/") if s]
        if not segs:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/version"]})
        if segs[0] in ("healthz", "livez", "readyz") and len(segs) == 1:
            return web.Response(text="ok")
        if segs == ["version"]:
            return _json_response(K8S_VERSION)
        if segs[0] == "api" and len(segs) >= 2 and segs[1] == "v1":
            group, version, rest = "", "v1", segs[2:]
        elif segs == ["api"]:
            return _json_response(self._api_versions())
        elif segs[0] == "apis" and len(segs) >= 3:
            group, version, rest = segs[1], segs[2], segs[3:]
        elif segs[0] == "apis":
            return _json_response(self._api_groups(segs[1] if len(segs) == 2 else None))
        else:
            raise no_route()
        if not rest:
            return _json_response(self._resource_list(group, version))
        res, namespace, name, sub = self._route(group, version, rest)
        return await self._verb(request, record, res, namespace, name, sub)

    def _route(self, group: str, version: str, rest: list[str]
               ) -> tuple[ResourceType, str | None, str | None, str | None]:
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self._routes.get((group, version, rest[2]))
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        res = self._routes.get((group, version, rest[0]))
        if res is None or len(rest) > 3:
            raise no_route()
        if res.namespaced and namespace is None and len(rest) > 1:
            raise no_route()
        return res, namespace, (rest[1] if len(rest) > 1 else None), (
            rest[2] if len(rest) > 2 else None)

    async def _verb(self, request: web.Request, record: RecordedRequest, res: ResourceType,
                    namespace: str | None, name: str | None, sub: str | None
                    ) -> web.StreamResponse:
        method, query = request.method, record.query
        self._authorize(method, query, res, namespace, name, sub)
        table = self._tables[res.key]
        if name is None:
            if method == "GET" and _truthy(query.get("watch")):
                return await self._watch(request, table, namespace, query)
            handler = {"GET": self._list, "POST": self._create,
                       "DELETE": self._delete_collection}.get(method)
        elif sub is None:
            handler = {"GET": self._get, "PUT": self._replace, "PATCH": self._patch,
                       "DELETE": self._delete_one}.get(method)
        elif sub == "status" and res.status:
            handler = {"GET": self._get, "PUT": self._replace, "PATCH": self._patch}.get(method)
        elif sub == "scale" and res.scale:
            handler = {"GET": self._get_scale, "PUT": self._replace_scale,
                       "PATCH": self._patch_scale}.get(method)
        elif sub == "eviction" and res.key == ("", "pods"):
            handler = {"POST": self._evict}.get(method)
        else:
            raise no_route()
        if handler is None:
            raise ApiError(status_body(
                405, "the server does not allow this method on the requested resource",
                "MethodNotAllowed", {}))
        if method == "POST" and name is None and res.namespaced and namespace is None:
            raise ApiError(status_body(405, "the server does not allow this method on the "
                                       "requested resource", "MethodNotAllowed", {}))
        return await handler(_Call(table, namespace, name, sub, query, record))

    # ----------------------------------------------------------------- discovery

    def _api_versions(self) -> Obj:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": f"{self.host}:{self.port}"}]}

    def _group_info(self, group: str) -> Obj:
        versions = sorted({t.res.version for t in self._tables.values() if t.res.group == group})
        gv = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gv, "preferredVersion": gv[0]}

    def _api_groups(self, only: str | None) -> Obj:
        groups = sorted({t.res.group for t in self._tables.values() if t.res.group})
        if only is not None:
            if only not in groups:
                raise no_route()
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group_info(only)}
        return {"kind": "APIGroupList", "apiVersion": "v1",
                "groups": [self._group_info(g) for g in groups]}

    def _resource_list(self, group: str, version: str) -> Obj:
        found = [t.res for t in self._tables.values()
                 if t.res.group == group and t.res.version == version]
        if not found:
            raise no_route()
        entries = []
        for res in found:
            base = {"name": res.plural, "singularName": res.kind.lower(),
                    "namespaced": res.namespaced, "kind": res.kind}
            entries.append({**base, "verbs": ALL_VERBS})
            sub_verbs = ["get", "patch", "update"]
            if res.status:
                entries.append({**base, "name": f"{res.plural}/status", "singularName": "",
                                "verbs": sub_verbs})
            if res.scale:
                entries.append({**base, "name": f"{res.plural}/scale", "singularName": "",
                                "group": "autoscaling", "version": "v1", "kind": "Scale",
                                "verbs": sub_verbs})
            if res.key == ("", "pods"):
                entries.append({**base, "name": "pods/eviction", "singularName": "",
                                "group": "policy", "version": "v1", "kind": "Eviction",
                                "verbs": ["create"]})
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": entries}

    # ----------------------------------------------------------------- read verbs

    def _lookup(self, call: _Call) -> Obj:
        obj = call.table.objects.get((call.namespace or "", call.name or ""))
        if obj is None:
            raise not_found(call.table.res, call.name or "")
        return obj

    async def _get(self, call: _Call) -> web.Response:
        return _json_response(self._lookup(call))

    def _check_list_rv(self, table: _Table, query: dict[str, str]) -> None:
        rv = _parse_rv(query.get("resourceVersion"))
        if rv is not None and rv < table.floor:
            raise expired()

    async def _list(self, call: _Call) -> web.Response:
        """One page in key order: a bisect to where the page starts, then a walk over
        that page only, so paging through a whole table is linear in its size."""
        table, query, namespace = call.table, call.query, call.namespace
        self._check_list_rv(table, query)
        flt = _Filter.from_query(namespace, query)
        list_rv, start = self._decode_continue(table, query.get("continue"))
        keys = table.ordered_keys()
        end = len(keys) if namespace is None else bisect.bisect_right(
            keys, namespace, key=lambda k: k[0])
        if start is not None:
            first = bisect.bisect_right(keys, start, hi=end)
        elif namespace is not None:
            first = bisect.bisect_left(keys, namespace, hi=end, key=lambda k: k[0])
        else:
            first = 0
        limit = int(query.get("limit") or 0)
        selected: list[Obj] = []
        meta: Obj = {"resourceVersion": str(list_rv or self._rv)}
        for index in range(first, end):
            obj = table.objects[keys[index]]
            if not flt(obj):
                continue
            if len(selected) == limit > 0:  # a page is full and more follow
                meta["continue"] = self._encode_continue(list_rv or self._rv, _key(selected[-1]))
                if not (query.get("labelSelector") or query.get("fieldSelector")):
                    # like the apiserver: known only when nothing is filtered out
                    meta["remainingItemCount"] = end - index
                break
            selected.append(obj)
        res = table.res
        return _json_response({"kind": f"{res.kind}List", "apiVersion": res.api_version,
                               "metadata": meta, "items": selected})

    @staticmethod
    def _encode_continue(rv: int, key: tuple[str, str]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()

    def _decode_continue(self, table: _Table, token: str | None
                         ) -> tuple[int | None, tuple[str, str] | None]:
        if not token:
            return None, None
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except Exception:
            raise bad_request("continue key is not valid") from None
        if rv < table.floor:
            raise expired("The provided continue parameter is too old to display a consistent "
                          "list result. You can start a new list without the continue "
                          "parameter.")
        return rv, start

    # ----------------------------------------------------------------- watch

    async def _watch(self, request: web.Request, table: _Table, namespace: str | None,
                     query: dict[str, str]) -> web.StreamResponse:
        flt = _Filter.from_query(namespace, query)
        watcher = _Watcher(table.res, flt, _truthy(query.get("allowWatchBookmarks")))
        initial = self._initial_watch_events(table, watcher, query)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        if initial is None:  # expired: one ERROR event, then the stream ends
            rv = query.get("resourceVersion")
            error = status_body(410, f"too old resource version: {rv} ({table.floor + 1})",
                                "Expired")
            await resp.prepare(request)
            await resp.write(orjson.dumps({"type": "ERROR", "object": error}) + b"\n")
            await resp.write_eof()
            return resp
        for item in initial:  # registered before any await: no event can slip through
            watcher.offer(item)
        table.watchers.add(watcher)
        try:
            await resp.prepare(request)
            await self._pump(resp, watcher, query.get("timeoutSeconds"))
        except ConnectionError:
            pass
        finally:
            table.watchers.discard(watcher)
            watcher.idle.set()
        try:
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    def _initial_watch_events(self, table: _Table, watcher: _Watcher, query: dict[str, str]
                              ) -> list[tuple[str, Obj]] | None:
        rv = _parse_rv(query.get("resourceVersion"))
        send_initial = _truthy(query.get("sendInitialEvents"))
        if rv is None or send_initial:
            items: list[tuple[str, Obj]] = [("ADDED", o) for o in map(
                table.objects.__getitem__, table.ordered_keys()) if watcher.filter(o)]
            if send_initial and watcher.bookmarks:
                items.append(self._bookmark(table.res, {"k8s.io/initial-events-end": "true"}))
            return items
        if rv < table.floor:
            return None
        start = bisect.bisect_right(table.history_rvs, rv)
        translated = (watcher.translate(ev) for ev in table.history[start:])
        return [item for item in translated if item is not None]

    @staticmethod
    async def _pump(resp: web.StreamResponse, watcher: _Watcher, timeout: str | None) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(timeout) if timeout else None
        while True:
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return
            try:
                item = await asyncio.wait_for(watcher.queue.get(), remaining)
            except TimeoutError:
                return
            chunk: list[bytes] = []
            while item is not _CLOSE:
                chunk.append(orjson.dumps({"type": item[0], "object": item[1]}) + b"\n")
                if watcher.queue.empty() or len(chunk) >= 2000:
                    break
                item = watcher.queue.get_nowait()
            if chunk:
                await resp.write(b"".join(chunk))
            if watcher.queue.empty():
                watcher.idle.set()
            if item is _CLOSE:
                return

    # ----------------------------------------------------------------- write verbs

    def _body(self, call: _Call, required: bool = True) -> Any:
        body = call.record.body
        if isinstance(body, _InvalidBody):
            raise bad_request(f"the body of the request could not be decoded: {body.raw[:80]!r}")
        if body is None and required:
            raise bad_request("the request body is empty")
        return body

    def _object_body(self, call: _Call) -> Obj:
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
    def _dry_run(call: _Call) -> bool:
        return call.query.get("dryRun") == "All"

    async def _create(self, call: _Call) -> web.Response:
        table, res = call.table, call.table.res
        obj = self._object_body(call)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(NAME_ALPHABET, k=5))
        self._validate(res, obj)
        namespace = self._table("namespaces").objects.get(("", meta.get("namespace") or "")) if res.namespaced else None
        if namespace is not None and _meta(namespace).get("deletionTimestamp"):
            raise namespace_terminating(res, meta["name"], meta["namespace"])
        if _key(obj) in table.objects:
            name = meta["name"]
            raise ApiError(status_body(409, f'{res.qualified} "{name}" already exists',
                                       "AlreadyExists", _details(res, name)))
        self._apply_create_defaults(res, obj)
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(k, None)
        self._stamp_new(obj)
        if self._dry_run(call):
            return _json_response(obj, 201)
        return _json_response(self._insert(table, obj), 201)

    @staticmethod
    def _validate(res: ResourceType, obj: Obj) -> None:
        name = _meta(obj).get("name") or ""
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

    def _check_precondition(self, call: _Call, old: Obj, wanted_rv: Any) -> None:
        if wanted_rv not in (None, "") and wanted_rv != _meta(old).get("resourceVersion"):
            raise conflict(call.table.res, call.name or "")

    def _commit(self, call: _Call, old: Obj, new: Obj) -> web.Response:
        self._check_precondition(call, old, _meta(new).get("resourceVersion"))
        if self._dry_run(call):
            return _json_response(new)
        return _json_response(self._update(call.table, old, new, call.sub))

    async def _replace(self, call: _Call) -> web.Response:
        old = self._lookup(call)
        new = self._object_body(call)
        if _meta(new).get("name") not in (None, call.name):
            raise bad_request("the name of the object does not match the name on the URL")
        return self._commit(call, old, new)

    def _apply_patch(self, call: _Call, target: Obj) -> Obj:
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

    async def _patch(self, call: _Call) -> web.Response:
        old = self._lookup(call)
        new = self._apply_patch(call, old)
        if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
            raise bad_request("the patch produced an invalid object")
        return self._commit(call, old, new)

    async def _delete_one(self, call: _Call) -> web.Response:
        obj = self._lookup(call)
        options = self._body(call, required=False) or {}
        if not isinstance(options, dict):
            raise bad_request("DeleteOptions must be an object")
        preconditions = options.get("preconditions") or {}
        for field_name in ("uid", "resourceVersion"):
            wanted = preconditions.get(field_name)
            if wanted and wanted != _meta(obj).get(field_name):
                raise ApiError(status_body(
                    409, f"Precondition failed: {field_name} in precondition: {wanted}, "
                    f"{field_name} in object meta: {_meta(obj).get(field_name)}", "Conflict",
                    _details(call.table.res, call.name or "")))
        if self._dry_run(call) or options.get("dryRun") == ["All"]:
            return _json_response(obj)
        propagation = call.query.get("propagationPolicy") or options.get(
            "propagationPolicy") or "Background"
        final = self._delete(call.table, obj, propagation)
        return self._deleted_response(call.table.res, final)

    @staticmethod
    def _deleted_response(res: ResourceType, final: Obj) -> web.Response:
        if res.crd or res.key in (("", "pods"), ("", "namespaces")) or _meta(final).get(
                "deletionTimestamp"):
            return _json_response(final)
        details = _details(res, _meta(final).get("name", ""))
        details["uid"] = _meta(final).get("uid")
        return _json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "details": details})

    async def _delete_collection(self, call: _Call) -> web.Response:
        table, res = call.table, call.table.res
        flt = _Filter.from_query(call.namespace, call.query)
        doomed = [obj for _, obj in sorted(table.objects.items()) if flt(obj)]
        deleted = [self._delete(table, obj) for obj in doomed
                   if _key(obj) in table.objects and not self._dry_run(call)]
        return _json_response({"kind": f"{res.kind}List", "apiVersion": res.api_version,
                               "metadata": {"resourceVersion": str(self._rv)},
                               "items": deleted})

    # ----------------------------------------------------------------- scale subresource

    @staticmethod
    def _scale_of(obj: Obj) -> Obj:
        meta = _meta(obj)
        selector = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 1)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": ",".join(f"{k}={v}" for k, v in sorted(selector.items()))},
        }

    async def _get_scale(self, call: _Call) -> web.Response:
        return _json_response(self._scale_of(self._lookup(call)))

    def _commit_scale(self, call: _Call, old: Obj, scale: Any) -> web.Response:
        if not isinstance(scale, dict):
            raise bad_request("the body must be a Scale object")
        self._check_precondition(call, old, _meta(scale).get("resourceVersion"))
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid(call.table.res, call.name or "", [{
                "reason": "FieldValueInvalid", "field": "spec.replicas",
                "message": f"Invalid value: {replicas!r}: must be greater than or equal to 0"}])
        new = {**old, "spec": {**(old.get("spec") or {}), "replicas": replicas}}
        updated = old if self._dry_run(call) else self._update(call.table, old, new, "*")
        return _json_response(self._scale_of(updated))

    async def _replace_scale(self, call: _Call) -> web.Response:
        return self._commit_scale(call, self._lookup(call), self._body(call))

    async def _patch_scale(self, call: _Call) -> web.Response:
        old = self._lookup(call)
        return self._commit_scale(call, old, self._apply_patch(call, self._scale_of(old)))

    # ----------------------------------------------------------------- eviction subresource

    async def _evict(self, call: _Call) -> web.Response:
        body = self._body(call)
        if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
            raise bad_request("the body must be an Eviction object")
        pod = self._lookup(call)
        if self._refuse_evictions > 0:
            self._refuse_evictions -= 1
            raise self._eviction_refused("Eviction refused by KubeEmulator.refuse_evictions()")
        if not _meta(pod).get("deletionTimestamp"):
            self._check_disruption_budgets(pod)
        dry_run = (body.get("deleteOptions") or {}).get("dryRun") == ["All"]
        if not (dry_run or self._dry_run(call)):
            self._delete(call.table, pod)
        return _json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success", "code": 201}, 201)

    @staticmethod
    def _eviction_refused(message: str) -> ApiError:
        return ApiError(status_body(
            429, "Cannot evict pod as it would violate the pod's disruption budget.",
            "TooManyRequests", {"causes": [{"reason": "DisruptionBudget", "message": message}]}))

    def _check_disruption_budgets(self, pod: Obj) -> None:
        namespace = _meta(pod).get("namespace")
        labels = _meta(pod).get("labels") or {}
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
                        and label_selector_matches(selector, _meta(p).get("labels") or {})]
            healthy = sum(1 for p in matching if not _meta(p).get("deletionTimestamp"))
            needed = self._pdb_needed(pdb.get("spec") or {}, len(matching))
            if healthy - 1 < needed:
                raise self._eviction_refused(
                    f"The disruption budget {_meta(pdb)['name']} needs {needed} healthy pods "
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


@dataclass
class _InvalidBody:
    raw: bytes


@dataclass
class _Call:
    """Everything a verb handler needs about the request it serves."""

    table: _Table
    namespace: str | None
    name: str | None
    sub: str | None
    query: dict[str, str]
    record: RecordedRequest


async def kube_emulator_fixture(**kwargs: Any) -> AsyncIterator[KubeEmulator]:
    """Async-generator fixture body: ``async for emu in kube_emulator_fixture(): yield emu``."""
    emu = KubeEmulator(**kwargs)
    await emu.start()
    try:
        yield emu
    finally:
        await emu.stop()
