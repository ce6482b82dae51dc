"""continue_as_new: a new run of the same instance that keeps the execution deadline and the
deadline, and gets a fresh run deadline."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import at, printed
from typer.testing import CliRunner, Result

from wfctl import clock
from wfctl.cli import app
from wfctl.errors import NotFound

# The engine on both backends: PostgreSQL gives the same outcomes and histories as SQLite.
pytestmark = pytest.mark.both_backends

LOOP = """
version: 1
workflows:
  loop:
    execution_timeout: {execution}
    run_timeout: {run}
    deadline: {{hours: 24}}
    steps:
      - delay: 10s
      - activity: wfh:loop_counter
      - continue_as_new: {{while: more}}
"""


def loop(execution: str = "1h", run: str = "5m") -> str:
    return LOOP.format(execution=execution, run=run)


def cli(env: Any, *args: str) -> Result:
    return CliRunner().invoke(app, ["--db", env.db,
                                    "-w", str(env.folder / "workflows.yaml"), *args])


def three_runs(make_env: Any) -> Any:
    """Runs 1, 2 and 3 start at 0 s, 10 s and 20 s; run 3 completes at 30 s."""
    env = make_env(loop())
    env.start("loop", "l1", input={"until": 3})
    for now in (0, 10, 20, 30):
        env.run(now)
    return env


def test_continue_as_new_keeps_the_execution_deadline_and_recomputes_the_run_deadline(make_env):
    env = three_runs(make_env)

    doc = env.describe("l1")
    assert doc["status"] == "completed"
    assert doc["run_count"] == 3
    assert doc["state"] == {"until": 3, "i": 3, "more": False}
    runs = [env.describe("l1", run=n)["run"] for n in (1, 2, 3)]
    assert [run["run_number"] for run in runs] == [1, 2, 3]
    assert [run["status"] for run in runs] == ["continued_as_new", "continued_as_new", "completed"]
    assert [run["closed_reason"] for run in runs] == ["continued_as_new", "continued_as_new",
                                                     "completed"]
    assert [run["started_at"] for run in runs] == [at(0),
                                                   at(10),
                                                   at(20)]
    assert {run["execution_deadline_at"] for run in runs} == {at(3600)}
    assert [run["run_deadline_at"] for run in runs] == [at(300),
                                                        at(310),
                                                        at(320)]
    assert {run["run_timeout_seconds"] for run in runs} == {300}
    assert [run["continued_to_run_id"] for run in runs] == \
        [runs[1]["workflow_run_id"], runs[2]["workflow_run_id"], None]
    assert {env.describe("l1", run=n)["deadline_at"] for n in (1, 2, 3)} == \
        {at(86400)}
    assert env.describe("l1", run=1)["state"] == {"until": 3, "i": 1, "more": True}


def test_each_run_records_how_it_continued_and_how_the_next_began(make_env):
    env = three_runs(make_env)
    runs = [env.describe("l1", run=n)["run"] for n in (1, 2, 3)]

    history = env.history("l1", all_runs=True)

    assert [e["seq"] for e in history] == list(range(1, len(history) + 1))
    assert [e["run_number"] for e in history] == sorted(e["run_number"] for e in history)
    continued = [e for e in history if e["event_type"] == "WorkflowContinuedAsNew"]
    assert [e["run_number"] for e in continued] == [1, 2]
    assert [e["attributes"]["new_run_id"] for e in continued] == \
        [runs[1]["workflow_run_id"], runs[2]["workflow_run_id"]]
    assert [e["attributes"]["new_run_number"] for e in continued] == [2, 3]
    assert continued[1]["attributes"]["execution_deadline_at"] == \
        at(3600)
    assert continued[1]["attributes"]["run_deadline_at"] == at(320)
    started = [e for e in history if e["event_type"] == "WorkflowStarted"]
    assert [e["run_number"] for e in started] == [1, 2, 3]
    second = started[1]["attributes"]
    assert second["input"] == {"until": 3, "i": 1, "more": True}
    assert second["continued_from_run_id"] == runs[0]["workflow_run_id"]
    assert second["execution_deadline_at"] == at(3600)
    assert second["run_deadline_at"] == at(310)
    assert second["deadline_at"] == at(86400)
    assert started[1]["seq"] == continued[0]["seq"] + 1
    assert history[-1]["event_type"] == "WorkflowCompleted"
    assert {e["run_number"] for e in env.history("l1", run=2)} == {2}
    assert env.history("l1")[0]["event_type"] == "WorkflowStarted"
    assert {e["run_number"] for e in env.history("l1")} == {3}


def test_describe_run_and_history_all_runs_on_the_command_line(make_env):
    env = three_runs(make_env)

    described = cli(env, "describe", "l1", "--run", "2", "--json")
    assert described.exit_code == 0
    doc = json.loads(described.stdout)
    assert (doc["run"]["run_number"], doc["run"]["status"]) == (2, "continued_as_new")
    assert doc["run"]["run_deadline_at"] == clock.iso(at(310))
    history = cli(env, "history", "l1", "--all-runs", "--json")
    assert history.exit_code == 0
    events = json.loads(history.stdout)
    assert [e["run_number"] for e in events if e["event_type"] == "WorkflowStarted"] == [1, 2, 3]
    assert events == printed(env.history("l1", all_runs=True))
    table = cli(env, "history", "l1", "--all-runs")
    assert table.exit_code == 0
    assert "WorkflowContinuedAsNew" in table.stdout
    missing = cli(env, "describe", "l1", "--run", "4")
    assert missing.exit_code == 1
    assert missing.stderr == "Error: l1 has no run 4 (it has 3)\n"


def test_a_run_that_does_not_exist_is_not_found(make_env):
    env = three_runs(make_env)

    with pytest.raises(NotFound, match=r"^l1 has no run 4 \(it has 3\)$"):
        env.describe("l1", run=4)
    with pytest.raises(NotFound, match=r"^l1 has no run 4 \(it has 3\)$"):
        env.history("l1", run=4)


def test_the_run_timeout_starts_afresh_with_each_run(make_env):
    env = make_env(loop(execution="NONE", run="15s"))
    env.start("loop", "l1", input={"until": 3})

    for now in (0, 10, 20, 30):
        env.run(now)

    assert env.describe("l1")["status"] == "completed"
    assert "WorkflowTimedOut" not in env.event_types("l1", all_runs=True)


def test_the_execution_timeout_spans_every_run(make_env):
    env = make_env(loop(execution="25s", run="15s"))
    env.start("loop", "l1", input={"until": 10})
    for now in (0, 10, 20):
        env.run(now)
    assert env.describe("l1")["run"]["run_number"] == 3

    env.run(24.999)
    assert env.describe("l1")["status"] == "running"
    env.run(25)

    doc = env.describe("l1")
    assert doc["status"] == "timed_out"
    assert (doc["run"]["run_number"], doc["run"]["status"]) == (3, "timed_out")
    assert doc["run"]["run_deadline_at"] == at(35)
    timed_out = env.events("l1", "WorkflowTimedOut")[0]
    assert timed_out["run_number"] == 3
    assert timed_out["attributes"]["timeout_kind"] == "execution_timeout"
    assert timed_out["attributes"]["execution_deadline_at"] == at(25)
    assert doc["failure"]["message"] == \
        "Workflow execution deadline expired at 2026-04-12T12:00:25.000+00:00"
    assert env.describe("l1", run=2)["run"]["status"] == "continued_as_new"
