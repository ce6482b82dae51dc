"""What an operator does to an instance: signal, pause, resume, cancel, terminate, retry."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wfctl import clock
from wfctl.engine.closing import close_run, notify_parent, request_cancel
from wfctl.engine.core import Ctx, EngineCore, check_payload, operation, schedule_workflow_task
from wfctl.errors import (
    Conflict,
    DeadlinePassed,
    NotFound,
    SignalNotAwaited,
    StructuralLimitExceeded,
)
from wfctl.store.records import Instance, Run
from wfctl.vocabulary import (
    OPEN_RUN,
    RESUMABLE_RUN,
    RETRY_TIMER,
    RETRY_WAIT,
    UNSUCCESSFUL_ACTIVITY,
)


def _open_run(c: Ctx, instance_id: str, action: str) -> tuple[Instance, Run]:
    instance = c.tx.get_instance(instance_id)
    if instance is None:
        raise NotFound(f"no instance {instance_id!r}")
    run = c.run(instance.current_run_id)
    if instance.status not in OPEN_RUN:
        allowed = "describe, history and retry" if instance.status in RESUMABLE_RUN \
            else "describe and history"
        raise Conflict(
            f"cannot {action} {instance_id}: it is {instance.status} "
            f"(a closed instance accepts only {allowed})"
        )
    return instance, run


@operation
def signal(engine: EngineCore, instance_id: str, name: str, data: dict[str, Any] | None,
           now: datetime, *, force: bool = False, reason: str | None = None) -> dict[str, Any]:
    """Deliver a signal; it waits in a buffer until a `wait_for_signal` step takes it.

    A name no `wait_for_signal` step of the instance's type waits for is refused (a typo would
    otherwise wait in the buffer for ever) unless `force`.
    """
    with engine.transaction(now) as c:
        instance, run = _open_run(c, instance_id, "signal")
        awaited_names = c.workflow_type(instance).signals()
        if name not in awaited_names and not force:
            raise SignalNotAwaited(instance_id, instance.workflow_type, name,
                                   tuple(awaited_names))
        limits = c.limits(instance)
        if data is not None:
            check_payload(limits, data)
        pending = c.tx.count_pending_signals(instance_id) + 1
        if limits.pending_signal_count and pending > limits.pending_signal_count:
            raise StructuralLimitExceeded("pending_signal_count", pending,
                                          limits.pending_signal_count)
        step = _current_step(c, instance, run)
        awaited = (step is not None and step.kind == "wait_for_signal" and step.signal == name
                   and run.step_started)
        seq = c.event(run, "SignalReceived", signal=name, data=data, buffered=not awaited,
                      **_reason(reason))
        c.tx.insert_signal({
            "workflow_instance_id": instance_id,
            "name": name,
            "data": data,
            "received_at": c.now,
            "received_event_id": seq,
        })
        if awaited and run.status != "paused":
            schedule_workflow_task(c, run, "signal_received")
        return {"workflow_instance_id": instance_id, "signal": name, "buffered": not awaited}


def _reason(reason: str | None) -> dict[str, str]:
    """An operator's reason as an event's attribute; none when not given (the event stays as
    it always was)."""
    return {"reason": reason} if reason else {}


def _current_step(c: Ctx, instance: Instance, run: Run) -> Any:
    steps = c.workflow_type(instance).steps
    return steps[run.step_index] if run.step_index < len(steps) else None


@operation
def pause(engine: EngineCore, instance_id: str, now: datetime, *,
          reason: str | None = None) -> dict[str, Any]:
    """No new step starts while paused; a running activity finishes and its result is kept."""
    with engine.transaction(now) as c:
        _, run = _open_run(c, instance_id, "pause")
        if run.status == "paused":
            raise Conflict(f"{instance_id} is already paused")
        c.set_status(run, "paused")
        c.event(run, "WorkflowPaused", **_reason(reason))
        return {"workflow_instance_id": instance_id, "status": "paused"}


@operation
def resume(engine: EngineCore, instance_id: str, now: datetime, *,
           reason: str | None = None) -> dict[str, Any]:
    with engine.transaction(now) as c:
        _, run = _open_run(c, instance_id, "resume")
        if run.status != "paused":
            raise Conflict(f"{instance_id} is not paused (it is {run.status})")
        status = "waiting" if run.wait_kind in ("signal", "child") else "running"
        c.set_status(run, status)
        c.event(run, "WorkflowResumed", status=status, **_reason(reason))
        schedule_workflow_task(c, run, "resumed")
        return {"workflow_instance_id": instance_id, "status": status}


@operation
def cancel(engine: EngineCore, instance_id: str, reason: str | None,
           now: datetime) -> dict[str, Any]:
    """Cooperative: the next workflow task cancels open work and closes the run."""
    with engine.transaction(now) as c:
        _, run = _open_run(c, instance_id, "cancel")
        if run.cancel_requested:
            raise Conflict(f"cancellation of {instance_id} was already requested")
        request_cancel(c, run, reason)
        return {"workflow_instance_id": instance_id, "status": run.status,
                "cancel_requested": True}


@operation
def terminate(engine: EngineCore, instance_id: str, reason: str | None,
              now: datetime) -> dict[str, Any]:
    """Immediate: open work is cancelled and the run closes in this transaction."""
    with engine.transaction(now) as c:
        _, run = _open_run(c, instance_id, "terminate")
        close_run(c, run, "terminated", "WorkflowTerminated", {"reason": reason},
                  reason="terminated")
        return {"workflow_instance_id": instance_id, "status": "terminated"}


@operation
def retry(engine: EngineCore, instance_id: str, now: datetime, *,
          extend_deadline: float | None = None, clear_deadline: bool = False,
          keep_deadline: bool = False, reason: str | None = None) -> dict[str, Any]:
    """Run a failed or timed-out instance again from the step that failed, or resume a
    cancelled or terminated one from the step that was stopped (see `retry_run`).

    The deadline is kept unless told otherwise, but one that has passed only with
    `keep_deadline`: the run would fail by it again at once. The run timeout starts afresh. A
    type with a retry policy starts a new series of attempts.
    """
    with engine.transaction(now) as c:
        instance = c.tx.get_instance(instance_id)
        if instance is None or c.tx.is_pruning(instance_id):
            raise NotFound(f"no instance {instance_id!r}")
        if instance.status not in RESUMABLE_RUN:
            raise Conflict(f"cannot retry {instance_id}: it is {instance.status}"
                           f"{_backoff_note(c, instance)} "
                           "(only failed, timed_out, cancelled or terminated instances can be "
                           "retried)")
        run = c.run(instance.current_run_id)
        passed = run.deadline_at
        if passed is not None and passed <= c.now and extend_deadline is None \
                and not clear_deadline and not keep_deadline:
            raise DeadlinePassed(instance_id, clock.iso(passed))
        return retry_run(c, instance, run, previous_status=instance.status,
                         extend_deadline=extend_deadline, clear_deadline=clear_deadline,
                         reason=reason)


def _backoff_note(c: Ctx, instance: Instance) -> str:
    """', waiting to retry at T' for an instance whose retry policy already scheduled a retry."""
    run = c.run(instance.current_run_id)
    if run.wait_kind != RETRY_WAIT:
        return ""
    due = [t.fire_at for t in c.tx.open_timers(run.workflow_run_id) if t.kind == RETRY_TIMER]
    return f", waiting to retry at {clock.iso(due[0])} (its retry policy's attempt " \
        f"{run.retry_attempt})" if due else ""


def retry_run(c: Ctx, instance: Instance, run: Run, *, previous_status: str,
              extend_deadline: float | None = None, clear_deadline: bool = False,
              attempt: int = 1, scheduled_event_id: int | None = None,
              reason: str | None = None) -> dict[str, Any]:
    """What `retry` does to a run, in the caller's transaction: the failed (or stopped) step's
    work is set aside, the run is open again at that step with a fresh run timeout, the
    deadline kept (unless told), and a workflow task decides what comes next.

    The step runs again from its beginning, but what of it completed stays done: an activity
    that failed or was cancelled runs again (a new first attempt), a completed branch of a
    parallel step does not; a delay waits its whole duration again, a signal wait opens again
    with its whole timeout (a signal received meanwhile is taken at once). Of the step's
    children, one that completed is kept (if it completed after the run closed, its result is
    merged now, as it would have been), one that ended otherwise is started afresh, one still
    running (the child policy abandoned it) is waited for again, and one asked to cancel by the
    child policy is let go and started afresh.

    A retry policy's retry passes the `attempt` it starts and the WorkflowRetryScheduled event
    that scheduled it; a paused run stays paused (its resume goes on from the step).
    """
    instance_id = instance.workflow_instance_id
    index = run.step_index
    run_id = run.workflow_run_id
    completed_late = _set_aside_step_work(c, run)
    previous = run.deadline_at
    deadline_at, change = _retried_deadline(c, previous, extend_deadline, clear_deadline)
    run_deadline_at = clock.after(c.now, run.run_timeout_seconds)
    status = "paused" if run.status == "paused" else "running"
    c.set_status(run, status, closed_at=None, closed_reason=None, failure_id=None,
                 step_started=False, wait_kind=None, cancel_requested=False,
                 deadline_claimed_by=None, deadline_claimed_at=None,
                 deadline_at=deadline_at, run_deadline_at=run_deadline_at,
                 retry_attempt=attempt)
    fields: dict[str, Any] = {"deadline_at": deadline_at}
    if change != "kept":
        fields["deadline_seconds"] = extend_deadline
    c.update_instance(instance_id, **fields)
    wf = c.workflow_type(instance)
    step = wf.steps[index].name if index < len(wf.steps) else None
    attributes: dict[str, Any] = {
        "step": step, "step_index": index, "previous_status": previous_status,
        "deadline_at": deadline_at, "previous_deadline_at": previous, "deadline_change": change,
        "run_deadline_at": run_deadline_at, "execution_deadline_at": run.execution_deadline_at,
        "retried_by": "command" if scheduled_event_id is None else "retry_policy",
    }
    if wf.retry is not None:
        attributes.update(attempt=attempt, max_attempts=wf.retry.max_attempts)
    if scheduled_event_id is not None:
        attributes["scheduled_event_id"] = scheduled_event_id
    c.event(run, "WorkflowRetried", **attributes, **_reason(reason))
    for child_run in completed_late:
        notify_parent(c, child_run, "completed")
    schedule_workflow_task(c, run, "retried")
    return {
        "retried": True,
        "workflow_instance_id": instance_id,
        "workflow_run_id": run_id,
        "step": step,
        "deadline_at": deadline_at,
        "deadline_change": change,
        "warnings": _retry_warnings(c, run, deadline_at),
    }


def _set_aside_step_work(c: Ctx, run: Run) -> list[Run]:
    """Set aside what of the run's current step is to start again (see `retry_run`); the runs
    of its children that completed after the run closed, whose results are yet to merge."""
    index = run.step_index
    run_id = run.workflow_run_id
    closed_at = run.closed_at
    for activity in c.tx.step_activities(run_id, index):
        if activity.status in UNSUCCESSFUL_ACTIVITY:
            c.tx.update_activity(activity.activity_id, superseded=True)
    for timer in c.tx.step_timers(run_id, index):
        c.tx.update_timer(timer.timer_id, superseded=True)
    c.tx.supersede_children(run_id, index)
    completed_late = []
    for child in c.tx.run_children(run_id):
        if child.step_index != index or child.superseded:
            continue
        child_run = c.run(c.instance(child.child_instance_id).current_run_id)
        if child.status in OPEN_RUN and child_run.cancel_requested:
            c.tx.supersede_child(child.child_instance_id)
        elif child.status == "completed" and closed_at is not None \
                and child.closed_at > closed_at:
            completed_late.append(child_run)
    return completed_late


def _retried_deadline(c: Ctx, previous: datetime | None, extend_deadline: float | None,
                      clear_deadline: bool) -> tuple[datetime | None, str]:
    """The retried run's deadline and how it changed from `previous`."""
    if clear_deadline:
        return None, "cleared"
    if extend_deadline is not None:
        return clock.after(c.now, extend_deadline), "extended"
    return previous, "kept"


def _retry_warnings(c: Ctx, run: Run, deadline_at: datetime | None) -> list[str]:
    """What will end the retried run again at once, with no further command."""
    warnings = []
    if deadline_at is not None and deadline_at <= c.now:
        warnings.append(
            f"its deadline already passed at {clock.iso(deadline_at)}: the next deadline check "
            "will fail it again; retry with --extend-deadline D or --clear-deadline"
        )
    execution_deadline_at = run.execution_deadline_at
    if execution_deadline_at is not None and execution_deadline_at <= c.now:
        warnings.append(
            f"its execution timeout expired at {clock.iso(execution_deadline_at)} and is never "
            "reset: it will time out again at its next workflow task; start a new instance instead"
        )
    return warnings
