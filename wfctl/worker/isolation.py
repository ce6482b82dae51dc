"""The process pool behind `wfctl work --isolation process`: each attempt runs in a child process
that is killed, with every process it started, once its attempt is abandoned.

The children are forked by a fork server: a helper interpreter started as a new program (never a
fork of the worker, whose threads may hold locks a child would inherit held), which imports wfctl
once and starts no thread. A fresh child is then one fork that shares those pages, rather than an
interpreter start and wfctl's imports; `multiprocessing`'s forkserver and spawn would also re-run
the worker's main script in every child, which for the `wfctl` command means importing the CLI.

Worker and child talk over a socket pair, each message prefixed by its length. What a child
sends is strict JSON: the worker never unpickles anything from a child, and nothing a handler
returns or raises can break the conversation (its result is checked before it is sent, an error
goes as text). What the worker sends is pickled: only its own plain data (the state, the
context with its datetimes), which pickles several times faster than JSON encodes it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from wfctl import clock, jsonvalue
from wfctl.errors import ActivityCancelled, WfctlError
from wfctl.lang import handlers
from wfctl.lang.context import _NOTHING, ActivityContext, Flag, HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall, HandlerError, Outcome

if TYPE_CHECKING:
    from wfctl.worker.held_attempts import Running

# A run() waiting on its child looks at `abandon` this often: the kill comes at most this late.
ABANDON_POLL = 0.05
# The fork server reports a child's exit status as soon as it reaps it; this only bounds the wait.
STATUS_WAIT = 1.0
# Starting the fork server imports wfctl in a fresh interpreter; a fork takes milliseconds.
START_TIMEOUT = 60.0
FORK_TIMEOUT = 10.0

_LENGTH = struct.Struct("!I")
_SIGNED = struct.Struct("!i")
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


class ProcessPoolError(WfctlError):
    """Processes to run handlers in cannot be started."""


class WorkerProcessDied(Exception):
    """The process running a handler ended before the handler did."""


class ProcessPool:
    """`size` child processes, each running one attempt at a time, shared by the worker's slots.

    A child whose attempt is abandoned is killed at once, and a fresh one takes its place; so
    does a child that dies on its own. Heartbeats come back to the worker's own buffer for the
    attempt, which applies its throttle and its check that the attempt is still current, as in
    thread mode. Children ignore SIGINT and SIGTERM: a Ctrl-C or a systemd stop signals every
    process, and the worker, which drains, decides when its children end.
    """

    def __init__(self, size: int, search_paths: Sequence[str] = ()) -> None:
        if size < 1:
            raise ValueError(f"a process pool needs at least one process (got {size})")
        self.size = size
        self._server = _ForkServer([str(path) for path in search_paths])
        self._changed = threading.Condition()
        self._idle: list[_Child] = []
        self._busy: set[_Child] = set()
        self._missing = 0
        self._closed = False
        # Started up front, so that the first attempts do not wait for a fork, and a pool that
        # cannot start its processes says so when the worker starts.
        try:
            for _ in range(size):
                self._idle.append(self._server.fork())
        except BaseException:
            self.close()
            raise

    def run(self, attempt: Running) -> Outcome:
        """Run one attempt in an idle child and say how it ended; never raises for what the
        handler or its process does.

        The child's heartbeats go to the attempt's `heartbeats.beat()`, and its last unwritten
        details are left pending there for the result. Once its `abandon` is set, the child is
        killed and the outcome is cancelled; a child that dies gives a `WorkerProcessDied`
        error. After `close()`, the outcome is cancelled.
        """
        abandon = attempt.abandon
        try:
            child = self._take(abandon)
        except ProcessPoolError as exc:
            return Outcome(error=HandlerError.of(exc, with_traceback=False))
        if child is None:
            return Outcome(cancelled=True)
        try:
            outcome = child.converse(attempt.call(), attempt.heartbeats, abandon)
            # close() killed it mid-call: the attempt is released, nothing of it is reported.
            cut_short = child.ended and self._closed
        finally:
            self._give_back(child)
        return Outcome(cancelled=True) if cut_short else outcome

    def close(self, timeout: float = 2.0) -> None:
        """Kill every child, busy or idle, and stop the fork server, waiting at most `timeout`."""
        with self._changed:
            if self._closed:
                return
            self._closed = True
            idle, busy = self._idle, list(self._busy)
            self._idle = []
            self._changed.notify_all()
        for child in busy:
            child.kill()  # its run() sees the end and lets go of the connection
        for child in idle:
            child.end()
        self._server.stop(timeout)

    def _take(self, abandon: Flag) -> _Child | None:
        with self._changed:
            while True:
                if self._closed or abandon.is_set():
                    return None
                while self._idle:
                    child = self._idle.pop()
                    if child.ready():
                        self._busy.add(child)
                        return child
                    # It died while idle (killed from outside, out of memory): no attempt fails
                    # for that, it is replaced before use.
                    child.end()
                    self._missing += 1
                if self._missing:
                    self._missing -= 1
                    break
                self._changed.wait(ABANDON_POLL)
        try:
            child = self._server.fork()
        except ProcessPoolError:
            with self._changed:
                self._missing += 1
            raise
        with self._changed:
            if not self._closed:
                self._busy.add(child)
                return child
        child.end()
        return None

    def _give_back(self, child: _Child) -> None:
        with self._changed:
            self._busy.discard(child)
            if not child.ended and not self._closed:
                self._idle.append(child)
                self._changed.notify()
                return
            closed = self._closed
        child.end()
        if closed:
            return
        # Replaced now rather than when the next attempt comes, which then does not wait for the
        # fork. If it cannot be, the slot stays missing and the next attempt tries again and
        # reports why.
        try:
            fresh: _Child | None = self._server.fork()
        except ProcessPoolError:
            fresh = None
        with self._changed:
            if fresh is None:
                self._missing += 1
            elif not self._closed:
                self._idle.append(fresh)
                fresh = None
            self._changed.notify()
        if fresh is not None:
            fresh.end()


class _Child:
    """The worker's end of one child: its connection, and the pipe its exit status arrives on."""

    def __init__(self, pid: int, channel: _Channel, status_fd: int) -> None:
        self.pid = pid
        self.ended = False
        self._channel = channel
        self._status_fd: int | None = status_fd
        self._status: int | None = None
        # Its exit status is watched too: a process the handler forked may hold the connection
        # open after the child itself died.
        self._poll = select.poll()
        self._poll.register(channel.fileno(), select.POLLIN)
        self._poll.register(status_fd, select.POLLIN)

    def ready(self) -> bool:
        """An idle child never speaks: anything to read (its end closing) means it died."""
        return not self.ended and not self._poll.poll(0)

    def converse(self, call: HandlerCall, heartbeats: HeartbeatBuffer,
                 abandon: Flag) -> Outcome:
        message = _as_pickle(["call", call.spec, call.step, call.state, call.context])
        try:
            return self._converse(message, heartbeats, abandon)
        except BaseException:
            self.kill()  # stopped mid-call: what the child would say next cannot be followed
            raise

    def _converse(self, message: bytes, heartbeats: HeartbeatBuffer,
                  abandon: Flag) -> Outcome:
        try:
            self._channel.send_encoded(message)
        except OSError:
            return self._died()
        while True:
            if abandon.is_set():
                self.kill()
                return Outcome(cancelled=True)
            events = dict(self._poll.poll(int(ABANDON_POLL * 1000)))
            if not events:
                continue
            if self._channel.fileno() not in events:
                return self._died()
            try:
                message = self._channel.receive()
                if message is None:
                    return self._died()
                if message[0] == "beat":
                    self._channel.send(["current", _forward(heartbeats, message[1])])
                    continue
                _, data, pending = message
                outcome = _outcome(data)
            except (OSError, ValueError, TypeError, KeyError, IndexError):
                # Reset, or bytes that are not a message: the child is gone or no longer follows.
                return self._died()
            if pending:
                heartbeats.keep_pending(pending[0])
            return outcome

    def _died(self) -> Outcome:
        """The child ended mid-call (or broke its connection, and is killed now)."""
        code = self._exit_status(STATUS_WAIT)
        self.kill()  # whatever the handler started goes with it
        if code is None:
            code = self._exit_status(STATUS_WAIT)
        error = WorkerProcessDied(_death_message(code))
        return Outcome(error=HandlerError.of(error, with_traceback=False))

    def _exit_status(self, wait: float) -> int | None:
        """The exit code (negative: the signal that ended it) once the fork server reaped it."""
        if self._status is None and self._status_fd is not None:
            status = select.poll()
            status.register(self._status_fd, select.POLLIN)
            if status.poll(int(wait * 1000)):
                data = os.read(self._status_fd, _SIGNED.size)
                if len(data) == _SIGNED.size:
                    (self._status,) = _SIGNED.unpack(data)
        return self._status

    def kill(self) -> None:
        """SIGKILL the child and every process it started: they share its process group.

        No SIGTERM first: children ignore it, the worker has already decided the attempt is
        over, and a handler's way to stop cleanly is `ctx.heartbeat()` raising ActivityCancelled.
        """
        self.ended = True
        with contextlib.suppress(OSError):  # gone already
            os.killpg(self.pid, signal.SIGKILL)
        if self._status is None:
            # The process itself too, in case the handler moved it to another process group
            # (once reaped, its pid is no longer its own).
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)

    def end(self) -> None:
        """Kill it if need be and let go of its connection."""
        self.kill()
        self._channel.close()
        if self._status_fd is not None:
            os.close(self._status_fd)
            self._status_fd = None


class _ForkServer:
    """The worker's handle on the fork server, which forks the children.

    The server reports each child's exit status on a pipe given with the request. When its
    control socket closes — the worker closed the pool, or died in any way — it kills every
    child and exits, so no child outlives the worker.
    """

    def __init__(self, search_paths: list[str]) -> None:
        self._search_paths = search_paths
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._stopped = False
        self._start()

    def fork(self) -> _Child:
        """A fresh child, connected; ProcessPoolError when none can be started."""
        with self._lock:
            if self._stopped:
                raise ProcessPoolError("the process pool is closed")
            if self._control is not None:
                try:
                    return self._fork(self._control)
                except (OSError, EOFError):
                    # The server died (killed from outside) or hangs: a new one takes over.
                    self._discard()
            self._start()
            assert self._control is not None
            try:
                return self._fork(self._control)
            except (OSError, EOFError) as exc:
                self._discard()
                raise ProcessPoolError(f"cannot start a process for the handler: {exc}") from None

    def stop(self, timeout: float) -> None:
        with self._lock:
            self._stopped = True
            process, control = self._process, self._control
            self._process = self._control = None
        if control is not None:
            control.close()  # the server kills what is left of its children, reaps them, exits
        if process is not None:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        command = [sys.executable, "-c", _BOOT, str(theirs.fileno()),
                   json.dumps([str(path) for path in sys.path]), json.dumps(self._search_paths)]
        try:
            process = subprocess.Popen(command, pass_fds=[theirs.fileno()],
                                       stdin=subprocess.DEVNULL)
        except OSError as exc:
            ours.close()
            raise ProcessPoolError(f"cannot start processes for handlers: {exc}") from None
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT)
        try:
            ready: bytes | None = ours.recv(1)
        except TimeoutError:
            ready = None
        except OSError:
            ready = b""
        if ready != b"R":
            ours.close()
            why = f"was not ready within {START_TIMEOUT:g} s"
            if ready is not None:  # it closed its end: it is exiting
                why = "stopped before it was ready"
                with contextlib.suppress(subprocess.TimeoutExpired):
                    why = f"exited with code {process.wait(STATUS_WAIT)}"
            process.kill()
            process.wait()
            raise ProcessPoolError(f"cannot start processes for handlers: the fork server {why}")
        ours.settimeout(FORK_TIMEOUT)
        self._process, self._control = process, ours

    def _fork(self, control: socket.socket) -> _Child:
        ours, theirs = socket.socketpair()
        status_r, status_w = os.pipe()
        try:
            socket.send_fds(control, [b"F"], [theirs.fileno(), status_w])
            reply = _recv_exactly(control, _SIGNED.size)
            if reply is None:
                raise EOFError("the fork server is gone")
            (pid,) = _SIGNED.unpack(reply)
            if pid < 0:
                raise ProcessPoolError(
                    f"cannot start a process for the handler: {os.strerror(-pid)}")
        except BaseException:
            ours.close()
            os.close(status_r)
            raise
        finally:
            theirs.close()
            os.close(status_w)
        return _Child(pid, _Channel(ours, in_worker=True), status_r)

    def _discard(self) -> None:
        if self._control is not None:
            self._control.close()
        if self._process is not None:
            self._process.kill()
            self._process.wait()
        self._process = self._control = None


class _Channel:
    """Messages (lists), each prefixed by its length, on one end of a socket pair.

    The worker sends pickles of its own plain data (the state, the context with its datetimes),
    quick to make and to read; a child sends strict JSON, so the worker never unpickles
    anything a child sends, and a child can send only what JSON holds.
    """

    def __init__(self, sock: socket.socket, *, in_worker: bool) -> None:
        self._sock = sock
        self._encode = _as_pickle if in_worker else _as_json
        self._decode = json.loads if in_worker else pickle.loads

    def fileno(self) -> int:
        return self._sock.fileno()

    def send(self, message: list[Any]) -> None:
        self.send_encoded(self._encode(message))

    def send_encoded(self, data: bytes) -> None:
        self._sock.sendall(_LENGTH.pack(len(data)) + data)

    def receive(self) -> list[Any] | None:
        """The next message, or None once the other end has closed."""
        header = _recv_exactly(self._sock, _LENGTH.size)
        if header is None:
            return None
        data = _recv_exactly(self._sock, _LENGTH.unpack(header)[0])
        if data is None:
            return None
        message = self._decode(data)
        if not isinstance(message, list) or not message:
            raise ValueError("not a message")
        return message

    def close(self) -> None:
        self._sock.close()


def _recv_exactly(sock: socket.socket, size: int) -> bytearray | None:
    """`size` bytes from `sock`, or None when it closes first."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:])
        if count == 0:
            return None
        received += count
    return buffer


def _as_pickle(message: list[Any]) -> bytes:
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


# allow_nan=False keeps every value strict JSON.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _as_json(message: list[Any]) -> bytes:
    # A lone surrogate (text an exception made of undecodable bytes) crosses intact:
    # json.loads decodes bytes with "surrogatepass" too.
    return _ENCODER.encode(message).encode("utf-8", "surrogatepass")


def _outcome_data(outcome: Outcome) -> dict[str, Any]:
    if outcome.cancelled:
        return {"cancelled": True}
    error = outcome.error
    if error is not None:
        return {"error": [error.exception_class, error.message, list(error.classes),
                          error.traceback]}
    return {"result": outcome.result}


def _outcome(data: dict[str, Any]) -> Outcome:
    if "result" in data:
        return Outcome(result=data["result"])
    if "error" in data:
        exception_class, message, classes, traceback = data["error"]
        return Outcome(error=HandlerError(exception_class, message, tuple(classes), traceback))
    return Outcome(cancelled=True)


def _forward(heartbeats: HeartbeatBuffer, details: Any) -> bool:
    """Hand a child's heartbeat to the worker's buffer for its attempt; False once the attempt is
    no longer current (the child's `ctx.heartbeat()` then raises ActivityCancelled)."""
    try:
        heartbeats.beat(details)
    except ActivityCancelled:
        return False
    except Exception:
        # The write failed (database busy, full, read-only): the attempt may well still be
        # current, so the handler goes on, and the details wait for the next write, which
        # meets the failure where the worker reports its own.
        heartbeats.keep_pending(details)
    return True


def _death_message(code: int | None) -> str:
    what = "the process running the handler"
    if code is None:
        return f"{what} ended (its exit status is unknown)"
    if code >= 0:
        return f"{what} exited with code {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    hint = " (sent from outside: often the out-of-memory killer)" if -code == signal.SIGKILL else ""
    return f"{what} was killed by {name}{hint}"


# What the fork server runs: the worker's sys.path first, so that it imports this same wfctl.
_BOOT = (
    "import json, sys; sys.path[:0] = json.loads(sys.argv[2]); "
    f"from {__name__} import _ForkServerProcess; "
    "_ForkServerProcess(int(sys.argv[1]), json.loads(sys.argv[3])).serve()"
)


class _ForkServerProcess:
    """The fork server itself: forks a child per request and reports each child's exit status;
    once the worker goes away, kills every child and exits. It never starts a thread, so that
    forking it is safe."""

    def __init__(self, control_fd: int, search_paths: list[str]) -> None:
        # A Ctrl-C or a systemd stop signals every process; the worker decides when this ends.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.path[:0] = search_paths
        self.control = socket.socket(fileno=control_fd)
        self.pid = os.getpid()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        # A handler rather than SIG_IGN, which would reap the children itself, losing their status.
        signal.signal(signal.SIGCHLD, _ignore)
        self.prctl = _prctl()
        self.statuses: dict[int, int] = {}  # child pid -> where its exit status goes
        _name(self.prctl, b"wfctl forksrv")

    def serve(self) -> None:
        # What was imported so far stays put: the collector leaves it alone in the children,
        # so those pages stay shared.
        gc.freeze()
        self.control.sendall(b"R")
        while True:
            readable, _, _ = select.select([self.control, self.wake_r], [], [])
            if self.wake_r in readable:
                _drain(self.wake_r)
                self.reap()
            if self.control not in readable:
                continue
            try:
                request, fds, _, _ = socket.recv_fds(self.control, 1, 2)
            except OSError:
                request, fds = b"", []
            if not request or len(fds) != 2:
                break
            try:
                self.control.sendall(_SIGNED.pack(self.fork(*fds)))
            except OSError:
                break
        # The worker closed the pool or died: nothing it started outlives it.
        for pid in self.statuses:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        for pid in self.statuses:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def fork(self, child_fd: int, status_fd: int) -> int:
        """Fork a child speaking on `child_fd`; its pid, or minus the errno."""
        _flush_output()  # output still buffered here would be written again by every child
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(child_fd)
            os.close(status_fd)
            return -(exc.errno or 1)
        if pid == 0:
            self._become_child(child_fd, status_fd)
        # Its process group exists before the worker hears of it (the child does the same).
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)
        os.close(child_fd)
        self.statuses[pid] = status_fd
        return pid

    def _become_child(self, child_fd: int, status_fd: int) -> NoReturn:
        code = 1
        try:
            os.setpgid(0, 0)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            self.control.close()
            for fd in (self.wake_r, self.wake_w, status_fd, *self.statuses.values()):
                os.close(fd)
            if self.prctl is not None:
                # Killed by the kernel when the fork server ends, even while stuck in code that
                # holds the interpreter lock; the server's own kill on exit covers the rest.
                self.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                if os.getppid() != self.pid:  # it ended before that took effect
                    os._exit(0)
            _name(self.prctl, b"wfctl handler")
            _child_main(child_fd)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            _flush_output()
            os._exit(code)

    def reap(self) -> None:
        """Collect every child that ended and send its exit status to the worker."""
        while self.statuses:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.statuses.pop(pid, None)
            if fd is None:
                continue
            with contextlib.suppress(OSError):  # the worker may have let go of that child already
                os.write(fd, _SIGNED.pack(os.waitstatus_to_exitcode(status)))
            os.close(fd)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A signal handler that does nothing (the signal only interrupts a wait)."""


def _drain(fd: int) -> None:
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def _prctl() -> Callable[..., int] | None:
    """Linux's prctl(2), for what only the kernel can do for a child; None elsewhere."""
    if sys.platform != "linux":
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _name(prctl: Callable[..., int] | None, name: bytes) -> None:
    """The name `ps`, `top` and the out-of-memory killer's log show for this process."""
    if prctl is not None:
        prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)


def _child_main(fd: int) -> None:
    """A child: run the calls the worker sends, one at a time, until it closes the connection."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        # Ignored through a handler, not SIG_IGN: a program a handler starts would inherit
        # SIG_IGN and could then not be stopped with SIGTERM.
        signal.signal(signum, _ignore)
    channel = _Channel(socket.socket(fileno=fd), in_worker=False)
    while True:
        message = channel.receive()
        if message is None or message[0] != "call":
            return
        channel.send_encoded(_run_call(channel, message))
        _flush_output()


def _run_call(channel: _Channel, message: list[Any]) -> bytes:
    """Run one call in this child; returns the encoded `done` message."""
    _, spec, step, state, context = message
    link = _HeartbeatLink(channel)
    buffer: _ChildHeartbeats | None = None
    try:
        buffer = _ChildHeartbeats(link.write, context.get("heartbeat_timeout"))
        ctx = ActivityContext(**context, heartbeats=buffer)

        def moved() -> None:
            ctx.heartbeat_deadline_at = clock.after(clock.now(), ctx.heartbeat_timeout)

        buffer.on_write = moved
        outcome = handlers.run(spec, step, state, ctx)
    except BaseException as exc:
        # handlers.run lets nothing of the handler's escape: this is the child's own failure,
        # such as an exception whose text cannot be read.
        outcome = Outcome(error=_described(exc))
    link.close()
    pending = buffer.take_pending() if buffer is not None else _NOTHING
    try:
        return _as_json(["done", _outcome_data(outcome), [] if pending is _NOTHING else [pending]])
    except (TypeError, ValueError, RecursionError) as exc:
        return _as_json(["done", _outcome_data(Outcome(error=_described(exc))), []])


def _described(exc: BaseException) -> HandlerError:
    try:
        return HandlerError.of(exc)
    except BaseException:
        name = type(exc).__name__
        return HandlerError(name, f"{name} (its message cannot be read)", (name,), None)


class _HeartbeatLink:
    """A child's heartbeat writes for one call: sent to the worker, which answers whether the
    attempt is still current. Closed when the call ends, so that a thread the handler left
    running cannot speak in a later call's conversation."""

    def __init__(self, channel: _Channel) -> None:
        self._channel = channel
        self._lock = threading.Lock()
        self._open = True

    def write(self, details: Any) -> bool:
        with self._lock:
            if not self._open:
                return False
            try:
                self._channel.send(["beat", details])
                answer = self._channel.receive()
            except OSError:
                answer = None
            if answer is None:  # the worker is gone: there is nobody to report to
                os._exit(0)
            return answer[1] is True

    def close(self) -> None:
        with self._lock:
            self._open = False


class _ChildHeartbeats(HeartbeatBuffer):
    """A child's heartbeat buffer: the worker's throttle, and details checked in the handler's
    own call, since only JSON values can reach the worker."""

    def beat(self, details: Any) -> None:
        if not self.cancelled:
            jsonvalue.check(details, "heartbeat details")
        super().beat(details)


def _flush_output() -> None:
    # A child may be killed at any moment: what its handler printed is written out after each call.
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
