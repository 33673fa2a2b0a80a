"""Admission decisions: an AdmissionReview in, a response out.

The decisions themselves are :mod:`podgang.rules`; this module reads the review,
fetches what the rules need (owners, through the cache), creates the PodGroup of an
owner-less pod, and writes the answer: a JSONPatch built directly from the decision
(never by diffing documents), or a denial carrying the rule's message verbatim.

Nothing here raises on bad input except :func:`parse_review` (with
:class:`BadReview`, which the server answers with HTTP 400).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import random
import string
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import orjson

from podgang import kinds, rules
from podgang.backends import Backend
from podgang.events import EventSink
from podgang.settings import Settings

from podgang.webhook.owners import NOTE, ROLES, OwnerCache, OwnerLookupFailed
from podgang.webhook.podgroups import Existence, Outcome, PodGroups

log = logging.getLogger("podgang.webhook")

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
MAX_OWNER_DEPTH = 8
NAME_ATTEMPTS = 4
DEFAULT_REVIEW_TIMEOUT = 10.0  # the apiserver's default timeoutSeconds
TIMEOUT_MARGIN = 0.5  # answer this long before the apiserver gives up
SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
REPLAY_SIZE = 4096


# ---------------------------------------------------------------------------
# the review


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer; the message is one line."""


@dataclass(slots=True)
class Review:
    uid: str
    operation: str
    kind: str  # request.kind.kind, e.g. "Pod"
    group: str  # request.kind.group, "" for core
    sub_resource: str
    namespace: str
    obj: dict[str, Any] | None
    old: dict[str, Any] | None
    dry_run: bool

    @property
    def is_pod(self) -> bool:
        return self.kind == "Pod" and self.group == "" and not self.sub_resource


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        pass
    try:  # orjson refuses integers beyond 64 bits; the stdlib does not
        doc = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadReview(f"the body is not JSON: {str(exc).splitlines()[0][:200]}") from None
    # the stdlib also accepts an escaped lone UTF-16 surrogate ("\\ud800"), which is no
    # Unicode text: a uid, name or namespace holding one could be neither echoed nor logged
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadReview("the body is not valid JSON text: it holds a lone UTF-16 surrogate escape") from None
    except (ValueError, RecursionError):
        pass
    return doc


def parse_review(body: bytes) -> Review:
    """The parts of an ``admission.k8s.io/v1`` AdmissionReview the webhook reads."""
    if not body:
        raise BadReview("the body is empty: expected an admission.k8s.io/v1 AdmissionReview")
    doc = _loads(body)
    if not isinstance(doc, dict):
        raise BadReview(f"the body is JSON {type(doc).__name__}, not an AdmissionReview object")
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version != API_VERSION:
        raise BadReview(f"apiVersion {_show(api_version)} is not supported: expected {API_VERSION}")
    if kind != KIND:
        raise BadReview(f"kind {_show(kind)} is not supported: expected {KIND}")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise BadReview("the AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("the AdmissionReview request has no uid")
    gvk = request.get("kind")
    gvk = gvk if isinstance(gvk, dict) else {}
    obj, old = request.get("object"), request.get("oldObject")
    namespace = request.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        md = obj.get("metadata") if isinstance(obj, dict) else None
        namespace = md.get("namespace") if isinstance(md, dict) else None
    return Review(
        uid=uid,
        operation=str(request.get("operation") or ""),
        kind=str(gvk.get("kind") or ""),
        group=str(gvk.get("group") or ""),
        sub_resource=str(request.get("subResource") or ""),
        namespace=namespace if isinstance(namespace, str) else "",
        obj=obj if isinstance(obj, dict) else None,
        old=old if isinstance(old, dict) else None,
        dry_run=request.get("dryRun") is True,
    )


def _show(value: Any) -> str:
    return repr(value)[:80] if value is not None else "(missing)"


# ---------------------------------------------------------------------------
# the answer


@dataclass(slots=True)
class Verdict:
    allowed: bool
    verdict: str  # see podgang.metrics.VERDICTS
    reason: str
    group: str | None = None
    patch: list[dict[str, Any]] = field(default_factory=list)
    message: str | None = None  # the denial the user sees
    warnings: list[str] = field(default_factory=list)
    encoded_patch: tuple[str, int] | None = None  # (base64, decoded size), once computed

    def patch_base64(self) -> tuple[str, int] | None:
        """The JSONPatch as the response carries it (base64) and its size; encoded once."""
        if self.encoded_patch is None and self.patch:
            raw = orjson.dumps(self.patch)
            self.encoded_patch = (base64.b64encode(raw).decode("ascii"), len(raw))
        return self.encoded_patch


def skip(reason: str) -> Verdict:
    return Verdict(True, "skipped", reason)


def deny(message: str) -> Verdict:
    return Verdict(False, "denied", message, message=message)


DENIAL_CODE = 403  # what controller-runtime (KAI's webhook) answers; kubectl shows "(Forbidden)"


def encode_response(uid: str, verdict: Verdict) -> tuple[bytes, int]:
    """The AdmissionReview answer, and the size of the (decoded) JSONPatch."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    patch_size = 0
    encoded = verdict.patch_base64()
    if encoded is not None:
        response["patchType"] = "JSONPatch"
        response["patch"], patch_size = encoded
    if not verdict.allowed:
        response["status"] = {
            "status": "Failure",
            "code": DENIAL_CODE,
            "reason": "Forbidden",
            "message": verdict.message or verdict.reason,
        }
    if verdict.warnings:
        response["warnings"] = [bounded_warning(w) for w in verdict.warnings]  # whoever made them
    return orjson.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response}), patch_size


MAX_WARNING = 256  # characters: the apiserver's limit for one admission warning


def bounded_warning(text: str) -> str:
    """One admission warning as the apiserver passes it on: a single printable line
    (it travels in a ``Warning`` header) of at most :data:`MAX_WARNING` characters."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return text if len(text) <= MAX_WARNING else text[: MAX_WARNING - 1] + "…"


def _replay_key(review: Review) -> tuple[str, bytes] | None:
    """What an owned pod's decision depends on: everything in the pod but its
    ``managedFields`` (they carry a timestamp, and no rule reads them), and the
    namespace. Pods a controller stamps from one template share it; the rules are
    pure, so the same key always yields the same gang while the owners it was
    derived from are cached. None when the object cannot be keyed.

    The pod is kept as a 128-bit digest, not as its bytes: a full table of
    :data:`REPLAY_SIZE` whole pods (every StatefulSet pod differs) would be
    hundreds of megabytes.
    """
    pod = review.obj
    md = pod.get("metadata") if pod is not None else None
    if isinstance(md, dict):
        md.pop("managedFields", None)  # our own parsed copy; the patch never touches it
    try:
        return review.namespace, hashlib.blake2b(orjson.dumps(pod), digest_size=16).digest()
    except (TypeError, orjson.JSONEncodeError):
        return None


def pod_label(pod: Any) -> str:
    md = pod.get("metadata") if isinstance(pod, dict) else None
    if not isinstance(md, dict):
        return ""
    return str(md.get("name") or md.get("generateName") or "")


_random = random.Random()  # seeded from the OS; names need to differ, not to be secret


def _deadline(budget: float | Callable[[], float]) -> float:
    """When API calls must end: ``budget`` seconds (the apiserver's wait, or a function
    that says) less a margin to answer in, from now."""
    return time.monotonic() + max(0.05, (budget() if callable(budget) else budget) - TIMEOUT_MARGIN)


def random_suffix(length: int = 5) -> str:
    return "".join(_random.choices(SUFFIX_ALPHABET, k=length))


# ---------------------------------------------------------------------------
# validation (pure)


def validate(review: Review, settings: Settings, owners: list[dict[str, Any]] | tuple = ()) -> Verdict:
    """The validating webhook (CREATE, UPDATE of pods): contradictory GPU requests,
    a hand-made group named two ways, a group changed or removed on UPDATE.

    On UPDATE a problem the pod already had is not held against it (a pod admitted
    while the webhook was down must still be deletable, its finalizers removable).
    ``owners``: the pod's owner objects, when looked up (a workload labelled
    ``podgang.io/skip=true`` puts its pods out of scope, as in mutate).
    """
    if review.operation not in ("CREATE", "UPDATE") or not review.is_pod:
        return skip(f"{review.operation or 'no operation'} of {review.kind or 'no kind'}: not validated")
    pod = review.obj
    if pod is None:
        return skip("no object in the request")
    out_of_scope = rules.scope_problem(pod, review.namespace, settings, owners)
    if out_of_scope:
        return skip(out_of_scope)
    updating = review.operation == "UPDATE" and review.old is not None
    gpu = rules.gpu_problem(pod, settings)
    if gpu and not (updating and rules.gpu_problem(review.old, settings) == gpu):
        return Verdict(False, "denied", f"{gpu} (KAI {settings.kai_version}'s GPU rules: {settings.kai_version_source})",
                       message=gpu)
    named = rules.hand_made_group(pod, settings)
    if isinstance(named, rules.Denial) and not (updating and rules.hand_made_group(review.old, settings) == named):
        return deny(named.message)
    if updating:
        backend = settings.backend_for(pod)
        change = backend.membership_change_problem(review.old, pod) if backend is not None else None
        if change:
            return deny(change)
    group = named if isinstance(named, str) else rules.group_of(pod, settings)
    return Verdict(True, "allowed", "no contradiction", group=group)


# ---------------------------------------------------------------------------
# mutation (needs the API for owners and owner-less PodGroups)


class Admission:
    """Decides admission reviews with the rules, the owner cache and the API."""

    def __init__(
        self,
        settings: Settings,
        owners: OwnerCache,
        podgroups: PodGroups,
        *,
        api_timeout: float = 2.0,
        events: EventSink | None = None,
    ):
        self.settings = settings
        self.owners = owners
        self.podgroups = podgroups
        self.api_timeout = api_timeout
        self.events = events
        # owned pods identical to one already decided (a ReplicaSet's pods, say) get the
        # same answer without walking the rules again; see _replay_key
        self._replay: OrderedDict[tuple[str, bytes], tuple[float, str, str, tuple[str, int] | None]] = OrderedDict()

    async def validate(self, review: Review, *, budget: float | Callable[[], float] = DEFAULT_REVIEW_TIMEOUT) -> Verdict:
        """:func:`validate`; a denial is checked once more with the pod's owners (looked
        up through the cache only then: most pods are allowed), so that a workload
        labelled ``podgang.io/skip=true`` keeps its pods out of scope here as in mutate.
        When the owners cannot be looked up the denial stands."""
        verdict = validate(review, self.settings)
        if verdict.allowed or review.obj is None:
            return verdict
        return await self._deny_in_scope(review, verdict, [], _deadline(budget))

    async def _deny_in_scope(self, review: Review, denial: Verdict, chain: list[dict[str, Any]],
                             deadline: float) -> Verdict:
        """``denial``, unless an owner labelled ``podgang.io/skip=true`` puts the pod out
        of scope (one scope decision for mutate and validate). ``chain``: the owners
        looked up so far; none yet, they are looked up now (only a denial needs them for
        a hand-made pod). When they cannot be looked up the denial stands."""
        pod = review.obj
        if not chain and rules.next_owner(pod) is not None:
            try:
                chain = await self._owner_chain(pod, review.namespace, deadline)
            except OwnerLookupFailed as exc:
                denial.reason += f"; its owners could not be checked for {self.settings.skip_label}: {exc}"
                return denial
        skipped = rules.owner_skip_problem(chain, self.settings)
        return skip(skipped) if skipped else denial

    async def mutate(self, review: Review, *, budget: float | Callable[[], float] = DEFAULT_REVIEW_TIMEOUT) -> Verdict:
        """The mutating webhook (CREATE of pods): membership per spec §2.

        ``budget``: seconds until the apiserver gives up on this review (or a function
        that says, called only when API calls may be needed); API calls are cut short
        to answer before that.
        """
        if review.operation != "CREATE" or not review.is_pod:
            return skip(f"{review.operation or 'no operation'} of {review.kind or 'no kind'}: not mutated")
        pod = review.obj
        if pod is None:
            return skip("no object in the request")
        key = _replay_key(review)
        if key is not None:
            replay = self._replay.get(key)
            if replay is not None:
                if replay[0] > time.monotonic():
                    self.owners.metrics.decisions_replayed.inc()
                    verdict = "patched" if replay[3] is not None else "allowed"
                    return Verdict(True, verdict, replay[2], group=replay[1], encoded_patch=replay[3])
                del self._replay[key]
        settings = self.settings
        out_of_scope = rules.scope_problem(pod, review.namespace, settings)
        if out_of_scope:
            return skip(out_of_scope)
        backend = settings.backend_for(pod)
        assert backend is not None  # in scope: its scheduler is mapped
        deadline = _deadline(budget)
        named = rules.hand_made_group(pod, settings)
        if isinstance(named, rules.Denial):
            return await self._deny_in_scope(review, deny(named.message), [], deadline)
        chain: list[dict[str, Any]] = []
        gang: rules.Gang | rules.Denial | None = None
        if named is not None:
            # the name podgang itself gives this pod (an earlier invocation's patch seen
            # again on reinvocation, or an exported pod applied again) is no hand-made group
            gang, chain = await self._own_gang(pod, named, review.namespace, deadline)
        if gang is None:
            if named is None:
                try:
                    chain = await self._owner_chain(pod, review.namespace, deadline)
                except OwnerLookupFailed as exc:
                    self.owners.metrics.owner_lookup_failures.inc()
                    return Verdict(True, "degraded", f"owner look-up failed, pod admitted without a group: {exc}")
            gang = rules.gang_for_pod(pod, chain, settings=settings, name_suffix=random_suffix())
        owner_skipped = rules.owner_skip_problem(chain, settings)
        if owner_skipped:  # spec §1: a pod *or workload* label
            return skip(owner_skipped)
        if isinstance(gang, rules.Denial):
            return await self._deny_in_scope(review, deny(gang.message), chain, deadline)
        unfit = backend.membership_problem(gang.name)
        if unfit:
            return await self._deny_in_scope(review, deny(unfit), chain, deadline)
        verdict = Verdict(True, "patched", gang.reason, group=gang.name)
        verdict.warnings.extend(o[NOTE] for o in chain if isinstance(o.get(NOTE), str))
        if gang.hand_made:
            await self._check_hand_made(gang.name, review.namespace, backend, deadline, verdict)
        elif gang.owner_less:
            options = self.podgroups.options_for(pod, backend)
            verdict.warnings += options.get("problems") or ()
            verdict.warnings += self.podgroups.never_placed(pod, backend, options)
            # a pod the validating webhook refuses (a GPU conflict) never exists: no group for it
            # (else made now, the pod refused, and the group reaped as an orphan later)
            refused = validate(review, settings, chain)
            if not refused.allowed:
                verdict.reason += f"; no PodGroup created: the pod is refused ({refused.message})"
            elif not review.dry_run:
                await self._create_owner_less(pod, chain, review.namespace, backend, deadline, verdict,
                                              named=named is not None, options=options)
        if verdict.group is not None:
            verdict.patch = backend.membership_patch(pod, verdict.group)
            if gang.hand_made:
                await self._join_subgroup(pod, gang, chain, review.namespace, backend, deadline, verdict)
            elif gang.leaf:
                # its replica's leaf, always from admission: the group lists it before or with its
                # pods, and until it does the scheduler leaves the pod be (no replica placed in part)
                verdict.patch = backend.with_subgroup(pod, verdict.patch, gang.subgroup, over_own=True)
            elif gang.source == rules.OWNED and gang.subgroup and (
                    not backend.subgroups_must_be_listed
                    or await self._group_lists(gang, chain, review.namespace, backend, deadline)):
                # its role in its workload's gang, in the same patch: the grouper writes no pod.
                # Where a pod naming a subgroup its group does not list is ignored (KAI), only a
                # subgroup the group lists or will list; the grouper labels the rest once it does
                verdict.patch = backend.with_subgroup(pod, verdict.patch, gang.subgroup)
        if not verdict.patch and verdict.verdict == "patched":
            verdict.verdict = "allowed"
        if key is not None and gang.source == rules.OWNED and verdict.group is not None:
            expires = self.owners.expiry(review.namespace, chain)
            self._replay[key] = (expires, verdict.group, verdict.reason, verdict.patch_base64())
            if len(self._replay) > REPLAY_SIZE:
                self._replay.popitem(last=False)
        return verdict

    async def _own_gang(
        self, pod: dict[str, Any], named: str, namespace: str, deadline: float
    ) -> tuple[rules.Gang | None, list[dict[str, Any]]]:
        """The owned or owner-less gang ``named`` is, when it is the very name podgang
        gives this pod (ignoring the keys it carries); else None."""
        settings = self.settings
        prefix = f"{settings.group_prefix}-" if settings.group_prefix else ""
        bare = rules.without_membership(pod, settings)
        if not named.startswith(prefix) and named != kinds.spark_app_group(bare):
            return None, []
        if rules.next_owner(bare) is None:
            md = rules.metadata(bare)
            name, generate = md.get("name"), md.get("generateName")
            spark = kinds.spark_app_group(bare)
            if spark is not None:  # a Spark pod run without an operator: its selector names its group
                candidates = (spark,)
            elif isinstance(name, str) and name:
                # pg-<name>, or pg-<name>-<5 random> when pg-<name> belonged to someone else
                candidates = (rules.owner_less_group_name(name, settings), rules.group_name(name, named[-6:], settings))
            elif isinstance(generate, str) and generate:
                candidates = (rules.group_name(generate, named[-5:], settings),)
            else:
                candidates = ()
            if named not in candidates:
                return None, []
            gang = rules.gang_for_pod(bare, settings=settings, name_suffix=named[-5:])
            if not isinstance(gang, rules.Gang):
                return None, []
            return rules.Gang(named, gang.source, f"{gang.reason}; already named {named} by podgang", subgroup=gang.subgroup), []
        try:
            chain = await self._owner_chain(bare, namespace, deadline)
        except OwnerLookupFailed:
            return None, []
        gang = rules.gang_for_pod(bare, chain, settings=settings)
        if isinstance(gang, rules.Gang) and gang.source == rules.OWNED and gang.name == named:
            return gang, chain
        return None, []

    async def _subgroup(self, pod: dict[str, Any], gang: rules.Gang, chain: list[dict[str, Any]], namespace: str,
                        backend: Backend, deadline: float) -> str | None:
        """The subgroup of a pod in a hand-made group: the one it names, else its top
        workload's (looked up now: a hand-made pod's owners are not needed otherwise),
        else ``standalone``; None when the scheduler has no subgroups or the look-up failed."""
        if backend.subgroup_key is None or backend.subgroup_of(pod) is not None or chain:
            return gang.subgroup
        if rules.next_owner(pod) is None:
            return gang.subgroup
        try:
            chain = await self._owner_chain(pod, namespace, deadline)
        except OwnerLookupFailed:
            self.owners.metrics.owner_lookup_failures.inc()
            return None  # the grouper counts the pod by its owner all the same
        found = rules.gang_for_pod(pod, chain, settings=self.settings)
        return found.subgroup if isinstance(found, rules.Gang) else None

    async def _group_lists(self, gang: rules.Gang, chain: list[dict[str, Any]], namespace: str,
                           backend: Backend, deadline: float) -> bool:
        """Whether the workload's own group lists the pod's subgroup, or will once the grouper
        makes it: it exists and lists it, or it does not exist yet and the workload's roles
        (as the grouper writes them: none while podgang.io/min-member pins the whole gang)
        name it. A group that exists without it, or could not be read: not yet."""
        top = chain[-1] if chain else {}
        if gang.subgroup not in (top.get(ROLES) or ()):  # rules.own_subgroup_names, read before trimming
            return False  # not a subgroup the grouper writes into the workload's group
        state, _ = await self.podgroups.exists(namespace, gang.name, backend, timeout=self._left(deadline))
        if state is Existence.EXISTS:
            return gang.subgroup in (self.podgroups.listed_subgroups(namespace, gang.name, backend) or ())
        return state is Existence.MISSING

    async def _join_subgroup(self, pod: dict[str, Any], gang: rules.Gang, chain: list[dict[str, Any]],
                             namespace: str, backend: Backend, deadline: float, verdict: Verdict) -> None:
        """A pod of a hand-made group gets its subgroup key only for a subgroup the group
        lists (KAI ignores a pod whose subgroup its PodGroup lacks): the grouper labels
        the rest once it writes their subgroups into the group. A pod that names a
        subgroup itself which the group does not list gets a warning."""
        if backend.subgroup_key is None:
            return
        if kinds.carries_replica_label(pod) and backend.holds_trees:
            # a replica of several pods (an LWS group): its leaf, told from its owners
            if not chain and rules.next_owner(pod) is not None:
                try:
                    chain = await self._owner_chain(pod, namespace, deadline)
                except OwnerLookupFailed:
                    self.owners.metrics.owner_lookup_failures.inc()
            found = rules.gang_for_pod(pod, chain, settings=self.settings)
            if isinstance(found, rules.Gang) and found.leaf:
                verdict.patch = backend.with_subgroup(pod, verdict.patch, found.subgroup, over_own=True)
                return
        listed = self.podgroups.listed_subgroups(namespace, gang.name, backend)
        own = backend.subgroup_of(pod)
        if own is not None:
            if listed is not None and own not in listed:
                verdict.warnings.append(rules.unlisted_subgroup_warning(own, gang.name, sorted(listed)))
            return
        if not listed:
            return
        subgroup = await self._subgroup(pod, gang, chain, namespace, backend, deadline)
        if subgroup in listed:
            verdict.patch = backend.with_subgroup(pod, verdict.patch, subgroup)

    async def _owner_chain(self, pod: dict[str, Any], namespace: str, deadline: float) -> list[dict[str, Any]]:
        chain: list[dict[str, Any]] = []
        for _ in range(MAX_OWNER_DEPTH):
            ref = rules.owner_to_look_up(pod, chain)
            if ref is None:
                return chain
            chain.append(await self.owners.get(namespace, ref, timeout=self._left(deadline)))
        raise OwnerLookupFailed(f"the ownerReference chain is deeper than {MAX_OWNER_DEPTH}")

    async def _check_hand_made(self, name: str, namespace: str, backend: Backend, deadline: float,
                               verdict: Verdict) -> None:
        state, detail = await self.podgroups.exists(namespace, name, backend, timeout=self._left(deadline))
        if state is Existence.MISSING:
            verdict.warnings.append(rules.missing_group_warning(name, namespace, detail or None))
            verdict.reason += "; the PodGroup does not exist yet"
        elif state is Existence.UNKNOWN:
            verdict.reason += f"; could not check that the PodGroup exists: {detail}"
        elif detail:  # a role the group requires that no workload fills yet
            verdict.warnings.append(detail)

    async def _create_owner_less(
        self,
        pod: dict[str, Any],
        chain: list[dict[str, Any]],
        namespace: str,
        backend: Backend,
        deadline: float,
        verdict: Verdict,
        *,
        named: bool = False,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """``named``: the pod already names this group itself; one that exists and is
        not podgang's is then the group the user meant, and the pod joins it. ``options``:
        the scheduler's settings for the group (:meth:`PodGroups.options_for`)."""
        name = verdict.group or ""
        pod_name = (pod.get("metadata") or {}).get("name")
        taken: list[str] = []
        for _ in range(NAME_ATTEMPTS):
            result = await self.podgroups.create_for_pod(namespace, name, backend, options=options,
                                                         timeout=lambda: self._left(deadline))
            if result.outcome is Outcome.CREATED:
                verdict.group = name
                verdict.reason += f"; created PodGroup {name}"
                self._created_event(result.podgroup, namespace, name, pod, backend)
                break
            if result.outcome is Outcome.REUSED:
                verdict.group = name
                verdict.reason += f"; joined PodGroup {name}, which podgang already manages"
                break
            if result.outcome in (Outcome.FAILED, Outcome.OVER_BUDGET):
                verdict.group = name
                verdict.verdict = "degraded"
                verdict.reason += f"; PodGroup {name} not created (the grouper creates it): {result.detail}"
                break
            if named and not taken:
                verdict.group = name
                verdict.reason += f"; PodGroup {name} exists and is not podgang's: the pod joins it as it asks"
                break
            taken.append(name)
            if isinstance(pod_name, str) and pod_name:
                name = rules.group_name(pod_name, f"-{random_suffix()}", self.settings)
            else:
                again = rules.gang_for_pod(pod, chain, settings=self.settings, name_suffix=random_suffix())
                name = again.name if isinstance(again, rules.Gang) else name
        else:
            verdict.group = None
            verdict.verdict = "degraded"
            verdict.reason += f"; every name tried belongs to PodGroups podgang does not manage: {', '.join(taken)}"
            return
        if taken:
            verdict.reason += f" ({', '.join(taken)} exist and podgang does not manage them)"

    def _created_event(self, podgroup: dict[str, Any] | None, namespace: str, name: str, pod: dict[str, Any],
                       backend: Backend) -> None:
        if self.events is None:
            return
        obj = podgroup or self.podgroups.manifest_for_owner_less(namespace, name, backend)
        message = f"created for owner-less pod {pod_label(pod)} in namespace {namespace} (minMember 1)"
        self.events.emit(obj, "PodGroupCreated", message)

    def _left(self, deadline: float) -> float:
        """The timeout for the next API call: the configured one, cut to the time left."""
        return max(0.0, min(self.api_timeout, deadline - time.monotonic()))
