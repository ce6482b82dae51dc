"""The huey yardstick of throughput.py: N pipelines of 3 no-op tasks drained by one huey consumer.

`throughput.py --huey` runs this in a process of its own, as it runs `wfctl work`. huey is not a
dependency of wfctl: `pip install huey` (3.x) first.

A SqliteHuey in WAL mode (huey's default journal) gets N pipelines `noop.s().then(noop).then(noop)`
(each task enqueued when the one before it completes, as a wfctl step is scheduled when the one
before it completes) while no consumer runs; then a consumer with one worker thread starts. The
rate is 3N / (last task completed - first task started), from huey's signals; the CPU is this
process's while the consumer ran. One JSON line is printed.

`--synchronous default` leaves huey as it ships: no PRAGMA, so SQLite's default, FULL (an fsync
at every commit). `--synchronous normal` sets NORMAL, what wfctl uses (an fsync at checkpoints):
the same durability as wfctl.
"""

from __future__ import annotations

import argparse
import json
import logging
import sqlite3
import sys
import threading
import time
from typing import Any

try:
    from huey import SqliteHuey
    from huey.signals import SIGNAL_COMPLETE, SIGNAL_EXECUTING
    from huey.storage import SqliteStorage
except ImportError:
    sys.exit("Error: huey is not installed here; `pip install huey` to run this yardstick")


class NormalSqliteStorage(SqliteStorage):
    """huey's SQLite storage at synchronous=NORMAL (its `fsync` option offers FULL or OFF)."""

    def _create_connection(self) -> sqlite3.Connection:
        conn = super()._create_connection()
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn


class NormalSqliteHuey(SqliteHuey):
    storage_class = NormalSqliteStorage


def run(path: str, pipelines: int, synchronous: str, timeout: float) -> dict[str, Any]:
    huey = (NormalSqliteHuey if synchronous == "normal" else SqliteHuey)("bench", filename=path)

    @huey.task()
    def noop(previous: object = None) -> None:
        return None

    steps = pipelines * 3
    for _ in range(pipelines):
        huey.enqueue(noop.s().then(noop).then(noop))
    marks: dict[str, Any] = {"first": None, "last": None, "completed": 0}
    all_done = threading.Event()

    @huey.signal(SIGNAL_EXECUTING)
    def executing(signal: str, task: object) -> None:
        if marks["first"] is None:
            marks["first"] = time.perf_counter()

    @huey.signal(SIGNAL_COMPLETE)
    def complete(signal: str, task: object) -> None:
        marks["completed"] += 1
        marks["last"] = time.perf_counter()
        if marks["completed"] == steps:
            all_done.set()

    (pragma,) = huey.storage.conn.execute("PRAGMA synchronous").fetchone()
    consumer = huey.create_consumer(workers=1, worker_type="thread", periodic=False)
    cpu = time.process_time()
    spawned = time.perf_counter()
    consumer.start()
    all_done.wait(timeout)
    wall = time.perf_counter() - spawned
    consumer.stop(graceful=True)
    cpu = time.process_time() - cpu
    return {"steps": steps, "completed": marks["completed"],
            "engine_seconds": marks["last"] - marks["first"] if marks["first"] else None,
            "wall_seconds": wall, "cpu_seconds": cpu,
            "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(pragma, pragma)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("db", help="the huey database file to create")
    parser.add_argument("-n", "--pipelines", type=int, default=1_500)
    parser.add_argument("--synchronous", choices=("default", "normal"), default="default")
    parser.add_argument("--log-level", default="info",
                        help="huey's log level, on stderr (default info, as huey_consumer runs)")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr)
    print(json.dumps(run(args.db, args.pipelines, args.synchronous, args.timeout)))


if __name__ == "__main__":
    main()
