"""All SQL lives here; the rest of wfctl talks to a `Store` and its transactions (`Tx`)."""

from wfctl.store.sqlite import CLOSED_RUN, OPEN_ACTIVITY, Row, Store, Tx, dumps

__all__ = ["CLOSED_RUN", "OPEN_ACTIVITY", "Row", "Store", "Tx", "dumps"]
