"""What a worker carrying 1,000 schedules spends on them while none is due.

Goal: under 1 ms of CPU a second.

Setup: a definitions file with N schedules (`cron: "0 3 * * *"` in Europe/Berlin, each at its own
minute of the day, so that none is due for hours), a fresh SQLite file (or `--db
postgresql://…`), and the worker's schedule loop (`wfctl.worker.schedule_loop.ScheduleLoop`), whose
first pass records the schedules. Then `--passes` passes are timed as the loop makes them, with
the CPU time of this process (`time.process_time`); an idle loop makes one pass a second
(`SCHEDULE_TICK`) or fewer, so the CPU a pass costs is the CPU a second costs. Passes run back to
back: the figure needs no waiting.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import benchlib

from wfctl import Client
from wfctl.worker.schedule_loop import SCHEDULE_TICK


def definitions(count: int) -> str:
    lines = ["version: 1", "workflows:", "  report:", "    steps:", "      - delay: 1h",
             "schedules:"]
    for n in range(count):
        lines += [f"  s{n}:", "    workflow: report",
                  f"    cron: \"{n % 60} {3 + n // 60 % 20} * * *\"",
                  "    timezone: Europe/Berlin"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=50)
    parser.add_argument("--db", help="a PostgreSQL URL (default: a SQLite file in a temporary "
                                     "folder)")
    options = parser.parse_args()
    print(f"wfctl: {benchlib.wfctl.__file__}")
    with tempfile.TemporaryDirectory() as folder:
        workflows = Path(folder) / "workflows.yaml"
        workflows.write_text(definitions(options.schedules))
        client = Client(options.db or Path(folder) / "wfctl.db", workflows)
        client.definitions()
        worker = client.worker()
        loop = worker.schedules
        assert loop is not None
        began = time.perf_counter()
        loop.run_once(client.now())
        print(f"{options.schedules} schedules recorded in "
              f"{(time.perf_counter() - began) * 1000:.0f} ms; next due in "
              f"{loop.idle_wait():.1f} s (a pass at least every {SCHEDULE_TICK:g} s)")
        cpu = time.process_time()
        for _ in range(options.passes):
            assert loop.run_once(client.now()) is False
        per_pass = (time.process_time() - cpu) / options.passes * 1000 / SCHEDULE_TICK
        verdict = "met" if per_pass < 1.0 else "missed"
        print(f"idle: {per_pass:.3f} ms of CPU a second over {options.passes} passes "
              f"(goal < 1 ms: {verdict})")
        client.close()


if __name__ == "__main__":
    main()
