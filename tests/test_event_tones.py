"""Only what went wrong looks wrong: history on a terminal and in the web view paints an event by
what it says about the run — a timer cancelled because its signal came is news, not a failure;
a stop someone asked for is a stop."""

from __future__ import annotations

import io
import re

import pytest
from conftest import at
from rich.console import Console

from wfctl.show import render
from wfctl.ui.app import App

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  approval:
    steps:
      - wait_for_signal: approved
        timeout: 2m
      - activity: wfh:noop
        name: ship
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BOLD_RED = "\x1b[1;31m"
MAGENTA = "\x1b[35m"
RETRY = {"step": "charge", "attempt": 1, "next_attempt": 2, "max_attempts": 3,
         "retry_available_at": at(1), "backoff_seconds": 1}


@pytest.fixture
def env(make_env):
    return make_env(DEFINITIONS)


def terminal_history(env, instance_id: str) -> dict[str, str]:
    """Each event type's row of `history` on a colour terminal, as raw text with its escapes."""
    out = Console(file=io.StringIO(), force_terminal=True, width=220, color_system="standard",
                  highlight=False)
    render.history(out, env.history(instance_id),
                   start_at=env.describe(instance_id)["created_at"])
    rows = {}
    for line in out.file.getvalue().splitlines():
        words = ANSI.sub("", line).split()
        if len(words) > 3 and words[0].isdigit():
            rows[words[3]] = line
    return rows


def web_history(env, instance_id: str) -> dict[str, str]:
    """Each event type's row of the history page: its class and its event cell."""
    app = App(env.client, database="wfctl.db", hosts=App.loopback_hosts(8484))
    page = app.handle("GET", f"/instances/{instance_id}/history", {"Host": "127.0.0.1:8484"})
    assert page.status == 200
    return {event: row for row, event in re.findall(
        r'(<tr class="ev[^"]*">\s*<td data-label="seq">\d+</td>.*?<td class="event">.*?'
        r'(\w+)</td>)', page.text, re.S)}


def test_a_timer_cancelled_because_its_signal_came_is_not_a_failure(env):
    env.start("approval", "a1")
    env.run(0)
    env.clock.set(30)
    env.client.signal("a1", "approved")
    env.run(30)
    cancelled = env.events("a1", "TimerCancelled")
    assert [e["attributes"]["reason"] for e in cancelled] == ["signal_received"]

    row = terminal_history(env, "a1")["TimerCancelled"]
    assert BOLD_RED not in row and "\x1b[33m" not in row, row
    assert "reason=signal_received" in ANSI.sub("", row)
    web = web_history(env, "a1")["TimerCancelled"]
    assert web.startswith('<tr class="ev ">') and 'class="flag"' not in web, web


def test_a_cancel_someone_asked_for_is_a_stop_not_a_failure(env):
    env.start("approval", "a2")
    env.run(0)
    env.clock.set(30)
    env.client.cancel("a2", "customer changed their mind")
    env.run(30)
    assert env.describe("a2")["status"] == "cancelled"

    rows = terminal_history(env, "a2")
    for event in ("WorkflowCancelRequested", "TimerCancelled", "WorkflowCancelled"):
        assert f"{MAGENTA}{event}" in rows[event] and BOLD_RED not in rows[event], rows[event]
    web = web_history(env, "a2")
    for event in ("WorkflowCancelRequested", "TimerCancelled", "WorkflowCancelled"):
        assert web[event].startswith('<tr class="ev stopped">'), web[event]
        assert '<span class="flag">stopped</span>' in web[event]


def test_a_signal_wait_that_runs_out_stands_out_where_it_ran_out(env):
    env.start("approval", "a3")
    env.run(0)
    env.run(120)
    assert env.describe("a3")["status"] == "failed"

    rows = terminal_history(env, "a3")
    assert f"{BOLD_RED}TimerFired" in rows["TimerFired"]
    assert f"{BOLD_RED}WorkflowFailed" in rows["WorkflowFailed"]
    web = web_history(env, "a3")
    assert web["TimerFired"].startswith('<tr class="ev timeout">')
    assert '<span class="flag">timeout</span>' in web["TimerFired"]


@pytest.mark.parametrize(("event_type", "attributes", "tone"), [
    ("TimerCancelled", {"reason": "signal_received", "kind": "signal_timeout"}, ""),
    ("TimerCancelled", {"reason": "completed", "kind": "delay"}, ""),
    ("TimerCancelled", {"reason": "continued_as_new", "kind": "delay"}, ""),
    ("TimerCancelled", {"reason": "cancelled", "kind": "delay"}, "stopped"),
    ("TimerCancelled", {"reason": "terminated", "kind": "workflow_retry", "fire_at": at(9)},
     "stopped"),
    ("TimerCancelled", {"reason": "run_timeout", "kind": "delay"}, "failure"),
    ("TimerCancelled", {"reason": "deadline_exceeded", "kind": "delay"}, "failure"),
    ("ActivityCancelled", {"reason": "terminated", "attempt": 1}, "stopped"),
    ("ActivityCancelled", {"reason": "execution_timeout", "attempt": 1}, "failure"),
    ("ActivityCancelled", {"reason": "activity", "attempt": 1}, "failure"),
    ("TimerFired", {"kind": "signal_timeout", "step": "approved"}, "timeout"),
    ("TimerFired", {"kind": "delay", "step": "delay 1m"}, ""),
    ("SignalReceived", {"signal": "approved"}, ""),
    ("WorkflowTerminated", {"reason": "reset"}, "stopped"),
    ("WorkflowCancelled", {}, "stopped"),
    ("ChildWorkflowFailed", {"status": "cancelled"}, "failure"),
    ("ActivityFailed", {"reason": "error", "exception_class": "KeyError", "message": "sku"},
     "failure"),
    ("ActivityRetryScheduled", {**RETRY, "reason": "error", "failure": {}}, "failure"),
    ("WorkflowRetryScheduled", {"cause": "activity", "attempt": 2, "max_attempts": 3,
                                "next_attempt_at": at(1), "delay_seconds": 1}, "failure"),
    ("ActivityRetryScheduled", {**RETRY, "timeout_kind": "start_to_close"}, "timeout"),
    ("WorkflowDeadlineExceeded", {"deadline_at": at(0)}, "timeout"),
    ("WorkflowTaskTimedOut", {"timeout_kind": "workflow_task", "scheduled_event_id": 2,
                              "started_event_id": 3}, "timeout"),
    ("WorkflowCompleted", {}, "ok"),
    ("StartRejected", {"reason": "duplicate"}, ""),
    ("WorkflowPaused", {}, ""),
])
def test_each_event_is_painted_by_what_it_says_about_the_run(event_type, attributes, tone):
    event = {"seq": 1, "run_number": 1, "event_type": event_type, "at": at(0),
             "attributes": attributes}
    assert render.tone(event) == tone
    out = Console(file=io.StringIO(), force_terminal=True, width=220, color_system="standard",
                  highlight=False)
    render.history(out, [event], start_at=at(0))
    raw = out.file.getvalue()
    assert (BOLD_RED + event_type in raw) == (tone in ("timeout", "failure")), raw
    assert (MAGENTA + event_type in raw) == (tone == "stopped"), raw
