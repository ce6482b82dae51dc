"""A SQLite database's write-ahead log stays bounded while a worker writes without a pause."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from wfctl import Client
from wfctl.store import SQLiteStore
from wfctl.worker import WorkerOptions, checkpoint

WORKFLOWS = 600
STEPS = 3
# What a log file that grew larger is cut back to when the log starts over.
FILE_LIMIT = 64 * 1024 * 1024


@pytest.mark.parametrize("checkpointer", ["on its timer", "never getting a turn"])
def test_a_worker_that_never_pauses_keeps_its_write_ahead_log_bounded(make_env, monkeypatch,
                                                                      checkpointer):
    # 1,800 steps write some 80 MB of log pages (about 45 KB a step); a log that is never
    # started over holds them all, on disk, for as long as the worker keeps busy. The bound
    # holds however fast the steps outrun the checkpointer: past a threshold, the commit itself
    # copies the log, so that the next one starts it over.
    if checkpointer == "never getting a turn":
        monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 3600.0)
    env = make_env("""
        version: 1
        workflows:
          three:
            steps:
              - activity: wfh:noop
              - activity: wfh:noop
              - activity: wfh:noop
    """)
    client = Client(env.db, env.folder / "workflows.yaml")  # the real clock
    for n in range(WORKFLOWS):
        client.start("three", f"w{n:04d}")
    worker = client.worker(WorkerOptions(concurrency=1))
    wal = Path(f"{env.db}-wal")
    largest = 0
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while worker.tasks_done < WORKFLOWS * STEPS and time.monotonic() < deadline:
            if wal.exists():
                largest = max(largest, wal.stat().st_size)
            time.sleep(0.01)
    finally:
        worker.request_stop()
        thread.join(30)

    assert worker.tasks_done == WORKFLOWS * STEPS
    assert len(client.list(status="completed", limit=WORKFLOWS + 1)) == WORKFLOWS
    assert largest < 40 * 1024 * 1024, f"the log grew to {largest / 1e6:.0f} MB"
    client.close()


def store_with_a_long_log(path: Path, rows: int,
                          row_bytes: int) -> tuple[SQLiteStore, sqlite3.Connection]:
    """A store whose log holds `rows` rows of padding, none of it copied into the file yet;
    with the connection that wrote them (log copies left to `checkpoint`)."""
    store = SQLiteStore(path)
    conn = store.conn
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE padding (x)")
    for _ in range(rows):
        conn.execute("INSERT INTO padding VALUES (?)", ("x" * row_bytes,))
    return store, conn


def test_a_log_file_that_grew_large_is_cut_back_when_the_log_starts_over(tmp_path):
    path = tmp_path / "w.db"
    # More than the limit of log pages, left behind as an older wfctl would have.
    store, conn = store_with_a_long_log(path, 3, 30_000_000)
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size > FILE_LIMIT

    store.checkpoint()
    conn.execute("INSERT INTO padding VALUES ('next')")

    assert wal.stat().st_size <= FILE_LIMIT
    store.close()


def test_a_reader_that_keeps_its_snapshot_holds_writers_back_for_a_moment_only(tmp_path):
    path = tmp_path / "w.db"
    store, conn = store_with_a_long_log(path, 1, 8_000_000)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM padding").fetchone()

    started = time.monotonic()
    store.checkpoint()
    waited = time.monotonic() - started
    conn.execute("INSERT INTO padding VALUES ('next')")   # writers go on

    assert waited < 1.0, f"the checkpoint waited {waited:.1f} s for the reader"
    reader.execute("COMMIT")
    reader.close()
    store.close()
