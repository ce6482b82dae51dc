"""Real `wfctl work` processes: a retry policy's backoff outlives the worker that scheduled it,
and the long-running worker deletes what retention lets go."""

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
from wfctl.errors import NotFound

pytestmark = pytest.mark.both_backends
REPO = Path(__file__).parent.parent

HANDLERS = '''
"""Handlers for the process tests, imported by the worker from beside workflows.yaml."""

from pathlib import Path


def flaky(state):
    """Fails the first time it runs for a workflow, succeeds every time after."""
    marker = Path(state["marker"])
    if not marker.exists():
        marker.write_text("failed once")
        raise ConnectionError("downstream unavailable")
    return {"recovered": True}


def noop(state):
    return None
'''

WORKFLOWS = """
version: 1
workflows:
  flaky:
    retry: {max_attempts: 2, backoff: [3s]}
    steps:
      - activity: wfh_retry_process:flaky
        max_attempts: 1
  short_lived:
    retention: 1s
    steps:
      - activity: wfh_retry_process:noop
"""


def wait_for(predicate, seconds: float) -> bool:
    """Poll what the worker wrote; every instant checked is the worker's own doing."""
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "wfh_retry_process.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    return tmp_path


def spawn(folder: Path, db: str, *args: str) -> subprocess.Popen:
    """A worker, returned once it serves (its start takes seconds on a loaded machine)."""
    # The worker runs in the folder: this checkout's wfctl, not whichever one is installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    log_path = folder / "worker.log"
    started = log_path.read_text().count("worker_started") if log_path.exists() else 0
    with log_path.open("a") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", db, "-w",
             str(folder / "workflows.yaml"), "work", "--poll-interval", "50ms", *args],
            cwd=folder, stdout=subprocess.DEVNULL, stderr=log, env=env)
    if "--once" not in args:
        assert wait_for(lambda: log_path.read_text().count("worker_started") > started, 15), \
            log_path.read_text()
    return worker


def stop(worker: subprocess.Popen) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


@pytest.mark.process
def test_a_retry_due_while_its_worker_was_killed_runs_on_time_in_the_next(folder: Path, db: str):
    first = spawn(folder, db)
    second = None
    try:
        with Client(db, folder / "workflows.yaml") as client:
            client.start("flaky", "f1", input={"marker": str(folder / "failed-once")})
            assert wait_for(lambda: (client.describe("f1")["workflow_retry"] or {})
                            .get("next_attempt_at") is not None, 5), "no retry was scheduled"
            due = client.describe("f1")["workflow_retry"]["next_attempt_at"]

            first.send_signal(signal.SIGKILL)
            first.wait(timeout=5)
            second = spawn(folder, db)

            assert wait_for(lambda: client.describe("f1")["status"] == "completed", 8)
            retried = client.history("f1", event_types=("WorkflowRetried",))[0]
            late = (retried["at"] - due).total_seconds()
            assert 0 <= late < 1.0, f"retried {late:.3f}s after it was due"
            assert client.describe("f1")["state"]["recovered"] is True
            assert [e["event_type"] for e in client.history("f1")].count("WorkflowFailed") == 1
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        if second is not None:
            stop(second)
    assert second.returncode == 0


@pytest.mark.process
def test_the_long_running_worker_deletes_what_its_retention_lets_go(folder: Path, db: str):
    with Client(db, folder / "workflows.yaml") as client:
        client.start("short_lived", "s1")
        client.start("flaky", "kept", input={"marker": str(folder / "failed-once")})
        once = spawn(folder, db, "--once")
        assert once.wait(timeout=15) == 0
        assert client.describe("s1")["status"] == "completed"
        time.sleep(1.0)

        worker = spawn(folder, db)
        try:
            def pruned() -> bool:
                try:
                    client.describe("s1")
                except NotFound:
                    return True
                return False

            assert wait_for(pruned, 5), "the worker did not prune s1"
            assert client.describe("kept")["status"] in ("running", "completed")
            # Once nothing more is due, the worker says what it pruned.
            assert wait_for(lambda: "instances_pruned" in (folder / "worker.log").read_text(), 5)
        finally:
            stop(worker)
    assert worker.returncode == 0
