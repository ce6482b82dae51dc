"""A handler's traceback: recorded with its failure, shown short by history, in full by --json."""

from __future__ import annotations

import io
import json
import re

import pytest
from conftest import at
from rich.console import Console
from typer.testing import CliRunner

from wfctl.cli import app
from wfctl.lang import handlers
from wfctl.show import render

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  broken:
    steps:
      - activity: wfh:deep_error
        name: lookup
        max_attempts: 2
        backoff: [1s]
  parent:
    steps:
      - workflow: broken
        name: sub
"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_attempt(env, seconds: float) -> str:
    """Claim the next attempt at T0 + seconds, run its handler for real, report its failure."""
    task = env.claim(seconds)
    assert task is not None
    outcome = handlers.run(task.handler, task.step, task.state)
    error = outcome.error
    assert error is not None and error.traceback is not None
    assert env.engine.fail_activity(task, error.exception_class, error.message, at(seconds),
                                    exception_classes=error.classes,
                                    traceback=error.traceback, decide=True) is None
    return error.traceback


@pytest.fixture
def failed(make_env):
    """`broken` b1 failed after two attempts; returns (env, the last attempt's traceback)."""
    env = make_env(DEFINITIONS)
    env.start("broken", "b1")
    env.decide(0)
    run_attempt(env, 0)
    traceback = run_attempt(env, 1)
    assert env.describe("b1")["status"] == "failed"
    return env, traceback


def terminal(width: int = 120) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=width,
                   color_system="standard", highlight=False)


def piped() -> Console:
    return Console(file=io.StringIO(), width=500)


def shown(out: Console) -> str:
    return ANSI.sub("", out.file.getvalue())


def test_the_workflow_failure_and_both_attempts_carry_the_traceback(failed):
    env, traceback = failed

    doc = env.describe("b1")

    assert traceback.startswith("Traceback (most recent call last):")
    assert traceback.rstrip().endswith("LookupError: no such order")
    assert doc["failure"]["failure_category"] == "activity"
    assert doc["failure"]["traceback"] == traceback
    assert doc["activities"][0]["last_error"]["traceback"] == traceback
    [retry] = env.events("b1", "ActivityRetryScheduled")
    assert retry["attributes"]["failure"]["traceback"].endswith("LookupError: no such order\n")
    [failure] = env.events("b1", "ActivityFailed")
    assert failure["attributes"]["traceback"] == traceback


def test_a_parent_failed_by_its_child_carries_the_childs_traceback(make_env):
    env = make_env(DEFINITIONS)
    env.start("parent", "p1")
    env.decide(0)
    run_attempt(env, 0)
    traceback = run_attempt(env, 1)
    env.decide(1)

    failure = env.describe("p1")["failure"]

    assert failure["failure_category"] == "child_workflow"
    assert failure["traceback"] == traceback


def test_describe_shows_the_innermost_frames_in_the_failure_panel(failed):
    env, _ = failed
    out = terminal()

    render.describe(out, env.describe("b1"), at(2))

    text = shown(out)
    panel = text[text.index("Failure"):text.index("State")]
    assert re.search(r"traceback\s+… 1 earlier frame \(--json has all\)", panel)
    assert panel.count('wfh.py", line') == 3
    assert re.search(r"in _open_order.*in _read_fields.*in _field", panel, re.DOTALL)
    assert "in deep_error" not in panel
    assert 'raise LookupError("no such order")' in panel
    assert re.search(r"│\s+LookupError: no such order\s+│", panel)
    assert re.search(r"lookup\s+failed\s+2/2", text)


def test_describe_piped_shows_the_same_frames_as_plain_lines(failed):
    env, traceback = failed
    out = piped()

    render.describe(out, env.describe("b1"), at(2))

    lines = out.file.getvalue().splitlines()
    [activity] = [line for line in lines if re.match(r"lookup\s+failed", line)]
    assert re.search(r"LookupError: no such order \(at wfh\.py:\d+ in _field\)$", activity)
    start = next(n for n, line in enumerate(lines) if line.startswith("traceback"))
    assert lines[start].split(None, 1)[1] == "… 1 earlier frame (--json has all)"
    # The last 3 frames and the error, as Python printed them (from 3.13 a frame may have a
    # line of markers under its source line).
    printed = traceback.rstrip("\n").splitlines()
    files = [n for n, line in enumerate(printed) if line.startswith('  File "')]
    frame_lines = printed[files[-3]:]
    indent = len(lines[start]) - len(lines[start].split(None, 1)[1])
    assert [line[indent:] for line in lines[start + 1:start + 1 + len(frame_lines)]] \
        == frame_lines


def test_history_shows_where_each_attempt_failed_on_one_line(failed):
    env, _ = failed
    out = piped()

    render.history(out, env.history("b1"), start_at=env.history("b1")[0]["at"])

    lines = out.file.getvalue().splitlines()
    [retry] = [line for line in lines if "ActivityRetryScheduled" in line]
    [failure] = [line for line in lines if "ActivityFailed" in line]
    assert re.search(r"Activity lookup attempt 1 error: LookupError at wfh\.py:\d+ in "
                     r"_field; attempt 2 of 2 at ", retry)
    assert re.search(r"Activity lookup failed: LookupError: no such order at wfh\.py:\d+ in "
                     r"_field$", failure)
    assert not any("Traceback" in line for line in lines)


def test_json_has_the_whole_traceback(failed):
    env, traceback = failed
    base = ["--db", env.db, "-w", str(env.folder / "workflows.yaml")]

    described = json.loads(CliRunner().invoke(app, [*base, "describe", "b1", "--json"]).stdout)
    history = json.loads(CliRunner().invoke(app, [*base, "history", "b1", "--json"]).stdout)

    assert described["failure"]["traceback"] == traceback
    assert described["activities"][0]["last_error"]["traceback"] == traceback
    [failure] = [e for e in history if e["event_type"] == "ActivityFailed"]
    assert failure["attributes"]["traceback"] == traceback


def test_a_traceback_cut_to_its_tail_still_shows_its_last_frames():
    text = ('…ne 3, in outer\n    inner()\n  File "/srv/app/jobs.py", line 9, in inner\n'
            '    raise RuntimeError("boom")\nRuntimeError: boom\n')

    assert render.traceback_where(text) == "jobs.py:9 in inner"
    assert render.traceback_tail(text) == ('  File "/srv/app/jobs.py", line 9, in inner\n'
                                           '    raise RuntimeError("boom")\nRuntimeError: boom')


def test_a_chained_exception_is_shown_from_its_last_traceback():
    try:
        try:
            {}["key"]
        except KeyError as exc:
            raise ValueError("bad input") from exc
    except ValueError as exc:
        text = handlers.format_traceback(exc)

    assert "KeyError" in text
    tail = render.traceback_tail(text)
    assert tail.startswith('  File "')
    assert "KeyError" not in tail
    assert tail.endswith("ValueError: bad input")
    assert re.fullmatch(r"test_tracebacks\.py:\d+ in test_a_chained_exception_is_shown_from_"
                        r"its_last_traceback", render.traceback_where(text))
