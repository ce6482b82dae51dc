"""wfctl on PostgreSQL: opening and migrating a database, errors said once and without the
password, and a workflow whose describe and history are the ones SQLite gives."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import T0, Clock, Env, round_trips
from psycopg.rows import tuple_row
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.clock import iso
from wfctl.engine.decide import process_workflow_tasks
from wfctl.errors import (
    DatabaseError,
    DatabaseNotFound,
    DatabaseTooNew,
    StoreUnavailable,
    TransientConflict,
)
from wfctl.store import open_store, postgres, postgres_arrays, queries
from wfctl.store import postgres_schema as schema
from wfctl.store.queries import insert_statement

ETL = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
        name: extract
      - activity: wfh:mark
        name: transform
      - activity: wfh:mark
        name: load
"""


def _unreachable(url: str) -> str:
    """The URL with the port of no server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{port}", url)


def _with_password(url: str, password: str) -> str:
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{password}@{host}"


def _without_ids(document: Any, seen: dict[str, str] | None = None) -> Any:
    """The document with each generated id (run, activity, worker) replaced by its rank of first
    appearance: two runs of one workflow compare equal when their structure is the same."""
    seen = {} if seen is None else seen
    if isinstance(document, dict):
        return {key: seen.setdefault(value, f"<id {len(seen)}>")
                if key.endswith("_id") and key != "workflow_instance_id" and isinstance(value, str)
                else _without_ids(value, seen) for key, value in document.items()}
    if isinstance(document, list | tuple):
        return [_without_ids(value, seen) for value in document]
    return document


def _run_etl(folder: Path, db: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    clock = Clock()
    env = Env(folder, Client(db, folder / "workflows.yaml", clock_now=clock), clock)
    try:
        env.start("etl", "e1", input={"source": "s3://x"})
        assert env.run(1) is True
        return env.describe("e1"), env.history("e1")
    finally:
        env.client.close()


def test_a_workflow_on_postgresql_has_the_describe_and_history_sqlite_gives(tmp_path, pg_url):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(ETL))

    described, history = _run_etl(tmp_path, pg_url)
    expected = _run_etl(tmp_path, tmp_path / "wfctl.db")

    assert described["status"] == "completed"
    assert [a["status"] for a in described["activities"]] == ["completed"] * 3
    assert history[-1]["event_type"] == "WorkflowCompleted"
    assert _without_ids((described, history)) == _without_ids(expected)


def test_the_command_line_reaches_postgresql_by_db_and_by_wfctl_db(tmp_path, pg_url,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(ETL))
    runner = CliRunner()

    started = runner.invoke(app, ["--db", pg_url, "-w", str(workflows), "start", "etl", "o1"])
    worked = runner.invoke(app, ["-w", str(workflows), "work", "--once"],
                           env={"WFCTL_DB": pg_url})
    described = runner.invoke(app, ["describe", "o1", "--json"], env={"WFCTL_DB": pg_url})

    assert (started.exit_code, worked.exit_code, described.exit_code) == (0, 0, 0), \
        started.stderr + worked.stderr + described.stderr
    assert '"status": "completed"' in described.stdout
    assert list(tmp_path.iterdir()) == [workflows]


def test_a_password_in_the_url_never_appears_in_an_error(pg_url):
    wrong_port = _unreachable(_with_password(pg_url, "s3cr%40t"))
    missing_db = _with_password(pg_url, "s3cr3t-2").rpartition("/")[0] + "/no_such_db"
    bad_option = _with_password(pg_url, "s3cr3t-3") + "?sslmode=sometimes&password=s3cr3t-4"
    raw_at = _unreachable(_with_password(pg_url, "s3cr@t-5"))

    errors = []
    for url in (wrong_port, missing_db, bad_option, raw_at):
        with pytest.raises(DatabaseError) as caught:
            open_store(url)
        errors.append(str(caught.value))

    assert errors[0].startswith("postgresql://postgres:***@127.0.0.1:")
    assert "cannot reach the database server" in errors[0]
    assert 'database "no_such_db" does not exist' in errors[1]
    assert "sslmode" in errors[2]
    assert all("s3cr" not in message and "t-5" not in message for message in errors), errors
    result = CliRunner().invoke(app, ["--db", missing_db, "describe", "x"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert "s3cr" not in result.stderr


def test_an_unreachable_server_is_unavailable_not_broken(pg_url):
    with pytest.raises(StoreUnavailable) as caught:
        open_store(_unreachable(pg_url))
    assert caught.value.reason == "unreachable"


def test_a_missing_driver_says_how_to_install_it(monkeypatch, pg_url):
    monkeypatch.delitem(sys.modules, "wfctl.store.postgres")
    monkeypatch.setitem(sys.modules, "psycopg", None)

    with pytest.raises(DatabaseError) as caught:
        open_store(pg_url)

    assert str(caught.value) == ("PostgreSQL needs its driver (psycopg is missing): "
                                 "pip install 'wfctl[postgres]'")


def test_errors_that_ask_for_the_operation_again_are_transient():
    for error in (psycopg.errors.SerializationFailure("could not serialize access"),
                  psycopg.errors.DeadlockDetected("deadlock detected")):
        assert isinstance(postgres.translate(error, "db"), TransientConflict)
    shutdown = postgres.translate(psycopg.errors.AdminShutdown("terminating connection"), "db")
    assert isinstance(shutdown, StoreUnavailable) and shutdown.reason == "unreachable"
    other = postgres.translate(psycopg.errors.UndefinedTable('relation "x" does not exist'), "db")
    assert type(other) is DatabaseError


def test_a_lost_connection_is_unavailable_once_and_the_next_write_reconnects(pg_server, pg_url):
    store = open_store(pg_url)
    try:
        with store.write() as tx:
            tx.put_definitions("d1", "workflows.yaml", "version: 1", T0)
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()",
                          (pg_url.rpartition("/")[2],))

        with pytest.raises(StoreUnavailable), store.write() as tx:
            tx.put_definitions("d2", "workflows.yaml", "version: 1", T0)
        with store.write() as tx:
            tx.put_definitions("d2", "workflows.yaml", "version: 1", T0)
        assert store.peek().get_definitions("d2") is not None
    finally:
        store.close()


def _applied(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT version, name FROM {schema.MIGRATIONS_TABLE} "
                            "ORDER BY version").fetchall()


def test_processes_opening_a_fresh_database_at_once_apply_each_migration_once(pg_server,
                                                                               tmp_path):
    url = pg_server.create(migrated=False)
    go = tmp_path / "go"
    # Each process imports wfctl first, then waits for the others: they open it together.
    opener = ("import os, sys, time\n"
              "from wfctl.store import open_store\n"
              "while not os.path.exists(sys.argv[1]):\n"
              "    time.sleep(0.005)\n"
              "open_store(sys.argv[2]).close()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH")]))}
    processes = [subprocess.Popen([sys.executable, "-c", opener, str(go), url], env=env,
                                  stderr=subprocess.PIPE, text=True) for _ in range(4)]
    time.sleep(1.0)
    go.touch()
    errors = [process.communicate(timeout=30)[1] for process in processes]

    assert [process.returncode for process in processes] == [0] * 4, errors
    assert _applied(url) == [(n, name) for n, (name, _) in enumerate(schema.MIGRATIONS, 1)]
    pg_server.drop(url)


def test_reading_an_empty_database_creates_nothing(pg_server):
    url = pg_server.create(migrated=False)
    with pytest.raises(DatabaseNotFound, match="no wfctl database at postgresql://"):
        open_store(url, create=False)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone()[0] == 0
    pg_server.drop(url)


def test_a_database_with_tables_of_another_application_is_refused(pg_server):
    url = pg_server.create(migrated=False)
    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE instances (id integer)")
    with pytest.raises(DatabaseError, match=r"is not a wfctl database \(it has a table instances"):
        open_store(url)
    pg_server.drop(url)


def test_a_database_of_a_newer_wfctl_is_refused(pg_url):
    with psycopg.connect(pg_url) as conn:
        conn.execute(f"INSERT INTO {schema.MIGRATIONS_TABLE} (version, name) "
                     "VALUES (99, 'p099_from_the_future')")
    with pytest.raises(DatabaseTooNew) as caught:
        open_store(pg_url)
    assert (caught.value.schema, caught.value.known) == (len(schema.MIGRATIONS) + 1,
                                                          len(schema.MIGRATIONS))


def test_history_on_postgresql_is_append_only_while_its_instance_stands(pg_url):
    with psycopg.connect(pg_url) as conn:
        conn.execute("INSERT INTO definitions VALUES ('d', 'wf.yaml', '', now())")
        conn.execute("INSERT INTO instances (workflow_instance_id, workflow_type, "
                     "definitions_digest, status, current_run_id, run_count, child_policy, "
                     "created_at, updated_at, instance_key) "
                     "VALUES ('i1', 't', 'd', 'completed', 'r1', 1, 'abandon', now(), now(), 1)")
        conn.execute("INSERT INTO events VALUES (1, 1, 1, 1, 0, '[]')")
        conn.commit()
        for statement in ("UPDATE events SET seq = 2", "DELETE FROM events", "TRUNCATE events"):
            with pytest.raises(psycopg.errors.RaiseException, match="history is append-only"):
                conn.execute(statement)
            conn.rollback()
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 1
        # Pruning deletes the instance first, and then its history may go.
        conn.execute("DELETE FROM instances")
        assert conn.execute("DELETE FROM events").rowcount == 1


def test_deadlines_on_postgresql_follow_the_servers_clock_not_this_hosts(tmp_path, pg_url,
                                                                         monkeypatch):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(ETL))
    from wfctl import clock

    host_now = clock.now
    monkeypatch.setattr(clock, "now", lambda: host_now() + timedelta(minutes=2))

    with Client(pg_url, tmp_path / "workflows.yaml") as client:
        started = client.start("etl", "s1", execution_timeout="1h")
        with psycopg.connect(pg_url) as conn:
            server = conn.execute("SELECT clock_timestamp()").fetchone()[0]

    deadline = started["execution_deadline_at"]
    assert abs(deadline - timedelta(hours=1) - server) < timedelta(seconds=5)


def test_a_workers_pool_holds_a_connection_for_each_slot_and_loop(pg_url):
    from wfctl.engine import Engine
    from wfctl.worker import WorkerOptions
    from wfctl.worker.process import OTHER_CONNECTIONS, Worker

    store = open_store(pg_url)
    try:
        with store.read():
            pass
        Worker(Engine(store), WorkerOptions(concurrency=24))
        # Twenty-four heartbeating slots and the loops never wait for a connection.
        assert store._connections().max_size == 24 + OTHER_CONNECTIONS
    finally:
        store.close()


def _rows_read(plan: dict[str, Any], table: str) -> int:
    """Rows the plan's scans of `table` returned, over every loop."""
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1) \
        if plan.get("Relation Name") == table else 0
    return own + sum(_rows_read(child, table) for child in plan.get("Plans", ()))


def _deadline_reads(plan: dict[str, Any]) -> list[tuple[str | None, int]]:
    """The plan's scans of `activities` that compare a deadline: the index each went through
    (None for a scan of the table) and the rows it returned."""
    condition = plan.get("Index Cond", "") + plan.get("Filter", "")
    own = [(plan.get("Index Name"), plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1))] \
        if plan.get("Relation Name") == "activities" and "deadline_at" in condition else []
    return own + [read for child in plan.get("Plans", ()) for read in _deadline_reads(child)]


def etl_started(tmp_path: Path, pg_url: str, definitions: str = ETL) -> tuple[Client, Clock]:
    """A client of 300 `etl` workflows whose first activities wait to be claimed."""
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(definitions))
    clock = Clock()
    client = Client(pg_url, tmp_path / "workflows.yaml", clock_now=clock)
    for n in range(300):
        client.start("etl", f"e{n:03d}")
    process_workflow_tasks(client.engine, "w1", clock())
    return client, clock


def plan_of_query(monkeypatch, pg_url: str, read: Callable[[], Any],
                  marked: str = "") -> dict[str, Any]:
    """The executed plan (EXPLAIN ANALYZE) of the first query `read()` runs (containing
    `marked`), run again on a connection of its own."""
    statements: list[tuple[str, Any]] = []
    tuples = postgres.PostgresTx._tuples
    with monkeypatch.context() as patch:
        patch.setattr(postgres.PostgresTx, "_tuples", lambda tx, sql, params=None: (
            statements.append((sql, params)), tuples(tx, sql, params))[1])
        read()
    sql, params = next((s, p) for s, p in statements if marked in s)
    with psycopg.connect(pg_url) as conn:
        return conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params).fetchone()[0][0]


def test_a_claim_reads_the_oldest_ready_activity_not_every_ready_one(tmp_path, pg_url,
                                                                      monkeypatch):
    client, clock = etl_started(tmp_path, pg_url)
    try:
        found = []

        def claim() -> None:
            with client.engine.store.write() as tx:
                found.append(tx.next_ready_activity(["default"], iso(clock())))

        # A fresh database, no statistics yet (as the planner finds a new one).
        plan = plan_of_query(monkeypatch, pg_url, claim, "FOR UPDATE SKIP LOCKED")
        assert found[0] is not None and found[0].workflow_instance_id == "e000"
        # 300 activities are ready: the claim takes the first in the ready index's order.
        assert _rows_read(plan["Plan"], "activities") == 1
    finally:
        client.close()


def test_an_expiry_scan_reads_the_started_attempts_not_every_activity(tmp_path, pg_url,
                                                                      monkeypatch):
    client, clock = etl_started(tmp_path, pg_url, ETL.replace(
        "workflows:", "defaults:\n  activity:\n    start_to_close: 5m\nworkflows:", 1))
    try:
        for _ in range(3):
            assert client.engine.claim_activity("w1", ["default"], clock()) is not None
        later = clock() + timedelta(days=1)
        expired = []

        def expiry() -> None:
            with client.engine.store.read() as tx:
                expired.extend(tx.expired_activities(later, 100))

        # A fresh database, no statistics yet.
        plan = plan_of_query(monkeypatch, pg_url, expiry)
        # The three started attempts, past their start-to-close timeout a day later.
        assert len(expired) == 3
        # 297 activities wait, 3 started: each deadline is read through an index that holds the
        # activities it can pass for (the started ones' two through the owner index), never
        # by a scan of every activity.
        reads = _deadline_reads(plan["Plan"])
        assert len(reads) == 4 and all(index for index, _ in reads), plan
        assert sum(rows for _, rows in reads) == 3, plan
        with psycopg.connect(pg_url) as conn:
            indexes = {name for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'activities'")}
        assert indexes == {"activities_pkey", "activities_ready", "activities_schedule_deadline",
                           "activities_total_deadline", "activities_owner", "activities_step"}
    finally:
        client.close()


def _generic_plan(conn: psycopg.Connection, sql: str, params: dict[str, str]) -> dict[str, Any]:
    """The executed generic plan (as write transactions run their statements) of `sql`, its
    named parameters given as SQL literals."""
    names: list[str] = []

    def numbered(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    prepared = re.sub(r"%\((\w+)\)[sb]", numbered, sql)
    conn.execute(f"PREPARE planned AS {prepared}")
    try:
        return conn.cursor(row_factory=tuple_row).execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE planned("
            + ", ".join(params[name] for name in names) + ")").fetchone()[0][0]["Plan"]
    finally:
        conn.execute("DEALLOCATE planned")


def _scans(plan: dict[str, Any], tables: set[str]) -> list[tuple[str, str, str | None]]:
    """The plan's scans of `tables`: each one's table, node type and index."""
    own = [(plan["Relation Name"], plan["Node Type"], plan.get("Index Name"))] \
        if plan.get("Relation Name") in tables and "Scan" in plan["Node Type"] else []
    return own + [scan for child in plan.get("Plans", ()) for scan in _scans(child, tables)]


def test_a_batchs_locks_run_reads_and_closes_look_each_row_up_by_its_key(tmp_path, pg_url):
    """The statements of a batch's first round trip name their rows by arrays of keys. Under
    the generic plans of write transactions, on a database whose tables are small and not
    analyzed yet (where a plan of `= ANY(array)`, or of a join with the array, reads every row)
    and whose index of started attempts holds entries of attempts closed since: the family
    locks, the runs' read and the closes (a batch's, and a close alone) find each row by its
    primary key."""
    client, clock = etl_started(tmp_path, pg_url)
    try:
        for _ in range(100):
            task = client.engine.claim_activity("w1", ["default"], clock())
            assert client.engine.complete_activity(task, None, clock()) is None
        started = [client.engine.claim_activity("w1", ["default"], clock()) for _ in range(3)]

        def literal(values: list[Any], kind: str) -> str:
            return "'{" + ",".join(str(value) for value in values) + "}'::" + kind + "[]"

        closes, kinds = postgres._closes_statement(("status", "closed_at", "owner"), 3)
        columns = [[task.activity_id for task in started], [task.attempt for task in started],
                   ["w1"] * 3, ["completed"] * 3, [iso(clock())] * 3, ["NULL"] * 3]
        statements = {
            "instances": (postgres._LOCK_FAMILIES, {
                "top": "0",
                "ids": literal([task.workflow_instance_id for task in started], "text")}),
            "runs": (postgres._GET_RUNS.replace("%b", "%(ids)b"),
                     {"ids": literal([task.workflow_run_id for task in started], "text")}),
            "activities": (closes, {
                "now": f"'{iso(clock())}'::timestamptz", "started": "'started'",
                **{f"c{n}": literal(column, kind)
                   for n, (column, kind) in enumerate(zip(columns, kinds, strict=True))}}),
        }
        # A close alone, as when its family is held already.
        statements["activity"] = (queries._close_attempt_statement(
            ("status", "closed_at", "owner"), postgres.PostgresTx._STARTED), {
            "status": "'completed'", "closed_at": "now()", "owner": "NULL", "started": "'started'",
            "activity_id": f"'{started[0].activity_id}'", "attempt": "1", "worker_id": "'w1'",
            "now": "now()"})
        with client.engine.store.write() as tx:
            tx._execute("SELECT 1")
            for table, (sql, params) in statements.items():
                plan = _generic_plan(tx.conn, sql, params)
                scans = _scans(plan, {"instances", "runs", "activities"})
                assert scans and all((kind, index) == ("Index Scan", f"{name}_pkey")
                                     for name, kind, index in scans), (table, scans)
                # (A close alone returns no rows.)
                assert plan["Actual Rows"] == (0 if table == "activity" else 3), (table, plan)
            tx.conn.rollback()
    finally:
        client.close()


def _indexes(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Every scan node of the plan: its type and index (a bitmap's index scan names no
    table)."""
    own = [(plan["Node Type"], plan.get("Index Name"))] if "Scan" in plan["Node Type"] else []
    return own + [scan for child in plan.get("Plans", ()) for scan in _indexes(child)]


def test_a_batchs_claims_read_the_ready_indexes_and_its_tasks_delete_finds_each_by_key(
        tmp_path, pg_url):
    """A batch's claims of ready workflow tasks and of ready activities read them in their
    ready index's order, up to their limit, and the tasks' delete finds each by its key, under
    the generic plans of write transactions on a database not analyzed yet (300 tasks decided
    and deleted before, 300 activities ready)."""
    client, _ = etl_started(tmp_path, pg_url)
    try:
        for n in range(5):
            client.start("etl", f"n{n}")
        with client.engine.store.write() as tx:
            tx._execute("SELECT 1")
            ids = [row["task_id"] for row in tx._all("SELECT task_id FROM workflow_tasks")]
            claim = _generic_plan(tx.conn, postgres._CLAIM_TASKS, {
                "now": "now() + interval '1 day'", "passed": "'{}'::bigint[]", "limit": "3"})
            delete = _generic_plan(tx.conn, postgres._TASKS_DELETE.replace("%b", "%(ids)b"), {
                "ids": "'{" + ",".join(map(str, ids[:3])) + "}'::bigint[]"})
            activities = _generic_plan(tx.conn, postgres._CLAIM_ACTIVITIES, {
                "queues": "'{default}'::text[]", "now": "now() + interval '1 day'",
                "passed": "'{}'::text[]", "limit": "3"})
            tx.conn.rollback()
    finally:
        client.close()
    assert len(ids) == 5 and claim["Actual Rows"] == 3
    assert _scans(claim, {"workflow_tasks", "instances"}) == [
        ("workflow_tasks", "Index Scan", "workflow_tasks_ready"),
        ("instances", "Index Scan", "instances_pkey")]
    assert activities["Actual Rows"] == 3
    assert _scans(activities, {"activities", "instances"}) == [
        ("activities", "Index Scan", "activities_ready"),
        ("instances", "Index Scan", "instances_pkey")]
    assert "Seq Scan" not in {kind for kind, _ in _indexes(delete)}
    assert {index for _, index in _indexes(delete)} - {None} == {"workflow_tasks_pkey"}


def test_an_idle_slots_look_for_the_next_attempt_takes_one_round_trip_and_leaves_no_transaction(
        tmp_path, pg_url):
    """The look for when the next attempt becomes available reads one statement: outside a
    transaction (`peek`) it begins its own, asks for generic plans and commits, all in the
    statement's round trip, and finds what a read transaction finds; the connection goes back
    to the pool with no transaction open. Inside a read transaction the setting goes with the
    statement."""
    client, clock = etl_started(tmp_path, pg_url)
    try:
        store = client.engine.store
        with store.read() as tx:
            expected = tx.next_activity_available_at(["default"])
        with round_trips() as taken:
            found = [store.peek().next_activity_available_at(["default"]) for _ in range(3)]
        with store.read() as tx, round_trips() as inside:
            tx.next_activity_available_at(["default"])
        with store._connections().connection() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SHOW plan_cache_mode").fetchone()["plan_cache_mode"] == "auto"
    finally:
        client.close()
    assert expected == clock() and found == [expected] * 3
    assert taken == ["COMMIT"] * 3 and inside == ["SELECT min(available_at)"]


def test_a_statement_of_closes_is_converted_once_by_psycopg():
    """psycopg keeps its conversion of a statement's text only for texts up to a length and a
    number of parameters; a statement of the most closes it makes, with the most fields a
    close sets, is within both."""
    from psycopg import _queries

    sql, _ = postgres._closes_statement(
        ("status", "closed_at", "owner", "last_heartbeat_details"), postgres._CLOSES_AT_ONCE)
    assert len(sql) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(set(re.findall(r"%\((\w+)\)", sql))) <= _queries.MAX_CACHED_STATEMENT_PARAMS


def test_a_batchs_merged_updates_find_each_row_by_its_key_in_a_table_of_a_few_thousand(
        tmp_path, pg_url):
    """Runs' updates merged into one statement (a column an array) join the array with the
    table: under the generic plans of write transactions, on wfctl's connections, a table of
    a few thousand rows is read by key, not all of it (the default cost of a random page,
    meant for spinning disks, reads all of it up to some ten thousand rows)."""
    client, _ = etl_started(tmp_path, pg_url)
    try:
        with client.engine.store.write() as tx:
            # 300 runs made 2,400, with the statistics of a table that size.
            tx._execute(
                "INSERT INTO runs SELECT (jsonb_populate_record(NULL::runs, to_jsonb(r) "
                "|| jsonb_build_object('workflow_run_id', r.workflow_run_id || '-' || g, "
                "'run_number', r.run_number + g))).* "
                "FROM runs r, generate_series(1, 7) g")
        with client.engine.store.write() as tx:
            tx._execute("ANALYZE runs")
            ids = [row["workflow_run_id"] for row in tx._all(
                "SELECT workflow_run_id FROM runs ORDER BY workflow_run_id LIMIT 3")]
            sql, _ = postgres._rows_statement(
                "UPDATE runs SET step_index = %s WHERE workflow_run_id = %s")
            named = sql.replace("%b", "%(a0)b", 1).replace("%b", "%(a1)b", 1)
            plan = _generic_plan(tx.conn, named, {"a0": "'{1,1,1}'::bigint[]",
                                                  "a1": "'{" + ",".join(ids) + "}'::text[]"})
            assert _scans(plan, {"runs"}) == [("runs", "Index Scan", "runs_pkey")], plan
            assert tx._one("SHOW random_page_cost")["random_page_cost"] == "1.1"
    finally:
        client.close()


def test_a_random_page_is_costed_at_most_as_the_server_says_or_at_1_1(pg_url):
    """wfctl's sessions lower the cost of a random page to 1.1, never raise it: a database (or
    server) set lower keeps its own value."""
    def cost() -> str:
        store = open_store(pg_url)
        try:
            with store.read() as tx:
                return tx._one("SHOW random_page_cost")["random_page_cost"]
        finally:
            store.close()

    assert cost() == "1.1"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        name = conn.info.dbname
        conn.execute(f'ALTER DATABASE "{name}" SET random_page_cost = 0.9')
    assert cost() == "0.9"


def test_held_back_inserts_of_one_table_go_where_the_last_was_as_one_statement_of_arrays():
    """Row inserts held back for one round trip become one statement where the last of them
    was (so each row still follows whatever was held back before it), a column an array: one
    text whatever the rows; every other statement keeps its place."""
    insert = insert_statement("%s", "activities", ("activity_id", "attempt", "started_at"))
    one, two = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, 3, tzinfo=UTC)
    held = [("BEGIN", None), (insert, ["a", 1, one]), ("UPDATE runs x", [1]),
            (insert, ["b", 2, None]), ("UPDATE runs y", [2]), (insert, ["c", 3, two]),
            ("INSERT INTO events y", [3])]

    merged = postgres._merged_writes(held)

    sql = ("INSERT INTO activities (activity_id, attempt, started_at) "
           "SELECT * FROM unnest(%b::text[], %b::bigint[], %b::timestamptz[])")
    assert [statement for statement, _ in merged] == \
        ["BEGIN", "UPDATE runs x", "UPDATE runs y", sql, "INSERT INTO events y"]
    arrays = merged[3][1]
    assert [array.data for array in arrays] == [
        postgres_arrays.pack("text", ["a", "b", "c"]).data,
        postgres_arrays.pack("bigint", [1, 2, 3]).data,
        postgres_arrays.pack("timestamptz", [one, None, two]).data]
    assert postgres._merged_writes(held[:3]) == held[:3]


def test_held_back_updates_of_distinct_runs_go_where_the_last_was_as_one_statement():
    """Keyed run updates held back for one round trip, of one column list, become one
    statement where the last was, a column an array; none is merged where a run is written
    twice in what is held back, or by an update of another shape, since a merged update
    moves later than the other write."""
    update = queries._update_statement("%s", "runs", "workflow_run_id",
                                       ("step_index", "step_started"), "")
    held = [("BEGIN", None), (update, (1, 1, "r1")), ("INSERT INTO events x", [1]),
            (update, (2, 0, "r2")), ("COMMIT", None)]

    merged = postgres._merged_writes(held)

    sql = ("UPDATE runs SET step_index = u.step_index, step_started = u.step_started FROM "
           "unnest(%b::bigint[], %b::bigint[], %b::text[]) AS u(step_index, step_started, "
           "workflow_run_id) WHERE runs.workflow_run_id = u.workflow_run_id")
    assert [statement for statement, _ in merged] == \
        ["BEGIN", "INSERT INTO events x", sql, "COMMIT"]
    assert [array.data for array in merged[2][1]] == [
        postgres_arrays.pack("bigint", [1, 2]).data, postgres_arrays.pack("bigint", [1, 0]).data,
        postgres_arrays.pack("text", ["r1", "r2"]).data]
    closed = queries._update_statement("%s", "runs", "workflow_run_id", ("status",), "")
    twice = [*held[:4], (closed, ("completed", "r1")), held[4]]
    assert postgres._merged_writes(twice) == twice
    other = ("UPDATE runs SET status = %s WHERE workflow_run_id = %s AND status = %s",
             ("paused", "r3", "running"))
    assert postgres._merged_writes([*held[:2], other, *held[2:]]) == [*held[:2], other, *held[2:]]
    # An instance's key may spell a run's: the rows are told apart by their table.
    status = queries._update_statement("%s", "instances", "workflow_instance_id", ("status",), "")
    both = [*held[:4], (status, ("completed", "r1")), (status, ("completed", "r2")), held[4]]
    assert [statement[:24] for statement, _ in postgres._merged_writes(both)] == \
        ["BEGIN", "INSERT INTO events x", sql[:24], "UPDATE instances SET sta", "COMMIT"]
