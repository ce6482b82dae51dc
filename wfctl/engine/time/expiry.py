"""What the watchdog enforces once it is due: a lost worker's work, expired timeouts, due timers.

`sweep` finds what is due and calls these; what an expired timeout does is `timeouts`'s. Each is
an engine operation at an explicit `now`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from wfctl.engine.attempts import fail_attempt
from wfctl.engine.control import retry_run
from wfctl.engine.core import Ctx, EngineCore, operation, schedule_workflow_task
from wfctl.engine.time.timeouts import (
    expired_timeout,
    expired_workflow_timeout,
    time_out_activity,
    time_out_workflow_task,
)
from wfctl.store.records import Activity, Run, Timer
from wfctl.vocabulary import RETRY_TIMER, RETRY_WAIT, SIGNAL_TIMER


@dataclass
class Expired:
    """What one `expire` did."""

    activities_timed_out: int = 0
    workflow_tasks_timed_out: int = 0
    timers_fired: int = 0
    runs_woken: int = 0


@operation
def lose_workers(engine: EngineCore, worker_ids: list[str], now: datetime) -> None:
    """These workers stopped renewing their leases: each attempt they held failed (the retry
    policy decides), and each workflow task they held is scheduled again."""
    with engine.transaction(now) as c:
        for worker_id in worker_ids:
            c.tx.stop_worker(worker_id, c.now)
        for activity in c.tx.activities_owned_by(worker_ids):
            _lose_attempt(c, activity, activity.owner)
        for task in c.tx.workflow_tasks_owned_by(worker_ids):
            run = c.run(task.workflow_run_id)
            c.tx.close_workflow_task(task.task_id)
            schedule_workflow_task(c, run, "worker_lost")


def _lose_attempt(c: Ctx, activity: Activity, worker_id: str) -> None:
    """The worker holding this attempt is gone: the attempt failed, the retry policy decides."""
    run = c.run(activity.workflow_run_id)
    fail_attempt(c, run, activity, retryable=True, reason="worker_lost",
                 exception_class="WorkerLost",
                 message=f"worker {worker_id} stopped renewing its liveness")


@dataclass
class _Due:
    """What a sweep found due of one instance, as keys (and, for timers, the rows)."""

    activities: list[str] = field(default_factory=list)
    workflow_tasks: list[int] = field(default_factory=list)
    timers: list[Timer] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def expire(engine: EngineCore, now: datetime, limit: int,
           clock_now: Callable[[], datetime] | None = None) -> Expired:
    """Enforce what is due at `now`, up to `limit` of each kind: activity and workflow-task
    timeouts, timers, and runs past a deadline that have no workflow task to notice it.

    What is due is found by a read, which locks nothing; then each instance's share is
    enforced in a short transaction of its own, which reads it again and acts only on what is
    still due (a worker may have completed it, or another watchdog enforced it, meanwhile).
    With `clock_now`, each of those transactions acts at the instant it reads when it begins
    (what was due at `now` is due then too): a long pass must not stamp what it records, and
    the backoffs and deadlines counted from it, with the instant it began.
    Due timers are read a page at a time: a page none of whose timers could fire (each due
    after its run's own timeout, which comes first) is followed by the next one.
    """
    due: dict[str, _Due] = {}
    with engine.store.read() as tx:
        for activity in tx.expired_activities(now, limit):
            due.setdefault(activity.workflow_instance_id, _Due()).activities.append(
                activity.activity_id)
        for task in tx.timed_out_workflow_tasks(now, limit):
            due.setdefault(task.workflow_instance_id, _Due()).workflow_tasks.append(task.task_id)
    done = Expired()
    after: tuple[datetime, str] | None = None
    while True:
        with engine.store.read() as tx:
            page = tx.due_timers(now, limit, after)
        for timer in page:
            due.setdefault(timer.workflow_instance_id, _Due()).timers.append(timer)
        for instance_due in due.values():
            _add(done, _expire_instance(engine, _at(now, clock_now), instance_due))
        due.clear()
        if len(page) < limit or done.timers_fired:
            break
        after = (page[-1].fire_at, page[-1].timer_id)
    # Runs are woken last: a timer due after its run's timeout is the timeout's to cancel,
    # and fires no more once the run has a workflow task.
    with engine.store.read() as tx:
        for run in tx.runs_past_deadline_without_task(now, limit):
            due.setdefault(run.workflow_instance_id, _Due()).runs.append(
                run.workflow_run_id)
    for instance_due in due.values():
        _add(done, _expire_instance(engine, _at(now, clock_now), instance_due))
    return done


def _at(now: datetime, clock_now: Callable[[], datetime] | None) -> datetime:
    return now if clock_now is None else max(now, clock_now())


def _add(total: Expired, part: Expired) -> None:
    total.activities_timed_out += part.activities_timed_out
    total.workflow_tasks_timed_out += part.workflow_tasks_timed_out
    total.timers_fired += part.timers_fired
    total.runs_woken += part.runs_woken


@operation
def _expire_instance(engine: EngineCore, now: datetime, due: _Due) -> Expired:
    """Enforce what was found due of one instance, whatever of it is still due now."""
    done = Expired()
    with engine.transaction(now) as c:
        for activity_id in due.activities:
            activity = c.tx.get_activity(activity_id)
            kind = None if activity is None else expired_timeout(activity, c.now)
            if kind is not None:
                time_out_activity(c, activity, kind)
                done.activities_timed_out += 1
        for task_id in due.workflow_tasks:
            task = c.tx.get_workflow_task(task_id)
            if task is not None and task.status == "started" and \
                    task.timeout_at is not None and task.timeout_at <= c.now:
                time_out_workflow_task(c, task)
                done.workflow_tasks_timed_out += 1
        for timer in due.timers:
            # Firing is a conditional update: a timer fired or cancelled meanwhile is not.
            if timer.kind == RETRY_TIMER:
                done.timers_fired += fire_retry(c, timer)
            elif fire_timer(c, timer):
                done.timers_fired += 1
        for run_id in due.runs:
            run = c.run(run_id)
            if run is not None and run.closed_at is None \
                    and run.deadline_claimed_at is None \
                    and expired_workflow_timeout(run, c.now) is not None \
                    and run_id not in c.pending_tasks \
                    and c.tx.open_workflow_task(run_id) is None:
                schedule_workflow_task(c, run, "deadline_expired")
                done.runs_woken += 1
    return done


def fire_timer(c: Ctx, timer: Timer) -> bool:
    """Fire a due timer (TimerFired, and a workflow task to act on it); False when it was not
    fired here: already fired or cancelled, or due after its run's own timeout."""
    run = c.run(timer.workflow_run_id)
    if _times_out_first(c, run, timer.fire_at):
        return False
    if timer.kind == SIGNAL_TIMER and _signal_came_first(c, run, timer):
        return False
    if not c.tx.update_timer(timer.timer_id, expect_status="scheduled", status="fired",
                             closed_at=c.now):
        return False
    c.event(run, "TimerFired", timer_id=timer.timer_id, step=timer.step,
            kind=timer.kind, fire_at=timer.fire_at,
            scheduled_event_id=timer.scheduled_event_id)
    schedule_workflow_task(c, run, "timer_fired")
    return True


def _signal_came_first(c: Ctx, run: Run, timer: Timer) -> bool:
    """A signal the wait takes arrived before its timeout: the wait ended then, however late
    the watchdog comes, so the timeout never happened. The timer is cancelled as the decision
    that takes the signal would have cancelled it, and that decision is left to take it."""
    if run.step_index != timer.step_index:
        return False
    step = c.fixed(run).wf.steps[timer.step_index]
    signal = c.tx.first_pending_signal(run.workflow_instance_id, step.signal)
    # The same rule as the decision's (`decide._check_signal`): at the timeout's instant is late.
    if signal is None or signal.received_at >= timer.fire_at:
        return False
    if c.tx.update_timer(timer.timer_id, expect_status="scheduled", status="cancelled",
                         closed_at=c.now):
        c.event(run, "TimerCancelled", timer_id=timer.timer_id, step=timer.step,
                kind=timer.kind, fire_at=timer.fire_at, reason="signal_received",
                scheduled_event_id=timer.scheduled_event_id)
    return True


def _times_out_first(c: Ctx, run: Run, fire_at: datetime) -> bool:
    """A watchdog that catches up late leaves a timer due after its run's execution or run
    deadline to the timeout procedure, which cancels it (the run is woken by `expire`)."""
    return (expired_workflow_timeout(run, fire_at) is not None
            and run.deadline_claimed_at is None
            and c.tx.open_workflow_task(run.workflow_run_id) is None)


def fire_retry(c: Ctx, timer: Timer) -> bool:
    """A retry's backoff timer is due: do what `wfctl retry` does, then WorkflowRetried.

    False when there is nothing to retry: the timer was taken by another watchdog, or the run's
    passed deadline was claimed meanwhile (a worker that was down past it), whose failure closes
    the run; the timer is spent either way.
    """
    if not c.tx.update_timer(timer.timer_id, expect_status="scheduled", status="fired",
                             closed_at=c.now):
        return False
    run = c.run(timer.workflow_run_id)
    if run is None or run.closed_at is not None or run.wait_kind != RETRY_WAIT \
            or run.deadline_claimed_at is not None:
        return False
    scheduled = c.tx.event(run.workflow_instance_id, timer.scheduled_event_id).attributes
    retry_run(c, c.instance(run.workflow_instance_id), run,
              previous_status=scheduled["closed_status"], attempt=scheduled["attempt"],
              scheduled_event_id=timer.scheduled_event_id)
    return True
