"""`wfctl schedules` and `wfctl schedule describe|pause|unpause|trigger|backfill` (SPEC §12)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from wfctl import clock
from wfctl.cli.reads import fail, instant_option, print_json
from wfctl.client import Client

# The definitions (YAML) are read by the commands that need them, so that `wfctl describe`
# starts fast.
if TYPE_CHECKING:
    from wfctl.lang.definitions import Definitions


def _client(ctx: typer.Context) -> Client:
    return ctx.find_root().obj


def _last(action: dict[str, Any] | None) -> str:
    if action is None:
        return "-"
    what = action["action"] + (f" {action['instance_id']}" if action["instance_id"] else "")
    return f"{what} ({clock.iso(action['tick_at'])})"


def validated_schedules(definitions: Definitions) -> dict[str, dict[str, Any]]:
    """What `validate --json` says of each schedule: its spec and its next tick from now."""
    now = clock.now()
    return {schedule.name: {"workflow": schedule.workflow, "spec": schedule.spec.text,
                            "description": schedule.spec.describe(),
                            "timezone": schedule.spec.timezone,
                            "next_tick_at": schedule.first_tick(now)}
            for schedule in definitions.schedules.values()}


def show_validated_schedules(definitions: Definitions) -> None:
    """The schedules under `validate`'s table of types, each with its next tick from now."""
    from wfctl.show import render

    out = render.console()
    grid = render.table(out, "schedule", "workflow", "spec", "next tick", "local time")
    for name, row in validated_schedules(definitions).items():
        grid.add_row(name, row["workflow"], row["description"], clock.iso(row["next_tick_at"]),
                     render.zoned(row["next_tick_at"], row["timezone"]))
    render.emit(out, grid)


def schedules_command(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The schedules: spec in words, next tick, last action, paused.

    The next tick shows as an instant, in the schedule's local time and as a countdown."""
    client = _client(ctx)
    found = client.schedules()
    if as_json:
        print_json(found)
        return
    from wfctl.show import render

    out = render.console()
    now = client.now()
    grid = render.table(out, "schedule", "workflow", "spec", "next tick", "local time", "in",
                        "last action", "paused")
    for row in found:
        grid.add_row(row["name"], row["workflow"], row["description"] or "removed from the file",
                     clock.iso(row["next_tick_at"]) or "-",
                     render.zoned(row["next_tick_at"], row["timezone"]),
                     render.relative(row["next_tick_at"], now), _last(row["last_action"]),
                     "yes" if row["paused"] else "no")
    render.emit(out, grid)


def describe(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The schedule."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """The schedule, its next five ticks and its recent actions with their reasons."""
    client = _client(ctx)
    doc = client.schedule(name)
    if as_json:
        print_json(doc)
        return
    _show(client, doc)


def _show(client: Client, doc: dict[str, Any]) -> None:
    from wfctl.show import render

    out = render.console()
    now = client.now()
    paused = f"yes ({doc['paused_reason']})" if doc["paused"] and doc["paused_reason"] else \
        "yes" if doc["paused"] else "no"
    out.print(f"{doc['name']}: {doc['description'] or 'removed from the file'}\n"
              f"workflow {doc['workflow']} · overlap {doc['overlap'] or '-'} · paused {paused}\n"
              f"started {doc['counts']['started']} · skipped {doc['counts']['skipped']} · "
              f"missed {doc['counts']['missed']} · buffered {doc['counts']['buffered']}",
              soft_wrap=True)
    ticks = render.table(out, "next tick", "local time", "in")
    for tick in doc["next_ticks"]:
        ticks.add_row(clock.iso(tick) or "-", render.zoned(tick, doc["timezone"]),
                      render.relative(tick, now))
    render.emit(out, ticks)
    actions = render.table(out, "tick", "action", "instance", "reason")
    for action in doc["actions"]:
        actions.add_row(clock.iso(action["tick_at"]) or "-", action["action"],
                        action["instance_id"] or "-", action["reason"] or "-")
    render.emit(out, actions)


def pause(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The schedule."),
    reason: str | None = typer.Option(None, "--reason", metavar="TEXT", help="Why, as shown."),
) -> None:
    """Stop the schedule's ticks until unpaused (the ticks in between are not caught up)."""
    _client(ctx).pause_schedule(name, reason=reason)
    typer.echo(f"{name}: paused")


def unpause(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The schedule."),
) -> None:
    """Tick again, from now on."""
    doc = _client(ctx).pause_schedule(name, paused=False)
    typer.echo(f"{name}: unpaused; next tick {clock.iso(doc['next_tick_at'])}")


def _report(actions: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(actions)
        return
    for action in actions:
        typer.echo(f"{clock.iso(action['tick_at'])}: {action['action']}"
                   + (f" {action['instance_id']}" if action["instance_id"] else "")
                   + (f" ({action['reason']})" if action["reason"] else ""))


def trigger(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The schedule."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Start the schedule's workflow now, as a tick of this instant (the overlap policy
    applies)."""
    _report(_client(ctx).trigger(name), as_json)


def backfill(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The schedule."),
    start: str = typer.Option(..., "--from", metavar="WHEN",
                              help="The first instant (ISO 8601, or a duration back from now)."),
    end: str = typer.Option(..., "--to", metavar="WHEN", help="The last instant, included."),
    overlap: str | None = typer.Option(None, "--overlap", metavar="POLICY",
                                       help="The overlap policy for these ticks (default: the "
                                            "schedule's)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Every tick from --from to --to, in order (the overlap policy applies)."""
    client = _client(ctx)
    first = instant_option("--from", start, client.now)()
    last = instant_option("--to", end, client.now)()
    if first > last:
        fail("--from must not be after --to")
    _report(client.trigger(name, backfill=(first, last), overlap=overlap), as_json)


# The subcommands of `wfctl schedule`, registered by cli/commands.py.
SCHEDULE_COMMANDS = {"describe": describe, "pause": pause, "unpause": unpause,
                     "trigger": trigger, "backfill": backfill}
