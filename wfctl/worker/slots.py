"""Handler slots run attempts; the step path records their outcomes and claims the next ones, in batches."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl.engine.activities import RECORDED_ALREADY, completion_close
from wfctl.engine.tasks import ActivityTask, Offer
from wfctl.errors import ActivityCancelled, StoreUnavailable, TransientConflict
from wfctl.lang.handlers import HandlerError, Outcome, format_traceback
from wfctl.ops import log
from wfctl.worker.executor import Executor
from wfctl.worker.held_attempts import Attempt, AttemptObserver, Attempts
from wfctl.worker.loop import Backoff, Loop, Shared

if TYPE_CHECKING:
    from wfctl.engine import BatchDone, Engine
    from wfctl.store.records import PlannedClose

# The longest an idle slot waits before it looks for work again (commits wake it sooner).
IDLE_WAIT = 1.0
# How soon an idle slot looks again at an activity that is due but was not ready for it (past
# a schedule deadline, it waits for the watchdog's timeout): a moment, never at once.
DUE_LOOK = 0.05
# How soon an idle slot looks again while attempts wait in the pool or outcomes in the queue:
# the slot running handlers one after another may be held up in one that turned out slow.
PENDING_LOOK = 0.02
# A handler whose runs take less than this (a moving average) is run by the slot that drives,
# one attempt after another, without waking an idle slot for it: a wake-up (two thread
# switches, some 50 us of CPU) costs about as much, and a step's own work (a few hundred us)
# far more, so running such handlers side by side would gain nothing. Slower handlers, those
# that wait on I/O or run in a child process (`--isolation process`), get slots side by side.
QUICK_HANDLER = 0.0001
# How many attempts of handlers known to be quick a worker holds at most (running and pooled),
# beyond its free places: the slot that drives runs them one after another, each taking a few
# hundred microseconds with its share of a batch, so the last waits in the pool a few
# milliseconds from its claim; and a batch's own work (its commit, the claim that finds nothing
# more, the decisions it looks for) is shared by as many steps. An attempt of a handler not known
# to be quick is claimed only for a free place.
QUICK_BATCH = 16


class Slot(Loop):
    """One handler slot. Whatever its handler raises or returns ends the attempt (as a failure
    under the retry policy when it is not a result), and the slot goes on serving.

    A slot never touches the database itself: it takes attempts from the worker's `StepPath`,
    hands their outcomes back, and when it has nothing left to run, records what was handed
    in and claims the next attempts, in one transaction. `observer`, when set, is told of each
    attempt's start and end (`work --metrics-port`).
    """

    # A pass that ran an attempt may have written nothing (its outcome waits in the queue):
    # the step path's batches tell the worker's `Outage` themselves when a write went through.
    writes = False

    def __init__(self, shared: Shared, name: str, *, steps: StepPath, attempts: Attempts,
                 executor: Executor, observer: AttemptObserver | None = None) -> None:
        super().__init__(shared)
        self.name = name
        self.steps = steps
        self.attempts = attempts
        self.executor = executor
        self.observer = observer
        self.attempt: Attempt | None = None
        # Set when the slot's handler outlived its attempt: the thread exits once it returns.
        self.abandoned = False
        # Whether the slot is between passes with nothing to do, or not started (`StepPath`
        # counts the slots awake).
        self.idle = True

    def run_once(self, now: datetime, *, check_deadlines: bool = True) -> bool:
        """Run one attempt (from the pool, or claimed first when the pool is empty, or after
        deciding ready workflow tasks), and record the outcomes handed in once the pool is
        empty; False when nothing was ready. `check_deadlines`: whether what it decides and
        claims checks workflow deadlines (the long-running worker's passes do)."""
        steps = self.steps
        if self.idle:
            self.idle = False
            steps.awake(+1)
            # Another slot drives: it runs what waits, unless it waited too long (that slot is
            # held up in a handler, quick until now). Joining it would only hand work over.
            if steps.driving(besides=1) and not steps.stale(time.monotonic()):
                return False
        if self.shared.stopping.is_set():
            return steps.serve(check_deadlines, claim=False)
        attempt = steps.take()
        if attempt is None:
            if not steps.waiting() and not steps.ready(now):
                return False
            # One slot waits for the turn at most: another that finds one waiting leaves the
            # pool to it (it runs quick handlers itself, and wakes slots for slow ones).
            acted = steps.serve(check_deadlines, wait=not steps.turn_waiters())
            attempt = steps.take()
            if attempt is None:
                return acted
        self.execute(attempt)
        if not steps.pooled():
            steps.serve(check_deadlines)
        return True

    def run(self, one_pass: Callable[[datetime], bool] | None = None, *,
            until: Callable[[], bool] | None = None) -> None:
        try:
            super().run(one_pass, until=until)
        finally:
            # Counted awake no longer, however the loop ended (`StepPath.driving`).
            if not self.idle:
                self.idle = True
                self.steps.awake(-1)
        self.steps.wind_down()

    def pause(self, acted: bool) -> float:
        wait = super().pause(acted)
        if wait > 0 and not self.idle:
            self.idle = True
            self.steps.awake(-1)
        return wait

    def idle_wait(self) -> float:
        if self.steps.pooled() or self.steps.waiting():
            return PENDING_LOOK
        # One statement: no snapshot to share, `peek` takes the fewest round trips.
        next_at = self.shared.engine.store.peek().next_activity_available_at(self.steps.queues)
        if next_at is None:
            return IDLE_WAIT
        due_in = (next_at - self.shared.clock()).total_seconds()
        return min(IDLE_WAIT, due_in) if due_in > 0 else DUE_LOOK

    def execute(self, attempt: Attempt) -> None:
        """Run an attempt taken from the pool through the worker's executor and hand its
        outcome in."""
        self.attempt = attempt
        steps = self.steps
        handler = attempt.task.handler
        # True once handed in, False when there was nothing to record (settled either way).
        reported: bool | None = None
        slow = False
        try:
            slow = steps.before(attempt)
            observer = self.observer
            if observer is not None:
                observer.started(attempt.task)
            began = time.monotonic()
            try:
                outcome = self.executor.run(attempt)
            except Exception as exc:
                # The executor itself failed (not the handler): the attempt fails all the same.
                outcome = Outcome(error=HandlerError.of(exc))
            steps.ran(handler, time.monotonic() - began)
            attempt.handler_running = False
            if observer is not None:
                observer.finished(attempt, outcome)
            reported = self._report(attempt, outcome)
        finally:
            self.attempt = None
            steps.finished(attempt, slow)
            if not reported:
                self.attempts.ended(attempt, settled=reported is False)

    def _report(self, attempt: Attempt, outcome: Outcome) -> bool:
        """Hand the attempt's outcome in, to be recorded (the engine rejects it then if the
        attempt is no longer current); False when there is nothing to record."""
        task = attempt.task
        if outcome.cancelled and attempt.abandon.is_set():
            _discarded(task, attempt.reason or "the attempt is no longer current")
            return False
        if outcome.cancelled:
            # Raised by the handler itself while its attempt was current: a failure like any.
            outcome = Outcome(error=HandlerError.of(
                ActivityCancelled("the handler raised ActivityCancelled"), with_traceback=False))
        self.steps.hand_in(Exchange(attempt=attempt, outcome=outcome,
                                    details=attempt.take_pending_heartbeat(),
                                    check_deadlines=attempt.check_deadlines))
        return True


@dataclass(eq=False)
class Exchange:
    """An attempt's outcome handed in to the step path, and whether the pass that claimed it
    checks workflow deadlines; the batch that records it fills in the rest."""

    attempt: Attempt
    outcome: Outcome
    details: dict[str, Any] = field(default_factory=dict)
    check_deadlines: bool = False
    rejected: str | None = None
    recorded: bool = False
    unavailable: StoreUnavailable | None = None
    handed_in: float = field(default_factory=time.monotonic)


class StepPath:
    """Group commit and a shared pool of attempts for the slots of one process.

    Slots hand their outcomes in; a slot with nothing left to run takes the engine turn,
    records every outcome waiting, decides what each one makes ready, decides ready workflow
    tasks and claims attempts for the free places (`places`, less the handlers running and the
    attempts pooled) — all in one transaction — and pools the claims. Any slot takes the next
    attempt from the pool. A slot whose handlers are quick (`QUICK_HANDLER`) runs the pooled
    attempts one after another and wakes nobody: with no-op handlers one thread does the work
    of all, up to `QUICK_BATCH` steps a transaction, with no thread switches. Before a handler
    not known to be quick it wakes idle slots for what waits in the pool, so slow handlers run
    side by side; idle slots also look again soon (`PENDING_LOOK`) while anything waits. Since
    an attempt's start_to_close counts from its claim, an attempt of a handler not known to be
    quick is claimed only for a free place; those of quick ones also ahead of them. A batch
    the engine cannot take (an unexpected error) is rolled back and done again one outcome per
    transaction.
    """

    # Ready workflow tasks decided in one batch, at most. Outcomes handed in meanwhile wait for
    # the batch, so a burst of new workflows must not make it long: a decision's own work (about
    # a millisecond on SQLite, ten on PostgreSQL) dwarfs its share of a commit at this size.
    DECISIONS = 8

    def __init__(self, shared: Shared, attempts: Attempts, queues: Sequence[str], *,
                 places: int = 1, wake_idle: Callable[[int], None] | None = None) -> None:
        self.shared = shared
        self.attempts = attempts
        self.queues = tuple(queues)
        self.places = places
        # Wakes up to n idle slots (the worker's; none by default).
        self.wake_idle = wake_idle or (lambda n: None)
        self._queue: list[Exchange] = []
        self._pool: deque[Attempt] = deque()
        self._running: set[Attempt] = set()
        # Slots waiting for the engine turn (`serve(wait=True)`); slots awake (in a pass, not
        # between passes with nothing to do), and of those, slots running a handler not known
        # to be quick.
        self._turn_waiters = 0
        self._awake = 0
        self._slow = 0
        # When a handler last returned or a batch last ran (`moving`).
        self._moved = float("-inf")
        self._queue_lock = threading.Lock()
        # How long each handler's runs take, a moving average by handler (`ran`).
        self._took: dict[str, float] = {}
        # Set when a batch that could start attempts for this worker failed to write: it may
        # have committed all the same (`_adopt`).
        self._in_doubt = False

    def ready(self, now: datetime) -> bool:
        """Whether a workflow task or an activity is ready (a read, no write lock), or
        attempts started for this worker may wait for a slot (`_adopt`)."""
        if self._in_doubt:
            return True
        tx = self.shared.engine.store.peek()
        return tx.next_ready_workflow_task(now) is not None or \
            tx.next_ready_activity(self.queues, now) is not None

    def take(self) -> Attempt | None:
        """The oldest attempt in the pool, now running; None when the pool is empty."""
        with self._queue_lock:
            if not self._pool:
                return None
            attempt = self._pool.popleft()
            self._running.add(attempt)
            return attempt

    def pooled(self) -> int:
        return len(self._pool)

    def waiting(self) -> int:
        """How many outcomes were handed in and wait for a batch."""
        return len(self._queue)

    def before(self, attempt: Attempt) -> bool:
        """Called before a slot runs `attempt`'s handler: unless it is known to be quick, what
        waits is recorded first (a batch, if the turn is free), and idle slots are woken for
        the attempts in the pool, so that neither waits for this handler. Whether it is not
        known to be quick (`finished` is told)."""
        if self.quick(attempt.task.handler):
            return False
        with self._queue_lock:
            self._slow += 1
        if self._queue:
            # Kept in the queue when the database is unavailable: tried again after the handler.
            with contextlib.suppress(StoreUnavailable):
                self.serve(attempt.check_deadlines)
        if self._pool:
            self.wake_idle(len(self._pool))
        return True

    def quick(self, handler: str) -> bool:
        """Whether `handler`'s runs are known to be quick (`QUICK_HANDLER`)."""
        return self._took.get(handler, QUICK_HANDLER) < QUICK_HANDLER

    def ran(self, handler: str, seconds: float) -> None:
        """How long a run of `handler` took: averaged (one slow run among quick ones, a pause of
        the collector, say, does not make it slow), the first run taken as it is."""
        took = self._took.get(handler)
        self._took[handler] = seconds if took is None else took + (seconds - took) / 4
        self._moved = time.monotonic()

    def finished(self, attempt: Attempt, slow: bool = False) -> None:
        """The attempt's handler no longer holds a place: it returned (`slow`: what `before`
        said of it), or its slot was given up."""
        with self._queue_lock:
            self._running.discard(attempt)
            if slow:
                self._slow -= 1

    def awake(self, change: int) -> None:
        """A slot woke (+1) or went idle (-1)."""
        with self._queue_lock:
            self._awake += change

    def driving(self, besides: int = 0) -> bool:
        """Whether a slot is awake and not in a slow handler (`besides`: the awake slots not
        to count, the caller): it records what is handed in and claims for every free place as
        soon as it has nothing left to run, so new work needs no idle slot woken."""
        return self._awake - besides > self._slow

    def moving(self, monotonic: float) -> bool:
        """Whether a slot drives and moved on within `PENDING_LOOK` (a handler of it returned,
        or a batch ran): one held up in a handler believed quick does not count."""
        return self.driving() and monotonic - self._moved < PENDING_LOOK

    def turn_waiters(self) -> int:
        return self._turn_waiters

    def hand_in(self, exchange: Exchange) -> None:
        with self._queue_lock:
            self._queue.append(exchange)

    def look_after(self, monotonic: float) -> None:
        """Wake idle slots when an attempt has waited in the pool, or an outcome in the queue,
        longer than `PENDING_LOOK`: the slot that would take it is held up in a handler known
        to be quick that was not, this time. The watchdog calls this at each pass."""
        if self.stale(monotonic):
            self.wake_idle(max(1, len(self._pool)))

    def stale(self, monotonic: float) -> bool:
        """Whether an attempt has waited in the pool, or an outcome in the queue, longer than
        `PENDING_LOOK`."""
        with self._queue_lock:
            pool, queue = self._pool, self._queue
            return bool((pool and monotonic - pool[0].claimed > PENDING_LOOK)
                        or (queue and monotonic - queue[0].handed_in > PENDING_LOOK))

    def serve_waiting(self) -> None:
        """Record the outcomes handed in, if any, before the caller takes the engine turn again
        (a long run of decisions lets the slots' outcomes in between its batches), and wake
        slots for the attempts that pools, unless a slot is driving: that one takes them."""
        if self._queue:
            self.serve(self._queue[0].check_deadlines, claim=False)
            if self._pool and not self.driving():
                self.wake_idle(len(self._pool))

    def serve(self, check_deadlines: bool, *, claim: bool = True, wait: bool = False) -> bool:
        """Record the outcomes waiting and, with `claim`, claim attempts for the free places;
        whether a batch ran. The engine turn is waited for with `wait` (a slot with nothing
        left to run: the holder's batch is short); without, False when another holds it. It
        looks at what waits once more after letting go, so that an outcome handed in after its
        last look is never left behind."""
        turn = self.shared.turn
        acted = False
        while True:
            if not turn.acquire(blocking=False):
                if not wait:
                    return acted
                with self._queue_lock:
                    self._turn_waiters += 1
                try:
                    turn.acquire()
                finally:
                    with self._queue_lock:
                        self._turn_waiters -= 1
            wait = False
            try:
                while True:
                    with self._queue_lock:
                        batch, self._queue = self._queue, []
                        free = self.places - len(self._running) - len(self._pool)
                    # A claim with no free place would only decide: the watchdog's work.
                    if not batch and not (claim and free > 0):
                        break
                    claim = False
                    self._combine(batch, check_deadlines)
                    acted = True
            finally:
                turn.release()
            if not self._queue:
                return acted

    def wind_down(self) -> None:
        """A stopping slot's last act: what was handed in is recorded (tried again while the
        database is unavailable, until the worker is told to stop at once), and once the worker
        stops, the attempts still pooled are given back, to be retried at once."""
        shared = self.shared
        backoff = Backoff()
        while self._queue:
            try:
                self.serve(self._queue[0].check_deadlines, claim=False, wait=True)
            except StoreUnavailable:
                if shared.forced.wait(backoff.next()):
                    self._not_recorded()
                    break
        if shared.stopping.is_set():
            while (attempt := self.take()) is not None:
                self.finished(attempt)
                self._give_back(attempt)

    def _not_recorded(self) -> None:
        with self._queue_lock:
            unrecorded, self._queue = self._queue, []
        for exchange in unrecorded:
            task = exchange.attempt.task
            log.event("activity_result_not_recorded", logging.WARNING,
                      instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
                      reason="stopped while the database was unavailable")
            self.attempts.ended(exchange.attempt, settled=False)

    def _give_back(self, attempt: Attempt) -> None:
        shared = self.shared
        try:
            with shared.turn:
                shared.engine.release_activity(attempt.task, shared.clock(), "worker_shutdown",
                                               check_deadlines=attempt.check_deadlines)
        except StoreUnavailable as exc:
            shared.outage.failed(exc)
            self.attempts.ended(attempt, settled=False)
            return
        self.attempts.ended(attempt, settled=True)

    def _combine(self, batch: list[Exchange], check: bool) -> None:
        shared, engine = self.shared, self.shared.engine
        now = shared.clock()
        # The outcomes of one worker come from passes alike: all check deadlines, or none.
        if batch:
            check = batch[0].check_deadlines
        with self._queue_lock:
            held = len(self._running) + len(self._pool)
            slow = self._slow
        free = max(0, self.places - held)
        if shared.stopping.is_set():
            budget = ahead = 0
        else:
            # Never more than `max_tasks` counts. Beyond the free places, places for quick
            # handlers' attempts only (`QUICK_BATCH`), while no slow handler runs.
            budget = self.attempts.budget(free)
            ahead = 0 if slow or budget < free else self.attempts.budget(
                budget + max(0, QUICK_BATCH - max(held, self.places))) - budget
        offered = budget + ahead
        offer = Offer(shared.worker_id, self.queues, budget, ahead=ahead, quick=self.quick)
        tasks = offer.taken
        try:
            # The outcomes' families are locked together, with the first outcome's read, and
            # what their completions close and read goes with it where it can (`Tx.expect`).
            families, closes = _announced(batch, now) \
                if len(batch) > 1 and engine.store.takes_announcements else ((), ())
            with shared.outage.writing(), engine.batch(offer, families, closes) as done:
                adopted = self._adopt(offer, now, check) if self._in_doubt else ()
                for exchange in batch:
                    exchange.rejected = _record(engine, exchange, now)
                # What an outcome made ready is taken at once; then the oldest ready attempts,
                # in the queue's order; then ready workflow tasks are decided, as many as there
                # are places left, and what they schedule is taken at once too (nothing older
                # is ready), and claimed where it could not be (a parallel step's branches).
                # Idle slots need no wake-up when every free place got an attempt (the pool is
                # theirs: `before`), nor when everything ready went to the pool.
                free, ahead = offer.left, offer.ahead
                offer.left = offer.ahead = 0
                done.nothing_left_ready = True
                places = len(tasks) + free
                runs = self._runs_held(tasks) if ahead else set()
                self._claim(places, ahead, runs, tasks, now, done)
                left = places + ahead - len(tasks)
                offer.left = max(0, places - len(tasks))
                offer.ahead = left - offer.left
                offer.held_runs = runs
                # As many as the places left (a decision mostly schedules one attempt): what
                # is not decided waits for places, or for another worker. One at least, with
                # no place left: while a slot drives, the watchdog leaves decisions to its
                # batches (`moving`), which would otherwise find every place taken by the
                # first steps of the watchdog's own decisions, as many as it could make,
                # each claimed (a read and a write) instead of taken at once.
                limit = min(self.DECISIONS, max(1, left)) if tasks else self.DECISIONS
                decided = _decide(shared, now, limit, check)
                self._moved = time.monotonic()
                offer.left = offer.ahead = 0
                runs.update(task.workflow_run_id for task in tasks)
                if decided:
                    self._claim(places, ahead, runs, tasks, now, done, decided == limit)
        except StoreUnavailable as exc:
            self._in_doubt = self._in_doubt or offered > 0
            with self._queue_lock:
                self._queue[:0] = batch
            raise exc from None
        except Exception as exc:
            self._one_by_one(batch, now)
            if not batch and not isinstance(exc, TransientConflict):
                # No outcome failed it: claiming or deciding did, and would again at once (the
                # slot sees the work still ready). The slot's loop reports it and backs off;
                # another writer in the way is only tried again.
                raise
            return
        self._in_doubt = False
        for task in adopted:
            log.event("activity_attempt_adopted", logging.WARNING,
                      instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
                      reason="started by a batch whose commit the worker could not confirm")
        for exchange in batch:
            self._recorded(exchange)
        pooled = [Attempt(task, shared, check_deadlines=check) for task in tasks]
        for attempt in pooled:
            self.attempts.started(attempt)
        with self._queue_lock:
            self._pool.extend(pooled)

    def _claim(self, places: int, ahead: int, runs: set[str], tasks: list[ActivityTask],
               now: datetime, done: BatchDone, more_to_decide: bool = False) -> None:
        """Claim the oldest ready attempts into `tasks` for the places left (`places`, then
        `ahead` for quick handlers' attempts of runs not in `runs`); `done.nothing_left_ready`
        false when the claims ran dry with free places left while more workflow tasks may be
        ready (`more_to_decide`: the batch decided as many as it could)."""
        shared, engine = self.shared, self.shared.engine
        while len(tasks) < places + ahead:
            claimed = engine.claim_activity(
                shared.worker_id, self.queues, now,
                accept=None if len(tasks) < places else
                lambda activity: self.quick(activity.handler)
                and activity.workflow_run_id not in runs,
                ahead=places + ahead - len(tasks))
            if claimed is None:
                if len(tasks) < places:
                    done.nothing_left_ready = not more_to_decide
                return
            tasks.append(claimed)
            runs.add(claimed.workflow_run_id)

    def _runs_held(self, tasks: list[ActivityTask]) -> set[str]:
        """The runs of `tasks` and of the attempts running or pooled, none of which an attempt
        claimed ahead of the free places may be of: a handler gets its run's state as its
        attempt is claimed, so the second branch of a parallel step claimed with the first
        would not see what the first returned, where one slot runs them one after the other."""
        with self._queue_lock:
            held = [*self._running, *self._pool]
        return {task.workflow_run_id for task in tasks} | \
            {attempt.task.workflow_run_id for attempt in held}

    def _recorded(self, exchange: Exchange) -> None:
        if exchange.rejected:
            _discarded(exchange.attempt.task, exchange.rejected)
        self.attempts.ended(exchange.attempt, settled=True)

    def _adopt(self, offer: Offer, now: datetime, check: bool) -> list[ActivityTask]:
        """After a batch that could start attempts failed to write, in the next one: the
        attempts it started all the same (its COMMIT went through, the reply was lost) go to
        the free places of this batch, and any more are given back; those adopted. The engine
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

    def _one_by_one(self, batch: list[Exchange], now: datetime) -> None:
        """Record each outcome in a transaction of its own: one the engine cannot take fails
        the attempt instead, so that it never stays `started` for good."""
        engine = self.shared.engine
        for exchange in batch:
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
        unavailable = [exchange for exchange in batch if exchange.unavailable is not None]
        for exchange in batch:
            if exchange.unavailable is not None:
                continue
            if exchange.recorded:
                self._recorded(exchange)
            else:
                self.attempts.ended(exchange.attempt, settled=False)
        if unavailable:
            # Kept, first in line, for the pass that finds the database back.
            with self._queue_lock:
                self._queue[:0] = unavailable
            raise unavailable[0].unavailable  # type: ignore[misc]


def _announced(batch: list[Exchange], now: datetime) -> \
        tuple[list[str], list[PlannedClose]]:
    """The instances a batch's outcomes change, one for each, and the closes their
    completions will ask for (`EngineCore.batch`)."""
    families, closes = [], []
    for exchange in batch:
        assert exchange.attempt is not None and exchange.outcome is not None
        task = exchange.attempt.task
        families.append(task.workflow_instance_id)
        if exchange.outcome.error is None:
            close = completion_close(task, exchange.outcome.result, now, **exchange.details)
            if close is not None:
                closes.append(close)
    return families, closes


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
    attempt's result for long. While a slot drives and moves on (`StepPath.moving`), the rest
    is left to it: its batches decide as they go, and take what they schedule at once (decided
    here, each first step would wait to be claimed, and the slot's outcomes would be recorded on
    this thread, in turn with it).
    A batch the engine cannot take (an unexpected error) is done again one transaction per
    step, so that one bad task does not hold up the others.
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
        if done < size or steps.moving(time.monotonic()):
            break
        steps.serve_waiting()
        now = max(now, shared.clock())
    return decided


def _decide(shared: Shared, now: datetime, limit: int, check_deadlines: bool) -> int:
    engine, decided = shared.engine, 0
    while decided < limit and engine.decide_ready_task(shared.worker_id, now,
                                                       check_deadlines=check_deadlines,
                                                       ahead=limit - decided):
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
