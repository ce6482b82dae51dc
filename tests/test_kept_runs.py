"""Runs kept between write transactions (SQLite): a step's outcome is recorded without reading
the run this process wrote a transaction before, and whatever else changed the run since — another
connection's commit, a statement the keeper does not patch for, a rollback — is read from the
file instead. (Every test also checks each run taken from what is kept against the file: see
conftest.py.)"""

from __future__ import annotations

import pytest
from conftest import CHECKED, at

from wfctl import Client
from wfctl.store import kept
from wfctl.store.queries import GET_RUN
from wfctl.store.sqlite import native

pytestmark = pytest.mark.sqlite_only

TWO = """
version: 1
workflows:
  two:
    steps:
      - activity: wfh:noop
        name: first
      - activity: wfh:noop
        name: second
  approval:
    steps:
      - wait_for_signal: approved
      - activity: wfh:noop
        name: after
"""


def first_step_claimed(env):
    """One `two` workflow decided and its first step claimed; the claimed task and the
    statements the process's write connection runs from then on."""
    env.start("two", "t0")
    # As a worker's batches decide: the task taken and decided in one transaction.
    assert env.engine.decide_ready_task(env.worker.worker_id, at(0))
    task = env.claim(0)
    assert task is not None and task.step == "first"
    statements: list[str] = []
    env.engine.store._writer.set_trace_callback(statements.append)
    return task, statements


def run_reads(statements: list[str]) -> int:
    """The runs read (`GET_RUN`), the tests' own checks left out."""
    return sum(1 for sql in statements
               if sql.startswith(native(GET_RUN)[:60]) and not sql.endswith(CHECKED))


def test_a_steps_outcome_is_recorded_without_reading_the_run_this_process_wrote(make_env):
    env = make_env(TWO)
    task, statements = first_step_claimed(env)

    assert env.engine.complete_activity(task, {}, at(1), decide=True) is None

    assert run_reads(statements) == 0
    second = env.claim(2)
    assert second is not None and second.step == "second"
    assert env.engine.complete_activity(second, {}, at(3), decide=True) is None
    assert env.describe("t0")["status"] == "completed"
    assert run_reads(statements) == 0


def test_a_run_read_with_the_activity_a_worker_claims_is_kept(make_env):
    env = make_env(TWO)
    env.start("two", "t0")
    assert env.engine.decide_ready_task(env.worker.worker_id, at(0))
    # Another connection commits: nothing kept holds after it, until the claim reads the run.
    other = Client(env.db, env.folder / "workflows.yaml", clock_now=lambda: at(0))
    try:
        other.start("two", "t1")
    finally:
        other.close()
    task = env.claim(0)
    assert task is not None and task.workflow_instance_id == "t0"
    statements: list[str] = []
    env.engine.store._writer.set_trace_callback(statements.append)

    assert env.engine.complete_activity(task, {}, at(1), decide=True) is None

    assert run_reads(statements) == 0


def test_a_closed_run_is_let_go_and_past_the_bound_everything_is(make_env, monkeypatch):
    env = make_env(TWO)
    env.start("two", "t0")
    assert env.run(0) is True
    assert env.describe("t0")["status"] == "completed"
    runs = env.engine.store._writer.kept
    assert runs.rows == {} and runs.seqs == {}

    monkeypatch.setattr(kept, "KEPT_RUNS", 1)
    env.start("two", "t1")
    env.start("two", "t2")
    assert env.engine.decide_ready_task(env.worker.worker_id, at(1))
    assert list(runs.rows) == [env.describe("t1")["run"]["workflow_run_id"]]
    assert env.engine.decide_ready_task(env.worker.worker_id, at(1))
    assert runs.rows == {} and runs.seqs == {}


def test_a_commit_by_another_connection_is_read_by_the_next_step(make_env):
    env = make_env(TWO)
    task, statements = first_step_claimed(env)
    # Another client: its own store and write connection, as another process would have.
    other = Client(env.db, env.folder / "workflows.yaml", clock_now=lambda: at(1))
    try:
        other.cancel("t0", reason="changed my mind")
    finally:
        other.close()

    env.engine.complete_activity(task, {}, at(2), decide=True)

    assert run_reads(statements) == 1
    assert env.describe("t0")["status"] == "cancelled"
    assert "ActivityScheduled" not in env.event_types("t0")[-3:]


def test_a_write_the_keeper_does_not_patch_for_is_read_back(make_env):
    env = make_env(TWO)
    task, statements = first_step_claimed(env)
    store = env.engine.store
    with store.write() as tx:
        tx._execute("UPDATE runs SET cancel_requested = 1 WHERE workflow_run_id = %s",
                    (task.workflow_run_id,))
    assert store._writer.kept.rows == {}

    env.engine.complete_activity(task, {}, at(2), decide=True)

    assert run_reads(statements) == 1
    assert env.describe("t0")["status"] == "cancelled"


def test_a_rolled_back_transaction_leaves_nothing_kept(make_env):
    env = make_env(TWO)
    task, statements = first_step_claimed(env)
    store = env.engine.store
    with pytest.raises(RuntimeError), store.write() as tx:
        tx.get_run(task.workflow_run_id)
        tx.update_run(task.workflow_run_id, step_index=1, step_started=True)
        raise RuntimeError("the batch failed")
    assert store._writer.kept.rows == {}

    env.engine.complete_activity(task, {}, at(2), decide=True)

    # The failed transaction took the run from what was kept; the completion reads the file.
    assert run_reads(statements) == 1
    assert statements.index("ROLLBACK") < [
        n for n, sql in enumerate(statements)
        if sql.startswith(native(GET_RUN)[:60]) and not sql.endswith(CHECKED)][-1]
    second = env.claim(3)
    assert second is not None and second.step == "second"


def test_a_run_a_workflow_task_opened_for_is_read_when_it_is_decided(make_env):
    env = make_env(TWO)
    env.start("approval", "a0")
    assert env.engine.decide_ready_task(env.worker.worker_id, at(0))
    assert env.describe("a0")["status"] == "waiting"
    statements: list[str] = []
    env.engine.store._writer.set_trace_callback(statements.append)
    env.clock.set(1)
    env.client.signal("a0", "approved", {"ok": True})
    read_by_the_signal = run_reads(statements)

    assert env.engine.decide_ready_task(env.worker.worker_id, at(2))

    assert run_reads(statements) == read_by_the_signal + 1
    task = env.claim(3)
    assert task is not None and task.step == "after"


@pytest.mark.parametrize(("sql", "harmless"), [
    ("SELECT * FROM runs", True),
    ("PRAGMA data_version", True),
    ("COMMIT", True),
    ("INSERT INTO activities (activity_id) VALUES (?)", True),
    ("UPDATE activities SET status = ? WHERE activity_id = ?", True),
    ("DELETE FROM workflow_tasks WHERE task_id = ?", True),
    ("UPDATE workflow_tasks SET status = ? WHERE task_id = ?", True),
    ("INSERT INTO instances (workflow_instance_id) VALUES (?)", True),
    ("UPDATE instances SET status = ? WHERE workflow_instance_id = ?", True),
    ("UPDATE runs SET step_index = ? WHERE workflow_run_id = ?", False),
    ("insert into runs (workflow_run_id) values (?)", False),
    ("DELETE FROM events WHERE instance_key = ?", False),
    ("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", False),
    ("INSERT INTO workflow_tasks (workflow_run_id) VALUES (?)", False),
    ("UPDATE workflow_tasks SET workflow_run_id = ? WHERE task_id = ?", False),
    ("DELETE FROM instances WHERE workflow_instance_id = ?", False),
    ("UPDATE instances SET workflow_type = ? WHERE workflow_instance_id = ?", False),
    ("INSERT OR REPLACE INTO instances (workflow_instance_id) VALUES (?)", False),
    ("INSERT INTO instances (workflow_instance_id) VALUES (?) ON CONFLICT DO NOTHING", False),
    ("WITH gone AS (SELECT 1) DELETE FROM activities", False),
    ("ROLLBACK", False),
    ("DROP TABLE runs", False),
])
def test_a_statement_is_harmless_only_when_it_leaves_every_kept_run_as_read(sql, harmless):
    assert kept.harmless(sql) is harmless


def test_a_patched_value_is_kept_as_the_column_gives_it_back():
    runs = kept.Kept({"run_timeout_seconds": (5, "REAL"), "step_index": (12, "INTEGER"),
                      "status": (3, "TEXT"), "odd": (7, "other")})
    row = [None] * 30
    assert runs.patch(row, ("run_timeout_seconds", "step_index", "status"), [30, True, "running"])
    assert (type(row[5]), row[5], type(row[12]), row[12], row[3]) == (float, 30.0, int, 1, "running")
    assert runs.patch(row, ("step_index",), [2.0]) and (type(row[12]), row[12]) == (int, 2)
    # SQLite spells a number written to a TEXT column its own way: not kept.
    assert not runs.patch(row, ("status",), [5])
    assert not runs.patch(row, ("odd",), ["x"])
    assert not runs.patch(row, ("no_such_column",), [1])
