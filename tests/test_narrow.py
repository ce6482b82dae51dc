"""describe, history, list and validate on terminals 60, 80 and 120 columns wide: no status, event
name or instant is broken over two lines, nothing is cut off, with colour or with NO_COLOR; and
once in a real terminal (a tmux pane) 60 columns wide."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import at
from rich.console import Console

from wfctl import clock
from wfctl.show import render
from wfctl.vocabulary import EVENT_TYPES

pytestmark = pytest.mark.both_backends

REPO = Path(__file__).parent.parent
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
        schedule_to_close: 10m
        max_attempts: 1
      - delay: 1h
  hurried:
    execution_timeout: 1m
    steps:
      - activity: wfh:mark
        name: fetch
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
WIDTHS = (60, 80, 120)
NOW = at(3600)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


@pytest.fixture
def local_zone(monkeypatch: pytest.MonkeyPatch):
    """Local time two hours ahead of UTC, named XYZ, whatever the machine's zone is."""
    monkeypatch.setenv("TZ", "XYZ-2")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def world(make_env, local_zone):
    """An instance in each shape a person reads: timed out on a heartbeat, past its execution
    timeout, retrying, waiting on a child and a timer, and stopped with a reason."""
    env = make_env(DEFINITIONS)
    env.start("data_import", "order-2026-000123")
    env.decide(0)
    task = env.claim(0)
    env.engine.record_heartbeat(task, {"processed": 10}, at(1))
    env.sweep(17)
    env.decide(17)
    env.start("hurried", "late-import")
    env.decide(0)
    env.claim(0)
    env.sweep(61)
    env.decide(61)
    env.start("flaky", "flaky-load", now=100)
    env.run(100)
    env.start("parent", "nightly-parent", now=200)
    env.run(200)
    env.start("data_import", "stuck-one", now=300)
    env.clock.set(400)
    env.client.terminate("stuck-one", "stuck on the warehouse")
    return env


def terminal(width: int, *, no_color: bool = False) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width, no_color=no_color,
                   color_system="standard", highlight=False)


def shown(out: Console) -> str:
    return ANSI.sub("", out.file.getvalue())


def views(env) -> dict[str, Callable[[Console], None]]:
    """Each view of the world, drawn on a console."""
    ids = [row["workflow_instance_id"] for row in env.client.list()]
    drawn = {f"describe {instance_id}": (lambda out, i=instance_id:
                                         render.describe(out, env.describe(i), NOW))
             for instance_id in ids}
    drawn |= {f"history {instance_id}": (lambda out, i=instance_id: render.history(
        out, env.history(i), start_at=env.describe(i)["created_at"])) for instance_id in ids}
    drawn["list"] = lambda out: render.instances(out, env.client.list(), NOW)
    drawn["validate"] = lambda out: render.definitions(out, env.client.definitions())
    return drawn


def words_to_keep_whole(env, text: str) -> set[str]:
    """Every status, event name, timeout kind and instant the documents hold, and each instant
    as the Time panel shortens it."""
    documents = [env.describe(row["workflow_instance_id"]) for row in env.client.list()]
    # ("heartbeat" is a timeout kind too, but also a column's name, which cards leave out when
    # no row has a value for it.)
    words = set(EVENT_TYPES) | {"retry_scheduled", "terminated", "timed_out", "start_to_close",
                                "execution_timeout", "run_timeout", "schedule_to_close"}

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for name, item in value.items():
                walk(item, name)
        elif isinstance(value, list):
            for item in value:
                walk(item, key)
        elif isinstance(value, datetime):
            words.add(clock.iso(value))
            words.add(value.strftime("%Y-%m-%d %H:%M:%S UTC"))
            words.add(value.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z"))
        elif isinstance(value, str) and key == "status":
            words.add(value)

    for document in documents:
        walk(document)
        for event in env.history(document["workflow_instance_id"]):
            walk(event)
    words |= set(ISO.findall(text))
    return words


def whole(word: str, text: str) -> int:
    """How often `word` stands whole in `text` (not as a part of a longer word)."""
    return len(re.findall(rf"(?<![\w:.+-]){re.escape(word)}(?![\w:.+-])", text))


def split_or_dropped(env, name: str, draw: Callable[[Console], None], width: int,
                     no_color: bool) -> list[str]:
    """The words that `draw` shows whole fewer times at `width` than with room to spare."""
    narrow, roomy = terminal(width, no_color=no_color), terminal(400, no_color=no_color)
    draw(narrow)
    draw(roomy)
    narrow_text, roomy_text = shown(narrow), shown(roomy)
    assert all(len(line) <= width for line in narrow_text.splitlines()), name
    return sorted(word for word in words_to_keep_whole(env, roomy_text)
                  if whole(word, narrow_text) < whole(word, roomy_text))


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
@pytest.mark.parametrize("width", WIDTHS)
def test_no_status_event_or_instant_is_split_or_cut(world, width, no_color):
    for name, draw in views(world).items():
        if name == "list" and width < 80:
            continue  # a list gives whole columns way; what it keeps is checked below
        assert split_or_dropped(world, name, draw, width, no_color) == [], name


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_a_narrow_list_keeps_ids_and_statuses_and_names_what_it_leaves_out(world, no_color):
    out = terminal(60, no_color=no_color)
    render.instances(out, world.client.list(), NOW)

    text = shown(out)
    for row in world.client.list():
        assert re.search(rf"{re.escape(row['workflow_instance_id'])}\s+{row['workflow_type']}\s+"
                         rf"{row['status']}(\s|$)", text, re.MULTILINE), row
    assert "not shown at this width: run, created" in text


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_at_60_columns_nothing_of_the_time_panel_is_dropped(world, no_color):
    doc = world.describe("late-import")
    out = terminal(60, no_color=no_color)

    render.describe(out, doc, NOW)

    text = shown(out)
    run = doc["run"]
    for at_ in (run["execution_deadline_at"],):
        phrase = render.at_close(at_, run["closed_at"]).plain
        assert phrase == "passed 1s before the run closed"
        assert re.search(r"\s+(│\s+)?".join(map(re.escape, phrase.split())), text), phrase
    # The Time panel's title is never cut: what does not fit beside it comes under it.
    assert "…" not in text
    assert re.search(rf"now {re.escape(clock.iso(NOW))}, local zone XYZ", text)


def test_at_120_columns_each_iso_instant_stays_on_one_line(world):
    for name, draw in views(world).items():
        out = terminal(120)
        draw(out)
        text = shown(out)
        fragments = re.findall(r"\d{4}-\d\d-\d\dT[\d:.+]*$", text, re.MULTILINE)
        assert [fragment for fragment in fragments if not ISO.fullmatch(fragment)] == [], name


@pytest.mark.parametrize("width", WIDTHS)
def test_describe_keeps_every_section_at_every_width(world, width):
    out = terminal(width)
    render.describe(out, world.describe("order-2026-000123"), NOW)
    text = shown(out)
    for section in ("Time", "Activities", "Activity times", "Failure", "State"):
        assert re.search(rf"^[│ ]*{section}\b", text, re.MULTILINE), section
    assert "heartbeat 15s" in text and "schedule-to-close 10m" in text


# A real terminal

def tmux_capture(command: list[str], env: dict[str, str], width: int = 60) -> str:
    """What `command` shows in a tmux pane `width` columns wide (its own tmux server)."""
    assert shutil.which("tmux"), "this test needs tmux (apt-get install tmux)"
    socket = f"wfctl-test-{uuid.uuid4().hex[:8]}"
    done = "__wfctl_done__"
    shell = " ".join(["env", "-u", "COLUMNS", "-u", "LINES",
                      *(f"{name}={value}" for name, value in env.items()),
                      *(subprocess.list2cmdline([word]) for word in command),
                      ";", "echo", done, ";", "sleep", "30"])
    tmux = ["tmux", "-L", socket, "-f", os.devnull]
    subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", "300", shell],
                   check=True, timeout=10)
    try:
        deadline = time.monotonic() + 20
        while True:
            captured = subprocess.run([*tmux, "capture-pane", "-p", "-S", "-300"],
                                      capture_output=True, text=True, check=True,
                                      timeout=10).stdout
            if done in captured:
                return captured[:captured.index(done)]
            assert time.monotonic() < deadline, captured
            time.sleep(0.1)
    finally:
        subprocess.run([*tmux, "kill-server"], timeout=10)


@pytest.mark.process
@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_in_a_tmux_pane_60_columns_wide_describe_and_history_split_nothing(world, no_color):
    world.client.close()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "tests")]), "TZ": "XYZ-2",
           "TERM": "xterm-256color"}
    if no_color:
        env["NO_COLOR"] = "1"
    base = [sys.executable, "-m", "wfctl", "--db", world.db,
            "-w", str(world.folder / "workflows.yaml")]

    for command in (["describe", "late-import"], ["history", "order-2026-000123"]):
        text = tmux_capture([*base, *command], env)
        # The pane shows the command's own output only: no shell, nothing else.
        assert max(len(line) for line in text.splitlines()) <= 60
        instance = command[1]
        expected = {clock.iso(event["at"]) for event in world.history(instance)} | \
            {event["event_type"] for event in world.history(instance)}
        if command[0] == "describe":
            doc = world.describe(instance)
            expected = {doc["status"], doc["run"]["status"], clock.iso(doc["created_at"]),
                        *(activity["status"] for activity in doc["activities"])}
        missing = sorted(word for word in expected if whole(word, text) == 0)
        assert missing == [], text
