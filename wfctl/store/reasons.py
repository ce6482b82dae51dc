"""Why a run ended as it did, read the same way by the engine and the read models: its failure
record as shown, and the reason it was asked to stop."""

from __future__ import annotations

from typing import Any

from wfctl.store import Tx
from wfctl.store.records import Failure, Run


def failure_view(failure: Failure | None) -> dict[str, Any] | None:
    """A failure record as `describe --json` shows it (and a parent's child-failed event)."""
    if failure is None:
        return None
    view = {
        "failure_category": failure.failure_category,
        "timeout_kind": failure.timeout_kind,
        "message": failure.message,
        "exception_class": failure.exception_class,
        "deadline_at": failure.deadline_at,
        "propagation_kind": failure.propagation_kind,
        "activity_id": failure.activity_id,
    }
    if failure.details:
        view.update(failure.details)
    return view


def stop_reason(tx: Tx, run: Run) -> str | None:
    """The reason given when the run was asked to stop (`cancel`/`terminate --reason`, or the
    parent close policy's); None when it was not asked or no reason was given. It lives in the
    request's event, so only a run that was asked to stop reads its history."""
    if not run.cancel_requested and run.status != "terminated":
        return None
    requests = tx.events(run.workflow_instance_id, run_number=run.run_number,
                         event_types=("WorkflowCancelRequested", "WorkflowTerminated"))
    return requests[-1].attributes.get("reason") if requests else None
