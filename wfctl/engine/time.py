"""What time does to a workflow: a worker is lost, a timeout expires, a timer fires, a deadline passes.

The watchdog finds what is due and calls these; each is an engine operation at an explicit `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from wfctl.engine.activities import expired_timeout, lose_attempt, time_out_activity
from wfctl.engine.core import Ctx, operation, schedule_workflow_task
from wfctl.engine.decide import expired_workflow_timeout, time_out_workflow_task
from wfctl.engine.workflow_retry import fire_retry
from wfctl.store import Row
from wfctl.vocabulary import RETRY_TIMER

if TYPE_CHECKING:
    from wfctl.engine import Engine


@dataclass
class Expired:
    """What one `expire` did."""

    activities_timed_out: int = 0
    workflow_tasks_timed_out: int = 0
    timers_fired: int = 0
    runs_woken: int = 0


@operation
def lose_workers(engine: Engine, worker_ids: list[str], now: datetime) -> None:
    """These workers stopped renewing their leases: each attempt they held failed (the retry
    policy decides), and each workflow task they held is scheduled again."""
    with engine.transaction(now) as c:
        for worker_id in worker_ids:
            c.tx.stop_worker(worker_id, c.at)
        for activity in c.tx.activities_owned_by(worker_ids):
            lose_attempt(c, activity, activity["owner"])
        for task in c.tx.workflow_tasks_owned_by(worker_ids):
            run = c.run(task["workflow_run_id"])
            c.tx.close_workflow_task(task["task_id"])
            schedule_workflow_task(c, run, "worker_lost")


@operation
def expire(engine: Engine, now: datetime, limit: int) -> Expired:
    """Enforce what is due at `now`, up to `limit` of each kind: activity and workflow-task
    timeouts, timers, and runs past a deadline that have no workflow task to notice it."""
    done = Expired()
    with engine.transaction(now) as c:
        for activity in c.tx.expired_activities(c.at, limit):
            kind = expired_timeout(activity, c.at)
            if kind is not None:
                time_out_activity(c, activity, kind)
                done.activities_timed_out += 1
        for task in c.tx.timed_out_workflow_tasks(c.at, limit):
            time_out_workflow_task(c, task)
            done.workflow_tasks_timed_out += 1
        for timer in c.tx.due_timers(c.at, limit):
            if timer["kind"] == RETRY_TIMER:
                done.timers_fired += fire_retry(c, timer)
            elif fire_timer(c, timer):
                done.timers_fired += 1
        for run in c.tx.runs_past_deadline_without_task(c.at, limit):
            schedule_workflow_task(c, run, "deadline_expired")
            done.runs_woken += 1
    return done


def fire_timer(c: Ctx, timer: Row) -> bool:
    """Fire a due timer (TimerFired, and a workflow task to act on it); False when it was not
    fired here: already fired or cancelled, or due after its run's own timeout."""
    run = c.run(timer["workflow_run_id"])
    if _times_out_first(c, run, timer["fire_at"]):
        return False
    if not c.tx.update_timer(timer["timer_id"], expect_status="scheduled", status="fired",
                             closed_at=c.at):
        return False
    c.event(run, "TimerFired", timer_id=timer["timer_id"], step=timer["step"],
            kind=timer["kind"], fire_at=timer["fire_at"],
            scheduled_event_id=timer["scheduled_event_id"])
    schedule_workflow_task(c, run, "timer_fired")
    return True


def _times_out_first(c: Ctx, run: Row, fire_at: str) -> bool:
    """A watchdog that catches up late leaves a timer due after its run's execution or run
    deadline to the timeout procedure, which cancels it (the run is woken by `expire`)."""
    return (expired_workflow_timeout(run, fire_at) is not None
            and run["deadline_claimed_at"] is None
            and c.tx.open_workflow_task(run["workflow_run_id"]) is None)
