"""Workflow tasks: claim one, then decide the run's next steps from its stored state."""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime
from typing import Any

from wfctl import clock
from wfctl.engine.attempts import started, started_fields
from wfctl.engine.closing import close_run, fail_run
from wfctl.engine.core import (
    ACTIVITY_SCHEDULED,
    CLAIM_TRIES,
    FIRST_TASK,
    WORKFLOW_TASK_COMPLETED,
    WORKFLOW_TASK_STARTED,
    Ctx,
    EngineCore,
    Fixed,
    merge_state,
    new_id,
    operation,
    public_state,
)
from wfctl.engine.time.deadlines import deadline_passed, hand_over_deadline
from wfctl.engine.time.timeouts import expired_workflow_timeout, time_out_run, time_out_workflow_task
from wfctl.lang import durations
from wfctl.lang.definitions import Step, WorkflowType
from wfctl.store.reasons import stop_reason
from wfctl.store.records import Activity, Child, Instance, Run, WorkflowTask
from wfctl.vocabulary import (
    CLOSED_RUN,
    RETRY_WAIT,
    SIGNAL_TIMER,
    SIGNAL_WAIT,
    UNSUCCESSFUL_ACTIVITY,
    UNSUCCESSFUL_RUN,
)

OPEN, DONE, CLOSED = "open", "done", "closed"
# What `_begin_step` returns when it started every branch of its step just now.
STARTED = "started"


@operation
def claim_workflow_task(engine: EngineCore, worker_id: str, now: datetime) -> \
        WorkflowTask | None:
    """Claim the oldest ready workflow task; its workflow_task_timeout starts now."""
    with engine.transaction(now) as c:
        for _ in range(CLAIM_TRIES):
            task = c.tx.next_ready_workflow_task(c.now)
            if task is None:
                return None
            started = _start_task(c, task.task_id, task.scheduled_event_id,
                                  c.run(task.workflow_run_id), worker_id)
            if started is not None:
                return dataclasses.replace(task, **started)
        return None


@operation
def decide_ready_task(engine: EngineCore, worker_id: str, now: datetime, *,
                      check_deadlines: bool = False, ahead: int = 1) -> bool:
    """Claim the oldest ready workflow task and complete it in the same transaction; False
    when none was ready. The history is that of a claim and a completion; the task's row goes
    at once, since no other writer can see it started. `ahead`: how many this batch's
    transaction will decide at most, one after another (`Tx.take_ready_workflow_task`)."""
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        task = c.tx.take_ready_workflow_task(c.now, ahead)
        if task is None:
            return False
        run = c.run(task.workflow_run_id)
        timeout_at = clock.after(c.now, run.workflow_task_timeout_seconds)
        started = c.event_of(run, WORKFLOW_TASK_STARTED, task.scheduled_event_id, worker_id,
                             timeout_at)
        c.event_of(run, WORKFLOW_TASK_COMPLETED, task.scheduled_event_id, started)
        decide(c, run, None, worker_id, first=task.reason == FIRST_TASK)
        return True


@operation
def complete_workflow_task(engine: EngineCore, task: WorkflowTask, now: datetime, *,
                           check_deadlines: bool = False) -> bool:
    """Decide and complete a claimed task; a task no longer current changes nothing (False)."""
    with engine.transaction(now, check_deadlines=check_deadlines) as c:
        current = c.tx.get_workflow_task(task.task_id)
        if (current is None or current.status != "started" or current.owner != task.owner
                or current.started_event_id != task.started_event_id):
            return False
        if current.timeout_at is not None and current.timeout_at <= c.now:
            time_out_workflow_task(c, current)
            return False
        _complete_task(c, c.run(current.workflow_run_id), current.task_id,
                       current.scheduled_event_id, current.started_event_id, current.owner,
                       current.reason)
        return True


def decide_now(c: Ctx, run: Run, worker_id: str) -> None:
    """Claim and complete the run's ready workflow task within this transaction.

    The worker that just reported an activity's outcome decides what comes next at once:
    the history is the same as for a task claimed and completed on its own, with one
    transaction instead of three.
    """
    run_id = run.workflow_run_id
    # A task scheduled in this transaction has no row yet (nor task id), and is ready now.
    pending = c.pending_tasks.pop(run_id, None)
    if pending is not None:
        task_id, scheduled_event_id, reason = None, pending["scheduled_event_id"], \
            pending["reason"]
    else:
        task = c.tx.open_workflow_task(run_id)
        if task is None or task.status != "scheduled" or task.available_at > c.now:
            return
        task_id, scheduled_event_id, reason = task.task_id, task.scheduled_event_id, task.reason
    started = _start_task(c, task_id, scheduled_event_id, run, worker_id)
    if started is not None:
        _complete_task(c, run, task_id, scheduled_event_id, started["started_event_id"],
                       worker_id, reason)


def _start_task(c: Ctx, task_id: int | None, scheduled_event_id: int, run: Run,
                worker_id: str) -> dict[str, Any] | None:
    """Start a scheduled task; the fields that changed, or None when another writer started
    it first (a task scheduled in this transaction, `task_id` None, has no row yet, and is
    this transaction's alone)."""
    timeout_at = clock.after(c.now, run.workflow_task_timeout_seconds)
    fields = {"status": "started", "owner": worker_id, "started_at": c.now,
              "timeout_at": timeout_at, "started_event_id": c.next_seq(run)}
    if task_id is not None and not c.tx.update_workflow_task(task_id,
                                                             expect_status="scheduled", **fields):
        return None
    c.event_of(run, WORKFLOW_TASK_STARTED, scheduled_event_id, worker_id, timeout_at)
    return fields


def _complete_task(c: Ctx, run: Run, task_id: int | None, scheduled_event_id: int,
                   started_event_id: int | None, owner: str | None, reason: str) -> None:
    """Complete a started task (scheduled for `reason`) and decide; a task scheduled and
    decided in this transaction has no row to update (it was never written)."""
    if task_id is not None:
        c.tx.close_workflow_task(task_id)
    c.event_of(run, WORKFLOW_TASK_COMPLETED, scheduled_event_id, started_event_id)
    decide(c, run, task_id, owner, first=reason == FIRST_TASK)


def process_workflow_tasks(engine: EngineCore, worker_id: str, now: datetime,
                           limit: int = 1000, *, check_deadlines: bool = False) -> int:
    """Claim and complete ready workflow tasks until none is left; returns how many."""
    done = 0
    while done < limit:
        task = claim_workflow_task(engine, worker_id, now)
        if task is None:
            break
        complete_workflow_task(engine, task, now, check_deadlines=check_deadlines)
        done += 1
    return done


def decide(c: Ctx, run: Run, task_id: int | None, worker_id: str, *, first: bool = False) -> None:
    """Advance the run as far as its stored state allows. `first`: the decision takes the run's
    first workflow task, so nothing of any step exists yet.

    In a process that checks deadlines, a run past its `deadline_at` is handed to the
    deadline path instead of advancing: at once when it is running (as the deadline loop
    would claim it), or at the step boundary a wait that ended after the deadline reaches.
    """
    if run.status in CLOSED_RUN or run.deadline_claimed_at is not None:
        return
    expired = expired_workflow_timeout(run, c.now)
    if expired:
        time_out_run(c, run, *expired, keep_task=task_id)
        return
    if run.status == "running" and deadline_passed(c, run):
        hand_over_deadline(c, run, worker_id)
        return
    fixed = c.fixed(run)
    limits = fixed.limits
    events = c.tx.history_count(run)
    if limits.history_size and events > limits.history_size:
        fail_run(c, run, category="structural_limit", keep_task=task_id,
                 message=f"history_size limit exceeded: {events} (limit {limits.history_size})",
                 exception_class="StructuralLimitExceeded",
                 details={"limit_kind": "history_size", "value": events,
                          "limit": limits.history_size})
        return
    if run.cancel_requested:
        close_run(c, run, "cancelled", "WorkflowCancelled",
                  {"reason": "cancel requested", "cancel_reason": stop_reason(c.tx, run)},
                  reason="cancelled", keep_task=task_id)
        return
    if run.status == "paused" or run.wait_kind == RETRY_WAIT:
        # Paused, or waiting out a retry policy's backoff: no step runs until it ends.
        return
    _advance(c, run, fixed, task_id, worker_id, fresh=first)


def _advance(c: Ctx, run: Run, fixed: Fixed, task_id: int | None, worker_id: str, *,
             fresh: bool) -> None:
    """Run the open run's steps from step_index until one waits or the run closes. `fresh`:
    nothing of the step at step_index exists yet (it was reached in this loop, or this is the
    run's first decision)."""
    wf = fixed.wf
    while True:
        at_boundary = run.step_index >= len(wf.steps) or not run.step_started
        if at_boundary and deadline_passed(c, run):
            hand_over_deadline(c, run, worker_id)
            return
        if run.step_index >= len(wf.steps):
            close_run(c, run, "completed", "WorkflowCompleted",
                      {"state_keys": sorted(public_state(run.state))},
                      reason="completed", keep_task=task_id, steps_ended=True)
            return
        step = wf.steps[run.step_index]
        outcome = None
        if not run.step_started:
            began = _begin_step(c, run, fixed, wf, step, task_id, fresh=fresh)
            if began == CLOSED:
                return
            c.set_run(run, step_started=True)
            if began == STARTED:
                # Every branch was just started: none can have ended yet.
                outcome = OPEN
        if outcome is None:
            outcome = _check_step(c, run, step)
        if outcome == OPEN:
            _show_waiting(c, run, step)
            return
        if outcome == CLOSED:
            return
        c.set_run_later(run, step_index=run.step_index + 1, step_started=False)
        fresh = True


def _show_waiting(c: Ctx, run: Run, step: Step) -> None:
    status, wait_kind = "running", None
    if step.kind == "delay":
        wait_kind = "timer"
    elif step.kind == "wait_for_signal":
        status, wait_kind = "waiting", "signal"
    elif step.kind == "workflow" or (
        step.kind == "parallel" and not c.tx.count_open_activities(run.workflow_run_id)
    ):
        status, wait_kind = "waiting", "child"
    if run.status != status or run.wait_kind != wait_kind:
        c.set_status(run, status, wait_kind=wait_kind)


def _begin_step(c: Ctx, run: Run, fixed: Fixed, wf: WorkflowType, step: Step,
                task_id: int | None, *, fresh: bool = False) -> str:
    """Start what the step needs (`fixed`: the instance's unchanging fields). `fresh`: the step
    was reached in this decision, once every step before it ended, so it has no activity or
    child yet and no activity is open."""
    if step.kind in ("activity", "workflow", "parallel"):
        return _begin_branches(c, run, fixed, step, task_id, fresh=fresh)
    if step.kind == "delay":
        _schedule_timer(c, run, step, "delay", step.duration)
    elif step.kind == "wait_for_signal":
        _open_signal_wait(c, run, step)
    elif step.kind == "continue_as_new" and run.state.get(step.while_key):
        continue_as_new(c, run, c.instance(run.workflow_instance_id), wf, task_id)
        return CLOSED
    return OPEN


def _begin_branches(c: Ctx, run: Run, fixed: Fixed, step: Step, task_id: int | None, *,
                    fresh: bool) -> str:
    """Start the branches of an activity, workflow or parallel step that have no activity or
    child yet: STARTED when that is all of them, CLOSED when a structural limit ends the run."""
    branches = step.branches or (step,)
    if fresh:
        existing: set[int] = set()
        missing = list(enumerate(branches))
    else:
        activities, children = _step_items(c, run, step)
        existing = {a.branch_index for a in activities} | \
            {ch.branch_index for ch in children}
        missing = [(b, branch) for b, branch in enumerate(branches) if b not in existing]
    if _over_branch_limits(c, run, fixed, step, task_id, missing, fresh=fresh):
        return CLOSED
    for branch_index, branch in missing:
        if branch.kind == "activity":
            schedule_activity(c, run, step, branch, branch_index)
        else:
            start_child(c, run, fixed, step, branch, branch_index)
    return OPEN if existing else STARTED


def _over_branch_limits(c: Ctx, run: Run, fixed: Fixed, step: Step, task_id: int | None,
                        missing: list[tuple[int, Step]], *, fresh: bool) -> bool:
    """Whether starting the `missing` branches would pass a structural limit; the run is
    failed when it would."""
    limits = fixed.limits
    wanted = len(missing) if step.kind == "activity" else \
        sum(1 for _, branch in missing if branch.kind == "activity")
    pending = wanted if fresh else \
        c.tx.count_open_activities(run.workflow_run_id) + wanted
    if limits.pending_activity_count and pending > limits.pending_activity_count:
        _fail_structural(c, run, step, task_id, "pending_activity_count", pending,
                         limits.pending_activity_count)
        return True
    depth = fixed.child_depth + 1
    if limits.child_depth and depth > limits.child_depth \
            and any(branch.kind == "workflow" for _, branch in missing):
        # A type that starts itself (directly or not) stops here instead of recursing.
        _fail_structural(c, run, step, task_id, "child_depth", depth, limits.child_depth)
        return True
    return False


def _open_signal_wait(c: Ctx, run: Run, step: Step) -> None:
    timeout_at = clock.after(c.now, step.timeout)
    c.event(run, "SignalWaitOpened", signal=step.signal, step=step.name,
            timeout_seconds=durations.whole_seconds(step.timeout), timeout_at=timeout_at)
    if step.timeout is not None:
        _schedule_timer(c, run, step, SIGNAL_TIMER, step.timeout)


def _fail_structural(c: Ctx, run: Run, step: Step, task_id: int | None, kind: str,
                     value: int, limit: int) -> None:
    fail_run(c, run, category="structural_limit", keep_task=task_id, step=step.name,
             message=f"{kind} limit exceeded: {value} (limit {limit})",
             exception_class="StructuralLimitExceeded",
             details={"limit_kind": kind, "value": value, "limit": limit})


def schedule_activity(c: Ctx, run: Run, step: Step, branch: Step, branch_index: int) -> None:
    """Schedule the branch's activity; a step's only activity on a queue the worker whose
    batch this is serves starts at once, in a free slot of it (`tasks.Offer`)."""
    options = branch.options
    assert options is not None and branch.handler is not None
    activity_id = new_id()
    policy = options.retry_policy()
    schedule_deadline_at = clock.after(c.now, options.schedule_to_start)
    total_deadline_at = clock.after(c.now, options.schedule_to_close)
    seq = c.event_of(run, ACTIVITY_SCHEDULED, activity_id, branch.name, branch.handler,
                     options.queue, 1, options.max_attempts, policy, schedule_deadline_at,
                     total_deadline_at)
    row = {
        "activity_id": activity_id,
        "workflow_run_id": run.workflow_run_id,
        "workflow_instance_id": run.workflow_instance_id,
        "step_index": run.step_index,
        "branch_index": branch_index,
        "step": branch.name,
        "handler": branch.handler,
        "queue": options.queue,
        "status": "scheduled",
        "attempt": 1,
        "max_attempts": options.max_attempts,
        "retry_policy": policy,
        "available_at": c.now,
        "scheduled_at": c.now,
        "schedule_deadline_at": schedule_deadline_at,
        "schedule_to_close_deadline_at": total_deadline_at,
        "scheduled_event_id": seq,
    }
    offer = c.offer
    if offer is None or step.kind != "activity" \
            or not offer.takes(options.queue, branch.handler, run.workflow_run_id):
        c.tx.insert_activity(row)
        c.woke = True
        return
    fields = started_fields(c, run, offer.worker_id, policy)
    row.update(fields)
    c.tx.insert_activity(row)
    offer.take(started(
        c, run, fields, activity_id=activity_id, step=branch.name,
        step_index=run.step_index, branch_index=branch_index, handler=branch.handler,
        queue=options.queue, attempt=1, max_attempts=options.max_attempts, policy=policy,
        scheduled_event_id=seq, schedule_to_close_deadline_at=total_deadline_at,
        last_heartbeat_details=None, available_at=c.now))


def _schedule_timer(c: Ctx, run: Run, step: Step, kind: str, seconds: float) -> None:
    timer_id = new_id()
    fire_at = clock.after(c.now, seconds)
    seq = c.event(run, "TimerScheduled", timer_id=timer_id, step=step.name, kind=kind,
                  duration_seconds=durations.whole_seconds(seconds), fire_at=fire_at)
    c.tx.insert_timer({
        "timer_id": timer_id,
        "workflow_run_id": run.workflow_run_id,
        "workflow_instance_id": run.workflow_instance_id,
        "step_index": run.step_index,
        "step": step.name,
        "kind": kind,
        "fire_at": fire_at,
        "status": "scheduled",
        "scheduled_event_id": seq,
    })


def start_child(c: Ctx, run: Run, fixed: Fixed, step: Step, branch: Step,
                branch_index: int) -> None:
    from wfctl.engine.start import create_instance

    definitions = fixed.definitions
    child_type = definitions.types[branch.workflow_type]
    child_id = f"{run.workflow_instance_id}.{branch.name}.{os.urandom(4).hex()}"
    child_run = create_instance(c, definitions, child_type, child_id,
                                public_state(run.state), {},
                                parent_instance_id=run.workflow_instance_id,
                                child_depth=fixed.child_depth + 1)
    seq = c.event(run, "ChildWorkflowStarted", child_instance_id=child_id,
                  child_run_id=child_run.workflow_run_id, workflow_type=child_type.name,
                  step=branch.name)
    c.tx.insert_child({
        "child_instance_id": child_id,
        "parent_instance_id": run.workflow_instance_id,
        "parent_run_id": run.workflow_run_id,
        "step_index": run.step_index,
        "branch_index": branch_index,
        "step": branch.name,
        "workflow_type": child_type.name,
        "started_event_id": seq,
        "created_at": c.now,
    })


def _check_step(c: Ctx, run: Run, step: Step) -> str:
    run_id, index = run.workflow_run_id, run.step_index
    if step.kind in ("activity", "workflow", "parallel"):
        return _check_branches(c, run, step)
    if step.kind == "delay":
        fired = any(t.status == "fired" for t in c.tx.step_timers(run_id, index))
        return DONE if fired else OPEN
    if step.kind == "wait_for_signal":
        return _check_signal(c, run, step)
    return DONE


def _check_branches(c: Ctx, run: Run, step: Step) -> str:
    if step.kind == "activity" and not step.branches and \
            (run.workflow_run_id, run.step_index) in c.completed_steps:
        # Its one activity completed in this transaction: nothing else can have ended it.
        return DONE
    activities, children = _step_items(c, run, step)
    for activity in activities:
        if activity.status in UNSUCCESSFUL_ACTIVITY:
            _fail_for_activity(c, run, activity)
            return CLOSED
    for child in children:
        if child.status in UNSUCCESSFUL_RUN:
            _fail_for_child(c, run, child)
            return CLOSED
    branches = len(step.branches or (step,))
    completed = sum(1 for a in activities if a.status == "completed")
    completed += sum(1 for ch in children if ch.status == "completed")
    return DONE if completed == branches else OPEN


def _step_items(c: Ctx, run: Run, step: Step) -> tuple[list[Activity], list[Child]]:
    """The activities and children the current step started (not superseded by a retry)."""
    kinds = {branch.kind for branch in step.branches or (step,)}
    run_id, index = run.workflow_run_id, run.step_index
    activities = c.tx.step_activities(run_id, index) if "activity" in kinds else []
    children = c.tx.step_children(run_id, index) if "workflow" in kinds else []
    return activities, children


def _fail_for_activity(c: Ctx, run: Run, activity: Activity) -> None:
    failure = c.tx.activity_failure(activity.activity_id)
    verb = {"failed": "failed", "timed_out": "timed out"}.get(activity.status, "was cancelled")
    if failure is None:
        fail_run(c, run, category="activity", step=activity.step,
                 message=f"Activity {activity.step} {verb}: {activity.status}",
                 activity_id=activity.activity_id, propagation_kind="activity",
                 timeout_kind=None, exception_class=None, deadline_at=None, details=None)
        return
    fail_run(
        c, run, category=failure.failure_category, step=activity.step,
        # A timeout's record already reads "Activity fetch timed out: heartbeat".
        message=failure.message if activity.status == "timed_out"
        else f"Activity {activity.step} {verb}: {failure.message}",
        activity_id=activity.activity_id, propagation_kind=failure.propagation_kind,
        timeout_kind=failure.timeout_kind, exception_class=failure.exception_class,
        deadline_at=failure.deadline_at,
        # e.g. a structural limit's limit_kind, value and limit
        details=failure.details,
    )


def _fail_for_child(c: Ctx, run: Run, child: Child) -> None:
    child_instance = c.instance(child.child_instance_id)
    child_run = c.run(child_instance.current_run_id)
    failure = c.tx.get_failure(child_run.failure_id) if child_run.failure_id else None
    what = child.status.replace("_", " ")
    detail = f": {failure.message}" if failure else ""
    details = {"child_instance_id": child.child_instance_id, "child_status": child.status}
    # A child that failed on a handler's exception: the parent's failure shows where, too.
    traceback = failure.details.get("traceback") if failure and failure.details else None
    if traceback:
        details["traceback"] = traceback
    fail_run(
        c, run, category="child_workflow", step=child.step,
        message=f"Child workflow {child.child_instance_id} ({child.workflow_type}) "
                f"{what}{detail}",
        propagation_kind="child",
        timeout_kind=failure.timeout_kind if failure else None,
        exception_class=failure.exception_class if failure else None,
        deadline_at=failure.deadline_at if failure else None,
        details=details,
    )


def _check_signal(c: Ctx, run: Run, step: Step) -> str:
    run_id, index = run.workflow_run_id, run.step_index
    if c.tx.consumed_signal(run_id, index) is not None:
        return DONE
    timers = c.tx.step_timers(run_id, index)
    signal = c.tx.first_pending_signal(run.workflow_instance_id, step.signal)
    # A signal received at or after the wait's timeout is late: the outcome depends on the
    # instants recorded, never on whether a worker happened to decide in between.
    if signal is not None and any(t.kind == SIGNAL_TIMER
                                  and t.fire_at <= signal.received_at for t in timers):
        signal = None
    if signal is not None:
        c.tx.consume_signal(signal.signal_id, run_id, index, c.now)
        data = signal.data
        if isinstance(data, dict) and data:
            merge_state(c, run, data)
        for timer in timers:
            if timer.status == "scheduled":
                c.tx.update_timer(timer.timer_id, status="cancelled", closed_at=c.now)
                c.event(run, "TimerCancelled", timer_id=timer.timer_id, step=timer.step,
                        kind=timer.kind, fire_at=timer.fire_at, reason="signal_received",
                        scheduled_event_id=timer.scheduled_event_id)
        return DONE
    fired = next((t for t in timers if t.status == "fired"), None)
    if fired is not None:
        fail_run(c, run, category="timeout", step=step.name, timeout_kind=SIGNAL_WAIT,
                 exception_class="SignalWaitTimeout", deadline_at=fired.fire_at,
                 message=f"Signal {step.signal!r} not received by "
                         f"{clock.iso(fired.fire_at)}")
        return CLOSED
    return OPEN


def continue_as_new(c: Ctx, run: Run, instance: Instance, wf: WorkflowType,
                    task_id: int | None) -> None:
    """Close this run and start the next one of the same instance with the state as input."""
    from wfctl.engine.start import create_run

    new_run_id = new_id()
    run_number = instance.run_count + 1
    new_run_deadline_at = clock.after(c.now, run.run_timeout_seconds)
    close_run(c, run, "continued_as_new", "WorkflowContinuedAsNew", {
        "new_run_id": new_run_id,
        "new_run_number": run_number,
        "execution_deadline_at": run.execution_deadline_at,
        "run_deadline_at": new_run_deadline_at,
        "deadline_at": run.deadline_at,
    }, reason="continued_as_new", keep_task=task_id, apply_policy=False)
    c.update_instance(run.workflow_instance_id, current_run_id=new_run_id,
                      run_count=run_number, status="running", updated_at=c.now)
    state = run.state
    create_run(
        c, run.workflow_instance_id, new_run_id, run_number, state,
        execution_deadline_at=run.execution_deadline_at,
        run_timeout=run.run_timeout_seconds,
        deadline_at=run.deadline_at,
        workflow_task_timeout=run.workflow_task_timeout_seconds,
        started=_continued_attributes(instance, wf, run, state),
    )


def _continued_attributes(instance: Instance, wf: WorkflowType, run: Run,
                          state: dict[str, Any]) -> dict[str, Any]:
    return {
        "workflow_type": wf.name,
        "input": state,
        "execution_timeout_seconds": durations.whole_seconds(instance.execution_timeout_seconds),
        "deadline_seconds": durations.whole_seconds(instance.deadline_seconds),
        "on_deadline": instance.on_deadline,
        "child_policy": instance.child_policy,
        "continued_from_run_id": run.workflow_run_id,
    }
