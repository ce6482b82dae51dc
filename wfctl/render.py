"""Rich tables and panels for people; plain aligned text when the output is not a terminal."""

from __future__ import annotations

import json
import os
from datetime import datetime
from typing import Any

from dateutil import tz
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from wfctl import clock, durations
from wfctl.definitions import Definitions

STATUS_STYLE = {
    "running": "cyan", "waiting": "blue", "paused": "yellow", "completed": "green",
    "failed": "bold red", "timed_out": "bold red", "cancelled": "magenta",
    "terminated": "magenta", "continued_as_new": "dim", "scheduled": "cyan", "started": "cyan",
    "retry_scheduled": "yellow", "fired": "green",
}
ALARM_EVENTS = ("TimedOut", "Failed", "DeadlineExceeded", "Terminated", "Cancelled")


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


def table(out: Console, *columns: str) -> Table:
    if plain(out):
        grid = Table(box=None, show_edge=False, pad_edge=False, header_style="",
                     padding=(0, 2, 0, 0))
    else:
        grid = Table(box=box.SIMPLE_HEAVY, header_style="bold")
    for column in columns:
        grid.add_column(column, overflow="fold")
    return grid


def styled(value: str | None, style: str | None = None) -> Text:
    return Text(value if value is not None else "-", style=style or "")


def status_text(status: str | None) -> Text:
    return styled(status, STATUS_STYLE.get(status or ""))


def relative(at: str | None, now: datetime) -> Text:
    """'in 23m10s' / 'expired 5s ago', coloured by how close the instant is."""
    if at is None:
        return styled(None)
    seconds = (clock.parse(at) - now).total_seconds()
    if seconds <= 0:
        return Text(f"expired {durations.format(-seconds)} ago", style="bold red")
    style = "red" if seconds < 60 else "yellow" if seconds < 600 else "green"
    return Text(f"in {durations.format(seconds)}", style=style)


def ago(at: str | None, now: datetime) -> str:
    if at is None:
        return "-"
    seconds = (now - clock.parse(at)).total_seconds()
    return f"{durations.format(abs(seconds))} ago" if seconds >= 0 \
        else f"in {durations.format(-seconds)}"


def local(at: str | None) -> str:
    if at is None:
        return "-"
    return clock.parse(at).astimezone(tz.tzlocal()).strftime("%Y-%m-%d %H:%M:%S %Z")


def seconds_text(value: float | None) -> str:
    return durations.format(value) if value is not None else "none"


# describe

def describe(out: Console, doc: dict[str, Any], now: datetime) -> None:
    run = doc["run"]
    title = Text.assemble(
        (doc["workflow_type"], "bold"), " ", doc["workflow_instance_id"], "  ",
        status_text(doc["status"]),
        f"  run {run['run_number']} of {doc['run_count']}",
    )
    summary = table(out, "field", "value")
    summary.show_header = False
    rows = [
        ("run id", run["workflow_run_id"]),
        ("run status", status_text(run["status"])),
        ("closed reason", run["closed_reason"]),
        ("current step", run["current_step"]),
        ("waiting on", run["wait_kind"]),
        ("started", f"{run['started_at']}  ({ago(run['started_at'], now)})"),
        ("closed", run["closed_at"]),
        ("child policy", doc["child_policy"]),
        ("parent", doc["parent_workflow_instance_id"]),
    ]
    if run["cancel_requested"]:
        rows.append(("cancel", Text("requested", style="magenta")))
    for name, value in rows:
        if value is not None:
            summary.add_row(name, value if isinstance(value, Text) else str(value))
    parts: list[Any] = [summary, _time_panel(out, doc, now)]
    if doc["activities"]:
        parts.append(_activities(out, doc["activities"], now))
    if doc["timers"]:
        timers = table(out, "timer", "step", "kind", "fires at", "when", "status")
        for timer in doc["timers"]:
            timers.add_row(timer["timer_id"], timer["step"], timer["kind"], timer["fire_at"],
                           relative(timer["fire_at"], now) if timer["status"] == "scheduled"
                           else styled("-"), status_text(timer["status"]))
        parts.append(_titled(out, "Timers", timers))
    if doc["children"]:
        children = table(out, "child instance", "type", "step", "status")
        for child in doc["children"]:
            children.add_row(child["workflow_instance_id"], child["workflow_type"],
                             child["step"], status_text(child["status"]))
        parts.append(_titled(out, "Children", children))
    if doc["failure"]:
        parts.append(_failure(out, doc["failure"]))
    parts.append(_titled(out, "State", Text(json.dumps(doc["state"], indent=2,
                                                       ensure_ascii=False))))
    if plain(out):
        out.print(title)
        for part in parts:
            out.print(part)
    else:
        out.print(Panel(Group(*parts), title=title, title_align="left", box=box.ROUNDED))


def _titled(out: Console, title: str, body: Any) -> Any:
    if plain(out):
        return Group(Text(f"\n{title}"), body)
    return Panel(body, title=title, title_align="left", box=box.MINIMAL)


def _time_panel(out: Console, doc: dict[str, Any], now: datetime) -> Any:
    run = doc["run"]
    closed = run["closed_at"] is not None
    grid = table(out, "limit", "value", "at (UTC)", "local", "when")
    rows = [
        ("execution timeout", doc["execution_timeout_seconds"], run["execution_deadline_at"]),
        ("run timeout", run["run_timeout_seconds"], run["run_deadline_at"]),
        ("deadline", doc["deadline_seconds"], doc["deadline_at"]),
        ("workflow task timeout", run["workflow_task_timeout_seconds"], None),
    ]
    for name, seconds, at in rows:
        when = relative(at, now) if at and not closed else styled("-")
        grid.add_row(name, seconds_text(seconds), at or "-", local(at), when)
    if doc["on_deadline"]:
        grid.add_row("on deadline", doc["on_deadline"], "", "", "")
    return _titled(out, "Time", grid)


def retry_chips(policy: dict[str, Any]) -> str:
    """The retry policy as short chips: '3 attempts · backoff 1s→1m · start-to-close 5m'."""
    chips = [f"{policy['max_attempts']} attempt{'s' if policy['max_attempts'] != 1 else ''}"]
    waits = policy["backoff_seconds"]
    if waits:
        chips.append(f"backoff {durations.format(waits[0])}→{durations.format(max(waits))}"
                     if len(set(waits)) > 1 else f"backoff {durations.format(waits[0])}")
    for key, label in (("schedule_to_start_timeout", "schedule-to-start"),
                       ("start_to_close_timeout", "start-to-close"),
                       ("schedule_to_close_timeout", "schedule-to-close"),
                       ("heartbeat_timeout", "heartbeat")):
        if policy.get(key) is not None:
            chips.append(f"{label} {durations.format(policy[key])}")
    if policy.get("non_retryable"):
        chips.append("non-retryable " + ",".join(policy["non_retryable"]))
    return " · ".join(chips)


def _activities(out: Console, activities: list[dict[str, Any]], now: datetime) -> Any:
    grid = table(out, "step", "status", "attempt", "policy", "deadlines", "heartbeat")
    for activity in activities:
        deadlines = Text()
        for label, key in (("schedule-to-start", "schedule_deadline_at"),
                           ("start-to-close", "close_deadline_at"),
                           ("schedule-to-close", "schedule_to_close_deadline_at"),
                           ("heartbeat", "heartbeat_deadline_at")):
            at = activity[key]
            if at is not None and activity["status"] in ("scheduled", "started",
                                                          "retry_scheduled"):
                deadlines.append(f"{label} ")
                deadlines.append_text(relative(at, now))
                deadlines.append("\n")
        heartbeat = "-"
        if activity["last_heartbeat_at"]:
            heartbeat = f"{ago(activity['last_heartbeat_at'], now)} " \
                        f"{json.dumps(activity['last_heartbeat_details'])}"
        status = status_text(activity["status"])
        if activity["superseded"]:
            status.append(" (retried)", style="dim")
        grid.add_row(activity["step"], status,
                     f"{activity['attempt']}/{activity['max_attempts']}",
                     retry_chips(activity["retry_policy"]), deadlines.rstrip() or "-",
                     heartbeat)
    return _titled(out, "Activities", grid)


def _failure(out: Console, failure: dict[str, Any]) -> Any:
    body = Text()
    body.append("category ", style="bold")
    body.append(f"{failure['failure_category']}\n", style="bold red")
    if failure.get("timeout_kind"):
        body.append("timeout kind ", style="bold")
        body.append(f"{failure['timeout_kind']}\n", style="bold yellow")
    for key in ("exception_class", "deadline_at", "limit_kind", "value", "limit",
                "child_instance_id", "handler_error"):
        if failure.get(key) is not None:
            body.append(f"{key.replace('_', ' ')} ", style="bold")
            body.append(f"{failure[key]}\n")
    body.append(failure["message"])
    return _titled(out, "Failure", body)


# history

def event_line(event: dict[str, Any]) -> str:
    """One line on what an event means, naming the timeout kind where there is one."""
    kind, a = event["event_type"], event["attributes"]
    step = a.get("step")
    if kind == "ActivityTimedOut":
        line = f"Activity {step} timed out: {a['timeout_kind']} (attempt {a['attempt']})"
        if a["timeout_kind"] == "heartbeat" and a.get("last_heartbeat_at"):
            gap = (clock.parse(event["at"]) - clock.parse(a["last_heartbeat_at"])).total_seconds()
            line += f" (last heartbeat {durations.format(gap)} ago)"
        return line
    if kind == "ActivityRetryScheduled":
        why = f"timed out: {a['timeout_kind']}" if a.get("timeout_kind") else \
            f"{a['reason']}: {(a.get('failure') or {}).get('exception_class')}"
        return (f"Activity {step} attempt {a['attempt']} {why}; attempt {a['next_attempt']} of "
                f"{a['max_attempts']} at {a['retry_available_at']} "
                f"(backoff {durations.format(a['backoff_seconds'])})")
    if kind == "ActivityFailed":
        return f"Activity {step} failed: {a['exception_class']}: {a['message']}"
    if kind == "WorkflowTimedOut":
        return f"Workflow timed out: {a['timeout_kind']} (deadline {a['deadline_at']})"
    if kind == "WorkflowTaskTimedOut":
        return (f"Workflow task timed out: {a['timeout_kind']} (scheduled #{a['scheduled_event_id']}"
                f", started #{a['started_event_id']})")
    if kind == "WorkflowDeadlineExceeded":
        error = a.get("handler_error")
        handler = f"; {a['handler']} raised {error['exception_class']}: {error['message']}" \
            if error else (f"; {a['handler']} ran" if a.get("handler") else "")
        return f"Deadline exceeded (deadline {a['deadline_at']}){handler}"
    if kind == "WorkflowFailed":
        timeout = f" [{a['timeout_kind']}]" if a.get("timeout_kind") else ""
        return f"Workflow failed ({a['failure_category']}{timeout}): {a['message']}"
    if kind == "ChildWorkflowTimedOut":
        return f"Child {a['child_instance_id']} timed out: {a.get('timeout_kind')}"
    return _generic(a)


def _generic(attributes: dict[str, Any]) -> str:
    skip = {"scheduled_event_id", "started_event_id", "retry_policy", "input"}
    parts = []
    for key, value in attributes.items():
        if key in skip or value is None or value == {} or value == []:
            continue
        shown = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
        if len(shown) > 60:
            shown = shown[:57] + "..."
        parts.append(f"{key}={shown}")
    refs = [f"#{attributes[k]}" for k in ("scheduled_event_id", "started_event_id")
            if attributes.get(k) is not None]
    if refs:
        parts.append("refs " + ",".join(refs))
    return " ".join(parts)


def history(out: Console, events: list[dict[str, Any]], *, start_at: str | None,
            show_run: bool = False, header: bool = True) -> None:
    columns = ["seq", "+time", "at", "event", "details"]
    if show_run:
        columns.insert(1, "run")
    grid = table(out, *columns)
    grid.show_header = header
    for event in events:
        alarm = any(event["event_type"].endswith(s) for s in ALARM_EVENTS) \
            or event["event_type"] == "ActivityRetryScheduled"
        style = "bold red" if alarm else None
        if event["event_type"] in ("WorkflowCompleted", "ActivityCompleted"):
            style = "green"
        offset = "-"
        if start_at:
            offset = "+" + durations.format(
                max(0.0, (clock.parse(event["at"]) - clock.parse(start_at)).total_seconds())
            )
        row = [str(event["seq"]), offset, event["at"], styled(event["event_type"], style),
               styled(event_line(event), "yellow" if alarm else None)]
        if show_run:
            row.insert(1, str(event["run_number"]))
        grid.add_row(*row)
    out.print(grid)


# list, validate, start

def instances(out: Console, rows: list[dict[str, Any]], now: datetime) -> None:
    grid = table(out, "instance", "type", "status", "run", "created", "nearest deadline")
    for row in rows:
        nearest = row["nearest_deadline"]
        when = Text(f"{nearest['kind']} ").append_text(relative(nearest["at"], now)) \
            if nearest else styled("-")
        grid.add_row(row["workflow_instance_id"], row["workflow_type"],
                     status_text(row["status"]), str(row["run_number"]),
                     ago(row["created_at"], now), when)
    out.print(grid)


def definitions(out: Console, defs: Definitions) -> None:
    grid = table(out, "workflow type", "steps", "execution timeout", "run timeout",
                 "deadline", "on deadline", "task timeout", "child policy")
    for wf in defs.types.values():
        grid.add_row(wf.name, " → ".join(s.name for s in wf.steps),
                     seconds_text(wf.execution_timeout), seconds_text(wf.run_timeout),
                     seconds_text(wf.deadline), wf.on_deadline or "-",
                     seconds_text(wf.workflow_task_timeout), wf.child_policy)
    out.print(grid)


def started(out: Console, result: dict[str, Any], now: datetime) -> None:
    word = {"started_new": "Started", "returned_existing_active": "Already running"}.get(
        result["outcome"], "Rejected")
    out.print(Text.assemble((word, "bold"), f" {result['workflow_type']} ",
                            (result["workflow_instance_id"], "bold"),
                            f"  run {result['workflow_run_id']}"))
    for label, key in (("execution deadline", "execution_deadline_at"),
                       ("run deadline", "run_deadline_at"), ("deadline", "deadline_at")):
        if result[key]:
            out.print(Text.assemble(f"  {label}: {result[key]} (", relative(result[key], now),
                                    ")"))
