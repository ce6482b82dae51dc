"""The step path: a slot runs the pooled attempts of quick handlers itself, four outcomes a
transaction with no thread woken; before a handler not known to be quick it wakes idle slots, so
slow handlers run side by side; nothing handed in or pooled is left behind."""

from __future__ import annotations

import gc
import threading
from types import SimpleNamespace

import pytest
from test_worker_once_pass import TWO_STEPS

from wfctl.engine import Engine
from wfctl.engine.core import EngineCore
from wfctl.errors import StoreUnavailable
from wfctl.worker import Worker, WorkerOptions, slots
from wfctl.worker.slots import StepPath


def drain_with_one_slot(make_env, monkeypatch, env=None):
    """Four two-step workflows drained by the first slot of a four-slot worker (in `env`, or
    one of its own), in this thread; the slots it wakes and the outcomes each batch recorded."""
    env = env or make_env(TWO_STEPS)
    for n in range(4):
        env.start("two", f"t{n}")
    worker = Worker(env.engine, WorkerOptions(concurrency=4), clock=env.worker_clock)
    wakes: list[int] = []
    worker.steps.wake_idle = wakes.append
    batches: list[int] = []
    combine = StepPath._combine

    def counted(path: StepPath, batch: list, check: bool) -> None:
        batches.append(len(batch))
        combine(path, batch, check)

    monkeypatch.setattr(StepPath, "_combine", counted)
    slot = worker.slots[0]
    while slot.run_once(env.worker_clock.set(1), check_deadlines=False):
        pass
    assert [env.describe(f"t{n}")["status"] for n in range(4)] == ["completed"] * 4
    assert worker.attempts.held() == []
    return wakes, batches


def test_a_slot_runs_the_pooled_attempts_of_a_quick_handler_itself(make_env, monkeypatch):
    # Any handler that ran once is quick here: what is tested is what the slot does with that.
    monkeypatch.setattr(slots, "QUICK_HANDLER", 3600.0)
    expected: list[set[str]] = []
    closing: list[set[str]] = []
    batch = EngineCore.batch

    announcing: set[bool] = set()

    def expecting(engine: EngineCore, offer=None, families=(), closes=()):
        announcing.add(engine.store.takes_announcements)
        expected.append(set(families))
        closing.append({close.workflow_instance_id for close in closes})
        return batch(engine, offer, families, closes)

    monkeypatch.setattr(EngineCore, "batch", expecting)

    wakes, batches = drain_with_one_slot(make_env, monkeypatch)

    # The claims for the four free places; then each batch records four outcomes (and takes
    # each run's next step, or closes it), telling the store whose rows it changes (which
    # PostgreSQL locks together, with the first outcome's read) and which attempts the
    # completions close (which PostgreSQL closes along with it). SQLite's write transaction
    # holds the whole file: it is told nothing.
    assert batches == [0, 4, 4]
    [announced] = announcing
    told = {"t0", "t1", "t2", "t3"} if announced else set()
    assert expected == [set(), told, told]
    assert closing == expected
    # Idle slots were woken once: before the handler's first run, not yet known to be quick.
    assert wakes == [3]


def test_before_a_handler_not_known_to_be_quick_idle_slots_are_woken_for_the_pool(
        make_env, monkeypatch):
    monkeypatch.setattr(slots, "QUICK_HANDLER", 0.0)

    wakes, batches = drain_with_one_slot(make_env, monkeypatch)

    # Each outcome is recorded before the next handler begins (so none waits for a slow one),
    # and its run's next step joins the pool; before each handler, idle slots are woken for
    # as many attempts as wait there. Once no step is left to take, the pool runs down.
    assert batches == [0] + [1] * 8
    assert wakes == [3, 3, 3, 3, 3, 2, 1]


def drain_with_one_place(env, monkeypatch) -> list[int]:
    """What every workflow of `env` started leaves, drained by the slot of a one-slot worker
    in this thread, any handler that ran once taken as quick; the attempts each batch left in
    the pool."""
    monkeypatch.setattr(slots, "QUICK_HANDLER", 3600.0)
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=env.worker_clock)
    pooled: list[int] = []
    combine = StepPath._combine

    def counted(path: StepPath, batch: list, check: bool) -> None:
        combine(path, batch, check)
        pooled.append(path.pooled())

    monkeypatch.setattr(StepPath, "_combine", counted)
    slot = worker.slots[0]
    while slot.run_once(env.worker_clock.set(1), check_deadlines=False):
        pass
    assert worker.attempts.held() == []
    return pooled


def test_a_quick_handlers_attempts_are_claimed_ahead_of_the_free_places(make_env, monkeypatch):
    env = make_env(TWO_STEPS)
    for n in range(10):
        env.start("two", f"t{n:02d}")

    pooled = drain_with_one_place(env, monkeypatch)

    assert [env.describe(f"t{n:02d}")["status"] for n in range(10)] == ["completed"] * 10
    # The first claim fills the one place: its handler has not run yet. Known quick once it
    # ran, a batch takes the next step of the run it ended and claims the other runs' first
    # steps with it, then their next steps: up to `QUICK_BATCH` attempts a batch.
    assert pooled == [1, 10, 9, 0]


def test_a_batch_claims_what_waited_then_takes_the_first_steps_it_decides(make_env,
                                                                          monkeypatch):
    env = make_env(TWO_STEPS)
    env.start("two", "old")
    env.decide(0)   # old's first step waits in the queue
    for n in range(5):
        env.start("two", f"t{n}")
    claimed: list[str] = []
    claim = Engine.claim_activity

    def recorded(engine: Engine, *args, **kwargs):
        task = claim(engine, *args, **kwargs)
        if task is not None:
            claimed.append(f"{task.workflow_instance_id}/{task.step}")
        return task

    monkeypatch.setattr(Engine, "claim_activity", recorded)
    # Every handler is quick here, from its first run on.
    monkeypatch.setattr(StepPath, "quick", lambda path, handler: True)

    drain_with_one_place(env, monkeypatch)

    assert [env.describe(name)["status"] for name in ("old", "t0", "t1", "t2", "t3", "t4")] \
        == ["completed"] * 6
    # What waited was claimed first; the new workflows' first steps, decided by the slot's
    # batches once they had places left, were taken as they were scheduled, like the next
    # steps: no claim, the same history.
    assert claimed == ["old/first"]
    assert env.event_types("t0") == env.event_types("old")[:len(env.event_types("t0"))]


def test_listeners_hear_each_event_of_a_batchs_operations_once_in_history_order(make_env,
                                                                                monkeypatch):
    monkeypatch.setattr(slots, "QUICK_HANDLER", 3600.0)
    env = make_env(TWO_STEPS)
    heard: dict[str, list[tuple[int, str]]] = {}
    env.engine.add_listener(lambda events: [
        heard.setdefault(e["workflow_instance_id"], []).append((e["seq"], e["event_type"]))
        for e in events])

    _, batches = drain_with_one_slot(make_env, monkeypatch, env)

    # Batches of four operations, heard after their commits (a worker's log is told so): each
    # event once, as history has it, the starts' and the drain's.
    assert batches == [0, 4, 4]
    assert sorted(heard) == [f"t{n}" for n in range(4)]
    for instance, events in heard.items():
        assert events == [(e["seq"], e["event_type"]) for e in env.history(instance)]
        assert events[-1][1] == "WorkflowCompleted"


def test_a_quick_handlers_batch_never_holds_two_attempts_of_one_run(make_env, monkeypatch):
    env = make_env("""
        version: 1
        workflows:
          both:
            steps:
              - parallel:
                  - activity: wfh:add_one
                    name: one
                  - activity: wfh:add_one
                    name: two
    """)
    env.start("both", "warm")
    env.start("both", "b1")

    drain_with_one_place(env, monkeypatch)

    # Each branch gets its run's state when it is claimed: with one place, the second branch
    # is claimed once the first has ended, as before its handler was known to be quick.
    assert [env.describe(name)["state"]["count"] for name in ("warm", "b1")] == [2, 2]


class HandedInOnRelease:
    """An engine turn that, the first time it is let go, sees another slot hand an outcome in:
    one that arrived after the holder's last look at the queue."""

    def __init__(self, path: StepPath) -> None:
        self.path, self.lock, self.released = path, threading.Lock(), 0

    def acquire(self, blocking: bool = True) -> bool:
        return self.lock.acquire(blocking)

    def release(self) -> None:
        self.lock.release()
        self.released += 1
        if self.released == 1:
            self.path._queue.append(SimpleNamespace(check_deadlines=False))


class CountingPath(StepPath):
    def __init__(self) -> None:
        super().__init__(SimpleNamespace(turn=None), attempts=None,  # type: ignore[arg-type]
                         queues=("default",))
        self.batches: list[int] = []

    def _combine(self, batch: list, check: bool) -> None:
        self.batches.append(len(batch))


def test_an_outcome_handed_in_after_the_holders_last_look_is_served_once_it_lets_go():
    path = CountingPath()
    path.shared = SimpleNamespace(turn=HandedInOnRelease(path))
    path._queue.append(SimpleNamespace(check_deadlines=False))

    assert path.serve(False, claim=False) is True

    assert path.batches == [1, 1]
    assert path._queue == []


@pytest.mark.parametrize("what", ["pool", "queue"])
def test_the_watchdog_wakes_a_slot_for_what_waited_too_long(what):
    path = CountingPath()
    wakes: list[int] = []
    path.wake_idle = wakes.append
    if what == "pool":
        path._pool.append(SimpleNamespace(claimed=100.0))
    else:
        path._queue.append(SimpleNamespace(handed_in=100.0))

    path.look_after(100.0 + slots.PENDING_LOOK / 2)
    assert wakes == []
    path.look_after(100.0 + slots.PENDING_LOOK * 2)
    assert wakes == [1]


def two_pooled(make_env):
    """A two-slot worker whose first batch claimed the first steps of two workflows into its
    pool (no slot runs)."""
    env = make_env(TWO_STEPS)
    for n in range(2):
        env.start("two", f"t{n}")
    worker = Worker(env.engine, WorkerOptions(concurrency=2), clock=env.worker_clock)
    env.worker_clock.set(1)
    assert worker.steps.serve(False) is True
    assert worker.steps.pooled() == 2
    return env, worker


def test_a_stopping_worker_gives_back_what_waits_in_the_pool(make_env):
    env, worker = two_pooled(make_env)

    worker.request_stop()
    worker.steps.wind_down()

    assert worker.steps.pooled() == 0
    assert worker.attempts.held() == []
    for n in range(2):
        assert env.event_types(f"t{n}")[-2:] == ["ActivityStarted", "ActivityRetryScheduled"]


def test_new_work_wakes_idle_slots_only_when_no_slot_is_driving(make_env):
    """A slot awake and not in a slow handler claims for every free place as soon as it runs
    out of work: waking the idle ones for new work would only make them take it from it."""
    env = make_env(TWO_STEPS)
    worker = Worker(env.engine, WorkerOptions(concurrency=4), clock=env.worker_clock)
    steps = worker.steps

    def woken() -> list[bool]:
        flags = [slot.wakeup.is_set() for slot in worker.slots]
        for slot in worker.slots:
            slot.wakeup.clear()
        return flags

    steps.awake(+1)
    worker.wake()
    assert woken() == [False] * 4

    # The one awake runs a handler not known to be quick: nobody drives.
    steps._slow += 1
    worker.wake()
    assert woken() == [True] * 4

    steps.finished(object(), slow=True)
    steps.awake(-1)
    worker.wake()
    assert woken() == [True] * 4


def test_the_watchdog_wakes_idle_slots_for_attempts_left_waiting_in_the_pool(make_env):
    env, worker = two_pooled(make_env)
    wakes: list[int] = []
    worker.steps.wake_idle = wakes.append

    worker.watchdog.run_once(env.worker_clock.now)
    assert wakes == []

    # As if the slot that would take them were held up in a handler since the claim.
    for attempt in worker.steps._pool:
        attempt.claimed -= 2 * slots.PENDING_LOOK
    worker.watchdog.run_once(env.worker_clock.now)
    assert wakes == [2]


def test_a_pass_that_only_handed_an_outcome_in_does_not_end_an_outage(make_env):
    """Its outcome waits in the queue, unwritten: only a batch that commits says the database
    is back."""
    _, worker = two_pooled(make_env)
    worker.outage.failed(StoreUnavailable("busy", "the database is busy"))

    # A pass after the outage began: it runs an attempt, whose outcome waits behind the other.
    assert worker.slots[0].guarded_pass() == 0
    assert worker.steps.waiting() == 1 and worker.steps.pooled() == 1
    assert worker.outage.active

    assert worker.steps.serve(False) is True
    assert not worker.outage.active


def test_the_steps_of_handlers_that_take_the_state_alone_leave_nothing_to_the_collector(
        make_env):
    """An attempt whose handler never beats makes no heartbeat buffer: nothing of its step is
    left in a reference cycle that only the cycle collector would free."""
    env = make_env(TWO_STEPS.replace("wfh:mark", "wfh:add_one"))
    for n in range(4):
        env.start("two", f"t{n}")
    worker = Worker(env.engine, WorkerOptions(concurrency=1), clock=env.worker_clock)
    slot = worker.slots[0]
    slot.run_once(env.worker_clock.set(1), check_deadlines=False)
    gc.collect()
    before = len(gc.garbage)
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        while slot.run_once(env.worker_clock.set(1), check_deadlines=False):
            pass
        gc.collect()
        left = {type(found).__name__ for found in gc.garbage[before:]}
    finally:
        gc.set_debug(0)
        del gc.garbage[before:]
    assert [env.describe(f"t{n}")["status"] for n in range(4)] == ["completed"] * 4
    assert not left & {"Attempt", "HeartbeatBuffer", "ActivityTask"}
