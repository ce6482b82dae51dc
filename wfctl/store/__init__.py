"""All SQL lives here; the rest of wfctl talks to a `Store` and its transactions (`Tx`), the
interface in `base.py`, and opens one with `open_store`."""

from pathlib import Path

from wfctl.store.base import Row, Store, Tx
from wfctl.store.sqlite import SQLiteStore, dumps


def open_store(location: str | Path, *, create: bool = True) -> Store:
    """The database at `location` (a file path: SQLite), created on first use with `create`."""
    return SQLiteStore(location, create=create)


__all__ = ["Row", "SQLiteStore", "Store", "Tx", "dumps", "open_store"]
