"""Handler slots run attempts; the step path records their outcomes and claims the next ones, in batches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl import log
from wfctl.context import _NOTHING
from wfctl.engine.activities import RECORDED_ALREADY
from wfctl.engine.tasks import ActivityTask, Offer
from wfctl.errors import ActivityCancelled, StoreUnavailable
from wfctl.handlers import HandlerError, Outcome, format_traceback
from wfctl.worker.attempts import Attempt, AttemptObserver, Attempts
from wfctl.worker.executor import Executor
from wfctl.worker.loop import Backoff, Loop, Shared

if TYPE_CHECKING:
    from wfctl.engine import Engine

# The longest an idle slot waits before it looks for work again (commits wake it sooner).
IDLE_WAIT = 1.0
# How soon an idle slot looks again at an activity that is due but was not ready for it (past
# a schedule deadline, it waits for the watchdog's timeout): a moment, never at once.
DUE_LOOK = 0.05
# How often a slot whose outcome waits looks whether the engine turn is free: a combiner serves
# whatever waits before it lets go, so this matters only after other holders of the turn.
TURN_LOOK = 0.02
# How long a slot that combines goes on serving the others once its own next attempt is in hand.
LEAD_FOR = 0.002


class Slot(Loop):
    """One handler slot. Whatever its handler raises or returns ends the attempt (as a failure
    under the retry policy when it is not a result), and the slot goes on serving.

    A slot never touches the database itself: it hands each outcome to the worker's `StepPath`
    and gets its next attempt back from the same transaction. `observer`, when set, is told of
    each attempt's start and end (`work --metrics-port`).
    """

    def __init__(self, shared: Shared, name: str, *, steps: StepPath, attempts: Attempts,
                 executor: Executor, observer: AttemptObserver | None = None) -> None:
        super().__init__(shared)
        self.name = name
        self.steps = steps
        self.attempts = attempts
        self.executor = executor
        self.observer = observer
        self.attempt: Attempt | None = None
        # The attempt claimed for this slot along with its last outcome, to run next.
        self.held: Attempt | None = None
        # Set when the slot's handler outlived its attempt: the thread exits once it returns.
        self.abandoned = False
        # Set once the step path took this slot's exchange (one event for all of them).
        self._taken = threading.Event()

    def run_once(self, now: datetime, *, check_deadlines: bool = True) -> bool:
        """Run one attempt (claiming it, or deciding ready workflow tasks, first when none is
        held); False when nothing was ready. `check_deadlines`: whether what it decides and
        claims checks workflow deadlines (the long-running worker's passes do)."""
        attempt, self.held = self.held, None
        if attempt is None:
            if self.shared.stopping.is_set() or not self.steps.ready(now):
                return False
            exchange = Exchange(claim=True, check_deadlines=check_deadlines)
            self.steps.exchange(exchange, self._taken)
            if exchange.unavailable is not None:
                raise exchange.unavailable
            attempt = exchange.next
            if attempt is None:
                return exchange.decided > 0
        self.execute(attempt)
        return True

    def run(self, one_pass: Callable[[datetime], bool] | None = None, *,
            until: Callable[[], bool] | None = None) -> None:
        super().run(one_pass, until=until)
        # Stopped with an attempt claimed but not begun: give it back at once.
        attempt, self.held = self.held, None
        if attempt is not None:
            shared = self.shared
            try:
                with shared.turn:
                    shared.engine.release_activity(attempt.task, shared.clock(),
                                                   "worker_shutdown",
                                                   check_deadlines=attempt.check_deadlines)
            except StoreUnavailable as exc:
                shared.outage.failed(exc)
                self.attempts.ended(attempt, settled=False)
                return
            self.attempts.ended(attempt, settled=True)

    def idle_wait(self) -> float:
        with self.shared.engine.store.read() as tx:
            next_at = tx.next_activity_available_at(self.steps.queues)
        if next_at is None:
            return IDLE_WAIT
        due_in = (next_at - self.shared.clock()).total_seconds()
        return min(IDLE_WAIT, due_in) if due_in > 0 else DUE_LOOK

    def execute(self, attempt: Attempt) -> None:
        """Run a claimed attempt through the worker's executor and record how it ended."""
        self.attempt = attempt
        observer = self.observer
        if observer is not None:
            observer.started(attempt.task)
        settled = False
        try:
            try:
                outcome = self.executor.run(attempt.call(), attempt.heartbeats, attempt.abandon)
            except Exception as exc:
                # The executor itself failed (not the handler): the attempt fails all the same.
                outcome = Outcome(error=HandlerError.of(exc))
            attempt.handler_running = False
            if observer is not None:
                observer.finished(attempt, outcome)
            settled = self._report(attempt, outcome)
        finally:
            self.attempt = None
            self.attempts.ended(attempt, settled=settled)

    def _report(self, attempt: Attempt, outcome: Outcome) -> bool:
        """Record how the attempt ended (and take the next attempt with it); False when it
        could not be, so that the worker still holds it (and gives it back, or leaves it to
        its lease, when it stops)."""
        task = attempt.task
        if outcome.cancelled and attempt.abandon.is_set():
            _discarded(task, attempt.reason or "the attempt is no longer current")
            return True
        if outcome.cancelled:
            # Raised by the handler itself while its attempt was current: a failure like any.
            outcome = Outcome(error=HandlerError.of(
                ActivityCancelled("the handler raised ActivityCancelled"), with_traceback=False))
        pending = attempt.heartbeats.take_pending()
        details = {} if pending is _NOTHING else {"heartbeat_details": pending}
        exchange = Exchange(attempt=attempt, outcome=outcome, details=details, claim=True,
                            check_deadlines=attempt.check_deadlines)
        backoff = None
        while True:
            exchange.claim = not self.shared.stopping.is_set()
            self.steps.exchange(exchange, self._taken)
            if exchange.unavailable is None:
                break
            # Waited out: the outcome is kept until it is written (the engine rejects it then
            # if the attempt is no longer current).
            backoff = backoff or Backoff()
            if self.shared.forced.wait(backoff.next()):
                log.event("activity_result_not_recorded", logging.WARNING,
                          instance=task.workflow_instance_id, step=task.step,
                          attempt=task.attempt,
                          reason="stopped while the database was unavailable")
                return False
            exchange = Exchange(attempt=attempt, outcome=outcome, details=details,
                                check_deadlines=attempt.check_deadlines)
        self.held = exchange.next
        if exchange.rejected:
            _discarded(task, exchange.rejected)
        return exchange.recorded


@dataclass(eq=False)
class Exchange:
    """A slot's turn at the step path: the outcome of the attempt it ran, if any, and whether
    it takes a next attempt, and whether its pass checks workflow deadlines; the step path
    fills in the rest."""

    attempt: Attempt | None = None
    outcome: Outcome | None = None
    details: dict[str, Any] = field(default_factory=dict)
    claim: bool = False
    check_deadlines: bool = False
    # Set by the batch that took it, and then `taken`, the waiting slot's event; `thread`:
    # the slot's (`threading.get_ident`).
    done: bool = False
    taken: threading.Event | None = None
    thread: int = 0
    recorded: bool = False
    rejected: str | None = None
    unavailable: StoreUnavailable | None = None
    next: Attempt | None = None
    decided: int = 0


class StepPath:
    """Group commit for the slots of one process.

    Slots hand their outcomes in; whichever slot gets the engine turn first records every
    outcome waiting, decides what each one makes ready, decides ready workflow tasks and claims
    the next attempts for the slots that asked — all in one transaction — and hands out the
    claims. A claim is made only for a slot that is free, since an attempt's start_to_close
    counts from its claim. A batch the engine cannot take (an unexpected error) is rolled back
    and done again one outcome per transaction.
    """

    # Ready workflow tasks decided in one batch, at most. Outcomes handed in meanwhile wait for
    # the batch, so a burst of new workflows must not make it long: a decision's own work (about
    # a millisecond on SQLite, ten on PostgreSQL) dwarfs its share of a commit at this size.
    DECISIONS = 8

    def __init__(self, shared: Shared, attempts: Attempts, queues: Sequence[str]) -> None:
        self.shared = shared
        self.attempts = attempts
        self.queues = tuple(queues)
        self._queue: list[Exchange] = []
        self._queue_lock = threading.Lock()
        # Set when a batch that could start attempts for this worker failed to write: it may
        # have committed all the same (`_adopt`).
        self._in_doubt = False
        # What `_serve` measures a combining slot's lead with.
        self._monotonic = time.monotonic

    def ready(self, now: datetime) -> bool:
        """Whether a workflow task or an activity is ready (a read, no write lock), or
        attempts started for this worker may wait for a slot (`_adopt`)."""
        if self._in_doubt:
            return True
        tx = self.shared.engine.store.peek()
        return tx.next_ready_workflow_task(now) is not None or \
            tx.next_ready_activity(self.queues, now) is not None

    def exchange(self, exchange: Exchange, taken: threading.Event) -> None:
        """Hand `exchange` in and return once a batch took it (`taken`: the calling slot's
        event, set then; a slot has one exchange in at a time).

        The slot that gets the engine turn combines what is waiting, and goes on while more
        comes in; the others wait for their own exchange to be done instead of queueing for
        the turn (which would hand it from thread to thread with nothing left to do).
        """
        taken.clear()
        exchange.taken, exchange.thread = taken, threading.get_ident()
        with self._queue_lock:
            self._queue.append(exchange)
        while not exchange.done:
            if not self._serve(exchange):
                taken.wait(TURN_LOOK)
                # Set when the exchange is done, or when a combiner leaves what waits to this
                # slot: either way it looks again (a set is never waited on twice).
                taken.clear()

    def waiting(self) -> int:
        """How many exchanges were handed in and wait for a batch."""
        with self._queue_lock:
            return len(self._queue)

    def serve_waiting(self) -> None:
        """Record the outcomes handed in, if any, before the caller takes the engine turn again
        (a long run of decisions lets the slots' outcomes in between its batches)."""
        if self.waiting():
            self._serve()

    def _serve(self, own: Exchange | None = None) -> bool:
        """Combine what is waiting while the engine turn is free; False when another holds it.

        One handed in after the combiner's last look finds the turn taken and waits: so the
        combiner looks again once it let go, and serves it then. A slot combining (`own`: its
        exchange) lets the slots it woke go first (`_finish`), and goes on for `LEAD_FOR` at
        most once its own next attempt is in hand (slots with quick handlers hand in again and
        again meanwhile), then leaves to run it: what waits goes to the slot that handed in
        first, woken to combine it.
        """
        turn = self.shared.turn
        leave_at = None
        while turn.acquire(blocking=False):
            try:
                while True:
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                    if not batch:
                        break
                    self._combine(batch, yielding=own is not None)
                    if own is not None and own.next is not None:
                        if leave_at is None:
                            leave_at = self._monotonic() + LEAD_FOR
                        elif self._monotonic() >= leave_at:
                            break
            finally:
                turn.release()
            with self._queue_lock:
                if not self._queue:
                    return True
                if leave_at is not None and self._monotonic() >= leave_at:
                    waiting = self._queue[0].taken
                    if waiting is not None:
                        waiting.set()
                    return True
        return False

    def _combine(self, batch: list[Exchange], yielding: bool = False) -> None:
        shared, engine = self.shared, self.shared.engine
        now = shared.clock()
        # The exchanges of one worker come from passes alike: all check deadlines, or none.
        check = batch[0].check_deadlines
        wanting = [exchange for exchange in batch if exchange.claim]
        # None once stopping, and never more than `max_tasks` counts.
        budget = 0 if shared.stopping.is_set() else self.attempts.budget(len(wanting))
        offer = Offer(shared.worker_id, self.queues, budget)
        tasks = offer.taken
        decided = 0
        try:
            with shared.outage.writing(), engine.batch(offer) as done:
                adopted = self._adopt(offer, now, check) if self._in_doubt else ()
                for exchange in batch:
                    if exchange.attempt is not None:
                        exchange.rejected = _record(engine, exchange, now)
                # Only what an outcome made ready is taken at once: what other decisions
                # schedule waits its turn in the queue's order. Slots that each took the next
                # step of the run they followed decide nothing more: the watchdog does.
                free, offer.left = offer.left, 0
                if free or not tasks:
                    decided = _decide(shared, now, self.DECISIONS, check)
                while len(tasks) < budget:
                    claimed = engine.claim_activity(shared.worker_id, self.queues, now)
                    if claimed is None:
                        # Everything ready went to these slots: the others need no wake-up.
                        done.nothing_left_ready = decided < self.DECISIONS
                        break
                    tasks.append(claimed)
        except StoreUnavailable as exc:
            self._in_doubt = self._in_doubt or budget > 0
            for exchange in batch:
                exchange.unavailable = exc
            self._finish(batch, yielding)
            return
        except Exception:
            self._one_by_one(batch, now)
            return
        self._in_doubt = False
        for task in adopted:
            log.event("activity_attempt_adopted", logging.WARNING,
                      instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
                      reason="started by a batch whose commit the worker could not confirm")
        for exchange in batch:
            exchange.recorded = exchange.attempt is not None
        for exchange, task in zip(wanting, tasks, strict=False):
            exchange.next = Attempt(task, shared, check_deadlines=check)
            self.attempts.started(exchange.next)
        for exchange in batch:
            exchange.decided = decided
        self._finish(batch, yielding)

    def _adopt(self, offer: Offer, now: datetime, check: bool) -> list[ActivityTask]:
        """After a batch that could start attempts failed to write, in the next one: the
        attempts it started all the same (its COMMIT went through, the reply was lost) go to
        the free slots of this batch, and any more are given back; those adopted. The engine
        turn is held, so every attempt this worker started before is in `attempts`."""
        engine = self.shared.engine
        held = {attempt.key for attempt in self.attempts.held()}
        adopted = []
        for task in engine.unheld_attempts(self.shared.worker_id, held, now):
            if offer.left > 0:
                offer.take(task)
                adopted.append(task)
            else:
                engine.release_activity(task, now, "worker_shutdown", check_deadlines=check)
        return adopted

    def _finish(self, batch: list[Exchange], yielding: bool = False) -> None:
        """Mark a batch's exchanges done and wake the slots waiting for theirs.

        A slot that woke other slots (`yielding`) then lets go of the interpreter for a moment
        (`time.sleep(0)`): the woken slots run their handlers and hand their next outcomes in
        before its next batch begins, which takes them along, instead of waking again and again
        for the interpreter lock while that batch runs (the lock is free at each of its
        statements). With no-op handlers at `--concurrency 4` this halves the context switches
        a step (`benchmarks/threads.py`)."""
        me, woke = threading.get_ident(), False
        for exchange in batch:
            exchange.done = True
            if exchange.taken is not None:
                exchange.taken.set()
                woke = woke or exchange.thread != me
        if woke and yielding:
            time.sleep(0)

    def _one_by_one(self, batch: list[Exchange], now: datetime) -> None:
        """Record each outcome in a transaction of its own: one the engine cannot take fails
        the attempt instead, so that it never stays `started` for good."""
        engine = self.shared.engine
        for exchange in batch:
            if exchange.attempt is not None:
                try:
                    exchange.rejected = _record(engine, exchange, now)
                    exchange.recorded = True
                except StoreUnavailable as exc:
                    self.shared.outage.failed(exc)
                    exchange.unavailable = exc
                except Exception as exc:
                    task = exchange.attempt.task
                    log.failure("activity_result_not_recorded", exc,
                                instance=task.workflow_instance_id, step=task.step,
                                attempt=task.attempt)
                    exchange.recorded = _fail_unrecorded(engine, task, exc, now,
                                                         exchange.check_deadlines)
        self._finish(batch)


def _record(engine: Engine, exchange: Exchange, now: datetime) -> str | None:
    """Apply an attempt's outcome and decide what it makes ready; why it was rejected, if so."""
    assert exchange.attempt is not None and exchange.outcome is not None
    task, outcome, check = exchange.attempt.task, exchange.outcome, exchange.check_deadlines
    error = outcome.error
    if error is None:
        return engine.complete_activity(task, outcome.result, now, decide=True,
                                        check_deadlines=check, **exchange.details)
    return engine.fail_activity(task, error.exception_class, error.message, now,
                                exception_classes=error.classes, traceback=error.traceback,
                                decide=True, check_deadlines=check, **exchange.details)


def _fail_unrecorded(engine: Engine, task: ActivityTask, error: Exception,
                     now: datetime, check_deadlines: bool) -> bool:
    """An outcome the engine could not take fails the attempt instead; failing that, it is
    given back. False when neither could be written."""
    try:
        engine.fail_activity(task, type(error).__name__,
                             f"the worker could not record the outcome: {error}", now,
                             exception_classes=[c.__name__ for c in type(error).__mro__],
                             traceback=format_traceback(error), decide=True,
                             check_deadlines=check_deadlines)
    except Exception:
        try:
            engine.release_activity(task, now, "worker_error", check_deadlines=check_deadlines)
        except Exception as exc:
            log.failure("activity_release_failed", exc, instance=task.workflow_instance_id,
                        step=task.step, attempt=task.attempt)
            return False
    return True


def decide_ready(shared: Shared, steps: StepPath, now: datetime, limit: int, *,
                 check_deadlines: bool) -> int:
    """Claim and complete up to `limit` ready workflow tasks, the first batch at `now` and each
    later one at the instant the clock reads when it begins (a long run of decisions must not
    stamp what it schedules, and the deadlines it sets, with the instant it began); how many.

    Up to `StepPath.DECISIONS` of them go in one transaction, claims and completions together,
    so that a failed write leaves no task claimed; between two transactions the outcomes the
    slots handed in meanwhile are recorded, so that a burst of new workflows holds up no
    attempt's result for long. A batch the engine cannot take (an
    unexpected error) is done again one transaction per step, so that one bad task does not
    hold up the others.
    """
    engine = shared.engine
    decided = 0
    while decided < limit:
        size = min(StepPath.DECISIONS, limit - decided)
        with shared.turn:
            try:
                with engine.batch():
                    done = _decide(shared, now, size, check_deadlines)
            except StoreUnavailable:
                raise
            except Exception:
                done = _decide_one_by_one(shared, now, size, check_deadlines)
        decided += done
        if done < size:
            break
        steps.serve_waiting()
        now = max(now, shared.clock())
    return decided


def _decide(shared: Shared, now: datetime, limit: int, check_deadlines: bool) -> int:
    engine, decided = shared.engine, 0
    while decided < limit and engine.decide_ready_task(shared.worker_id, now,
                                                       check_deadlines=check_deadlines):
        decided += 1
    return decided


def _decide_one_by_one(shared: Shared, now: datetime, limit: int, check_deadlines: bool) -> int:
    """Claim and complete in transactions of their own; a completion that fails leaves its
    task to its workflow_task_timeout, and the next task is taken."""
    engine, decided = shared.engine, 0
    while decided < limit:
        task = engine.claim_workflow_task(shared.worker_id, now)
        if task is None:
            break
        decided += 1
        try:
            engine.complete_workflow_task(task, now, check_deadlines=check_deadlines)
        except StoreUnavailable:
            raise
        except Exception as exc:
            log.failure("workflow_task_failed", exc, instance=task.workflow_instance_id)
    return decided


def _discarded(task: ActivityTask, reason: str) -> None:
    if reason == RECORDED_ALREADY:
        log.event("activity_result_recorded_already", instance=task.workflow_instance_id,
                  step=task.step, attempt=task.attempt)
        return
    log.event("activity_result_discarded", logging.WARNING,
              instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
              reason=reason)
