"""What an operator does: retry (and the deadline), pause, resume, cancel, terminate, signal."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import wfh
import wfh_deadlines
from conftest import at

from wfctl import ActivityCancelled
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.errors import Conflict, DeadlinePassed, InvalidInput
from wfctl.lang import handlers
from wfctl.lang.context import ActivityContext, HeartbeatBuffer

pytestmark = pytest.mark.both_backends

GUARDED = """
version: 1
workflows:
  guarded:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:mark
        name: first
      - delay: 1h
      - activity: wfh:mark
        name: last
  flaky:
    deadline: 1h
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh_deadlines:fail_first_time
        name: flaky
        max_attempts: 1
      - activity: wfh:mark
        name: last
  approval:
    steps:
      - wait_for_signal: approved
        timeout: 1h
      - activity: wfh:mark
        name: after
  slow:
    steps:
      - activity: wfh:noop
        name: long
        heartbeat: 30s
      - activity: wfh:mark
        name: next
  bounded:
    run_timeout: 60s
    steps:
      - delay: 1h
"""

AT_90 = "2026-04-12T12:01:30.000+00:00"


@pytest.fixture(autouse=True)
def _clear_calls() -> Iterator[None]:
    yield
    wfh.calls.clear()
    wfh.deadline_calls.clear()
    wfh_deadlines.failed_once.clear()


def check(env, seconds: float) -> list[dict[str, Any]]:
    return sweep_deadlines(env.engine, "checker", at(seconds),
                           lambda spec, state: handlers.call(spec, state))


def failed_by_deadline(env, instance_id: str = "g1") -> None:
    env.start("guarded", instance_id, now=0)
    env.run(0)
    check(env, 90)
    assert env.describe(instance_id)["status"] == "failed"


# retry and the deadline


def test_retry_refuses_to_keep_a_passed_deadline_unless_told(make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)
    env.clock.set(100)
    before = env.history("g1")

    with pytest.raises(DeadlinePassed) as caught:
        env.client.retry("g1")

    assert isinstance(caught.value, InvalidInput)
    assert str(caught.value) == (
        f"cannot retry g1 keeping its deadline: it passed at {AT_90}, so the next deadline "
        "check would fail it again; pass extend_deadline=D (a new deadline from now), "
        "clear_deadline=True (none) or keep_deadline=True (fail it again; on_deadline does not "
        "run twice)")
    assert env.history("g1") == before
    assert env.describe("g1")["status"] == "failed"


def test_retry_keep_deadline_keeps_a_passed_deadline_warns_and_the_next_check_fails_it_again(
        make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)
    env.clock.set(100)

    result = env.client.retry("g1", keep_deadline=True)

    assert result["deadline_change"] == "kept"
    assert result["deadline_at"] == at(90)
    assert result["step"] == "delay 1h"
    assert result["warnings"] == [
        f"its deadline already passed at {AT_90}: the next deadline check will fail it again; "
        "retry with --extend-deadline D or --clear-deadline"
    ]
    retried = env.events("g1", "WorkflowRetried")[0]["attributes"]
    assert retried["step"] == "delay 1h"
    assert retried["previous_status"] == "failed"
    assert (retried["deadline_change"], retried["deadline_at"]) == ("kept", at(90))
    doc = env.describe("g1")
    assert (doc["status"], doc["deadline_at"], doc["deadline_seconds"]) == ("running", at(90), 90)

    assert [f["workflow_instance_id"] for f in check(env, 100)] == ["g1"]
    exceeded = env.events("g1", "WorkflowDeadlineExceeded")
    assert [e["attributes"].get("handler_already_ran") for e in exceeded] == [None, True]
    assert env.describe("g1")["status"] == "failed"
    # on_deadline ran once for its one deadline instant.
    assert len(wfh.deadline_calls) == 1


def test_a_deadline_extended_by_a_retry_runs_on_deadline_again_when_it_passes(make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)
    env.clock.set(100)
    env.client.retry("g1", extend_deadline="5m")
    env.run(100)

    check(env, 400)

    assert len(wfh.deadline_calls) == 2
    assert "handler_already_ran" not in env.events("g1", "WorkflowDeadlineExceeded")[1][
        "attributes"]


def test_retry_extend_deadline_sets_now_plus_the_duration(make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)
    env.clock.set(100)

    result = env.client.retry("g1", extend_deadline="5m")

    assert (result["deadline_change"], result["deadline_at"]) == ("extended", at(400))
    assert result["warnings"] == []
    retried = env.events("g1", "WorkflowRetried")[0]["attributes"]
    assert retried["deadline_change"] == "extended"
    assert retried["deadline_at"] == at(400)
    assert retried["previous_deadline_at"] == at(90)
    doc = env.describe("g1")
    assert (doc["deadline_at"], doc["deadline_seconds"]) == (at(400), 300)
    env.run(100)
    assert check(env, 399.999) == []
    assert env.describe("g1")["status"] == "running"
    assert [f["workflow_instance_id"] for f in check(env, 400)] == ["g1"]


def test_retry_clear_deadline_removes_it_and_the_workflow_runs_to_the_end(make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)
    env.clock.set(100)

    result = env.client.retry("g1", clear_deadline=True)

    assert (result["deadline_change"], result["deadline_at"]) == ("cleared", None)
    retried = env.events("g1", "WorkflowRetried")[0]["attributes"]
    assert (retried["deadline_change"], retried["deadline_at"]) == ("cleared", None)
    assert retried["previous_deadline_at"] == at(90)
    doc = env.describe("g1")
    assert (doc["deadline_at"], doc["deadline_seconds"]) == (None, None)
    env.run(100)
    assert check(env, 10**6) == []
    env.run(3700)
    assert env.describe("g1")["status"] == "completed"


def test_retry_runs_again_from_the_failed_step_keeping_a_future_deadline(make_env):
    env = make_env(GUARDED)
    env.start("flaky", "f1", now=0)
    env.run(0)
    assert env.describe("f1")["status"] == "failed"
    env.clock.set(10)

    result = env.client.retry("f1")

    assert (result["step"], result["deadline_change"]) == ("flaky", "kept")
    assert result["deadline_at"] == at(3600)
    assert result["warnings"] == []
    env.run(10)
    doc = env.describe("f1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"ran_first": 1, "recovered": True, "ran_last": 1}
    assert wfh.calls == [("first", 1), ("last", 1)]
    assert [(a["step"], a["status"], a["superseded"]) for a in doc["activities"]] == [
        ("first", "completed", False), ("flaky", "failed", True),
        ("flaky", "completed", False), ("last", "completed", False)]


def test_retry_of_a_timed_out_instance_starts_its_run_timeout_afresh(make_env):
    env = make_env(GUARDED)
    env.start("bounded", "b1", now=0)
    env.run(0)
    env.run(60)
    assert env.describe("b1")["status"] == "timed_out"
    env.clock.set(100)

    result = env.client.retry("b1")

    assert result["warnings"] == []
    doc = env.describe("b1")
    assert doc["status"] == "running"
    assert doc["run"]["run_deadline_at"] == at(160)
    assert env.events("b1", "WorkflowRetried")[0]["attributes"]["previous_status"] == "timed_out"


def test_retry_refuses_extend_and_clear_together(make_env):
    env = make_env(GUARDED)
    failed_by_deadline(env)

    with pytest.raises(InvalidInput) as caught:
        env.client.retry("g1", extend_deadline="5m", clear_deadline=True)
    assert str(caught.value) == "extend_deadline and clear_deadline exclude each other"
    with pytest.raises(InvalidInput) as caught:
        env.client.retry("g1", clear_deadline=True, keep_deadline=True)
    assert str(caught.value) == "clear_deadline and keep_deadline exclude each other"


def test_cli_retry_refuses_a_passed_deadline_naming_the_three_choices(make_env, wfctl):
    env = make_env(GUARDED)
    failed_by_deadline(env)

    code, out, err = wfctl(env, "retry", "g1", "--json")

    assert (code, out) == (1, "")
    assert err == (
        f"Error: cannot retry g1 keeping its deadline: it passed at {AT_90}, so the next "
        "deadline check would fail it again; pass --extend-deadline D (a new deadline from "
        "now), --clear-deadline (none) or --keep-deadline (fail it again; on_deadline does "
        "not run twice)\n")
    assert env.describe("g1")["status"] == "failed"


def test_cli_retry_keep_deadline_warns_on_stderr_that_the_deadline_passed(make_env, wfctl):
    env = make_env(GUARDED)
    failed_by_deadline(env)

    code, out, err = wfctl(env, "retry", "g1", "--keep-deadline")

    assert code == 0
    assert out == f"Retrying g1 from step delay 1h; deadline kept: {AT_90}\n"
    assert err == (f"Warning: its deadline already passed at {AT_90}: the next deadline check "
                   "will fail it again; retry with --extend-deadline D or --clear-deadline\n")


def test_cli_retry_extend_deadline(make_env, wfctl):
    env = make_env(GUARDED)
    failed_by_deadline(env)

    code, out, err = wfctl(env, "retry", "g1", "--extend-deadline", "{hours: 2}")

    assert code == 0, err
    assert out.startswith("Retrying g1 from step delay 1h; deadline extended: ")
    assert err == ""
    assert env.describe("g1")["deadline_seconds"] == 7200


@pytest.mark.parametrize(("args", "code", "message"), [
    (["--extend-deadline", "NONE"], 1, "Error: --extend-deadline: expected a duration, not NONE\n"),
    (["--extend-deadline", "5m", "--clear-deadline"], 2,
     "Error: --extend-deadline and --clear-deadline exclude each other\n"),
    (["--extend-deadline", "5m", "--keep-deadline"], 2,
     "Error: --extend-deadline and --keep-deadline exclude each other\n"),
    (["--clear-deadline", "--keep-deadline"], 2,
     "Error: --clear-deadline and --keep-deadline exclude each other\n"),
    (["--extend-deadline", "5m", "--clear-deadline", "--keep-deadline"], 2,
     "Error: --extend-deadline, --clear-deadline and --keep-deadline exclude each other\n"),
])
def test_cli_retry_refuses_a_deadline_change_that_is_not_one(make_env, wfctl, args, code, message):
    env = make_env(GUARDED)
    failed_by_deadline(env)

    assert wfctl(env, "retry", "g1", *args) == (code, "", message)
    assert env.describe("g1")["status"] == "failed"


@pytest.mark.parametrize("status", ["completed", "running"])
def test_cli_retry_of_a_completed_or_running_instance_is_an_error(make_env, wfctl, status):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0, deadline="NONE")
    env.run(0)
    if status == "completed":
        env.run(3600)
    assert env.describe("g1")["status"] == status

    code, out, err = wfctl(env, "retry", "g1")

    assert code == 1
    assert out == ""
    assert err == (f"Error: cannot retry g1: it is {status} "
                   "(only failed, timed_out, cancelled or terminated instances can be retried)\n")


def test_cli_retry_of_an_unknown_instance_is_an_error(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)

    code, _, err = wfctl(env, "retry", "nope")

    assert (code, err) == (1, "Error: no instance 'nope'\n")


# pause and resume


def test_pause_lets_the_running_activity_finish_and_keeps_its_result(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0, input={"n": 1})
    env.decide(0)
    task = env.claim(1)
    env.clock.set(2)

    assert env.client.pause("g1") == {"workflow_instance_id": "g1", "status": "paused"}

    assert env.engine.complete_activity(task, {"fetched": 10}, at(3)) is None
    env.run(4)
    doc = env.describe("g1")
    assert doc["status"] == "paused"
    assert doc["state"] == {"n": 1, "fetched": 10}
    assert doc["run"]["current_step"] == "first"
    assert doc["timers"] == []
    types = env.event_types("g1")
    assert types.index("WorkflowPaused") < types.index("ActivityCompleted")
    assert "TimerScheduled" not in types


def test_resume_starts_the_next_step(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.decide(0)
    task = env.claim(1)
    env.clock.set(2)
    env.client.pause("g1")
    env.engine.complete_activity(task, {"fetched": 10}, at(3))
    env.run(4)
    env.clock.set(10)

    assert env.client.resume("g1") == {"workflow_instance_id": "g1", "status": "running"}

    env.run(10)
    doc = env.describe("g1")
    assert doc["status"] == "running"
    assert doc["run"]["wait_kind"] == "timer"
    assert doc["timers"][0]["fire_at"] == at(3610)
    resumed = env.events("g1", "WorkflowResumed")[0]
    assert (resumed["at"], resumed["attributes"]["status"]) == (at(10), "running")
    types = env.event_types("g1")
    assert types.index("WorkflowResumed") < types.index("TimerScheduled")


def test_a_paused_signal_wait_resumes_waiting_and_takes_the_signal(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    env.clock.set(5)
    env.client.pause("a1")
    env.client.signal("a1", "approved", {"ok": True})
    env.run(6)
    assert env.describe("a1")["status"] == "paused"

    env.clock.set(7)
    assert env.client.resume("a1")["status"] == "waiting"
    env.run(7)

    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"ok": True, "ran_after": 1}


def test_a_reason_given_is_recorded_and_none_given_leaves_the_events_as_they_were(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.decide(1)
    env.client.pause("a1")
    env.client.resume("a1", reason="")
    env.client.signal("a1", "approved")
    env.client.pause("a1", reason="maintenance")
    env.client.resume("a1", reason="done")
    env.client.signal("a1", "nudge", {"n": 1}, force=True, reason="checking")
    attributes = [(e["event_type"], e["attributes"]) for e in env.history("a1")
                  if e["event_type"] in ("WorkflowPaused", "WorkflowResumed", "SignalReceived")]
    assert attributes == [
        ("WorkflowPaused", {}),
        ("WorkflowResumed", {"status": "waiting"}),
        ("SignalReceived", {"signal": "approved", "data": None, "buffered": False}),
        ("WorkflowPaused", {"reason": "maintenance"}),
        ("WorkflowResumed", {"status": "waiting", "reason": "done"}),
        ("SignalReceived", {"signal": "nudge", "data": {"n": 1}, "buffered": True,
                            "reason": "checking"}),
    ]
    env.start("flaky", "f1", now=10)
    env.run(11)
    env.run(12)
    assert env.describe("f1")["status"] == "failed"
    env.client.retry("f1")
    env.client.terminate("f1")
    env.client.retry("f1", reason="fixed the input")
    first, second = [e["attributes"] for e in env.events("f1", "WorkflowRetried")]
    assert "reason" not in first and second["reason"] == "fixed the input"
    assert set(second) - set(first) == {"reason"}


def test_pause_twice_and_resume_of_a_running_instance_are_conflicts(make_env):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)
    env.client.pause("g1")

    with pytest.raises(Conflict, match="g1 is already paused"):
        env.client.pause("g1")
    env.client.resume("g1")
    with pytest.raises(Conflict, match=r"g1 is not paused \(it is running\)"):
        env.client.resume("g1")


def test_cli_pause_and_resume_print_the_new_status(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("guarded", "g1", now=0)

    assert wfctl(env, "pause", "g1") == (0, "g1: paused\n", "")
    assert wfctl(env, "resume", "g1") == (0, "g1: running\n", "")


# cancel and terminate


def _heartbeating(env, task, seconds: float) -> ActivityContext:
    """The context a handler sees, its heartbeats written at T0 + seconds."""
    buffer = HeartbeatBuffer(lambda details: env.engine.record_heartbeat(task, details, at(seconds)),
                             task.heartbeat_timeout)
    return ActivityContext(
        workflow_id=task.workflow_instance_id, run_id=task.workflow_run_id,
        activity_id=task.activity_id, step=task.step, attempt=task.attempt,
        max_attempts=task.max_attempts, last_heartbeat_details=None,
        schedule_to_close_deadline_at=None, close_deadline_at=None,
        heartbeat_deadline_at=None, heartbeat_timeout=task.heartbeat_timeout, heartbeats=buffer,
    )


def test_cancel_is_requested_the_handler_sees_activity_cancelled_then_the_run_closes(make_env):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.decide(0)
    task = env.claim(1)
    _heartbeating(env, task, 2).heartbeat({"done": 1})
    env.clock.set(5)

    result = env.client.cancel("s1", reason="operator")

    assert result == {"workflow_instance_id": "s1", "status": "running", "cancel_requested": True}
    requested = env.events("s1", "WorkflowCancelRequested")[0]["attributes"]
    assert requested["reason"] == "operator"
    env.decide(5)
    with pytest.raises(ActivityCancelled):
        _heartbeating(env, task, 6).heartbeat({"done": 2})
    assert env.engine.complete_activity(task, {"done": True}, at(7)) is not None

    doc = env.describe("s1")
    assert doc["status"] == "cancelled"
    assert doc["activities"][0]["status"] == "cancelled"
    assert "done" not in doc["state"]
    types = env.event_types("s1")
    assert types.index("WorkflowCancelRequested") < types.index("ActivityCancelled") \
        < types.index("WorkflowCancelled")
    assert types[-1] == "WorkflowCancelled"
    with pytest.raises(Conflict, match="cannot cancel s1: it is cancelled"):
        env.client.cancel("s1")


def test_cancel_twice_is_a_conflict(make_env):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.client.cancel("s1")

    with pytest.raises(Conflict, match="cancellation of s1 was already requested"):
        env.client.cancel("s1")


def test_terminate_closes_the_run_at_once(make_env):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.decide(0)
    task = env.claim(1)
    env.clock.set(5)

    assert env.client.terminate("s1", reason="runaway") == {"workflow_instance_id": "s1",
                                                            "status": "terminated"}

    doc = env.describe("s1")
    assert doc["status"] == "terminated"
    assert doc["closed_at"] == at(5)
    assert doc["activities"][0]["status"] == "cancelled"
    assert env.event_types("s1")[-2:] == ["ActivityCancelled", "WorkflowTerminated"]
    assert env.events("s1", "WorkflowTerminated")[0]["attributes"]["reason"] == "runaway"
    with pytest.raises(ActivityCancelled):
        _heartbeating(env, task, 6).heartbeat({"done": 1})
    assert env.decide(10) == 0
    with pytest.raises(Conflict, match=r"cannot terminate s1: it is terminated \(a closed "
                                       r"instance accepts only describe, history and retry\)"):
        env.client.terminate("s1")


def test_cli_cancel_and_terminate_print_what_happened(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.start("slow", "s2", now=0)

    assert wfctl(env, "cancel", "s1", "--reason", "operator") == (0, "s1: cancel requested\n", "")
    assert wfctl(env, "terminate", "s2") == (0, "s2: terminated\n", "")
    code, _, err = wfctl(env, "pause", "s2")
    assert code == 1
    assert err == ("Error: cannot pause s2: it is terminated "
                   "(a closed instance accepts only describe, history and retry)\n")



def test_the_reason_of_a_cancel_is_shown_by_describe_and_history(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.decide(0)
    env.client.cancel("s1", reason="customer withdrew")
    requested = json.loads(wfctl(env, "describe", "s1", "--json")[1])
    env.decide(5)

    code, out, _ = wfctl(env, "describe", "s1", "--json")
    text = wfctl(env, "describe", "s1")[1]
    history = wfctl(env, "history", "s1")[1]

    assert code == 0
    assert requested["run"]["stop_reason"] == "customer withdrew"
    assert json.loads(out)["run"]["stop_reason"] == "customer withdrew"
    assert json.loads(out)["run"]["closed_reason"] == "cancelled"
    assert re.search(r"^stop reason\s+customer withdrew$", text, re.MULTILINE)
    assert "Cancel requested: customer withdrew" in history
    assert "Workflow cancelled: customer withdrew" in history
    assert env.events("s1", "WorkflowCancelled")[0]["attributes"]["cancel_reason"] \
        == "customer withdrew"


def test_the_reason_of_a_terminate_is_shown_by_describe_and_history(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.client.terminate("s1", reason="runaway loop")

    doc = json.loads(wfctl(env, "describe", "s1", "--json")[1])

    assert doc["run"]["stop_reason"] == "runaway loop"
    assert re.search(r"^stop reason\s+runaway loop$", wfctl(env, "describe", "s1")[1],
                     re.MULTILINE)
    assert "Workflow terminated: runaway loop" in wfctl(env, "history", "s1")[1]


def test_a_stop_without_a_reason_says_none_was_given(make_env, wfctl):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)
    env.start("slow", "s2", now=0)
    env.client.terminate("s1")
    env.client.cancel("s2")

    assert json.loads(wfctl(env, "describe", "s1", "--json")[1])["run"]["stop_reason"] is None
    assert "stop reason" not in wfctl(env, "describe", "s1")[1]
    assert "Workflow terminated (no reason given)" in wfctl(env, "history", "s1")[1]
    assert "Cancel requested (no reason given)" in wfctl(env, "history", "s2")[1]


def test_a_run_never_asked_to_stop_has_no_stop_reason(make_env):
    env = make_env(GUARDED)
    env.start("slow", "s1", now=0)

    assert env.describe("s1")["run"]["stop_reason"] is None

CHILDREN = """
version: 1
workflows:
  stops_children:
    child_policy: terminate
    steps:
      - workflow: child
        name: sub
  cancels_children:
    child_policy: request_cancel
    steps:
      - workflow: child
        name: sub
  child:
    steps:
      - delay: 1h
"""


def test_terminate_applies_child_policy_terminate_to_open_children(make_env):
    env = make_env(CHILDREN)
    env.start("stops_children", "p1", now=0)
    env.run(0)
    child_id = env.describe("p1")["children"][0]["workflow_instance_id"]
    env.clock.set(5)

    env.client.terminate("p1")

    applied = env.events("p1", "ParentClosePolicyApplied")[0]["attributes"]
    assert (applied["child_instance_id"], applied["policy"]) == (child_id, "terminate")
    assert env.describe(child_id)["status"] == "terminated"
    assert env.event_types(child_id)[-2:] == ["TimerCancelled", "WorkflowTerminated"]


def test_cancel_applies_child_policy_request_cancel_to_open_children(make_env):
    env = make_env(CHILDREN)
    env.start("cancels_children", "p1", now=0)
    env.run(0)
    child_id = env.describe("p1")["children"][0]["workflow_instance_id"]
    env.clock.set(5)

    env.client.cancel("p1")
    env.run(5)

    assert env.describe("p1")["status"] == "cancelled"
    applied = env.events("p1", "ParentClosePolicyApplied")[0]["attributes"]
    assert applied["policy"] == "request_cancel"
    assert env.describe(child_id)["status"] == "cancelled"
    assert "WorkflowCancelRequested" in env.event_types(child_id)


# signals


def test_a_signal_wait_opens_and_the_signal_is_received(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    opened = env.events("a1", "SignalWaitOpened")[0]["attributes"]
    assert opened["signal"] == "approved"
    assert (opened["timeout_seconds"], opened["timeout_at"]) == (3600, at(3600))
    env.clock.set(100)

    assert env.client.signal("a1", "approved", {"by": "ops"}) == {
        "workflow_instance_id": "a1", "signal": "approved", "buffered": False}
    env.run(100)

    received = env.events("a1", "SignalReceived")[0]
    assert received["at"] == at(100)
    assert received["attributes"]["data"] == {"by": "ops"}
    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["timers"][0]["status"] == "cancelled"
    env.run(3600)
    assert env.describe("a1")["status"] == "completed"
    assert "TimerFired" not in env.event_types("a1")


def test_a_signal_wait_that_times_out_fails_the_step_with_timeout_kind_signal_wait(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)

    env.run(3599.999)
    assert env.describe("a1")["status"] == "waiting"
    env.run(3600)

    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["failure"]["failure_category"] == "timeout"
    assert doc["failure"]["timeout_kind"] == "signal_wait"
    assert doc["failure"]["deadline_at"] == at(3600)
    fired = env.events("a1", "TimerFired")[0]["attributes"]
    assert fired["kind"] == "signal_timeout"
    failed = env.events("a1", "WorkflowFailed")[0]["attributes"]
    assert (failed["timeout_kind"], failed["step"]) == ("signal_wait", "approved")
    assert wfh.calls == []


def test_a_signal_arriving_after_the_wait_timed_out_does_not_satisfy_it(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    env.clock.set(3700)

    env.client.signal("a1", "approved", {"by": "late"})
    env.run(3700)

    doc = env.describe("a1")
    assert doc["status"] == "failed"
    assert doc["failure"]["timeout_kind"] == "signal_wait"
    assert "by" not in doc["state"]
    assert wfh.calls == []


def test_a_signal_before_the_timeout_wins_though_the_watchdog_comes_after_it(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    env.clock.set(3599)
    env.client.signal("a1", "approved", {"by": "ops"})

    # No worker decided in between: the next pass sweeps after the timeout's instant.
    env.run(3700)

    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["state"]["by"] == "ops"
    assert "TimerFired" not in env.event_types("a1")
    cancelled = env.events("a1", "TimerCancelled")[0]
    assert cancelled["attributes"]["kind"] == "signal_timeout"
    assert cancelled["attributes"]["reason"] == "signal_received"
    assert wfh.calls == [("after", 1)]


def test_a_signal_at_the_timeouts_instant_is_late_and_the_timer_fires(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    env.clock.set(3600)
    env.client.signal("a1", "approved")

    env.run(3700)

    assert env.describe("a1")["failure"]["timeout_kind"] == "signal_wait"
    assert env.events("a1", "TimerFired")[0]["attributes"]["kind"] == "signal_timeout"


def test_history_instants_never_go_back_when_an_operation_was_given_an_earlier_one(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.run(0)
    env.clock.set(100)
    env.client.signal("a1", "approved")
    # An operation whose clock was read before the signal's transaction committed.
    env.clock.set(99.5)
    env.client.pause("a1")

    history = env.history("a1")
    assert [e["event_type"] for e in history][-2:] == ["WorkflowTaskScheduled", "WorkflowPaused"]
    assert history[-1]["at"] == at(100)
    instants = [event["at"] for event in history]
    assert instants == sorted(instants)


def test_signalling_a_closed_instance_is_a_conflict(make_env):
    env = make_env(GUARDED)
    env.start("approval", "a1", now=0)
    env.client.terminate("a1")

    with pytest.raises(Conflict, match="cannot signal a1: it is terminated"):
        env.client.signal("a1", "approved")
