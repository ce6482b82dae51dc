"""The `wfctl work` process: owns the loops, keeps their threads alive, talks to systemd, stops on signals."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from types import FrameType

from wfctl import clock as wall_clock
from wfctl.engine import Engine
from wfctl.engine.time.workers import WorkerRecord
from wfctl.errors import StoreUnavailable, WfctlError
from wfctl.ops import log, systemd
from wfctl.worker.checkpoint import Checkpointer
from wfctl.worker.deadline_runner import DeadlineRunner
from wfctl.worker.executor import Executor, executor_for
from wfctl.worker.held_attempts import AttemptObserver, Attempts
from wfctl.worker.housekeeping import Housekeeping, Pruner
from wfctl.worker.lease import LeaseKeeper
from wfctl.worker.loop import Backoff, Loop, Outage, Shared
from wfctl.worker.options import WorkerOptions
from wfctl.worker.schedule_loop import ScheduleLoop
from wfctl.worker.slots import Slot, StepPath
from wfctl.worker.wakeups import Wakeups
from wfctl.worker.watchdog import Watchdog

ONCE_NOTICE = (
    "deadline checks skipped in --once mode; run 'wfctl deadlines check' or a long-running worker"
)
# The outages that pass by themselves: another process holding the write lock, a server
# restarting. A `--once` pass waits one out this long (SQLite's busy timeout) before it gives up;
# any other ends it at once.
PASSING = ("busy", "unreachable")
ONCE_PATIENCE = 30.0
# Loop threads that die (something escaped a loop's own error handling) are started again; a
# worker where more than this many die within a minute cannot go on, and exits non-zero so
# that its supervisor (systemd's Restart=on-failure) starts a fresh process.
DEATHS_PER_MINUTE = 5
# How long a stopping worker waits for its executor to let go of what it runs.
EXECUTOR_CLOSE_TIMEOUT = 2.0
# How long, in all, a stopping worker waits for its slots' last acts (`_wind_down_slots`).
SLOT_WIND_DOWN = 1.0


# Connections the worker needs besides one per slot (see `Worker.__init__`).
OTHER_CONNECTIONS = 8


class Worker:
    """One `wfctl work` process: handler slots, beside them the watchdog, the deadline runner,
    housekeeping and the lease keeper, each a loop in a thread of its own; this object starts
    them, replaces any that dies, and stops them on request.

    `clock` is the one clock of the worker: every instant it acts at is read from it. Each
    loop is given what it uses: the `Shared` engine, clock, outage and stop requests, the
    `Attempts` registry, the worker's `WorkerRecord`, its own options.
    """

    def __init__(self, engine: Engine, options: WorkerOptions | None = None, *,
                 clock: Callable[[], datetime] = wall_clock.now,
                 executor: Executor | None = None) -> None:
        self.engine = engine
        self.options = options = options or WorkerOptions()
        self.clock = clock
        self.executor = executor or executor_for(options.isolation, options.concurrency,
                                                 tuple(sys.path))
        self.record = WorkerRecord(engine.store, queues=options.queues,
                                   lease_seconds=options.worker_lease)
        self.worker_id = self.record.worker_id
        self.outage = Outage()
        # One connection per slot (a heartbeat is written from the slot's thread), one for the
        # step path and one for each loop that writes (watchdog, deadline runner, schedules, lease,
        # housekeeping, pruner) or reads (metrics).
        engine.store.fit_connections(self.options.concurrency + OTHER_CONNECTIONS)
        # Slots, the watchdog and the deadline runner take turns at the engine's decisions.
        self.engine_turn = threading.Lock()
        self._stop = threading.Event()
        self.forced = threading.Event()
        self.shared = Shared(engine, self.worker_id, clock, self.outage, self.engine_turn,
                             self._stop, self.forced)
        # SIGTERM/SIGINT received: counted by the signal handler, and nothing else there. A
        # handler that set an Event could deadlock on the Event's lock, held by the very thread
        # it interrupted; the main thread turns the count into requests (`_take_signals`).
        self.signals = 0
        # The number of the last of them: a once pass it interrupted exits 128 + it.
        self.last_signal = 0
        # What the main thread waits on between its looks; set by requests from other threads.
        self._tick = threading.Event()
        self.attempts = Attempts(options.max_tasks, enough=self.request_stop)
        self._attempt_metrics: AttemptObserver | None = None
        self._slots_made = 0
        shared = self.shared
        self.steps = StepPath(shared, self.attempts, options.queues,
                              places=options.concurrency, wake_idle=self._wake_idle)
        self.slots = [self._new_slot() for _ in range(options.concurrency)]
        self.lease = LeaseKeeper(shared, self.record, self.attempts)
        self.watchdog = Watchdog(shared, self.steps, self.lease.leases_tell)
        self.deadlines = DeadlineRunner(shared, interval=options.deadline_interval,
                                        leases_tell=self.lease.leases_tell)
        self.housekeeping = Housekeeping(shared, self.attempts, self.status_line)
        self.pruner = Pruner(shared)
        self.checkpointer = Checkpointer(shared)
        # Where the database tells of other processes' commits (PostgreSQL), a loop listens.
        listener = engine.store.listen()
        self.wakeups = Wakeups(shared, listener, self.wake) if listener is not None else None
        self._threads: dict[Loop, threading.Thread] = {}
        self._deaths: deque[float] = deque()
        # Starts the definitions' schedules (worker/schedule_loop.py), given them by the client.
        self.schedules: ScheduleLoop | None = None

    # lifecycle in the database

    def register(self, now: datetime, kind: str = "worker") -> None:
        self.record.kind = kind
        self.record.register(now)

    def renew(self, now: datetime) -> None:
        self.record.renew(now, stopping=self.stopping)

    def unregister(self, now: datetime) -> None:
        self.record.unregister(now)

    @property
    def tasks_done(self) -> int:
        return self.attempts.done

    @property
    def attempt_metrics(self) -> AttemptObserver | None:
        """Told of each attempt's start and end (`work --metrics-port`), by every slot."""
        return self._attempt_metrics

    @attempt_metrics.setter
    def attempt_metrics(self, observer: AttemptObserver | None) -> None:
        self._attempt_metrics = observer
        for slot in self.slots:
            slot.observer = observer

    # requests (from signal handlers too: they only set flags)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wake(self) -> None:
        """New work may be ready: idle slots look at once, unless a slot is driving
        (`StepPath.driving`: it claims for every free place the moment it runs out of work)."""
        if self.steps.driving():
            return
        for slot in self.slots:
            slot.wake()

    def _wake_idle(self, wanted: int) -> None:
        """Wake up to `wanted` idle slots (attempts wait in the pool)."""
        for slot in self.slots:
            if wanted <= 0:
                return
            if slot.idle:
                slot.wake()
                wanted -= 1

    def request_stop(self) -> None:
        """First signal: claim nothing new, let running handlers finish."""
        self._stop.set()
        for loop in (self.watchdog, self.deadlines, self.pruner, *self.slots,
                     *self._schedules()):
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

    def run_once(self, now: datetime) -> bool:
        """One pass, as `work --once` makes it, checking no deadline: the watchdog's at `now`
        (timeouts, and the decisions they make ready), then the slots', side by side, until the
        pass is over (`_pass_over`). True when the watchdog acted or an attempt ran. A request
        to stop ends it: what still runs is left to the shutdown's drain."""
        return self._pass(now)[0]

    def _pass(self, now: datetime) -> tuple[bool, bool]:
        """`run_once`: whether it acted, and whether the worker can go on. The slots run in
        threads of their own, as in the long-running worker, while this one acts on signals
        and tends them as `_supervise` does (an abandoned slot is replaced, a slot thread that
        died is started again); the pass is over once every slot was stopped and its thread
        ended."""
        done = self.attempts.done
        acted = self.watchdog.run_once(now, check_deadlines=False)
        if not self.stopping:
            for slot in self.slots:
                # Stopped when the last pass ended: it serves this one.
                slot.stopped.clear()
                self._start(slot, once=True)
        while not self.stopping:
            if not self.tend(self.clock(), once=True):
                return acted, False
            slots = [(slot, thread) for slot, thread in self._threads.items()
                     if isinstance(slot, Slot)]
            if all(slot.stopped.is_set() and not thread.is_alive() for slot, thread in slots):
                break
            running = [thread for _, thread in slots if thread.is_alive()]
            if running:
                running[0].join(self.options.poll_interval)
            self._take_signals()
        return acted or self.attempts.done > done, True

    def _pass_over(self) -> bool:
        """Whether a once pass is over, asked by each of its slots that found nothing: nothing
        is ready, and no attempt is held (claimed into the pool, running, or its outcome
        waiting to be recorded: a finish can make new work ready). Read under the engine turn,
        so that no claim or record is half done. Once over, every slot is stopped (those that
        wait wake, and end)."""
        if self.attempts.running():
            # Not over, and known without waiting for the engine turn (idle slots ask often).
            return False
        try:
            with self.engine_turn:
                over = not self.attempts.running() and not self.steps.ready(self.clock())
        except StoreUnavailable as exc:
            self.outage.failed(exc)
            return False
        if over:
            for slot in self.slots:
                slot.stop()
        return over

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
            self.steps.finished(attempt)
            slot.stop()
            self._threads.pop(slot, None)
            abandoned, abandoned_total = self.attempts.abandon(attempt)
            replacement = self._new_slot()
            self.slots = [replacement if other is slot else other for other in self.slots]
            fresh.append(replacement)
            log.event("handler_abandoned", logging.WARNING,
                      instance=attempt.task.workflow_instance_id, step=attempt.task.step,
                      attempt=attempt.task.attempt, reason=attempt.reason,
                      grace_seconds=grace, slot=slot.name, replaced_by=replacement.name,
                      abandoned=abandoned, abandoned_total=abandoned_total)
        return fresh

    def status_line(self) -> str:
        """What `systemctl status` shows: the state, running handlers, tasks done, abandoned."""
        state = "stopping" if self.stopping else "serving " + ",".join(self.options.queues)
        running, done, abandoned = self.attempts.counts()
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
        try:
            return self._once() if once else self._serve()
        finally:
            engine.remove_deadline_waker(self.deadlines.claimed_for_us)
            engine.remove_waker(self.wake)

    def _register(self, *, once: bool = False) -> bool:
        """Register, waiting out a database outage; False when asked to stop meanwhile. A once
        pass (`once`) must end: a database that refuses the write until someone acts (read-only,
        full, an I/O error) ends it at once, one that is busy or out of reach after
        `ONCE_PATIENCE`, StoreUnavailable raised, for the CLI to say."""
        backoff = Backoff()
        give_up_at = time.monotonic() + ONCE_PATIENCE
        while True:
            self._take_signals()
            if self.stopping:
                return False
            began = self.outage.instant()
            try:
                self.register(self.clock())
            except StoreUnavailable as exc:
                if once and (exc.reason not in PASSING or time.monotonic() >= give_up_at):
                    raise
                self.outage.failed(exc)
                self._tick.wait(backoff.next())
                continue
            self.outage.recovered(began)
            return True

    def _started(self, once: bool) -> None:
        log.event("worker_started", worker_id=self.worker_id,
                  queues=",".join(self.options.queues), concurrency=self.options.concurrency,
                  mode="once" if once else "long-running")

    def _once(self) -> int:
        """The loops of `_serve` that a once pass runs, in the same order: the lease keeper and
        housekeeping beside the pass, then the pass (`run_once`): the watchdog's, and the
        slots'. No deadline runner (it says so), checkpointer, pruner or wake-up listener.

        A pass that a signal interrupted did not do what was asked: it exits 128 + the signal's
        number (143 for SIGTERM, 130 for SIGINT), as a shell reports a command the signal ended.
        """
        try:
            registered = self._register(once=True)
        except BaseException:
            self.executor.close(EXECUTOR_CLOSE_TIMEOUT)
            raise
        if not registered:
            self.executor.close(EXECUTOR_CLOSE_TIMEOUT)
            return 128 + self.last_signal if self.signals else 0
        self._started(once=True)
        for loop in (self.lease, self.housekeeping):
            self._start(loop)
        try:
            for loop in self._schedules():
                loop.catch_up(self.clock())
            _, went_on = self._pass(self.clock())
            self._say_deadlines_skipped()
        except BaseException:
            self._shut_down(failed=True, drain=False)
            raise
        # Ended by a request to stop, the pass leaves its running handlers to the drain.
        code = self._shut_down(failed=not went_on, drain=self.stopping)
        return 128 + self.last_signal if self.signals else code

    def _say_deadlines_skipped(self) -> None:
        """Say once that the pass checked no deadline: at info, as a run from cron does every
        time; a warning only when a deadline is due that it left unchecked."""
        try:
            due_since = self.engine.earliest_deadline()
        except StoreUnavailable:
            due_since = None
        if due_since is not None and due_since <= self.clock():
            log.event("deadline_checks_skipped", logging.WARNING, message=ONCE_NOTICE,
                      deadline_due_since=wall_clock.iso(due_since))
        else:
            log.event("deadline_checks_skipped", message=ONCE_NOTICE)

    def _serve(self) -> int:
        if not self._register():
            return 0
        self._started(once=False)
        self.deadlines.start_handlers()
        self.engine.store.defer_checkpoints()
        for loop in (self.lease, self.housekeeping, self.checkpointer, self.watchdog,
                     self.deadlines, self.pruner, *self.slots, *self._schedules()):
            self._start(loop)
        if self.wakeups is not None:
            self._start(self.wakeups)
        systemd.notify(f"READY=1\nSTATUS={self.status_line()}")
        failed = self._supervise()
        return self._shut_down(failed=failed, drain=True)

    def _schedules(self) -> list[ScheduleLoop]:
        return [] if self.schedules is None else [self.schedules]

    def _start(self, loop: Loop, *, once: bool = False) -> None:
        """Run `loop` in a thread of its own; a slot of a once pass (`once`) checks no deadline
        and ends with the pass (`_pass_over`)."""
        thread = threading.Thread(target=self._thread_main, args=(loop, once), name=loop.name,
                                  daemon=True)
        self._threads[loop] = thread
        thread.start()

    def _thread_main(self, loop: Loop, once: bool) -> None:
        try:
            if once and isinstance(loop, Slot):
                loop.run(functools.partial(loop.run_once, check_deadlines=False),
                         until=self._pass_over)
            else:
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

    def tend(self, now: datetime, *, once: bool = False) -> bool:
        """One supervision pass: start a fresh slot for each abandoned one, and start again
        each loop whose thread died (a slot in the once pass under way, `once`). False when
        loops die too often to go on."""
        try:
            for slot in self.abandon_overdue(now):
                self._start(slot, once=once)
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
                self._start(loop, once=once)
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
        self._wind_down_slots(SLOT_WIND_DOWN)
        if self._release_held():
            try:
                self.unregister(self.clock())
            except StoreUnavailable as exc:
                self.outage.failed(exc)
        if self.record.registered:
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

    def _wind_down_slots(self, seconds: float) -> None:
        """Wait, up to `seconds` in all, for the slot threads not running a handler to end:
        their last acts (recording the outcomes handed in, giving back their pool) come before
        the worker gives back what it still holds, and before `run` returns, so that no slot
        writes after it. A slot in a handler is not waited for: the handler is abandoned."""
        end = time.monotonic() + seconds
        for loop, thread in list(self._threads.items()):
            if isinstance(loop, Slot) and (loop.attempt is None
                                           or not loop.attempt.handler_running):
                thread.join(max(0.0, end - time.monotonic()))

    def _drain(self) -> None:
        """Let running handlers (and on_deadline handlers) finish within the grace; abandoned
        handlers are not waited for."""
        log.event("worker_draining", worker_id=self.worker_id,
                  running=len(self.attempts.running()),
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
        for attempt in self.attempts.held():
            attempt.abandon.set()
            # The latest heartbeat details go with the release, so the next attempt resumes.
            details = attempt.take_pending_heartbeat()
            try:
                self.engine.release_activity(attempt.task, self.clock(), "worker_shutdown",
                                             check_deadlines=attempt.check_deadlines, **details)
            except StoreUnavailable as exc:
                self.outage.failed(exc)
                return False
        # And any the database gives this worker that it does not hold: started by a batch
        # whose commit it could not confirm (`StepPath._adopt`).
        try:
            for task in self.engine.unheld_attempts(self.worker_id, (), self.clock()):
                self.engine.release_activity(task, self.clock(), "worker_shutdown")
        except StoreUnavailable as exc:
            self.outage.failed(exc)
            return False
        return True

    def _new_slot(self) -> Slot:
        self._slots_made += 1
        return Slot(self.shared, f"slot-{self._slots_made - 1}", steps=self.steps,
                    attempts=self.attempts, executor=self.executor,
                    observer=self._attempt_metrics)


def install_signal_handlers(worker: Worker) -> Callable[[], None]:
    """The first SIGTERM/SIGINT drains, a second stops at once. The handler only counts them;
    the worker's main thread acts on the count within its poll interval.

    Returns a function that puts the previous handlers back.
    """

    def handle(signum: int, frame: FrameType | None) -> None:
        worker.signals += 1
        worker.last_signal = signum

    previous = {signum: signal.signal(signum, handle) for signum in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore
