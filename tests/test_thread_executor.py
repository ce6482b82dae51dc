"""The thread executor: a handler called in the slot's own thread, given a context only when it
takes one, and whatever its module does as it is imported ends as the call's outcome."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from conftest import T0, Held

from wfctl.lang.context import ActivityContext, Flag, HeartbeatBuffer
from wfctl.lang.handlers import HandlerCall
from wfctl.worker.executor import ThreadExecutor

CONTEXT: dict[str, Any] = {
    "workflow_id": "order-1", "run_id": "run-1", "activity_id": "act-1", "step": "work",
    "attempt": 2, "max_attempts": 3, "last_heartbeat_details": None,
    "schedule_to_close_deadline_at": None, "close_deadline_at": T0 + timedelta(minutes=5),
    "heartbeat_deadline_at": None, "heartbeat_timeout": None,
}


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on sys.path for this test's handler modules (names of their own)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def call(spec: str) -> Any:
    return ThreadExecutor().run(Held(HandlerCall(spec, "work", {"n": 1}, CONTEXT),
                                     HeartbeatBuffer(lambda details: True, None), Flag()))


def test_a_handler_gets_a_context_only_when_it_takes_one(modules: Path) -> None:
    (modules / "texec_seen.py").write_text(textwrap.dedent("""
        def state_only(state):
            return {"args": 1}

        def with_context(state, ctx):
            return {"args": 2, "context": type(ctx).__name__, "attempt": ctx.attempt,
                    "workflow": ctx.workflow_id}
    """))
    assert call("texec_seen:state_only").result == {"args": 1}
    assert call("texec_seen:with_context").result == {
        "args": 2, "context": ActivityContext.__name__, "attempt": 2, "workflow": "order-1"}


def test_a_module_that_fails_or_exits_as_it_is_imported_fails_the_call(modules: Path) -> None:
    (modules / "texec_raises.py").write_text("raise RuntimeError('no config')\n")
    (modules / "texec_exits.py").write_text("raise SystemExit(4)\n")
    raised = call("texec_raises:handle").error
    exited = call("texec_exits:handle").error
    missing = call("texec_nowhere_xyz:handle").error
    assert raised is not None and (raised.exception_class, raised.message) == (
        "RuntimeError", "no config")
    assert exited is not None and (exited.exception_class, exited.message) == ("SystemExit", "4")
    assert missing is not None and missing.exception_class == "HandlerNotFound"
    assert "cannot import 'texec_nowhere_xyz'" in missing.message
