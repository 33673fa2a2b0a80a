"""JSON GET/POST against the Kubernetes API for the webhook's few calls (owner
look-ups, PodGroup creation), with a timeout on every call.

It goes through kubernetes_asyncio's ApiClient so that every kind of kubeconfig
credential (token, client certificate, exec plugin refresh) works, but skips its
model (de)serialisation: a reply is the status and the decoded JSON body.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client


class ApiUnavailable(Exception):
    """The API server did not answer in time or could not be reached."""


@dataclass(frozen=True)
class ApiReply:
    status: int
    body: Any  # the decoded JSON body; {} when there was none or it was not JSON

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        """The Status message of an error reply (one line), else ''."""
        if isinstance(self.body, dict):
            return str(self.body.get("message") or self.body.get("reason") or "")
        return ""

    def describe(self) -> str:
        return f"HTTP {self.status}: {self.message}" if self.message else f"HTTP {self.status}"


class KubeApi:
    """A thin JSON client over an ``ApiClient``; never raises anything but
    :class:`ApiUnavailable` (a reply with an error status is returned, not raised)."""

    AUTH = ["BearerToken"]

    def __init__(self, api_client: client.ApiClient, timeout: float = 2.0):
        self.api_client = api_client
        self.timeout = timeout

    async def get(self, path: str, *, timeout: float | None = None) -> ApiReply:
        return await self._call("GET", path, None, timeout)

    async def post(self, path: str, body: Any, *, timeout: float | None = None) -> ApiReply:
        return await self._call("POST", path, body, timeout)

    async def _call(self, method: str, path: str, body: Any, timeout: float | None) -> ApiReply:
        limit = self.timeout if timeout is None else timeout
        if limit <= 0:
            raise ApiUnavailable(f"{method} {path}: no time left for the call")
        try:
            async with asyncio.timeout(limit):
                response = await self.api_client.call_api(
                    path,
                    method,
                    header_params={"Accept": "application/json", "Content-Type": "application/json"},
                    body=body,
                    auth_settings=self.AUTH,
                    _preload_content=False,
                    _request_timeout=limit,
                )
                try:
                    data = await response.read()
                finally:
                    response.release()
        except TimeoutError:
            raise ApiUnavailable(f"{method} {path}: no answer within {limit:g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise ApiUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the client's auth hooks (exec plugins) raise anything
            raise ApiUnavailable(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        try:
            decoded = orjson.loads(data) if data else {}
        except orjson.JSONDecodeError:
            decoded = {}
        return ApiReply(response.status, decoded)
