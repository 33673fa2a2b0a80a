"""The webhook through each new backend (a real TLS server, the API emulator): an
owner-less pod gets the backend's membership patch and its group of one is created
in the backend's API, with nothing written in KAI's spelling."""

from __future__ import annotations

import jsonpatch
import pytest

from tests.backend_support import SCHEDULERS, bare_pod_review, podgroup_of, resource, settings_for
from tests.kube_emulator import KubeEmulator
from tests.webhook_support import decoded_patch, running_webhook

#: backend -> (where the group lands in the patched pod, the group-of-one's spec)
EXPECTED = {
    "volcano": (lambda p: p["metadata"]["annotations"]["scheduling.k8s.io/group-name"], {"minMember": 1}),
    "coscheduling": (lambda p: p["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"], {"minMember": 1}),
    "native": (lambda p: p["spec"]["schedulingGroup"]["podGroupName"], {"schedulingPolicy": {"basic": {}}}),
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
