"""Deadlines (must complete within): setting them, firing them once, exemptions, on_deadline."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import wfh
import wfh_deadlines
from conftest import at
from typer.testing import CliRunner

from wfctl import Client, clock
from wfctl.cli import app
from wfctl.engine.time import deadlines
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.engine.time.workers import worker_alive
from wfctl.errors import StoreUnavailable
from wfctl.lang import handlers
from wfctl.ops import log
from wfctl.worker import ONCE_NOTICE, Worker, WorkerOptions

pytestmark = pytest.mark.both_backends

GUARDED = """
version: 1
workflows:
  guarded:
    deadline: {minutes: 1, seconds: 30}
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:mark
        name: first
      - delay: 1h
      - activity: wfh:mark
        name: last
  parked:
    deadline: 90
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:noop
        name: unserved
        queue: nobody
  plain:
    steps:
      - activity: wfh:noop
        queue: nobody
"""

DEADLINE_AT = at(90)


@pytest.fixture(autouse=True)
def _clear_calls() -> Iterator[None]:
    wfh.deadline_calls.clear()
    wfh_deadlines.deadline_calls.clear()
    yield
    wfh.deadline_calls.clear()
    wfh_deadlines.deadline_calls.clear()
    wfh.calls.clear()


@pytest.fixture
def cli_process_state() -> Iterator[None]:
    """`wfctl work` in-process installs signal handlers and a stderr log handler: put them back."""
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    saved_handlers, saved_level = list(log.LOGGER.handlers), log.LOGGER.level
    yield
    for signum, handler in saved_signals.items():
        signal.signal(signum, handler)
    log.LOGGER.handlers[:] = saved_handlers
    log.LOGGER.setLevel(saved_level)


def run_handler(spec: str, state: dict[str, Any]) -> object:
    return handlers.call(spec, state)


def check(env, seconds: float, worker_id: str = "checker") -> list[dict[str, Any]]:
    """One deadline sweep at T0 + seconds, as the long-running worker runs it."""
    return sweep_deadlines(env.engine, worker_id, at(seconds), run_handler)


def live_worker(engine, seconds: float) -> Worker:
    """A registered worker whose liveness lease (30 s) starts at T0 + seconds."""
    worker = Worker(engine, WorkerOptions(queues=()))
    worker.register(at(seconds))
    return worker


# setting it


def test_a_deadline_mapping_sums_days_hours_minutes_and_seconds(make_env):
    env = make_env("""
        version: 1
        workflows:
          long:
            deadline: {days: 1, hours: 2, minutes: 30, seconds: 15}
            on_deadline: wfh:on_deadline_record
            steps:
              - activity: wfh:noop
    """)
    result = env.start("long", "l1")

    doc = env.describe("l1")
    assert doc["deadline_seconds"] == 86400 + 2 * 3600 + 30 * 60 + 15
    assert doc["deadline_at"] == at(86400 + 2 * 3600 + 30 * 60 + 15)
    assert doc["on_deadline"] == "wfh:on_deadline_record"
    assert result["deadline_at"] == doc["deadline_at"]
    started = env.events("l1", "WorkflowStarted")[0]["attributes"]
    assert started["deadline_at"] == at(86400 + 2 * 3600 + 30 * 60 + 15)
    assert started["deadline_seconds"] == 95415


@pytest.mark.parametrize("deadline", [90, "90", "90s", "1m30s", "PT1M30S",
                                      {"minutes": 1, "seconds": 30}])
def test_start_deadline_overrides_the_type_in_every_duration_form(make_env, deadline):
    env = make_env(GUARDED)
    env.start("plain", "p1", now=0, deadline=deadline)

    doc = env.describe("p1")
    assert doc["deadline_seconds"] == 90
    assert doc["deadline_at"] == DEADLINE_AT


def test_start_deadline_none_removes_the_types_deadline(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", deadline="NONE")

    doc = env.describe("g1")
    assert (doc["deadline_seconds"], doc["deadline_at"]) == (None, None)
    assert check(env, 10**6) == []


def test_cli_start_takes_a_deadline_mapping(make_env):
    env = make_env(GUARDED)
    runner = CliRunner()
    base = ["--db", env.db, "-w", str(env.folder / "workflows.yaml")]

    before = clock.now()
    result = runner.invoke(app, [*base, "start", "plain", "p1",
                                 "--deadline", "{hours: 2, minutes: 30}", "--json"])
    after = clock.now()

    assert result.exit_code == 0, result.output
    deadline_at = datetime.fromisoformat(json.loads(result.stdout)["deadline_at"])
    assert before + timedelta(seconds=9000) <= deadline_at <= after + timedelta(seconds=9000)
    described = runner.invoke(app, [*base, "describe", "p1", "--json"])
    doc = json.loads(described.stdout)
    assert doc["deadline_seconds"] == 9000
    assert doc["deadline_at"] == clock.iso(deadline_at)
    assert doc["on_deadline"] is None


# firing it


def test_a_deadline_fires_at_its_instant_and_not_before(make_env):
    env = make_env(GUARDED)
    env.start("parked", "p1", now=0)
    env.run(0)

    assert check(env, 89.999) == []
    assert env.describe("p1")["status"] == "running"
    assert wfh.deadline_calls == []

    failed = check(env, 90)

    assert failed == [{"workflow_instance_id": "p1",
                       "workflow_run_id": env.describe("p1")["run"]["workflow_run_id"],
                       "deadline_at": DEADLINE_AT, "on_deadline": "wfh:on_deadline_record",
                       "handler_error": None, "reclaimed": False}]
    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert doc["failure"]["failure_category"] == "deadline"
    assert doc["failure"]["message"] == "Deadline exceeded"
    assert doc["failure"]["deadline_at"] == DEADLINE_AT
    assert wfh.deadline_calls == [{}]
    assert check(env, 200) == []
    assert len(wfh.deadline_calls) == 1


def test_expiry_cancels_open_work_then_records_the_deadline_then_the_failure(make_env):
    env = make_env(GUARDED)
    env.start("parked", "p1", now=0)
    env.decide(0)
    env.claim(1, queues=("nobody",))

    check(env, 90)

    types = env.event_types("p1")
    assert types[-3:] == ["ActivityCancelled", "WorkflowDeadlineExceeded", "WorkflowFailed"]
    exceeded = env.events("p1", "WorkflowDeadlineExceeded")[0]
    assert exceeded["at"] == at(90)
    assert exceeded["attributes"]["deadline_at"] == DEADLINE_AT
    assert exceeded["attributes"]["handler"] == "wfh:on_deadline_record"
    assert exceeded["attributes"]["handler_error"] is None
    failed = env.events("p1", "WorkflowFailed")[0]["attributes"]
    assert failed["failure_category"] == "deadline"
    assert failed["message"] == "Deadline exceeded"
    assert failed["deadline_at"] == DEADLINE_AT
    assert env.describe("p1")["activities"][0]["status"] == "cancelled"


def test_a_delay_counts_toward_the_deadline_and_its_timer_is_cancelled(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.run(0)
    doc = env.describe("g1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("running", "timer")

    check(env, 90)

    doc = env.describe("g1")
    assert doc["status"] == "failed"
    assert doc["timers"][0]["status"] == "cancelled"
    assert env.event_types("g1")[-3:] == ["TimerCancelled", "WorkflowDeadlineExceeded",
                                          "WorkflowFailed"]
    env.run(3600)
    assert env.describe("g1")["state"] == {"ran_first": 1}


def test_on_deadline_receives_only_the_public_state(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0, input={"order": 7, "_token": "secret"})
    env.run(0)

    check(env, 90)

    assert wfh.deadline_calls == [{"order": 7, "ran_first": 1}]


def test_a_raising_on_deadline_handler_is_recorded_and_the_workflow_still_fails(make_env):
    env = make_env("""
        version: 1
        workflows:
          paging:
            deadline: 90s
            on_deadline: wfh:on_deadline_raise
            steps:
              - delay: 1h
    """)
    env.start("paging", "p1", now=0)
    env.run(0)

    failed = check(env, 90)

    error = {"exception_class": "RuntimeError", "message": "pager unreachable"}
    assert failed[0]["handler_error"] == error
    assert wfh.deadline_calls == [{}]
    exceeded = env.events("p1", "WorkflowDeadlineExceeded")[0]["attributes"]
    assert exceeded["handler"] == "wfh:on_deadline_raise"
    assert exceeded["handler_error"] == error
    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert doc["failure"]["message"] == "Deadline exceeded"
    assert doc["failure"]["handler_error"] == error


def test_a_deadline_without_on_deadline_still_fails_the_workflow(make_env):
    env = make_env(GUARDED)
    env.start("plain", "p1", now=0, deadline=60)
    env.run(0)

    failed = check(env, 60)

    assert [f["workflow_instance_id"] for f in failed] == ["p1"]
    assert env.events("p1", "WorkflowDeadlineExceeded")[0]["attributes"]["handler"] is None
    assert env.describe("p1")["status"] == "failed"


def test_a_result_arriving_after_the_expiry_is_discarded(make_env):
    env = make_env(GUARDED)
    env.start("parked", "p1", now=0)
    env.decide(0)
    task = env.claim(1, queues=("nobody",))

    check(env, 90)
    rejected = env.engine.complete_activity(task, {"late": True}, at(95))

    assert rejected == "attempt 1 is no longer current (activity cancelled)"
    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert "late" not in doc["state"]
    assert "ActivityCompleted" not in env.event_types("p1")


def test_from_the_claim_on_the_workflow_advances_no_further(make_env):
    """Between the claim and the record (the handler is running), nothing moves the run on."""
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.decide(0)
    task = env.claim(1)

    claims = env.engine.claim_expired_deadlines("checker", at(90), worker_alive)
    assert [claim.workflow_instance_id for claim in claims] == ["g1"]
    rejected = env.engine.complete_activity(task, {"late": True}, at(91))
    env.run(92)

    assert rejected == "the workflow's deadline expired"
    doc = env.describe("g1")
    assert doc["status"] == "running"
    assert doc["run"]["current_step"] == "first"
    assert "late" not in doc["state"]
    assert "TimerScheduled" not in env.event_types("g1")

    assert env.engine.record_deadline_exceeded(claims[0], None, at(93)) is True
    assert env.describe("g1")["status"] == "failed"


def test_the_deadline_carries_over_continue_as_new_and_fires_on_the_new_run(make_env):
    env = make_env("""
        version: 1
        workflows:
          looping:
            deadline: 90s
            on_deadline: wfh:on_deadline_record
            steps:
              - activity: wfh:loop_counter
              - delay: 1m
              - continue_as_new: {while: more}
    """)
    env.start("looping", "l1", now=0, input={"until": 5})
    env.run(0)
    env.run(60)
    assert env.describe("l1")["run_count"] == 2

    assert check(env, 89) == []
    failed = check(env, 90)

    doc = env.describe("l1")
    assert [f["workflow_run_id"] for f in failed] == [doc["run"]["workflow_run_id"]]
    assert (doc["status"], doc["run"]["run_number"], doc["deadline_at"]) == ("failed", 2,
                                                                             DEADLINE_AT)
    assert wfh.deadline_calls == [{"until": 5, "i": 2, "more": True}]


# exemptions


def test_a_paused_workflow_does_not_expire_and_fails_at_the_first_check_after_resume(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.run(0)
    env.clock.set(10)
    env.client.pause("g1")

    assert check(env, 100) == []
    assert check(env, 500) == []
    assert env.describe("g1")["status"] == "paused"
    assert wfh.deadline_calls == []

    env.clock.set(600)
    env.client.resume("g1")
    failed = check(env, 600)

    assert [f["workflow_instance_id"] for f in failed] == ["g1"]
    assert env.describe("g1")["status"] == "failed"
    assert env.events("g1", "WorkflowDeadlineExceeded")[0]["at"] == at(600)


def test_a_workflow_waiting_for_a_signal_does_not_expire_until_it_runs_again(make_env):
    env = make_env("""
        version: 1
        workflows:
          approval:
            deadline: 90s
            on_deadline: wfh:on_deadline_record
            steps:
              - wait_for_signal: approved
              - activity: wfh:noop
                queue: nobody
    """)
    env.start("approval", "a1", now=0)
    env.run(0)
    assert env.describe("a1")["status"] == "waiting"

    assert check(env, 100) == []
    assert env.describe("a1")["status"] == "waiting"

    env.clock.set(150)
    env.client.signal("a1", "approved", {"by": "ops"})
    env.run(150)
    assert env.describe("a1")["status"] == "running"
    failed = check(env, 150)

    assert [f["workflow_instance_id"] for f in failed] == ["a1"]
    assert wfh.deadline_calls == [{"by": "ops"}]
    assert env.describe("a1")["status"] == "failed"


def test_a_workflow_waiting_for_a_child_does_not_expire_until_it_runs_again(make_env):
    env = make_env("""
        version: 1
        workflows:
          parent:
            deadline: 90s
            on_deadline: wfh:on_deadline_record
            steps:
              - workflow: child
                name: sub
              - activity: wfh:noop
                queue: nobody
          child:
            steps:
              - delay: 5m
    """)
    env.start("parent", "p1", now=0)
    env.run(0)
    doc = env.describe("p1")
    assert (doc["status"], doc["run"]["wait_kind"]) == ("waiting", "child")

    assert check(env, 120) == []
    assert env.describe("p1")["status"] == "waiting"

    env.run(300)
    assert env.describe("p1")["children"][0]["status"] == "completed"
    assert env.describe("p1")["status"] == "running"
    failed = check(env, 300)

    assert [f["workflow_instance_id"] for f in failed] == ["p1"]
    assert env.describe("p1")["status"] == "failed"


def test_the_earliest_deadline_is_that_of_the_next_running_unclaimed_workflow(make_env):
    """What the long-running worker sleeps until (it also checks every --deadline-interval)."""
    env = make_env(GUARDED)
    env.start("plain", "paused", now=0, deadline=30)
    env.start("plain", "soon", now=0, deadline=90)
    env.start("plain", "later", now=0, deadline=300)
    env.clock.set(1)
    env.client.pause("paused")

    assert env.engine.earliest_deadline() == at(90)
    check(env, 90)
    assert env.engine.earliest_deadline() == at(300)


# several workers, and a worker that died


def test_two_workers_sweeping_at_once_fire_each_deadline_once_and_call_the_handler_once(make_env):
    env = make_env("""
        version: 1
        workflows:
          guarded:
            deadline: 90s
            on_deadline: wfh_deadlines:on_deadline_slow
            steps:
              - delay: 1h
    """)
    ids = [f"g{n}" for n in range(12)]
    for instance_id in ids:
        env.start("guarded", instance_id, now=0, input={"id": instance_id})
    env.run(0)
    db, workflows = env.db, env.folder / "workflows.yaml"
    clients = [Client(db, workflows), Client(db, workflows)]
    workers = [live_worker(client.engine, 80) for client in clients]
    barrier = threading.Barrier(2)
    reports: dict[str, list[dict[str, Any]]] = {}

    def sweep_from(client: Client, worker: Worker) -> None:
        barrier.wait()
        reports[worker.worker_id] = sweep_deadlines(client.engine, worker.worker_id, at(90),
                                                    run_handler)

    threads = [threading.Thread(target=sweep_from, args=(client, worker))
               for client, worker in zip(clients, workers, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for client in clients:
        client.close()

    reported = sorted(f["workflow_instance_id"] for r in reports.values() for f in r)
    assert reported == sorted(ids)
    called = sorted(state["id"] for _, state in wfh_deadlines.deadline_calls)
    assert called == sorted(ids)
    for instance_id in ids:
        assert env.event_types(instance_id).count("WorkflowDeadlineExceeded") == 1
        assert env.event_types(instance_id).count("WorkflowFailed") == 1
        assert env.describe(instance_id)["status"] == "failed"


def test_a_claim_left_by_a_dead_worker_is_finished_by_a_later_sweep_running_the_handler_again(
        make_env, monkeypatch):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.run(0)
    # On another host, where its lease alone tells that it died.
    monkeypatch.setenv("WFCTL_HOST_ID", "host-b")
    dead = live_worker(env.engine, 90)
    monkeypatch.setenv("WFCTL_HOST_ID", "host-a")
    survivor = live_worker(env.engine, 90)
    claims = env.engine.claim_expired_deadlines(dead.worker_id, at(90), worker_alive)
    run_handler(claims[0].on_deadline, claims[0].state)  # the handler ran, then the process died

    # while the claimer's lease holds, nobody else takes its claim
    assert sweep_deadlines(env.engine, survivor.worker_id, at(100), run_handler) == []
    assert env.describe("g1")["status"] == "running"
    assert env.describe("g1")["run"]["deadline_claimed_at"] == at(90)

    survivor.renew(at(119))
    failed = sweep_deadlines(env.engine, survivor.worker_id, at(121), run_handler)

    assert [(f["workflow_instance_id"], f["reclaimed"]) for f in failed] == [("g1", True)]
    assert env.describe("g1")["status"] == "failed"
    assert wfh.deadline_calls == [{"ran_first": 1}, {"ran_first": 1}]
    # the dead worker's late record changes nothing
    assert env.engine.record_deadline_exceeded(claims[0], None, at(130)) is False
    assert env.event_types("g1").count("WorkflowDeadlineExceeded") == 1


def test_a_sweep_that_failed_before_recording_is_finished_by_the_next_one(make_env, monkeypatch):
    env = make_env(GUARDED)
    env.start("parked", "p1", now=0)
    worker = live_worker(env.engine, 90)

    def busy(*args: Any) -> None:
        raise StoreUnavailable("busy", "wfctl.db: the database is busy")

    monkeypatch.setattr(deadlines, "cancel_open_work", busy)
    with pytest.raises(StoreUnavailable):
        sweep_deadlines(env.engine, worker.worker_id, at(90), run_handler)
    monkeypatch.undo()
    assert env.describe("p1")["status"] == "running"

    failed = sweep_deadlines(env.engine, worker.worker_id, at(91), run_handler)

    assert [(f["workflow_instance_id"], f["reclaimed"]) for f in failed] == [("p1", True)]
    assert env.describe("p1")["status"] == "failed"
    assert env.event_types("p1").count("WorkflowDeadlineExceeded") == 1
    assert wfh.deadline_calls == [{}, {}]


def test_deadlines_check_keeps_its_claims_alive_while_its_handlers_run(make_env):
    """Handlers that together outlast the 30 s liveness lease: no worker takes a claim over."""
    env = make_env("""
        version: 1
        workflows:
          guarded:
            deadline: 90s
            on_deadline: wfh_deadlines:on_deadline_hook
            steps:
              - delay: 1h
    """)
    for instance_id in ("g1", "g2", "g3"):
        env.start("guarded", instance_id, now=0, input={"id": instance_id})
    env.run(0)
    survivor = live_worker(env.engine, 100)
    swept: list[list[dict[str, Any]]] = []

    def twenty_seconds_pass(state: dict[str, Any]) -> None:
        env.clock.now += timedelta(seconds=20)
        if len(wfh_deadlines.deadline_calls) == 2 and not swept:
            survivor.renew(env.clock.now)  # 40 s after the check began, mid-way through it
            swept.append(sweep_deadlines(env.engine, survivor.worker_id, env.clock.now,
                                         run_handler))

    wfh_deadlines.during_deadline_handler.append(twenty_seconds_pass)
    env.clock.set(100)
    try:
        failed = env.client.check_deadlines()
    finally:
        wfh_deadlines.during_deadline_handler.clear()

    assert swept == [[]]
    assert sorted(f["workflow_instance_id"] for f in failed) == ["g1", "g2", "g3"]
    assert sorted(state["id"] for _, state in wfh_deadlines.deadline_calls) == ["g1", "g2", "g3"]


# who checks


def test_a_worker_pass_like_once_never_checks_deadlines(make_env):
    env = make_env(GUARDED)
    env.start("parked", "p1", now=0)

    env.run(0)
    env.run(500)

    assert env.describe("p1")["status"] == "running"
    assert "WorkflowDeadlineExceeded" not in env.event_types("p1")
    assert wfh.deadline_calls == []


def _started_an_hour_ago(folder, db: str, workflows_yaml: str) -> Client:
    """A Client whose clock reads one hour ago, so that short deadlines have passed for real."""
    (folder / "workflows.yaml").write_text(workflows_yaml)
    an_hour_ago = clock.now() - timedelta(hours=1)
    return Client(db, folder / "workflows.yaml", clock_now=lambda: an_hour_ago)


CRON = """
version: 1
workflows:
  nightly:
    deadline: 1m
    on_deadline: wfh:on_deadline_record
    steps:
      - delay: 1d
  approval:
    deadline: 1m
    steps:
      - wait_for_signal: approved
"""


def test_work_once_never_checks_deadlines_and_says_so_on_stderr(tmp_path, db, cli_process_state):
    with _started_an_hour_ago(tmp_path, db, CRON) as client:
        client.start("nightly", "n1", input={"night": 1})
    base = ["--db", db, "-w", str(tmp_path / "workflows.yaml")]

    result = CliRunner().invoke(app, [*base, "work", "--once"])

    assert result.exit_code == 0, result.output
    notices = [line for line in result.stderr.splitlines() if "deadline_checks_skipped" in line]
    assert len(notices) == 1
    assert ONCE_NOTICE in notices[0]
    assert result.stdout == ""
    assert ONCE_NOTICE == ("deadline checks skipped in --once mode; run 'wfctl deadlines check' "
                           "or a long-running worker")
    with Client(db, tmp_path / "workflows.yaml") as client:
        doc = client.describe("n1")
        assert (doc["status"], doc["run"]["wait_kind"]) == ("running", "timer")
        assert doc["deadline_at"] < clock.now()
        assert "WorkflowDeadlineExceeded" not in [e["event_type"] for e in client.history("n1")]
    assert wfh.deadline_calls == []


def test_deadlines_check_json_fails_exactly_the_expired_running_ones(tmp_path, db):
    with _started_an_hour_ago(tmp_path, db, CRON) as client:
        client.start("nightly", "expired", input={"night": 1, "_cursor": 9})
        client.start("nightly", "not-yet", deadline="1d")
        client.start("nightly", "paused")
        client.start("approval", "waiting")
        client.engine.process_workflow_tasks("setup", clock.now() - timedelta(hours=1))
        client.pause("paused")
    base = ["--db", db, "-w", str(tmp_path / "workflows.yaml")]

    result = CliRunner().invoke(app, [*base, "deadlines", "check", "--json"])

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["count"] == 1
    [failed] = report["failed"]
    assert failed["workflow_instance_id"] == "expired"
    assert failed["on_deadline"] == "wfh:on_deadline_record"
    assert failed["handler_error"] is None
    assert wfh.deadline_calls == [{"night": 1}]
    with Client(db, tmp_path / "workflows.yaml") as client:
        statuses = {row["workflow_instance_id"]: row["status"] for row in client.list()}
    assert statuses == {"expired": "failed", "not-yet": "running", "paused": "paused",
                        "waiting": "waiting"}

    again = CliRunner().invoke(app, [*base, "deadlines", "check", "--json"])
    assert json.loads(again.stdout) == {"failed": [], "count": 0}


def test_deadlines_check_prints_one_line_per_failed_workflow(tmp_path, db):
    with _started_an_hour_ago(tmp_path, db, CRON.replace("wfh:on_deadline_record",
                                                     "wfh:on_deadline_raise")) as client:
        client.start("nightly", "expired")
        client.engine.process_workflow_tasks("setup", clock.now() - timedelta(hours=1))
    base = ["--db", db, "-w", str(tmp_path / "workflows.yaml")]

    result = CliRunner().invoke(app, [*base, "deadlines", "check"])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("expired: deadline ")
    assert lines[0].endswith("exceeded, failed; wfh:on_deadline_raise raised RuntimeError: "
                             "pager unreachable")
    assert lines[1] == "1 workflow failed by deadline"
