"""Label and field selectors as the apiserver parses and applies them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any



from tests.emulator.resources import Obj
from tests.emulator.wire import bad_request, metadata_of


# --------------------------------------------------------------------------- selectors

_SELECTOR_TERM = re.compile(r"""^\s*(?:
      !\s*(?P<absent>[^\s,!=()]+)
    | (?P<skey>[^\s,!=()]+)\s+(?P<setop>in|notin)\s*\((?P<values>[^()]*)\)
    | (?P<ekey>[^\s,!=()]+)\s*(?P<eqop>==|=|!=)\s*(?P<value>[^\s,!=()]*)
    | (?P<present>[^\s,!=()]+)
    )\s*$""", re.X)

Matcher = Callable[[dict[str, str]], bool]


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` parentheses."""
    terms, depth, current = [], 0, []
    for ch in selector:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t for t in terms if t.strip()]


def _term_matcher(term: str) -> Matcher:
    m = _SELECTOR_TERM.match(term)
    if not m:
        raise bad_request(f"unable to parse requirement: {term.strip()!r}")
    if m["absent"]:
        key = m["absent"]
        return lambda labels: key not in labels
    if m["present"]:
        key = m["present"]
        return lambda labels: key in labels
    if m["skey"]:
        key, values = m["skey"], {v.strip() for v in m["values"].split(",") if v.strip()}
        if m["setop"] == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    key, value = m["ekey"], m["value"]
    if m["eqop"] == "!=":
        return lambda labels: labels.get(key) != value
    return lambda labels: labels.get(key) == value


def parse_label_selector(selector: str | None) -> Matcher:
    """Compile a label selector string (``=,==,!=,in,notin,key,!key``; comma = AND)."""
    matchers = [_term_matcher(t) for t in _split_terms(selector or "")]
    return lambda labels: all(m(labels) for m in matchers)


def label_selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Match a structured ``LabelSelector`` (matchLabels/matchExpressions); null matches none."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {"In": lambda: labels.get(key) in values,
              "NotIn": lambda: labels.get(key) not in values,
              "Exists": lambda: key in labels,
              "DoesNotExist": lambda: key not in labels}.get(op, lambda: False)()
        if not ok:
            return False
    return True


def _field_value(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(selector: str | None) -> Callable[[Obj], bool]:
    """Compile a field selector (``path=v``, ``path==v``, ``path!=v``; comma = AND)."""
    checks = []
    for term in _split_terms(selector or ""):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise bad_request(f"invalid field selector: {term!r}")
        path, op, value = m.groups()
        checks.append((path, op == "!=", value))
    return lambda obj: all((_field_value(obj, p) == v) != neg for p, neg, v in checks)


@dataclass
class ListFilter:
    """What one list/watch request wants to see."""

    namespace: str | None
    labels: Matcher
    fields: Callable[[Obj], bool]

    @classmethod
    def from_query(cls, namespace: str | None, query: dict[str, str]) -> ListFilter:
        return cls(namespace, parse_label_selector(query.get("labelSelector")),
                   parse_field_selector(query.get("fieldSelector")))

    def __call__(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = metadata_of(obj)
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        return self.labels(meta.get("labels") or {}) and self.fields(obj)
