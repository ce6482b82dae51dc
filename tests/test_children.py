"""Child workflows: the parent waits, the child's outcome reaches it, and the parent's
child_policy decides what happens to children still open when it closes."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import at

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends


def family(child_steps: str, *, child_timeouts: str = "", parent_timeouts: str = "",
           child_policy: str = "abandon") -> str:
    return f"""
version: 1
workflows:
  parent:
    child_policy: {child_policy}
{parent_timeouts}
    steps:
      - workflow: child
        name: sub
      - activity: wfh:noop
        name: after
  child:
{child_timeouts}
    steps:
{child_steps}
"""


def child_id(env: Any, parent: str = "p1") -> str:
    children = env.describe(parent)["children"]
    assert len(children) == 1
    return children[0]["workflow_instance_id"]


def test_the_parent_waits_for_its_child_and_gets_its_state_under_the_step_name(make_env):
    env = make_env(family("      - activity: wfh:add_one"))
    env.start("parent", "p1", input={"count": 1, "_secret": "s"})

    env.decide(0)

    doc = env.describe("p1")
    assert (doc["status"], doc["run"]["wait_kind"], doc["run"]["current_step"]) == \
        ("waiting", "child", "sub")
    child = doc["children"][0]
    assert child["workflow_instance_id"].startswith("p1.sub.")
    assert (child["workflow_type"], child["step"], child["status"]) == ("child", "sub", "running")
    started = env.events("p1", "ChildWorkflowStarted")[0]
    assert started["attributes"]["child_instance_id"] == child["workflow_instance_id"]
    assert started["attributes"]["workflow_type"] == "child"
    assert started["attributes"]["step"] == "sub"
    child_doc = env.describe(child["workflow_instance_id"])
    assert child_doc["parent_workflow_instance_id"] == "p1"
    assert child_doc["state"] == {"count": 1}

    env.run(1)

    completed = env.events("p1", "ChildWorkflowCompleted")[0]["attributes"]
    assert completed["child_instance_id"] == child["workflow_instance_id"]
    assert completed["child_run_id"] == started["attributes"]["child_run_id"]
    assert completed["status"] == "completed"
    assert completed["initiated_event_id"] == started["seq"]
    doc = env.describe("p1")
    assert doc["status"] == "completed"
    assert doc["state"] == {"count": 1, "_secret": "s", "sub": {"count": 2}}
    assert doc["children"][0]["status"] == "completed"
    assert env.describe(child["workflow_instance_id"])["status"] == "completed"


def test_a_failed_child_fails_the_parents_step(make_env):
    env = make_env(family("      - activity: wfh:value_error\n        max_attempts: 1"))
    env.start("parent", "p1")

    env.run(0)

    kid = child_id(env)
    failed = env.events("p1", "ChildWorkflowFailed")[0]["attributes"]
    assert (failed["child_instance_id"], failed["status"], failed["step"]) == (kid, "failed", "sub")
    assert failed["failure"]["exception_class"] == "ValueError"
    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert doc["children"][0]["status"] == "failed"
    assert doc["failure"]["failure_category"] == "child_workflow"
    assert doc["failure"]["propagation_kind"] == "child"
    assert doc["failure"]["exception_class"] == "ValueError"
    assert doc["failure"]["message"] == \
        f"Child workflow {kid} (child) failed: Activity value_error failed: bad value"
    assert env.events("p1", "WorkflowFailed")[0]["attributes"]["step"] == "sub"
    assert "ActivityScheduled" not in env.event_types("p1")


def test_a_timed_out_child_reaches_the_parent_and_fails_its_step(make_env):
    env = make_env(family("      - delay: 1h", child_timeouts="    run_timeout: 30s"))
    env.start("parent", "p1")
    env.run(0)

    env.run(29.999)
    assert env.describe("p1")["status"] == "waiting"
    env.run(30)

    kid = child_id(env)
    assert env.describe(kid)["status"] == "timed_out"
    timed_out = env.events("p1", "ChildWorkflowTimedOut")[0]
    assert timed_out["at"] == at(30)
    assert timed_out["attributes"]["child_instance_id"] == kid
    assert timed_out["attributes"]["timeout_kind"] == "run_timeout"
    assert timed_out["attributes"]["deadline_at"] == at(30)
    assert timed_out["attributes"]["failure"]["exception_class"] == "WorkflowTimeoutException"
    doc = env.describe("p1")
    assert doc["status"] == "failed"
    assert doc["children"][0]["status"] == "timed_out"
    assert doc["failure"]["failure_category"] == "child_workflow"
    assert doc["failure"]["timeout_kind"] == "run_timeout"
    assert doc["failure"]["deadline_at"] == at(30)
    assert doc["failure"]["message"] == (
        f"Child workflow {kid} (child) timed out: "
        "Workflow run deadline expired at 2026-04-12T12:00:30.000+00:00")


def test_a_child_that_continues_as_new_completes_the_step_with_its_last_runs_state(make_env):
    env = make_env("""
        version: 1
        workflows:
          parent:
            steps:
              - workflow: looper
          looper:
            steps:
              - activity: wfh:loop_counter
              - continue_as_new: {while: more}
    """)
    env.start("parent", "p1", input={"until": 3})

    env.run(0)

    kid = child_id(env)
    assert env.describe(kid)["run_count"] == 3
    completed = env.events("p1", "ChildWorkflowCompleted")
    assert len(completed) == 1
    assert completed[0]["attributes"]["child_run_id"] == \
        env.describe(kid)["run"]["workflow_run_id"]
    doc = env.describe("p1")
    assert doc["status"] == "completed"
    assert doc["state"]["looper"] == {"until": 3, "i": 3, "more": False}


def test_when_one_child_fails_the_parent_the_policy_reaches_the_others(make_env):
    env = make_env("""
        version: 1
        workflows:
          parent:
            child_policy: terminate
            steps:
              - parallel:
                  - workflow: patient
                  - workflow: hasty
          patient:
            steps:
              - delay: 1h
          hasty:
            run_timeout: 30s
            steps:
              - delay: 1h
    """)
    env.start("parent", "p1")
    env.run(0)
    assert env.describe("p1")["status"] == "waiting"

    env.run(30)

    doc = env.describe("p1")
    assert doc["status"] == "failed"
    statuses = {child["step"]: child["status"] for child in doc["children"]}
    assert statuses == {"patient": "terminated", "hasty": "timed_out"}
    applied = env.events("p1", "ParentClosePolicyApplied")
    patient = next(c["workflow_instance_id"] for c in doc["children"] if c["step"] == "patient")
    assert [(e["attributes"]["child_instance_id"], e["attributes"]["policy"]) for e in applied] \
        == [(patient, "terminate")]
    assert env.event_types("p1")[-2:] == ["WorkflowFailed", "ParentClosePolicyApplied"]


def close_parent(env: Any, how: str) -> str:
    """Close p1 by its execution timeout (at 60 s) or by an operator (at 30 s)."""
    if how == "timeout":
        env.run(60)
        return "timed_out"
    env.clock.set(30)
    if how == "terminate":
        env.client.terminate("p1", "operator")
        env.run(30)
        return "terminated"
    env.client.cancel("p1", "operator")
    env.run(30)
    return "cancelled"


@pytest.mark.parametrize("how", ["timeout", "terminate", "cancel"])
@pytest.mark.parametrize(("policy", "child_status"), [
    ("terminate", "terminated"),
    ("request_cancel", "cancelled"),
    ("abandon", "running"),
])
def test_the_child_policy_applies_to_open_children_when_the_parent_closes(
        make_env, how, policy, child_status):
    env = make_env(family("      - delay: 1h\n      - activity: wfh:noop",
                          parent_timeouts="    execution_timeout: 1m", child_policy=policy))
    env.start("parent", "p1")
    env.run(0)
    kid = child_id(env)

    parent_status = close_parent(env, how)

    doc = env.describe("p1")
    assert doc["status"] == parent_status
    applied = env.events("p1", "ParentClosePolicyApplied")
    assert len(applied) == 1
    assert applied[0]["attributes"]["child_instance_id"] == kid
    assert applied[0]["attributes"]["policy"] == policy
    assert applied[0]["attributes"]["child_status"] == "running"
    assert doc["children"][0]["status"] == child_status
    child = env.describe(kid)
    assert child["status"] == child_status
    child_types = env.event_types(kid)
    if policy == "terminate":
        assert child_types[-2:] == ["TimerCancelled", "WorkflowTerminated"]
        terminated = env.events(kid, "WorkflowTerminated")[0]["attributes"]
        assert terminated["reason"] == f"parent p1 closed ({parent_status})"
        assert terminated["child_policy"] == "terminate"
    elif policy == "request_cancel":
        requested = env.events(kid, "WorkflowCancelRequested")[0]["attributes"]
        assert requested["reason"] == f"parent p1 closed ({parent_status})"
        assert child_types[-2:] == ["TimerCancelled", "WorkflowCancelled"]
    else:
        assert "WorkflowCancelRequested" not in child_types
        assert child["timers"][0]["status"] == "scheduled"
        parent_events = env.history("p1")
        env.run(3600)
        assert env.describe(kid)["status"] == "completed"
        assert env.history("p1") == parent_events, "a closed parent hears nothing more"


def test_the_policy_record_comes_with_the_parents_timeout(make_env):
    env = make_env(family("      - delay: 1h", parent_timeouts="    execution_timeout: 1m",
                          child_policy="terminate"))
    env.start("parent", "p1")
    env.run(0)

    env.run(60)

    types = env.event_types("p1")
    assert types[-2:] == ["WorkflowTimedOut", "ParentClosePolicyApplied"]
    timed_out = env.events("p1", "WorkflowTimedOut")[0]
    applied = env.events("p1", "ParentClosePolicyApplied")[0]
    assert timed_out["attributes"]["child_policy"] == "terminate"
    assert applied["at"] == timed_out["at"] == at(60)
    assert env.events(child_id(env), "WorkflowTerminated")[0]["at"] == timed_out["at"]
