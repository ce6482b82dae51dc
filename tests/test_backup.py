"""`wfctl backup PATH`: a consistent copy of an SQLite database into a new file, while workers
run; nothing the user owns is overwritten."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until

from wfctl import Client, InvalidInput

TESTS = Path(__file__).parent
REPO = TESTS.parent

DEFINITIONS = """
    version: 1
    workflows:
      three:
        steps:
          - activity: wfh:noop
          - activity: wfh:noop
          - activity: wfh:noop
"""


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def test_a_backup_is_a_consistent_standalone_copy(make_env, wfctl):
    env = make_env(DEFINITIONS)
    for n in range(3):
        env.client.start("three", f"w{n}")
    target = env.folder / "copy.db"

    code, out, err = wfctl(env, "backup", str(target))

    assert (code, err) == (0, "")
    assert out == f"Backed up {env.db} to {target} ({target.stat().st_size / 1024:.1f} KiB)\n"
    # Everything is in the one file: nothing beside it is needed to read it.
    assert sorted(path.name for path in env.folder.iterdir() if path.name.startswith("copy")) \
        == ["copy.db"]
    assert integrity(target) == "ok"
    with Client(target, env.folder / "workflows.yaml", create=False) as copy:
        assert [row["workflow_instance_id"] for row in copy.list()] == ["w2", "w1", "w0"]
    assert target.stat().st_mode & 0o777 == Path(env.db).stat().st_mode & 0o777


def test_a_backup_never_overwrites_a_file(make_env, wfctl):
    env = make_env(DEFINITIONS)
    env.client.start("three", "w0")
    mine = env.folder / "mine.db"
    mine.write_bytes(b"the user's own file")
    before = sorted(env.folder.iterdir())

    code, out, err = wfctl(env, "backup", str(mine))

    assert (code, out) == (1, "")
    assert err == f"Error: {mine} exists: a backup is written to a new file only\n"
    assert mine.read_bytes() == b"the user's own file"
    assert sorted(env.folder.iterdir()) == before


def test_a_backup_into_a_missing_folder_or_of_a_missing_database_is_one_error(make_env, wfctl,
                                                                             tmp_path):
    env = make_env(DEFINITIONS)
    env.client.start("three", "w0")
    code, _, err = wfctl(env, "backup", str(tmp_path / "no" / "copy.db"))
    assert (code, err) == (1, f"Error: cannot write {tmp_path / 'no' / 'copy.db'}: "
                              f"{tmp_path / 'no'}: no such folder\n")

    missing = tmp_path / "missing.db"
    result = subprocess.run([sys.executable, "-m", "wfctl", "--db", str(missing), "backup",
                             str(tmp_path / "copy.db")], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert (result.returncode, result.stderr) == (1, f"Error: no database at {missing}\n")
    assert not missing.exists() and not (tmp_path / "copy.db").exists()


def test_a_postgresql_database_is_pointed_to_its_own_tools_without_connecting(tmp_path):
    # Port 1 has no server: an answer that needed one would be a connection error.
    client = Client("postgresql://nobody@127.0.0.1:1/none", tmp_path / "workflows.yaml")
    with pytest.raises(InvalidInput, match="back up PostgreSQL with pg_dump"):
        client.backup(tmp_path / "copy.db")


@pytest.mark.process
def test_a_backup_taken_while_a_worker_runs_holds_every_commit_before_it(tmp_path):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text("version: 1\nworkflows:\n  three:\n    steps:\n"
                         + "      - activity: wfh:noop\n" * 3)
    db = tmp_path / "wfctl.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
    started = Client(db, workflows)
    for n in range(300):
        started.start("three", f"w{n:03d}")
    started.close()
    worker = subprocess.Popen([sys.executable, "-m", "wfctl", "--db", str(db), "-w",
                               str(workflows), "work", "--log-level", "warning"],
                              env=env, cwd=tmp_path, stderr=subprocess.DEVNULL)
    try:
        reader = Client(db, workflows, create=False)
        wait_until(lambda: reader.list(status="completed", limit=1), "the worker at work",
                   timeout=30)
        result = subprocess.run([sys.executable, "-m", "wfctl", "--db", str(db), "backup",
                                 str(tmp_path / "copy.db")], capture_output=True, text=True,
                                env=env, timeout=60)
        assert result.returncode == 0, result.stderr
        wait_until(lambda: len(reader.list(status="completed", limit=301)) == 300,
                   "every workflow completed", timeout=120)
        reader.close()
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(30) == 0

    assert integrity(tmp_path / "copy.db") == "ok"
    with Client(tmp_path / "copy.db", workflows, create=False) as copy:
        rows = copy.list(limit=301)
        assert len(rows) == 300
        # A snapshot of a moment: each instance as it was then, some done, some not yet.
        assert {row["status"] for row in rows} <= {"running", "completed"}
        for row in rows:
            assert copy.describe(row["workflow_instance_id"])["status"] == row["status"]
