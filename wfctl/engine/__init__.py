"""The state machine: start, decide, complete, fail, retry and time out, each at an explicit `now`.

`Engine` is `EngineCore` (transactions, caches, wake-ups) with the operations of the modules
below as its methods: each is a plain function that takes the engine first.
"""

from __future__ import annotations

from wfctl.engine import activities, control, decide
from wfctl.engine import prune as pruning
from wfctl.engine import start as starting
from wfctl.engine.core import BatchDone, EngineCore, Listener
from wfctl.engine.time import deadlines, expiry


class Engine(EngineCore):
    """Engine operations over one store. Every method takes `now`; none reads the clock."""

    start = starting.start

    claim_workflow_task = decide.claim_workflow_task
    complete_workflow_task = decide.complete_workflow_task
    decide_ready_task = decide.decide_ready_task
    process_workflow_tasks = decide.process_workflow_tasks

    claim_activity = activities.claim_activity
    complete_activity = activities.complete_activity
    fail_activity = activities.fail_activity
    record_heartbeat = activities.record_heartbeat
    release_activity = activities.release_activity
    unheld_attempts = activities.unheld_attempts

    signal = control.signal
    pause = control.pause
    resume = control.resume
    cancel = control.cancel
    terminate = control.terminate
    retry = control.retry

    expire = expiry.expire
    lose_workers = expiry.lose_workers
    claim_expired_deadlines = deadlines.claim_expired_deadlines
    record_deadline_exceeded = deadlines.record_deadline_exceeded
    earliest_deadline = deadlines.earliest_deadline

    prune = pruning.prune
    prune_batch = pruning.prune_batch


__all__ = ["BatchDone", "Engine", "EngineCore", "Listener"]
