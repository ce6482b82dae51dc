"""A `wfctl work` whose host clock runs 2 minutes ahead of the PostgreSQL server's (SPEC §2):
it acts at the database's time, so its timeouts fire when the database says and no healthy
worker is taken for lost, by it or by a worker whose clock is right.

The skewed processes run under clockshift.c (LD_PRELOAD), which moves only the wall clock.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from conftest import wait_until

from wfctl import Client
from wfctl.store.records import RegisteredWorker

pytestmark = pytest.mark.process

TESTS = Path(__file__).parent
REPO = TESTS.parent
AHEAD = 120.0

DEFINITIONS = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh_activities:record
        name: extract
      - activity: wfh_activities:record
        name: load
  unserved:
    steps:
      - activity: wfh_activities:record
        name: waits
        queue: nobody
        schedule_to_start: 2s
        max_attempts: 1
  stuck:
    steps:
      - activity: wfh_activities:slow
        name: hangs
        start_to_close: 2s
        max_attempts: 1
  guarded:
    deadline: 2s
    steps:
      - activity: wfh_activities:slow
        name: works
      - activity: wfh_activities:record
        name: never
"""


@pytest.fixture(scope="session")
def clock_shift(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clockshift.c built once per session: the library to LD_PRELOAD."""
    compiler = shutil.which("cc")
    if compiler is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no C compiler (cc) to build the clock shift library", pytrace=False)
        pytest.skip("no C compiler (cc) to build the clock shift library")
    library = tmp_path_factory.mktemp("clockshift") / "clockshift.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library),
                    str(TESTS / "clockshift.c"), "-ldl"], check=True)
    return library


def server_now(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT clock_timestamp()").fetchone()[0]



class Project:
    """workflows.yaml and its handlers in a folder, a PostgreSQL database, and wfctl processes
    run with this host's clock or one `AHEAD` seconds fast."""

    def __init__(self, folder: Path, url: str, library: Path) -> None:
        self.folder = folder
        self.url = url
        self.library = library
        self.workflows = folder / "workflows.yaml"
        self.log = folder / "calls.log"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        shutil.copy(TESTS / "wfh_activities.py", folder / "wfh_activities.py")
        self.client = Client(url, self.workflows)
        self.workers: list[subprocess.Popen] = []

    def env(self, *, skewed: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        if skewed:
            env["LD_PRELOAD"] = str(self.library)
            env["WFCTL_TEST_CLOCK_SHIFT"] = str(AHEAD)
        return env

    def command(self, *args: str, skewed: bool) -> list[str]:
        return [sys.executable, "-m", "wfctl", "--db", self.url, "-w", str(self.workflows), *args]

    def wfctl(self, *args: str, skewed: bool) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args, skewed=skewed), cwd=self.folder,
                              env=self.env(skewed=skewed), capture_output=True, text=True,
                              timeout=30)

    def worker(self, *args: str, skewed: bool) -> subprocess.Popen:
        """Start `wfctl work` and return once it has registered itself in the database."""
        stderr = (self.folder / f"worker-{len(self.workers)}.log").open("w")
        process = subprocess.Popen(self.command("work", *args, skewed=skewed), cwd=self.folder,
                                   env=self.env(skewed=skewed), stdout=subprocess.DEVNULL,
                                   stderr=stderr)
        stderr.close()
        self.workers.append(process)
        wait_until(lambda: process.pid in {w.pid for w in self.live_workers()},
                   f"worker {process.pid} up")
        return process

    def live_workers(self) -> list[RegisteredWorker]:
        with self.client.store.read() as tx:
            return tx.live_workers()

    def start(self, workflow_type: str, instance_id: str, **state: object) -> None:
        self.client.start(workflow_type, instance_id, input={"_log": str(self.log), **state})

    def events(self, instance_id: str, event_type: str) -> list[dict]:
        return [e for e in self.client.history(instance_id) if e["event_type"] == event_type]

    def at(self, instance_id: str, event_type: str) -> datetime:
        return self.events(instance_id, event_type)[0]["at"]

    def close(self) -> None:
        for process in self.workers:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.client.close()


@pytest.fixture
def project(tmp_path: Path, pg_url: str, clock_shift: Path) -> Iterator[Project]:
    project = Project(tmp_path, pg_url, clock_shift)
    yield project
    project.close()


def test_the_shim_moves_the_wall_clock_of_a_process_and_nothing_else(project):
    probe = ("import datetime, threading, time; start = time.monotonic(); "
             "threading.Event().wait(0.2); time.sleep(0.1); "
             "print(datetime.datetime.now(datetime.UTC).timestamp() - time.time(), "
             "time.time(), time.monotonic() - start)")
    here = time.time()
    done = subprocess.run([sys.executable, "-c", probe], env=project.env(skewed=True),
                          capture_output=True, text=True, timeout=10, check=True)
    _, wall, waited = (float(word) for word in done.stdout.split())

    assert abs(wall - here - AHEAD) < 5
    assert 0.3 <= waited < 5, "timed waits and sleeps keep the monotonic clock"


def test_a_fast_worker_and_a_right_one_share_the_database_and_neither_is_lost(project):
    fast = project.worker("--worker-lease", "1s", "--concurrency", "2", skewed=True)
    right = project.worker("--worker-lease", "1s", "--concurrency", "2", skewed=False)
    begun = server_now(project.url)
    ids = [f"e{n:02}" for n in range(12)]
    for instance_id in ids:
        project.start("etl", instance_id, _sleep=0.1)

    wait_until(lambda: len(project.client.list(status="completed", limit=100)) == len(ids),
               "every workflow completed", timeout=20)
    time.sleep(1.5)     # past the leases once more, both workers idle
    ended = server_now(project.url)

    workers = project.live_workers()
    assert sorted(w.pid for w in workers) == sorted([fast.pid, right.pid])
    for worker in workers:
        lease = worker.lease_expires_at
        assert ended < lease < ended + timedelta(seconds=3), "leases follow the database's clock"
    pids = {int(line.split()[3]) for line in project.log.read_text().splitlines()}
    assert pids == {fast.pid, right.pid}, "both workers ran steps"
    for instance_id in ids:
        history = project.client.history(instance_id)
        assert "ActivityRetryScheduled" not in [e["event_type"] for e in history]
        instants = [e["at"] for e in history]
        assert all(begun - timedelta(seconds=1) <= at <= ended for at in instants), \
            "every instant was taken from the database's clock"


def test_timeouts_enforced_by_a_fast_worker_fire_at_the_databases_time(project):
    project.worker("--worker-lease", "2s", skewed=True)
    started = time.monotonic()
    project.start("unserved", "u1")
    project.start("stuck", "s1", _sleep=30)
    project.start("guarded", "g1", _sleep=30)

    wait_until(lambda: all(project.client.describe(i)["status"] in ("failed", "timed_out")
                           for i in ("u1", "s1", "g1")), "the three timeouts")
    took = time.monotonic() - started

    assert took >= 2, "no timeout fired early (with the host's clock, all would at once)"
    unserved = project.at("u1", "ActivityTimedOut") - project.at("u1", "ActivityScheduled")
    stuck = project.at("s1", "ActivityTimedOut") - project.at("s1", "ActivityStarted")
    guarded = project.at("g1", "WorkflowDeadlineExceeded") - project.at("g1", "WorkflowStarted")
    for waited in (unserved, stuck, guarded):
        assert timedelta(seconds=2) <= waited < timedelta(seconds=4)
    assert project.at("s1", "ActivityTimedOut") <= server_now(project.url)
    attributes = project.events("u1", "ActivityTimedOut")[0]["attributes"]
    assert attributes["timeout_kind"] == "schedule_to_start"


def test_a_fast_host_starts_and_describes_at_the_databases_time(project):
    before = server_now(project.url)
    started = project.wfctl("start", "guarded", "d1", "--input", '{"_sleep": 0}', skewed=True)
    after = server_now(project.url)
    assert started.returncode == 0, started.stderr

    described = project.wfctl("describe", "d1", "--json", skewed=True)
    document = json.loads(described.stdout)
    created = datetime.fromisoformat(document["created_at"])
    deadline = datetime.fromisoformat(document["deadline_at"])
    assert before - timedelta(seconds=1) <= created <= after
    assert deadline == created + timedelta(seconds=2)

    shown = project.wfctl("describe", "d1", skewed=True).stdout
    now_shown = datetime.fromisoformat(shown.partition("now ")[2].partition(",")[0])
    assert before <= now_shown <= server_now(project.url), "describe's 'now' is the database's"
