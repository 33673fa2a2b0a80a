"""podgang.api: the one Status parser against the recorded answers of a real 1.36
apiserver, and the one call layer against the HTTP API emulator (timeouts, merge
patches, watches with bookmarks and 410, transport failures)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection import electionconfig, leaderelection

from podgang.api import (
    AlreadyExists,
    Api,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NamespaceTerminating,
    NotFound,
    RateLimit,
    TooManyRequests,
    Unavailable,
    as_api_error,
    describe,
    make_api_client,
    parse_status,
)
from podgang.grouper.leader import TimedLeaseLock
from podgang.kinds import POD
from tests.emulator import KubeEmulator
from tests.paths import TESTS

FIXTURES = TESTS / "fixtures" / "api"
NS = "team-a"
IMMUTABLE = ('PodGroup.scheduling.k8s.io "native-gang" is invalid: spec.schedulingPolicy: '
             "Invalid value: null: field is immutable")
PDB = ("Cannot evict pod as it would violate the pod's disruption budget. "
       "The disruption budget gang needs 3 healthy pods and has 3 currently")


@pytest.mark.parametrize(
    ("fixture", "cls", "status", "reason", "text"),
    [
        ("404-get-pod.json", NotFound, 404, "NotFound", 'HTTP 404 NotFound: pods "nope" not found'),
        ("409-create-exists.json", AlreadyExists, 409, "AlreadyExists",
         'HTTP 409 AlreadyExists: pods "app-server" already exists'),
        ("409-update-conflict.json", Conflict, 409, "Conflict",
         'HTTP 409 Conflict: Operation cannot be fulfilled on podgroups.scheduling.k8s.io "native-gang": the object '
         "has been modified; please apply your changes to the latest version and try again"),
        ("410-list-expired.json", Gone, 410, "Expired",
         "HTTP 410 Expired: The resourceVersion for the provided list is too old."),
        ("403-create-in-terminating-namespace.json", NamespaceTerminating, 403, "Forbidden",
         'HTTP 403 Forbidden: configmaps "x" is forbidden: unable to create new content in namespace doomed because '
         "it is being terminated: namespace doomed is being terminated"),
        ("422-native-podgroup-mincount-immutable.json", Invalid, 422, "Invalid", f"HTTP 422 Invalid: {IMMUTABLE}"),
        ("429-eviction-blocked-by-pdb.json", TooManyRequests, 429, "TooManyRequests", f"HTTP 429 TooManyRequests: {PDB}"),
    ],
)
def test_the_parser_reads_every_recorded_status(fixture, cls, status, reason, text):
    body = (FIXTURES / fixture).read_bytes()
    for given in (body, body.decode(), json.loads(body)):  # as read from the wire, or from a watch event
        error = parse_status(status, given, "Some Phrase")
        assert type(error) is cls and isinstance(error, ApiError)
        assert (error.status, error.reason, str(error)) == (status, reason, text)
        assert error.body == json.loads(body)
        assert "\n" not in str(error)


def test_the_parser_keeps_what_an_invalid_status_says_once():
    error = parse_status(422, (FIXTURES / "422-invalid.json").read_bytes())
    assert isinstance(error, Invalid) and error.names("Bad_Name")
    assert error.message.startswith('Pod "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"')
    assert len(error.causes) == 2
    assert str(error) == f"HTTP 422 Invalid: {error.message}"  # the causes are in the message already


def test_a_404_names_its_object_unless_the_resource_is_not_served():
    assert parse_status(404, (FIXTURES / "404-get-pod.json").read_bytes()).names("nope")
    no_crd = {"kind": "Status", "code": 404, "reason": "NotFound", "details": {},
              "message": "the server could not find the requested resource"}
    assert not parse_status(404, no_crd).names("nope")


def test_answers_that_are_not_a_status():
    error = parse_status(503, b"<html>upstream connect error</html>", "Service Unavailable")
    assert isinstance(error, Unavailable) and error.body == {}
    assert str(error) == "HTTP 503 Service Unavailable: <html>upstream connect error</html>"
    assert type(parse_status(500, b"", "Internal Server Error")) is ApiError
    assert str(parse_status(500, b"", "Internal Server Error")) == "HTTP 500 Internal Server Error"
    long = parse_status(400, {"code": 400, "reason": "BadRequest", "message": "x\n" * 5000})
    assert "\n" not in long.message and len(long.message) <= 1024


def test_the_typed_clients_exceptions_go_through_the_same_parser():
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.body = (FIXTURES / "429-eviction-blocked-by-pdb.json").read_text()
    assert isinstance(as_api_error(exc), TooManyRequests) and describe(exc) == f"HTTP 429 TooManyRequests: {PDB}"
    assert isinstance(as_api_error(TimeoutError()), Unavailable)
    assert as_api_error(ConnectionResetError("reset")).status == 0
    assert describe(ConnectionResetError("reset")) == "ConnectionResetError: reset"


# ---------------------------------------------------------------- calls


@pytest.fixture
async def emu():
    async with KubeEmulator() as emulator:
        yield emulator


@pytest.fixture
async def api(emu):
    async with emu.api_client() as api_client:
        yield Api(api_client, timeout=5)  # the layer under test, over a real HTTP connection


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}


async def test_calls_return_json_and_raise_typed_errors(emu, api):
    created = await api.create(POD.path(NS), pod("p"))
    assert created["metadata"]["name"] == "p"
    with pytest.raises(AlreadyExists):
        await api.create(POD.path(NS), pod("p"))
    await api.merge_patch(POD.path(NS, "p"), {"metadata": {"labels": {"a": "1"}}})
    with pytest.raises(Conflict) as conflict:
        await api.replace(POD.path(NS, "p"), created)  # carries the resourceVersion before the patch
    assert not isinstance(conflict.value, AlreadyExists)
    with pytest.raises(NotFound) as missing:
        await api.get(POD.path(NS, "q"))
    assert missing.value.names("q")
    emu.fail("GET", r"/pods/p$", 403)
    with pytest.raises(Forbidden):
        await api.get(POD.path(NS, "p"))


async def test_a_patch_is_a_merge_patch_unless_asked_otherwise(emu, api):
    await api.create(POD.path(NS), pod("p"))
    await api.request("PATCH", POD.path(NS, "p"), body={"metadata": {"labels": {"a": "1"}}})
    await api.merge_patch(POD.path(NS, "p"), {"metadata": {"labels": {"b": "2"}}})
    await api.json_patch(POD.path(NS, "p"), [{"op": "add", "path": "/metadata/labels/c", "value": "3"}])
    types = [r.content_type for r in emu.find_requests("PATCH")]
    assert types == ["application/merge-patch+json"] * 2 + ["application/json-patch+json"]
    assert emu.get("pods", NS, "p")["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"}


async def test_every_write_names_the_field_manager_it_was_given(emu, api):
    """The apiserver records a write's fieldManager in metadata.managedFields: podgang's
    writes must be told from another writer's there. Reads and deletes record nothing."""
    named = Api(api.api_client, timeout=5, field_manager="podgang-test")
    created = await named.create(POD.path(NS), pod("p"))
    await named.merge_patch(POD.path(NS, "p"), {"metadata": {"labels": {"a": "1"}}})
    await named.json_patch(POD.path(NS, "p"), [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    await named.replace(POD.path(NS, "p"), {**created, "metadata": {**created["metadata"], "resourceVersion": None}})
    await named.get(POD.path(NS, "p"))
    await api.merge_patch(POD.path(NS, "p"), {"metadata": {"labels": {"c": "3"}}})  # no name given: none sent
    await named.delete(POD.path(NS, "p"))
    sent = [(r.method, r.query.get("fieldManager")) for r in emu.find_requests(path_regex="/pods")]
    assert sent == [("POST", "podgang-test"), ("PATCH", "podgang-test"), ("PATCH", "podgang-test"),
                    ("PUT", "podgang-test"), ("GET", None), ("PATCH", None), ("DELETE", None)]


async def test_every_call_has_a_timeout(emu, api):
    emu.delay(5, r"/pods/p$")
    with pytest.raises(Unavailable) as slow:
        await asyncio.wait_for(api.get(POD.path(NS, "p"), timeout=0.05), 2)  # the outer limit only guards the test
    assert slow.value.status == 0 and str(slow.value) == "no answer within 50ms"
    with pytest.raises(Unavailable, match="no answer within 1s"):
        await Api(api.api_client, timeout=1).get(POD.path(NS, "p"))
    with pytest.raises(Unavailable, match="no time left"):
        await api.get(POD.path(NS, "p"), timeout=0)


async def test_no_server_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")) as api_client:
        with pytest.raises(Unavailable) as refused:
            await Api(api_client, timeout=2).get("/api/v1/pods")
        assert refused.value.status == 0 and "ClientConnectorError" in str(refused.value)
        with pytest.raises(Unavailable):
            async for _ in Api(api_client, timeout=2).watch("/api/v1/pods", resource_version="1", timeout_seconds=5):
                pass


async def test_a_watch_is_bounded_and_hands_over_bookmarks(emu, api):
    listed = await api.get(POD.path(NS))
    events = []

    async def watch():
        async for event in api.watch(POD.path(NS), resource_version=listed["metadata"]["resourceVersion"],
                                     timeout_seconds=1):
            events.append(event)

    task = asyncio.create_task(watch())
    await emu.wait_for(lambda: emu.watch_count == 1)
    emu.put(pod("p"))
    await emu.send_bookmarks()
    await asyncio.wait_for(task, 5)  # the server ends it after timeoutSeconds
    assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
    [request] = emu.find_requests("GET", r"/pods$")[-1:]
    assert request.query["timeoutSeconds"] == "1" and request.query["allowWatchBookmarks"] == "true"


async def test_an_expired_watch_raises_gone(emu, api):
    emu.put(pod("p"))
    old = (await api.get(POD.path(NS)))["metadata"]["resourceVersion"]
    emu.put(pod("q"))
    emu.compact()
    with pytest.raises(Gone) as gone:
        async for _ in api.watch(POD.path(NS), resource_version=old, timeout_seconds=5):
            pass
    assert gone.value.reason == "Expired"


async def test_the_client_factory_reads_a_kubeconfig_and_says_what_to_do(emu, tmp_path):
    api_client = await make_api_client(emu.write_kubeconfig(tmp_path / "kubeconfig"), connections=50)
    async with api_client:
        assert api_client.configuration.connection_pool_maxsize >= 50
        assert (await Api(api_client).get("/api/v1/namespaces"))["kind"] == "NamespaceList"
    with pytest.raises(RuntimeError, match="pass --kubeconfig PATH"):
        await make_api_client(str(tmp_path / "missing"))


async def test_the_elector_sees_a_dropped_connection_as_a_failed_try():
    # kubernetes_asyncio's elector reads the failed get's Status code; a dropped
    # connection (an apiserver restarting) must be a failed try, not a crash
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}")) as api_client:
        lock = TimedLeaseLock("podgang-grouper", "default", "me", api_client, timeout=1.0)
        config = electionconfig.Config(lock, lease_duration=15, renew_deadline=10, retry_period=2,
                                       onstarted_leading=asyncio.Event().wait, onstopped_leading=None)
        assert await leaderelection.LeaderElection(config).try_acquire_or_renew() is False


async def test_the_lease_is_taken_through_the_emulator(emu):
    async with emu.api_client() as api_client:
        lock = TimedLeaseLock("podgang-grouper", "default", "me", api_client, timeout=2.0)
        config = electionconfig.Config(lock, lease_duration=15, renew_deadline=10, retry_period=2,
                                       onstarted_leading=asyncio.Event().wait, onstopped_leading=None)
        assert await leaderelection.LeaderElection(config).try_acquire_or_renew() is True
    assert emu.get("leases", "default", "podgang-grouper")["spec"]["holderIdentity"] == "me"


def test_the_rate_limit_lets_a_burst_through_then_spaces_calls_at_its_rate():
    now = [100.0]
    waits: list[float] = []
    limit = RateLimit(10, 3, clock=lambda: now[0], on_wait=waits.append)
    assert [limit.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert limit.reserve() == pytest.approx(0.1)
    assert limit.reserve() == pytest.approx(0.2)  # reserved in turn: the next one waits longer
    now[0] += 10.0  # a quiet spell refills the bucket up to the burst, no more
    assert [limit.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limit.reserve() == pytest.approx(0.1)
    assert RateLimit(0, 1).reserve() == 0.0 and not RateLimit(0, 1).limited  # 0: no limit
