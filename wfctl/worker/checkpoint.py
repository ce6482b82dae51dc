"""The checkpointer: copies the database's write-ahead log into it off the step path."""

from __future__ import annotations

import logging
from datetime import datetime

from wfctl.errors import StoreUnavailable
from wfctl.ops import log
from wfctl.worker.loop import Backoff, Loop, Shared

# How often the WAL is copied: a few hundred commits' worth at full speed.
CHECKPOINT_EVERY = 0.25


class Checkpointer(Loop):
    """Copies what the worker committed into the database file, in a thread of its own, so that
    no commit waits for the copy and its fsync (see `Store.defer_checkpoints`)."""

    name = "checkpointer"
    writes = False

    def __init__(self, shared: Shared) -> None:
        super().__init__(shared)
        self._failing: str | None = None
        self._retry = Backoff()

    def run_once(self, now: datetime) -> bool:
        self.shared.engine.store.checkpoint()
        if self._failing is not None:
            log.event("checkpoint_recovered")
            self._failing = None
            self._retry.reset()
        return False

    def failed(self, error: Exception) -> float:
        """A checkpoint that cannot be written (a full disk, say) is not an outage of the
        worker's writes, which go on in the log's own space: said once, and tried again."""
        if not isinstance(error, StoreUnavailable):
            return super().failed(error)
        if str(error) != self._failing:
            self._failing = str(error)
            log.event("checkpoint_failed", logging.WARNING, reason=error.reason,
                      message=str(error), action="retrying; commits go on meanwhile")
        return self._retry.next()

    def idle_wait(self) -> float:
        return CHECKPOINT_EVERY
