"""A real long-running `wfctl work` fails a workflow about a second after its deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wfctl import Client, clock

pytestmark = pytest.mark.process
REPO = Path(__file__).parent.parent

HANDLERS = '''
import time


def busy(state):
    time.sleep(3)
    return {"busy_done": True}


def page(state):
    with open(state["marker"], "a") as out:
        out.write("called\\n")
'''

WORKFLOWS = """
version: 1
workflows:
  guarded:
    deadline: 2s
    on_deadline: busy_handlers:page
    steps:
      - activity: busy_handlers:busy
      - activity: busy_handlers:busy
        name: never
"""


def wait_for(condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_long_running_worker_fails_a_workflow_within_a_second_of_its_deadline_mid_handler(
        tmp_path: Path):
    (tmp_path / "busy_handlers.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    db, workflows, log_path = tmp_path / "wfctl.db", tmp_path / "workflows.yaml", tmp_path / "w.log"
    marker = tmp_path / "on_deadline_calls.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    # The wfctl of this checkout, whatever is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    with log_path.open("w") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", str(db), "-w", str(workflows), "work",
             "--grace", "10s"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log_file, env=env,
        )
    try:
        assert wait_for(lambda: "worker_started" in log_path.read_text(), 15), \
            log_path.read_text()
        with Client(db, workflows) as client:
            started = client.start("guarded", "g1", input={"marker": str(marker)})
            assert wait_for(lambda: client.describe("g1")["status"] == "failed", 10), \
                log_path.read_text()
            history = client.history("g1")
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(20)
    output = log_path.read_text()

    deadline_at = clock.parse(started["deadline_at"])
    [exceeded] = [e for e in history if e["event_type"] == "WorkflowDeadlineExceeded"]
    gap = (clock.parse(exceeded["at"]) - deadline_at).total_seconds()
    print(f"deadline_at -> WorkflowDeadlineExceeded: {gap:.3f} s")
    assert 0 <= gap < 1.5
    [activity_started] = [e for e in history if e["event_type"] == "ActivityStarted"]
    assert clock.parse(activity_started["at"]) < deadline_at
    assert [e["event_type"] for e in history][-3:] == [
        "ActivityCancelled", "WorkflowDeadlineExceeded", "WorkflowFailed"]
    assert code == 0
    # the busy handler finished after the expiry: its result was discarded, never applied
    with Client(db, workflows) as client:
        doc = client.describe("g1")
        assert "ActivityCompleted" not in [e["event_type"] for e in client.history("g1")]
    assert "busy_done" not in doc["state"]
    assert "activity_result_discarded" in output
    assert marker.read_text() == "called\n"
    assert "workflow_deadline_exceeded" in output
