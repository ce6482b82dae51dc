"""The one place that reads the wall clock, and the one format every instant is stored in."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta


def now() -> datetime:
    """The current instant in UTC, truncated to milliseconds (the precision wfctl stores)."""
    return to_millisecond(datetime.now(UTC))


def to_millisecond(instant: datetime) -> datetime:
    """`instant` truncated to its millisecond: less the microseconds within it (a lookup and a
    subtraction, where `replace(microsecond=…)` parses its keywords and builds the datetime
    through its class: three times as long)."""
    return instant - _SUB_MILLISECOND[instant.microsecond % 1000]


# timedelta(microseconds=n) for n under a millisecond, made once.
_SUB_MILLISECOND = tuple(timedelta(microseconds=n) for n in range(1000))


def iso(instant: datetime | None) -> str | None:
    """Format an instant as fixed-width ISO 8601 UTC text, so that text order is time order."""
    if instant is None:
        return None
    if instant.tzinfo is not UTC:
        instant = instant.astimezone(UTC)
    return instant.isoformat(timespec="milliseconds")


def after(instant: datetime, seconds: float | None) -> datetime | None:
    """`instant + seconds`, or None when there is no duration."""
    if seconds is None:
        return None
    delta = _DELTAS.get(seconds)
    if delta is None:
        if len(_DELTAS) >= 1_000:
            _DELTAS.clear()
        delta = _DELTAS[seconds] = timedelta(seconds=seconds)
    return instant + delta


# The durations `after` met, as timedeltas: a workflow's timeouts are few, and met every step.
_DELTAS: dict[float, timedelta] = {}


class ServerClock:
    """Another host's clock (a database server's), read here without a round trip each time.

    `sample()` asks the other host for its time; the answer is taken as of the middle of the
    round trip and carried forward on this host's monotonic clock, so that a step of this host's
    wall clock changes nothing. It is sampled again every `every` seconds; an instant it gives is
    never before one it gave earlier. When a sample fails, the last one is carried on (and tried
    again `every` seconds later); only the very first failure is raised.
    """

    def __init__(self, sample: Callable[[], datetime], *, every: float = 60.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._sample = sample
        self._every = every
        self._monotonic = monotonic
        self._base: tuple[datetime, float] | None = None
        self._next_sample = 0.0
        self._last: datetime | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The other host's current instant in UTC, truncated to milliseconds."""
        with self._lock:
            tick = self._monotonic()
            if self._base is None or tick >= self._next_sample:
                self._next_sample = tick + self._every
                try:
                    server = self._sample()
                except Exception:
                    if self._base is None:
                        self._next_sample = tick
                        raise
                else:
                    after = self._monotonic()
                    self._base = (server, (tick + after) / 2)
                    tick = after
            server, sampled_at = self._base
            current = server + timedelta(seconds=tick - sampled_at)
            current = to_millisecond(current)
            if self._last is not None and current < self._last:
                current = self._last
            self._last = current
            return current
