"""What `list --since` and the web view's `since` take: a duration back from now, or an ISO
8601 date or instant."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from wfctl.errors import DefinitionError, brief
from wfctl.lang.durations import BLANKS, EXPECTED, DurationError, parse_interval

# An ISO 8601 date in the extended form, which starts every date or instant `back_from` takes;
# anything else is read as a duration ("20261201" is 20,261,201 seconds, not a date).
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
INSTANT_EXPECTED = ("a duration back from now (1h: the last hour) or an ISO 8601 date or instant "
                    "(2026-12-01, 2026-12-01T16:00:00+00:00)")


def back_from(text: str, now: Callable[[], datetime]) -> Callable[[], datetime]:
    """What `list --since` (and the web view's `since`) takes: a duration back from `now` (read
    again at each call), or an ISO 8601 date or instant. A date or instant without an offset is
    UTC, the clock every instant wfctl stores and shows is in; a date alone is its midnight, UTC.
    Raises DurationError with the message the option's name goes before."""
    value = text.strip(BLANKS)
    if _ISO_DATE.match(value):
        try:
            instant = datetime.fromisoformat(value)
            if instant.tzinfo is None:
                instant = instant.replace(tzinfo=UTC)
            instant = instant.astimezone(UTC)
        except (ValueError, OverflowError):
            raise DurationError(f"expected {INSTANT_EXPECTED} (got {brief(text)})") from None
        return lambda: instant
    given: object = value
    try:
        if value.startswith("{"):
            # Imported here: a plain read (`list --since 1h`) loads no YAML parser.
            from wfctl.lang import definitions

            given = definitions.yaml_value(value)
        seconds = parse_interval(given, minimum=0)
    except DefinitionError as exc:
        raise DurationError(str(exc)) from None
    except DurationError as exc:
        # A value that is no duration at all may have been meant as a date.
        if str(exc).startswith(f"expected {EXPECTED}"):
            raise DurationError(f"expected {INSTANT_EXPECTED} (got {brief(text)})") from None
        raise
    return lambda: now() - timedelta(seconds=seconds)
