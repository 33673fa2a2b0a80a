"""Faults, delays and authorisation a test asks for, and the requests it inspects.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable


from tests.emulator import rbac

from tests.emulator.resources import Obj, ResourceType
from tests.emulator.storage import Fault, RecordedRequest
from tests.emulator.wire import ApiError, metadata_of, status_body, truthy


class Gate:
    """Requests held by :meth:`Faults.hold` go on once it is released."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    def release(self) -> None:
        self.opened.set()


class Faults:
    """Faults, delays and authorisation a test asks for, and the requests it inspects. (a part of :class:`KubeEmulator`)."""

    # ----------------------------------------------------------------- faults / observation

    def fail(self, method: str, path_regex: str, status: int, times: int | None = 1,
             body: Obj | None = None, headers: dict[str, str] | None = None) -> None:
        """Answer the next ``times`` requests (None = forever) whose method matches (``*`` =
        any) and whose path matches ``path_regex`` (re.search) with ``status``."""
        self._faults.append(Fault(method.upper(), re.compile(path_regex), status, times,
                                   body, headers))

    def delay(self, seconds: float, path_regex: str | None = None) -> None:
        """Add latency to every matching request (all requests if no regex)."""
        self._delays.append((re.compile(path_regex) if path_regex else None, seconds))

    def hold(self, path_regex: str) -> "Gate":
        """Keep every request whose path matches waiting until the gate is released
        (a look-up under way for as long as the test needs, with no clock in it)."""
        gate = Gate()
        self._holds.append((re.compile(path_regex), gate.opened))
        return gate

    def refuse_evictions(self, times: int = 1) -> None:
        """Make the next ``times`` evictions answer 429 as if a PDB refused them."""
        self._refuse_evictions += times

    def admit(self, resource: str, check: Callable[[Obj | None, Obj], str | None],
              webhook: str = "validate.podgroups.example") -> None:
        """Play a validating admission webhook on every create and update of ``resource``
        (``plural.group``; not its status): ``check(old, new)`` (old None on create) returns the
        webhook's denial, answered as the apiserver answers one (403 Forbidden, ``admission
        webhook "<webhook>" denied the request: <denial>``, as controller-runtime denies), or None."""
        self._admission.append((self.resource(resource).qualified, webhook, check))

    def _admit(self, res: ResourceType, old: Obj | None, new: Obj) -> None:
        for resource, webhook, check in self._admission:
            denial = check(old, new) if resource == res.qualified else None
            if denial:
                name = metadata_of(new).get("name") or ""
                self.denied.append(denial)
                raise ApiError(status_body(403, f'admission webhook "{webhook}" denied the request: {denial}',
                                           "Forbidden", {"name": name, "group": res.group, "kind": res.plural}))

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
            verb = {"GET": "watch" if truthy(query.get("watch")) else "list", "POST": "create",
                    "DELETE": "deletecollection"}.get(method, method.lower())
            # as the apiserver's request info does: a list or watch of metadata.name=X alone is about X
            selector = query.get("fieldSelector") or ""
            if verb in ("list", "watch") and selector.startswith("metadata.name=") and "," not in selector:
                name = selector.split("=", 1)[1]
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
        for _, opened in self._holds:
            opened.set()
        self._holds.clear()
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
