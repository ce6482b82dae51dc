"""Every duration form parses to seconds; anything else is refused with what was expected."""

from __future__ import annotations

import pytest

from wfctl import durations


@pytest.mark.parametrize(("value", "seconds"), [
    (3600, 3600), (1.5, 1.5), ("3600", 3600), ("90s", 90), ("5m", 300), ("2h30m", 9000),
    ("1d12h", 129600), ("500ms", 0.5), ("1w", 604800), ("PT2H30M", 9000), ("P1D", 86400),
    ("P1W", 604800), ("PT0.5S", 0.5), ("P1DT2H", 93600),
    ({"days": 1, "hours": 12}, 129600), ({"hours": 2, "minutes": 30}, 9000),
    ({"seconds": 3600}, 3600), ({"days": 1}, 86400),
])
def test_each_form_is_seconds(value, seconds):
    assert durations.parse(value) == seconds


@pytest.mark.parametrize("value", [None, "NONE", "none", "null"])
def test_none_means_no_timeout(value):
    assert durations.parse(value) is None
    assert durations.parse_timeout(value) is None


@pytest.mark.parametrize("value", ["abc", "P", "PT", "1x", "5 minutes", True, [1], float("inf")])
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
