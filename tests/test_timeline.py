"""`wfctl timeline`: a run drawn from describe and history, checked cell by cell at known instants."""

from __future__ import annotations

import io
import math
import re
from typing import Any

import pytest
from conftest import T0, at, printed
from rich.console import Console
from typer.testing import CliRunner

from wfctl.cli import app
from wfctl.engine.time.deadlines import sweep_deadlines
from wfctl.lang import handlers
from wfctl.show import timeline

pytestmark = pytest.mark.both_backends

DEFINITIONS = """
version: 1
workflows:
  nightly_import:
    execution_timeout: 1h
    run_timeout: 3m
    deadline: 2h
    steps:
      - activity: wfh:noop
        name: extract
      - activity: wfh:noop
        name: transform
        start_to_close: 2m
        heartbeat: 20s
        max_attempts: 3
        backoff: {initial: 10s, coefficient: 2.0, max: 1m}
  guarded:
    deadline: 90s
    on_deadline: wfh:on_deadline_record
    steps:
      - activity: wfh:noop
        name: unserved
        queue: nobody
  approval:
    run_timeout: 1h
    steps:
      - delay: 1m
      - wait_for_signal: approved
        timeout: 2m
      - workflow: audit
        name: audit_child
  audit:
    steps:
      - delay: 30m
  beating:
    steps:
      - activity: wfh:noop
        name: copy_customer_records_to_the_warehouse
        heartbeat: 10s
        max_attempts: 2
        backoff: [5s]
  loop:
    run_timeout: 10m
    steps:
      - activity: wfh:loop_counter
        name: count
      - continue_as_new: {while: more}
"""
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")
STATUS_WORDS = ("running", "waiting", "paused", "completed", "failed", "timed_out", "cancelled",
                "terminated", "continued_as_new")


def draw(env: Any, instance_id: str, now: float, width: int = 100, **history: Any) -> list[str]:
    doc = env.describe(instance_id, history.get("run"))
    picture = timeline.draw(doc, env.history(instance_id, **history), now=at(now), width=width)
    lines = [line.plain for line in picture.lines]
    assert all(len(line) <= width for line in lines), "a line is wider than the chart"
    return lines


class Axis:
    """The chart's time axis: the column where its rule starts, and the instants it spans."""

    def __init__(self, lines: list[str], start: float, end: float, width: int) -> None:
        self.rule = next(n for n, line in enumerate(lines) if line.lstrip().startswith("┬"))
        self.offset = lines[self.rule].index("┬")
        self.cells = width - self.offset
        self.start, self.end = start, end
        self.lines = lines

    def column(self, seconds: float) -> int:
        """Cell i shows the i-th of the equal slices of [start, end]; the end is in the last."""
        share = (seconds - self.start) / (self.end - self.start)
        return self.offset + min(self.cells - 1, math.floor(share * self.cells))

    def cells_of(self, line: str, start: float, end: float) -> str:
        """The cells a bar from `start` to `end` covers: its first instant's cell up to the last
        cell it enters (a cell whose slice it only touches at its end is not covered)."""
        share = (end - self.start) / (self.end - self.start)
        last = self.offset + min(self.cells - 1, math.ceil(share * self.cells) - 1)
        return line[self.column(start):max(last, self.column(start)) + 1]

    def lane(self, name: str) -> str:
        return next(line for line in self.lines[self.rule:] if line.startswith(name + " "))

    @property
    def letters(self) -> str:
        return self.lines[self.rule + 1]


def entries(lines: list[str]) -> list[str]:
    """The legend's entries, each one line again: a wrapped entry goes on indented by two."""
    joined: list[str] = []
    for line in lines[lines.index(""):]:
        if line.startswith("  ") and joined:
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def at_column(line: str, column: int) -> str:
    return line[column] if column < len(line) else " "


def retried_then_ran_into_its_run_deadline(env: Any) -> None:
    """transform attempt 1 times out on start_to_close at +2m8s; attempt 2 runs into +3m."""
    env.start("nightly_import", "n1")
    env.decide(0)
    env.engine.complete_activity(env.claim(1), {}, at(6))
    env.decide(6)
    task = env.claim(8)
    for second in range(18, 128, 15):
        env.engine.record_heartbeat(task, {"rows": second}, at(second))
    env.sweep(128)
    task = env.claim(140)
    for second in range(150, 180, 10):
        env.engine.record_heartbeat(task, {"rows": second}, at(second))
    env.run(180)


@pytest.fixture
def env(make_env):
    return make_env(DEFINITIONS)


# markers and bars at their instants


def test_the_run_deadline_it_ran_into_is_marked_at_its_instant(env):
    retried_then_ran_into_its_run_deadline(env)

    lines = draw(env, "n1", now=400)

    axis = Axis(lines, 0, 180, 100)
    assert at_column(axis.letters, axis.column(180)) == "R"
    assert at_column(axis.lane("extract"), axis.column(180)) == "│"
    assert lines[0].split() == ["nightly_import", "n1", "run", "1", "of", "1", "timed_out"]
    assert "+0s = 2026-04-12T12:00:00.000+00:00" in lines[1]
    assert "R run deadline 2026-04-12T12:03:00.000+00:00 hit: the run timed out (run_timeout)" \
        in lines


def test_each_attempt_is_a_bar_from_claim_to_close_with_its_backoff_between(env):
    retried_then_ran_into_its_run_deadline(env)

    lines = draw(env, "n1", now=400)

    axis = Axis(lines, 0, 180, 100)
    for name in ("run 1", "extract", "transform"):
        assert axis.lane(name)
    extract = axis.lane("extract")
    assert set(axis.cells_of(extract, 1, 6)) == {"█"}
    assert extract[axis.offset:].count("█") == len(axis.cells_of(extract, 1, 6))
    transform = axis.lane("transform")
    assert transform[axis.column(6)] == "·", "scheduled at +6s, claimed at +8s"
    assert set(transform[axis.column(8) + 1:axis.column(128)]) == {"▒"}, "attempt 1"
    assert transform[axis.column(128)] == "s", "attempt 1 ran into its start-to-close here"
    assert set(transform[axis.column(128) + 1:axis.column(138)]) == {"░"}, "the 10s backoff"
    assert set(transform[axis.column(140) + 1:axis.column(180) + 1]) == {"▒"}, \
        "attempt 2, cancelled by the run timeout"
    assert "s transform attempt 1 start-to-close 2026-04-12T12:02:08.000+00:00 " \
           "hit: the attempt timed out" in lines
    assert set(axis.lane("run 1")[axis.offset:]) == {"━"}


def test_deadlines_beyond_the_chart_are_noted_at_its_edge(env):
    retried_then_ran_into_its_run_deadline(env)

    lines = draw(env, "n1", now=400)

    assert lines[Axis(lines, 0, 180, 100).rule + 1].strip() == "R", "E and D are far beyond"
    notes = [line for line in lines if line.endswith("→")]
    assert [note.strip() for note in notes] == [
        "E execution deadline 57m after the close →",
        "D deadline (must complete within) 1h57m after the close →",
    ]
    assert all(len(note) == 100 for note in notes), "right-aligned at the edge"
    assert "E execution deadline 2026-04-12T13:00:00.000+00:00 " \
           "not reached: 57m after the run closed" in lines


def test_a_passed_must_complete_within_is_marked_where_it_fired(env):
    env.start("guarded", "g1")
    env.decide(0)
    sweep_deadlines(env.engine, "checker", at(90), handlers.call)

    lines = draw(env, "g1", now=100)

    axis = Axis(lines, 0, 90, 100)
    assert at_column(axis.letters, axis.column(90)) == "D"
    assert set(axis.lane("unserved")[axis.offset:axis.column(90)]) == {"·"}, \
        "never claimed: waiting for a worker until the deadline"
    assert "D deadline (must complete within) 2026-04-12T12:01:30.000+00:00 hit: the deadline " \
           "fired, wfh:on_deadline_record ran, the workflow failed" in entries(lines)


def test_a_heartbeat_timeout_is_marked_on_its_attempt_and_the_retry_waits_its_backoff(env):
    env.start("beating", "b1")
    env.decide(0)
    env.claim(2)
    env.sweep(12)
    env.claim(20)

    lines = draw(env, "b1", now=30)

    axis = Axis(lines, 0, 30, 100)
    lane = axis.lane("copy_customer_recor…")
    assert lane[axis.column(12)] == "h"
    assert set(lane[axis.column(2) + 1:axis.column(12)]) == {"▒"}
    assert set(lane[axis.column(12) + 1:axis.column(17)]) == {"░"}
    assert set(lane[axis.column(17) + 1:axis.column(20)]) == {"·"}, "available, not yet claimed"
    assert set(lane[axis.column(20) + 1:axis.column(30)]) == {"▓"}, "attempt 2 is still running"
    assert at_column(axis.letters, axis.column(30)) == "N"
    assert "h copy_customer_records_to_the_warehouse attempt 1 heartbeat " \
           "2026-04-12T12:00:12.000+00:00 hit: the attempt timed out" in entries(lines)
    assert "h copy_customer_records_to_the_warehouse attempt 2 heartbeat " \
           "2026-04-12T12:00:30.000+00:00 now" in entries(lines)


# an open run


def test_an_open_run_ends_at_now_with_its_timer_wait_and_child_as_bars(env):
    env.start("approval", "a1")
    env.run(0)
    env.run(60)

    lines = draw(env, "a1", now=120)

    # The wait's timeout at +3m is near enough to be drawn: the axis reaches it.
    axis = Axis(lines, 0, 180, 100)
    assert lines[0] == "approval  a1  run 1 of 1  waiting"
    assert at_column(axis.letters, axis.column(120)) == "N"
    assert set(axis.lane("delay 1m")[axis.offset:axis.column(60)]) == {"═"}
    wait = axis.lane("approved")
    assert set(wait[axis.column(60) + 1:axis.column(120)]) == {"~"}
    assert wait[axis.column(120) + 1:axis.column(180)].strip() == "", "nothing after now"
    assert wait[axis.column(180)] == "w"
    assert at_column(axis.lane("run 1"), axis.column(120) + 1) == " "
    assert "w approved signal wait timeout 2026-04-12T12:03:00.000+00:00 in 1m" in lines
    assert "N now 2026-04-12T12:02:00.000+00:00" in lines
    assert lines[axis.rule + 1].rstrip().endswith("N"), "the run deadline is beyond the chart"
    assert any(line.strip() == "R run deadline in 58m →" for line in lines)

    env.clock.set(130)
    env.client.signal("a1", "approved")
    env.run(150)
    lines = draw(env, "a1", now=200)

    axis = Axis(lines, 0, 200, 100)
    wait = axis.lane("approved")
    assert set(axis.cells_of(wait, 60, 130)) == {"~"}, "the signal came at +2m10s"
    assert wait[axis.column(180)] == "w", "its timeout, not reached"
    child = axis.lane("audit_child")
    assert set(axis.cells_of(child, 150, 200)) == {"▓"}, "the child runs on at now"


def test_a_waiting_run_draws_the_signal_wait_timeout_it_runs_into_next(env):
    env.start("approval", "a1")
    env.run(0)
    env.run(60)

    # At +1m1s the wait's timeout (+3m) is far past what the run has lived, and it is what
    # fires next: the axis reaches it, rather than leaving it to a note at the edge.
    lines = draw(env, "a1", now=61)

    axis = Axis(lines, 0, 180, 100)
    assert axis.lane("approved")[axis.column(180)] == "w"
    assert not any("signal wait timeout" in line and line.endswith("→") for line in lines)
    assert "w approved signal wait timeout 2026-04-12T12:03:00.000+00:00 in 1m59s" in \
        entries(lines)
    assert any(line.strip() == "R run deadline in 58m59s →" for line in lines), \
        "the run deadline comes later: still beyond the chart"


def test_a_signal_wait_that_times_out_is_marked_where_it_ran_out(env):
    env.start("approval", "a1")
    env.run(0)
    env.run(60)
    env.run(180)

    lines = draw(env, "a1", now=300)

    assert lines[0] == "approval  a1  run 1 of 1  failed"
    axis = Axis(lines, 0, 180, 100)
    wait = axis.lane("approved")
    assert set(axis.cells_of(wait, 60, 180)[:-1]) == {"~"}
    assert wait[axis.column(180)] == "w"
    assert "w approved signal wait timeout 2026-04-12T12:03:00.000+00:00 hit: the wait timed out" \
        in entries(lines)


def test_a_paused_stretch_shows_on_the_runs_lane(env):
    env.start("approval", "a1")
    env.run(0)
    env.client.pause("a1")
    env.clock.set(40)
    env.client.resume("a1")

    lines = draw(env, "a1", now=60)

    axis = Axis(lines, 0, 60, 100)
    lane = axis.lane("run 1")
    assert lane[axis.column(0)] == "━", "paused at once"
    assert set(lane[axis.column(0) + 1:axis.column(40)]) == {"╌"}
    assert set(axis.cells_of(lane, 40, 60)) == {"━"}
    assert "╌ paused" in lines[-1]


def test_a_retried_run_keeps_the_deadline_it_ran_into_and_marks_the_new_one(env):
    env.start("nightly_import", "n1")
    env.decide(0)
    env.run(180)
    env.clock.set(200)
    env.client.retry("n1")

    lines = draw(env, "n1", now=210)

    assert "R run deadline before the retry 2026-04-12T12:03:00.000+00:00 hit: the run timed " \
           "out (run_timeout)" in lines
    assert "R run deadline 2026-04-12T12:06:20.000+00:00 in 2m50s" in lines
    axis = Axis(lines, 0, 210, 100)
    assert at_column(axis.lane("run 1"), axis.column(190)) == " ", "closed until the retry"


# every run


def test_all_runs_draws_each_run_on_its_own_axis(env):
    env.start("loop", "l1", input={"until": 2})
    for second in range(1, 5):
        env.run(second)

    lines = draw(env, "l1", now=10, all_runs=True)

    headers = [line for line in lines if line.startswith("loop  l1")]
    assert headers == ["loop  l1  run 1 of 2  continued_as_new", "loop  l1  run 2 of 2  completed"]
    assert sum(1 for line in lines if line.lstrip().startswith("┬")) == 2
    assert draw(env, "l1", now=10, run=1)[0] == "loop  l1  run 1 of 2  continued_as_new"


# narrow terminals and NO_COLOR


def statuses(text: str) -> list[str]:
    return [word for word in re.findall(r"[a-z_]+", text) if word in STATUS_WORDS]


def words(lines: list[str]) -> list[str]:
    """The words of the legend (everything after the chart), in order."""
    return " ".join(lines[lines.index(""):]).split()


@pytest.mark.parametrize("width", [60, 120])
def test_no_word_or_timestamp_is_split_at_any_width(env, width):
    retried_then_ran_into_its_run_deadline(env)
    doc = printed(env.describe("n1"))
    instants = {doc["run"]["run_deadline_at"], doc["run"]["execution_deadline_at"],
                doc["deadline_at"], doc["run"]["started_at"], "2026-04-12T12:02:08.000+00:00"}

    lines = draw(env, "n1", now=400, width=width)

    text = "\n".join(lines)
    assert set(ISO.findall(text)) == instants, "each instant whole, on one line"
    wide = "\n".join(draw(env, "n1", now=400, width=400))
    assert "timed_out" in statuses(text)
    assert statuses(text) == statuses(wide)
    assert words(lines) == words(draw(env, "n1", now=400, width=400)), \
        "the legend only moves whole words to the next line"
    assert any(line.startswith("transform ") for line in lines)


def test_lane_names_are_cut_with_an_ellipsis_never_wrapped(env):
    env.start("beating", "b1")
    env.decide(0)

    lines = draw(env, "b1", now=5, width=60)

    lane = next(line for line in lines if line.startswith("copy_"))
    assert lane.startswith("copy_custom… ")
    assert not any(line.startswith("records") for line in lines)


@pytest.mark.parametrize("width", [60, 100])
def test_no_color_keeps_every_character(env, width):
    retried_then_ran_into_its_run_deadline(env)
    picture = timeline.draw(env.describe("n1"), env.history("n1"), now=at(400), width=width)

    def printed(**options: Any) -> str:
        out = Console(file=io.StringIO(), width=width, force_terminal=True, **options)
        out.print(picture, soft_wrap=True)
        return out.file.getvalue()

    coloured, plain = printed(), printed(no_color=True)
    assert "\x1b[31m" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", plain) == picture.plain + "\n"
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == picture.plain + "\n"


def test_a_run_that_closed_as_it_started_still_gets_an_axis(env):
    env.start("loop", "l1", input={"until": 1})
    env.run(0)

    lines = draw(env, "l1", now=0)

    assert lines[0] == "loop  l1  run 1 of 1  completed"
    assert Axis(lines, 0, 1, 100).lane("count")


# the command


def cli(env: Any, *args: str, environment: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["--db", env.db,
                                    "-w", str(env.folder / "workflows.yaml"), *args],
                              env=environment)


def test_cli_timeline_prints_the_chart_and_refuses_what_it_cannot_draw(env):
    retried_then_ran_into_its_run_deadline(env)
    expected = [line.plain.rstrip() for line in timeline.draw(
        env.describe("n1"), env.history("n1"), now=T0, width=80).lines]

    result = cli(env, "timeline", "n1", "--width", "80")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == expected

    narrow = cli(env, "timeline", "n1", environment={"COLUMNS": "60"})
    assert narrow.exit_code == 0
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 60

    unknown = cli(env, "timeline", "nope")
    assert (unknown.exit_code, unknown.stdout, unknown.stderr) == (
        1, "", "Error: no instance 'nope'\n")
    no_run = cli(env, "timeline", "n1", "--run", "2")
    assert (no_run.exit_code, no_run.stderr) == (1, "Error: n1 has no run 2 (it has 1)\n")
    both = cli(env, "timeline", "n1", "--run", "1", "--all-runs")
    assert (both.exit_code, both.stderr) == (2, "Error: --run and --all-runs exclude each other\n")
