"""`wfctl retry` of a cancelled or terminated instance, with a real `wfctl work` process: the
stopped activity step runs again, the steps before it do not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import wait_until

pytestmark = [pytest.mark.both_backends, pytest.mark.process]
REPO = Path(__file__).parent.parent

HANDLERS = '''
"""Handlers for the resume tests, imported by the worker from beside workflows.yaml."""

import time
from pathlib import Path


def count(state, ctx):
    """Appends one line per call to the file `state["log"]`."""
    with open(state["log"], "a") as log:
        log.write(f"{ctx.step}\\n")
    return None


def held(state, ctx):
    """Logs its call, then waits until `state["release"]` exists (at most a minute)."""
    count(state, ctx)
    limit = time.monotonic() + 60
    while not Path(state["release"]).exists() and time.monotonic() < limit:
        time.sleep(0.02)
    return {"released": True}
'''

WORKFLOWS = """
version: 1
workflows:
  order:
    steps:
      - activity: wfh_resume:count
        name: pack
      - activity: wfh_resume:held
        name: ship
        max_attempts: 1
      - activity: wfh_resume:count
        name: notify
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def wfctl(folder: Path, db: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wfctl", "--db", db, "-w",
                           str(folder / "workflows.yaml"), *args],
                          cwd=folder, env=environment(), capture_output=True, text=True,
                          timeout=60)


def describe(folder: Path, db: str) -> dict:
    return json.loads(wfctl(folder, db, "describe", "o-1", "--json").stdout)


@pytest.mark.parametrize("stop", ["cancel", "terminate"])
def test_a_stopped_instance_resumes_at_the_stopped_step(tmp_path: Path, db: str, stop: str):
    (tmp_path / "wfh_resume.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    log, release = tmp_path / "calls.log", tmp_path / "release"
    state = json.dumps({"log": str(log), "release": str(release)})
    assert wfctl(tmp_path, db, "start", "order", "o-1", "--input", state).returncode == 0
    worker_log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "wfctl", "--db", db, "-w", str(tmp_path / "workflows.yaml"),
         "work", "--poll-interval", "50ms", "--concurrency", "2"],
        cwd=tmp_path, env=environment(), stdout=subprocess.DEVNULL, stderr=worker_log)
    try:
        wait_until(lambda: log.exists() and log.read_text() == "pack\nship\n",
                   "pack ran and ship started", 30)

        stopped = wfctl(tmp_path, db, stop, "o-1")
        assert stopped.returncode == 0, stopped.stderr
        closed = "cancelled" if stop == "cancel" else "terminated"
        wait_until(lambda: describe(tmp_path, db)["status"] == closed, f"the instance {closed}", 15)
        assert describe(tmp_path, db)["activities"][1]["status"] == "cancelled"

        retried = wfctl(tmp_path, db, "retry", "o-1")
        assert (retried.returncode, retried.stderr) == (0, "")
        assert retried.stdout == "Retrying o-1 from step ship; deadline kept: none\n"
        wait_until(lambda: log.read_text() == "pack\nship\nship\n", "ship started again", 15)
        release.touch()

        wait_until(lambda: describe(tmp_path, db)["status"] == "completed", "completed", 15)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        worker_log.close()

    # pack ran once; ship's stopped attempt and its new one; notify once.
    assert log.read_text() == "pack\nship\nship\nnotify\n"
    events = json.loads(wfctl(tmp_path, db, "history", "o-1", "--json").stdout)
    [retried_event] = [e for e in events if e["event_type"] == "WorkflowRetried"]
    assert retried_event["attributes"]["previous_status"] == closed
    assert retried_event["attributes"]["step"] == "ship"
    doc = describe(tmp_path, db)
    assert [(a["step"], a["status"], a["superseded"]) for a in doc["activities"]] == [
        ("pack", "completed", False), ("ship", "cancelled", True),
        ("ship", "completed", False), ("notify", "completed", False)]
    assert doc["state"]["released"] is True
