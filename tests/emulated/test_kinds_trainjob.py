"""Trainer v2's TrainJob under the grouper, against the API emulator: its JobSet gets the
gang and grows it in stages (the kind's rules are in ``tests/unit/test_kinds_trainjob.py``)."""

from __future__ import annotations

from tests.crd_support import crd_valid
from podgang.backends.kai import KAI
from tests.grouper_support import NS, kai_subgroups, owned_group, running_grouper
from tests.unit.test_kinds_trainjob import trainer_jobset


async def test_the_grouper_gives_a_trainjobs_jobset_its_gang_and_grows_it_in_stages(emu):
    train = emu.put(crd_valid({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                               "metadata": {"name": "llama", "namespace": NS},
                               "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 4}}}))
    js = emu.put(trainer_jobset(owner=train))
    async with running_grouper(emu):
        def size():  # KAI's JobSet tree: the gang's size is its leaves'
            return KAI.min_member(emu.get("podgroups", NS, owned_group(js)) or {})
        await emu.wait_for(lambda: size() == 1, 3.0)
        emu.patch_object("jobsets", NS, "llama", {"status": {"replicatedJobsStatus": [
            {"name": "model-initializer", "succeeded": 1, "ready": 0, "failed": 0, "active": 0, "suspended": 0}]}})
        await emu.wait_for(lambda: size() == 4, 3.0)
        # the nodes' replicated job as KAI's JobSet grouper writes it: 4 Jobs of 1 pod, all needed
        assert kai_subgroups(emu, owned_group(js)) == [{"name": "node", "minSubGroup": 4}, *(
            {"name": f"node-replica-{i}", "parent": "node", "minMember": 1} for i in range(4))]
        assert emu.get("podgroups", NS, owned_group(train)) is None  # the TrainJob's gang is its JobSet's
