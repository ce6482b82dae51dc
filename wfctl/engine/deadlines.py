"""Deadlines (must complete within): claim the expiry, run on_deadline, record the failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wfctl import clock
from wfctl.engine.core import (
    Ctx,
    cancel_open_work,
    close_run,
    public_state,
    record_failure,
    state_of,
)
from wfctl.store import CLOSED_RUN, Row

if TYPE_CHECKING:
    from wfctl.engine import Engine

DEADLINE_MESSAGE = "Deadline exceeded"


@dataclass
class DeadlineClaim:
    """An expired deadline this process has claimed: only it may run the handler and record."""

    worker_id: str
    workflow_instance_id: str
    workflow_run_id: str
    deadline_at: str
    on_deadline: str | None
    state: dict[str, Any]
    reclaimed: bool


def claim_expired_deadlines(engine: Engine, worker_id: str, now: datetime,
                            is_alive: Callable[[Row | None, str], bool],
                            limit: int = 100) -> list[DeadlineClaim]:
    """Claim running runs past their deadline, and claims left by processes that died.

    The claim is its own transaction, so that with several workers each expiry is handled
    once, and from the claim on the run advances no further. Calls with one `worker_id`
    must not overlap: its earlier claims still open are taken as left by a failed sweep.
    """
    with engine.transaction(now) as c:
        claims = []
        for run in c.tx.expired_deadlines(c.at, limit):
            if c.tx.claim_deadline(run["workflow_run_id"], worker_id, c.at, None):
                claims.append(_claim(c, worker_id, run, reclaimed=False))
        fresh = {claim.workflow_run_id for claim in claims}
        for run in c.tx.claimed_deadlines():
            owner = run["deadline_claimed_by"]
            # A claim of this worker's own that it did not just make is left from a sweep that
            # failed before recording (one worker's sweeps never overlap): finish it too.
            orphaned = owner == worker_id or not is_alive(c.tx.get_worker(owner), c.at)
            if run["workflow_run_id"] not in fresh and orphaned \
                    and c.tx.claim_deadline(run["workflow_run_id"], worker_id, c.at, owner):
                claims.append(_claim(c, worker_id, run, reclaimed=True))
        return claims


def _claim(c: Ctx, worker_id: str, run: Row, *, reclaimed: bool) -> DeadlineClaim:
    instance = c.instance(run["workflow_instance_id"])
    return DeadlineClaim(
        worker_id=worker_id,
        workflow_instance_id=run["workflow_instance_id"],
        workflow_run_id=run["workflow_run_id"],
        deadline_at=run["deadline_at"],
        on_deadline=instance["on_deadline"],
        state=public_state(state_of(run)),
        reclaimed=reclaimed,
    )


def record_deadline_exceeded(engine: Engine, claim: DeadlineClaim,
                             handler_error: dict[str, str] | None, now: datetime) -> bool:
    """Close the run as failed after its on_deadline handler ran (or raised)."""
    with engine.transaction(now) as c:
        run = c.run(claim.workflow_run_id)
        if run is None or run["status"] in CLOSED_RUN \
                or run["deadline_claimed_by"] != claim.worker_id:
            return False
        cancel_open_work(c, run, "deadline_exceeded")
        c.event(run, "WorkflowDeadlineExceeded", deadline_at=claim.deadline_at,
                handler=claim.on_deadline, handler_error=handler_error,
                claimed_at=run["deadline_claimed_at"])
        failure_id = record_failure(
            c, run, category="deadline", message=DEADLINE_MESSAGE,
            exception_class="WorkflowDeadlineExceeded", deadline_at=claim.deadline_at,
            details={"handler": claim.on_deadline, "handler_error": handler_error},
        )
        close_run(c, run, "failed", "WorkflowFailed", {
            "failure_category": "deadline",
            "message": DEADLINE_MESSAGE,
            "deadline_at": claim.deadline_at,
            "exception_class": "WorkflowDeadlineExceeded",
            "timeout_kind": None,
            "step": None,
        }, failure_id=failure_id, reason="deadline")
        return True


def earliest_deadline(engine: Engine) -> datetime | None:
    """The next deadline_at among running workflows, for the deadline loop's sleep."""
    with engine.store.read() as tx:
        return clock.parse(tx.earliest_deadline())
