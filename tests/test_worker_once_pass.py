"""A `work --once` pass with several slots ends only once nothing is left to run: the
interleavings of its slots, forced one by one (no sleeps)."""

from __future__ import annotations

from conftest import at

from wfctl.worker import Worker, WorkerOptions
from wfctl.worker.loop import Loop
from wfctl.worker.slots import DUE_LOOK, Slot

TWO_STEPS = """
version: 1
workflows:
  two:
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh:mark
        name: second
"""


def test_an_attempt_waiting_in_the_pool_keeps_the_pass_going(make_env, monkeypatch):
    """A slot records the outcome of `first` and the same batch claims `second` into the pool;
    asked between that pass and the one that runs `second`, the pass is not over, and
    `second` runs in it."""
    env = make_env(TWO_STEPS)
    env.start("two", "t1")
    # One slot: no other can take `second` from the pool before the question is asked.
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=env.worker_clock)
    answers: list[bool] = []

    def pause(slot: Slot, acted: bool) -> float:
        if slot.steps.pooled() and not answers:
            answers.append(worker._pass_over())
        return Loop.pause(slot, acted)

    monkeypatch.setattr(Slot, "pause", pause)

    assert worker.run_once(env.worker_clock.set(0)) is True

    assert answers == [False]
    assert env.describe("t1")["status"] == "completed"
    assert env.describe("t1")["state"] == {"ran_first": 1, "ran_second": 1}
    assert "ActivityRetryScheduled" not in env.event_types("t1"), "nothing was given back"


def test_a_pass_runs_every_ready_task_and_the_next_pass_serves_with_the_same_slots(make_env):
    env = make_env(TWO_STEPS)
    for n in range(3):
        env.start("two", f"t{n}")
    worker = Worker(env.engine, WorkerOptions(concurrency=4), clock=env.worker_clock)

    assert worker.run_once(env.worker_clock.set(0)) is True

    assert [env.describe(f"t{n}")["status"] for n in range(3)] == ["completed"] * 3
    assert all(slot.stopped.is_set() for slot in worker.slots)
    assert worker.attempts.running() == []
    assert worker.run_once(env.worker_clock.set(1)) is False

    env.start("two", "t3", now=1)
    assert worker.run_once(env.worker_clock.set(2)) is True
    assert env.describe("t3")["status"] == "completed"


def test_a_slot_that_finds_only_an_activity_past_its_schedule_deadline_looks_again_later(
        make_env):
    """It is due, yet no slot may claim it: the watchdog times it out. A slot that looked again
    at once would spin for as long as another slot of the pass runs its handler."""
    env = make_env("""
        version: 1
        workflows:
          late:
            steps:
              - activity: wfh:mark
                schedule_to_start: 1s
    """)
    env.start("late", "l1")
    env.decide(0)
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=env.worker_clock)
    env.worker_clock.set(5)

    assert worker.slots[0].run_once(at(5), check_deadlines=False) is False
    assert worker.slots[0].idle_wait() == DUE_LOOK
