"""Prometheus metrics (SPEC §10): what the database holds, read afresh at each scrape, and how
long this worker process's activity attempts waited and ran.

From the database (`wfctl metrics`, and `wfctl work --metrics-port` at `/metrics`):

- `wfctl_instances{workflow_type, status}` gauge: instances by type and status (closed ones too).
- `wfctl_open_activities{queue, status}` gauge: activities not closed yet, by queue and status
  (`scheduled`, `retry_scheduled`, `started`).
- `wfctl_ready_tasks{task, queue}` gauge: tasks a worker may claim now: `task="activity"` per
  queue, `task="workflow"` for workflow tasks, which have no queue (`queue=""`).
- `wfctl_oldest_ready_task_age_seconds{task, queue}` gauge: how long the oldest of them has been
  ready (0 when none is).
- `wfctl_timeouts_total{kind}` counter: timeouts recorded in history, by timeout kind
  (`workflow_task_timeout` for a workflow task's), retried activity attempts included.
- `wfctl_deadline_expiries_total` counter: `WorkflowDeadlineExceeded` events in history.
- `wfctl_next_deadline_seconds{kind}` gauge: seconds from now to the earliest pending deadline of
  each kind; negative when it has passed and is not enforced yet; absent when none is pending.
- `wfctl_live_workers` gauge: `wfctl work` processes whose liveness lease holds.
- `wfctl_queue_live_workers{queue}` gauge: live workers serving each queue that a live worker
  serves or an open activity waits on (0: work there, no worker).

From this worker process only (`wfctl work --metrics-port`):

- `wfctl_activity_schedule_to_start_seconds{queue}` histogram: from the time an attempt became
  available (scheduled, or its retry's backoff ended) to its claim by this worker.
- `wfctl_activity_attempt_duration_seconds{queue, outcome}` histogram: from the claim to the
  handler's return; `outcome` is `completed`, `failed` or `no_longer_current` (the attempt timed
  out or was cancelled while its handler ran).

The counters count history events as they are appended (triggers keep the counts, so that a
scrape never walks history): deleting closed instances with their history leaves them as they
are, and they only grow.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Histogram, generate_latest, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from wfctl import clock
from wfctl.errors import InvalidInput, WfctlError
from wfctl.ops import log
from wfctl.store import Store
from wfctl.store.records import ScheduleState
from wfctl.vocabulary import OPEN_ACTIVITY, SIGNAL_WAIT, TIMEOUT_KINDS

if TYPE_CHECKING:
    from wfctl.engine.tasks import ActivityTask
    from wfctl.lang.handlers import Outcome
    from wfctl.worker.held_attempts import Attempt

# The kinds `wfctl_timeouts_total` and `wfctl_next_deadline_seconds` report, each always present
# in the counter (at 0 until the first one) so that `increase()` sees the first timeout.
WORKFLOW_TASK_TIMEOUT = "workflow_task_timeout"
COUNTED_TIMEOUT_KINDS = (*TIMEOUT_KINDS, WORKFLOW_TASK_TIMEOUT)
DEADLINE_KINDS = (*COUNTED_TIMEOUT_KINDS, "deadline")
# Attempts wait and run from milliseconds to hours.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
           900.0, 3600.0, float("inf"))


def _timeout_kind(row: dict[str, Any]) -> str | None:
    """The timeout a history event records, or None when it records none."""
    event_type, kind = row["event_type"], row["timeout_kind"]
    if event_type == "WorkflowTaskTimedOut":
        return WORKFLOW_TASK_TIMEOUT
    if event_type == "WorkflowFailed":
        # A run fails with a timeout kind when a step's activity or child timed out too; only a
        # signal wait's own timeout is not counted by an event of its own.
        return kind if kind == SIGNAL_WAIT and row["failure_category"] == "timeout" else None
    if event_type == "WorkflowDeadlineExceeded":
        return None
    return kind


class StoreCollector(Collector):
    """The metrics the database holds, read in one snapshot at each scrape, at `now()`."""

    def __init__(self, store: Store, now: Callable[[], datetime] = clock.now) -> None:
        self._store = store
        self._now = now

    def describe(self) -> Iterable[Metric]:
        # Nothing to check against other collectors; describing would read the database.
        return []

    def collect(self) -> Iterator[Metric]:
        now = self._now()
        with self._store.read() as tx:
            instances = tx.instance_counts()
            open_activities = tx.open_activity_counts()
            ready = tx.ready_activity_counts(now)
            ready_workflow = tx.ready_workflow_task_count(now)
            timeouts = tx.timeout_event_counts()
            deadlines = tx.next_deadlines()
            workers = [w for w in tx.live_workers()
                       if w.kind == "worker" and w.lease_expires_at > now]
            schedules = tx.schedules()

        served = {queue for w in workers for queue in w.queues.split(",") if queue}
        queues = sorted(served | {row["queue"] for row in open_activities})
        yield _instance_metric(instances)
        yield _open_activity_metric(open_activities, queues)
        yield from _ready_metrics(ready, ready_workflow, queues, now)
        yield from _timeout_metrics(timeouts)
        yield _next_deadline_metric(deadlines, now)
        yield from _worker_metrics(workers, queues)
        yield from _schedule_metrics(schedules)


def _instance_metric(instances: list[dict[str, Any]]) -> Metric:
    family = GaugeMetricFamily("wfctl_instances", "Workflow instances by type and status.",
                               labels=["workflow_type", "status"])
    for row in instances:
        family.add_metric([row["workflow_type"], row["status"]], row["count"])
    return family


def _open_activity_metric(open_activities: list[dict[str, Any]], queues: list[str]) -> Metric:
    counts = {(row["queue"], row["status"]): row["count"] for row in open_activities}
    family = GaugeMetricFamily(
        "wfctl_open_activities", "Activities not closed yet, by queue and status.",
        labels=["queue", "status"])
    for queue in queues:
        for status in OPEN_ACTIVITY:
            family.add_metric([queue, status], counts.get((queue, status), 0))
    return family


def _ready_metrics(ready: list[dict[str, Any]], ready_workflow: dict[str, Any] | None,
                   queues: list[str], now: datetime) -> Iterator[Metric]:
    by_queue = {row["queue"]: row for row in ready}
    tasks = GaugeMetricFamily(
        "wfctl_ready_tasks", "Tasks a worker may claim now: activities by queue, and "
        "workflow tasks (which have no queue).", labels=["task", "queue"])
    ages = GaugeMetricFamily(
        "wfctl_oldest_ready_task_age_seconds", "How long the oldest ready task has been "
        "ready (0 when none is).", labels=["task", "queue"])
    for task, queue, row in (*(("activity", q, by_queue.get(q)) for q in queues),
                             ("workflow", "", ready_workflow)):
        count = row["count"] if row else 0
        tasks.add_metric([task, queue], count)
        oldest = row["oldest"] if count else None
        ages.add_metric([task, queue],
                        max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
    yield tasks
    yield ages


def _timeout_metrics(timeouts: list[dict[str, Any]]) -> Iterator[Metric]:
    by_kind = dict.fromkeys(COUNTED_TIMEOUT_KINDS, 0)
    expiries = 0
    for row in timeouts:
        if row["event_type"] == "WorkflowDeadlineExceeded":
            expiries += row["count"]
        kind = _timeout_kind(row)
        if kind is not None:
            by_kind[kind] = by_kind.get(kind, 0) + row["count"]
    family = CounterMetricFamily("wfctl_timeouts", "Timeouts recorded in history, by kind; "
                                 "retried activity attempts included.", labels=["kind"])
    for kind, count in by_kind.items():
        family.add_metric([kind], count)
    yield family
    yield CounterMetricFamily("wfctl_deadline_expiries", "Workflow deadlines (must complete "
                              "within) that expired, from history.", value=expiries)


def _next_deadline_metric(deadlines: dict[str, datetime | None], now: datetime) -> Metric:
    family = GaugeMetricFamily(
        "wfctl_next_deadline_seconds", "Seconds from now to the earliest pending deadline "
        "of each kind; negative once passed and not yet enforced.", labels=["kind"])
    for kind in DEADLINE_KINDS:
        due = deadlines[kind]
        if due is not None:
            family.add_metric([kind], (due - now).total_seconds())
    return family


def _worker_metrics(workers: list[Any], queues: list[str]) -> Iterator[Metric]:
    yield GaugeMetricFamily("wfctl_live_workers", "Workers whose liveness lease holds.",
                            value=len(workers))
    family = GaugeMetricFamily(
        "wfctl_queue_live_workers", "Live workers serving each queue that one serves or "
        "an open activity waits on.", labels=["queue"])
    for queue in queues:
        family.add_metric([queue], sum(queue in w.queues.split(",") for w in workers))
    yield family


def _schedule_metrics(schedules: list[ScheduleState]) -> Iterator[Metric]:
    """Each schedule's ticks by outcome (SPEC §12), and the lag of its last start."""
    family = CounterMetricFamily("wfctl_schedule_ticks", "Schedule ticks by what was done: "
                                 "started, skipped, missed, buffered.",
                                 labels=["schedule", "outcome"])
    lag = GaugeMetricFamily("wfctl_schedule_last_start_lag_seconds", "How long after its tick "
                            "the schedule's last instance started.", labels=["schedule"])
    for row in schedules:
        for outcome in ("started", "skipped", "missed", "buffered"):
            family.add_metric([row.name, outcome], getattr(row, f"{outcome}_count"))
        if row.last_lag_seconds is not None:
            lag.add_metric([row.name], row.last_lag_seconds)
    yield family
    yield lag


def exposition(store: Store, now: Callable[[], datetime] = clock.now) -> str:
    """The database's metrics once, in the Prometheus text format (what `wfctl metrics` prints)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store, now))
    return generate_latest(registry).decode()


class AttemptMetrics:
    """This worker process's histograms: how long attempts waited for it, and how long they ran."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.schedule_to_start = Histogram(
            "wfctl_activity_schedule_to_start_seconds", "From the time an attempt became "
            "available to its claim by this worker.", ["queue"], registry=registry,
            buckets=BUCKETS)
        self.duration = Histogram(
            "wfctl_activity_attempt_duration_seconds", "From an attempt's claim by this worker "
            "to its handler's return.", ["queue", "outcome"], registry=registry, buckets=BUCKETS)

    def started(self, task: ActivityTask) -> None:
        if task.schedule_to_start_seconds is not None:
            self.schedule_to_start.labels(task.queue).observe(
                max(0.0, task.schedule_to_start_seconds))

    def finished(self, attempt: Attempt, outcome: Outcome) -> None:
        if attempt.abandon.is_set():
            how = "no_longer_current"
        else:
            how = "failed" if outcome.error is not None or outcome.cancelled else "completed"
        self.duration.labels(attempt.task.queue, how).observe(time.monotonic() - attempt.claimed)


class _QuietHandler(WSGIRequestHandler):
    """No access log: the worker logs one line per event, not per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """`/metrics` over HTTP, served by one thread: scrapes come one after another and share that
    thread's database connection (a thread per request would open one each)."""

    def __init__(self, port: int, registry: CollectorRegistry, host: str = "") -> None:
        """Listen on `port` (all interfaces unless `host`); raises InvalidInput when it cannot."""
        self._metrics = make_wsgi_app(registry)
        try:
            self._server = make_server(host, port, self._app, server_class=WSGIServer,
                                       handler_class=_QuietHandler)
        except OSError as exc:
            raise InvalidInput(f"--metrics-port {port}: cannot listen: "
                               f"{exc.strerror or exc}") from None
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics",
                                        daemon=True)

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"wfctl serves its metrics at /metrics\n"]
        try:
            return self._metrics(environ, start_response)
        except WfctlError as exc:
            log.event("metrics_scrape_failed", logging.ERROR, message=str(exc))
            start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
            return [f"wfctl cannot read its database: {exc}\n".encode()]

    def start(self) -> None:
        self._thread.start()
        log.event("metrics_serving", port=self.port, path="/metrics")

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
