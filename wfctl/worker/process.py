"""The `wfctl work` process: owns the loops, keeps their threads alive, talks to systemd, stops on signals."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timedelta
from types import FrameType

from wfctl import clock as wall_clock
from wfctl import log, systemd
from wfctl.context import _NOTHING
from wfctl.engine import Engine
from wfctl.engine.time.workers import HOSTNAME, host_id, process_started
from wfctl.errors import StoreUnavailable, WfctlError
from wfctl.store import Row
from wfctl.worker.attempts import Attempt, AttemptObserver
from wfctl.worker.checkpoint import Checkpointer
from wfctl.worker.deadlines import DeadlineRunner
from wfctl.worker.executor import Executor, executor_for
from wfctl.worker.housekeeping import Housekeeping, Pruner
from wfctl.worker.lease import LeaseKeeper
from wfctl.worker.loop import Backoff, Loop, Outage
from wfctl.worker.options import WorkerOptions
from wfctl.worker.slots import Slot, StepPath, run_pass
from wfctl.worker.wakeups import Wakeups
from wfctl.worker.watchdog import Watchdog

ONCE_NOTICE = (
    "deadline checks skipped in --once mode; run 'wfctl deadlines check' or a long-running worker"
)
# Loop threads that die (something escaped a loop's own error handling) are started again; a
# worker where more than this many die within a minute cannot go on, and exits non-zero so
# that its supervisor (systemd's Restart=on-failure) starts a fresh process.
DEATHS_PER_MINUTE = 5
# How long a stopping worker waits for its executor to let go of what it runs.
EXECUTOR_CLOSE_TIMEOUT = 2.0


# Connections the worker needs besides one per slot (see `Worker.__init__`).
OTHER_CONNECTIONS = 7


class Worker:
    """One `wfctl work` process: handler slots, beside them the watchdog, the deadline runner,
    housekeeping and the lease keeper, each a loop in a thread of its own; this object starts
    them, replaces any that dies, and stops them on request.

    `clock` is the one clock of the worker: every instant it acts at is read from it.
    """

    def __init__(self, engine: Engine, options: WorkerOptions | None = None, *,
                 clock: Callable[[], datetime] = wall_clock.now,
                 executor: Executor | None = None) -> None:
        self.engine = engine
        self.options = options or WorkerOptions()
        self.clock = clock
        self.worker_id = f"{HOSTNAME}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.executor = executor or executor_for(self.options.isolation,
                                                 self.options.concurrency, tuple(sys.path))
        self.outage = Outage()
        # One connection per slot (a heartbeat is written from the slot's thread), one for the
        # step path and one for each loop that writes (watchdog, deadline runner, lease,
        # housekeeping, pruner) or reads (metrics).
        engine.store.fit_connections(self.options.concurrency + OTHER_CONNECTIONS)
        # Slots, the watchdog and the deadline runner take turns at the engine's decisions.
        self.engine_turn = threading.Lock()
        self._stop = threading.Event()
        self.forced = threading.Event()
        # SIGTERM/SIGINT received: counted by the signal handler, and nothing else there. A
        # handler that set an Event could deadlock on the Event's lock, held by the very thread
        # it interrupted; the main thread turns the count into requests (`_take_signals`).
        self.signals = 0
        # What the main thread waits on between its looks; set by requests from other threads.
        self._tick = threading.Event()
        self._lock = threading.Lock()
        self._running: dict[tuple[str, int], Attempt] = {}
        self._abandoned: dict[tuple[str, int], Attempt] = {}
        # Attempts whose outcome could not be recorded: still this worker's to give back.
        self._unsettled: dict[tuple[str, int], Attempt] = {}
        self.abandoned_total = 0
        self.tasks_done = 0
        # Set to record each attempt's wait and run time (`work --metrics-port`).
        self.attempt_metrics: AttemptObserver | None = None
        self._registered = False
        self._kind = "worker"
        self._slots_made = 0
        self.steps = StepPath(self)
        self.slots = [self._new_slot() for _ in range(self.options.concurrency)]
        self.watchdog = Watchdog(self)
        self.deadlines = DeadlineRunner(self)
        self.housekeeping = Housekeeping(self)
        self.pruner = Pruner(self)
        self.lease = LeaseKeeper(self)
        self.checkpointer = Checkpointer(self)
        # Where the database tells of other processes' commits (PostgreSQL), a loop listens.
        listener = engine.store.listen()
        self.wakeups = Wakeups(self, listener) if listener is not None else None
        self._threads: dict[Loop, threading.Thread] = {}
        self._deaths: deque[float] = deque()

    # lifecycle in the database

    def register(self, now: datetime, kind: str = "worker") -> None:
        with self.engine.store.write() as tx:
            tx.register_worker(self._record(now, kind))
        self._registered = True
        self._kind = kind

    def _record(self, now: datetime, kind: str) -> Row:
        return {
            "worker_id": self.worker_id,
            "kind": kind,
            "hostname": HOSTNAME,
            "host_id": host_id(),
            "pid": os.getpid(),
            "pid_started": process_started(os.getpid()),
            "queues": ",".join(self.options.queues),
            "started_at": now,
            "heartbeat_at": now,
            "lease_expires_at": now + timedelta(seconds=self.options.worker_lease),
        }

    def renew(self, now: datetime) -> None:
        lease_expires_at = now + timedelta(seconds=self.options.worker_lease)
        gone = False
        with self.engine.store.write() as tx:
            renewed = tx.renew_worker(self.worker_id, now, lease_expires_at)
            if not renewed and not self.stopping:
                gone = tx.get_worker(self.worker_id) is None
                if gone:
                    # The database lost this worker's record (restored from a backup, or
                    # dropped and created again): what it holds and claims is recorded under
                    # its id, so it registers again under the same one, orphaning nothing.
                    tx.register_worker(self._record(now, self._kind))
                else:
                    # Another watchdog saw the lease lapse (this worker on another host went
                    # silent) and retried our attempts; what this worker claims from now on
                    # must be watched again.
                    tx.revive_worker(self.worker_id, now, lease_expires_at)
        if gone:
            log.event("worker_registered_again", logging.WARNING, worker_id=self.worker_id,
                      message="its record was gone from the database (restored from a backup, "
                              "or created anew?); registered again")
        elif not renewed and not self.stopping:
            log.event("worker_lease_lapsed", logging.WARNING, worker_id=self.worker_id,
                      message="declared lost while stalled; its attempts were retried")

    def unregister(self, now: datetime) -> None:
        if self._registered:
            with self.engine.store.write() as tx:
                tx.stop_worker(self.worker_id, now)
            self._registered = False

    # requests (from signal handlers too: they only set flags)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wake(self) -> None:
        """New work may be ready: idle slots look at once."""
        for slot in self.slots:
            slot.wake()

    def request_stop(self) -> None:
        """First signal: claim nothing new, let running handlers finish."""
        self._stop.set()
        for loop in (self.watchdog, self.deadlines, self.pruner, *self.slots):
            loop.stop()
        if self.wakeups is not None:
            # Its thread closes the connection when its wait ends (it is not waited for).
            self.wakeups.stop()
        self._tick.set()

    def request_force_stop(self) -> None:
        """Second signal: stop now."""
        self.forced.set()
        self.request_stop()

    def _take_signals(self) -> None:
        if self.signals >= 2 and not self.forced.is_set():
            self.request_force_stop()
        elif self.signals >= 1 and not self.stopping:
            self.request_stop()

    # one pass

    def step(self, now: datetime) -> bool:
        """Claim and run one task, a workflow task first; False when nothing was ready."""
        return self.slots[0].run_once(now)

    def run_once(self, now: datetime) -> bool:
        """One pass of the watchdog at `now` (enforce timeouts, decide), then of the slots: run
        every ready task, each at the instant the clock reads. What `work --once` does."""
        swept = self.watchdog.run_once(now)
        return run_pass(self, self.slots, self.clock()) or swept

    # the attempts the slots run

    def attempt_started(self, attempt: Attempt) -> None:
        with self._lock:
            self._running[attempt.key] = attempt

    def attempt_ended(self, attempt: Attempt, *, settled: bool) -> None:
        with self._lock:
            self._running.pop(attempt.key, None)
            returned = self._abandoned.pop(attempt.key, None) is not None
            if not settled:
                self._unsettled[attempt.key] = attempt
            abandoned = len(self._abandoned)
            self.tasks_done += 1
            limit = self.options.max_tasks
            enough = limit is not None and self.tasks_done >= limit
        if returned:
            log.event("abandoned_handler_returned", instance=attempt.task.workflow_instance_id,
                      step=attempt.task.step, attempt=attempt.task.attempt, abandoned=abandoned)
        if enough:
            self.request_stop()

    def claim_budget(self, wanted: int) -> int:
        """How many of `wanted` new attempts may be claimed: none once stopping, and never
        more than `max_tasks` counts, with the attempts running included."""
        if self.stopping:
            return 0
        limit = self.options.max_tasks
        if limit is None:
            return wanted
        with self._lock:
            left = limit - self.tasks_done - len(self._running)
        return max(0, min(wanted, left))

    def attempts(self) -> list[Attempt]:
        """The attempts whose handlers run in a slot (abandoned ones aside)."""
        with self._lock:
            return list(self._running.values())

    def abandon_overdue(self, now: datetime) -> list[Slot]:
        """Give up each slot whose handler outlived its attempt by the grace: a fresh slot takes
        its place (returned, to be started), and its thread exits once the handler returns."""
        grace = self.options.abandon_grace
        fresh = []
        for slot in self.slots:
            attempt = slot.attempt
            if attempt is None or not attempt.overdue(now, grace):
                continue
            attempt.abandoned = slot.abandoned = True
            slot.stop()
            self._threads.pop(slot, None)
            with self._lock:
                self._running.pop(attempt.key, None)
                self._abandoned[attempt.key] = attempt
                self.abandoned_total += 1
                abandoned = len(self._abandoned)
            replacement = self._new_slot()
            self.slots = [replacement if other is slot else other for other in self.slots]
            fresh.append(replacement)
            log.event("handler_abandoned", logging.WARNING,
                      instance=attempt.task.workflow_instance_id, step=attempt.task.step,
                      attempt=attempt.task.attempt, reason=attempt.reason,
                      grace_seconds=grace, slot=slot.name, replaced_by=replacement.name,
                      abandoned=abandoned, abandoned_total=self.abandoned_total)
        return fresh

    def status_line(self) -> str:
        """What `systemctl status` shows: the state, running handlers, tasks done, abandoned."""
        state = "stopping" if self.stopping else "serving " + ",".join(self.options.queues)
        with self._lock:
            running, done, abandoned = len(self._running), self.tasks_done, len(self._abandoned)
        line = (f"{state}; {running} handler{'s' if running != 1 else ''} running, "
                f"{done} task{'s' if done != 1 else ''} done")
        return line + (f", {abandoned} abandoned" if abandoned else "")

    # the long-running worker

    def run(self, *, once: bool = False) -> int:
        """Run until stopped (or, with `once`, one pass); returns the exit code: 0 only when
        asked to stop (a signal, `once`, `max_tasks`)."""
        engine = self.engine
        engine.add_waker(self.wake)
        engine.add_deadline_waker(self.deadlines.claimed_for_us)
        checked = engine.checks_deadlines
        engine.checks_deadlines = not once
        try:
            return self._once() if once else self._serve()
        finally:
            engine.checks_deadlines = checked
            engine.remove_deadline_waker(self.deadlines.claimed_for_us)
            engine.remove_waker(self.wake)

    def _register(self) -> bool:
        """Register, waiting out a database outage; False when asked to stop meanwhile."""
        backoff = Backoff()
        while True:
            self._take_signals()
            if self.stopping:
                return False
            try:
                with self.outage.writing():
                    self.register(self.clock())
            except StoreUnavailable:
                self._tick.wait(backoff.next())
                continue
            return True

    def _started(self, once: bool) -> None:
        log.event("worker_started", worker_id=self.worker_id,
                  queues=",".join(self.options.queues), concurrency=self.options.concurrency,
                  mode="once" if once else "long-running")

    def _once(self) -> int:
        if not self._register():
            return 0
        self._started(once=True)
        log.event("deadline_checks_skipped", logging.WARNING, message=ONCE_NOTICE)
        for loop in (self.lease, self.housekeeping):
            self._start(loop)
        # The pass runs in a thread of its own, so that this one acts on signals and gives up
        # a slot whose handler outlived its attempt (with several slots, the pass does that).
        failure: list[BaseException] = []

        def one_pass() -> None:
            try:
                self.run_once(self.clock())
            except BaseException as exc:
                failure.append(exc)

        passing = threading.Thread(target=one_pass, name="once", daemon=True)
        passing.start()
        while passing.is_alive() and not self.forced.is_set():
            self._take_signals()
            if self.abandon_overdue(self.clock()) and self.options.concurrency == 1:
                break
            passing.join(self.options.poll_interval)
        if failure:
            self._shut_down(failed=True, drain=False)
            raise failure[0]
        return self._shut_down(failed=False, drain=False)

    def _serve(self) -> int:
        if not self._register():
            return 0
        self._started(once=False)
        self.deadlines.start_handlers()
        self.engine.store.defer_checkpoints()
        for loop in (self.lease, self.housekeeping, self.checkpointer, self.watchdog,
                     self.deadlines, self.pruner, *self.slots):
            self._start(loop)
        if self.wakeups is not None:
            self._start(self.wakeups)
        systemd.notify(f"READY=1\nSTATUS={self.status_line()}")
        failed = self._supervise()
        return self._shut_down(failed=failed, drain=True)

    def _start(self, loop: Loop) -> None:
        thread = threading.Thread(target=self._thread_main, args=(loop,), name=loop.name,
                                  daemon=True)
        self._threads[loop] = thread
        thread.start()

    @staticmethod
    def _thread_main(loop: Loop) -> None:
        try:
            loop.run()
        except BaseException as exc:
            log.failure("loop_died", exc, loop=loop.name)

    def _supervise(self) -> bool:
        """Until asked to stop: notice commits by other processes (polling, unless the wake-up
        listener hears them), replace dead loop threads and abandoned slots. True when the
        worker cannot go on."""
        version = self._data_version()
        while True:
            self._tick.wait(self.options.poll_interval)
            self._take_signals()
            if self.stopping:
                return False
            if self.wakeups is None or not self.wakeups.listening:
                current = self._data_version()
                if current is not None and current != version:
                    version = current
                    self.wake()
            if not self.tend(self.clock()):
                return True

    def tend(self, now: datetime) -> bool:
        """One supervision pass: start a fresh slot for each abandoned one, and start again
        each loop whose thread died. False when loops die too often to go on."""
        try:
            for slot in self.abandon_overdue(now):
                self._start(slot)
            for loop, thread in list(self._threads.items()):
                if thread.is_alive() or loop.stopped.is_set():
                    continue
                del self._threads[loop]
                if not self._may_restart():
                    return False
                if isinstance(loop, Slot):
                    replacement = self._new_slot()
                    self.slots = [replacement if other is loop else other for other in self.slots]
                    loop = replacement
                log.event("loop_restarted", logging.WARNING, loop=loop.name)
                self._start(loop)
        except RuntimeError as exc:     # no thread can be started
            log.failure("worker_failed", exc, worker_id=self.worker_id)
            return False
        return True

    def _may_restart(self) -> bool:
        now = time.monotonic()
        self._deaths.append(now)
        while self._deaths and now - self._deaths[0] > 60:
            self._deaths.popleft()
        if len(self._deaths) <= DEATHS_PER_MINUTE:
            return True
        log.event("worker_failed", logging.ERROR, worker_id=self.worker_id,
                  message=f"more than {DEATHS_PER_MINUTE} loop threads died within a minute; "
                          "exiting so that a fresh process takes over")
        return False

    def _data_version(self) -> int | None:
        try:
            return self.engine.store.data_version()
        except WfctlError:
            return None

    def _shut_down(self, *, failed: bool, drain: bool) -> int:
        # Told before the drain, so that systemd waits for it (up to TimeoutStopSec=).
        systemd.notify(f"STOPPING=1\nSTATUS={self.status_line()}")
        self.request_stop()
        if drain and not failed and not self.forced.is_set():
            self._drain()
        if self._release_held():
            try:
                self.unregister(self.clock())
            except StoreUnavailable as exc:
                self.outage.failed(exc)
        if self._registered:
            log.event("worker_lease_left_to_lapse", logging.WARNING, worker_id=self.worker_id,
                      message="could not release what it holds; its attempts are retried by "
                              "another worker once its lease lapses")
        for loop in (self.housekeeping, self.lease, self.checkpointer):
            loop.stop()
        self.deadlines.close()
        for loop in (self.housekeeping, self.lease, self.checkpointer, self.watchdog,
                     self.deadlines, self.pruner):
            thread = self._threads.get(loop)
            if thread is not None:
                thread.join(1.0)
        self.executor.close(EXECUTOR_CLOSE_TIMEOUT)
        log.event("worker_stopped", worker_id=self.worker_id, tasks=self.tasks_done)
        return 1 if failed or self.forced.is_set() else 0

    def _drain(self) -> None:
        """Let running handlers (and on_deadline handlers) finish within the grace; abandoned
        handlers are not waited for."""
        log.event("worker_draining", worker_id=self.worker_id, running=len(self.attempts()),
                  grace_seconds=self.options.grace)
        end = time.monotonic() + self.options.grace
        while time.monotonic() < end:
            self._take_signals()
            if self.forced.is_set():
                return
            self.abandon_overdue(self.clock())
            busy = any(thread.is_alive() for loop, thread in self._threads.items()
                       if isinstance(loop, Slot))
            if not busy and not self.deadlines.busy:
                return
            self.forced.wait(0.05)

    def _release_held(self) -> bool:
        """Give back every attempt still held, so that it is retried at once; False when the
        database would not take it."""
        with self._lock:
            held = [*self._running.values(), *self._abandoned.values(),
                    *self._unsettled.values()]
        for attempt in held:
            attempt.abandon.set()
            # The latest heartbeat details go with the release, so the next attempt resumes.
            pending = attempt.heartbeats.take_pending()
            details = {} if pending is _NOTHING else {"heartbeat_details": pending}
            try:
                self.engine.release_activity(attempt.task, self.clock(), "worker_shutdown",
                                             **details)
            except StoreUnavailable as exc:
                self.outage.failed(exc)
                return False
        return True

    def _new_slot(self) -> Slot:
        self._slots_made += 1
        return Slot(self, f"slot-{self._slots_made - 1}")


def install_signal_handlers(worker: Worker) -> Callable[[], None]:
    """The first SIGTERM/SIGINT drains, a second stops at once. The handler only counts them;
    the worker's main thread acts on the count within its poll interval.

    Returns a function that puts the previous handlers back.
    """

    def handle(signum: int, frame: FrameType | None) -> None:
        worker.signals += 1

    previous = {signum: signal.signal(signum, handle) for signum in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore
