"""A workflow retry policy runs a failed run again from its failed step after a backoff, at
explicit instants: each cause in and out of `when`, the backoff's boundaries, the execution
deadline and the deadline stopping a retry, and what is never retried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import wfh
from conftest import at

from wfctl import clock
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.errors import Conflict
from wfctl.lang import handlers

pytestmark = pytest.mark.both_backends

RETRYING = """
version: 1
workflows:
  flaky:
    retry: {max_attempts: 3, backoff: {initial: 1m, coefficient: 2, max: 1h}}
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh:fail_times
        name: flaky
        max_attempts: 1
      - activity: wfh:mark
        name: last
  capped:
    retry: {max_attempts: 4, backoff: {initial: 1m, coefficient: 10, max: 5m}}
    steps:
      - activity: wfh:fail_times
        max_attempts: 1
  plain:
    steps:
      - activity: wfh:fail_times
        max_attempts: 1
  parent:
    steps:
      - workflow: flaky
  bounded:
    execution_timeout: 2m
    retry: {max_attempts: 3, backoff: [1m]}
    steps:
      - activity: wfh:fail_times
        max_attempts: 1
  due:
    deadline: 2m
    retry: {max_attempts: 3, backoff: [1m]}
    steps:
      - activity: wfh:fail_times
        max_attempts: 1
  short_execution:
    execution_timeout: 30s
    retry: {max_attempts: 3, backoff: [10s]}
    steps:
      - delay: 1m
  short_deadline:
    deadline: 30s
    retry: {max_attempts: 3, backoff: [10s]}
    steps:
      - delay: 1m
  too_wide:
    retry: {max_attempts: 3, backoff: [10s]}
    steps:
      - parallel:
          - activity: wfh:mark
            name: a
          - activity: wfh:mark
            name: b
  slow:
    run_timeout: 30s
    retry: {max_attempts: 2, backoff: [10s]}
    steps:
      - delay: 1m
  waits:
    retry: {max_attempts: 2, backoff: [10s]}
    steps:
      - wait_for_signal: approved
        timeout: 1m
      - activity: wfh:mark
        name: after
limits:
  pending_activity_count: 1
"""


@pytest.fixture(autouse=True)
def _forget_calls() -> Iterator[None]:
    wfh.calls.clear()
    wfh.failing_calls.clear()
    yield
    wfh.calls.clear()
    wfh.failing_calls.clear()


@pytest.fixture
def env(make_env):
    return make_env(RETRYING)


def scheduled(env, instance_id: str) -> list[dict[str, Any]]:
    return [event["attributes"] for event in env.events(instance_id, "WorkflowRetryScheduled")]


def test_a_failed_step_runs_again_after_the_backoff_and_the_workflow_completes(env):
    env.start("flaky", "f1", now=0, input={"fail_times": 1})
    env.run(0)

    doc = env.describe("f1")
    assert (doc["status"], doc["run"]["status"], doc["run"]["wait_kind"]) == \
        ("running", "running", "retry")
    assert doc["workflow_retry"] == {"attempt": 2, "max_attempts": 3, "next_attempt_at": at(60)}
    assert doc["run"]["current_step"] == "flaky"
    assert doc["failure"]["message"] == "Activity flaky failed: call 1 failed"
    assert doc["timers"] == []
    assert env.event_types("f1")[-2:] == ["WorkflowFailed", "WorkflowRetryScheduled"]
    assert scheduled(env, "f1") == [{
        "attempt": 2, "max_attempts": 3, "delay_seconds": 60, "cause": "activity",
        "next_attempt_at": at(60), "step": "flaky", "closed_status": "failed",
        "execution_deadline_at": None, "deadline_at": None}]

    env.run(59.999)
    assert env.describe("f1")["activities"][-1]["status"] == "failed"

    env.run(60)
    doc = env.describe("f1")
    assert doc["status"] == "completed"
    assert doc["workflow_retry"] == {"attempt": 2, "max_attempts": 3, "next_attempt_at": None}
    assert doc["state"] == {"fail_times": 1, "ran_first": 1, "succeeded_on_call": 2,
                            "ran_last": 1}
    assert wfh.calls == [("first", 1), ("last", 1)]
    retried = env.events("f1", "WorkflowRetried")[0]
    assert retried["at"] == at(60)
    assert {key: retried["attributes"][key] for key in (
        "step", "previous_status", "retried_by", "attempt", "max_attempts", "deadline_change",
        "run_deadline_at", "scheduled_event_id")} == {
        "step": "flaky", "previous_status": "failed", "retried_by": "retry_policy",
        "attempt": 2, "max_attempts": 3, "deadline_change": "kept", "run_deadline_at": None,
        "scheduled_event_id": env.events("f1", "WorkflowRetryScheduled")[0]["seq"]}


def test_each_retry_waits_its_backoff_and_the_last_failure_stands(env):
    env.start("flaky", "f1", now=0, input={"fail_times": 5})
    env.run(0)
    env.run(60)
    assert env.describe("f1")["workflow_retry"]["next_attempt_at"] == at(180)
    env.run(179.999)
    assert env.describe("f1")["workflow_retry"]["attempt"] == 3

    env.run(180)

    doc = env.describe("f1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("failed", None)
    assert doc["workflow_retry"] == {"attempt": 3, "max_attempts": 3, "next_attempt_at": None}
    assert [(a["attempt"], a["delay_seconds"], a["next_attempt_at"]) for a in scheduled(env, "f1")] \
        == [(2, 60, at(60)), (3, 120, at(180))]
    assert env.event_types("f1")[-1] == "WorkflowFailed"
    assert wfh.failing_calls == {"f1": 3}


def test_the_backoff_grows_by_its_coefficient_up_to_its_max(env):
    env.start("capped", "c1", now=0, input={"fail_times": 9})
    for now in (0, 60, 360, 660):
        env.run(now)

    assert [a["delay_seconds"] for a in scheduled(env, "c1")] == [60, 300, 300]
    assert env.describe("c1")["status"] == "failed"


def test_without_a_retry_policy_a_failure_stands(env):
    env.start("plain", "p1", now=0)
    env.run(0)

    doc = env.describe("p1")
    assert (doc["status"], doc["workflow_retry"], doc["retry_policy"]) == ("failed", None, None)
    assert "WorkflowRetryScheduled" not in env.event_types("p1")


# Each cause: a type's settings that end its run so, and when the run ends.
CAUSES = {
    "activity": (["steps:", "  - activity: wfh:fail_times", "    max_attempts: 1"], 0),
    "run_timeout": (["run_timeout: 30s", "steps:", "  - delay: 1m"], 30),
    "signal_wait": (["steps:", "  - wait_for_signal: approved", "    timeout: 30s"], 30),
}


@pytest.mark.parametrize("cause", list(CAUSES))
@pytest.mark.parametrize("listed", [True, False])
def test_a_run_is_retried_only_for_a_cause_its_policy_lists(make_env, cause, listed):
    when = [cause] if listed else [other for other in CAUSES if other != cause]
    settings = [f"retry: {{max_attempts: 2, backoff: [10s], when: [{', '.join(when)}]}}",
                *CAUSES[cause][0]]
    env = make_env("version: 1\nworkflows:\n  w:\n" + "".join(f"    {line}\n" for line in settings))
    ends_at = CAUSES[cause][1]
    env.start("w", "w1", now=0)
    env.run(0)
    env.run(ends_at)

    doc = env.describe("w1")
    if listed:
        assert (doc["status"], doc["run"]["wait_kind"]) == ("running", "retry")
        assert [(a["cause"], a["next_attempt_at"]) for a in scheduled(env, "w1")] == \
            [(cause, at(ends_at + 10))]
    else:
        assert doc["status"] in ("failed", "timed_out")
        assert scheduled(env, "w1") == []


def test_a_run_timeout_retry_gets_a_fresh_run_timeout(env):
    env.start("slow", "s1", now=0)
    env.run(0)
    env.run(30)
    assert env.describe("s1")["run"]["run_deadline_at"] is None

    env.run(40)
    doc = env.describe("s1")
    assert (doc["status"], doc["run"]["run_deadline_at"]) == ("running", at(70))
    assert env.events("s1", "WorkflowRetried")[0]["attributes"]["previous_status"] == "timed_out"

    env.run(70)
    doc = env.describe("s1")
    assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "run_timeout")
    assert env.event_types("s1").count("WorkflowTimedOut") == 2


def test_a_signal_sent_during_the_backoff_waits_for_the_retried_step(env):
    env.start("waits", "w1", now=0)
    env.run(0)
    env.run(60)
    assert [a["cause"] for a in scheduled(env, "w1")] == ["signal_wait"]

    env.clock.set(65)
    assert env.client.signal("w1", "approved", {"by": "ops"})["buffered"] is True
    env.run(65)
    assert env.describe("w1")["status"] == "running"

    env.run(70)
    doc = env.describe("w1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"by": "ops", "ran_after": 1}


@pytest.mark.parametrize(("failed_at", "retried"), [(59.999, True), (60, False)])
def test_a_retry_must_start_before_the_execution_deadline(env, failed_at, retried):
    env.start("bounded", "b1", now=0)
    env.run(failed_at)

    doc = env.describe("b1")
    assert doc["status"] == ("running" if retried else "failed")
    assert bool(scheduled(env, "b1")) is retried


@pytest.mark.parametrize(("failed_at", "retried"), [(59.999, True), (60, False)])
def test_a_retry_must_start_before_the_deadline(env, failed_at, retried):
    env.start("due", "d1", now=0)
    env.run(failed_at)

    assert env.describe("d1")["status"] == ("running" if retried else "failed")
    assert bool(scheduled(env, "d1")) is retried


def test_a_retry_due_after_a_worker_was_down_past_the_execution_deadline_times_out(env):
    env.start("bounded", "b1", now=0)
    env.run(0)

    env.run(200)

    doc = env.describe("b1")
    assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "execution_timeout")
    types = env.event_types("b1")
    assert types.index("WorkflowRetried") < types.index("WorkflowTimedOut")
    assert len(scheduled(env, "b1")) == 1


def test_an_execution_timeout_is_never_retried(env):
    env.start("short_execution", "e1", now=0)
    env.run(0)
    env.run(30)

    doc = env.describe("e1")
    assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "execution_timeout")
    assert scheduled(env, "e1") == []


def test_a_passed_deadline_is_never_retried(env):
    env.start("short_deadline", "d1", now=0)
    env.run(0)

    failed = sweep_deadlines(env.engine, "checker", at(30), handlers.call)

    assert [f["workflow_instance_id"] for f in failed] == ["d1"]
    doc = env.describe("d1")
    assert (doc["status"], doc["failure"]["failure_category"]) == ("failed", "deadline")
    assert scheduled(env, "d1") == []


def test_a_structural_limit_is_never_retried(env):
    env.start("too_wide", "t1", now=0)
    env.run(0)

    doc = env.describe("t1")
    assert (doc["status"], doc["failure"]["failure_category"]) == ("failed", "structural_limit")
    assert scheduled(env, "t1") == []


@pytest.mark.parametrize("action", ["cancel", "terminate"])
def test_cancel_or_terminate_during_the_backoff_closes_the_instance_and_its_retry(env, action):
    env.start("flaky", "f1", now=0)
    env.run(0)
    env.clock.set(30)

    getattr(env.client, action)("f1", "not today")
    env.run(30)
    env.run(60)

    doc = env.describe("f1")
    status = {"cancel": "cancelled", "terminate": "terminated"}[action]
    assert (doc["status"], doc["run"]["stop_reason"]) == (status, "not today")
    assert doc["workflow_retry"]["next_attempt_at"] is None
    cancelled = env.events("f1", "TimerCancelled")
    assert [(t["attributes"]["kind"], t["at"]) for t in cancelled] == [("workflow_retry", at(30))]
    assert "WorkflowRetried" not in env.event_types("f1")
    assert wfh.failing_calls == {"f1": 1}


def test_a_cancel_requested_before_the_run_timed_out_is_not_undone_by_a_retry(env):
    env.start("slow", "s1", now=0)
    env.run(0)
    env.clock.set(20)
    env.client.cancel("s1")

    env.run(30)

    doc = env.describe("s1")
    assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "run_timeout")
    assert scheduled(env, "s1") == []


def test_a_pause_during_the_backoff_holds_the_retried_step_until_resume(env):
    env.start("flaky", "f1", now=0)
    env.run(0)
    env.clock.set(30)
    env.client.pause("f1")

    env.run(60)
    doc = env.describe("f1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("paused", None)
    types = env.event_types("f1")
    assert "ActivityScheduled" not in types[types.index("WorkflowRetried"):]
    assert wfh.failing_calls == {"f1": 1}

    env.clock.set(70)
    env.client.resume("f1")
    env.run(70)
    assert env.describe("f1")["status"] == "completed"


def test_retry_by_hand_is_refused_during_the_backoff(env):
    env.start("flaky", "f1", now=0)
    env.run(0)
    env.clock.set(30)

    with pytest.raises(Conflict) as caught:
        env.client.retry("f1")
    assert str(caught.value) == (
        f"cannot retry f1: it is running, waiting to retry at {clock.iso(at(60))} (its retry policy's "
        "attempt 2) (only failed, timed_out, cancelled or terminated instances can be retried)")


def test_retry_by_hand_after_the_policy_gave_up_starts_a_new_series(env):
    env.start("flaky", "f1", now=0, input={"fail_times": 4})
    env.run(0)
    env.run(60)
    env.run(180)
    assert env.describe("f1")["status"] == "failed"
    env.clock.set(200)

    env.client.retry("f1")
    retried = env.events("f1", "WorkflowRetried")[-1]["attributes"]
    assert (retried["retried_by"], retried["attempt"], retried["max_attempts"]) == \
        ("command", 1, 3)
    env.run(200)

    doc = env.describe("f1")
    assert doc["status"] == "running"
    assert doc["workflow_retry"] == {"attempt": 2, "max_attempts": 3, "next_attempt_at": at(260)}
    env.run(260)
    assert env.describe("f1")["status"] == "completed"


def test_a_parent_waits_out_its_childs_retries_and_hears_only_how_it_ended(env):
    env.start("parent", "p1", now=0, input={"fail_times": 1})
    env.run(0)
    child = env.describe("p1")["children"][0]
    assert child["status"] == "running"
    assert env.describe(child["workflow_instance_id"])["run"]["wait_kind"] == "retry"
    assert env.describe("p1")["status"] == "waiting"

    env.run(60)

    assert env.describe(child["workflow_instance_id"])["status"] == "completed"
    assert env.describe("p1")["status"] == "completed"
    assert "ChildWorkflowFailed" not in env.event_types("p1")


def test_a_retry_is_due_at_its_time_for_any_engine_on_the_database(env, make_env):
    env.start("flaky", "f1", now=0)
    env.run(0)
    env.client.close()

    again = make_env(RETRYING)
    again.run(59.999)
    assert again.describe("f1")["status"] == "running"
    assert "WorkflowRetried" not in again.event_types("f1")
    again.run(60)
    assert again.describe("f1")["status"] == "completed"


def test_a_deadline_claimed_while_a_late_retry_was_due_fails_the_run_without_a_retry(env):
    from wfctl.engine.time.deadlines import record_deadline

    env.start("due", "d1", now=0)
    env.run(59.999)
    assert scheduled(env, "d1")[0]["next_attempt_at"] == at(119.999)

    # A worker back at +200s: its deadline loop claims the passed deadline, then its watchdog
    # finds the retry's timer due.
    claims = env.engine.claim_expired_deadlines("checker", at(200), lambda worker, now: True)
    env.sweep(200)
    assert "WorkflowRetried" not in env.event_types("d1")
    record_deadline(env.engine, claims[0], None, at(200))

    doc = env.describe("d1")
    assert (doc["status"], doc["failure"]["failure_category"]) == ("failed", "deadline")
    assert doc["workflow_retry"]["next_attempt_at"] is None
    assert len(scheduled(env, "d1")) == 1
