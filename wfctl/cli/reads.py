"""The read commands' bodies (describe, list, history, and ui, the web view) and how every command
prints JSON and errors: plain functions without typer, run alike by the typer application and the
fast path."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn, TextIO

from wfctl import jsonvalue
from wfctl.client import Client
from wfctl.errors import (
    DeadlinePassed,
    DefinitionError,
    NotFound,
    SignalNotAwaited,
    WfctlError,
)
from wfctl.lang import durations
from wfctl.lang.since import back_from
from wfctl.vocabulary import EVENT_TYPES, INSTANCE_STATUSES


def error_message(exc: WfctlError, client: Client | None) -> str:
    """What the `Error:` line says for an error of wfctl's."""
    if isinstance(exc, DeadlinePassed):
        return exc.worded("--extend-deadline D", "--clear-deadline", "--keep-deadline")
    if isinstance(exc, SignalNotAwaited):
        return exc.message("--force")
    message = str(exc)
    if isinstance(exc, DefinitionError) and isinstance(client, Client) \
            and not os.path.lexists(client.workflows_path):
        message += " (pass --workflows FILE or set WFCTL_WORKFLOWS)"
    return message


def fail(message: str) -> NoReturn:
    """One `Error:` line on stderr, exit 1."""
    sys.stderr.write(f"Error: {message}\n")
    raise SystemExit(1)


def usage(message: str) -> NoReturn:
    """A usage error (options that exclude each other): one `Error:` line, exit 2."""
    sys.stderr.write(f"Error: {message}\n")
    raise SystemExit(2)


def check_choice(option: str, value: str | Sequence[str] | None, choices: Sequence[str]) -> None:
    """A value (or each of a repeated option's) not among `choices` is a usage error, worded
    alike for every choice option: `Error: --status: 'bogus' is not one of running, …`."""
    for given in [value] if isinstance(value, str) else value or ():
        if given not in choices:
            usage(f"{option}: {given!r} is not one of {', '.join(choices)}")


# `history --no-tasks` leaves these out: a workflow task's three events at every decision.
TASK_EVENT_TYPES = tuple(name for name in EVENT_TYPES if name.startswith("WorkflowTask"))


def print_json(document: Any, out: TextIO | None = None) -> None:
    """One strict JSON document on `out` (stdout unless told): a value JSON cannot carry (NaN in
    a 0.1 database) is an error."""
    (out or sys.stdout).write(json_text(document, indent=2) + "\n")


def json_text(document: Any, *, indent: int | None) -> str:
    """`document` as strict JSON (`indent` None: on one line); what JSON cannot carry fails."""
    try:
        return jsonvalue.text(document, indent=indent)
    except jsonvalue.JSONValueError as exc:
        fail(f"{exc}; it cannot be printed as JSON")


def list_instances(client: Client, *, status: str | None = None, workflow_type: str | None = None,
                   since: str | None = None, limit: int = 50, watch: bool = False,
                   as_json: bool = False, schedule: str | None = None) -> None:
    """`wfctl list`; each keyword's default is the option's."""
    check_choice("--status", status, INSTANCE_STATUSES)
    since_at = instant_option("--since", since, client.now) if since is not None else None

    if workflow_type is not None:
        _warn_unknown_type(client, workflow_type)

    def window() -> datetime | None:
        # A duration counts back from each refresh's now, so that --watch --since 1h slides.
        return since_at() if since_at else None

    def rows(since: datetime | None) -> list[dict[str, Any]]:
        return client.list(status=status, workflow_type=workflow_type, since=since, limit=limit,
                           schedule=schedule)

    if watch and not as_json:
        from wfctl.show.live import watch_list

        watch_list(lambda: rows(window()), now=client.now)
        return
    since_now = window()
    shown = rows(since_now)
    more = client.count(status=status, workflow_type=workflow_type, since=since_now,
                        schedule=schedule) - limit \
        if len(shown) == limit else 0
    if as_json:
        print_json(shown)
        if more > 0:
            # The document stays the list it has always been: the count goes beside it.
            sys.stderr.write(f"Note: {more} more past --limit {limit}\n")
        return
    from wfctl.show import render

    render.instances(render.console(), shown, client.now(), more=more)


def _warn_unknown_type(client: Client, workflow_type: str) -> None:
    """A warning for a type the definitions do not declare (its old instances still list);
    nothing when the definitions cannot be read here."""
    try:
        workflow_type.encode("utf-8")
        types = client.definitions().types
    except (UnicodeEncodeError, WfctlError):
        # Not text (list refuses it on its own), or no definitions to compare with.
        return
    if workflow_type not in types:
        known = ", ".join(sorted(types)) or "none"
        sys.stderr.write(f"Warning: {client.workflows_path} declares no workflow type "
                         f"{workflow_type!r} (it declares: {known}); listing its instances "
                         "all the same\n")


def instant_option(option: str, text: str,
                   now: Callable[[], datetime]) -> Callable[[], datetime]:
    """An option that takes an instant (wfctl.lang.since.back_from); one `Error:` line if not one."""
    try:
        return back_from(text, now)
    except durations.DurationError as exc:
        fail(f"{option}: {exc}")


def describe(client: Client, *, instance_id: str, run: int | None = None,
             full_state: bool = False, as_json: bool = False) -> None:
    """`wfctl describe`; each keyword's default is the option's."""
    try:
        doc = client.describe(instance_id, run)
    except NotFound as exc:
        if as_json:
            print_json({"found": False, "reason": "instance_not_found"
                        if "no instance" in str(exc) else "run_not_found"})
        fail(str(exc))
    if as_json:
        print_json(doc)
    else:
        from wfctl.show import render

        render.describe(render.console(), doc, client.now(), full_state=full_state)


def history(client: Client, *, instance_id: str, run: int | None = None, all_runs: bool = False,
            follow: bool = False, event_type: Sequence[str] = (), no_tasks: bool = False,
            as_json: bool = False) -> None:
    """`wfctl history`; each keyword's default is the option's."""
    if run is not None and all_runs:
        usage("--run and --all-runs exclude each other")
    check_choice("--event-type", event_type, EVENT_TYPES)
    if no_tasks:
        event_type = [name for name in event_type or EVENT_TYPES if name not in TASK_EVENT_TYPES]
        if not event_type:
            usage("--no-tasks hides every --event-type given")
    events = client.history(instance_id, run=run, all_runs=all_runs,
                            event_types=tuple(event_type))
    if as_json and follow:
        follow_json(client, instance_id, events, all_runs=all_runs or run is None,
                    event_types=tuple(event_type))
        return
    if as_json:
        print_json(events)
        return
    from wfctl.show import render

    out = render.console()
    started_at = start_at(client, instance_id)
    render.history(out, events, start_at=started_at, show_run=all_runs)
    if follow:
        from wfctl.show.live import follow_history

        # Without --run, following goes on into the runs a continue-as-new starts; Ctrl-C
        # ends it with 130, as every follow or wait mode.
        follow_history(client, instance_id, out,
                       after_seq=events[-1]["seq"] if events else 0, start_at=started_at,
                       all_runs=all_runs or run is None, show_run=all_runs,
                       event_types=tuple(event_type))


def follow_json(client: Client, instance_id: str, events: list[dict[str, Any]], *,
                all_runs: bool, event_types: tuple[str, ...]) -> None:
    """`history --follow --json`: one event per line (NDJSON), each as an element of `history
    --json`, written as it is recorded, until the instance closes."""
    from wfctl.show.live import new_events

    def emit(batch: list[dict[str, Any]]) -> None:
        for event in batch:
            sys.stdout.write(json_text(event, indent=None) + "\n")
        # A reader of the stream sees each event when it happens, not when a buffer fills.
        sys.stdout.flush()

    emit(events)
    for batch in new_events(client, instance_id, after_seq=events[-1]["seq"] if events else 0,
                            all_runs=all_runs, event_types=event_types):
        emit(batch)


def start_at(client: Client, instance_id: str) -> datetime | None:
    """When the instance was created: where a history's relative times count from."""
    return client.describe(instance_id)["created_at"]


def ui(client: Client, *, host: str = "127.0.0.1", port: int = 8484, open_browser: bool = False,
       allow_actions: bool = False, allow_remote: bool = False) -> None:
    """`wfctl ui`; each keyword's default is the option's."""
    from wfctl.ui.server import is_loopback, serve

    token = os.environ.get("WFCTL_UI_TOKEN") or None
    if not is_loopback(host):
        if not allow_remote:
            usage(f"--host {host} is not this machine alone: add --allow-remote "
                  "(and set WFCTL_UI_TOKEN)")
        if token is None:
            usage("--allow-remote needs a token in WFCTL_UI_TOKEN")
    from importlib.util import find_spec

    if find_spec("jinja2") is None:
        fail("the web view needs Jinja2: pip install 'wfctl[ui]'")
    from wfctl.ops import log

    log.configure("info")
    try:
        serve(client, host=host, port=port, allow_actions=allow_actions, token=token,
              database=client.store.path, open_browser=open_browser)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
