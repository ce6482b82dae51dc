"""Ctrl-C (SIGINT) ends every follow or wait mode with exit 130; `start --wait` says the workflow
keeps running, and says early when no live worker serves the workflow's queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wfctl import Client
from wfctl.lang import definitions

DEFINITIONS = """
version: 1
workflows:
  report:
    steps:
      - activity: wfh:noop
        queue: reports
      - wait_for_signal: go
"""
REPO = Path(__file__).parent.parent
pytestmark = pytest.mark.both_backends


@pytest.fixture
def files(tmp_path: Path, db: str) -> tuple[str, Path]:
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(DEFINITIONS))
    return db, workflows


def default_sigint() -> None:
    """In the child before it runs wfctl: Ctrl-C's default action, as in a terminal. A shell
    starts a background job (`pytest … &`) with SIGINT ignored, and children inherit that."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def wfctl(files: tuple[str, Path], *args: str) -> subprocess.Popen:
    db, workflows = files
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows),
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, preexec_fn=default_sigint)


def interrupt_once(process: subprocess.Popen) -> tuple[str, str, str]:
    """Wait for the command's first line on stdout (it is following by then), send SIGINT, and
    give (that line, the rest of stdout, stderr)."""
    first = process.stdout.readline()
    assert first, process.communicate()
    # A moment more, so that the signal comes inside the follow loop rather than before it.
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    finally:
        process.kill()
    # Read through the same buffered files as the first line (communicate() would skip what
    # they already hold); what is left is a few lines, so the pipes never filled.
    return first, process.stdout.read(), process.stderr.read()


@pytest.mark.process
def test_start_wait_warns_of_no_worker_and_on_ctrl_c_says_the_workflow_keeps_running(files):
    started = time.monotonic()
    process = wfctl(files, "start", "report", "r1", "--wait")
    warning = process.stderr.readline()
    warned_after = time.monotonic() - started

    _, _, err = interrupt_once(process)

    assert warning == ("Warning: no live worker serves queue reports; r1 waits until one runs: "
                       "wfctl work --queue reports\n")
    # At once, not after a worker's lease (30 s) could have told that none serves the queue.
    assert warned_after < 30, "the warning waited for a lease"
    assert process.returncode == 130
    assert "Interrupted: r1 keeps running" in err
    assert "Traceback" not in err
    with Client(*files) as client:
        assert client.describe("r1")["status"] == "running"


@pytest.mark.process
def test_start_wait_says_nothing_of_workers_when_one_serves_the_queue(files, backend):
    db, workflows = files
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), str(REPO / "tests"), os.environ.get("PYTHONPATH")]))}
    worker = subprocess.Popen([sys.executable, "-m", "wfctl", "--db", db, "-w",
                               str(workflows), "work", "--queue", "reports"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        end = time.monotonic() + 10
        while backend == "sqlite" and not Path(db).exists():
            assert time.monotonic() < end, "the worker never created the database"
            time.sleep(0.05)
        with Client(*files) as client:
            while not client.serves("reports"):
                assert time.monotonic() < end, "the worker never registered"
                time.sleep(0.05)
        process = wfctl(files, "start", "report", "r2", "--wait")
        _, _, err = interrupt_once(process)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(10)

    assert process.returncode == 130
    assert "Warning" not in err
    assert "Interrupted: r2 keeps running" in err


@pytest.mark.process
@pytest.mark.parametrize("command", [["history", "r1", "--follow"],
                                     ["history", "r1", "--follow", "--json"],
                                     ["list", "--watch"],
                                     # Left to the typer application: a count it converts.
                                     ["history", "r1", "--follow", "--run", "01"],
                                     ["list", "--watch", "--limit", "050"]])
def test_ctrl_c_ends_a_follow_mode_with_130(files, command):
    with Client(*files) as client:
        client.start("report", "r1")
    process = wfctl(files, *command)

    first, out, err = interrupt_once(process)

    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "WorkflowStarted" in first + out or "r1" in first + out


def test_only_a_live_worker_on_the_queue_serves_it(files):
    now = datetime.now(UTC)
    with Client(*files, create=True) as client:
        with client.store.write() as tx:
            for worker_id, queues, lease, stopped in (
                    ("lapsed", "reports", now - timedelta(minutes=1), None),
                    ("stopped", "reports", now + timedelta(minutes=1), now),
                    ("other", "default,bulk", now + timedelta(minutes=1), None)):
                tx.register_worker({
                    "worker_id": worker_id, "kind": "worker", "hostname": "h", "pid": 1,
                    "pid_started": None, "queues": queues, "started_at": now,
                    "heartbeat_at": now, "lease_expires_at": lease, "stopped_at": stopped})

        assert not client.serves("reports")
        assert client.serves("bulk")
        assert client.serves(None)



@pytest.mark.parametrize(("steps", "queue"), [
    ("- delay: 1s\n- activity: wfh:noop\n  queue: reports", "reports"),
    ("- parallel:\n  - activity: wfh:noop\n    queue: bulk\n  - activity: wfh:noop", "bulk"),
    ("- activity: wfh:noop", "default"),
    ("- wait_for_signal: go", None),
])
def test_the_queue_a_workflow_starts_on_is_its_first_activitys(steps, queue):
    source = "version: 1\nworkflows:\n  t:\n    steps:\n" + textwrap.indent(steps, "      ")

    assert definitions.parse(source, "workflows.yaml").types["t"].first_queue() == queue
