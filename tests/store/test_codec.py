"""History's stored form gives back exactly the attributes it was given, in the same key order."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wfctl.store import codec
from wfctl.vocabulary import EVENT_TYPES

# Fixed examples, no time limits: the suite runs on a busy two-core machine too.
FIXED = settings(derandomize=True, database=None, deadline=None, max_examples=200,
                 suppress_health_check=[HealthCheck.too_slow])
AT = codec.micros(datetime(2026, 4, 12, 12, 0, 0, 123000, tzinfo=UTC))

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


def round_trip(attributes: dict) -> dict:
    return codec.decode_attributes(codec.encode_attributes(attributes, AT), AT)


@FIXED
@given(st.dictionaries(names, json_values | instants, max_size=12))
def test_any_attributes_come_back_equal_and_in_order(attributes):
    back = round_trip(attributes)
    assert back == attributes
    assert list(back) == list(attributes)


@FIXED
@given(st.sampled_from(codec.SHAPES), st.data())
def test_attributes_of_a_known_shape_leave_their_names_out(shape, data):
    attributes = {key: data.draw(json_values | instants) for key in shape}
    stored = json.loads(codec.encode_attributes(attributes, AT))
    assert stored[0] == -(codec.SHAPES.index(shape) + 1) and len(stored) == len(shape) + 1
    assert round_trip(attributes) == attributes


def test_instants_are_offsets_from_the_event_and_come_back_as_written():
    deadline = (datetime(2026, 4, 12, 12, 5, 0, 123000, tzinfo=UTC)).isoformat(
        timespec="milliseconds")
    attributes = {"activity_id": "a", "close_deadline_at": deadline, "note_at": "soon"}
    stored = codec.encode_attributes(attributes, AT)
    assert "[300000000]" in stored and deadline not in stored and '"soon"' in stored
    assert round_trip(attributes) == attributes


def test_a_retry_policy_is_stored_as_its_values():
    policy = dict.fromkeys(codec.POLICY_KEYS, None) | {"max_attempts": 3, "non_retryable": []}
    assert codec.decode_policy(codec.encode_policy(policy)) == policy
    assert "max_attempts" not in codec.encode_policy(policy)
    odd = {"max_attempts": 3}
    assert codec.decode_policy(codec.encode_policy(odd)) == odd


def test_rows_written_before_the_compact_form_read_as_they_are():
    assert codec.decode_attributes('{"reason": "started"}', AT) == {"reason": "started"}
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
    assert codec.decode_attributes(codec.encode_attributes(attributes, 0), 0) == attributes
