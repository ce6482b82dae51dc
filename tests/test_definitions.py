"""workflows.yaml is validated whole; every error names file, line, key path and what was expected."""

from __future__ import annotations

import textwrap

import pytest

from wfctl.errors import DefinitionError
from wfctl.lang import definitions

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
        "max_attempts": 3, "backoff_seconds": [1, 2], "schedule_to_start_timeout": 30,
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


def test_a_schedule_to_close_longer_than_one_attempt_is_no_warning():
    # fetch: schedule_to_close 10m against 30s + 5m for one attempt; it spans three.
    defs = parse(FULL)
    assert defs.warnings == (
        "workflows.yaml:27: workflows.data_import.steps[2]: the signal wait's timeout (2d) is "
        "longer than run_timeout (1h): the run_timeout fires first",
    )


def test_zero_timeout_names_file_line_and_key_path():
    text = FULL.replace("    execution_timeout: 2h", "    execution_timeout: 0")
    assert error(text) == (
        "workflows.yaml:12: workflows.data_import.execution_timeout: must be at least 1 second "
        "(got 0)"
    )


@pytest.mark.parametrize(("old", "new", "message"), [
    ("heartbeat: 15s", "heartbeat: 2y",
     "workflows.yaml:22: workflows.data_import.steps[0].heartbeat: years are not a unit: "
     "use days or weeks (365d, 52w) or ISO 8601's P1Y (got '2y')"),
    ("heartbeat: 15s", "heartbeat: 400d",
     "workflows.yaml:22: workflows.data_import.steps[0].heartbeat: must be at most 1 year"),
    ("max_attempts: 3\n        non", "max_attempts: 0\n        non",
     "workflows.yaml:23: workflows.data_import.steps[0].max_attempts: expected a whole number "
     "from 1 to 1000 (got 0)"),
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


def errors(text: str) -> tuple[str, ...]:
    with pytest.raises(DefinitionError) as caught:
        parse(text)
    return caught.value.errors


def test_missing_version_and_unknown_sections():
    assert errors("workflows: {}\n") == (
        "workflows.yaml:1: version: missing (expected version: 1)",
        "workflows.yaml:1: workflows: expected at least one workflow type")
    assert error("workflows: {}\n") == ("workflows.yaml:1: version: missing (expected version: "
                                        "1) (and 1 more error: wfctl validate lists them)")
    assert error("version: 2\nworkflows: {w: {steps: [delay: 1s]}}\n") == \
        "workflows.yaml:1: version: expected 1 (got 2)"
    assert error("version: 1\nextra: 1\nworkflows: {w: {steps: [delay: 1s]}}\n") == \
        ("workflows.yaml:2: extra: unknown key (expected one of: version, defaults, limits, "
         "workflows, schedules)")
    assert "workflows.yaml:2: workflow: unknown key (did you mean workflows?)" in \
        errors("version: 1\nworkflow: {w: {steps: [delay: 1s]}}\n")


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
    with pytest.raises(DefinitionError) as caught:
        definitions.load(tmp_path / "nope.yaml")
    assert str(caught.value) == f"{tmp_path}/nope.yaml: no such file"


@pytest.mark.parametrize(("value", "message"), [
    ("NaN", "expected a duration"),
    (".nan", "expected a duration"),
    (".inf", "must be at most 1 year (got inf)"),
    ("-.inf", "must not be negative"),
    ("1e999", "expected a duration"),
    ("1.0e+999", "must be at most 1 year"),
    ("-1", "must be at least 1 second (got -1)"),
    ("{hours: .nan}", "hours must be a number of at least 0 (got nan)"),
    ("{hours: 1.0e+308}", "must be at most 1 year"),
    ("1d1d", "write 2d: each unit once, largest first (got '1d1d')"),
    ("P1M", "months are not a fixed length"),
    ("6M", "M is not a unit: minutes are m (6m) and months are not supported (got '6M')"),
    ("2H", "units are lower-case: 2h (got '2H')"),
    ("pt1m", "ISO 8601 durations are upper-case: PT1M (got 'pt1m')"),
])
def test_a_duration_that_is_no_number_of_seconds_is_refused_where_it_is_written(value, message):
    text = f"version: 1\nworkflows:\n  w:\n    deadline: {value}\n    steps:\n      - activity: m:f\n"
    assert error(text).startswith(f"workflows.yaml:4: workflows.w.deadline: {message}")


@pytest.mark.parametrize(("text", "message"), [
    ("- a\n- b\n", "workflows.yaml:1: expected a mapping of sections (got a list)"),
    ("hello\n", "workflows.yaml:1: expected a mapping of sections (got 'hello')"),
    ("42\n", "workflows.yaml:1: expected a mapping of sections (got 42)"),
    ("version: true\nworkflows: {}\n", "workflows.yaml:1: version: expected 1 (got True)"),
    ("version: 1\nworkflows: {w: {steps: [{activity: 'm:f\\n'}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].activity: expected a handler as 'module:function'"),
    ('version: 1\nworkflows: {w: {steps: [{wait_for_signal: "\\ud800"}]}}\n',
     "workflows.yaml:2: workflows.w.steps[0].wait_for_signal: expected a signal name "
     "(got '\\ud800', a lone surrogate is not text)"),
    ('version: 1\nworkflows: {"\\udcff": {steps: []}}\n',
     "workflows.yaml:2: workflows: key '\\udcff' holds a lone surrogate"),
    ("version: 1\nworkflows: {w: {steps: [{activity: m:f, max_attempts: 1000000000000}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].max_attempts: expected a whole number from 1 to 1000"),
    ("version: 1\nworkflows: {w: {steps: [{activity: m:f, backoff: {coefficient: .nan}}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].backoff.coefficient: expected a number from 1 to 100"),
    ("version: 1\nworkflows: {w: {steps: [{activity: m:f, backoff: {coefficient: 1.0e+308}}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].backoff.coefficient: expected a number from 1 to 100"),
    ("version: 1\nlimits: {payload_size: " + "9" * 400 + " KiB}\nworkflows: {}\n",
     "workflows.yaml:2: limits.payload_size: expected a size"),
    ("version: 1\nlimits: {payload_size: １MiB}\nworkflows: {}\n",
     "workflows.yaml:2: limits.payload_size: expected a size"),
    ("version: 1\nworkflows: {w: {steps: [{delay: !!timestamp '2001-13-45'}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].delay: invalid value:"),
    ("version: 1\nworkflows: {w: {steps: [{delay: !!int 'x'}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].delay: invalid value:"),
    ("version: 1\nworkflows: {w: {steps: [{delay: !!bool 'x'}]}}\n",
     "workflows.yaml:2: workflows.w.steps[0].delay: invalid value:"),
    ("version: 1\n? !!timestamp '2001-13-45'\n: x\n", "workflows.yaml:2: invalid value:"),
    ("version: 1\n\x00\n", "workflows.yaml:2: invalid YAML:"),
])
def test_hostile_documents_are_one_error_naming_the_place(text, message):
    assert error(text).startswith(message)


def test_nesting_is_bounded_before_the_parser_recurses():
    text = "version: 1\nworkflows: " + "[" * 5000 + "]" * 5000 + "\n"
    assert error(text) == "workflows.yaml:2: invalid YAML: nested more than 64 levels deep"
    text = "version: 1\nworkflows: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n"
    assert error(text) == "workflows.yaml:2: invalid YAML: nested more than 64 levels deep"


def test_alias_bombs_are_refused_before_anything_expands_them():
    lines = ["version: 1", "a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for index, name in enumerate("bcdefghij"):
        previous = "abcdefghij"[index]
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 10) + "]")
    lines.append("workflows: *j")
    message = error("\n".join(lines) + "\n")
    assert message.startswith("workflows.yaml:")
    assert "aliases expand the document to more than 100000 values" in message


def test_a_deep_chain_of_aliases_is_refused():
    lines = ["version: 1", "a0: &a0 [x]"]
    lines += [f"a{n}: &a{n} [*a{n - 1}]" for n in range(1, 200)]
    lines.append("workflows: *a199")
    assert "aliases expand the document to more than 64 levels deep" in error("\n".join(lines))


def test_a_node_that_contains_itself_is_refused():
    assert "an alias refers to a node that contains it" in \
        error("version: 1\nworkflows: &w {x: *w}\n")


def test_plain_aliases_still_work():
    defs = parse("""
        version: 1
        defaults:
          activity:
            backoff: &fast [1s, 2s]
        workflows:
          w:
            steps:
              - activity: m:f
                backoff: *fast
    """)
    assert defs.types["w"].steps[0].options.backoff.explicit == (1, 2)


def test_a_huge_backoff_coefficient_caps_at_the_maximum():
    defs = parse("""
        version: 1
        workflows:
          w:
            steps:
              - activity: m:f
                max_attempts: 1000
                backoff: {initial: 1s, coefficient: 100, max: 1h}
    """)
    waits = defs.types["w"].steps[0].options.retry_policy()["backoff_seconds"]
    assert waits[:3] == [1, 100, 3600] and waits[-1] == 3600


@pytest.mark.parametrize(("content", "message"), [
    (b"version: 1\n\xff\xfe\n", "workflows.yaml:2: not UTF-8 text (byte 0xff at offset 11)"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\xd0", "workflows.yaml:1: not UTF-8 text (byte 0xd0 at offset 10)"),
])
def test_a_file_that_is_not_text_is_refused(tmp_path, content, message):
    path = tmp_path / "workflows.yaml"
    path.write_bytes(content)
    with pytest.raises(DefinitionError) as caught:
        definitions.load(path)
    assert str(caught.value) == f"{tmp_path}/{message}"


def test_a_folder_is_not_a_definitions_file(tmp_path):
    with pytest.raises(DefinitionError) as caught:
        definitions.load(tmp_path)
    assert str(caught.value) == f"{tmp_path} is a folder, not a definitions file"


def test_a_file_too_large_to_be_definitions_is_not_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(definitions, "MAX_FILE_SIZE", 100)
    path = tmp_path / "workflows.yaml"
    path.write_text("#" * 101)
    with pytest.raises(DefinitionError, match="larger than"):
        definitions.load(path)


@pytest.mark.parametrize("value", ["²", "١٢", "1e3", "-1", " "])
def test_limits_from_the_environment_take_ascii_whole_numbers(monkeypatch, value):
    monkeypatch.setenv("WFCTL_LIMIT_HISTORY_SIZE", value)
    with pytest.raises(DefinitionError, match="WFCTL_LIMIT_HISTORY_SIZE: expected a whole number"):
        parse("version: 1\nworkflows: {w: {steps: [{activity: m:f}]}}\n")


RETRYING = """
    version: 1
    defaults:
      retry:
        max_attempts: 3
        backoff: {initial: 1m, coefficient: 2.0, max: 1h}
      retention: 30d
    workflows:
      inherits:
        steps:
          - activity: m:f
      own:
        retry: {max_attempts: 2, backoff: [5s], when: [run_timeout, signal_wait]}
        retention: {days: 7}
        steps:
          - activity: m:f
      opted_out:
        retry: NONE
        retention: NONE
        steps:
          - activity: m:f
"""


def test_a_type_takes_the_retry_policy_and_retention_of_the_defaults_or_its_own():
    types = parse(RETRYING).types

    inherited = types["inherits"]
    assert inherited.retry.view() == {"max_attempts": 3, "backoff_seconds": [60, 120],
                                      "when": ["activity", "run_timeout", "signal_wait"]}
    assert inherited.retention == 30 * 86400
    assert types["own"].retry.view() == {"max_attempts": 2, "backoff_seconds": [5],
                                         "when": ["run_timeout", "signal_wait"]}
    assert types["own"].retention == 7 * 86400
    assert types["opted_out"].retry is None
    assert types["opted_out"].retention is None


def test_without_retry_or_retention_a_run_is_not_retried_and_an_instance_is_kept():
    wf = parse("version: 1\nworkflows: {w: {steps: [{activity: m:f}]}}\n").types["w"]
    assert (wf.retry, wf.retention) == (None, None)


def test_a_retry_policy_waits_its_backoff_after_each_failed_attempt():
    policy = parse(RETRYING).types["inherits"].retry
    # After the third (last) attempt nothing follows: two waits in all.
    assert [policy.delay_after(attempt) for attempt in (1, 2)] == [60, 120]
    capped = parse("""
        version: 1
        workflows:
          w:
            retry: {max_attempts: 10, backoff: {initial: 1m, coefficient: 10, max: 1h}}
            steps:
              - activity: m:f
    """).types["w"].retry
    assert [capped.delay_after(attempt) for attempt in (1, 2, 3, 9)] == [60, 600, 3600, 3600]


@pytest.mark.parametrize(("retry", "message"), [
    ("retry: 3", "workflows.yaml:5: workflows.w.retry: expected a mapping of retry settings "
                 "(got 3)"),
    ("retry: {backoff: [1s]}", "workflows.yaml:5: workflows.w.retry: max_attempts: missing "
                               "(expected the number of attempts in all, the first included)"),
    ("retry: {max_attempts: 0}", "workflows.yaml:5: workflows.w.retry.max_attempts: expected a "
                                 "whole number from 1 to 1000 (got 0)"),
    ("retry: {max_attempts: 2, causes: [activity]}",
     "workflows.yaml:5: workflows.w.retry.causes: unknown key (expected one of: max_attempts, "
     "backoff, when)"),
    ("retry: {max_attempts: 2, when: [execution_timeout]}",
     "workflows.yaml:5: workflows.w.retry.when[0]: expected one of activity, run_timeout, "
     "signal_wait (got 'execution_timeout')"),
    ("retry: {max_attempts: 2, when: [activity, activity]}",
     "workflows.yaml:5: workflows.w.retry.when[1]: activity is listed twice"),
    ("retry: {max_attempts: 2, when: []}",
     "workflows.yaml:5: workflows.w.retry.when: expected at least one of activity, "
     "run_timeout, signal_wait"),
    ("retry: {max_attempts: 2, when: activity}",
     "workflows.yaml:5: workflows.w.retry.when: expected a list of causes (got 'activity')"),
    ("retry: {max_attempts: 2, backoff: {initial: 1m, coefficient: 0.5}}",
     "workflows.yaml:5: workflows.w.retry.backoff.coefficient: expected a number from 1 to 100 "
     "(got 0.5)"),
    ("retention: 0", "workflows.yaml:5: workflows.w.retention: must be at least 1 second (got 0)"),
    ("retention: 2y", "workflows.yaml:5: workflows.w.retention: years are not a unit: use days "
                      "or weeks (365d, 52w) or ISO 8601's P1Y (got '2y')"),
    ("retention: 1M", "workflows.yaml:5: workflows.w.retention: M is not a unit: minutes are m "
                      "(1m) and months are not supported (got '1M')"),
])
def test_a_bad_retry_policy_or_retention_names_its_line_and_key(retry, message):
    found = error(f"""
        version: 1
        workflows:
          w:
            {retry}
            steps:
              - activity: m:f
    """)
    assert found.startswith(message), found


def test_a_bad_retry_policy_under_defaults_names_its_line_and_key():
    assert error("""
        version: 1
        defaults:
          retry:
            max_attempts: 2
            when: [deadline]
        workflows:
          w:
            steps:
              - activity: m:f
    """) == ("workflows.yaml:6: defaults.retry.when[0]: expected one of activity, run_timeout, "
             "signal_wait (got 'deadline')")
