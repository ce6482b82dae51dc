"""The watchdog loop: enforces timeouts on its own schedule, and decides what that makes ready."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from wfctl.engine.time.sweep import sweep
from wfctl.worker.loop import Loop, Shared
from wfctl.worker.slots import PENDING_LOOK, StepPath, decide_ready

# How often the watchdog looks again when nothing is due sooner.
WATCH_TICK = 0.25
DECISIONS_PER_PASS = 1000


class Watchdog(Loop):
    """Activity and workflow timeouts, timers and lost workers (`engine.time.sweep.sweep`), then
    the workflow tasks that are ready: decisions never wait for a free slot, so a timeout, a
    timer or a signal is acted on even while every slot runs a long handler."""

    name = "watchdog"

    def __init__(self, shared: Shared, steps: StepPath, leases_tell: Callable[[], bool]) -> None:
        super().__init__(shared)
        self.steps = steps
        self._leases_tell = leases_tell
        self._swept_something = False
        self._next_due: datetime | None = None
        self._swept_at = float("-inf")
        self._left_to_slots = False

    def run_once(self, now: datetime, *, check_deadlines: bool = True) -> bool:
        shared = self.shared
        engine = shared.engine
        monotonic = time.monotonic()
        self.steps.look_after(monotonic)
        if self._left_to_slots and monotonic - self._swept_at < WATCH_TICK \
                and (self._next_due is None or self._next_due > now) \
                and self.steps.moving(monotonic):
            # A look in between sweeps while the slots decide: nothing is due before the next.
            return False
        # This worker is alive whatever its lease says (a long outage can outlast it).
        report = sweep(engine, now, alive=(shared.worker_id,), clock_now=shared.clock,
                       leases_tell=self._leases_tell())
        self._swept_at = monotonic
        self._swept_something, self._next_due = report.acted, report.next_due
        decided = 0
        if report.acted or self._decisions_due(now):
            decided = decide_ready(shared, self.steps, now, limit=DECISIONS_PER_PASS,
                                   check_deadlines=check_deadlines)
        return report.acted or decided > 0

    def _decisions_due(self, now: datetime) -> bool:
        """Whether a workflow task is ready for the watchdog to decide. A slot that drives
        decides in each of its batches, and takes what its decisions schedule at once: while
        one moves on (`StepPath.moving`: a handler returned or a batch ran within
        `PENDING_LOOK`), the watchdog leaves the decisions to it, and looks again that much
        later."""
        if self.steps.moving(time.monotonic()):
            self._left_to_slots = True
            return False
        self._left_to_slots = False
        return self.shared.engine.store.peek().next_ready_workflow_task(now) is not None

    def pause(self, acted: bool) -> float:
        # Decisions alone do not call for another pass at once: the slots decide too.
        if self._swept_something:
            return 0.0
        tick = PENDING_LOOK if self._left_to_slots else WATCH_TICK
        if self._next_due is None:
            return tick
        return min(tick, max(0.0, (self._next_due - self.shared.clock()).total_seconds()))
