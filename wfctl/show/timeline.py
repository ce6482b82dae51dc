"""A run drawn for the terminal: a lane per step, attempts as bars, deadlines as markers on a time axis.

Built only from the documents `describe --json` and `history --json` print (as wfctl.show.views gives
them, instants as datetimes), and given `now` and a width, so that it draws the same picture
whatever store is behind those documents.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from wfctl import clock
from wfctl.lang import durations
from wfctl.vocabulary import RUN_CLOSED_EVENT, SIGNAL_WAIT, TIMEOUTS

MIN_WIDTH = 40
# Workflow deadlines closer than this share of the run's length past its end are drawn on the
# axis (so that a person sees how close they were); farther ones are noted at the edge.
REACH = 0.5


@dataclass(frozen=True)
class Glyph:
    """What a lane cell shows; where two things share a cell, the higher rank wins."""

    char: str
    style: str
    meaning: str
    rank: int


COMPLETED = Glyph("█", "green", "completed", 5)
RUNNING = Glyph("▓", "cyan", "running", 5)
ENDED = Glyph("▒", "red", "failed, timed out or cancelled", 5)
TIMER = Glyph("═", "blue", "timer", 4)
WAIT = Glyph("~", "blue", "waiting for a signal", 4)
BACKOFF = Glyph("░", "yellow", "retry backoff", 3)
QUEUED = Glyph("·", "dim", "waiting for a worker", 2)
PAUSED = Glyph("╌", "yellow", "paused", 2)
# The run's own lane is a line coloured by how it ended, so that the steps stand out under it.
RUN_COMPLETED = Glyph("━", "green", "the run", 5)
RUN_ENDED = Glyph("━", "red", "the run", 5)
RUN_OPEN = Glyph("━", "cyan", "the run", 5)
GLYPHS = (RUN_OPEN, RUN_COMPLETED, RUN_ENDED, COMPLETED, RUNNING, ENDED, TIMER, WAIT, BACKOFF,
          QUEUED, PAUSED)

HIT_LINE = Glyph("│", "bold red", "the deadline the run ran into", 1)
DEADLINE_LINE = Glyph("┆", "magenta", "another deadline", 1)
NOW_LINE = Glyph("┊", "cyan", "now", 1)
LINES = (HIT_LINE, DEADLINE_LINE, NOW_LINE)

# An activity's four timeouts, and a signal wait's: the letter drawn on its lane, and its name.
LANE_LETTERS = {"schedule_to_start": "q", "start_to_close": "s", "schedule_to_close": "t",
                "heartbeat": "h"}
LANE_DEADLINES = {
    **{kind: (LANE_LETTERS[kind], TIMEOUTS[kind].label) for kind in LANE_LETTERS},
    SIGNAL_WAIT: ("w", "signal wait timeout"),
}
# The run's deadlines: letter -> name, the field that holds it, the timeout kind that expires it.
RUN_DEADLINES = {
    **{letter: (TIMEOUTS[kind].label, TIMEOUTS[kind].column, kind)
       for letter, kind in (("E", "execution_timeout"), ("R", "run_timeout"))},
    "D": ("deadline (must complete within)", "deadline_at", None),
}
CLOSING = {event: status for status, event in RUN_CLOSED_EVENT.items()}
# Tick spacings to choose from, in seconds: the first whose labels fit is taken.
TICKS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300,
         600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400,
         14 * 86400, 30 * 86400, 60 * 86400, 90 * 86400, 180 * 86400, 365 * 86400)


@dataclass
class Segment:
    start: datetime
    end: datetime
    glyph: Glyph


@dataclass
class Mark:
    """A deadline on one lane: an attempt's, an activity's or a signal wait's."""

    at: datetime
    kind: str
    label: str
    hit: bool = False
    open: bool = False

    @property
    def letter(self) -> str:
        return LANE_DEADLINES[self.kind][0]


@dataclass
class Lane:
    step: str
    name: str
    segments: list[Segment] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    busy: int = 0


@dataclass
class Marker:
    """A deadline of the whole run (or now), drawn across every lane."""

    letter: str
    label: str
    at: datetime
    hit: str | None = None


@dataclass
class Run:
    """One run as the chart needs it, read from its events."""

    number: int
    status: str
    started_at: datetime
    closed_at: datetime | None
    end: datetime
    lanes: list[Lane]
    markers: list[Marker]


@dataclass
class Timeline:
    """The chart of each run drawn, one after another; a rich renderable."""

    charts: list[list[Text]]

    @property
    def lines(self) -> list[Text]:
        lines: list[Text] = []
        for chart in self.charts:
            if lines:
                lines.append(Text(""))
            lines.extend(chart)
        return lines

    @property
    def plain(self) -> str:
        return "\n".join(line.plain for line in self.lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text("\n").join(self.lines)


def draw(doc: dict[str, Any], events: list[dict[str, Any]], *, now: datetime,
         width: int) -> Timeline:
    """Draw every run that `events` (a `history --json` list) holds, each on its own axis.

    `doc` is the `describe --json` document; its `activities` give the live heartbeat deadlines
    of the run it describes. An open run ends at `now`; nothing here reads a clock.
    """
    width = max(MIN_WIDTH, width)
    return Timeline([_chart(doc, run, now, width) for run in runs(doc, events, now=now)])


def runs(doc: dict[str, Any], events: list[dict[str, Any]], *, now: datetime) -> list[Run]:
    """The model of every run that `events` holds, in order: what the terminal and the web view
    (wfctl.ui) both draw, so that the two never disagree."""
    by_run: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        by_run.setdefault(event["run_number"], []).append(event)
    return [read_run(number, run_events, now,
                     doc["activities"] if doc["run"]["run_number"] == number else [])
            for number, run_events in by_run.items()]


# Reading a run from its events


def read_run(number: int, events: list[dict[str, Any]], now: datetime,
             activities: Iterable[dict[str, Any]] = ()) -> Run:
    """The lanes and markers of one run, from its events in order; what is open runs to now."""
    reader = _Reader(number)
    for event in events:
        at, event_type = event["at"], event["event_type"]
        handler = getattr(reader, f"on_{event_type}", None)
        if handler is not None:
            handler(at, event["attributes"])
        elif event_type in CLOSING:
            reader.close(at, CLOSING[event_type])
    return reader.finish(max(now, events[-1]["at"]), {a["activity_id"]: a for a in activities})


@dataclass
class _Activity:
    """An activity while its events are read: which phase it is in, since when."""

    lane: Lane
    step: str
    retry_policy: dict[str, Any]
    since: datetime
    attempt: int = 1
    started: bool = False
    pending: dict[str, Mark] = field(default_factory=dict)

    def expect(self, kind: str, at: datetime | None, *, hit: bool = False) -> Mark | None:
        """A deadline it may run into, drawn once the phase it belongs to ends."""
        if at is None:
            return None
        who = self.step if kind == "schedule_to_close" else f"{self.step} attempt {self.attempt}"
        mark = Mark(at, kind, f"{who} {LANE_DEADLINES[kind][1]}", hit=hit)
        if not hit:
            self.pending[kind] = mark
        return mark

    def settle(self, kinds: Iterable[str], *, open: bool = False) -> None:
        for kind in kinds:
            mark = self.pending.pop(kind, None)
            if mark is not None:
                mark.open = open
                self.lane.marks.append(mark)


@dataclass
class _Wait:
    lane: Lane
    step: str
    signal: str
    start: datetime
    mark: Mark | None


@dataclass
class _Child:
    lane: Lane
    start: datetime
    policy: str | None = None


class _Reader:
    """Follows one run's events, turning what opens and closes into segments on lanes."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.run_lane = Lane("", f"run {number}")
        self.lanes = [self.run_lane]
        self.status = "running"
        self.started_at: datetime | None = None
        self.closed_at: datetime | None = None
        self.active_since: datetime | None = None
        self.paused_since: datetime | None = None
        self.backoff_since: datetime | None = None
        self.backoff_until: datetime | None = None
        # The run's active stretches, drawn once its close tells how they ended.
        self.unsettled: list[Segment] = []
        self.markers: dict[str, Marker] = {}
        self.superseded: list[Marker] = []
        self.activities: dict[str, _Activity] = {}
        self.timers: dict[str, tuple[Lane, datetime]] = {}
        self.waits: dict[str, _Wait] = {}
        self.buffered: Counter[str] = Counter()
        self.children: dict[str, _Child] = {}

    def lane(self, step: str) -> Lane:
        """The lane of a step; another when it is busy (parallel branches of the same name)."""
        same = [lane for lane in self.lanes[1:] if lane.step == step]
        lane = next((lane for lane in same if not lane.busy), None)
        if lane is None:
            lane = Lane(step, step if not same else f"{step} #{len(same) + 1}")
            self.lanes.append(lane)
        lane.busy += 1
        return lane

    # the run

    def on_WorkflowStarted(self, at: datetime, a: dict[str, Any]) -> None:
        self.started_at = self.active_since = at
        for letter, (label, key, _) in RUN_DEADLINES.items():
            if a.get(key):
                self.markers[letter] = Marker(letter, label, a[key])

    def on_WorkflowPaused(self, at: datetime, a: dict[str, Any]) -> None:
        if self.active_since is not None:
            self.unsettled.append(Segment(self.active_since, at, RUN_OPEN))
        self.active_since, self.paused_since = None, at

    def on_WorkflowResumed(self, at: datetime, a: dict[str, Any]) -> None:
        if self.paused_since is not None:
            self.run_lane.segments.append(Segment(self.paused_since, at, PAUSED))
        self.active_since, self.paused_since = at, None

    def on_WorkflowTimedOut(self, at: datetime, a: dict[str, Any]) -> None:
        kind = a.get("timeout_kind")
        for letter, (_, _, timeout_kind) in RUN_DEADLINES.items():
            if timeout_kind == kind and letter in self.markers:
                self.markers[letter].hit = f"hit: the run timed out ({kind})"
        self.close(at, "timed_out")

    def on_WorkflowDeadlineExceeded(self, at: datetime, a: dict[str, Any]) -> None:
        if "D" in self.markers:
            ran = f", {a['handler']} ran" if a.get("handler") else ""
            self.markers["D"].hit = f"hit: the deadline fired{ran}, the workflow failed"

    def on_WorkflowRetryScheduled(self, at: datetime, a: dict[str, Any]) -> None:
        # The run closed a moment ago and is open again, waiting out its retry policy's backoff.
        self.status, self.closed_at, self.backoff_since = "running", None, at
        self.backoff_until = a.get("next_attempt_at") or at

    def _end_backoff(self, at: datetime) -> None:
        """The backoff, and the wait for a worker after it when the retry came late."""
        if self.backoff_since is None:
            return
        until = max(self.backoff_since, min(at, self.backoff_until or at))
        self.run_lane.segments.append(Segment(self.backoff_since, until, BACKOFF))
        if at > until:
            self.run_lane.segments.append(Segment(until, at, QUEUED))
        self.backoff_since = None

    def on_WorkflowRetried(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_backoff(at)
        for letter in ("R", "D"):
            label, key, _ = RUN_DEADLINES[letter]
            previous = self.markers.pop(letter, None)
            if previous is not None and previous.hit:
                previous.label += " before the retry"
                self.superseded.append(previous)
            if a.get(key):
                self.markers[letter] = Marker(letter, label, a[key])
        self.status, self.closed_at, self.active_since = "running", None, at

    def close(self, at: datetime, status: str) -> None:
        if self.active_since is not None:
            self.unsettled.append(Segment(self.active_since, at, RUN_OPEN))
        if self.paused_since is not None:
            self.run_lane.segments.append(Segment(self.paused_since, at, PAUSED))
        self._end_backoff(at)
        outcome = RUN_COMPLETED if status in ("completed", "continued_as_new") else RUN_ENDED
        self.run_lane.segments += [Segment(s.start, s.end, outcome) for s in self.unsettled]
        self.unsettled = []
        self.active_since = self.paused_since = None
        self.status, self.closed_at = status, at
        # What the run closed with still open: a wait it abandoned, a child it left running.
        for wait in list(self.waits.values()):
            self._end_wait(wait, at)
        for child_id, child in list(self.children.items()):
            self._end_child(child_id, at, ENDED if child.policy == "terminate" else RUNNING)

    # activities

    def on_ActivityScheduled(self, at: datetime, a: dict[str, Any]) -> None:
        activity = _Activity(self.lane(a["step"]), a["step"], a.get("retry_policy") or {}, at)
        self.activities[a["activity_id"]] = activity
        for kind in ("schedule_to_start", "schedule_to_close"):
            activity.expect(kind, a.get(TIMEOUTS[kind].column))

    def on_ActivityStarted(self, at: datetime, a: dict[str, Any]) -> None:
        activity = self.activities.get(a["activity_id"])
        if activity is None:
            return
        self._end_phase(activity, at, ENDED)
        activity.since, activity.attempt, activity.started = at, a["attempt"], True
        for kind in ("start_to_close", "heartbeat"):
            activity.expect(kind, a.get(TIMEOUTS[kind].column))

    def on_ActivityHeartbeatRecorded(self, at: datetime, a: dict[str, Any]) -> None:
        activity = self.activities.get(a["activity_id"])
        if activity is not None:
            activity.expect("heartbeat", a.get(TIMEOUTS["heartbeat"].column))

    def _end_phase(self, activity: _Activity, at: datetime, outcome: Glyph,
                   timeout_kind: str | None = None, deadline_at: datetime | None = None) -> None:
        """Close the attempt (or the wait for a worker) the activity is in."""
        lane = activity.lane
        if activity.started:
            lane.segments.append(Segment(activity.since, at, outcome))
            kinds: tuple[str, ...] = ("start_to_close", "heartbeat")
        else:
            if activity.since <= at:
                lane.segments.append(Segment(activity.since, at, QUEUED))
            elif lane.segments and lane.segments[-1].glyph is BACKOFF:
                # Ended during its backoff: the backoff stops here.
                lane.segments[-1].end = at
            kinds = ("schedule_to_start",)
        if timeout_kind in LANE_DEADLINES:
            activity.pending.pop(timeout_kind, None)
            hit = activity.expect(timeout_kind, deadline_at, hit=True)
            if hit is not None:
                lane.marks.append(hit)
        activity.settle(kinds)
        activity.started = False

    def _end_activity(self, activity_id: str, at: datetime, outcome: Glyph,
                      a: dict[str, Any]) -> None:
        activity = self.activities.pop(activity_id, None)
        if activity is not None:
            self._end_phase(activity, at, outcome, a.get("timeout_kind"), a.get("deadline_at"))
            activity.settle(("schedule_to_close",))
            activity.lane.busy -= 1

    def on_ActivityCompleted(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_activity(a["activity_id"], at, COMPLETED, a)

    def on_ActivityFailed(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_activity(a["activity_id"], at, ENDED, a)

    def on_ActivityTimedOut(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_activity(a["activity_id"], at, ENDED, a)

    def on_ActivityCancelled(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_activity(a["activity_id"], at, ENDED, a)

    def on_ActivityRetryScheduled(self, at: datetime, a: dict[str, Any]) -> None:
        activity = self.activities.get(a["activity_id"])
        if activity is None:
            return
        self._end_phase(activity, at, ENDED, a.get("timeout_kind"), a.get("deadline_at"))
        available = a.get("retry_available_at") or at
        if available > at:
            activity.lane.segments.append(Segment(at, available, BACKOFF))
        activity.since, activity.attempt = available, a["next_attempt"]
        activity.expect("schedule_to_start", clock.after(
            available, activity.retry_policy.get("schedule_to_start_timeout")))

    # timers, signal waits, children

    def on_TimerScheduled(self, at: datetime, a: dict[str, Any]) -> None:
        # A signal wait's timeout is drawn as the wait's deadline, not as a bar of its own.
        if a.get("kind") != "signal_timeout":
            self.timers[a["timer_id"]] = (self.lane(a["step"]), at)

    def _end_timer(self, at: datetime, a: dict[str, Any]) -> None:
        timer = self.timers.pop(a["timer_id"], None)
        if timer is not None:
            lane, start = timer
            lane.segments.append(Segment(start, at, TIMER))
            lane.busy -= 1

    def on_TimerFired(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_timer(at, a)
        if a.get("kind") == "signal_timeout":
            wait = next((w for w in self.waits.values() if w.step == a.get("step")), None)
            if wait is not None:
                if wait.mark is not None:
                    wait.mark.hit = True
                self._end_wait(wait, at)

    def on_TimerCancelled(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_timer(at, a)

    def on_SignalWaitOpened(self, at: datetime, a: dict[str, Any]) -> None:
        signal = a.get("signal") or ""
        step = a.get("step") or signal
        timeout_at = a.get("timeout_at")
        mark = Mark(timeout_at, "signal_wait", f"{step} {LANE_DEADLINES['signal_wait'][1]}") \
            if timeout_at else None
        wait = _Wait(self.lane(step), step, signal, at, mark)
        self.waits[signal] = wait
        if self.buffered[signal]:
            # A signal that came before the wait opened ends it at once.
            self.buffered[signal] -= 1
            self._end_wait(wait, at)

    def on_SignalReceived(self, at: datetime, a: dict[str, Any]) -> None:
        signal = a.get("signal") or ""
        wait = self.waits.get(signal)
        if a.get("buffered") or wait is None:
            self.buffered[signal] += 1
        elif wait.mark is None or at < wait.mark.at:
            # A signal at or after the wait's timeout is late: the timeout ends the wait.
            self._end_wait(wait, at)

    def _end_wait(self, wait: _Wait, at: datetime, *, open: bool = False) -> None:
        self.waits.pop(wait.signal, None)
        wait.lane.segments.append(Segment(wait.start, at, WAIT))
        wait.lane.busy -= 1
        if wait.mark is not None:
            wait.mark.open = open
            wait.lane.marks.append(wait.mark)

    def on_ChildWorkflowStarted(self, at: datetime, a: dict[str, Any]) -> None:
        self.children[a["child_instance_id"]] = _Child(self.lane(a["step"]), at)

    def on_ChildWorkflowCompleted(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_child(a["child_instance_id"], at, COMPLETED)

    def on_ChildWorkflowFailed(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_child(a["child_instance_id"], at, ENDED)

    def on_ChildWorkflowTimedOut(self, at: datetime, a: dict[str, Any]) -> None:
        self._end_child(a["child_instance_id"], at, ENDED)

    def on_ParentClosePolicyApplied(self, at: datetime, a: dict[str, Any]) -> None:
        child = self.children.get(a["child_instance_id"])
        if child is not None:
            child.policy = a.get("policy")

    def _end_child(self, child_id: str, at: datetime, outcome: Glyph) -> None:
        child = self.children.pop(child_id, None)
        if child is not None:
            child.lane.segments.append(Segment(child.start, at, outcome))
            child.lane.busy -= 1

    # the end of the events

    def finish(self, until: datetime, live: dict[str, dict[str, Any]]) -> Run:
        """Draw what is still open up to the run's close, or up to `until` if it is open."""
        started = self.started_at or until
        end = self.closed_at or until
        if self.closed_at is None:
            if self.active_since is not None:
                self.run_lane.segments.append(Segment(self.active_since, end, RUN_OPEN))
            if self.paused_since is not None:
                self.run_lane.segments.append(Segment(self.paused_since, end, PAUSED))
            self._end_backoff(end)
            self.run_lane.segments += self.unsettled
        for activity_id, activity in self.activities.items():
            live_deadline = (live.get(activity_id) or {}).get(TIMEOUTS["heartbeat"].column)
            if activity.started and live_deadline is not None:
                # describe has the heartbeat deadline exactly; history records it now and then.
                activity.expect("heartbeat", live_deadline)
            glyph = RUNNING if activity.started else QUEUED
            activity.lane.segments.append(Segment(activity.since, end, glyph))
            activity.settle(LANE_DEADLINES, open=True)
        for lane, start in self.timers.values():
            lane.segments.append(Segment(start, end, TIMER))
        for wait in list(self.waits.values()):
            self._end_wait(wait, end, open=True)
        for child in self.children.values():
            child.lane.segments.append(Segment(child.start, end, RUNNING))
        return Run(self.number, self.status, started, self.closed_at, end, self.lanes,
                   [*self.superseded, *self.markers.values()])


# Drawing


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def span(seconds: float) -> str:
    """A distance in time, the two largest units: '58m10s', '1h', '250ms'."""
    return durations.format(abs(seconds), precision=2)


def tick_label(seconds: float, step: float) -> str:
    """'+0s', '+30s', '+1m30s', '+1.5s', '+200ms': exact at every multiple of `step`."""
    if seconds == 0:
        return "+0s"
    if step < 1:
        milliseconds = round(seconds * 1000)
        if milliseconds < 1000:
            return f"+{milliseconds}ms"
        return f"+{milliseconds / 1000:g}s"
    return "+" + durations.format(seconds)


def _ticks(total: float, cells: int) -> list[tuple[int, str]]:
    """Each tick's cell and label, at the finest spacing whose labels fit between ticks."""
    for step in TICKS:
        count = int(total / step + 1e-9)
        if count > cells:
            continue
        labels = [tick_label(k * step, step) for k in range(count + 1)]
        if step / total * cells >= max(len(label) for label in labels) + 1:
            placed = [(math.floor(k * step / total * cells + 1e-9), label)
                      for k, label in enumerate(labels)]
            return [(cell, label) for cell, label in placed if cell < cells]
    return [(0, "+0s")]


def _scale(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    return span(seconds)


def _flow(units: list[Text], width: int, indent: int = 0, separator: str = " ") -> list[Text]:
    """Lines of at most `width` cells made of whole units; a unit is cut only at its spaces,
    and only when it cannot fit on a line of its own."""
    room = width - indent
    pieces: list[Text] = []
    for unit in units:
        if unit.cell_len <= room:
            pieces.append(unit)
            continue
        for word in unit.split(" ", allow_blank=False):
            if word.cell_len > room:
                word.truncate(room, overflow="ellipsis")
            pieces.append(word)
    lines: list[Text] = []
    line = Text()
    for piece in pieces:
        limit = width if not lines else room
        if line.cell_len and line.cell_len + len(separator) + piece.cell_len > limit:
            lines.append(line)
            line = Text()
        if line.cell_len:
            line.append(separator)
        line.append_text(piece)
    if line.cell_len:
        lines.append(line)
    return [Text(" " * indent) + line if n else line for n, line in enumerate(lines)]


def when(at: datetime, run: Run, now: datetime) -> str:
    """Where an instant stands from the run's point of view, for the legend."""
    if run.closed_at is None:
        seconds = _seconds(at - now)
        if seconds > 0:
            return f"in {span(seconds)}"
        return "now" if seconds == 0 else f"passed {span(seconds)} ago"
    seconds = _seconds(at - run.closed_at)
    if seconds > 0:
        return f"not reached: {span(seconds)} after the run closed"
    return "reached as the run closed" if seconds == 0 else \
        f"passed {span(seconds)} before the run closed"


def extent(run: Run, now: datetime) -> tuple[list[Marker], list[Mark], datetime]:
    """The run's markers (with `now` while it is open), its lanes' deadlines, and the instant
    its axis ends at (it starts at the run's start)."""
    markers = list(run.markers)
    if run.closed_at is None:
        markers.append(Marker("N", "now", now))
    marks = [mark for lane in run.lanes for mark in lane.marks]
    start = run.started_at
    # Deadlines a little past the end are drawn, so that a person sees how close they were.
    reach = run.end + (run.end - start) * REACH
    nearby = [m.at for m in markers if run.end < m.at <= reach] + \
             [m.at for m in marks if m.open and run.end < m.at <= reach]
    # What the open steps run into next is drawn however far it is; the run's own deadlines
    # beyond the axis are noted at its edge.
    upcoming = [m.at for m in marks if m.open and m.at > run.end]
    return markers, marks, max(run.end, *nearby, start + timedelta(seconds=1),
                               *([min(upcoming)] if upcoming else []))


def _chart(doc: dict[str, Any], run: Run, now: datetime, width: int) -> list[Text]:
    markers, marks, last = extent(run, now)
    start = run.started_at
    label_width = min(max(cell_len(lane.name) for lane in run.lanes), max(8, width // 5))
    axis = _Axis(start, last, label_width + 1, width - label_width - 1)

    lines = _header(doc, run, axis, width)
    lines += axis.rows()
    shown = [m for m in markers if start <= m.at <= last]
    if shown:
        lines.append(axis.letters(shown))
    used: set[Glyph] = set()
    kinds: set[str] = set()
    for lane in run.lanes:
        lines.append(axis.lane(lane, label_width, shown, used, kinds))
    lines += _edge_notes(run, markers, marks, axis, now, width)
    lines.append(Text(""))
    lines += _legend(run, markers, marks, used, kinds, now, width)
    return lines


@dataclass
class _Axis:
    """[start, end] drawn on `cells` columns from column `offset` on."""

    start: datetime
    end: datetime
    offset: int
    cells: int

    def cell(self, at: datetime) -> int:
        """Cell i shows the i-th of the equal slices of [start, end]; the end is in the last."""
        share = _seconds(at - self.start) / _seconds(self.end - self.start)
        return min(self.cells - 1, max(0, math.floor(share * self.cells + 1e-9)))

    def cells_of(self, segment: Segment) -> range:
        """From the cell of its start to the last cell it enters (one it only touches is not
        counted), at least one."""
        share = _seconds(segment.end - self.start) / _seconds(self.end - self.start)
        first = self.cell(segment.start)
        last = min(self.cells - 1, math.ceil(share * self.cells - 1e-9) - 1)
        return range(first, max(first, last) + 1)

    def rows(self) -> list[Text]:
        """The tick labels and the rule under them."""
        labels = Text(" " * self.offset)
        rule = ["─"] * self.cells
        written = 0
        for cell, label in _ticks(_seconds(self.end - self.start), self.cells):
            rule[cell] = "┬"
            if cell >= written and cell + len(label) <= self.cells:
                labels.append(" " * (cell - written) + label, style="dim")
                written = cell + len(label)
        return [labels, Text(" " * self.offset) + Text("".join(rule), style="dim")]

    def letters(self, markers: list[Marker]) -> Text:
        """Each marker's letter over its column (or the nearest free one, when two coincide)."""
        row: list[tuple[str, str]] = [(" ", "")] * self.cells
        for marker in sorted(markers, key=lambda m: m.at):
            cell = self.cell(marker.at)
            free = [c for c in (*range(cell, self.cells), *range(cell - 1, -1, -1))
                    if row[c][0] == " "]
            if free:
                row[free[0]] = (marker.letter, f"bold {_marker_line(marker).style}")
        letters = Text(" " * self.offset)
        for char, style in row:
            letters.append(char, style=style)
        return letters

    def lane(self, lane: Lane, label_width: int, markers: list[Marker], used: set[Glyph],
             kinds: set[str]) -> Text:
        """The lane's name, cut to fit, then its bars, its deadlines and the markers' lines."""
        cells: list[tuple[str, str, int]] = [(" ", "", 0)] * self.cells
        drawn: list[Glyph | None] = [None] * self.cells
        for segment in lane.segments:
            for c in self.cells_of(segment):
                if segment.glyph.rank > cells[c][2]:
                    cells[c] = (segment.glyph.char, segment.glyph.style, segment.glyph.rank)
                    drawn[c] = segment.glyph
        # The deadline an attempt ran into overwrites its bar; the others show where it is empty.
        for mark in sorted(lane.marks, key=lambda m: m.hit):
            if self.start <= mark.at <= self.end:
                c = self.cell(mark.at)
                if mark.hit or cells[c][0] == " ":
                    cells[c] = (mark.letter, "bold red" if mark.hit else "magenta", 9)
                    drawn[c] = None
                    kinds.add(mark.kind)
        for marker in markers:
            c = self.cell(marker.at)
            if cells[c][0] == " ":
                line = _marker_line(marker)
                cells[c] = (line.char, line.style, line.rank)
                drawn[c] = line
        used.update(glyph for glyph in drawn if glyph is not None)
        row = Text(lane.name)
        row.truncate(label_width, overflow="ellipsis", pad=True)
        row.append(" ")
        for char, style, _ in cells:
            row.append(char, style=style)
        row.rstrip()
        return row


def _marker_line(marker: Marker) -> Glyph:
    if marker.letter == "N":
        return NOW_LINE
    return HIT_LINE if marker.hit else DEADLINE_LINE


def _header(doc: dict[str, Any], run: Run, axis: _Axis, width: int) -> list[Text]:
    # History does not tell waiting from running; describe does, for the run it describes.
    status = doc["run"]["status"] if doc["run"]["run_number"] == run.number else run.status
    status_style = "green" if status == "completed" else \
        "cyan" if run.closed_at is None else "bold red"
    units = [Text(doc["workflow_type"], style="bold"),
             Text(doc["workflow_instance_id"], style="bold"),
             Text(f"run {run.number} of {doc['run_count']}"), Text(status, style=status_style)]
    lines = _flow(units, width, separator="  ")
    closing = "now" if run.closed_at is None else "closed"
    length = _seconds(run.end - run.started_at)
    facts = [Text(f"+0s = {clock.iso(run.started_at)}"),
             Text(f"{closing} +{span(length) if length else '0s'}"),
             Text(f"1 column ≈ {_scale(_seconds(axis.end - axis.start) / axis.cells)}",
                  style="dim")]
    return lines + _flow(facts, width, indent=2, separator="  ")


def _edge_notes(run: Run, markers: list[Marker], marks: list[Mark], axis: _Axis, now: datetime,
                width: int) -> list[Text]:
    """One line for each deadline beyond the drawn range: 'R run deadline in 55m →'."""
    notes: list[Text] = []
    beyond = [(m.at, m.letter, m.label, _marker_line(m).style) for m in markers] + \
             [(m.at, m.letter, m.label, "magenta") for m in marks if m.open]
    for at, letter, label, style in sorted(beyond, key=lambda item: item[0]):
        if axis.start <= at <= axis.end:
            continue
        if at > axis.end:
            when = f"in {span(_seconds(at - now))}" if run.closed_at is None else \
                f"{span(_seconds(at - run.closed_at))} after the close"
            units = [Text(letter, style=f"bold {style}"), *map(Text, label.split(" ")),
                     Text(when), Text("→")]
            for line in _flow(units, width):
                line.pad_left(width - line.cell_len)
                notes.append(line)
        else:
            units = [Text("←"), Text(letter, style=f"bold {style}"), *map(Text, label.split(" ")),
                     Text(f"{span(_seconds(axis.start - at))} before the start")]
            notes += [Text(" " * axis.offset) + line for line in _flow(units, width - axis.offset)]
    return notes


def _legend(run: Run, markers: list[Marker], marks: list[Mark], used: set[Glyph],
            kinds: set[str], now: datetime, width: int) -> list[Text]:
    """Each marker with its instant whole and where it stands; then what the glyphs mean."""
    lines: list[Text] = []
    for marker in markers:
        style = _marker_line(marker).style
        units = [Text(marker.letter, style=f"bold {style}"), *map(Text, marker.label.split(" ")),
                 Text(clock.iso(marker.at))]
        if marker.letter != "N":
            units.append(Text(marker.hit or when(marker.at, run, now),
                              style="bold red" if marker.hit else ""))
        lines += _flow(units, width, indent=2)
    for mark in sorted((m for m in marks if m.hit or m.open), key=lambda m: m.at):
        units = [Text(mark.letter, style="bold red" if mark.hit else "bold magenta"),
                 *map(Text, mark.label.split(" ")), Text(clock.iso(mark.at))]
        what = {"signal_wait": "wait", "schedule_to_close": "activity"}.get(mark.kind, "attempt")
        units.append(Text(f"hit: the {what} timed out", style="bold red") if mark.hit
                     else Text(when(mark.at, run, now)))
        lines += _flow(units, width, indent=2)
    shown = {glyph.char: glyph for glyph in reversed((*GLYPHS, *LINES)) if glyph in used}
    key = [Text.assemble((glyph.char, glyph.style), f" {glyph.meaning}")
           for glyph in (*GLYPHS, *LINES) if shown.get(glyph.char) is glyph]
    key += [Text(f"{LANE_DEADLINES[kind][0]} {LANE_DEADLINES[kind][1]}")
            for kind in LANE_DEADLINES if kind in kinds]
    return lines + _flow(key, width, separator="  ")
