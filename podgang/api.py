"""The one way podgang talks to the Kubernetes API: raw JSON calls with a timeout on
every call, errors as exception classes, one parser of the API's ``Status`` bodies,
and one factory for the client.

It rides on kubernetes_asyncio's ``ApiClient`` (its aiohttp session and every kind of
kubeconfig credential: token, client certificate, exec plugin refresh) but skips the
generated models: the grouper reads thousands of objects and keeps a few fields of
each, and the webhook answers within the apiserver's few seconds. kubernetes_asyncio
traps this module closes: there is no default client timeout (every call here has
one); ``patch_*`` sends a dict as JSON-patch unless told otherwise (a PATCH here is a
merge patch unless the caller asks for a JSON patch); a watch without
``timeoutSeconds`` can hang on a dead connection and hide a 410 (every watch here has
one, and hands BOOKMARKs to the caller, who must move its resourceVersion on); a
write without ``?fieldManager=`` is recorded in ``metadata.managedFields`` under the
client's User-Agent (``OpenAPI-Generator``), a name nobody recognises as podgang's
(an ``Api`` given ``field_manager`` sends it with every create, update and patch).

An ``Api`` given a :class:`RateLimit` waits for it before every call and every watch it
opens, as client-go's QPS and burst do: a grouper catching up on thousands of pods must
not take the apiserver from the controllers beside it.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

if TYPE_CHECKING:
    from podgang.fence import Fence

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
#: an object's metadata alone (``PartialObjectMetadata``), whatever its kind; plain JSON where not offered
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
WRITES = ("POST", "PUT", "PATCH")  # the methods the apiserver records a field manager for
CHANGES = (*WRITES, "DELETE")  # the methods a fence is checked for
MAX_MESSAGE = 1024  # a Status message quoted in a log line, an event or an error


# ---------------------------------------------------------------- errors


class ApiError(Exception):
    """A call the API refused or could not answer.

    ``status``: the HTTP status (0: no answer at all); ``reason``: the Status reason
    (``NotFound``, ``AlreadyExists``, ``Conflict`` …, else the HTTP reason phrase);
    ``message``: the Status message (one line); ``body``: the parsed Status ({} when
    the answer was not one). ``str()`` is one line for logs and events.
    """

    def __init__(self, status: int, reason: str = "", message: str = "", body: Mapping[str, Any] | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] = body or {}
        super().__init__(self.describe())

    @property
    def causes(self) -> list[str]:
        """The messages of ``details.causes`` (a PDB's refusal, each invalid field)."""
        details = self.body.get("details")
        if not isinstance(details, Mapping):
            return []
        return [
            _one_line(c.get("message"))
            for c in details.get("causes") or ()
            if isinstance(c, Mapping) and c.get("message")
        ]

    def names(self, name: str) -> bool:
        """Whether the Status is about the object ``name`` (a 404 for the object, not
        "the server could not find the requested resource": a CRD not installed)."""
        details = self.body.get("details")
        return isinstance(details, Mapping) and details.get("name") == name

    def describe(self) -> str:
        if not self.status:
            return self.message or self.reason or "the API server did not answer"
        text = f"HTTP {self.status} {self.reason}".strip()
        if self.message:
            text += f": {self.message}"
        extra = [c for c in self.causes if c not in self.message]
        if extra:
            text += (" " if self.message.endswith(".") else ": ") + "; ".join(extra)
        return text


class NotFound(ApiError):
    """404: the object (or the resource) does not exist."""


class Conflict(ApiError):
    """409: a stale resourceVersion or a failed precondition."""


class AlreadyExists(Conflict):
    """409 AlreadyExists: a create found the name taken."""


class Gone(ApiError):
    """410: the resourceVersion expired; list again."""


class Unauthorized(ApiError):
    """401: the credentials were rejected."""


class Forbidden(ApiError):
    """403: RBAC does not allow the call."""


class NamespaceTerminating(Forbidden):
    """403 with the ``NamespaceTerminating`` cause: the namespace is being deleted, and
    nothing new can be made in it (changes and deletes still work)."""


class Invalid(ApiError):
    """422: the object (or the patch) was refused as invalid."""


class TooManyRequests(ApiError):
    """429: throttled, or an eviction a PodDisruptionBudget refuses."""


class Unavailable(ApiError):
    """No answer: a timeout, a connection failure, or the server saying it cannot
    serve now (502, 503, 504). Worth retrying."""


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 422: Invalid,
    429: TooManyRequests, 502: Unavailable, 503: Unavailable, 504: Unavailable,
}


def _one_line(text: Any) -> str:
    return " ".join(str(text or "").split())[:MAX_MESSAGE]


def _cause_reasons(status: Mapping[str, Any]) -> set[str]:
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return {c.get("reason") for c in causes if isinstance(c, Mapping)} if isinstance(causes, list) else set()


def parse_status(status: int, body: bytes | str | Mapping[str, Any] | None, http_reason: str = "") -> ApiError:
    """The error for an answer with HTTP ``status`` and ``body`` (a Status, or
    anything else a proxy may send): the one parser of the API's errors."""
    parsed: Any = body
    if isinstance(body, (bytes, str)):
        try:
            parsed = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            parsed = None
    if isinstance(parsed, Mapping):
        code = parsed.get("code") if isinstance(parsed.get("code"), int) else status
        reason = str(parsed.get("reason") or http_reason or "")
        cls = AlreadyExists if code == 409 and reason == "AlreadyExists" else _BY_STATUS.get(code, ApiError)
        if cls is Forbidden and "NamespaceTerminating" in _cause_reasons(parsed):
            cls = NamespaceTerminating
        return cls(code, reason, _one_line(parsed.get("message")), parsed)
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    return _BY_STATUS.get(status, ApiError)(status, http_reason, _one_line(text)[:200], {})


def as_api_error(exc: BaseException) -> ApiError:
    """The error a failed call of kubernetes_asyncio's typed client (the leader
    election keeps it) stands for: its ``ApiException`` through the same parser,
    anything else (a timeout, a dropped connection) :class:`Unavailable`."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ApiException) and exc.status:
        return parse_status(exc.status, exc.body, str(exc.reason or ""))
    if isinstance(exc, ApiException):
        return Unavailable(0, "", _one_line(exc.reason))
    return Unavailable(0, "", describe(exc))


def describe(exc: BaseException) -> str:
    """One line about any failure, for logs and events."""
    if isinstance(exc, (ApiError, ApiException)):
        return str(as_api_error(exc))
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def format_seconds(seconds: float) -> str:
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:g}s"


# ---------------------------------------------------------------- calls


class RateLimit:
    """A token bucket shared by the calls of one process, client-go's: ``qps`` calls a
    second on average, ``burst`` at once after a quiet spell. Each caller reserves its
    token when it asks (first come, first served) and waits until the token is due.
    ``qps`` <= 0: no limit. ``on_wait``: told every wait, in seconds (a metric)."""

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic,
                 on_wait: Callable[[float], None] | None = None):
        self.qps = float(qps)
        self.burst = max(1, int(burst))
        self.clock = clock
        self.on_wait = on_wait
        self._tokens = float(self.burst)
        self._at = clock()

    @property
    def limited(self) -> bool:
        return self.qps > 0

    def reserve(self) -> float:
        """Take one token; the seconds until it is due (0: now)."""
        if not self.limited:
            return 0.0
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0:
            if self.on_wait is not None:
                self.on_wait(delay)
            await asyncio.sleep(delay)


class Api:
    """GET/POST/PUT/PATCH/DELETE returning the decoded JSON, and watch streams.

    Raises :class:`ApiError` subclasses only (a timeout, a dropped connection and
    a failing credential plugin are :class:`Unavailable`). ``timeout``: seconds
    per call, unless a call says otherwise. ``field_manager``: the name every POST,
    PUT and PATCH is recorded under in the object's ``metadata.managedFields``
    (``Settings.grouper_field_manager``, ``webhook_field_manager``), so that podgang's
    own writes can be told from another writer's; None: the apiserver's default.
    ``limit``: waited for before every call and every watch (the wait is not part of
    the call's timeout); None: no limit. ``on_call``: told the method of every call.
    ``fence``: checked just before every create, update, patch and delete is sent (after the
    rate limit's wait), so that a process that stopped leading writes nothing
    (:mod:`podgang.fence`: it raises ``Fenced``); None: every write is sent.
    """

    def __init__(self, api_client: client.ApiClient, timeout: float = 10.0, field_manager: str | None = None,
                 *, limit: RateLimit | None = None, on_call: Callable[[str], None] | None = None,
                 fence: "Fence | None" = None):
        self.api_client = api_client
        self.timeout = timeout
        self.field_manager = field_manager
        self.limit = limit
        self.on_call = on_call
        self.fence = fence

    async def _wait_turn(self, method: str) -> None:
        if self.limit is not None:
            await self.limit.wait()
        if self.on_call is not None:
            self.on_call(method)

    async def _send(self, method: str, path: str, query: Mapping[str, Any] | None, body: Any,
                    content_type: str, request_timeout: Any, accept: str = JSON):
        params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        return await self.api_client.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": accept, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=request_timeout,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        timeout: float | None = None,
        accept: str = JSON,
    ) -> Any:
        """One call; the decoded JSON answer ({} when empty). A PATCH is a merge
        patch unless ``content_type`` says otherwise; ``accept``: what the answer may be."""
        limit = self.timeout if timeout is None else timeout
        if limit <= 0:
            raise Unavailable(0, "", "no time left for the call")
        await self._wait_turn(method)
        if self.fence is not None and method in CHANGES:
            self.fence.check()  # at the moment it is sent: the wait above may have outlasted the term
        kind = content_type or (MERGE_PATCH if method == "PATCH" else JSON)
        if self.field_manager and method in WRITES:
            query = {**(query or {}), "fieldManager": self.field_manager}
        try:
            async with asyncio.timeout(limit):
                response = await self._send(method, path, query, body, kind, limit, accept)
                try:
                    data = await response.read()
                finally:
                    response.release()
        except TimeoutError:
            raise Unavailable(0, "", f"no answer within {format_seconds(limit)}") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # connection failures, and the credential hooks raise anything
            raise Unavailable(0, "", describe(exc)) from None
        if response.status >= 400:
            raise parse_status(response.status, data, response.reason or "")
        try:
            return orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            raise ApiError(response.status, "", f"the answer to {method} {path} is not JSON") from None

    async def get(self, path: str, *, timeout: float | None = None, **query: Any) -> Any:
        return await self.request("GET", path, query=query, timeout=timeout)

    async def get_metadata(self, path: str, *, timeout: float | None = None) -> Any:
        """An object's metadata alone (a ``PartialObjectMetadata``): what a metadata-only
        grant (get on the resource) lets one read of a kind one knows nothing else of."""
        return await self.request("GET", path, timeout=timeout, accept=METADATA_ONLY)

    async def create(self, path: str, body: Any, *, timeout: float | None = None) -> Any:
        return await self.request("POST", path, body=body, timeout=timeout)

    async def replace(self, path: str, body: Any, *, timeout: float | None = None) -> Any:
        return await self.request("PUT", path, body=body, timeout=timeout)

    async def merge_patch(self, path: str, body: Any, *, timeout: float | None = None) -> Any:
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH, timeout=timeout)

    async def json_patch(self, path: str, ops: list[Any], *, timeout: float | None = None) -> Any:
        return await self.request("PATCH", path, body=ops, content_type=JSON_PATCH, timeout=timeout)

    async def delete(self, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        return await self.request("DELETE", path, body=body, timeout=timeout)

    async def watch(self, path: str, *, resource_version: str, timeout_seconds: int,
                    query: Mapping[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request, BOOKMARKs included, until the server ends
        it after ``timeout_seconds``; the client gives up when nothing arrives for
        ``timeout_seconds + 30`` s. An ERROR event is raised as its error (410:
        :class:`Gone`)."""
        params = {
            **(query or {}),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(int(timeout_seconds)),
        }
        limits = (min(self.timeout, 30.0), float(timeout_seconds) + 30.0)
        await self._wait_turn("WATCH")
        try:
            response = await self._send("GET", path, params, None, JSON, limits)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise Unavailable(0, "", describe(exc)) from None
        try:
            if response.status >= 400:
                raise parse_status(response.status, await response.read(), response.reason or "")
            while True:
                line = await response.content.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    raise Unavailable(0, "", f"the watch of {path} sent a line that is not JSON") from None
                if event.get("type") == "ERROR":
                    obj = event.get("object") if isinstance(event.get("object"), Mapping) else {}
                    raise parse_status(int(obj.get("code") or 500), obj)
                yield event
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise Unavailable(0, "", f"the watch of {path} broke off: {describe(exc)}") from None
        finally:
            response.release()
            response.close()


# ---------------------------------------------------------------- the client


READ_BUFFER = 2**21  # what kubernetes_asyncio gives its session: a watch event can be large


def resolve_environment_once(api_client: client.ApiClient) -> None:
    """Stop the client's HTTP session from reading the environment on every request.

    kubernetes_asyncio opens its aiohttp session with ``trust_env=True``, so every
    request looks up the proxy variables and ``~/.netrc`` in a worker thread: two thread
    hops and file checks per call, about 12% of the grouper's CPU while it creates
    10,000 PodGroups. The proxy (``HTTPS_PROXY``/``HTTP_PROXY`` with ``NO_PROXY``) is
    resolved here once instead; a proxy set in the configuration still wins. ``.netrc``
    is dropped: the client sends its own credentials.
    """
    rest = api_client.rest_client
    session = rest.pool_manager
    if not session.trust_env:
        return
    if not rest.proxy:
        try:
            proxy, auth = get_env_proxy_for_url(URL(api_client.configuration.host))
        except LookupError:
            pass
        else:
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    connector = session.connector
    session.detach()  # the new session takes the connector (and its TLS settings) over
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False, read_bufsize=READ_BUFFER)


def kubeconfig_files(kubeconfig: str | None = None) -> tuple[str, str]:
    """The kubeconfig files kubectl would read: ``kubeconfig`` if given, else
    ``$KUBECONFIG`` (a list, as kubectl reads it; empty is unset), else
    ``~/.kube/config`` — joined as the loader takes them, and where they came from."""
    if kubeconfig:
        return kubeconfig, "--kubeconfig"
    listed = os.environ.get("KUBECONFIG") or ""
    if any(listed.split(os.pathsep)):
        return listed, "$KUBECONFIG"
    return os.path.join("~", ".kube", "config"), "the default; KUBECONFIG is not set"


def existing_kubeconfig(kubeconfig: str | None = None) -> str | None:
    """The kubeconfig files of :func:`kubeconfig_files` that exist, or None (then the
    loader would only complain in a log line of its own and fail)."""
    found = [p for p in kubeconfig_files(kubeconfig)[0].split(os.pathsep) if p and os.path.exists(os.path.expanduser(p))]
    return os.pathsep.join(found) or None


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(IN_CLUSTER_TOKEN)


def _no_kubeconfig(kubeconfig: str | None, context: str | None) -> str:
    """One line: which kubeconfig files were looked for, and what to pass."""
    files, origin = kubeconfig_files(kubeconfig)
    shown = ", ".join(os.path.expanduser(p) for p in files.split(os.pathsep) if p)
    tried = f"no kubeconfig file at {shown} ({origin})"
    if not (kubeconfig or context):
        tried += " and no in-cluster config (not running in a pod)"
    return (f"cannot configure Kubernetes API access: {tried}; pass --kubeconfig PATH, "
            f"set KUBECONFIG, or run inside a pod with a service account")


async def make_api_client(kubeconfig: str | None = None, *, connections: int | None = None,
                          context: str | None = None) -> client.ApiClient:
    """An API client from ``kubeconfig`` if given, else in-cluster config when
    running in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``. ``connections``:
    at least this many pooled connections (one per watch, plus writes).
    ``context``: that kubeconfig context instead of the current one (never in-cluster).

    Raises RuntimeError with one line saying what was tried and what to do when none
    of them works (the loader is not asked to read files that are not there: it would
    log lines of its own before that).
    """
    configuration = client.Configuration()
    use_in_cluster = not (kubeconfig or context) and in_cluster()
    files = None if use_in_cluster else existing_kubeconfig(kubeconfig)
    if not use_in_cluster and files is None:
        raise RuntimeError(_no_kubeconfig(kubeconfig, context))
    try:
        if use_in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            await config.load_kube_config(config_file=files, context=context, client_configuration=configuration)
    except Exception as exc:  # the loaders raise several unrelated types
        where = "in-cluster config" if use_in_cluster else files
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RuntimeError(
            f"cannot configure Kubernetes API access from {where}: {first}; "
            f"pass --kubeconfig PATH or run inside a pod with a service account"
        ) from exc
    if connections and configuration.connection_pool_maxsize < connections:
        configuration.connection_pool_maxsize = connections
    api_client = client.ApiClient(configuration=configuration)
    resolve_environment_once(api_client)
    return api_client
