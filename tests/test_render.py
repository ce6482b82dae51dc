"""describe and history as a person reads them: on a terminal (rich) and piped (plain text)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import wfh
from conftest import T0, at, printed
from rich.console import Console
from typer.testing import CliRunner

from wfctl import Client
from wfctl.cli import app
from wfctl.show import render
from wfctl.show.live import follow_history
from wfctl.worker import Worker, WorkerOptions

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  data_import:
    execution_timeout: 2h
    run_timeout: 1h
    deadline: {hours: 24}
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:mark
        name: fetch
        start_to_close: 5m
        heartbeat: 15s
        max_attempts: 1
      - delay: 1h
  flaky:
    steps:
      - activity: wfh:fail_until
        name: load
        max_attempts: 3
        backoff: {initial: 1s, coefficient: 2.0, max: 1m}
        start_to_close: 5m
        non_retryable: [ValueError]
  parent:
    steps:
      - workflow: child
        name: nightly
  child:
    steps:
      - delay: 30m
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch):
    """Local time two hours ahead of UTC, named XYZ, whatever the machine's zone is."""
    monkeypatch.setenv("TZ", "XYZ-2")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def terminal() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=200, color_system="standard",
                   highlight=False)


def piped() -> Console:
    return Console(file=io.StringIO(), width=500)


def shown(out: Console) -> str:
    return ANSI.sub("", out.file.getvalue())


def timed_out_on_heartbeat(env):
    """fetch heartbeats at +1s, then nothing: its 15s heartbeat timeout expires at +16s."""
    env.start("data_import", "order-1")
    env.decide(0)
    task = env.claim(0)
    env.engine.record_heartbeat(task, {"processed": 10}, at(1))
    env.sweep(17)
    env.decide(17)
    return env.describe("order-1")


def running_with_a_heartbeat(env):
    env.start("data_import", "order-1")
    env.decide(0)
    task = env.claim(0)
    env.engine.record_heartbeat(task, {"processed": 10}, at(1))
    return env.describe("order-1")


# describe

def test_describe_on_a_terminal_has_a_header_a_time_panel_and_the_failure(make_env, local_zone):
    env = make_env(DEFINITIONS)
    doc = timed_out_on_heartbeat(env)
    out = terminal()

    render.describe(out, doc, at(60))

    raw = out.file.getvalue()
    assert "\x1b[" in raw and "╭─" in raw
    text = shown(out)
    assert "data_import order-1  failed  run 1 of 1" in text
    assert "Time (now 2026-04-12T12:01:00.000+00:00, local zone XYZ)" in text
    # On a terminal: the instant in UTC to the second, the local time under it, the countdown.
    assert re.search(r"execution timeout\s+2h\s+2026-04-12 14:00:00 UTC\s+"
                     r"not reached: closed 1h 59m before\s+│\n│\s+2026-04-12 16:00:00 XYZ", text)
    assert re.search(r"run timeout\s+1h\s+2026-04-12 13:00:00 UTC", text)
    assert re.search(r"deadline\s+1d\s+2026-04-13 12:00:00 UTC\s+.*\n│\s+2026-04-13 14:00:00 XYZ",
                     text)
    assert re.search(r"on deadline\s+wfh:on_deadline_record", text)
    assert re.search(r"fetch\s+timed_out\s+1/1", text)
    assert " 1 attempt " in text and " start-to-close 5m " in text and " heartbeat 15s " in text
    assert re.search(r"category\s+timeout", text)
    assert re.search(r"timeout kind\s+heartbeat", text)
    assert re.search(r"message\s+Activity fetch timed out: heartbeat\s+│", text)
    assert re.search(r"deadline at\s+2026-04-12T12:00:16.000\+00:00", text)


def test_describe_highlights_the_failure_category_and_timeout_kind(make_env):
    env = make_env(DEFINITIONS)
    doc = timed_out_on_heartbeat(env)
    out = terminal()

    render.describe(out, doc, at(60))

    raw = out.file.getvalue()
    assert "\x1b[1;31mtimeout" in raw        # category: bold red
    assert "\x1b[1;33mheartbeat" in raw      # timeout kind: bold yellow


def test_describe_counts_down_to_every_deadline_while_running(make_env, local_zone):
    env = make_env(DEFINITIONS)
    doc = running_with_a_heartbeat(env)
    out = terminal()

    render.describe(out, doc, at(10))

    text = shown(out)
    assert "data_import order-1  running  run 1 of 1" in text
    assert re.search(r"execution timeout\s+2h\s+2026-04-12 14:00:00 UTC\s+in 1h 59m", text)
    assert re.search(r"run timeout\s+1h\s+.*in 59m 50s", text)
    assert re.search(r"deadline\s+1d\s+.*in 23h 59m", text)
    assert "start-to-close in 4m 50s" in text
    assert "heartbeat in 6s" in text
    assert '9s ago {"processed": 10}' in text


@pytest.mark.parametrize(("offset", "words", "style"), [
    (5, "in 5s", "red"),
    (300, "in 5m", "yellow"),
    (23 * 60 + 10, "in 23m 10s", "green"),
    (-5, "expired 5s ago", "bold red"),
])
def test_a_relative_time_is_coloured_by_how_close_it_is(offset, words, style):
    text = render.relative(T0, at(-offset))
    assert (text.plain, str(text.style)) == (words, style)


def test_describe_piped_is_plain_text_with_everything_json_has(make_env):
    env = make_env(DEFINITIONS)
    doc = timed_out_on_heartbeat(env)
    out = piped()

    render.describe(out, doc, at(60))

    text = out.file.getvalue()
    assert "\x1b[" not in text and "╭" not in text
    assert all(line == line.rstrip() for line in text.splitlines())
    doc = printed(doc)
    activity = doc["activities"][0]
    for value in (doc["run"]["workflow_run_id"], activity["activity_id"], activity["handler"],
                  activity["queue"], activity["scheduled_at"], activity["close_deadline_at"],
                  activity["heartbeat_deadline_at"], doc["failure"]["propagation_kind"],
                  doc["failure"]["exception_class"], doc["created_at"]):
        assert value in text, value
    assert re.search(r"closed reason\s+timeout", text)
    assert re.search(r"run closed\s+2026-04-12T12:00:17.000\+00:00  \(after 17s, 43s ago\)", text)
    assert "1 attempt · start-to-close 5m · heartbeat 15s" in text
    assert '"processed": 10' in text


def test_describe_shortens_a_large_state_and_full_state_shows_it_all(make_env):
    env = make_env(DEFINITIONS)
    env.start("flaky", "f1", input={f"key{n:02d}": n for n in range(40)} | {"long": "x" * 5000})
    doc = env.describe("f1")

    short, whole = piped(), piped()
    render.describe(short, doc, at(0))
    render.describe(whole, doc, at(0), full_state=True)

    text = short.file.getvalue()
    assert '"key00": 0,' in text and '"key18": 18,' in text
    assert '"key19"' not in text and "x" * 300 not in text
    assert text.rstrip().endswith("… 22 more keys, --full-state")
    full = whole.file.getvalue()
    assert '"key39": 39,' in full and full.count("x") >= 5000 and "--full-state" not in full


@pytest.mark.parametrize(("state", "last"), [
    ({"rows": list(range(30))}, "… 13 more lines, --full-state"),
    ({f"k{n}": n for n in range(19)}, '  "k18": 18\n}'),
    ({}, "{}"),
])
def test_a_state_is_cut_only_past_its_first_lines(state, last):
    assert render.state_text(state).plain.endswith(last)


def test_describe_shows_the_last_error_and_backoff_of_a_retrying_activity(make_env):
    env = make_env(DEFINITIONS)
    env.start("flaky", "f1")
    env.run(0)
    out = piped()

    render.describe(out, env.describe("f1"), at(0.5))

    text = out.file.getvalue()
    assert re.search(r"load\s+retry_scheduled\s+2/3\s+3 attempts · backoff 1s→2s · "
                     r"start-to-close 5m · non-retryable ValueError\s+next attempt in 500ms", text)
    assert "ConnectionError: attempt 1 failed" in text
    assert "available 2026-04-12T12:00:01.000+00:00" in text


def test_a_heartbeat_without_details_shows_when_it_came_and_nothing_else(make_env):
    env = make_env(DEFINITIONS)
    env.start("data_import", "order-1")
    env.decide(0)
    env.engine.record_heartbeat(env.claim(0), None, at(1))
    out = piped()

    render.describe(out, env.describe("order-1"), at(2))

    row = next(line for line in out.file.getvalue().splitlines() if line.startswith("fetch "))
    assert re.search(r"heartbeat in 14s  1s ago +-$", row.rstrip())
    assert "null" not in row


def test_describe_lists_timers_and_children(make_env):
    env = make_env(DEFINITIONS)
    env.start("parent", "p1")
    env.run(0)
    out = piped()

    render.describe(out, env.describe("p1"), at(60))
    child_id = env.describe("p1")["children"][0]["workflow_instance_id"]
    render.describe(out, env.describe(child_id), at(60))

    text = out.file.getvalue()
    assert "Children" in text
    assert re.search(rf"{re.escape(child_id)}\s+child\s+nightly\s+running", text)
    assert re.search(r"waiting on\s+child", text)
    assert "Timers" in text
    assert re.search(r"delay 30m\s+delay\s+2026-04-12T12:30:00.000\+00:00\s+in 29m\s+scheduled",
                     text)
    assert re.search(r"parent\s+p1", text)


def test_no_color_keeps_a_terminal_plain(monkeypatch, make_env):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("FORCE_COLOR", "1")
    env = make_env(DEFINITIONS)
    out = render.console()
    assert out.is_terminal and render.plain(out)
    with out.capture() as captured:
        render.describe(out, timed_out_on_heartbeat(env), at(60))
    text = captured.get()
    assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", text)   # no colour
    assert "╭" not in text
    assert re.search(r"timeout kind\s+heartbeat", ANSI.sub("", text))


# history

def test_a_heartbeat_timeout_reads_as_one_line_with_the_gap(make_env):
    env = make_env(DEFINITIONS)
    timed_out_on_heartbeat(env)
    event = env.events("order-1", "ActivityTimedOut")[0]

    line = render.event_line(event)

    assert line.startswith("Activity fetch timed out: heartbeat (last heartbeat 16s ago); "
                           "attempt 1, deadline 2026-04-12T12:00:16.000+00:00")
    assert 'last details {"processed": 10}' in line


def test_history_on_a_terminal_makes_timeouts_stand_out(make_env):
    env = make_env(DEFINITIONS)
    timed_out_on_heartbeat(env)
    out = terminal()

    render.history(out, env.history("order-1"), start_at=env.describe("order-1")["created_at"])

    raw = out.file.getvalue()
    assert "\x1b[1;31mActivityTimedOut" in raw                  # the event in bold red
    assert "\x1b[1;7;33mheartbeat" in raw                        # its kind highlighted
    text = shown(out)
    assert re.search(r"8\s+\+17s\s+2026-04-12T12:00:17.000\+00:00\s+ActivityTimedOut\s+"
                     r"Activity fetch timed out: heartbeat \(last heartbeat 16s ago\)", text)
    assert re.search(r"WorkflowFailed\s+Workflow failed \(timeout \[heartbeat\]\): "
                     r"Activity fetch timed out: heartbeat", text)


def test_history_piped_has_seq_relative_and_absolute_time_and_details(make_env):
    env = make_env(DEFINITIONS)
    timed_out_on_heartbeat(env)
    out = piped()

    render.history(out, env.history("order-1"), start_at=env.describe("order-1")["created_at"])

    lines = out.file.getvalue().splitlines()
    assert re.match(r"seq\s+\+time\s+at \(UTC\)\s+event\s+details$", lines[0])
    assert re.match(r"1\s+\+0ms\s+2026-04-12T12:00:00.000\+00:00\s+WorkflowStarted\s+"
                    r"data_import run 1 started; execution timeout 2h "
                    r"\(until 2026-04-12T14:00:00.000\+00:00\)", lines[1])
    assert len(lines) == len(env.history("order-1")) + 1
    assert "\x1b[" not in "".join(lines)


def test_history_from_the_cli_on_a_terminal_and_piped(make_env):
    env = make_env(DEFINITIONS)
    timed_out_on_heartbeat(env)
    args = ["--db", env.db, "-w", str(env.folder / "workflows.yaml"),
            "history", "order-1"]

    on_terminal = CliRunner().invoke(app, args, env={"FORCE_COLOR": "1", "COLUMNS": "200"})
    in_pipe = CliRunner().invoke(app, args)

    assert on_terminal.exit_code == in_pipe.exit_code == 0
    assert "\x1b[" in on_terminal.stdout and "\x1b[" not in in_pipe.stdout
    for text in (ANSI.sub("", on_terminal.stdout), in_pipe.stdout):
        assert "Activity fetch timed out: heartbeat (last heartbeat 16s ago)" in text


def test_history_event_type_filters_and_rejects_unknown_names(make_env):
    env = make_env(DEFINITIONS)
    timed_out_on_heartbeat(env)
    args = ["--db", env.db, "-w", str(env.folder / "workflows.yaml"),
            "history", "order-1"]

    result = CliRunner().invoke(app, [*args, "--event-type", "ActivityTimedOut",
                                      "--event-type", "WorkflowFailed"])
    wrong = CliRunner().invoke(app, [*args, "--event-type", "ActivityTimeout"])

    rows = result.stdout.splitlines()[1:]
    assert [row.split()[3] for row in rows] == ["ActivityTimedOut", "WorkflowFailed"]
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("Error: --event-type: 'ActivityTimeout' is not one of "
                                   "WorkflowStarted, ")


# --follow

FOLLOWED = """
version: 1
workflows:
  gated:
    steps:
      - activity: wfh:mark
        name: first
      - activity: wfh:wait_for_release
        name: gate
"""


@pytest.fixture
def worker_thread(tmp_path: Path, db: str):
    """A real worker in a thread on the test's database, stopped at the end of the test."""
    workflows = tmp_path / "workflows.yaml"
    workflows.write_text(textwrap.dedent(FOLLOWED))
    client = Client(db, workflows)
    worker = Worker(client.engine, WorkerOptions(poll_interval=0.01))
    thread = threading.Thread(target=worker.run, daemon=True)
    wfh.release.clear()
    thread.start()
    yield client
    wfh.release.set()
    worker.request_stop()
    thread.join(10)
    client.close()


def wait_until(condition, timeout: float = 10.0) -> None:
    """Waits for another thread to get somewhere (never used to let a timeout expire)."""
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "gave up waiting"
        time.sleep(0.01)


def test_follow_keeps_printing_new_events_until_the_workflow_closes(worker_thread):
    client = worker_thread
    client.start("gated", "g1")
    out = piped()
    follower = threading.Thread(target=follow_history, kwargs={
        "client": client, "instance_id": "g1", "out": out, "after_seq": 0,
        "start_at": client.describe("g1")["created_at"], "all_runs": True, "show_run": False})
    follower.start()

    wait_until(lambda: "Activity gate attempt 1 started" in out.file.getvalue())
    assert "WorkflowCompleted" not in out.file.getvalue()
    assert follower.is_alive()
    wfh.release.set()
    follower.join(10)

    assert not follower.is_alive()
    text = out.file.getvalue()
    assert "Activity gate completed (attempt 1)" in text
    assert text.rstrip().splitlines()[-1].split()[3] == "WorkflowCompleted"
    seqs = [int(line.split()[0]) for line in text.splitlines()]
    assert seqs == list(range(1, len(seqs) + 1))


def test_history_follow_from_the_cli_returns_when_the_workflow_completes(worker_thread):
    client = worker_thread
    client.start("gated", "g2")
    wfh.release.set()

    result = CliRunner().invoke(app, ["--db", client.db_path, "-w", client.workflows_path,
                                      "history", "g2", "--follow"])

    assert result.exit_code == 0, result.stderr
    assert result.stdout.rstrip().splitlines()[-1].split()[3] == "WorkflowCompleted"


@pytest.mark.process
def test_history_follow_json_streams_one_event_per_line_and_ends_with_the_closing_one(
        worker_thread):
    client = worker_thread
    client.start("gated", "g3")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH")]))}
    follower = subprocess.Popen(
        [sys.executable, "-m", "wfctl", "--db", client.db_path, "-w", client.workflows_path,
         "history", "g3", "--follow", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = []
        # Events come while the workflow runs: the gate's start is read before it is released.
        while not lines or json.loads(lines[-1])["event_type"] != "ActivityStarted" \
                or json.loads(lines[-1])["attributes"].get("step") != "gate":
            lines.append(follower.stdout.readline())
            assert lines[-1], "the stream ended before the gate started"
        assert follower.poll() is None
        wfh.release.set()
        out, err = follower.communicate(timeout=10)
    finally:
        follower.kill()
        follower.wait()

    lines += out.splitlines()
    events = [json.loads(line) for line in lines]
    assert follower.returncode == 0, err
    assert events == printed(client.history("g3"))
    assert events[-1]["event_type"] == "WorkflowCompleted"
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))


def test_history_json_without_follow_stays_one_document(worker_thread):
    client = worker_thread
    client.start("gated", "g4")
    wfh.release.set()
    wait_until(lambda: client.describe("g4")["closed_at"] is not None)

    result = CliRunner().invoke(app, ["--db", client.db_path, "-w", client.workflows_path,
                                      "history", "g4", "--json"])

    assert result.exit_code == 0
    assert json.loads(result.stdout) == printed(client.history("g4"))
    assert len(result.stdout.splitlines()) > len(client.history("g4"))


def test_describe_of_a_timed_out_workflow_marks_the_timeout_that_passed(make_env):
    env = make_env(DEFINITIONS.replace("execution_timeout: 2h", "execution_timeout: 1m"))
    env.start("data_import", "order-1")
    env.decide(0)
    env.claim(0)
    env.sweep(61)
    env.decide(61)
    out = piped()

    render.describe(out, env.describe("order-1"), at(90))
    render.history(out, env.history("order-1"), start_at=env.describe("order-1")["created_at"])

    text = out.file.getvalue()
    assert "data_import order-1  timed_out  run 1 of 1" in text
    assert re.search(r"execution timeout\s+1m\s+2026-04-12T12:01:00.000\+00:00\s+.*"
                     r"passed 1s before the run closed", text)
    assert re.search(r"category\s+timeout\ntimeout kind\s+execution_timeout\n", text)
    assert "Workflow timed out: execution_timeout (deadline 2026-04-12T12:01:00.000+00:00)" in text
    assert "Activity fetch timed out: heartbeat (no heartbeat recorded); attempt 1" in text


def test_describe_piped_gives_exact_instants_in_utc_and_local_time(make_env, local_zone):
    env = make_env(DEFINITIONS)
    out = piped()

    render.describe(out, running_with_a_heartbeat(env), at(10))

    text = out.file.getvalue()
    assert re.search(r"^timeout\s+configured\s+at \(UTC\)\s+local\s+when$", text, re.MULTILINE)
    assert re.search(r"^execution timeout\s+2h\s+2026-04-12T14:00:00.000\+00:00\s+"
                     r"2026-04-12 16:00:00 XYZ\s+in 1h 59m$", text, re.MULTILINE)
    assert re.search(r"^workflow task timeout\s+10s\s+-\s+-\s+each workflow task$", text,
                     re.MULTILINE)
