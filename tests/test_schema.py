"""The schema: a fresh database has exactly these tables and columns; history is append-only."""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from wfctl.errors import DatabaseNotFound, DatabaseTooNew
from wfctl.store import SQLiteStore as Store
from wfctl.store import codec
from wfctl.store import sqlite as sqlite_store
from wfctl.store.schema import _Migrations, migrations
from wfctl.vocabulary import TIMEOUT_EVENTS

EXPECTED = {
    "definitions": ["digest", "path", "source", "created_at"],
    "instances": [
        "workflow_instance_id", "workflow_type", "definitions_digest", "status",
        "current_run_id", "run_count", "execution_timeout_seconds", "deadline_seconds",
        "deadline_at", "on_deadline", "child_policy", "parent_instance_id", "created_at",
        "updated_at", "closed_at", "child_depth", "instance_key", "retry_policy", "retain_until",
        "schedule_name", "schedule_tick_at",
    ],
    "runs": [
        "workflow_run_id", "workflow_instance_id", "run_number", "status", "closed_reason",
        "run_timeout_seconds", "execution_deadline_at", "run_deadline_at",
        "workflow_task_timeout_seconds", "deadline_at", "deadline_claimed_by",
        "deadline_claimed_at", "step_index", "step_started", "wait_kind", "cancel_requested",
        "state", "first_seq", "failure_id", "continued_to_run_id", "started_at", "closed_at",
        "rejected_starts", "retry_attempt",
    ],
    "workflow_tasks": [
        "task_id", "workflow_run_id", "workflow_instance_id", "status", "reason",
        "available_at", "scheduled_event_id", "started_event_id", "owner", "started_at",
        "timeout_at", "closed_at",
    ],
    "activities": [
        "activity_id", "workflow_run_id", "workflow_instance_id", "step_index", "branch_index",
        "step", "handler", "queue", "status", "attempt", "max_attempts", "retry_policy",
        "available_at", "scheduled_at", "schedule_deadline_at", "close_deadline_at",
        "schedule_to_close_deadline_at", "heartbeat_deadline_at", "started_at", "owner",
        "last_heartbeat_at", "last_heartbeat_details", "last_heartbeat_event_at",
        "scheduled_event_id", "started_event_id", "last_error", "superseded", "closed_at",
    ],
    "timers": [
        "timer_id", "workflow_run_id", "workflow_instance_id", "step_index", "step", "kind",
        "fire_at", "status", "scheduled_event_id", "superseded", "closed_at",
    ],
    "signals": [
        "signal_id", "workflow_instance_id", "name", "data", "received_at", "received_event_id",
        "consumed_run_id", "consumed_step_index", "consumed_at",
    ],
    "children": [
        "child_instance_id", "parent_instance_id", "parent_run_id", "step_index",
        "branch_index", "step", "workflow_type", "started_event_id", "superseded", "created_at",
    ],
    "failures": [
        "failure_id", "workflow_instance_id", "workflow_run_id", "activity_id",
        "failure_category", "propagation_kind", "timeout_kind", "exception_class", "message",
        "deadline_at", "details", "created_at",
    ],
    "workers": [
        "worker_id", "kind", "hostname", "pid", "pid_started", "queues", "started_at",
        "heartbeat_at", "lease_expires_at", "stopped_at", "host_id",
    ],
    "events": ["instance_key", "seq", "run_number", "event_type", "at", "attributes"],
    "instance_counts": ["workflow_type", "status", "count"],
    "timeout_event_counts": ["event_type", "timeout_kind", "failure_category", "count"],
    "pruning": ["workflow_instance_id", "instance_key", "started_at"],
    "schedules": [
        "name", "workflow_type", "spec_digest", "file_paused", "paused", "paused_reason",
        "next_tick_at", "due_at", "buffered_tick_at", "last_tick_at", "last_action",
        "last_instance_id", "last_action_at", "last_lag_seconds", "started_count",
        "skipped_count", "missed_count", "buffered_count", "removed_at", "created_at",
    ],
    "schedule_actions": ["action_id", "schedule_name", "tick_at", "action", "instance_id",
                         "reason", "at"],
}


def columns(path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "AND name != '_sqlite_migrations' ORDER BY rowid")]
        return {table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
                for table in tables}
    finally:
        conn.close()


def test_a_fresh_database_has_the_expected_columns(tmp_path):
    Store(tmp_path / "w.db").close()
    assert columns(tmp_path / "w.db") == EXPECTED


def test_migrations_are_recorded_and_applied_once(tmp_path):
    path = tmp_path / "w.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    conn.commit()
    conn.close()

    Store(path).close()

    conn = sqlite3.connect(path)
    applied = [row[0] for row in conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = 'wfctl'")]
    assert applied == migrations.names
    assert conn.execute("SELECT count(*) FROM definitions").fetchone()[0] == 1
    conn.close()


def first_schema(path) -> None:
    """A database as the first release of wfctl left it: m001 only, no user_version."""
    first = _Migrations()
    name, function = next(iter(migrations))
    first(name=name)(function)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    first.apply(conn)
    conn.execute("PRAGMA user_version = 0")
    conn.execute("COMMIT")
    conn.close()


def test_a_database_from_the_first_schema_upgrades_keeping_its_rows(tmp_path):
    path = tmp_path / "w.db"
    first_schema(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    conn.commit()
    conn.close()

    Store(path).close()

    assert columns(path) == EXPECTED
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT digest FROM definitions").fetchall() == [("d",)]
    conn.close()


def test_the_upgrade_counts_refused_starts_and_child_depths_already_recorded(tmp_path):
    path = tmp_path / "w.db"
    first_schema(path)
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    for instance_id, parent in (("root", None), ("root.a", "root"), ("root.a.b", "root.a"),
                                ("other", None)):
        conn.execute(
            "INSERT INTO instances (workflow_instance_id, workflow_type, definitions_digest, "
            "status, current_run_id, run_count, child_policy, parent_instance_id, created_at, "
            "updated_at) VALUES (?, 't', 'd', 'running', ?, 1, 'abandon', ?, 't', 't')",
            (instance_id, f"{instance_id}-r1", parent))
        conn.execute(
            "INSERT INTO runs (workflow_run_id, workflow_instance_id, run_number, status, state, "
            "first_seq, started_at) VALUES (?, ?, 1, 'running', '{}', 1, 't')",
            (f"{instance_id}-r1", instance_id))
    for seq, event_type in enumerate(("WorkflowStarted", "StartRejected", "WorkflowTaskScheduled",
                                      "StartRejected"), start=1):
        conn.execute("INSERT INTO events VALUES ('root', ?, 'root-r1', 1, ?, "
                     "'2026-01-01T00:00:00.000+00:00', '{}')",
                     (seq, event_type))
    conn.commit()
    conn.close()

    Store(path).close()

    conn = sqlite3.connect(path)
    assert dict(conn.execute("SELECT workflow_instance_id, child_depth FROM instances")) == {
        "root": 0, "root.a": 1, "root.a.b": 2, "other": 0}
    assert dict(conn.execute("SELECT workflow_instance_id, rejected_starts FROM runs")) == {
        "root": 2, "root.a": 0, "root.a.b": 0, "other": 0}
    conn.close()


def test_connections_use_wal_and_enforce_references(tmp_path):
    store = Store(tmp_path / "w.db")
    conn = store.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()["journal_mode"] == "wal"
    assert conn.execute("PRAGMA foreign_keys").fetchone()["foreign_keys"] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()["timeout"] >= 1000
    assert conn.execute("PRAGMA synchronous").fetchone()["synchronous"] == 1
    store.close()


def _instance_with_history(path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    conn.execute(
        "INSERT INTO instances (workflow_instance_id, workflow_type, definitions_digest, status, "
        "current_run_id, run_count, child_policy, created_at, updated_at, instance_key) "
        "VALUES ('i', 't', 'd', 'completed', 'r', 1, 'abandon', 't', 't', 1)")
    conn.execute("INSERT INTO events VALUES (1, 1, 1, 1, 0, '[]')")
    conn.commit()
    return conn


def test_history_cannot_be_edited_or_deleted(tmp_path):
    Store(tmp_path / "w.db").close()
    conn = _instance_with_history(tmp_path / "w.db")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        conn.execute("UPDATE events SET event_type = 'X'")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        conn.execute("DELETE FROM events")
    conn.close()


def test_history_may_be_deleted_only_with_its_instance(tmp_path):
    Store(tmp_path / "w.db").close()
    conn = _instance_with_history(tmp_path / "w.db")

    conn.execute("DELETE FROM instances WHERE workflow_instance_id = 'i'")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        conn.execute("UPDATE events SET event_type = 'X'")
    conn.execute("DELETE FROM events WHERE instance_key = 1")
    conn.commit()

    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    conn.close()


def test_history_may_be_deleted_while_its_instance_is_marked_as_being_pruned(tmp_path):
    Store(tmp_path / "w.db").close()
    conn = _instance_with_history(tmp_path / "w.db")

    conn.execute("INSERT INTO pruning VALUES ('i', 1, 't')")
    with pytest.raises(sqlite3.IntegrityError, match="history is append-only"):
        conn.execute("UPDATE events SET event_type = 'X'")
    conn.execute("DELETE FROM events WHERE instance_key = 1")
    conn.commit()

    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    conn.close()


def schema_version(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()


def test_a_fresh_database_records_its_schema_version(tmp_path):
    Store(tmp_path / "w.db").close()
    assert schema_version(tmp_path / "w.db") == migrations.version == len(migrations.names)


def test_a_database_of_wfctl_0_1_opens_without_being_written(tmp_path):
    path = tmp_path / "w.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 0")  # 0.1 never set it
    conn.commit()
    conn.close()
    before = path.read_bytes()

    store = Store(path, create=False)
    with store.read() as tx:
        assert tx.instance_ids("", 10) == []
    store.close()

    assert path.read_bytes() == before


def test_a_pending_migration_is_applied_and_the_version_recorded(tmp_path, monkeypatch):
    path = tmp_path / "w.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    conn.execute("PRAGMA user_version = 0")
    conn.commit()
    conn.close()
    later = _Migrations()
    for name, function in migrations:
        later(name=name)(function)

    @later()
    def m999_notes(db):
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY)")

    monkeypatch.setattr(sqlite_store, "migrations", later)
    Store(path).close()

    assert schema_version(path) == migrations.version + 1
    assert "notes" in columns(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT digest FROM definitions").fetchall() == [("d",)]
    conn.close()

    monkeypatch.undo()
    before = path.read_bytes()
    with pytest.raises(DatabaseTooNew) as caught:
        Store(path)
    assert (caught.value.schema, caught.value.known) == (migrations.version + 1,
                                                          migrations.version)
    assert str(caught.value) == (f"{path} was written by a newer wfctl (schema "
                                 f"{migrations.version + 1}; this wfctl knows up to "
                                 f"{migrations.version})")
    assert path.read_bytes() == before


def test_opening_without_create_never_creates_the_file(tmp_path):
    with pytest.raises(DatabaseNotFound, match="no database at"):
        Store(tmp_path / "w.db", create=False)
    assert list(tmp_path.iterdir()) == []


def test_the_0_1_database_is_upgraded_and_stamped_with_its_version(tmp_path):
    path = tmp_path / "w.db"
    shutil.copyfile(Path(__file__).parent / "data" / "v01.db", path)
    assert schema_version(path) == 0

    Store(path, create=False).close()

    assert schema_version(path) == migrations.version
    conn = sqlite3.connect(path)
    applied = [row[0] for row in conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = 'wfctl' ORDER BY rowid")]
    conn.close()
    assert applied == migrations.names


def query_plans(path, reads) -> list[str]:
    """The query plan of each statement `reads(tx)` runs in a read transaction of a fresh
    database at `path`."""
    store = Store(path)
    try:
        with store.read() as tx:
            statements: list[str] = []
            tx.conn.set_trace_callback(statements.append)
            reads(tx)
            tx.conn.set_trace_callback(None)
            return [row["detail"] for sql in statements
                    for row in tx.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    finally:
        store.close()


def test_the_watchdog_finds_expired_work_through_the_partial_indexes_alone(tmp_path):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plans = query_plans(tmp_path / "w.db",
                        lambda tx: (tx.expired_activities(now, 10), tx.next_due(now)))

    activity_reads = [plan for plan in plans if " activities" in plan]
    assert activity_reads and all("USING INDEX" in plan for plan in activity_reads), plans


def activity_indexes(path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'activities' "
            "AND sql IS NOT NULL")}
    finally:
        conn.close()


# A step writes an entry of each index its activity's row is in: started activities, few (one
# for each slot holding one), are read through the owner index alone.
ACTIVITY_INDEXES = {"activities_ready", "activities_schedule_deadline",
                    "activities_total_deadline", "activities_owner", "activities_step"}


@pytest.mark.parametrize("source", ["fresh", "v01.db", "v02.db"])
def test_started_activities_have_one_index_in_a_fresh_and_an_upgraded_file(tmp_path, source):
    path = tmp_path / "w.db"
    if source != "fresh":
        shutil.copyfile(Path(__file__).parent / "data" / source, path)

    Store(path, create=source == "fresh").close()

    assert activity_indexes(path) == ACTIVITY_INDEXES


def test_started_attempts_past_a_deadline_are_found_through_the_owner_index(tmp_path):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plans = query_plans(tmp_path / "w.db", lambda tx: tx.expired_activities(now, 10))

    # The start-to-close and heartbeat deadlines, both of started attempts.
    assert sum("USING INDEX activities_owner" in plan for plan in plans) == 2, plans


def counts(path) -> tuple[dict, dict]:
    """The instance counts the triggers keep, and those a scan of `instances` finds."""
    conn = sqlite3.connect(path)
    try:
        kept = {(t, s): n for t, s, n in conn.execute(
            "SELECT workflow_type, status, count FROM instance_counts") if n}
        scanned = {(t, s): n for t, s, n in conn.execute(
            "SELECT workflow_type, status, count(*) FROM instances GROUP BY 1, 2")}
    finally:
        conn.close()
    return kept, scanned


def test_instance_counts_follow_every_insert_status_change_and_delete(tmp_path):
    path = tmp_path / "w.db"
    Store(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO definitions VALUES ('d', 'p', 's', 't')")
    for n, workflow_type in enumerate(("a", "a", "a", "b")):
        conn.execute(
            "INSERT INTO instances (workflow_instance_id, workflow_type, definitions_digest, "
            "status, current_run_id, run_count, child_policy, created_at, updated_at) "
            "VALUES (?, ?, 'd', 'running', 'r', 1, 'abandon', 't', 't')", (f"i{n}", workflow_type))
    conn.execute("UPDATE instances SET status = 'completed' WHERE workflow_instance_id = 'i0'")
    conn.execute("UPDATE instances SET status = 'failed', updated_at = 'u' "
                 "WHERE workflow_instance_id IN ('i1', 'i3')")
    conn.execute("UPDATE instances SET updated_at = 'v', status = status")
    conn.execute("UPDATE instances SET status = 'running' WHERE workflow_instance_id = 'i1'")
    conn.execute("DELETE FROM instances WHERE workflow_instance_id = 'i0'")
    conn.commit()
    conn.close()

    kept, scanned = counts(path)

    assert kept == scanned == {("a", "running"): 2, ("b", "failed"): 1}


def test_the_0_1_database_is_upgraded_with_its_instances_counted(tmp_path):
    path = tmp_path / "w.db"
    shutil.copyfile(Path(__file__).parent / "data" / "v01.db", path)

    Store(path, create=False).close()

    kept, scanned = counts(path)
    assert kept == scanned and sum(scanned.values()) > 10


def test_metrics_read_index_ranges_and_minimums_never_a_table(tmp_path):
    now = datetime(2026, 1, 1, tzinfo=UTC)
    plans = query_plans(tmp_path / "w.db", lambda tx: (
        tx.open_activity_counts(), tx.ready_activity_counts(now),
        tx.ready_workflow_task_count(now), tx.next_deadlines()))

    reads = [plan for plan in plans if plan.startswith(("SCAN", "SEARCH"))
             and "CONSTANT ROW" not in plan]
    # Open activities are counted in two parts: the ready ones, and the started ones.
    assert len(reads) == 13 and all("USING" in plan and "INDEX" in plan for plan in reads), plans


def test_the_0_1_database_is_upgraded_with_its_timeout_events_counted(tmp_path):
    path = tmp_path / "w.db"
    shutil.copyfile(Path(__file__).parent / "data" / "v01.db", path)

    Store(path, create=False).close()

    conn = sqlite3.connect(path)
    kept = conn.execute("SELECT event_type, timeout_kind, failure_category, count "
                        "FROM timeout_event_counts ORDER BY 1, 2, 3").fetchall()
    conn.close()
    store = Store(path, create=False)
    scanned: Counter = Counter()
    with store.read() as tx:
        ids = tx.instance_ids("", 1000)
        for instance_id in ids:
            for event in tx.events(instance_id, event_types=TIMEOUT_EVENTS):
                attributes = event.attributes
                scanned[(event.event_type, attributes.get("timeout_kind") or "",
                         attributes.get("failure_category") or "")] += 1
    store.close()
    assert kept == sorted((*key, count) for key, count in scanned.items())
    assert any(row[1] for row in kept)


TIMED = """
version: 1
workflows:
  timed:
    steps:
      - activity: wfh:noop
        name: first
        schedule_to_close: 1m
      - activity: wfh:noop
        name: second
"""


def test_writing_an_activity_builds_no_temporary_table_for_its_indexes(make_env, monkeypatch):
    # SQLite evaluates an IN list of three or more values through a temporary table it builds
    # each time: in a partial index's predicate, at each insert and update of the table's rows.
    statements: list[str] = []
    connect = sqlite_store.SQLiteStore._connect

    def traced(store: sqlite_store.SQLiteStore, *args: Any) -> sqlite3.Connection:
        conn = connect(store, *args)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite_store.SQLiteStore, "_connect", traced)
    env = make_env(TIMED)
    env.start("timed", "t1")
    while env.run(0):
        pass
    assert env.describe("t1")["status"] == "completed"

    writes = [sql for sql in statements if sql.startswith(("INSERT INTO activities",
                                                            "UPDATE activities"))]
    conn = sqlite3.connect(env.db)
    temporary = {sql: sum(1 for op in conn.execute(f"EXPLAIN {sql}") if op[1] == "OpenEphemeral")
                 for sql in writes}
    conn.close()
    # Two activities inserted, each started and completed: only RETURNING keeps rows apart.
    assert len(writes) >= 4
    assert temporary == {sql: int(" RETURNING " in sql) for sql in writes}


def test_a_transactions_events_of_a_run_share_one_history_row(make_env):
    env = make_env(TIMED)
    env.start("timed", "t1")
    while env.run(0):
        pass
    history = env.history("t1")
    assert history[-1]["event_type"] == "WorkflowCompleted"

    conn = sqlite3.connect(env.db)
    rows = conn.execute("SELECT seq, event_type, attributes FROM events ORDER BY seq").fetchall()
    conn.close()
    # Each row ends at its seq; a row of several (type 0) holds the events up to it after the
    # row before: every event, once, in order.
    held, last = [], 0
    for seq, code, attributes in rows:
        count = len(codec.unpack(attributes)) if code == codec.PACKED else 1
        assert seq - count == last
        held.append(count)
        last = seq
    assert last == len(history)
    # The start (two events), then each transaction of the worker: a step's six in one row.
    assert len(rows) < len(history) / 2 and max(held) >= 6
