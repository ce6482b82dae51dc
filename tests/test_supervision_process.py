"""A real `wfctl work` never strands work: misbehaving handlers, stuck handlers, a database that is
busy or full, slow on_deadline handlers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_until
from test_bad_input import as_an_ordinary_user
from test_systemd import NotifySocket

from wfctl import Client, clock
from wfctl.worker.loop import BACKOFF_CAP

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

TESTS = Path(__file__).parent
REPO = TESTS.parent

DEFINITIONS = """
version: 1
workflows:
  exits:
    steps:
      - activity: wfh_supervision:exits
        max_attempts: 1
  interrupts:
    steps:
      - activity: wfh_supervision:interrupts
        max_attempts: 1
  stamp:
    steps:
      - activity: wfh_supervision:returns_datetime
        name: stamp
        max_attempts: 1
  one:
    steps:
      - activity: wfh_supervision:record
        name: only
  stuck:
    steps:
      - activity: wfh_supervision:stuck
        start_to_close: 1s
        max_attempts: 1
  pipeline:
    steps:
      - activity: wfh_supervision:record
        name: extract
      - activity: wfh_supervision:record
        name: transform
      - activity: wfh_supervision:record
        name: load
  slow_guard:
    deadline: 1s
    on_deadline: wfh_supervision:slow_on_deadline
    steps:
      - delay: 1h
  quick_guard:
    deadline: 2s
    on_deadline: wfh_supervision:quick_on_deadline
    steps:
      - delay: 1h
"""


class Project:
    """workflows.yaml and its handler module in a folder, a database, and the workers started."""

    def __init__(self, folder: Path, db: str) -> None:
        self.folder = folder
        self.db = db
        self.workflows = folder / "workflows.yaml"
        self.calls_log = folder / "calls.log"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        shutil.copy(TESTS / "wfh_supervision.py", folder / "wfh_supervision.py")
        self.client = Client(self.db, self.workflows)
        self.workers: list[subprocess.Popen] = []

    def worker(self, *args: str, env: dict[str, str] | None = None, preexec_fn=None,
               registered: bool = True) -> subprocess.Popen:
        """Start `wfctl work` and return once it has registered itself in the database (at
        once unless `registered`)."""
        environment = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        if env is None or "NOTIFY_SOCKET" not in env:
            environment.pop("NOTIFY_SOCKET", None)
        stderr = self.log_path(len(self.workers)).open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", self.db, "-w", str(self.workflows),
             "work", *args],
            cwd=self.folder, env=environment, stdout=subprocess.DEVNULL, stderr=stderr,
            preexec_fn=preexec_fn)
        stderr.close()
        self.workers.append(process)
        if registered:
            wait_until(lambda: process.pid in self.live_worker_pids(), f"worker {process.pid} up")
        return process

    def log_path(self, n: int) -> Path:
        return self.folder / f"worker-{n}.log"

    def log(self, process: subprocess.Popen) -> str:
        return self.log_path(self.workers.index(process)).read_text()

    def live_worker_pids(self) -> set[int]:
        with self.client.engine.store.read() as tx:
            return {row.pid for row in tx.live_workers()}

    def start(self, workflow_type: str, instance_id: str, **state: object) -> None:
        self.client.start(workflow_type, instance_id,
                          input={"_log": str(self.calls_log), **state})

    def status(self, instance_id: str) -> str:
        return self.client.describe(instance_id)["status"]

    def events(self, instance_id: str, event_type: str) -> list[dict]:
        return [e for e in self.client.history(instance_id) if e["event_type"] == event_type]

    def calls(self) -> list[tuple[str, str, int, int, str]]:
        if not self.calls_log.exists():
            return []
        rows = [line.split() for line in self.calls_log.read_text().splitlines()]
        return [(wf, step, int(attempt), int(pid), what) for wf, step, attempt, pid, what in rows]

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.client.close()



def received(listener: NotifySocket, pattern: str, timeout: float = 10.0) -> str:
    """The first datagram systemd would get that matches `pattern`."""
    end = time.monotonic() + timeout
    while True:
        message = listener.receive(max(0.01, end - time.monotonic()))
        if re.search(pattern, message, re.MULTILINE):
            return message


def log_lines(text: str, event: str) -> list[str]:
    return [line for line in text.splitlines() if f" {event} " in f"{line} "]


@pytest.fixture
def project(tmp_path: Path, db: str) -> Iterator[Project]:
    project = Project(tmp_path, db)
    yield project
    project.close()


def test_a_handler_raising_system_exit_or_returning_a_datetime_fails_and_the_worker_serves_on(
        project):
    worker = project.worker("--concurrency", "1")
    project.start("exits", "x1")
    project.start("interrupts", "k1")
    project.start("stamp", "s1")
    wait_until(lambda: all(project.status(i) == "failed" for i in ("x1", "k1", "s1")),
               "the three misbehaving workflows failed")

    project.start("one", "o1")
    wait_until(lambda: project.status("o1") == "completed", "the next workflow completed")

    assert worker.poll() is None, "the worker is still alive"
    exited = project.events("x1", "ActivityFailed")[0]["attributes"]
    assert (exited["exception_class"], exited["message"]) == ("SystemExit", "3")
    assert "raise SystemExit(3)" in exited["traceback"]
    interrupted = project.events("k1", "ActivityFailed")[0]["attributes"]
    assert interrupted["exception_class"] == "KeyboardInterrupt"
    assert "raise KeyboardInterrupt" in interrupted["traceback"]
    stamped = project.events("s1", "ActivityFailed")[0]["attributes"]
    assert (stamped["exception_class"], stamped["message"]) == (
        "TypeError", "step 'stamp' result at key 'when': a datetime is not a JSON value")
    failure = project.client.describe("s1")["failure"]
    assert (failure["exception_class"], failure["failure_category"]) == ("TypeError", "activity")
    assert {pid for _, _, _, pid, _ in project.calls()} == {worker.pid}
    assert sorted(call[0] for call in project.calls()) == ["k1", "o1", "s1", "x1"]
    assert project.calls()[-1][0] == "o1"
    log = project.log(worker)
    assert not log_lines(log, "loop_died") and not log_lines(log, "handler_abandoned")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0


def test_stuck_handlers_are_abandoned_the_worker_keeps_serving_and_sigterm_exits_at_once(
        project, notify_socket):
    worker = project.worker("--concurrency", "2",
                            env={"NOTIFY_SOCKET": notify_socket.address})
    project.start("stuck", "st1")
    project.start("stuck", "st2")
    wait_until(lambda: all(project.status(i) == "failed" for i in ("st1", "st2")),
               "both stuck attempts timed out")
    wait_until(lambda: len(log_lines(project.log(worker), "handler_abandoned")) == 2,
               "both stuck handlers abandoned")

    for n in range(4):
        project.start("pipeline", f"p{n}")
    wait_until(lambda: all(project.status(f"p{n}") == "completed" for n in range(4)),
               "four pipelines completed while both stuck handlers still run")

    timed_out = project.events("st1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out["timeout_kind"] == "start_to_close"
    assert sorted(call for call in project.calls() if call[4] == "stuck") == [
        ("st1", "stuck", 1, worker.pid, "stuck"), ("st2", "stuck", 1, worker.pid, "stuck")]
    abandoned = log_lines(project.log(worker), "handler_abandoned")
    assert "abandoned=2" in abandoned[1]
    assert "reason=\"its start_to_close deadline passed\"" in abandoned[0]
    assert received(notify_socket, r"^STATUS=serving default; 0 handlers running, "
                                   r"\d+ tasks done, 2 abandoned$")

    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - began < 3


@pytest.mark.sqlite_only        # SQLite's write lock on its file
def test_a_write_lock_held_35_seconds_holds_work_up_without_losing_any_or_stopping_a_worker(
        project):
    worker = project.worker("--concurrency", "2")
    for n in range(6):
        project.start("pipeline", f"p{n}", _sleep=0.3)
    wait_until(lambda: len(project.calls()) >= 2, "the pipelines under way")

    blocker = sqlite3.connect(project.db, isolation_level=None, timeout=10)
    blocker.execute("BEGIN IMMEDIATE")
    locked_at = clock.now()
    time.sleep(35)
    blocker.execute("COMMIT")
    blocker.close()

    wait_until(lambda: all(project.status(f"p{n}") == "completed" for n in range(6)),
               "every pipeline completed after the lock was released", timeout=15)
    assert worker.poll() is None, "the worker is still alive"
    log = project.log(worker)
    unavailable = log_lines(log, "database_unavailable")
    assert len(unavailable) == 1, log
    assert "reason=busy" in unavailable[0]
    assert len(log_lines(log, "database_available")) == 1
    # A result computed while the database was locked was kept and recorded afterwards: no
    # commit happened while the lock was held, so a completion stamped after it was taken was
    # written once it was let go. (A transaction is stamped when it begins, which may be while
    # it still waits for the lock: the stamp itself may come before the release.)
    started = {e["attributes"]["activity_id"]: e["at"]
               for n in range(6) for e in project.events(f"p{n}", "ActivityStarted")}
    assert any(started[e["attributes"]["activity_id"]] < locked_at < e["at"]
               for n in range(6) for e in project.events(f"p{n}", "ActivityCompleted"))
    assert len(project.calls()) == 18, "every step ran exactly once"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0


@pytest.mark.sqlite_only        # SQLite's write lock on its file
def test_a_write_lock_outlasting_several_leases_runs_no_step_twice(project):
    # Both workers' leases lapse while nobody can write: no evidence that either died.
    workers = [project.worker("--concurrency", "2", "--worker-lease", "1s", registered=False)
               for _ in range(2)]
    wait_until(lambda: len(project.live_worker_pids()) == 2, "both workers up")
    for n in range(6):
        project.start("pipeline", f"p{n}", _sleep=0.2)
    wait_until(lambda: len(project.calls()) >= 4, "the pipelines under way")

    blocker = sqlite3.connect(project.db, isolation_level=None, timeout=10)
    blocker.execute("BEGIN IMMEDIATE")
    time.sleep(3.5)
    blocker.execute("COMMIT")
    blocker.close()

    wait_until(lambda: all(project.status(f"p{n}") == "completed" for n in range(6)),
               "every pipeline completed after the lock was released", timeout=15)
    ran = [(wf, step) for wf, step, *_ in project.calls()]
    assert sorted(ran) == sorted({*ran}) and len(ran) == 18, "every step ran exactly once"
    assert not [e for n in range(6) for e in project.events(f"p{n}", "ActivityRetryScheduled")]
    for worker in workers:
        log = project.log(worker)
        assert not log_lines(log, "activity_result_discarded"), log
        assert not log_lines(log, "worker_lease_lapsed"), log
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs (mounting needs the privilege to; skipped only where it is refused).

    A test fills what is free of it and then frees that again: what it frees must hold what
    the worker writes once space returns, its backlog in the log and a checkpoint copying the
    log into the file meanwhile. On 3 MiB it freed 2.5 MiB while the log alone grew to 1.3 MiB,
    and once (the suite pinned to one core) the disk filled a second time."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mountpoint)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", "-l", str(mountpoint)], check=True)


def fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    os.close(fd)
    return filler


@pytest.mark.sqlite_only        # the disk of the SQLite file
def test_work_resumes_when_space_returns_on_a_full_disk(tmp_path, small_disk):
    project = Project(tmp_path, str(small_disk / "wfctl.db"))
    try:
        worker = project.worker("--concurrency", "2")
        for n in range(4):
            # Each step adds 20 KB to its workflow's state: writing it needs room on the disk
            # (a write that fits in space the database file already has goes through).
            project.start("pipeline", f"p{n}", _sleep=0.3, _pad=20_000)
        wait_until(lambda: len(project.calls()) >= 2, "the pipelines under way")

        filler = fill(small_disk)
        wait_until(lambda: log_lines(project.log(worker), "database_unavailable"),
                   "the worker noticing the full disk")
        time.sleep(1.5)
        assert not all(project.status(f"p{n}") == "completed" for n in range(4))
        filler.unlink()

        wait_until(lambda: all(project.status(f"p{n}") == "completed" for n in range(4)),
                   "every pipeline completed once space returned", timeout=15)
        assert worker.poll() is None, "the worker is still alive"
        log = project.log(worker)
        unavailable = log_lines(log, "database_unavailable")
        assert len(unavailable) == 1, log
        assert "reason=full" in unavailable[0]
        assert len(log_lines(log, "database_available")) == 1
        assert len(project.calls()) == 12, "every step ran exactly once"
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(10) == 0
    finally:
        project.close()


@pytest.mark.sqlite_only        # file modes
def test_a_worker_started_on_a_read_only_file_works_once_it_is_writable(project):
    preexec = as_an_ordinary_user()
    for n in range(3):
        project.start("pipeline", f"p{n}")
    project.client.close()
    for leftover in project.folder.glob("wfctl.db-*"):
        leftover.unlink()
    Path(project.db).chmod(0o444)
    worker = project.worker("--concurrency", "2", preexec_fn=preexec, registered=False)
    wait_until(lambda: log_lines(project.log(worker), "database_unavailable"),
               "the worker finding the file read-only")
    Path(project.db).chmod(0o644)

    # The worker tries again within its longest back-off.
    wait_until(lambda: all(project.status(f"p{n}") == "completed" for n in range(3)),
               "every pipeline completed once the file was writable", timeout=BACKOFF_CAP + 5)
    log = project.log(worker)
    [unavailable] = log_lines(log, "database_unavailable")
    assert "reason=readonly" in unavailable
    assert len(log_lines(log, "database_available")) == 1
    assert len(project.calls()) == 9, "every step ran exactly once"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0


def test_a_slow_on_deadline_handler_delays_no_other_workflows_deadline(project):
    worker = project.worker("--grace", "1s")
    project.start("slow_guard", "slow", _slow=30)
    started = project.client.start("quick_guard", "quick")
    wait_until(lambda: project.status("quick") == "failed", "the quick deadline fired")

    [exceeded] = project.events("quick", "WorkflowDeadlineExceeded")
    gap = (exceeded["at"] - started["deadline_at"]).total_seconds()
    assert 0 <= gap < 1.0, f"{gap:.3f} s after its deadline"
    slow = project.client.describe("slow")
    assert slow["status"] == "running" and slow["run"]["deadline_claimed_at"] is not None, \
        "the slow handler is still running"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0


@pytest.fixture
def notify_socket() -> Iterator[NotifySocket]:
    folder = tempfile.mkdtemp(prefix="wfctl-")
    listener = NotifySocket(os.path.join(folder, "notify"))
    yield listener
    listener.close()
    os.unlink(listener.address)
    os.rmdir(folder)


def test_a_second_sigterm_stops_at_once_and_gives_back_the_running_attempt(project):
    worker = project.worker("--grace", "30s")
    project.start("pipeline", "p1", _sleep=30)
    wait_until(lambda: project.calls(), "the first step running")

    worker.send_signal(signal.SIGTERM)
    wait_until(lambda: log_lines(project.log(worker), "worker_draining"), "the drain begun")
    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)

    assert worker.wait(10) == 1
    assert time.monotonic() - began < 2
    retry = project.events("p1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["reason"], retry["backoff_seconds"]) == ("worker_shutdown", 0)
    with project.client.engine.store.read() as tx:
        assert tx.live_workers() == [], "it marked itself stopped after giving the attempt back"


def test_isolation_process_kills_a_stuck_handler_at_its_timeout_and_serves_on(project):
    worker = project.worker("--concurrency", "1", "--isolation", "process")
    project.start("stuck", "st1")
    wait_until(lambda: project.status("st1") == "failed", "the stuck attempt timed out")
    [(_, _, _, handler_pid, _)] = project.calls()
    assert handler_pid != worker.pid, "the handler ran in a child process"
    wait_until(lambda: not os.path.exists(f"/proc/{handler_pid}")
               or " Z " in Path(f"/proc/{handler_pid}/stat").read_text(),
               "the stuck handler's process was killed")

    project.start("exits", "x1")
    project.start("one", "o1")
    wait_until(lambda: project.status("o1") == "completed" and project.status("x1") == "failed",
               "the next workflows ran on the same worker")
    exited = project.events("x1", "ActivityFailed")[0]["attributes"]
    assert (exited["exception_class"], exited["message"]) == ("SystemExit", "3")
    assert "raise SystemExit(3)" in exited["traceback"]
    timed_out = project.events("st1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out["timeout_kind"] == "start_to_close"
    assert worker.poll() is None, "the worker is still alive"
    assert not log_lines(project.log(worker), "handler_abandoned"), \
        "a killed child is not an abandoned thread"

    began = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert time.monotonic() - began < 3


def test_work_once_gives_up_a_stuck_handler_after_its_timeout_and_a_fresh_slot_serves_on(
        project):
    project.start("stuck", "st1")
    project.start("one", "o1")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "wfctl", "--db", project.db, "-w", str(project.workflows),
         "work", "--once", "--concurrency", "1"],
        cwd=project.folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))})

    assert done.returncode == 0, done.stderr
    # start_to_close 1 s, then the 2 s grace: the pass ends long before the handler would.
    assert time.monotonic() - began < 60, "it waited for a handler stuck for an hour"
    assert log_lines(done.stderr, "handler_abandoned")
    timed_out = project.events("st1", "ActivityTimedOut")[0]["attributes"]
    assert timed_out["timeout_kind"] == "start_to_close"
    # As in the long-running worker, the slot that took the stuck one's place served on.
    assert project.status("o1") == "completed"


def test_a_sigterm_during_work_once_drains_within_the_grace_and_gives_back_what_still_runs(
        project):
    project.start("pipeline", "p1", _sleep=30)
    worker = project.worker("--once", "--grace", "1s")
    wait_until(lambda: project.calls(), "the first step running")

    worker.send_signal(signal.SIGTERM)

    # The 1 s grace, not the handler's 30 s; 128 + SIGTERM: the pass did not finish.
    assert worker.wait(10) == 143
    assert log_lines(project.log(worker), "worker_draining")
    retry = project.events("p1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["reason"], retry["backoff_seconds"]) == ("worker_shutdown", 0)
    with project.client.engine.store.read() as tx:
        assert tx.live_workers() == [], "it marked itself stopped after giving the attempt back"
