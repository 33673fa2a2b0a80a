"""Vendors' job kinds KAI's pod-grouper has a plugin for: Azure ML's AmlJob (amlarc) and
NVIDIA's SPOTRequest (egx). Each is one gang per object; what KAI's grouper reads beyond
that (an AmlJob's node count, a SPOTRequest's default priority) is read here and in the KAI
backend's defaults. Tested in tests/unit/test_kinds_vendors.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang.kinds.model import KindDoc, Obj, SlimTemplate, WorkloadKind, _spec_template
from podgang.objects import Resource, as_dict, spec

#: where an AmlJob says how many nodes (pods) its run takes, as KAI's AML plugin reads it
AML_NODE_COUNT_PATH = ("job", "options", "envs", "AZUREML_NODE_COUNT")


def _aml_node_count(obj: Any) -> Any:
    node: Any = spec(obj)
    for step in AML_NODE_COUNT_PATH:
        node = as_dict(node).get(step)
    return node


def _aml_size(obj: Any) -> tuple[int, str]:
    count = _aml_node_count(obj)
    where = "spec." + ".".join(AML_NODE_COUNT_PATH)
    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
        return count, f"{where} {count}"
    return 1, (f"{where} is not set as a whole number: one pod at a time (KAI's own pod-grouper makes no "
               f"PodGroup for such an AmlJob)")


def _slim_aml(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    count = _aml_node_count({"spec": s})
    return {"job": {"options": {"envs": {"AZUREML_NODE_COUNT": count}}}} if count is not None else {}


def _one(obj: Any) -> tuple[int, str]:
    return 1, "one pod at a time (KAI's default grouper)"


def _slim_template_only(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(s.get("template"))} if "template" in as_dict(s) else {}


AML_JOB = WorkloadKind(
    Resource("amlarc.azureml.com", "v1alpha1", "amljobs", "AmlJob", optional=True), _aml_size,
    lambda obj: [], _slim_aml, aliases=("amljob", "amljobs"),
    doc=KindDoc("`spec.job.options.envs.AZUREML_NODE_COUNT` (a whole number), else 1"),
)
SPOT_REQUEST = WorkloadKind(
    Resource("egx.nvidia.io", "v1", "spotrequests", "SPOTRequest", optional=True), _one,
    _spec_template, _slim_template_only, aliases=("spotrequest", "spotrequests"),
    doc=KindDoc("1 (no gang; its default priority is `inference`, as KAI's)"),
)
