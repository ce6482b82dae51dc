"""The words wfctl's records are made of, listed once: everything else refers to these."""

from typing import NamedTuple

# The event names SPEC §5 fixes; `history --event-type` checks against them and completes them.
EVENT_TYPES = (
    "WorkflowStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
    "WorkflowTaskTimedOut", "ActivityScheduled", "ActivityStarted", "ActivityHeartbeatRecorded",
    "ActivityCompleted", "ActivityFailed", "ActivityRetryScheduled", "ActivityTimedOut",
    "ActivityCancelled", "TimerScheduled", "TimerFired", "TimerCancelled", "SignalWaitOpened",
    "SignalReceived", "ChildWorkflowStarted", "ChildWorkflowCompleted", "ChildWorkflowFailed",
    "ChildWorkflowTimedOut", "ParentClosePolicyApplied", "WorkflowPaused", "WorkflowResumed",
    "WorkflowDeadlineExceeded", "WorkflowRetryScheduled", "WorkflowRetried",
    "WorkflowContinuedAsNew", "WorkflowCompleted",
    "WorkflowFailed", "WorkflowTimedOut", "WorkflowCancelRequested", "WorkflowCancelled",
    "WorkflowTerminated", "StartRejected",
)

# A run (and its instance) is open while it is one of these; only `close_run` moves it to a closed one.
OPEN_RUN = ("running", "waiting", "paused")
# An instance ends in one of the first five; a run may also hand over to the next one.
CLOSED_RUN = ("completed", "failed", "timed_out", "cancelled", "terminated", "continued_as_new")
# The closed statuses that count as failure: a parent sees its child fail on any of these.
UNSUCCESSFUL_RUN = ("failed", "timed_out", "cancelled", "terminated")
# The closed statuses a retry policy runs again from the failed step.
RETRYABLE_RUN = ("failed", "timed_out")
# The closed statuses `wfctl retry` resumes from the step that failed or was stopped.
RESUMABLE_RUN = (*RETRYABLE_RUN, "cancelled", "terminated")
# What `list --status` accepts: a run that continued as new is never an instance's status.
CLOSED_INSTANCE = CLOSED_RUN[:-1]
INSTANCE_STATUSES = (*OPEN_RUN, *CLOSED_INSTANCE)
RUN_STATUSES = (*OPEN_RUN, *CLOSED_RUN)
# The event that tells a parent its child closed, by the child's status (any other: failed).
CHILD_CLOSED_EVENT = {"completed": "ChildWorkflowCompleted", "timed_out": "ChildWorkflowTimedOut"}
# The event that closes a run, by the status it closes with.
RUN_CLOSED_EVENT = {
    "completed": "WorkflowCompleted", "failed": "WorkflowFailed", "timed_out": "WorkflowTimedOut",
    "cancelled": "WorkflowCancelled", "terminated": "WorkflowTerminated",
    "continued_as_new": "WorkflowContinuedAsNew",
}

# An activity waits for a worker (scheduled, or retry_scheduled until its backoff passes), is
# started by one, and closes once. The store's queries spell these lists in this order, as its
# partial indexes do: SQLite uses such an index only for a query that names the same list.
PENDING_ACTIVITY = ("scheduled", "retry_scheduled")
OPEN_ACTIVITY = (*PENDING_ACTIVITY, "started")
UNSUCCESSFUL_ACTIVITY = ("failed", "timed_out", "cancelled")
ACTIVITY_STATUSES = (*OPEN_ACTIVITY, "completed", *UNSUCCESSFUL_ACTIVITY)
WORKFLOW_TASK_STATUSES = ("scheduled", "started", "completed", "timed_out", "cancelled")
OPEN_WORKFLOW_TASK = ("scheduled", "started")
TIMER_STATUSES = ("scheduled", "fired", "cancelled")



class Timeout(NamedTuple):
    """One timeout under each name it goes by: its kind (what events, failures and the
    definitions' fields call it), the YAML key that sets it, the column (and event attribute)
    holding its deadline, the activity statuses in which that deadline counts (activities
    only), the label people read, and the key of an activity's retry policy (as `describe
    --json` shows it) that holds its length."""

    kind: str
    yaml_key: str
    column: str
    counts_while: tuple[str, ...]
    label: str
    policy_key: str | None = None


# An activity's timeouts, in the order they are reported when several expired at once.
ACTIVITY_TIMEOUTS = (
    Timeout("schedule_to_close", "schedule_to_close", "schedule_to_close_deadline_at",
            OPEN_ACTIVITY, "schedule-to-close", "schedule_to_close_timeout"),
    Timeout("schedule_to_start", "schedule_to_start", "schedule_deadline_at",
            PENDING_ACTIVITY, "schedule-to-start", "schedule_to_start_timeout"),
    Timeout("heartbeat", "heartbeat", "heartbeat_deadline_at", ("started",), "heartbeat",
            "heartbeat_timeout"),
    Timeout("start_to_close", "start_to_close", "close_deadline_at", ("started",),
            "start-to-close", "start_to_close_timeout"),
)
# A workflow's own timeouts; `execution_timeout` wins when both expired.
WORKFLOW_TIMEOUTS = (
    Timeout("execution_timeout", "execution_timeout", "execution_deadline_at", (),
            "execution deadline"),
    Timeout("run_timeout", "run_timeout", "run_deadline_at", (), "run deadline"),
)
TIMEOUTS = {timeout.kind: timeout for timeout in (*ACTIVITY_TIMEOUTS, *WORKFLOW_TIMEOUTS)}
# An activity's timeouts in the order describe, history, `start --wait` and the web view list
# their deadlines.
ACTIVITY_TIMEOUTS_SHOWN = tuple(TIMEOUTS[kind] for kind in (
    "schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat"))
ACTIVITY_TIMEOUT_KINDS = tuple(timeout.kind for timeout in ACTIVITY_TIMEOUTS)
WORKFLOW_TIMEOUT_KINDS = tuple(timeout.kind for timeout in WORKFLOW_TIMEOUTS)
SIGNAL_WAIT = "signal_wait"
TIMEOUT_KINDS = (*ACTIVITY_TIMEOUT_KINDS, *WORKFLOW_TIMEOUT_KINDS, SIGNAL_WAIT)

# The history events metrics count as timeouts (those carrying a `timeout_kind`) and deadline
# expiries; a trigger (schema.py) counts them as they are appended. A timed-out attempt is retried
# (`ActivityRetryScheduled`) or ends the activity (`ActivityTimedOut`); a signal wait that timed
# out fails its run (`WorkflowFailed`, `timeout_kind: signal_wait`), as does a step whose
# activity timed out, which that activity's own event already counted.
TIMEOUT_EVENTS = (
    "ActivityRetryScheduled", "ActivityTimedOut", "WorkflowTaskTimedOut", "WorkflowTimedOut",
    "WorkflowFailed", "WorkflowDeadlineExceeded",
)
# What a workflow retry policy answers (its `when:`): a step that failed (an activity failed or
# timed out, or a child workflow failed), the run timeout, a signal wait's timeout.
RETRY_CAUSES = ("activity", "run_timeout", SIGNAL_WAIT)
# A run waiting out its retry policy's backoff is `running` with this wait_kind, and the backoff
# is a durable timer of this kind (the watchdog fires it like any other).
RETRY_WAIT = "retry"
RETRY_TIMER = "workflow_retry"
# The timer of a signal wait's timeout.
SIGNAL_TIMEOUT = "signal_timeout"

# A failure record's `failure_category`.
FAILURE_CATEGORIES = ("activity", "timeout", "deadline", "structural_limit", "child_workflow")

# What closing a parent does to its open children.
CHILD_POLICIES = ("terminate", "request_cancel", "abandon")
