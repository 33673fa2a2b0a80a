"""The Spark operator's SparkApplication under the grouper, against the API emulator: the
gang grows from the driver to the driver and its executors once spark-operator says the driver
runs (the kind's rules are in ``tests/unit/test_kinds_spark.py``)."""

from __future__ import annotations

from podgang.gang import pod_subgroup
from tests.grouper_support import NS, kai_subgroups, min_member, owned_group, pod, running_grouper
from tests.unit.test_kinds_spark import spark


async def test_the_grouper_grows_a_spark_gang_once_the_driver_runs(emu):
    """spark-operator makes the driver (owned by the application); once it runs, the driver
    makes the executors (owned by the driver pod). The gang is the driver alone first, then
    the driver and its executors, in their subgroups; nothing waits for pods that come later."""
    app = spark({"instances": 2})
    app["metadata"]["namespace"] = NS
    app = emu.put(app)
    group = owned_group(app)
    async with running_grouper(emu) as g:
        await emu.wait_for(lambda: min_member(emu, group) == 1, 3.0)
        driver = emu.put(pod("pi-driver", owner=app, group=group, labels={"spark-role": "driver"}))
        emu.patch_object("sparkapplications", NS, "pi", {"status": {"applicationState": {"state": "RUNNING"}}})
        await emu.wait_for(lambda: min_member(emu, group) == 3 and kai_subgroups(emu, group) == [
            {"name": "driver", "minMember": 1}, {"name": "executor", "minMember": 2}], 3.0,
            f"PodGroup {emu.get('podgroups', NS, group)}")
        for i in range(2):
            emu.put(pod(f"pi-exec-{i}", owner=driver, group=group, labels={"spark-role": "executor"}))
        key = f"{NS}/{group}"
        await emu.wait_for(lambda: len(g.controller.cache.members(key)) == 3, 3.0)
        # the executors count in their subgroup, found through the driver pod that owns them
        assert pod_subgroup(g.controller.cache, g.controller.cache.pods[f"{NS}/pi-exec-0"]) == "executor"
