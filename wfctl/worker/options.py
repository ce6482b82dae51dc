"""How a worker is told to run: queues, slots, intervals, leases and graces."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorkerOptions:
    queues: tuple[str, ...] = ("default",)
    concurrency: int = 4
    poll_interval: float = 0.1
    deadline_interval: float = 60.0
    max_tasks: int | None = None
    worker_lease: float = 30.0
    # How long the first SIGTERM lets running handlers finish.
    grace: float = 30.0
    # How long a handler may go on after its attempt is known to be no longer current before
    # its slot is given up and replaced.
    abandon_grace: float = 2.0
    # Where an attempt's handler runs: "thread" (in the slot's own thread) or "process" (in a
    # child process, killed when its attempt times out or is cancelled).
    isolation: str = "thread"
