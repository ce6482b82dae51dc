"""A batch action killed with SIGKILL between two of its transactions, then run again: the
rerun finishes the rest, and no instance is acted on twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import wait_until
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli.commands import app

pytestmark = [pytest.mark.both_backends, pytest.mark.process]
REPO = Path(__file__).parent.parent
COUNT = 200

WORKFLOWS = """
version: 1
workflows:
  order:
    steps:
      - delay: 1h
"""

# The batch in a process of its own: one instance to a transaction, and after the third
# transaction it says so and hangs between two transactions until it is killed.
BATCH = """
import functools, sys, time
from pathlib import Path
from wfctl import Client
from wfctl.engine import bulk

transactions = []
act = bulk.act_on_many

def pause(seconds):
    transactions.append(seconds)
    if len(transactions) == 3:
        Path(sys.argv[3]).write_text("3")
        time.sleep(600)

bulk.act_on_many = lambda *args, **kw: act(*args, **{**kw, "pause": pause, "budget": 0})
Client(sys.argv[1], sys.argv[2]).batch("cancel", status="running", workflow_type="order",
                                       reason="batch")
"""


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def test_a_batch_killed_midway_and_run_again_acts_on_each_instance_once(tmp_path, db):
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(WORKFLOWS))
    with Client(db, workflows) as client:
        client.start_many("order", ({"id": f"o-{n:03}"} for n in range(COUNT)))
    marker = tmp_path / "three-done"
    batch = subprocess.Popen([sys.executable, "-c", BATCH, db, str(workflows), str(marker)],
                             env=environment(), stderr=subprocess.PIPE)
    try:
        wait_until(marker.exists, "three transactions of the batch", timeout=60)
    finally:
        batch.send_signal(signal.SIGKILL)
        batch.wait()
    assert batch.returncode == -signal.SIGKILL

    result = CliRunner().invoke(app, ["--db", db, "-w", str(workflows), "cancel", "--status",
                                      "running", "--type", "order", "--reason", "batch",
                                      "--yes", "--json"])

    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["matched"], report["done"], report["failed"]) == (COUNT, COUNT - 3, [])
    assert [skipped["reason"] for skipped in report["skipped"]] == [
        f"cancellation of {skipped['id']} was already requested"
        for skipped in report["skipped"]]
    assert len(report["skipped"]) == 3
    with Client(db, workflows) as client:
        for n in range(COUNT):
            requested = client.history(f"o-{n:03}", event_types=("WorkflowCancelRequested",))
            assert len(requested) == 1, f"o-{n:03}"
