"""The command line as a user meets it: JSON documents, tables, and one-line errors."""

from __future__ import annotations

import json
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wfctl.cli import app

DEFINITIONS = """
version: 1
workflows:
  etl:
    execution_timeout: 2h
    deadline: {hours: 24}
    steps:
      - activity: wfh:mark
        name: extract
      - activity: wfh:mark
        name: transform
      - activity: wfh:mark
        name: load
"""


pytestmark = pytest.mark.both_backends


class Cli:
    def __init__(self, folder: Path, db: str, nothing_written: Callable[[], bool]) -> None:
        self.folder = folder
        self.db = db
        self.nothing_written = nothing_written
        self.workflows = folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None):
        return self.runner.invoke(app, ["--db", self.db, "-w", str(self.workflows), *args],
                                  input=input)

    def json(self, *args: str):
        result = self(*args, "--json")
        assert result.stdout.strip(), result.stderr
        return result.exit_code, json.loads(result.stdout)


@pytest.fixture
def cli(tmp_path: Path, db: str, nothing_written: Callable[[], bool]) -> Cli:
    return Cli(tmp_path, db, nothing_written)


def test_start_prints_ids_and_deadlines_as_json(cli):
    code, doc = cli.json("start", "etl", "order-1", "--input", '{"source": "x"}')
    assert code == 0
    assert set(doc) == {"started", "outcome", "workflow_instance_id", "workflow_run_id",
                        "workflow_type", "execution_deadline_at", "run_deadline_at",
                        "deadline_at"}
    assert (doc["started"], doc["outcome"], doc["workflow_instance_id"]) == \
        (True, "started_new", "order-1")
    assert doc["execution_deadline_at"].endswith("+00:00")
    assert doc["run_deadline_at"] is None


def test_the_etl_example_runs_with_work_once_and_describe_shows_it(cli):
    cli("start", "etl", "order-1")
    result = cli("work", "--once")
    assert result.exit_code == 0, result.stderr

    code, doc = cli.json("describe", "order-1")
    assert code == 0
    assert doc["status"] == "completed"
    assert doc["run"]["status"] == "completed"
    assert [a["status"] for a in doc["activities"]] == ["completed"] * 3
    code, events = cli.json("history", "order-1")
    assert events[0]["event_type"] == "WorkflowStarted"
    assert events[-1]["event_type"] == "WorkflowCompleted"
    assert set(events[0]) == {"seq", "event_type", "at", "run_number", "attributes"}


def test_a_duplicate_open_id_is_refused_and_recorded(cli):
    cli("start", "etl", "order-1")
    result = cli("start", "etl", "order-1", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["outcome"] == "rejected_duplicate"
    assert result.stderr.startswith("Error: instance order-1 is already open")
    code, events = cli.json("history", "order-1")
    assert events[-1]["event_type"] == "StartRejected"

    code, doc = cli.json("start", "etl", "order-1", "--on-duplicate", "return-existing")
    assert (code, doc["outcome"], doc["started"]) == (0, "returned_existing_active", False)


def test_a_closed_id_can_be_started_again_as_a_new_run(cli):
    cli("start", "etl", "order-1")
    cli("work", "--once")
    code, doc = cli.json("start", "etl", "order-1")
    assert (code, doc["outcome"]) == (0, "started_new")
    code, described = cli.json("describe", "order-1")
    assert (described["run_count"], described["run"]["run_number"]) == (2, 2)


def test_the_global_options_may_follow_the_command(cli):
    files = ["-w", str(cli.workflows), "--db", cli.db]
    started = cli.runner.invoke(app, ["start", "etl", "order-1", *files, "--json"])
    assert started.exit_code == 0, started.stderr
    assert json.loads(started.stdout)["outcome"] == "started_new"
    assert cli.runner.invoke(app, ["work", "--once", *files]).exit_code == 0

    described = cli.runner.invoke(app, ["describe", "order-1", "--db", cli.db, "--json"])
    assert json.loads(described.stdout)["status"] == "completed"
    checked = cli.runner.invoke(app, ["deadlines", "check", "--db", cli.db, "--json"])
    assert json.loads(checked.stdout) == {"failed": [], "count": 0}


@pytest.mark.sqlite_only        # a missing file
def test_a_global_option_after_the_command_wins_over_the_one_before_it(cli, tmp_path):
    missing = tmp_path / "missing.db"
    cli("start", "etl", "order-1")
    found = cli.runner.invoke(app, ["--db", str(missing), "describe", "order-1", "--db", cli.db])
    assert found.exit_code == 0, found.stderr
    refused = cli("describe", "order-1", "--db", str(missing))
    assert (refused.exit_code, refused.stderr) == (1, f"Error: no database at {missing}\n")
    assert not missing.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["start", "nope"], "Error: unknown workflow type 'nope' (defined: etl)\n"),
    (["start", "etl", "--input", "{bad"],
     "Error: --input: invalid JSON: Expecting property name enclosed in double quotes "
     "(line 1 column 2)\n"),
    (["start", "etl", "--input", "[1, 2]"], "Error: --input: expected a JSON object (got list)\n"),
    (["start", "etl", "--execution-timeout", "0"],
     "Error: --execution-timeout: must be at least 1 second (got 0)\n"),
    (["start", "etl", "--run-timeout", "-5"],
     "Error: --run-timeout: must be at least 1 second (got -5)\n"),
    (["start", "etl", "--deadline", "soon"],
     "Error: --deadline: expected a duration: seconds (3600), a unit string with each unit "
     "once, largest first (90s, 5m, 2h30m, 1d12h, 250ms), ISO 8601 (PT2H30M, P1D, P1Y), "
     "a mapping ({hours: 2, minutes: 30}) or NONE (got 'soon')\n"),
    (["start", "etl", "--deadline", "1 hour"],
     "Error: --deadline: write 1h: the units are ms, s, m, h, d and w (got '1 hour')\n"),
    (["start", "etl", "--run-timeout", "-5s"],
     "Error: --run-timeout: must not be negative (got '-5s')\n"),
    (["start", "etl", "--execution-timeout", "2y"],
     "Error: --execution-timeout: years are not a unit: use days or weeks (365d, 52w) or ISO "
     "8601's P1Y (got '2y')\n"),
    (["start", "etl", "--input-file", "missing.json"],
     "Error: --input-file: cannot read missing.json: No such file or directory\n"),
])
def test_bad_input_is_one_error_line_and_nothing_is_written(cli, args, message):
    result = cli(*args)
    assert result.exit_code == 1
    assert result.stderr == message
    assert result.stdout == ""
    assert cli.nothing_written()


@pytest.mark.sqlite_only        # a missing file; a PostgreSQL database is created by its server
def test_describe_without_a_database_file_says_so_and_creates_none(cli):
    result = cli("describe", "nope")
    assert result.exit_code == 1
    assert result.stderr == f"Error: no database at {cli.db}\n"
    assert result.stdout == ""
    assert cli.nothing_written()


def test_a_yaml_error_is_one_line(cli):
    cli.workflows.write_text("version: 1\nworkflows:\n  etl: [\n")
    result = cli("start", "etl")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {cli.workflows}:4: invalid YAML:")
    assert result.stderr.count("\n") == 1
    assert cli.nothing_written()


def test_describe_of_an_unknown_id_is_a_json_document_too(cli):
    cli("start", "etl", "order-1")
    result = cli("describe", "nope", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {"found": False, "reason": "instance_not_found"}


def test_list_is_newest_first_and_filters(cli):
    cli("start", "etl", "a")
    cli("work", "--once")
    cli("start", "etl", "b")
    code, rows = cli.json("list")
    assert code == 0
    assert [row["workflow_instance_id"] for row in rows] == ["b", "a"]
    _, rows = cli.json("list", "--status", "completed")
    assert [row["workflow_instance_id"] for row in rows] == ["a"]
    _, rows = cli.json("list", "--type", "other")
    assert rows == []
    result = cli("list", "--status", "bogus")
    assert result.exit_code == 2
    assert result.stderr == "Error: --status: 'bogus' is not one of running, waiting, paused, " \
        "completed, failed, timed_out, cancelled, terminated\n"


def test_validate_prints_each_type_with_its_timeouts(cli):
    result = cli("validate")
    assert result.exit_code == 0
    assert "etl" in result.stdout
    assert "extract → transform → load" in result.stdout
    assert "2h" in result.stdout and "1d" in result.stdout


def test_validate_reports_a_handler_that_cannot_be_imported(cli):
    cli.workflows.write_text(textwrap.dedent(DEFINITIONS).replace("wfh:mark", "nomodule_xyz:f", 1))
    result = cli("validate")
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: {cli.workflows}:8: workflows.etl.steps[0]: handler nomodule_xyz:f: cannot import"
    )


def test_piped_output_is_plain_text(cli):
    cli("start", "etl", "order-1")
    result = cli("describe", "order-1")
    assert result.exit_code == 0
    assert "\x1b[" not in result.stdout
    assert "order-1" in result.stdout and "running" in result.stdout


def test_work_puts_back_the_signal_handlers_it_found(cli):
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert cli("work", "--once").exit_code == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_shipped_example_completes_with_one_work_once_pass(db):
    example = Path(__file__).parent.parent / "workflows.yaml.example"
    runner = CliRunner()
    base = ["--db", db, "-w", str(example)]
    started = runner.invoke(app, [*base, "start", "etl", "--input", '{"source": "s3://x"}',
                                  "--json"])
    instance_id = json.loads(started.stdout)["workflow_instance_id"]
    assert runner.invoke(app, [*base, "work", "--once"]).exit_code == 0
    doc = json.loads(runner.invoke(app, [*base, "describe", instance_id, "--json"]).stdout)
    assert doc["status"] == "completed"
    assert doc["state"]["loaded"] == 5
    assert doc["activities"][0]["last_heartbeat_details"] == {"extracted": 5}


def test_history_no_tasks_leaves_out_the_workflow_task_events(cli):
    cli("start", "etl", "order-1")
    assert cli("work", "--once").exit_code == 0
    _, every = cli.json("history", "order-1")
    assert {"WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted"} <= \
        {event["event_type"] for event in every}

    _, shown = cli.json("history", "order-1", "--no-tasks")
    table = cli("history", "order-1", "--no-tasks")

    assert shown == [event for event in every if not event["event_type"].startswith("WorkflowTask")]
    assert table.exit_code == 0
    assert "WorkflowTask" not in table.stdout
    assert "ActivityCompleted" in table.stdout and "WorkflowCompleted" in table.stdout
    _, completed = cli.json("history", "order-1", "--no-tasks", "--event-type", "ActivityCompleted",
                            "--event-type", "WorkflowTaskCompleted")
    assert [event["event_type"] for event in completed] == ["ActivityCompleted"] * 3
    only_tasks = cli("history", "order-1", "--no-tasks", "--event-type", "WorkflowTaskStarted")
    assert (only_tasks.exit_code, only_tasks.stderr) == \
        (2, "Error: --no-tasks hides every --event-type given\n")
