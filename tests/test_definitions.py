"""workflows.yaml is validated whole; every error names file, line, key path and what was expected."""

from __future__ import annotations

import textwrap

import pytest

from wfctl import definitions
from wfctl.errors import DefinitionError

FULL = """\
version: 1
defaults:
  activity:
    start_to_close: 5m
    max_attempts: 3
    backoff: {initial: 1s, coefficient: 2.0, max: 1m}
  workflow_task_timeout: 10s
limits:
  payload_size: 2MiB
workflows:
  data_import:
    execution_timeout: 2h
    run_timeout: 1h
    deadline: {hours: 24}
    on_deadline: handlers:import_timeout
    child_policy: terminate
    steps:
      - activity: handlers:fetch
        schedule_to_start: 30s
        start_to_close: 5m
        schedule_to_close: 10m
        heartbeat: 15s
        max_attempts: 3
        non_retryable: [ValueError]
        queue: default
      - delay: 1h
      - wait_for_signal: approved
        timeout: 2d
      - parallel:
          - activity: handlers:a
          - activity: handlers:b
      - workflow: other_type
      - activity: handlers:load
      - continue_as_new: {while: more}
  other_type:
    steps:
      - activity: handlers:x
"""


def parse(text: str) -> definitions.Definitions:
    return definitions.parse(textwrap.dedent(text), "workflows.yaml")


def error(text: str) -> str:
    with pytest.raises(DefinitionError) as caught:
        parse(text)
    return str(caught.value)


def test_the_whole_schema_parses():
    defs = parse(FULL)
    wf = defs.types["data_import"]
    assert (wf.execution_timeout, wf.run_timeout, wf.deadline) == (7200, 3600, 86400)
    assert wf.on_deadline == "handlers:import_timeout"
    assert wf.child_policy == "terminate"
    assert wf.workflow_task_timeout == 10
    assert [s.kind for s in wf.steps] == ["activity", "delay", "wait_for_signal", "parallel",
                                          "workflow", "activity", "continue_as_new"]
    fetch = wf.steps[0]
    assert fetch.name == "fetch"
    assert fetch.options.retry_policy() == {
        "max_attempts": 3, "backoff_seconds": [1, 2, 4], "schedule_to_start_timeout": 30,
        "start_to_close_timeout": 300, "schedule_to_close_timeout": 600,
        "heartbeat_timeout": 15, "non_retryable": ["ValueError"],
    }
    assert wf.steps[2].timeout == 172800
    assert [b.name for b in wf.steps[3].branches] == ["a", "b"]
    assert wf.steps[6].while_key == "more"
    assert defs.limits.payload_size == 2 * 1024 * 1024


def test_a_step_overrides_the_activity_defaults():
    defs = parse(FULL)
    other = defs.types["other_type"].steps[0].options
    assert other.start_to_close == 300
    assert other.schedule_to_start is None
    assert defs.types["data_import"].steps[5].options.start_to_close == 300


def test_schedule_to_close_beyond_the_sum_is_a_warning():
    defs = parse(FULL)
    assert defs.warnings == (
        "workflows.yaml:18: workflows.data_import.steps[0]: schedule_to_close (10m) exceeds "
        "schedule_to_start + start_to_close (5m30s)",
    )


def test_zero_timeout_names_file_line_and_key_path():
    text = FULL.replace("    execution_timeout: 2h", "    execution_timeout: 0")
    assert error(text) == (
        "workflows.yaml:12: workflows.data_import.execution_timeout: must be at least 1 second "
        "(got 0)"
    )


@pytest.mark.parametrize(("old", "new", "message"), [
    ("heartbeat: 15s", "heartbeat: 2y",
     "workflows.yaml:22: workflows.data_import.steps[0].heartbeat: expected a duration"),
    ("heartbeat: 15s", "heartbeat: 400d",
     "workflows.yaml:22: workflows.data_import.steps[0].heartbeat: must be at most 1 year"),
    ("max_attempts: 3\n        non", "max_attempts: 0\n        non",
     "workflows.yaml:23: workflows.data_import.steps[0].max_attempts: expected a whole number "
     "of at least 1 (got 0)"),
    ("child_policy: terminate", "child_policy: explode",
     "workflows.yaml:16: workflows.data_import.child_policy: expected one of terminate, "
     "request_cancel, abandon (got 'explode')"),
    ("- workflow: other_type", "- workflow: missing",
     "workflows.yaml:32: workflows.data_import.steps[4].workflow: unknown workflow type "
     "'missing' (defined: data_import, other_type)"),
    ("queue: default", "queu: default",
     "workflows.yaml:25: workflows.data_import.steps[0].queu: unknown key"),
    ("- delay: 1h", "- delay: NONE",
     "workflows.yaml:26: workflows.data_import.steps[1].delay: expected a duration"),
    ("activity: handlers:load", "activity: load",
     "workflows.yaml:33: workflows.data_import.steps[5].activity: expected a handler as "
     "'module:function' (got 'load')"),
])
def test_errors_name_where_and_what(old, new, message):
    assert error(FULL.replace(old, new, 1)).startswith(message)


def test_a_step_with_two_kinds_is_refused():
    message = error("""
        version: 1
        workflows:
          w:
            steps:
              - activity: m:f
                delay: 1s
    """)
    assert message == ("workflows.yaml:6: workflows.w.steps[0]: expected exactly one of activity, "
                       "delay, wait_for_signal, parallel, workflow, continue_as_new "
                       "(found activity, delay)")


def test_continue_as_new_must_be_last():
    message = error("""
        version: 1
        workflows:
          w:
            steps:
              - continue_as_new: {while: more}
              - activity: m:f
    """)
    assert message == "workflows.yaml:6: workflows.w.steps[0]: continue_as_new must be the last step"


def test_yaml_syntax_errors_are_one_line():
    message = error("version: 1\nworkflows:\n  w: [\n")
    assert message.startswith("workflows.yaml:4: invalid YAML:")
    assert "\n" not in message


def test_missing_version_and_unknown_sections():
    assert error("workflows: {}\n") == \
        "workflows.yaml:1: version: missing (expected version: 1)"
    assert error("version: 2\nworkflows: {}\n") == "workflows.yaml:1: version: expected 1 (got 2)"
    assert error("version: 1\nextra: 1\nworkflows: {}\n") == \
        "workflows.yaml:2: extra: unknown key (expected one of: version, defaults, limits, workflows)"


def test_duplicate_keys_are_refused():
    message = error("""
        version: 1
        workflows:
          w:
            run_timeout: 1h
            run_timeout: 2h
            steps:
              - activity: m:f
    """)
    assert message == "workflows.yaml:6: workflows.w.run_timeout: duplicate key"


def test_backoff_as_a_list_is_used_as_given():
    defs = parse("""
        version: 1
        workflows:
          w:
            steps:
              - activity: m:f
                max_attempts: 4
                backoff: [1s, 2s, 5s]
    """)
    options = defs.types["w"].steps[0].options
    assert options.retry_policy()["backoff_seconds"] == [1, 2, 5]
    assert options.backoff.wait_after(3, 4) == 5
    assert options.backoff.wait_after(9, 4) == 5


def test_limits_come_from_yaml_and_the_environment(monkeypatch):
    monkeypatch.setenv("WFCTL_LIMIT_HISTORY_SIZE", "100")
    defs = parse("""
        version: 1
        limits:
          payload_size: 512KiB
          pending_signal_count: 0
        workflows:
          w:
            steps:
              - activity: m:f
    """)
    assert defs.limits.payload_size == 512 * 1024
    assert defs.limits.pending_signal_count == 0
    assert defs.limits.history_size == 100


def test_a_missing_file_says_how_to_point_at_one(tmp_path):
    with pytest.raises(DefinitionError, match=r"nope.yaml: no such file \(pass --workflows FILE"):
        definitions.load(tmp_path / "nope.yaml")
