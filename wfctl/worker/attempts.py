"""One activity attempt this worker runs, and what it knows of whether the attempt is still current."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from wfctl import clock, log
from wfctl.context import HeartbeatBuffer
from wfctl.engine.activities import ActivityTask
from wfctl.handlers import HandlerCall, Outcome
from wfctl.vocabulary import ACTIVITY_TIMEOUTS

if TYPE_CHECKING:
    from wfctl.worker.process import Worker


class Attempt:
    """A claimed attempt: its heartbeats, and `abandon`, set once it is no longer current.

    The attempt stops being current when one of its deadlines passes (known here: the task
    carries them, and each heartbeat written moves the heartbeat deadline), when a heartbeat
    write is rejected, or when the housekeeping loop finds it timed out, cancelled or its
    workflow closed. From then on its heartbeats raise ActivityCancelled, an executor that can
    stop the handler does, and a handler still running `abandon_grace` later is abandoned.
    """

    def __init__(self, task: ActivityTask, worker: Worker) -> None:
        self.task = task
        self._worker = worker
        self.abandon = threading.Event()
        self.heartbeats = HeartbeatBuffer(self._write_heartbeat, task.heartbeat_timeout,
                                          abandon=self.abandon,
                                          heartbeat_deadline_at=task.heartbeat_deadline_at)
        # For the housekeeping check: only attempts claimed before its query are judged by it.
        self.claimed = time.monotonic()
        self.handler_running = True
        self.given_up_at: datetime | None = None
        self.reason: str | None = None
        self.abandoned = False

    @property
    def key(self) -> tuple[str, int]:
        return self.task.activity_id, self.task.attempt

    def call(self) -> HandlerCall:
        task = self.task
        return HandlerCall(spec=task.handler, step=task.step, state=task.state, context={
            "workflow_id": task.workflow_instance_id, "run_id": task.workflow_run_id,
            "activity_id": task.activity_id, "step": task.step, "attempt": task.attempt,
            "max_attempts": task.max_attempts,
            "last_heartbeat_details": task.last_heartbeat_details,
            "schedule_to_close_deadline_at": task.schedule_to_close_deadline_at,
            "close_deadline_at": task.close_deadline_at,
            "heartbeat_deadline_at": task.heartbeat_deadline_at,
            "heartbeat_timeout": task.heartbeat_timeout,
        })

    def _write_heartbeat(self, details: Any) -> bool:
        worker = self._worker
        at = worker.clock()
        with worker.outage.writing():
            written = worker.engine.record_heartbeat(self.task, details, at)
        if written:
            self.heartbeats.heartbeat_deadline_at = clock.after(at, self.task.heartbeat_timeout)
        return written

    def expired(self, now: datetime) -> str | None:
        """The deadline of this attempt that has passed at `now`, if one has."""
        # A started attempt's deadlines, in the order of ACTIVITY_TIMEOUTS; the heartbeat's
        # moves with each heartbeat written, so it is read from the buffer.
        task = self.task
        for timeout in ACTIVITY_TIMEOUTS:
            if "started" not in timeout.counts_while:
                continue
            deadline = self.heartbeats.heartbeat_deadline_at if timeout.kind == "heartbeat" \
                else getattr(task, timeout.column)
            if deadline is not None and deadline <= now:
                return timeout.kind
        return None

    def give_up(self, now: datetime, reason: str) -> None:
        """The attempt is no longer current (known at `now`); said once."""
        if self.given_up_at is not None:
            return
        self.given_up_at, self.reason = now, reason
        self.abandon.set()
        if self.handler_running:
            log.event("attempt_no_longer_current", logging.WARNING,
                      instance=self.task.workflow_instance_id, step=self.task.step,
                      attempt=self.task.attempt, reason=reason)

    def overdue(self, now: datetime, grace: float) -> bool:
        """True when the handler still runs `grace` seconds after the attempt stopped being
        current: its slot is to be given up."""
        return (self.handler_running and not self.abandoned and self.given_up_at is not None
                and (now - self.given_up_at).total_seconds() >= grace)


class AttemptObserver(Protocol):
    """Told when a slot begins an attempt and when its handler ended (`work --metrics-port`)."""

    def started(self, task: ActivityTask) -> None: ...

    def finished(self, attempt: Attempt, outcome: Outcome) -> None: ...
