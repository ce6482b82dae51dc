"""The workflow retry policy: a run that failed for a cause its type's `retry.when` lists runs
again from the failed step after a backoff, exactly as `wfctl retry` would run it."""

from __future__ import annotations

from typing import Any

from wfctl import clock, durations
from wfctl.engine.control import retry_run
from wfctl.engine.core import Ctx, new_id
from wfctl.store import Row
from wfctl.vocabulary import ACTIVITY_TIMEOUT_KINDS, RETRY_TIMER, RETRY_WAIT, SIGNAL_WAIT


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


def schedule_retry(c: Ctx, run: Row, status: str, attributes: dict[str, Any], *,
                   paused: bool = False) -> bool:
    """Called as a run closes failed or timed out: when its retry policy answers the cause and
    attempts remain, record WorkflowRetryScheduled, arm the backoff's timer and keep the
    instance open (`running`, or `paused` if it was) with no step going. False when the
    failure stands.

    The retry must start before the execution deadline and the deadline: neither is ever
    reset by a retry, so one starting at or after them would only fail again.
    """
    instance = c.instance(run["workflow_instance_id"])
    wf = c.workflow_type(instance)
    policy = wf.retry
    cause = retry_cause(status, attributes)
    if policy is None or cause is None or cause not in policy.when or run["cancel_requested"]:
        return False
    attempt = run["retry_attempt"]
    if attempt >= policy.max_attempts:
        return False
    delay = policy.delay_after(attempt)
    next_attempt_at = clock.after(c.now, delay)
    if any(limit is not None and next_attempt_at >= limit
           for limit in (run["execution_deadline_at"], run["deadline_at"])):
        return False
    index = run["step_index"]
    step = wf.steps[index].name if index < len(wf.steps) else None
    seq = c.event(run, "WorkflowRetryScheduled", attempt=attempt + 1,
                  max_attempts=policy.max_attempts, delay_seconds=durations.whole_seconds(delay),
                  cause=cause, next_attempt_at=next_attempt_at, step=step,
                  closed_status=status, execution_deadline_at=run["execution_deadline_at"],
                  deadline_at=run["deadline_at"])
    c.tx.insert_timer({
        "timer_id": new_id(),
        "workflow_run_id": run["workflow_run_id"],
        "workflow_instance_id": run["workflow_instance_id"],
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


def fire_retry(c: Ctx, timer: Row) -> bool:
    """A retry's backoff timer is due: do what `wfctl retry` does, then WorkflowRetried.

    False when there is nothing to retry: the timer was taken by another watchdog, or the run's
    passed deadline was claimed meanwhile (a worker that was down past it), whose failure closes
    the run; the timer is spent either way.
    """
    if not c.tx.update_timer(timer["timer_id"], expect_status="scheduled", status="fired",
                             closed_at=c.now):
        return False
    run = c.run(timer["workflow_run_id"])
    if run is None or run["closed_at"] is not None or run["wait_kind"] != RETRY_WAIT \
            or run["deadline_claimed_at"] is not None:
        return False
    scheduled = c.tx.event(run["workflow_instance_id"], timer["scheduled_event_id"])["attributes"]
    retry_run(c, c.instance(run["workflow_instance_id"]), run,
              previous_status=scheduled["closed_status"], attempt=scheduled["attempt"],
              scheduled_event_id=timer["scheduled_event_id"])
    return True
