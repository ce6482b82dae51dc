"""A real `wfctl work --once` ends, and says how: a database it cannot write is one error line
within seconds, and a pass a signal interrupted does not exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import wait_until
from test_bad_input import as_an_ordinary_user

from wfctl import Client, clock
from wfctl.store.sqlite import _BUSY_TIMEOUT_MS

pytestmark = pytest.mark.process

REPO = Path(__file__).parent.parent
# What a process may take on a slow machine besides what the test is about.
MARGIN = 30

DEFINITIONS = """
version: 1
workflows:
  slow:
    steps:
      - activity: once_handlers:slow
  nightly:
    deadline: 1m
    steps:
      - delay: 1d
"""

HANDLERS = '''
"""Handlers that tell the test where they are."""

import pathlib
import time


def slow(state):
    pathlib.Path(state["_started"]).write_text("started")
    time.sleep(state["_seconds"])
    return {"slept": True}
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(DEFINITIONS))
    (tmp_path / "once_handlers.py").write_text(HANDLERS)
    return tmp_path


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_process_left() -> Iterator[None]:
    """A worker a failing test leaves running (one that never returns) is killed."""
    yield
    while STARTED:
        process = STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait()


def wfctl_process(folder: Path, *args: str, preexec_fn=None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "wfctl", "--db", "wfctl.db",
                                "-w", "workflows.yaml", *args], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=preexec_fn)
    STARTED.append(process)
    return process


def start(folder: Path, instance_id: str, seconds: float) -> None:
    with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
        client.start("slow", instance_id, input={"_started": str(folder / f"{instance_id}.started"),
                                                 "_seconds": seconds})


def status(folder: Path, instance_id: str) -> str:
    with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
        return client.describe(instance_id)["status"]


def test_work_once_on_a_read_only_database_is_an_error_within_the_busy_timeout(folder):
    start(folder, "s1", seconds=0)
    for leftover in folder.glob("wfctl.db-*"):
        leftover.unlink()
    (folder / "wfctl.db").chmod(0o444)
    before = (folder / "wfctl.db").read_bytes()

    began = time.monotonic()
    worker = wfctl_process(folder, "work", "--once", preexec_fn=as_an_ordinary_user())
    # Before, it waited to register for as long as the file stayed read-only.
    out, err = worker.communicate(timeout=_BUSY_TIMEOUT_MS / 1000 + MARGIN)

    assert (worker.returncode, out, err) == (1, "", "Error: wfctl.db: the database is read-only\n")
    assert time.monotonic() - began < _BUSY_TIMEOUT_MS / 1000 + MARGIN
    assert (folder / "wfctl.db").read_bytes() == before
    assert sorted(path.name for path in folder.glob("wfctl.db*")) == ["wfctl.db"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_work_once_pass_a_signal_interrupts_exits_128_plus_the_signal(folder, signum):
    start(folder, "s1", seconds=1)
    # SIGINT's default action, which a shell's background job (`pytest … &`) would not have.
    worker = wfctl_process(folder, "work", "--once",
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_until(lambda: (folder / "s1.started").exists(), "the handler running", timeout=MARGIN)

    worker.send_signal(signum)
    out, err = worker.communicate(timeout=MARGIN)

    assert worker.returncode == 128 + signum, err
    assert out == "" and "Traceback" not in err
    # The first signal drains: the handler that was running finished, and was recorded.
    assert "worker_draining" in err
    assert status(folder, "s1") == "completed"


def test_work_once_says_at_info_that_it_skips_deadlines_and_warns_only_when_one_is_due(folder):
    with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
        client.start("nightly", "n1")
    info = wfctl_process(folder, "work", "--once")
    info_out, info_err = info.communicate(timeout=MARGIN)
    # What cron mails: nothing, when nothing needs anyone.
    quiet = wfctl_process(folder, "work", "--once", "--log-level", "warning")
    quiet_out, quiet_err = quiet.communicate(timeout=MARGIN)

    assert (info.returncode, info_out) == (0, ""), info_err
    [notice] = [line for line in info_err.splitlines() if "deadline_checks_skipped" in line]
    assert " INFO    deadline_checks_skipped " in notice
    assert (quiet.returncode, quiet_out, quiet_err) == (0, "", "")

    an_hour_ago = clock.now() - timedelta(hours=1)
    with Client(folder / "wfctl.db", folder / "workflows.yaml",
                clock_now=lambda: an_hour_ago) as client:
        due_since = client.start("nightly", "late")["deadline_at"]
    warned = wfctl_process(folder, "work", "--once", "--log-level", "warning")
    warned_out, warned_err = warned.communicate(timeout=MARGIN)

    assert (warned.returncode, warned_out) == (0, ""), warned_err
    [warning] = warned_err.splitlines()
    assert " WARNING deadline_checks_skipped " in warning
    assert f"deadline_due_since={clock.iso(due_since)}" in warning
