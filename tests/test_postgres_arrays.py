"""Arrays packed for PostgreSQL's binary protocol (store/postgres_arrays.py) read back on the
server as the values packed: the history's columns go to the server this way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import psycopg
import pytest

from wfctl.store import postgres_arrays

VALUES = {
    "bigint": [0, -1, 2**62, -(2**63), 2**63 - 1],
    "integer": [1, -5, 2**31 - 1, -(2**31)],
    "smallint": [1, -32768, 32767],
    "text": ["", 'é☃ "q" \\ {,}', "[1,null]", "NULL", "x" * 10_000],
}


@pytest.fixture
def conn(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        postgres_arrays.register(conn.adapters)
        yield conn


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_a_packed_array_reads_back_as_its_values(conn, kind):
    values = VALUES[kind]
    select = f"SELECT %b::{kind}[]"
    assert conn.execute(select, [postgres_arrays.pack(kind, values)]).fetchone() == (values,)
    assert conn.execute(select, [postgres_arrays.pack(kind, [])]).fetchone() == ([],)


def test_columns_of_rows_unnest_to_the_rows(conn):
    rows = [(1, 7, "a"), (2, -3, "ü")]
    assert conn.execute("SELECT * FROM unnest(%b::bigint[], %b::smallint[], %b::text[])",
                        postgres_arrays.columns(rows, ("bigint", "smallint", "text"))).fetchall() \
        == rows



def test_nulls_and_instants_read_back_as_packed(conn):
    """Held-back row inserts and updates send a column an array: NULLs among the values,
    instants, floats."""
    instants = [datetime(2000, 1, 1, tzinfo=UTC), datetime(1969, 7, 20, 20, 17, 40, 5, tzinfo=UTC),
                datetime(2026, 12, 3, 16, 0, 0, 123456, tzinfo=UTC), None,
                datetime(2026, 12, 3, 18, 0, tzinfo=timezone(timedelta(hours=2)))]
    for kind, values in [("timestamptz", instants), ("text", [None, "a", None, ""]),
                         ("bigint", [1, None, -(2**63)]), ("integer", [None]),
                         ("float8", [1.5, None, -1e300])]:
        assert conn.execute(f"SELECT %b::{kind}[]", [postgres_arrays.pack(kind, values)]) \
            .fetchone() == (values,)
