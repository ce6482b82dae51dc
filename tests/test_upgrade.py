"""Databases written by wfctl 0.1 and 0.2 open with today's code, and every workflow in them goes on.

tests/data/v01.db was made by tests/data/make_v01_db.py on wfctl 0.1, and tests/data/v02.db by
make_v02_db.py on wfctl 0.2, between 11:00 and 11:20 on 2026-04-12, with the definitions and
handlers beside them (tests/data/v01/, tests/data/v02/); make_v02_db.py also wrote the same on
PostgreSQL, dumped as tests/data/v02-postgres.sql. All hold the same instances in the same states
(0.2's three more, of what 0.2 added). Each test opens a copy (a database restored from the dump)
and drives it from 12:00 (conftest's T0) at explicit instants, as a worker that starts after the
upgrade would; the tests of every database run on each. expected.json beside each holds what its
release showed of every instance.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import T0, Clock, Env, printed
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.errors import NotFound
from wfctl.store import SQLiteStore as Store

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Release:
    """A released wfctl whose database the tests open: its files, and what `describe` has
    gained since it (fields added, never changed: compared without them)."""

    name: str
    added: tuple[str, ...]
    added_to_run: tuple[str, ...] = ()
    # Written on PostgreSQL (its dump), else an SQLite file.
    postgres: bool = False

    @property
    def database(self) -> Path:
        return DATA / f"{self.name}.db"

    @property
    def definitions(self) -> Path:
        return DATA / self.name / "workflows.yaml"

    @property
    def handlers(self) -> str:
        return f"{self.name}_handlers"

    @property
    def shown(self) -> dict[str, Any]:
        return _shown(self.name)

    def as_showed(self, doc: dict) -> dict:
        """A describe document without the fields added since this release."""
        run = {key: value for key, value in doc["run"].items() if key not in self.added_to_run}
        return {**{key: value for key, value in doc.items() if key not in self.added},
                "run": run}


_SHOWN: dict[str, dict[str, Any]] = {}


def _shown(name: str) -> dict[str, Any]:
    if name not in _SHOWN:
        _SHOWN[name] = json.loads((DATA / name / "expected.json").read_text())
    return _SHOWN[name]


V01 = Release("v01", added=("retry_policy", "workflow_retry", "pending_signals",
                            "deadline_held_while"), added_to_run=("stop_reason",))
V02 = Release("v02", added=("pending_signals", "deadline_held_while"))
V02_POSTGRES = Release("v02", added=V02.added, postgres=True)
CLOSED = ("completed", "cancelled", "terminated", "failed", "timed-out")


class OldEnv(Env):
    """An Env over a copy of a released database."""

    release: Release


def _restored(server: Any) -> str:
    """A fresh PostgreSQL database holding what 0.2 wrote (psql's own lines, `\\restrict`, left
    out); its URL."""
    url = server.create(migrated=False)
    script = (DATA / "v02-postgres.sql").read_text()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("\n".join(line for line in script.splitlines()
                               if not line.startswith("\\")))
    return url


def _open(release: Release, tmp_path: Path, request: pytest.FixtureRequest) -> \
        Iterator[OldEnv]:
    """A copy of the release's database, opened by today's code (opening applies any
    migration)."""
    server = request.getfixturevalue("pg_server") if release.postgres else None
    if server is not None:
        db: Path | str = _restored(server)
    else:
        db = tmp_path / "wfctl.db"
        shutil.copyfile(release.database, db)
    clock = Clock(T0)
    client = Client(db, release.definitions, clock_now=clock)
    client.definitions()  # the handlers, beside the definitions, become importable
    env = OldEnv(tmp_path, client, clock)
    env.release = release
    env.engine  # noqa: B018 - the store opens (and migrates) here, before any test reads it
    yield env
    client.close()
    if server is not None:
        server.drop(str(db))


@pytest.fixture(params=[V01, V02, V02_POSTGRES], ids=["0.1", "0.2", "0.2-postgres"])
def old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldEnv]:
    """The database of each release in turn."""
    yield from _open(request.param, tmp_path, request)


@pytest.fixture(params=[V01, V02], ids=["0.1", "0.2"])
def old_file(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldEnv]:
    """The SQLite file of each release in turn."""
    yield from _open(request.param, tmp_path, request)


@pytest.fixture
def v01(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldEnv]:
    yield from _open(V01, tmp_path, request)


@pytest.fixture
def v02_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldEnv]:
    yield from _open(V02_POSTGRES, tmp_path, request)


@pytest.fixture(params=[V02, V02_POSTGRES], ids=["sqlite", "postgres"])
def v02(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldEnv]:
    """What 0.2 wrote, on each backend."""
    yield from _open(request.param, tmp_path, request)


def when(time: str) -> datetime:
    """An instant on the file's day: when("13:08:01"), when("13:08:00.999")."""
    return datetime.fromisoformat(f"2026-04-12T{time}+00:00")


def run(env: OldEnv, time: str) -> bool:
    """One worker pass at that instant: timeouts, lost workers, timers, then every ready task."""
    env.worker_clock.now = when(time)
    return env.worker.run_once(env.worker_clock.now)


def at(env: OldEnv, time: str) -> Client:
    """The client, its clock set to that instant."""
    env.clock.now = when(time)
    return env.client


def status(env: Env, instance_id: str) -> str:
    return env.describe(instance_id)["status"]


def activities(env: Env, instance_id: str) -> list[tuple[str, str, int]]:
    return [(a["step"], a["status"], a["attempt"])
            for a in env.describe(instance_id)["activities"]]


def new_event_types(env: OldEnv, instance_id: str) -> list[str]:
    """The events appended since the release wrote the file."""
    before = len(env.release.shown["instances"][instance_id]["history"])
    return env.event_types(instance_id, all_runs=True)[before:]


def schema(path: Path) -> dict[str, Any]:
    """Tables, columns, indexes and triggers as sqlite_master states them, and the migrations."""
    conn = sqlite3.connect(path)
    try:
        objects = {
            (kind, name, table): _normalised(sql)
            for kind, name, table, sql in conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master")
        }
        applied = conn.execute(
            "SELECT migration_set, name FROM _sqlite_migrations ORDER BY rowid").fetchall()
    finally:
        conn.close()
    return {"objects": objects, "migrations": applied}


def _normalised(sql: str | None) -> str | None:
    """The statement without quoting and layout, which say nothing about the schema."""
    if sql is None:
        return None
    sql = re.sub(r"[\"`\[\]]", "", " ".join(sql.split()))
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


# The file as a whole


def test_the_schema_after_opening_is_that_of_a_fresh_database(old_file, tmp_path):
    Store(tmp_path / "fresh.db").close()

    upgraded, fresh = schema(tmp_path / "wfctl.db"), schema(tmp_path / "fresh.db")

    assert upgraded == fresh
    assert {name for kind, name, _ in fresh["objects"] if kind == "table"} >= {
        "definitions", "instances", "runs", "workflow_tasks", "activities", "timers", "signals",
        "children", "failures", "workers", "events"}


def postgres_schema(url: str) -> dict[str, Any]:
    """Columns, indexes, constraints, triggers and functions of a PostgreSQL database, and its
    migrations."""
    with psycopg.connect(url, autocommit=True) as conn:
        def rows(sql: str) -> list[tuple]:
            return sorted(conn.execute(sql).fetchall())

        return {
            "columns": rows("SELECT table_name, column_name, data_type, is_nullable, "
                            "column_default, is_identity, collation_name "
                            "FROM information_schema.columns WHERE table_schema = 'public'"),
            "indexes": rows("SELECT indexname, indexdef FROM pg_indexes "
                            "WHERE schemaname = 'public'"),
            "constraints": rows("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                                "WHERE connamespace = 'public'::regnamespace"),
            "triggers": rows("SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
                             "WHERE NOT tgisinternal"),
            "functions": rows("SELECT proname, prosrc FROM pg_proc "
                              "WHERE pronamespace = 'public'::regnamespace"),
            "migrations": rows("SELECT version, name FROM wfctl_migrations"),
        }


def test_the_schema_of_what_0_2_wrote_on_postgres_is_that_of_a_fresh_database(v02_postgres,
                                                                              pg_server):
    fresh = pg_server.create()
    try:
        assert postgres_schema(v02_postgres.db) == postgres_schema(fresh)
    finally:
        pg_server.drop(fresh)


def test_every_instance_lists_describes_and_reads_as_its_release_showed_it(old):
    shown_by = old.release.shown
    listed = printed(old.client.list(limit=100))
    # 0.1's nearest deadline counted only the workflow's own three; today's counts the open
    # work's too, and not a deadline held while the instance waits or is paused.
    assert [{**row, "nearest_deadline": None} for row in listed] == \
        [{**row, "nearest_deadline": None} for row in shown_by["list"]]
    for row, before in zip(listed, shown_by["list"], strict=True):
        then, now = before["nearest_deadline"], row["nearest_deadline"]
        if then is not None and (then["kind"] != "deadline" or row["status"] == "running"):
            assert now is not None and now["at"] <= then["at"], row
    for instance_id, shown in shown_by["instances"].items():
        assert old.release.as_showed(printed(old.describe(instance_id))) == shown["describe"], \
            instance_id
        assert printed(old.history(instance_id, all_runs=True)) == shown["history"], instance_id


def test_closed_instances_describe_as_before_on_the_command_line(old, tmp_path):
    runner = CliRunner()
    for instance_id in CLOSED:
        for command, key in ((["describe"], "describe"), (["history", "--all-runs"], "history")):
            result = runner.invoke(app, ["--db", str(old.db), "-w",
                                         str(old.release.definitions), *command, instance_id,
                                         "--json"])
            assert result.exit_code == 0, result.stderr
            shown = json.loads(result.stdout)
            if key == "describe":
                shown = old.release.as_showed(shown)
            assert shown == old.release.shown["instances"][instance_id][key]


# Running mid-activity


def test_an_attempt_held_by_a_lost_worker_is_retried_and_resumes_from_its_heartbeat(old):
    run(old, "12:00:00")

    assert activities(old, "lost-attempt") == [("fetch", "retry_scheduled", 2)]
    retry = old.events("lost-attempt", "ActivityRetryScheduled")[-1]["attributes"]
    assert retry["reason"] == "worker_lost"
    assert retry["failure"]["exception_class"] == "WorkerLost"
    assert retry["retry_available_at"] == when("12:01:00")

    run(old, "12:01:00")

    doc = old.describe("lost-attempt")
    assert doc["status"] == "completed"
    assert doc["state"] == {"rows": 250, "resumed_from": 120, "fetch_attempt": 2, "stored": 250}
    assert new_event_types(old, "lost-attempt") == [
        "ActivityRetryScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "WorkflowCompleted",
    ]


def test_a_workflow_task_held_by_a_lost_worker_is_scheduled_again_and_decided(old):
    run(old, "12:00:00")

    reasons = [e["attributes"]["reason"]
               for e in old.events("lost-decision", "WorkflowTaskScheduled")]
    assert reasons[:2] == ["started", "worker_lost"]
    assert status(old, "lost-decision") == "completed"
    assert activities(old, "lost-decision") == [("fetch", "completed", 1), ("store", "completed", 1)]


def test_a_scheduled_activity_and_an_undecided_start_run_to_completion(old):
    run(old, "12:00:00")

    for instance_id in ("queued", "fresh"):
        assert status(old, instance_id) == "completed"
        assert activities(old, instance_id) == [("fetch", "completed", 1),
                                                ("store", "completed", 1)]
    assert new_event_types(old, "queued")[:2] == ["ActivityStarted", "ActivityCompleted"]
    assert new_event_types(old, "fresh")[:3] == [
        "WorkflowTaskStarted", "WorkflowTaskCompleted", "ActivityScheduled"]


def test_an_activity_waiting_for_its_backoff_runs_at_its_retry_instant(old):
    run(old, "12:12:00.999")
    assert activities(old, "backoff") == [("fail_first", "retry_scheduled", 2)]

    run(old, "12:12:01")

    doc = old.describe("backoff")
    assert doc["status"] == "completed"
    assert doc["state"] == {"succeeded_on": 2}
    assert new_event_types(old, "backoff")[:2] == ["ActivityStarted", "ActivityCompleted"]


# Waiting: on a signal, on a timer, on a child


def test_a_signal_wait_completes_on_its_signal(old):
    delivered = at(old, "12:00:00").signal("waiting-signal", "approved", {"by": "ops"})
    assert delivered["buffered"] is False

    run(old, "12:00:01")

    doc = old.describe("waiting-signal")
    assert doc["status"] == "completed"
    assert doc["state"] == {"by": "ops", "published": True}


def test_a_signal_wait_with_a_timeout_fails_at_its_instant(old):
    run(old, "13:07:00.999")
    assert status(old, "signal-timeout") == "waiting"

    run(old, "13:07:01")

    doc = old.describe("signal-timeout")
    assert doc["status"] == "failed"
    assert doc["failure"]["timeout_kind"] == "signal_wait"
    assert doc["failure"]["deadline_at"] == when("13:07:01")
    assert new_event_types(old, "signal-timeout") == [
        "TimerFired", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "WorkflowFailed",
    ]


def test_a_timer_fires_at_its_instant_and_the_workflow_completes(old):
    run(old, "13:08:00.999")
    assert old.describe("timer")["timers"][0]["status"] == "scheduled"

    run(old, "13:08:01")

    doc = old.describe("timer")
    assert doc["status"] == "completed"
    assert doc["timers"][0]["status"] == "fired"
    assert doc["state"] == {"rows": 100, "resumed_from": 0, "fetch_attempt": 1, "stored": 100}
    assert new_event_types(old, "timer")[0] == "TimerFired"


def test_a_parent_completes_after_its_running_child(old):
    [child] = [c["workflow_instance_id"] for c in old.describe("parent")["children"]]

    run(old, "12:00:00")

    assert status(old, child) == "completed"
    doc = old.describe("parent")
    assert doc["status"] == "completed"
    assert doc["state"]["import"] == {"rows": 100, "resumed_from": 0, "fetch_attempt": 1,
                                      "stored": 100}
    assert doc["state"]["summary"] == "imported 100 rows"
    assert new_event_types(old, "parent")[0] == "ChildWorkflowCompleted"


def test_a_buffered_signal_is_consumed_when_its_wait_opens(old):
    run(old, "12:00:00")

    doc = old.describe("buffered")
    assert doc["status"] == "completed"
    assert doc["state"] == {"prepared": True, "approved_by": "ops", "published": True}
    received = old.events("buffered", "SignalReceived")
    assert [e["attributes"]["buffered"] for e in received] == [True]


# Paused, failed, timed out


def test_a_paused_workflow_resumes_and_keeps_its_finished_activity(old):
    run(old, "12:00:00")
    assert status(old, "paused") == "paused"
    assert activities(old, "paused") == [("fetch", "completed", 1)]

    assert at(old, "12:00:01").resume("paused")["status"] == "running"
    run(old, "12:00:02")

    assert status(old, "paused") == "completed"
    assert activities(old, "paused") == [("fetch", "completed", 1), ("store", "completed", 1)]


def test_a_failed_workflow_is_retried_and_completes(old):
    retried = at(old, "12:00:00").retry("failed")
    assert (retried["step"], retried["deadline_change"]) == ("load", "kept")

    run(old, "12:00:01")

    doc = old.describe("failed")
    assert doc["status"] == "completed"
    assert [(a["status"], a["superseded"]) for a in doc["activities"]] == [
        ("failed", True), ("completed", False)]
    assert new_event_types(old, "failed")[0] == "WorkflowRetried"


def test_a_run_timed_out_workflow_is_retried_and_completes_within_its_new_run_timeout(old):
    retried = at(old, "12:00:00").retry("timed-out")
    assert retried["retried"] is True
    assert old.describe("timed-out")["run"]["run_deadline_at"] == when("12:01:00")

    at(old, "12:00:30").signal("timed-out", "data_ready")
    run(old, "12:00:31")

    assert status(old, "timed-out") == "completed"
    timed_out = old.events("timed-out", "WorkflowTimedOut")
    assert [e["attributes"]["timeout_kind"] for e in timed_out] == ["run_timeout"]


# Continue-as-new and deadlines


def test_continue_as_new_run_two_completes_with_run_count_two(old):
    run(old, "12:00:00")

    doc = old.describe("continued")
    assert (doc["status"], doc["run_count"], doc["run"]["run_number"]) == ("completed", 2, 2)
    assert doc["state"] == {"until": 2, "polls": 2, "more": False}
    first = old.describe("continued", run=1)
    assert first["run"]["status"] == "continued_as_new"
    assert doc["run"]["execution_deadline_at"] == first["run"]["execution_deadline_at"] \
        == datetime(2026, 5, 12, 11, 15, tzinfo=UTC)


def test_a_far_deadline_is_kept_and_does_not_fire(old):
    assert at(old, "13:09:01").check_deadlines() == []
    run(old, "13:09:01")

    doc = old.describe("far-deadline")
    assert doc["status"] == "completed"
    assert (doc["deadline_at"], doc["deadline_seconds"]) == \
        (datetime(2027, 2, 6, 11, 9, tzinfo=UTC), 300 * 86400)


def test_an_on_deadline_handler_runs_at_the_deadline(old):
    escalations = importlib.import_module(old.release.handlers).escalations
    escalations.clear()
    assert at(old, "13:09:59.999").check_deadlines() == []
    assert status(old, "on-deadline") == "running"

    failed = at(old, "13:10:00").check_deadlines()

    assert [f["workflow_instance_id"] for f in failed] == ["on-deadline"]
    assert escalations == [{"ticket": "T-7"}]
    doc = old.describe("on-deadline")
    assert doc["status"] == "failed"
    assert doc["deadline_at"] == doc["failure"]["deadline_at"] == when("13:10:00")
    assert new_event_types(old, "on-deadline") == [
        "TimerCancelled", "WorkflowDeadlineExceeded", "WorkflowFailed"]


# Retry policies and retention, added since 0.1


def test_instances_of_0_1_have_no_retry_policy_and_are_kept_until_pruned_by_age(v01):
    docs = {instance_id: v01.describe(instance_id) for instance_id in V01.shown["instances"]}
    assert {(doc["retry_policy"], doc["workflow_retry"]) for doc in docs.values()} == \
        {(None, None)}

    assert at(v01, "13:00:00").prune()["instances"] == 0
    report = at(v01, "13:00:00").prune(older_than="30m")

    closed = sorted(i for i, doc in docs.items() if doc["closed_at"] is not None)
    assert sorted(closed) == ["cancelled", "completed", "failed", "terminated", "timed-out"]
    assert sorted(report["workflow_instance_ids"]) == closed
    for instance_id in closed:
        with pytest.raises(NotFound):
            v01.describe(instance_id)
    run(v01, "13:00:00")
    assert status(v01, "fresh") == "completed"


# What 0.2 added: a workflow retry policy, retention, parallel branches


def test_a_run_waiting_for_its_workflow_retry_starts_again_at_its_instant(v02):
    doc = v02.describe("retried")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("running", "retry")
    assert doc["workflow_retry"]["next_attempt_at"] == when("12:14:02")

    run(v02, "12:14:01.999")
    assert activities(v02, "retried") == [("load", "failed", 1)]

    run(v02, "12:14:02")

    doc = v02.describe("retried")
    assert doc["status"] == "completed"
    assert doc["state"] == {"loaded": True, "stored": 0}
    assert activities(v02, "retried") == [("load", "failed", 1), ("load", "completed", 1),
                                          ("store", "completed", 1)]
    assert doc["workflow_retry"]["attempt"] == 2


def test_an_instance_closed_with_a_retention_is_pruned_when_it_runs_out(v02):
    v02.clock.now = datetime(2026, 5, 12, 11, 14, 21, 999000, tzinfo=UTC)
    assert v02.client.prune()["instances"] == 0
    assert v02.describe("kept")["status"] == "completed"

    v02.clock.now = datetime(2026, 5, 12, 11, 14, 22, tzinfo=UTC)
    report = v02.client.prune()

    assert report["workflow_instance_ids"] == ["kept"]
    with pytest.raises(NotFound):
        v02.describe("kept")


def test_a_parallel_step_scheduled_by_0_2_runs_both_branches_and_goes_on(v02):
    run(v02, "12:00:00")

    doc = v02.describe("fanout")
    assert doc["status"] == "completed"
    assert sorted(activities(v02, "fanout")) == [("fetch", "completed", 1),
                                                 ("publish", "completed", 1),
                                                 ("store", "completed", 1)]
    # One slot runs the branches in the order they were scheduled: the store sees the rows.
    assert doc["state"] == {"rows": 100, "resumed_from": 0, "fetch_attempt": 1, "stored": 100,
                            "published": True}
