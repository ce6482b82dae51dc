"""Acknowledged starts stay in the file when a process opens a second Client on it.

On POSIX, closing any descriptor of a file drops every lock the process holds on it, those of
its SQLite connections included; a worker stopping elsewhere would then take itself for the
file's last user and delete the write-ahead log those connections still write to. Real
processes: the workers, `wfctl start` and `wfctl describe` are each their own.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import wait_until

from wfctl import Client

pytestmark = pytest.mark.process

TESTS = Path(__file__).parent
REPO = TESTS.parent

DEFINITIONS = """
version: 1
workflows:
  one:
    steps:
      - activity: handlers:note
  spawner:
    steps:
      - activity: handlers:spawn
        queue: spawn
      - activity: handlers:spawn_again
        queue: spawn
"""

HANDLERS = '''
"""Handlers that start workflows through a Client of their own, as a web app's task might."""

import os
import time
from pathlib import Path

from wfctl import Client


def note(state):
    return {"noted": True}


def _start(prefix):
    client = Client(os.environ["WFCTL_DB"], os.environ["WFCTL_WORKFLOWS"])
    try:
        for n in range(5):
            client.start("one", f"{prefix}{n}")
    finally:
        client.close()


def spawn(state):
    _start("first-")
    Path(state["_opened"]).write_text("opened")
    # Held until the test has stopped the other worker.
    while not Path(state["_go_on"]).exists():
        time.sleep(0.02)
    return {}


def spawn_again(state):
    _start("second-")
    return {}
'''


class Folder:
    """workflows.yaml and its handlers beside a database; processes started as a user would."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.db = str(folder / "wfctl.db")
        self.workflows = folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        (folder / "handlers.py").write_text(HANDLERS)
        self.env = {**os.environ, "WFCTL_DB": self.db, "WFCTL_WORKFLOWS": str(self.workflows),
                    "PYTHONPATH": os.pathsep.join(
                        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        self.processes: list[subprocess.Popen] = []

    def wfctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "wfctl", "-w", str(self.workflows), *args],
                              cwd=self.folder, env=self.env, capture_output=True, text=True,
                              timeout=60)

    def worker(self, *args: str) -> subprocess.Popen:
        """`wfctl work`, returned once it says it has started."""
        log = self.folder / f"worker-{len(self.processes)}.log"
        with log.open("w") as stderr:
            process = subprocess.Popen(
                [sys.executable, "-m", "wfctl", "-w", str(self.workflows), "work", *args],
                cwd=self.folder, env=self.env, stdout=subprocess.DEVNULL, stderr=stderr)
        self.processes.append(process)
        wait_until(lambda: "worker_started" in log.read_text(), f"worker {process.pid} up",
                   timeout=30)
        return process

    def described(self, instance_id: str) -> dict | None:
        """What another process reads of the instance (None when it finds none)."""
        result = self.wfctl("describe", instance_id, "--json")
        if result.returncode != 0:
            assert result.stderr.startswith("Error: no instance"), result.stderr
            return None
        return json.loads(result.stdout)

    def integrity(self) -> str:
        """`PRAGMA integrity_check`, from another process."""
        return subprocess.run(
            [sys.executable, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1])"
             ".execute('PRAGMA integrity_check').fetchone()[0])", self.db],
            capture_output=True, text=True, timeout=60, check=True).stdout.strip()

    def close(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Folder]:
    folder = Folder(tmp_path)
    yield folder
    folder.close()


def test_starts_acknowledged_after_a_second_client_opened_survive_a_worker_stopping(folder):
    first = Client(folder.db, folder.workflows)
    first.start("one", "a0")
    worker = folder.worker()
    wait_until(lambda: first.describe("a0")["status"] == "completed", "a0 completed")
    # A second Client in the same process, opened and closed while the first stays open.
    second = Client(folder.db, folder.workflows)
    assert second.describe("a0")["status"] == "completed"
    second.close()
    stop(worker)
    # The first Client's connections still hold the file: the log is not the worker's to drop.
    assert Path(f"{folder.db}-wal").exists()

    worker = folder.worker()
    for n in range(5):
        first.start("one", f"b{n}")
    for n in range(5):
        started = folder.wfctl("start", "one", f"c{n}")
        assert started.returncode == 0, started.stderr
    wait_until(lambda: all(first.describe(f"{group}{n}")["status"] == "completed"
                           for group in "bc" for n in range(5)), "every start completed",
               timeout=60)
    stop(worker)
    first.close()

    for instance_id in ["a0", *(f"{group}{n}" for group in "bc" for n in range(5))]:
        described = folder.described(instance_id)
        assert described is not None, f"{instance_id} was acknowledged but is gone"
        assert described["status"] == "completed", instance_id
    assert folder.integrity() == "ok"


def test_a_handler_starting_workflows_through_its_own_client_loses_nothing(folder):
    opened = folder.folder / "opened"
    go_on = folder.folder / "go-on"
    started = folder.wfctl("start", "spawner", "s", "--input",
                           json.dumps({"_opened": str(opened), "_go_on": str(go_on)}))
    assert started.returncode == 0, started.stderr
    spawning = folder.worker("--queue", "spawn")
    other = folder.worker()
    wait_until(opened.exists, "the handler opened its own Client", timeout=30)
    # Another worker stops while the first still has the file open.
    stop(other)
    go_on.write_text("go on")
    other = folder.worker()
    wait_until(lambda: (folder.described("s") or {}).get("status") == "completed",
               "the spawner completed", timeout=60)
    stop(spawning)
    stop(other)

    described = folder.described("s")
    assert described is not None and described["status"] == "completed"
    for prefix in ("first-", "second-"):
        for n in range(5):
            assert folder.described(f"{prefix}{n}") is not None, f"{prefix}{n} is gone"
    assert folder.integrity() == "ok"
    # Every connection closed: the log was copied into the file, nothing left outside it.
    rows = sqlite3.connect(folder.db).execute(
        "SELECT count(*) FROM instances WHERE workflow_instance_id LIKE '%-%'").fetchone()[0]
    assert rows == 10
