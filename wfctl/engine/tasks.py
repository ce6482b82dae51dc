"""A claimed attempt as the worker gets it, and the free slots a worker offers to what its own
transaction schedules (`Offer`); engine/attempts.py starts an attempt either way."""

from __future__ import annotations

from collections.abc import Callable, Container
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# When an activity has no heartbeat timeout, history still records a heartbeat at most this often.
DEFAULT_HEARTBEAT_EVENT_INTERVAL = 30.0


@dataclass(slots=True)
class ActivityTask:
    """One claimed attempt: what the worker needs to run the handler and report back."""

    activity_id: str
    attempt: int
    max_attempts: int
    worker_id: str
    workflow_instance_id: str
    workflow_run_id: str
    step: str
    handler: str
    state: dict[str, Any]
    last_heartbeat_details: Any
    heartbeat_timeout: float | None
    schedule_to_close_deadline_at: datetime | None
    close_deadline_at: datetime | None
    heartbeat_deadline_at: datetime | None
    non_retryable: tuple[str, ...]
    # Where the activity is in its run, and the events that scheduled and started this
    # attempt: what its completion's event records.
    step_index: int
    branch_index: int
    scheduled_event_id: int
    started_event_id: int | None
    # For the worker's metrics: where the attempt waited, and how long (available to claimed).
    queue: str = ""
    schedule_to_start_seconds: float | None = None

    @property
    def heartbeat_event_interval(self) -> float:
        return self.heartbeat_timeout or DEFAULT_HEARTBEAT_EVENT_INTERVAL


@dataclass(slots=True, eq=False)
class Offer:
    """Free handler slots of one worker, offered to the activities its own transaction schedules.

    A worker that records an outcome and wants its next attempt in the same transaction takes
    the activity that outcome's decision scheduled, when it is a step's only activity and on a
    queue the worker serves, instead of leaving it for the oldest-ready claim (Temporal's eager
    activity dispatch): the row is written started, with no read of it or its run. The attempt's
    history is the same: ActivityScheduled, then ActivityStarted. Since a run's steps end, the
    run a slot follows this way ends too, and the slot goes back to the queue's order.
    """

    worker_id: str
    queues: tuple[str, ...]
    left: int
    taken: list[ActivityTask] = field(default_factory=list)
    # Places beyond the free ones, for the attempts of handlers `quick` says are quick only
    # (the worker runs those one after another: `worker.slots.QUICK_BATCH`).
    ahead: int = 0
    quick: Callable[[str], bool] = field(default=lambda handler: False)
    # Runs the places ahead take no attempt of (the worker holds one of each already).
    held_runs: Container[str] = frozenset()

    def takes(self, queue: str, handler: str, run_id: str) -> bool:
        return queue in self.queues and (
            self.left > 0 or (self.ahead > 0 and self.quick(handler)
                              and run_id not in self.held_runs))

    def take(self, task: ActivityTask) -> None:
        if self.left > 0:
            self.left -= 1
        else:
            self.ahead -= 1
        self.taken.append(task)
