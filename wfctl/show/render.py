"""Rich tables and panels for people; plain aligned text when the output is not a terminal."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.text import Text

from wfctl import clock, jsonvalue
from wfctl.lang import durations
from wfctl.show.layout import KEY, KEY_IF_ROOM, Column, Fitted, Flow, Titled
from wfctl.vocabulary import (
    ACTIVITY_TIMEOUTS_SHOWN,
    OPEN_ACTIVITY,
    RETRY_TIMER,
    SIGNAL_TIMER,
    TIMEOUTS,
    WORKFLOW_TIMEOUTS,
)

if TYPE_CHECKING:
    from wfctl.lang.definitions import Definitions

STATUS_STYLE = {
    "running": "cyan", "waiting": "blue", "paused": "yellow", "completed": "green",
    "failed": "bold red", "timed_out": "bold red", "cancelled": "magenta",
    "terminated": "magenta", "continued_as_new": "dim", "scheduled": "cyan", "started": "cyan",
    "retry_scheduled": "yellow", "fired": "green",
}


def console(*, stderr: bool = False) -> Console:
    """A console that colours only a terminal, and honours NO_COLOR."""
    out = Console(stderr=stderr, highlight=False, soft_wrap=False,
                  no_color="NO_COLOR" in os.environ)
    if not out.is_terminal:
        # Piped output is for grep and less: one line per row, never wrapped at 80 columns.
        out.width = 500
    return out


def plain(out: Console) -> bool:
    return not out.is_terminal or out.no_color


def emit(out: Console, *renderables: RenderableType) -> None:
    """Print; plain output loses the blanks rich pads its last column with."""
    if not plain(out):
        out.print(*renderables)
        return
    with out.capture() as captured:
        for renderable in renderables:
            out.print(renderable)
    lines = [line.rstrip() for line in captured.get().splitlines()]
    out.print(Text.from_ansi("\n".join(lines)), soft_wrap=True)


def table(out: Console, *columns: str | Column, show_header: bool = True,
          show_edge: bool = True, squeeze: bool = False) -> Fitted:
    """A table that fits the console's width without splitting a word (wfctl.show.layout)."""
    return Fitted([column if isinstance(column, Column) else Column(column)
                   for column in columns], plain=plain(out), show_header=show_header,
                  show_edge=show_edge, squeeze=squeeze)


def fields(out: Console) -> Fitted:
    """A two-column grid of names and values, without a header."""
    return table(out, Column("field", no_wrap=True, card=KEY, style="" if plain(out) else "bold"),
                 Column("value", labelled=False), show_header=False, squeeze=True)


def styled(value: str | None, style: str | None = None) -> Text:
    return Text(value if value is not None else "-", style=style or "")


def status_text(status: str | None) -> Text:
    return styled(status, STATUS_STYLE.get(status or ""))


def span(seconds: float) -> str:
    """A distance in time for reading at a glance: the two largest units, '23m 10s'."""
    return durations.format(seconds, precision=2, separator=" ")


def instant(at: datetime | None) -> str:
    """An instant as the exact ISO text `--json` prints (`-` for none)."""
    return clock.iso(at) or "-"


def relative(at: datetime | None, now: datetime) -> Text:
    """'in 23m 10s' / 'expired 5s ago', coloured by how close the instant is."""
    if at is None:
        return styled(None)
    seconds = (at - now).total_seconds()
    if seconds <= 0:
        return Text(f"expired {span(-seconds)} ago", style="bold red")
    style = "red" if seconds < 60 else "yellow" if seconds < 600 else "green"
    return Text(f"in {span(seconds)}", style=style)


def at_close(at: datetime, closed_at: datetime) -> Text:
    """Where a deadline stood when its run closed: passed, or how far it still was."""
    seconds = (at - closed_at).total_seconds()
    if seconds <= 0:
        return Text(f"passed {span(-seconds)} before the run closed", style="bold red")
    return Text(f"not reached: closed {span(seconds)} before", style="dim")


def held(at: datetime, status: str, now: datetime) -> Text:
    """A deadline that cannot fire while the instance is `status` (waiting or paused): where it
    stands, and that it waits for the instance to run again."""
    seconds = (at - now).total_seconds()
    where = f"in {span(seconds)}" if seconds > 0 else f"passed {span(-seconds)} ago"
    return Text(f"held while {status} ({where})", style="yellow")


def ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    seconds = (now - at).total_seconds()
    return f"{span(seconds)} ago" if seconds >= 0 else f"in {span(-seconds)}"


def local(at: datetime | None) -> str:
    if at is None:
        return "-"
    return at.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def zoned(at: datetime | None, timezone: str | None) -> str:
    """The instant in a schedule's zone (UTC when it names none): where its cron is read."""
    if at is None:
        return "-"
    from zoneinfo import ZoneInfo

    return at.astimezone(ZoneInfo(timezone or "UTC")).strftime("%Y-%m-%d %H:%M:%S %Z")


def seconds_text(value: float | None) -> str:
    return durations.format(value) if value is not None else "none"


def _json(value: Any, limit: int | None = None) -> str:
    """`value` as JSON; past `limit` characters a list or mapping shows its first items whole
    and counts the rest ('… 3 more'): no value is cut in the middle (`--json` has it all)."""
    shown = json.dumps(value, ensure_ascii=False, default=jsonvalue.instant_text)
    if limit is None or len(shown) <= limit or not isinstance(value, list | dict) or not value:
        return shown
    items = [json.dumps(item, ensure_ascii=False, default=jsonvalue.instant_text)
             for item in value] if isinstance(value, list) \
        else [f"{json.dumps(key, ensure_ascii=False)}: "
              f"{json.dumps(item, ensure_ascii=False, default=jsonvalue.instant_text)}"
              for key, item in value.items()]
    opening, closing = ("[", "]") if isinstance(value, list) else ("{", "}")
    kept: list[str] = []
    for item in items:
        rest = len(items) - len(kept) - 1
        more = f", … {rest} more" if rest else ""
        if kept and len(opening + ", ".join([*kept, item]) + more + closing) > limit:
            break
        kept.append(item)
    rest = len(items) - len(kept)
    if not kept or len(kept[0]) > limit:
        return f"{opening}… {len(items)} item{'s' if len(items) != 1 else ''}{closing}"
    return opening + ", ".join(kept) + (f", … {rest} more" if rest else "") + closing


# tracebacks

_FRAME = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+), in (?P<function>.*)$')
# describe's failure panel shows this many of the innermost frames; --json has them all.
SHOWN_FRAMES = 3


def _traceback_parts(text: str) -> tuple[list[list[str]], list[str]]:
    """The frames (each its lines) and the exception lines of a traceback's last section.

    A traceback cut to its tail starts mid-frame: what comes before the first whole frame
    is left out.
    """
    lines = text.rstrip("\n").splitlines()
    headers = [n for n, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    frames: list[list[str]] = []
    exception: list[str] = []
    for line in lines[headers[-1] + 1 if headers else 0:]:
        if _FRAME.match(line) and not exception:
            frames.append([line])
        elif line.startswith("  ") and frames and not exception:
            frames[-1].append(line)
        elif frames:
            exception.append(line)
    return frames, exception


def traceback_where(text: str | None) -> str | None:
    """Where the exception was raised, for one line: 'handlers.py:12 in fetch'."""
    if not text:
        return None
    frames, _ = _traceback_parts(text)
    if not frames:
        return None
    found = _FRAME.match(frames[-1][0])
    assert found is not None
    return f"{os.path.basename(found['file'])}:{found['line']} in {found['function']}"


def error_line(error: dict[str, Any]) -> str:
    """An attempt's last error on one line: the timeout and its attempt, or the exception and
    where it was raised."""
    if error.get("kind") == "timeout":
        return f"{error.get('timeout_kind')} timeout (attempt {error.get('attempt')})"
    where = traceback_where(error.get("traceback"))
    return f"{error.get('exception_class')}: {error.get('message')}" \
        + (f" (at {where})" if where else "")


def traceback_tail(text: str, frames_shown: int = SHOWN_FRAMES) -> str:
    """The innermost frames and the exception, as Python prints them; earlier ones counted."""
    frames, exception = _traceback_parts(text)
    if not frames:
        return text.rstrip("\n")
    lines = []
    earlier = len(frames) - frames_shown
    if earlier > 0:
        lines.append(f"… {earlier} earlier frame{'s' if earlier != 1 else ''} (--json has all)")
    for frame in frames[-frames_shown:]:
        lines.extend(frame)
    return "\n".join(lines + exception)


# describe

def describe(out: Console, doc: dict[str, Any], now: datetime, *, full_state: bool = False) -> None:
    """Everything `describe --json` has, for a person: header, time, activities, failure; a
    large state cut to its first lines unless `full_state`."""
    run = doc["run"]
    title = Text.assemble(
        (doc["workflow_type"], "bold"), " ", (doc["workflow_instance_id"], "bold"), "  ",
        status_text(doc["status"]), f"  run {run['run_number']} of {doc['run_count']}",
    )
    parts: list[RenderableType] = [_summary(out, doc, now), _time_panel(out, doc, now)]
    if doc["activities"]:
        parts.append(_activities(out, doc["activities"], now))
        parts.append(_activity_times(out, doc["activities"]))
    if doc["timers"]:
        timers = table(out, Column("timer", card=KEY), Column("step", card=KEY), "kind",
                       Column("fires at (UTC)", no_wrap=True), "when",
                       Column("status", card=KEY))
        for timer in doc["timers"]:
            timers.add_row(timer["timer_id"], timer["step"], timer["kind"], instant(timer["fire_at"]),
                           relative(timer["fire_at"], now) if timer["status"] == "scheduled"
                           else styled("-"), status_text(timer["status"]))
        parts.append(_titled(out, "Timers", timers))
    if doc["children"]:
        children = table(out, Column("child instance", card=KEY), "type", "step",
                         Column("status", card=KEY), Column("closed (UTC)", no_wrap=True))
        for child in doc["children"]:
            children.add_row(child["workflow_instance_id"], child["workflow_type"],
                             child["step"], status_text(child["status"]),
                             instant(child.get("closed_at")))
        parts.append(_titled(out, "Children", children))
    if doc.get("pending_signals"):
        signals = table(out, Column("signal", card=KEY), Column("received (UTC)", no_wrap=True),
                        "when")
        for signal in doc["pending_signals"]:
            signals.add_row(signal["name"], instant(signal["received_at"]),
                            ago(signal["received_at"], now))
        parts.append(_titled(out, "Signals", signals, note="received, not yet consumed"))
    if doc["failure"]:
        retry = doc.get("workflow_retry") or {}
        heading = f"Failure (attempt {retry['attempt']} runs at {instant(retry['next_attempt_at'])})" \
            if retry.get("next_attempt_at") else "Failure"
        parts.append(_failure(out, doc["failure"], heading))
    parts.append(_titled(out, "State", state_text(doc["state"], full=full_state)))
    if plain(out):
        emit(out, title, *parts)
    else:
        out.print(Titled(title, Group(*parts)))


def _summary(out: Console, doc: dict[str, Any], now: datetime) -> Fitted:
    run = doc["run"]
    step = None
    if run["current_step"] is not None:
        step = f"{run['current_step']} (step {run['step_index'] + 1})"
    closed = None
    if run["closed_at"]:
        took = (run["closed_at"] - run["started_at"]).total_seconds()
        closed = _instant_and(run["closed_at"],
                              f"after {span(max(0.0, took))}, {ago(run['closed_at'], now)}")
    rows: list[tuple[str, str | Text | Flow | None]] = [
        ("run id", run["workflow_run_id"]),
        ("run status", status_text(run["status"])),
        ("closed reason", run["closed_reason"]),
        ("continued as", f"run {run['run_number'] + 1}, id {run['continued_to_run_id']}"
         if run["continued_to_run_id"] else None),
        ("current step", step),
        ("waiting on", run["wait_kind"]),
        ("created", _instant_and(doc["created_at"], ago(doc["created_at"], now))
         if doc.get("created_at") else None),
        ("run started", _instant_and(run["started_at"], ago(run["started_at"], now))),
        ("run closed", closed),
        ("instance closed", instant(doc.get("closed_at"))
         if doc.get("closed_at") not in (None, run["closed_at"]) else None),
        ("deadline claimed", clock.iso(run["deadline_claimed_at"])),
        ("on deadline", doc["on_deadline"]),
        ("child policy", doc["child_policy"]),
        ("retry policy", chips_text(out, workflow_retry_chips(doc["retry_policy"]))
         if doc.get("retry_policy") else None),
        ("parent", doc["parent_workflow_instance_id"]),
        ("cancel", Text("requested", style="magenta") if run["cancel_requested"] else None),
        ("stop reason", run["stop_reason"]),
    ]
    summary = fields(out)
    for name, value in rows:
        if value is not None:
            summary.add_row(name, value)
    return summary


def _instant_and(at: datetime, note: str) -> Flow:
    """An instant and a note on it in brackets; on a narrow terminal the note goes under it."""
    return Flow([Text(instant(at)), Text(f"({note})")], "  ")


def _titled(out: Console, title: str, body: RenderableType,
            note: str | None = None) -> RenderableType:
    """A section of describe: a panel on a terminal, a heading line when plain."""
    if plain(out):
        return Group(Text(f"\n{title}" + (f" ({note})" if note else "")), body)
    return Titled(Text(title, style="bold"), body, note=note, frame=box.MINIMAL)


def _time_panel(out: Console, doc: dict[str, Any], now: datetime) -> RenderableType:
    """Each workflow timeout: configured value, instant in UTC and local time, how far it is.

    Piped, the instant is the exact ISO text (for grep); on a terminal it is shortened to the
    second, with the local time under it, so that the table fits beside the countdown.
    """
    run = doc["run"]
    short = not plain(out)
    instants = [Column("at", no_wrap=True)] if short else \
        [Column("at (UTC)"), Column("local", no_wrap=True)]
    grid = table(out, Column("timeout", card=KEY), Column("configured", no_wrap=True, card=KEY),
                 *instants, "when")
    rows = [
        ("execution timeout", doc["execution_timeout_seconds"], run["execution_deadline_at"]),
        ("run timeout", run["run_timeout_seconds"], run["run_deadline_at"]),
        ("deadline", doc["deadline_seconds"], doc["deadline_at"]),
    ]
    for name, seconds, at in rows:
        if at is None:
            when = styled("-")
        elif run["closed_at"] is not None:
            when = at_close(at, run["closed_at"])
        elif name == "deadline" and doc.get("deadline_held_while"):
            when = held(at, doc["deadline_held_while"], now)
        else:
            when = relative(at, now)
        instants = [_utc_and_local(at)] if short else [instant(at), local(at)]
        grid.add_row(name, seconds_text(seconds), *instants, when)
    task_timeout = seconds_text(run["workflow_task_timeout_seconds"])
    grid.add_row("workflow task timeout", task_timeout, *(["-"] * (1 if short else 2)),
                 styled("each workflow task", "dim"))
    retry = doc.get("workflow_retry")
    if retry:
        at = retry["next_attempt_at"]
        instants = [_utc_and_local(at)] if short else [instant(at), local(at)]
        when = Text("next attempt ").append_text(relative(at, now)) if at else styled("-")
        grid.add_row("retry attempt", f"{retry['attempt']} of {retry['max_attempts']}",
                     *instants, when)
    local_zone = now.astimezone().strftime("%Z")
    return _titled(out, "Time", grid, note=f"now {clock.iso(now)}, local zone {local_zone}")


def _utc_and_local(at: datetime | None) -> str:
    if at is None:
        return "-"
    utc = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    here = local(at)
    return utc if here[:19] == utc[:19] else f"{utc}\n{here}"


def retry_chips(policy: dict[str, Any]) -> list[str]:
    """The retry policy as short chips: '3 attempts', 'backoff 1s→1m', 'start-to-close 5m'."""
    chips = [f"{policy['max_attempts']} attempt{'s' if policy['max_attempts'] != 1 else ''}"]
    # Policies recorded by earlier versions list a wait after the last attempt too: only the
    # `max_attempts - 1` waits that happen are shown.
    waits = policy["backoff_seconds"][:max(policy["max_attempts"] - 1, 0)]
    if waits:
        chips.append(f"backoff {durations.format(waits[0])}→{durations.format(max(waits))}"
                     if len(set(waits)) > 1 else f"backoff {durations.format(waits[0])}")
    for timeout in ACTIVITY_TIMEOUTS_SHOWN:
        if policy.get(timeout.policy_key) is not None:
            chips.append(f"{timeout.label} {durations.format(policy[timeout.policy_key])}")
    if policy.get("non_retryable"):
        chips.append("non-retryable " + ",".join(policy["non_retryable"]))
    return chips


def workflow_retry_chips(policy: dict[str, Any]) -> list[str]:
    """A workflow retry policy as chips: '3 attempts', 'backoff 1m→4m', 'when activity,run_timeout'."""
    chips = retry_chips({"max_attempts": policy["max_attempts"],
                         "backoff_seconds": policy["backoff_seconds"]})
    return [*chips, "when " + ",".join(policy["when"])]


def chips_text(out: Console, chips: list[str]) -> Flow:
    """The chips as they fit the width, each whole on one line."""
    if plain(out):
        return Flow([Text(chip) for chip in chips], " · ")
    return Flow([Text(f" {chip} ", style="black on grey78") for chip in chips])


def _activities(out: Console, activities: list[dict[str, Any]], now: datetime) -> RenderableType:
    grid = table(out, Column("step", card=KEY), Column("status", card=KEY),
                 Column("attempt", no_wrap=True, card=KEY), "retry policy", "open deadlines",
                 "last heartbeat", "last error")
    for activity in activities:
        deadlines = Text()
        if activity["status"] == "retry_scheduled" and activity.get("available_at"):
            deadlines.append("next attempt ")
            deadlines.append_text(relative(activity["available_at"], now))
        if activity["status"] in OPEN_ACTIVITY:
            for timeout in ACTIVITY_TIMEOUTS_SHOWN:
                if activity[timeout.column] is not None:
                    if deadlines:
                        deadlines.append("; " if plain(out) else "\n")
                    deadlines.append(f"{timeout.label} ")
                    deadlines.append_text(relative(activity[timeout.column], now))
        heartbeat = "-"
        if activity["last_heartbeat_at"]:
            heartbeat = ago(activity["last_heartbeat_at"], now)
            # A heartbeat without details shows none (not `null`).
            if activity["last_heartbeat_details"] is not None:
                heartbeat += f" {_json(activity['last_heartbeat_details'])}"
        error = activity.get("last_error")
        error_text = styled("-")
        if error:
            error_text = styled(error_line(error), "red")
        status = status_text(activity["status"])
        if activity["superseded"]:
            status.append(" (retried)", style="dim")
        grid.add_row(activity["step"], status,
                     f"{activity['attempt']}/{activity['max_attempts']}",
                     chips_text(out, retry_chips(activity["retry_policy"])),
                     deadlines if deadlines else styled("-"), heartbeat, error_text)
    return _titled(out, "Activities", grid)


def _activity_times(out: Console, activities: list[dict[str, Any]]) -> RenderableType:
    """Each activity's ids and every instant it recorded, deadlines included."""
    grid = table(out, Column("activity", card=KEY), Column("step", card=KEY), "handler", "queue",
                 "times (UTC)")
    for activity in activities:
        times = []
        for label, key in (("scheduled", "scheduled_at"), ("available", "available_at"),
                           ("started", "started_at"), ("closed", "closed_at"),
                           *((f"{t.label} deadline", t.column) for t in ACTIVITY_TIMEOUTS_SHOWN)):
            value = activity.get(key)
            if value is not None and not (key == "available_at"
                                          and value == activity.get("scheduled_at")):
                times.append(f"{label} {instant(value)}")
        error = activity.get("last_error")
        if error and error.get("kind") == "timeout" and error.get("deadline_at") is not None:
            timeout = TIMEOUTS[error["timeout_kind"]]
            # The timed-out attempt's deadline, which the attempt after it no longer holds.
            if activity.get(timeout.column) != error["deadline_at"]:
                times.append(f"{timeout.label} deadline {instant(error['deadline_at'])} "
                             f"(attempt {error['attempt']} timed out)")
        grid.add_row(activity["activity_id"], activity["step"], activity["handler"],
                     activity.get("queue") or "-", ("; " if plain(out) else "\n").join(times))
    return _titled(out, "Activity times", grid)


def _failure(out: Console, failure: dict[str, Any], title: str = "Failure") -> RenderableType:
    grid = fields(out)
    grid.add_row("category", Text(str(failure["failure_category"]), style="bold red"))
    if failure.get("timeout_kind"):
        grid.add_row("timeout kind", Text(str(failure["timeout_kind"]), style="bold yellow"))
    grid.add_row("message", Text(str(failure.get("message") or "-")))
    for key, value in failure.items():
        if key in ("failure_category", "timeout_kind", "message", "traceback") or value is None:
            continue
        shown = _shown(value, None)
        grid.add_row(key.replace("_", " "), Text(shown))
    if failure.get("traceback"):
        grid.add_row("traceback", Text(traceback_tail(failure["traceback"]),
                                       style="" if plain(out) else "dim"))
    return _titled(out, title, grid)


# A large state is shown to this many lines, each to this many characters; --full-state shows
# it all (and --json has it whole).
STATE_LINES = 20
STATE_LINE_CHARS = 200


def state_text(state: Any, *, full: bool = False) -> Text:
    """The state as indented JSON: whole, or its first lines and what is left, counted."""
    lines = json.dumps(state, indent=2, ensure_ascii=False).splitlines()
    if full:
        return Text("\n".join(lines))
    shown = [line if len(line) <= STATE_LINE_CHARS else line[:STATE_LINE_CHARS - 1] + "…"
             for line in lines[:STATE_LINES]]
    # The closing brace is not worth a line of its own in the count.
    rest = len(lines) - 1 - STATE_LINES
    text = Text("\n".join(shown if rest > 0 else shown + lines[STATE_LINES:]))
    if rest > 0:
        # With indent=2, a key of the state itself opens a line indented by exactly two blanks.
        keys = sum(1 for line in lines[STATE_LINES:] if line.startswith('  "'))
        what = f"{keys} more key{'s' if keys != 1 else ''}" if keys else \
            f"{rest} more line{'s' if rest != 1 else ''}"
        text.append(f"\n… {what}, --full-state", style="dim")
    return text


# history

# The events of a stop an operator (or a parent's close policy) asked for, and what they say.
_STOPS = {"WorkflowCancelRequested": "Cancel requested", "WorkflowCancelled": "Workflow cancelled",
          "WorkflowTerminated": "Workflow terminated"}


def event_line(event: dict[str, Any]) -> str:
    """One line on what an event means, naming the timeout kind where there is one."""
    line = _EVENT_LINES.get(event["event_type"])
    return line(event["attributes"], event) if line else _generic(event["attributes"])


def _activity_timed_out(a: dict[str, Any], event: dict[str, Any]) -> str:
    line = f"Activity {a.get('step')} timed out: {a['timeout_kind']}"
    if a["timeout_kind"] == "heartbeat":
        if a.get("last_heartbeat_at"):
            gap = event["at"] - a["last_heartbeat_at"]
            line += f" (last heartbeat {span(gap.total_seconds())} ago)"
        else:
            line += " (no heartbeat recorded)"
    line += f"; attempt {a['attempt']}, deadline {clock.iso(a['deadline_at'])}"
    if a.get("last_heartbeat_details") is not None:
        line += f", last details {_json(a['last_heartbeat_details'], 60)}"
    return line


def _activity_retry_scheduled(a: dict[str, Any], event: dict[str, Any]) -> str:
    failure = a.get("failure") or {}
    why = f"timed out: {a['timeout_kind']}" if a.get("timeout_kind") else \
        f"{a['reason']}: {failure.get('exception_class')}" + _at(failure.get("traceback"))
    return (f"Activity {a.get('step')} attempt {a['attempt']} {why}; attempt {a['next_attempt']} of "
            f"{a['max_attempts']} at {clock.iso(a['retry_available_at'])} "
            f"(backoff {durations.format(a['backoff_seconds'])})")


def _activity_failed(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Activity {a.get('step')} failed: {a['exception_class']}: {a['message']}" + \
        ("" if a.get("retryable", True) else " (not retryable)") + _at(a.get("traceback"))


def _activity_scheduled(a: dict[str, Any], event: dict[str, Any]) -> str:
    return (f"Activity {a.get('step')} ({a['handler']}) scheduled on queue {a.get('queue')}, "
            f"attempt {a['attempt']} of {a['max_attempts']}" + _deadlines(a))


def _activity_started(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Activity {a.get('step')} attempt {a['attempt']} started by {a['worker_id']}" + \
        _deadlines(a)


def _activity_completed(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Activity {a.get('step')} completed (attempt {a['attempt']}): {_json(a.get('result'), 80)}"


def _activity_cancelled(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Activity {a.get('step')} attempt {a['attempt']} cancelled: {a.get('reason')}"


def _workflow_started(a: dict[str, Any], event: dict[str, Any]) -> str:
    limits = [f"{label} {durations.format(a[seconds])} (until {clock.iso(a[at])})"
              for label, seconds, at in (
                  ("execution timeout", "execution_timeout_seconds", "execution_deadline_at"),
                  ("run timeout", "run_timeout_seconds", "run_deadline_at"),
                  ("deadline", "deadline_seconds", "deadline_at"))
              if a.get(seconds) is not None]
    return (f"{a.get('workflow_type')} run {a.get('run_number')} started"
            + (f"; {', '.join(limits)}" if limits else "; no workflow timeouts"))


def _workflow_timed_out(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Workflow timed out: {a['timeout_kind']} (deadline {clock.iso(a['deadline_at'])})"


def _workflow_task_timed_out(a: dict[str, Any], event: dict[str, Any]) -> str:
    return (f"Workflow task timed out: {a['timeout_kind']} "
            f"(deadline {clock.iso(a.get('deadline_at'))}, "
            f"scheduled #{a['scheduled_event_id']}, started #{a['started_event_id']})")


def _workflow_deadline_exceeded(a: dict[str, Any], event: dict[str, Any]) -> str:
    error = a.get("handler_error")
    handler = f"; {a['handler']} raised {error['exception_class']}: {error['message']}" \
        if error else (f"; {a['handler']} ran" if a.get("handler") else "")
    if a.get("handler_already_ran"):
        handler = f"; {a['handler']} not run again (it ran for this deadline)"
    return f"Deadline exceeded (deadline {clock.iso(a['deadline_at'])}){handler}"


def _workflow_failed(a: dict[str, Any], event: dict[str, Any]) -> str:
    timeout = f" [{a['timeout_kind']}]" if a.get("timeout_kind") else ""
    return f"Workflow failed ({a['failure_category']}{timeout}): {a['message']}"


def _child_workflow_timed_out(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Child {a['child_instance_id']} timed out: {a.get('timeout_kind')}"


def _stop(a: dict[str, Any], event: dict[str, Any]) -> str:
    kind = event["event_type"]
    reason = a.get("cancel_reason" if kind == "WorkflowCancelled" else "reason")
    return _STOPS[kind] + (f": {reason}" if reason else " (no reason given)")


def _workflow_retry_scheduled(a: dict[str, Any], event: dict[str, Any]) -> str:
    return (f"Retry policy: attempt {a['attempt']} of {a['max_attempts']} at "
            f"{clock.iso(a['next_attempt_at'])} (backoff {durations.format(a['delay_seconds'])}), "
            f"after {_RETRY_CAUSES.get(a['cause'], a['cause']).format(step=a.get('step'))}")


def _workflow_retried(a: dict[str, Any], event: dict[str, Any]) -> str:
    by = "by its retry policy" if a.get("retried_by") == "retry_policy" else "by wfctl retry"
    attempt = f", attempt {a['attempt']} of {a['max_attempts']}" if a.get("attempt") else ""
    if a.get("retried_by") == "command" and a.get("attempt"):
        attempt += " (a new series)"
    return (f"Retried {by} from step {a.get('step')}{attempt}; deadline {a.get('deadline_change')}"
            + (f" ({clock.iso(a['deadline_at'])})" if a.get("deadline_at") else "")
            + (f"; run deadline {clock.iso(a['run_deadline_at'])}" if a.get("run_deadline_at")
               else "")
            + (f"; reason: {a['reason']}" if a.get("reason") else ""))


def _timer_cancelled(a: dict[str, Any], event: dict[str, Any]) -> str:
    # Only a retry's backoff timer has a line of its own: the attempt it held will not run.
    if a.get("kind") != RETRY_TIMER:
        return _generic(a)
    return f"Retry backoff cancelled ({a.get('reason')}): the attempt due at " \
           f"{clock.iso(a['fire_at'])} " \
           "will not run"


def _timer_scheduled(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Timer {a.get('step')} ({a['kind']}) fires at {clock.iso(a['fire_at'])}"


def _timer_fired(a: dict[str, Any], event: dict[str, Any]) -> str:
    return f"Timer {a.get('step')} ({a['kind']}) fired"


# The line for each kind of event that has one of its own (from its attributes and the event,
# for its time); any other event is shown by its attributes.
_EVENT_LINES: dict[str, Callable[[dict[str, Any], dict[str, Any]], str]] = {
    "ActivityTimedOut": _activity_timed_out,
    "ActivityRetryScheduled": _activity_retry_scheduled,
    "ActivityFailed": _activity_failed,
    "ActivityScheduled": _activity_scheduled,
    "ActivityStarted": _activity_started,
    "ActivityCompleted": _activity_completed,
    "ActivityCancelled": _activity_cancelled,
    "WorkflowStarted": _workflow_started,
    "WorkflowTimedOut": _workflow_timed_out,
    "WorkflowTaskTimedOut": _workflow_task_timed_out,
    "WorkflowDeadlineExceeded": _workflow_deadline_exceeded,
    "WorkflowFailed": _workflow_failed,
    "ChildWorkflowTimedOut": _child_workflow_timed_out,
    **dict.fromkeys(_STOPS, _stop),
    "WorkflowRetryScheduled": _workflow_retry_scheduled,
    "WorkflowRetried": _workflow_retried,
    "TimerCancelled": _timer_cancelled,
    "TimerScheduled": _timer_scheduled,
    "TimerFired": _timer_fired,
}


# What a retry answers, as WorkflowRetryScheduled's line names it.
_RETRY_CAUSES = {"activity": "step {step} failed", "run_timeout": "the run timed out",
                 "signal_wait": "the signal wait {step} timed out"}


def _at(traceback: str | None) -> str:
    where = traceback_where(traceback)
    return f" at {where}" if where else ""


def _deadlines(attributes: dict[str, Any]) -> str:
    shown = [f"{t.label} until {clock.iso(attributes[t.column])}" for t in ACTIVITY_TIMEOUTS_SHOWN
             if attributes.get(t.column)]
    return f"; {', '.join(shown)}" if shown else ""


def _generic(attributes: dict[str, Any]) -> str:
    skip = {"scheduled_event_id", "started_event_id", "retry_policy", "input"}
    parts = []
    for key, value in attributes.items():
        if key in skip or value is None or value == {} or value == []:
            continue
        parts.append(f"{key}={_shown(value, 60)}")
    refs = [f"#{attributes[k]}" for k in ("scheduled_event_id", "started_event_id")
            if attributes.get(k) is not None]
    if refs:
        parts.append("refs " + ",".join(refs))
    return " ".join(parts)


def _shown(value: Any, limit: int | None) -> str:
    """A value of a record for a line: text and instants as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return instant(value)
    return _json(value, limit)


# Why open work was cancelled, when nothing went wrong: the awaited signal came (its wait's
# timeout is moot), or the run ended well (completed, or continued as a new run).
BENIGN_CANCEL_REASONS = ("signal_received", "completed", "continued_as_new")
# Why it was cancelled when someone asked for it: an operator, or a parent's close policy.
STOP_REASONS = ("cancelled", "terminated")
TONE_STYLE = {"timeout": "bold red", "failure": "bold red", "stopped": "magenta", "ok": "green"}


def tone(event: dict[str, Any]) -> str:
    """What an event says about the run, so that only what went wrong looks wrong: `timeout`
    (a deadline ran out), `failure` (something failed, or was cut short by a failure),
    `stopped` (someone asked it to stop), `ok` (a step or the run completed), or '' (news).

    A cancellation is judged by its reason: a timer cancelled because its signal came is news.
    """
    kind, attributes = event["event_type"], event["attributes"]
    if kind in ("WorkflowCompleted", "ActivityCompleted"):
        return "ok"
    if "TimedOut" in kind or kind == "WorkflowDeadlineExceeded" or \
            attributes.get("timeout_kind") or \
            (kind == "TimerFired" and attributes.get("kind") == SIGNAL_TIMER):
        return "timeout"
    if kind in _STOPS:
        return "stopped"
    if kind in ("ActivityCancelled", "TimerCancelled"):
        reason = attributes.get("reason")
        return "" if reason in BENIGN_CANCEL_REASONS else \
            "stopped" if reason in STOP_REASONS else "failure"
    return "failure" if kind.endswith(("Failed", "RetryScheduled")) else ""


def history(out: Console, events: list[dict[str, Any]], *, start_at: datetime | None,
            show_run: bool = False, header: bool = True) -> None:
    """seq, time since start, time, event, details; batches printed by --follow line up."""
    # Batches printed by --follow come one under the other, without blank lines between them,
    # and line up: the columns before the details keep their widths.
    columns = [Column("seq", no_wrap=True, min_width=4, card=KEY),
               Column("run", no_wrap=True, min_width=3, card=KEY),
               Column("+time", no_wrap=True, min_width=9, card=KEY),
               Column("at (UTC)", min_width=29, card=KEY_IF_ROOM, labelled=False),
               Column("event", no_wrap=True, min_width=25, card=KEY),
               Column("details", labelled=False)]
    if not show_run:
        del columns[1]
    grid = table(out, *columns, show_header=header, show_edge=False)
    for event in events:
        shade = tone(event)
        alarm = shade in ("timeout", "failure")
        style = TONE_STYLE.get(shade)
        offset = "-"
        if start_at:
            offset = "+" + span(max(0.0, (event["at"] - start_at).total_seconds()))
        details = Text(event_line(event), style="yellow" if alarm else "")
        kind = event["attributes"].get("timeout_kind")
        if kind and not plain(out):
            details.highlight_words([kind], style="bold reverse")
        row: list[str | Text] = [str(event["seq"]), offset, instant(event["at"]),
                                 styled(event["event_type"], style), details]
        if show_run:
            row.insert(1, str(event["run_number"]))
        grid.add_row(*row)
    emit(out, grid)


# list, validate, start

def instances(out: Console, rows: list[dict[str, Any]], now: datetime, *,
              more: int = 0) -> None:
    """The instances; `more`: how many more match past the limit, said under the table."""
    if more > 0:
        emit(out, instances_table(out, rows, now),
             Text(f"… {more} more (the newest {len(rows)} shown; --limit N shows more)",
                  style="dim"))
    else:
        emit(out, instances_table(out, rows, now))


def instances_table(out: Console, rows: list[dict[str, Any]], now: datetime) -> Fitted:
    """The instances; on a narrow terminal the run, then the age, then the deadline give way."""
    grid = table(out, "instance", "type", Column("status", no_wrap=True), Column("run", drop=3),
                 Column("created", no_wrap=True, drop=2), Column("nearest deadline", drop=1))
    for row in rows:
        nearest = row["nearest_deadline"]
        when = Flow([Text(nearest["kind"]), relative(nearest["at"], now)]) \
            if nearest else styled("-")
        grid.add_row(row["workflow_instance_id"], row["workflow_type"],
                     status_text(row["status"]), str(row["run_number"]),
                     ago(row["created_at"], now), when)
    return grid


def definitions(out: Console, defs: Definitions) -> None:
    grid = table(out, Column("workflow type", card=KEY), "steps", "execution timeout",
                 "run timeout", "deadline", "on deadline", "task timeout", "child policy",
                 "retry", "retention")
    for wf in defs.types.values():
        grid.add_row(wf.name, " → ".join(s.name for s in wf.steps),
                     seconds_text(wf.execution_timeout), seconds_text(wf.run_timeout),
                     seconds_text(wf.deadline), wf.on_deadline or "-",
                     seconds_text(wf.workflow_task_timeout), wf.child_policy,
                     " · ".join(workflow_retry_chips(wf.retry.view())) if wf.retry else "-",
                     durations.format(wf.retention) if wf.retention else "forever")
    emit(out, grid)


def started(out: Console, result: dict[str, Any], now: datetime) -> None:
    word = {"started_new": "Started", "returned_existing_active": "Already running"}.get(
        result["outcome"], "Rejected")
    lines = [Text.assemble((word, "bold"), f" {result['workflow_type']} ",
                           (result["workflow_instance_id"], "bold"),
                           f"  run {result['workflow_run_id']}")]
    for label, key in (*((t.label, t.column) for t in WORKFLOW_TIMEOUTS),
                       ("deadline", "deadline_at")):
        if result[key]:
            lines.append(Text.assemble(f"  {label}: {instant(result[key])} (",
                                       relative(result[key], now),
                                       ")"))
    emit(out, *lines)
