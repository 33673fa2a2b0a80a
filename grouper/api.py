"""Raw JSON calls to the Kubernetes API through a ``kubernetes_asyncio`` ApiClient.

The grouper reads thousands of objects and keeps a few fields of each; building
the generated model classes for every pod would cost more CPU and memory than
everything else together. So it asks the ApiClient (which handles the
configuration: server, TLS, tokens, exec plugins) for the raw response and
parses it with orjson. Every call carries a timeout.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Mapping

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

MERGE_PATCH = "application/merge-patch+json"
READ_BUFFER = 2**21  # what kubernetes_asyncio gives its session: a watch event can be large


def resolve_environment_once(api_client: ApiClient) -> None:
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


def api_error(status: int, reason: str, body: bytes | str | None) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return exc


def error_reason(exc: ApiException) -> str:
    """The Status ``reason`` of an API error (``AlreadyExists``, ``Conflict``, ...)."""
    try:
        return str(orjson.loads(exc.body or b"{}").get("reason") or "")
    except Exception:
        return ""


class RawApi:
    """GET/POST/PATCH/DELETE returning dicts; watch streams returning event dicts."""

    def __init__(self, api_client: ApiClient, timeout: float = 10.0):
        self.api_client = api_client
        self.timeout = timeout

    async def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: Any = None,
    ):
        params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]
        return await self.api_client.call_api(
            path,
            method,
            query_params=params,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout if timeout is not None else self.timeout,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = None,
    ) -> dict[str, Any]:
        resp = await self._call(method, path, query=query, body=body, content_type=content_type, timeout=timeout)
        try:
            data = await resp.read()
            if resp.status >= 400:
                raise api_error(resp.status, resp.reason or "", data)
        finally:
            resp.release()
        return orjson.loads(data) if data else {}

    async def get(self, path: str, **query: Any) -> dict[str, Any]:
        return await self.request("GET", path, query=query)

    async def create(self, path: str, body: Any) -> dict[str, Any]:
        return await self.request("POST", path, body=body)

    async def merge_patch(self, path: str, body: Any) -> dict[str, Any]:
        return await self.request("PATCH", path, body=body, content_type=MERGE_PATCH)

    async def delete(self, path: str, body: Any = None) -> dict[str, Any]:
        return await self.request("DELETE", path, body=body)

    async def watch(self, path: str, *, resource_version: str, timeout_seconds: int,
                    query: Mapping[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        """The events of one watch request (BOOKMARKs included) until the server
        ends it. ``timeout_seconds`` bounds it on the server; the client gives
        up when nothing arrives for ``timeout_seconds + 30`` seconds."""
        params = {
            **(query or {}),
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(int(timeout_seconds)),
        }
        resp = await self._call("GET", path, query=params,
                                timeout=(min(self.timeout, 30.0), float(timeout_seconds) + 30.0))
        try:
            if resp.status >= 400:
                raise api_error(resp.status, resp.reason or "", await resp.read())
            while True:
                line = await resp.content.readline()
                if not line:
                    return
                line = line.strip()
                if line:
                    yield orjson.loads(line)
        finally:
            resp.release()
            resp.close()
