"""A workflow retry policy as a person and a script see it: describe (text and JSON), history
lines, validate, and a refused retry by hand."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator

import pytest
import wfh
from conftest import at
from rich.console import Console

from wfctl.show import render

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
defaults:
  retention: 30d
workflows:
  flaky:
    execution_timeout: 2h
    retry: {max_attempts: 3, backoff: {initial: 1m, coefficient: 2, max: 1h}}
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh:fail_times
        name: flaky
        max_attempts: 1
  plain:
    retention: NONE
    steps:
      - activity: wfh:mark
"""


def iso(seconds: float) -> str:
    return at(seconds).isoformat(timespec="milliseconds")


@pytest.fixture(autouse=True)
def _forget_calls() -> Iterator[None]:
    wfh.failing_calls.clear()
    yield
    wfh.failing_calls.clear()


@pytest.fixture
def env(make_env):
    """f1 failed its flaky step at +0s; its retry policy runs it again at +60s."""
    env = make_env(DEFINITIONS)
    env.start("flaky", "f1", now=0)
    env.run(0)
    return env



def piped() -> Console:
    return Console(file=io.StringIO(), width=500)


def test_describe_json_has_the_attempt_the_next_attempt_and_the_policy(env, wfctl):
    code, out, _ = wfctl(env, "describe", "f1", "--json")

    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "running"
    assert doc["workflow_retry"] == {"attempt": 2, "max_attempts": 3, "next_attempt_at": iso(60)}
    assert doc["retry_policy"] == {"max_attempts": 3, "backoff_seconds": [60, 120],
                                   "when": ["activity", "run_timeout", "signal_wait"]}
    assert (doc["run"]["wait_kind"], doc["run"]["run_deadline_at"]) == ("retry", None)


def test_describe_json_workflow_retry_is_null_without_a_policy(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("plain", "p1", now=0)

    code, out, _ = wfctl(env, "describe", "p1", "--json")

    doc = json.loads(out)
    assert (code, doc["workflow_retry"], doc["retry_policy"]) == (0, None, None)


def test_describe_shows_the_policy_the_attempt_and_a_countdown_to_the_next(env):
    out = piped()

    render.describe(out, env.describe("f1"), at(30))

    text = out.file.getvalue()
    assert re.search(r"waiting on\s+retry\n", text)
    assert re.search(r"retry policy\s+3 attempts · backoff 1m→2m · "
                     r"when activity,run_timeout,signal_wait\n", text)
    assert re.search(rf"retry attempt\s+2 of 3\s+{re.escape(iso(60))}\s+.*\s+next attempt in 30s",
                     text)
    assert f"Failure (attempt 2 runs at {iso(60)})" in text
    assert re.search(r"message\s+Activity flaky failed: call 1 failed", text)


def test_describe_after_the_retry_shows_the_attempt_it_is_on(env):
    env.run(60)
    out = piped()

    render.describe(out, env.describe("f1"), at(90))

    text = out.file.getvalue()
    assert re.search(r"retry attempt\s+2 of 3\s+-\s+-\s+-\n", text)
    assert "waiting on" not in text and "Failure" not in text


def test_history_explains_the_retry_in_one_line_each(env, wfctl):
    env.run(60)

    code, out, _ = wfctl(env, "history", "f1")

    assert code == 0
    assert (f"WorkflowRetryScheduled  Retry policy: attempt 2 of 3 at {iso(60)} (backoff 1m), "
            "after step flaky failed\n") in re.sub(r" {2,}", "  ", out)
    assert "WorkflowRetried  Retried by its retry policy from step flaky, attempt 2 of 3; " \
           "deadline kept\n" in re.sub(r" {2,}", "  ", out)


def test_history_says_when_a_cancel_ends_the_backoff(env, wfctl):
    env.clock.set(30)
    env.client.terminate("f1", "giving up")

    _, out, _ = wfctl(env, "history", "f1")

    assert (f"TimerCancelled  Retry backoff cancelled (terminated): the attempt due at {iso(60)} "
            "will not run\n") in re.sub(r" {2,}", "  ", out)


def test_retry_by_hand_during_the_backoff_is_one_error_line(env, wfctl):
    code, out, err = wfctl(env, "retry", "f1")

    assert (code, out) == (1, "")
    assert re.fullmatch(
        r"Error: cannot retry f1: it is running, waiting to retry at \S+ \(its retry policy's "
        r"attempt 2\) \(only failed, timed_out, cancelled or terminated instances can be "
        r"retried\)\n", err)


def test_validate_shows_each_types_retry_policy_and_retention(env, wfctl):
    code, out, _ = wfctl(env, "validate", "--json")

    types = json.loads(out)["workflow_types"]
    assert code == 0
    assert types["flaky"]["retry_policy"] == {"max_attempts": 3, "backoff_seconds": [60, 120],
                                              "when": ["activity", "run_timeout", "signal_wait"]}
    assert types["flaky"]["retention_seconds"] == 30 * 86400
    assert (types["plain"]["retry_policy"], types["plain"]["retention_seconds"]) == (None, None)

    code, out, _ = wfctl(env, "validate")
    assert re.search(r"flaky\s+first → flaky\s+.*3 attempts · backoff 1m→2m · when "
                     r"activity,run_timeout,signal_wait\s+30d\n", out)
    assert re.search(r"plain\s+mark\s+.*\s-\s+forever\n", out)


def test_the_timeline_draws_the_backoff_and_a_retry_that_came_late(env):
    from wfctl.show import timeline

    env.run(90)
    picture = timeline.draw(env.describe("f1"), env.history("f1"), now=at(100), width=100)
    lines = [line.plain for line in picture.lines]

    run_lane = next(line for line in lines if line.startswith("run 1 "))
    bars = run_lane[6:].rstrip()
    # The backoff to +60s, then 30 s with no worker to retry it, then the run again to +90s.
    assert re.fullmatch(r"━░+·+━+", bars), bars
    assert 1.8 < bars.count("░") / bars.count("·") < 2.2, bars
    assert "░ retry backoff" in lines[-1]


def test_start_wait_keeps_following_through_the_backoff_with_a_countdown(env):
    from wfctl.show.live import live_view

    out = Console(file=io.StringIO(), force_terminal=True, width=160)

    out.print(live_view(env.describe("f1"), env.history("f1")[-3:], at(45)))

    text = re.sub(r"\x1b\[[0-9;]*m", "", out.file.getvalue())
    assert "flaky f1  running  run 1  step flaky  waiting on retry" in text
    assert re.search(rf"retry attempt 2 of 3\s+{re.escape(iso(60))}\s+in 15s", text)
    assert "WorkflowRetryScheduled" in text
