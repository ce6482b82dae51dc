"""The long-running worker's loops act on time and decisions while every slot is busy."""

from __future__ import annotations

import threading
import time

import pytest
import wfh

from wfctl import Client
from wfctl.worker import WorkerOptions

pytestmark = pytest.mark.both_backends


def wait_until(condition, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_a_signal_is_acted_on_while_the_only_slot_runs_a_long_handler(make_env):
    env = make_env("""
        version: 1
        workflows:
          busy:
            steps:
              - activity: wfh:wait_for_release
          approval:
            steps:
              - wait_for_signal: approved
    """)
    client = Client(env.db, env.folder / "workflows.yaml")  # the real clock
    client.start("busy", "b1")
    client.start("approval", "a1")
    worker = client.worker(WorkerOptions(concurrency=1, poll_interval=0.02))
    thread = threading.Thread(target=worker.run, daemon=True)
    wfh.release.clear()
    thread.start()
    try:
        assert wait_until(lambda: env.describe("b1")["activities"]
                          and env.describe("b1")["activities"][0]["status"] == "started")
        assert wait_until(lambda: env.describe("a1")["status"] == "waiting")

        client.signal("a1", "approved", {"by": "ops"})

        assert wait_until(lambda: env.describe("a1")["status"] == "completed", timeout=2)
        assert env.describe("b1")["activities"][0]["status"] == "started"
    finally:
        wfh.release.set()
        worker.request_stop()
        thread.join(5)
        client.close()
    assert env.describe("b1")["status"] == "completed"
