"""Worker logs: one line per event on stderr (time, level, instance, event), text or JSON."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wfctl import Client
from wfctl.ops import log

pytestmark = pytest.mark.both_backends

TESTS = Path(__file__).parent
DEFINITIONS = """
version: 1
workflows:
  etl:
    steps:
      - activity: wfh:mark
        name: extract
      - activity: wfh:mark
        name: load
  broken:
    steps:
      - activity: wfh:value_error
        name: parse
        non_retryable: [ValueError]
  flaky:
    steps:
      - activity: wfh:fail_until
        name: fetch
        max_attempts: 2
        backoff: [1h]
"""
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR)\s+"
                       r"[a-z_]+( [a-z_]+=\S.*)?$")


def work_once(tmp_path: Path, db: str, *options: str) -> list[str]:
    """Start one etl, one broken and one flaky instance, run `wfctl work --once`; its stderr
    lines."""
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(DEFINITIONS))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("NO_COLOR", None)
    with Client(db, workflows) as client:
        client.start("etl", "e1")
        client.start("broken", "b1")
        client.start("flaky", "f1")
    done = subprocess.run([sys.executable, "-m", "wfctl", "--db", db,
                           "-w", str(workflows), "work", "--once", *options],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    return done.stderr.splitlines()


@pytest.mark.process
def test_text_logs_are_one_plain_line_per_event(tmp_path, db):
    lines = work_once(tmp_path, db)

    assert lines and all(TEXT_LINE.match(line) for line in lines), lines
    assert not any("\x1b[" in line for line in lines)
    completed = next(line for line in lines if " activity_completed " in line)
    assert re.search(r" INFO    activity_completed instance=e1 run=1 step=extract attempt=1$",
                     completed)
    failed = next(line for line in lines if " workflow_failed " in line)
    assert re.search(r" WARNING workflow_failed instance=b1 run=1 step=parse "
                     r"failure_category=activity exception_class=ValueError "
                     r'message="Activity parse failed: bad value"', failed)
    retried = next(line for line in lines if " activity_retry_scheduled " in line)
    assert re.search(r" WARNING activity_retry_scheduled instance=f1 run=1 step=fetch attempt=1 "
                     r'reason=error exception_class=ConnectionError message="attempt 1 failed"',
                     retried)
    # The step that completes the workflow is one line: the workflow's, naming the step.
    ended = [line for line in lines if " instance=e1 " in line and " extract " not in line
             and "step=extract" not in line]
    assert len(ended) == 1 and re.search(
        r" INFO    workflow_completed instance=e1 run=1 step=load attempt=1$", ended[0]), lines


@pytest.mark.process
def test_json_logs_are_one_document_per_line(tmp_path, db):
    lines = work_once(tmp_path, db, "--log-format", "json")

    documents = [json.loads(line) for line in lines]
    assert all({"time", "level", "event"} <= set(doc) for doc in documents)
    assert all(doc["time"].endswith("+00:00") for doc in documents)
    completed = next(doc for doc in documents if doc["event"] == "workflow_completed")
    assert (completed["level"], completed["instance"], completed["run"], completed["step"],
            completed["attempt"]) == ("info", "e1", 1, "load", 1)
    failed = next(doc for doc in documents if doc["event"] == "activity_failed")
    assert failed["level"] == "warning"
    assert (failed["instance"], failed["step"], failed["exception_class"], failed["message"]) == \
        ("b1", "parse", "ValueError", "bad value")


@pytest.mark.process
def test_log_level_chooses_what_is_logged(tmp_path, db):
    warnings = work_once(tmp_path, db, "--log-level", "warning", "--log-format", "json")
    levels = {json.loads(line)["level"] for line in warnings}
    assert levels == {"warning"}
    assert {json.loads(line)["event"] for line in warnings} >= {"activity_failed",
                                                                "workflow_failed"}


@pytest.mark.process
def test_debug_adds_the_workflow_task_events(tmp_path, db):
    lines = work_once(tmp_path, db, "--log-level", "debug")
    assert any(" DEBUG   workflow_task_started instance=e1" in line for line in lines)
    assert any(" DEBUG   activity_scheduled instance=e1" in line for line in lines)
    assert any(" DEBUG   activity_started instance=e1" in line for line in lines)
    # One line per event: the last step's completion and the workflow's are two.
    assert any(re.search(r" INFO    activity_completed instance=e1 run=1 step=load", line)
               for line in lines)
    assert any(re.search(r" INFO    workflow_completed instance=e1 run=1$", line)
               for line in lines)


def test_an_unknown_log_format_or_level_is_a_usage_error_naming_the_choices(tmp_path):
    from typer.testing import CliRunner

    from wfctl.cli import app

    runner = CliRunner()
    bad_format = runner.invoke(app, ["--db", str(tmp_path / "w.db"), "work", "--log-format", "xml"])
    bad_level = runner.invoke(app, ["--db", str(tmp_path / "w.db"), "work", "--log-level", "loud"])
    assert bad_format.exit_code == 2
    assert bad_format.stderr == "Error: --log-format: 'xml' is not one of text, json\n"
    assert bad_level.exit_code == 2
    assert bad_level.stderr == "Error: --log-level: 'loud' is not one of debug, info, warning, error\n"
    assert "Traceback" not in bad_format.stderr + bad_level.stderr
    assert not (tmp_path / "w.db").exists()


def test_work_help_lists_the_log_choices():
    from typer.testing import CliRunner

    from wfctl.cli import app

    result = CliRunner().invoke(app, ["work", "--help"], env={"COLUMNS": "200"})

    assert "--log-format [text|json]" in result.stdout
    assert "--log-level [debug|info|warning|error]" in result.stdout


def test_log_level_is_read_whatever_its_case(tmp_path, db):
    lines = work_once(tmp_path, db, "--log-level", "WARNING", "--log-format", "json")
    assert all(json.loads(line)["level"] in ("warning", "error") for line in lines)


@pytest.fixture
def restore_logger():
    handlers, level, propagate = log.LOGGER.handlers[:], log.LOGGER.level, log.LOGGER.propagate
    yield
    log.LOGGER.handlers[:] = handlers
    log.LOGGER.setLevel(level)
    log.LOGGER.propagate = propagate


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_unexpected_error_stays_on_its_line(capsys, restore_logger, fmt):
    log.configure("info", fmt)
    try:
        raise RuntimeError("disk full")
    except RuntimeError:
        log.LOGGER.exception("watchdog pass failed; retrying")

    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    if fmt == "text":
        assert lines[0].endswith('ERROR   watchdog pass failed; retrying '
                                 'exception="RuntimeError: disk full"')
    else:
        doc = json.loads(lines[0])
        assert (doc["level"], doc["exception"]) == ("error", "RuntimeError: disk full")
        assert "Traceback" in doc["traceback"]


def test_history_events_become_snake_case_lines(capsys, restore_logger):
    log.configure("info", "text")
    log.history_events([{"event_type": "ActivityTimedOut", "workflow_instance_id": "o1",
                         "run_number": 2, "attributes": {"step": "fetch", "attempt": 3,
                                                         "timeout_kind": "heartbeat"}}])

    line = capsys.readouterr().err.strip()
    assert TEXT_LINE.match(line)
    assert line.endswith("WARNING activity_timed_out instance=o1 run=2 step=fetch attempt=3 "
                         "timeout_kind=heartbeat")
    assert logging.getLogger("wfctl").propagate is False


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_instant_is_logged_as_history_shows_it(capsys, restore_logger, fmt):
    # The engine appends instants as datetimes; history reads them back as ISO text.
    log.configure("info", fmt)
    due = datetime(2026, 4, 12, 12, 0, 5, 250000, tzinfo=UTC)
    log.history_events([{"event_type": "ActivityRetryScheduled", "workflow_instance_id": "o1",
                         "run_number": 1, "attributes": {"step": "fetch",
                                                         "retry_available_at": due}}])

    line = capsys.readouterr().err.strip()
    if fmt == "text":
        assert line.endswith("retry_available_at=2026-04-12T12:00:05.250+00:00")
    else:
        assert json.loads(line)["retry_available_at"] == "2026-04-12T12:00:05.250+00:00"


@pytest.mark.process
def test_at_info_a_successful_step_is_one_line(tmp_path, db):
    lines = [line for line in work_once(tmp_path, db) if " instance=e1 " in line]
    events = [line.split()[2] for line in lines]
    assert events == ["activity_completed", "workflow_completed"], lines
