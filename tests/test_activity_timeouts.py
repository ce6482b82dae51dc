"""The four activity timeouts (SPEC §2), enforced at an explicit `now`; nothing here sleeps."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import at, wait_until

from wfctl.engine.time.workers import HOSTNAME
from wfctl.worker import Worker, WorkerOptions

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends


def one_step(**options: object) -> str:
    """A workflow `t` whose only step is `wfh:noop` with these activity options."""
    lines = "".join(f"                {key}: {value}\n" for key, value in options.items())
    return f"""
        version: 1
        workflows:
          t:
            steps:
              - activity: wfh:noop
                name: fetch
{lines}"""


def new_events(env, instance_id: str, since: int) -> list[str]:
    return [e["event_type"] for e in env.history(instance_id) if e["seq"] > since]


def last_seq(env, instance_id: str) -> int:
    return env.history(instance_id)[-1]["seq"]


def activity(env, instance_id: str = "a1") -> dict:
    return env.describe(instance_id)["activities"][0]


# schedule_to_start


def test_schedule_to_start_holds_just_before_its_deadline(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=2, backoff="[5s]"))
    env.start("t", "a1")
    env.decide(0)

    assert env.sweep(9.999).activities_timed_out == 0
    assert activity(env)["status"] == "scheduled"
    assert "ActivityRetryScheduled" not in env.event_types("a1")


def test_schedule_to_start_expiry_with_attempts_left_schedules_a_retry(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=2, backoff="[5s]"))
    env.start("t", "a1")
    env.decide(0)

    assert env.sweep(10).activities_timed_out == 1

    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    scheduled = env.events("a1", "ActivityScheduled")[0]
    assert retry["timeout_kind"] == "schedule_to_start"
    assert retry["deadline_at"] == at(10)
    assert retry["attempt"] == 1
    assert retry["next_attempt"] == 2
    assert retry["retry_available_at"] == at(15)
    assert retry["backoff_seconds"] == 5
    assert retry["max_attempts"] == 2
    assert retry["reason"] == "timeout"
    assert retry["scheduled_event_id"] == scheduled["seq"]
    assert retry["started_event_id"] is None
    assert "ActivityTimedOut" not in env.event_types("a1")
    row = activity(env)
    assert (row["status"], row["attempt"]) == ("retry_scheduled", 2)


def test_schedule_to_start_is_recomputed_from_the_retrys_available_time(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=2, backoff="[5s]"))
    env.start("t", "a1")
    env.decide(0)
    env.sweep(10)

    assert activity(env)["schedule_deadline_at"] == at(25)
    assert env.sweep(24.999).activities_timed_out == 0
    assert env.sweep(25).activities_timed_out == 1
    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["attempt"]) == ("schedule_to_start", 2)
    assert timed_out["deadline_at"] == at(25)
    assert timed_out["started_event_id"] is None


def test_schedule_to_start_is_set_again_for_a_retry_of_a_started_attempt(make_env):
    env = make_env(one_step(schedule_to_start="10s", start_to_close="20s", max_attempts=2,
                            backoff="[3s]"))
    env.start("t", "a1")
    env.decide(0)
    env.claim(4)
    assert activity(env)["schedule_deadline_at"] is None

    env.sweep(24)

    row = activity(env)
    assert row["status"] == "retry_scheduled"
    assert row["available_at"] == at(27)
    assert row["schedule_deadline_at"] == at(37)
    assert env.sweep(36.999).activities_timed_out == 0
    env.sweep(37)
    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["attempt"]) == ("schedule_to_start", 2)
    assert timed_out["started_event_id"] is None, "attempt 2 never started"


def test_schedule_to_start_stays_cleared_on_a_retry_when_not_set(make_env):
    env = make_env(one_step(start_to_close="20s", max_attempts=2, backoff="[3s]"))
    env.start("t", "a1")
    env.decide(0)
    assert activity(env)["schedule_deadline_at"] is None
    env.claim(4)

    env.sweep(24)

    row = activity(env)
    assert row["status"] == "retry_scheduled"
    assert row["schedule_deadline_at"] is None
    assert env.sweep(10_000).activities_timed_out == 0


def test_an_activity_past_its_schedule_to_start_is_never_handed_to_a_worker(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=2, backoff="[5s]"))
    env.start("t", "a1")
    env.decide(0)

    assert env.claim(10) is None
    assert env.run(10) is True
    assert env.event_types("a1").count("ActivityStarted") == 0
    assert env.claim(14.999) is None
    task = env.claim(15)
    assert task is not None and task.attempt == 2


def test_an_activity_past_its_schedule_to_start_is_not_claimed_even_before_the_sweep(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)

    assert env.claim(10) is None
    assert activity(env)["status"] == "scheduled"
    assert env.claim(9.999) is not None


def test_schedule_to_start_expiry_without_attempts_left_fails_the_workflow(make_env):
    env = make_env(one_step(schedule_to_start="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)

    env.run(10)

    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["activities"][0]["status"] == "timed_out"
    assert doc["failure"]["failure_category"] == "timeout"
    assert doc["failure"]["propagation_kind"] == "timeout"
    assert doc["failure"]["timeout_kind"] == "schedule_to_start"
    assert doc["failure"]["deadline_at"] == at(10)


# start_to_close


def test_start_to_close_holds_just_before_its_deadline(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    env.claim(1)

    assert activity(env)["close_deadline_at"] == at(11)
    assert env.sweep(10.999).activities_timed_out == 0
    assert activity(env)["status"] == "started"


def test_start_to_close_expiry_retries_and_the_next_attempt_gets_its_own_clock(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    first = env.claim(1)

    env.sweep(11)

    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    started = env.events("a1", "ActivityStarted")[0]
    assert retry["timeout_kind"] == "start_to_close"
    assert retry["deadline_at"] == at(11)
    assert (retry["attempt"], retry["max_attempts"]) == (first.attempt, 2)
    assert retry["retry_available_at"] == at(12)
    assert retry["backoff_seconds"] == 1
    assert retry["started_event_id"] == started["seq"]
    row = activity(env)
    assert (row["status"], row["close_deadline_at"]) == ("retry_scheduled", None)

    second = env.claim(30)
    assert second.attempt == 2
    assert second.close_deadline_at == at(40)
    assert env.sweep(39.999).activities_timed_out == 0
    assert env.sweep(40).activities_timed_out == 1
    assert env.events("a1", "ActivityTimedOut")[0]["attributes"]["attempt"] == 2


def test_a_timed_out_attempt_is_the_activitys_last_error_in_describe(make_env, wfctl):
    env = make_env(one_step(start_to_close="10s", max_attempts=2, backoff="[1m]"))
    env.start("t", "a1")
    env.decide(0)
    env.claim(1)
    env.sweep(11)

    code, out, _ = wfctl(env, "describe", "a1", "--json")
    assert code == 0
    assert json.loads(out)["activities"][0]["last_error"] == {
        "kind": "timeout", "attempt": 1, "timeout_kind": "start_to_close",
        "deadline_at": "2026-04-12T12:00:11.000+00:00",
        "exception_class": "ActivityTimeoutException",
        "message": "Activity fetch timed out: start_to_close"}
    assert activity(env)["last_error"]["deadline_at"] == at(11)
    code, out, _ = wfctl(env, "describe", "a1")
    assert re.search(r"fetch\s+retry_scheduled\s+2/2.*start_to_close timeout \(attempt 1\)",
                     out)
    assert "start-to-close deadline 2026-04-12T12:00:11.000+00:00 (attempt 1 timed out)" in out


def test_a_failed_attempt_is_the_activitys_last_error_with_its_kind(make_env):
    env = make_env(one_step(max_attempts=2))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(1)
    env.engine.fail_activity(task, "ConnectionError", "refused", at(2))

    error = activity(env)["last_error"]
    assert (error["kind"], error["attempt"]) == ("exception", 1)
    assert (error["exception_class"], error["message"]) == ("ConnectionError", "refused")


def test_a_terminal_timeout_records_every_deadline_and_fails_the_workflow(make_env):
    env = make_env(one_step(schedule_to_start="1m", start_to_close="10s",
                            schedule_to_close="1h", heartbeat="8s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(2)
    env.engine.record_heartbeat(task, {"processed": 7}, at(5))

    env.sweep(12)

    scheduled = env.events("a1", "ActivityScheduled")[0]
    started = env.events("a1", "ActivityStarted")[0]
    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out == {
        "activity_id": task.activity_id, "step": "fetch", "attempt": 1,
        "scheduled_event_id": scheduled["seq"], "started_event_id": started["seq"],
        "timeout_kind": "start_to_close", "deadline_at": at(12),
        "schedule_deadline_at": None, "close_deadline_at": at(12),
        "schedule_to_close_deadline_at": at(3600), "heartbeat_deadline_at": at(13),
        "last_heartbeat_at": at(5), "last_heartbeat_details": {"processed": 7},
    }
    assert "ActivityRetryScheduled" not in env.event_types("a1")

    env.decide(12)

    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["activities"][0]["status"] == "timed_out"
    assert doc["failure"]["failure_category"] == "timeout"
    assert doc["failure"]["propagation_kind"] == "timeout"
    assert doc["failure"]["timeout_kind"] == "start_to_close"
    assert doc["failure"]["exception_class"] == "ActivityTimeoutException"
    assert doc["failure"]["deadline_at"] == at(12)
    assert doc["failure"]["activity_id"] == task.activity_id
    failed = env.events("a1", "WorkflowFailed")[0]["attributes"]
    assert (failed["failure_category"], failed["timeout_kind"]) == ("timeout", "start_to_close")


# schedule_to_close


def test_schedule_to_close_is_terminal_with_attempts_left(make_env):
    env = make_env(one_step(schedule_to_close="30s", max_attempts=5))
    env.start("t", "a1")
    env.decide(0)
    env.claim(1)

    assert env.sweep(29.999).activities_timed_out == 0
    env.sweep(30)

    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["attempt"]) == ("schedule_to_close", 1)
    assert timed_out["deadline_at"] == at(30)
    assert "ActivityRetryScheduled" not in env.event_types("a1")
    env.decide(30)
    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["failure"]["timeout_kind"] == "schedule_to_close"


def test_schedule_to_close_is_never_reset_by_a_retry(make_env):
    env = make_env(one_step(start_to_close="10s", schedule_to_close="25s", max_attempts=5,
                            backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    env.claim(0)
    env.sweep(10)
    env.claim(11)
    env.sweep(21)
    third = env.claim(22)

    assert third.attempt == 3
    assert third.schedule_to_close_deadline_at == at(25)
    assert env.sweep(24.999).activities_timed_out == 0
    env.sweep(25)
    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["attempt"]) == ("schedule_to_close", 3)


def test_schedule_to_close_expires_an_activity_that_never_started(make_env):
    env = make_env(one_step(schedule_to_close="30s", max_attempts=5))
    env.start("t", "a1")
    env.decide(0)

    assert env.claim(30) is None
    env.sweep(30)

    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out["timeout_kind"] == "schedule_to_close"
    assert timed_out["started_event_id"] is None
    assert activity(env)["status"] == "timed_out"


# heartbeat


def test_heartbeat_timeout_runs_from_the_claim(make_env):
    env = make_env(one_step(heartbeat="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    env.claim(2)

    assert activity(env)["heartbeat_deadline_at"] == at(12)
    assert env.sweep(11.999).activities_timed_out == 0
    env.sweep(12)
    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["timeout_kind"], retry["deadline_at"]) == ("heartbeat", at(12))


def test_each_heartbeat_moves_the_deadline_to_now_plus_the_timeout(make_env):
    env = make_env(one_step(heartbeat="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)

    assert env.engine.record_heartbeat(task, {"n": 1}, at(8)) is True
    assert activity(env)["heartbeat_deadline_at"] == at(18)
    assert env.sweep(17.999).activities_timed_out == 0
    assert env.engine.record_heartbeat(task, {"n": 2}, at(17)) is True
    assert activity(env)["heartbeat_deadline_at"] == at(27)
    assert env.sweep(26.999).activities_timed_out == 0
    env.sweep(27)

    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["timeout_kind"], retry["deadline_at"]) == ("heartbeat", at(27))
    assert activity(env)["last_heartbeat_details"] == {"n": 2}


def test_a_terminal_heartbeat_timeout_keeps_the_last_details(make_env):
    env = make_env(one_step(heartbeat="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    env.engine.record_heartbeat(task, {"processed": 40}, at(5))

    env.sweep(15)

    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out["timeout_kind"] == "heartbeat"
    assert timed_out["last_heartbeat_details"] == {"processed": 40}
    env.decide(15)
    doc = env.describe("a1")
    assert doc["failure"]["timeout_kind"] == "heartbeat"
    assert doc["activities"][0]["last_heartbeat_details"] == {"processed": 40}


# several expired at once


def test_schedule_to_close_wins_over_schedule_to_start(make_env):
    env = make_env(one_step(schedule_to_start="10s", schedule_to_close="10s", max_attempts=3))
    env.start("t", "a1")
    env.decide(0)

    env.sweep(60)

    assert env.events("a1", "ActivityTimedOut")[0]["attributes"]["timeout_kind"] == \
        "schedule_to_close"
    assert "ActivityRetryScheduled" not in env.event_types("a1")


def test_schedule_to_close_wins_over_heartbeat_and_start_to_close(make_env):
    env = make_env(one_step(start_to_close="10s", heartbeat="5s", schedule_to_close="20s",
                            max_attempts=3))
    env.start("t", "a1")
    env.decide(0)
    env.claim(15)

    env.sweep(60)

    assert env.events("a1", "ActivityTimedOut")[0]["attributes"]["timeout_kind"] == \
        "schedule_to_close"


def test_heartbeat_wins_over_start_to_close(make_env):
    env = make_env(one_step(start_to_close="10s", heartbeat="5s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    env.claim(0)

    env.sweep(60)

    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["deadline_at"]) == ("heartbeat", at(5))


def test_start_to_close_is_reported_when_only_it_expired(make_env):
    env = make_env(one_step(start_to_close="10s", heartbeat="8s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    env.engine.record_heartbeat(task, None, at(6))

    env.sweep(10)

    timed_out = env.events("a1", "ActivityTimedOut")[0]["attributes"]
    assert (timed_out["timeout_kind"], timed_out["deadline_at"]) == ("start_to_close", at(10))


# late and stale results


def test_a_completion_just_before_the_deadline_is_applied(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)

    assert env.engine.complete_activity(task, {"done": True}, at(9.999)) is None
    env.decide(10)
    assert env.describe("a1")["status"] == "completed"
    assert env.describe("a1")["state"] == {"done": True}


def test_a_completion_after_the_deadline_but_before_the_sweep_is_rejected(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    before = last_seq(env, "a1")

    rejected = env.engine.complete_activity(task, {"done": True}, at(10))

    assert rejected == "attempt 1 passed its start_to_close deadline"
    assert new_events(env, "a1", before) == ["ActivityRetryScheduled"]
    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["timeout_kind"], retry["deadline_at"]) == ("start_to_close", at(10))
    doc = env.describe("a1")
    assert doc["state"] == {}
    assert (doc["activities"][0]["status"], doc["activities"][0]["attempt"]) == \
        ("retry_scheduled", 2)
    assert env.sweep(10).activities_timed_out == 0


def test_a_late_completion_of_the_last_attempt_times_the_activity_out(make_env):
    env = make_env(one_step(heartbeat="5s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    before = last_seq(env, "a1")

    rejected = env.engine.complete_activity(task, {"done": True}, at(6))

    assert rejected == "attempt 1 passed its heartbeat deadline"
    assert new_events(env, "a1", before) == ["ActivityTimedOut", "WorkflowTaskScheduled"]
    env.decide(6)
    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["state"] == {}
    assert doc["failure"]["timeout_kind"] == "heartbeat"


def test_a_failure_after_the_deadline_is_rejected(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=3, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    before = last_seq(env, "a1")

    rejected = env.engine.fail_activity(task, "ConnectionError", "boom", at(10))

    assert rejected == "attempt 1 passed its start_to_close deadline"
    assert new_events(env, "a1", before) == ["ActivityRetryScheduled"]
    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert retry["timeout_kind"] == "start_to_close"
    assert "failure" not in retry


def test_a_heartbeat_after_the_deadline_is_rejected(make_env):
    env = make_env(one_step(heartbeat="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    before = last_seq(env, "a1")

    assert env.engine.record_heartbeat(task, {"n": 1}, at(10)) is False

    assert new_events(env, "a1", before) == ["ActivityRetryScheduled"]
    assert activity(env)["last_heartbeat_details"] is None
    assert activity(env)["last_heartbeat_at"] is None


def test_results_from_an_attempt_that_is_no_longer_current_are_rejected(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    first = env.claim(0)
    env.sweep(10)
    second = env.claim(11)
    before = last_seq(env, "a1")
    row = activity(env)

    assert env.engine.complete_activity(first, {"from": 1}, at(12)) == \
        "attempt 1 is no longer current (activity started)"
    assert env.engine.fail_activity(first, "RuntimeError", "old", at(12)) == \
        "attempt 1 is no longer current (activity started)"
    assert env.engine.record_heartbeat(first, {"from": 1}, at(12)) is False

    assert last_seq(env, "a1") == before
    assert activity(env) == row
    assert env.engine.complete_activity(second, {"from": 2}, at(12)) is None
    env.decide(12)
    assert env.describe("a1")["state"] == {"from": 2}


def test_a_completion_after_the_activity_timed_out_for_good_changes_nothing(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    task = env.claim(0)
    env.run(10)
    before = env.history("a1")

    assert env.engine.complete_activity(task, {"done": True}, at(11)) == \
        "attempt 1 is no longer current (activity timed_out)"
    assert env.history("a1") == before
    assert env.describe("a1")["status"] == "failed"


# who enforces


def test_a_worker_pass_enforces_activity_timeouts(make_env):
    env = make_env(one_step(start_to_close="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    env.claim(0)

    assert env.run(9.999) is False
    assert env.run(10) is True
    assert env.describe("a1")["status"] == "failed"


def test_every_workers_watchdog_enforces_deadlines_on_all_queues(make_env):
    env = make_env(one_step(queue="gpu", schedule_to_start="10s", max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    other = Worker(env.engine, WorkerOptions(queues=("cpu",)))

    assert other.run_once(at(10)) is True

    assert env.describe("a1")["status"] == "failed"
    assert env.describe("a1")["failure"]["timeout_kind"] == "schedule_to_start"


# workers that die


def register_worker(env, worker_id: str, *, pid: int, lease_seconds: float,
                    now: float = 0, host: str | None = None) -> None:
    with env.engine.store.write() as tx:
        tx.register_worker({
            "worker_id": worker_id, "kind": "worker", "hostname": HOSTNAME, "pid": pid,
            "pid_started": None, "queues": "default", "started_at": at(now),
            "heartbeat_at": at(now), "lease_expires_at": at(now + lease_seconds),
            "host_id": host,
        })


def gone_pid() -> int:
    """The pid of a process that has ended."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(gone.stdout)


@pytest.fixture
def elsewhere(monkeypatch) -> None:
    """Workers registered from here count as on another host: their lease alone tells whether
    they are alive."""
    monkeypatch.setattr("wfctl.engine.time.workers.WorkerRecord.host", "host-b")


def test_a_worker_on_another_host_whose_lease_lapsed_loses_its_attempts_to_a_retry(
        make_env, elsewhere):
    env = make_env(one_step(max_attempts=3, backoff="[2s]"))
    env.start("t", "a1")
    env.decide(0)
    worker = Worker(env.engine, WorkerOptions(worker_lease=30))
    worker.register(at(0))
    lost = env.claim(1, worker_id=worker.worker_id)

    assert env.sweep(29.999).workers_lost == []
    assert env.sweep(30).workers_lost == [worker.worker_id]

    retry = env.events("a1", "ActivityRetryScheduled")[0]["attributes"]
    assert retry["reason"] == "worker_lost"
    assert retry["attempt"] == 1
    assert retry["retry_available_at"] == at(32)
    assert retry["failure"] == {
        "exception_class": "WorkerLost",
        "message": f"worker {worker.worker_id} stopped renewing its liveness",
    }
    assert env.engine.complete_activity(lost, {"late": True}, at(31)) is not None
    task = env.claim(32)
    assert task.attempt == 2
    env.engine.complete_activity(task, {"late": False}, at(33))
    env.decide(33)
    assert env.describe("a1")["status"] == "completed"
    assert env.describe("a1")["state"] == {"late": False}


def test_a_renewed_worker_keeps_its_attempts(make_env, elsewhere):
    env = make_env(one_step(max_attempts=3))
    env.start("t", "a1")
    env.decide(0)
    worker = Worker(env.engine, WorkerOptions(worker_lease=30))
    worker.register(at(0))
    env.claim(1, worker_id=worker.worker_id)

    worker.renew(at(20))

    assert env.sweep(49.999).workers_lost == []
    assert activity(env)["status"] == "started"
    assert env.sweep(50).workers_lost == [worker.worker_id]


def test_a_worker_whose_process_is_gone_is_lost_before_its_lease_lapses(make_env):
    env = make_env(one_step(max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    register_worker(env, "gone", pid=gone_pid(), lease_seconds=30)
    env.claim(1, worker_id="gone")

    assert env.sweep(2).workers_lost == ["gone"]

    assert env.events("a1", "ActivityRetryScheduled")[0]["attributes"]["reason"] == \
        "worker_lost"


def test_a_worker_of_this_host_is_alive_while_its_process_runs_though_its_lease_lapsed(
        make_env):
    # Its lease lapsed while the database refused every writer, say: no evidence of death.
    env = make_env(one_step(max_attempts=2))
    env.start("t", "a1")
    env.decide(0)
    worker = Worker(env.engine, WorkerOptions(worker_lease=30))
    worker.register(at(0))
    env.claim(1, worker_id=worker.worker_id)

    assert env.sweep(3600).workers_lost == []
    assert activity(env)["status"] == "started"


def test_a_worker_of_this_host_whose_process_ended_unwaited_for_is_lost(make_env):
    env = make_env(one_step(max_attempts=2))
    env.start("t", "a1")
    env.decide(0)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: process_state(ended.pid) == "Z", "the child ended")
        register_worker(env, "zombie", pid=ended.pid, lease_seconds=30)
        env.claim(1, worker_id="zombie")

        assert env.sweep(2).workers_lost == ["zombie"]
    finally:
        ended.wait()


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]


def test_leases_tell_nothing_while_the_judges_own_renewal_is_late_nor_for_a_lease_after(
        make_env, monkeypatch):
    env = make_env(one_step())
    worker = Worker(env.engine, WorkerOptions(worker_lease=3))
    worker.register(at(0))
    keeper = worker.lease
    monotonic = [100.0]
    monkeypatch.setattr("wfctl.worker.lease.time.monotonic", lambda: monotonic[0])

    def renew(seconds: float) -> None:
        monotonic[0] = 100 + seconds
        keeper.run_once(at(seconds))

    assert keeper.leases_tell(), "before any renewal: nothing says otherwise"
    renew(0)
    renew(1)
    monotonic[0] = 102.7
    assert not keeper.leases_tell(), "its own renewal is overdue by over half a period"
    renew(4)
    assert not keeper.leases_tell(), "it came late: a lease's time for the others"
    renew(5)
    renew(6)
    assert not keeper.leases_tell()
    renew(7)
    assert keeper.leases_tell()


def test_a_worker_of_this_host_id_whose_process_is_gone_is_lost_at_once(make_env,
                                                                        monkeypatch):
    monkeypatch.setenv("WFCTL_HOST_ID", "host-a")
    env = make_env(one_step(max_attempts=2))
    env.start("t", "a1")
    env.decide(0)
    register_worker(env, "gone", pid=gone_pid(), lease_seconds=30, host="host-a")
    env.claim(1, worker_id="gone")

    assert env.sweep(2).workers_lost == ["gone"]


def test_a_worker_on_another_host_is_judged_by_its_lease_only(make_env, monkeypatch):
    # The same hostname, the pid of no process here: only the host id tells them apart.
    monkeypatch.setenv("WFCTL_HOST_ID", "host-a")
    env = make_env(one_step(max_attempts=2, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    register_worker(env, "elsewhere", pid=gone_pid(), lease_seconds=30, host="host-b")
    env.claim(1, worker_id="elsewhere")

    assert env.sweep(29.999).workers_lost == []
    assert activity(env)["status"] == "started"
    assert env.sweep(30).workers_lost == ["elsewhere"]
    assert env.events("a1", "ActivityRetryScheduled")[0]["attributes"]["reason"] == \
        "worker_lost"


def test_a_lost_worker_on_its_last_attempt_fails_the_workflow(make_env):
    env = make_env(one_step(max_attempts=1))
    env.start("t", "a1")
    env.decide(0)
    register_worker(env, "w1", pid=gone_pid(), lease_seconds=5)
    env.claim(1, worker_id="w1")

    env.run(5)

    failed = env.events("a1", "ActivityFailed")[0]["attributes"]
    assert (failed["reason"], failed["exception_class"]) == ("worker_lost", "WorkerLost")
    assert env.describe("a1")["status"] == "failed"


def test_a_worker_declared_lost_that_comes_back_is_watched_again(make_env, elsewhere):
    env = make_env(one_step(max_attempts=3, backoff="[1s]"))
    env.start("t", "a1")
    env.decide(0)
    worker = Worker(env.engine, WorkerOptions(worker_lease=30))
    worker.register(at(0))
    env.claim(1, worker_id=worker.worker_id)
    assert env.sweep(30).workers_lost == [worker.worker_id]

    worker.renew(at(31))
    second = env.claim(32, worker_id=worker.worker_id)

    assert second.attempt == 2
    assert env.sweep(60.999).workers_lost == []
    assert env.sweep(61).workers_lost == [worker.worker_id]
    retries = env.events("a1", "ActivityRetryScheduled")
    assert [(r["attributes"]["attempt"], r["attributes"]["reason"]) for r in retries] == [
        (1, "worker_lost"), (2, "worker_lost"),
    ]
