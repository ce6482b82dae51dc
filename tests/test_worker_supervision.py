"""A worker never strands work (SPEC §6), loop by loop, at explicit instants where it can."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
import wfh_activities
import wfh_supervision
from conftest import Clock, at

from wfctl import ActivityCancelled, ActivityContext, Client, clock
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.engine.time.sweep import sweep
from wfctl.engine.time.workers import WorkerRecord, keeping_lease
from wfctl.errors import InvalidInput, StoreUnavailable
from wfctl.lang import handlers
from wfctl.lang.context import HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall, Outcome
from wfctl.ops import log
from wfctl.worker import Worker, WorkerOptions, slots
from wfctl.worker.held_attempts import Attempt, Running
from wfctl.worker.loop import BACKOFF_CAP, Backoff, Outage, Shared
from wfctl.worker.slots import Slot, StepPath
from wfctl.worker.watchdog import WATCH_TICK

pytestmark = pytest.mark.both_backends

MISBEHAVING = """
version: 1
workflows:
  exits:
    steps:
      - activity: wfh_supervision:exits
        max_attempts: 2
        backoff: [1s]
  interrupts:
    steps:
      - activity: wfh_supervision:interrupts
        max_attempts: 1
  stamp:
    steps:
      - activity: wfh_supervision:returns_datetime
        name: stamp
        max_attempts: 1
  ratio:
    steps:
      - activity: wfh_supervision:returns_nan
        max_attempts: 1
  text:
    steps:
      - activity: wfh_supervision:returns_string
        max_attempts: 1
  one:
    steps:
      - activity: wfh:mark
        name: only
  timed:
    steps:
      - activity: wfh_supervision:hooked
        start_to_close: 10s
        heartbeat: 5s
        max_attempts: 2
        backoff: [1s]
  pair:
    steps:
      - activity: wfh_supervision:meet
"""


class Events:
    """The worker's log events, as (event, fields) pairs."""

    def __init__(self) -> None:
        self.records: list[logging.LogRecord] = []

    def named(self, name: str) -> list[dict[str, Any]]:
        return [getattr(r, "fields", {}) for r in self.records if r.getMessage() == name]


@pytest.fixture
def events() -> Iterator[Events]:
    collected = Events()

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            collected.records.append(record)

    handler = Collect()
    level = log.LOGGER.level
    log.LOGGER.addHandler(handler)
    log.LOGGER.setLevel(logging.INFO)
    yield collected
    log.LOGGER.removeHandler(handler)
    log.LOGGER.setLevel(level)


@pytest.fixture(autouse=True)
def _reset_handlers() -> Iterator[None]:
    yield
    wfh_supervision.during.clear()
    wfh_supervision.release.set()
    wfh_supervision.release.clear()
    wfh_supervision.meeting.reset()
    wfh_activities.before_heartbeat.clear()


def pinned_worker(env, **options: Any) -> tuple[Worker, Clock]:
    """A worker on the env's database whose clock the test sets (one slot unless told)."""
    worker_clock = Clock()
    options.setdefault("concurrency", 1)
    return Worker(env.engine, WorkerOptions(**options), clock=worker_clock), worker_clock


def wait_until(condition, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return False


# whatever a handler raises or returns


@pytest.mark.parametrize("workflow_type, exception_class, raised", [
    ("exits", "SystemExit", "raise SystemExit(3)"),
    ("interrupts", "KeyboardInterrupt", "raise KeyboardInterrupt"),
])
def test_a_handler_raising_system_exit_or_keyboard_interrupt_fails_its_attempt_only(
        make_env, workflow_type, exception_class, raised):
    env = make_env(MISBEHAVING)
    env.start(workflow_type, "bad")
    env.start("one", "next")

    assert env.run(0) is True

    [first] = [e["attributes"] for e in env.history("bad")
               if e["event_type"] in ("ActivityRetryScheduled", "ActivityFailed")]
    failure = first.get("failure", first)
    assert failure["exception_class"] == exception_class
    assert raised in failure["traceback"]
    assert env.describe("next")["status"] == "completed", "the slot went on serving"


def test_system_exit_from_a_handler_is_retried_under_the_retry_policy(make_env):
    env = make_env(MISBEHAVING)
    env.start("exits", "x1")
    env.run(0)
    env.run(1)

    assert env.event_types("x1").count("ActivityStarted") == 2
    failed = env.events("x1", "ActivityFailed")[0]["attributes"]
    assert (failed["exception_class"], failed["message"], failed["attempt"]) == ("SystemExit",
                                                                                 "3", 2)
    doc = env.describe("x1")
    assert doc["status"] == "failed"
    assert doc["failure"]["exception_class"] == "SystemExit"
    assert "raise SystemExit(3)" in doc["failure"]["traceback"]


@pytest.mark.parametrize("workflow_type, message", [
    ("stamp", "step 'stamp' result at key 'when': a datetime is not a JSON value"),
    ("ratio", "step 'returns_nan' result at key 'ratio': nan is not a JSON number"),
    ("text", "step 'returns_string' returned str; expected a dict of JSON values or None"),
])
def test_a_result_that_is_not_a_dict_of_json_values_fails_the_attempt_naming_step_and_key(
        make_env, workflow_type, message):
    env = make_env(MISBEHAVING)
    env.start(workflow_type, "w1")
    env.start("one", "next")
    env.run(0)

    failed = env.events("w1", "ActivityFailed")[0]["attributes"]
    assert (failed["exception_class"], failed["message"]) == ("TypeError", message)
    doc = env.describe("w1")
    assert (doc["status"], doc["state"]) == ("failed", {})
    assert env.describe("next")["status"] == "completed"


def test_an_attempt_found_no_longer_current_by_its_heartbeat_is_discarded_and_logged_once(
        make_env, events):
    env = make_env("""
        version: 1
        workflows:
          beating:
            steps:
              - activity: wfh_activities:heartbeat_after_hooks
          one:
            steps:
              - activity: wfh:mark
                name: only
    """)
    env.start("beating", "b1")
    env.start("one", "next")
    wfh_activities.before_heartbeat.append(lambda: env.client.terminate("b1", "ops"))

    env.run(0)

    assert [type(seen) for seen in wfh_activities.seen[-1:]] == [ActivityCancelled]
    assert [e["instance"] for e in events.named("activity_result_discarded")] == ["b1"]
    assert env.describe("b1")["status"] == "terminated"
    assert env.describe("next")["status"] == "completed"


def test_a_handler_raising_activity_cancelled_itself_fails_its_current_attempt(make_env):
    env = make_env("""
        version: 1
        workflows:
          odd:
            steps:
              - activity: wfh_activities:heartbeat_after_hooks
                max_attempts: 1
    """)
    env.start("odd", "o1")

    def cancel_itself() -> None:
        raise ActivityCancelled("not really")

    wfh_activities.before_heartbeat.append(cancel_itself)
    env.run(0)

    failed = env.events("o1", "ActivityFailed")[0]["attributes"]
    assert failed["exception_class"] == "ActivityCancelled"
    assert env.describe("o1")["status"] == "failed", "never left `started` for good"


# the executor seam


class RecordingExecutor:
    def __init__(self, outcome: Outcome | Exception) -> None:
        self.outcome = outcome
        self.calls: list[HandlerCall] = []

    def run(self, attempt: Running) -> Outcome:
        self.calls.append(attempt.call())
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def close(self, timeout: float) -> None:
        pass


def test_a_slot_runs_each_attempt_through_the_workers_executor(make_env):
    env = make_env(MISBEHAVING)
    env.start("one", "o1", input={"x": 1})
    executor = RecordingExecutor(Outcome(result={"from_executor": True}))
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=lambda: at(0),
                    executor=executor)

    worker.run_once(at(0))

    [call] = executor.calls
    assert (call.spec, call.step, call.state) == ("wfh:mark", "only", {"x": 1})
    assert call.context["attempt"] == 1 and call.context["workflow_id"] == "o1"
    assert ActivityContext(**call.context).step == "only"
    assert env.describe("o1")["state"] == {"x": 1, "from_executor": True}


def test_an_executor_that_fails_fails_the_attempt(make_env):
    env = make_env(MISBEHAVING)
    env.start("one", "o1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=lambda: at(0),
                    executor=RecordingExecutor(BrokenPipeError("the child process died")))

    worker.run_once(at(0))

    retry = env.events("o1", "ActivityRetryScheduled")[0]["attributes"]["failure"]
    assert (retry["exception_class"], retry["message"]) == ("BrokenPipeError",
                                                            "the child process died")


def test_an_unknown_isolation_is_refused():
    with pytest.raises(InvalidInput, match="isolation: expected thread"):
        Worker(None, WorkerOptions(isolation="fiber"))  # type: ignore[arg-type]


def test_a_pass_with_several_slots_runs_ready_tasks_side_by_side(make_env):
    env = make_env(MISBEHAVING)
    env.start("pair", "p1")
    env.start("pair", "p2")
    worker, _ = pinned_worker(env, concurrency=2)

    assert worker.run_once(at(0)) is True

    assert [env.describe(i)["state"] for i in ("p1", "p2")] == [{"met": True}] * 2


# loops: errors, back-off, outages


def test_a_failing_pass_is_logged_once_with_its_traceback_and_the_loop_backs_off_and_goes_on(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    worker, _ = pinned_worker(env)
    failures = iter([RuntimeError("boom")] * 3)
    real_sweep = sweep

    def flaky_sweep(*args: Any, **kwargs: Any) -> Any:
        error = next(failures, None)
        if error is not None:
            raise error
        return real_sweep(*args, **kwargs)

    monkeypatch.setattr("wfctl.worker.watchdog.sweep", flaky_sweep)
    waits = [worker.watchdog.guarded_pass() for _ in range(4)]

    assert waits[:3] == [0.1, 0.2, 0.4]
    assert 0 <= waits[3] <= WATCH_TICK
    [failed] = events.named("loop_failed")
    assert (failed["loop"], failed["exception"]) == ("watchdog", "RuntimeError: boom")
    assert "Traceback (most recent call last)" in failed["traceback"]
    assert events.named("loop_recovered") == [{"loop": "watchdog", "failed_passes": 3}]


def test_a_slot_whose_claims_keep_failing_backs_off_instead_of_trying_again_at_once(
        make_env, events, monkeypatch):
    # The work stays ready, so a slot that let the failure pass would serve again at once,
    # for as long as it lasts.
    env = make_env(MISBEHAVING)
    env.start("one", "s1")
    env.decide(0)
    worker, clock = pinned_worker(env)
    claims = []

    def broken_claim(*args: Any, **kwargs: Any) -> Any:
        claims.append(args)
        raise RuntimeError("the claim is broken")

    monkeypatch.setattr(env.engine, "claim_activity", broken_claim)
    slot = worker.slots[0]
    clock.set(1)
    waits = [slot.guarded_pass() for _ in range(3)]

    assert waits == [0.1, 0.2, 0.4] and len(claims) == 3
    [failed] = events.named("loop_failed")
    assert (failed["loop"], failed["exception"]) == (slot.name,
                                                     "RuntimeError: the claim is broken")
    monkeypatch.undo()
    while slot.guarded_pass() == 0:
        pass
    assert env.describe("s1")["status"] == "completed"
    assert events.named("loop_recovered") == [{"loop": slot.name, "failed_passes": 3}]


def test_back_off_doubles_from_a_tenth_of_a_second_up_to_five():
    backoff = Backoff()
    waits = [backoff.next() for _ in range(9)]
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert BACKOFF_CAP == 5.0
    backoff.reset()
    assert backoff.next() == 0.1


def test_an_outage_is_logged_once_however_many_threads_hit_it_and_once_when_it_ends(events):
    outage = Outage()
    error = StoreUnavailable("busy", "wfctl.db: the database is busy")
    threads = [threading.Thread(target=lambda: [outage.failed(error) for _ in range(50)])
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outage.recovered()
    outage.recovered()

    [unavailable] = events.named("database_unavailable")
    assert (unavailable["reason"], unavailable["message"]) == ("busy",
                                                               "wfctl.db: the database is busy")
    assert len(events.named("database_available")) == 1
    assert outage.active is False


def test_a_loop_meeting_an_unavailable_database_reports_the_outage_not_a_failure(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    worker, _ = pinned_worker(env)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("full", "wfctl.db: the disk is full")

    monkeypatch.setattr("wfctl.worker.watchdog.sweep", full)
    assert [worker.watchdog.guarded_pass() for _ in range(3)] == [0.1, 0.2, 0.4]

    assert len(events.named("database_unavailable")) == 1
    assert events.named("loop_failed") == []
    assert worker.outage.active is True


def test_a_result_computed_during_an_outage_is_recorded_once_the_database_takes_writes(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    env.start("one", "o1")
    refusals = iter([StoreUnavailable("full", "wfctl.db: the disk is full")] * 2)
    complete = env.engine.complete_activity

    def complete_when_writable(*args: Any, **kwargs: Any) -> Any:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        return complete(*args, **kwargs)

    monkeypatch.setattr(env.engine, "complete_activity", complete_when_writable)
    env.run(0)

    doc = env.describe("o1")
    assert (doc["status"], doc["state"]) == ("completed", {"ran_only": 1})
    assert env.event_types("o1").count("ActivityCompleted") == 1
    assert len(events.named("database_unavailable")) == 1
    assert len(events.named("database_available")) == 1


def test_a_result_that_waited_out_an_outage_past_its_deadline_is_dropped_as_late(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    env.start("timed", "t1")
    complete = env.engine.complete_activity
    refused = []

    def complete_when_writable(task: Any, result: Any, now: Any, **kwargs: Any) -> Any:
        if not refused:
            refused.append(now)
            env.worker_clock.set(6)        # the outage outlasted the attempt's heartbeat timeout
            raise StoreUnavailable("busy", "wfctl.db: the database is busy")
        return complete(task, result, now, **kwargs)

    monkeypatch.setattr(env.engine, "complete_activity", complete_when_writable)
    env.run(0)

    [discarded] = events.named("activity_result_discarded")
    assert discarded["reason"] == "attempt 1 passed its heartbeat deadline"
    assert "ActivityCompleted" not in env.event_types("t1")
    retry = env.events("t1", "ActivityRetryScheduled")[0]["attributes"]
    assert retry["timeout_kind"] == "heartbeat"


@pytest.mark.parametrize("lost", [1, 2], ids=["claim", "outcome-and-next-step"])
def test_attempts_a_batch_started_though_its_commit_seemed_to_fail_are_run_not_stranded(
        make_env, events, monkeypatch, lost):
    # The connection is lost at COMMIT: the batch committed, the worker is told it failed. The
    # first batch to start an attempt claims step a; the second records a's outcome and starts
    # step b for the same slot. Either way, the attempt it started runs as that attempt.
    env = make_env("""
        version: 1
        workflows:
          two:
            steps:
              - activity: wfh:mark
                name: a
              - activity: wfh:mark
                name: b
    """)
    env.start("two", "t1")
    batch, starting = env.engine.batch, []

    class ReplyLost:
        def __init__(self, offer: Any = None, families: Any = (), closes: Any = ()) -> None:
            self.offer, self.inner = offer, batch(offer, families, closes)

        def __enter__(self) -> Any:
            return self.inner.__enter__()

        def __exit__(self, *error: Any) -> bool:
            handled = self.inner.__exit__(*error)
            if error[0] is None and self.offer is not None and self.offer.taken:
                starting.append(self.offer.taken[0].step)
                if len(starting) == lost:
                    raise StoreUnavailable("connection", "the connection was lost at COMMIT")
            return handled

    monkeypatch.setattr(env.engine, "batch", ReplyLost)
    env.run(0)

    doc = env.describe("t1")
    assert (doc["status"], doc["state"]) == ("completed", {"ran_a": 1, "ran_b": 1})
    assert env.event_types("t1").count("ActivityStarted") == 2
    assert "ActivityRetryScheduled" not in env.event_types("t1")
    [adopted] = events.named("activity_attempt_adopted")
    assert (adopted["step"], adopted["attempt"]) == ("ab"[lost - 1], 1)
    # Step a's result, handed in again after the lost reply, is not reported as discarded.
    assert events.named("activity_result_discarded") == []
    assert [(e["step"], e["attempt"]) for e in events.named("activity_result_recorded_already")] \
        == [("a", 1)] * (lost - 1)


def test_the_attempts_a_worker_is_given_but_does_not_hold_leave_out_those_past_a_deadline(
        make_env):
    env = make_env(MISBEHAVING)
    env.start("timed", "t1")
    env.start("timed", "t2")
    env.decide(0)
    first, second = env.claim(0), env.claim(1)
    assert first is not None and second is not None
    held = {(first.activity_id, first.attempt)}

    [unheld] = env.engine.unheld_attempts(env.worker.worker_id, held, at(4))
    assert unheld == second
    # Past its heartbeat deadline (5 s): the watchdog's to time out, not the worker's to run.
    assert env.engine.unheld_attempts(env.worker.worker_id, held, at(6.5)) == []


def test_a_stopping_worker_gives_back_an_attempt_the_database_gives_it_that_it_never_held(
        make_env, monkeypatch):
    # Started for it by a transaction it was told had failed, and no batch came after to
    # adopt it: the worker stops, and the attempt is retried at once instead of waiting out
    # its start_to_close.
    env = make_env(MISBEHAVING)
    env.start("one", "o1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1))
    env.decide(0)
    assert env.claim(0, worker_id=worker.worker_id) is not None
    monkeypatch.setattr(worker.steps, "ready", lambda now: False)

    assert worker.run(once=True) == 0
    [retry] = env.events("o1", "ActivityRetryScheduled")
    assert (retry["attributes"]["reason"], retry["attributes"]["backoff_seconds"]) == \
        ("worker_shutdown", 0)


def test_a_heartbeat_the_database_cannot_take_now_is_kept_for_the_next_write():
    written: list[Any] = []
    refuse = [True]

    def write(details: Any) -> bool:
        if refuse[0]:
            raise StoreUnavailable("full", "wfctl.db: the disk is full")
        written.append(details)
        return True

    now = [0.0]
    buffer = HeartbeatBuffer(write, heartbeat_timeout=3, monotonic=lambda: now[0])
    buffer.beat({"n": 1})                 # refused: kept, and no error reaches the handler

    assert buffer.cancelled is False
    refuse[0] = False
    now[0] = 1.0
    buffer.flush_if_due()
    assert written == [{"n": 1}]


# attempts no longer current, abandoned handlers


def claimed_attempt(env, worker: Worker, seconds: float) -> tuple[Attempt, Slot]:
    """An attempt of `timed` claimed at T0 + seconds, as the worker's first slot runs it."""
    task = env.engine.claim_activity(worker.worker_id, ("default",), at(seconds))
    attempt = Attempt(task, worker.shared, check_deadlines=True)
    worker.slots[0].attempt = attempt
    worker.attempts.started(attempt)
    return attempt, worker.slots[0]


def test_an_attempt_past_its_heartbeat_deadline_is_given_up_and_abandoned_after_the_grace(
        make_env, events):
    env = make_env(MISBEHAVING)
    env.start("timed", "t1")
    env.decide(0)
    worker, worker_clock = pinned_worker(env)
    attempt, slot = claimed_attempt(env, worker, 0)
    context = attempt.context()

    worker.housekeeping.run_once(at(4.9))
    assert not attempt.abandon.is_set()
    worker_clock.set(4)
    context.heartbeat({"n": 1})           # written: the heartbeat deadline moves to 9 s
    worker.housekeeping.run_once(at(8.9))
    assert not attempt.abandon.is_set()

    worker.housekeeping.run_once(at(9))

    assert attempt.abandon.is_set()
    assert attempt.reason == "its heartbeat deadline passed"
    with pytest.raises(ActivityCancelled):
        context.heartbeat({"n": 2})
    assert worker.abandon_overdue(at(10.9)) == []
    [fresh] = worker.abandon_overdue(at(11))
    assert slot.abandoned and slot not in worker.slots and fresh in worker.slots
    assert worker.status_line() == "serving default; 0 handlers running, 0 tasks done, " \
                                   "1 abandoned"
    [abandoned] = events.named("handler_abandoned")
    assert (abandoned["instance"], abandoned["abandoned"], abandoned["grace_seconds"]) == (
        "t1", 1, 2.0)

    worker.attempts.ended(attempt, settled=True)     # the handler returned at last

    assert worker.status_line() == "serving default; 0 handlers running, 1 task done"
    assert len(events.named("abandoned_handler_returned")) == 1


# It counts statements with SQLite's trace callback.
@pytest.mark.sqlite_only
def test_one_query_finds_every_running_attempt_that_is_no_longer_current(make_env):
    env = make_env(MISBEHAVING)
    for n in range(3):
        env.start("timed", f"t{n}")
    env.decide(0)
    worker, _ = pinned_worker(env, concurrency=3)
    attempts = []
    for slot in worker.slots:
        task = env.engine.claim_activity(worker.worker_id, ("default",), at(0))
        attempts.append(Attempt(task, worker.shared, check_deadlines=True))
        slot.attempt = attempts[-1]
        worker.attempts.started(attempts[-1])
    env.clock.set(1)
    env.client.terminate(attempts[1].task.workflow_instance_id, "ops")
    statements: list[str] = []
    env.engine.store.conn.set_trace_callback(statements.append)

    worker.housekeeping.run_once(at(1))

    env.engine.store.conn.set_trace_callback(None)
    assert [a.abandon.is_set() for a in attempts] == [False, True, False]
    assert attempts[1].reason == "it timed out, was cancelled or its workflow closed"
    assert sum("FROM activities" in sql for sql in statements) == 1


def test_an_attempt_claimed_after_the_check_began_is_not_judged_by_it(make_env):
    env = make_env(MISBEHAVING)
    env.start("timed", "t1")
    env.decide(0)
    worker, _ = pinned_worker(env)
    attempt, _ = claimed_attempt(env, worker, 0)
    attempt.claimed = time.monotonic() + 60    # as if claimed while the query ran
    env.clock.set(1)
    env.client.terminate("t1", "ops")

    worker.housekeeping.run_once(at(1))

    assert not attempt.abandon.is_set()


# threads that die, a worker that cannot go on


def test_a_slot_thread_that_dies_is_replaced_and_the_worker_serves_on(tmp_path, db, events,
                                                                       monkeypatch):
    (tmp_path / "workflows.yaml").write_text(MISBEHAVING)
    client = Client(db, tmp_path / "workflows.yaml")
    run_once = Slot.run_once
    died = []

    def dies_once(self: Slot, now: Any) -> bool:
        if not died:
            died.append(self.name)
            raise SystemExit("escaped the loop's own error handling")
        return run_once(self, now)

    monkeypatch.setattr(Slot, "run_once", dies_once)
    worker = client.worker(WorkerOptions(concurrency=1, poll_interval=0.02))
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(worker.run()), daemon=True)
    thread.start()
    try:
        client.start("one", "o1")
        assert wait_until(lambda: client.describe("o1")["status"] == "completed")
    finally:
        worker.request_stop()
        thread.join(10)
        client.close()
    assert codes == [0]
    assert died == ["slot-0"]
    assert [e["loop"] for e in events.named("loop_died")] == ["slot-0"]
    assert [e["loop"] for e in events.named("loop_restarted")] == ["slot-1"]


def test_a_worker_whose_slots_keep_dying_exits_non_zero_and_gives_back_what_it_holds(
        tmp_path, db, events, monkeypatch):
    (tmp_path / "workflows.yaml").write_text(MISBEHAVING)
    client = Client(db, tmp_path / "workflows.yaml")

    def always_dies(self: Slot, now: Any) -> bool:
        raise SystemExit("escaped the loop's own error handling")

    monkeypatch.setattr(Slot, "run_once", always_dies)
    worker = client.worker(WorkerOptions(concurrency=2, poll_interval=0.02))
    try:
        assert worker.run() == 1
        with client.engine.store.read() as tx:
            assert tx.get_worker(worker.worker_id).stopped_at is not None
    finally:
        client.close()
    assert len(events.named("worker_failed")) == 1
    assert len(events.named("loop_died")) > 5


# shutdown


def test_a_worker_stopped_at_once_returns_after_its_slots_recorded_what_was_handed_in(
        make_env, monkeypatch):
    # The handler asks for a stop at once; its outcome, handed in, takes a while to record.
    # `run` returns after that, not while a slot still writes.
    env = make_env(MISBEHAVING)
    env.start("timed", "t1")
    worker, _ = pinned_worker(env)
    complete = env.engine.complete_activity

    def slow_complete(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return complete(*args, **kwargs)

    monkeypatch.setattr(env.engine, "complete_activity", slow_complete)
    wfh_supervision.during.append(worker.request_force_stop)

    worker.run(once=True)

    assert env.describe("t1")["status"] == "completed"


def test_a_worker_that_cannot_give_back_an_attempt_leaves_its_lease_to_lapse(
        tmp_path, db, events, monkeypatch):
    # On another host, where its lease alone tells that it is gone (here its process would be).
    monkeypatch.setattr("wfctl.engine.time.workers.WorkerRecord.host", "host-b")
    (tmp_path / "workflows.yaml").write_text(MISBEHAVING)
    client = Client(db, tmp_path / "workflows.yaml")
    client.start("timed", "t1")
    worker = client.worker(WorkerOptions(concurrency=1))
    engine = client.engine

    def database_goes_away() -> None:
        def unavailable(*args: Any, **kwargs: Any) -> Any:
            raise StoreUnavailable("readonly", "wfctl.db: the database is read-only")

        for name in ("complete_activity", "fail_activity", "release_activity"):
            monkeypatch.setattr(engine, name, unavailable)
        worker.request_force_stop()

    wfh_supervision.during.append(database_goes_away)
    try:
        assert worker.run(once=True) == 1
        monkeypatch.undo()
        with engine.store.read() as tx:
            assert tx.get_worker(worker.worker_id).stopped_at is None
        assert [e["worker_id"] for e in events.named("worker_lease_left_to_lapse")] == [
            worker.worker_id]

        lapsed = clock.now() + timedelta(seconds=31)
        assert sweep(engine, lapsed).workers_lost == [worker.worker_id]
        retry = [e for e in client.history("t1") if e["event_type"] == "ActivityRetryScheduled"]
        assert retry[0]["attributes"]["reason"] == "worker_lost"
    finally:
        client.close()


def test_the_long_running_worker_checks_deadlines_and_a_once_pass_does_not(make_env,
                                                                           monkeypatch):
    env = make_env(MISBEHAVING)
    seen: list[bool] = []
    complete = env.engine.complete_activity

    def recording(*args: Any, check_deadlines: bool = False, **kwargs: Any) -> str | None:
        seen.append(check_deadlines)
        return complete(*args, check_deadlines=check_deadlines, **kwargs)

    monkeypatch.setattr(env.engine, "complete_activity", recording)
    env.start("timed", "t1")
    assert Worker(env.engine, WorkerOptions(concurrency=1)).run(once=True) == 0
    assert seen == [False]

    env.start("timed", "t2")
    serving = Worker(env.engine, WorkerOptions(concurrency=1, poll_interval=0.02))
    thread = threading.Thread(target=serving.run, daemon=True)
    thread.start()
    assert wait_until(lambda: len(seen) == 2)
    serving.request_stop()
    thread.join(10)
    assert seen == [False, True]
    assert [env.describe(i)["status"] for i in ("t1", "t2")] == ["completed", "completed"]


def test_a_once_pass_rides_out_a_database_outage_as_the_long_running_worker_does(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    env.start("one", "o1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1))
    claim = env.engine.claim_activity
    refusals = iter([StoreUnavailable("busy", "wfctl.db: the database is busy")] * 2)

    def claim_when_writable(*args: Any, **kwargs: Any) -> Any:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        return claim(*args, **kwargs)

    monkeypatch.setattr(env.engine, "claim_activity", claim_when_writable)

    assert worker.run(once=True) == 0
    assert env.describe("o1")["status"] == "completed"
    assert len(events.named("database_unavailable")) == 1
    assert len(events.named("database_available")) == 1


def test_a_registration_whose_commit_reply_was_lost_is_made_again_without_error(
        make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    env.start("one", "o1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1))
    register, lost = worker.register, []

    def register_reply_lost(*args: Any, **kwargs: Any) -> None:
        register(*args, **kwargs)
        if not lost:
            lost.append(True)
            raise StoreUnavailable("unreachable", "the connection was lost at COMMIT")

    monkeypatch.setattr(worker, "register", register_reply_lost)

    assert worker.run(once=True) == 0
    assert env.describe("o1")["status"] == "completed"
    assert events.named("loop_failed") == []


def test_a_worker_registers_once_the_database_takes_writes(make_env, events, monkeypatch):
    env = make_env(MISBEHAVING)
    worker = Worker(env.engine, WorkerOptions(concurrency=1))
    register = worker.register
    refusals = iter([StoreUnavailable("busy", "wfctl.db: the database is busy")] * 2)

    def register_when_writable(*args: Any, **kwargs: Any) -> None:
        refusal = next(refusals, None)
        if refusal is not None:
            raise refusal
        register(*args, **kwargs)

    monkeypatch.setattr(worker, "register", register_when_writable)

    assert worker.run(once=True) == 0
    assert len(events.named("database_unavailable")) == 1
    assert len(events.named("database_available")) == 1
    assert len(events.named("worker_started")) == 1


# deadlines


DEADLINES = """
version: 1
workflows:
  slow:
    deadline: 90s
    on_deadline: wfh_supervision:slow_on_deadline
    steps:
      - delay: 1h
  quick:
    deadline: 91s
    on_deadline: wfh_supervision:quick_on_deadline
    steps:
      - delay: 1h
"""


def test_a_slow_on_deadline_handler_holds_up_no_other_workflows_deadline(make_env):
    env = make_env(DEADLINES)
    env.start("slow", "s1", now=0)
    env.start("quick", "q1", now=0)
    env.run(0)
    worker, worker_clock = pinned_worker(env, queues=())
    worker.register(at(0))
    runner = worker.deadlines
    runner.start_handlers()
    try:
        worker_clock.set(90)
        assert runner.run_once(at(90)) is True          # s1 claimed; its handler blocks
        worker_clock.set(91)
        assert runner.run_once(at(91)) is True          # q1 claimed beside it

        assert wait_until(lambda: env.describe("q1")["status"] == "failed")
        [exceeded] = env.events("q1", "WorkflowDeadlineExceeded")
        assert exceeded["at"] == at(91)
        assert env.describe("s1")["status"] == "running"
        assert runner.busy

        wfh_supervision.release.set()
        assert wait_until(lambda: env.describe("s1")["status"] == "failed")
        assert wait_until(lambda: not runner.busy)
        assert env.event_types("s1").count("WorkflowDeadlineExceeded") == 1
    finally:
        wfh_supervision.release.set()
        runner.close()


def test_a_deadline_claimed_by_a_decision_wakes_the_runner_which_handles_each_claim_once(
        make_env):
    env = make_env(DEADLINES)
    woken: list[str] = []
    env.engine.add_deadline_waker(lambda: woken.append("woken"))

    with env.engine.transaction(at(0)):
        pass
    assert woken == []
    with env.engine.transaction(at(0)) as c:
        c.deadline_claimed = True
    assert woken == ["woken"]

    worker, _ = pinned_worker(env, queues=())
    runner = worker.deadlines
    assert runner.run_once(at(0)) is False              # the first sweep
    env.start("quick", "q1", now=0)
    env.run(0)
    assert runner.run_once(at(100)) is True             # past q1's deadline: a sweep
    runner.claimed_for_us()
    assert runner.run_once(at(101)) is False            # woken, swept: nothing new
    assert runner.run_once(at(102)) is False
    runner.close()


def test_keeping_lease_renews_while_a_slow_call_runs_and_raises_what_it_raised(make_env):
    env = make_env(DEADLINES)
    record = WorkerRecord(env.engine.store, kind="deadlines")
    renewals: list[datetime] = []
    record.renew = lambda now: renewals.append(now)  # type: ignore[method-assign]

    assert keeping_lease(record, env.clock, lambda: time.sleep(0.25) or "done",
                         renew_every=0.05) == "done"
    assert len(renewals) >= 2, "renewed before the call and while it ran"

    def fails() -> None:
        raise SystemExit("handler exit")

    with pytest.raises(SystemExit):
        keeping_lease(record, env.clock, fails, renew_every=0.05)



def test_a_deadline_check_interrupted_while_a_handler_runs_records_nothing(make_env):
    """Ctrl-C reaches the thread that waits (renewing the lease), never the handler's record."""
    env = make_env(DEADLINES)
    env.start("quick", "q1", now=0)
    env.run(0)

    def interrupted(call: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep_deadlines(env.engine, "checker", at(91), handlers.call, keep_alive=interrupted)

    assert env.describe("q1")["status"] == "running"
    assert "WorkflowDeadlineExceeded" not in env.event_types("q1")


def test_an_on_deadline_handler_raising_keyboard_interrupt_is_recorded_as_its_error(make_env):
    env = make_env("""
        version: 1
        workflows:
          paging:
            deadline: 90s
            on_deadline: wfh_supervision:interrupts
            steps:
              - delay: 1h
    """)
    env.start("paging", "p1", now=0)
    env.run(0)
    env.clock.set(90)

    [failed] = env.client.check_deadlines()

    assert failed["handler_error"]["exception_class"] == "KeyboardInterrupt"
    assert env.describe("p1")["status"] == "failed"


# a burst of decisions

TIMER_FLOW = """
version: 1
workflows:
  sleeper:
    steps:
      - delay: 5s
"""

BURST = """
version: 1
workflows:
  gate:
    steps:
      - activity: wfh_supervision:stuck
        max_attempts: 1
  one:
    steps:
      - activity: wfh:noop
"""


class Ticking(Clock):
    """A clock that moves on a second each time it is read; `hook`, when set, runs on the first
    reading from the thread that set it."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.hook: tuple[threading.Thread, Any] | None = None

    def __call__(self) -> datetime:
        now, self.now = self.now, self.now + timedelta(seconds=1)
        if self.hook is not None and self.hook[0] is threading.current_thread():
            hook, self.hook = self.hook[1], None
            hook()
        return now


def test_each_batch_of_a_long_run_of_decisions_is_stamped_with_the_instant_it_began(make_env):
    env = make_env(BURST)
    for n in range(20):
        env.start("one", f"b{n:02d}")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Ticking(at(10)))

    worker.watchdog.run_once(at(10))

    scheduled = sorted(e["at"] for n in range(20) for e in env.history(f"b{n:02d}")
                       if e["event_type"] == "ActivityScheduled")
    assert len(scheduled) == 20
    assert scheduled[0] == at(10)
    # What later batches scheduled, and the deadlines they set, count from when they ran.
    assert scheduled[-1] > at(10)


def test_the_watchdog_leaves_ready_workflow_tasks_to_a_slot_that_moves_on(make_env,
                                                                          monkeypatch):
    env = make_env(BURST)
    for n in range(3):
        env.start("one", f"b{n}")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Clock(at(10)))
    steps = worker.steps
    look = slots.PENDING_LOOK
    # A slot awake and driving, whose handler returned a moment ago: its batches decide (within
    # the window however long this pass takes).
    monkeypatch.setattr(slots, "PENDING_LOOK", 3600.0)
    steps.awake(+1)
    steps.ran("wfh:noop", 0.00001)

    worker.watchdog.run_once(at(10))

    assert [env.describe(f"b{n}")["activities"] for n in range(3)] == [[]] * 3
    # It looks again as soon as the slot would be late.
    assert worker.watchdog.pause(False) == look

    # Held up since in a handler believed quick: the watchdog decides itself.
    steps._moved -= 7200.0
    worker.watchdog.run_once(at(10))

    assert all(env.describe(f"b{n}")["activities"] for n in range(3))
    assert worker.watchdog.pause(False) == WATCH_TICK


def test_the_watchdog_stops_deciding_a_burst_once_a_slot_moves_on(make_env, monkeypatch):
    env = make_env(BURST)
    for n in range(20):
        env.start("one", f"b{n:02d}")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Clock(at(10)))
    steps = worker.steps
    monkeypatch.setattr(slots, "PENDING_LOOK", 3600.0)
    steps.awake(+1)
    decide = slots._decide

    def deciding(shared: Shared, now: datetime, limit: int, check_deadlines: bool) -> int:
        # A slot's handler returns while the watchdog decides its first batch: from then on
        # that slot's batches decide the rest, each first step taken at once.
        decided = decide(shared, now, limit, check_deadlines)
        steps.ran("wfh:noop", 0.00001)
        return decided

    monkeypatch.setattr(slots, "_decide", deciding)
    worker.watchdog.run_once(at(10))

    assert sum(1 for n in range(20) if env.describe(f"b{n:02d}")["activities"]) \
        == StepPath.DECISIONS
    # Held up since in a handler believed quick: the watchdog decides the rest itself.
    monkeypatch.setattr(slots, "_decide", decide)
    steps._moved -= 7200.0
    worker.watchdog.run_once(at(10))
    assert all(env.describe(f"b{n:02d}")["activities"] for n in range(20))


def test_while_a_slot_decides_the_watchdog_sweeps_once_a_tick_and_when_something_comes_due(
        make_env, monkeypatch):
    env = make_env(TIMER_FLOW)
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Clock(at(10)))
    steps = worker.steps
    monkeypatch.setattr(slots, "PENDING_LOOK", 3600.0)
    steps.awake(+1)
    steps.ran("wfh:noop", 0.00001)
    swept: list[datetime] = []

    def counting(engine: Any, now: datetime, **kwargs: Any) -> Any:
        swept.append(now)
        return sweep(engine, now, **kwargs)

    monkeypatch.setattr("wfctl.worker.watchdog.sweep", counting)
    env.start("sleeper", "s1")
    worker.watchdog.run_once(at(10))    # swept: s1's first workflow task is left to the slot
    worker.steps.serve(False)           # the slot's batch decides it: its timer fires at 15
    assert env.describe("s1")["timers"][0]["status"] == "scheduled"
    worker.watchdog.run_once(at(11))    # a look within WATCH_TICK: nothing due, no sweep
    assert swept == [at(10)]

    worker.watchdog._swept_at -= WATCH_TICK
    worker.watchdog.run_once(at(12))    # a tick later: swept again, the timer found ahead
    assert swept == [at(10), at(12)]
    worker.watchdog.run_once(at(15))    # due: swept at once, and the timer fires
    assert swept == [at(10), at(12), at(15)]
    assert env.describe("s1")["timers"][0]["status"] == "fired"


def test_a_batch_with_every_place_taken_still_decides_one_ready_workflow_task(make_env):
    env = make_env(BURST)
    # More first steps ready than a batch has places for, its own and those for a quick
    # handler's attempts ahead of them.
    waiting = slots.QUICK_BATCH + 1
    for n in range(waiting):
        env.start("one", f"a{n:02d}")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Clock(at(10)))
    worker.watchdog.run_once(at(10))
    env.start("one", "b1")
    env.start("one", "b2")
    worker.steps.ran("wfh:noop", 0.00001)

    assert worker.steps.serve(False)

    started = [n for n in range(waiting)
               if env.describe(f"a{n:02d}")["activities"][0]["status"] == "started"]
    assert len(started) == slots.QUICK_BATCH
    # Decided all the same, its first step left ready for a place; b2 waits.
    assert [a["status"] for a in env.describe("b1")["activities"]] == ["scheduled"]
    assert env.describe("b2")["activities"] == []


def test_an_outcome_handed_in_during_a_burst_of_decisions_is_recorded_before_the_burst_ends(
        make_env, monkeypatch):
    env = make_env(BURST)
    env.start("gate", "g1")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=Clock(at(10)))
    worker.watchdog.run_once(at(10))   # g1's activity is ready
    for n in range(200):
        env.start("one", f"b{n:03d}")
    slot = worker.slots[0]

    def passes() -> None:
        # The slot's loop: its first pass claims g1's activity, whose handler waits for
        # `release`; the next ones record its outcome and go on with what is ready.
        while slot.run_once(at(10)):
            pass

    running = threading.Thread(target=passes, daemon=True)
    running.start()
    assert wait_until(lambda: env.describe("g1")["activities"]
                      and env.describe("g1")["activities"][0]["status"] == "started")
    # In the handler (not known to be quick): no slot drives, the decisions are the watchdog's.
    assert wait_until(lambda: not worker.steps.driving())

    # While the watchdog decides the burst, batch by batch, g1's handler returns.
    burst = threading.current_thread()
    # (g1's attempt's status, how many of the burst were decided) after each batch's decisions.
    seen: list[tuple[str, int]] = []
    decide = slots._decide

    def deciding(shared: Shared, now: datetime, limit: int, check_deadlines: bool) -> int:
        decided = decide(shared, now, limit, check_deadlines)
        if threading.current_thread() is burst and not seen:
            wfh_supervision.release.set()
            assert wait_until(lambda: worker.steps.waiting() > 0)
        seen.append((env.describe("g1")["activities"][0]["status"],
                     decided + (seen[-1][1] if seen else 0)))
        return decided

    monkeypatch.setattr(slots, "_decide", deciding)
    worker.watchdog.run_once(at(10))
    running.join(10)
    worker.watchdog.run_once(at(10))

    assert seen[0][0] == "started"
    recorded = next(decided for status, decided in seen if status == "completed")
    assert recorded < 200, "the outcome waited for the whole burst"
    assert all(env.describe(f"b{n:03d}")["activities"] for n in range(200))
