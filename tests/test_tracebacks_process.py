"""A handler's recorded traceback through real `wfctl work` processes: it is the handler's own,
from its call inward, in thread and process isolation alike."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wfctl

pytestmark = [pytest.mark.both_backends, pytest.mark.process]
REPO = Path(__file__).parent.parent
PACKAGE = str(Path(wfctl.__file__).resolve().parent)

HANDLERS = '''
"""A handler that fails two calls deep."""


def lookup(state):
    return _find(state["order"])


def _find(order):
    raise LookupError(f"no such order {order}")
'''

WORKFLOWS = """
version: 1
workflows:
  order:
    steps:
      - activity: wfh_tracebacks:lookup
        max_attempts: 2
        backoff: [0s]
"""
FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+, in (?P<function>.*)$', re.MULTILINE)


def wfctl_run(folder: Path, db: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "wfctl", "--db", db, "-w",
                           str(folder / "workflows.yaml"), *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_a_failing_handlers_traceback_has_no_frame_of_wfctls_own(tmp_path: Path, db: str,
                                                                   isolation: str):
    (tmp_path / "wfh_tracebacks.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    assert wfctl_run(tmp_path, db, "start", "order", "o-1", "--input",
                     '{"order": 7}').returncode == 0

    worked = wfctl_run(tmp_path, db, "work", "--once", "--isolation", isolation)
    assert worked.returncode == 0, worked.stderr

    doc = json.loads(wfctl_run(tmp_path, db, "describe", "o-1", "--json").stdout)
    events = json.loads(wfctl_run(tmp_path, db, "history", "o-1", "--json").stdout)
    assert doc["status"] == "failed"
    recorded = [doc["failure"]["traceback"], doc["activities"][0]["last_error"]["traceback"]]
    recorded += [e["attributes"]["traceback"] for e in events
                 if e["event_type"] == "ActivityFailed"]
    recorded += [e["attributes"]["failure"]["traceback"] for e in events
                 if e["event_type"] == "ActivityRetryScheduled"]
    assert len(recorded) == 4
    for traceback in recorded:
        frames = FRAME.findall(traceback)
        assert [(Path(file).name, function) for file, function in frames] == [
            ("wfh_tracebacks.py", "lookup"), ("wfh_tracebacks.py", "_find")], traceback
        assert not any(file.startswith(PACKAGE) for file, _ in frames)
        assert traceback.startswith("Traceback (most recent call last):")
        assert traceback.rstrip().endswith("LookupError: no such order 7")
    described = wfctl_run(tmp_path, db, "describe", "o-1").stdout
    assert "wfctl" + os.sep not in described.split("traceback", 1)[1]
