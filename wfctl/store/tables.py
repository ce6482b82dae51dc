"""The tables and indexes both schemas create alike (the SQLite file's m001, the PostgreSQL
database's p001), written once: a dialect gives an instant's type, an integer key's, and the
`rowid` PostgreSQL keeps for insertion order where SQLite has its own."""

from __future__ import annotations

from collections.abc import Sequence

TABLES = {
    # The partial indexes of the runs' deadlines.
    "runs_deadlines": """\
CREATE INDEX runs_execution_deadline ON runs(execution_deadline_at)
    WHERE closed_at IS NULL AND execution_deadline_at IS NOT NULL;
CREATE INDEX runs_run_deadline ON runs(run_deadline_at)
    WHERE closed_at IS NULL AND run_deadline_at IS NOT NULL;
CREATE INDEX runs_deadline ON runs(deadline_at)
    WHERE status = 'running' AND deadline_at IS NOT NULL AND deadline_claimed_at IS NULL;
CREATE INDEX runs_deadline_claimed ON runs(deadline_claimed_at)
    WHERE deadline_claimed_at IS NOT NULL AND closed_at IS NULL""",
    "definitions": """\
CREATE TABLE definitions (
    digest TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at {instant} NOT NULL
)""",
    "activities": """\
CREATE TABLE activities (
    activity_id TEXT PRIMARY KEY,
    workflow_run_id TEXT NOT NULL REFERENCES runs(workflow_run_id),
    workflow_instance_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    branch_index INTEGER NOT NULL,
    step TEXT NOT NULL,
    handler TEXT NOT NULL,
    queue TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    retry_policy TEXT NOT NULL,
    available_at {instant} NOT NULL,
    scheduled_at {instant} NOT NULL,
    schedule_deadline_at {instant},
    close_deadline_at {instant},
    schedule_to_close_deadline_at {instant},
    heartbeat_deadline_at {instant},
    started_at {instant},
    owner TEXT,
    last_heartbeat_at {instant},
    last_heartbeat_details TEXT,
    last_heartbeat_event_at {instant},
    scheduled_event_id INTEGER NOT NULL,
    started_event_id INTEGER,
    last_error TEXT,
    superseded INTEGER NOT NULL DEFAULT 0,
    closed_at {instant}{rowid}
);
CREATE INDEX activities_ready ON activities(queue, available_at{in_order})
    WHERE status IN ('scheduled', 'retry_scheduled');
CREATE INDEX activities_schedule_deadline ON activities(schedule_deadline_at)
    WHERE status IN ('scheduled', 'retry_scheduled') AND schedule_deadline_at IS NOT NULL;
CREATE INDEX activities_close_deadline ON activities(close_deadline_at)
    WHERE status = 'started' AND close_deadline_at IS NOT NULL;
CREATE INDEX activities_heartbeat_deadline ON activities(heartbeat_deadline_at)
    WHERE status = 'started' AND heartbeat_deadline_at IS NOT NULL;
CREATE INDEX activities_total_deadline ON activities(schedule_to_close_deadline_at)
    WHERE status IN ('scheduled', 'retry_scheduled', 'started')
    AND schedule_to_close_deadline_at IS NOT NULL;
CREATE INDEX activities_owner ON activities(owner) WHERE status = 'started';
CREATE INDEX activities_step ON activities(workflow_run_id, step_index, branch_index)""",
    "timers": """\
CREATE TABLE timers (
    timer_id TEXT PRIMARY KEY,
    workflow_run_id TEXT NOT NULL REFERENCES runs(workflow_run_id),
    workflow_instance_id TEXT NOT NULL,
    step_index INTEGER NOT NULL,
    step TEXT NOT NULL,
    kind TEXT NOT NULL,
    fire_at {instant} NOT NULL,
    status TEXT NOT NULL,
    scheduled_event_id INTEGER NOT NULL,
    superseded INTEGER NOT NULL DEFAULT 0,
    closed_at {instant}{rowid}
);
CREATE INDEX timers_due ON timers(fire_at) WHERE status = 'scheduled';
CREATE INDEX timers_step ON timers(workflow_run_id, step_index)""",
    "signals": """\
CREATE TABLE signals (
    signal_id {key},
    workflow_instance_id TEXT NOT NULL REFERENCES instances(workflow_instance_id),
    name TEXT NOT NULL,
    data TEXT,
    received_at {instant} NOT NULL,
    received_event_id INTEGER NOT NULL,
    consumed_run_id TEXT,
    consumed_step_index INTEGER,
    consumed_at {instant}
);
CREATE INDEX signals_pending ON signals(workflow_instance_id, name, signal_id)
    WHERE consumed_at IS NULL;
CREATE INDEX signals_consumed ON signals(consumed_run_id, consumed_step_index)
    WHERE consumed_at IS NOT NULL""",
    "children": """\
CREATE TABLE children (
    child_instance_id TEXT PRIMARY KEY REFERENCES instances(workflow_instance_id),
    parent_instance_id TEXT NOT NULL,
    parent_run_id TEXT NOT NULL REFERENCES runs(workflow_run_id),
    step_index INTEGER NOT NULL,
    branch_index INTEGER NOT NULL,
    step TEXT NOT NULL,
    workflow_type TEXT NOT NULL,
    started_event_id INTEGER NOT NULL,
    superseded INTEGER NOT NULL DEFAULT 0,
    created_at {instant} NOT NULL{rowid}
);
CREATE INDEX children_parent ON children(parent_run_id, step_index, branch_index)""",
    "failures": """\
CREATE TABLE failures (
    failure_id {key},
    workflow_instance_id TEXT NOT NULL,
    workflow_run_id TEXT NOT NULL,
    activity_id TEXT,
    failure_category TEXT NOT NULL,
    propagation_kind TEXT,
    timeout_kind TEXT,
    exception_class TEXT,
    message TEXT NOT NULL,
    deadline_at {instant},
    details TEXT,
    created_at {instant} NOT NULL
);
CREATE INDEX failures_run ON failures(workflow_run_id)""",
    "workers": """\
CREATE TABLE workers (
    worker_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    hostname TEXT NOT NULL,
    pid INTEGER NOT NULL,
    pid_started TEXT,
    queues TEXT NOT NULL,
    started_at {instant} NOT NULL,
    heartbeat_at {instant} NOT NULL,
    lease_expires_at {instant} NOT NULL,
    stopped_at {instant}
);
CREATE INDEX workers_live ON workers(lease_expires_at) WHERE stopped_at IS NULL""",
    # Schedules (m011, p011): one row each, and what each did with its ticks, newest last. A
    # worker finds the due ones through `schedules_due` (a few index probes however many are
    # idle); a tick's action is written in the transaction that decides it.
    "schedules": """\
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    workflow_type TEXT NOT NULL,
    spec_digest TEXT NOT NULL,
    file_paused INTEGER NOT NULL,
    paused INTEGER NOT NULL,
    paused_reason TEXT,
    next_tick_at {instant},
    due_at {instant},
    buffered_tick_at {instant},
    last_tick_at {instant},
    last_action TEXT,
    last_instance_id TEXT,
    last_action_at {instant},
    last_lag_seconds REAL,
    started_count INTEGER NOT NULL DEFAULT 0,
    skipped_count INTEGER NOT NULL DEFAULT 0,
    missed_count INTEGER NOT NULL DEFAULT 0,
    buffered_count INTEGER NOT NULL DEFAULT 0,
    removed_at {instant},
    created_at {instant} NOT NULL
);
CREATE INDEX schedules_due ON schedules(due_at) WHERE paused = 0 AND removed_at IS NULL;
CREATE INDEX schedules_buffered ON schedules(name) WHERE buffered_tick_at IS NOT NULL;
CREATE TABLE schedule_actions (
    action_id {key},
    schedule_name TEXT NOT NULL,
    tick_at {instant} NOT NULL,
    action TEXT NOT NULL,
    instance_id TEXT,
    reason TEXT,
    at {instant} NOT NULL
);
CREATE INDEX schedule_actions_recent ON schedule_actions(schedule_name, action_id)""",
}


def table(name: str, *, instant: str, key: str, rowid: str, in_order: str) -> str:
    """A shared table's statements in a dialect (no semicolon after the last): `instant` and
    `key` are types, `rowid` the column that keeps insertion order where the database has none,
    `in_order` the index key that follows it."""
    return TABLES[name].format(instant=instant, key=key, rowid=rowid, in_order=in_order)


def status_is(statuses: Sequence[str]) -> str:
    """The condition that a row's status is one of `statuses` (vocabulary words, never input):
    `=` for one, `IN` for two, and ORs for more. SQLite evaluates an `IN` list of three or more
    values through a temporary table it builds at each evaluation, and a partial index's
    predicate is evaluated at each write of a row (twice when an update may change what it
    reads): spelled with `IN`, such a predicate cost every insert and update of an activity
    about as much as the rest of the statement. Queries spell their lists through this too (a
    query's list costs the same table at each run). PostgreSQL evaluates a list without a table:
    its indexes keep the `IN` they were created with, and its planner reads either spelling
    through them."""
    if len(statuses) == 1:
        return f"status = '{statuses[0]}'"
    if len(statuses) == 2:
        return f"status IN ('{statuses[0]}', '{statuses[1]}')"
    return "(" + " OR ".join(f"status = '{status}'" for status in statuses) + ")"
