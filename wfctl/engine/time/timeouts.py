"""Timeouts: which of an activity's or a run's has expired at an instant, and what expiring does.

Each is enforced where it is noticed first: by the watchdog's `expire`, by a result that comes
in late, or by a decision that finds its run past a workflow timeout.
"""

from __future__ import annotations

import operator
from datetime import datetime

from wfctl import clock
from wfctl.engine.attempts import fail_attempt
from wfctl.engine.closing import close_run
from wfctl.engine.core import Ctx, record_failure, schedule_workflow_task
from wfctl.store.records import Activity, Run, WorkflowTask
from wfctl.vocabulary import ACTIVITY_TIMEOUTS, TIMEOUTS, WORKFLOW_TIMEOUTS


def expired_timeout(activity: Activity, at: datetime) -> str | None:
    """The timeout kind that expired, in the order schedule_to_close, schedule_to_start,
    heartbeat, start_to_close; None when every deadline still holds."""
    for timeout in ACTIVITY_TIMEOUTS:
        deadline = getattr(activity, timeout.column)
        if activity.status in timeout.counts_while and deadline is not None and deadline <= at:
            return timeout.kind
    return None


def time_out_activity(c: Ctx, activity: Activity, kind: str) -> None:
    """Enforce one expired activity deadline: a retry, or the terminal ActivityTimedOut."""
    run = c.run(activity.workflow_run_id)
    column = TIMEOUTS[kind].column
    fail_attempt(c, run, activity, retryable=kind != "schedule_to_close",
                 reason="timeout", timeout_kind=kind, deadline_at=getattr(activity, column))


def time_out_workflow_task(c: Ctx, task: WorkflowTask) -> None:
    """SWF's decision task timeout: record it and schedule a fresh workflow task."""
    run = c.run(task.workflow_run_id)
    c.tx.close_workflow_task(task.task_id)
    c.event(run, "WorkflowTaskTimedOut", timeout_kind="start_to_close",
            scheduled_event_id=task.scheduled_event_id,
            started_event_id=task.started_event_id, deadline_at=task.timeout_at,
            worker_id=task.owner)
    schedule_workflow_task(c, run, "workflow_task_timed_out")


_WORKFLOW_DEADLINES = operator.attrgetter(*(timeout.column for timeout in WORKFLOW_TIMEOUTS))
_NO_DEADLINES = (None,) * len(WORKFLOW_TIMEOUTS)


def expired_workflow_timeout(run: Run, at: datetime) -> tuple[str, datetime] | None:
    """(timeout_kind, deadline) when a workflow timeout expired; execution wins over run."""
    deadlines = _WORKFLOW_DEADLINES(run)
    if deadlines == _NO_DEADLINES:
        # No workflow timeout set (most types): asked at each result and decision.
        return None
    for timeout, deadline in zip(WORKFLOW_TIMEOUTS, deadlines, strict=True):
        if deadline is not None and deadline <= at:
            return timeout.kind, deadline
    return None


def time_out_run(c: Ctx, run: Run, kind: str, deadline: datetime,
                 keep_task: int | None) -> None:
    """The timeout procedure, in the caller's transaction."""
    message = f"Workflow {TIMEOUTS[kind].label} expired at {clock.iso(deadline)}"
    failure_id = record_failure(
        c, run, category="timeout", message=message, timeout_kind=kind,
        exception_class="WorkflowTimeoutException", deadline_at=deadline,
    )
    instance = c.instance(run.workflow_instance_id)
    close_run(c, run, "timed_out", "WorkflowTimedOut", {
        "timeout_kind": kind,
        "deadline_at": deadline,
        "execution_deadline_at": run.execution_deadline_at,
        "run_deadline_at": run.run_deadline_at,
        "child_policy": instance.child_policy,
        "message": message,
    }, failure_id=failure_id, reason=kind, keep_task=keep_task)
