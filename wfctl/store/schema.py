"""The schema, as append-only migrations: never edit one that has been released, add the next.

The schema version of a database is the number of wfctl migrations applied to it. It is kept in
`PRAGMA user_version` (set by every migration run from 0.2 on; 0.1 files have 0) and read from
there on each open, so that an up-to-date database costs one pragma and no sqlite-utils import.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from wfctl.store.tables import table

if TYPE_CHECKING:
    from sqlite_utils import Database

Migration = Callable[["Database"], None]
# sqlite-utils' Migrations records each applied migration here, by set and name.
MIGRATIONS_TABLE = "_sqlite_migrations"
MIGRATION_SET = "wfctl"


class _Migrations:
    """The ordered migrations, registered with `@migrations()` as with sqlite-utils' Migrations,
    which applies them; it is imported only when a migration is pending."""

    def __init__(self) -> None:
        self._functions: list[tuple[str, Migration]] = []

    def __call__(self, *, name: str | None = None) -> Callable[[Migration], Migration]:
        def register(function: Migration) -> Migration:
            self._functions.append((name or function.__name__, function))
            return function

        return register

    def __iter__(self) -> Iterator[tuple[str, Migration]]:
        return iter(self._functions)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._functions]

    @property
    def version(self) -> int:
        """The schema version this wfctl writes: how many migrations it knows."""
        return len(self._functions)

    def apply(self, conn: sqlite3.Connection) -> None:
        """Apply the pending migrations inside the caller's transaction and record the version."""
        from sqlite_utils import Database
        from sqlite_utils.migrations import Migrations

        runner = Migrations(MIGRATION_SET)
        for name, function in self._functions:
            runner(name=name)(function)
        # Inside the caller's IMMEDIATE transaction sqlite-utils nests each migration in a
        # savepoint, so two processes opening a new file cannot both migrate it.
        runner.apply(Database(conn))
        conn.execute(f"PRAGMA user_version = {self.version}")


migrations = _Migrations()

def _table(name: str) -> str:
    return table(name, instant="TEXT", key="INTEGER PRIMARY KEY", rowid="", in_order="")


# Open = not yet closed; each deadline column gets a partial index over open rows only, so the
# watchdog's scans cost a few index probes however many rows are closed or far from expiry.
_M001 = f"""
{_table("definitions")};
CREATE TABLE instances (
    workflow_instance_id TEXT PRIMARY KEY,
    workflow_type TEXT NOT NULL,
    definitions_digest TEXT NOT NULL REFERENCES definitions(digest),
    status TEXT NOT NULL,
    current_run_id TEXT NOT NULL,
    run_count INTEGER NOT NULL,
    execution_timeout_seconds REAL,
    deadline_seconds REAL,
    deadline_at TEXT,
    on_deadline TEXT,
    child_policy TEXT NOT NULL,
    parent_instance_id TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed_at TEXT
);
CREATE INDEX instances_created ON instances(created_at);
CREATE INDEX instances_status_created ON instances(status, created_at);
CREATE INDEX instances_type_created ON instances(workflow_type, created_at);
CREATE TABLE runs (
    workflow_run_id TEXT PRIMARY KEY,
    workflow_instance_id TEXT NOT NULL REFERENCES instances(workflow_instance_id),
    run_number INTEGER NOT NULL,
    status TEXT NOT NULL,
    closed_reason TEXT,
    run_timeout_seconds REAL,
    execution_deadline_at TEXT,
    run_deadline_at TEXT,
    workflow_task_timeout_seconds REAL,
    deadline_at TEXT,
    deadline_claimed_by TEXT,
    deadline_claimed_at TEXT,
    step_index INTEGER NOT NULL DEFAULT 0,
    step_started INTEGER NOT NULL DEFAULT 0,
    wait_kind TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL,
    first_seq INTEGER NOT NULL,
    failure_id INTEGER,
    continued_to_run_id TEXT,
    started_at TEXT NOT NULL,
    closed_at TEXT,
    UNIQUE (workflow_instance_id, run_number)
);
{_table("runs_deadlines")};
CREATE TABLE workflow_tasks (
    task_id INTEGER PRIMARY KEY,
    workflow_run_id TEXT NOT NULL REFERENCES runs(workflow_run_id),
    workflow_instance_id TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    available_at TEXT NOT NULL,
    scheduled_event_id INTEGER NOT NULL,
    started_event_id INTEGER,
    owner TEXT,
    started_at TEXT,
    timeout_at TEXT,
    closed_at TEXT
);
CREATE INDEX workflow_tasks_ready ON workflow_tasks(available_at) WHERE status = 'scheduled';
CREATE INDEX workflow_tasks_timeout ON workflow_tasks(timeout_at)
    WHERE status = 'started' AND timeout_at IS NOT NULL;
CREATE INDEX workflow_tasks_owner ON workflow_tasks(owner) WHERE status = 'started';
CREATE INDEX workflow_tasks_open ON workflow_tasks(workflow_run_id)
    WHERE status IN ('scheduled', 'started');
{_table("activities")};
{_table("timers")};
{_table("signals")};
{_table("children")};
{_table("failures")};
{_table("workers")};
CREATE TABLE events (
    workflow_instance_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    workflow_run_id TEXT NOT NULL,
    run_number INTEGER NOT NULL,
    event_type TEXT NOT NULL,
    at TEXT NOT NULL,
    attributes TEXT NOT NULL,
    PRIMARY KEY (workflow_instance_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER events_are_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'history is append-only'); END
"""


@migrations()
def m001_initial(db: Database) -> None:
    """Every table SPEC needs: instances, runs, tasks, activities, timers, signals, history."""
    for statement in _split(_M001):
        db.execute(statement)


@migrations()
def m002_rejected_starts_and_child_depth(db: Database) -> None:
    """Refused duplicate starts are counted apart from history_size; each instance stores
    how deep a child it is, for the child_depth limit."""
    db.execute("ALTER TABLE runs ADD COLUMN rejected_starts INTEGER NOT NULL DEFAULT 0")
    db.execute("ALTER TABLE instances ADD COLUMN child_depth INTEGER NOT NULL DEFAULT 0")
    # Only a run that may still decide needs its count: open ones, and those `retry` reopens.
    db.execute(
        "UPDATE runs SET rejected_starts = (SELECT count(*) FROM events e "
        "WHERE e.workflow_instance_id = runs.workflow_instance_id AND e.seq >= runs.first_seq "
        "AND e.workflow_run_id = runs.workflow_run_id AND e.event_type = 'StartRejected') "
        "WHERE status IN ('running', 'waiting', 'paused', 'failed', 'timed_out')"
    )
    parents = dict(db.execute(
        "SELECT workflow_instance_id, parent_instance_id FROM instances "
        "WHERE parent_instance_id IS NOT NULL"
    ).fetchall())
    depths: dict[str, int] = {}
    for instance_id in parents:
        chain, node = [], instance_id
        # Up to an instance whose depth is known or that has no parent (guarding a cycle).
        while node in parents and node not in depths and len(chain) <= len(parents):
            chain.append(node)
            node = parents[node]
        known = depths.get(node, 0)
        for child in reversed(chain):
            known += 1
            depths[child] = known
    db.conn.executemany(
        "UPDATE instances SET child_depth = ? WHERE workflow_instance_id = ?",
        [(value, instance_id) for instance_id, value in depths.items()],
    )


_M003_EVENTS = """
CREATE TABLE events_compact (
    instance_key INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    run_number INTEGER NOT NULL,
    event_type NOT NULL,
    at INTEGER NOT NULL,
    attributes TEXT NOT NULL,
    PRIMARY KEY (instance_key, seq)
) WITHOUT ROWID
"""
_HISTORY_TRIGGERS = """
CREATE TRIGGER events_are_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'history is append-only'); END;
CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'history is append-only'); END
"""


# What `wfctl metrics` reads (SPEC §10) at every scrape, without a scan however many instances
# and events the file holds. Two counts are kept as rows change, because counting at a scrape
# walks every row counted: instances by type and status (by triggers), and the history events
# that may record a timeout or a deadline expiry, by type, timeout kind and failure category
# (by the store as it appends them, from the attributes it has in hand; a failed run's category
# tells a signal wait's own timeout from one a step passed on). Open activities by queue and
# status and the next signal-wait timeout each get a partial index. Lists of values are spelled
# as ORs here: SQLite evaluates a trigger's WHEN and a partial index's WHERE at every row written, and an IN
# list builds a temporary table each time (about 5 µs a row, where the ORs cost a tenth of that).
_M004 = """
CREATE TABLE instance_counts (
    workflow_type TEXT NOT NULL,
    status TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (workflow_type, status)
) WITHOUT ROWID;
INSERT INTO instance_counts (workflow_type, status, count)
    SELECT workflow_type, status, count(*) FROM instances GROUP BY workflow_type, status;
CREATE TRIGGER instance_counts_insert AFTER INSERT ON instances
BEGIN
    INSERT INTO instance_counts (workflow_type, status, count)
    VALUES (NEW.workflow_type, NEW.status, 1)
    ON CONFLICT (workflow_type, status) DO UPDATE SET count = count + 1;
END;
CREATE TRIGGER instance_counts_update AFTER UPDATE OF workflow_type, status ON instances
WHEN OLD.status IS NOT NEW.status OR OLD.workflow_type IS NOT NEW.workflow_type
BEGIN
    UPDATE instance_counts SET count = count - 1
    WHERE workflow_type = OLD.workflow_type AND status = OLD.status;
    INSERT INTO instance_counts (workflow_type, status, count)
    VALUES (NEW.workflow_type, NEW.status, 1)
    ON CONFLICT (workflow_type, status) DO UPDATE SET count = count + 1;
END;
CREATE TRIGGER instance_counts_delete AFTER DELETE ON instances
BEGIN
    UPDATE instance_counts SET count = count - 1
    WHERE workflow_type = OLD.workflow_type AND status = OLD.status;
END;
CREATE TABLE timeout_event_counts (
    event_type TEXT NOT NULL,
    timeout_kind TEXT NOT NULL,
    failure_category TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (event_type, timeout_kind, failure_category)
) WITHOUT ROWID;
CREATE INDEX activities_open ON activities(queue, status)
    WHERE status = 'scheduled' OR status = 'retry_scheduled' OR status = 'started';
CREATE INDEX timers_signal_timeout ON timers(fire_at)
    WHERE status = 'scheduled' AND kind = 'signal_timeout'
"""


@migrations()
def m003_compact_history(db: Database) -> None:
    """History in a third of the bytes (see store/codec.py): each instance gets an integer key,
    events are keyed by it with their type as a code, their instant as microseconds and their
    attributes in the compact form; the run id, which the run number names, is not repeated per
    event. Activity rows keep their retry policy compactly, and closed workflow tasks (their
    story is in history) are deleted."""
    from wfctl.store import codec

    db.execute("ALTER TABLE instances ADD COLUMN instance_key INTEGER")
    db.execute("UPDATE instances SET instance_key = rowid")
    db.execute("CREATE UNIQUE INDEX instances_key ON instances(instance_key)")
    db.execute(_M003_EVENTS)
    rows = db.execute(
        "SELECT i.instance_key, e.seq, e.run_number, e.event_type, e.at, e.attributes "
        "FROM events e JOIN instances i USING (workflow_instance_id)"
    )
    insert = "INSERT INTO events_compact VALUES (?, ?, ?, ?, ?, ?)"
    while batch := rows.fetchmany(1000):
        converted = []
        for key, seq, run_number, event_type, at, attributes in batch:
            stored_at = codec.micros(datetime.fromisoformat(at))
            converted.append((key, seq, run_number, codec.type_code(event_type), stored_at,
                              codec.encode_attributes(json.loads(attributes), stored_at)))
        db.conn.executemany(insert, converted)
    db.execute("DROP TABLE events")
    db.execute("ALTER TABLE events_compact RENAME TO events")
    for statement in _split(_HISTORY_TRIGGERS):
        db.execute(statement)
    db.conn.executemany(
        "UPDATE activities SET retry_policy = ? WHERE activity_id = ?",
        [(codec.encode_policy(json.loads(policy)), activity_id) for activity_id, policy
         in db.execute("SELECT activity_id, retry_policy FROM activities").fetchall()],
    )
    db.execute("DELETE FROM workflow_tasks WHERE status NOT IN ('scheduled', 'started')")


@migrations()
def m004_metrics(db: Database) -> None:
    """Metrics read counts and indexes, never a scan: instances counted by triggers, timeout
    events in history counted (here from history so far, then by the store as it appends), open
    activities by queue and status, signal-wait timeouts."""
    from wfctl.store import codec
    from wfctl.vocabulary import TIMEOUT_EVENTS

    for statement in _split(_M004):
        db.execute(statement)
    codes = [codec.type_code(name) for name in TIMEOUT_EVENTS]
    counts: dict[tuple[str, str, str], int] = {}
    rows = db.execute(
        f"SELECT event_type, at, attributes FROM events "
        f"WHERE event_type IN ({', '.join('?' for _ in codes)})", codes,
    )
    for event_type, at, attributes in rows.fetchall():
        decoded = codec.decode_attributes(attributes, at)
        key = (codec.type_name(event_type), decoded.get("timeout_kind") or "",
               decoded.get("failure_category") or "")
        counts[key] = counts.get(key, 0) + 1
    db.conn.executemany(
        "INSERT INTO timeout_event_counts (event_type, timeout_kind, failure_category, count) "
        "VALUES (?, ?, ?, ?)", [(*key, count) for key, count in counts.items()],
    )


@migrations()
def m005_workflow_retry_and_retention(db: Database) -> None:
    """Workflow retry policies (the policy an instance started with, the attempt a run is on)
    and retention (when a closed instance may be deleted); what `prune` needs to find and delete
    an instance's rows through indexes; and an instance's history may be deleted once the
    instance itself is gone, never while it exists."""
    for statement in (
        "ALTER TABLE instances ADD COLUMN retry_policy TEXT",
        "ALTER TABLE instances ADD COLUMN retain_until TEXT",
        "ALTER TABLE runs ADD COLUMN retry_attempt INTEGER NOT NULL DEFAULT 1",
        "CREATE INDEX instances_retain_until ON instances(retain_until) "
        "WHERE retain_until IS NOT NULL",
        "CREATE INDEX instances_closed ON instances(closed_at) WHERE closed_at IS NOT NULL",
        # One index on the run serves the open-task lookup the partial one did, and the
        # deletion of a run's closed tasks; unlike it, no status change ever rewrites it.
        "DROP INDEX workflow_tasks_open",
        "CREATE INDEX workflow_tasks_run ON workflow_tasks(workflow_run_id)",
        "CREATE INDEX signals_instance ON signals(workflow_instance_id)",
        "DROP TRIGGER events_are_append_only_delete",
        # History stays append-only while its instance exists: pruning deletes the instance
        # row first, in the same transaction, and only then may its events go.
        "CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events "
        "WHEN EXISTS (SELECT 1 FROM instances WHERE instance_key = OLD.instance_key) "
        "BEGIN SELECT RAISE(ABORT, 'history is append-only'); END",
    ):
        db.execute(statement)


@migrations()
def m006_pruning_long_histories(db: Database) -> None:
    """An instance too long to delete in one short transaction is marked as being pruned and
    deleted over several; meanwhile its history may go, it is hidden from readers and cannot be
    started again."""
    for statement in (
        "CREATE TABLE pruning (workflow_instance_id TEXT PRIMARY KEY "
        "REFERENCES instances(workflow_instance_id), instance_key INTEGER NOT NULL UNIQUE, "
        "started_at TEXT NOT NULL)",
        "DROP TRIGGER events_are_append_only_delete",
        # History stays append-only while its instance exists, unless prune has marked it.
        "CREATE TRIGGER events_are_append_only_delete BEFORE DELETE ON events "
        "WHEN EXISTS (SELECT 1 FROM instances WHERE instance_key = OLD.instance_key) "
        "AND NOT EXISTS (SELECT 1 FROM pruning WHERE instance_key = OLD.instance_key) "
        "BEGIN SELECT RAISE(ABORT, 'history is append-only'); END",
    ):
        db.execute(statement)


@migrations()
def m007_worker_host_id(db: Database) -> None:
    """Each worker records the host it runs on (`WFCTL_HOST_ID`, else machine id and hostname),
    so that only a worker of the same host is checked by its process id; a worker registered
    before has none and is judged by its hostname, as it was."""
    db.execute("ALTER TABLE workers ADD COLUMN host_id TEXT")


@migrations()
def m008_total_deadline_index_without_a_list(db: Database) -> None:
    """The index of activities' schedule-to-close deadlines spells its three statuses with ORs
    (`tables.status_is`): spelled with `IN`, SQLite built a temporary table to evaluate it at
    each insert of an activity, and two at each update."""
    db.execute("DROP INDEX activities_total_deadline")
    db.execute("CREATE INDEX activities_total_deadline ON activities(schedule_to_close_deadline_at) "
               "WHERE (status = 'scheduled' OR status = 'retry_scheduled' OR status = 'started') "
               "AND schedule_to_close_deadline_at IS NOT NULL")


@migrations()
def m009_history_rows_of_several_events(db: Database) -> None:
    """From this version on, the events one transaction appends to one run may share a history
    row (codec.PACKED): the schema is the same, and the version keeps a wfctl that cannot read
    such rows from opening the file (it says the database is newer than it)."""


@migrations()
def m010_started_activities_through_one_index(db: Database) -> None:
    """Started activities are read through one index, `activities_owner`: they are few (one
    for each handler slot of the workers that hold them, and the attempts a worker pools), so
    the watchdog's scans of their start-to-close and heartbeat deadlines, and the metrics'
    counts of them, read every entry of that index. Each of these indexes cost every step an
    entry written and one deleted; the counts of open activities go through the ready and the
    owner indexes, as on PostgreSQL."""
    for index in ("activities_close_deadline", "activities_heartbeat_deadline",
                  "activities_open"):
        db.execute(f"DROP INDEX IF EXISTS {index}")


@migrations()
def m011_schedules(db: Database) -> None:
    """Schedules (SPEC §12): each schedule's state and its actions, and the schedule and tick
    each instance was started for; an instance's id is unique, so a tick starts once."""
    for statement in _split(table("schedules", instant="TEXT", key="INTEGER PRIMARY KEY",
                                  rowid="", in_order="")):
        db.execute(statement)
    for statement in (
        "ALTER TABLE instances ADD COLUMN schedule_name TEXT",
        "ALTER TABLE instances ADD COLUMN schedule_tick_at TEXT",
        "CREATE INDEX instances_schedule ON instances(schedule_name, created_at) "
        "WHERE schedule_name IS NOT NULL",
        "CREATE INDEX instances_schedule_open ON instances(schedule_name) "
        "WHERE schedule_name IS NOT NULL AND closed_at IS NULL",
    ):
        db.execute(statement)


def _split(script: str) -> list[str]:
    """Statements of a script; trigger bodies keep their inner semicolons."""
    statements, current = [], []
    for line in script.strip().splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and (not text.upper().startswith("CREATE TRIGGER")
                                   or text.upper().endswith("END;")):
            statements.append(text[:-1])
            current = []
    if current:
        statements.append("\n".join(current).strip())
    return [s for s in statements if s]
