"""Retention and prune at explicit instants: which closed instances go and when, every row they
own going with them, what is never deleted, and how the work is cut into batches."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import psycopg
import pytest
import wfh
from conftest import at

from wfctl import Client
from wfctl.engine import prune as prune_module
from wfctl.engine.prune import PRUNE_YIELD, prune_batch
from wfctl.errors import Conflict, InvalidInput, NotFound
from wfctl.worker import housekeeping
from wfctl.worker.housekeeping import PRUNE_IDLE, Pruner

# Retention and prune on both backends (the tests that look into SQLite's own file and plans
# are marked sqlite_only).
pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
defaults:
  retention: 1h
workflows:
  quick:
    steps:
      - activity: wfh:mark
        name: only
  kept:
    retention: NONE
    steps:
      - activity: wfh:mark
        name: only
  signalled:
    steps:
      - wait_for_signal: go
      - activity: wfh:mark
        name: after
  parent:
    steps:
      - workflow: quick
      - wait_for_signal: go
  abandoning:
    steps:
      - workflow: signalled
  flaky:
    retry: {max_attempts: 2, backoff: [1m]}
    steps:
      - activity: wfh:fail_times
        max_attempts: 1
"""
# Every table that holds rows of an instance, and the column naming it.
OWNED = {
    "instances": "workflow_instance_id", "runs": "workflow_instance_id",
    "workflow_tasks": "workflow_instance_id", "activities": "workflow_instance_id",
    "timers": "workflow_instance_id", "signals": "workflow_instance_id",
    "failures": "workflow_instance_id", "children": "parent_instance_id",
}
# History is stored under an instance's integer key: remembered from the first look, so that
# events a pruned instance left behind would still be counted.
KEYS: dict[tuple[object, str], int] = {}


@pytest.fixture(autouse=True)
def _forget_calls() -> Iterator[None]:
    wfh.calls.clear()
    wfh.failing_calls.clear()
    yield
    wfh.calls.clear()
    wfh.failing_calls.clear()


@pytest.fixture
def env(make_env):
    return make_env(DEFINITIONS)


@contextmanager
def database(env) -> Iterator[Callable[[str, tuple], tuple]]:
    """query(sql, params) -> the first row, on the env's database itself (SQLite file or
    PostgreSQL), `?` marking a parameter."""
    if env.db.startswith("postgresql://"):
        with psycopg.connect(env.db) as conn:
            yield lambda sql, params: conn.execute(sql.replace("?", "%s"), params).fetchone()
        return
    conn = sqlite3.connect(env.folder / "wfctl.db")
    try:
        yield lambda sql, params: conn.execute(sql, params).fetchone()
    finally:
        conn.close()


def rows_of(env, instance_id: str) -> dict[str, int]:
    with database(env) as query:
        counts = {table: query(f"SELECT count(*) FROM {table} WHERE {column} = ?",
                               (instance_id,))[0]
                  for table, column in OWNED.items()}
        key = KEYS.get((env.folder, instance_id))
        if key is None:
            row = query("SELECT instance_key FROM instances WHERE workflow_instance_id = ?",
                        (instance_id,))
            key = KEYS[(env.folder, instance_id)] = row[0] if row else -1
        counts["events"] = query("SELECT count(*) FROM events WHERE instance_key = ?", (key,))[0]
        counts["children (as a child)"] = query(
            "SELECT count(*) FROM children WHERE child_instance_id = ?", (instance_id,))[0]
        return counts


def prune(env, now: float, **options) -> dict:
    env.clock.set(now)
    return env.client.prune(**options)


def completed(env, instance_id: str, at_seconds: float, workflow_type: str = "quick") -> None:
    env.start(workflow_type, instance_id, now=at_seconds)
    env.run(at_seconds)
    assert env.describe(instance_id)["status"] == "completed"


def gone(env, instance_id: str) -> bool:
    try:
        env.describe(instance_id)
    except NotFound:
        return True
    return False


def test_a_closed_instance_goes_once_its_retention_has_passed_since_it_closed(env):
    completed(env, "q1", 10)

    assert prune(env, 3609.999)["instances"] == 0
    assert not gone(env, "q1")
    report = prune(env, 3610)

    assert (report["instances"], report["workflow_instance_ids"]) == (1, ["q1"])
    assert gone(env, "q1")
    with pytest.raises(NotFound):
        env.history("q1")


def test_every_row_an_instance_owns_goes_with_it_and_no_other(env):
    completed(env, "q1", 0)
    completed(env, "k1", 0, "kept")
    kept_before = rows_of(env, "k1")
    before = rows_of(env, "q1")

    report = prune(env, 3600)

    assert set(rows_of(env, "q1").values()) == {0}
    assert rows_of(env, "k1") == kept_before
    assert report["rows"] == {
        "runs": 1, "activities": 1, "workflow_tasks": before["workflow_tasks"], "timers": 0,
        "signals": 0, "failures": 0, "children": 0, "events": before["events"]}


def test_a_type_without_retention_is_kept_unless_pruned_by_age(env):
    completed(env, "k1", 10, "kept")

    assert prune(env, 10**7)["instances"] == 0
    assert prune(env, 110, older_than="100s")["workflow_instance_ids"] == ["k1"]
    assert gone(env, "k1")


def test_older_than_takes_every_instance_closed_that_long_ago_whatever_its_retention(env):
    completed(env, "q1", 10)
    completed(env, "k1", 20, "kept")

    assert prune(env, 109.999, older_than="100s")["instances"] == 0
    assert prune(env, 110, older_than="100s")["workflow_instance_ids"] == ["q1"]
    assert prune(env, 120, older_than={"seconds": 100})["workflow_instance_ids"] == ["k1"]


def test_older_than_zero_takes_every_closed_instance(env):
    completed(env, "q1", 10)
    env.start("signalled", "s1", now=10)

    report = prune(env, 10, older_than=0)

    assert report["workflow_instance_ids"] == ["q1"]
    assert not gone(env, "s1")


def test_open_instances_are_never_deleted(env):
    env.start("signalled", "waiting", now=0)
    env.start("signalled", "paused", now=0)
    env.start("flaky", "backing_off", now=0)
    env.run(0)
    env.clock.set(1)
    env.client.pause("paused")
    assert env.describe("backing_off")["run"]["wait_kind"] == "retry"

    report = prune(env, 10**6, older_than=0)

    assert report["instances"] == 0
    for instance_id in ("waiting", "paused", "backing_off"):
        assert not gone(env, instance_id)


def test_a_closed_child_of_an_open_parent_is_kept_until_the_parent_closes(env):
    env.start("parent", "p1", now=0)
    env.run(0)
    child = env.describe("p1")["children"][0]["workflow_instance_id"]
    assert env.describe(child)["status"] == "completed"

    assert prune(env, 10**6, older_than=0)["instances"] == 0
    env.clock.set(10)
    env.client.signal("p1", "go")
    env.run(10)

    report = prune(env, 10**6, older_than=0)
    assert sorted(report["workflow_instance_ids"]) == sorted(["p1", child])
    assert report["rows"]["children"] == 1


def test_a_parent_goes_without_its_open_child_which_later_closes_alone(env):
    env.start("abandoning", "a1", now=0)
    env.run(0)
    child = env.describe("a1")["children"][0]["workflow_instance_id"]
    env.clock.set(1)
    env.client.terminate("a1")

    assert prune(env, 10, older_than=0)["workflow_instance_ids"] == ["a1"]
    assert rows_of(env, child)["children (as a child)"] == 0
    env.clock.set(20)
    env.client.signal(child, "go")
    env.run(20)

    assert env.describe(child)["status"] == "completed"
    assert env.describe(child)["parent_workflow_instance_id"] == "a1"


def test_a_pruned_id_can_be_started_again_with_a_history_of_its_own(env):
    completed(env, "q1", 0)
    prune(env, 3600)

    env.start("quick", "q1", now=4000)
    env.run(4000)

    doc = env.describe("q1")
    assert (doc["status"], doc["run_count"], doc["run"]["run_number"]) == ("completed", 1, 1)
    history = env.history("q1")
    assert history[0]["seq"] == 1 and history[0]["at"] == at(4000)
    assert all(event["at"] >= at(4000) for event in history)


def test_an_instance_reopened_by_retry_or_started_again_is_no_longer_due(env):
    env.start("flaky", "f1", now=0, input={"fail_times": 5})
    env.run(0)
    env.run(60)
    assert env.describe("f1")["status"] == "failed"
    completed(env, "q1", 0)
    env.start("quick", "q1", now=3000)
    env.clock.set(3000)
    env.client.retry("f1")

    assert prune(env, 10**6)["instances"] == 0


def test_a_dry_run_reports_what_would_go_and_deletes_nothing(env):
    completed(env, "q1", 0)
    completed(env, "q2", 0)
    before = rows_of(env, "q1")

    dry = prune(env, 3600, dry_run=True)

    assert rows_of(env, "q1") == before
    done = prune(env, 3600)
    assert (dry["dry_run"], done["dry_run"]) == (True, False)
    assert (dry["batches"], done["batches"]) == (0, 1)
    assert {k: v for k, v in dry.items() if k not in ("dry_run", "batches")} == \
        {k: v for k, v in done.items() if k not in ("dry_run", "batches")}


def test_the_report_names_the_first_ids_only(env, monkeypatch):
    monkeypatch.setattr(prune_module, "IDS_SHOWN", 2)
    for n in range(4):
        completed(env, f"q{n}", n)

    report = prune(env, 10**6)

    assert report["instances"] == 4
    assert report["workflow_instance_ids"] == ["q0", "q1"]


def test_a_batch_takes_instances_until_their_histories_reach_its_size(env):
    for n in range(5):
        completed(env, f"q{n}", n)
    events = len(env.history("q0"))
    # History rows: a transaction's events of a run share one.
    rows = rows_of(env, "q0")["events"] + rows_of(env, "q1")["events"]

    first = prune_batch(env.engine, at(10**6), events=2 * events)
    second = prune_batch(env.engine, at(10**6), events=2 * events + 1)

    assert first.instance_ids == ["q0", "q1"]
    assert first.rows["events"] == rows
    assert second.instance_ids == ["q2", "q3"]
    assert first.held_seconds > 0


def test_a_history_longer_than_a_batch_goes_a_batch_at_a_time_hidden_meanwhile(env):
    completed(env, "q1", 0)
    completed(env, "q2", 1)
    owned = sum(rows_of(env, "q1").values()) - 1     # all but its own row
    assert owned > 4

    batches = [prune_batch(env.engine, at(10**6), events=2)]
    assert batches[0].instance_ids == [] and sum(batches[0].rows.values()) == 2
    for action in (lambda: env.describe("q1"), lambda: env.history("q1"),
                   lambda: env.client.retry("q1")):
        with pytest.raises(NotFound):
            action()
    with pytest.raises(Conflict, match="cannot start q1 again yet: its closed instance is "
                                       "being pruned; try again in a moment"):
        env.start("quick", "q1", now=10)
    while not batches[-1].instance_ids:
        batches.append(prune_batch(env.engine, at(10**6), events=2))

    assert batches[-1].instance_ids == ["q1"]
    # Two rows a batch, and the instance's own row once nothing else is left.
    assert len(batches) == owned // 2 + 1
    assert all(sum(b.rows.values()) <= 2 + 1 for b in batches)
    assert sum(b.rows.get(t, 0) for b in batches for t in b.rows if t != "instances") == owned
    assert set(rows_of(env, "q1").values()) == {0}
    assert not gone(env, "q2")
    env.start("quick", "q1", now=20)
    assert env.describe("q1")["status"] == "running"


def test_a_batch_looks_at_a_bounded_number_of_instances(env, monkeypatch):
    monkeypatch.setattr(prune_module, "BATCH_INSTANCES", 3)
    for n in range(5):
        completed(env, f"q{n}", n)

    batches = [prune_batch(env.engine, at(10**6)).instance_ids for _ in range(3)]

    assert batches == [["q0", "q1", "q2"], ["q3", "q4"], []]


def test_prune_goes_on_batch_after_batch_until_nothing_is_due(env, monkeypatch):
    monkeypatch.setattr(prune_module, "BATCH_INSTANCES", 2)
    for n in range(5):
        completed(env, f"q{n}", n)

    report = prune(env, 10**6)

    assert (report["instances"], report["batches"]) == (5, 3)


def test_older_than_must_be_a_duration(env):
    with pytest.raises(InvalidInput, match="older_than: expected a duration"):
        prune(env, 0, older_than="NONE")
    with pytest.raises(InvalidInput, match="older_than: must not be negative"):
        prune(env, 0, older_than=-1)
    with pytest.raises(InvalidInput, match="dry_run and vacuum exclude each other"):
        prune(env, 0, dry_run=True, vacuum=True)


def test_the_pruner_deletes_a_batch_a_pass_and_gives_the_write_lock_back(env, monkeypatch):
    monkeypatch.setattr(prune_module, "BATCH_INSTANCES", 2)
    for n in range(3):
        completed(env, f"q{n}", n)
    completed(env, "later", 30)
    pruner = Pruner(env.worker.shared)

    began = time.monotonic()
    assert pruner.run_once(at(3602)) is True
    batch_took = time.monotonic() - began
    assert gone(env, "q0") and gone(env, "q1") and not gone(env, "q2")
    # It pauses for a multiple of the time it held the write lock, never longer.
    assert 0 < pruner.pause(True) <= PRUNE_YIELD * batch_took
    assert pruner.run_once(at(3602)) is True
    assert pruner.run_once(at(3602)) is False
    # Nothing due: it looks again when the next retention runs out, at +3630s.
    assert pruner.pause(False) == pytest.approx(28)
    assert pruner.run_once(at(3630)) is True
    assert pruner.run_once(at(3630)) is False
    assert pruner.pause(False) == PRUNE_IDLE


def test_the_pruner_leaves_the_lock_nineteen_times_as_long_while_others_write(env, monkeypatch):
    for n in range(3):
        completed(env, f"q{n}", n)
    completed(env, "other", 10, "kept")

    def measured(engine, now):
        batch = prune_batch(engine, now, events=1)
        batch.held_seconds = 0.01
        return batch

    monkeypatch.setattr(housekeeping, "prune_batch", measured)
    # The log's checkpoint counts toward a batch's cost too: here it costs nothing.
    monkeypatch.setattr(env.client.store, "checkpoint", lambda: None)
    pruner = Pruner(env.worker.shared)

    # The first batch cannot know whether others write: it leaves them the lock.
    assert pruner.run_once(at(10**6)) is True
    assert pruner.pause(True) == pytest.approx(0.01 * PRUNE_YIELD, rel=0.05)
    # Nobody else wrote since: the next waits only as long as it held the lock.
    assert pruner.run_once(at(10**6)) is True
    assert pruner.pause(True) == pytest.approx(0.01, rel=0.05)
    other = Client(env.db, env.folder / "workflows.yaml", clock_now=env.clock)
    other.start("kept", "k2")
    other.close()
    assert pruner.run_once(at(10**6)) is True
    assert pruner.pause(True) == pytest.approx(0.01 * PRUNE_YIELD, rel=0.05)


# the command line



def three_closed(env) -> None:
    """q0, q1 and q2 completed at +0s, +1s, +2s (retention 1h); s1 still waiting."""
    for n in range(3):
        completed(env, f"q{n}", n)
    env.start("signalled", "s1", now=3)


def test_prune_reports_counts_and_ids(env, wfctl):
    three_closed(env)
    # History rows (a transaction's events of a run share one), not events.
    events = sum(rows_of(env, f"q{n}")["events"] for n in range(3))

    code, out, err = wfctl(env, "prune", "--older-than", "0")

    assert (code, err) == (0, "")
    assert out == (
        "Pruned 3 closed instances in 1 batch\n"
        f"Rows deleted: runs 3, activities 3, workflow_tasks 0, timers 0, signals 0, failures 0, "
        f"children 0, events {events}\n"
        "Instances:\n  q0\n  q1\n  q2\n")
    code, out, _ = wfctl(env, "describe", "q0")
    assert code == 1
    code, out, _ = wfctl(env, "describe", "q0", "--json")
    assert (code, out) == (1, '{\n  "found": false,\n  "reason": "instance_not_found"\n}\n')


def test_prune_says_when_nothing_is_due(env, wfctl):
    # Run by the command line, on the wall clock, as the prunes below are.
    for workflow_type, instance_id in (("quick", "q1"), ("kept", "k1")):
        assert wfctl(env, "start", workflow_type, instance_id)[0] == 0
    assert wfctl(env, "work", "--once")[0] == 0

    code, out, _ = wfctl(env, "prune")
    assert (code, out) == (0, "Nothing to prune: no closed instances past their retention\n")
    code, out, _ = wfctl(env, "prune", "--older-than", "1d")
    assert (code, out) == (0, "Nothing to prune: no instances closed more than 1d ago\n")


def test_prune_dry_run_json_deletes_nothing(env, wfctl):
    import json

    three_closed(env)

    code, out, _ = wfctl(env, "prune", "--older-than", "{minutes: 0}", "--dry-run", "--json")

    report = json.loads(out)
    assert code == 0
    assert set(report) == {"dry_run", "older_than_seconds", "instances", "rows",
                           "workflow_instance_ids", "batches"}
    assert (report["dry_run"], report["older_than_seconds"], report["instances"]) == \
        (True, 0, 3)
    assert report["workflow_instance_ids"] == ["q0", "q1", "q2"]
    assert not gone(env, "q0")
    code, out, _ = wfctl(env, "prune", "--older-than", "0", "--dry-run")
    assert out.startswith("Would prune 3 closed instances (dry run: nothing deleted)\n"
                          "Rows that would go: runs 3,")


@pytest.mark.sqlite_only
def test_prune_vacuum_gives_the_space_back(env, wfctl):
    import json

    for n in range(30):
        env.start("quick", f"q{n}", now=0, input={"padding": "x" * 20_000})
    env.run(0)
    before = env.client.store.file_size()

    code, out, _ = wfctl(env, "prune", "--older-than", "0", "--vacuum", "--json")

    report = json.loads(out)
    assert (code, report["instances"]) == (0, 30)
    assert report["file_size_before"] == pytest.approx(before, rel=0.2)
    assert report["file_size_after"] < report["file_size_before"] / 3


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--older-than", "soon"], 1, "Error: --older-than: expected a duration"),
    (["--older-than", "-5m"], 1, "Error: --older-than: must not be negative (got '-5m')"),
    (["--older-than", "NONE"], 1, "Error: --older-than: expected a duration"),
    (["--dry-run", "--vacuum"], 2, "Error: --dry-run and --vacuum exclude each other"),
])
def test_prune_refuses_bad_options_in_one_line(env, wfctl, args, code, message):
    three_closed(env)

    found, out, err = wfctl(env, "prune", *args)

    assert (found, out) == (code, "")
    assert err.startswith(message) and err.count("\n") == 1
    assert not gone(env, "q0")


def test_prune_on_a_missing_database_creates_nothing(tmp_path, monkeypatch, capsys):
    import sys

    from wfctl.cli import main

    monkeypatch.setattr(sys, "argv", ["wfctl", "--db", str(tmp_path / "none.db"), "prune"])
    with pytest.raises(SystemExit) as exited:
        main()

    assert exited.value.code == 1
    assert capsys.readouterr().err == f"Error: no database at {tmp_path / 'none.db'}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.sqlite_only
def test_prune_finds_its_batch_through_indexes_however_many_instances_are_closed(env):
    store = env.client.store
    with store.read() as tx:
        statements: list[str] = []
        tx.conn.set_trace_callback(statements.append)
        tx.prunable_instances(datetime(2026, 1, 1, tzinfo=UTC), closed_before=None, limit=10)
        tx.prunable_instances(datetime(2026, 1, 1, tzinfo=UTC),
                              closed_before=datetime(2026, 1, 1, tzinfo=UTC), limit=10)
        tx.count_owned_rows(["a", "b"])
        tx.conn.set_trace_callback(None)
        plans = [[row["detail"] for row in tx.conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
                 for sql in statements]

    assert "USING INDEX instances_retain_until" in plans[0][0]
    assert "USING INDEX instances_closed" in plans[1][0]
    assert not any("TEMP B-TREE" in detail for plan in plans[:2] for detail in plan)
    scans = [detail for plan in plans for detail in plan if detail.startswith("SCAN")]
    assert scans == [], scans


def test_a_prune_checkpoints_the_log_after_its_batches_not_inside_them(env, monkeypatch):
    monkeypatch.setattr(prune_module, "BATCH_INSTANCES", 1)
    for n in range(5):
        completed(env, f"q{n}", n)
    monkeypatch.setattr(prune_module, "CHECKPOINT_ROWS", 2 * rows_of(env, "q0")["events"])
    checkpoints: list[int] = []
    store = env.client.store
    real = store.checkpoint

    def counted() -> None:
        checkpoints.append(len(env.client.list(limit=10)))
        real()

    monkeypatch.setattr(store, "checkpoint", counted)

    assert prune(env, 10**6)["batches"] == 5

    # After the second and the fourth batch, then once the last is done.
    assert checkpoints == [3, 1, 0]


@pytest.mark.sqlite_only
def test_a_batch_commit_leaves_the_log_for_the_checkpoint_after_it(env):
    for n in range(3):
        completed(env, f"q{n}", n)
    db = env.folder / "wfctl.db"
    # Another connection leaves a long log behind (more than the 1,000 pages at which a commit
    # would copy it into the database file itself).
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("PRAGMA wal_autocheckpoint=0")
    other.execute("INSERT INTO definitions VALUES ('padding', 'p', ?, 't')", ("x" * 5_000_000,))
    other.close()
    written = db.stat().st_mtime_ns

    batch = prune_batch(env.engine, at(10**6))

    assert batch.instance_ids == ["q0", "q1", "q2"]
    assert db.stat().st_mtime_ns == written, "the batch's commit copied the log"
    env.client.store.checkpoint()
    assert db.stat().st_mtime_ns != written
