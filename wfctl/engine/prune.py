"""Retention: closed instances past their retention (or closed longer ago than asked) are
deleted with every row they own, a small batch per transaction."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from wfctl.engine.core import EngineCore
from wfctl.lang import durations
from wfctl.store import Store

# A batch deletes whole instances until their histories add up to this many events (an
# instance's other rows follow its history's length). Measured with benchmarks/prune.py: about
# 10 three-step workflows, holding the write lock some 4 ms on an idle 2-core machine; with it
# loaded four times over, 500 events a batch held it 15 ms at the median and up to 140 ms, so
# the batch is kept at half that. Larger batches prune hardly faster. An instance with a
# longer history is marked and deleted this many rows a batch.
BATCH_EVENTS = 250
# At most this many instances are looked at per batch.
BATCH_INSTANCES = 200
# `prune` reports this many of the ids it deleted.
IDS_SHOWN = 100
# How many ids a dry run counts the rows of at once (each is an SQL parameter).
COUNT_CHUNK = 500
# The rows `prune` reports deleting besides the instances themselves, table by table.
ROW_TABLES = ("runs", "activities", "workflow_tasks", "timers", "signals", "failures",
              "children", "events")
# The write-ahead log is copied into the file after this many history rows were deleted (about
# 1,000 pages of log, the size at which SQLite itself would copy it, inside some writer's commit).
CHECKPOINT_ROWS = 3000
# While others write, a prune leaves them the write lock this many times as long as its last
# batch held it: it takes at most a twentieth of the time the database can write in.
PRUNE_YIELD = 19


@dataclass
class PruneBatch:
    """What one batch deleted, and how long it held the write lock."""

    instance_ids: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    held_seconds: float = 0.0

    @property
    def empty(self) -> bool:
        """Nothing was deleted: nothing is left to delete."""
        return not self.instance_ids and not any(self.rows.values())


class Pacer:
    """What a prune does between batches. It copies the write-ahead log into the file every
    CHECKPOINT_ROWS history rows, holding no lock (a batch's commit leaves that undone, so as to
    hold the write lock for its change alone). And it says how long to leave the write lock to
    others: as long as the batch held it while nobody else writes (a backlog drains fast on a
    quiet database), PRUNE_YIELD times as long once others wrote meanwhile (their steps keep
    their pace)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._before: int | None = None
        self._after: int | None = None
        self._unflushed = 0

    def before(self) -> None:
        """Called before a batch: what was committed since the last batch is others' doing."""
        self._before = self._store.data_version()

    def after(self, batch: PruneBatch) -> float:
        """After a batch: checkpoint if it is time; how many seconds to pause."""
        self._unflushed += batch.rows.get("events", 0)
        if self._unflushed >= CHECKPOINT_ROWS:
            self.flush()
        quiet = self._after is not None and self._before == self._after
        self._after = self._store.data_version()
        return batch.held_seconds * (1 if quiet else PRUNE_YIELD)

    def flush(self) -> None:
        """Checkpoint what the batches since the last one left in the write-ahead log."""
        if self._unflushed:
            self._store.checkpoint()
            self._unflushed = 0


def _closed_before(now: datetime, older_than: float | None) -> datetime | None:
    return None if older_than is None else now - timedelta(seconds=older_than)


def prune_batch(engine: EngineCore, now: datetime, *, older_than: float | None = None,
                events: int = BATCH_EVENTS) -> PruneBatch:
    """Delete one batch of closed instances past their retention at `now` (with `older_than`:
    closed more than that many seconds before `now`, whatever their type's retention).

    The batch is chosen and deleted in one write transaction, so an instance reopened or
    started again meanwhile is never taken; an empty batch means nothing is left to delete.
    An instance whose history alone is longer than a batch is marked (from then on it is gone
    for readers and cannot be started again) and deleted `events` rows a batch, before any
    other. Its commit leaves the write-ahead log as it is: see `Pacer`.
    """
    batch = PruneBatch()
    with engine.store.bulk_write() as tx:
        began = time.perf_counter()
        marked = tx.pruning_instance()
        if marked is None:
            candidates = tx.prunable_instances(now,
                                               closed_before=_closed_before(now, older_than),
                                               limit=BATCH_INSTANCES)
            chosen, weight = [], 0
            for row in candidates:
                if chosen and weight + row["events"] > events:
                    break
                chosen.append(row["workflow_instance_id"])
                weight += row["events"]
            if weight > events:
                marked = chosen[0]
                tx.mark_pruning(marked, now)
            elif chosen:
                batch.instance_ids = chosen
                batch.rows = tx.delete_instances(chosen)
        if marked is not None:
            batch.rows = tx.delete_instance_part(marked, events)
            if batch.rows.get("instances"):
                batch.instance_ids = [marked]
    batch.held_seconds = time.perf_counter() - began
    return batch


def prune(engine: EngineCore, now: datetime, *, older_than: float | None = None,
          dry_run: bool = False, pause: Callable[[float], object] | None = None) -> dict[str, Any]:
    """Every batch there is to delete at `now` (`prune_batch`), or with `dry_run` what would be
    deleted, as `wfctl prune --json` reports it. `pause(seconds)`, when given, is called after
    each batch with how long to leave the write lock to others (`Pacer`)."""
    report: dict[str, Any] = {
        "dry_run": dry_run,
        "older_than_seconds": durations.whole_seconds(older_than),
        "instances": 0,
        "rows": {},
        "workflow_instance_ids": [],
        "batches": 0,
    }
    rows = dict.fromkeys(ROW_TABLES, 0)
    if dry_run:
        with engine.store.read() as tx:
            candidates = tx.prunable_instances(now,
                                               closed_before=_closed_before(now, older_than),
                                               limit=-1)
            ids = [row["workflow_instance_id"] for row in candidates]
            for start in range(0, len(ids), COUNT_CHUNK):
                _add(rows, tx.count_owned_rows(ids[start:start + COUNT_CHUNK]))
        report.update(instances=len(ids), workflow_instance_ids=ids[:IDS_SHOWN])
    else:
        pacer = Pacer(engine.store)
        while True:
            pacer.before()
            batch = prune_batch(engine, now, older_than=older_than)
            if batch.empty:
                pacer.flush()
                break
            report["batches"] += 1
            report["instances"] += len(batch.instance_ids)
            shown = report["workflow_instance_ids"]
            shown.extend(batch.instance_ids[:IDS_SHOWN - len(shown)])
            _add(rows, batch.rows)
            wait = pacer.after(batch)
            if pause is not None:
                pause(wait)
    report["rows"] = rows
    return report


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    # An instance's own row is counted as `instances`.
    for table in ROW_TABLES:
        total[table] += counts.get(table, 0)
