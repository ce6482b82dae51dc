"""Following an instance as it runs: `start --wait`, `history --follow`, `list --watch`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from wfctl import clock, render
from wfctl.client import Client

POLL = 0.2


def follow_history(client: Client, instance_id: str, out: Console, *, after_seq: int,
                   start_at: str | None, all_runs: bool,
                   event_types: tuple[str, ...] = ()) -> None:
    """Print new events as they are recorded, until the instance closes."""
    store = client.engine.store
    version = None
    while True:
        current = store.data_version()
        if current != version:
            version = current
            events = client.history(instance_id, all_runs=all_runs, after_seq=after_seq,
                                    event_types=event_types)
            if events:
                render.history(out, events, start_at=start_at, show_run=all_runs, header=False)
                after_seq = events[-1]["seq"]
            if client.describe(instance_id)["closed_at"] is not None:
                return
        time.sleep(POLL)


def follow_start(client: Client, instance_id: str, *, quiet: bool) -> dict[str, Any]:
    """Follow a just-started instance until it closes; returns its final describe."""
    out = render.console(stderr=quiet)
    if quiet or render.plain(out):
        start_at = client.describe(instance_id)["created_at"]
        if not quiet:
            render.history(out, client.history(instance_id, all_runs=True), start_at=start_at,
                           show_run=True)
            last = client.history(instance_id, all_runs=True)
            follow_history(client, instance_id, out, after_seq=last[-1]["seq"] if last else 0,
                           start_at=start_at, all_runs=True)
        else:
            while client.describe(instance_id)["closed_at"] is None:
                time.sleep(POLL)
        return client.describe(instance_id)
    with Live(console=out, refresh_per_second=5, transient=False) as live:
        while True:
            doc = client.describe(instance_id)
            live.update(_live_view(doc))
            if doc["closed_at"] is not None:
                return doc
            time.sleep(POLL)


def _live_view(doc: dict[str, Any]) -> Group:
    now = clock.now()
    run = doc["run"]
    header = Text.assemble((doc["workflow_type"], "bold"), " ", doc["workflow_instance_id"],
                           "  ", render.status_text(doc["status"]),
                           f"  run {run['run_number']}  step ", (run["current_step"] or "-", "bold"))
    countdowns = Table.grid(padding=(0, 2))
    for label, at in (("execution deadline", run["execution_deadline_at"]),
                      ("run deadline", run["run_deadline_at"]), ("deadline", doc["deadline_at"])):
        if at:
            countdowns.add_row(label, at, render.relative(at, now))
    activities = Table.grid(padding=(0, 2))
    for activity in doc["activities"][-5:]:
        deadline = activity["close_deadline_at"] or activity["heartbeat_deadline_at"]
        activities.add_row(activity["step"], render.status_text(activity["status"]),
                           f"attempt {activity['attempt']}/{activity['max_attempts']}",
                           render.relative(deadline, now) if deadline and activity["status"]
                           == "started" else Text(""))
    parts: list[Any] = [header, countdowns, activities]
    if doc["failure"]:
        parts.append(Text(f"{doc['failure']['failure_category']}: {doc['failure']['message']}",
                          style="bold red"))
    return Group(*parts)


def watch_list(rows: Callable[[], list[dict[str, Any]]]) -> None:
    out = render.console()
    with Live(console=out, refresh_per_second=2) as live:
        try:
            while True:
                table_console = Console(record=True, width=out.width)
                with table_console.capture():
                    render.instances(table_console, rows(), clock.now())
                live.update(Text.from_ansi(table_console.export_text(styles=True)))
                time.sleep(1)
        except KeyboardInterrupt:
            return
