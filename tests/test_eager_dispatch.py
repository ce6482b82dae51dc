"""A slot that records a step's outcome takes the next activity that outcome scheduled, in the
same transaction (eager dispatch): a run it follows goes on without waiting behind older work,
with the history a claim from the queue would have written."""

from __future__ import annotations

import pytest
import wfh
from conftest import at

from wfctl.worker import Worker, WorkerOptions

TWO = """
version: 1
workflows:
  two:
    steps:
      - activity: wfh:trace
        name: first
      - activity: wfh:trace
        name: second
        start_to_close: 5m
  elsewhere:
    steps:
      - activity: wfh:trace
        name: first
      - activity: wfh:trace
        name: second
        queue: other
  branches:
    steps:
      - activity: wfh:trace
        name: first
      - parallel:
          - activity: wfh:trace
            name: left
          - activity: wfh:trace
            name: right
"""


@pytest.fixture(autouse=True)
def _fresh_trace():
    wfh.traced.clear()
    yield
    wfh.traced.clear()


def test_a_slot_runs_the_next_step_of_the_run_it_just_advanced_before_older_work(make_env):
    env = make_env(TWO)
    env.start("two", "t0")
    env.start("two", "t1")

    assert env.run(0) is True

    assert wfh.traced == [("t0", "first"), ("t0", "second"), ("t1", "first"), ("t1", "second")]
    for instance in ("t0", "t1"):
        assert env.describe(instance)["status"] == "completed"


def test_the_history_of_a_step_taken_at_once_is_that_of_a_claim(make_env):
    env = make_env(TWO)
    env.start("two", "t0")

    env.run(0)

    history = env.history("t0")
    types = [event["event_type"] for event in history]
    assert types == [
        "WorkflowStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted",
        "WorkflowTaskCompleted", "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
        "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
        "WorkflowCompleted",
    ]
    scheduled = env.events("t0", "ActivityScheduled")[1]
    started = env.events("t0", "ActivityStarted")[1]
    attributes = started["attributes"]
    assert attributes["step"] == "second"
    assert attributes["worker_id"] == env.worker.worker_id
    assert attributes["scheduled_event_id"] == scheduled["seq"]
    assert attributes["close_deadline_at"] == at(300)
    second = env.describe("t0")["activities"][1]
    assert (second["step"], second["status"], second["attempt"]) == ("second", "completed", 1)


def test_an_activity_on_a_queue_the_worker_does_not_serve_waits_for_a_worker_that_does(make_env):
    env = make_env(TWO)
    env.start("elsewhere", "t0")

    env.run(0)

    assert wfh.traced == [("t0", "first")]
    second = env.describe("t0")["activities"][1]
    assert (second["step"], second["status"]) == ("second", "scheduled")
    other = Worker(env.engine, WorkerOptions(queues=("other",), concurrency=1),
                   clock=env.worker_clock)
    assert other.run_once(env.worker_clock.set(1)) is True
    assert wfh.traced == [("t0", "first"), ("t0", "second")]
    assert env.describe("t0")["status"] == "completed"


def test_a_parallel_steps_branches_are_claimed_from_the_queue_in_order(make_env):
    env = make_env(TWO)
    env.start("branches", "t0")
    env.start("two", "t1")

    env.run(0)

    # t0's branches were scheduled with t1's first step waiting before them: the queue's order.
    assert wfh.traced[:2] == [("t0", "first"), ("t1", "first")]
    assert sorted(wfh.traced[2:]) == [("t0", "left"), ("t0", "right"), ("t1", "second")]
    assert env.describe("t0")["status"] == "completed"


def test_a_worker_near_its_max_tasks_takes_no_step_beyond_them(make_env):
    env = make_env(TWO)
    env.start("two", "t0")
    env.start("two", "t1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1, max_tasks=3),
                    clock=env.worker_clock)

    worker.run_once(env.worker_clock.set(0))

    assert wfh.traced == [("t0", "first"), ("t0", "second"), ("t1", "first")]
    second = env.describe("t1")["activities"][1]
    assert (second["step"], second["status"]) == ("second", "scheduled")
