"""Leader election on a ``coordination.k8s.io/v1`` Lease with
``kubernetes_asyncio.leaderelection``: one replica reconciles, the others wait.

Losing the Lease stops reconciling and makes :func:`run_as_leader` return
non-zero, so the pod restarts clean (no half-stopped controller keeps writing).
On a clean shutdown the leader hands the Lease back so a standby takes over at
once instead of after the lease duration.

Fencing, as client-go does it: the library checks the renew deadline only between
tries, and a try may take the whole API timeout, so a leader whose renewals hang could
keep writing after a standby took the Lease. Here a watchdog stops leading when no
renewal succeeded for ``renew_deadline`` seconds (counted from when the last successful
one was sent), which is before ``lease_duration`` lets anyone else take it.

The watchdog is a task, and a task runs only when the event loop gets to it: a leader
paused past its Lease (SIGSTOP, a frozen VM) resumes with writes ready to go before it.
So each term of leadership is a :class:`~podgang.fence.Fence` (:mod:`podgang.fence`) that
``lead()`` is given and hands to every writer; the fence is checked as each write is sent,
by the same deadline on the local monotonic clock, and the term is ended before ``lead()``
is cancelled. Nothing decided or queued under a term is written after it.

The library's LeaseLock makes its API calls without a timeout and lets a dropped
connection crash the elector; the lock here is the same with a timeout on every
call and its errors read by the one parser in :mod:`podgang.api`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import os
import socket
import time
import uuid
from typing import Awaitable, Callable

import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection
from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

from podgang.api import ApiError, NotFound, as_api_error, describe
from podgang.fence import Fence, Leadership

log = logging.getLogger("podgang.grouper.leader")

LOST = 1


def default_identity() -> str:
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class TimedLeaseLock(LeaseLock):
    """LeaseLock with ``_request_timeout`` on every call, and its failures read by
    :mod:`podgang.api` (a dropped connection is a failed try, never a crash)."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: client.ApiClient, timeout: float,
                 leadership: Leadership | None = None):
        super().__init__(name, namespace, identity, api_client)
        self.timeout = timeout
        self.leadership = leadership  # told every renewal that succeeded
        self.renewed_at: float | None = None  # monotonic time a successful create/update was sent

    def _sent(self) -> float:
        return time.monotonic()

    def _renewed(self, sent: float) -> None:
        self.renewed_at = sent
        if self.leadership is not None:
            self.leadership.renewed(sent)

    async def get(self, name, namespace):
        try:
            lease = await self.api_instance.read_namespaced_lease(name, namespace, _request_timeout=self.timeout)
        except Exception as e:  # API errors, timeouts, connections cut by a restarting apiserver
            error = as_api_error(e)
            if not isinstance(error, NotFound):
                log.info("could not read the Lease", extra={"fields": {"lease": name, "error": str(error)}})
            return False, _for_the_elector(error)
        self.lease_reference = lease
        return True, self.election_record(lease)

    async def create(self, name, namespace, election_record):
        body = client.V1Lease(metadata=client.V1ObjectMeta(name=name), spec=self.update_lease(election_record))
        sent = self._sent()
        try:
            await self.api_instance.create_namespaced_lease(namespace, body, _request_timeout=self.timeout)
            self._renewed(sent)
            return True
        except Exception as e:
            log.info("could not create the Lease", extra={"fields": {"lease": name, "error": describe(e)}})
            return False

    async def update(self, name, namespace, updated_record):
        try:
            assert self.lease_reference is not None
            sent = self._sent()
            previous = self.lease_reference.spec
            before = previous.holder_identity if previous is not None else None
            self.lease_reference.spec = self.update_lease(updated_record, previous)
            self.lease_reference.spec.lease_transitions = transitions(self.lease_reference.spec.lease_transitions,
                                                                      before, updated_record.holder_identity)
            await self.api_instance.replace_namespaced_lease(
                name=name, namespace=namespace, body=self.lease_reference, _request_timeout=self.timeout
            )
            self._renewed(sent)
            return True
        except Exception as e:
            log.debug("could not update the Lease", extra={"fields": {"lease": name, "error": describe(e)}})
            return False

    async def release(self) -> None:
        """Give the Lease up if we hold it (a standby takes over at its next try)."""
        try:
            lease = await self.api_instance.read_namespaced_lease(self.name, self.namespace,
                                                                  _request_timeout=self.timeout)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.renew_time = None
            lease.spec.acquire_time = None
            await self.api_instance.replace_namespaced_lease(self.name, self.namespace, lease,
                                                             _request_timeout=self.timeout)
            log.info("released the Lease", extra={"fields": {"lease": f"{self.namespace}/{self.name}"}})
        except Exception as exc:  # best effort: the Lease expires anyway
            log.info("could not release the Lease", extra={"fields": {"error": describe(exc)}})


def transitions(count: int | None, before: str | None, after: str | None) -> int:
    """``spec.leaseTransitions`` after a write of ``after`` over ``before``: one more when the
    Lease changes hands (a released one taken again too), as client-go's elector counts them;
    the library here leaves it unset, and ``kubectl describe lease`` then shows no takeover."""
    count = count or 0
    return count + 1 if after and before != after else count


def _for_the_elector(error: ApiError) -> ApiException:
    """What kubernetes_asyncio's elector expects from a failed read: an ApiException
    whose body is a Status with a ``code`` (it reads the code to tell "no Lease yet")."""
    refusal = ApiException(status=error.status, reason=str(error))
    refusal.body = orjson.dumps({**error.body, "code": error.status}).decode()
    return refusal


async def run_as_leader(
    api_client: client.ApiClient,
    lead: Callable[[Fence], Awaitable[None]],
    *,
    name: str,
    namespace: str,
    identity: str | None = None,
    lease_duration: int = 15,
    renew_deadline: int = 10,
    retry_period: int = 2,
    timeout: float = 5.0,
    on_leading: Callable[[bool], None] | None = None,
    leadership: Leadership | None = None,
) -> int:
    """Wait for the Lease, then run ``lead(fence)`` while holding it: ``fence`` is this term's
    (:mod:`podgang.fence`), for every writer ``lead`` makes; it stops holding at the renew
    deadline after the last renewal, or as the Lease is lost, before ``lead()`` is cancelled.

    Returns 1 when the Lease is lost (``lead()`` is cancelled first) or when
    ``lead()`` ends on its own; raises what ``lead()`` raises. Cancelling this
    coroutine stops ``lead()`` and releases the Lease.
    """
    identity = identity or default_identity()
    leadership = leadership or Leadership(renew_deadline)
    lock = TimedLeaseLock(name, namespace, identity, api_client, timeout, leadership)
    leading = asyncio.Event()

    async def started() -> None:
        leading.set()
        await asyncio.Event().wait()  # parked; the elector cancels it when the Lease is lost

    async def fence() -> None:
        """Return once no renewal succeeded for ``renew_deadline`` seconds."""
        while True:
            now = time.monotonic()
            left = (lock.renewed_at or now) + renew_deadline - now
            if left <= 0:
                log.error("no renewal of the leader Lease within the renew deadline: stopping before it can be "
                          "taken", extra={"fields": {"lease": f"{namespace}/{name}", "identity": identity,
                                                     "renew_deadline_s": renew_deadline}})
                return
            await asyncio.sleep(left)  # then look again: a renewal meanwhile moved the deadline

    async def stopped() -> None:
        log.error("lost the leader Lease: stopping", extra={"fields": {"lease": f"{namespace}/{name}",
                                                                     "identity": identity}})

    config = electionconfig.Config(
        lock, lease_duration=int(lease_duration), renew_deadline=int(renew_deadline),
        retry_period=int(retry_period), onstarted_leading=started, onstopped_leading=stopped,
    )
    log.info("waiting for the leader Lease", extra={"fields": {"lease": f"{namespace}/{name}", "identity": identity}})
    elector = asyncio.create_task(leaderelection.LeaderElection(config).run(), name="leader-election")
    waiter = asyncio.create_task(leading.wait())
    work: asyncio.Task | None = None
    fenced: asyncio.Task | None = None
    try:
        await asyncio.wait([elector, waiter], return_when=asyncio.FIRST_COMPLETED)
        if not leading.is_set():
            elector.result()  # raises if the elector failed
            return LOST
        log.info("became the leader", extra={"fields": {"lease": f"{namespace}/{name}", "identity": identity,
                                                         "at": datetime.datetime.now(datetime.timezone.utc).isoformat()}})
        if on_leading:
            on_leading(True)
        term = leadership.begin(lock.renewed_at)
        work = asyncio.create_task(lead(term), name="leading")
        fenced = asyncio.create_task(fence(), name="leader-fence")
        done, _ = await asyncio.wait([elector, work, fenced], return_when=asyncio.FIRST_COMPLETED)
        if work not in done:
            leadership.end()  # before lead() is cancelled: nothing it had under way is written
        if work in done:
            work.result()  # raises what the controller raised
            log.error("the controller stopped while leading")
            return LOST
        return LOST  # the elector returned or the fence closed: the Lease is lost, or may be
    finally:
        if on_leading:
            on_leading(False)
        tasks = [t for t in (work, fenced, elector, waiter) if t is not None]
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        leadership.end()  # a clean stop: lead() wrote what it had, under its term, before this
        if leading.is_set():
            await lock.release()
