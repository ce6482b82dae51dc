"""Following an instance as it runs: `start --wait`, `history --follow`, `list --watch`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from wfctl import clock
from wfctl.show import render
from wfctl.vocabulary import ACTIVITY_TIMEOUTS_SHOWN, OPEN_ACTIVITY

if TYPE_CHECKING:
    from wfctl.client import Client

# How often a follower looks at the database again; it only reads, so this costs little.
POLL = 0.2


def follow_history(client: Client, instance_id: str, out: Console, *, after_seq: int,
                   start_at: datetime | None, all_runs: bool, show_run: bool,
                   event_types: tuple[str, ...] = ()) -> None:
    """Print new events as they are recorded, until the instance closes."""
    for events in new_events(client, instance_id, after_seq=after_seq, all_runs=all_runs,
                             event_types=event_types):
        render.history(out, events, start_at=start_at, show_run=show_run, header=False)


def new_events(client: Client, instance_id: str, *, after_seq: int, all_runs: bool,
               event_types: tuple[str, ...] = ()) -> Iterator[list[dict[str, Any]]]:
    """The events recorded after `after_seq`, a batch at a time as they come, until the instance
    closes (a closed instance's remaining events come in one batch)."""
    store = client.store
    version = None
    while True:
        current = store.data_version()
        if current != version:
            version = current
            closed = client.describe(instance_id)["closed_at"] is not None
            events = client.history(instance_id, all_runs=all_runs, after_seq=after_seq,
                                    event_types=event_types)
            if events:
                yield events
                after_seq = events[-1]["seq"]
            # Looked at before reading the events, so the last ones are never missed.
            if closed:
                return
        time.sleep(POLL)


def follow_start(client: Client, instance_id: str, *, quiet: bool) -> dict[str, Any]:
    """Follow a just-started instance until it closes; returns its final describe.

    On a terminal: a live view of the step, attempts and countdowns. Piped: the history, line by
    line. `quiet` (for --json) keeps stdout free: the live view goes to stderr if that is a
    terminal, and nothing is printed otherwise.
    """
    out = render.console(stderr=quiet)
    if render.plain(out):
        if quiet:
            while client.describe(instance_id)["closed_at"] is None:
                time.sleep(POLL)
        else:
            start_at = client.describe(instance_id)["created_at"]
            events = client.history(instance_id, all_runs=True)
            render.history(out, events, start_at=start_at, show_run=True)
            follow_history(client, instance_id, out,
                           after_seq=events[-1]["seq"] if events else 0,
                           start_at=start_at, all_runs=True, show_run=True)
        return client.describe(instance_id)
    with Live(console=out, refresh_per_second=5, transient=quiet) as live:
        while True:
            doc = client.describe(instance_id)
            recent = client.history(instance_id, all_runs=True)[-5:]
            live.update(live_view(doc, recent, client.now()))
            if doc["closed_at"] is not None:
                return doc
            time.sleep(POLL)


def live_view(doc: dict[str, Any], recent: list[dict[str, Any]], now: datetime) -> Group:
    """What `start --wait` shows: status and step, countdowns, open attempts, latest events."""
    run = doc["run"]
    header = Text.assemble((doc["workflow_type"], "bold"), " ", (doc["workflow_instance_id"], "bold"),
                           "  ", render.status_text(doc["status"]),
                           f"  run {run['run_number']}  step ",
                           (run["current_step"] or "-", "bold"))
    if run["wait_kind"]:
        header.append(f"  waiting on {run['wait_kind']}", style="blue")
    countdowns = Table.grid(padding=(0, 2))
    for label, at in (("execution timeout", run["execution_deadline_at"]),
                      ("run timeout", run["run_deadline_at"]), ("deadline", doc["deadline_at"])):
        if at:
            countdowns.add_row(label, render.instant(at), render.relative(at, now)
                               if run["closed_at"] is None
                               else render.at_close(at, run["closed_at"]))
    for timer in doc["timers"]:
        if timer["status"] == "scheduled":
            countdowns.add_row(f"timer {timer['step']}", render.instant(timer["fire_at"]),
                               render.relative(timer["fire_at"], now))
    retry = doc.get("workflow_retry") or {}
    if retry.get("next_attempt_at"):
        countdowns.add_row(f"retry attempt {retry['attempt']} of {retry['max_attempts']}",
                           render.instant(retry["next_attempt_at"]),
                           render.relative(retry["next_attempt_at"], now))
    activities = Table.grid(padding=(0, 2))
    for activity in doc["activities"][-5:]:
        nearest = _nearest(activity)
        error = activity.get("last_error")
        activities.add_row(
            activity["step"], render.status_text(activity["status"]),
            f"attempt {activity['attempt']}/{activity['max_attempts']}",
            Text(f"{nearest[0]} ").append_text(render.relative(nearest[1], now))
            if nearest else Text(""),
            Text(f"last error {render.error_line(error)}", style="red")
            if error and activity["status"] in OPEN_ACTIVITY else Text(""),
        )
    events = Table.grid(padding=(0, 2))
    for event in recent:
        events.add_row(str(event["seq"]),
                       render.styled(event["event_type"],
                                     render.TONE_STYLE.get(render.tone(event))),
                       render.event_line(event))
    parts: list[Any] = [header, countdowns, activities, events]
    if doc["failure"]:
        failure = doc["failure"]
        kind = f" [{failure['timeout_kind']}]" if failure.get("timeout_kind") else ""
        parts.append(Text(f"{failure['failure_category']}{kind}: {failure['message']}",
                          style="bold red"))
    return Group(*parts)


def _nearest(activity: dict[str, Any]) -> tuple[str, datetime] | None:
    """The open attempt's deadline that comes first, with its kind."""
    if activity["status"] not in OPEN_ACTIVITY:
        return None
    pending = [(activity[t.column], t.label) for t in ACTIVITY_TIMEOUTS_SHOWN
               if activity[t.column] is not None]
    if not pending:
        return None
    at, label = min(pending)
    return label, at


def watch_list(rows: Callable[[], list[dict[str, Any]]], out: Console | None = None, *,
               interval: float = 1.0, now: Callable[[], datetime] = clock.now) -> None:
    """Refresh the list until interrupted (Ctrl-C: KeyboardInterrupt, exit 130); piped, print
    it again at each refresh. Ages are counted from `now()` (the database's clock)."""
    out = out or render.console()
    if render.plain(out):
        while True:
            current = rows()
            shown_at = now()
            render.emit(out, Text(f"-- {clock.iso(shown_at)}"))
            render.instances(out, current, shown_at)
            time.sleep(interval)
    with Live(console=out, refresh_per_second=2) as live:
        while True:
            live.update(render.instances_table(out, rows(), now()))
            time.sleep(interval)
