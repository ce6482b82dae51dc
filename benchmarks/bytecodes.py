"""Python bytecodes a step runs, by function and by line: where the interpreter's share of a step goes.

One worker slot in process drains N `three_noops` workflows (its quick handlers' steps up to 16
a transaction, as `instructions.py`'s batched drain), with a trace function that counts every
bytecode the interpreter runs (`f_trace_opcodes`) and every Python call, and prints them per
step: in all, by module, by function (exclusive of what it calls) and by line. The count does
not move with the machine's load, and it names the Python function and line, where callgrind's
counts (`instructions.py`) end at the interpreter's C functions; C work (SQLite, a builtin's
own) is not counted. Compare a tree with another by their totals and top lines; the
instructions a step decide.

  python benchmarks/bytecodes.py [-n 300] [--top 40] [--lines 40]
"""

from __future__ import annotations

import argparse
import collections
import linecache
import sys
from types import CodeType, FrameType
from typing import Any

import pglib
from benchlib import Scratch

from wfctl import clock
from wfctl.worker import WorkerOptions, slots

STEPS_PER_WORKFLOW = 3
PACKAGE = "wfctl/"


def counted(workflows: int, db: str | None = None) -> tuple[collections.Counter[CodeType],
                                     collections.Counter[tuple[CodeType, int]],
                                     collections.Counter[CodeType]]:
    """Bytecodes by function and by (function, line), and calls by function, of the drain (on
    the PostgreSQL database `db`, else a file)."""
    ops: collections.Counter[CodeType] = collections.Counter()
    lines: collections.Counter[tuple[CodeType, int]] = collections.Counter()
    calls: collections.Counter[CodeType] = collections.Counter()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            ops[frame.f_code] += 1
            lines[frame.f_code, frame.f_lineno] += 1
        return local

    def entered(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        calls[frame.f_code] += 1
        return local

    # Traced, a no-op handler's call is not quick: held quick, as it is natively.
    slots.QUICK_HANDLER = 1.0
    with Scratch(db=db) as scratch:
        client = scratch.client()
        for n in range(workflows):
            client.start("three_noops", f"i-{n:06d}")
        worker = client.worker(WorkerOptions(concurrency=1))
        worker.register(clock.now())
        slot = worker.slots[0]
        sys.settrace(entered)
        try:
            while slot.run_once(clock.now()):
                pass
        finally:
            sys.settrace(None)
        client.close()
    return ops, lines, calls


def place(code: CodeType) -> str:
    name = code.co_filename
    return name[name.rfind(PACKAGE):] if PACKAGE in name else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--workflows", type=int, default=300)
    parser.add_argument("--top", type=int, default=40, help="functions shown (default 40)")
    parser.add_argument("--lines", type=int, default=40, help="lines shown (default 40)")
    parser.add_argument("--postgres", action="store_true",
                        help="drain on a throwaway PostgreSQL cluster (fsync on)")
    args = parser.parse_args()
    if args.postgres:
        cluster = pglib.Cluster()
        server = pglib.Server(cluster.url, cluster)
        try:
            with server.database() as url:
                ops, lines, calls = counted(args.workflows, url)
        finally:
            server.close()
    else:
        ops, lines, calls = counted(args.workflows)
    steps = STEPS_PER_WORKFLOW * args.workflows
    print(f"{sum(ops.values()) / steps:,.0f} bytecodes and "
          f"{sum(calls.values()) / steps:,.0f} Python calls a step "
          f"({args.workflows} workflows, one slot, batched)")
    modules: collections.Counter[str] = collections.Counter()
    for code, count in ops.items():
        modules[place(code)] += count
    print("\nby module (bytecodes a step)")
    for module, count in modules.most_common(20):
        print(f"{count / steps:9.1f}  {module}")
    print("\nby function (bytecodes, calls a step; a dataclass's __init__ shows as <string>)")
    for code, count in ops.most_common(args.top):
        print(f"{count / steps:9.1f} {calls[code] / steps:6.2f}  "
              f"{place(code)}:{code.co_firstlineno} {code.co_name}")
    print("\nby line (bytecodes a step)")
    shown = [(key, count) for key, count in lines.most_common() if key[1] is not None]
    for (code, line), count in shown[:args.lines]:
        text = linecache.getline(code.co_filename, line).strip()
        print(f"{count / steps:9.1f}  {place(code)}:{line}  {text[:90]}")


if __name__ == "__main__":
    main()
