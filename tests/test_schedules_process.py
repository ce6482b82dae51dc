"""Schedules in real `wfctl work` processes: several workers start each tick once and on time,
kill -9 loses and doubles nothing, and `--once` catches up after downtime."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import wait_until

from wfctl import Client

pytestmark = [pytest.mark.process, pytest.mark.both_backends]

REPO = Path(__file__).parent.parent
DEFINITIONS = """
version: 1
workflows:
  report:
    steps:
      - delay: 1h
schedules:
  often:
    workflow: report
    every: 1s
    overlap: allow_all
"""


class Project:
    def __init__(self, folder: Path, db: str) -> None:
        self.folder = folder
        self.db = db
        self.workflows = folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        self.client = Client(db, self.workflows)
        # The database is made before any process races to make it.
        assert self.client.store is not None
        self.processes: list[subprocess.Popen] = []

    def wfctl(self, *args: str) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        log = (self.folder / f"wfctl-{len(self.processes)}.log").open("w")
        process = subprocess.Popen([sys.executable, "-m", "wfctl", "--db", self.db, "-w",
                                    str(self.workflows), *args], cwd=self.folder, env=env,
                                   stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        self.processes.append(process)
        return process

    def worker(self) -> subprocess.Popen:
        process = self.wfctl("work", "--concurrency", "1")
        wait_until(lambda: process.pid in self.live_pids(), f"worker {process.pid} up",
                   timeout=30)
        return process

    def live_pids(self) -> set[int]:
        with self.client.store.read() as tx:
            return {row.pid for row in tx.live_workers()}

    def started(self) -> list[dict]:
        """The instances the schedule started, oldest tick first."""
        rows = self.client.list(schedule="often", limit=100_000)
        return sorted(rows, key=lambda row: row["workflow_instance_id"])

    def ticks(self) -> list[datetime]:
        """The ticks started, read from their instances' ids (`often-20260412T120000Z`)."""
        return [datetime.strptime(row["workflow_instance_id"], "often-%Y%m%dT%H%M%SZ")
                .replace(tzinfo=UTC) for row in self.started()]

    def started_actions(self) -> int:
        with self.client.store.read() as tx:
            return tx.get_schedule("often").started_count

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        self.client.close()


@pytest.fixture
def project(tmp_path: Path, db: str) -> Iterator[Project]:
    found = Project(tmp_path, db)
    yield found
    found.close()


def consecutive(ticks: list[datetime]) -> bool:
    return ticks == [ticks[0] + timedelta(seconds=n) for n in range(len(ticks))]


def test_three_workers_start_every_tick_exactly_once_within_a_second(project):
    workers = [project.worker() for _ in range(3)]
    wait_until(lambda: len(project.ticks()) >= 8, "eight ticks", timeout=60)
    for process in workers:
        process.send_signal(signal.SIGTERM)
    for process in workers:
        assert process.wait(30) == 0
    ticks = project.ticks()
    assert consecutive(ticks)
    assert project.started_actions() == len(ticks)
    for row in project.started()[1:]:
        started = project.client.history(row["workflow_instance_id"])[0]
        assert started["attributes"]["schedule"] == "often"
        lag = (started["at"] - started["attributes"]["scheduled_at"]).total_seconds()
        assert 0 <= lag < 1.0, row["workflow_instance_id"]


def test_a_worker_killed_at_any_moment_loses_and_doubles_no_tick(project):
    steady = project.worker()
    for _ in range(3):
        victim = project.worker()
        time.sleep(1.3)
        victim.kill()
        victim.wait()
    seen = len(project.ticks())
    wait_until(lambda: len(project.ticks()) >= seen + 2, "two more ticks", timeout=30)
    steady.send_signal(signal.SIGTERM)
    assert steady.wait(30) == 0
    ticks = project.ticks()
    assert consecutive(ticks)
    assert project.started_actions() == len(ticks)


def test_work_once_after_downtime_starts_the_ticks_missed_inside_the_window(project):
    shown = project.wfctl("schedules", "--json")
    assert shown.wait(30) == 0
    with project.client.store.read() as tx:
        first_seen = tx.get_schedule("often").created_at
    wait_until(lambda: project.client.now() > first_seen + timedelta(seconds=3),
               "three ticks of downtime")
    once = project.wfctl("work", "--once")
    assert once.wait(60) == 0
    ticks = project.ticks()
    assert consecutive(ticks)
    assert ticks[0] == first_seen.replace(microsecond=0) + timedelta(seconds=1)
    assert len(ticks) >= 3
    assert all(tick <= datetime.now(UTC) for tick in ticks)
