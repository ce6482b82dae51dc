"""The state machine: start, decide, complete, fail, retry and time out, each at an explicit `now`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from wfctl import definitions as defs_module
from wfctl.definitions import Definitions
from wfctl.engine.core import Ctx
from wfctl.engine.deadlines import ClaimsInHand
from wfctl.store import Store, Tx

Listener = Callable[[list[dict[str, Any]]], None]


class BatchDone:
    """What the owner of a batch learnt inside it: `nothing_left_ready` when it claimed every
    task that was ready, so that waking idle slots after the commit would find them nothing."""

    nothing_left_ready = False


class Engine:
    """Engine operations over one store. Every method takes `now`; none reads the clock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._definitions: dict[str, Definitions] = {}
        self._saved_digests: set[str] = set()
        # `Ctx.fixed`: the unchanging instance fields of the runs this process touched.
        self.fixed_fields: dict[str, dict[str, Any]] = {}
        self.deadline_claims = ClaimsInHand()
        self._lock = threading.Lock()
        self._batch = threading.local()
        self._wakers: list[Callable[[], None]] = []
        self._deadline_wakers: list[Callable[[], None]] = []
        self._listeners: list[Listener] = []
        # True in a process that checks deadlines (the long-running worker, never --once): there
        # a decision that meets a passed deadline_at hands the run to the deadline path.
        self.checks_deadlines = False

    # plumbing

    @contextmanager
    def transaction(self, now: datetime) -> Iterator[Ctx]:
        """A write transaction; wakers and event listeners hear of it only after it commits.

        Inside `batch()` (same thread) it is a part of the batch's transaction instead.
        """
        batch: list[Ctx] | None = getattr(self._batch, "ctxs", None)
        if batch is not None:
            c = Ctx(self, self._batch.tx, now, self._batch.rows)
            yield c
            c.flush_runs()
            c.flush_tasks()
            batch.append(c)
            return
        with self.store.write() as tx:
            c = Ctx(self, tx, now)
            yield c
            c.flush_runs()
            c.flush_tasks()
        self._committed([c])

    def in_batch(self) -> bool:
        """Whether this thread is inside `batch()`."""
        return getattr(self._batch, "ctxs", None) is not None

    @contextmanager
    def batch(self) -> Iterator[BatchDone]:
        """One write transaction for every engine operation this thread runs inside it (group
        commit). All of them commit, or none: a failure rolls the whole batch back, and the
        caller may run the operations again one by one."""
        if getattr(self._batch, "ctxs", None) is not None:
            raise RuntimeError("engine batches do not nest")
        ctxs: list[Ctx] = []
        done = BatchDone()
        with self.store.write() as tx:
            self._batch.tx, self._batch.ctxs, self._batch.rows = tx, ctxs, ({}, {})
            try:
                yield done
            finally:
                self._batch.tx = self._batch.ctxs = self._batch.rows = None
        self._committed(ctxs, wake=not done.nothing_left_ready)

    def _committed(self, ctxs: list[Ctx], *, wake: bool = True) -> None:
        """What waits for a commit: caches, wake-ups of slots and deadline runners, listeners."""
        for c in ctxs:
            for action in c.after_commit:
                action()
        if wake and any(c.woke for c in ctxs):
            for wake in self._wakers:
                wake()
        if any(c.deadline_claimed for c in ctxs):
            for wake in self._deadline_wakers:
                wake()
        if self._listeners:
            appended = [event for c in ctxs for event in c.appended]
            if appended:
                for listener in self._listeners:
                    listener(appended)

    def add_waker(self, wake: Callable[[], None]) -> None:
        """Call `wake` after each commit that made a task ready."""
        self._wakers.append(wake)

    def remove_waker(self, wake: Callable[[], None]) -> None:
        self._wakers.remove(wake)

    def add_deadline_waker(self, wake: Callable[[], None]) -> None:
        """Call `wake` after each commit that handed a run to the deadline path."""
        self._deadline_wakers.append(wake)

    def remove_deadline_waker(self, wake: Callable[[], None]) -> None:
        self._deadline_wakers.remove(wake)

    def add_listener(self, listener: Listener) -> None:
        """Call `listener` with the events each transaction appended, after it commits."""
        self._listeners.append(listener)

    def definitions_by_digest(self, tx: Tx, digest: str) -> Definitions:
        """The definitions an instance started with (workflows run the shape they began with)."""
        found = self._definitions.get(digest)
        if found is None:
            row = tx.get_definitions(digest)
            if row is None:
                raise LookupError(f"definitions {digest} are missing from the database")
            found = defs_module.parse(row["source"], row["path"])
            with self._lock:
                self._definitions[digest] = found
        return found

    def save_definitions(self, c: Ctx, definitions: Definitions) -> None:
        """Store the definitions text an instance starts with; known as stored once committed."""
        digest = definitions.digest
        if digest in self._saved_digests:
            return
        c.tx.put_definitions(digest, definitions.path, definitions.source, c.now)

        def saved() -> None:
            with self._lock:
                self._saved_digests.add(digest)
                self._definitions.setdefault(digest, definitions)

        c.after_commit.append(saved)

    # the operations, each in the module that owns it

    from wfctl.engine.activities import (
        claim_activity,
        complete_activity,
        fail_activity,
        record_heartbeat,
        release_activity,
    )
    from wfctl.engine.control import (
        cancel,
        pause,
        resume,
        retry,
        signal,
        terminate,
    )
    from wfctl.engine.deadlines import (
        claim_expired_deadlines,
        earliest_deadline,
        record_deadline_exceeded,
    )
    from wfctl.engine.decide import (
        claim_workflow_task,
        complete_workflow_task,
        process_workflow_tasks,
    )
    from wfctl.engine.prune import prune, prune_batch
    from wfctl.engine.start import start
    from wfctl.engine.time import expire, lose_workers


__all__ = ["Engine"]
