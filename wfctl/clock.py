"""The one place that reads the wall clock, and the one format every instant is stored in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now() -> datetime:
    """The current instant in UTC, truncated to milliseconds (the precision wfctl stores)."""
    current = datetime.now(UTC)
    return current.replace(microsecond=current.microsecond // 1000 * 1000)


def iso(instant: datetime | None) -> str | None:
    """Format an instant as fixed-width ISO 8601 UTC text, so that text order is time order."""
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat(timespec="milliseconds")


def parse(text: str | None) -> datetime | None:
    """Read an instant written by `iso`."""
    if text is None:
        return None
    return datetime.fromisoformat(text)


def after(instant: datetime, seconds: float | None) -> datetime | None:
    """`instant + seconds`, or None when there is no duration."""
    if seconds is None:
        return None
    return instant + timedelta(seconds=seconds)
