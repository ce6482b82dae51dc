"""The watchdog loop: enforces timeouts on its own schedule, and decides what that makes ready."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from wfctl.engine.time.sweep import sweep
from wfctl.worker.loop import Loop
from wfctl.worker.slots import decide_ready

if TYPE_CHECKING:
    from wfctl.worker.process import Worker

# How often the watchdog looks again when nothing is due sooner.
WATCH_TICK = 0.25
DECISIONS_PER_PASS = 1000


class Watchdog(Loop):
    """Activity and workflow timeouts, timers and lost workers (`engine.time.sweep.sweep`), then
    the workflow tasks that are ready: decisions never wait for a free slot, so a timeout, a
    timer or a signal is acted on even while every slot runs a long handler."""

    name = "watchdog"

    def __init__(self, worker: Worker) -> None:
        super().__init__(worker)
        self._swept_something = False
        self._next_due: datetime | None = None

    def run_once(self, now: datetime) -> bool:
        worker = self.worker
        engine = worker.engine
        # This worker is alive whatever its lease says (a long outage can outlast it).
        report = sweep(engine, now, alive=(worker.worker_id,), clock_now=worker.clock,
                       leases_tell=worker.lease.leases_tell())
        self._swept_something, self._next_due = report.acted, report.next_due
        decided = 0
        if report.acted or \
                engine.store.peek().next_ready_workflow_task(now) is not None:
            decided = decide_ready(worker, now, limit=DECISIONS_PER_PASS)
        return report.acted or decided > 0

    def pause(self, acted: bool) -> float:
        # Decisions alone do not call for another pass at once: the slots decide too.
        if self._swept_something:
            return 0.0
        if self._next_due is None:
            return WATCH_TICK
        return min(WATCH_TICK, max(0.0, (self._next_due - self.worker.clock()).total_seconds()))
