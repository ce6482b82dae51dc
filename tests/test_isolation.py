"""The process pool behind `wfctl work --isolation process`, with real child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import T0, Held

from wfctl.errors import StoreUnavailable
from wfctl.lang.context import HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall, Outcome
from wfctl.worker import isolation
from wfctl.worker.isolation import ProcessPool, ProcessPoolError

pytestmark = pytest.mark.process

TESTS = Path(__file__).parent
REPO = TESTS.parent

CONTEXT: dict[str, Any] = {
    "workflow_id": "order-1", "run_id": "run-1", "activity_id": "act-1", "step": "work",
    "attempt": 2, "max_attempts": 3, "last_heartbeat_details": {"done": 41},
    "schedule_to_close_deadline_at": None, "close_deadline_at": T0 + timedelta(minutes=5),
    "heartbeat_deadline_at": None, "heartbeat_timeout": None,
}


class Heartbeats:
    """The worker's buffer for one attempt, its writes recorded; `current` is what they answer."""

    def __init__(self, current: bool = True) -> None:
        self.writes: list[Any] = []
        self.current = current
        self.buffer = HeartbeatBuffer(self._write, None)

    def _write(self, details: Any) -> bool:
        self.writes.append(details)
        return self.current


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPool]:
    pool = ProcessPool(1, [str(TESTS)])
    yield pool
    pool.close()


def run(pool: ProcessPool, handler: str, state: dict[str, Any] | None = None, *,
        heartbeats: Heartbeats | None = None, abandon: threading.Event | None = None) -> Outcome:
    call = HandlerCall(f"wfh_isolation:{handler}", "work", state or {}, CONTEXT)
    return pool.run(Held(call, (heartbeats or Heartbeats()).buffer, abandon or threading.Event()))


def in_background(pool: ProcessPool, handler: str, state: dict[str, Any],
                  abandon: threading.Event | None = None) -> tuple[threading.Thread, list[Any]]:
    """Start `run` in a thread; the list gets (outcome, the instant it returned)."""
    returned: list[Any] = []

    def target() -> None:
        outcome = run(pool, handler, state, abandon=abandon)
        returned.extend([outcome, time.monotonic()])

    thread = threading.Thread(target=target)
    thread.start()
    return thread, returned


def pids_in(path: Path, within: float = 10.0) -> list[int]:
    """The pids a handler wrote once it was running."""
    give_up = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < give_up, "the handler never started"
        time.sleep(0.01)
    return [int(pid) for pid in path.read_text().split()]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def still_alive(pids: set[int], within: float) -> set[int]:
    """Those of `pids` still running after waiting up to `within` seconds for them to end."""
    give_up = time.monotonic() + within
    while True:
        remaining = {pid for pid in pids if alive(pid)}
        if not remaining or time.monotonic() >= give_up:
            return remaining
        time.sleep(0.01)


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {pid for pid in found if alive(pid)}


def test_a_handlers_result_comes_back_from_another_process(pool: ProcessPool) -> None:
    outcome = run(pool, "whoami", {"items": [1, 2], "note": "ünïcode"})
    assert outcome.error is None
    result = outcome.result
    assert result is not None and result["pid"] != os.getpid()
    assert result["state"] == {"items": [1, 2], "note": "ünïcode"}
    assert result["workflow_id"] == "order-1"
    assert result["attempt"] == 2
    assert result["close_deadline_at"] == "2026-04-12T12:05:00+00:00"
    assert result["last_heartbeat_details"] == {"done": 41}


def test_an_exception_comes_back_with_its_traceback_and_class_hierarchy(pool: ProcessPool) -> None:
    error = run(pool, "out_of_stock", {"item": "tea"}).error
    assert error is not None
    assert error.exception_class == "OutOfStock"
    assert error.message == "no tea left"
    assert error.classes[:3] == ("OutOfStock", "LookupError", "Exception")
    assert error.traceback is not None
    assert "in out_of_stock" in error.traceback
    assert error.traceback.rstrip().endswith("OutOfStock: no tea left")


def test_an_error_message_with_undecodable_bytes_comes_back_as_it_was(pool: ProcessPool) -> None:
    error = run(pool, "raises_undecodable").error
    assert error is not None and error.message == "name \udcff"


def test_an_exception_whose_text_cannot_be_read_still_fails_the_call(pool: ProcessPool) -> None:
    error = run(pool, "raises_unprintable").error
    assert error is not None
    assert (error.exception_class, error.message) == (
        "Unprintable", "<Unprintable: its message could not be formatted>")
    assert run(pool, "whoami").result is not None


def test_system_exit_fails_the_call_and_the_same_child_serves_the_next(pool: ProcessPool) -> None:
    before = run(pool, "whoami").result
    error = run(pool, "exits").error
    assert error is not None and error.exception_class == "SystemExit"
    after = run(pool, "whoami").result
    assert before is not None and after is not None and after["pid"] == before["pid"]


def test_a_result_json_cannot_hold_fails_with_a_type_error_naming_step_and_key(
        pool: ProcessPool) -> None:
    error = run(pool, "returns_datetime").error
    assert error is not None and error.exception_class == "TypeError"
    assert "step 'work'" in error.message and "'when'" in error.message


def test_heartbeats_reach_the_worker_throttled_with_the_latest_details_pending(
        pool: ProcessPool) -> None:
    heartbeats = Heartbeats()
    outcome = run(pool, "heartbeats", {"beats": 10_000}, heartbeats=heartbeats)
    assert outcome.result == {"beats": 10_000}
    assert 1 <= len(heartbeats.writes) <= 3
    assert heartbeats.writes[0] == {"done": 0}
    # The last details were held back by the child's throttle: they go with the result.
    assert heartbeats.buffer.take_pending() == {"done": 9_999}


def test_a_heartbeat_raises_activity_cancelled_once_the_attempt_is_no_longer_current(
        pool: ProcessPool) -> None:
    caught = run(pool, "heartbeat_catching", heartbeats=Heartbeats(current=False))
    assert caught.result == {"cancelled_seen": True, "ctx_cancelled": True}
    assert run(pool, "heartbeat_once", heartbeats=Heartbeats(current=False)).cancelled


def test_a_heartbeat_the_worker_cannot_write_now_keeps_its_details_and_the_handler_goes_on(
        pool: ProcessPool) -> None:
    def unavailable(details: Any) -> bool:
        raise StoreUnavailable("busy", "the database is busy")

    buffer = HeartbeatBuffer(unavailable, None)
    call = HandlerCall("wfh_isolation:heartbeat_once", "work", {}, CONTEXT)
    assert pool.run(Held(call, buffer, threading.Event())).result == {"went_on": True}
    assert buffer.take_pending() == {"done": 1}


def test_heartbeat_details_json_cannot_hold_are_refused_in_the_handler(pool: ProcessPool) -> None:
    result = run(pool, "heartbeat_nan").result
    assert result is not None
    assert result["refused"] == "heartbeat details at key 'ratio': nan is not a JSON number"


def test_abandon_kills_a_stuck_handler_at_once_and_a_fresh_child_takes_over(
        pool: ProcessPool, tmp_path: Path) -> None:
    abandon = threading.Event()
    thread, returned = in_background(pool, "hangs", {"_pidfile": str(tmp_path / "pid")}, abandon)
    [stuck] = pids_in(tmp_path / "pid")
    abandoned_at = time.monotonic()
    abandon.set()
    thread.join(5)
    outcome, returned_at = returned
    assert outcome.cancelled
    assert returned_at - abandoned_at < 0.3
    assert not still_alive({stuck}, within=0.3 - (time.monotonic() - abandoned_at))
    fresh = run(pool, "whoami").result
    assert fresh is not None and fresh["pid"] != stuck


def test_abandon_also_kills_the_programs_the_handler_started(
        pool: ProcessPool, tmp_path: Path) -> None:
    abandon = threading.Event()
    thread, returned = in_background(pool, "starts_a_program_and_hangs",
                                     {"_pidfile": str(tmp_path / "pid")}, abandon)
    started = set(pids_in(tmp_path / "pid"))
    abandon.set()
    thread.join(5)
    assert returned[0].cancelled
    assert not still_alive(started, within=1.0)


@pytest.mark.parametrize(("handler", "message"), [
    ("exits_hard", "the process running the handler exited with code 3"),
    ("crashes", "the process running the handler was killed by SIGSEGV"),
])
def test_a_child_that_dies_fails_the_call_and_the_pool_goes_on(
        pool: ProcessPool, handler: str, message: str) -> None:
    error = run(pool, handler).error
    assert error is not None
    assert error.exception_class == "WorkerProcessDied"
    assert error.message == message
    assert run(pool, "whoami").result is not None


def test_a_child_that_dies_is_noticed_while_a_process_it_forked_lives_on(
        pool: ProcessPool, tmp_path: Path) -> None:
    thread, returned = in_background(pool, "forks_and_exits", {"_pidfile": str(tmp_path / "pid")})
    thread.join(5)
    error = returned[0].error
    assert error is not None
    assert error.message == "the process running the handler exited with code 4"
    assert not still_alive(set(pids_in(tmp_path / "pid")), within=1.0)


def test_children_ignore_sigterm_and_sigint_the_worker_decides_when_they_end(
        pool: ProcessPool, tmp_path: Path) -> None:
    thread, returned = in_background(pool, "sleeps",
                                     {"seconds": 0.3, "_pidfile": str(tmp_path / "pid")})
    [child] = pids_in(tmp_path / "pid")
    os.kill(child, signal.SIGTERM)
    os.kill(child, signal.SIGINT)
    thread.join(5)
    assert returned[0].result == {"pid": child}


def test_an_idle_child_killed_from_outside_is_replaced_before_the_next_call(
        pool: ProcessPool) -> None:
    before = run(pool, "whoami").result
    assert before is not None
    os.kill(before["pid"], signal.SIGKILL)
    assert not still_alive({before["pid"]}, within=1.0)
    after = run(pool, "whoami")
    assert after.error is None and after.result is not None
    assert after.result["pid"] != before["pid"]


def test_the_pool_goes_on_when_its_fork_server_is_killed(pool: ProcessPool) -> None:
    before = run(pool, "whoami").result
    assert before is not None
    server = int(Path(f"/proc/{before['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
    os.kill(server, signal.SIGKILL)
    # Its children go with it, even one that would not notice.
    assert not still_alive({server, before["pid"]}, within=1.0)
    after = run(pool, "whoami")
    assert after.error is None and after.result is not None


def test_several_threads_at_once_run_in_distinct_children() -> None:
    pool = ProcessPool(4, [str(TESTS)])
    try:
        run(pool, "whoami")
        started = time.monotonic()
        threads = [in_background(pool, "sleeps", {"seconds": 0.5}) for _ in range(4)]
        for thread, _ in threads:
            thread.join(5)
        elapsed = time.monotonic() - started
    finally:
        pool.close()
    pids = {returned[0].result["pid"] for _, returned in threads}
    assert len(pids) == 4
    assert elapsed < 1.5  # side by side, not one after another (2 s)


def test_close_leaves_no_process_behind(tmp_path: Path) -> None:
    before = descendants(os.getpid())
    pool = ProcessPool(2, [str(TESTS)])
    thread, returned = in_background(pool, "hangs", {"_pidfile": str(tmp_path / "pid")})
    pids_in(tmp_path / "pid")
    started = descendants(os.getpid()) - before
    assert len(started) == 3  # the fork server and two children
    pool.close()
    thread.join(5)
    assert returned[0].cancelled
    assert not still_alive(started, within=0.5)
    assert run(pool, "whoami").cancelled


def test_handler_modules_import_from_the_search_paths(tmp_path: Path) -> None:
    (tmp_path / "beside_workflows.py").write_text(
        "def handle(state):\n    return {'imported_from': __file__}\n")
    pool = ProcessPool(1, [str(tmp_path)])
    try:
        call = HandlerCall("beside_workflows:handle", "work", {}, CONTEXT)
        outcome = pool.run(Held(call, Heartbeats().buffer, threading.Event()))
    finally:
        pool.close()
    assert outcome.result == {"imported_from": str(tmp_path / "beside_workflows.py")}


def test_a_pool_that_cannot_start_its_processes_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "_BOOT", "raise SystemExit(3)")
    with pytest.raises(ProcessPoolError) as raised:
        ProcessPool(2)
    assert str(raised.value) == (
        "cannot start processes for handlers: the fork server exited with code 3")


WORKER = textwrap.dedent("""
    import sys, threading, time
    from wfctl.lang.context import HeartbeatBuffer
    from wfctl.lang.handlers import HandlerCall
    from wfctl.worker.isolation import ProcessPool

    tests, pidfile = sys.argv[1:]
    pool = ProcessPool(2, [tests])
    context = dict(workflow_id="w", run_id="r", activity_id="a", step="work", attempt=1,
                   max_attempts=1, last_heartbeat_details=None,
                   schedule_to_close_deadline_at=None, close_deadline_at=None,
                   heartbeat_deadline_at=None, heartbeat_timeout=None)
    call = HandlerCall("wfh_isolation:hangs", "work", {"_pidfile": pidfile}, context)
    buffer = HeartbeatBuffer(lambda details: True, None)

    class Held:
        abandon = threading.Event()
        heartbeats = buffer

        def call(self):
            return call

    threading.Thread(target=pool.run, args=(Held(),), daemon=True).start()
    time.sleep(3600)
""")


def test_kill_9_of_the_worker_leaves_no_child_behind(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(TESTS), str(tmp_path / "pid")],
                              env=env)
    try:
        [busy] = pids_in(tmp_path / "pid")
        family = descendants(worker.pid)
        assert busy in family and len(family) == 3  # the fork server and two children
    finally:
        worker.kill()
        worker.wait()
    assert not still_alive(family, within=3.0)
