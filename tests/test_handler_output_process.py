"""What a handler prints goes to stderr: a real `deadlines check --json` prints one JSON document
on stdout and nothing else, and a real `work --once` leaves stdout empty, whether the handler
prints from a thread, from a program it starts, or from a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from wfctl import Client, clock

pytestmark = pytest.mark.process

REPO = Path(__file__).parent.parent

# The README's first workflow, with a step that prints from a program it starts.
DEFINITIONS = """
version: 1
workflows:
  order:
    deadline: 1m
    on_deadline: shop:alert
    steps:
      - activity: shop:charge
      - activity: shop:ship
"""

HANDLERS = '''
import subprocess


def charge(state):
    print(f"charging {state['amount']}")
    return {"charged": state["amount"]}


def ship(state):
    subprocess.run(["echo", f"shipping order of {state['amount']}"], check=True)
    return {"shipped": True}


def alert(state: dict) -> None:
    print(f"order of {state['amount']} missed its deadline")
'''


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(DEFINITIONS))
    (tmp_path / "shop.py").write_text(HANDLERS)
    return tmp_path


def wfctl(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "wfctl", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)


def start(folder: Path, instance_id: str, amount: int, *, hours_ago: float = 0) -> None:
    then = clock.now() - timedelta(hours=hours_ago)
    with Client(folder / "wfctl.db", folder / "workflows.yaml", clock_now=lambda: then) as client:
        client.start("order", instance_id, input={"amount": amount})


def test_deadlines_check_json_is_one_document_when_the_on_deadline_handler_prints(shop):
    start(shop, "order-7", 7, hours_ago=1)

    checked = wfctl(shop, "deadlines", "check", "--json")

    assert checked.returncode == 0, checked.stderr
    document = json.loads(checked.stdout)
    assert [item["workflow_instance_id"] for item in document["failed"]] == ["order-7"]
    assert checked.stderr == "order of 7 missed its deadline\n"


def test_deadlines_check_prints_only_its_report_on_stdout(shop):
    start(shop, "order-7", 7, hours_ago=1)

    checked = wfctl(shop, "deadlines", "check")

    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith("order-7: deadline ")
    assert checked.stdout.endswith(" exceeded, failed\n1 workflow failed by deadline\n")
    assert checked.stderr == "order of 7 missed its deadline\n"


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_work_once_leaves_stdout_to_wfctl_whatever_its_handlers_print(shop, isolation):
    start(shop, "order-1", 42)

    worked = wfctl(shop, "work", "--once", "--isolation", isolation)

    assert worked.returncode == 0, worked.stderr
    assert worked.stdout == ""
    lines = worked.stderr.splitlines()
    assert "charging 42" in lines and "shipping order of 42" in lines
    with Client(shop / "wfctl.db", shop / "workflows.yaml") as client:
        assert client.describe("order-1")["status"] == "completed"
