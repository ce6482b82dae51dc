"""Every duration form parses to seconds; anything else is refused with what was expected."""

from __future__ import annotations

import re

import pytest

from wfctl.lang import durations


@pytest.mark.parametrize(("value", "seconds"), [
    (3600, 3600), (1.5, 1.5), ("3600", 3600), ("90s", 90), ("5m", 300), ("2h30m", 9000),
    ("1d12h", 129600), ("500ms", 0.5), ("1w", 604800), ("PT2H30M", 9000), ("P1D", 86400),
    ("P1W", 604800), ("PT0.5S", 0.5), ("P1DT2H", 93600), ("P1Y", 365 * 86400),
    ("PT1M", 60), ("1w2d3h4m5s", 788645), ("1m5ms", 60.005),
    (" 5m ", 300), ("\t2h\n", 7200),
    ({"days": 1, "hours": 12}, 129600), ({"hours": 2, "minutes": 30}, 9000),
    ({"seconds": 3600}, 3600), ({"days": 1}, 86400),
])
def test_each_form_is_seconds(value, seconds):
    assert durations.parse(value) == seconds


@pytest.mark.parametrize("value", [None, "NONE", "none", "null"])
def test_none_means_no_timeout(value):
    assert durations.parse(value) is None
    assert durations.parse_timeout(value) is None


@pytest.mark.parametrize("value", [
    "abc", "P", "PT", "P1DT", "1.5.3s", "-5 s", True, [1], "", "NaN", "nan", ".nan", "inf",
    "Infinity", "1e3", "1e999", ".5h", "5.m", float("nan"),
])
def test_anything_else_is_refused_with_the_forms_listed(value):
    with pytest.raises(durations.DurationError, match="expected a duration: seconds"):
        durations.parse(value)


def test_unknown_mapping_keys_are_named():
    with pytest.raises(durations.DurationError, match="unknown duration key 'months'"):
        durations.parse({"months": 1})


@pytest.mark.parametrize(("value", "message"), [
    (0, "must be at least 1 second (got 0)"),
    (-5, "must be at least 1 second (got -5)"),
    ("500ms", "must be at least 1 second (got 500ms)"),
    ("366d", "must be at most 1 year (got 366d)"),
])
def test_timeouts_are_between_one_second_and_one_year(value, message):
    with pytest.raises(durations.DurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        durations.parse_timeout(value)


def test_a_year_and_a_second_are_the_bounds():
    assert durations.parse_timeout(1) == 1
    assert durations.parse_timeout("365d") == 365 * 86400


def test_intervals_allow_sub_second_values_but_not_none():
    assert durations.parse_interval("100ms") == 0.1
    with pytest.raises(durations.DurationError, match="other than NONE"):
        durations.parse_interval("NONE")


@pytest.mark.parametrize(("seconds", "shown"), [
    (None, "none"), (0.25, "250ms"), (90, "1m30s"), (3600, "1h"), (93784, "1d2h3m4s"),
])
def test_format_is_short_and_readable(seconds, shown):
    assert durations.format(seconds) == shown


@pytest.mark.parametrize(("value", "written"), [
    ("1d1d", "2d"), ("1m1h", "1h1m"), ("2d1w", "1w2d"), ("5s1m", "1m5s"), ("1h1h30m", "2h30m"),
    ("1s1s", "2s"), ("5ms1s", "1s5ms"),
])
def test_each_unit_comes_once_largest_first(value, written):
    with pytest.raises(durations.DurationError) as caught:
        durations.parse(value)
    assert str(caught.value) == f"write {written}: each unit once, largest first (got {value!r})"


@pytest.mark.parametrize("value", ["１s", "٣s", "1٣h", "PT１H", "１"])
def test_digits_are_ascii_only(value):
    with pytest.raises(durations.DurationError, match="expected a duration"):
        durations.parse(value)


@pytest.mark.parametrize("value", ["P 1D", "1\u00a0h", "1h\u00a0", "- 5"])
def test_blanks_inside_a_duration_are_refused(value):
    with pytest.raises(durations.DurationError, match="expected a duration"):
        durations.parse(value)


@pytest.mark.parametrize(("value", "message"), [
    ("-5s", "must not be negative (got '-5s')"),
    ("-1h30m", "must not be negative (got '-1h30m')"),
    ("-PT5M", "must not be negative (got '-PT5M')"),
    ("1 hour", "write 1h: the units are ms, s, m, h, d and w (got '1 hour')"),
    ("10 minutes", "write 10m: the units are ms, s, m, h, d and w (got '10 minutes')"),
    ("2 days 3 hours", "write 2d3h: the units are ms, s, m, h, d and w (got '2 days 3 hours')"),
    ("1.5hrs", "write 1.5h: the units are ms, s, m, h, d and w (got '1.5hrs')"),
    ("5sec", "write 5s: the units are ms, s, m, h, d and w (got '5sec')"),
    ("1 h", "write 1h: a duration has no blanks inside (got '1 h')"),
    ("1h 30m", "write 1h30m: a duration has no blanks inside (got '1h 30m')"),
    ("2y", "years are not a unit: use days or weeks (365d, 52w) or ISO 8601's P1Y (got '2y')"),
    ("1 year", "years are not a unit: use days or weeks (365d, 52w) or ISO 8601's P1Y "
               "(got '1 year')"),
    ("3 months", "months are not a fixed length: use days, weeks or P1Y (got '3 months')"),
    ("1 M", "M is not a unit: minutes are m and months are not supported (got '1 M')"),
    ("5x", "x is not a unit: the units are ms, s, m, h, d and w (got '5x')"),
    ("1h5q", "q is not a unit: the units are ms, s, m, h, d and w (got '1h5q')"),
])
def test_an_error_says_what_is_wrong_and_what_to_write(value, message):
    with pytest.raises(durations.DurationError) as caught:
        durations.parse_timeout(value)
    assert str(caught.value) == message


@pytest.mark.parametrize("value", ["P1M", "P1Y2M", "P3M4D", "p1m"])
def test_iso_months_are_refused_because_their_length_varies(value):
    with pytest.raises(durations.DurationError, match="months are not a fixed length"):
        durations.parse(value)


@pytest.mark.parametrize(("value", "message"), [
    ("2H", "units are lower-case: 2h (got '2H')"),
    ("1D", "units are lower-case: 1d (got '1D')"),
    ("1W", "units are lower-case: 1w (got '1W')"),
    ("30S", "units are lower-case: 30s (got '30S')"),
    ("500MS", "units are lower-case: 500ms (got '500MS')"),
    ("500Ms", "units are lower-case: 500ms (got '500Ms')"),
    ("1M", "M is not a unit: minutes are m (1m) and months are not supported (got '1M')"),
    ("6M", "M is not a unit: minutes are m (6m) and months are not supported (got '6M')"),
    ("1H30M", "M is not a unit: minutes are m (1h30m) and months are not supported "
              "(got '1H30M')"),
    ("1h30M", "M is not a unit: minutes are m (1h30m) and months are not supported "
              "(got '1h30M')"),
    ("pt1m", "ISO 8601 durations are upper-case: PT1M (got 'pt1m')"),
    ("pt2h30m", "ISO 8601 durations are upper-case: PT2H30M (got 'pt2h30m')"),
    ("P1DT2h", "ISO 8601 durations are upper-case: P1DT2H (got 'P1DT2h')"),
])
def test_unit_letters_are_case_sensitive_and_the_right_form_is_given(value, message):
    with pytest.raises(durations.DurationError) as caught:
        durations.parse(value)
    assert str(caught.value) == message


def test_iso_minutes_and_unit_minutes_agree():
    assert durations.parse("PT1M") == durations.parse("1m") == 60
    assert durations.parse("PT6M") == durations.parse("6m") == 360


def test_a_year_is_the_cap_in_every_form():
    assert durations.parse_timeout("P1Y") == durations.ONE_YEAR
    for value in ("P1Y1D", "P2Y", "53w", {"days": 366}):
        with pytest.raises(durations.DurationError, match="must be at most 1 year"):
            durations.parse_timeout(value)


@pytest.mark.parametrize(("value", "message"), [
    (float("inf"), "must be at most 1 year (got inf)"),
    (10**400, "must be at most 1 year"),
    ("9" * 400, "must be at most 1 year"),
    ({"hours": 1e308}, "must be at most 1 year"),
    ({"hours": 10**400}, "must be at most 1 year"),
    (float("-inf"), "must not be negative (got -inf)"),
    (-10**400, "must not be negative"),
    ({"hours": float("nan")}, "hours must be a number of at least 0 (got nan)"),
    ({"hours": -1}, "hours must be a number of at least 0 (got -1)"),
])
def test_values_past_any_range_are_refused_not_carried(value, message):
    with pytest.raises(durations.DurationError, match=re.escape(message)):
        durations.parse(value)


def test_a_long_value_is_shortened_in_the_message():
    with pytest.raises(durations.DurationError) as caught:
        durations.parse("x" * 10_000)
    assert len(str(caught.value)) < 400
