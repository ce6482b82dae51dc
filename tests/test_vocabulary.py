"""The vocabulary names every status, timeout kind and failure category the records hold."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from wfctl import vocabulary

V01 = Path(__file__).parent / "data" / "v01.db"


@pytest.mark.parametrize(("table", "column", "words"), [
    ("instances", "status", vocabulary.INSTANCE_STATUSES),
    ("runs", "status", vocabulary.RUN_STATUSES),
    ("activities", "status", vocabulary.ACTIVITY_STATUSES),
    ("workflow_tasks", "status", vocabulary.WORKFLOW_TASK_STATUSES),
    ("timers", "status", vocabulary.TIMER_STATUSES),
    ("failures", "failure_category", vocabulary.FAILURE_CATEGORIES),
    ("failures", "timeout_kind", vocabulary.TIMEOUT_KINDS),
    ("instances", "child_policy", vocabulary.CHILD_POLICIES),
])
def test_a_database_holds_only_words_of_the_vocabulary(table, column, words):
    conn = sqlite3.connect(f"{V01.as_uri()}?mode=ro", uri=True)
    found = {value for (value,) in conn.execute(f"SELECT DISTINCT {column} FROM {table}")}
    conn.close()

    assert found - {None} <= set(words)
    assert found - {None}


def test_every_status_closes_a_run_with_its_own_event():
    assert set(vocabulary.RUN_CLOSED_EVENT) == set(vocabulary.CLOSED_RUN)
    assert set(vocabulary.RUN_CLOSED_EVENT.values()) <= set(vocabulary.EVENT_TYPES)
    assert set(vocabulary.CHILD_CLOSED_EVENT.values()) <= set(vocabulary.EVENT_TYPES)
