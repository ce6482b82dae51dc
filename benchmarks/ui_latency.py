"""How fast `wfctl ui` answers, and how soon an open page learns of a commit.

Goals: `/` in at most 50 ms with 100,000 instances; `/instances/ID` in at most 50 ms for an
instance with a 1,000-event history; an event shows in an open page at most 1 s after its commit;
the server prints its address in under a second.

Setup: one `three_noops` workflow started through `wfctl.Client` and copied through the store to
N instances (their rows written directly, 5,000 a transaction: N starts would take minutes; the
list reads a copy as it reads any instance), and one `signalled` instance that waits for a signal
never sent while E buffered signals (sent in one engine batch) give it a history of about E
events. With `--dir` the folder is kept and its database reused when it already holds them.

Then a real `wfctl ui --port 0` process: the time until it prints its address; each page fetched
`--repeat` times over loopback, request to last byte (the first fetch of each warms the templates
and is left out); and, round after round, a signal committed by this process while a poller asks
`/api/changes` as the page's script does: the time from the commit until the version moves, then
until the page is fetched again. An open page polls every 0.5 s, so it shows the event at most
that much later than the version moves.

`--quick`: 2,000 instances, 200 events, few rounds: a smoke run, not a measurement.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import re
import signal
import subprocess
import sys
import time
from datetime import timedelta
from urllib.parse import urlencode

from benchlib import Scratch, header, load, summary, worker_env

from wfctl import Client

# Instances copied in one transaction.
FILL_BATCH = 5_000
TARGET_PAGE_MS = 50.0
TARGET_LIVE_S = 1.0
TARGET_START_S = 1.0
# The page's script looks at /api/changes this often (wfctl/ui/static/ui.js, POLL).
PAGE_POLL_S = 0.5
SIGNALLED = """
  signalled:
    steps:
      - wait_for_signal: go
"""


def fetch(port: int, path: str) -> tuple[float, int, bytes]:
    """Milliseconds from sending the request to reading the last byte, status, body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
    response = connection.getresponse()
    body = response.read()
    elapsed = (time.perf_counter() - started) * 1000
    connection.close()
    return elapsed, response.status, body


def version(port: int) -> int:
    return json.loads(fetch(port, "/api/changes")[2])["version"]


def prepare(scratch: Scratch, instances: int, events: int) -> None:
    """One instance started through the Client, copied row by row through the store (a start
    each would take minutes at 100,000): the list reads copies as it reads any instance."""
    client = scratch.client()
    try:
        have = client.count()
        if have < instances:
            started = time.perf_counter()
            if have == 0:
                client.start("three_noops", "bench-template")
                have = 1
            fill(client, have, instances)
            print(f"   filled {instances - have} instances in "
                  f"{time.perf_counter() - started:.1f}s")
        if not client.list(workflow_type="signalled", limit=1):
            started = time.perf_counter()
            client.start("signalled", "busy-history")
            with client.engine.batch():
                for _ in range(events - 3):
                    client.signal("busy-history", "noise", force=True)
            print(f"   filled a {events}-event history in "
                  f"{time.perf_counter() - started:.1f}s")
        print(f"   busy-history has {len(client.history('busy-history'))} events")
    finally:
        client.close()


def fill(client: Client, have: int, instances: int) -> None:
    """Copies of bench-template up to `instances`, created a second apart before it."""
    with client.store.read() as tx:
        template = tx.get_instance("bench-template")
        run = dataclasses.asdict(tx.get_run(template.current_run_id))
    instance = dataclasses.asdict(template)
    # The store gives each copy a history key of its own.
    del instance["instance_key"]
    for first in range(have, instances, FILL_BATCH):
        with client.store.write() as tx:
            for n in range(first, min(first + FILL_BATCH, instances)):
                instance_id, run_id = f"bench-{n:06d}", f"bench-run-{n:06d}"
                created = instance["created_at"] - timedelta(seconds=n)
                tx.insert_instance({**instance, "workflow_instance_id": instance_id,
                                    "current_run_id": run_id, "created_at": created,
                                    "updated_at": created})
                tx.insert_run({**run, "workflow_run_id": run_id,
                               "workflow_instance_id": instance_id, "started_at": created})


def deep_page(client: Client, instances: int) -> str:
    """The list's last page as its "older" links reach it: after the 101st oldest copy."""
    doc = client.describe(f"bench-{instances - 101:06d}")
    return "/?" + urlencode({"before": f"{doc['created_at']},{doc['workflow_instance_id']}"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--dir", help="keep the scratch folder here (and reuse its database)")
    parser.add_argument("--quick", action="store_true", help="a smoke run at a small scale")
    args = parser.parse_args()
    if args.quick:
        args.instances, args.events, args.repeat, args.rounds = 2_000, 200, 10, 3
    header(f"wfctl ui latency: {args.instances} instances, a {args.events}-event history")
    with Scratch(args.dir, reuse=bool(args.dir)) as scratch:
        if "signalled:" not in scratch.workflows.read_text():
            scratch.workflows.write_text(scratch.workflows.read_text() + SIGNALLED)
        prepare(scratch, args.instances, args.events)
        started = time.perf_counter()
        ui = subprocess.Popen(
            [sys.executable, "-c", "from wfctl.cli import main; main()", "--db",
             str(scratch.db), "-w", str(scratch.workflows), "ui", "--port", "0"],
            env=worker_env(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = ui.stdout.readline()
        start_s = time.perf_counter() - started
        port = int(re.search(r"127\.0\.0\.1:(\d+)/", line).group(1))
        client = scratch.client()
        try:
            print(f"   address printed after {start_s * 1000:.0f} ms "
                  f"(target < {TARGET_START_S * 1000:.0f} ms)")
            verdicts = [start_s < TARGET_START_S]
            deep = deep_page(client, args.instances)
            for path in ("/", deep, "/instances/busy-history", "/instances/busy-history/history",
                         "/api/instances", "/api/instances/busy-history"):
                fetch(port, path)
                times = [fetch(port, path)[0] for _ in range(args.repeat)]
                targeted = path in ("/", deep, "/instances/busy-history")
                median = sorted(times)[len(times) // 2]
                if targeted:
                    verdicts.append(median <= TARGET_PAGE_MS)
                shown = "/?before=… (the last page)" if path == deep else path
                print(f"   GET {shown:34} ms: {summary(times, 1)}"
                      + (f"  (target p50 ≤ {TARGET_PAGE_MS:.0f})" if targeted else ""))
            moved, shown = [], []
            for _ in range(args.rounds):
                before = version(port)
                committed = time.perf_counter()
                client.signal("busy-history", "noise", force=True)
                while version(port) == before:
                    time.sleep(0.005)
                moved.append(time.perf_counter() - committed)
                fetch(port, "/instances/busy-history")
                shown.append(time.perf_counter() - committed)
            worst = max(shown) + PAGE_POLL_S
            verdicts.append(worst <= TARGET_LIVE_S)
            print(f"   commit → version moved  s: {summary(moved, 3)}")
            print(f"   commit → page fetched   s: {summary(shown, 3)}")
            print(f"   commit → shown, worst case with the page's {PAGE_POLL_S}s poll: "
                  f"{worst:.3f}s (target ≤ {TARGET_LIVE_S:.0f}s)")
        finally:
            client.close()
            ui.send_signal(signal.SIGTERM)
            ui.wait(timeout=10)
        print(f"   {load()} at the end")
        print("   verdict: " + ("all targets met" if all(verdicts) else "a target was missed"))


if __name__ == "__main__":
    main()
