"""Where a handler runs: the seam between a slot and the code that executes an attempt.

A slot hands an executor the attempt it runs (`Running`) and waits for its `Outcome`.
`ThreadExecutor` runs the handler in the slot's own thread. An executor that runs it elsewhere
(a child process) offers the same `run` and `close`: it sends the attempt's `call()`, relays
heartbeats into its `heartbeats`, and stops the handler when its `abandon` is set (the attempt
is no longer current).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from wfctl.errors import InvalidInput
from wfctl.lang import handlers
from wfctl.lang.handlers import Outcome
from wfctl.worker.held_attempts import Running


class Executor(Protocol):
    def run(self, attempt: Running) -> Outcome: ...

    def close(self, timeout: float) -> None: ...


class ThreadExecutor:
    """Runs the handler in the calling (slot) thread; nothing it does escapes (`handlers.run`).

    A thread cannot be stopped: a handler that goes on after `abandon` is left running, and
    the worker gives its slot up and starts a fresh one.
    """

    def run(self, attempt: Running) -> Outcome:
        # A handler that takes the state alone (most do) gets no context made.
        task = attempt.task
        return handlers.run(task.handler, task.step, task.state, make_context=attempt.context)

    def close(self, timeout: float) -> None:
        """Nothing to release: the slot threads are the worker's."""


def executor_for(isolation: str, size: int, search_paths: Sequence[str]) -> Executor:
    """The executor for `--isolation`; `size` and `search_paths` are for executors that run
    handlers in other processes (which import handler modules from `search_paths`)."""
    if isolation == "thread":
        return ThreadExecutor()
    if isolation == "process":
        # Imported here: thread mode never pays for the pool's modules.
        from wfctl.worker.isolation import ProcessPool

        return ProcessPool(size, search_paths)
    raise InvalidInput(f"isolation: expected thread or process (got {isolation!r})")
