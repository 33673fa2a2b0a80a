"""Several gang schedulers in one cluster: ``--backend SCHEDULER=BACKEND`` maps each
scheduler name to its backend, and each pod's gang is its own backend's PodGroup.

KAI runs next to a toy backend whose PodGroups share KAI's kind name ("PodGroup",
as Volcano's and coscheduling's do) in another API group and cannot change size
while they live (like native Kubernetes gangs in 1.36): the webhook patches each
pod in its backend's spelling, the grouper keeps each backend's PodGroups in its
own store and writes through that backend, and ``podgang plan`` prints both.
"""

from __future__ import annotations

import argparse
from typing import Any

import jsonpatch
import pytest
import yaml

from podgang import plan_cli
from podgang.api import Api
from podgang.backends import BACKENDS, KAI, GangSpec
from podgang.discovery import discovered
from podgang.grouper import cli as grouper_cli
from podgang.manifests import Manifest, Source
from podgang.objects import Resource, annotations
from podgang.plan import build_plan, podgroup_manifests
from podgang.rules import scope_problem
from podgang.settings import Settings
from podgang.webhook import cli as webhook_cli
from tests.grouper_support import (
    deploy_with_pods,
    deployment,
    events,
    min_member,
    owned_group,
    replicaset,
    running_grouper,
    scale,
    settle_status,
)
from tests.emulator import KubeEmulator, ResourceType
from tests.emulated.test_backend_interface import KEY, NS, SCHEDULER, ToyBackend, toy_pod
from tests.webhook_support import decoded_patch, eventually, review, running_webhook


QUEUE = "toy.example.com/queue"


class PodGroupToy(ToyBackend):
    """The toy scheduler, with its groups named ``PodGroup`` like KAI's, and a queue
    per gang read from an annotation (like Volcano's)."""

    name = "toy"
    podgroup = Resource("toy.example.com", "v1", "podgroups", "PodGroup")
    pod_annotation_keys = (KEY, QUEUE)

    def membership_problem(self, group: str) -> str | None:
        return f"a toy gang name holds at most 40 characters, {group} has {len(group)}" if len(group) > 40 else None

    def gang_options(self, source):
        return next(({"queue": q} for obj in source.nearest_first if (q := annotations(obj).get(QUEUE))), {})

    def build_podgroup(self, gang: GangSpec) -> dict[str, Any]:
        built = {**super().build_podgroup(gang), "apiVersion": self.podgroup.api_version, "kind": self.podgroup.kind}
        if gang.queue:
            built["spec"]["queue"] = gang.queue
        return built


class VersionedToy(PodGroupToy):
    """A toy whose API version is the newest its group serves (as native's is)."""

    def for_discovery(self, discovery):
        served = {v.get("version") for v in (discovery or {}).get("versions") or ()}
        if "v0" in served:
            raise ValueError("toy.example.com serves only v0")
        if "v2" in served:
            chosen = VersionedToy()
            chosen.podgroup = Resource("toy.example.com", "v2", "podgroups", "PodGroup")
            return chosen
        return self


TOY = PodGroupToy()
MIXED = Settings(backends=(("kai-scheduler", KAI), (SCHEDULER, TOY)))
TOY_GROUPS = ResourceType("toy.example.com", "v1", "podgroups", "PodGroup", crd=True)
TOY_PATH = "podgroups.toy.example.com"
DESIRED = MIXED.desired_size_annotation


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(BACKENDS, TOY.name, TOY)


@pytest.fixture
async def emu():
    async with KubeEmulator() as e:
        e.register(TOY_GROUPS)
        yield e


def toy_deployment(emu, name: str, replicas: int, **kw: Any) -> tuple[dict, list[dict]]:
    dep = emu.put(deployment(name, replicas, scheduler=SCHEDULER, **kw))
    rs = emu.put(replicaset(dep))
    return dep, [emu.put(toy_pod(f"{name}-{i}", rs, owned_group(dep))) for i in range(replicas)]


# ---------------------------------------------------------------------------- settings


def test_each_scheduler_name_maps_to_its_backend():
    assert MIXED.backend_for({"spec": {"schedulerName": "kai-scheduler"}}) is KAI
    assert MIXED.backend_for({"spec": {"schedulerName": SCHEDULER}}) is TOY
    assert MIXED.backend_for({"spec": {}}) is None  # default-scheduler is not mapped
    assert MIXED.enabled_backends == (KAI, TOY)
    assert MIXED.scheduler_names == ("kai-scheduler", SCHEDULER)
    assert scope_problem({"spec": {"schedulerName": "x"}}, "team", MIXED) == (
        'schedulerName "x" is not one of kai-scheduler, toy-scheduler')
    shared = Settings(backends=(("a", KAI), ("b", TOY), ("c", KAI)))
    assert shared.enabled_backends == (KAI, TOY)


# ---------------------------------------------------------------------------- flags


def _parse(add_arguments, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(argv)


COMMANDS = {
    "webhook": (webhook_cli.add_arguments, [], lambda a: webhook_cli.config_from_args(a).settings),
    "grouper": (grouper_cli.add_arguments, [], grouper_cli.settings_from),
    "plan": (plan_cli.add_arguments, ["-"], lambda a: Settings(backends=plan_cli.backends_from(a))),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_backend_flags_on_every_command(command, toy_registered, monkeypatch):
    monkeypatch.delenv("PODGANG_BACKEND", raising=False)
    monkeypatch.delenv("PODGANG_SCHEDULER_NAME", raising=False)
    add_arguments, extra, settings_of = COMMANDS[command]
    assert settings_of(_parse(add_arguments, extra)).backends == (("kai-scheduler", KAI),)
    given = settings_of(_parse(add_arguments, [*extra, "--backend", f"{SCHEDULER}=toy", "--scheduler-name", "gang"]))
    assert given.backends == ((SCHEDULER, TOY), ("gang", KAI))  # --scheduler-name NAME is NAME=kai

    monkeypatch.setenv("PODGANG_BACKEND", f"kai-scheduler=kai, {SCHEDULER}=toy")
    assert settings_of(_parse(add_arguments, extra)).backends == (("kai-scheduler", KAI), (SCHEDULER, TOY))
    # the command line wins over the environment
    assert settings_of(_parse(add_arguments, [*extra, "--backend", "x=toy"])).backends == (("x", TOY),)


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_backend_is_a_usage_error_naming_the_known_ones(command, toy_registered, monkeypatch, capsys):
    monkeypatch.delenv("PODGANG_BACKEND", raising=False)
    add_arguments, extra, _ = COMMANDS[command]
    with pytest.raises(SystemExit) as exit_:
        _parse(add_arguments, [*extra, "--backend", "volcano=volcanoo"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unknown backend 'volcanoo'" in err and f"expected one of {', '.join(sorted(BACKENDS))}" in err
    with pytest.raises(SystemExit) as exit_:
        _parse(add_arguments, [*extra, "--backend", "no-backend"])
    assert "expected SCHEDULER=BACKEND" in capsys.readouterr().err

    monkeypatch.setenv("PODGANG_BACKEND", "a=nope")
    with pytest.raises(SystemExit) as exit_:
        _parse(add_arguments, extra)
    assert "PODGANG_BACKEND='a=nope' is invalid: unknown backend 'nope'" in str(exit_.value)


# ---------------------------------------------------------------------------- webhook


def _bare_pod_review(scheduler: str, name: str) -> tuple[dict, dict]:
    doc = review("pod-create-bare-gpu")
    pod = doc["request"]["object"]
    pod["metadata"]["name"] = name
    pod["metadata"].pop("annotations", None)
    pod["spec"]["schedulerName"] = scheduler
    for c in pod["spec"]["containers"]:
        c.pop("resources", None)
    doc["request"]["name"] = name
    doc["request"]["uid"] = f"uid-{name}"
    return doc, pod


async def test_the_webhook_gives_each_pod_its_own_backends_group(tmp_path, emu):
    kai_doc, kai_pod = _bare_pod_review("kai-scheduler", "kai-bare")
    toy_doc, toy_pod_ = _bare_pod_review(SCHEDULER, "toy-bare")
    toy_pod_["metadata"]["annotations"] = {QUEUE: "research"}
    other_doc, _ = _bare_pod_review("default-scheduler", "other")
    ns = kai_doc["request"]["namespace"]
    client = emu.api_client()
    try:
        async with running_webhook(tmp_path, api_client=client, settings=MIXED) as wh:
            kai_response = await wh.mutate(kai_doc)
            toy_response = await wh.mutate(toy_doc)
            other_response = await wh.mutate(other_doc)
            long_response = await wh.mutate(_bare_pod_review(SCHEDULER, "toy-" + "x" * 40)[0])
    finally:
        await client.close()
    kai_after = jsonpatch.apply_patch(kai_pod, decoded_patch(kai_response))
    assert kai_after["metadata"]["annotations"] == {KAI.annotation: "pg-kai-bare", "kai.scheduler/skip-podgrouper": "true"}
    assert kai_after["metadata"]["labels"][KAI.label] == "pg-kai-bare"
    toy_after = jsonpatch.apply_patch(toy_pod_, decoded_patch(toy_response))
    assert toy_after["metadata"]["annotations"] == {QUEUE: "research", KEY: "pg-toy-bare"}
    assert KAI.label not in (toy_after["metadata"].get("labels") or {})
    assert "patch" not in other_response  # out of scope: not mapped
    assert long_response["allowed"] is False  # a name the toy's key cannot hold: the backend says why
    assert long_response["status"]["message"] == (
        f"a toy gang name holds at most 40 characters, pg-toy-{'x' * 40} has 47")

    # each owner-less group in its own backend's resource, though both kinds are "PodGroup"
    assert emu.get("podgroups.scheduling.run.ai", ns, "pg-kai-bare")["spec"] == {
        "minMember": 1, "queue": "default-queue", "priorityClassName": "train", "stalenessGracePeriod": "-1s"}
    assert emu.get(TOY_PATH, ns, "pg-toy-bare")["spec"] == {"size": 1, "queue": "research"}
    assert emu.get(TOY_PATH, ns, "pg-kai-bare") is None
    assert emu.get("podgroups.scheduling.run.ai", ns, "pg-toy-bare") is None


# ---------------------------------------------------------------------------- grouper


async def test_the_grouper_keeps_each_backends_groups_apart(emu, toy_registered):
    kai_dep, _, _ = deploy_with_pods(emu, "kai-web", 2)
    toy_dep, _ = toy_deployment(emu, "toy-web", 3, annotations={QUEUE: "research"})
    kai_group, toy_group = owned_group(kai_dep), owned_group(toy_dep)
    async with running_grouper(emu, backends=[("kai-scheduler", "kai"), (SCHEDULER, "toy")]) as grouper:
        await emu.wait_for(lambda: min_member(emu, kai_group) == 2 and emu.get(TOY_PATH, NS, toy_group), 10,
                           "each backend's group was not created")
        assert emu.get(TOY_PATH, NS, toy_group)["spec"] == {"size": 3, "queue": "research"}  # the backend's own option
        assert emu.get(TOY_PATH, NS, kai_group) is None and min_member(emu, toy_group) is None
        cache = grouper.controller.cache
        assert set(cache.podgroups.store(KAI)) == {f"{NS}/{kai_group}"}
        assert set(cache.podgroups.store(TOY)) == {f"{NS}/{toy_group}"}

        # KAI patches its size in place
        scale(emu, kai_dep, 4)
        await emu.wait_for(lambda: min_member(emu, kai_group) == 4, 10, "KAI's group did not follow the scale")

        # the toy group cannot change while its pods live: the size in force is recorded, said once
        scale(emu, toy_dep, 5)
        await emu.wait_for(
            lambda: annotations(emu.get(TOY_PATH, NS, toy_group)).get(DESIRED) == "5", 10,
            "the desired size was not recorded on the live group")
        (held,) = await eventually(lambda: events(emu, "MinMemberHeld"), what="a MinMemberHeld warning")
        assert "minMember stays 3 (wanted 5)" in held["message"]
        assert emu.get(TOY_PATH, NS, toy_group)["spec"]["size"] == 3
        assert emu.count("DELETE", r"/podgroups/") == 0


async def test_staleness_uses_the_size_in_force_when_the_group_cannot_change(emu, toy_registered):
    toy_dep, pods = toy_deployment(emu, "toy-web", 2)
    group = owned_group(toy_dep)
    async with running_grouper(emu, backends=[(SCHEDULER, "toy")], staleness_grace_period=0.3):
        await emu.wait_for(lambda: emu.get(TOY_PATH, NS, group), 10, "the toy group was not created")
        scale(emu, toy_dep, 3)
        settle_status(emu, toy_dep)
        extra = emu.put(toy_pod("toy-web-2", emu.get("replicasets", NS, "toy-web-abc12"), group))
        await emu.wait_for(lambda: annotations(emu.get(TOY_PATH, NS, group)).get(DESIRED) == "3", 10,
                           "the desired size was not recorded")
        # one of the three members is lost: a gang of 3 in force, 2 left — stale, though the live group says 2
        emu.delete("pods", NS, extra["metadata"]["name"])
        await eventually(lambda: events(emu, "GangStale"), what="the gang judged by the size in force")
        (evicted,) = await eventually(lambda: events(emu, "GangEvicted"), what="the rest evicted")
        assert evicted["message"].endswith(
            "the replacements join the live group, whose size stays until the gang is empty "
            "(minMember stays 2 (wanted 3): a toy Gang cannot change size while it lives; podgang then replaces "
            "it with minMember 3)")


async def test_a_backend_whose_crd_is_absent_is_waited_for(toy_registered):
    async with KubeEmulator() as emu:  # no toy resource served
        kai_dep, _, _ = deploy_with_pods(emu, "kai-web", 2)
        async with running_grouper(emu, backends=[("kai-scheduler", "kai"), (SCHEDULER, "toy")]):
            await emu.wait_for(lambda: min_member(emu, owned_group(kai_dep)) == 2, 10,
                               "KAI's group was not created while the toy CRD is absent")


async def test_the_namespace_selector_keeps_the_grouper_out_of_other_namespaces(emu):
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"gangs": "on"}}})
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    inside, _, _ = deploy_with_pods(emu, "inside", 2)
    outside, _, _ = deploy_with_pods(emu, "outside", 2, ns="elsewhere")
    async with running_grouper(emu, namespace_selector="gangs=on") as grouper:
        await emu.wait_for(lambda: min_member(emu, owned_group(inside)) == 2, 10, "the selected namespace's group")
        assert grouper.controller.touches(NS, KAI) and not grouper.controller.touches("elsewhere", KAI)
        assert min_member(emu, owned_group(outside), ns="elsewhere") is None
        assert emu.count("POST", r"/namespaces/elsewhere/") == 0

        # selected later: its gangs are looked at then
        emu.patch_object("namespaces", None, "elsewhere", {"metadata": {"labels": {"gangs": "on"}}})
        await emu.wait_for(lambda: min_member(emu, owned_group(outside), ns="elsewhere") == 2, 10,
                           "a namespace selected later was not reconciled")


async def test_the_namespace_selector_may_apply_to_one_backend_only(emu, toy_registered):
    emu.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kai_dep, _, _ = deploy_with_pods(emu, "kai-web", 2)
    toy_dep, _ = toy_deployment(emu, "toy-web", 3)
    async with running_grouper(emu, backends=[("kai-scheduler", "kai"), (SCHEDULER, "toy")],
                               namespace_selector="gangs=on", selector_backends=["toy"]):
        await emu.wait_for(lambda: min_member(emu, owned_group(kai_dep)) == 2, 10, "KAI's group, everywhere")
        assert emu.get(TOY_PATH, NS, owned_group(toy_dep)) is None  # the toy's namespaces are opted in
        emu.patch_object("namespaces", None, NS, {"metadata": {"labels": {"gangs": "on"}}})
        await emu.wait_for(lambda: emu.get(TOY_PATH, NS, owned_group(toy_dep)), 10,
                           "the toy's group once its namespace was selected")


# ---------------------------------------------------------------------------- discovery


async def test_discovery_picks_the_served_version(emu):
    versioned = VersionedToy()
    settings = Settings(backends=(("kai-scheduler", KAI), (SCHEDULER, versioned)))
    client = emu.api_client()
    try:
        api = Api(client, timeout=5.0)
        assert (await discovered(api, settings)).backends == settings.backends  # only v1 served
        # the group now serves v2 too (the emulator keeps one version per resource: another one's)
        emu.register(ResourceType("toy.example.com", "v2", "gangsets", "GangSet", crd=True))
        after = await discovered(api, settings)
    finally:
        await client.close()
    assert after.backends[0] == ("kai-scheduler", KAI)
    assert after.backends[1][1].podgroup.api_version == "toy.example.com/v2"


async def test_a_backend_that_cannot_use_what_is_served_stays_as_configured(emu, caplog):
    emu.register(ResourceType("toy.example.com", "v0", "gangsets", "GangSet", crd=True))
    settings = Settings(backends=((SCHEDULER, VersionedToy()),))
    client = emu.api_client()
    try:
        assert (await discovered(Api(client, timeout=5.0), settings)).backends == settings.backends
    finally:
        await client.close()
    assert "toy.example.com serves only v0: using the backend as configured" in caplog.text


# ---------------------------------------------------------------------------- plan


def test_plan_prints_each_backends_podgroups(toy_registered, tmp_path, capsys):
    kai_dep = deployment("kai-web", 2, ns=NS)
    toy_dep = deployment("toy-web", 3, ns=NS, scheduler=SCHEDULER)
    toy_dep["spec"]["template"]["metadata"]["annotations"] = {QUEUE: "research"}
    plan = build_plan([Manifest(kai_dep, Source("a.yaml", 1)), Manifest(toy_dep, Source("a.yaml", 2))], MIXED)
    by_name = {g.name: g for g in plan.groups.values()}
    assert by_name[owned_group(kai_dep)].backend is KAI and by_name[owned_group(toy_dep)].backend is TOY
    docs, comments = podgroup_manifests(plan, MIXED)
    assert comments == []
    assert sorted((d["apiVersion"], d["spec"].get("minMember", d["spec"].get("size"))) for d in docs) == [
        ("scheduling.run.ai/v2alpha2", 2), ("toy.example.com/v1", 3)]
    assert next(d for d in docs if d["apiVersion"] == "toy.example.com/v1")["spec"]["queue"] == "research"
    (note,) = plan.notes
    assert note.what == "toy PodGroups"
    assert note.message == (f"a live group keeps its size after a scale (say {NS}/{owned_group(toy_dep)} 3 → 4): "
                            f"a toy Gang cannot change size while it lives")

    manifest = tmp_path / "a.yaml"
    manifest.write_text(
        "---\n".join(yaml.safe_dump(o) for o in (kai_dep, toy_dep)))
    args = _parse(plan_cli.add_arguments, [str(manifest), "--backend", "kai-scheduler=kai",
                                           "--backend", f"{SCHEDULER}=toy"])
    assert plan_cli.run(args) == 0
    out = capsys.readouterr().out
    assert f"{owned_group(toy_dep)}" in out and "toy: created by the grouper" in out
    assert "kai: created by the grouper" in out
    assert "a live group keeps its size after a scale" in out
