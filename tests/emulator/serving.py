"""The emulator's HTTP side: routing, discovery, the read verbs and watch streams.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
from typing import Any

import orjson
from aiohttp import web


from tests.emulator.resources import Obj, ResourceType
from tests.emulator.selectors import ListFilter
from tests.emulator.storage import Call, Fault, RecordedRequest, Table, Watcher, object_key
from tests.emulator.wire import (
    ALL_VERBS,
    CLOSE_STREAM,
    K8S_VERSION,
    ApiError,
    InvalidBody,
    bad_request,
    expired,
    json_response,
    no_route,
    not_found,
    parse_resource_version,
    status_body,
    truthy,
)


class Serving:
    """The emulator's HTTP side: routing, discovery, the read verbs and watch streams. (a part of :class:`KubeEmulator`)."""

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
            return json_response(err.status, err.status["code"], err.headers)
        except (asyncio.CancelledError, ConnectionError):
            raise
        except Exception as exc:  # never crash: report like the apiserver would
            return json_response(status_body(500, f"kube-emulator: {exc!r}", "InternalError"),
                                  500)

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read() if request.can_read_body else b""
        content_type = request.headers.get("Content-Type")
        body: Any = None
        if raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = InvalidBody(raw)
        record = RecordedRequest(
            request.method, request.path, dict(request.query),
            content_type.split(";")[0].strip().lower() if content_type else None,
            body, dict(request.headers))
        self.requests.append(record)
        self._notify()
        return record

    async def _apply_delays(self, path: str) -> None:
        for pattern, opened in list(self._holds):
            if pattern.search(path):
                await opened.wait()
        total = sum(s for pattern, s in self._delays if pattern is None or pattern.search(path))
        if total > 0:
            await asyncio.sleep(total)

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.method in ("*", method) and fault.pattern.search(path):
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    @staticmethod
    def _fault_response(fault: Fault) -> web.Response:
        body = fault.body if fault.body is not None else status_body(
            fault.status, f"kube-emulator: injected {fault.status}")
        return json_response(body, fault.status, fault.headers)

    async def _dispatch(self, request: web.Request, record: RecordedRequest
                        ) -> web.StreamResponse:
        segs = [s for s in request.path.split("/") if s]
        if not segs:
            return json_response({"paths": ["/api", "/api/v1", "/apis", "/version"]})
        if segs[0] in ("healthz", "livez", "readyz") and len(segs) == 1:
            return web.Response(text="ok")
        if segs == ["version"]:
            return json_response(K8S_VERSION)
        if segs[0] == "api" and len(segs) >= 2 and segs[1] == "v1":
            group, version, rest = "", "v1", segs[2:]
        elif segs == ["api"]:
            return json_response(self._api_versions())
        elif segs[0] == "apis" and len(segs) >= 3:
            group, version, rest = segs[1], segs[2], segs[3:]
        elif segs[0] == "apis":
            return json_response(self._api_groups(segs[1] if len(segs) == 2 else None))
        else:
            raise no_route()
        if not rest:
            return json_response(self._resource_list(group, version))
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
            if method == "GET" and truthy(query.get("watch")):
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
        return await handler(Call(table, namespace, name, sub, query, record))

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

    def _lookup(self, call: Call) -> Obj:
        obj = call.table.objects.get((call.namespace or "", call.name or ""))
        if obj is None:
            raise not_found(call.table.res, call.name or "")
        return obj

    async def _get(self, call: Call) -> web.Response:
        obj = self._lookup(call)
        accept = next((v for k, v in call.record.headers.items() if k.lower() == "accept"), "")
        if "as=PartialObjectMetadata" in accept:  # the metadata alone, as the apiserver serves it
            return json_response({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                                  "metadata": obj.get("metadata") or {}})
        return json_response(obj)

    def _check_list_rv(self, table: Table, query: dict[str, str]) -> None:
        rv = parse_resource_version(query.get("resourceVersion"))
        if rv is not None and rv < table.floor:
            raise expired()

    async def _list(self, call: Call) -> web.Response:
        """One page in key order: a bisect to where the page starts, then a walk over
        that page only, so paging through a whole table is linear in its size."""
        table, query, namespace = call.table, call.query, call.namespace
        self._check_list_rv(table, query)
        flt = ListFilter.from_query(namespace, query)
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
                meta["continue"] = self._encode_continue(list_rv or self._rv, object_key(selected[-1]))
                if not (query.get("labelSelector") or query.get("fieldSelector")):
                    # like the apiserver: known only when nothing is filtered out
                    meta["remainingItemCount"] = end - index
                break
            selected.append(obj)
        res = table.res
        return json_response({"kind": f"{res.kind}List", "apiVersion": res.api_version,
                               "metadata": meta, "items": selected})

    @staticmethod
    def _encode_continue(rv: int, key: tuple[str, str]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()

    def _decode_continue(self, table: Table, token: str | None
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

    async def _watch(self, request: web.Request, table: Table, namespace: str | None,
                     query: dict[str, str]) -> web.StreamResponse:
        flt = ListFilter.from_query(namespace, query)
        watcher = Watcher(table.res, flt, truthy(query.get("allowWatchBookmarks")))
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

    def _initial_watch_events(self, table: Table, watcher: Watcher, query: dict[str, str]
                              ) -> list[tuple[str, Obj]] | None:
        rv = parse_resource_version(query.get("resourceVersion"))
        send_initial = truthy(query.get("sendInitialEvents"))
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
    async def _pump(resp: web.StreamResponse, watcher: Watcher, timeout: str | None) -> None:
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
            while item is not CLOSE_STREAM:
                chunk.append(orjson.dumps({"type": item[0], "object": item[1]}) + b"\n")
                if watcher.queue.empty() or len(chunk) >= 2000:
                    break
                item = watcher.queue.get_nowait()
            if chunk:
                await resp.write(b"".join(chunk))
            if watcher.queue.empty():
                watcher.idle.set()
            if item is CLOSE_STREAM:
                return
