"""Deadlines (must complete within): claim the expiry, run on_deadline, record the failure."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from wfctl.engine.closing import close_run
from wfctl.engine.core import Ctx, EngineCore, cancel_open_work, operation, public_state, record_failure
from wfctl.engine.time.claims import DeadlineClaim
from wfctl.engine.time.workers import worker_alive
from wfctl.store.records import RegisteredWorker, Run
from wfctl.vocabulary import CLOSED_RUN

DEADLINE_MESSAGE = "Deadline exceeded"


def deadline_passed(c: Ctx, run: Run) -> bool:
    """Whether this transaction checks deadlines and the run's has passed (at, not before, it)."""
    return c.check_deadlines and run.deadline_at is not None \
        and run.deadline_at <= c.now


def hand_over_deadline(c: Ctx, run: Run, worker_id: str) -> None:
    """Claim the run's passed deadline for `worker_id`, whose deadline runner finishes it.

    Called where the run would otherwise advance (start its next step, apply a result):
    from here on it advances no further, as after a claim by the deadline loop, so the
    outcome never depends on which of the two got there first.
    """
    if not c.tx.claim_deadline(run.workflow_run_id, worker_id, c.now, None):
        return
    run.deadline_claimed_by, run.deadline_claimed_at = worker_id, c.now
    if run.status != "running":
        # A wait that ended after the deadline: the run is no longer waiting, it is expiring.
        c.set_status(run, "running", wait_kind=None)
    c.deadline_claimed = True
    c.engine.deadline_claims.handed_over(run.deadline_at)


@operation
def claim_expired_deadlines(engine: EngineCore, worker_id: str, now: datetime,
                            is_alive: Callable[[RegisteredWorker | None, datetime], bool],
                            limit: int = 100) -> list[DeadlineClaim]:
    """Claim running runs past their deadline; take up claims handed over and left behind.

    The claim is its own transaction, so that with several workers each expiry is handled
    once, and from the claim on the run advances no further. Besides fresh expiries, the
    result holds this worker's claims that its decisions made (fresh too) or that a failed
    record dropped (reclaimed), and claims of workers no longer alive (reclaimed). A claim
    is handed out once: pass each to `record_deadline_exceeded`, also when its handler
    raised; calls may overlap while handlers run.
    """
    in_hand = engine.deadline_claims
    claims: list[DeadlineClaim] = []

    def take(claim: DeadlineClaim) -> None:
        # Held before the commit: an overlapping call waits for this transaction's write
        # lock, and then sees the claim in hand.
        in_hand.hold(claim)
        claims.append(claim)

    try:
        with engine.transaction(now) as c:
            # Every decision that handed a deadline over before this point has committed
            # (this transaction holds the write lock), so the scan below sees its claim.
            in_hand.take_handed_over()
            for run in c.tx.expired_deadlines(c.now, limit):
                if c.tx.claim_deadline(run.workflow_run_id, worker_id, c.now, None):
                    take(_claim(c, worker_id, run, reclaimed=False))
            for run in c.tx.claimed_deadlines():
                run_id, owner = run.workflow_run_id, run.deadline_claimed_by
                if owner == worker_id:
                    if not in_hand.held(run_id):
                        take(_claim(c, worker_id, run, reclaimed=in_hand.was_dropped(run_id)))
                elif not is_alive(c.tx.get_worker(owner), c.now) \
                        and c.tx.claim_deadline(run_id, worker_id, c.now, owner):
                    take(_claim(c, worker_id, run, reclaimed=True))
    except BaseException:
        for claim in claims:
            in_hand.release(claim.workflow_run_id, dropped=claim.reclaimed)
        raise
    return claims


def _claim(c: Ctx, worker_id: str, run: Run, *, reclaimed: bool) -> DeadlineClaim:
    instance = c.instance(run.workflow_instance_id)
    return DeadlineClaim(
        worker_id=worker_id,
        workflow_instance_id=run.workflow_instance_id,
        workflow_run_id=run.workflow_run_id,
        deadline_at=run.deadline_at,
        on_deadline=instance.on_deadline,
        state=public_state(run.state),
        reclaimed=reclaimed,
        handler_ran=instance.on_deadline is not None and _handler_ran(c, run),
    )


def _handler_ran(c: Ctx, run: Run) -> bool:
    """Whether an expiry of this very deadline was recorded before, its handler run: a retry
    that kept the passed deadline (`retry --keep-deadline`) fails the run again, but does not
    alert again."""
    return any(event.attributes.get("deadline_at") == run.deadline_at
               and event.attributes.get("handler") is not None
               and not event.attributes.get("handler_already_ran")
               for event in c.tx.events(run.workflow_instance_id,
                                        event_types=("WorkflowDeadlineExceeded",)))


@operation
def record_deadline_exceeded(engine: EngineCore, claim: DeadlineClaim,
                             handler_error: dict[str, str] | None, now: datetime) -> bool:
    """Close the run as failed after its on_deadline handler ran (or raised).

    False when the claim is no longer this worker's (another took it over) or the run closed.
    If recording fails, the claim is dropped: the next `claim_expired_deadlines` retakes it.
    """
    try:
        recorded = _record(engine, claim, handler_error, now)
    except BaseException:
        engine.deadline_claims.release(claim.workflow_run_id, dropped=True)
        raise
    engine.deadline_claims.release(claim.workflow_run_id, dropped=False)
    return recorded


def _record(engine: EngineCore, claim: DeadlineClaim, handler_error: dict[str, str] | None,
            now: datetime) -> bool:
    with engine.transaction(now) as c:
        run = c.run(claim.workflow_run_id)
        if run is None or run.status in CLOSED_RUN \
                or run.deadline_claimed_by != claim.worker_id:
            return False
        cancel_open_work(c, run, "deadline_exceeded")
        c.event(run, "WorkflowDeadlineExceeded", deadline_at=claim.deadline_at,
                handler=claim.on_deadline, handler_error=handler_error,
                claimed_at=run.deadline_claimed_at,
                **({"handler_already_ran": True} if claim.handler_ran else {}))
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


def earliest_deadline(engine: EngineCore) -> datetime | None:
    """When the deadline loop next has work: the next deadline_at among running workflows,
    or a passed one a decision handed over since the last claim."""
    with engine.store.read() as tx:
        pending = [at for at in (tx.earliest_deadline(),
                                 engine.deadline_claims.earliest_handed_over()) if at]
    return min(pending) if pending else None


HandlerRunner = Callable[[str, dict[str, Any]], object]


HandlerError = dict[str, str] | None
Recorded = dict[str, Any] | None


def sweep_deadlines(engine: EngineCore, worker_id: str, now: datetime, run_handler: HandlerRunner,
                    *, clock: Callable[[], datetime] | None = None,
                    keep_alive: Callable[[Callable[[], HandlerError]], HandlerError] | None = None,
                    ) -> list[dict[str, Any]]:
    """One deadline check (`wfctl deadlines check`): claim each expiry and fire it.

    The handlers run one after another, each through `keep_alive` when given (which keeps the
    claims alive while it runs); `clock` reads the time after each (the caller's clock;
    without it everything is recorded at `now`).
    """
    failed = []
    for claim in claim_expired_deadlines(engine, worker_id, now, worker_alive):
        recorded = fire_deadline(engine, claim, run_handler, clock or (lambda: now),
                                 keep_alive=keep_alive)
        if recorded is not None:
            failed.append(recorded)
    return failed


def fire_deadline(engine: EngineCore, claim: DeadlineClaim, run_handler: HandlerRunner,
                  clock: Callable[[], datetime], *,
                  keep_alive: Callable[[Callable[[], HandlerError]], HandlerError] | None = None,
                  write: Callable[[Callable[[], Recorded]], Recorded] | None = None,
                  ) -> Recorded:
    """Fire one claimed deadline: run its on_deadline handler (through `keep_alive`, when
    given), then record the failure at the instant `clock` reads (through `write`, which may
    try again while the database is unavailable). What `deadlines check` reports of it, or
    None when the run was closed or claimed by another meanwhile.

    The one way a deadline fires: the long-running worker's deadline runner and `wfctl
    deadlines check` both call it.
    """
    def call() -> HandlerError:
        return run_on_deadline(run_handler, claim)

    handler_error = keep_alive(call) if keep_alive else call()

    def record() -> Recorded:
        return record_deadline(engine, claim, handler_error, clock())

    return write(record) if write else record()


def run_on_deadline(run_handler: HandlerRunner, claim: DeadlineClaim) -> HandlerError:
    """Call a claim's on_deadline handler; what it raised, as WorkflowDeadlineExceeded records it.

    Whatever it raises is recorded, never dropped (SystemExit and KeyboardInterrupt too: they
    are the handler's, the worker stops on signals, not exceptions). Its return value is
    ignored. It runs once per deadline instant: not for a claim whose handler already ran.
    """
    if not claim.on_deadline or claim.handler_ran:
        return None
    try:
        run_handler(claim.on_deadline, claim.state)
    except BaseException as exc:
        return {"exception_class": type(exc).__name__, "message": str(exc)}
    return None


def record_deadline(engine: EngineCore, claim: DeadlineClaim, handler_error: HandlerError,
                    now: datetime) -> dict[str, Any] | None:
    """Record a claimed expiry (WorkflowDeadlineExceeded, WorkflowFailed); what `deadlines
    check` reports of it, or None when the run was closed or claimed by another meanwhile."""
    if not record_deadline_exceeded(engine, claim, handler_error, now):
        return None
    return {
        "workflow_instance_id": claim.workflow_instance_id,
        "workflow_run_id": claim.workflow_run_id,
        "deadline_at": claim.deadline_at,
        "on_deadline": claim.on_deadline,
        "handler_error": handler_error,
        "reclaimed": claim.reclaimed,
    }
