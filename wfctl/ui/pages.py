"""What the pages show, made from the documents of `list`, `describe` and `history`: the rows of the
Time panel with their countdowns, the activities, the history's lines, the filters and the actions.
The words are the terminal's (wfctl.show.render), so that meaning never rests on colour alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wfctl import clock, jsonvalue
from wfctl.client import Client
from wfctl.errors import InvalidInput, brief
from wfctl.lang import durations
from wfctl.lang.since import back_from
from wfctl.show import render
from wfctl.vocabulary import (
    ACTIVITY_TIMEOUTS_SHOWN,
    EVENT_TYPES,
    INSTANCE_STATUSES,
    OPEN_ACTIVITY,
    RETRYABLE_RUN,
)

# Rows on a page of the list (newest first); the next page starts after its last row.
PAGE = 100
# `list --json`'s default, which `/api/instances` keeps.
API_LIMIT = 50
EVENT_TYPE_CHOICES = EVENT_TYPES
DONE = {
    "signal": "Signal sent.", "pause": "Paused: no new step starts until resume.",
    "resume": "Resumed.", "cancel": "Cancel requested.", "terminate": "Terminated.",
    "retry": "Retrying from the step that failed.",
}
# What each action can apply to, by instance status.
CLOSED = ("completed", "failed", "timed_out", "cancelled", "terminated")


def local(at: datetime | None) -> str:
    """The instant in this server's zone, as describe shows it (pages show the browser's too)."""
    return render.local(at)


def span(seconds: float) -> str:
    """A countdown's distance: the terminal's form with one unit more, so that a page's
    countdown moves every second ('1h 59m 58s')."""
    return durations.format(seconds, precision=3, separator=" ")


def relative(at: datetime | None, now: datetime) -> str:
    """'in 23m 10s' / 'expired 5s ago': the terminal's words."""
    if at is None:
        return "-"
    seconds = (at - now).total_seconds()
    return f"expired {span(-seconds)} ago" if seconds <= 0 else f"in {span(seconds)}"


def urgency(at: datetime | None, now: datetime) -> str:
    """The class a countdown starts with (the page's script moves it on): as the terminal
    colours it."""
    if at is None:
        return ""
    seconds = (at - now).total_seconds()
    return "expired" if seconds <= 0 else "red" if seconds < 60 else \
        "yellow" if seconds < 600 else "green"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=jsonvalue.instant_text)


def event_types(given: Iterable[str] | None) -> tuple[str, ...]:
    chosen = tuple(name for name in given or () if name)
    unknown = [name for name in chosen if name not in EVENT_TYPES]
    if unknown:
        raise InvalidInput(f"event_type: unknown event type {unknown[0]!r}")
    return chosen


@dataclass
class ListFilters:
    """The list's filters as the query string gives them, with `list`'s meaning (`schedule`:
    the instances a schedule started), and where the page starts: `before` names the last row
    of the page before it (`created_at,id`)."""

    status: str | None = None
    workflow_type: str | None = None
    since: str | None = None
    since_at: datetime | None = None
    limit: int = API_LIMIT
    before: tuple[str, str] | None = None
    schedule: str | None = None

    statuses = INSTANCE_STATUSES

    @classmethod
    def read(cls, arg: Callable[[str], str | None], now: datetime, *,
             paged: bool = False) -> ListFilters:
        status = arg("status") or None
        if status is not None and status not in INSTANCE_STATUSES:
            raise InvalidInput(f"status must be one of {', '.join(INSTANCE_STATUSES)} "
                               f"(got {status!r})")
        since = (arg("since") or "").strip() or None
        filters = cls(status, (arg("type") or "").strip() or None, since,
                      since_instant(since, now) if since else None)
        filters.before = cursor(arg("before"))
        filters.schedule = (arg("schedule") or "").strip() or None
        # A page shows PAGE rows; one more says whether there is a next.
        filters.limit = PAGE + 1 if paged else _count("limit", arg("limit"), API_LIMIT)
        return filters

    def query(self, **changes: Any) -> dict[str, Any]:
        """The query string of this view with `changes` (the pager's links)."""
        given = {"status": self.status, "type": self.workflow_type, "since": self.since,
                 "schedule": self.schedule,
                 "before": ",".join(self.before) if self.before else None, **changes}
        return {name: value for name, value in given.items() if value not in (None, "")}

    @property
    def chosen(self) -> bool:
        """Whether any filter narrows the list (the page offers to clear them)."""
        return any((self.status, self.workflow_type, self.since, self.schedule))

    def after(self, row: dict[str, Any]) -> dict[str, Any]:
        """The query string of the page that goes on after `row`."""
        return self.query(before=f"{clock.iso(row['created_at'])},{row['workflow_instance_id']}")


def cursor(text: str | None) -> tuple[str, str] | None:
    """`before`: the created_at of the last row of the page before, a comma, and its id."""
    if not text:
        return None
    at, comma, instance_id = text.partition(",")
    try:
        parsed = datetime.fromisoformat(at)
    except ValueError:
        parsed = None
    if not comma or parsed is None or parsed.tzinfo is None:
        raise InvalidInput(f"before: expected the created_at of an instance, a comma and its id "
                           f"(got {brief(text)})")
    return at, instance_id


def _count(name: str, text: str | None, default: int) -> int:
    if text in (None, ""):
        return default
    if not text.isdigit() or not 1 <= int(text) <= 10**12:
        raise InvalidInput(f"{name} must be a whole number of at least 1 (got {text!r})")
    return int(text)


def since_instant(text: str, now: datetime) -> datetime:
    """`list --since`'s forms and meaning (wfctl.lang.since.back_from): a duration back from now
    (`1h`), or an ISO date or instant, UTC when it names no offset."""
    try:
        return back_from(text, lambda: now)()
    except durations.DurationError as exc:
        raise InvalidInput(f"since: {exc}") from None


# the instance page


@dataclass
class Deadline:
    """One row of the Time panel."""

    name: str
    configured: str
    at: datetime | None
    state: str          # "open": counting down; "closed": where it stood at the close; "held"
    note: str = ""


def instance_view(doc: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The parts of the instance page that are more than a field of the document."""
    run = doc["run"]
    return {
        "deadlines": time_rows(doc, now),
        "activities": [activity_row(activity) for activity in doc["activities"]],
        "summary": summary_rows(doc),
        "extra": {key: value for key, value in doc.items() if key not in SHOWN},
        "run_extra": {key: value for key, value in run.items() if key not in RUN_SHOWN},
        "retry_chips": render.workflow_retry_chips(doc["retry_policy"])
        if doc.get("retry_policy") else [],
        "traceback": (doc.get("failure") or {}).get("traceback"),
        "zone": now.astimezone().strftime("%Z"),
        "runs": range(doc["run_count"], 0, -1),
    }


# The fields of describe the page shows in a section of their own; any other (a field added
# later) is listed under "More" as it is, so that it shows up at once.
SHOWN = {"found", "workflow_instance_id", "workflow_type", "status", "execution_timeout_seconds",
         "deadline_seconds", "deadline_at", "deadline_held_while", "on_deadline",
         "child_policy", "retry_policy", "parent_workflow_instance_id", "created_at",
         "closed_at", "run_count", "run", "workflow_retry", "activities", "timers", "children",
         "pending_signals", "failure", "state"}
RUN_SHOWN = {"workflow_run_id", "run_number", "status", "closed_reason", "run_timeout_seconds",
             "execution_deadline_at", "run_deadline_at", "workflow_task_timeout_seconds",
             "started_at", "closed_at", "current_step", "step_index", "wait_kind",
             "cancel_requested", "stop_reason", "deadline_claimed_at", "continued_to_run_id"}


def time_rows(doc: dict[str, Any], now: datetime) -> list[Deadline]:
    """Each workflow timeout, as describe's Time panel lists it."""
    run = doc["run"]
    rows = []
    for name, seconds, at in (
            ("execution timeout", doc["execution_timeout_seconds"], run["execution_deadline_at"]),
            ("run timeout", run["run_timeout_seconds"], run["run_deadline_at"]),
            ("deadline", doc["deadline_seconds"], doc["deadline_at"])):
        configured = render.seconds_text(seconds)
        if at is None:
            rows.append(Deadline(name, configured, None, "none"))
        elif run["closed_at"] is not None:
            rows.append(Deadline(name, configured, at, "closed",
                                 render.at_close(at, run["closed_at"]).plain))
        elif name == "deadline" and doc.get("deadline_held_while"):
            rows.append(Deadline(name, configured, at, "held",
                                 _held_note(doc["deadline_held_while"], at, now)))
        else:
            rows.append(Deadline(name, configured, at, "open"))
    retry = doc.get("workflow_retry")
    if retry:
        at = retry["next_attempt_at"]
        rows.append(Deadline("retry attempt", f"{retry['attempt']} of {retry['max_attempts']}",
                             at, "open" if at else "none", "next attempt" if at else ""))
    return rows


def _held_note(status: str, at: datetime, now: datetime) -> str:
    """A deadline that cannot fire while the instance is `status`: when it is due, and what
    happens then: nothing while it waits, and a passed one fails it once it runs again."""
    seconds = (at - now).total_seconds()
    if seconds > 0:
        return f"held while {status}: due in {span(seconds)}, cannot fire while {status}"
    return f"held while {status}: passed {span(-seconds)} ago, fails it once it runs again"


def activity_row(activity: dict[str, Any]) -> dict[str, Any]:
    """An activity with its open deadlines (each to count down) and its retry chips."""
    deadlines = []
    if activity["status"] == "retry_scheduled" and activity.get("available_at"):
        deadlines.append(("next attempt", activity["available_at"]))
    if activity["status"] in OPEN_ACTIVITY:
        for timeout in ACTIVITY_TIMEOUTS_SHOWN:
            if activity.get(timeout.column) is not None:
                deadlines.append((timeout.label, activity[timeout.column]))
    error = activity.get("last_error")
    return {
        **activity,
        "chips": render.retry_chips(activity["retry_policy"]) if activity.get("retry_policy")
        else [],
        "deadlines": deadlines,
        "error": render.error_line(error) if error else None,
        "traceback": error.get("traceback") if error else None,
    }


def summary_rows(doc: dict[str, Any]) -> list[tuple[str, Any]]:
    """describe's summary: name and value, only the values that are set."""
    run = doc["run"]
    step = f"{run['current_step']} (step {run['step_index'] + 1})" \
        if run.get("current_step") is not None else None
    rows = [
        ("run id", run["workflow_run_id"]),
        ("run status", run["status"]),
        ("closed reason", run.get("closed_reason")),
        ("continued as", f"run {run['run_number'] + 1}, id {run['continued_to_run_id']}"
         if run.get("continued_to_run_id") else None),
        ("current step", step),
        ("waiting on", run.get("wait_kind")),
        ("on deadline", doc.get("on_deadline")),
        ("child policy", doc.get("child_policy")),
        ("parent", doc.get("parent_workflow_instance_id")),
        ("cancel", "requested" if run.get("cancel_requested") else None),
        ("stop reason", run.get("stop_reason")),
        ("deadline claimed", run.get("deadline_claimed_at")),
    ]
    return [(name, value) for name, value in rows if value is not None]


def timeline_svg(doc: dict[str, Any], events: list[dict[str, Any]], now: datetime) -> list[Any]:
    from wfctl.ui import svg

    return svg.charts(doc, events, now)


# history


def history_rows(events: list[dict[str, Any]], start: datetime | None) -> list[dict[str, Any]]:
    """Each event with its line (the terminal's), its offset from the start, and its tone
    (wfctl.show.render.tone): a timeout, a failure, a stop, a completion, or news."""
    rows = []
    for event in events:
        offset = "+" + render.span(max(0.0, (event["at"] - start).total_seconds())) \
            if start else "-"
        rows.append({**event, "offset": offset, "flag": render.tone(event),
                     "parts": line_parts(render.event_line(event),
                                         event["attributes"].get("timeout_kind"))})
    return rows


# An instant as history's lines write it (clock.iso): kept on one line, as the terminal keeps it.
_INSTANT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?[+-]\d\d:\d\d")


def line_parts(line: str, timeout_kind: str | None) -> list[tuple[str, str]]:
    """A history line in pieces, each with what it is: `kind` (the timeout kind, which stands
    out as the terminal highlights it), `instant` (never broken at its hyphens) or ''."""
    words = [_INSTANT.pattern] + ([re.escape(timeout_kind)] if timeout_kind else [])
    parts: list[tuple[str, str]] = []
    written = 0
    for found in re.finditer("|".join(words), line):
        if found.start() > written:
            parts.append((line[written:found.start()], ""))
        parts.append((found.group(0), "kind" if found.group(0) == timeout_kind else "instant"))
        written = found.end()
    if written < len(line):
        parts.append((line[written:], ""))
    return parts


# actions


def actions(client: Client, doc: dict[str, Any]) -> dict[str, Any]:
    """Which actions apply to the instance as it is, and what they offer."""
    status = doc["status"]
    open_ = status not in CLOSED and status != "continued_as_new"
    return {
        "signal": signal_names(client, doc["workflow_instance_id"]) if open_ else [],
        "pause": open_ and status != "paused",
        "resume": status == "paused",
        "cancel": open_ and not doc["run"].get("cancel_requested"),
        "terminate": open_,
        "retry": status in RETRYABLE_RUN,
        "deadline_at": doc.get("deadline_at"),
    }


def signal_names(client: Client, instance_id: str) -> list[str]:
    """The signals the instance's type waits for (its wait_for_signal steps, branches too):
    the same names `wfctl signal` accepts without --force."""
    return list(client.signal_names(instance_id))


def signal_data(text: str) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        value = jsonvalue.loads(text, "data")
    except jsonvalue.JSONValueError as exc:
        raise InvalidInput(str(exc)) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"data: expected a JSON object (got {type(value).__name__})")
    return value


def action_summary(action: str, field: Callable[[str], str]) -> str:
    """What the confirmation page asks about."""
    reason = f" (reason: {field('reason')})" if field("reason") else ""
    if action == "signal":
        return f"Send the signal {field('name')!r}" + \
            (f" with data {field('data')}" if field("data") else "") + f"{reason}?"
    if action == "retry":
        choice = field("deadline")
        deadline = {"extend": f"the deadline moved to now + {field('extend')}",
                    "clear": "no deadline"}.get(choice, "the deadline kept")
        return f"Retry it from the step that failed, with {deadline}{reason}?"
    return f"{action.capitalize()} it{reason}?"
