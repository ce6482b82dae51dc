"""`wfctl demo` end to end: the ETL example where a start-to-close timeout and a deadline fire,
the timeline of one run, what to try next; about 60 lines on an 80-column terminal, in seconds,
with its database kept where it says."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent


def wfctl(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "COLUMNS": "80", **env,
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                               os.environ.get("PYTHONPATH")]))}
    environment.pop("NO_COLOR", None)
    return subprocess.run([sys.executable, "-m", "wfctl", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=60)


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
    assert again.stderr == f"Error: {folder / 'wfctl.db'} exists already; the demo starts on a " \
        "new database (pass --folder with a new or empty folder)\n"
    assert again.stdout == ""
    assert (folder / "wfctl.db").stat().st_mtime_ns == before


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
