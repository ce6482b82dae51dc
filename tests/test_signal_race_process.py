"""`wfctl work --once` passes that come after a signal wait's timeout take a signal that came
before it: history never records the timeout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wfctl import Client

pytestmark = pytest.mark.both_backends
REPO = Path(__file__).parent.parent

WORKFLOWS = """
version: 1
workflows:
  approval:
    steps:
      - wait_for_signal: approved
        timeout: 3s
"""


def wfctl(tmp_path: Path, db: str, *args: str) -> subprocess.CompletedProcess:
    # Run in tmp_path: this checkout's wfctl, not whichever one is installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "wfctl", "--db", db,
                           "-w", str(tmp_path / "workflows.yaml"), *args],
                          cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60,
                          check=True)


@pytest.mark.process
def test_a_signal_sent_before_the_timeout_completes_the_wait_when_the_next_pass_is_after_it(
        tmp_path: Path, db: str):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    wfctl(tmp_path, db, "start", "approval", "s1")
    wfctl(tmp_path, db, "work", "--once")
    wfctl(tmp_path, db, "signal", "s1", "approved")
    with Client(db, tmp_path / "workflows.yaml") as client:
        timeout_at = client.describe("s1")["timers"][0]["fire_at"]
        received = client.history("s1")[-2]
        assert received["event_type"] == "SignalReceived"
        # The signal is in before the timeout; the next pass only after it.
        assert received["at"] < timeout_at
        time.sleep(max(0.0, (timeout_at - received["at"]).total_seconds()) + 0.2)
        wfctl(tmp_path, db, "work", "--once")

        history = client.history("s1")
        types = [event["event_type"] for event in history]
        assert client.describe("s1")["status"] == "completed"
        assert "TimerFired" not in types and "WorkflowFailed" not in types
        assert types[-1] == "WorkflowCompleted"
        cancelled = next(e for e in history if e["event_type"] == "TimerCancelled")
        assert cancelled["attributes"]["reason"] == "signal_received"
        instants = [event["at"] for event in history]
        assert instants == sorted(instants)
