"""The worker: claim, run handlers, heartbeat, keep watch on time, stop cleanly on signals."""

from __future__ import annotations

import logging
import os
import signal
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

from wfctl import clock, handlers, log, systemd
from wfctl.context import _NOTHING, ActivityContext, HeartbeatBuffer
from wfctl.engine import Engine
from wfctl.engine.activities import ActivityTask
from wfctl.errors import ActivityCancelled
from wfctl.watchdog import HOSTNAME, process_started, sweep, sweep_deadlines

ONCE_NOTICE = (
    "deadline checks skipped in --once mode; run 'wfctl deadlines check' or a long-running worker"
)
# How often the watchdog and the deadline loop look again when nothing is due sooner.
WATCH_TICK = 0.25
HOUSEKEEPING_TICK = 0.1


@dataclass(frozen=True)
class WorkerOptions:
    queues: tuple[str, ...] = ("default",)
    concurrency: int = 4
    poll_interval: float = 0.1
    deadline_interval: float = 60.0
    max_tasks: int | None = None
    worker_lease: float = 30.0
    grace: float = 30.0


class Worker:
    """One `wfctl work` process: handler slots plus watchdog, deadline and housekeeping loops."""

    def __init__(self, engine: Engine, options: WorkerOptions | None = None) -> None:
        self.engine = engine
        self.options = options or WorkerOptions()
        self.worker_id = f"{HOSTNAME}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._stop = threading.Event()
        self._force = threading.Event()
        self._wake = threading.Condition()
        self._wake_generation = 0
        self._busy = 0
        self._finished = 0
        self._tasks_done = 0
        self._lock = threading.Lock()
        self._running: dict[tuple[str, int], tuple[ActivityTask, HeartbeatBuffer]] = {}
        # Slots take turns at the engine (claims, decisions, results) and run handlers side by
        # side. SQLite serializes writes anyway; taking turns here keeps the slots from racing
        # for the same task and from holding the write lock while waiting for the interpreter.
        self._engine_turn = threading.Lock()
        self._once = False
        self._registered = False

    # lifecycle

    def register(self, now: datetime, kind: str = "worker") -> None:
        with self.engine.store.write() as tx:
            tx.register_worker({
                "worker_id": self.worker_id,
                "kind": kind,
                "hostname": HOSTNAME,
                "pid": os.getpid(),
                "pid_started": process_started(os.getpid()),
                "queues": ",".join(self.options.queues),
                "started_at": clock.iso(now),
                "heartbeat_at": clock.iso(now),
                "lease_expires_at": clock.iso(now + timedelta(seconds=self.options.worker_lease)),
            })
        self._registered = True

    def renew(self, now: datetime) -> None:
        lease_expires_at = clock.iso(now + timedelta(seconds=self.options.worker_lease))
        with self.engine.store.write() as tx:
            renewed = tx.renew_worker(self.worker_id, clock.iso(now), lease_expires_at)
            if not renewed and not self._stop.is_set():
                # Another watchdog saw the lease lapse (this process stalled) and retried our
                # attempts; what this worker claims from now on must be watched again.
                tx.revive_worker(self.worker_id, clock.iso(now), lease_expires_at)
        if not renewed and not self._stop.is_set():
            log.event("worker_lease_lapsed", logging.WARNING, worker_id=self.worker_id,
                      message="declared lost while stalled; its attempts were retried")

    def unregister(self, now: datetime) -> None:
        if self._registered:
            with self.engine.store.write() as tx:
                tx.stop_worker(self.worker_id, clock.iso(now))
            self._registered = False

    def wake(self) -> None:
        with self._wake:
            self._wake_generation += 1
            self._wake.notify_all()

    def request_stop(self) -> None:
        """First signal: claim nothing new, let running handlers finish."""
        self._stop.set()
        self.wake()

    def request_force_stop(self) -> None:
        """Second signal: stop now."""
        self._force.set()
        self._stop.set()
        self.wake()

    # one unit of work

    def step(self, now: datetime, *, fixed: bool = False) -> bool:
        """Claim and run one task, a workflow task first; False when nothing was ready.

        With `fixed`, everything happens at `now` (tests); otherwise results are reported at
        the time they arrive.
        """
        with self._engine_turn:
            if self._peek_workflow_task(now):
                task = self.engine.claim_workflow_task(self.worker_id, now)
                if task is not None:
                    self.engine.complete_workflow_task(task, now if fixed else clock.now())
                    return True
            if self._stop.is_set() or not self._peek_activity(now):
                return False
            activity = self.engine.claim_activity(self.worker_id, self.options.queues, now)
            if activity is None:
                return False
        self._run_activity(activity, now if fixed else None)
        return True

    def run_once(self, now: datetime) -> bool:
        """One pass at a fixed instant: enforce timeouts, then run every ready task."""
        did = sweep(self.engine, now).acted
        while self.step(now, fixed=True):
            did = True
        return did

    def _peek_workflow_task(self, now: datetime) -> bool:
        return self.engine.store.peek().next_ready_workflow_task(clock.iso(now)) is not None

    def _peek_activity(self, now: datetime) -> bool:
        peek = self.engine.store.peek()
        return peek.next_ready_activity(self.options.queues, clock.iso(now)) is not None

    def _run_activity(self, task: ActivityTask, fixed: datetime | None) -> None:
        def write(details: Any) -> bool:
            return self.engine.record_heartbeat(task, details, fixed or clock.now())

        buffer = HeartbeatBuffer(write, task.heartbeat_timeout)
        ctx = ActivityContext(
            workflow_id=task.workflow_instance_id, run_id=task.workflow_run_id,
            activity_id=task.activity_id, step=task.step, attempt=task.attempt,
            max_attempts=task.max_attempts, last_heartbeat_details=task.last_heartbeat_details,
            schedule_to_close_deadline_at=task.schedule_to_close_deadline_at,
            close_deadline_at=task.close_deadline_at,
            heartbeat_deadline_at=task.heartbeat_deadline_at,
            heartbeat_timeout=task.heartbeat_timeout, heartbeats=buffer,
        )

        def moved() -> None:
            ctx.heartbeat_deadline_at = clock.after(clock.now(), task.heartbeat_timeout)

        buffer.on_write = moved
        key = (task.activity_id, task.attempt)
        with self._lock:
            self._running[key] = (task, buffer)
        try:
            self._execute(task, ctx, buffer, fixed)
        finally:
            with self._lock:
                self._running.pop(key, None)
                self._tasks_done += 1
                limit = self.options.max_tasks
                if limit is not None and self._tasks_done >= limit:
                    self._stop.set()

    def _execute(self, task: ActivityTask, ctx: ActivityContext, buffer: HeartbeatBuffer,
                 fixed: datetime | None) -> None:
        try:
            result = handlers.call(task.handler, task.state, ctx)
        except ActivityCancelled:
            self._discarded(task, "the attempt was cancelled or timed out")
            return
        except Exception as exc:
            pending = buffer.take_pending()
            details = {} if pending is _NOTHING else {"heartbeat_details": pending}
            with self._engine_turn:
                rejected = self.engine.fail_activity(
                    task, type(exc).__name__, str(exc) or type(exc).__name__,
                    fixed or clock.now(),
                    exception_classes=[cls.__name__ for cls in type(exc).__mro__], decide=True,
                    **details,
                )
        else:
            pending = buffer.take_pending()
            details = {} if pending is _NOTHING else {"heartbeat_details": pending}
            with self._engine_turn:
                rejected = self.engine.complete_activity(task, result, fixed or clock.now(),
                                                         decide=True, **details)
        if rejected:
            self._discarded(task, rejected)

    def _discarded(self, task: ActivityTask, reason: str) -> None:
        log.event("activity_result_discarded", logging.WARNING,
                  instance=task.workflow_instance_id, step=task.step, attempt=task.attempt,
                  reason=reason)

    # the long-running worker

    def run(self, *, once: bool = False) -> int:
        """Run until stopped (or, with `once`, until nothing is ready); returns the exit code."""
        self._once = once
        self.engine.checks_deadlines = not once
        self.engine.add_waker(self.wake)
        try:
            return self._run(once)
        finally:
            self.engine.remove_waker(self.wake)

    def _run(self, once: bool) -> int:
        self.register(clock.now())
        log.event("worker_started", worker_id=self.worker_id, queues=",".join(self.options.queues),
                  concurrency=self.options.concurrency, mode="once" if once else "long-running")
        threads = [threading.Thread(target=self._housekeeping_loop, name="housekeeping",
                                    daemon=True)]
        if once:
            log.event("deadline_checks_skipped", logging.WARNING, message=ONCE_NOTICE)
            sweep(self.engine, clock.now())
        else:
            threads.append(threading.Thread(target=self._watchdog_loop, name="watchdog",
                                            daemon=True))
            threads.append(threading.Thread(target=self._deadline_loop, name="deadlines",
                                            daemon=True))
        slots = [threading.Thread(target=self._slot_loop, name=f"slot-{n}", daemon=True)
                 for n in range(self.options.concurrency)]
        for thread in threads + slots:
            thread.start()
        if not once:
            systemd.notify(f"READY=1\nSTATUS={self.status_line()}")
        code = self._supervise(slots)
        self._stop.set()
        self.wake()
        for slot in slots:
            slot.join(0.2)
        self._release_running()
        self.unregister(clock.now())
        for thread in threads:
            thread.join(2)
        log.event("worker_stopped", worker_id=self.worker_id, tasks=self._tasks_done)
        return code

    def _supervise(self, slots: Sequence[threading.Thread]) -> int:
        """Watch for commits by other processes, and drain on the first stop request."""
        store = self.engine.store
        version = store.data_version()
        while not self._stop.is_set():
            if not any(thread.is_alive() for thread in slots):
                return 0
            self._stop.wait(self.options.poll_interval)
            current = store.data_version()
            if current != version:
                version = current
                self.wake()
        # Told before the drain, so that systemd waits for it (up to TimeoutStopSec=).
        systemd.notify(f"STOPPING=1\nSTATUS={self.status_line()}")
        if self._force.is_set():
            return 1
        if self._once:
            return 0
        log.event("worker_draining", worker_id=self.worker_id, running=len(self._running),
                  grace_seconds=self.options.grace)
        deadline = clock.now() + timedelta(seconds=self.options.grace)
        while any(thread.is_alive() for thread in slots) and not self._force.is_set():
            if clock.now() >= deadline:
                break
            self._force.wait(0.05)
        return 1 if self._force.is_set() else 0

    def _release_running(self) -> None:
        with self._lock:
            running = list(self._running.values())
        for task, buffer in running:
            buffer.cancelled = True
            # The latest heartbeat details go with the release, so the next attempt resumes.
            pending = buffer.take_pending()
            details = {} if pending is _NOTHING else {"heartbeat_details": pending}
            self.engine.release_activity(task, clock.now(), "worker_shutdown", **details)

    def _slot_loop(self) -> None:
        while not self._stop.is_set():
            with self._wake:
                generation = self._wake_generation
                finished = self._finished
                self._busy += 1
            did = False
            try:
                did = self.step(clock.now())
            finally:
                with self._wake:
                    self._busy -= 1
                    if did:
                        self._finished += 1
                        self._wake.notify_all()
            if did:
                continue
            # Read outside the lock: wake() must never wait for a database query.
            idle = 0.05 if self._once else self._idle_wait()
            with self._wake:
                if self._once:
                    # Done when nothing is ready, no other slot is mid-task, and none finished
                    # a task since this slot looked (a finish can make new work ready).
                    if self._busy == 0 and self._finished == finished:
                        self._stop.set()
                        self._wake.notify_all()
                        return
                    self._wake.wait(idle)
                elif generation == self._wake_generation:
                    self._wake.wait(idle)

    def _idle_wait(self) -> float:
        with self.engine.store.read() as tx:
            next_at = clock.parse(tx.next_activity_available_at(self.options.queues))
        if next_at is None:
            return 1.0
        return max(0.0, min(1.0, (next_at - clock.now()).total_seconds()))

    def _watchdog_loop(self) -> None:
        while not self._stop.is_set():
            now = clock.now()
            try:
                report = sweep(self.engine, now)
                # Decisions never wait for a free slot: a timeout, a timer or a signal is acted
                # on even while every slot runs a long handler.
                if report.acted or self._peek_workflow_task(clock.now()):
                    with self._engine_turn:
                        self.engine.process_workflow_tasks(self.worker_id, clock.now())
                wait = WATCH_TICK
                if report.next_due is not None:
                    wait = min(wait, max(0.0, (report.next_due - clock.now()).total_seconds()))
            except Exception:
                log.LOGGER.exception("watchdog pass failed; retrying")
                wait = 1.0
            self._stop.wait(wait)

    def _deadline_loop(self) -> None:
        next_sweep = clock.now()
        while not self._stop.is_set():
            now = clock.now()
            try:
                earliest = self.engine.earliest_deadline()
                if now >= next_sweep or (earliest is not None and earliest <= now):
                    sweep_deadlines(self.engine, self.worker_id, now, self._call_on_deadline,
                                    later=clock.now)
                    next_sweep = now + timedelta(seconds=self.options.deadline_interval)
                    earliest = self.engine.earliest_deadline()
                wake_at = min(next_sweep, earliest) if earliest is not None else next_sweep
                wait = min(WATCH_TICK, max(0.0, (wake_at - clock.now()).total_seconds()))
            except Exception:
                log.LOGGER.exception("deadline check failed; retrying")
                wait = 1.0
            self._stop.wait(wait)

    @staticmethod
    def _call_on_deadline(spec: str, state: dict[str, Any]) -> object:
        return handlers.call(spec, state)

    def status_line(self) -> str:
        """What `systemctl status` shows: the state, running handlers and tasks done."""
        state = "stopping" if self._stop.is_set() else "serving " + ",".join(self.options.queues)
        running, done = len(self._running), self._tasks_done
        return (f"{state}; {running} handler{'s' if running != 1 else ''} running, "
                f"{done} task{'s' if done != 1 else ''} done")

    def _housekeeping_loop(self) -> None:
        renew_every = min(5.0, self.options.worker_lease / 3)
        ping_every = systemd.watchdog_interval()
        last_renew = last_ping = clock.now()
        last_status = self.status_line()
        while not self._force.is_set() and self._registered:
            now = clock.now()
            try:
                with self._lock:
                    buffers = [buffer for _, buffer in self._running.values()]
                for buffer in buffers:
                    buffer.flush_if_due()
                if (now - last_renew).total_seconds() >= renew_every:
                    self.renew(now)
                    last_renew = now
                # The watchdog ping comes from this loop, so a wedged worker stops pinging.
                status = self.status_line()
                if ping_every is not None and (now - last_ping).total_seconds() >= ping_every:
                    systemd.notify(f"WATCHDOG=1\nSTATUS={status}")
                    last_ping, last_status = now, status
                elif status != last_status:
                    systemd.notify(f"STATUS={status}")
                    last_status = status
            except Exception:
                log.LOGGER.exception("housekeeping pass failed; retrying")
            self._force.wait(HOUSEKEEPING_TICK)


def install_signal_handlers(worker: Worker) -> Callable[[], None]:
    """The first SIGTERM/SIGINT drains, a second stops at once; handlers only set flags.

    Returns a function that puts the previous handlers back.
    """
    received = {"count": 0}

    def handle(signum: int, frame: FrameType | None) -> None:
        received["count"] += 1
        if received["count"] == 1:
            worker.request_stop()
        else:
            worker.request_force_stop()

    previous = {signum: signal.signal(signum, handle) for signum in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore
