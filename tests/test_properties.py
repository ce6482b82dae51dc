"""Whatever text or YAML comes in, the duration parser and the definitions loader give a value or
wfctl's own error, nothing else (hypothesis, derandomized so that every run tries the same cases)."""

from __future__ import annotations

import math
from datetime import UTC, timedelta, timezone

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from wfctl import clock
from wfctl.errors import DefinitionError
from wfctl.lang import definitions, durations

FIXED = settings(derandomize=True, database=None, deadline=None, max_examples=200)

DURATION_WORDS = st.sampled_from([
    "1s", "90s", "5m", "2h30m", "1d12h", "250ms", "1w", "P1D", "PT2H30M", "P1Y", "P1M", "NONE",
    "null", "~", "1d1d", "1m1h", "１s", "1 h", " 5m ", "NaN", ".nan", "inf", "1e999", "-5", "0",
    "366d", "9" * 40, "m:f", "",
])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=10**300, max_value=10**400),
    st.floats(), st.text(max_size=12), DURATION_WORDS,
)
MAPPING_KEYS = st.sampled_from([*durations.MAPPING_KEYS, "months", ""]) | st.text(max_size=6)


def is_duration(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isfinite(value))


def parses_or_refuses(value: object) -> None:
    try:
        seconds = durations.parse(value)
    except durations.DurationError:
        return
    assert is_duration(seconds)
    for check in (durations.parse_timeout, durations.parse_interval):
        try:
            bounded = check(value)
        except durations.DurationError:
            continue
        assert bounded is None or 0 < bounded <= durations.ONE_YEAR


@FIXED
@given(st.text())
def test_any_text_is_a_duration_or_a_duration_error(text):
    parses_or_refuses(text)


@FIXED
@given(st.text(alphabet="0123456789.smhdwPTYMS -１", max_size=12))
def test_text_made_of_duration_characters_is_a_duration_or_a_duration_error(text):
    parses_or_refuses(text)


@FIXED
@given(SCALARS | st.dictionaries(MAPPING_KEYS, SCALARS, max_size=5) | st.lists(SCALARS, max_size=3))
def test_any_yaml_value_is_a_duration_or_a_duration_error(value):
    parses_or_refuses(value)


@FIXED
@given(st.text(max_size=40))
def test_any_yaml_scalar_text_is_a_duration_or_a_duration_error(text):
    try:
        value = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, KeyError, AttributeError):
        return
    parses_or_refuses(value)


KEYS = sorted({
    "version", "defaults", "limits", "workflows", "activity", "workflow_task_timeout",
    *definitions.LIMIT_DEFAULTS, *definitions._OPTION_KEYS, *definitions._WORKFLOW_KEYS,
    *(key for keys in definitions._STEP_KEYS.values() for key in keys),
    "initial", "coefficient", "max", "while",
})
VALUES = st.recursive(
    SCALARS | st.sampled_from(["m:f", "wfh:mark", "w", "terminate", "2MiB", "x.y"]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), children, max_size=3),
    max_leaves=12,
)


JUNK = SCALARS | st.lists(SCALARS, max_size=2) | st.dictionaries(st.sampled_from(KEYS), SCALARS,
                                                                max_size=2)


def mostly(good: st.SearchStrategy) -> st.SearchStrategy:
    """Usually a plausible value, so that documents get past the first check; sometimes any."""
    return st.integers(0, 9).flatmap(lambda n: JUNK if n == 0 else good)


DURATION = mostly(DURATION_WORDS | st.integers(0, 10**6) | st.fixed_dictionaries(
    {}, optional={key: st.integers(0, 100) | st.floats() for key in durations.MAPPING_KEYS}))
HANDLER = mostly(st.sampled_from(["m:f", "wfh:mark", "a.b:c", "m:f\n", "m"]))
OPTIONS = {
    "schedule_to_start": DURATION, "start_to_close": DURATION, "schedule_to_close": DURATION,
    "heartbeat": DURATION, "max_attempts": mostly(st.integers(-2, 2000)),
    "backoff": mostly(st.lists(DURATION, max_size=3) | st.fixed_dictionaries(
        {}, optional={"initial": DURATION, "max": DURATION,
                      "coefficient": st.floats() | st.integers(0, 10**400)})),
    "non_retryable": mostly(st.lists(st.sampled_from(["ValueError", "x y", ""]), max_size=2)),
    "queue": mostly(st.sampled_from(["default", "q.1", "bad queue"])),
}
NAME = mostly(st.text(min_size=1, max_size=5))
BRANCH = st.one_of(
    st.fixed_dictionaries({"activity": HANDLER}, optional={**OPTIONS, "name": NAME}),
    st.fixed_dictionaries({"workflow": mostly(st.sampled_from(["w", "x", "missing"]))}),
)
STEP = st.one_of(
    BRANCH,
    st.fixed_dictionaries({"delay": DURATION}, optional={"name": NAME}),
    st.fixed_dictionaries({"wait_for_signal": mostly(st.text(max_size=5))},
                          optional={"timeout": DURATION}),
    st.fixed_dictionaries({"parallel": mostly(st.lists(BRANCH, max_size=3))}),
    st.fixed_dictionaries({"continue_as_new": mostly(st.fixed_dictionaries(
        {"while": mostly(st.text(max_size=4))}))}),
    st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3),
)
WORKFLOW = st.fixed_dictionaries(
    {"steps": mostly(st.lists(STEP, min_size=1, max_size=4))},
    optional={"execution_timeout": DURATION, "run_timeout": DURATION, "deadline": DURATION,
              "on_deadline": HANDLER, "workflow_task_timeout": DURATION,
              "child_policy": mostly(st.sampled_from([*definitions.CHILD_POLICIES, "x"]))},
)
DOCUMENT = st.fixed_dictionaries(
    {"version": mostly(st.just(1)),
     "workflows": mostly(st.dictionaries(st.sampled_from(["w", "x"] * 4 + ["bad name"]), WORKFLOW,
                                         min_size=1, max_size=2))},
    optional={
        "defaults": mostly(st.fixed_dictionaries(
            {}, optional={"activity": st.fixed_dictionaries({}, optional=OPTIONS),
                          "workflow_task_timeout": DURATION})),
        "limits": mostly(st.fixed_dictionaries({}, optional={
            key: mostly(st.integers(-1, 10**400) | st.sampled_from(["2MiB", "1 KiB", "9" * 400]))
            for key in definitions.LIMIT_DEFAULTS})),
    },
)


def loads_or_refuses(text: str) -> None:
    try:
        result = definitions.parse(text, "workflows.yaml")
    except DefinitionError as exc:
        assert str(exc).startswith("workflows.yaml")
        assert "\n" not in str(exc)
        return
    assert isinstance(result, definitions.Definitions)


@FIXED
@given(st.text())
def test_any_text_is_definitions_or_a_definition_error(text):
    loads_or_refuses(text)


@settings(FIXED, max_examples=120)
@given(DOCUMENT, st.booleans())
def test_any_document_under_the_known_keys_is_definitions_or_a_definition_error(document, flow):
    loads_or_refuses(yaml.safe_dump(document, default_flow_style=flow, allow_unicode=True))


@given(st.datetimes(timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7))])))
def test_an_instant_truncated_to_its_millisecond_keeps_its_zone_and_loses_only_the_rest(instant):
    truncated = clock.to_millisecond(instant)
    assert truncated == instant.replace(microsecond=instant.microsecond // 1000 * 1000)
    assert truncated.tzinfo is instant.tzinfo and truncated.microsecond % 1000 == 0
