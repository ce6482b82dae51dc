"""Every command's --help at 120 columns: placeholders are words, every argument and option says
what it is for, and the command summaries are whole."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from wfctl.cli import app

ROOT = typer.main.get_command(app)
# A placeholder is a word in capitals, or a choice of words: `--queue QUEUE`, `[text|json]`.
PLACEHOLDER = re.compile(r"[A-Z][A-Z_]*|\[[a-z_-]+(?:\|[a-z_-]+)+\]")
# Option names, then an optional placeholder, then at least two blanks before the help.
OPTION = re.compile(r"^  (?P<names>-[-\w]*(?:, -[-\w]+)*)(?: (?P<placeholder>\S+))?(?:  +(?P<help>.*))?$")


def commands(group=ROOT, path=()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in getattr(group, "commands", {}).items():
        found.extend(commands(command, (*path, name)))
    return found


def help_text(path: tuple[str, ...], flag: str = "--help") -> str:
    """The help as a terminal 120 columns wide gets it (the test runner would force 80)."""
    env = {**os.environ, "COLUMNS": "120",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent.parent),
                                                       os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-m", "wfctl", *path, flag], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def sections(text: str) -> dict[str, list[str]]:
    """The lines of each section ('Usage', 'Arguments', 'Options', 'Commands')."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("Usage:"):
            current = "Usage"
            found[current] = [line]
        elif line.endswith(":") and not line.startswith(" "):
            current = line[:-1]
            found[current] = []
        elif current and line.strip():
            found[current].append(line)
    return found


def entries(lines: list[str]) -> list[tuple[str, str]]:
    """(the names, the help) of each entry; a help that starts on the next line joins it."""
    joined: list[list[str]] = []
    for line in lines:
        if line.startswith("   "):
            joined[-1][1] += " " + line.strip()
        else:
            names, _, rest = line.strip().partition("  ")
            joined.append([names, rest.strip()])
    return [(names, text) for names, text in joined]


@pytest.mark.parametrize("path", commands(), ids=lambda path: " ".join(path) or "wfctl")
def test_help_reads_as_words_and_every_parameter_has_help(path):
    text = help_text(path)
    parts = sections(text)

    usage = parts["Usage"][0]
    assert not re.search(r"[<>{}]|\[\[", usage), usage
    assert all(len(line) <= 120 for line in text.splitlines())
    for names, explained in entries(parts.get("Arguments", [])):
        assert PLACEHOLDER.fullmatch(names), names
        assert explained and explained != "[required]", f"{names} has no help"
    for names, explained in entries(parts.get("Options", [])):
        found = OPTION.match("  " + names)
        assert found, names
        if found["placeholder"]:
            assert PLACEHOLDER.fullmatch(found["placeholder"]), names
        assert explained and not explained.startswith("["), f"{names} has no help"
    assert "  " not in usage.strip()


@pytest.mark.parametrize("path", [path for path in commands() if path == () or
                                  hasattr(ROOT.commands.get(path[-1] if path else ""), "commands")],
                         ids=lambda path: " ".join(path) or "wfctl")
def test_command_summaries_are_whole_at_120_columns(path):
    group = ROOT
    for name in path:
        group = group.commands[name]
    listed = dict(entries(sections(help_text(path))["Commands"]))

    assert set(listed) == set(group.commands)
    for name, command in group.commands.items():
        summary = (command.help or "").split("\n\n")[0].replace("\n", " ").strip()
        assert listed[name] == summary, name
        assert not listed[name].endswith("...")


def test_a_placeholder_names_what_the_option_takes():
    work = help_text(("work",))

    assert re.search(r"-q, --queue QUEUE +Serve this queue", work)
    assert re.search(r"-c, --concurrency N +Handlers run at once", work)
    assert re.search(r"--log-format \[text\|json\] +How each log line is written", work)
    assert "Usage: wfctl start [OPTIONS] TYPE [ID]" in help_text(("start",))


@pytest.mark.parametrize("path", commands(), ids=lambda path: " ".join(path) or "wfctl")
def test_h_is_help_for_every_command(path):
    # describe, list and history are also read without typer: -h reaches the help there too.
    assert help_text(path, "-h") == help_text(path)


def test_h_is_listed_beside_help():
    assert re.search(r"^  -h, --help +Show this message and exit", help_text(("list",)), re.M)


def test_the_database_option_names_both_backends():
    assert re.search(r"--db PATH +SQLite file or PostgreSQL URL", help_text(()))
