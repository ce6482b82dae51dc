"""An activity attempt's start, whichever way it was claimed (from the queue, or at once by the
worker whose transaction scheduled it), and how an attempt that did not complete ends: the next
attempt is scheduled (the retry policy's backoff), or the activity closes for good
(ActivityFailed, ActivityTimedOut)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from wfctl import clock
from wfctl.engine.core import ACTIVITY_STARTED, Ctx, record_failure, schedule_workflow_task
from wfctl.engine.tasks import ActivityTask
from wfctl.lang import durations
from wfctl.store.records import Activity, Run
from wfctl.vocabulary import CLOSED_RUN


def started_fields(c: Ctx, run: Run, worker_id: str, policy: dict[str, Any]) -> dict[str, Any]:
    """The activity's columns once its attempt starts now: start_to_close and heartbeat
    count from here, and ActivityStarted gets the run's next seq."""
    return {
        "status": "started",
        "owner": worker_id,
        "started_at": c.now,
        "started_event_id": c.next_seq(run),
        "schedule_deadline_at": None,
        "close_deadline_at": clock.after(c.now, policy["start_to_close_timeout"]),
        "heartbeat_deadline_at": clock.after(c.now, policy["heartbeat_timeout"]),
        # Each attempt records its first heartbeat at once, whatever the last one did.
        "last_heartbeat_event_at": None,
    }


def started(c: Ctx, run: Run, fields: dict[str, Any], *, activity_id: str, step: str,
            step_index: int, branch_index: int, handler: str, queue: str, attempt: int,
            max_attempts: int, policy: dict[str, Any], scheduled_event_id: int,
            schedule_to_close_deadline_at: datetime | None, last_heartbeat_details: Any,
            available_at: datetime) -> ActivityTask:
    """Record that the attempt started with `fields` (written by the caller), and what the
    worker needs to run it."""
    close_deadline, heartbeat_deadline = fields["close_deadline_at"], fields["heartbeat_deadline_at"]
    worker_id = fields["owner"]
    c.event_of(run, ACTIVITY_STARTED, activity_id, step, attempt, worker_id, scheduled_event_id,
               close_deadline, heartbeat_deadline)
    return _task(run, policy, activity_id, attempt, max_attempts, worker_id, step, handler,
                 last_heartbeat_details, schedule_to_close_deadline_at, close_deadline,
                 heartbeat_deadline, step_index, branch_index, scheduled_event_id,
                 fields["started_event_id"], queue, (c.now - available_at).total_seconds())


def held_task(run: Run, activity: Activity) -> ActivityTask:
    """What a worker needs to run an attempt the database already records as started by it
    (the transaction that started it committed, but the worker was told it had failed)."""
    assert activity.owner is not None and activity.started_at is not None
    return _task(run, activity.retry_policy, activity.activity_id, activity.attempt,
                 activity.max_attempts, activity.owner, activity.step, activity.handler,
                 activity.last_heartbeat_details, activity.schedule_to_close_deadline_at,
                 activity.close_deadline_at, activity.heartbeat_deadline_at,
                 activity.step_index, activity.branch_index, activity.scheduled_event_id,
                 activity.started_event_id, activity.queue,
                 (activity.started_at - activity.available_at).total_seconds())


def _task(run: Run, policy: dict[str, Any], activity_id: str, attempt: int,
          max_attempts: int, worker_id: str, step: str, handler: str,
          last_heartbeat_details: Any, schedule_to_close_deadline_at: datetime | None,
          close_deadline_at: datetime | None, heartbeat_deadline_at: datetime | None,
          step_index: int, branch_index: int, scheduled_event_id: int,
          started_event_id: int | None, queue: str,
          schedule_to_start_seconds: float) -> ActivityTask:
    """An attempt as the worker gets it: its own fields, and what its run and its retry policy
    give. Called with its arguments in order (a task is made at every step)."""
    return ActivityTask(activity_id, attempt, max_attempts, worker_id, run.workflow_instance_id,
                        run.workflow_run_id, step, handler, dict(run.state),
                        last_heartbeat_details, policy["heartbeat_timeout"],
                        schedule_to_close_deadline_at, close_deadline_at, heartbeat_deadline_at,
                        tuple(policy["non_retryable"]), step_index, branch_index,
                        scheduled_event_id, started_event_id, queue, schedule_to_start_seconds)


def fail_attempt(c: Ctx, run: Run, activity: Activity, *, retryable: bool, reason: str,
                 exception_class: str | None = None, message: str | None = None,
                 timeout_kind: str | None = None, deadline_at: datetime | None = None,
                 category: str | None = None, details: dict[str, Any] | None = None,
                 backoff: float | None = None, extra: dict[str, Any] | None = None,
                 traceback: str | None = None) -> None:
    """Close the current attempt: schedule the next one, or end the activity for good."""
    if run.status in CLOSED_RUN:
        return
    extra = extra or {}
    if extra:
        # The heartbeat details reported with the outcome, as the timeout event shows them.
        activity = dataclasses.replace(activity, **extra)
    common = {
        "activity_id": activity.activity_id,
        "step": activity.step,
        "attempt": activity.attempt,
        "scheduled_event_id": activity.scheduled_event_id,
        "started_event_id": activity.started_event_id,
    }
    failure = None if timeout_kind else {"exception_class": exception_class, "message": message}
    if failure is not None and traceback:
        failure["traceback"] = traceback
    # The attempt's failure, whatever its kind, is what describe shows as its last error; a
    # timeout's deadline with it, since the next attempt's deadlines replace the attempt's (a
    # JSON column: the instant as the ISO text describe prints).
    error = {"kind": "exception", "attempt": activity.attempt, **failure} if failure else {
        "kind": "timeout", "attempt": activity.attempt, "timeout_kind": timeout_kind,
        "deadline_at": clock.iso(deadline_at), "exception_class": "ActivityTimeoutException",
        "message": f"Activity {activity.step} timed out: {timeout_kind}"}
    policy = activity.retry_policy
    if retryable and activity.attempt < activity.max_attempts:
        waits = policy["backoff_seconds"]
        wait = backoff if backoff is not None else (
            waits[min(activity.attempt, len(waits)) - 1] if waits else 0
        )
        available = c.now + timedelta(seconds=wait)
        c.tx.update_activity(
            activity.activity_id, expect_attempt=activity.attempt,
            status="retry_scheduled", attempt=activity.attempt + 1, owner=None,
            available_at=available, started_at=None, started_event_id=None,
            close_deadline_at=None, heartbeat_deadline_at=None,
            schedule_deadline_at=clock.after(available, policy["schedule_to_start_timeout"]),
            last_error=error, **extra,
        )
        attributes = {**common, "reason": reason, "next_attempt": activity.attempt + 1,
                      "retry_available_at": available,
                      "backoff_seconds": durations.whole_seconds(wait),
                      "max_attempts": activity.max_attempts}
        if timeout_kind:
            attributes.update(timeout_kind=timeout_kind, deadline_at=deadline_at)
        else:
            attributes["failure"] = failure
        c.event(run, "ActivityRetryScheduled", **attributes)
        c.woke = True
        return
    status = "timed_out" if timeout_kind else "failed"
    c.tx.update_activity(activity.activity_id, status=status, owner=None, closed_at=c.now,
                         last_error=error, **extra)
    if timeout_kind:
        message = f"Activity {activity.step} timed out: {timeout_kind}"
        c.event(run, "ActivityTimedOut", **common, timeout_kind=timeout_kind,
                deadline_at=deadline_at,
                schedule_deadline_at=activity.schedule_deadline_at,
                close_deadline_at=activity.close_deadline_at,
                schedule_to_close_deadline_at=activity.schedule_to_close_deadline_at,
                heartbeat_deadline_at=activity.heartbeat_deadline_at,
                last_heartbeat_at=activity.last_heartbeat_at,
                last_heartbeat_details=activity.last_heartbeat_details)
        record_failure(c, run, category="timeout", propagation_kind="timeout",
                       timeout_kind=timeout_kind, exception_class="ActivityTimeoutException",
                       deadline_at=deadline_at, message=message,
                       activity_id=activity.activity_id)
    else:
        c.event(run, "ActivityFailed", **common, reason=reason, exception_class=exception_class,
                message=message, retryable=retryable,
                max_attempts=activity.max_attempts,
                **({"traceback": traceback} if traceback else {}))
        if traceback:
            details = {**(details or {}), "traceback": traceback}
        record_failure(c, run, category=category or "activity", propagation_kind="activity",
                       exception_class=exception_class, message=message or "",
                       activity_id=activity.activity_id, details=details)
    schedule_workflow_task(c, run, f"activity_{status}")
