"""Following work from the command line: `start --wait`, `list` with its filters and `--watch`."""

from __future__ import annotations

import io
import json
import re
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import T0, Clock, at
from rich.console import Console
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.show import render
from wfctl.show.live import live_view, watch_list
from wfctl.worker import Worker, WorkerOptions

DEFINITIONS = """
version: 1
workflows:
  etl:
    execution_timeout: 2h
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
  report:
    deadline: 1d
    steps:
      - wait_for_signal: go
"""


pytestmark = pytest.mark.both_backends


class Cli:
    def __init__(self, folder: Path, db: str) -> None:
        self.db = db
        self.workflows = folder / "workflows.yaml"
        self.workflows.write_text(textwrap.dedent(DEFINITIONS))

    def __call__(self, *args: str, env: dict[str, str] | None = None):
        return CliRunner().invoke(app, ["--db", self.db, "-w", str(self.workflows), *args],
                                  env=env)


@pytest.fixture
def cli(tmp_path: Path, db: str) -> Cli:
    return Cli(tmp_path, db)


@pytest.fixture
def worker(cli: Cli):
    """A real worker in a thread on the same database, as `wfctl work` would run it."""
    client = Client(cli.db, cli.workflows)
    running = Worker(client.engine, WorkerOptions(poll_interval=0.01))
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    yield running
    running.request_stop()
    thread.join(10)
    client.close()


# start --wait

def test_start_wait_exits_0_when_the_workflow_completes(cli, worker):
    result = cli("start", "etl", "w1", "--wait")

    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"seq\s+run\s+\+time\s+at \(UTC\)\s+event\s+details", lines[0])
    assert lines[-1].split()[4] == "WorkflowCompleted"
    assert "Activity load completed (attempt 1)" in result.stdout


def test_start_wait_exits_1_when_the_workflow_fails(cli, worker):
    result = cli("start", "broken", "w2", "--wait")

    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1].split()[4] == "WorkflowFailed"
    assert "Activity parse failed: ValueError: bad value" in result.stdout


def test_start_wait_json_prints_only_the_final_describe(cli, worker):
    done = cli("start", "etl", "w3", "--wait", "--json")
    failed = cli("start", "broken", "w4", "--wait", "--json")

    assert done.exit_code == 0
    doc = json.loads(done.stdout)
    assert (doc["workflow_instance_id"], doc["status"]) == ("w3", "completed")
    assert doc["state"] == {"ran_extract": 1, "ran_load": 1}
    assert failed.exit_code == 1
    doc = json.loads(failed.stdout)
    assert (doc["status"], doc["failure"]["failure_category"]) == ("failed", "activity")


def test_start_wait_exits_1_when_the_workflow_is_terminated_meanwhile(cli, backend):
    """No worker here: another thread stops the workflow while `--wait` follows it."""
    client = Client(cli.db, cli.workflows)

    def terminate_once_started() -> None:
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if (backend == "postgres" or Path(cli.db).exists()) and client.list():
                client.terminate("w5", "operator")
                return
            time.sleep(0.01)

    stopper = threading.Thread(target=terminate_once_started)
    stopper.start()
    try:
        result = cli("start", "report", "w5", "--wait")
    finally:
        stopper.join()
        client.close()

    assert result.exit_code == 1
    assert result.stdout.splitlines()[-1].split()[4] == "WorkflowTerminated"


def test_start_wait_refuses_a_duplicate_without_following_it(cli):
    cli("start", "report", "w6")

    result = cli("start", "report", "w6", "--wait")

    assert result.exit_code == 1
    assert result.stderr.startswith("Error: instance w6 is already open")


def test_the_live_view_shows_step_attempts_and_countdowns(make_env):
    env = make_env(DEFINITIONS.replace("name: extract", "name: extract\n        heartbeat: 30s"))
    env.start("etl", "e1")
    env.decide(0)
    env.claim(0)
    out = Console(file=io.StringIO(), force_terminal=True, width=160)

    out.print(live_view(env.describe("e1"), env.history("e1")[-5:], at(20)))

    text = re.sub(r"\x1b\[[0-9;]*m", "", out.file.getvalue())
    assert "etl e1  running  run 1  step extract" in text
    assert re.search(r"execution timeout\s+2026-04-12T14:00:00.000\+00:00\s+in 1h 59m", text)
    assert re.search(r"extract\s+started\s+attempt 1/3\s+heartbeat in 10s", text)
    assert "ActivityStarted" in text


# list

def test_list_filters_by_status_type_and_since(cli):
    clock = Clock()
    client = Client(cli.db, cli.workflows, clock_now=clock)
    client.start("etl", "old")
    clock.now = T0 + timedelta(days=2)
    client.start("report", "new")
    client.terminate("new")
    client.close()

    def ids(*args: str) -> list[str]:
        result = cli("list", *args, "--json")
        assert result.exit_code == 0, result.stderr
        return [row["workflow_instance_id"] for row in json.loads(result.stdout)]

    assert ids() == ["new", "old"]
    assert ids("--status", "terminated") == ["new"]
    assert ids("--type", "etl") == ["old"]
    assert ids("--since", "2026-04-13") == ["new"]
    assert ids("--since", "2026-04-12T11:59:59Z") == ["new", "old"]
    assert ids("--since", "2026-04-12T12:00:00.001+00:00") == ["new"]
    assert ids("--since", "2026-04-12T13:00:00+01:00") == ["new", "old"]


@pytest.fixture
def new_york(monkeypatch):
    """This process in a time zone other than UTC, so that local time would show."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_a_date_or_instant_without_an_offset_is_utc(cli, new_york):
    clock = Clock()
    client = Client(cli.db, cli.workflows, clock_now=clock)
    client.start("etl", "noon")                          # T0: 2026-04-12T12:00:00 UTC
    client.close()

    def ids(since: str) -> list[str]:
        result = cli("list", "--since", since, "--json")
        assert result.exit_code == 0, result.stderr
        return [row["workflow_instance_id"] for row in json.loads(result.stdout)]

    assert ids("2026-04-12") == ["noon"]
    assert ids("2026-04-12T12:00:00") == ["noon"]
    assert ids("2026-04-12T12:00:01") == []
    assert ids("2026-04-12 11:59") == ["noon"]
    assert ids("2026-04-13") == []


def test_since_takes_a_duration_back_from_now(cli):
    """`--since 20h` is the last 20 hours (dateutil once read it as 20:00 today), and `--since
    5m` the last five minutes (it once listed everything)."""
    now = datetime.now(UTC)
    for instance_id, ago in (("minute", timedelta(minutes=1)), ("hours", timedelta(hours=19)),
                             ("day", timedelta(hours=21)), ("week", timedelta(days=7))):
        client = Client(cli.db, cli.workflows, clock_now=lambda ago=ago: now - ago)
        client.start("etl", instance_id)
        client.close()

    def ids(*args: str) -> list[str]:
        result = cli("list", *args, "--json")
        assert result.exit_code == 0, result.stderr
        return [row["workflow_instance_id"] for row in json.loads(result.stdout)]

    assert ids("--since", "20h") == ["minute", "hours"]
    assert ids("--since", "5m") == ["minute"]
    assert ids("--since", "PT20H") == ["minute", "hours"]
    assert ids("--since", "{hours: 22}") == ["minute", "hours", "day"]
    assert ids("--since", "8d") == ["minute", "hours", "day", "week"]


@pytest.mark.parametrize(("value", "message"), [
    ("someday", "expected a duration back from now (1h: the last hour) or an ISO 8601 date or "
                "instant (2026-12-01, 2026-12-01T16:00:00+00:00) (got 'someday')"),
    ("April 14 2026", "expected a duration back from now (1h: the last hour) or an ISO 8601 "
                      "date or instant (2026-12-01, 2026-12-01T16:00:00+00:00) "
                      "(got 'April 14 2026')"),
    ("2026-13-01", "expected a duration back from now (1h: the last hour) or an ISO 8601 date "
                   "or instant (2026-12-01, 2026-12-01T16:00:00+00:00) (got '2026-13-01')"),
    ("20H", "units are lower-case: 20h (got '20H')"),
    ("6M", "M is not a unit: minutes are m (6m) and months are not supported (got '6M')"),
    ("P1M", "months are not a fixed length: use days, weeks or P1Y (got 'P1M')"),
    ("2y", "years are not a unit: use days or weeks (365d, 52w) or ISO 8601's P1Y "
           "(got '2y')"),
    ("1 hour", "write 1h: the units are ms, s, m, h, d and w (got '1 hour')"),
    ("400d", "must be at most 1 year (got 400d)"),
])
def test_since_that_is_neither_a_duration_nor_a_date_is_an_error(cli, value, message):
    Client(cli.db, cli.workflows).start("etl", "a1")
    for args in (["list", "--since", value], ["list", "--since", value, "--json"]):
        bad = cli(*args)
        assert (bad.exit_code, bad.stdout, bad.stderr) == (1, "", f"Error: --since: {message}\n")


def test_list_shows_the_nearest_deadline_of_each_open_instance(cli):
    cli("start", "etl", "a")
    cli("start", "report", "b")

    result = cli("list")

    lines = result.stdout.splitlines()
    assert re.match(r"instance\s+type\s+status\s+run\s+created\s+nearest deadline$", lines[0])
    assert re.match(r"b\s+report\s+waiting|b\s+report\s+running", lines[1])
    assert re.search(r"deadline in (23h 59m|1d)$", lines[1])
    assert re.search(r"a\s+etl\s+running\s+1\s+.*execution_timeout in (1h 59m|2h)$", lines[2])


def test_list_nearest_deadline_is_coloured_by_closeness():
    rows = [{"workflow_instance_id": "x", "workflow_type": "etl", "status": "running",
             "run_number": 1, "created_at": T0, "closed_at": None,
             "nearest_deadline": {"kind": "run_timeout", "at": at(30)}}]
    out = Console(file=io.StringIO(), force_terminal=True, width=120, color_system="standard")

    render.instances(out, rows, at(0))

    assert "run_timeout \x1b[31min 30s" in out.file.getvalue()


def test_list_watch_prints_the_list_again_at_each_refresh():
    calls = []

    def rows():
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return [{"workflow_instance_id": f"i{len(calls)}", "workflow_type": "etl",
                 "status": "running", "run_number": 1,
                 "created_at": T0, "closed_at": None, "nearest_deadline": None}]

    out = Console(file=io.StringIO(), width=200)
    with pytest.raises(KeyboardInterrupt):
        watch_list(rows, out, interval=0)

    text = out.file.getvalue()
    assert text.count("instance  type") == 2
    assert re.search(r"^i1\s+etl\s+running", text, re.MULTILINE)
    assert re.search(r"^i2\s+etl\s+running", text, re.MULTILINE)
