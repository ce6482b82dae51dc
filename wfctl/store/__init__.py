"""All SQL lives here; the rest of wfctl talks to a `Store` and its transactions (`Tx`), the
interface in `base.py`, and opens one with `open_store`."""

from pathlib import Path

from wfctl.errors import DatabaseError
from wfctl.store.base import Row, Store, Tx
from wfctl.store.sqlite import SQLiteStore, dumps

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_store(location: str | Path, *, create: bool = True) -> Store:
    """The database at `location`, created on first use with `create`: PostgreSQL for a
    `postgresql://` (or `postgres://`) URL, else an SQLite file at that path."""
    if isinstance(location, str) and location.startswith(POSTGRES_SCHEMES):
        # The driver is an extra, imported only by those who use it.
        try:
            from wfctl.store.postgres import PostgresStore
        except ImportError as exc:
            raise DatabaseError(
                f"PostgreSQL needs its driver ({exc.name or 'psycopg'} is missing): "
                "pip install 'wfctl[postgres]'") from None
        return PostgresStore(location, create=create)
    return SQLiteStore(location, create=create)


__all__ = ["POSTGRES_SCHEMES", "Row", "SQLiteStore", "Store", "Tx", "dumps", "open_store"]
