"""`wfctl demo`: the ETL example run by a worker in this process, with limits of seconds, so that
an attempt's start-to-close timeout and a workflow's deadline fire while the user watches."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from wfctl.client import Client
from wfctl.errors import InvalidInput
from wfctl.show import render, timeline
from wfctl.worker import WorkerOptions

EXAMPLES = Path(__file__).parent.parent / "examples"
# What the demo writes into its folder: its database (empty, for SQLite to fill), and a template
# to edit: the definitions, and the module of handlers they name (`etl:extract`), which imports
# from the definitions' folder.
FILES = {"wfctl.db": None, "workflows.yaml": EXAMPLES / "demo.yaml", "etl.py": EXAMPLES / "etl.py"}
# The demo's two workflows take about three seconds; past this something is wrong.
PATIENCE = 30.0
# demo-late must complete within this, and its extract step takes longer (60 rows, 50 ms each).
LATE_DEADLINE = 2
LATE_ROWS = 60
# The events of each workflow that tell its story.
SHOWN = {
    "demo-etl": ("ActivityRetryScheduled", "WorkflowCompleted"),
    "demo-late": ("WorkflowDeadlineExceeded", "WorkflowFailed"),
}


def run(folder: Path, out: Console) -> None:
    """Run the demo on a new database in `folder`, which is kept with the workflow's definitions
    and handlers; print what happened, the timeline of one workflow, and what to try next."""
    _write_files(folder)
    with Client(folder / "wfctl.db", folder / "workflows.yaml") as client:
        client.start("etl", "demo-etl", input={"source": "demo://orders.csv", "stall": True})
        client.start("etl", "demo-late", input={"source": "demo://archive.csv",
                                                "rows": LATE_ROWS}, deadline=LATE_DEADLINE)
        _introduce(out)
        _run_worker(client)
        for instance_id in SHOWN:
            _story(out, client, instance_id)
        out.print()
        doc = client.describe("demo-etl")
        out.print(timeline.draw(doc, client.history("demo-etl"), now=client.now(),
                                width=out.width), soft_wrap=True)
    _what_next(out, folder)


def _write_files(folder: Path) -> None:
    """Create the demo's files in `folder` (made if missing), each only if it does not exist:
    the demo never overwrites a file, not even one that appears while it writes. Refused, it
    leaves nothing behind: what it created is removed again."""
    _refuse_existing([folder / name for name in FILES if os.path.lexists(folder / name)])
    made_folders = _make_folder(folder)
    written: list[Path] = []
    try:
        for name, source in FILES.items():
            path = folder / name
            # Mode "x" is O_CREAT | O_EXCL: it fails, rather than truncates, when the file is
            # there, whenever it came.
            with open(path, "xb") as file:
                written.append(path)
                if source is not None:
                    file.write(source.read_bytes())
    except BaseException as exc:
        for path in written:
            path.unlink(missing_ok=True)
        for made in made_folders:
            # Only if still empty: something else may have written there meanwhile.
            try:
                made.rmdir()
            except OSError:
                break
        if isinstance(exc, FileExistsError):
            _refuse_existing([Path(exc.filename)])
        if isinstance(exc, OSError):
            raise InvalidInput(f"cannot write {exc.filename}: {exc.strerror}") from None
        raise


def _refuse_existing(existing: list[Path]) -> None:
    if existing:
        raise InvalidInput(f"{', '.join(map(str, existing))} "
                           f"{'exists' if len(existing) == 1 else 'exist'} already; the demo "
                           "never overwrites a file (pass --folder with a new or empty folder)")


def _make_folder(folder: Path) -> list[Path]:
    """Make `folder` and its missing parents; the folders made, innermost first."""
    missing = [path for path in (folder, *folder.parents) if not os.path.lexists(path)]
    if os.path.lexists(folder) and not folder.is_dir():
        raise InvalidInput(f"--folder {folder}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InvalidInput(f"--folder {folder}: a part of the path is not a folder") from None
    except OSError as exc:
        raise InvalidInput(f"cannot create {exc.filename or folder}: {exc.strerror}") from None
    return missing


def _introduce(out: Console) -> None:
    render.emit(out, Text.assemble(
        ("wfctl demo", "bold"), ": the ETL example (extract → transform → load) with limits of "
        "seconds, so that a timeout and a deadline fire while you watch.\n"
        "  demo-etl   transform's first attempt hangs past its start-to-close (1s)\n"
        f"  demo-late  started with --deadline {LATE_DEADLINE}s; its extract takes about "
        f"{LATE_ROWS * 0.05:.0f}s\n"
        "A worker runs them now, for a few seconds..."))


def _run_worker(client: Client) -> None:
    """Run a worker until both workflows have closed."""
    worker = client.worker(WorkerOptions(concurrency=4, worker_lease=5))
    thread = threading.Thread(target=worker.run, name="demo-worker", daemon=True)
    # The worker's log lines (a result discarded after the deadline) are not the demo's story;
    # without a handler of its own, Python would print the warnings bare on stderr.
    quiet = logging.NullHandler()
    logging.getLogger("wfctl").addHandler(quiet)
    thread.start()
    try:
        end = time.monotonic() + PATIENCE
        while any(client.describe(instance_id)["closed_at"] is None for instance_id in SHOWN):
            if time.monotonic() > end:
                raise InvalidInput(f"the demo's workflows did not close within {PATIENCE:.0f}s")
            time.sleep(0.1)
    finally:
        worker.request_stop()
        thread.join(10)
        logging.getLogger("wfctl").removeHandler(quiet)


def _story(out: Console, client: Client, instance_id: str) -> None:
    doc = client.describe(instance_id)
    run = doc["run"]
    took = (run["closed_at"] - run["started_at"]).total_seconds()
    out.print()
    render.emit(out, Text.assemble((instance_id, "bold"), " ", render.status_text(doc["status"]),
                                   f" after {render.span(took)}: ", _outcome(doc)))
    events = [event for event in client.history(instance_id)
              if event["event_type"] in SHOWN[instance_id]]
    render.history(out, events, start_at=doc["created_at"])


def _outcome(doc: dict[str, Any]) -> str:
    if doc["status"] == "completed":
        return "the attempt that timed out was retried"
    failure = doc["failure"] or {}
    if failure.get("failure_category") == "deadline":
        return f"its deadline passed, so {doc['on_deadline']} ran"
    return str(failure.get("message"))


def _what_next(out: Console, folder: Path) -> None:
    render.emit(out, Text.assemble(("\nWhat next", "bold"),
                                   " (the folder is kept: etl.py, workflows.yaml, wfctl.db):"))
    # The folder is never broken over two lines: it is to be copied.
    out.print(f"  cd {folder}", soft_wrap=True, markup=False, highlight=False)
    render.emit(out, Text.assemble(
        "  wfctl describe demo-late      every deadline, and the one that passed\n",
        "  wfctl history demo-etl        each event; the timeout stands out\n",
        "  wfctl timeline demo-late      the run against its deadline\n",
        "  wfctl work                    the worker: it blocks, so in a second terminal\n",
        "  wfctl start etl --input '{\"flaky\": true}' --wait   a new run, followed live\n",
        ("Edit etl.py first", "bold"), " (the handlers), then workflows.yaml (steps and limits)."))
