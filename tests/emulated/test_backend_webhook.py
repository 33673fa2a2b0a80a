"""The webhook through each new backend (a real TLS server, the API emulator): an
owner-less pod gets the backend's membership patch and its group of one is created
in the backend's API, with nothing written in KAI's spelling."""

from __future__ import annotations

import jsonpatch
import pytest

from podgang.backends import GangSpec
from tests.backend_support import SCHEDULERS, bare_pod_review, podgroup_of, resource, settings_for
from tests.emulator import KubeEmulator
from tests.webhook_support import decoded_patch, running_webhook

#: backend -> (where the group lands in the patched pod, the group-of-one's spec)
EXPECTED = {
    "volcano": (lambda p: p["metadata"]["annotations"]["scheduling.k8s.io/group-name"], {"minMember": 1}),
    "coscheduling": (lambda p: p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], {"minMember": 1}),
    "native": (lambda p: p["spec"]["schedulingGroup"]["podGroupName"], {"schedulingPolicy": {"basic": {}}}),
    "native-1.35": (lambda p: p["spec"]["workloadRef"]["name"], {"podGroups": [{"name": "pg-bare",
                                                                                "policy": {"basic": {}}}]}),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_owner_less_pod_admitted_through_the_backend(tmp_path, name):
    backend, scheduler = SCHEDULERS[name]
    where, spec = EXPECTED[name]
    doc = bare_pod_review(scheduler)
    pod = doc["request"]["object"]
    ns = doc["request"]["namespace"]
    async with KubeEmulator() as emu:
        emu.register(resource(backend))
        client = emu.api_client()
        try:
            async with running_webhook(tmp_path, api_client=client, settings=settings_for(name)) as wh:
                response = await wh.mutate(doc)
        finally:
            await client.close()
        assert response["allowed"] is True
        patched = jsonpatch.apply_patch(pod, decoded_patch(response))
        assert where(patched) == "pg-bare" and backend.group_of(patched) == "pg-bare"
        assert "kai.scheduler/podgroup" not in patched["metadata"].get("labels", {})
        assert "pod-group-name" not in patched["metadata"].get("annotations", {})
        group = podgroup_of(emu, backend, ns, "pg-bare")
        assert group is not None and group["apiVersion"] == backend.podgroup.api_version
        assert group["spec"] == spec
        assert emu.list("podgroups.scheduling.run.ai", ns) == []


@pytest.mark.parametrize("ref, said", [
    ({"name": "spark-job", "podGroup": "nope"},
     "Workload spark-job in namespace {ns} has no pod group nope (it has: spark-gang; its podGroups cannot change: "
     "recreate it with that pod group): the pod stays Pending until it exists"),
    ({"name": "nowhere", "podGroup": "g"}, "Workload nowhere not found in namespace {ns}: the pod stays Pending "
                                           "until it exists"),
    ({"name": "spark-job", "podGroup": "spark-gang"}, None),
])
async def test_a_1_35_pod_naming_a_missing_workload_or_pod_group_is_warned_at_admission(tmp_path, ref, said):
    """kube-scheduler keeps such a pod Pending and says nothing (recorded on 1.35): the
    webhook admits it (nothing is lost) and tells the client why it will wait."""
    backend, scheduler = SCHEDULERS["native-1.35"]
    doc = bare_pod_review(scheduler)
    doc["request"]["object"]["spec"]["workloadRef"] = ref
    ns = doc["request"]["namespace"]
    async with KubeEmulator() as emu:
        emu.register(resource(backend))
        emu.put(backend.build_podgroup(GangSpec("spark-job/spark-gang", ns, 5)))
        client = emu.api_client()
        try:
            async with running_webhook(tmp_path, api_client=client, settings=settings_for("native-1.35")) as wh:
                response = await wh.mutate(doc)
        finally:
            await client.close()
    assert response["allowed"] is True and "patch" not in response  # the pod's own field stands
    assert response.get("warnings", []) == ([said.format(ns=ns)] if said else [])
