"""Heartbeats: throttled writes and events, details carried to the next attempt, cancellation."""

from __future__ import annotations

from typing import Any

import pytest
import wfh_activities
from conftest import at

from wfctl import ActivityCancelled, ActivityContext
from wfctl.lang.context import HeartbeatBuffer

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends


class FakeMonotonic:
    """A monotonic clock the test moves by hand, in whole milliseconds so sums stay exact."""

    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> float:
        return self.ms / 1000


class Writes:
    """Stands in for the engine: remembers each write; answers False once `reject` is set."""

    def __init__(self) -> None:
        self.written: list[Any] = []
        self.reject = False

    def __call__(self, details: Any) -> bool:
        if self.reject:
            return False
        self.written.append(details)
        return True


@pytest.fixture(autouse=True)
def _clean_handlers():
    yield
    wfh_activities.before_heartbeat.clear()
    wfh_activities.seen.clear()


# HeartbeatBuffer, with a fake monotonic clock


def test_the_first_heartbeat_is_written_at_once_and_the_next_wait_for_the_interval():
    monotonic, writes = FakeMonotonic(), Writes()
    buffer = HeartbeatBuffer(writes, heartbeat_timeout=None, monotonic=monotonic)

    buffer.beat({"n": 1})
    monotonic.ms = 999
    buffer.beat({"n": 2})
    buffer.beat({"n": 3})
    assert writes.written == [{"n": 1}]

    monotonic.ms = 1000
    buffer.beat({"n": 4})
    assert writes.written == [{"n": 1}, {"n": 4}]


def test_ten_thousand_heartbeats_cost_one_write_per_interval():
    monotonic, writes = FakeMonotonic(), Writes()
    buffer = HeartbeatBuffer(writes, heartbeat_timeout=30, monotonic=monotonic)

    for n in range(10_000):
        monotonic.ms = n
        buffer.beat(n)

    assert writes.written == [0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000]
    assert buffer.take_pending() == 9999


def test_pending_details_are_flushed_once_the_interval_passed():
    monotonic, writes = FakeMonotonic(), Writes()
    buffer = HeartbeatBuffer(writes, heartbeat_timeout=None, monotonic=monotonic)
    buffer.beat("first")
    buffer.beat("latest")

    monotonic.ms = 500
    buffer.flush_if_due()
    assert writes.written == ["first"]
    monotonic.ms = 1000
    buffer.flush_if_due()
    assert writes.written == ["first", "latest"]
    monotonic.ms = 5000
    buffer.flush_if_due()
    assert writes.written == ["first", "latest"], "nothing pending, nothing written"


def test_the_write_interval_is_a_third_of_the_heartbeat_timeout_and_at_most_a_second():
    assert HeartbeatBuffer(Writes(), heartbeat_timeout=1.5).interval == 0.5
    assert HeartbeatBuffer(Writes(), heartbeat_timeout=3).interval == 1.0
    assert HeartbeatBuffer(Writes(), heartbeat_timeout=600).interval == 1.0
    assert HeartbeatBuffer(Writes(), heartbeat_timeout=None).interval == 1.0


def test_the_unwritten_latest_details_go_with_the_attempts_result():
    monotonic, writes = FakeMonotonic(), Writes()
    buffer = HeartbeatBuffer(writes, heartbeat_timeout=None, monotonic=monotonic)
    buffer.beat({"n": 1})
    buffer.beat({"n": 2})

    assert buffer.take_pending() == {"n": 2}
    monotonic.ms = 5000
    buffer.flush_if_due()
    assert writes.written == [{"n": 1}], "taken details are not written twice"


def test_once_a_write_is_rejected_every_heartbeat_raises_activity_cancelled():
    monotonic, writes = FakeMonotonic(), Writes()
    buffer = HeartbeatBuffer(writes, heartbeat_timeout=None, monotonic=monotonic)
    buffer.beat(1)
    writes.reject = True
    monotonic.ms = 1000

    with pytest.raises(ActivityCancelled):
        buffer.beat(2)
    assert buffer.cancelled is True
    monotonic.ms = 1001
    with pytest.raises(ActivityCancelled):
        buffer.beat(3)
    assert writes.written == [1]


# ActivityHeartbeatRecorded, with an explicit now

HEARTBEATING = """
    version: 1
    workflows:
      t:
        steps:
          - activity: wfh:noop
            name: scan
            heartbeat: 10s
            max_attempts: 3
            backoff: [1s]
"""


def test_heartbeat_events_are_throttled_to_one_per_interval_while_every_call_moves_the_deadline(
        make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)

    for second in range(26):
        assert env.engine.record_heartbeat(task, {"n": second}, at(second)) is True

    events = env.events("a1", "ActivityHeartbeatRecorded")
    assert [(e["at"], e["attributes"]["details"]) for e in events] == [
        (at(0), {"n": 0}), (at(10), {"n": 10}), (at(20), {"n": 20}),
    ]
    first = events[0]["attributes"]
    assert first["attempt"] == 1
    assert first["heartbeat_deadline_at"] == at(10)
    assert first["scheduled_event_id"] == env.events("a1", "ActivityScheduled")[0]["seq"]
    assert first["started_event_id"] == env.events("a1", "ActivityStarted")[0]["seq"]
    activity = env.describe("a1")["activities"][0]
    assert activity["heartbeat_deadline_at"] == at(35)
    assert activity["last_heartbeat_at"] == at(25)
    assert activity["last_heartbeat_details"] == {"n": 25}


def test_a_new_attempt_records_its_first_heartbeat_at_once(make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    first = env.claim(0)
    env.engine.record_heartbeat(first, {"n": 1}, at(0))
    env.engine.fail_activity(first, "ConnectionError", "reset", at(1))
    second = env.claim(2)

    env.engine.record_heartbeat(second, {"n": 2}, at(3))
    env.engine.record_heartbeat(second, {"n": 3}, at(4))

    events = env.events("a1", "ActivityHeartbeatRecorded")
    assert [(e["attributes"]["attempt"], e["attributes"]["details"]) for e in events] == [
        (1, {"n": 1}), (2, {"n": 2}),
    ]


def test_without_a_heartbeat_timeout_heartbeats_are_recorded_at_most_every_30_seconds(make_env):
    env = make_env("""
        version: 1
        workflows:
          t:
            steps:
              - activity: wfh:noop
    """)
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)

    for second in range(0, 70, 5):
        env.engine.record_heartbeat(task, second, at(second))

    events = env.events("a1", "ActivityHeartbeatRecorded")
    assert [e["attributes"]["details"] for e in events] == [0, 30, 60]
    activity = env.describe("a1")["activities"][0]
    assert activity["heartbeat_deadline_at"] is None
    assert activity["last_heartbeat_details"] == 65


# details carried to the next attempt


def test_the_next_attempt_sees_the_details_of_the_last_heartbeat_before_a_timeout(make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    first = env.claim(0)
    assert first.last_heartbeat_details is None
    env.engine.record_heartbeat(first, {"processed": 5}, at(5))
    env.engine.record_heartbeat(first, {"processed": 6}, at(6))
    env.sweep(16)

    second = env.claim(17)

    assert second.attempt == 2
    assert second.last_heartbeat_details == {"processed": 6}


def test_the_next_attempt_sees_the_latest_heartbeat_call_even_if_it_was_not_written(make_env):
    env = make_env("""
        version: 1
        workflows:
          t:
            steps:
              - activity: wfh_activities:show_last_details
                name: scan
                max_attempts: 2
                backoff: [1s]
    """)
    env.start("t", "a1")

    env.run(0)
    env.run(1)

    assert wfh_activities.seen == [(1, None), (2, {"attempt": 1, "n": 5})]
    recorded = [e["attributes"] for e in env.events("a1", "ActivityHeartbeatRecorded")]
    assert [(r["attempt"], r["details"]) for r in recorded] == [
        (1, {"attempt": 1, "n": 1}), (2, {"attempt": 2, "n": 1}),
    ]
    assert env.describe("a1")["status"] == "completed"


def test_a_released_attempt_passes_its_unwritten_details_to_the_next(make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    first = env.claim(0)
    env.engine.record_heartbeat(first, {"processed": 1}, at(1))

    env.engine.release_activity(first, at(2), "worker_shutdown",
                                heartbeat_details={"processed": 9})

    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["reason"], retry["retry_available_at"]) == ("worker_shutdown", at(2))
    assert env.claim(2).last_heartbeat_details == {"processed": 9}


# ActivityCancelled from heartbeat()


def context_for(env, task, seconds: float) -> ActivityContext:
    """The context the worker builds, with heartbeats written at T0 + seconds."""
    buffer = HeartbeatBuffer(lambda details: env.engine.record_heartbeat(task, details,
                                                                          at(seconds)),
                             task.heartbeat_timeout, monotonic=FakeMonotonic())
    return ActivityContext(
        workflow_id=task.workflow_instance_id, run_id=task.workflow_run_id,
        activity_id=task.activity_id, step=task.step, attempt=task.attempt,
        max_attempts=task.max_attempts, last_heartbeat_details=task.last_heartbeat_details,
        schedule_to_close_deadline_at=task.schedule_to_close_deadline_at,
        close_deadline_at=task.close_deadline_at,
        heartbeat_deadline_at=task.heartbeat_deadline_at,
        heartbeat_timeout=task.heartbeat_timeout, heartbeats=buffer,
    )


def test_heartbeat_of_a_current_attempt_is_accepted(make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    ctx = context_for(env, task, 5)

    ctx.heartbeat({"processed": 3})

    assert ctx.cancelled is False
    activity = env.describe("a1")["activities"][0]
    assert activity["last_heartbeat_details"] == {"processed": 3}
    assert activity["heartbeat_deadline_at"] == at(15)


def test_heartbeat_raises_activity_cancelled_once_the_attempt_timed_out(make_env):
    env = make_env(HEARTBEATING)
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    env.sweep(10)
    ctx = context_for(env, task, 11)

    with pytest.raises(ActivityCancelled):
        ctx.heartbeat({"processed": 3})
    assert ctx.cancelled is True
    assert env.describe("a1")["activities"][0]["last_heartbeat_details"] is None


def test_heartbeat_raises_activity_cancelled_once_the_workflow_closed(make_env):
    env = make_env("""
        version: 1
        workflows:
          t:
            steps:
              - activity: wfh_activities:heartbeat_after_hooks
                name: scan
    """)
    env.start("t", "a1")
    env.decide(0)
    wfh_activities.before_heartbeat.append(lambda: env.client.terminate("a1", "operator"))
    env.clock.set(1)

    env.run(1)

    assert len(wfh_activities.seen) == 1
    assert isinstance(wfh_activities.seen[0], ActivityCancelled)
    doc = env.describe("a1")
    assert doc["status"] == "terminated"
    assert doc["activities"][0]["status"] == "cancelled"
    assert doc["state"] == {}
    types = env.event_types("a1")
    assert "ActivityCompleted" not in types and "ActivityFailed" not in types
