"""A real `wfctl work` process times a run out on time while its only slot is busy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wfctl import Client

pytestmark = pytest.mark.both_backends
REPO = Path(__file__).parent.parent

HANDLERS = '''
"""Handlers for the process test, imported by the worker from beside workflows.yaml."""

import time
from pathlib import Path


def busy(state):
    Path(state["marker"]).write_text("started")
    time.sleep(state["sleep"])
    return {"finished": True}
'''

WORKFLOWS = """
version: 1
workflows:
  busy:
    run_timeout: 2s
    steps:
      - activity: wfh_process_busy:busy
        start_to_close: 1m
        max_attempts: 1
"""


def wait_for(predicate, seconds: float) -> bool:
    """Poll what the worker wrote; the timeout itself is the worker's doing, not ours."""
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.mark.process
def test_a_long_running_worker_times_out_a_run_within_a_second_while_a_handler_is_busy(
        tmp_path: Path, db: str):
    (tmp_path / "wfh_process_busy.py").write_text(HANDLERS)
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(WORKFLOWS))
    marker = tmp_path / "handler-started"
    log = (tmp_path / "worker.log").open("w")
    # The worker runs in tmp_path: this checkout's wfctl, not whichever one is installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH")]))}
    worker = subprocess.Popen(
        [sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows), "work",
         "--concurrency", "1", "--grace", "10s"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, env=env,
    )
    try:
        # Started only once the worker serves: a run_timeout of 2 s is shorter than a worker's
        # start on a loaded machine.
        assert wait_for(lambda: "worker_started" in (tmp_path / "worker.log").read_text(), 15)
        with Client(db, workflows) as client:
            client.start("busy", "b1", input={"marker": str(marker), "sleep": 4})
            assert wait_for(marker.exists, 5), "the worker never ran the handler"
            assert wait_for(lambda: client.describe("b1")["status"] == "timed_out", 5)

            doc = client.describe("b1")
            timed_out = client.history("b1", event_types=("WorkflowTimedOut",))[0]
            started = client.history("b1", event_types=("ActivityStarted",))[0]
            run_deadline = doc["run"]["run_deadline_at"]
            late = (timed_out["at"] - run_deadline).total_seconds()
            assert 0 <= late < 1.0, f"timed out {late:.3f}s after the run deadline"
            assert (timed_out["at"] - started["at"]).total_seconds() < 4, \
                "the handler was still sleeping when the run timed out"
            assert timed_out["attributes"]["timeout_kind"] == "run_timeout"
            assert doc["failure"]["exception_class"] == "WorkflowTimeoutException"
            assert [a["status"] for a in doc["activities"]] == ["cancelled"]
            assert client.history("b1")[-2]["event_type"] == "ActivityCancelled"

            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=15) == 0

            assert client.history("b1")[-1]["event_type"] == "WorkflowTimedOut"
            assert client.describe("b1")["state"] == {"marker": str(marker), "sleep": 4}
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
    # The handler's late result was discarded, or, still running 2 s after its attempt ended,
    # the handler was abandoned (shutdown does not wait for it): never applied either way.
    output = (tmp_path / "worker.log").read_text()
    assert "activity_result_discarded" in output or "handler_abandoned" in output
