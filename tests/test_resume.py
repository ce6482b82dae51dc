"""`wfctl retry` of a cancelled or terminated instance: what the stopped step does when it
resumes (a delay, a signal wait, a parallel step, a child), and the deadline rules."""

from __future__ import annotations

import pytest
from conftest import at

from wfctl import clock

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  delayed:
    deadline: 10s
    steps:
      - activity: wfh:noop
        name: first
      - delay: 1h
        name: cool_off
      - activity: wfh:noop
        name: last
  gated:
    steps:
      - wait_for_signal: approved
        timeout: 1h
  fan_out:
    steps:
      - parallel:
          - activity: wfh:noop
            name: quick
          - activity: wfh:noop
            name: slow
            queue: elsewhere
  parent_abandons:
    steps:
      - workflow: gated
        name: approval
  parent_terminates:
    child_policy: terminate
    steps:
      - workflow: gated
        name: approval
"""


def test_a_terminated_delay_waits_its_whole_duration_again(make_env):
    env = make_env(DEFINITIONS)
    env.start("delayed", "d1")
    env.run(0)
    assert env.describe("d1")["run"]["current_step"] == "cool_off"
    env.clock.set(5)
    env.client.terminate("d1", "by mistake")

    env.clock.set(6)
    result = env.client.retry("d1")

    assert (result["step"], result["deadline_change"], result["warnings"]) == \
        ("cool_off", "kept", [])
    [retried] = env.events("d1", "WorkflowRetried")
    assert retried["attributes"]["previous_status"] == "terminated"
    env.decide(6)
    timers = env.describe("d1")["timers"]
    assert [(t["status"], t["fire_at"]) for t in timers] == [
        ("cancelled", at(3600)), ("scheduled", at(6 + 3600))]
    assert env.events("d1", "ActivityScheduled")[-1]["attributes"]["step"] == "first"


def test_the_cli_resumes_a_terminated_instance_keeping_its_passed_deadline_with_a_warning(
        make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("delayed", "d1")
    env.run(0)
    env.clock.set(5)
    env.client.terminate("d1", "by mistake")

    code, out, err = wfctl(env, "retry", "d1", "--keep-deadline")

    # The CLI's clock is the wall clock's: the deadline (T0 + 10s) passed long ago.
    assert code == 0
    assert out == f"Retrying d1 from step cool_off; deadline kept: {clock.iso(at(10))}\n"
    assert err.startswith(f"Warning: its deadline already passed at {clock.iso(at(10))}")
    [retried] = env.events("d1", "WorkflowRetried")
    assert retried["attributes"]["previous_status"] == "terminated"
    assert env.describe("d1")["status"] == "running"

    code, out, err = wfctl(env, "retry", "d1")
    assert (code, out) == (1, "")
    assert err == ("Error: cannot retry d1: it is running (only failed, timed_out, cancelled or "
                   "terminated instances can be retried)\n")


def test_a_cancelled_signal_wait_opens_again_and_takes_a_signal_at_once(make_env):
    env = make_env(DEFINITIONS)
    env.start("gated", "g1")
    env.run(0)
    env.clock.set(1)
    env.client.cancel("g1")
    env.decide(1)
    assert env.describe("g1")["status"] == "cancelled"

    env.clock.set(2)
    assert env.client.retry("g1", clear_deadline=True)["warnings"] == []
    env.decide(2)
    assert env.describe("g1")["status"] == "waiting"
    [_, reopened] = env.events("g1", "SignalWaitOpened")
    assert reopened["attributes"]["timeout_at"] == at(2 + 3600)

    env.clock.set(3)
    env.client.signal("g1", "approved", {"by": "ops"})
    env.decide(3)
    assert env.describe("g1")["status"] == "completed"


def test_a_parallel_steps_completed_branch_does_not_run_again(make_env):
    env = make_env(DEFINITIONS)
    env.start("fan_out", "p1")
    env.run(0)
    assert [(a["step"], a["status"]) for a in env.describe("p1")["activities"]] == [
        ("quick", "completed"), ("slow", "scheduled")]
    env.clock.set(1)
    env.client.terminate("p1")

    env.clock.set(2)
    env.client.retry("p1")
    env.decide(2)

    activities = env.describe("p1")["activities"]
    assert [(a["step"], a["status"], a["superseded"]) for a in activities] == [
        ("quick", "completed", False), ("slow", "cancelled", True),
        ("slow", "scheduled", False)]


def test_an_abandoned_child_still_running_is_waited_for_again(make_env):
    env = make_env(DEFINITIONS)
    env.start("parent_abandons", "a1")
    env.run(0)
    [child] = env.describe("a1")["children"]
    env.clock.set(1)
    env.client.cancel("a1")
    env.decide(1)
    assert env.describe("a1")["status"] == "cancelled"
    assert env.describe(child["workflow_instance_id"])["status"] == "waiting"

    env.clock.set(2)
    env.client.retry("a1")
    env.decide(2)
    assert [c["workflow_instance_id"] for c in env.describe("a1")["children"]] == \
        [child["workflow_instance_id"]]
    env.clock.set(3)
    env.client.signal(child["workflow_instance_id"], "approved", {"by": "ops"})
    env.decide(3)
    env.decide(3)

    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert doc["state"]["approval"] == {"by": "ops"}


def test_a_child_that_completed_while_its_parent_was_stopped_is_not_started_again(make_env):
    env = make_env(DEFINITIONS)
    env.start("parent_abandons", "a1")
    env.run(0)
    [child] = env.describe("a1")["children"]
    child_id = child["workflow_instance_id"]
    env.clock.set(1)
    env.client.terminate("a1")
    env.clock.set(2)
    env.client.signal(child_id, "approved", {"by": "ops"})
    env.decide(2)
    assert env.describe(child_id)["status"] == "completed"

    env.clock.set(2)
    env.client.retry("a1")
    env.decide(3)

    doc = env.describe("a1")
    assert doc["status"] == "completed"
    assert [c["workflow_instance_id"] for c in doc["children"]] == [child_id]
    assert doc["state"]["approval"] == {"by": "ops"}


def test_a_child_its_parent_terminated_is_started_afresh(make_env):
    env = make_env(DEFINITIONS)
    env.start("parent_terminates", "t1")
    env.run(0)
    [first] = env.describe("t1")["children"]
    env.clock.set(1)
    env.client.terminate("t1")
    assert env.describe(first["workflow_instance_id"])["status"] == "terminated"

    env.clock.set(2)
    env.client.retry("t1")
    env.decide(2)

    children = env.describe("t1")["children"]
    assert [c["status"] for c in children] == ["terminated", "waiting"]
    assert env.describe("t1")["status"] == "waiting"


def test_a_completed_instance_is_still_refused(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.start("gated", "g1")
    env.run(0)
    env.clock.set(1)
    env.client.signal("g1", "approved")
    env.decide(1)

    code, out, err = wfctl(env, "retry", "g1")
    assert (code, out) == (1, "")
    assert err == ("Error: cannot retry g1: it is completed (only failed, timed_out, cancelled "
                   "or terminated instances can be retried)\n")
