"""The documentation's commands run as written: README.md and every page of docs/, each in a
temporary folder, so that the docs cannot rot.

What the Markdown marks, with an HTML comment on the line before a fenced block:

- `<!-- file: NAME -->`: the block is written to NAME in the folder, where it stands in the page.
  The README's files are written first into every page's folder: the pages go on from its first
  workflow (`shop.py`, `workflows.yaml`).
- `<!-- run -->` before a ```sh block: bash runs it in the folder (`set -e -o pipefail`), in the
  page's order, with `wfctl` on PATH; it must exit 0.
- `<!-- run: background -->` before a ```sh block: bash starts it (a worker, which blocks) and
  the page goes on once a live worker serves the queue `default`; after the page's last block it
  gets SIGTERM, and must then exit 0.
- `<!-- output -->` before a ```text block: each of its lines appears in the stdout of the run
  block before it, `…` standing for any text within the line.

In docs/, every other block is either a ```text block (output or a picture, shown) or one whose
first line says it is an excerpt, for the reader too: `# excerpt: as root, …` (a command that
installs, needs root or a server, or runs for minutes; a file for another program). The README's
two unmarked blocks are its install and test commands; the test command is checked against
.ci/run's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from wfctl import Client, WfctlError

REPO = Path(__file__).parent.parent
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", *DOCS]
MARK = re.compile(r"^<!-- (file: (?P<file>\S+)|run(?P<background>: background)?|output) -->$")
FENCE = re.compile(r"^```(?P<lang>\w*)$")
EXCERPT = "# excerpt"
# A worker registers as soon as it starts; this is for a machine under load, not a mechanism.
WORKER_START = 60.0


@dataclass
class Block:
    mark: str                  # "file", "run", "background" or "output"
    text: str
    line: int
    file: str | None = None


def blocks(page: Path) -> list[Block]:
    """The marked fenced blocks of a page, in order."""
    lines = page.read_text().splitlines()
    found = []
    for number, line in enumerate(lines):
        mark = MARK.match(line)
        if not mark:
            continue
        assert FENCE.match(lines[number + 1]), f"{page.name}:{number + 1}: a mark with no block"
        end = lines.index("```", number + 2)
        text = "\n".join(lines[number + 2:end]) + "\n"
        kind = ("file" if mark["file"] else "background" if mark["background"]
                else "run" if line.startswith("<!-- run") else "output")
        found.append(Block(kind, text, number + 1, mark["file"]))
    return found


def fenced(page: Path) -> list[tuple[int, str, bool, str]]:
    """Every fenced block of a page: (its line, its language, whether a mark is before it, its
    first line)."""
    lines = page.read_text().splitlines()
    found = []
    number = 0
    while number < len(lines):
        fence = FENCE.match(lines[number])
        if fence:
            end = lines.index("```", number + 1)
            marked = number > 0 and bool(MARK.match(lines[number - 1]))
            found.append((number + 1, fence["lang"], marked, lines[number + 1]))
            number = end
        number += 1
    return found


@pytest.mark.parametrize("page", DOCS, ids=lambda page: page.name)
def test_every_code_block_of_the_docs_runs_or_says_it_is_an_excerpt(page):
    for line, language, marked, first in fenced(page):
        where = f"{page.name}:{line}"
        if language == "text":
            continue                # output, checked after a run block or shown as a picture
        assert marked != first.startswith(EXCERPT), (
            f"{where}: a ```{language} block is marked to run or starts {EXCERPT!r}, not both"
            if marked else f"{where}: a ```{language or ' '} block neither runs nor starts "
            f"{EXCERPT!r}")


def output_pattern(line: str) -> re.Pattern[str]:
    return re.compile("[^\n]*".join(re.escape(piece) for piece in line.split("…")))


@pytest.fixture
def shell(tmp_path: Path) -> dict[str, str]:
    """The environment the blocks run in: `wfctl` on PATH is this checkout's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Scripts, not symlinks: a virtual environment's interpreter finds its packages from the
    # path it is started by (its pyvenv.cfg beside it), which a symlink elsewhere would change.
    for name, arguments in (("wfctl", ' -m wfctl "$@"'), ("python3", ' "$@"')):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}"{arguments}\n')
        (bin_dir / name).chmod(0o755)
    env = {key: value for key, value in os.environ.items()
           if key not in ("WFCTL_DB", "WFCTL_WORKFLOWS")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env['PATH']}", NO_COLOR="1", COLUMNS="100",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])))
    return env


@pytest.mark.process
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_pages_runnable_blocks_succeed(page, shell, tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    for block in blocks(REPO / "README.md") if page.name != "README.md" else []:
        if block.mark == "file":
            (folder / block.file).write_text(block.text)
    background: list[subprocess.Popen] = []
    last = None
    try:
        for block in blocks(page):
            where = f"{page.name}:{block.line}"
            if block.mark == "file":
                (folder / block.file).write_text(block.text)
            elif block.mark == "background":
                log = (folder / f"background-{block.line}.log").open("w")
                background.append(subprocess.Popen(
                    ["bash", "-c", block.text], cwd=folder, env=shell, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True))
                wait_for_a_worker(folder, background[-1], where)
            elif block.mark == "run":
                last = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.text],
                                      cwd=folder, env=shell, capture_output=True, text=True,
                                      timeout=120)
                assert last.returncode == 0, f"{where}\n{block.text}\n{last.stdout}{last.stderr}"
            else:
                assert last is not None, f"{where}: output with no run block before it"
                for line in block.text.splitlines():
                    assert output_pattern(line).search(last.stdout), \
                        f"{where}: {line!r} not in the output:\n{last.stdout}"
    finally:
        for process in background:
            os.killpg(process.pid, signal.SIGTERM)
    for process in background:
        assert process.wait(timeout=60) == 0


def wait_for_a_worker(folder: Path, process: subprocess.Popen, where: str) -> None:
    end = time.monotonic() + WORKER_START
    while time.monotonic() < end:
        assert process.poll() is None, f"{where}: the background block ended"
        try:
            with Client(folder / "wfctl.db", create=False) as client:
                if client.serves("default"):
                    return
        except WfctlError:
            pass                # the worker is still creating the database
        time.sleep(0.05)
    raise AssertionError(f"{where}: no worker started within {WORKER_START:.0f}s")


def test_the_pages_with_commands_run_some_and_the_readme_walks_through_a_worker():
    for name in ("README.md", "time.md", "scripting.md", "operations.md", "workflows.md"):
        [page] = [page for page in PAGES if page.name == name]
        assert any(block.mark == "run" for block in blocks(page)), name
    marks = [block.mark for block in blocks(REPO / "README.md")]
    assert marks[:3] == ["file", "file", "background"]
    assert marks.count("output") >= 3


def test_the_readmes_test_command_is_what_ci_runs():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert f"```sh\n{ci}\n```" in readme
    assert "```sh\npip install . && wfctl demo\n```" in readme


def test_the_readme_is_for_the_first_hour():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    for page in ("time", "scripting", "operations", "architecture", "performance", "ui"):
        assert f"(docs/{page}.md)" in "\n".join(lines), page
