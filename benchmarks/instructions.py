"""Instructions a step costs: a count that the machine's load does not move.

CPU time per step moves with whatever else the machine runs (up to 1.6 times between identical
runs minutes apart on a shared machine); the number of instructions a step executes does not.
This script counts them with valgrind's callgrind, which runs the program on a simulated CPU
and counts every instruction it executes, whatever the load: the same code, inputs and
environment give the same count to a few parts in a thousand.

A worker slot drains N `three_noops` workflows in process (`run_once` in a loop, what one slot
of `wfctl work` does: its quick handlers' steps up to 16 a transaction, as natively — see
`DRAIN`; with `--concurrency N`, a whole worker of N slots
in `run_once` passes, whose threads valgrind runs one at a time, so that their batches are not
those of a real run), in a child process under callgrind; so for two
sizes, N1 and N2, each from a database of its own with its workflows started beforehand. The
start-up of the process (imports, the first transaction) is the same in both, so

    instructions per step = (count at N2 - count at N1) / (3 * (N2 - N1)).

The split by shared object tells the interpreter's share (libpython), SQLite's and the C
library's (malloc, memcpy, the mutexes SQLite takes). An instruction is not a nanosecond: a
cache miss costs many, and callgrind counts `rep stos` by its iterations; compare counts with
counts (this tree against another, `--tree`), and time with time.

Needs valgrind (Debian: `apt-get install valgrind`); a run takes about two minutes.

  python benchmarks/instructions.py [--workflows 100,400] [--tree PATH] [--concurrency N]
                                    [--top N]
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import HERE, Scratch, checkpoint, load, machine

STEPS_PER_WORKFLOW = 3
# The drain, run in the child under callgrind: the tree to measure comes first on its path.
DRAIN = """
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from benchlib import Scratch
from wfctl import clock
from wfctl.worker import WorkerOptions
from wfctl.worker import slots
# Under callgrind everything runs some fifty times slower, a no-op handler's call too: judged by
# its time, it would not be quick, and each step would be a transaction of its own, where the
# worker batches up to `QUICK_BATCH` of them. The no-op handlers are quick, as they are natively.
slots.QUICK_HANDLER = 1.0
concurrency = int(sys.argv[3])
with Scratch(keep=sys.argv[2], reuse=True) as scratch:
    client = scratch.client()
    if concurrency:
        worker = client.worker(WorkerOptions(concurrency=concurrency))
        while worker.run_once(clock.now()):
            pass
    else:
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(clock.now())
        slot = worker.slots[0]
        while slot.run_once(clock.now(), check_deadlines=False):
            pass
"""
_LIBRARY = re.compile(r"\[([^\]]*)\]\s*$")


def prepare(folder: Path, workflows: int) -> None:
    """A database with `workflows` three_noops started, its log copied into the file."""
    with Scratch(keep=str(folder)) as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"i-{n:06d}")
        client.close()
        checkpoint(scratch.db)


def counted(tree: Path, folder: Path, out: Path, concurrency: int) -> int:
    """Instructions the drain of `folder`'s workflows executed, all of the process."""
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, "-c", DRAIN, str(tree), str(folder), str(concurrency)],
                   check=True, env=environment, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return by_function(out)[None]


def by_function(out: Path) -> collections.Counter[str | None]:
    """Instructions by function (`callgrind_annotate`), and their total under None."""
    text = subprocess.run(["callgrind_annotate", "--threshold=100", str(out)],
                          capture_output=True, text=True, check=True).stdout
    counts: collections.Counter[str | None] = collections.Counter()
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if match is None:
            continue
        count, name = int(match.group(1).replace(",", "")), match.group(2)
        if "PROGRAM TOTALS" in name:
            counts[None] = count
        else:
            counts[name] += count
    return counts


def library(function: str) -> str:
    found = _LIBRARY.search(function)
    name = os.path.basename(found.group(1)) if found else "(unnamed)"
    return re.sub(r"\.so[.\d]*$", "", name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", default="100,400",
                        help="the two sizes N1,N2 (default 100,400)")
    parser.add_argument("--tree", default=str(HERE.parent),
                        help="the wfctl source tree to measure (default: this checkout)")
    parser.add_argument("--concurrency", type=int, default=0,
                        help="a whole worker of N slots in `run_once` passes, its threads run "
                             "one at a time by valgrind (default 0: one slot, no threads)")
    parser.add_argument("--top", type=int, default=0,
                        help="also the N functions whose instructions grew most a step")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("Error: valgrind is not installed (Debian: apt-get install valgrind)")
    small, large = sorted(int(n) for n in args.workflows.split(","))
    tree = Path(args.tree).resolve()
    drainer = f"a worker of {args.concurrency} slots" if args.concurrency else "one slot"
    print(f"== instructions a step: {drainer} drains three_noops workflows")
    print(f"   {machine()}")
    print(f"   the wfctl in {tree / 'wfctl'}")
    print(f"   {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {load()} at start (the count does not "
          "depend on it)")
    with tempfile.TemporaryDirectory(prefix="wfctl-instructions-") as scratch:
        folder = Path(scratch)
        outs = {}
        for workflows in (small, large):
            prepare(folder / f"n{workflows}", workflows)
            outs[workflows] = folder / f"n{workflows}.callgrind"
            total = counted(tree, folder / f"n{workflows}", outs[workflows],
                            args.concurrency)
            print(f"   {workflows:5d} workflows: {total:15,d} instructions in all")
        first, second = by_function(outs[small]), by_function(outs[large])
    steps = STEPS_PER_WORKFLOW * (large - small)
    grown = {name: (second[name] - first[name]) / steps
             for name in set(first) | set(second) if name is not None}
    per_step = (second[None] - first[None]) / steps
    print(f"   instructions a step: {per_step:,.0f}")
    shares: collections.Counter[str] = collections.Counter()
    for name, count in grown.items():
        shares[library(name)] += count
    for name, count in shares.most_common(5):
        print(f"     {count:10,.0f}  {count / per_step:6.1%}  {name}")
    for name, count in sorted(grown.items(), key=lambda item: -item[1])[:args.top]:
        print(f"     {count:10,.0f}  {name[:120]}")


if __name__ == "__main__":
    main()
