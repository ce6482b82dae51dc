"""How a run closes: its open work cancelled, the closing event, the child policy, the retry
policy that may keep it open, and the parent told."""

from __future__ import annotations

from typing import Any

from wfctl import clock
from wfctl.engine.core import (
    Ctx,
    cancel_open_work,
    merge_state,
    new_id,
    public_state,
    record_failure,
    schedule_workflow_task,
)
from wfctl.lang import durations
from wfctl.store.reasons import failure_view
from wfctl.store.records import Run
from wfctl.vocabulary import (
    ACTIVITY_TIMEOUT_KINDS,
    CHILD_CLOSED_EVENT,
    CLOSED_RUN,
    OPEN_RUN,
    RETRY_TIMER,
    RETRY_WAIT,
    RETRYABLE_RUN,
    SIGNAL_WAIT,
)


def close_run(c: Ctx, run: Run, status: str, event_type: str, attributes: dict[str, Any],
              *, failure_id: int | None = None, reason: str, keep_task: int | None = None,
              apply_policy: bool = True, steps_ended: bool = False) -> None:
    """The one way a run closes: cancel open work, record, apply child policy, tell the parent.
    `steps_ended`: it closes because it ended its last step (`cancel_open_work`).

    A run that failed or timed out for a cause its type's retry policy answers is scheduled
    to run again after the backoff: its parent hears of it only once no retry follows.
    """
    paused = run.status == "paused"
    cancel_open_work(c, run, reason, keep_task, steps_ended=steps_ended)
    c.event(run, event_type, **attributes)
    c.set_status(run, status, closed_at=c.now, closed_reason=reason, wait_kind=None,
                 failure_id=failure_id)
    if apply_policy:
        apply_child_policy(c, run)
    if status in RETRYABLE_RUN and schedule_retry(c, run, status, attributes, paused=paused):
        return
    if status != "continued_as_new":
        notify_parent(c, run, status)


def fail_run(c: Ctx, run: Run, *, category: str, message: str, keep_task: int | None = None,
             step: str | None = None, **failure: Any) -> None:
    failure_id = record_failure(c, run, category=category, message=message, **failure)
    attributes = {
        "failure_category": category,
        "message": message,
        "exception_class": failure.get("exception_class"),
        "timeout_kind": failure.get("timeout_kind"),
        "step": step,
    }
    close_run(c, run, "failed", "WorkflowFailed", attributes, failure_id=failure_id,
              reason=category, keep_task=keep_task)


def apply_child_policy(c: Ctx, run: Run) -> None:
    """Apply the parent's child_policy to each of its children still open (SWF ParentClosePolicy)."""
    fixed = c.fixed(run)
    if not fixed.wf.starts_children:
        return
    policy = fixed.child_policy
    for child in c.tx.run_children(run.workflow_run_id):
        if child.status not in OPEN_RUN:
            continue
        c.event(run, "ParentClosePolicyApplied", child_instance_id=child.child_instance_id,
                policy=policy, child_status=child.status)
        child_instance = c.instance(child.child_instance_id)
        child_run = c.run(child_instance.current_run_id)
        reason = f"parent {run.workflow_instance_id} closed ({run.status})"
        if policy == "terminate":
            close_run(c, child_run, "terminated", "WorkflowTerminated",
                      {"reason": reason, "child_policy": policy}, reason="terminated")
        elif policy == "request_cancel":
            request_cancel(c, child_run, reason)


def request_cancel(c: Ctx, run: Run, reason: str | None) -> None:
    if run.cancel_requested:
        return
    c.set_run(run, cancel_requested=True)
    c.event(run, "WorkflowCancelRequested", reason=reason)
    schedule_workflow_task(c, run, "cancel_requested")


def notify_parent(c: Ctx, run: Run, status: str) -> None:
    """Wake the parent waiting on this instance, recording how the child ended."""
    if not c.fixed(run).child_depth:
        # A top-level instance: no parent waits.
        return
    link = c.tx.child_link(run.workflow_instance_id)
    if link is None or link.superseded:
        return
    parent = c.run(link.parent_run_id)
    if parent is None or parent.status in CLOSED_RUN:
        return
    attributes: dict[str, Any] = {
        "child_instance_id": run.workflow_instance_id,
        "child_run_id": run.workflow_run_id,
        "step": link.step,
        "status": status,
        "initiated_event_id": link.started_event_id,
    }
    if status == "completed":
        merge_state(c, parent, {link.step: public_state(run.state)})
    elif run.failure_id is not None:
        failure = c.tx.get_failure(run.failure_id)
        attributes["failure"] = failure_view(failure)
        if status == "timed_out":
            attributes["timeout_kind"] = failure.timeout_kind
            attributes["deadline_at"] = failure.deadline_at
    c.event(parent, CHILD_CLOSED_EVENT.get(status, "ChildWorkflowFailed"), **attributes)
    schedule_workflow_task(c, parent, "child_closed")


def retry_cause(status: str, attributes: dict[str, Any]) -> str | None:
    """What a run that closed with `status` (its closing event's `attributes`) failed of, in the
    words of `retry.when`; None for what is never retried (an execution timeout, a deadline,
    a structural limit)."""
    kind = attributes.get("timeout_kind")
    if status == "timed_out":
        return "run_timeout" if kind == "run_timeout" else None
    if kind == SIGNAL_WAIT:
        return SIGNAL_WAIT
    category = attributes.get("failure_category")
    # A step failed: its activity failed or timed out, or its child workflow failed.
    if category in ("activity", "child_workflow") or \
            (category == "timeout" and kind in ACTIVITY_TIMEOUT_KINDS):
        return "activity"
    return None


def schedule_retry(c: Ctx, run: Run, status: str, attributes: dict[str, Any], *,
                   paused: bool = False) -> bool:
    """Called as a run closes failed or timed out: when its retry policy answers the cause and
    attempts remain, record WorkflowRetryScheduled, arm the backoff's timer and keep the
    instance open (`running`, or `paused` if it was) with no step going. False when the
    failure stands.

    The retry must start before the execution deadline and the deadline: neither is ever
    reset by a retry, so one starting at or after them would only fail again.
    """
    instance = c.instance(run.workflow_instance_id)
    wf = c.workflow_type(instance)
    policy = wf.retry
    cause = retry_cause(status, attributes)
    if policy is None or cause is None or cause not in policy.when or run.cancel_requested:
        return False
    attempt = run.retry_attempt
    if attempt >= policy.max_attempts:
        return False
    delay = policy.delay_after(attempt)
    next_attempt_at = clock.after(c.now, delay)
    if any(limit is not None and next_attempt_at >= limit
           for limit in (run.execution_deadline_at, run.deadline_at)):
        return False
    index = run.step_index
    step = wf.steps[index].name if index < len(wf.steps) else None
    seq = c.event(run, "WorkflowRetryScheduled", attempt=attempt + 1,
                  max_attempts=policy.max_attempts, delay_seconds=durations.whole_seconds(delay),
                  cause=cause, next_attempt_at=next_attempt_at, step=step,
                  closed_status=status, execution_deadline_at=run.execution_deadline_at,
                  deadline_at=run.deadline_at)
    c.tx.insert_timer({
        "timer_id": new_id(),
        "workflow_run_id": run.workflow_run_id,
        "workflow_instance_id": run.workflow_instance_id,
        "step_index": index,
        "step": step or "",
        "kind": RETRY_TIMER,
        "fire_at": next_attempt_at,
        "status": "scheduled",
        "scheduled_event_id": seq,
    })
    # Open again, yet at no step: a signal is buffered, a workflow task only closes it on a
    # cancel request; the run timeout starts afresh when the retry does.
    c.set_status(run, "paused" if paused else "running", closed_at=None, closed_reason=None,
                 wait_kind=RETRY_WAIT, step_started=False, run_deadline_at=None,
                 retry_attempt=attempt + 1)
    return True
