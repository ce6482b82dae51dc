"""A run that completes its last step leaves none of its activities open, whatever its steps
went through on the way: attempts retried, parallel branches, a step run again by a retry of
the whole workflow. (Such a close reads no activities to cancel: this is why it need not.)"""

from __future__ import annotations

import pytest
import wfh

pytestmark = pytest.mark.both_backends

STEPS = """
version: 1
workflows:
  winding:
    retry: {max_attempts: 2, backoff: [1m]}
    steps:
      - activity: wfh:fail_until
        name: retried
        max_attempts: 3
        backoff: [1s]
      - parallel:
          - activity: wfh:mark
            name: left
          - activity: wfh:fail_times
            name: right
            max_attempts: 1
      - activity: wfh:mark
        name: last
"""

OPEN = {"scheduled", "retry_scheduled", "started"}


@pytest.fixture(autouse=True)
def _fresh_calls():
    wfh.failing_calls.clear()
    yield
    wfh.failing_calls.clear()


def test_a_completed_run_leaves_no_activity_open(make_env):
    env = make_env(STEPS)
    env.start("winding", "w1", now=0)
    for now in (0, 1, 2, 61, 62):
        env.run(now)

    doc = env.describe("w1")
    assert doc["status"] == "completed"
    activities = doc["activities"]
    # The first attempt of `retried` failed and its second completed; the run failed at `right`,
    # and its retry ran `right` again (the failed one set aside) and went on to the end.
    assert [(a["step"], a["status"], a["attempt"], a["superseded"]) for a in activities] == [
        ("retried", "completed", 2, False), ("left", "completed", 1, False),
        ("right", "failed", 1, True), ("right", "completed", 1, False),
        ("last", "completed", 1, False)]
    assert "WorkflowRetried" in env.event_types("w1")
    assert not [a for a in activities if a["status"] in OPEN]
    assert "ActivityCancelled" not in env.event_types("w1")
