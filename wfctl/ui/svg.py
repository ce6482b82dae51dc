"""The timeline of `wfctl timeline` as SVG: the same model (wfctl.show.timeline.runs), drawn with one
lane per step, bars whose pattern (not only their colour) says what they are, deadlines as
markers with their letter, and a `now` line the page's script moves.

The chart fits the width of the page, as the terminal's fits the terminal: the picture is the
time axis alone, every instant on it placed by its share of the run in percent, so that text
keeps its size however wide the page is; the stylesheet leaves a margin on its left for the lane
names (drawn there, narrower on a phone) and one on its right for the letters of the deadlines
beyond the axis."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from markupsafe import Markup, escape

from wfctl import clock
from wfctl.show import timeline
from wfctl.show.timeline import Mark, Marker, Run

# The widths (px) the tick labels are chosen for: all of them on a wide page, every few on a
# phone (ui.css hides the others there).
WIDE_PLOT = 760
NARROW_PLOT = 200
# px a tick label takes per character, and between two labels.
LABEL_CHAR = 6.5
LABEL_GAP = 10
TOP = 44
# A run deadline's letter stands over the lanes down to here; its line goes on from under it.
LETTER_BOTTOM = 35
LANE = 24
BAR = 14
# An open run's axis goes on past now by this share of its length (at least MIN_AHEAD), so that
# the now line has room to move before the page draws the chart again.
AHEAD = 0.2
MIN_AHEAD = timedelta(seconds=5)
# Each glyph's class: the stylesheet gives it a colour and a pattern, and the legend its
# terminal character and meaning.
CLASSES = {
    timeline.COMPLETED: "completed", timeline.RUNNING: "running", timeline.ENDED: "failed",
    timeline.TIMER: "timer", timeline.WAIT: "wait", timeline.BACKOFF: "backoff",
    timeline.QUEUED: "queued", timeline.PAUSED: "paused", timeline.RUN_COMPLETED: "run-completed",
    timeline.RUN_ENDED: "run-failed", timeline.RUN_OPEN: "run-open",
}
# How tall each kind of bar is: the run's lane and the waits are lines, attempts are bars.
HEIGHTS = {"queued": 4, "timer": 8, "wait": 8, "backoff": 10, "paused": 10, "run-completed": 6,
           "run-failed": 6, "run-open": 6}


@dataclass
class Key:
    char: str
    css: str
    meaning: str


@dataclass
class Note:
    """A deadline as the legend lists it: letter, what it is, its instant, where it stands."""

    letter: str
    label: str
    at: str
    when: str
    css: str


@dataclass
class Chart:
    number: int
    status: str
    started_at: str
    svg: Markup
    notes: list[Note]
    keys: list[Key]
    lane_kinds: list[tuple[str, str]]


def charts(doc: dict[str, Any], events: list[dict[str, Any]], now: datetime) -> list[Chart]:
    """One chart per run that `events` holds."""
    return [_chart(doc, run, now) for run in timeline.runs(doc, events, now=now)]


class _Axis:
    def __init__(self, start: datetime, end: datetime) -> None:
        self.start, self.end = start, end
        self.seconds = (end - start).total_seconds()

    def share(self, at: datetime) -> float:
        return min(1.0, max(0.0, (at - self.start).total_seconds() / self.seconds))

    def x(self, at: datetime) -> str:
        """Where `at` is on the axis, in percent of its width."""
        return f"{self.share(at) * 100:.2f}%"

    def covers(self, at: datetime) -> bool:
        return self.start <= at <= self.end

    def ticks(self) -> list[tuple[str, str, bool]]:
        """Each tick's x, label and whether its label shows on a phone too: the finest spacing
        of timeline.TICKS whose labels do not overlap on a wide page, and of those every k-th,
        the fewest that do not overlap on a narrow one."""
        for step in timeline.TICKS:
            count = int(self.seconds / step + 1e-9)
            if count > WIDE_PLOT / 4:
                continue
            labels = [timeline.tick_label(k * step, step) for k in range(count + 1)]
            widest = max(len(label) for label in labels) * LABEL_CHAR + LABEL_GAP
            if step / self.seconds * WIDE_PLOT >= widest:
                every = math.ceil(widest / (step / self.seconds * NARROW_PLOT))
                return [(self.x(self.start + timedelta(seconds=k * step)), label, k % every == 0)
                        for k, label in enumerate(labels)]
        return [("0.00%", "+0s", True)]


def _chart(doc: dict[str, Any], run: Run, now: datetime) -> Chart:
    markers, marks, last = timeline.extent(run, now)
    if run.closed_at is None:
        last = max(last, now + max(MIN_AHEAD, (now - run.started_at) * AHEAD))
    axis = _Axis(run.started_at, last)
    height = TOP + LANE * len(run.lanes) + 8
    parts: list[str] = [
        f'<svg class="timeline" width="100%" height="{height}" overflow="visible" role="img" '
        f'aria-label="timeline of run {run.number}" xmlns="http://www.w3.org/2000/svg">',
        _PATTERNS,
        *_lane_names(run),
        *_ticks(axis, height),
    ]
    used: dict[str, Key] = {}
    kinds: set[str] = set()
    for index, lane in enumerate(run.lanes):
        parts += _lane(lane, TOP + index * LANE, axis, run, now, used, kinds)
    parts += _markers(markers, axis, run, now, height)
    parts.append("</svg>")
    keys = [used[CLASSES[glyph]] for glyph in timeline.GLYPHS if CLASSES[glyph] in used]
    status = doc["run"]["status"] if doc["run"]["run_number"] == run.number else run.status
    return Chart(run.number, status, clock.iso(run.started_at) or "", Markup("".join(parts)),
                 _notes(markers, marks, run, now), keys,
                 [timeline.LANE_DEADLINES[kind] for kind in timeline.LANE_DEADLINES if kind in kinds])


def _lane_names(run: Run) -> list[str]:
    parts = []
    for index, lane in enumerate(run.lanes):
        # Cut to the margin of a wide page, and of a phone (the stylesheet shows one).
        y = TOP + index * LANE
        parts.append(f'<text class="lane-name" x="0" y="{y + BAR - 2}">'
                     f'<title>{escape(lane.name)}</title>{escape(_cut(lane.name))}</text>'
                     f'<text class="lane-name short" x="0" y="{y + BAR - 2}">'
                     f'<title>{escape(lane.name)}</title>{escape(_cut(lane.name, 11))}</text>')
    return parts


def _ticks(axis: _Axis, height: int) -> list[str]:
    parts = []
    for x, label, major in axis.ticks():
        minor = "" if major else " minor"
        parts.append(f'<line class="tick" x1="{x}" x2="{x}" y1="18" y2="{height - 6}"/>'
                     f'<text class="tick-label{minor}" x="{x}" y="13">{escape(label)}</text>')
    return parts


def _lane(lane: timeline.Lane, y: int, axis: _Axis, run: Run, now: datetime,
          used: dict[str, Key], kinds: set[str]) -> list[str]:
    """A lane's bars and deadline marks; the legend's keys of its bars go into `used`, the
    kinds of deadline it shows into `kinds`."""
    parts = []
    for segment in lane.segments:
        parts.append(_bar(segment, y, axis, run, now))
        css = CLASSES[segment.glyph]
        used.setdefault(css, Key(segment.glyph.char, css, segment.glyph.meaning))
    ahead = 0
    for mark in sorted(lane.marks, key=lambda m: (m.hit, m.at)):
        if axis.covers(mark.at):
            parts.append(_mark(mark, y, axis, run, now))
            kinds.add(mark.kind)
        elif mark.open and mark.at > axis.end:
            # As the terminal notes it at the edge: its letter past the lane's end.
            parts.append(_mark_beyond(mark, y, run, now, ahead))
            kinds.add(mark.kind)
            ahead += 1
    return parts


def _markers(markers: list[Marker], axis: _Axis, run: Run, now: datetime, height: int) -> list[str]:
    parts = []
    beyond = 0
    for marker in sorted(markers, key=lambda m: m.at):
        if axis.covers(marker.at):
            parts.append(_marker(marker, axis, run, now, height))
        else:
            # Past the axis (or before it): its letter in the margin on that side, one under
            # another, with an arrow that says which way it lies.
            parts.append(_beyond(marker, run, now, 30 + 12 * beyond))
            beyond += 1
    return parts


def _notes(markers: list[Marker], marks: list[Mark], run: Run, now: datetime) -> list[Note]:
    """The legend's deadlines: the run's, then the steps' hit or still open, in time order."""
    notes = [Note(m.letter, m.label, clock.iso(m.at) or "",
                  m.hit or ("" if m.letter == "N" else timeline.when(m.at, run, now)),
                  _marker_class(m)) for m in markers]
    return notes + [Note(m.letter, m.label, clock.iso(m.at) or "",
                         _hit_text(m) if m.hit else timeline.when(m.at, run, now),
                         "hit" if m.hit else "open")
                    for m in sorted((m for m in marks if m.hit or m.open), key=lambda m: m.at)]


def _cut(name: str, room: int = 22) -> str:
    return name if len(name) <= room else name[:room - 1] + "…"


def _span(start: datetime, end: datetime) -> str:
    return timeline.span((end - start).total_seconds()) or "0s"


def _bar(segment: timeline.Segment, y: int, axis: _Axis, run: Run, now: datetime) -> str:
    css = CLASSES[segment.glyph]
    height = HEIGHTS.get(css, BAR)
    top = y + (BAR - height) / 2
    x1 = axis.share(segment.start) * 100
    width = axis.share(segment.end) * 100 - x1
    # A bar still open at now grows with the now line (the page's script widens it).
    grows = run.closed_at is None and segment.end >= now and \
        segment.glyph in (timeline.RUNNING, timeline.RUN_OPEN, timeline.QUEUED, timeline.TIMER,
                          timeline.WAIT, timeline.PAUSED)
    until = "now" if grows else clock.iso(segment.end)
    title = f"{segment.glyph.char} {segment.glyph.meaning}: {clock.iso(segment.start)} → " \
            f"{until} ({_span(segment.start, segment.end)})"
    grow = ' data-grow="1"' if grows else ""
    return (f'<rect class="bar {css}" x="{x1:.2f}%" y="{top}" width="{width:.2f}%" '
            f'height="{height}"{grow}><title>{escape(title)}</title></rect>')


def _hit_text(mark: Mark) -> str:
    what = {"signal_wait": "wait", "schedule_to_close": "activity"}.get(mark.kind, "attempt")
    return f"hit: the {what} timed out"


def _mark(mark: Mark, y: int, axis: _Axis, run: Run, now: datetime) -> str:
    x = axis.x(mark.at)
    css = "hit" if mark.hit else "open" if mark.open else "passed"
    state = _hit_text(mark) if mark.hit else timeline.when(mark.at, run, now)
    title = f"{mark.letter} {mark.label}: {clock.iso(mark.at)} ({state})"
    return (f'<g class="mark {css}" tabindex="0"><title>{escape(title)}</title>'
            f'<line x1="{x}" x2="{x}" y1="{y - 3}" y2="{y + BAR + 3}"/>'
            f'<text x="{x}" dx="3" y="{y + BAR + 1}">{escape(mark.letter)}</text></g>')


def _mark_beyond(mark: Mark, y: int, run: Run, now: datetime, ahead: int) -> str:
    """A step's open deadline past the axis: its letter and an arrow past the lane's end."""
    title = f"{mark.letter} {mark.label}: {clock.iso(mark.at)} " \
            f"({timeline.when(mark.at, run, now)})"
    return (f'<g class="mark open beyond" tabindex="0"><title>{escape(title)}</title>'
            f'<text x="100%" dx="{6 + 16 * ahead}" y="{y + BAR - 2}">'
            f'{escape(mark.letter)}→</text></g>')


def _marker_class(marker: Marker) -> str:
    return "now" if marker.letter == "N" else "hit" if marker.hit else "deadline"


def _marker(marker: Marker, axis: _Axis, run: Run, now: datetime, height: int) -> str:
    x = axis.x(marker.at)
    css = _marker_class(marker)
    state = marker.hit or ("" if css == "now" else timeline.when(marker.at, run, now))
    title = f"{marker.letter} {marker.label}: {clock.iso(marker.at)}" + \
        (f" ({state})" if state else "")
    moving = ""
    if css == "now":
        # What the script needs to move the line: the axis in epoch milliseconds and in x.
        moving = (f' data-t0="{axis.start.timestamp() * 1000:.0f}"'
                  f' data-t1="{axis.end.timestamp() * 1000:.0f}"')
    # The line starts under its letter: a deadline's line never hides which deadline it is.
    return (f'<g class="marker {css}" tabindex="0"{moving}><title>{escape(title)}</title>'
            f'<line x1="{x}" x2="{x}" y1="{LETTER_BOTTOM}" y2="{height - 4}"/>'
            f'<text x="{x}" y="32">{escape(marker.letter)}</text></g>')


def _beyond(marker: Marker, run: Run, now: datetime, y: int) -> str:
    after = marker.at > run.started_at
    css = _marker_class(marker)
    state = marker.hit or timeline.when(marker.at, run, now)
    title = f"{marker.letter} {marker.label}: {clock.iso(marker.at)} ({state})"
    x, dx, text = ("100%", 6, f"{marker.letter}→") if after else ("0", -30, f"←{marker.letter}")
    return (f'<g class="marker {css} beyond" tabindex="0"><title>{escape(title)}</title>'
            f'<text x="{x}" dx="{dx}" y="{y}">{escape(text)}</text></g>')


# Patterns, so that a bar's kind shows without colour: stripes for running, a cross-hatch for a
# failure, dots for a backoff, waves for a signal wait, double lines for a timer.
_PATTERNS = (
    '<defs>'
    '<pattern id="p-running" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect class="pf-running" width="6" height="6"/>'
    '<line class="ps" x1="0" y1="0" x2="0" y2="6"/></pattern>'
    '<pattern id="p-failed" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<rect class="pf-failed" width="6" height="6"/>'
    '<path class="ps" d="M0 0L6 6M6 0L0 6"/></pattern>'
    '<pattern id="p-backoff" width="4" height="4" patternUnits="userSpaceOnUse">'
    '<rect class="pf-backoff" width="4" height="4"/><circle class="pd" cx="2" cy="2" r="0.8"/>'
    '</pattern>'
    '<pattern id="p-wait" width="8" height="8" patternUnits="userSpaceOnUse">'
    '<rect class="pf-wait" width="8" height="8"/><path class="ps" d="M0 4Q2 1 4 4T8 4"/>'
    '</pattern>'
    '<pattern id="p-timer" width="4" height="8" patternUnits="userSpaceOnUse">'
    '<rect class="pf-timer" width="4" height="8"/><path class="ps" d="M0 2H4M0 6H4"/></pattern>'
    '</defs>'
)
