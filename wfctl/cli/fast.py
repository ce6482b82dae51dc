"""`describe`, `list`, `history` and `ui` without typer, which takes longer to start than they take
to run (and `ui` promises to listen within a second).

A command line is run here only when every word of it is plain: the global `--db` and
`--workflows`/`-w` before or after the command, the command's own options, each value in the form
typer takes as it is (a count is digits, a value after a space does not start with a dash; a
choice is checked by the body, alike on both paths). Anything else (help, `-h`, completion, `--`,
an option given twice or misspelled, a value typer would convert or refuse) is left to the typer
application, which then handles the whole command line as it always has. Both run the bodies in
`reads`, so the output, the errors and the exit codes are the same; tests/test_fast_cli.py holds
the two to that.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from wfctl.cli import reads
from wfctl.client import Client
from wfctl.errors import WfctlError

# A positive whole number as typer reads it unchanged (and SQLite's 64 bits hold).
_COUNT = re.compile(r"[1-9][0-9]{0,17}")


def _count(text: str) -> int | None:
    return int(text) if _COUNT.fullmatch(text) else None


def _text(text: str) -> str:
    return text


def _port(text: str) -> int | None:
    """A port as typer reads it (0 to 65535); anything else is typer's to refuse."""
    return int(text) if text.isascii() and text.isdigit() and int(text) <= 65535 else None


class Option(NamedTuple):
    """One option: the body's keyword it sets, and how its value is read (None: a flag; a
    reader that returns None leaves the command line to typer)."""

    keyword: str
    read: Callable[[str], Any] | None = None
    repeatable: bool = False


class Command(NamedTuple):
    """A command's body, whether it takes the instance ID, and its options by name. What an
    option is when not given is the default of the body's keyword."""

    body: Callable[..., None]
    takes_id: bool
    options: dict[str, Option]


GLOBAL_OPTIONS = {
    "--db": Option("db", _text),
    "--workflows": Option("workflows", _text),
    "-w": Option("workflows", _text),
}
# A global option not given: its environment variable (when not empty, as with typer), else this.
GLOBAL_DEFAULTS = {
    "db": ("WFCTL_DB", "wfctl.db"),
    "workflows": ("WFCTL_WORKFLOWS", "workflows.yaml"),
}
COMMANDS = {
    "describe": Command(reads.describe, True, {
        "--run": Option("run", _count),
        "--full-state": Option("full_state"),
        "--json": Option("as_json"),
    }),
    "list": Command(reads.list_instances, False, {
        "--status": Option("status", _text),
        "--type": Option("workflow_type", _text),
        "--schedule": Option("schedule", _text),
        "--since": Option("since", _text),
        "--limit": Option("limit", _count),
        "--watch": Option("watch"),
        "--json": Option("as_json"),
    }),
    "history": Command(reads.history, True, {
        "--run": Option("run", _count),
        "--all-runs": Option("all_runs"),
        "--follow": Option("follow"),
        "-f": Option("follow"),
        "--event-type": Option("event_type", _text, repeatable=True),
        "--no-tasks": Option("no_tasks"),
        "--json": Option("as_json"),
    }),
    "ui": Command(reads.ui, False, {
        "--host": Option("host", _text),
        "--port": Option("port", _port),
        "--open": Option("open_browser"),
        "--allow-actions": Option("allow_actions"),
        "--allow-remote": Option("allow_remote"),
    }),
}


class _NotPlain(Exception):
    """The command line is for typer."""


def _take(words: list[str], options: dict[str, Option], into: dict[str, Any]) -> None:
    """Take the option at the head of `words`, and its value, into `into`."""
    name, equals, value = words.pop(0).partition("=")
    option = options.get(name)
    # A short option's `=` is part of its value; a flag takes none.
    if option is None or (equals and (not name.startswith("--") or option.read is None)):
        raise _NotPlain
    if option.read is None:
        into[option.keyword] = True
        return
    if not equals:
        if not words or words[0].startswith("-"):
            raise _NotPlain
        value = words.pop(0)
    read = option.read(value)
    if read is None or (option.keyword in into and not option.repeatable):
        raise _NotPlain
    if option.repeatable:
        into.setdefault(option.keyword, []).append(read)
    else:
        into[option.keyword] = read


def parse(argv: Sequence[str]) -> tuple[Command, dict[str, str], dict[str, Any]] | None:
    """(the command, the global options given, the body's keywords), or None for typer."""
    words = list(argv)
    try:
        for word in words:
            # Undecodable bytes arrive as lone surrogates: what to make of them is typer's call.
            word.encode("utf-8")
        given: dict[str, str] = {}
        while words and words[0].startswith("-"):
            _take(words, GLOBAL_OPTIONS, given)
        command = COMMANDS.get(words.pop(0)) if words else None
        if command is None:
            return None
        keywords: dict[str, Any] = {}
        ids = []
        while words:
            if words[0].partition("=")[0] in GLOBAL_OPTIONS:
                # Given after the command, as well as before it (not both: that is typer's).
                _take(words, GLOBAL_OPTIONS, given)
            elif words[0].startswith("-"):
                _take(words, command.options, keywords)
            else:
                ids.append(words.pop(0))
    except (UnicodeEncodeError, _NotPlain):
        return None
    if len(ids) != (1 if command.takes_id else 0):
        return None
    if ids:
        keywords["instance_id"] = ids[0]
    return command, given, keywords


def run(argv: Sequence[str]) -> int | None:
    """Run a plain read command line and return its exit code (a body's `fail` or `usage` exits
    by itself); None leaves the command line to typer."""
    if "_WFCTL_COMPLETE" in os.environ:
        return None
    parsed = parse(argv)
    if parsed is None:
        return None
    command, given, keywords = parsed
    paths = {keyword: given[keyword] if keyword in given else os.environ.get(variable) or default
             for keyword, (variable, default) in GLOBAL_DEFAULTS.items()}
    client = Client(paths["db"], paths["workflows"], create=False)
    try:
        with client:
            command.body(client, **keywords)
    except WfctlError as exc:
        sys.stderr.write(f"Error: {reads.error_message(exc, client)}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): what is left to flush goes nowhere, quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0
