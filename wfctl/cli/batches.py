"""The commands that act on many instances: `start TYPE --from FILE` and the batch form of
retry, cancel, terminate, pause, resume and signal (filters in place of an ID)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from wfctl import jsonvalue
from wfctl.cli.reads import check_choice, error_message, fail, instant_option, json_text, print_json, usage
from wfctl.client import Client
from wfctl.vocabulary import INSTANCE_STATUSES

# The options every batch command takes, shared by their definitions in `commands`.
STATUS = typer.Option([], "--status", metavar="STATUS",
                      help="Act on instances of this status (repeatable: any of them): "
                           f"{', '.join(INSTANCE_STATUSES)}.")
TYPE = typer.Option([], "--type", metavar="TYPE",
                    help="Act on instances of this workflow type (repeatable: any of them).")
SCHEDULE = typer.Option([], "--schedule", metavar="NAME",
                        help="Act on instances this schedule started (repeatable: any of them).")
SINCE = typer.Option(None, "--since", metavar="WHEN",
                     help="Act on instances created in the last DURATION or at or after an "
                          "ISO 8601 date or instant (as list --since).")
DRY_RUN = typer.Option(False, "--dry-run",
                       help="List the instances the filters match; change nothing.")
YES = typer.Option(False, "--yes", "-y", help="Act on every match without asking.")
JSON = typer.Option(False, "--json", help="Print JSON.")

# What a batch's report says it did, by action.
DONE = {"retry": "retried", "cancel": "cancel requested", "terminate": "terminated",
        "pause": "paused", "resume": "resumed", "signal": "signalled"}


def is_batch(instance_id: str | None, status: Sequence[str], workflow_type: Sequence[str],
             schedule: Sequence[str], since: str | None, dry_run: bool, yes: bool) -> bool:
    """Whether a command line asks for a batch (filters in place of an ID); a usage error
    when it gives both, or neither."""
    filters = bool(status or workflow_type or schedule or since is not None)
    if filters and instance_id is not None:
        usage("give an ID or filters (--status, --type, --schedule, --since), not both")
    if not filters and instance_id is None:
        usage("give an ID, or filters (--status, --type, --schedule, --since) to act on every "
              "instance "
              "they match")
    if not filters and (dry_run or yes):
        usage(f"{'--dry-run' if dry_run else '--yes'} is for filters in place of an ID")
    return filters


def run(client: Client, action: str, *, status: Sequence[str], workflow_type: Sequence[str],
        schedule: Sequence[str], since: str | None, dry_run: bool, yes: bool, as_json: bool,
        **options: Any) -> None:
    """A batch action from the command line: a dry run lists the matches; otherwise a terminal
    is asked to confirm and a script must say --yes (exit 2 without it)."""
    check_choice("--status", status, INSTANCE_STATUSES)
    since_at = instant_option("--since", since, client.now)() if since is not None else None
    filters = {"status": list(status), "workflow_type": list(workflow_type),
               "schedule": list(schedule), "since": since_at}
    if dry_run or not yes:
        preview = client.batch(action, dry_run=True, **filters, **options)
        if dry_run:
            _print_matches(client, action, preview, as_json)
            return
        if not asks():
            usage(f"{action} would act on {_count(preview['matched'])} matched by the "
                  "filters: pass --yes to go ahead (--dry-run lists them)")
        if not preview["matched"]:
            sys.stdout.write(f"No instance matches: nothing to {action}\n")
            return
        if not typer.confirm(f"{action.capitalize()} {_count(preview['matched'])}?"):
            raise typer.Exit(1)
    report = client.batch(action, **filters, **options,
                          worded=lambda error: error_message(error, client))
    if as_json:
        print_json(report)
    else:
        sys.stdout.write(f"{action}: {report['done']} {DONE[action]} of {report['matched']} "
                         f"matched; {len(report['skipped'])} skipped, "
                         f"{len(report['failed'])} failed\n")
        for skipped in report["skipped"]:
            sys.stdout.write(f"  skipped {skipped['id']}: {skipped['reason']}\n")
        for failed in report["failed"]:
            sys.stdout.write(f"  failed {failed['id']}: {failed['error']}\n")
    if report["failed"]:
        fail(f"{action} failed on {_count(len(report['failed']))} of {report['matched']}")


def asks() -> bool:
    """Whether a person is there to confirm a batch: stdin is a terminal."""
    return sys.stdin.isatty()


def _count(n: int) -> str:
    return f"{n} instance{'' if n == 1 else 's'}"


def _print_matches(client: Client, action: str, preview: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(preview)
        return
    from wfctl.show import render

    if preview["instances"]:
        render.instances(render.console(), preview["instances"], client.now())
    sys.stdout.write(f"Would {action} {_count(preview['matched'])} (dry run: nothing "
                     "changed)\n")


def start_from(client: Client, workflow_type: str, source: Path, defaults: dict[str, Any],
               as_json: bool) -> None:
    """`start TYPE --from FILE|-`: one start per line of NDJSON, every line checked before
    any starts; the counts, or (--json) one outcome a line in the lines' order."""
    name = "stdin" if str(source) == "-" else str(source)
    starts = _start_lines(name, _read_from(source))
    if not starts:
        fail(f"--from: {name} has no line to start")
    outcomes = client.start_many(workflow_type, starts, source=name, **defaults)
    if as_json:
        sys.stdout.write("".join(json_text(outcome, indent=None) + "\n" for outcome in outcomes))
    else:
        _print_start_counts(outcomes)
    _report_not_started(outcomes)
    if any(not outcome["started"] and outcome["outcome"] != "returned_existing_active"
           for outcome in outcomes):
        raise SystemExit(1)


def _read_from(source: Path) -> bytes:
    """The bytes of --from's file, or of stdin for `-`."""
    try:
        if str(source) == "-":
            return sys.stdin.buffer.read()
        with source.open("rb") as file:
            return file.read()
    except IsADirectoryError:
        fail(f"--from: {source} is a folder, not a file")
    except OSError as exc:
        fail(f"--from: cannot read {source}: {exc.strerror or exc}")


def _start_lines(name: str, data: bytes) -> list[Any]:
    """Each NDJSON line of `data` (read from `name`) parsed; the first bad line fails."""
    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()
    starts = []
    for number, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            fail(f"{name}:{number}: not UTF-8 text (byte 0x{line[exc.start]:02x} at column "
                 f"{exc.start + 1})")
        if not text.strip():
            fail(f"{name}:{number}: an empty line (one JSON object a line)")
        try:
            starts.append(jsonvalue.loads(text, f"{name}:{number}"))
        except jsonvalue.JSONValueError as exc:
            fail(str(exc))
    return starts


def _print_start_counts(outcomes: list[dict[str, Any]]) -> None:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    sys.stdout.write(f"{len(outcomes)} lines: " + ", ".join(
        f"{counts[outcome]} {outcome.replace('_', ' ')}" for outcome in
        ("started_new", "returned_existing_active", "rejected_duplicate", "failed")
        if outcome in counts) + "\n")


def _report_not_started(outcomes: list[dict[str, Any]]) -> None:
    """On stderr, the lines of each outcome that started nothing, and what to do about it."""
    for outcome_name, why in (("rejected_duplicate", "an open instance has the id; "
                               "--on-duplicate return-existing, or \"on_duplicate\" on a "
                               "line, returns it instead"),
                              ("failed", "see each one's error with --json")):
        refused = [number for number, outcome in enumerate(outcomes, 1)
                   if outcome["outcome"] == outcome_name]
        if refused:
            shown = ", ".join(str(number) for number in refused[:10])
            more = f" and {len(refused) - 10} more" if len(refused) > 10 else ""
            sys.stderr.write(f"Error: {_count(len(refused))} not started: line"
                             f"{'s' if len(refused) > 1 else ''} {shown}{more} ({why})\n")
