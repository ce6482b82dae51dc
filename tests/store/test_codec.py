"""History's stored form gives back exactly the attributes it was given, in the same key order,
its instants as aware UTC datetimes."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wfctl import clock
from wfctl.store import codec, columns, records
from wfctl.store import sqlite as sqlite_store
from wfctl.vocabulary import EVENT_TYPES, TIMEOUT_EVENTS

# Fixed examples, no time limits: the suite runs on a busy two-core machine too.
FIXED = settings(derandomize=True, database=None, deadline=None, max_examples=200,
                 suppress_health_check=[HealthCheck.too_slow])
AT_INSTANT = datetime(2026, 4, 12, 12, 0, 0, 123000, tzinfo=UTC)
AT = codec.micros(AT_INSTANT)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8,
)
instants = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                        timezones=st.just(UTC)).map(
    lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000).isoformat(
        timespec="milliseconds"))
names = st.sampled_from([*codec.ATTRIBUTE_CODES, "unknown", "other_at", "x"])
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", re.ASCII)


def round_trip(attributes: dict) -> dict:
    return codec.decode_attributes(codec.encode_attributes(attributes, AT), AT)


def read_back(attributes: dict) -> dict:
    """The attributes as history gives them back: an instant attribute's ISO text in wfctl's
    form as the datetime it names, everything else as it was."""
    return {key: _instant_or_text(value) if key in codec.INSTANT_ATTRIBUTES else value
            for key, value in attributes.items()}


def _instant_or_text(value: object) -> object:
    """ISO text in wfctl's form that names a real instant, as that instant; anything else (text
    of that shape naming no date, say month 00) as it was."""
    if not (isinstance(value, str) and ISO.fullmatch(value)):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return value


@FIXED
@given(st.dictionaries(names, json_values | instants, max_size=12))
def test_any_attributes_come_back_equal_and_in_order(attributes):
    back = round_trip(attributes)
    assert back == read_back(attributes)
    assert list(back) == list(attributes)


@FIXED
@given(st.sampled_from(codec.SHAPES), st.data())
def test_attributes_of_a_known_shape_leave_their_names_out(shape, data):
    attributes = {key: data.draw(json_values | instants) for key in shape}
    stored = json.loads(codec.encode_attributes(attributes, AT))
    assert stored[0] == -(codec.SHAPES.index(shape) + 1) and len(stored) == len(shape) + 1
    assert round_trip(attributes) == read_back(attributes)


@FIXED
@given(st.sampled_from(codec.SHAPES), st.sampled_from(EVENT_TYPES), st.data())
def test_an_event_kinds_values_are_stored_as_the_dict_of_its_names_is(shape, event_type, data):
    attributes = {key: data.draw(json_values | instants) for key in shape}
    if event_type in TIMEOUT_EVENTS:
        # Metrics count those by their attributes: they are appended from a dict.
        with pytest.raises(ValueError, match=event_type):
            codec.event_kind(event_type, " ".join(shape))
        return
    kind = codec.event_kind(event_type, " ".join(shape))
    assert kind.names == shape and kind.code == codec.type_code(event_type)
    assert codec.stored_values(kind.head, kind.special, tuple(attributes.values()), AT) == \
        codec.stored_attributes(attributes, AT)


def test_an_event_kind_is_only_of_a_known_key_sequence_and_type():
    with pytest.raises(ValueError, match="no event kind for TimerFired with 'timer_id step'"):
        codec.event_kind("TimerFired", "timer_id step")
    with pytest.raises(ValueError, match="no event kind for Brandnew"):
        codec.event_kind("Brandnew", "reason")


def test_instants_are_offsets_from_the_event_and_come_back_as_aware_utc_datetimes():
    deadline = datetime(2026, 4, 12, 12, 5, 0, 123000, tzinfo=UTC)
    attributes = {"activity_id": "a", "close_deadline_at": deadline, "reason": "soon"}
    stored = codec.encode_attributes(attributes, AT)
    assert "[300000000]" in stored and clock.iso(deadline) not in stored and '"soon"' in stored
    back = round_trip(attributes)
    assert back == attributes and back["close_deadline_at"].tzinfo is UTC
    # Given as ISO text in wfctl's form (as 0.1 wrote them), stored and read the same way.
    assert codec.encode_attributes({**attributes, "close_deadline_at": clock.iso(deadline)},
                                   AT) == stored


def test_an_instant_keeps_its_microseconds():
    fire_at = datetime(2026, 4, 12, 12, 5, 0, 123456, tzinfo=UTC)
    assert round_trip({"timer_id": "t", "fire_at": fire_at}) == {"timer_id": "t", "fire_at": fire_at}


def test_only_the_declared_attributes_are_instants_whatever_their_names_end_with():
    text = "2026-04-12T12:05:00.123+00:00"
    attributes = {"noted_at": text, "reason": text}
    assert json.loads(codec.encode_attributes(attributes, AT))[1::2] == [text, text]
    assert round_trip(attributes) == attributes
    # Every instant attribute the code tables name is declared.
    named = {name for name in codec.ATTRIBUTE_CODES if name.endswith("_at")} | \
            {name for shape in codec.SHAPES for name in shape if name.endswith("_at")}
    assert named <= codec.INSTANT_ATTRIBUTES


def test_a_failures_instant_is_stored_as_iso_text_and_read_as_a_datetime():
    deadline = AT_INSTANT + timedelta(minutes=5)
    failure = {"failure_category": "deadline", "deadline_at": deadline, "message": "m"}
    stored = codec.encode_attributes({"child_instance_id": "c", "failure": failure}, AT)
    assert clock.iso(deadline) in stored
    assert round_trip({"failure": failure}) == {"failure": failure}
    assert round_trip({"failure": {**failure, "deadline_at": clock.iso(deadline)}}) == \
        {"failure": failure}
    assert round_trip({"failure": {"message": "no instant"}}) == {"failure": {"message": "no instant"}}


def test_a_retry_policy_is_stored_as_its_values():
    policy = dict.fromkeys(codec.POLICY_KEYS, None) | {"max_attempts": 3, "non_retryable": []}
    assert codec.decode_policy(codec.encode_policy(policy)) == policy
    assert "max_attempts" not in codec.encode_policy(policy)
    odd = {"max_attempts": 3}
    assert codec.decode_policy(codec.encode_policy(odd)) == odd


def test_rows_written_before_the_compact_form_read_as_they_are():
    assert codec.decode_attributes('{"reason": "started"}', AT) == {"reason": "started"}
    assert codec.decode_attributes('{"fire_at": "2026-04-12T12:00:00.123+00:00", '
                                   '"note": "2026-04-12T12:00:00.123+00:00"}', AT) == \
        {"fire_at": AT_INSTANT, "note": "2026-04-12T12:00:00.123+00:00"}
    assert codec.decode_policy('{"max_attempts": 1}') == {"max_attempts": 1}


def test_every_event_type_has_a_code_and_codes_come_back():
    for name in EVENT_TYPES:
        assert isinstance(codec.type_code(name), int)
        assert codec.type_name(codec.type_code(name)) == name
    assert codec.type_name(codec.type_code("SomethingNew")) == "SomethingNew"


@FIXED
@given(st.datetimes(timezones=st.just(UTC)))
def test_instants_round_trip_to_the_microsecond(instant):
    assert codec.instant(codec.micros(instant)) == instant


def test_the_code_tables_only_grow():
    # Codes written to a database name the same thing forever: these prefixes never change.
    assert codec.EVENT_CODES[:3] == ("WorkflowStarted", "WorkflowTaskScheduled",
                                     "WorkflowTaskStarted")
    assert codec.ATTRIBUTE_CODES[:3] == ("activity_id", "step", "attempt")
    assert codec.SHAPES[0] == ("reason",)
    assert len(set(codec.SHAPES)) == len(codec.SHAPES)


@given(st.lists(st.sampled_from("0123456789-:T.+ Z,٣"), min_size=29, max_size=29),
       st.integers(0, 28), st.booleans())
def test_text_that_only_looks_like_an_instant_comes_back_as_written(chars, where, near):
    text = "".join(chars)
    if near:
        # One character of a real instant changed.
        base = list("2026-11-30T12:25:01.495+00:00")
        base[where] = text[0]
        text = "".join(base)
    attributes = {"deadline_at": text}
    assert codec.decode_attributes(codec.encode_attributes(attributes, 0), 0) == \
        read_back(attributes)


def test_a_columns_kind_is_what_the_records_declare_and_an_aggregates_follows_its_name():
    # Written and read alike: the run's state as JSON, a retry policy compactly, a flag as 0/1.
    assert columns.DECLARED["state"] == records.JSON
    assert columns.DECLARED["retry_policy"] == records.POLICY
    assert columns.DECLARED["superseded"] == records.FLAG
    assert columns.DECLARED["retain_until"] == records.INSTANT
    assert columns.is_instant("retain_until") and not columns.is_instant("state")
    # Every field a record declares with a kind is converted as that kind when written.
    written = columns.Writer(str)._plan(tuple(columns.DECLARED))
    assert len(written) == len(columns.DECLARED)
    # A column no record has (an aggregate's) is an instant by its name alone.
    assert "oldest" not in columns.DECLARED and columns.is_instant("oldest")
    assert not columns.is_instant("count")


ZONES = [UTC, timezone(timedelta(hours=2)), timezone(-timedelta(hours=5, minutes=30))]


@FIXED
@given(st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1),
                    timezones=st.sampled_from(ZONES)), st.sampled_from(ZONES))
def test_an_instant_has_one_text_in_the_file_whatever_zone_or_object_it_comes_in(moment, zone):
    utc = moment.astimezone(UTC)
    digits = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    expected = utc.isoformat(timespec=digits)
    assert sqlite_store.text(moment) == expected
    # The same instant again, another datetime in another zone: the same text.
    assert sqlite_store.text(moment.astimezone(zone)) == expected
