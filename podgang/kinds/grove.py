"""Grove's kinds (ai-dynamo/grove): a PodCliqueSet makes PodCliques, alone or in
PodCliqueScalingGroups, and the pods of each replica of the set form a PodGang that Grove
makes itself. Grove tells the scheduler of that gang: its KAI backend makes the KAI PodGroup
(Grove after #725) or KAI's own pod-grouper makes it from the PodGang (its Grove plugin), its
Volcano backend a Volcano PodGroup. A gang of podgang's beside it would take the pods from the
gang that places them, so podgang leaves every pod under these kinds alone
(:attr:`WorkloadKind.gang_maker`) and says so. Tested in tests/unit/test_kinds_wrappers.py."""

from __future__ import annotations

from typing import Any, Mapping

from podgang.kinds.model import KindDoc, Obj, Template, WorkloadKind
from podgang.objects import Resource, as_dict, as_list, spec


#: read on a pod: the PodGang Grove put it in
GROVE_PODGANG_LABEL = "grove.io/podgang"

GROVE = ("Grove: each replica of its PodCliqueSet is a PodGang Grove makes (label grove.io/podgang on its pods), "
         "which Grove's scheduler backend or KAI's own pod-grouper turns into the scheduler's gang")


def _clique_template(clique: Mapping[str, Any]) -> Template:
    """A PodClique template as a pod template: its bare ``podSpec`` with the clique's labels and annotations."""
    clique = as_dict(clique)
    return {"metadata": {k: dict(as_dict(clique.get(k))) for k in ("labels", "annotations") if clique.get(k)},
            "spec": dict(as_dict(as_dict(clique.get("spec")).get("podSpec")))}


def _set_templates(obj: Any) -> list[tuple[str, Template]]:
    cliques = as_list(as_dict(spec(obj).get("template")).get("cliques"))
    return [(f"spec.template.cliques[{i}].spec.podSpec", _clique_template(c)) for i, c in enumerate(cliques)]


def _clique_templates(obj: Any) -> list[tuple[str, Template]]:
    return [("spec.podSpec", {"spec": dict(as_dict(spec(obj).get("podSpec")))})]


def _groves(obj: Any) -> tuple[int, str]:
    return 0, f"no gang of podgang's: {GROVE}"


def _nothing_kept(s: Mapping[str, Any], slim_template: Any) -> Obj:
    return {}


def _grove(resource: Resource, templates: Any, aliases: tuple[str, ...]) -> WorkloadKind:
    return WorkloadKind(resource, _groves, templates, _nothing_kept, aliases=aliases, followed=False, gang_maker=GROVE,
                        doc=KindDoc(f"none: its pods are left alone (out of scope), their gang is {GROVE}"))


POD_CLIQUE_SET = _grove(Resource("grove.io", "v1alpha1", "podcliquesets", "PodCliqueSet", optional=True),
                        _set_templates, ("podcliqueset", "podcliquesets", "pcs"))
POD_CLIQUE_SCALING_GROUP = _grove(
    Resource("grove.io", "v1alpha1", "podcliquescalinggroups", "PodCliqueScalingGroup", optional=True),
    lambda obj: [], ("podcliquescalinggroup", "podcliquescalinggroups", "pcsg"))
POD_CLIQUE = _grove(Resource("grove.io", "v1alpha1", "podcliques", "PodClique", optional=True), _clique_templates,
                    ("podclique", "podcliques", "pclq"))
