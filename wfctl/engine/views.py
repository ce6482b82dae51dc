"""Read models: `describe`, `history` and `list` as the plain dicts `--json` prints."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from wfctl import durations
from wfctl.engine.core import failure_view
from wfctl.errors import NotFound
from wfctl.store import Row, Tx

if TYPE_CHECKING:
    from wfctl.engine import Engine

_DEADLINE_COLUMNS = (
    ("execution_timeout", "execution_deadline_at"),
    ("run_timeout", "run_deadline_at"),
    ("deadline", "deadline_at"),
)


def describe(engine: Engine, instance_id: str, run_number: int | None = None) -> dict[str, Any]:
    """Everything about one instance (SPEC §5); raises NotFound for an unknown id or run."""
    with engine.store.read() as tx:
        instance = tx.get_instance(instance_id)
        if instance is None:
            raise NotFound(f"no instance {instance_id!r}")
        if run_number is None:
            run = tx.get_run(instance["current_run_id"])
        else:
            # The range check comes first: a number past SQLite's 64 bits cannot be looked up.
            run = tx.get_run_by_number(instance_id, run_number) \
                if 1 <= run_number <= instance["run_count"] else None
            if run is None:
                raise NotFound(f"{instance_id} has no run {run_number} "
                               f"(it has {instance['run_count']})")
        assert run is not None
        steps = engine.definitions_by_digest(tx, instance["definitions_digest"]) \
            .types[instance["workflow_type"]].steps
        step_index = run["step_index"]
        current_step = steps[step_index].name if step_index < len(steps) else None
        if run["status"] == "completed":
            current_step = None
        return {
            "found": True,
            "workflow_instance_id": instance_id,
            "workflow_type": instance["workflow_type"],
            "status": instance["status"],
            "execution_timeout_seconds": durations.whole_seconds(
                instance["execution_timeout_seconds"]),
            "deadline_seconds": durations.whole_seconds(instance["deadline_seconds"]),
            "deadline_at": run["deadline_at"],
            "on_deadline": instance["on_deadline"],
            "child_policy": instance["child_policy"],
            "parent_workflow_instance_id": instance["parent_instance_id"],
            "created_at": instance["created_at"],
            "closed_at": instance["closed_at"],
            "run_count": instance["run_count"],
            "run": {
                "workflow_run_id": run["workflow_run_id"],
                "run_number": run["run_number"],
                "status": run["status"],
                "closed_reason": run["closed_reason"],
                "run_timeout_seconds": durations.whole_seconds(run["run_timeout_seconds"]),
                "execution_deadline_at": run["execution_deadline_at"],
                "run_deadline_at": run["run_deadline_at"],
                "workflow_task_timeout_seconds": durations.whole_seconds(
                    run["workflow_task_timeout_seconds"]),
                "started_at": run["started_at"],
                "closed_at": run["closed_at"],
                "current_step": current_step,
                "step_index": step_index,
                "wait_kind": run["wait_kind"],
                "cancel_requested": bool(run["cancel_requested"]),
                "deadline_claimed_at": run["deadline_claimed_at"],
                "continued_to_run_id": _continued_to(tx, run),
            },
            "activities": [_activity(a) for a in tx.run_activities(run["workflow_run_id"])],
            "timers": [_timer(t) for t in tx.run_timers(run["workflow_run_id"])],
            "children": [_child(ch) for ch in tx.run_children(run["workflow_run_id"])],
            "failure": failure_view(tx.get_failure(run["failure_id"]))
            if run["failure_id"] else None,
            "state": json.loads(run["state"]),
        }


def _continued_to(tx: Tx, run: Row) -> str | None:
    if run["status"] != "continued_as_new":
        return None
    following = tx.get_run_by_number(run["workflow_instance_id"], run["run_number"] + 1)
    return following["workflow_run_id"] if following else None


def _activity(row: Row) -> dict[str, Any]:
    details = row["last_heartbeat_details"]
    return {
        "activity_id": row["activity_id"],
        "step": row["step"],
        "handler": row["handler"],
        "queue": row["queue"],
        "status": row["status"],
        "attempt": row["attempt"],
        "max_attempts": row["max_attempts"],
        "retry_policy": json.loads(row["retry_policy"]),
        "scheduled_at": row["scheduled_at"],
        "available_at": row["available_at"],
        "started_at": row["started_at"],
        "closed_at": row["closed_at"],
        "schedule_deadline_at": row["schedule_deadline_at"],
        "close_deadline_at": row["close_deadline_at"],
        "schedule_to_close_deadline_at": row["schedule_to_close_deadline_at"],
        "heartbeat_deadline_at": row["heartbeat_deadline_at"],
        "last_heartbeat_at": row["last_heartbeat_at"],
        "last_heartbeat_details": json.loads(details) if details else None,
        "last_error": json.loads(row["last_error"]) if row["last_error"] else None,
        "superseded": bool(row["superseded"]),
    }


def _timer(row: Row) -> dict[str, Any]:
    return {
        "timer_id": row["timer_id"],
        "step": row["step"],
        "kind": row["kind"],
        "fire_at": row["fire_at"],
        "status": row["status"],
    }


def _child(row: Row) -> dict[str, Any]:
    return {
        "workflow_instance_id": row["child_instance_id"],
        "workflow_type": row["workflow_type"],
        "step": row["step"],
        "status": row["status"],
        "closed_at": row["closed_at"],
    }


def history(engine: Engine, instance_id: str, *, run_number: int | None = None,
            all_runs: bool = False, after_seq: int = 0,
            event_types: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The events of one run (the current one unless told), or of all runs, in order."""
    with engine.store.read() as tx:
        instance = tx.get_instance(instance_id)
        if instance is None:
            raise NotFound(f"no instance {instance_id!r}")
        if not all_runs and run_number is None:
            run_number = instance["run_count"]
        if run_number is not None and not 1 <= run_number <= instance["run_count"]:
            raise NotFound(f"{instance_id} has no run {run_number} "
                           f"(it has {instance['run_count']})")
        rows = tx.events(instance_id, run_number=None if all_runs else run_number,
                         after_seq=after_seq, event_types=event_types)
        return [
            {
                "seq": row["seq"],
                "event_type": row["event_type"],
                "at": row["at"],
                "run_number": row["run_number"],
                "attributes": json.loads(row["attributes"]),
            }
            for row in rows
        ]


def list_instances(engine: Engine, *, status: str | None = None,
                   workflow_type: str | None = None, since: str | None = None,
                   limit: int = 50) -> list[dict[str, Any]]:
    """Instances, newest first, each with the nearest deadline still ahead of it."""
    with engine.store.read() as tx:
        rows = tx.list_instances(status=status, workflow_type=workflow_type, since=since,
                                 limit=limit)
    result = []
    for row in rows:
        pending = [(row[column], kind) for kind, column in _DEADLINE_COLUMNS
                   if row[column] is not None]
        nearest = min(pending) if pending and row["closed_at"] is None else None
        result.append({
            "workflow_instance_id": row["workflow_instance_id"],
            "workflow_type": row["workflow_type"],
            "status": row["status"],
            "run_number": row["run_number"],
            "created_at": row["created_at"],
            "closed_at": row["closed_at"],
            "nearest_deadline": {"kind": nearest[1], "at": nearest[0]} if nearest else None,
        })
    return result
