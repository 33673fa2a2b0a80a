"""Leadership as the grouper's writers see it: every write is checked at the moment it is
sent, not when the reconcile that decided it began.

:class:`Leadership` is what the leader election tells (:mod:`podgang.grouper.leader`): a
term begins when the Lease is taken, each renewal that succeeds moves the deadline
(``renew_deadline`` seconds after the renewal was *sent*, by the local monotonic clock,
which goes on while the process is stopped), and a term ends when the Lease is lost or
handed back. A :class:`Fence` is bound to one term (its token): the grouper's
:class:`~podgang.api.Api`, its evictions and its event sink each receive the fence of the
term they were made in, and a write through it is refused (:class:`Fenced`) once that term
is over, another has begun, or its deadline has passed — a leader paused past its Lease
(SIGSTOP, a VM frozen, a long GC) that wakes up after a standby took over writes nothing,
whatever it had queued or was half-way through.

A process without leader election writes through :data:`OPEN`, a fence always held.
"""

from __future__ import annotations

import time
from typing import Callable

from podgang.api import ApiError


class Fenced(ApiError):
    """A write refused before it was sent: the term of leadership it was made under is
    over (or may be). Neither retried nor warned about: the process stops leading."""

    def __init__(self, why: str):
        super().__init__(0, "Fenced", why)


class Leadership:
    """The terms of leadership of one process, told by its leader election.

    ``renew_deadline``: seconds after a renewal was sent that the term stays good without
    another (shorter than the Lease duration, so a term ends before anyone may take the
    Lease). ``clock``: monotonic seconds; the same clock the renewals are timed with.
    """

    def __init__(self, renew_deadline: float, *, clock: Callable[[], float] = time.monotonic):
        self.renew_deadline = float(renew_deadline)
        self.clock = clock
        self.term = 0  # the current term's token (0: never led)
        self._leading = False
        self._good_until = float("-inf")

    def begin(self, renewed_at: float | None = None) -> "Fence":
        """A new term, the Lease just taken (``renewed_at``: when that write was sent;
        None: now); the fence of this term."""
        self.term += 1
        self._leading = True
        self.renewed(self.clock() if renewed_at is None else renewed_at)
        return Fence(self, self.term)

    def renewed(self, sent_at: float) -> None:
        """A renewal sent at ``sent_at`` succeeded: the term is good until the deadline after it."""
        self._good_until = max(self._good_until, sent_at + self.renew_deadline)

    def end(self) -> None:
        """The term is over: the Lease lost, given back, or not renewed in time."""
        self._leading = False
        self._good_until = float("-inf")

    def problem(self, term: int) -> str | None:
        """Why a write of ``term`` may not be sent now, or None."""
        if term != self.term:
            return f"leadership term {term} is over (term {self.term} began since)"
        if not self._leading:
            return f"leadership term {term} is over: the leader Lease was lost or given back"
        late = self.clock() - self._good_until
        if late >= 0:
            return (f"no renewal of the leader Lease within {self.renew_deadline:g}s "
                    f"({late:.1f}s past the renew deadline): another may hold it")
        return None


class Fence:
    """One term of leadership, as its writers hold it: :meth:`check` before every write."""

    def __init__(self, leadership: Leadership | None, term: int):
        self.leadership = leadership
        self.token = term

    def problem(self) -> str | None:
        """Why a write may not be sent now (None: it may)."""
        return None if self.leadership is None else self.leadership.problem(self.token)

    @property
    def held(self) -> bool:
        return self.problem() is None

    def check(self) -> None:
        """Raise :class:`Fenced` unless a write may be sent now."""
        why = self.problem()
        if why is not None:
            raise Fenced(why)


#: the fence of a process that does not elect a leader: always held
OPEN = Fence(None, 0)
