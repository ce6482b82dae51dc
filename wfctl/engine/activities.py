"""Activity attempts: claim, complete, fail, heartbeat and release."""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from datetime import datetime, timedelta
from typing import Any

from wfctl import clock
from wfctl.engine.attempts import fail_attempt, held_task, started, started_fields
from wfctl.engine.core import (
    ACTIVITY_COMPLETED,
    CLAIM_TRIES,
    Ctx,
    EngineCore,
    check_payload,
    merge_state,
    operation,
    schedule_workflow_task,
)
from wfctl.engine.decide import decide_now
from wfctl.engine.tasks import ActivityTask
from wfctl.engine.time.deadlines import deadline_passed, hand_over_deadline
from wfctl.engine.time.timeouts import (
    expired_timeout,
    expired_workflow_timeout,
    time_out_activity,
    time_out_run,
)
from wfctl.errors import StructuralLimitExceeded
from wfctl.store.records import Activity, ClosedAttempt, PlannedClose, Run
from wfctl.vocabulary import PENDING_ACTIVITY

__all__ = ["ActivityTask", "claim_activity", "complete_activity", "completion_close",
           "fail_activity", "record_heartbeat", "release_activity", "unheld_attempts"]


@operation
def claim_activity(engine: EngineCore, worker_id: str, queues: Sequence[str],
                   now: datetime, *, accept: Callable[[Activity], bool] | None = None,
                   ahead: int = 1) -> ActivityTask | None:
    """Claim the oldest ready activity on these queues; start_to_close and heartbeat start now.
    With `accept`, only if it accepts that activity (None: none is claimed). `ahead`: how many
    this batch's transaction will claim at most, one after another
    (`Tx.next_ready_activity_with_run`).

    The claim is a conditional update: when another writer took the activity first, it is
    not ours, and the next ready one is tried."""
    with engine.transaction(now) as c:
        for _ in range(CLAIM_TRIES):
            found = c.tx.next_ready_activity_with_run(queues, c.now, ahead)
            if found is None or (accept is not None and not accept(found[0])):
                return None
            claimed = _claim(c, *found, worker_id)
            if claimed is not None:
                return claimed
        return None


def _claim(c: Ctx, activity: Activity, run: Run, worker_id: str) -> ActivityTask | None:
    run = c.keep_run(run)
    fields = started_fields(c, run, worker_id, activity.retry_policy)
    if not c.tx.update_activity(activity.activity_id, expect_attempt=activity.attempt,
                                expect_status=PENDING_ACTIVITY, **fields):
        return None
    return started(c, run, fields, activity_id=activity.activity_id, step=activity.step,
                   step_index=activity.step_index, branch_index=activity.branch_index,
                   handler=activity.handler, queue=activity.queue, attempt=activity.attempt,
                   max_attempts=activity.max_attempts, policy=activity.retry_policy,
                   scheduled_event_id=activity.scheduled_event_id,
                   schedule_to_close_deadline_at=activity.schedule_to_close_deadline_at,
                   last_heartbeat_details=activity.last_heartbeat_details,
                   available_at=activity.available_at)


@operation
def unheld_attempts(engine: EngineCore, worker_id: str, held: Container[tuple[str, int]],
                    now: datetime) -> list[ActivityTask]:
    """The attempts the database records as started by `worker_id` that are not in `held`
    (activity id and attempt of each one the worker holds); nothing is written.

    A transaction that starts attempts (a claim, or the next step an outcome's decision hands
    the worker at once) can commit while the worker is told it failed: the connection was lost
    at its COMMIT. No slot runs those attempts, and no other worker may: the worker runs them
    after all, or gives them back, once it can write again. One past a deadline is left to the
    watchdog, which times it out: it may be one whose slot the worker gave up for that."""
    with engine.transaction(now) as c:
        return [held_task(c.run(activity.workflow_run_id), activity)
                for activity in c.tx.activities_owned_by([worker_id])
                if (activity.activity_id, activity.attempt) not in held
                and expired_timeout(activity, c.now) is None]


_KEEP = object()

# Why an outcome is refused when the attempt it reports was completed already: only its own
# holder completes an attempt, so by this very outcome, written by a transaction whose commit
# the worker could not confirm (the connection lost at COMMIT) and handed in again.
RECORDED_ALREADY = "the attempt's result is recorded already"


def _current(c: Ctx, task: ActivityTask) -> tuple[Activity | None, str | None]:
    """The activity row if `task` is still its current attempt, else why not.

    An attempt past any of its deadlines is not current even before the watchdog noticed:
    the timeout is enforced here and now, so a late result can never be applied.
    """
    c.tx.hold(task.workflow_instance_id)
    activity = c.tx.get_activity(task.activity_id)
    if activity is None:
        return None, "activity not found"
    if activity.status == "completed" and activity.attempt == task.attempt:
        return None, RECORDED_ALREADY
    if (activity.status != "started" or activity.attempt != task.attempt
            or activity.owner != task.worker_id):
        return None, f"attempt {task.attempt} is no longer current (activity {activity.status})"
    expired = expired_timeout(activity, c.now)
    if expired is not None:
        time_out_activity(c, activity, expired)
        return None, f"attempt {task.attempt} passed its {expired} deadline"
    run = c.run(activity.workflow_run_id)
    if run.deadline_claimed_at is not None:
        return None, "the workflow's deadline expired"
    # Likewise a run past its execution or run timeout: the timeout procedure runs now.
    expired_run = expired_workflow_timeout(run, c.now)
    if expired_run is not None:
        time_out_run(c, run, *expired_run, keep_task=None)
        return None, f"the workflow's {expired_run[0]} expired at {clock.iso(expired_run[1])}"
    # And past its deadline (where deadlines are checked): the handler ran across it, so the
    # run never advances past this step; the deadline path takes it from here.
    if run.status == "running" and deadline_passed(c, run):
        hand_over_deadline(c, run, task.worker_id)
        return None, f"the workflow's deadline expired at {clock.iso(run.deadline_at)}"
    return activity, None


def _heartbeat_fields(details: Any) -> dict[str, Any]:
    if details is _KEEP:
        return {}
    return {"last_heartbeat_details": details}


def _completed_fields(now: datetime, heartbeat_details: Any) -> dict[str, Any]:
    """What a completion sets on the attempt it closes."""
    return {"status": "completed", "closed_at": now, "owner": None,
            **_heartbeat_fields(heartbeat_details)}


def completion_close(task: ActivityTask, result: Any, now: datetime,
                     heartbeat_details: Any = _KEEP) -> PlannedClose | None:
    """The close `complete_activity(task, result, now, heartbeat_details)` asks of its
    transaction first, for a batch to announce (`EngineCore.batch`); None for a result that
    takes another path (`_complete_current`)."""
    if result is not None and not isinstance(result, dict):
        return None
    return PlannedClose(task.workflow_instance_id, task.workflow_run_id, task.activity_id,
                        task.attempt, task.worker_id, now,
                        _completed_fields(now, heartbeat_details))


@operation
def complete_activity(engine: EngineCore, task: ActivityTask, result: Any, now: datetime,
                      heartbeat_details: Any = _KEEP, *, decide: bool = False,
                      check_deadlines: bool = False) -> str | None:
    """Apply a handler's result; returns None when applied, else why it was rejected.

    With `decide`, the workflow task this wakes is decided in the same transaction.
    """
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        rejected = _complete(c, task, result, heartbeat_details)
        if decide and rejected is None:
            decide_now(c, c.run(task.workflow_run_id), task.worker_id)
        return rejected


def _complete(c: Ctx, task: ActivityTask, result: Any, heartbeat_details: Any) -> str | None:
    if _complete_current(c, task, result, heartbeat_details):
        return None
    activity, rejected = _current(c, task)
    if activity is None:
        return rejected
    run = c.run(activity.workflow_run_id)
    if result is not None and not isinstance(result, dict):
        fail_attempt(c, run, activity, retryable=False, reason="error",
                     exception_class="TypeError",
                     message=f"handler returned {type(result).__name__}; "
                             "expected a dict or None",
                     extra=_heartbeat_fields(heartbeat_details))
        return None
    try:
        check_payload(c.fixed(run).limits, result)
        if result:
            merge_state(c, run, result)
    except StructuralLimitExceeded as exc:
        fail_attempt(c, run, activity, retryable=False, reason="structural_limit",
                     exception_class="StructuralLimitExceeded", message=str(exc),
                     category="structural_limit",
                     details={"limit_kind": exc.limit_kind, "value": exc.value,
                              "limit": exc.limit},
                     extra=_heartbeat_fields(heartbeat_details))
        return None
    c.tx.update_activity(activity.activity_id, **_completed_fields(c.now, heartbeat_details))
    _completed(c, run, activity, result)
    return None


def _complete_current(c: Ctx, task: ActivityTask, result: Any, heartbeat_details: Any) -> bool:
    """Complete the attempt in one statement when nothing stands in the way: the run goes on
    and within its deadlines, the result fits, and the attempt is current and within its own
    (the statement checks). False when anything does: `_current` then finds what, and does
    what `_complete` always did."""
    if result is not None and not isinstance(result, dict):
        return False
    merged: list[dict[str, Any] | None] = []

    def goes_on(run: Run | None) -> bool:
        """Whether the run takes the result: it goes on, within its deadlines, and the result
        and the state it makes fit their limits (`merged`: that state, None for no result)."""
        if run is None or run.deadline_claimed_at is not None \
                or expired_workflow_timeout(run, c.now) is not None \
                or (run.status == "running" and deadline_passed(c, run)):
            return False
        limits = c.fixed(run).limits
        try:
            check_payload(limits, result)
            state = {**run.state, **result} if result else None
            if state is not None:
                check_payload(limits, state)
        except StructuralLimitExceeded:
            return False
        merged.append(state)
        return True

    run, closed = c.held_run_and_close(task, goes_on,
                                       **_completed_fields(c.now, heartbeat_details))
    if closed is None:
        return False
    assert run is not None
    if merged[0] is not None:
        c.set_run(run, state=merged[0])
    _completed(c, run, closed, result)
    return True


def _completed(c: Ctx, run: Run, activity: Activity | ClosedAttempt, result: dict[str, Any] | None) -> None:
    """What a completed attempt records: its event (`result` as checked: strict JSON), and
    the workflow task that decides next."""
    if activity.branch_index == 0 and not activity.superseded:
        c.completed_steps.add((activity.workflow_run_id, activity.step_index))
    c.event_of(run, ACTIVITY_COMPLETED, activity.activity_id, activity.step, activity.attempt,
               activity.scheduled_event_id, activity.started_event_id, result)
    schedule_workflow_task(c, run, "activity_completed")


@operation
def fail_activity(engine: EngineCore, task: ActivityTask, exception_class: str, message: str,
                  now: datetime, *, exception_classes: Sequence[str] = (),
                  traceback: str | None = None, heartbeat_details: Any = _KEEP,
                  decide: bool = False, check_deadlines: bool = False) -> str | None:
    """Record a handler's exception: a retry if attempts remain and the class is retryable.

    `exception_classes` are the names along the exception's class hierarchy, so that
    `non_retryable: [ValueError]` also covers subclasses of ValueError. `traceback` (its last
    frames) goes with the failure record and the ActivityFailed/ActivityRetryScheduled events.
    """
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        activity, rejected = _current(c, task)
        if activity is None:
            return rejected
        run = c.run(activity.workflow_run_id)
        names = {exception_class, *exception_classes}
        retryable = not names.intersection(task.non_retryable)
        fail_attempt(c, run, activity, retryable=retryable, reason="error",
                     exception_class=exception_class, message=message, traceback=traceback,
                     extra=_heartbeat_fields(heartbeat_details))
        if decide:
            decide_now(c, run, task.worker_id)
        return None


@operation
def release_activity(engine: EngineCore, task: ActivityTask, now: datetime, reason: str,
                     heartbeat_details: Any = _KEEP, *, check_deadlines: bool = False) -> None:
    """Give back an attempt a stopping worker cannot finish; it is retried at once."""
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        activity, _ = _current(c, task)
        if activity is None:
            return
        run = c.run(activity.workflow_run_id)
        fail_attempt(c, run, activity, retryable=True, reason=reason,
                     exception_class="WorkerStopped",
                     message=f"worker {task.worker_id} stopped before the handler finished",
                     backoff=0.0, extra=_heartbeat_fields(heartbeat_details))


@operation
def record_heartbeat(engine: EngineCore, task: ActivityTask, details: Any, now: datetime, *,
                     check_deadlines: bool = False) -> bool:
    """Store the latest details and push the heartbeat deadline; False once no longer current.

    History gets `ActivityHeartbeatRecorded` at most once per heartbeat interval per attempt.
    """
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        activity, _ = _current(c, task)
        if activity is None:
            return False
        fields: dict[str, Any] = {
            "last_heartbeat_at": c.now,
            "last_heartbeat_details": details,
            "heartbeat_deadline_at": clock.after(now, task.heartbeat_timeout),
        }
        last_event = activity.last_heartbeat_event_at
        due = last_event is None or \
            now - last_event >= timedelta(seconds=task.heartbeat_event_interval)
        if due:
            run = c.run(activity.workflow_run_id)
            c.event(run, "ActivityHeartbeatRecorded", activity_id=activity.activity_id,
                    step=activity.step, attempt=activity.attempt, details=details,
                    scheduled_event_id=activity.scheduled_event_id,
                    started_event_id=activity.started_event_id,
                    heartbeat_deadline_at=fields["heartbeat_deadline_at"])
            fields["last_heartbeat_event_at"] = c.now
        c.tx.update_activity(activity.activity_id, expect_attempt=task.attempt, **fields)
        return True
