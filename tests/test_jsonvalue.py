"""Strict JSON out: the stored form of results, state and history attributes."""

from __future__ import annotations

import json
import math
import threading

import pytest

from wfctl import jsonvalue


@pytest.mark.parametrize("value", [None, 0, -1.5, 10**30, "é\n\"\\", [], {}, [1, {"a": [None, True]}],
                                   {"k": {"deep": ["x", 2.0]}}])
def test_values_are_written_compactly_as_the_json_module_writes_them(value):
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert jsonvalue.dumps(value) == expected
    # What history rows are written by: the same text.
    assert jsonvalue.dumps_checked(value) == expected


@pytest.mark.parametrize("value", [math.nan, [1, math.inf], {"a": {"b": [-math.inf]}}])
def test_nan_and_infinity_are_refused(value):
    with pytest.raises(ValueError, match="not JSON compliant"):
        jsonvalue.dumps(value)
    with pytest.raises(ValueError, match="not JSON compliant"):
        jsonvalue.dumps_checked(value)


def test_a_cycle_written_as_checked_ends_in_an_error_not_a_crash():
    cycle: list = []
    cycle.append({"again": cycle})
    with pytest.raises(RecursionError):
        jsonvalue.dumps_checked(cycle)
    assert jsonvalue.dumps_checked([1]) == "[1]"


def test_a_value_refused_part_way_leaves_nothing_behind():
    # The containers being written when a value is refused are forgotten: written again once
    # mended, they are not taken for a cycle.
    inner = {"b": math.nan}
    value = {"a": [inner]}
    with pytest.raises(ValueError, match="not JSON compliant"):
        jsonvalue.dumps(value)
    inner["b"] = 1
    assert jsonvalue.dumps(value) == '{"a":[{"b":1}]}'
    cycle: list = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        jsonvalue.dumps(cycle)
    cycle.clear()
    assert jsonvalue.dumps([cycle, cycle]) == "[[],[]]"


def test_threads_write_the_same_containers_at_once():
    shared = {"policy": [1, 2, {"x": None}], "n": 3}
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(2000):
                assert jsonvalue.dumps([shared, shared["policy"]]) == \
                    '[{"policy":[1,2,{"x":null}],"n":3},[1,2,{"x":null}]]'
                with pytest.raises(TypeError):
                    jsonvalue.dumps([shared, object()])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
