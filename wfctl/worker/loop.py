"""What every worker loop shares: the engine, clock, outage and stop requests of its worker; passes of
`run_once(now)`, errors caught per pass, capped back-off."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from wfctl.errors import StoreUnavailable
from wfctl.ops import log

if TYPE_CHECKING:
    from wfctl.engine import Engine

# After a failed pass a loop waits this long, doubling up to the cap; a good pass starts over.
BACKOFF_FIRST = 0.1
BACKOFF_CAP = 5.0
T = TypeVar("T")


class Backoff:
    """Waits after consecutive failures: 0.1 s doubling up to 5 s."""

    def __init__(self, first: float = BACKOFF_FIRST, cap: float = BACKOFF_CAP) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next(self) -> float:
        wait, self._next = self._next, min(self.cap, self._next * 2)
        return wait

    def reset(self) -> None:
        self._next = self.first


class Outage:
    """The database refusing writes (busy, full, read-only, I/O error), as one episode.

    Every thread of the worker reports here, yet an outage is logged once when it starts and
    once when a write succeeds again, however many retries it took.
    """

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._since: float | None = None

    @property
    def active(self) -> bool:
        return self._since is not None

    def instant(self) -> float:
        """Now, as `recovered(began=...)` takes it: read before a write is begun."""
        return self._monotonic()

    def writing(self) -> _Writing:
        """Around one write: the database being unavailable starts an outage (the error goes
        on to the caller, who backs off), and the write's success ends one."""
        return _Writing(self)

    def failed(self, error: StoreUnavailable) -> None:
        with self._lock:
            if self._since is not None:
                return
            self._since = self._monotonic()
        # A server out of reach (a restart, a lost connection) is ridden out by reconnecting: a
        # warning. A database refusing writes needs someone to act: an error.
        level = logging.WARNING if error.reason == "unreachable" else logging.ERROR
        log.event("database_unavailable", level, reason=error.reason, message=str(error),
                  action="backing off (up to 5 s) and retrying; results are kept until written")

    def recovered(self, began: float | None = None) -> None:
        """A write succeeded: if an outage was under way, it is over. A write `began` before
        the outage was noticed (committed just as the server went away) proves nothing."""
        if self._since is None:
            return
        with self._lock:
            if self._since is None or (began is not None and began < self._since):
                return
            since, self._since = self._since, None
        if since is not None:
            log.event("database_available", after_seconds=round(self._monotonic() - since, 1))


class _Writing:
    """`Outage.writing`, as a context manager: a class, since the step path enters one for
    each batch."""

    __slots__ = ("began", "outage")

    def __init__(self, outage: Outage) -> None:
        self.outage = outage

    def __enter__(self) -> None:
        self.began = self.outage._monotonic()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if kind is None:
            self.outage.recovered(self.began)
        elif isinstance(error, StoreUnavailable):
            self.outage.failed(error)


@dataclass(frozen=True, slots=True, eq=False)
class Shared:
    """What the loops of one worker share: the engine and the turn at its decisions (slots, the
    watchdog and the deadline runner take turns), the worker's id and clock (every instant it
    acts at is read from it), the database outage, and the requests to stop: `stopping` (claim
    nothing new) and `forced` (stop now)."""

    engine: Engine
    worker_id: str
    clock: Callable[[], datetime]
    outage: Outage
    turn: threading.Lock
    stopping: threading.Event
    forced: threading.Event


def until_written(shared: Shared, write: Callable[[], T]) -> tuple[bool, T | None]:
    """`write()` at the engine, tried again while the database is unavailable (backing off,
    capped) until it succeeds: (True, what it returned); or (False, None) once the worker is
    told to stop at once. What was computed before is kept meanwhile, never lost."""
    backoff = Backoff()
    while True:
        try:
            with shared.outage.writing(), shared.turn:
                value = write()
        except StoreUnavailable:
            if shared.forced.wait(backoff.next()):
                return False, None
            continue
        return True, value


class Loop:
    """One job of the worker, done in passes.

    `run_once(now)` does one pass and says whether it acted; `run()` repeats it until the loop
    is stopped (or, for a slot in a `work --once` pass, until the pass is over), waiting on
    `wakeup` between passes (`pause` says how long), never sleeping blind. Whatever goes wrong
    in a pass is logged once with its traceback and backed off from; the database being
    unavailable is reported to the worker's `Outage` instead. A loop is given what it uses:
    the worker's `Shared` and whatever else its job needs.
    """

    name = "loop"
    # Whether a pass that acted wrote to the database (so that an outage is known to be over).
    writes = True

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.wakeup = threading.Event()
        self.stopped = threading.Event()
        self._backoff = Backoff()
        self._failure: str | None = None
        self._failures = 0

    def run_once(self, now: datetime) -> bool:
        raise NotImplementedError

    def pause(self, acted: bool) -> float:
        """Seconds to wait after a good pass: none after one that acted, else `idle_wait`."""
        return 0.0 if acted else self.idle_wait()

    def idle_wait(self) -> float:
        return 1.0

    def wake(self) -> None:
        self.wakeup.set()

    def stop(self) -> None:
        self.stopped.set()
        self.wakeup.set()

    def run(self, one_pass: Callable[[datetime], bool] | None = None, *,
            until: Callable[[], bool] | None = None) -> None:
        """Pass after pass (of `one_pass`, `run_once` unless told) until the loop is stopped,
        or, given `until`, until a pass followed by a wait (one that did nothing, or failed)
        finds `until()` true."""
        while not self.stopped.is_set():
            # Cleared before the pass, so that a wake-up during the pass is not lost.
            self.wakeup.clear()
            wait = self.guarded_pass(one_pass)
            if wait > 0:
                if until is not None and until():
                    return
                self.wakeup.wait(wait)

    def guarded_pass(self, one_pass: Callable[[datetime], bool] | None = None) -> float:
        """One pass (of `one_pass`, `run_once` unless told); returns how long to wait before
        the next."""
        began = self.shared.outage.instant()
        try:
            acted = (one_pass or self.run_once)(self.shared.clock())
            wait = self.pause(acted)
        except Exception as exc:
            return self.failed(exc)
        if acted and self.writes:
            self.shared.outage.recovered(began)
        if self._failures:
            log.event("loop_recovered", loop=self.name, failed_passes=self._failures)
            self._failure, self._failures = None, 0
        self._backoff.reset()
        return wait

    def failed(self, error: Exception) -> float:
        if isinstance(error, StoreUnavailable):
            self.shared.outage.failed(error)
        else:
            self._failures += 1
            what = f"{type(error).__name__}: {error}"
            # The same failure again and again is logged once, until the loop recovers.
            if what != self._failure:
                self._failure = what
                log.failure("loop_failed", error, loop=self.name,
                            action="backing off (up to 5 s) and retrying")
        return self._backoff.next()
