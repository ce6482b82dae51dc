"""Read models: `describe`, `history` and `list` as the plain dicts `--json` prints, their instants
as aware UTC datetimes (the JSON edge, `jsonvalue.text`, makes them ISO text).

They read through the store alone: no engine, no worker, and the definitions (YAML) only to name
the current step of a run that has not completed.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl.errors import NotFound
from wfctl.lang import durations
from wfctl.store import Store, Tx
from wfctl.store.reasons import failure_view, stop_reason
from wfctl.store.records import Activity, Child, Instance, Run, Timer
from wfctl.vocabulary import RETRY_TIMER, WORKFLOW_TIMEOUTS

if TYPE_CHECKING:
    from wfctl.lang.definitions import WorkflowType

_DEADLINE_COLUMNS = (
    *((timeout.kind, timeout.column) for timeout in WORKFLOW_TIMEOUTS),
    ("deadline", "deadline_at"),
)


def describe(store: Store, instance_id: str, run_number: int | None = None) -> dict[str, Any]:
    """Everything about one instance (SPEC §5); raises NotFound for an unknown id or run."""
    with store.read() as tx:
        instance = _instance(tx, instance_id)
        if run_number is None:
            run = tx.get_run(instance.current_run_id)
        else:
            # The range check comes first: a number past SQLite's 64 bits cannot be looked up.
            run = tx.get_run_by_number(instance_id, run_number) \
                if 1 <= run_number <= instance.run_count else None
            if run is None:
                raise NotFound(f"{instance_id} has no run {run_number} "
                               f"(it has {instance.run_count})")
        assert run is not None
        step_index = run.step_index
        timers = tx.run_timers(run.workflow_run_id)
        retry_policy = instance.retry_policy
        return {
            "found": True,
            "workflow_instance_id": instance_id,
            "workflow_type": instance.workflow_type,
            "status": instance.status,
            "execution_timeout_seconds": durations.whole_seconds(
                instance.execution_timeout_seconds),
            "deadline_seconds": durations.whole_seconds(instance.deadline_seconds),
            "deadline_at": run.deadline_at,
            "deadline_held_while": deadline_held_while(instance.status, run.deadline_at,
                                                       run.closed_at is not None),
            "on_deadline": instance.on_deadline,
            "child_policy": instance.child_policy,
            "retry_policy": retry_policy,
            "parent_workflow_instance_id": instance.parent_instance_id,
            "created_at": instance.created_at,
            "closed_at": instance.closed_at,
            "run_count": instance.run_count,
            "run": {
                "workflow_run_id": run.workflow_run_id,
                "run_number": run.run_number,
                "status": run.status,
                "closed_reason": run.closed_reason,
                "run_timeout_seconds": durations.whole_seconds(run.run_timeout_seconds),
                "execution_deadline_at": run.execution_deadline_at,
                "run_deadline_at": run.run_deadline_at,
                "workflow_task_timeout_seconds": durations.whole_seconds(
                    run.workflow_task_timeout_seconds),
                "started_at": run.started_at,
                "closed_at": run.closed_at,
                "current_step": _current_step(tx, instance, run),
                "step_index": step_index,
                "wait_kind": run.wait_kind,
                "cancel_requested": run.cancel_requested,
                "stop_reason": stop_reason(tx, run),
                "deadline_claimed_at": run.deadline_claimed_at,
                "continued_to_run_id": _continued_to(tx, run),
            },
            "workflow_retry": _workflow_retry(retry_policy, run, timers),
            "activities": [_activity(a) for a in tx.run_activities(run.workflow_run_id)],
            # A step's timers; a retry policy's backoff shows under workflow_retry instead.
            "timers": [_timer(t) for t in timers if t.kind != RETRY_TIMER],
            "children": [_child(ch) for ch in tx.run_children(run.workflow_run_id)],
            "pending_signals": [{"name": signal.name, "received_at": signal.received_at}
                                for signal in tx.pending_signals(instance_id)],
            "failure": failure_view(tx.get_failure(run.failure_id))
            if run.failure_id else None,
            "state": run.state,
            # Only an instance a schedule started names it (SPEC §12).
            **({"schedule": {"name": instance.schedule_name, "tick_at": instance.schedule_tick_at}}
               if instance.schedule_name is not None else {}),
        }


def _instance(tx: Tx, instance_id: str) -> Instance:
    """The instance; NotFound for none, and for one being pruned (a part of it may be gone)."""
    instance = tx.get_instance(instance_id)
    if instance is None or tx.is_pruning(instance_id):
        raise NotFound(f"no instance {instance_id!r}")
    return instance


def _workflow_retry(policy: dict[str, Any] | None, run: Run,
                    timers: list[Timer]) -> dict[str, Any] | None:
    """The attempt the run is on (or, waiting out a backoff, the one about to start) and when
    that one starts; None for a type without a retry policy."""
    if policy is None:
        return None
    pending = [t.fire_at for t in timers
               if t.kind == RETRY_TIMER and t.status == "scheduled"]
    return {
        "attempt": run.retry_attempt,
        "max_attempts": policy["max_attempts"],
        "next_attempt_at": pending[0] if pending else None,
    }


# Workflow types by definitions digest and type name: the text behind a digest never changes.
_types: dict[tuple[str, str], WorkflowType] = {}


def _workflow_type(tx: Tx, instance: Instance) -> WorkflowType:
    """The instance's type as the definitions it was started with declare it."""
    key = (instance.definitions_digest, instance.workflow_type)
    found = _types.get(key)
    if found is None:
        from wfctl.lang import definitions

        row = tx.get_definitions(key[0])
        if row is None:
            raise LookupError(f"definitions {key[0]} are missing from the database")
        found = _types.setdefault(key, definitions.parse(row.source, row.path).types[key[1]])
    return found


def _current_step(tx: Tx, instance: Instance, run: Run) -> str | None:
    """The name of the step the run is at; a completed run is at none (and reads no YAML)."""
    if run.status == "completed":
        return None
    steps = _workflow_type(tx, instance).steps
    return steps[run.step_index].name if run.step_index < len(steps) else None


def signal_names(store: Store, instance_id: str) -> tuple[str, ...]:
    """The signals the instance's type waits for; NotFound for an unknown id."""
    with store.read() as tx:
        return _workflow_type(tx, _instance(tx, instance_id)).signals()


def _continued_to(tx: Tx, run: Run) -> str | None:
    if run.status != "continued_as_new":
        return None
    following = tx.get_run_by_number(run.workflow_instance_id, run.run_number + 1)
    return following.workflow_run_id if following else None


def _activity(activity: Activity) -> dict[str, Any]:
    return {
        "activity_id": activity.activity_id,
        "step": activity.step,
        "handler": activity.handler,
        "queue": activity.queue,
        "status": activity.status,
        "attempt": activity.attempt,
        "max_attempts": activity.max_attempts,
        "retry_policy": activity.retry_policy,
        "scheduled_at": activity.scheduled_at,
        "available_at": activity.available_at,
        "started_at": activity.started_at,
        "closed_at": activity.closed_at,
        "schedule_deadline_at": activity.schedule_deadline_at,
        "close_deadline_at": activity.close_deadline_at,
        "schedule_to_close_deadline_at": activity.schedule_to_close_deadline_at,
        "heartbeat_deadline_at": activity.heartbeat_deadline_at,
        "last_heartbeat_at": activity.last_heartbeat_at,
        "last_heartbeat_details": activity.last_heartbeat_details,
        "last_error": _last_error(activity.last_error),
        "superseded": activity.superseded,
    }


def _last_error(error: Any) -> Any:
    """An attempt's last failure; a timeout's deadline, stored as text in its JSON column, is
    an instant here like every other."""
    if isinstance(error, dict) and isinstance(error.get("deadline_at"), str):
        return {**error, "deadline_at": datetime.fromisoformat(error["deadline_at"])}
    return error


def _timer(timer: Timer) -> dict[str, Any]:
    return {
        "timer_id": timer.timer_id,
        "step": timer.step,
        "kind": timer.kind,
        "fire_at": timer.fire_at,
        "status": timer.status,
    }


def _child(child: Child) -> dict[str, Any]:
    return {
        "workflow_instance_id": child.child_instance_id,
        "workflow_type": child.workflow_type,
        "step": child.step,
        "status": child.status,
        "closed_at": child.closed_at,
    }


def history(store: Store, instance_id: str, *, run_number: int | None = None,
            all_runs: bool = False, after_seq: int = 0,
            event_types: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The events of one run (the current one unless told), or of all runs, in order."""
    with store.read() as tx:
        instance = _instance(tx, instance_id)
        if not all_runs and run_number is None:
            run_number = instance.run_count
        if run_number is not None and not 1 <= run_number <= instance.run_count:
            raise NotFound(f"{instance_id} has no run {run_number} "
                           f"(it has {instance.run_count})")
        events = tx.events(instance_id, run_number=None if all_runs else run_number,
                           after_seq=after_seq, event_types=event_types)
        return [
            {
                "seq": event.seq,
                "event_type": event.event_type,
                "at": event.at,
                "run_number": event.run_number,
                "attributes": event.attributes,
            }
            for event in events
        ]


# How many runs' open work one query of `list` reads.
_DEADLINE_BATCH = 200


def list_instances(store: Store, *, status: str | None = None,
                   workflow_type: str | None = None, since: datetime | None = None,
                   limit: int = 50,
                   before: tuple[datetime, str] | None = None,
                   schedule: str | None = None) -> list[dict[str, Any]]:
    """Instances, newest first, each with the nearest deadline that can fire in its current
    state (`nearest_deadline`); `before` (created_at, id): those after that one."""
    with store.read() as tx:
        rows = tx.list_instances(status=status, workflow_type=workflow_type, since=since,
                                 limit=limit, before=before, schedule=schedule)
        open_runs = [row["current_run_id"] for row in rows if row["closed_at"] is None]
        pending: dict[str, list[tuple[datetime, str]]] = {}
        for start in range(0, len(open_runs), _DEADLINE_BATCH):
            for found in tx.open_deadlines(open_runs[start:start + _DEADLINE_BATCH]):
                pending.setdefault(found["workflow_run_id"], []).append(
                    (found["at"], found["kind"]))
    result = []
    for row in rows:
        nearest = None
        if row["closed_at"] is None:
            candidates = [*pending.get(row["current_run_id"], []),
                          *((row[column], kind) for kind, column in _DEADLINE_COLUMNS
                            if row[column] is not None and _can_fire(kind, row["status"]))]
            nearest = min(candidates) if candidates else None
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


def count_instances(store: Store, *, status: str | None = None,
                    workflow_type: str | None = None, since: datetime | None = None,
                    schedule: str | None = None) -> int:
    """How many instances `list` with these filters and no limit would show."""
    with store.read() as tx:
        return tx.count_instances(status=status, workflow_type=workflow_type, since=since,
                                  schedule=schedule)


def _can_fire(kind: str, status: str) -> bool:
    """Whether a workflow deadline of `kind` can fire while the instance is `status`: the
    must-complete-within deadline is held while it waits (for a signal or a child) or is paused."""
    return kind != "deadline" or status == "running"


def deadline_held_while(status: str, deadline_at: datetime | None,
                        closed: bool) -> str | None:
    """The status (`waiting`, `paused`) that holds an open instance's deadline; None when it
    can fire (or there is none)."""
    if deadline_at is None or closed or _can_fire("deadline", status):
        return None
    return status


