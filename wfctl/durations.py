"""The one parser and formatter of durations: seconds, unit strings, ISO 8601, summed mappings, NONE."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

ONE_YEAR = 365 * 24 * 3600

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_UNIT_STRING = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+$")
_UNIT_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_ISO = re.compile(
    r"^P(?!$)(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
MAPPING_KEYS = {"weeks": 7 * 86400, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}

EXPECTED = (
    "a duration: seconds (3600), a unit string (90s, 5m, 2h30m, 1d12h), "
    "ISO 8601 (PT2H30M, P1D), a mapping ({hours: 2, minutes: 30}) or NONE"
)


class DurationError(ValueError):
    """A value that is not a duration, or one outside the allowed range."""


def parse(value: object) -> float | None:
    """Seconds for any accepted duration form; None for NONE/null. Range is not checked here."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DurationError(f"expected {EXPECTED} (got {value!r})")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise DurationError(f"expected {EXPECTED} (got {value!r})")
        return float(value)
    if isinstance(value, Mapping):
        return _parse_mapping(value)
    if isinstance(value, str):
        return _parse_text(value.strip())
    raise DurationError(f"expected {EXPECTED} (got {value!r})")


def _parse_mapping(value: Mapping) -> float:
    if not value:
        raise DurationError("expected a mapping with weeks, days, hours, minutes or seconds (got {})")
    total = 0.0
    for key, amount in value.items():
        if key not in MAPPING_KEYS:
            raise DurationError(
                f"unknown duration key {key!r} (expected weeks, days, hours, minutes, seconds)"
            )
        if isinstance(amount, bool) or not isinstance(amount, int | float) or amount < 0:
            raise DurationError(f"{key} must be a number of at least 0 (got {amount!r})")
        total += amount * MAPPING_KEYS[key]
    return total


def _parse_text(text: str) -> float | None:
    if text.upper() in ("NONE", "NULL", "~"):
        return None
    try:
        return float(text)
    except ValueError:
        pass
    lowered = text.lower()
    if _UNIT_STRING.match(lowered):
        return sum(float(n) * _UNITS[unit] for n, unit in _UNIT_PART.findall(lowered))
    match = _ISO.match(text.upper())
    if match:
        return sum(float(v) * MAPPING_KEYS[k] for k, v in match.groupdict().items() if v)
    raise DurationError(f"expected {EXPECTED} (got {text!r})")


def parse_timeout(value: object) -> float | None:
    """A timeout or deadline: NONE, or between 1 second and 1 year."""
    seconds = parse(value)
    if seconds is None:
        return None
    check_range(seconds, minimum=1, original=value)
    return seconds


def parse_interval(value: object, *, minimum: float = 0.001) -> float:
    """A required interval (a delay, a poll interval): sub-second allowed, never NONE."""
    seconds = parse(value)
    if seconds is None:
        raise DurationError(f"expected {EXPECTED} other than NONE (got {value!r})")
    check_range(seconds, minimum=minimum, original=value)
    return seconds


def check_range(seconds: float, *, minimum: float, original: object) -> None:
    shown = original if isinstance(original, str) else _number(seconds)
    if seconds < minimum:
        unit = "second" if minimum == 1 else "seconds"
        floor = _number(minimum) if minimum >= 1 else format(minimum)
        raise DurationError(f"must be at least {floor} {unit} (got {shown})")
    if seconds > ONE_YEAR:
        raise DurationError(f"must be at most 1 year (got {shown})")


def _number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def format(seconds: float | None, *, precision: int | None = None,
           separator: str = "") -> str:
    """A short human form: 90 -> '1m30s', 0.5 -> '500ms', None -> 'none'.

    `precision` keeps only that many units from the largest one (3601 s at 2 -> '1h').
    """
    if seconds is None:
        return "none"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    remaining = round(seconds)
    parts = []
    counted = 0
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, remaining = divmod(remaining, size)
        if amount or counted:
            counted += 1
            if amount and (precision is None or counted <= precision):
                parts.append(f"{amount}{unit}")
    return separator.join(parts) or "0s"


def whole_seconds(seconds: float | None) -> int | float | None:
    """Durations in `*_seconds` fields: whole seconds when whole, else as given."""
    if seconds is None:
        return None
    return int(seconds) if float(seconds).is_integer() else seconds
