"""`wfctl demo` end to end: the ETL example where a start-to-close timeout and a deadline fire,
the timeline of one run, what to try next; about 60 lines on an 80-column terminal, in seconds,
with its database kept where it says."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from test_bad_input import as_an_ordinary_user

from wfctl.cli import demo
from wfctl.errors import InvalidInput

REPO = Path(__file__).parent.parent


def wfctl(*args: str, cwd: Path, preexec_fn: Callable[[], None] | None = None,
          **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "COLUMNS": "80", **env,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                               os.environ.get("PYTHONPATH")]))}
    environment.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "wfctl", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=60, preexec_fn=preexec_fn)


@pytest.mark.process
def test_the_demo_shows_a_timeout_and_a_deadline_firing_in_about_60_lines(tmp_path):
    started = time.monotonic()
    result = wfctl("demo", cwd=tmp_path, TMPDIR=str(tmp_path))
    took = time.monotonic() - started

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    # Every line fits 80 columns, but the one naming the folder kept (as long as its path).
    folder = Path(lines[lines.index("What next (the folder is kept: etl.py, workflows.yaml, "
                                    "wfctl.db):") + 1].removeprefix("  cd "))
    assert max(len(line) for line in lines if str(folder) not in line) <= 80
    assert len(lines) <= 62
    # About 3 s on a quiet machine: the bound catches a demo that waits out a real timeout
    # (tens of seconds), not a slow machine.
    assert took < 30
    text = result.stdout
    # The attempt that ran past its start-to-close, and its retry.
    assert re.search(r"ActivityRetryScheduled\n  Activity transform attempt 1 timed out: "
                     r"start_to_close; attempt 2 of 3", text)
    assert "demo-etl completed after" in text
    # The deadline that passed, and the on_deadline handler that ran for it.
    assert "on_deadline: the import of demo://archive.csv missed its deadline" in text
    assert re.search(r"WorkflowDeadlineExceeded\n  Deadline exceeded \(deadline [^)]+\);\s+"
                     r"etl:alert ran", text)
    assert "demo-late failed after" in text
    # The timeline of demo-etl, with the start-to-close it hit.
    assert "etl  demo-etl  run 1 of 1  completed" in text
    assert "s transform attempt 1 start-to-close" in text and "hit: the attempt timed out" in text
    # What next, on the database it kept.
    assert folder.parent == tmp_path
    assert (folder / "workflows.yaml").exists() and (folder / "etl.py").exists()
    assert any(line.startswith("  wfctl timeline demo-late") for line in lines)
    assert lines[-1] == "Edit etl.py first (the handlers), then workflows.yaml (steps and limits)."

    late = json.loads(wfctl("describe", "demo-late", "--json", cwd=folder).stdout)
    assert (late["status"], late["failure"]["failure_category"]) == ("failed", "deadline")
    etl = json.loads(wfctl("describe", "demo-etl", "--json", cwd=folder).stdout)
    assert etl["status"] == "completed"
    assert [a["attempt"] for a in etl["activities"] if a["step"] == "transform"] == [2]


@pytest.mark.process
def test_the_demo_never_reuses_a_database(tmp_path):
    folder = tmp_path / "demo"
    assert wfctl("demo", "--folder", str(folder), cwd=tmp_path).returncode == 0
    before = (folder / "wfctl.db").stat().st_mtime_ns

    again = wfctl("demo", "--folder", str(folder), cwd=tmp_path)

    assert again.returncode == 1
    assert again.stderr == f"Error: {folder / 'wfctl.db'}, {folder / 'workflows.yaml'}, " \
        f"{folder / 'etl.py'} exist already; the demo never overwrites a file (pass --folder " \
        "with a new or empty folder)\n"
    assert again.stdout == ""
    assert (folder / "wfctl.db").stat().st_mtime_ns == before


@pytest.mark.process
def test_the_demo_never_overwrites_the_users_files(tmp_path):
    mine = {"workflows.yaml": b"version: 1\nworkflows: {}\n", "etl.py": b"MINE = True\n"}
    for name, content in mine.items():
        (tmp_path / name).write_bytes(content)

    refused = wfctl("demo", "--folder", ".", cwd=tmp_path)

    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "Error: workflows.yaml, etl.py exist already; the demo never " \
        "overwrites a file (pass --folder with a new or empty folder)\n"
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == mine


@pytest.mark.process
def test_a_demo_folder_that_cannot_be_one_is_one_error_line(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    read_only = tmp_path / "read-only"
    read_only.mkdir(mode=0o555)
    cases = [
        ("notes.txt", "Error: --folder notes.txt: not a folder\n", {}),
        ("notes.txt/demo", "Error: --folder notes.txt/demo: a part of the path is not a "
                           "folder\n", {}),
        ("read-only", "Error: cannot write read-only/wfctl.db: Permission denied\n",
         {"preexec_fn": as_an_ordinary_user()}),
        ("read-only/demo", "Error: cannot create read-only/demo: Permission denied\n",
         {"preexec_fn": as_an_ordinary_user()}),
    ]
    for folder, message, options in cases:
        refused = wfctl("demo", "--folder", folder, cwd=tmp_path, **options)
        assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", message)
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["notes.txt", "read-only"]
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_file_that_appears_while_the_demo_writes_is_not_overwritten(tmp_path, monkeypatch):
    """Between the demo's look and its writes, the user saves etl.py: the demo refuses it, and
    takes back the files and the folder it made."""
    folder = tmp_path / "new" / "demo"
    template = demo.FILES["workflows.yaml"]
    real_read_bytes = Path.read_bytes

    def read_bytes(path: Path) -> bytes:
        if path == template:
            (folder / "etl.py").write_bytes(b"MINE = True\n")
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)

    with pytest.raises(InvalidInput) as refused:
        demo.run(folder, Console(file=io.StringIO()))

    assert str(refused.value) == f"{folder / 'etl.py'} exists already; the demo never " \
        "overwrites a file (pass --folder with a new or empty folder)"
    assert [path.name for path in folder.iterdir()] == ["etl.py"]
    assert (folder / "etl.py").read_bytes() == b"MINE = True\n"


@pytest.mark.process
def test_the_demo_folder_is_a_template_that_runs_with_its_own_handlers(tmp_path):
    folder = tmp_path / "demo"
    assert wfctl("demo", "--folder", str(folder), cwd=tmp_path).returncode == 0
    assert "etl:extract" in (folder / "workflows.yaml").read_text()
    # The user's first edit: the kept handler module, not the one inside the installed package.
    handlers = folder / "etl.py"
    handlers.write_text(handlers.read_text().replace(
        'return {"loaded": len(state["rows"])}',
        'return {"loaded": len(state["rows"]), "edited_in": "the demo folder"}'))

    started = wfctl("start", "etl", "mine", "--json", cwd=folder)
    worked = wfctl("work", "--once", cwd=folder)

    assert started.returncode == 0, started.stderr
    assert worked.returncode == 0, worked.stderr
    mine = json.loads(wfctl("describe", "mine", "--json", cwd=folder).stdout)
    assert mine["status"] == "completed"
    assert mine["state"]["edited_in"] == "the demo folder"
    assert mine["state"]["loaded"] == 5
