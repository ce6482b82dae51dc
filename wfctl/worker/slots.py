"""Handler slots: each claims a ready task — a workflow task first — runs it and records the outcome."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from wfctl import clock, log
from wfctl.context import _NOTHING
from wfctl.engine.activities import ActivityTask
from wfctl.errors import ActivityCancelled, StoreUnavailable
from wfctl.handlers import HandlerError, Outcome, format_traceback
from wfctl.worker.attempts import Attempt
from wfctl.worker.loop import Loop, until_written

if TYPE_CHECKING:
    from wfctl.worker.process import Worker

# The longest an idle slot waits before it looks for work again (commits wake it sooner).
IDLE_WAIT = 1.0


class Slot(Loop):
    """One handler slot. Whatever its handler raises or returns ends the attempt (as a failure
    under the retry policy when it is not a result), and the slot goes on serving."""

    def __init__(self, worker: Worker, name: str) -> None:
        super().__init__(worker)
        self.name = name
        self.attempt: Attempt | None = None
        # Set when the slot's handler outlived its attempt: the thread exits once it returns.
        self.abandoned = False

    def run_once(self, now: datetime) -> bool:
        """Claim and run one task, a workflow task first; False when nothing was ready."""
        worker = self.worker
        engine = worker.engine
        if engine.store.peek().next_ready_workflow_task(clock.iso(now)) is not None \
                and decide_ready(worker, now, limit=1):
            return True
        queues = worker.options.queues
        # Slots take turns at the engine (claims, decisions, results) and run handlers side by
        # side. SQLite serializes writes anyway; taking turns here keeps the slots from racing
        # for the same task and from holding the write lock while waiting for the interpreter.
        with worker.engine_turn:
            if worker.stopping or \
                    engine.store.peek().next_ready_activity(queues, clock.iso(now)) is None:
                return False
            activity = engine.claim_activity(worker.worker_id, queues, now)
        if activity is None:
            return False
        self.execute(activity)
        return True

    def idle_wait(self) -> float:
        worker = self.worker
        with worker.engine.store.read() as tx:
            next_at = clock.parse(tx.next_activity_available_at(worker.options.queues))
        if next_at is None:
            return IDLE_WAIT
        return max(0.0, min(IDLE_WAIT, (next_at - worker.clock()).total_seconds()))

    def execute(self, task: ActivityTask) -> None:
        """Run a claimed attempt through the worker's executor and record how it ended."""
        worker = self.worker
        attempt = Attempt(task, worker)
        self.attempt = attempt
        worker.attempt_started(attempt)
        if worker.attempt_metrics is not None:
            worker.attempt_metrics.started(task)
        settled = False
        try:
            try:
                outcome = worker.executor.run(attempt.call(), attempt.heartbeats, attempt.abandon)
            except Exception as exc:
                # The executor itself failed (not the handler): the attempt fails all the same.
                outcome = Outcome(error=HandlerError.of(exc))
            attempt.handler_running = False
            if worker.attempt_metrics is not None:
                worker.attempt_metrics.finished(attempt, outcome)
            settled = self._report(attempt, outcome)
        finally:
            self.attempt = None
            worker.attempt_ended(attempt, settled=settled)

    def _report(self, attempt: Attempt, outcome: Outcome) -> bool:
        """Record how the attempt ended; False when it could not be, so that the worker still
        holds it (and gives it back, or leaves it to its lease, when it stops)."""
        task = attempt.task
        if outcome.cancelled and attempt.abandon.is_set():
            _discarded(task, attempt.reason or "the attempt is no longer current")
            return True
        error = outcome.error
        if outcome.cancelled:
            # Raised by the handler itself while its attempt was current: a failure like any.
            error = HandlerError.of(ActivityCancelled("the handler raised ActivityCancelled"),
                                    with_traceback=False)
        pending = attempt.heartbeats.take_pending()
        details = {} if pending is _NOTHING else {"heartbeat_details": pending}
        engine, worker = self.worker.engine, self.worker

        def record() -> str | None:
            if error is None:
                return engine.complete_activity(task, outcome.result, worker.clock(),
                                                decide=True, **details)
            return engine.fail_activity(task, error.exception_class, error.message,
                                        worker.clock(), exception_classes=error.classes,
                                        traceback=error.traceback, decide=True, **details)

        recorded, rejected = self._record(task, record)
        if rejected:
            _discarded(task, rejected)
        return recorded

    def _record(self, task: ActivityTask,
                record: Callable[[], str | None]) -> tuple[bool, str | None]:
        """Record an outcome, waiting out a database outage: the outcome is kept until it is
        written (the engine rejects it then if the attempt is no longer current). Returns
        whether the attempt is settled, and why the engine rejected the outcome, if it did."""
        try:
            recorded, rejected = until_written(self.worker, record)
        except Exception as exc:
            log.failure("activity_result_not_recorded", exc,
                        instance=task.workflow_instance_id, step=task.step,
                        attempt=task.attempt)
            return self._fail_unrecorded(task, exc), None
        if not recorded:
            log.event("activity_result_not_recorded", logging.WARNING,
                      instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
                      reason="stopped while the database was unavailable")
        return recorded, rejected

    def _fail_unrecorded(self, task: ActivityTask, error: Exception) -> bool:
        """An outcome the engine could not take fails the attempt instead, so that it never
        stays `started` for good; failing that, it is given back."""
        worker, engine = self.worker, self.worker.engine
        try:
            with worker.engine_turn:
                engine.fail_activity(task, type(error).__name__,
                                     f"the worker could not record the outcome: {error}",
                                     worker.clock(),
                                     exception_classes=[c.__name__ for c in type(error).__mro__],
                                     traceback=format_traceback(error), decide=True)
        except Exception:
            try:
                with worker.engine_turn:
                    engine.release_activity(task, worker.clock(), "worker_error")
            except Exception as exc:
                log.failure("activity_release_failed", exc, instance=task.workflow_instance_id,
                            step=task.step, attempt=task.attempt)
                return False
        return True


def decide_ready(worker: Worker, now: datetime, limit: int) -> int:
    """Claim and complete up to `limit` ready workflow tasks at `now`; how many.

    The batch holds the engine turn, so that it runs on one connection while its cache is
    warm. A completion the database refuses is waited out with the turn released: a task left
    `started` would hold its workflow until its workflow_task_timeout (which may be none).
    """
    engine = worker.engine
    decided = 0
    while decided < limit:
        refused = None
        with worker.engine_turn:
            while decided < limit:
                task = engine.claim_workflow_task(worker.worker_id, now)
                if task is None:
                    return decided
                decided += 1
                try:
                    engine.complete_workflow_task(task, now)
                except StoreUnavailable as exc:
                    worker.outage.failed(exc)
                    refused = task
                    break
        if refused is not None:
            until_written(worker, lambda task=refused: engine.complete_workflow_task(
                task, worker.clock()))
    return decided


def _discarded(task: ActivityTask, reason: str) -> None:
    log.event("activity_result_discarded", logging.WARNING,
              instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
              reason=reason)


def run_pass(worker: Worker, slots: Sequence[Slot], now: datetime) -> bool:
    """Run every ready task: one slot runs them one after another in this thread; several run
    side by side, a thread each. True when any task ran."""
    if len(slots) == 1:
        acted = False
        while not worker.stopping and slots[0].run_once(now):
            acted = True
            now = worker.clock()
        return acted
    return _SideBySide(worker, slots).run(now)


class _SideBySide:
    """One pass with several slots. It ends when a slot finds nothing ready while no other is
    mid-task and none finished a task since it looked (a finish can make new work ready);
    a slot whose handler was abandoned no longer holds the pass up."""

    def __init__(self, worker: Worker, slots: Sequence[Slot]) -> None:
        self.worker = worker
        self.slots = list(slots)
        self.changed = threading.Condition()
        self.busy: set[Slot] = set()
        self.finished = 0
        self.done = False
        self.acted = False
        self.error: BaseException | None = None

    def run(self, now: datetime) -> bool:
        threads = {slot: threading.Thread(target=self._drain, args=(slot, now), daemon=True,
                                          name=slot.name) for slot in self.slots}
        for thread in threads.values():
            thread.start()
        while any(thread.is_alive() and not slot.abandoned for slot, thread in threads.items()):
            with self.changed:
                self.changed.wait(0.1)
            if self.worker.abandon_overdue(self.worker.clock()):
                with self.changed:
                    self.changed.notify_all()
        if self.error is not None:
            raise self.error
        return self.acted

    def _drain(self, slot: Slot, now: datetime) -> None:
        try:
            first = True
            while not self.done and not self.worker.stopping:
                with self.changed:
                    seen = self.finished
                    self.busy.add(slot)
                # Read after `seen`: whatever a counted finish made ready is ready by now.
                if not first:
                    now = self.worker.clock()
                first = False
                acted = False
                try:
                    acted = slot.run_once(now)
                finally:
                    with self.changed:
                        self.busy.discard(slot)
                        if acted:
                            self.finished += 1
                            self.acted = True
                        self.changed.notify_all()
                if acted:
                    continue
                with self.changed:
                    if not any(not other.abandoned for other in self.busy) \
                            and self.finished == seen:
                        self.done = True
                        self.changed.notify_all()
                        return
                    self.changed.wait(0.05)
        except BaseException as exc:
            with self.changed:
                self.error = exc
                self.done = True
                self.changed.notify_all()
