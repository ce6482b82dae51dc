"""Metrics (SPEC §10): the Prometheus text `wfctl metrics` prints and `work --metrics-port`
serves, read back with prometheus_client's own parser."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import at
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.ops.metrics import AttemptMetrics
from wfctl.worker import Worker, WorkerOptions

pytestmark = pytest.mark.both_backends

TESTS = Path(__file__).parent

DEFINITIONS = """
    version: 1
    defaults:
      activity:
        start_to_close: 5m
        max_attempts: 3
        backoff: [10s]
    workflows:
      etl:
        execution_timeout: 1h
        run_timeout: 30m
        deadline: 2h
        steps:
          - activity: wfh:noop
            name: extract
            heartbeat: 30s
            schedule_to_close: 10m
      report:
        steps:
          - activity: wfh:noop
            name: render
            queue: reports
            schedule_to_start: 20s
            max_attempts: 2
            backoff: [5s]
      approval:
        steps:
          - wait_for_signal: approved
            timeout: 60s
      quick:
        workflow_task_timeout: 5s
        steps:
          - activity: wfh:noop
            name: only
      due:
        deadline: 30s
        steps:
          - delay: 1h
"""


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and labels; parsed by prometheus_client."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def of(found: dict, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (each, labels), value in found.items() if each == name}


def labels(**pairs: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(pairs.items()))


@pytest.fixture
def busy(make_env):
    """A database at T0 + 90 s with work in every state: instances of five types running,
    waiting, completed and failed; activities scheduled, retrying and started on two queues; a
    workflow task waiting; and in history timeouts of four kinds and one deadline expiry."""
    env = make_env(DEFINITIONS)
    for instance_id in ("e1", "e2", "e3"):
        env.start("etl", instance_id)
    env.start("report", "r1")
    env.start("approval", "a1")
    env.start("due", "d1")
    env.decide(0)
    env.claim(10)                                       # e1: heartbeat deadline at 40
    second = env.claim(11)
    env.engine.complete_activity(second, {}, at(12), decide=True)   # e2 completes
    env.sweep(25)                     # r1's attempt 1 missed schedule_to_start: retry at 30
    env.start("quick", "q1", now=61)
    env.engine.claim_workflow_task("stuck-worker", at(61))          # q1: times out at 66
    env.sweep(70)          # e1 heartbeat (retry at 80), r1 schedule_to_start (terminal),
    env.decide(70)         # a1's signal wait, q1's workflow task; then r1 and a1 fail
    env.clock.set(70)
    env.client.check_deadlines()                        # d1's deadline passed at 30
    env.start("report", "r2", now=80)
    env.start("approval", "a2", now=80)
    env.decide(80)                                      # r2 on reports, a2 waits until 140
    env.start("etl", "w1", now=85)                      # its workflow task stays ready
    env.claim(88)                                       # e3 (ready since 0) starts
    env.worker.register(at(80))                         # live: its lease holds until 110
    lapsed = Worker(env.engine, WorkerOptions(queues=("reports",)))
    lapsed.register(at(0))                              # its lease lapsed at 30
    env.clock.set(90)
    return env


def test_instances_are_counted_by_type_and_status(busy):
    found = samples(busy.client.metrics())

    assert of(found, "wfctl_instances") == {
        labels(workflow_type="etl", status="running"): 3,
        labels(workflow_type="etl", status="completed"): 1,
        labels(workflow_type="report", status="running"): 1,
        labels(workflow_type="report", status="failed"): 1,
        labels(workflow_type="approval", status="waiting"): 1,
        labels(workflow_type="approval", status="failed"): 1,
        labels(workflow_type="quick", status="running"): 1,
        labels(workflow_type="due", status="failed"): 1,
        # Statuses every instance of a type has left stay, at 0.
        labels(workflow_type="approval", status="running"): 0,
        labels(workflow_type="due", status="running"): 0,
    }


def test_open_activities_are_counted_by_queue_and_status(busy):
    found = samples(busy.client.metrics())

    assert of(found, "wfctl_open_activities") == {
        labels(queue="default", status="scheduled"): 1,
        labels(queue="default", status="retry_scheduled"): 1,
        labels(queue="default", status="started"): 1,
        labels(queue="reports", status="scheduled"): 1,
        labels(queue="reports", status="retry_scheduled"): 0,
        labels(queue="reports", status="started"): 0,
    }


def test_ready_tasks_and_the_age_of_the_oldest(busy):
    found = samples(busy.client.metrics())

    # default: q1's activity (ready since 70) and e1's retry (since 80); reports: r2 (since 80);
    # w1's workflow task (since 85).
    assert of(found, "wfctl_ready_tasks") == {
        labels(task="activity", queue="default"): 2,
        labels(task="activity", queue="reports"): 1,
        labels(task="workflow", queue=""): 1,
    }
    assert of(found, "wfctl_oldest_ready_task_age_seconds") == {
        labels(task="activity", queue="default"): 20.0,
        labels(task="activity", queue="reports"): 10.0,
        labels(task="workflow", queue=""): 5.0,
    }


def test_timeouts_are_counted_by_kind_and_deadline_expiries_from_history(busy):
    found = samples(busy.client.metrics())

    # r1's two attempts missed schedule_to_start (a retry, then terminal: its run's failure
    # is not counted again); e1's heartbeat; a1's signal wait; q1's workflow task.
    assert of(found, "wfctl_timeouts_total") == {
        labels(kind="schedule_to_start"): 2, labels(kind="heartbeat"): 1,
        labels(kind="signal_wait"): 1, labels(kind="workflow_task_timeout"): 1,
        labels(kind="start_to_close"): 0, labels(kind="schedule_to_close"): 0,
        labels(kind="execution_timeout"): 0, labels(kind="run_timeout"): 0,
    }
    assert of(found, "wfctl_deadline_expiries_total") == {(): 1}


def test_the_next_pending_deadline_of_each_kind_in_seconds_from_now(busy):
    found = samples(busy.client.metrics())

    assert of(found, "wfctl_next_deadline_seconds") == {
        labels(kind="execution_timeout"): 3600 - 90,    # e1 and e3, started at 0
        labels(kind="run_timeout"): 1800 - 90,
        labels(kind="deadline"): 7200 - 90,
        labels(kind="schedule_to_start"): 100 - 90,     # r2, scheduled at 80
        labels(kind="start_to_close"): 388 - 90,        # e3, claimed at 88
        labels(kind="heartbeat"): 118 - 90,
        labels(kind="schedule_to_close"): 600 - 90,     # e1 and e3, scheduled at 0
        labels(kind="signal_wait"): 140 - 90,           # a2, waiting since 80
    }


def test_live_workers_and_the_workers_serving_each_queue_with_work(busy):
    found = samples(busy.client.metrics())

    assert of(found, "wfctl_live_workers") == {(): 1}
    assert of(found, "wfctl_queue_live_workers") == {
        labels(queue="default"): 1, labels(queue="reports"): 0}


def test_a_passed_deadline_not_yet_enforced_reads_negative(busy):
    busy.clock.set(130)

    found = samples(busy.client.metrics())

    assert of(found, "wfctl_next_deadline_seconds")[labels(kind="schedule_to_start")] == -30
    assert of(found, "wfctl_live_workers") == {(): 0}


def test_an_empty_database_has_every_counter_at_zero_and_no_pending_deadline(db):
    with Client(db) as client:
        found = samples(client.metrics())

    assert set(of(found, "wfctl_timeouts_total").values()) == {0}
    assert len(of(found, "wfctl_timeouts_total")) == 8
    assert of(found, "wfctl_deadline_expiries_total") == {(): 0}
    assert of(found, "wfctl_next_deadline_seconds") == {}
    assert of(found, "wfctl_ready_tasks") == {labels(task="workflow", queue=""): 0}


def test_a_worker_records_schedule_to_start_latency_and_attempt_duration(make_env):
    env = make_env(DEFINITIONS)
    registry = CollectorRegistry(auto_describe=False)
    env.worker.attempt_metrics = AttemptMetrics(registry)
    env.start("etl", "e1")
    env.start("report", "r1")
    env.decide(0)
    reports = Worker(env.engine, WorkerOptions(queues=("reports",), concurrency=1),
                     clock=env.worker_clock)
    reports.attempt_metrics = env.worker.attempt_metrics

    env.run(7)
    reports.run_once(env.worker_clock.set(12.5))

    found = samples(generate_latest(registry).decode())
    waited = "wfctl_activity_schedule_to_start_seconds"
    assert of(found, f"{waited}_sum") == {labels(queue="default"): 7.0,
                                          labels(queue="reports"): 12.5}
    assert of(found, f"{waited}_bucket")[labels(queue="default", le="5.0")] == 0
    assert of(found, f"{waited}_bucket")[labels(queue="default", le="10.0")] == 1
    ran = "wfctl_activity_attempt_duration_seconds"
    assert of(found, f"{ran}_count") == {labels(queue="default", outcome="completed"): 1,
                                         labels(queue="reports", outcome="completed"): 1}


def test_an_attempt_whose_handler_raised_is_recorded_as_failed(make_env):
    env = make_env("""
        version: 1
        workflows:
          bad:
            steps:
              - activity: wfh:value_error
                max_attempts: 1
    """)
    registry = CollectorRegistry(auto_describe=False)
    env.worker.attempt_metrics = AttemptMetrics(registry)
    env.start("bad", "b1")

    env.run(1)

    found = samples(generate_latest(registry).decode())
    assert of(found, "wfctl_activity_attempt_duration_seconds_count") == {
        labels(queue="default", outcome="failed"): 1}
    assert env.describe("b1")["status"] == "failed"


# the command line


def invoke(db: str, *args: str):
    return CliRunner().invoke(app, ["--db", db, *args])


def test_wfctl_metrics_prints_the_exposition_of_the_database(busy):
    result = invoke(busy.db, "metrics")

    assert result.exit_code == 0, result.stderr
    found = samples(result.stdout)
    assert sum(of(found, "wfctl_instances").values()) == 10
    assert of(found, "wfctl_deadline_expiries_total") == {(): 1}
    # The histograms belong to worker processes, which serve them.
    assert not any(name.startswith("wfctl_activity_") for name, _ in found)


@pytest.mark.sqlite_only        # a missing file
def test_wfctl_metrics_on_a_missing_database_is_an_error(tmp_path):
    result = invoke(tmp_path / "w.db", "metrics")

    assert result.exit_code == 1
    assert result.stderr == f"Error: no database at {tmp_path / 'w.db'}\n"
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_work_on_a_metrics_port_in_use_is_one_error_line_and_writes_nothing(tmp_path, db,
                                                                            nothing_written):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(DEFINITIONS))
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]

        result = invoke(db, "-w", str(tmp_path / "workflows.yaml"), "work",
                        "--metrics-port", str(port))

    assert result.exit_code == 1
    assert result.stderr == (f"Error: --metrics-port {port}: cannot listen: "
                             "Address already in use\n")
    assert nothing_written()


def test_work_once_serves_its_pass_and_lets_the_port_go(tmp_path, db):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(DEFINITIONS))
    port = free_port()

    result = invoke(db, "-w", str(tmp_path / "workflows.yaml"), "work", "--once",
                    "--metrics-port", str(port))

    assert result.exit_code == 0, result.stderr
    with socket.socket() as again:
        again.bind(("", port))


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_a_metrics_port_out_of_range_is_a_usage_error(db, nothing_written, port):
    result = invoke(db, "work", "--metrics-port", port)

    assert result.exit_code == 2
    assert nothing_written()


# a real worker process


THREE_STEPS = """
    version: 1
    workflows:
      three:
        steps:
          - activity: wfh:noop
            name: a
          - activity: wfh:noop
            name: b
          - activity: wfh:noop
            name: c
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.read().decode()
    except OSError:
        return None


def eventually(read: Callable[[], Any], what: str, timeout: float = 8.0) -> Any:
    end = time.monotonic() + timeout
    while True:
        value = read()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


@pytest.mark.process
def test_a_worker_serves_metrics_with_its_histograms_after_a_workflow_ran(tmp_path, db):
    (tmp_path / "workflows.yaml").write_text(textwrap.dedent(THREE_STEPS))
    shutil.copy(TESTS / "wfh.py", tmp_path / "wfh.py")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(TESTS.parent), os.environ.get("PYTHONPATH")]))}
    with (tmp_path / "worker.log").open("w") as log:
        worker = subprocess.Popen(
            [sys.executable, "-m", "wfctl", "--db", db, "work", "--metrics-port",
             str(port)], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        eventually(lambda: scrape(url), "the metrics endpoint")
        with Client(db, tmp_path / "workflows.yaml") as client:
            client.start("three", "t1")
            eventually(lambda: client.describe("t1")["status"] == "completed", "t1 to complete")

        found = samples(scrape(url))

        assert of(found, "wfctl_activity_schedule_to_start_seconds_count") == {
            labels(queue="default"): 3}
        assert of(found, "wfctl_activity_attempt_duration_seconds_count") == {
            labels(queue="default", outcome="completed"): 3}
        assert of(found, "wfctl_instances") == {
            labels(workflow_type="three", status="completed"): 1,
            labels(workflow_type="three", status="running"): 0}
        assert of(found, "wfctl_live_workers") == {(): 1}
        with pytest.raises(urllib.error.HTTPError) as elsewhere:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
        assert elsewhere.value.code == 404
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(10)
    assert code == 0
    assert f"metrics_serving port={port} path=/metrics" in (tmp_path / "worker.log").read_text()
