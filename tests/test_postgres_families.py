"""Workflow families on PostgreSQL: a write locks the family it changes (a workflow and its
children), so writes on other families go on at the same time, writes on one family take turns
and read what the previous one committed, a parent/child cascade never deadlocks, and a claim
passes over a busy family instead of waiting for it."""

from __future__ import annotations

import struct
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import Clock, Env, at, round_trips

from wfctl import Client
from wfctl.engine.activities import completion_close
from wfctl.errors import Conflict, TransientConflict

FAMILY = """
version: 1
workflows:
  parent:
    child_policy: terminate
    steps:
      - workflow: child
        name: sub
      - activity: wfh:noop
        name: after
  child:
    steps:
      - activity: wfh:noop
        name: work
  solo:
    steps:
      - activity: wfh:noop
        name: only
  pair:
    steps:
      - activity: wfh:noop
        name: first
      - activity: wfh:noop
        name: second
"""


@pytest.fixture
def env(tmp_path, pg_url) -> Iterator[Env]:
    """FAMILY's workflows on a fresh PostgreSQL database."""
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(FAMILY))
    clock = Clock()
    env = Env(tmp_path, Client(pg_url, workflows, clock_now=clock), clock)
    yield env
    env.client.close()


@contextmanager
def holding(env: Env, read: Callable[[Any], object]) -> Iterator[threading.Event]:
    """A write transaction on another thread (another connection) that has run `read` and
    stays open until the block ends; yields the event that ends it sooner."""
    held, release = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def hold() -> None:
        try:
            with env.engine.store.write() as tx:
                read(tx)
                held.set()
                release.wait(20)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
            held.set()

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    try:
        yield release
    finally:
        release.set()
        thread.join(10)
    assert not failures, failures


def in_thread(action: Callable[[], object]) -> tuple[threading.Thread, list[Any]]:
    """Run `action` on a thread of its own; the list gets what it returned or raised."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(action())
        except BaseException as exc:  # reported by the test's thread
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def started_family(env: Env, parent: str) -> tuple[str, dict[str, Any]]:
    """A parent waiting on its child, whose activity is ready: (child id, parent's describe)."""
    env.start("parent", parent)
    env.decide(0)
    doc = env.describe(parent)
    return doc["children"][0]["workflow_instance_id"], doc


def test_a_write_on_one_family_does_not_wait_for_a_write_on_another(env):
    started_family(env, "a")
    started_family(env, "b")

    def close_by_hand(tx: Any) -> None:
        # A status change too: instance counts (metrics) are kept per family, not per type.
        tx.get_instance("a")
        tx.update_instance("a", status="terminated")
        # A read sends the writes held back for the transaction's next round trip.
        assert tx.get_instance("a").status == "terminated"

    with holding(env, close_by_hand):
        began = time.perf_counter()
        env.engine.terminate("b", "not needed", at(1))
        elapsed = time.perf_counter() - began

    assert elapsed < 1.0
    assert env.describe("b")["status"] == "terminated"
    counts = {(row["workflow_type"], row["status"]): row["count"]
              for row in env.engine.store.peek().instance_counts()}
    assert counts[("parent", "terminated")] == 2 and counts[("parent", "running")] == 0
    assert counts[("child", "terminated")] == 1 and counts[("child", "running")] == 1


def test_closes_of_families_sixteen_keys_apart_do_not_wait_for_each_others_counts(env):
    # Instance counts are spread over slots by family key: over sixteen, the families of keys
    # k and k + 16 shared the count rows, and a close waited for the other's commit.
    for n in range(17):
        env.start("solo", f"s-{n:02d}")
    keys = {row["workflow_instance_id"]: row["family_key"] for row in env.engine.store.peek()
            ._all("SELECT workflow_instance_id, family_key FROM instances", ())}
    # Seventeen keys, fewer than 256 apart: two of them leave the same remainder by 16.
    by_remainder: dict[int, str] = {}
    for instance, key in sorted(keys.items()):
        if key % 16 in by_remainder:
            first, later = by_remainder[key % 16], instance
            break
        by_remainder[key % 16] = instance

    def close_by_hand(tx: Any) -> None:
        tx.get_instance(first)
        tx.update_instance(first, status="terminated")
        # A read sends the writes held back for the transaction's next round trip.
        assert tx.get_instance(first).status == "terminated"

    with holding(env, close_by_hand) as release:
        thread, outcome = in_thread(lambda: env.engine.terminate(later, "not needed", at(1)))
        thread.join(5)
        waited = thread.is_alive()
        release.set()
        thread.join(10)

    assert not waited and not isinstance(outcome[0], BaseException), outcome
    counts = {(row["workflow_type"], row["status"]): row["count"]
              for row in env.engine.store.peek().instance_counts()}
    assert counts[("solo", "terminated")] == 2 and counts[("solo", "running")] == 15
    assert keys[first] % 256 != keys[later] % 256


def test_writes_on_one_family_take_turns_and_the_second_reads_what_the_first_committed(env):
    child, doc = started_family(env, "a")
    parent_run = doc["run"]["workflow_run_id"]

    def request_cancel_by_hand(tx: Any) -> None:
        # Through the child: the lock is the whole family's, whichever member is read first.
        tx.get_instance(child)
        tx.update_run(parent_run, cancel_requested=True)

    with holding(env, request_cancel_by_hand) as release:
        thread, outcome = in_thread(lambda: env.engine.cancel("a", "again", at(1)))
        thread.join(0.5)
        waited = thread.is_alive()
        release.set()
        thread.join(10)

    assert waited and not thread.is_alive()
    # It read the run after the first write committed: the request was there already.
    assert isinstance(outcome[0], Conflict)
    assert "already requested" in str(outcome[0])


def test_a_child_closing_while_its_parent_is_terminated_neither_deadlocks_nor_loses_an_event(
        env):
    families = [f"p{n}" for n in range(12)]
    children = {parent: started_family(env, parent)[0] for parent in families}
    tasks = {}
    for _ in families:
        task = env.claim(1)
        tasks[task.workflow_instance_id] = task
    assert set(tasks) == set(children.values())

    barrier = threading.Barrier(2)

    def complete_children() -> None:
        barrier.wait()
        for parent in families:
            env.engine.complete_activity(tasks[children[parent]], None, at(2), decide=True)

    def terminate_parents() -> None:
        barrier.wait()
        for parent in reversed(families):
            env.engine.terminate(parent, "stop", at(2))

    first, first_outcome = in_thread(complete_children)
    second, second_outcome = in_thread(terminate_parents)
    first.join(30)
    second.join(30)

    assert first_outcome == [None] and second_outcome == [None]
    for parent in families:
        child = children[parent]
        parent_events = env.event_types(parent)
        child_events = env.event_types(child)
        assert env.describe(parent)["status"] == "terminated"
        assert parent_events.count("WorkflowTerminated") == 1
        if env.describe(child)["status"] == "completed":
            # The child finished first: the parent heard of it, then had no child to stop.
            assert child_events.count("ActivityCompleted") == 1
            assert child_events[-1] == "WorkflowCompleted"
            assert parent_events.count("ChildWorkflowCompleted") == 1
            assert "ParentClosePolicyApplied" not in parent_events
        else:
            # The parent went first: its policy ended the child, whose late result was refused.
            assert env.describe(child)["status"] == "terminated"
            assert parent_events.count("ParentClosePolicyApplied") == 1
            assert "ActivityCompleted" not in child_events
            assert child_events.count("ActivityCancelled") == 1
            assert child_events[-1] == "WorkflowTerminated"


def test_a_claim_passes_over_a_busy_family_and_takes_its_work_once_it_is_free(env):
    env.start("solo", "x", now=0)
    env.start("solo", "y", now=1)
    env.decide(2)

    with holding(env, lambda tx: tx.get_instance("x")):
        began = time.perf_counter()
        taken = env.claim(3)
        nothing = env.claim(3)
        elapsed = time.perf_counter() - began

    # x's activity is older, yet its family was busy: y's is taken, and nothing more is ready.
    assert taken.workflow_instance_id == "y" and nothing is None
    assert elapsed < 1.0
    assert env.claim(4).workflow_instance_id == "x"


def test_a_batch_of_outcomes_waits_for_all_their_families_with_its_first(env):
    """The step path records a batch of outcomes in one transaction, which takes every
    outcome's family with the first outcome's read: a family busy elsewhere holds up the
    whole batch from its start, and then each outcome is read and closed at once."""
    env.start("solo", "x", now=0)
    env.start("solo", "y", now=1)
    env.decide(2)
    x, y = env.claim(3), env.claim(3)
    recorded: list[str] = []

    def record() -> None:
        with env.engine.batch(families={"x", "y"}):
            for task in (x, y):
                assert env.engine.complete_activity(task, {}, at(4), decide=True) is None
                recorded.append(task.workflow_instance_id)

    with holding(env, lambda tx: tx.get_instance("y")) as release:
        thread, outcome = in_thread(record)
        thread.join(0.5)
        waited_before_x = thread.is_alive() and recorded == []
        release.set()
        thread.join(10)

    assert waited_before_x and outcome == [None] and recorded == ["x", "y"]
    assert [env.describe(name)["status"] for name in ("x", "y")] == ["completed"] * 2


def solos_claimed(env: Env, names: tuple[str, ...], now: float) -> list[Any]:
    """`solo` workflows started and decided, each one's attempt claimed (by this process,
    which has seen their families so)."""
    for name in names:
        env.start("solo", name, now=now)
    env.decide(now)
    return [env.claim(now) for _ in names]


def completed_in_one_batch(env: Env, tasks: list[Any], now: float, *,
                           announce: bool) -> list[str]:
    """Complete the attempts in one batch, its closes announced or not: the round trips the
    completions took (the commit's not counted)."""
    closes = [completion_close(task, {"by": task.workflow_instance_id}, at(now))
              for task in tasks] if announce else []
    families = [task.workflow_instance_id for task in tasks]
    with env.engine.batch(families=families, closes=closes), round_trips() as taken:
        for task in tasks:
            result = {"by": task.workflow_instance_id}
            assert env.engine.complete_activity(task, result, at(now), decide=True) is None
    return taken


def test_a_batch_of_completions_reads_and_closes_them_all_in_its_first_round_trip(env):
    """The step path announces the attempts its outcomes close: each of a family no other
    outcome of the batch changes is closed, and its run read, in the round trip that locks
    the families, and its completion takes no round trip of its own."""
    unannounced = completed_in_one_batch(env, solos_claimed(env, ("a", "b", "c"), 1), 2,
                                         announce=False)
    announced = completed_in_one_batch(env, solos_claimed(env, ("x", "y", "z"), 3), 4,
                                       announce=True)

    assert len(unannounced) == 3 and len(announced) == 1
    for name in ("a", "b", "c", "x", "y", "z"):
        doc = env.describe(name)
        assert (doc["status"], doc["state"]) == ("completed", {"by": name})
        # The same history either way.
        assert env.event_types(name) == env.event_types("a")
    assert "ActivityCompleted" in env.event_types("x")


def test_a_batchs_runs_are_read_and_its_attempts_closed_by_one_statement_each(env):
    """The closes done ahead go with the first: one statement reads every run and one closes
    every attempt, whatever the batch's size. An attempt in it that is no longer its worker's
    (taken over since, say) is left as it is, its outcome refused; the others complete."""
    import psycopg

    [x, y, z] = solos_claimed(env, ("x", "y", "z"), 1)
    with env.engine.store.write() as tx:
        tx._execute("UPDATE activities SET owner = 'another-worker' "
                    "WHERE workflow_instance_id = 'y'")
    statements: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(" ".join(str(query).split()))
        return execute(cursor, query, *args, **kwargs)

    tasks = [x, y, z]
    closes = [completion_close(task, {"by": task.workflow_instance_id}, at(2))
              for task in tasks]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        with env.engine.batch(families=["x", "y", "z"], closes=closes):
            outcomes = [env.engine.complete_activity(task, {"by": task.workflow_instance_id},
                                                     at(2), decide=True) for task in tasks]

    assert sum("UPDATE activities" in text for text in statements) == 1
    assert sum(" FROM runs r " in text for text in statements) == 1
    assert outcomes[0] is None and outcomes[2] is None
    assert "no longer current" in outcomes[1]
    assert [env.describe(name)["status"] for name in ("x", "y", "z")] == \
        ["completed", "running", "completed"]
    assert env.engine.store.peek()._one(
        "SELECT status, owner FROM activities WHERE workflow_instance_id = 'y'") == \
        {"status": "started", "owner": "another-worker"}


def test_the_attempts_a_batch_schedules_are_inserted_by_one_statement(env):
    """Each completion of a batch schedules its workflow's next attempt; the inserts, held
    back for the commit, go as one statement of all their rows, and every attempt is there
    to run after."""
    import psycopg

    for name in ("p", "q", "r"):
        env.start("pair", name, now=1)
    env.decide(1)
    tasks = [env.claim(1) for _ in range(3)]
    inserts: list[int] = []
    execute = psycopg.Cursor.execute

    def counted(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if str(query).startswith("INSERT INTO activities"):
            # The rows: a merged insert's first column array holds one element a row.
            inserts.append(struct.unpack(">iiIii", params[0].data[:20])[3]
                           if "unnest" in str(query) else 1)
        return execute(cursor, query, params, **kwargs)

    closes = [completion_close(task, None, at(2)) for task in tasks]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        with env.engine.batch(families=["p", "q", "r"], closes=closes):
            for task in tasks:
                assert env.engine.complete_activity(task, None, at(2), decide=True) is None

    # One statement of the three rows.
    assert inserts == [3]
    seconds = [env.claim(3) for _ in range(3)]
    assert sorted((task.workflow_instance_id, task.step) for task in seconds) == \
        [("p", "second"), ("q", "second"), ("r", "second")]


def decided_in_one_batch(env: Env, limit: int, now: float) -> int:
    """Decide up to `limit` ready workflow tasks in one batch, as a worker's batch does."""
    decided = 0
    with env.engine.batch():
        while decided < limit and env.engine.decide_ready_task(
                env.worker.worker_id, at(now), ahead=limit - decided):
            decided += 1
    return decided


def test_a_batchs_workflow_tasks_are_claimed_and_their_runs_read_by_one_statement_each(env):
    """A batch deciding four new workflows claims their tasks with one statement and reads
    their runs with one more: two round trips before the commit, which deletes the tasks by
    one statement. Each workflow's history is the one a workflow decided alone has."""
    import psycopg

    env.start("solo", "alone", now=0)
    assert decided_in_one_batch(env, 1, 1) == 1
    names = ("w", "x", "y", "z")
    for name in names:
        env.start("solo", name, now=0)
    statements: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(" ".join(str(query).split()))
        return execute(cursor, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(psycopg.Cursor, "execute", counted)
        with round_trips() as taken:
            assert decided_in_one_batch(env, 4, 1) == 4

    assert taken[:2] == ["SELECT c.*,", "SELECT x.*"] and len(taken) == 3
    assert sum(text.startswith("DELETE FROM workflow_tasks") for text in statements) == 1
    assert sum(" FROM runs r " in text for text in statements) == 1

    def story(name: str) -> list[tuple[str, dict[str, Any]]]:
        return [(event["event_type"], {key: value for key, value in event["attributes"].items()
                                       if key not in ("activity_id", "workflow_run_id")})
                for event in env.history(name)]

    assert all(story(name) == story("alone") for name in names)
    assert sorted(env.claim(2).workflow_instance_id for _ in range(5)) == ["alone", *names]


def test_a_batchs_claims_of_ready_activities_take_one_statement_and_their_runs_one_more(env):
    """Three attempts claimed in one batch, as a worker's batch claims for its places: one
    statement claims them all and one reads their runs, and the claim after them finds
    nothing without a statement; each attempt is started, its handler given its run's state."""
    for name in ("x", "y", "z"):
        env.start("solo", name, now=0, input={"name": name})
    env.decide(1)
    with env.engine.batch(), round_trips() as taken:
        claimed = [env.engine.claim_activity(env.worker.worker_id, ["default"], at(2),
                                             ahead=4 - n) for n in range(4)]
    assert taken == ["SELECT c.*,", "SELECT x.*"]
    assert [task and task.workflow_instance_id for task in claimed] == ["x", "y", "z", None]
    assert [task.state for task in claimed[:3]] == [{"name": "x"}, {"name": "y"}, {"name": "z"}]
    assert [env.event_types(name)[-1] for name in ("x", "y", "z")] == ["ActivityStarted"] * 3


def test_a_batch_passes_over_a_workflow_task_of_a_busy_family_and_decides_the_others(env):
    """A family busy elsewhere: its task, claimed with the others, is left ready, and the
    others are decided at once; once the family is free, its task is decided too."""
    for name in ("w", "x", "y"):
        env.start("solo", name, now=0)
    with holding(env, lambda tx: tx.get_instance("x")):
        began = time.perf_counter()
        decided = decided_in_one_batch(env, 3, 1)
        elapsed = time.perf_counter() - began
    assert decided == 2 and elapsed < 1.0
    assert [env.describe(name)["status"] for name in ("w", "x", "y")] == ["running"] * 3
    assert env.event_types("x")[-1] == "WorkflowTaskScheduled"
    assert decided_in_one_batch(env, 3, 2) == 1
    assert sorted(env.claim(3).workflow_instance_id for _ in range(3)) == ["w", "x", "y"]


def test_closes_of_one_family_are_not_done_ahead(env):
    """Two outcomes of one family: the first one's may change the other's run (a child's
    completion decides its parent), so only the outcome of a family of its own goes ahead."""
    [x, y, z] = solos_claimed(env, ("x", "y", "z"), 1)
    key = env.engine.store.peek()._one(
        "SELECT family_key FROM instances WHERE workflow_instance_id = 'x'")["family_key"]
    # y seen in x's family (as an instance started again as a child may be).
    env.engine.store.families["y"] = key

    taken = completed_in_one_batch(env, [x, y, z], 2, announce=True)

    # x's with the lock and z's; y's in a round trip of its own, after x's outcome.
    assert len(taken) == 2
    assert [env.describe(name)["status"] for name in ("x", "y", "z")] == ["completed"] * 3


def test_a_family_changed_since_it_was_seen_fails_the_batch_before_it_writes(env):
    """The families the process saw plan which closes go ahead; the lock's rows check them.
    Where an instance moved to another outcome's family since (started again as a child), its
    close went ahead wrongly: the batch is refused, and nothing of it stays."""
    [x, y] = solos_claimed(env, ("x", "y"), 1)
    with env.engine.store.write() as tx:
        tx._execute("UPDATE instances SET family_key = (SELECT family_key FROM instances "
                    "WHERE workflow_instance_id = 'x') WHERE workflow_instance_id = 'y'")

    with pytest.raises(TransientConflict, match="family changed"):
        completed_in_one_batch(env, [x, y], 2, announce=True)

    assert [env.describe(name)["status"] for name in ("x", "y")] == ["running"] * 2
    assert env.engine.store.peek()._one(
        "SELECT count(*) AS n FROM activities WHERE status = 'started'")["n"] == 2
    # Seen as they are now, the next batch plans by them, and both complete.
    assert len(completed_in_one_batch(env, [x, y], 3, announce=True)) == 2
    assert [env.describe(name)["status"] for name in ("x", "y")] == ["completed"] * 2


def test_a_close_done_ahead_that_no_completion_asked_for_is_never_committed(env):
    [x, y] = solos_claimed(env, ("x", "y"), 1)
    closes = [completion_close(task, {}, at(2)) for task in (x, y)]

    with pytest.raises(RuntimeError, match="closed ahead and never recorded"), \
            env.engine.batch(families=["x", "y"], closes=closes):
        env.engine.complete_activity(x, {}, at(2))

    assert env.engine.store.peek()._one(
        "SELECT count(*) AS n FROM activities WHERE status = 'started'")["n"] == 2
    assert [env.describe(name)["status"] for name in ("x", "y")] == ["running"] * 2


def test_two_starts_of_one_new_id_take_turns(env):

    def starting(tx: Any) -> None:
        assert tx.get_instance("n1") is None

    with holding(env, starting) as release:
        thread, outcome = in_thread(lambda: env.engine.start(
            env.client.definitions(), "solo", "n1", None, at(1)))
        thread.join(0.5)
        waited = thread.is_alive()
        release.set()
        thread.join(10)

    assert waited and outcome[0]["outcome"] == "started_new"
    again = env.engine.start(env.client.definitions(), "solo", "n1", None, at(2))
    assert again["outcome"] == "rejected_duplicate"
