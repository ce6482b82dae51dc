"""Real `wfctl work` processes on one database: kill -9, several workers, idle pickup, SIGTERM."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from conftest import wait_until

from wfctl import Client

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

TESTS = Path(__file__).parent
REPO = TESTS.parent

DEFINITIONS = """
version: 1
workflows:
  crash:
    steps:
      - activity: wfh_activities:hang_on_first_attempt
        name: work
        max_attempts: 3
        backoff: [0s]
      - activity: wfh_activities:record
        name: after
  etl:
    steps:
      - activity: wfh_activities:record
        name: extract
      - activity: wfh_activities:record
        name: transform
      - activity: wfh_activities:record
        name: load
  one:
    steps:
      - activity: wfh_activities:record
        name: only
  drain:
    steps:
      - activity: wfh_activities:slow
        name: slow
      - activity: wfh_activities:record
        name: after
"""


class Project:
    """workflows.yaml and its handler module in a folder, a database, and the workers started."""

    def __init__(self, folder: Path, db: str) -> None:
        self.folder = folder
        self.db = db
        self.workflows = folder / "workflows.yaml"
        self.log = folder / "calls.log"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        shutil.copy(TESTS / "wfh_activities.py", folder / "wfh_activities.py")
        self.client = Client(self.db, self.workflows)
        self.workers: list[subprocess.Popen] = []

    def wfctl(self, *args: str, name: str = "wfctl") -> subprocess.Popen:
        """A `wfctl` process run as a user would, logging to `<name>.log` in the folder."""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        stderr = (self.folder / f"{name}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", self.db, "-w", str(self.workflows),
             *args],
            cwd=self.folder, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
        )
        stderr.close()
        return process

    def worker(self, *args: str) -> subprocess.Popen:
        """Start `wfctl work` and return once it has registered itself in the database."""
        process = self.wfctl("work", *args, name=f"worker-{len(self.workers)}")
        self.workers.append(process)
        wait_until(lambda: process.pid in self.live_worker_pids(), f"worker {process.pid} up")
        return process

    def live_worker_pids(self) -> set[int]:
        with self.client.engine.store.read() as tx:
            return {row.pid for row in tx.live_workers()}

    def start(self, workflow_type: str, instance_id: str, **state: object) -> None:
        self.client.start(workflow_type, instance_id, input={"_log": str(self.log), **state})

    def status(self, instance_id: str) -> str:
        return self.client.describe(instance_id)["status"]

    def calls(self) -> list[tuple[str, str, int, int, str]]:
        """The handler calls: (workflow, step, attempt, pid, what), one per line of the log."""
        if not self.log.exists():
            return []
        rows = [line.split() for line in self.log.read_text().splitlines()]
        return [(wf, step, int(attempt), int(pid), what) for wf, step, attempt, pid, what in rows]

    def events(self, instance_id: str, event_type: str) -> list[dict]:
        return [e for e in self.client.history(instance_id) if e["event_type"] == event_type]

    def stderr(self, process: subprocess.Popen) -> str:
        return (self.folder / f"worker-{self.workers.index(process)}.log").read_text()

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.client.close()



def seconds_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds()


def stop(process: subprocess.Popen, timeout: float = 10.0) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout)


@pytest.fixture
def project(tmp_path: Path, db: str) -> Iterator[Project]:
    project = Project(tmp_path, db)
    yield project
    project.close()


def test_a_workflow_survives_kill_9_of_its_worker_mid_activity(project):
    # A lease far longer than the test: only the pid check can find the first worker lost.
    first = project.worker("--worker-lease", "60s")
    project.start("crash", "c1")
    wait_until(lambda: ("c1", "work", 1, first.pid, "started") in project.calls(),
               "attempt 1 running in the first worker")

    first.kill()
    assert first.wait(5) == -signal.SIGKILL
    killed_at = time.monotonic()
    second = project.worker("--worker-lease", "2s")
    wait_until(lambda: project.status("c1") == "completed", "the second worker finishing c1", 60)
    recovered_in = time.monotonic() - killed_at

    retry = project.events("c1", "ActivityRetryScheduled")[0]["attributes"]
    assert (retry["reason"], retry["attempt"]) == ("worker_lost", 1)
    assert retry["failure"]["exception_class"] == "WorkerLost"
    assert project.client.describe("c1")["state"] == {
        "_log": str(project.log), "finished_by_pid": second.pid, "finished_attempt": 2,
        "ran_after": 1,
    }
    assert project.calls() == [
        ("c1", "work", 1, first.pid, "started"),
        ("c1", "work", 2, second.pid, "ran"),
        ("c1", "after", 1, second.pid, "ran"),
    ]
    assert recovered_in < 60, f"took {recovered_in:.1f}s: the lease lapsed before the pid check"
    assert stop(second) == 0


def test_three_workers_on_one_database_run_every_step_exactly_once(project):
    workers = [project.worker("--concurrency", "2") for _ in range(3)]
    ids = [f"w{n:02}" for n in range(30)]
    for instance_id in ids:
        project.start("etl", instance_id, _sleep=0.03)

    wait_until(lambda: len(project.client.list(status="completed", limit=100)) == 30,
               "30 workflows completed", timeout=30)
    assert [stop(worker) for worker in workers] == [0, 0, 0]

    calls = project.calls()
    runs = Counter((wf, step) for wf, step, _, _, _ in calls)
    assert len(calls) == 90
    assert set(runs) == {(wf, step) for wf in ids for step in ("extract", "transform", "load")}
    assert set(runs.values()) == {1}
    assert {attempt for _, _, attempt, _, _ in calls} == {1}
    pids = {pid for _, _, _, pid, _ in calls}
    assert pids <= {worker.pid for worker in workers}
    assert len(pids) >= 2, "the workers shared the work"
    for instance_id in ids:
        started = Counter(e["attributes"]["activity_id"]
                          for e in project.events(instance_id, "ActivityStarted"))
        assert len(started) == 3 and set(started.values()) == {1}
        assert project.client.describe(instance_id)["state"] == {
            "_log": str(project.log), "_sleep": 0.03, "ran_extract": 1, "ran_transform": 1,
            "ran_load": 1,
        }


def delete_worker_record(db: str, pid: int) -> None:
    """What restoring a backup taken before the worker started does to its record."""
    if db.startswith("postgresql:"):
        import psycopg

        with psycopg.connect(db, autocommit=True) as conn:
            conn.execute("DELETE FROM workers WHERE pid = %s", (pid,))
    else:
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("DELETE FROM workers WHERE pid = ?", (pid,))
        conn.close()


def test_a_worker_whose_record_is_gone_registers_again_and_keeps_what_it_holds(project):
    worker = project.worker("--worker-lease", "3s")
    project.start("drain", "d1", _sleep=1.0)
    wait_until(lambda: ("d1", "slow", 1, worker.pid, "started") in project.calls(),
               "the slow handler running")

    delete_worker_record(project.db, worker.pid)
    # The lease keeper renews every third of the lease: it finds the record gone then.
    wait_until(lambda: "worker_registered_again" in project.stderr(worker),
               "the worker registering again", timeout=3)
    wait_until(lambda: project.status("d1") == "completed", "d1 completed")

    assert worker.pid in project.live_worker_pids()
    assert project.calls() == [("d1", "slow", 1, worker.pid, "started"),
                               ("d1", "slow", 1, worker.pid, "finished"),
                               ("d1", "after", 1, worker.pid, "ran")]
    assert project.events("d1", "ActivityRetryScheduled") == []
    log = project.stderr(worker)
    [started] = [line for line in log.splitlines() if " worker_started " in line]
    [again] = [line for line in log.splitlines() if " worker_registered_again " in line]
    assert started.split()[3] == again.split()[3], "under the same worker id"
    assert stop(worker) == 0


def test_an_idle_worker_picks_up_a_workflow_started_by_another_process_within_half_a_second(
        project):
    worker = project.worker()
    # Idle gaps that are not a multiple of a slot's longest idle wait (1 s), so that only
    # noticing the other process's commit, not a slot's periodic look, is fast enough.
    for n, idle in enumerate((1.2, 0.2, 0.4)):
        time.sleep(idle)
        project.start("one", f"i{n}")
        wait_until(lambda n=n: project.status(f"i{n}") == "completed", f"i{n} completed")

        started_at = project.events(f"i{n}", "WorkflowStarted")[0]["at"]
        activity_at = project.events(f"i{n}", "ActivityStarted")[0]["at"]
        assert seconds_between(started_at, activity_at) < 0.5
    assert stop(worker) == 0


def test_the_first_sigterm_lets_a_running_handler_finish_and_keeps_its_result(project):
    worker = project.worker("--grace", "10s")
    project.start("drain", "d1", _sleep=1.0)
    wait_until(lambda: ("d1", "slow", 1, worker.pid, "started") in project.calls(),
               "the slow handler running")

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 0

    assert project.calls() == [("d1", "slow", 1, worker.pid, "started"),
                               ("d1", "slow", 1, worker.pid, "finished")]
    doc = project.client.describe("d1")
    assert doc["activities"][0]["status"] == "completed"
    assert doc["state"]["slow_result"] == 42
    assert doc["status"] == "running", "a draining worker starts no new step"
    assert "worker_draining" in project.stderr(worker)

    assert project.wfctl("work", "--once", name="once").wait(10) == 0
    assert project.status("d1") == "completed"
    assert [call[1] for call in project.calls()] == ["slow", "slow", "after"]
