"""Starting instances and runs: the deadlines are computed here, once, from `now`."""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any

from wfctl import clock
from wfctl.engine.core import (
    FIRST_TASK,
    Ctx,
    EngineCore,
    check_payload,
    new_id,
    operation,
    schedule_workflow_task,
)
from wfctl.errors import Conflict, InvalidInput
from wfctl.lang import durations
from wfctl.lang.definitions import Definitions, WorkflowType
from wfctl.store.records import Instance, Run
from wfctl.vocabulary import OPEN_RUN

INSTANCE_ID = re.compile(r"^[^\s\x00-\x1f]{1,200}$")
OVERRIDABLE = ("execution_timeout", "run_timeout", "deadline")


def validate_start(definitions: Definitions, workflow_type: str, instance_id: str | None,
                   input: dict[str, Any] | None, on_duplicate: str) -> dict[str, Any]:
    """Every check a start makes before anything is written; returns the input state."""
    if definitions.get(workflow_type) is None:
        known = ", ".join(sorted(definitions.types))
        raise InvalidInput(f"unknown workflow type {workflow_type!r} (defined: {known})")
    if instance_id is not None and not INSTANCE_ID.match(instance_id):
        raise InvalidInput(f"invalid instance id {instance_id!r}: 1 to 200 characters, no spaces")
    if on_duplicate not in ("reject", "return-existing"):
        raise InvalidInput(f"on_duplicate must be reject or return-existing (got {on_duplicate!r})")
    state = {} if input is None else input
    if not isinstance(state, dict):
        raise InvalidInput(f"input must be a JSON object (got {type(state).__name__})")
    check_payload(definitions.limits, state)
    return state


@operation
def start(engine: EngineCore, definitions: Definitions, workflow_type: str,
          instance_id: str | None, input: dict[str, Any] | None, now: datetime, *,
          overrides: dict[str, float | None] | None = None,
          on_duplicate: str = "reject") -> dict[str, Any]:
    """Start an instance; `overrides` holds only the timeouts given at start (None = NONE)."""
    state = validate_start(definitions, workflow_type, instance_id, input, on_duplicate)
    wf = definitions.types[workflow_type]
    instance_id = instance_id or f"{workflow_type}-{uuid.uuid4().hex[:12]}"
    with engine.transaction(now) as c:
        existing = c.tx.get_instance(instance_id)
        if existing is not None and existing.status in OPEN_RUN:
            run = c.run(existing.current_run_id)
            if on_duplicate == "return-existing":
                return _result(existing, run, False, "returned_existing_active")
            c.event(run, "StartRejected", reason="duplicate", requested_type=workflow_type,
                    existing_status=existing.status)
            # Recorded for the operator, yet no part of the run's own history (history_size).
            c.set_run(run, rejected_starts=run.rejected_starts + 1)
            return _result(existing, run, False, "rejected_duplicate")
        if existing is not None and c.tx.is_pruning(instance_id):
            raise Conflict(f"cannot start {instance_id} again yet: its closed instance is being "
                           "pruned; try again in a moment")
        engine.save_definitions(c, definitions)
        run = create_instance(c, definitions, wf, instance_id, state, overrides or {},
                              existing=existing)
        return _result(c.instance(instance_id), run, True, "started_new")


def _result(instance: Instance, run: Run, started: bool, outcome: str) -> dict[str, Any]:
    return {
        "started": started,
        "outcome": outcome,
        "workflow_instance_id": instance.workflow_instance_id,
        "workflow_run_id": run.workflow_run_id,
        "workflow_type": instance.workflow_type,
        "execution_deadline_at": run.execution_deadline_at,
        "run_deadline_at": run.run_deadline_at,
        "deadline_at": instance.deadline_at,
    }


def create_instance(c: Ctx, definitions: Definitions, wf: WorkflowType, instance_id: str,
                    state: dict[str, Any], overrides: dict[str, float | None], *,
                    existing: Instance | None = None, parent_instance_id: str | None = None,
                    child_depth: int = 0, schedule: tuple[str, datetime] | None = None) -> Run:
    """Insert (or, for a closed id started again, renew) an instance and its first run.

    `child_depth` is 0 for a workflow started on its own, its parent's plus one for a child;
    `schedule`: the schedule and tick that start it (a new id), recorded on it and in history.
    """
    values = {key: overrides.get(key, getattr(wf, key)) for key in OVERRIDABLE}
    deadline_at = clock.after(c.now, values["deadline"])
    run_number = existing.run_count + 1 if existing else 1
    run_id = new_id()
    instance = {
        "workflow_type": wf.name,
        "definitions_digest": definitions.digest,
        "status": "running",
        "current_run_id": run_id,
        "run_count": run_number,
        "execution_timeout_seconds": values["execution_timeout"],
        "deadline_seconds": values["deadline"],
        "deadline_at": deadline_at,
        "on_deadline": wf.on_deadline,
        "child_policy": wf.child_policy,
        "parent_instance_id": parent_instance_id,
        "child_depth": child_depth,
        "retry_policy": wf.retry.view() if wf.retry else None,
        "updated_at": c.now,
        "closed_at": None,
        "retain_until": None,
    }
    started: dict[str, Any] = {}
    if schedule is not None:
        instance.update(schedule_name=schedule[0], schedule_tick_at=schedule[1])
        started.update(schedule=schedule[0], scheduled_at=schedule[1])
    if existing is None:
        c.tx.insert_instance({"workflow_instance_id": instance_id, "created_at": c.now, **instance})
    else:
        c.update_instance(instance_id, **instance)
    return create_run(
        c, instance_id, run_id, run_number, state,
        execution_deadline_at=clock.after(c.now, values["execution_timeout"]),
        run_timeout=values["run_timeout"],
        deadline_at=deadline_at,
        workflow_task_timeout=wf.workflow_task_timeout,
        started={
            "workflow_type": wf.name,
            "input": state,
            "execution_timeout_seconds": durations.whole_seconds(values["execution_timeout"]),
            "deadline_seconds": durations.whole_seconds(values["deadline"]),
            "on_deadline": wf.on_deadline,
            "child_policy": wf.child_policy,
            "parent_instance_id": parent_instance_id,
            **started,
        },
    )


def create_run(c: Ctx, instance_id: str, run_id: str, run_number: int, state: dict[str, Any], *,
               execution_deadline_at: datetime | None, run_timeout: float | None,
               deadline_at: datetime | None, workflow_task_timeout: float | None,
               started: dict[str, Any]) -> Run:
    run = {
        "workflow_run_id": run_id,
        "workflow_instance_id": instance_id,
        "run_number": run_number,
        "status": "running",
        "run_timeout_seconds": run_timeout,
        "execution_deadline_at": execution_deadline_at,
        "run_deadline_at": clock.after(c.now, run_timeout),
        "workflow_task_timeout_seconds": workflow_task_timeout,
        "deadline_at": deadline_at,
        "state": state,
        "started_at": c.now,
        "first_seq": c.tx.last_seq(instance_id) + 1,
    }
    check_payload(c.limits(c.instance(instance_id)), state)
    c.tx.insert_run(run)
    run = c.run(run_id)
    c.event(
        run, "WorkflowStarted",
        **started,
        run_number=run_number,
        workflow_run_id=run_id,
        run_timeout_seconds=durations.whole_seconds(run_timeout),
        workflow_task_timeout_seconds=durations.whole_seconds(workflow_task_timeout),
        execution_deadline_at=execution_deadline_at,
        run_deadline_at=run.run_deadline_at,
        deadline_at=deadline_at,
    )
    schedule_workflow_task(c, run, FIRST_TASK)
    return run
