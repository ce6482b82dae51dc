"""Workflows run end to end: activities, state, retries, timers, parallel, signals, queues."""

from __future__ import annotations

import pytest
import wfh
from conftest import T0, at

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends

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


def test_three_activities_complete_and_merge_their_results_into_state(make_env):
    env = make_env(ETL)
    env.start("etl", "e1", input={"source": "s3://x"})

    assert env.run(1) is True

    doc = env.describe("e1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"source": "s3://x", "ran_extract": 1, "ran_transform": 1,
                            "ran_load": 1}
    assert [a["step"] for a in doc["activities"]] == ["extract", "transform", "load"]
    assert all(a["status"] == "completed" for a in doc["activities"])


def test_history_records_each_step_with_event_references(make_env):
    env = make_env(ETL)
    env.start("etl", "e1")
    env.run(1)

    types = env.event_types("e1")
    assert types[:4] == ["WorkflowStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted",
                         "WorkflowTaskCompleted"]
    assert types.count("ActivityCompleted") == 3
    assert types[-1] == "WorkflowCompleted"
    scheduled = env.events("e1", "ActivityScheduled")[0]
    started = env.events("e1", "ActivityStarted")[0]
    completed = env.events("e1", "ActivityCompleted")[0]
    assert started["attributes"]["scheduled_event_id"] == scheduled["seq"]
    assert completed["attributes"]["scheduled_event_id"] == scheduled["seq"]
    assert completed["attributes"]["started_event_id"] == started["seq"]
    assert [e["seq"] for e in env.history("e1")] == list(range(1, len(types) + 1))


def test_workflow_started_carries_timeouts_and_deadlines(make_env):
    env = make_env("""
        version: 1
        workflows:
          timed:
            execution_timeout: 2h
            run_timeout: 1h
            deadline: {hours: 24}
            steps:
              - activity: wfh:noop
    """)
    result = env.start("timed", "t1")

    assert result == {
        "started": True, "outcome": "started_new", "workflow_instance_id": "t1",
        "workflow_run_id": result["workflow_run_id"], "workflow_type": "timed",
        "execution_deadline_at": at(7200),
        "run_deadline_at": at(3600),
        "deadline_at": at(86400),
    }
    started = env.events("t1", "WorkflowStarted")[0]["attributes"]
    assert started["execution_timeout_seconds"] == 7200
    assert started["run_timeout_seconds"] == 3600
    assert started["execution_deadline_at"] == at(7200)
    assert started["run_deadline_at"] == at(3600)
    assert started["deadline_at"] == at(86400)


def test_start_overrides_replace_the_types_timeouts(make_env):
    env = make_env("""
        version: 1
        workflows:
          timed:
            execution_timeout: 2h
            run_timeout: 1h
            steps:
              - activity: wfh:noop
    """)
    env.start("timed", "t1", execution_timeout="PT30M", run_timeout="NONE", deadline=90)

    doc = env.describe("t1")
    assert doc["execution_timeout_seconds"] == 1800
    assert doc["deadline_seconds"] == 90
    assert doc["run"]["run_timeout_seconds"] is None
    assert doc["run"]["run_deadline_at"] is None
    assert doc["deadline_at"] == at(90)


def test_a_handler_exception_is_retried_after_its_backoff(make_env):
    env = make_env("""
        version: 1
        workflows:
          flaky:
            steps:
              - activity: wfh:fail_until
                max_attempts: 3
                backoff: [5s, 10s]
    """)
    env.start("flaky", "f1", input={"succeed_on": 3})

    env.run(0)
    retry = env.events("f1", "ActivityRetryScheduled")[0]["attributes"]
    traceback = retry["failure"].pop("traceback")
    assert retry["failure"] == {"exception_class": "ConnectionError",
                                "message": "attempt 1 failed"}
    assert traceback.startswith("Traceback (most recent call last):")
    assert traceback.endswith("ConnectionError: attempt 1 failed\n")
    assert retry["retry_available_at"] == at(5)
    assert retry["backoff_seconds"] == 5
    env.run(4.999)
    assert len(env.events("f1", "ActivityStarted")) == 1
    env.run(5)
    assert len(env.events("f1", "ActivityRetryScheduled")) == 2
    assert env.events("f1", "ActivityRetryScheduled")[1]["attributes"]["backoff_seconds"] == 10
    env.run(15)
    doc = env.describe("f1")
    assert doc["status"] == "completed"
    assert doc["state"]["succeeded_on"] == 3
    assert doc["activities"][0]["attempt"] == 3


def test_exhausted_attempts_fail_the_workflow_with_the_error(make_env):
    env = make_env("""
        version: 1
        workflows:
          flaky:
            steps:
              - activity: wfh:fail_until
                max_attempts: 2
                backoff: {initial: 1s, coefficient: 3, max: 1m}
    """)
    env.start("flaky", "f1", input={"succeed_on": 9})
    env.run(0)
    env.run(1)

    failed = env.events("f1", "ActivityFailed")[0]["attributes"]
    assert failed["exception_class"] == "ConnectionError"
    assert failed["message"] == "attempt 2 failed"
    doc = env.describe("f1")
    assert doc["status"] == "failed"
    assert doc["failure"]["failure_category"] == "activity"
    assert doc["failure"]["exception_class"] == "ConnectionError"
    assert doc["activities"][0]["retry_policy"]["backoff_seconds"] == [1]


def test_non_retryable_exception_fails_at_once_with_attempts_left(make_env):
    env = make_env("""
        version: 1
        workflows:
          strict:
            steps:
              - activity: wfh:value_error
                max_attempts: 5
                non_retryable: [ValueError]
    """)
    env.start("strict", "s1")
    env.run(0)

    assert env.event_types("s1").count("ActivityStarted") == 1
    assert env.events("s1", "ActivityFailed")[0]["attributes"]["retryable"] is False
    assert env.describe("s1")["status"] == "failed"


def test_a_handler_returning_a_non_dict_fails_its_attempts_under_the_retry_policy(make_env):
    env = make_env("""
        version: 1
        workflows:
          odd:
            steps:
              - activity: wfh:returns_list
                max_attempts: 2
                backoff: [1s]
    """)
    env.start("odd", "o1")
    env.run(0)
    env.run(1)

    assert env.event_types("o1").count("ActivityStarted") == 2
    failed = env.events("o1", "ActivityFailed")[0]["attributes"]
    assert (failed["exception_class"], failed["message"]) == (
        "TypeError", "step 'returns_list' returned list; expected a dict of JSON values or None")
    assert env.describe("o1")["status"] == "failed"


def test_delay_is_a_durable_timer_fired_by_the_watchdog(make_env):
    env = make_env("""
        version: 1
        workflows:
          later:
            steps:
              - delay: 1h
              - activity: wfh:noop
    """)
    env.start("later", "l1")
    env.run(0)
    doc = env.describe("l1")
    assert doc["timers"] == [{"timer_id": doc["timers"][0]["timer_id"], "step": "delay 1h",
                              "kind": "delay", "fire_at": at(3600),
                              "status": "scheduled"}]
    assert doc["status"] == "running"
    assert doc["run"]["wait_kind"] == "timer"

    env.run(3599)
    assert env.describe("l1")["timers"][0]["status"] == "scheduled"
    env.run(3600)
    assert env.describe("l1")["status"] == "completed"
    assert "TimerFired" in env.event_types("l1")


# A parallel step of two branches, then one more step (the end of a `fan` workflow's steps).
FAN_TAIL = """
              - parallel:
                  - activity: wfh:mark
                    name: a
                  - activity: wfh:mark
                    name: b
              - activity: wfh:mark
                name: after
"""


def test_parallel_branches_all_run_and_the_step_waits_for_all(make_env):
    env = make_env("""
        version: 1
        workflows:
          fan:
            steps:""" + FAN_TAIL)
    env.start("fan", "p1")
    env.decide(0)
    assert [a["step"] for a in env.describe("p1")["activities"]] == ["a", "b"]
    env.run(0)
    assert env.describe("p1")["state"] == {"ran_a": 1, "ran_b": 1, "ran_after": 1}


def test_each_completion_names_the_events_that_scheduled_and_started_its_own_attempt(make_env):
    """A completion's event is made from the worker's task, not read back from the row: after
    a retry and on each branch of a parallel step it still names its own attempt's events."""
    env = make_env("""
        version: 1
        workflows:
          fan:
            steps:
              - activity: wfh:fail_until
                name: flaky
                max_attempts: 2
                backoff: [1s]""" + FAN_TAIL)
    env.start("fan", "p1")
    env.run(0)
    env.run(1)
    env.run(2)
    assert env.describe("p1")["status"] == "completed"
    history = env.history("p1")
    scheduled = {e["attributes"]["activity_id"]: e["seq"] for e in history
                 if e["event_type"] == "ActivityScheduled"}
    started = {(e["attributes"]["activity_id"], e["attributes"]["attempt"]): e["seq"]
               for e in history if e["event_type"] == "ActivityStarted"}
    completed = [e["attributes"] for e in history if e["event_type"] == "ActivityCompleted"]
    assert [(c["step"], c["attempt"]) for c in completed] == \
        [("flaky", 2), ("a", 1), ("b", 1), ("after", 1)]
    for attributes in completed:
        assert attributes["scheduled_event_id"] == scheduled[attributes["activity_id"]]
        assert attributes["started_event_id"] == \
            started[attributes["activity_id"], attributes["attempt"]]
    assert len(started) == 5


def test_each_activity_records_its_own_steps_retry_policy(make_env):
    """Steps of different policies, scheduled one after another in one worker's batches: each
    activity's row and its ActivityScheduled event hold its own step's policy."""
    env = make_env("""
        version: 1
        workflows:
          mixed:
            steps:
              - activity: wfh:mark
                name: one
                max_attempts: 2
                backoff: [1s]
              - activity: wfh:mark
                name: two
                max_attempts: 5
                non_retryable: [ValueError]
              - activity: wfh:mark
                name: three
                max_attempts: 2
                backoff: [1s]
    """)
    for n in range(3):
        env.start("mixed", f"m{n}")
    env.run(0)
    wanted = {"one": (2, [1], []), "two": (5, [1, 2, 4, 8], ["ValueError"]),
              "three": (2, [1], [])}
    for n in range(3):
        doc = env.describe(f"m{n}")
        assert doc["status"] == "completed"
        for activity in doc["activities"]:
            policy = activity["retry_policy"]
            assert (policy["max_attempts"], policy["backoff_seconds"],
                    policy["non_retryable"]) == wanted[activity["step"]]
        for event in env.events(f"m{n}", "ActivityScheduled"):
            attributes = event["attributes"]
            policy = attributes["retry_policy"]
            assert (policy["max_attempts"], policy["backoff_seconds"],
                    policy["non_retryable"]) == wanted[attributes["step"]]


def test_a_failed_parallel_branch_fails_the_workflow_and_cancels_the_others(make_env):
    env = make_env("""
        version: 1
        workflows:
          fan:
            steps:
              - parallel:
                  - activity: wfh:value_error
                    max_attempts: 1
                  - activity: wfh:noop
                    queue: elsewhere
    """)
    env.start("fan", "p1")
    env.run(0)

    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert [a["status"] for a in doc["activities"]] == ["failed", "cancelled"]
    assert "ActivityCancelled" in env.event_types("p1")


def test_signal_waits_then_merges_its_data(make_env):
    env = make_env("""
        version: 1
        workflows:
          approval:
            steps:
              - wait_for_signal: approved
              - activity: wfh:noop
    """)
    env.start("approval", "a1")
    env.run(0)
    doc = env.describe("a1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("waiting", "signal")

    env.clock.set(10)
    assert env.client.signal("a1", "approved", {"by": "ops"})["buffered"] is False
    env.run(10)
    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"by": "ops"}
    assert env.event_types("a1").index("SignalWaitOpened") < \
        env.event_types("a1").index("SignalReceived")


def test_a_signal_that_arrives_first_is_buffered_until_the_wait(make_env):
    env = make_env("""
        version: 1
        workflows:
          approval:
            steps:
              - delay: 10s
              - wait_for_signal: approved
    """)
    env.start("approval", "a1")
    env.run(0)
    env.clock.set(1)
    assert env.client.signal("a1", "approved", {"ok": True})["buffered"] is True
    env.run(10)

    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"ok": True}


def test_activities_go_only_to_workers_serving_their_queue(make_env):
    env = make_env("""
        version: 1
        workflows:
          routed:
            steps:
              - activity: wfh:noop
                queue: gpu
    """)
    env.start("routed", "r1")
    env.decide(0)
    assert env.claim(0, queues=("default",)) is None
    task = env.claim(0, queues=("gpu",))
    assert task is not None and task.step == "noop"


def test_a_handler_may_take_only_the_state(make_env):
    env = make_env("""
        version: 1
        workflows:
          counter:
            steps:
              - activity: wfh:add_one
              - activity: wfh:add_one
    """)
    env.start("counter", "c1", input={"count": 40})
    env.run(0)
    assert env.describe("c1")["state"] == {"count": 42}


def test_describe_matches_the_documented_shape(make_env):
    env = make_env("""
        version: 1
        defaults:
          activity:
            backoff: {initial: 1s, coefficient: 2.0, max: 1m}
        workflows:
          data_import:
            execution_timeout: 2h
            run_timeout: 1h
            deadline: {hours: 24}
            on_deadline: wfh:on_deadline_record
            steps:
              - activity: wfh:noop
                name: fetch
                schedule_to_start: 30s
                start_to_close: 5m
                schedule_to_close: 10m
                heartbeat: 15s
                max_attempts: 3
                non_retryable: [ValueError]
    """)
    env.start("data_import", "order-123", input={"source": "x"})
    env.decide(0)
    env.claim(1)

    doc = env.describe("order-123")
    assert set(doc) >= {"found", "workflow_instance_id", "workflow_type", "status",
                        "execution_timeout_seconds", "deadline_seconds", "deadline_at",
                        "on_deadline", "run_count", "run", "activities", "timers", "children",
                        "failure", "state"}
    assert doc["found"] is True
    assert doc["run"]["current_step"] == "fetch"
    assert doc["run"]["execution_deadline_at"] == at(7200)
    activity = doc["activities"][0]
    assert activity["retry_policy"] == {
        "max_attempts": 3, "backoff_seconds": [1, 2], "schedule_to_start_timeout": 30,
        "start_to_close_timeout": 300, "schedule_to_close_timeout": 600,
        "heartbeat_timeout": 15, "non_retryable": ["ValueError"],
    }
    assert activity["status"] == "started"
    assert activity["schedule_deadline_at"] is None
    assert activity["close_deadline_at"] == at(301)
    assert activity["heartbeat_deadline_at"] == at(16)
    assert activity["schedule_to_close_deadline_at"] == at(600)


def test_time_in_the_store_is_utc_from_the_one_clock(make_env):
    env = make_env(ETL)
    env.start("etl", "e1", now=0)
    assert env.history("e1")[0]["at"] == T0


def teardown_module() -> None:
    wfh.calls.clear()
