"""Knative Serving's kinds: a Service makes a Configuration, each change of which is a new
Revision, and each Revision a Deployment of the Revision's pods, which Knative's autoscaler
scales between the Revision's min-scale and max-scale. The gang is the Revision's, sized by
its ``autoscaling.knative.dev/min-scale`` (1 when unset or not a number), as KAI's Knative
plugin makes it: every Revision is a run of its Configuration, so old and new Revisions of a
Service are gangs of their own while traffic moves between them. Tested in
tests/unit/test_kinds_knative.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang.kinds.model import ONE_PER_RUN, KindDoc, Obj, SlimTemplate, Template, WorkloadKind
from podgang.objects import Resource, annotations, as_dict, labels, spec

#: read on a Revision (and its Configuration's template): the fewest pods it keeps, its gang's size
KNATIVE_MIN_SCALE_ANNOTATION = "autoscaling.knative.dev/min-scale"
#: read on a pod: the Revision it serves, as Knative labels it
KNATIVE_REVISION_LABEL = "serving.knative.dev/revision"


def _min_scale(found: Mapping[str, Any], where: str) -> tuple[int, str]:
    value = found.get(KNATIVE_MIN_SCALE_ANNOTATION)
    if value is None:
        return 1, f"{where} sets no {KNATIVE_MIN_SCALE_ANNOTATION}: 1"
    text = str(value).strip()
    if text.isdigit() and len(text) <= 9:
        return int(text), f"{KNATIVE_MIN_SCALE_ANNOTATION} {int(text)} on {where}"
    return 1, f"{KNATIVE_MIN_SCALE_ANNOTATION}={str(value)[:40]!r} on {where} is not a whole number: 1"


def _revision_size(obj: Any) -> tuple[int, str]:
    return _min_scale(annotations(obj), "the Revision")


def _template_size(obj: Any) -> tuple[int, str]:
    size, why = _min_scale(annotations(as_dict(spec(obj).get("template"))), "its template")
    return size, f"per Revision: {why}"


def _revision_templates(obj: Any) -> list[tuple[str, Template]]:
    """A Revision's spec is its pods' spec; its labels and annotations are theirs."""
    meta = {k: dict(v) for k, v in (("labels", labels(obj)), ("annotations", annotations(obj))) if v}
    return [("spec", {"metadata": meta, "spec": dict(spec(obj))})]


def _template(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.template", as_dict(spec(obj).get("template")))] if "template" in spec(obj) else []


def _slim_revision(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return dict(as_dict(slim_template({"spec": dict(as_dict(s))}).get("spec")))


def _slim_template(s: Mapping[str, Any], slim_template: SlimTemplate) -> Obj:
    return {"template": slim_template(as_dict(s).get("template"))} if "template" in as_dict(s) else {}


_SERVING = "serving.knative.dev"
REVISION = WorkloadKind(
    Resource(_SERVING, "v1", "revisions", "Revision", optional=True), _revision_size, _revision_templates,
    _slim_revision, aliases=("revision", "revisions", "rev"),
    doc=KindDoc(f"the Revision's `{KNATIVE_MIN_SCALE_ANNOTATION}`, else 1 (one PodGroup per Revision, owned by it; "
                "its Deployment and ReplicaSet are passed through); its default priority is `inference`, as KAI's"),
)
CONFIGURATION = WorkloadKind(
    Resource(_SERVING, "v1", "configurations", "Configuration", optional=True), _template_size, _template,
    _slim_template, aliases=("configuration", "configurations", "config"), layout=ONE_PER_RUN, runs=("Revision",),
    followed=False, doc=KindDoc("per Revision (one PodGroup each), sized by the Revision"),
)
KNATIVE_SERVICE = WorkloadKind(
    Resource(_SERVING, "v1", "services", "Service", optional=True), _template_size, _template, _slim_template,
    aliases=("ksvc", "kservice"), layout=ONE_PER_RUN, runs=("Revision",), followed=False,
    doc=KindDoc("per Revision of its Configuration (one PodGroup each), sized by the Revision"),
)
