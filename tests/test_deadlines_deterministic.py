"""Deadlines where they are checked: the outcome never depends on the sweep or the next step
getting there first (SPEC §2). A decision past the deadline hands the run to the deadline path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import wfh
from conftest import at

from wfctl import clock
from wfctl.engine.time import deadlines
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.engine.time.workers import worker_alive
from wfctl.errors import StoreUnavailable
from wfctl.lang import handlers
from wfctl.worker import Worker, WorkerOptions

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  stepwise:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh:mark
        name: last
  approval:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - wait_for_signal: approved
      - activity: wfh:mark
        name: last
  parked:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:noop
        name: unserved
        queue: nobody
"""
DEADLINE_AT = at(90)


@pytest.fixture(autouse=True)
def _clear_calls() -> Iterator[None]:
    wfh.deadline_calls.clear()
    yield
    wfh.deadline_calls.clear()
    wfh.calls.clear()


@pytest.fixture
def checking(make_env):
    """An environment whose decisions check deadlines, as a long-running worker's do; its
    worker is registered (alive), so its deadline claims are its own to finish."""
    env = make_env(DEFINITIONS)
    env.check_deadlines = True
    env.worker = Worker(env.engine, WorkerOptions(queues=("default",), worker_lease=3600))
    env.worker.register(at(0))
    return env


def run_handler(spec: str, state: dict[str, Any]) -> object:
    return handlers.call(spec, state)


def check(env, seconds: float, worker_id: str | None = None) -> list[dict[str, Any]]:
    """One deadline sweep at T0 + seconds by the environment's worker (or `worker_id`)."""
    return sweep_deadlines(env.engine, worker_id or env.worker.worker_id, at(seconds),
                           run_handler)


def paused_after_first_step(env, instance_id: str) -> None:
    """stepwise, paused at 1 s while `first` runs; its result is kept at 2 s."""
    env.start("stepwise", instance_id, now=0)
    env.decide(0)
    task = env.claim(0.5)
    env.clock.set(1)
    env.client.pause(instance_id)
    assert env.engine.complete_activity(task, {"ran_first": 1}, at(2), decide=True) is None
    doc = env.describe(instance_id)
    assert (doc["status"], doc["state"]) == ("paused", {"ran_first": 1})


def assert_failed_by_deadline(env, instance_id: str) -> None:
    doc = env.describe(instance_id)
    assert doc["status"] == "failed"
    assert (doc["failure"]["failure_category"], doc["failure"]["deadline_at"]) == (
        "deadline", DEADLINE_AT)
    types = env.event_types(instance_id)
    assert types[-2:] == ["WorkflowDeadlineExceeded", "WorkflowFailed"]
    assert "WorkflowCompleted" not in types


@pytest.mark.parametrize("first", ["sweep", "decision"])
def test_resume_after_the_deadline_fails_whichever_of_sweep_and_decision_comes_first(
        checking, first):
    env = checking
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")

    worker_id = env.worker.worker_id
    if first == "sweep":
        # The tick claims; the decision comes while on_deadline runs, then the record.
        [claim] = env.engine.claim_expired_deadlines(worker_id, at(100), worker_alive)
        assert env.decide(100) == 1
    else:
        assert env.decide(100) == 1
        assert env.describe("s1")["run"]["deadline_claimed_at"] == at(100)
        [claim] = env.engine.claim_expired_deadlines(worker_id, at(100), worker_alive)
    run_handler(claim.on_deadline, claim.state)
    assert env.engine.record_deadline_exceeded(claim, None, at(100)) is True

    assert (claim.workflow_instance_id, claim.reclaimed) == ("s1", False)
    assert_failed_by_deadline(env, "s1")
    assert env.event_types("s1").count("WorkflowDeadlineExceeded") == 1
    scheduled = [e["attributes"]["step"] for e in env.events("s1", "ActivityScheduled")]
    assert scheduled == ["first"]
    assert wfh.deadline_calls == [{"ran_first": 1}]
    env.run(200)
    assert env.describe("s1")["status"] == "failed"


def test_a_decision_hands_the_deadline_over_at_its_instant_and_not_before(checking):
    env = checking
    paused_after_first_step(env, "early")
    paused_after_first_step(env, "on-time")
    env.clock.set(80)
    env.client.resume("early")
    env.client.resume("on-time")

    env.engine.complete_workflow_task(env.engine.claim_workflow_task("w", at(89.999)),
                                      at(89.999), check_deadlines=True)
    env.engine.complete_workflow_task(env.engine.claim_workflow_task("w", at(90)), at(90),
                                      check_deadlines=True)

    early, on_time = env.describe("early"), env.describe("on-time")
    assert early["run"]["deadline_claimed_at"] is None
    assert [a["step"] for a in early["activities"]] == ["first", "last"]
    assert on_time["run"]["deadline_claimed_at"] == DEADLINE_AT
    assert [a["step"] for a in on_time["activities"]] == ["first"]


def test_a_signal_after_the_deadline_fails_the_workflow_instead_of_going_on(checking):
    env = checking
    env.start("approval", "a1", now=0)
    env.run(0)
    assert check(env, 120) == []              # waiting: exempt while it waits
    env.clock.set(150)
    env.client.signal("a1", "approved", {"by": "ops"})

    assert check(env, 150) == []              # still waiting until a decision takes the signal
    env.decide(150)

    doc = env.describe("a1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("running", None)
    assert doc["run"]["deadline_claimed_at"] is not None
    failed = check(env, 150)
    assert [f["workflow_instance_id"] for f in failed] == ["a1"]
    assert_failed_by_deadline(env, "a1")
    assert "ActivityScheduled" not in env.event_types("a1")
    assert wfh.deadline_calls == [{"by": "ops"}]


@pytest.mark.parametrize("first", ["sweep", "decision"])
def test_a_retry_that_keeps_a_passed_deadline_fails_again(checking, first):
    env = checking
    env.start("parked", "p1", now=0)
    env.decide(0)
    check(env, 90)
    assert env.describe("p1")["status"] == "failed"
    env.clock.set(100)

    retried = env.client.retry("p1", keep_deadline=True)

    assert retried["deadline_change"] == "kept"
    if first == "sweep":
        check(env, 100)
        env.decide(100)
    else:
        env.decide(100)
        check(env, 100)
    assert_failed_by_deadline(env, "p1")
    types = env.event_types("p1")
    after_retry = types[types.index("WorkflowRetried"):]
    assert "ActivityScheduled" not in after_retry
    assert after_retry.count("WorkflowDeadlineExceeded") == 1
    # on_deadline ran for this deadline instant before the retry: it does not run again.
    assert len(wfh.deadline_calls) == 1


@pytest.mark.parametrize("outcome", ["result", "failure"])
def test_a_result_arriving_after_the_deadline_is_discarded_and_the_workflow_fails(
        checking, outcome):
    env = checking
    env.start("stepwise", "s1", now=0)
    env.decide(0)
    task = env.claim(1)

    if outcome == "result":
        rejected = env.engine.complete_activity(task, {"late": True}, at(95), decide=True,
                                                check_deadlines=True)
    else:
        rejected = env.engine.fail_activity(task, "ValueError", "late failure", at(95),
                                            decide=True, check_deadlines=True)

    assert rejected == f"the workflow's deadline expired at {clock.iso(DEADLINE_AT)}"
    doc = env.describe("s1")
    assert doc["state"] == {}
    assert doc["activities"][0]["status"] == "started"
    assert check(env, 95)[0]["workflow_instance_id"] == "s1"
    assert_failed_by_deadline(env, "s1")
    assert env.describe("s1")["activities"][0]["status"] == "cancelled"
    assert "ActivityCompleted" not in env.event_types("s1")
    assert "ActivityFailed" not in env.event_types("s1")


def test_a_result_just_before_the_deadline_is_applied_and_the_next_step_never_starts(checking):
    env = checking
    env.start("stepwise", "s1", now=0)
    env.decide(0)
    task = env.claim(1)
    assert env.engine.complete_activity(task, {"ran_first": 1}, at(89.999),
                                        check_deadlines=True) is None

    env.decide(90)

    assert env.describe("s1")["state"] == {"ran_first": 1}
    check(env, 90)
    assert_failed_by_deadline(env, "s1")
    assert [a["step"] for a in env.describe("s1")["activities"]] == ["first"]


def test_where_deadlines_are_not_checked_decisions_proceed_past_them(make_env):
    """`wfctl work --once` and the CLI: a resumed workflow goes on; only a check fails it."""
    env = make_env(DEFINITIONS)
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")

    env.run(100)

    doc = env.describe("s1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"ran_first": 1, "ran_last": 1}
    assert wfh.deadline_calls == []


def test_the_long_running_workers_watchdog_hands_a_passed_deadline_over(make_env):
    """Where `work --once` goes on past the deadline (above), the long-running worker's
    watchdog decides the same workflow task by handing the run to the deadline path."""
    env = make_env(DEFINITIONS)
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")

    assert env.worker.watchdog.run_once(at(100))

    doc = env.describe("s1")
    assert doc["run"]["deadline_claimed_at"] == at(100)
    assert [a["step"] for a in doc["activities"]] == ["first"]


@pytest.mark.parametrize("long_running", [True, False])
def test_a_result_past_the_deadline_is_discarded_by_a_long_running_slot_only(make_env,
                                                                            long_running):
    """A handler that ran across the deadline: the long-running worker's slot rejects its
    result and hands the run over; a `--once` pass applies it and goes on."""
    env = make_env(DEFINITIONS)
    env.start("stepwise", "s1", now=0)
    env.decide(0)
    # The attempt is claimed, run, and its result recorded at the worker's clock: 95 s.
    env.worker_clock.set(95)

    assert env.worker.slots[0].run_once(at(95), check_deadlines=long_running)

    doc = env.describe("s1")
    if long_running:
        assert doc["state"] == {}
        assert doc["run"]["deadline_claimed_at"] == at(95)
    else:
        assert doc["state"] == {"ran_first": 1}
        assert doc["run"]["deadline_claimed_at"] is None


# the deadline runner's entry points


def test_a_decisions_claim_wakes_the_runner_and_is_handed_out_once_as_fresh(checking):
    env = checking
    woken = []
    env.engine.add_deadline_waker(lambda: woken.append(True))
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")
    assert env.engine.earliest_deadline() == at(90)   # running and past: due at once

    env.decide(100)

    assert woken == [True]
    assert env.engine.earliest_deadline() == at(90)   # claimed, yet the runner has work
    worker_id = env.worker.worker_id
    claims = env.engine.claim_expired_deadlines(worker_id, at(100), worker_alive)
    assert [(c.workflow_instance_id, c.reclaimed) for c in claims] == [("s1", False)]
    assert env.engine.earliest_deadline() is None
    # while its handler runs, an overlapping call does not hand it out again
    assert env.engine.claim_expired_deadlines(worker_id, at(101), worker_alive) == []
    assert env.engine.record_deadline_exceeded(claims[0], None, at(102)) is True
    assert env.engine.claim_expired_deadlines(worker_id, at(103), worker_alive) == []
    assert_failed_by_deadline(env, "s1")


def test_a_claim_dropped_by_a_failed_record_is_taken_up_again_as_reclaimed(
        checking, monkeypatch):
    env = checking
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")
    env.decide(100)
    worker_id = env.worker.worker_id
    [claim] = env.engine.claim_expired_deadlines(worker_id, at(100), worker_alive)

    def full(*args: Any) -> None:
        raise StoreUnavailable("full", "wfctl.db: the disk is full")

    monkeypatch.setattr(deadlines, "cancel_open_work", full)
    with pytest.raises(StoreUnavailable):
        env.engine.record_deadline_exceeded(claim, None, at(101))
    monkeypatch.undo()

    [again] = env.engine.claim_expired_deadlines(worker_id, at(102), worker_alive)
    assert (again.workflow_instance_id, again.reclaimed) == ("s1", True)
    assert env.engine.record_deadline_exceeded(again, None, at(103)) is True
    assert_failed_by_deadline(env, "s1")


def test_another_live_worker_leaves_a_decisions_claim_alone_until_its_owner_dies(checking):
    env = checking
    paused_after_first_step(env, "s1")
    env.clock.set(100)
    env.client.resume("s1")
    env.decide(100)
    other = Worker(env.engine, WorkerOptions(queues=()))
    other.register(at(100))

    assert check(env, 101, other.worker_id) == []
    assert env.describe("s1")["status"] == "running"

    env.worker.unregister(at(110))
    failed = check(env, 111, other.worker_id)

    assert [(f["workflow_instance_id"], f["reclaimed"]) for f in failed] == [("s1", True)]
    assert_failed_by_deadline(env, "s1")
