"""Switching from KAI's pod-grouper, on the real apiserver with KAI's own pod-grouper (v0.17)
and the real KAI scheduler: the group KAI's grouper made for a running Job is taken over by
podgang under the same name, sized as podgang sizes it, and no second group appears.

The Job's pods are first kept from podgang (``podgang.io/skip``) so that KAI's grouper, which
runs in the session's cluster as in every KAI install, groups them as it would have before
podgang was installed; removing the label hands them to podgang.
"""

from __future__ import annotations

from typing import Any

from tests.realcluster import KAI_TEAM_QUEUE, bound, corner, until
from tests.real.test_real_journeys import KAI, owned_group, pod_template, podgroup

SKIP, ADOPTED_FROM = "podgang.io/skip", "podgang.io/adopted-from"


async def test_a_job_kais_grouper_grouped_is_adopted_sized_and_never_duplicated(cluster, podgang):
    async with corner(cluster, "kaiswitch", nodes=1) as here:
        ns = here.namespace
        template = pod_template(here, KAI, "train", labels={SKIP: "true"})
        template["spec"]["restartPolicy"] = "Never"
        job = await here.api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": ns, "labels": {"kai.scheduler/queue": KAI_TEAM_QUEUE}},
            "spec": {"parallelism": 3, "completions": 3, "template": template}})
        name = owned_group(job)

        async def kais_group() -> dict[str, Any] | None:
            group = await podgroup(here, KAI, name)
            pods = await here.pods(app="train")
            named = all((p["metadata"].get("annotations") or {}).get("pod-group-name") == name for p in pods)
            return group if group is not None and len(pods) == 3 and named else None
        made = await until(kais_group, f"KAI's pod-grouper to make {name} and name it on the 3 pods")
        assert "podgang.io/managed-by" not in (made["metadata"].get("labels") or {})
        assert made["spec"]["minMember"] == 1  # KAI's answer for a Job without batch-min-member
        assert [r["uid"] for r in made["metadata"]["ownerReferences"]] == [job["metadata"]["uid"]]

        for pod in await here.pods(app="train"):  # podgang installed: the pods are its business now
            await here.api.merge_patch(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}",
                                       {"metadata": {"labels": {SKIP: None}}})

        async def adopted() -> dict[str, Any] | None:
            group = await podgroup(here, KAI, name)
            ok = (group is not None and group["spec"].get("minMember") == 3
                  and (group["metadata"].get("labels") or {}).get("podgang.io/managed-by") == "podgang"
                  and (group["metadata"].get("annotations") or {}).get(ADOPTED_FROM) == "kai-pod-grouper")
            return group if ok else None
        group = await until(adopted, f"podgang to adopt {name} and size it 3")
        assert group["metadata"]["uid"] == made["metadata"]["uid"]  # the same object, not a new one
        said = await until(lambda: here.events("PodGroupAdopted"), "a PodGroupAdopted event")
        assert said[0]["involvedObject"]["name"] == name
        assert "made by kai-pod-grouper for job train" in said[0]["message"]

        async def backfilled():
            pods = await here.pods(app="train")
            return pods if all((p["metadata"].get("annotations") or {}).get("kai.scheduler/skip-podgrouper")
                               == "true" for p in pods) else None
        await until(backfilled, "podgang's keys on the Job's pods: KAI's grouper steps aside")
        groups = (await here.api.get(f"{KAI.podgroups}/namespaces/{ns}/podgroups"))["items"]
        assert [g["metadata"]["name"] for g in groups] == [name]  # no second group

        async def placed():
            pods = await here.pods(app="train")
            return len(bound(pods)) == 3
        await until(placed, "KAI to place the adopted gang of 3")
        final = await podgroup(here, KAI, name)
        assert final is not None and final["spec"]["minMember"] == 3  # KAI's grouper did not take it back
