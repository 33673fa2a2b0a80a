"""Who else wrote the size of a PodGroup podgang made, from its ``metadata.managedFields``:
the pure reader (``objects.field_writers``) over each backend's size fields, what the
grouper's Slimmer keeps of it, and the one message the grouper and ``podgang status``
show. The managedFields entries are shaped as a real apiserver records them."""

from __future__ import annotations

import pytest

from podgang.backends import BACKENDS, COSCHEDULING, KAI, NATIVE, VOLCANO, NativeWorkloads, native_backend
from podgang.gang import SIZE_WRITERS, Slimmer
from podgang.gang import changed_by_others
from podgang.objects import field_writers
from podgang.settings import DEFAULT

OWN = DEFAULT.own_field_managers
MANAGED = {DEFAULT.managed_by_label: DEFAULT.managed_by_value}


def entry(manager: str, fields: dict, operation: str = "Update", subresource: str | None = None) -> dict:
    out = {"manager": manager, "operation": operation, "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
           "fieldsType": "FieldsV1", "fieldsV1": fields}
    if subresource:
        out["subresource"] = subresource
    return out


def spec_fields(**owned: dict) -> dict:
    return {"f:spec": {f"f:{name}": value for name, value in owned.items()}}


CREATED = {"f:metadata": {"f:labels": {".": {}, "f:podgang.io/managed-by": {}}}}
KAI_CREATED = {**CREATED, **spec_fields(minMember={}, queue={}, stalenessGracePeriod={})}
STATUS = {"f:status": {"f:phase": {}, "f:schedulingConditions": {}}}

#: backend, the managedFields, who else wrote its size fields
CASES = [
    ("kai: only podgang", KAI, [entry("podgang-grouper", KAI_CREATED)], ()),
    ("kai: the webhook made it, the grouper resized it", KAI,
     [entry("podgang-webhook", KAI_CREATED), entry("podgang-grouper", spec_fields(minMember={}))], ()),
    ("kai: an older podgang's writes", KAI, [entry("OpenAPI-Generator", KAI_CREATED)], ()),
    ("kai: kubectl patch of minMember", KAI,
     [entry("podgang-grouper", CREATED), entry("someone-else", spec_fields(minMember={}))],
     (("someone-else", ("spec.minMember",)),)),
    ("kai: KAI's pod-grouper wrote minMember and subGroups", KAI,
     [entry("podgang-grouper", CREATED),
      entry("pod-grouper", spec_fields(minMember={}, subGroups={}))],
     (("pod-grouper", ("spec.minMember", "spec.subGroups")),)),
    ("kai: a server-side apply of the subgroups (a list keyed by name)", KAI,
     [entry("podgang-grouper", KAI_CREATED),
      entry("team-ci", spec_fields(subGroups={'k:{"name":"decode"}': {".": {}, "f:minMember": {}}}), "Apply")],
     (("team-ci", ("spec.subGroups",)),)),
    ("kai: the scheduler's status writes are not a writer of the size", KAI,
     [entry("podgang-grouper", KAI_CREATED), entry("kai-scheduler", STATUS, subresource="status"),
      entry("kai-scheduler", spec_fields(minMember={}), subresource="status")], ()),
    ("kai: a label written by kubectl is not the size", KAI,
     [entry("podgang-grouper", KAI_CREATED),
      entry("kubectl-label", {"f:metadata": {"f:labels": {"f:team": {}}}})], ()),
    ("kai: one manager twice (Apply and Update) is named once", KAI,
     [entry("ops", spec_fields(minMember={}), "Apply"), entry("ops", spec_fields(subGroups={}))],
     (("ops", ("spec.minMember", "spec.subGroups")),)),
    ("kai: two other managers, in order", KAI,
     [entry("b", spec_fields(subGroups={})), entry("a", spec_fields(minMember={}))],
     (("b", ("spec.subGroups",)), ("a", ("spec.minMember",)))),
    ("volcano: minTaskMember (a map)", VOLCANO,
     [entry("podgang-grouper", spec_fields(minMember={})),
      entry("vc-controller-manager", spec_fields(minTaskMember={"f:worker": {}}))],
     (("vc-controller-manager", ("spec.minTaskMember",)),)),
    ("volcano: the queue is not the size", VOLCANO,
     [entry("podgang-grouper", spec_fields(minMember={})), entry("someone", spec_fields(queue={}))], ()),
    ("coscheduling: minMember; it has no subgroups", COSCHEDULING,
     [entry("kubectl-edit", spec_fields(minMember={}, subGroups={}))],
     (("kubectl-edit", ("spec.minMember",)),)),
    ("native 1.36: schedulingPolicy", NATIVE,
     [entry("podgang-webhook", spec_fields(schedulingPolicy={"f:gang": {"f:minCount": {}}})),
      entry("kubectl-patch", spec_fields(schedulingPolicy={"f:gang": {"f:minCount": {}}}))],
     (("kubectl-patch", ("spec.schedulingPolicy",)),)),
    ("native 1.37: a basic group made a gang", native_backend("v1beta1"),
     [entry("someone-else", spec_fields(schedulingPolicy={"f:gang": {".": {}, "f:minCount": {}}}))],
     (("someone-else", ("spec.schedulingPolicy",)),)),
    ("native 1.35: a Workload's podGroups", NativeWorkloads(),
     [entry("podgang-grouper", spec_fields(podGroups={})), entry("jobset-controller", spec_fields(podGroups={}))],
     (("jobset-controller", ("spec.podGroups",)),)),
]


@pytest.mark.parametrize(("backend", "managed_fields", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_other_writers_of_each_backends_size_fields(backend, managed_fields, expected):
    group = {"metadata": {"name": "g", "managedFields": managed_fields}}
    assert field_writers(group, backend.size_fields, OWN) == expected


def test_every_backend_names_its_size_fields():
    for backend in [*BACKENDS.values(), native_backend("v1beta1"), NativeWorkloads()]:
        assert backend.size_fields and all(path[0] == "spec" for path in backend.size_fields), backend


@pytest.mark.parametrize("managed_fields", [None, "nonsense", [None, 3, "x"], [{"manager": 5}],
                                            [{"manager": "m", "operation": "Update", "fieldsV1": None}],
                                            [{"manager": "m", "operation": "Update", "fieldsV1": {"f:spec": 1}}],
                                            [{"manager": "m", "fieldsV1": spec_fields(minMember={})}]])
def test_malformed_managed_fields_name_nobody(managed_fields):
    assert field_writers({"metadata": {"managedFields": managed_fields}}, KAI.size_fields, OWN) == ()


def raw_group(managed_fields: list, labels: dict | None = MANAGED) -> dict:
    md = {"name": "pg-web-1", "namespace": "team", "uid": "u", "resourceVersion": "7",
          "managedFields": managed_fields}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": md,
            "spec": {"minMember": 5, "queue": "q"}}


def test_the_slim_group_keeps_the_answer_not_the_managed_fields():
    fought = raw_group([entry("podgang-grouper", KAI_CREATED), entry("pod-grouper", spec_fields(minMember={}))])
    slim = Slimmer(DEFAULT).podgroup(fought, KAI)
    assert "managedFields" not in slim["metadata"]
    assert slim["metadata"][SIZE_WRITERS] == (("pod-grouper", ("spec.minMember",)),)
    quiet = Slimmer(DEFAULT).podgroup(raw_group([entry("podgang-grouper", KAI_CREATED)]), KAI)
    assert SIZE_WRITERS not in quiet["metadata"] and "managedFields" not in quiet["metadata"]
    # a hand-made group's size is its owner's to write: nothing kept, nothing said
    hand_made = Slimmer(DEFAULT).podgroup(raw_group([entry("kubectl-edit", spec_fields(minMember={}))], None), KAI)
    assert SIZE_WRITERS not in hand_made["metadata"]
    assert changed_by_others(KAI, hand_made, DEFAULT) is None


def test_the_message_names_the_writer_the_fields_and_what_to_do():
    slim = Slimmer(DEFAULT).podgroup(raw_group([entry("pod-grouper", spec_fields(minMember={}, subGroups={}))]), KAI)
    message = changed_by_others(KAI, slim, DEFAULT)
    assert message is not None
    assert '"pod-grouper" (spec.minMember, spec.subGroups)' in message
    assert "PodGroup pg-web-1" in message and DEFAULT.min_member_annotation in message
    assert "older than v0.15" in message  # KAI's own hint
    volcano = Slimmer(DEFAULT).podgroup(raw_group([entry("someone", spec_fields(minMember={}))]), VOLCANO)
    assert "v0.15" not in (changed_by_others(VOLCANO, volcano, DEFAULT) or "v0.15")
    assert changed_by_others(KAI, None, DEFAULT) is None


def test_the_message_fits_an_event_however_many_and_long_the_writers():
    writers = [entry(f"{i}-" + "m" * 126, spec_fields(minMember={}, subGroups={})) for i in range(10)]
    group = raw_group(writers)
    group["metadata"]["name"] = "n" * 253
    message = changed_by_others(KAI, Slimmer(DEFAULT).podgroup(group, KAI), DEFAULT)
    assert message is not None and len(message.encode()) <= 1024, len(message.encode())
    assert "and 7 more" in message
