"""The words wfctl's records are made of, listed once: everything else refers to these."""

# The event names SPEC §5 fixes; `history --event-type` checks against them and completes them.
EVENT_TYPES = (
    "WorkflowStarted", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
    "WorkflowTaskTimedOut", "ActivityScheduled", "ActivityStarted", "ActivityHeartbeatRecorded",
    "ActivityCompleted", "ActivityFailed", "ActivityRetryScheduled", "ActivityTimedOut",
    "ActivityCancelled", "TimerScheduled", "TimerFired", "TimerCancelled", "SignalWaitOpened",
    "SignalReceived", "ChildWorkflowStarted", "ChildWorkflowCompleted", "ChildWorkflowFailed",
    "ChildWorkflowTimedOut", "ParentClosePolicyApplied", "WorkflowPaused", "WorkflowResumed",
    "WorkflowDeadlineExceeded", "WorkflowRetried", "WorkflowContinuedAsNew", "WorkflowCompleted",
    "WorkflowFailed", "WorkflowTimedOut", "WorkflowCancelRequested", "WorkflowCancelled",
    "WorkflowTerminated", "StartRejected",
)
