"""A database written by wfctl 0.1 opens with today's code, and every workflow in it goes on.

tests/data/v01.db was made by tests/data/make_v01_db.py on wfctl 0.1, between 11:00 and 11:20 on
2026-04-12, with the definitions and handlers in tests/data/v01/. Each test opens a copy and
drives it from 12:00 (conftest's T0) at explicit instants, as a worker that starts after the
upgrade would. tests/data/v01/expected.json holds what 0.1 showed of every instance.
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import T0, Clock, Env, printed
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.errors import NotFound
from wfctl.store import SQLiteStore as Store

DATA = Path(__file__).parent / "data"
DEFINITIONS = DATA / "v01" / "workflows.yaml"
SHOWN_BY_01 = json.loads((DATA / "v01" / "expected.json").read_text())
# Fields `describe` has gained since 0.1 (added, never changed): compared without them.
ADDED_TO_RUN = ("stop_reason",)
ADDED = ("retry_policy", "workflow_retry", "pending_signals", "deadline_held_while")


def as_01_showed(doc: dict) -> dict:
    """A describe document without the fields added since 0.1."""
    run = {key: value for key, value in doc["run"].items() if key not in ADDED_TO_RUN}
    return {**{key: value for key, value in doc.items() if key not in ADDED}, "run": run}
CLOSED = ("completed", "cancelled", "terminated", "failed", "timed-out")


def when(time: str) -> datetime:
    """An instant on the file's day: when("13:08:01"), when("13:08:00.999")."""
    return datetime.fromisoformat(f"2026-04-12T{time}+00:00")


@pytest.fixture
def v01(tmp_path: Path) -> Iterator[Env]:
    """A copy of the 0.1 database, opened by today's code (opening applies any migration)."""
    db = tmp_path / "wfctl.db"
    shutil.copyfile(DATA / "v01.db", db)
    clock = Clock(T0)
    client = Client(db, DEFINITIONS, clock_now=clock)
    client.definitions()  # v01_handlers, beside the definitions, becomes importable
    env = Env(tmp_path, client, clock)
    env.engine  # noqa: B018 - the store opens (and migrates) here, before any test reads it
    yield env
    client.close()


def run(env: Env, time: str) -> bool:
    """One worker pass at that instant: timeouts, lost workers, timers, then every ready task."""
    env.worker_clock.now = when(time)
    return env.worker.run_once(env.worker_clock.now)


def at(env: Env, time: str) -> Client:
    """The client, its clock set to that instant."""
    env.clock.now = when(time)
    return env.client


def status(env: Env, instance_id: str) -> str:
    return env.describe(instance_id)["status"]


def activities(env: Env, instance_id: str) -> list[tuple[str, str, int]]:
    return [(a["step"], a["status"], a["attempt"])
            for a in env.describe(instance_id)["activities"]]


def new_event_types(env: Env, instance_id: str) -> list[str]:
    """The events appended since 0.1 wrote the file."""
    before = len(SHOWN_BY_01["instances"][instance_id]["history"])
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


def test_the_schema_after_opening_is_that_of_a_fresh_database(v01, tmp_path):
    Store(tmp_path / "fresh.db").close()

    upgraded, fresh = schema(tmp_path / "wfctl.db"), schema(tmp_path / "fresh.db")

    assert upgraded == fresh
    assert {name for kind, name, _ in fresh["objects"] if kind == "table"} >= {
        "definitions", "instances", "runs", "workflow_tasks", "activities", "timers", "signals",
        "children", "failures", "workers", "events"}


def test_every_instance_lists_describes_and_reads_as_0_1_showed_it(v01):
    listed = printed(v01.client.list(limit=100))
    # 0.1's nearest deadline counted only the workflow's own three; today's counts the open
    # work's too, and not a deadline held while the instance waits or is paused.
    assert [{**row, "nearest_deadline": None} for row in listed] == \
        [{**row, "nearest_deadline": None} for row in SHOWN_BY_01["list"]]
    for row, before in zip(listed, SHOWN_BY_01["list"], strict=True):
        old, new = before["nearest_deadline"], row["nearest_deadline"]
        if old is not None and (old["kind"] != "deadline" or row["status"] == "running"):
            assert new is not None and new["at"] <= old["at"], row
    for instance_id, shown in SHOWN_BY_01["instances"].items():
        assert as_01_showed(printed(v01.describe(instance_id))) == shown["describe"], instance_id
        assert printed(v01.history(instance_id, all_runs=True)) == shown["history"], instance_id


def test_closed_instances_describe_as_before_on_the_command_line(v01, tmp_path):
    runner = CliRunner()
    for instance_id in CLOSED:
        for command, key in ((["describe"], "describe"), (["history", "--all-runs"], "history")):
            result = runner.invoke(app, ["--db", str(tmp_path / "wfctl.db"), "-w",
                                         str(DEFINITIONS), *command, instance_id, "--json"])
            assert result.exit_code == 0, result.stderr
            shown = json.loads(result.stdout)
            if key == "describe":
                shown = as_01_showed(shown)
            assert shown == SHOWN_BY_01["instances"][instance_id][key]


# Running mid-activity


def test_an_attempt_held_by_a_lost_worker_is_retried_and_resumes_from_its_heartbeat(v01):
    run(v01, "12:00:00")

    assert activities(v01, "lost-attempt") == [("fetch", "retry_scheduled", 2)]
    retry = v01.events("lost-attempt", "ActivityRetryScheduled")[-1]["attributes"]
    assert retry["reason"] == "worker_lost"
    assert retry["failure"]["exception_class"] == "WorkerLost"
    assert retry["retry_available_at"] == when("12:01:00")

    run(v01, "12:01:00")

    doc = v01.describe("lost-attempt")
    assert doc["status"] == "completed"
    assert doc["state"] == {"rows": 250, "resumed_from": 120, "fetch_attempt": 2, "stored": 250}
    assert new_event_types(v01, "lost-attempt") == [
        "ActivityRetryScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "WorkflowCompleted",
    ]


def test_a_workflow_task_held_by_a_lost_worker_is_scheduled_again_and_decided(v01):
    run(v01, "12:00:00")

    reasons = [e["attributes"]["reason"]
               for e in v01.events("lost-decision", "WorkflowTaskScheduled")]
    assert reasons[:2] == ["started", "worker_lost"]
    assert status(v01, "lost-decision") == "completed"
    assert activities(v01, "lost-decision") == [("fetch", "completed", 1), ("store", "completed", 1)]


def test_a_scheduled_activity_and_an_undecided_start_run_to_completion(v01):
    run(v01, "12:00:00")

    for instance_id in ("queued", "fresh"):
        assert status(v01, instance_id) == "completed"
        assert activities(v01, instance_id) == [("fetch", "completed", 1),
                                                ("store", "completed", 1)]
    assert new_event_types(v01, "queued")[:2] == ["ActivityStarted", "ActivityCompleted"]
    assert new_event_types(v01, "fresh")[:3] == [
        "WorkflowTaskStarted", "WorkflowTaskCompleted", "ActivityScheduled"]


def test_an_activity_waiting_for_its_backoff_runs_at_its_retry_instant(v01):
    run(v01, "12:12:00.999")
    assert activities(v01, "backoff") == [("fail_first", "retry_scheduled", 2)]

    run(v01, "12:12:01")

    doc = v01.describe("backoff")
    assert doc["status"] == "completed"
    assert doc["state"] == {"succeeded_on": 2}
    assert new_event_types(v01, "backoff")[:2] == ["ActivityStarted", "ActivityCompleted"]


# Waiting: on a signal, on a timer, on a child


def test_a_signal_wait_completes_on_its_signal(v01):
    delivered = at(v01, "12:00:00").signal("waiting-signal", "approved", {"by": "ops"})
    assert delivered["buffered"] is False

    run(v01, "12:00:01")

    doc = v01.describe("waiting-signal")
    assert doc["status"] == "completed"
    assert doc["state"] == {"by": "ops", "published": True}


def test_a_signal_wait_with_a_timeout_fails_at_its_instant(v01):
    run(v01, "13:07:00.999")
    assert status(v01, "signal-timeout") == "waiting"

    run(v01, "13:07:01")

    doc = v01.describe("signal-timeout")
    assert doc["status"] == "failed"
    assert doc["failure"]["timeout_kind"] == "signal_wait"
    assert doc["failure"]["deadline_at"] == when("13:07:01")
    assert new_event_types(v01, "signal-timeout") == [
        "TimerFired", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "WorkflowFailed",
    ]


def test_a_timer_fires_at_its_instant_and_the_workflow_completes(v01):
    run(v01, "13:08:00.999")
    assert v01.describe("timer")["timers"][0]["status"] == "scheduled"

    run(v01, "13:08:01")

    doc = v01.describe("timer")
    assert doc["status"] == "completed"
    assert doc["timers"][0]["status"] == "fired"
    assert doc["state"] == {"rows": 100, "resumed_from": 0, "fetch_attempt": 1, "stored": 100}
    assert new_event_types(v01, "timer")[0] == "TimerFired"


def test_a_parent_completes_after_its_running_child(v01):
    [child] = [c["workflow_instance_id"] for c in v01.describe("parent")["children"]]

    run(v01, "12:00:00")

    assert status(v01, child) == "completed"
    doc = v01.describe("parent")
    assert doc["status"] == "completed"
    assert doc["state"]["import"] == {"rows": 100, "resumed_from": 0, "fetch_attempt": 1,
                                      "stored": 100}
    assert doc["state"]["summary"] == "imported 100 rows"
    assert new_event_types(v01, "parent")[0] == "ChildWorkflowCompleted"


def test_a_buffered_signal_is_consumed_when_its_wait_opens(v01):
    run(v01, "12:00:00")

    doc = v01.describe("buffered")
    assert doc["status"] == "completed"
    assert doc["state"] == {"prepared": True, "approved_by": "ops", "published": True}
    received = v01.events("buffered", "SignalReceived")
    assert [e["attributes"]["buffered"] for e in received] == [True]


# Paused, failed, timed out


def test_a_paused_workflow_resumes_and_keeps_its_finished_activity(v01):
    run(v01, "12:00:00")
    assert status(v01, "paused") == "paused"
    assert activities(v01, "paused") == [("fetch", "completed", 1)]

    assert at(v01, "12:00:01").resume("paused")["status"] == "running"
    run(v01, "12:00:02")

    assert status(v01, "paused") == "completed"
    assert activities(v01, "paused") == [("fetch", "completed", 1), ("store", "completed", 1)]


def test_a_failed_workflow_is_retried_and_completes(v01):
    retried = at(v01, "12:00:00").retry("failed")
    assert (retried["step"], retried["deadline_change"]) == ("load", "kept")

    run(v01, "12:00:01")

    doc = v01.describe("failed")
    assert doc["status"] == "completed"
    assert [(a["status"], a["superseded"]) for a in doc["activities"]] == [
        ("failed", True), ("completed", False)]
    assert new_event_types(v01, "failed")[0] == "WorkflowRetried"


def test_a_run_timed_out_workflow_is_retried_and_completes_within_its_new_run_timeout(v01):
    retried = at(v01, "12:00:00").retry("timed-out")
    assert retried["retried"] is True
    assert v01.describe("timed-out")["run"]["run_deadline_at"] == when("12:01:00")

    at(v01, "12:00:30").signal("timed-out", "data_ready")
    run(v01, "12:00:31")

    assert status(v01, "timed-out") == "completed"
    timed_out = v01.events("timed-out", "WorkflowTimedOut")
    assert [e["attributes"]["timeout_kind"] for e in timed_out] == ["run_timeout"]


# Continue-as-new and deadlines


def test_continue_as_new_run_two_completes_with_run_count_two(v01):
    run(v01, "12:00:00")

    doc = v01.describe("continued")
    assert (doc["status"], doc["run_count"], doc["run"]["run_number"]) == ("completed", 2, 2)
    assert doc["state"] == {"until": 2, "polls": 2, "more": False}
    first = v01.describe("continued", run=1)
    assert first["run"]["status"] == "continued_as_new"
    assert doc["run"]["execution_deadline_at"] == first["run"]["execution_deadline_at"] \
        == datetime(2026, 5, 12, 11, 15, tzinfo=UTC)


def test_a_far_deadline_is_kept_and_does_not_fire(v01):
    assert at(v01, "13:09:01").check_deadlines() == []
    run(v01, "13:09:01")

    doc = v01.describe("far-deadline")
    assert doc["status"] == "completed"
    assert (doc["deadline_at"], doc["deadline_seconds"]) == \
        (datetime(2027, 2, 6, 11, 9, tzinfo=UTC), 300 * 86400)


def test_an_on_deadline_handler_runs_at_the_deadline(v01):
    escalations = importlib.import_module("v01_handlers").escalations
    escalations.clear()
    assert at(v01, "13:09:59.999").check_deadlines() == []
    assert status(v01, "on-deadline") == "running"

    failed = at(v01, "13:10:00").check_deadlines()

    assert [f["workflow_instance_id"] for f in failed] == ["on-deadline"]
    assert escalations == [{"ticket": "T-7"}]
    doc = v01.describe("on-deadline")
    assert doc["status"] == "failed"
    assert doc["deadline_at"] == doc["failure"]["deadline_at"] == when("13:10:00")
    assert new_event_types(v01, "on-deadline") == [
        "TimerCancelled", "WorkflowDeadlineExceeded", "WorkflowFailed"]


# Retry policies and retention, added since 0.1


def test_instances_of_0_1_have_no_retry_policy_and_are_kept_until_pruned_by_age(v01):
    docs = {instance_id: v01.describe(instance_id) for instance_id in SHOWN_BY_01["instances"]}
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
