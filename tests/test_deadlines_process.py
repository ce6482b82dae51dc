"""A real long-running `wfctl work` fails a workflow about a second after its deadline."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from wfctl import Client, clock

pytestmark = [pytest.mark.process, pytest.mark.both_backends]
REPO = Path(__file__).resolve().parent.parent

HANDLERS = '''
import time


def busy(state):
    time.sleep(3)
    return {"busy_done": True}


def page(state):
    with open(state["marker"], "a") as out:
        out.write("called\\n")
'''

WORKFLOWS = """
version: 1
workflows:
  guarded:
    deadline: 2s
    on_deadline: busy_handlers:page
    steps:
      - activity: busy_handlers:busy
      - activity: busy_handlers:busy
        name: never
"""


def worker_env() -> dict[str, str]:
    """This checkout's wfctl, and no systemd socket inherited from the test runner."""
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def wait_for(condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_long_running_worker_fails_a_workflow_within_a_second_of_its_deadline_mid_handler(
        tmp_path: Path, db: str):
    (tmp_path / "busy_handlers.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(WORKFLOWS))
    workflows, log_path = tmp_path / "workflows.yaml", tmp_path / "w.log"
    marker = tmp_path / "on_deadline_calls.txt"
    env = worker_env()
    with log_path.open("w") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows), "work",
             "--grace", "10s"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log_file, env=env,
        )
    try:
        assert wait_for(lambda: "worker_started" in log_path.read_text(), 15), \
            log_path.read_text()
        with Client(db, workflows) as client:
            started = client.start("guarded", "g1", input={"marker": str(marker)})
            assert wait_for(lambda: client.describe("g1")["status"] == "failed", 10), \
                log_path.read_text()
            history = client.history("g1")
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(20)
    output = log_path.read_text()

    deadline_at = started["deadline_at"]
    [exceeded] = [e for e in history if e["event_type"] == "WorkflowDeadlineExceeded"]
    gap = (exceeded["at"] - deadline_at).total_seconds()
    print(f"deadline_at -> WorkflowDeadlineExceeded: {gap:.3f} s")
    assert 0 <= gap < 1.5
    [activity_started] = [e for e in history if e["event_type"] == "ActivityStarted"]
    assert activity_started["at"] < deadline_at
    assert [e["event_type"] for e in history][-3:] == [
        "ActivityCancelled", "WorkflowDeadlineExceeded", "WorkflowFailed"]
    assert code == 0
    # the busy handler finished after the expiry: its result was discarded, never applied
    with Client(db, workflows) as client:
        doc = client.describe("g1")
        assert "ActivityCompleted" not in [e["event_type"] for e in client.history("g1")]
    assert "busy_done" not in doc["state"]
    assert "activity_result_discarded" in output
    assert marker.read_text() == "called\n"
    assert "workflow_deadline_exceeded" in output


QUICK_STEPS = """
version: 1
workflows:
  quick:
    deadline: 1s
    steps:
      - activity: quick_handlers:step
        name: one
      - activity: quick_handlers:step
        name: two
      - activity: quick_handlers:step
        name: three
"""


def test_twenty_workflows_resumed_after_their_deadline_all_fail_under_a_long_running_worker(
        tmp_path: Path, db: str):
    """The next step is quicker than the deadline tick, yet never wins: every one fails."""
    (tmp_path / "quick_handlers.py").write_text("def step(state):\n    return None\n")
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(QUICK_STEPS))
    workflows, log_path = tmp_path / "workflows.yaml", tmp_path / "w.log"
    ids = [f"q{n:02d}" for n in range(20)]
    with Client(db, workflows) as client:
        for instance_id in ids:
            client.start("quick", instance_id)
            client.pause(instance_id)
        deadline_at = max(client.describe(i)["deadline_at"] for i in ids)
    env = worker_env()
    with log_path.open("w") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows), "work"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log_file, env=env,
        )
    try:
        assert wait_for(lambda: "worker_started" in log_path.read_text(), 15), \
            log_path.read_text()
        assert wait_for(lambda: clock.now() > deadline_at, 5)
        with Client(db, workflows) as client:
            for instance_id in ids:
                client.resume(instance_id)
                # Spread over several deadline ticks, so that each races the tick afresh.
                time.sleep(0.05)
            assert wait_for(lambda: all(row["status"] not in ("running", "paused")
                                        for row in client.list()), 10), log_path.read_text()
            docs = [client.describe(instance_id) for instance_id in ids]
            histories = [client.history(instance_id) for instance_id in ids]
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(20)

    assert code == 0
    assert [doc["status"] for doc in docs] == ["failed"] * 20
    assert {doc["failure"]["failure_category"] for doc in docs} == {"deadline"}
    for history in histories:
        types = [event["event_type"] for event in history]
        resumed = types.index("WorkflowResumed")
        assert "ActivityScheduled" not in types[resumed:]
        assert types[-2:] == ["WorkflowDeadlineExceeded", "WorkflowFailed"]


PAGED = """
version: 1
workflows:
  paged:
    deadline: 1s
    on_deadline: busy_handlers:page
    steps:
      - delay: 1h
"""


def test_retry_after_a_passed_deadline_is_refused_and_keep_deadline_does_not_page_again(
        tmp_path: Path, db: str):
    (tmp_path / "busy_handlers.py").write_text(HANDLERS)
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(PAGED))
    workflows, log_path = tmp_path / "workflows.yaml", tmp_path / "w.log"
    marker = tmp_path / "on_deadline_calls.txt"
    env = worker_env()

    def retry(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows), "retry", "p1",
             *options], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)

    with log_path.open("w") as log_file:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", db, "-w", str(workflows), "work"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log_file, env=env,
        )
    try:
        assert wait_for(lambda: "worker_started" in log_path.read_text(), 15), \
            log_path.read_text()
        with Client(db, workflows) as client:
            client.start("paged", "p1", input={"marker": str(marker)})
            assert wait_for(lambda: client.describe("p1")["status"] == "failed", 10), \
                log_path.read_text()

            refused = retry()
            assert (refused.returncode, refused.stdout) == (1, "")
            assert refused.stderr.startswith("Error: cannot retry p1 keeping its deadline")
            assert refused.stderr.count("\n") == 1
            assert client.describe("p1")["status"] == "failed"

            kept = retry("--keep-deadline")
            assert kept.returncode == 0, kept.stderr

            def failed_twice() -> bool:
                types = [e["event_type"] for e in client.history("p1")]
                return client.describe("p1")["status"] == "failed" \
                    and types.count("WorkflowDeadlineExceeded") == 2

            assert wait_for(failed_twice, 10), log_path.read_text()
            # Long enough for a second page, had the deadline runner sent one.
            time.sleep(0.5)
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(20)
    assert code == 0
    assert marker.read_text() == "called\n"
