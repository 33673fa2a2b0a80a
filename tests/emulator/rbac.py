"""RBAC as the chart grants it, for tests: the rules bound to a ServiceAccount in
rendered manifests, and whether they allow one request (the apiserver's RBAC
authorizer in miniature: apiGroups, resources incl. ``resource/subresource``, verbs,
resourceNames, Role vs ClusterRole scope; no wildcards, which the chart never uses)."""

from __future__ import annotations

from typing import Any

CLUSTER = "*cluster*"  # the scope of a rule bound by a ClusterRoleBinding

Rule = tuple[str, dict[str, Any]]  # (namespace it applies in, or CLUSTER; PolicyRule)


def rules_for(docs: list[dict], service_account: str, namespace: str) -> list[Rule]:
    """Every RBAC rule bound to ServiceAccount ``namespace/service_account``, with the
    namespace it applies in."""
    roles = {
        (d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
        for d in docs if d.get("kind") in ("Role", "ClusterRole")
    }
    rules: list[Rule] = []
    for binding in (d for d in docs if d.get("kind") in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s["kind"] == "ServiceAccount" and s["name"] == service_account and s["namespace"] == namespace
                   for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        role_ns = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_ns, ref["name"])]
        scope = binding["metadata"].get("namespace", CLUSTER)
        rules += [(scope, rule) for rule in role["rules"]]
    return rules


def allows(rules: list[Rule], group: str, resource: str, verb: str,
           name: str | None = None, namespace: str | None = None) -> bool:
    for scope, rule in rules:
        if scope != CLUSTER and scope != namespace:
            continue
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            names = rule.get("resourceNames")
            if not names or name in names:
                return True
    return False
