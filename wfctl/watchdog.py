"""Finds expired deadlines and lost workers, and hands each to the engine."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wfctl import clock
from wfctl.engine import Engine
from wfctl.engine.activities import expired_timeout, lose_attempt, time_out_activity
from wfctl.engine.core import Ctx, schedule_workflow_task
from wfctl.engine.deadlines import DeadlineClaim
from wfctl.engine.decide import expired_workflow_timeout, time_out_workflow_task
from wfctl.engine.workflow_retry import fire_retry
from wfctl.store import Row
from wfctl.vocabulary import RETRY_TIMER

BATCH = 500
HOSTNAME = socket.gethostname()


@dataclass
class SweepReport:
    """What one watchdog pass did, and when the next one has work."""

    activities_timed_out: int = 0
    workflow_tasks_timed_out: int = 0
    timers_fired: int = 0
    runs_woken: int = 0
    workers_lost: list[str] = field(default_factory=list)
    next_due: datetime | None = None

    @property
    def acted(self) -> bool:
        return bool(self.activities_timed_out or self.workflow_tasks_timed_out
                    or self.timers_fired or self.runs_woken or self.workers_lost)


def process_started(pid: int) -> str | None:
    """When the process started (Linux), so that a reused pid is not taken for the old one."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def worker_alive(worker: Row | None, at: str) -> bool:
    """A worker is alive while its lease holds, and, on this host, while its process exists."""
    if worker is None or worker["stopped_at"] is not None or worker["lease_expires_at"] <= at:
        return False
    if worker["hostname"] != HOSTNAME:
        return True
    try:
        os.kill(worker["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    started = process_started(worker["pid"])
    return worker["pid_started"] is None or started is None or started == worker["pid_started"]


def sweep(engine: Engine, now: datetime, *, alive: Collection[str] = ()) -> SweepReport:
    """One pass: lost workers, activity and workflow-task timeouts, timers, run deadlines.

    `alive` names workers known to be alive whatever their lease says: the sweeping worker
    itself, whose lease may have lapsed while the database was unavailable.
    """
    report = SweepReport()
    at = clock.iso(now)
    with engine.store.read() as tx:
        lost = [w for w in tx.live_workers()
                if w["worker_id"] not in alive and not worker_alive(w, at)]
        due = tx.next_due(at)
    if lost:
        _lose_workers(engine, lost, now, report)
    if due is not None and due <= at:
        _expire(engine, now, report)
    with engine.store.read() as tx:
        report.next_due = clock.parse(tx.next_due(at))
    return report


def _lose_workers(engine: Engine, lost: list[Row], now: datetime, report: SweepReport) -> None:
    with engine.transaction(now) as c:
        ids = [w["worker_id"] for w in lost]
        for worker_id in ids:
            c.tx.stop_worker(worker_id, c.at)
        for activity in c.tx.activities_owned_by(ids):
            lose_attempt(c, activity, activity["owner"])
        for task in c.tx.workflow_tasks_owned_by(ids):
            run = c.run(task["workflow_run_id"])
            c.tx.update_workflow_task(task["task_id"], status="cancelled", closed_at=c.at)
            schedule_workflow_task(c, run, "worker_lost")
        report.workers_lost.extend(ids)


def _expire(engine: Engine, now: datetime, report: SweepReport) -> None:
    with engine.transaction(now) as c:
        for activity in c.tx.expired_activities(c.at, BATCH):
            kind = expired_timeout(activity, c.at)
            if kind is not None:
                time_out_activity(c, activity, kind)
                report.activities_timed_out += 1
        for task in c.tx.timed_out_workflow_tasks(c.at, BATCH):
            time_out_workflow_task(c, task)
            report.workflow_tasks_timed_out += 1
        for timer in c.tx.due_timers(c.at, BATCH):
            if timer["kind"] == RETRY_TIMER:
                report.timers_fired += fire_retry(c, timer)
                continue
            run = c.run(timer["workflow_run_id"])
            if _times_out_first(c, run, timer["fire_at"]):
                continue
            if c.tx.update_timer(timer["timer_id"], expect_status="scheduled", status="fired",
                                 closed_at=c.at):
                c.event(run, "TimerFired", timer_id=timer["timer_id"], step=timer["step"],
                        kind=timer["kind"], fire_at=timer["fire_at"],
                        scheduled_event_id=timer["scheduled_event_id"])
                schedule_workflow_task(c, run, "timer_fired")
                report.timers_fired += 1
        for run in c.tx.runs_past_deadline_without_task(c.at, BATCH):
            schedule_workflow_task(c, run, "deadline_expired")
            report.runs_woken += 1


def _times_out_first(c: Ctx, run: Row, fire_at: str) -> bool:
    """A watchdog that catches up late leaves a timer due after its run's execution or run
    deadline to the timeout procedure, which cancels it (the run is woken below)."""
    return (expired_workflow_timeout(run, fire_at) is not None
            and run["deadline_claimed_at"] is None
            and c.tx.open_workflow_task(run["workflow_run_id"]) is None)


HandlerRunner = Callable[[str, dict[str, Any]], object]


HandlerError = dict[str, str] | None


def sweep_deadlines(engine: Engine, worker_id: str, now: datetime, run_handler: HandlerRunner,
                    *, clock: Callable[[], datetime] | None = None,
                    keep_alive: Callable[[Callable[[], HandlerError]], HandlerError] | None = None,
                    ) -> list[dict[str, Any]]:
    """One deadline check: claim each expiry, run its on_deadline handler, record the failure.

    The handlers run one after another, each through `keep_alive` when given (which keeps the
    claims alive while it runs); `clock` reads the time after each (the caller's clock;
    without it everything is recorded at `now`).
    """
    failed = []
    for claim in engine.claim_expired_deadlines(worker_id, now, worker_alive):
        def call(claim: DeadlineClaim = claim) -> HandlerError:
            return run_on_deadline(run_handler, claim)

        handler_error = keep_alive(call) if keep_alive else call()
        recorded = record_deadline(engine, claim, handler_error, clock() if clock else now)
        if recorded is not None:
            failed.append(recorded)
    return failed


def run_on_deadline(run_handler: HandlerRunner, claim: DeadlineClaim) -> HandlerError:
    """Call a claim's on_deadline handler; what it raised, as WorkflowDeadlineExceeded records it.

    Whatever it raises is recorded, never dropped (SystemExit and KeyboardInterrupt too: they
    are the handler's, the worker stops on signals, not exceptions). Its return value is
    ignored.
    """
    if not claim.on_deadline:
        return None
    try:
        run_handler(claim.on_deadline, claim.state)
    except BaseException as exc:
        return {"exception_class": type(exc).__name__, "message": str(exc)}
    return None


def record_deadline(engine: Engine, claim: DeadlineClaim, handler_error: HandlerError,
                    now: datetime) -> dict[str, Any] | None:
    """Record a claimed expiry (WorkflowDeadlineExceeded, WorkflowFailed); what `deadlines
    check` reports of it, or None when the run was closed or claimed by another meanwhile."""
    if not engine.record_deadline_exceeded(claim, handler_error, now):
        return None
    return {
        "workflow_instance_id": claim.workflow_instance_id,
        "workflow_run_id": claim.workflow_run_id,
        "deadline_at": claim.deadline_at,
        "on_deadline": claim.on_deadline,
        "handler_error": handler_error,
        "reclaimed": claim.reclaimed,
    }
