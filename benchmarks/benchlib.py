"""What the benchmarks share: handlers, a scratch folder with definitions, and machine facts.

The handlers here are named `benchlib:function` in the benchmark definitions; worker
subprocesses import this module through PYTHONPATH (see `worker_env`).
"""

from __future__ import annotations

import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The wfctl of this checkout is measured, not whichever one `pip install -e` last pointed at:
# the scripts import this module before wfctl, and worker subprocesses get the same path.
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import wfctl  # noqa: E402
from wfctl import ActivityContext  # noqa: E402
from wfctl.worker import WorkerOptions  # noqa: E402

# Definitions every benchmark draws from; timeouts are set so the partial indexes hold rows.
DEFINITIONS = """
version: 1
defaults:
  activity:
    start_to_close: 5m
    max_attempts: 3
  workflow_task_timeout: 10s
workflows:
  three_noops:
    steps:
      - activity: benchlib:noop
        name: first
      - activity: benchlib:noop
        name: second
      - activity: benchlib:noop
        name: third
  heartbeats:
    steps:
      - activity: benchlib:heartbeat_loop
        heartbeat: 30s
  heartbeats_3s:
    steps:
      - activity: benchlib:heartbeat_loop
        heartbeat: 3s
  long_timer:
    execution_timeout: 30d
    run_timeout: 30d
    deadline: 30d
    steps:
      - delay: 30d
  short_deadline:
    deadline: 1h
    on_deadline: benchlib:on_deadline
    steps:
      - delay: 1h
"""


# handlers


def noop(state: dict[str, Any]) -> None:
    return None


def heartbeat_loop(state: dict[str, Any], ctx: ActivityContext) -> dict[str, Any]:
    """Calls heartbeat `beats` times, spread evenly over `spread` seconds (0: back to back),
    and reports how long the loop took and how long the calls themselves took."""
    beats, spread = state.get("beats", 10_000), state.get("spread", 0.0)
    in_calls = 0.0
    started = time.perf_counter()
    for n in range(beats):
        if spread:
            pause = started + spread * n / beats - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
        before = time.perf_counter()
        ctx.heartbeat({"done": n + 1})
        in_calls += time.perf_counter() - before
    return {"loop_seconds": time.perf_counter() - started, "call_seconds": in_calls}


def on_deadline(state: dict[str, Any]) -> None:
    return None


# setup


class Scratch:
    """A temporary folder holding workflows.yaml and wfctl.db, removed on exit."""

    def __init__(self, keep: str | None = None, *, reuse: bool = False,
                 db: str | None = None) -> None:
        """A fresh temporary folder; or `keep`, a folder left in place (its database reused
        when `reuse`, else started afresh). `db`: a PostgreSQL URL to use instead of the file
        (the caller makes it fresh)."""
        self._tmp = None if keep else tempfile.TemporaryDirectory(prefix="wfctl-bench-")
        self.folder = Path(keep or self._tmp.name)  # type: ignore[union-attr]
        self.folder.mkdir(parents=True, exist_ok=True)
        self.workflows = self.folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS).lstrip())
        self.db: Path | str = db or self.folder / "wfctl.db"
        if not reuse and db is None:
            remove_database(self.db)
        if str(HERE) not in sys.path:
            sys.path.insert(0, str(HERE))

    def client(self) -> wfctl.Client:
        return wfctl.Client(self.db, self.workflows)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def worker_env() -> dict[str, str]:
    """The environment for `wfctl work` subprocesses: this folder and this checkout's wfctl
    importable, no colour."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), str(HERE.parent),
                                                      env.get("PYTHONPATH")]))
    env["NO_COLOR"] = "1"
    return env


def wfctl_command(scratch: Scratch, *args: str) -> list[str]:
    """`wfctl --db … -w … ARGS`: what the `wfctl` console script runs, with this interpreter."""
    return [sys.executable, "-c", "from wfctl.cli import main; main()",
            "--db", str(scratch.db), "-w", str(scratch.workflows), *args]


# driving wfctl through its public surface only (the store underneath may change)


def start_workflows(client: wfctl.Client, prefix: str, count: int, first: int = 0,
                    workflow_type: str = "three_noops") -> float:
    """`Client.start` `count` times (ids PREFIX-000000, … from `first` on); returns the seconds
    it took."""
    started = time.perf_counter()
    for n in range(first, first + count):
        client.start(workflow_type, f"{prefix}-{n:06d}")
    return time.perf_counter() - started


def drain(client: wfctl.Client, options: WorkerOptions | None = None) -> float:
    """Run every ready task with an in-process worker (`run_once` passes at the current time,
    until one finds nothing to do); returns the seconds it took."""
    worker = client.worker(options or WorkerOptions())
    started = time.perf_counter()
    while worker.run_once(datetime.now(UTC)):
        pass
    return time.perf_counter() - started


def newest_not_completed(client: wfctl.Client, count: int) -> list[str]:
    """Among the `count` newest instances, those not completed (`Client.list`, newest first)."""
    return [row["workflow_instance_id"] for row in client.list(limit=count)
            if row["status"] != "completed"]


def remove_database(path: Path | str) -> None:
    """Delete an SQLite file with its write-ahead log and shared-memory index, where present."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def checkpoint(db: Path) -> None:
    """Move the WAL's pages into the file, so that the file's size is the database's."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def vacuum_into(db: Path, copy: Path) -> int:
    """A VACUUMed copy of `db` at `copy` (replaced if present); returns its size in bytes."""
    copy.unlink(missing_ok=True)
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("VACUUM INTO ?", (str(copy),))
    finally:
        conn.close()
    return copy.stat().st_size


def bare_sqlite_pairs(folder: Path, seconds: float = 1.0, done_rows: int = 0) -> float:
    """Claim+complete pairs per second on a bare indexed table, two BEGIN IMMEDIATE
    transactions each, with `done_rows` finished rows already in the table."""
    path = folder / "bare.db"
    remove_database(path)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, status TEXT NOT NULL, "
                 "owner TEXT, available_at TEXT NOT NULL)")
    conn.execute("CREATE INDEX tasks_ready ON tasks(available_at) WHERE status = 'ready'")
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO tasks (status, available_at) VALUES ('done', ?)",
                     ((f"{n:09d}",) for n in range(done_rows)))
    conn.executemany("INSERT INTO tasks (status, available_at) VALUES ('ready', ?)",
                     ((f"{n:09d}",) for n in range(done_rows, done_rows + 200_000)))
    conn.execute("COMMIT")
    pairs = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        conn.execute("BEGIN IMMEDIATE")
        (task_id,) = conn.execute("SELECT id FROM tasks WHERE status = 'ready' "
                                  "ORDER BY available_at LIMIT 1").fetchone()
        conn.execute("UPDATE tasks SET status = 'started', owner = 'w' WHERE id = ?", (task_id,))
        conn.execute("COMMIT")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE tasks SET status = 'done' WHERE id = ?", (task_id,))
        conn.execute("COMMIT")
        pairs += 1
    rate = pairs / (time.perf_counter() - started)
    conn.close()
    remove_database(path)
    return rate


# reporting


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info
                        if line.startswith("model name")), "")
    except OSError:
        pass
    return (f"nproc {os.cpu_count()}, {cpu or platform.processor() or platform.machine()}, "
            f"Python {platform.python_version()} ({interpreter()}), "
            f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.release()}")


def interpreter() -> str:
    """Which Python build runs the benchmark: its executable, and whether the interpreter is a
    shared libpython (each call between its own functions through the dynamic linker's table) or
    built into the executable. Builds differ by 15% in a step's CPU (docs/performance.md)."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            shared = any("/libpython" in line for line in maps)
    except OSError:
        return sys.executable
    return f"{os.path.realpath(sys.executable)}, {'shared libpython' if shared else 'libpython built in'}"


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 1,000 values is the 990th smallest)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-fraction * len(ordered) // 1))))
    return ordered[rank - 1]


def timed_ms(action: Callable[[], object], repeat: int) -> list[float]:
    """Wall time of each of `repeat` calls, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def summary(values: list[float], digits: int = 2) -> str:
    def f(value: float) -> str:
        return f"{value:.{digits}f}"

    return (f"min {f(min(values))}  p50 {f(percentile(values, 0.5))}  "
            f"mean {f(statistics.fmean(values))}  p99 {f(percentile(values, 0.99))}  "
            f"max {f(max(values))}")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def header(title: str) -> None:
    print(f"== {title}")
    print(f"   {machine()}")
    print(f"   wfctl {wfctl.__version__} from {Path(wfctl.__file__).parent}")
    print(f"   {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {load()} at start")
