"""Workflow timeouts: execution and run timeouts, the timeout procedure, workflow-task timeouts,
and a closed instance that accepts only reads and retry."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from conftest import at
from typer.testing import CliRunner, Result

from wfctl import Client, clock
from wfctl.cli import app
from wfctl.engine.time.workers import worker_alive
from wfctl.errors import ActivityCancelled, Conflict
from wfctl.lang.context import ActivityContext, HeartbeatBuffer
from wfctl.ops import log

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends

# A run whose only pending work is a timer: nothing but a timeout can end it early.
SLEEPY = """
version: 1
workflows:
  sleepy:
    execution_timeout: {execution}
    run_timeout: {run}
    steps:
      - delay: 30m
      - activity: wfh:noop
"""


def sleepy(execution: str = "NONE", run: str = "NONE") -> str:
    return SLEEPY.format(execution=execution, run=run)


def cli(env: Any, *args: str) -> Result:
    """`wfctl --db … -w … ARGS` on the test's database, as a user would type it."""
    return CliRunner().invoke(app, ["--db", env.db,
                                    "-w", str(env.folder / "workflows.yaml"), *args])


# execution_timeout and run_timeout


@pytest.mark.parametrize(("kind", "scope"), [("execution_timeout", "execution"),
                                             ("run_timeout", "run")])
def test_a_workflow_timeout_holds_just_before_its_deadline_and_expires_at_it(
        make_env, kind, scope):
    env = make_env(sleepy(**{scope: "10m"}))
    env.start("sleepy", "s1")
    env.run(0)

    env.run(599.999)
    doc = env.describe("s1")
    assert (doc["status"], doc["run"]["status"]) == ("running", "running")
    assert "WorkflowTimedOut" not in env.event_types("s1")

    env.run(600)
    doc = env.describe("s1")
    assert doc["status"] == "timed_out"
    assert doc["run"]["status"] == "timed_out"
    assert doc["run"]["closed_reason"] == kind
    assert doc["run"]["closed_at"] == at(600)
    timed_out = env.events("s1", "WorkflowTimedOut")[0]
    assert timed_out["at"] == at(600)
    assert timed_out["attributes"]["timeout_kind"] == kind
    assert timed_out["attributes"]["deadline_at"] == at(600)
    assert doc["failure"]["message"] == \
        f"Workflow {scope} deadline expired at 2026-04-12T12:10:00.000+00:00"
    assert env.event_types("s1")[-1] == "WorkflowTimedOut"


@pytest.mark.parametrize(("execution", "run", "checked_at"), [
    ("10m", "10m", 600),    # both expire at the same instant
    ("10m", "5m", 900),     # the run deadline passed first, but nothing looked until both had
])
def test_execution_timeout_wins_when_both_expired(make_env, execution, run, checked_at):
    env = make_env(sleepy(execution, run))
    env.start("sleepy", "s1")
    env.run(0)
    env.decide(1)

    env.run(checked_at)

    timed_out = env.events("s1", "WorkflowTimedOut")
    assert len(timed_out) == 1
    attributes = timed_out[0]["attributes"]
    assert attributes["timeout_kind"] == "execution_timeout"
    assert attributes["deadline_at"] == at(600)
    assert attributes["execution_deadline_at"] == at(600)
    assert attributes["run_deadline_at"] == env.describe("s1")["run"]["run_deadline_at"]
    failure = env.describe("s1")["failure"]
    assert failure["timeout_kind"] == "execution_timeout"
    assert failure["message"] == \
        "Workflow execution deadline expired at 2026-04-12T12:10:00.000+00:00"


def test_a_run_whose_only_pending_work_is_a_long_timer_times_out_on_time(make_env):
    env = make_env(sleepy(run="10m"))
    env.start("sleepy", "s1")
    env.run(0)
    timer = env.describe("s1")["timers"][0]
    assert (timer["fire_at"], timer["status"]) == (at(1800), "scheduled")

    assert env.sweep(599.999).runs_woken == 0
    assert env.events("s1", "WorkflowTaskScheduled")[-1]["attributes"]["reason"] == "started"

    report = env.sweep(600)
    assert report.runs_woken == 1
    scheduled = env.events("s1", "WorkflowTaskScheduled")[-1]
    assert scheduled["attributes"]["reason"] == "deadline_expired"
    assert scheduled["at"] == at(600)
    assert env.describe("s1")["status"] == "running"
    assert env.sweep(600).runs_woken == 0, "one open workflow task is enough"

    assert env.decide(600) == 1
    doc = env.describe("s1")
    assert doc["status"] == "timed_out"
    assert doc["timers"][0]["status"] == "cancelled"
    cancelled = env.events("s1", "TimerCancelled")[0]["attributes"]
    assert cancelled["timer_id"] == timer["timer_id"]
    assert cancelled["fire_at"] == at(1800)
    assert cancelled["reason"] == "run_timeout"
    assert env.event_types("s1")[-5:] == ["WorkflowTaskScheduled", "WorkflowTaskStarted",
                                          "WorkflowTaskCompleted", "TimerCancelled",
                                          "WorkflowTimedOut"]

    env.run(1800)
    assert "TimerFired" not in env.event_types("s1")
    assert env.event_types("s1")[-1] == "WorkflowTimedOut"


def test_a_watchdog_catching_up_late_cancels_a_timer_due_after_the_deadline(make_env):
    env = make_env(sleepy(run="20m"))
    env.start("sleepy", "s1")
    env.run(0)

    env.run(3600)

    doc = env.describe("s1")
    assert doc["status"] == "timed_out"
    assert doc["failure"]["deadline_at"] == at(1200)
    assert doc["timers"][0]["status"] == "cancelled"
    assert "TimerFired" not in env.event_types("s1")
    assert env.events("s1", "WorkflowTaskScheduled")[-1]["attributes"]["reason"] == \
        "deadline_expired"


def test_a_timer_due_before_the_deadline_still_fires_when_the_watchdog_catches_up(make_env):
    env = make_env(sleepy(run="40m"))
    env.start("sleepy", "s1")
    env.run(0)

    env.run(3600)

    doc = env.describe("s1")
    assert doc["status"] == "timed_out"
    assert doc["timers"][0]["status"] == "fired"
    assert env.event_types("s1")[-5:] == ["TimerFired", "WorkflowTaskScheduled",
                                          "WorkflowTaskStarted", "WorkflowTaskCompleted",
                                          "WorkflowTimedOut"]


def test_a_run_past_its_deadline_with_a_task_held_elsewhere_waits_for_that_tasks_timeout(
        make_env):
    env = make_env("""
        version: 1
        workflows:
          held:
            run_timeout: 5s
            workflow_task_timeout: 10s
            steps:
              - activity: wfh:noop
    """)
    env.start("held", "h1")
    task = env.engine.claim_workflow_task("stuck-worker", at(0))

    report = env.sweep(5)
    assert report.runs_woken == 0
    assert report.next_due == at(10), "the watchdog sleeps until the task's timeout"
    assert env.event_types("h1")[-1] == "WorkflowTaskStarted"

    assert env.sweep(10).workflow_tasks_timed_out == 1
    env.decide(10)
    doc = env.describe("h1")
    assert doc["status"] == "timed_out"
    assert doc["run"]["closed_at"] == at(10)
    assert doc["failure"]["deadline_at"] == at(5)
    assert env.engine.complete_workflow_task(task, at(11)) is False
    assert doc["activities"] == []


def test_the_watchdog_leaves_a_run_whose_deadline_expiry_is_already_claimed(make_env):
    env = make_env("""
        version: 1
        workflows:
          both:
            run_timeout: 20s
            deadline: 10s
            steps:
              - delay: 1h
    """)
    env.start("both", "b1")
    env.run(0)
    claims = env.engine.claim_expired_deadlines("deadline-worker", at(10), worker_alive)
    assert [claim.workflow_instance_id for claim in claims] == ["b1"]
    before = env.history("b1")

    for now in (20, 20.25, 20.5):
        report = env.sweep(now)
        assert report.runs_woken == 0
        assert report.next_due == at(3600), "only the timer is due, not the claimed run"
        env.decide(now)
    assert env.history("b1") == before

    assert env.engine.record_deadline_exceeded(claims[0], None, at(21)) is True
    doc = env.describe("b1")
    assert (doc["status"], doc["failure"]["failure_category"]) == ("failed", "deadline")
    assert env.event_types("b1")[-2:] == ["WorkflowDeadlineExceeded", "WorkflowFailed"]


@pytest.fixture
def restore_process_state() -> Iterator[None]:
    """`wfctl work` in-process installs signal handlers and a stderr log handler: put them back."""
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    saved_handlers, saved_level = list(log.LOGGER.handlers), log.LOGGER.level
    yield
    for signum, handler in saved_signals.items():
        signal.signal(signum, handler)
    log.LOGGER.handlers[:] = saved_handlers
    log.LOGGER.setLevel(saved_level)


def test_work_once_times_out_a_run_past_its_deadline(tmp_path, db, restore_process_state):
    (tmp_path / "workflows.yaml").write_text(sleepy(run="20m"))
    an_hour_ago = clock.now() - timedelta(hours=1)
    with Client(db, tmp_path / "workflows.yaml",
                clock_now=lambda: an_hour_ago) as client:
        client.start("sleepy", "s1")
        client.engine.process_workflow_tasks("setup", an_hour_ago)

    result = CliRunner().invoke(app, ["--db", db,
                                      "-w", str(tmp_path / "workflows.yaml"), "work", "--once"])

    assert result.exit_code == 0, result.output
    with Client(db, tmp_path / "workflows.yaml") as client:
        doc = client.describe("s1")
        assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "run_timeout")
        assert doc["timers"][0]["status"] == "cancelled"
        scheduled = client.history("s1", event_types=("WorkflowTaskScheduled",))
        assert scheduled[-1]["attributes"]["reason"] == "deadline_expired"


def test_a_workflow_timeout_is_enforced_at_the_start_of_a_workflow_task(make_env):
    env = make_env(sleepy(run="1m"))
    env.start("sleepy", "s1")

    assert env.decide(60) == 1

    assert env.event_types("s1") == ["WorkflowStarted", "WorkflowTaskScheduled",
                                     "WorkflowTaskStarted", "WorkflowTaskCompleted",
                                     "WorkflowTimedOut"]
    doc = env.describe("s1")
    assert doc["status"] == "timed_out"
    assert doc["timers"] == []


@pytest.mark.parametrize("how", ["waiting for a signal", "paused"])
def test_waiting_and_paused_runs_time_out_too(make_env, how):
    env = make_env("""
        version: 1
        workflows:
          approval:
            run_timeout: 1m
            steps:
              - delay: 10s
              - wait_for_signal: approved
    """)
    env.start("approval", "a1")
    env.run(0)
    if how == "paused":
        env.clock.set(5)
        env.client.pause("a1")
        expected = "paused"
    else:
        env.run(10)
        expected = "waiting"
    assert env.describe("a1")["status"] == expected

    env.run(60)

    assert env.describe("a1")["status"] == "timed_out"
    assert env.events("a1", "WorkflowTimedOut")[0]["attributes"]["timeout_kind"] == "run_timeout"


# the timeout procedure

FAN = """
version: 1
workflows:
  fan:
    run_timeout: 1m
    steps:
      - parallel:
          - activity: wfh:mark
            name: fetch
            heartbeat: 5m
          - activity: wfh:noop
            name: elsewhere
            queue: other
"""


def test_the_timeout_procedure_cancels_open_work_and_records_the_failure_in_one_transaction(
        make_env):
    env = make_env(FAN)
    env.start("fan", "f1", input={"source": "x"})
    env.decide(0)
    task = env.claim(1)
    assert task is not None and task.step == "fetch"
    transactions: list[list[dict[str, Any]]] = []
    env.engine.add_listener(transactions.append)

    env.sweep(60)
    env.decide(60)

    timed_out = [t for t in transactions if any(e["event_type"] == "WorkflowTimedOut" for e in t)]
    assert len(timed_out) == 1
    assert [e["event_type"] for e in timed_out[0]] == [
        "WorkflowTaskCompleted", "ActivityCancelled", "ActivityCancelled", "WorkflowTimedOut"]
    doc = env.describe("f1")
    assert doc["status"] == "timed_out"
    assert [(a["step"], a["status"]) for a in doc["activities"]] == \
        [("fetch", "cancelled"), ("elsewhere", "cancelled")]
    assert doc["failure"] == {
        "failure_category": "timeout",
        "timeout_kind": "run_timeout",
        "message": "Workflow run deadline expired at 2026-04-12T12:01:00.000+00:00",
        "exception_class": "WorkflowTimeoutException",
        "deadline_at": at(60),
        "propagation_kind": None,
        "activity_id": None,
    }
    started = env.events("f1", "ActivityStarted")[0]
    cancelled = {e["attributes"]["step"]: e["attributes"]
                 for e in env.events("f1", "ActivityCancelled")}
    assert cancelled["fetch"]["started_event_id"] == started["seq"]
    assert cancelled["fetch"]["scheduled_event_id"] == started["attributes"]["scheduled_event_id"]
    assert cancelled["fetch"]["reason"] == "run_timeout"
    assert cancelled["elsewhere"]["started_event_id"] is None
    attributes = env.events("f1", "WorkflowTimedOut")[0]["attributes"]
    assert attributes["timeout_kind"] == "run_timeout"
    assert attributes["execution_deadline_at"] is None
    assert attributes["run_deadline_at"] == at(60)
    assert env.client.list()[0]["status"] == "timed_out"


def test_results_and_heartbeats_of_cancelled_attempts_are_rejected_after_a_timeout(make_env):
    env = make_env(FAN)
    env.start("fan", "f1", input={"source": "x"})
    env.decide(0)
    task = env.claim(1)
    env.run(60)
    before = env.history("f1")

    assert env.engine.record_heartbeat(task, {"done": 1}, at(61)) is False
    assert "no longer current" in env.engine.complete_activity(task, {"late": True}, at(62))
    assert "no longer current" in env.engine.fail_activity(task, "RuntimeError", "boom", at(63))
    buffer = HeartbeatBuffer(lambda details: env.engine.record_heartbeat(task, details, at(64)),
                             heartbeat_timeout=30)
    ctx = ActivityContext(workflow_id="f1", run_id=task.workflow_run_id,
                          activity_id=task.activity_id, step=task.step, attempt=task.attempt,
                          max_attempts=task.max_attempts, last_heartbeat_details=None,
                          schedule_to_close_deadline_at=None, close_deadline_at=None,
                          heartbeat_deadline_at=None, heartbeat_timeout=30, heartbeats=buffer)
    with pytest.raises(ActivityCancelled):
        ctx.heartbeat({"done": 2})

    assert env.history("f1") == before
    doc = env.describe("f1")
    assert doc["state"] == {"source": "x"}
    assert doc["activities"][0]["status"] == "cancelled"
    assert doc["activities"][0]["last_heartbeat_details"] is None


def test_a_result_that_arrives_after_the_run_deadline_before_the_watchdog_is_rejected(make_env):
    env = make_env(FAN)
    env.start("fan", "f1", input={"source": "x"})
    env.decide(0)
    task = env.claim(1)

    assert env.engine.complete_activity(task, {"fetched": True}, at(59.999)) is None
    task_b = env.claim(2, queues=("other",))
    rejected = env.engine.complete_activity(task_b, {"late": True}, at(60))

    assert rejected is not None and "run_timeout" in rejected
    doc = env.describe("f1")
    assert doc["status"] == "timed_out"
    assert doc["state"] == {"source": "x", "fetched": True}
    assert [a["status"] for a in doc["activities"]] == ["completed", "cancelled"]
    assert env.event_types("f1")[-2:] == ["ActivityCancelled", "WorkflowTimedOut"]


# workflow task timeout (SWF decision task)

DECIDER = """
version: 1
workflows:
  decider:
    workflow_task_timeout: 10s
    steps:
      - activity: wfh:noop
"""


def test_a_workflow_task_not_completed_in_time_times_out_and_is_rescheduled(make_env):
    env = make_env(DECIDER)
    env.start("decider", "d1")
    task = env.engine.claim_workflow_task("stuck-worker", at(0))
    assert task is not None

    assert env.sweep(9.999).workflow_tasks_timed_out == 0
    assert env.sweep(10).workflow_tasks_timed_out == 1

    scheduled, started = env.events("d1", "WorkflowTaskScheduled")[0], \
        env.events("d1", "WorkflowTaskStarted")[0]
    timed_out = env.events("d1", "WorkflowTaskTimedOut")[0]
    assert timed_out["attributes"]["timeout_kind"] == "start_to_close"
    assert timed_out["attributes"]["scheduled_event_id"] == scheduled["seq"]
    assert timed_out["attributes"]["started_event_id"] == started["seq"]
    assert timed_out["attributes"]["deadline_at"] == at(10)
    rescheduled = env.events("d1", "WorkflowTaskScheduled")[1]
    assert rescheduled["seq"] == timed_out["seq"] + 1
    assert rescheduled["attributes"]["reason"] == "workflow_task_timed_out"

    before = env.history("d1")
    assert env.engine.complete_workflow_task(task, at(11)) is False
    assert env.history("d1") == before
    assert env.describe("d1")["activities"] == []

    env.run(12)
    assert env.describe("d1")["status"] == "completed"
    assert env.event_types("d1").count("WorkflowTaskTimedOut") == 1


def test_a_late_workflow_task_completion_before_the_watchdog_ran_changes_nothing(make_env):
    env = make_env(DECIDER)
    env.start("decider", "d1")
    task = env.engine.claim_workflow_task("slow-worker", at(0))

    assert env.engine.complete_workflow_task(task, at(10)) is False

    assert env.event_types("d1")[2:] == ["WorkflowTaskStarted", "WorkflowTaskTimedOut",
                                         "WorkflowTaskScheduled"]
    assert env.describe("d1")["activities"] == []
    assert env.describe("d1")["status"] == "running"


def test_a_workflow_task_completed_just_before_its_timeout_is_applied(make_env):
    env = make_env(DECIDER)
    env.start("decider", "d1")
    task = env.engine.claim_workflow_task("worker", at(0))

    assert env.engine.complete_workflow_task(task, at(9.999)) is True

    assert "WorkflowTaskTimedOut" not in env.event_types("d1")
    assert [a["status"] for a in env.describe("d1")["activities"]] == ["scheduled"]


# closed means closed

ONE_STEP = """
version: 1
workflows:
  short:
    run_timeout: 1m
    steps:
      - activity: wfh:noop
"""


def timed_out_instance(make_env: Any) -> Any:
    env = make_env(ONE_STEP)
    env.start("short", "t1")
    env.decide(0)
    env.run(60)
    assert env.describe("t1")["status"] == "timed_out"
    return env


@pytest.mark.parametrize(("action", "call"), [
    ("signal", lambda client: client.signal("t1", "approved", {"ok": True})),
    ("pause", lambda client: client.pause("t1")),
    ("resume", lambda client: client.resume("t1")),
    ("cancel", lambda client: client.cancel("t1")),
    ("terminate", lambda client: client.terminate("t1")),
])
def test_a_timed_out_instance_refuses_every_change(make_env, action, call):
    env = timed_out_instance(make_env)
    before = env.history("t1")
    env.clock.set(70)

    with pytest.raises(Conflict) as raised:
        call(env.client)

    assert str(raised.value) == (f"cannot {action} t1: it is timed_out "
                                 "(a closed instance accepts only describe, history and retry)")
    assert env.history("t1") == before
    assert env.describe("t1")["status"] == "timed_out"


def test_a_timed_out_instance_still_answers_reads_and_can_be_retried(make_env):
    env = timed_out_instance(make_env)
    assert env.describe("t1")["run"]["closed_reason"] == "run_timeout"
    assert env.event_types("t1")[-1] == "WorkflowTimedOut"
    assert [(row["workflow_instance_id"], row["status"]) for row in env.client.list()] == \
        [("t1", "timed_out")]

    env.clock.set(100)
    result = env.client.retry("t1")

    assert result["retried"] is True
    retried = env.events("t1", "WorkflowRetried")[0]["attributes"]
    assert retried["previous_status"] == "timed_out"
    assert retried["run_deadline_at"] == at(160)
    env.run(100)
    doc = env.describe("t1")
    assert doc["status"] == "completed"
    assert [a["status"] for a in doc["activities"]] == ["cancelled", "completed"]


@pytest.mark.parametrize("args", [["signal", "t1", "approved"], ["pause", "t1"],
                                  ["cancel", "t1", "--reason", "late"]])
def test_the_cli_refuses_changes_to_a_timed_out_instance_with_one_error_line(make_env, args):
    env = timed_out_instance(make_env)

    result = cli(env, *args)

    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (f"Error: cannot {args[0]} t1: it is timed_out "
                             "(a closed instance accepts only describe, history and retry)\n")


def test_the_cli_still_describes_lists_and_retries_a_timed_out_instance(make_env):
    env = timed_out_instance(make_env)

    described = cli(env, "describe", "t1", "--json")
    assert described.exit_code == 0
    doc = json.loads(described.stdout)
    assert (doc["status"], doc["failure"]["timeout_kind"]) == ("timed_out", "run_timeout")
    history = cli(env, "history", "t1", "--json")
    assert history.exit_code == 0
    assert json.loads(history.stdout)[-1]["event_type"] == "WorkflowTimedOut"
    listed = cli(env, "list", "--json")
    assert listed.exit_code == 0
    assert [row["status"] for row in json.loads(listed.stdout)] == ["timed_out"]
    retried = cli(env, "retry", "t1", "--json")
    assert retried.exit_code == 0
    assert json.loads(retried.stdout)["retried"] is True
    assert env.describe("t1")["status"] == "running"
