"""All SQL lives here; the rest of wfctl talks to a `Store` and its transactions (`Tx`)."""

from wfctl.store.sqlite import Row, Store, Tx, dumps
from wfctl.vocabulary import CLOSED_RUN, OPEN_ACTIVITY

__all__ = ["CLOSED_RUN", "OPEN_ACTIVITY", "Row", "Store", "Tx", "dumps"]
