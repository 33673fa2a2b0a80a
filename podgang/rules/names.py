"""What a PodGroup may be called: a valid name, a group named after its owner, a hash when too long;
and whether an object's own name is one the apiserver takes (a name from a template that was
never expanded is not, and a group named after it would be a mangled one for an object that
never exists).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from podgang.objects import OwnerRef, annotations, clip, metadata, quoted
from podgang.settings import DEFAULT, Settings


MAX_NAME = 253


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")  # ASCII digits only; more than 18 is nonsense here


_NOT_NAME_CHARS = re.compile(r"[^a-z0-9.-]+")


HASH_LEN = 8


#: a variable of a template that was not expanded: ``$ITEM``, ``${ITEM}``, ``$(ITEM)``, ``{{ .Values.x }}``
_TEMPLATE_VARIABLE = re.compile(r"\$\{[^}]*\}?|\$\([^)]*\)?|\$[A-Za-z_][A-Za-z0-9_]*|\{\{.*?(\}\}|$)")


#: the longest ``generateName`` the apiserver keeps: it adds 5 random characters to 63
MAX_GENERATE_NAME = 58


MAX_MIN_MEMBER = 2**31 - 1  # a PodGroup's size is an int32


def is_valid_group_name(name: str) -> bool:
    """A DNS-1123 subdomain of at most 253 characters (what a PodGroup name must be)."""
    return isinstance(name, str) and 0 < len(name) <= MAX_NAME and _DNS_SUBDOMAIN.fullmatch(name) is not None


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_LEN]


def _trim_edges(text: str) -> str:
    return text.strip("-.")


def _clean_name(text: str) -> str:
    """``text`` with what a DNS-1123 subdomain cannot hold replaced or trimmed."""
    clean = _NOT_NAME_CHARS.sub("-", text.lower())
    clean = re.sub(r"[-.]*\.[-.]*", ".", clean)  # no empty labels, no '-' next to '.'
    return _trim_edges(clean)


def group_name(base: str, suffix: str = "", settings: Settings = DEFAULT) -> str:
    """``<prefix>-<base><suffix>`` as a valid DNS-1123 subdomain.

    A name that is already valid is kept as it is (KAI-compatible names stay
    exact). Any other is cleaned and cut to fit, and ends in a short hash of the
    whole so that different inputs keep different names: ``<head>-<hash>-<suffix>``
    (a suffix such as ``-group-3`` is kept readable at the end).
    """
    prefix = f"{settings.group_prefix}-" if settings.group_prefix else ""
    full = f"{prefix}{base}{suffix}"
    if is_valid_group_name(full):
        return full
    digest = _short_hash(full)
    tail = _trim_edges(_clean_name(suffix)[: MAX_NAME // 4])
    budget = MAX_NAME - HASH_LEN - 1 - (len(tail) + 1 if tail else 0)
    head = _trim_edges(_clean_name(f"{prefix}{base}")[:budget])
    return "-".join(part for part in (head, digest, tail) if part)


def owned_group_name(top: OwnerRef, suffix: str = "", settings: Settings = DEFAULT) -> str:
    """KAI-compatible ``pg-<topOwnerName>-<topOwnerUID>`` (+ suffix, e.g. an LWS group)."""
    return group_name(f"{top.name}-{top.uid}", suffix, settings)


def owner_less_group_name(pod_name: str, settings: Settings = DEFAULT) -> str:
    """``pg-<podName>`` for a pod nothing owns."""
    return group_name(pod_name, "", settings)


def generated_suffix(seed: str, length: int = 5) -> str:
    """A stable ``[a-z0-9]{length}`` derived from ``seed``.

    The webhook passes real randomness instead; this is for callers that need the
    same answer twice (``podgang plan``).
    """
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # like the apiserver's: no vowels, no 0/1/3
    number = int(hashlib.sha256(seed.encode()).hexdigest(), 16)
    out = []
    for _ in range(length):
        number, index = divmod(number, len(alphabet))
        out.append(alphabet[index])
    return "".join(out)


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


MAX_SUBGROUP_NAME = 63


def _role_name_ok(name: str) -> bool:
    return len(name) <= MAX_SUBGROUP_NAME and _DNS_LABEL.fullmatch(name) is not None


def name_problem(obj: Any) -> str | None:
    """Why the apiserver refuses ``obj``'s ``metadata.name`` (or its ``generateName``, when it
    has no name): not a DNS-1123 subdomain, which every kind podgang plans must have, saying so
    when it looks like a template variable never expanded. None when it takes it, or when
    there is neither (not this function's to say)."""
    md = metadata(obj)
    name, generate = md.get("name"), md.get("generateName")
    field, value = ("name", name) if name else ("generateName", generate)
    if not isinstance(value, str) or not value:
        return None
    # a prefix is checked as the apiserver checks it: its trailing '-' stands before the random part
    checked = value[:MAX_GENERATE_NAME] + "x" if field == "generateName" else value
    if is_valid_group_name(checked):
        return None
    text = (f"metadata.{field} {quoted(value)} is not a valid name: the apiserver refuses it (a DNS-1123 "
            f"subdomain: lowercase letters, digits, '-' and '.', beginning and ending with a letter or digit, "
            f"at most {MAX_NAME} characters), so it is never created")
    variable = _TEMPLATE_VARIABLE.search(value)
    if variable is not None:
        text += (f"; it looks like an unexpanded template variable ({clip(variable.group(0))}): expand it "
                 f"before planning (envsubst, sed, helm template)")
    return text
