"""The activity attempts this worker holds: each one, what it knows of whether it is still current, and
the registry of them all."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from wfctl import clock
from wfctl.engine.tasks import ActivityTask
from wfctl.lang.context import _NOTHING, ActivityContext, Flag, HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall, Outcome
from wfctl.ops import log
from wfctl.vocabulary import ACTIVITY_TIMEOUTS

if TYPE_CHECKING:
    from wfctl.worker.loop import Shared


class Running(Protocol):
    """An attempt as an executor runs it (`Attempt` below; tests make their own)."""

    task: ActivityTask
    abandon: Flag

    @property
    def heartbeats(self) -> HeartbeatBuffer:
        """Its heartbeat buffer (made when first asked for: most handlers never beat)."""
        ...

    def call(self) -> HandlerCall:
        """The handler's call in plain values, to cross to another process."""
        ...

    def context(self) -> ActivityContext:
        """The second argument of a handler that takes one."""
        ...


class Attempt:
    """A claimed attempt: its heartbeats, and `abandon`, set once it is no longer current.

    The attempt stops being current when one of its deadlines passes (known here: the task
    carries them, and each heartbeat written moves the heartbeat deadline), when a heartbeat
    write is rejected, or when the housekeeping loop finds it timed out, cancelled or its
    workflow closed. From then on its heartbeats raise ActivityCancelled, an executor that can
    stop the handler does, and a handler still running `abandon_grace` later is abandoned.

    `check_deadlines` says whether the pass that claimed it checks workflow deadlines (the
    long-running worker's do, `work --once`'s do not); its heartbeat and outcome go in alike.
    """

    def __init__(self, task: ActivityTask, shared: Shared, *, check_deadlines: bool) -> None:
        self.task = task
        # How the worker's registry knows it: its activity and attempt number.
        self.key = (task.activity_id, task.attempt)
        self._shared = shared
        self.check_deadlines = check_deadlines
        self.abandon = Flag()
        # Made when a handler's context, an executor or the shutdown asks for it (`heartbeats`).
        self._heartbeats: HeartbeatBuffer | None = None
        # For the housekeeping check: only attempts claimed before its query are judged by it.
        self.claimed = time.monotonic()
        self.handler_running = True
        self.given_up_at: datetime | None = None
        self.reason: str | None = None
        self.abandoned = False

    @property
    def heartbeats(self) -> HeartbeatBuffer:
        """The attempt's heartbeat buffer, made when first asked for: a handler that takes the
        state alone never beats, and its attempt makes none (nor the cycle through
        `_write_heartbeat` that only the collector would free)."""
        buffer = self._heartbeats
        if buffer is None:
            task = self.task
            buffer = self._heartbeats = HeartbeatBuffer(
                self._write_heartbeat, task.heartbeat_timeout, abandon=self.abandon,
                heartbeat_deadline_at=task.heartbeat_deadline_at)
        return buffer

    def flush_heartbeats_if_due(self) -> None:
        """Write the latest heartbeat if its interval has passed (`HeartbeatBuffer`)."""
        buffer = self._heartbeats
        if buffer is not None:
            buffer.flush_if_due()

    def take_pending_heartbeat(self) -> dict[str, Any]:
        """The latest heartbeat's details not written yet, as the keyword arguments of the
        attempt's outcome or release (none when there are none)."""
        buffer = self._heartbeats
        if buffer is None:
            return {}
        pending = buffer.take_pending()
        return {} if pending is _NOTHING else {"heartbeat_details": pending}

    def context(self) -> ActivityContext:
        return ActivityContext(**self.call().context, heartbeats=self.heartbeats)

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
        shared = self._shared
        at = shared.clock()
        with shared.outage.writing():
            written = shared.engine.record_heartbeat(self.task, details, at,
                                                     check_deadlines=self.check_deadlines)
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
            if timeout.kind == "heartbeat":
                buffer = self._heartbeats
                deadline = task.heartbeat_deadline_at if buffer is None \
                    else buffer.heartbeat_deadline_at
            else:
                deadline = getattr(task, timeout.column)
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


class Attempts:
    """Every attempt this worker holds, under one lock: those running in a slot, those abandoned
    (their slot given up while the handler goes on), and those whose outcome could not be
    recorded (still this worker's to give back); and how many ended. `enough` is called once
    `max_tasks` attempts ended."""

    def __init__(self, max_tasks: int | None, enough: Callable[[], None]) -> None:
        self.max_tasks = max_tasks
        self._enough = enough
        self._lock = threading.Lock()
        self._running: dict[tuple[str, int], Attempt] = {}
        self._abandoned: dict[tuple[str, int], Attempt] = {}
        self._unsettled: dict[tuple[str, int], Attempt] = {}
        self.done = 0
        self.abandoned_total = 0

    def started(self, attempt: Attempt) -> None:
        with self._lock:
            self._running[attempt.key] = attempt

    def ended(self, attempt: Attempt, *, settled: bool) -> None:
        with self._lock:
            self._running.pop(attempt.key, None)
            returned = self._abandoned.pop(attempt.key, None) is not None
            if not settled:
                self._unsettled[attempt.key] = attempt
            abandoned = len(self._abandoned)
            self.done += 1
            limit = self.max_tasks
            enough = limit is not None and self.done >= limit
        if returned:
            log.event("abandoned_handler_returned", instance=attempt.task.workflow_instance_id,
                      step=attempt.task.step, attempt=attempt.task.attempt, abandoned=abandoned)
        if enough:
            self._enough()

    def budget(self, wanted: int) -> int:
        """How many of `wanted` new attempts may be claimed: never more than `max_tasks`
        counts, with the attempts running included."""
        limit = self.max_tasks
        if limit is None:
            return wanted
        with self._lock:
            left = limit - self.done - len(self._running)
        return max(0, min(wanted, left))

    def running(self) -> list[Attempt]:
        """The attempts whose handlers run in a slot (abandoned ones aside)."""
        with self._lock:
            return list(self._running.values())

    def abandon(self, attempt: Attempt) -> tuple[int, int]:
        """The attempt's slot is given up: how many are abandoned now, and in all."""
        with self._lock:
            self._running.pop(attempt.key, None)
            self._abandoned[attempt.key] = attempt
            self.abandoned_total += 1
            return len(self._abandoned), self.abandoned_total

    def held(self) -> list[Attempt]:
        """Every attempt still this worker's: running, abandoned, unsettled."""
        with self._lock:
            return [*self._running.values(), *self._abandoned.values(),
                    *self._unsettled.values()]

    def counts(self) -> tuple[int, int, int]:
        """How many run, how many ended, how many are abandoned."""
        with self._lock:
            return len(self._running), self.done, len(self._abandoned)
