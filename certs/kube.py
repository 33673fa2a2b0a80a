"""``podgang certs ensure``: the webhook's CA and serving certificate, kept in a Secret.

One Secret (type ``kubernetes.io/tls``) is the single source of truth:

- ``tls.crt`` / ``tls.key`` — the serving certificate for the webhook Service,
- ``ca.crt`` — the CA bundle to trust: the current CA first, then older CAs that have
  not expired yet (what goes into every ``caBundle``),
- ``ca.key`` — the current CA's key, so any replica can renew the leaf.

:func:`ensure` creates the Secret when it is missing, renews the leaf when less than a
third of its validity is left (or it does not cover the Service's names, or does not
verify against the CA), and renews the CA when less than a third of *its* validity is
left, keeping the old CA in ``ca.crt`` until it expires so servers still presenting a
leaf of the old CA keep working during the rollout. Writes use optimistic concurrency
(create → 409 → re-read; replace with the read ``resourceVersion`` → 409 → re-read and
decide again), so replicas running at once end with one Secret. Then the ``caBundle``
of every webhook of the named Mutating/ValidatingWebhookConfigurations is patched when
it differs (each name read as the kind it was given as: the chart's RBAC allows each
name on its own kind only). Call :func:`write_files` only after :func:`ensure` returned: by then the
API server trusts the CA of the leaf being written.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import NameOID

from podgang.api import Api, ApiError, Conflict, Forbidden, Invalid, NotFound, Unauthorized
from podgang.certs import pki
from podgang.certs.files import CERT_MODE, KEY_MODE, atomic_write

log = logging.getLogger("podgang.certs")

SECRET_TYPE = "kubernetes.io/tls"
TLS_CERT, TLS_KEY, CA_CERT, CA_KEY = "tls.crt", "tls.key", "ca.crt", "ca.key"
MANAGED_BY = {"app.kubernetes.io/managed-by": "podgang"}

Clock = Union[dt.datetime, Callable[[], dt.datetime], None]


class EnsureError(Exception):
    """The Secret could not be read or written (one-line message)."""


@dataclass(frozen=True)
class CertBundle:
    """What a webhook server needs: PEM bytes, plus what :func:`ensure` did."""

    ca_pem: bytes  #: the bundle to trust / publish as caBundle (current CA first)
    cert_pem: bytes  #: the serving certificate
    key_pem: bytes  #: its private key
    actions: tuple[str, ...] = ()  #: one line per thing done (or "unchanged")
    errors: tuple[str, ...] = ()  #: webhook configurations that could not be patched
    renew_at: dt.datetime | None = None  #: run ensure again at this moment at the latest
    changed: bool = False  #: True when this call wrote the Secret

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass
class Decision:
    data: dict[str, bytes]  #: the four keys the Secret must hold
    actions: list[str]  #: empty: nothing to change
    ca: x509.Certificate
    bundle: list[x509.Certificate]
    leaf: x509.Certificate
    changed: bool = field(default=False)


def service_dns_names(service: str, namespace: str, cluster_domain: str = "cluster.local") -> list[str]:
    """``svc.ns.svc`` first (the name the API server dials), then the short and long forms."""
    names = [f"{service}.{namespace}.svc", service, f"{service}.{namespace}"]
    if cluster_domain:
        names.append(f"{service}.{namespace}.svc.{cluster_domain.strip('.')}")
    return names


def _clock(now: Clock) -> Callable[[], dt.datetime]:
    if now is None:
        return pki.utcnow
    if callable(now):
        return lambda: pki.as_utc(now())
    fixed = pki.as_utc(now)
    return lambda: fixed


def _fp(cert: x509.Certificate) -> bytes:
    return cert.fingerprint(hashes.SHA256())


def _ts(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- the decision (pure)


def decide(
    current: Mapping[str, bytes] | None,
    *,
    dns_names: Sequence[str],
    now: dt.datetime,
    days: int = 365,
    ca_days: int = 3650,
    key_type: str = "ec",
    published: Sequence[x509.Certificate] = (),
) -> Decision:
    """What the Secret's data must become at ``now`` given what it holds (None: no Secret).
    ``published``: the podgang CAs the webhook configurations trust now; a Secret made anew
    (deleted under running replicas) keeps those still valid, as a rotation keeps the old CA,
    so that a replica still serving the deleted Secret's leaf is trusted until it switches."""
    now = pki.as_utc(now)
    current = current or {}
    actions: list[str] = []
    old_bundle: list[x509.Certificate] = []
    ca = ca_key = None
    ca_problem: str | None = None

    if CA_CERT in current:
        try:
            old_bundle = pki.load_certs(current[CA_CERT], CA_CERT)
        except pki.CertError as exc:
            ca_problem = str(exc)
    if CA_KEY in current:
        try:
            ca_key = pki.load_key(current[CA_KEY], CA_KEY)
        except pki.CertError as exc:
            ca_problem = ca_problem or str(exc)
    fresh = not current.get(CA_CERT) and not current.get(CA_KEY)
    if fresh:
        ca_problem = "no CA yet"
    elif ca_problem is None:
        if ca_key is None:
            ca_problem = "ca.key is missing"
        else:
            matching = [c for c in old_bundle if pki.key_matches(c, ca_key) and pki.is_ca(c)]
            if not matching:
                ca_problem = "ca.key matches no CA certificate in ca.crt"
            else:
                ca = max(matching, key=lambda c: c.not_valid_before_utc)
                ca_problem = pki.needs_renewal(ca, now)
                if ca_problem:
                    ca_problem = f"CA {ca_problem}"

    # older CAs stay trusted until they expire: servers may still present their leaves
    keep = [c for c in (published if fresh else old_bundle) if pki.is_ca(c) and now < c.not_valid_after_utc]
    leaf_problem: str | None = None
    if ca is None or ca_problem:
        ca, ca_key = pki.make_ca(now=now, days=ca_days, key_type=key_type)
        bundle = [ca] + [c for c in keep if _fp(c) != _fp(ca)]
        if not fresh:
            kept = f" (old CA kept in ca.crt until it expires {_ts(min(c.not_valid_after_utc for c in keep))})" if keep else ""
            actions.append(f"renewed CA: {ca_problem}{kept}")
        leaf_problem = "new CA"
    else:
        bundle = [ca] + [c for c in keep if _fp(c) != _fp(ca)]
        if [_fp(c) for c in bundle] != [_fp(c) for c in old_bundle]:
            dropped = len(old_bundle) - len(bundle)
            what = f"dropped {dropped} expired or non-CA certificate(s)" if dropped > 0 else "current CA first"
            actions.append(f"rewrote ca.crt: {what}")

    leaf = leaf_key = None
    if leaf_problem is None:
        try:
            if not current.get(TLS_CERT) or not current.get(TLS_KEY):
                raise pki.CertError("tls.crt or tls.key is missing")
            leaf = pki.load_certs(current[TLS_CERT], TLS_CERT)[0]
            leaf_key = pki.load_key(current[TLS_KEY], TLS_KEY)
            leaf_problem = pki.leaf_problem(leaf, leaf_key, ca, dns_names=dns_names, now=now)
        except pki.CertError as exc:
            leaf_problem = str(exc)
    if leaf_problem:
        leaf, leaf_key = pki.make_leaf(ca, ca_key, dns_names=dns_names, now=now, days=days, key_type=key_type)
        if leaf_problem != "new CA":
            actions.append(f"renewed leaf: {leaf_problem}")
    if fresh:
        kept = f"; kept {len(keep)} CA(s) still in caBundle until they expire" if keep else ""
        actions.append(f"created CA ({pki.describe(ca)}) and leaf ({pki.describe(leaf)}){kept}")

    data = {
        TLS_CERT: pki.cert_pem(leaf) if leaf_problem else current[TLS_CERT],
        TLS_KEY: pki.key_pem(leaf_key) if leaf_problem else current[TLS_KEY],
        CA_CERT: pki.bundle_pem(bundle) if actions else current[CA_CERT],
        CA_KEY: pki.key_pem(ca_key) if actions else current[CA_KEY],
    }
    return Decision(data=data, actions=actions, ca=ca, bundle=bundle, leaf=leaf, changed=bool(actions))


def next_renewal(decision: Decision) -> dt.datetime:
    """The earliest moment :func:`decide` would change something if nothing else did."""
    moments = [pki.renew_at(decision.leaf), pki.renew_at(decision.ca), decision.leaf.not_valid_after_utc]
    moments += [c.not_valid_after_utc for c in decision.bundle[1:]]
    return min(moments)


def published_bundle(secret_bundle: Sequence[x509.Certificate], existing: bytes | None, now: dt.datetime) -> bytes:
    """The caBundle to publish: the Secret's bundle, plus any *newer* podgang CA already
    published (a replica that saw a newer Secret put it there; never take it away)."""
    out = list(secret_bundle)
    if existing and out:
        newest = max(c.not_valid_before_utc for c in out)
        have = {_fp(c) for c in out}
        try:
            published = pki.load_certs(existing)
        except pki.CertError:
            published = []
        for cert in published:
            cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            if (
                pki.is_ca(cert)
                and cn
                and str(cn[0].value).startswith(pki.CA_NAME_PREFIX)
                and cert.not_valid_before_utc > newest
                and now < cert.not_valid_after_utc
                and _fp(cert) not in have
            ):
                out.insert(0, cert)
                have.add(_fp(cert))
    return pki.bundle_pem(out)


# ---------------------------------------------------------------- the API

MUTATING = ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations")
VALIDATING = ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations")
WEBHOOK_CONFIGS = "/apis/admissionregistration.k8s.io/v1"


def _refusal(exc: ApiError, verb: str, what: str, needs: str) -> str:
    """One line for a call that failed: the permission it lacks when RBAC refused it."""
    if isinstance(exc, Forbidden):
        return f"forbidden: cannot {verb} {what}: the service account needs {needs}"
    if isinstance(exc, Unauthorized):
        return f"unauthorized: the API server rejected the credentials (while trying to {verb} {what})"
    if not exc.status:
        return f"cannot reach the API server to {verb} {what}: {exc.message}"
    return f"cannot {verb} {what}: HTTP {exc.status}: {exc.message or exc.reason}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    if not text:
        return b""
    try:
        return base64.b64decode(text)
    except ValueError:
        return b""


async def ensure(
    api_client: Any,
    *,
    namespace: str,
    secret: str,
    service: str,
    webhook_configs: Iterable[str] = (),
    mutating_configs: Iterable[str] = (),
    validating_configs: Iterable[str] = (),
    now: Clock = None,
    days: int = 365,
    ca_days: int = 3650,
    key_type: str = "ec",
    extra_dns_names: Sequence[str] = (),
    cluster_domain: str = "cluster.local",
    request_timeout: float = 10.0,
    max_attempts: int = 10,
) -> CertBundle:
    """Make the Secret hold a valid CA + leaf for ``service``, publish the CA bundle.

    ``api_client``: a ``kubernetes_asyncio.client.ApiClient``. ``now``: a datetime or a
    zero-argument callable returning one (defaults to the real clock).
    ``mutating_configs`` / ``validating_configs``: names of configurations of that one
    kind (only that kind is read and patched: what least-privilege RBAC allows);
    ``webhook_configs``: names looked up as both kinds (either may be missing; this
    needs get/patch on both). Raises :class:`EnsureError` when the Secret cannot be
    read or written; problems with a webhook configuration (missing, forbidden) are
    returned in ``errors`` after the Secret is settled and the other configurations
    are patched.
    """
    if isinstance(webhook_configs, str):
        webhook_configs = [webhook_configs]
    clock = _clock(now)
    api = Api(api_client, timeout=request_timeout)
    path = f"/api/v1/namespaces/{namespace}/secrets"
    dns_names = list(dict.fromkeys([*service_dns_names(service, namespace, cluster_domain), *extra_dns_names]))
    where = f"secrets/{secret} in namespace {namespace}"
    actions: list[str] = []
    decision: Decision | None = None
    changed = False
    # (kind, name) -> whether that kind alone is named (a name of either kind may miss one)
    either = list(dict.fromkeys(webhook_configs))
    strict = {(MUTATING, name): True for name in mutating_configs}
    strict.update({(VALIDATING, name): True for name in validating_configs})
    for name in either:
        for kind in (MUTATING, VALIDATING):
            strict.setdefault((kind, name), False)
    trusted: list[x509.Certificate] | None = None  # read only when the Secret must be made anew

    for _attempt in range(max_attempts):
        try:
            obj = await api.get(f"{path}/{secret}")
        except NotFound:
            obj = None
        except ApiError as exc:
            raise EnsureError(_refusal(exc, "get", where, f"get/update on secrets/{secret}")) from None
        current = {k: _unb64(v) for k, v in (obj.get("data") or {}).items()} if obj is not None else None
        if obj is None and trusted is None:
            trusted = await _published_cas(api, [config for config, alone in strict.items() if alone])
        decision = await asyncio.to_thread(
            decide, current, dns_names=dns_names, now=clock(), days=days, ca_days=ca_days, key_type=key_type,
            published=trusted or (),
        )
        if not decision.actions:
            break
        ours = {k: _b64(v) for k, v in decision.data.items()}
        try:
            if obj is None:
                body = {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": secret, "namespace": namespace, "labels": dict(MANAGED_BY)},
                    "type": SECRET_TYPE,
                    "data": ours,
                }
                await api.create(path, body)
            else:
                body = dict(obj)
                body["data"] = {**(body.get("data") or {}), **ours}
                body["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
                await api.replace(f"{path}/{secret}", body)  # carries the read resourceVersion
        except (Conflict, NotFound) as exc:
            # someone else created, changed or deleted it meanwhile: read again, decide again
            log.debug("conflict on %s (HTTP %s), re-reading", where, exc.status)
            continue
        except ApiError as exc:
            verb, needs = ("create", "create on secrets") if obj is None else ("update", f"get/update on secrets/{secret}")
            raise EnsureError(_refusal(exc, verb if exc.status else "write", where,
                                       f"{needs} in namespace {namespace}")) from None
        changed = True
        prefix = "created" if obj is None else "updated"
        actions.extend(f"secret {namespace}/{secret}: {a}" for a in decision.actions)
        log.info("%s %s: %s", prefix, where, "; ".join(decision.actions))
        break
    else:
        raise EnsureError(f"gave up on {where} after {max_attempts} conflicting writes")

    assert decision is not None
    if not changed:
        actions.append(
            f"secret {namespace}/{secret}: unchanged (leaf expires {_ts(decision.leaf.not_valid_after_utc)}, "
            f"CA expires {_ts(decision.ca.not_valid_after_utc)})"
        )

    errors: list[str] = []
    found: set[str] = set()
    for (kind, name), alone in strict.items():
        present, done, errs = await _publish(api, kind, name, decision.bundle, clock)
        actions.extend(done)
        errors.extend(errs)
        if present:
            found.add(name)
        elif alone:
            errors.append(f"{kind[0]} {name} not found")
    for name in either:
        if name not in found:
            errors.append(
                f"webhook configuration {name} not found: there is no MutatingWebhookConfiguration "
                f"or ValidatingWebhookConfiguration named {name}"
            )
    for line in errors:
        log.warning("%s", line)

    return CertBundle(
        ca_pem=decision.data[CA_CERT],
        cert_pem=decision.data[TLS_CERT],
        key_pem=decision.data[TLS_KEY],
        actions=tuple(actions),
        errors=tuple(errors),
        renew_at=next_renewal(decision),
        changed=changed,
    )


async def _published_cas(api: Api, configs: Sequence[tuple[tuple[str, str], str]]) -> list[x509.Certificate]:
    """The podgang CAs the named webhook configurations trust now (best effort: a
    configuration missing or not readable adds none; the publish step reports it)."""
    found: dict[bytes, x509.Certificate] = {}
    for (_, resource), name in configs:
        try:
            obj = await api.get(f"{WEBHOOK_CONFIGS}/{resource}/{name}")
        except ApiError:
            continue
        for hook in obj.get("webhooks") or ():
            try:
                certs = pki.load_certs(_unb64(((hook or {}).get("clientConfig") or {}).get("caBundle")))
            except pki.CertError:
                continue
            for cert in certs:
                cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
                if pki.is_ca(cert) and cn and str(cn[0].value).startswith(pki.CA_NAME_PREFIX):
                    found.setdefault(_fp(cert), cert)
    return list(found.values())


async def _publish(
    api: Api,
    kind: tuple[str, str],
    name: str,
    bundle: Sequence[x509.Certificate],
    clock: Callable[[], dt.datetime],
    max_attempts: int = 5,
) -> tuple[bool, list[str], list[str]]:
    """Patch ``caBundle`` of every webhook in the configuration ``kind`` called ``name``;
    (whether it exists, actions, errors)."""
    title, resource = kind
    what = f"{resource}/{name}"
    needs = f"get/patch on {resource}/{name}"
    path = f"{WEBHOOK_CONFIGS}/{resource}/{name}"
    for _attempt in range(max_attempts):
        try:
            obj = await api.get(path)
        except NotFound:
            return False, [], []
        except ApiError as exc:
            return True, [], [_refusal(exc, "get", what, needs)]
        ops: list[dict[str, Any]] = []
        webhooks = [h for h in obj.get("webhooks") or () if isinstance(h, Mapping)]
        for index, hook in enumerate(webhooks):
            existing = _unb64((hook.get("clientConfig") or {}).get("caBundle"))
            want = published_bundle(bundle, existing, clock())
            if existing != want:
                # the test pins the index to the webhook we read: a reordered list fails the patch
                ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": hook.get("name")})
                ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": _b64(want)})
        if not ops:
            return True, [f"caBundle of {title} {name} unchanged ({len(webhooks)} webhook(s))"], []
        try:
            await api.json_patch(path, ops)
        except (Conflict, Invalid, NotFound):
            continue  # changed under us: read again
        except ApiError as exc:
            return True, [], [_refusal(exc, "patch", what, needs)]
        log.info("patched caBundle of %s %s", title, name)
        return True, [f"patched caBundle of {title} {name} ({len(ops) // 2} of {len(webhooks)} webhook(s))"], []
    return True, [], [f"cannot patch {what}: it kept changing ({max_attempts} attempts)"]


# ---------------------------------------------------------------- files


def write_files(bundle: CertBundle, cert_dir: str | os.PathLike) -> list[str]:
    """Write ``ca.crt``, ``tls.key`` and ``tls.crt`` into ``cert_dir``, each atomically.

    Each file is replaced in one ``os.replace`` (never half-written), unchanged files
    are not touched, and ``tls.crt`` is replaced last: a server that reloads when
    ``tls.crt`` changes always finds the matching key already in place. Returns the
    names of the files that changed.
    """
    directory = Path(cert_dir)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    changed = []
    for name, data, mode in (
        (CA_CERT, bundle.ca_pem, CERT_MODE),
        (TLS_KEY, bundle.key_pem, KEY_MODE),
        (TLS_CERT, bundle.cert_pem, CERT_MODE),
    ):
        if atomic_write(directory / name, data, mode):
            changed.append(name)
    return changed
