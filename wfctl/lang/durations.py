"""The one parser and formatter of durations: seconds, unit strings, ISO 8601, summed mappings, NONE."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from wfctl.errors import brief

ONE_YEAR = 365 * 24 * 3600

# ASCII digits only: `\d` and float() also take other scripts' digits ("１s" would be 1 second).
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
_PLAIN = re.compile(rf"-?{_NUMBER}")
# Each unit at most once, largest first; "5m" is minutes and "5ms" milliseconds. Units are
# lower-case, as in Go's and Temporal's durations: "1M" reads as a month to many, so upper-case
# units are refused with their lower-case form rather than read either way.
_UNIT_ORDER = (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))
_UNIT_STRING = re.compile(
    "".join(rf"(?:(?P<{unit}>{_NUMBER}){unit})?" for unit, _ in _UNIT_ORDER)
)
_UNIT_SECONDS = dict(_UNIT_ORDER)
# ISO 8601 durations without months, whose length varies; a year is 365 days (the cap). Their
# designators are upper-case, as the standard writes them: "pt1m" is refused with "PT1M".
_ISO = re.compile(
    rf"P(?:(?P<Y>{_NUMBER})Y)?(?:(?P<W>{_NUMBER})W)?(?:(?P<D>{_NUMBER})D)?"
    rf"(?:T(?:(?P<H>{_NUMBER})H)?(?:(?P<M>{_NUMBER})M)?(?:(?P<S>{_NUMBER})S)?)?"
)
_ISO_SECONDS = {"Y": ONE_YEAR, "W": 7 * 86400, "D": 86400, "H": 3600, "M": 60, "S": 1}
_ISO_MONTHS = re.compile(rf"P(?:{_NUMBER}Y)?{_NUMBER}M")
# Blanks around the whole value (YAML block scalars, a padded shell argument) are not part of it.
BLANKS = " \t\r\n"
MAPPING_KEYS = {"weeks": 7 * 86400, "days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}

EXPECTED = (
    "a duration: seconds (3600), a unit string with each unit once, largest first "
    "(90s, 5m, 2h30m, 1d12h, 250ms), ISO 8601 (PT2H30M, P1D, P1Y), "
    "a mapping ({hours: 2, minutes: 30}) or NONE"
)


class DurationError(ValueError):
    """A value that is not a duration, or one outside the allowed range."""


def parse(value: object) -> float | None:
    """Seconds (a finite number) for any accepted duration form; None for NONE/null.

    The range is checked by `parse_timeout`/`parse_interval`, not here.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise _not_a_duration(value)
    if isinstance(value, int | float):
        return _finite(value, value)
    if isinstance(value, Mapping):
        return _parse_mapping(value)
    if isinstance(value, str):
        return _parse_text(value)
    raise _not_a_duration(value)


def _not_a_duration(value: object) -> DurationError:
    return DurationError(f"expected {EXPECTED} (got {brief(value)})")




def _plain(value: object) -> str:
    """A value as the user wrote it: text without quotes, anything else as Python shows it."""
    if not isinstance(value, str):
        return brief(value)
    text = value.strip(BLANKS)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _finite(seconds: int | float, original: object) -> float:
    """`seconds` as a float; NaN is not a duration and what overflows is past any cap."""
    if isinstance(seconds, float) and math.isnan(seconds):
        raise _not_a_duration(original)
    try:
        result = float(seconds)
    except OverflowError:
        result = math.inf if seconds > 0 else -math.inf
    if math.isinf(result):
        if result < 0:
            raise DurationError(f"must not be negative (got {_plain(original)})")
        raise DurationError(f"must be at most 1 year (got {_plain(original)})")
    return result


def _parse_mapping(value: Mapping) -> float:
    if not value:
        raise DurationError("expected a mapping with weeks, days, hours, minutes or seconds (got {})")
    total = 0.0
    for key, amount in value.items():
        if key not in MAPPING_KEYS:
            raise DurationError(
                f"unknown duration key {brief(key)} "
                "(expected weeks, days, hours, minutes, seconds)"
            )
        if isinstance(amount, bool) or not isinstance(amount, int | float) \
                or (isinstance(amount, float) and math.isnan(amount)) or amount < 0:
            raise DurationError(f"{key} must be a number of at least 0 (got {brief(amount)})")
        total += _finite(amount, value) * MAPPING_KEYS[key]
    return _finite(total, value)


def _parse_text(value: str) -> float | None:
    text = value.strip(BLANKS)
    if text.upper() in ("NONE", "NULL", "~"):
        return None
    if _PLAIN.fullmatch(text):
        return _finite(float(text), value)
    match = _UNIT_STRING.fullmatch(text)
    if text and match:
        return _finite(sum(float(amount) * _UNIT_SECONDS[unit.lower()]
                           for unit, amount in match.groupdict().items() if amount), value)
    if _is_iso(text):
        match = _ISO.fullmatch(text)
        return _finite(sum(float(amount) * _ISO_SECONDS[part]
                           for part, amount in match.groupdict().items() if amount), value)
    if _ISO_MONTHS.match(text.upper()):
        raise DurationError(
            f"months are not a fixed length: use days, weeks or P1Y (got {brief(value)})"
        )
    raise _wrong_case(text, value) or _negative(text, value) or _misspelt(text, value) \
        or _not_a_duration(value)


def _negative(text: str, value: str) -> DurationError | None:
    """The error for a duration with a minus sign before it ("-5s")."""
    rest = text[1:]
    if not text.startswith("-") or rest != rest.strip(BLANKS):
        return None
    try:
        seconds = _parse_text(rest)
    except DurationError:
        return None
    return None if seconds is None else DurationError(f"must not be negative (got {brief(value)})")


# A number and a unit, the blanks around them, as people write durations in words: "1 hour".
_PIECE = re.compile(rf"[ \t]*({_NUMBER})([ \t]*)([A-Za-z]+)")
_UNIT_WORDS = {
    **dict.fromkeys(("ms", "msec", "msecs", "millisecond", "milliseconds"), "ms"),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "s"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "m"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "h"),
    **dict.fromkeys(("d", "day", "days"), "d"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "w"),
}
_YEAR_WORDS = ("y", "yr", "yrs", "year", "years")
_MONTH_WORDS = ("mo", "mon", "mons", "month", "months")
UNITS = "ms, s, m, h, d and w"


def _misspelt(text: str, value: str) -> DurationError | None:
    """The error for numbers with units that are not written as wfctl reads them: unit words
    ("1 hour"), blanks ("1h 30m"), units out of order or repeated ("30m1h"), or a unit that is
    none ("2y", "5x"). It says what is wrong and, where one exists, the form to write."""
    pieces = []
    end = 0
    for match in _PIECE.finditer(text):
        if match.start() != end:
            return None
        pieces.append(match)
        end = match.end()
    if not pieces or end != len(text):
        return None
    amounts: dict[str, float] = {}
    for piece in pieces:
        word = piece[3] if piece[3] == "M" else piece[3].lower()
        if word in _YEAR_WORDS:
            return DurationError(f"years are not a unit: use days or weeks (365d, 52w) or ISO "
                                 f"8601's P1Y (got {brief(value)})")
        if word == "M":
            return DurationError(f"M is not a unit: minutes are m and months are not "
                                 f"supported (got {brief(value)})")
        if word in _MONTH_WORDS:
            return DurationError(f"months are not a fixed length: use days, weeks or P1Y "
                                 f"(got {brief(value)})")
        unit = _UNIT_WORDS.get(word)
        if unit is None:
            return DurationError(f"{piece[3]} is not a unit: the units are {UNITS} "
                                 f"(got {brief(value)})")
        amounts[unit] = amounts.get(unit, 0) + float(piece[1])
    written = "".join(f"{_number(amounts[unit])}{unit}" for unit, _ in _UNIT_ORDER
                      if unit in amounts)
    if any(piece[3] != _UNIT_WORDS.get(piece[3]) for piece in pieces):
        why = f"the units are {UNITS}"
    elif any(piece[0] != piece[1] + piece[3] for piece in pieces):
        why = "a duration has no blanks inside"
    else:
        why = "each unit once, largest first"
    return DurationError(f"write {written}: {why} (got {brief(value)})")


def _is_iso(text: str) -> bool:
    match = _ISO.fullmatch(text)
    return bool(match and any(match.groupdict().values()) and not text.endswith("T"))


def _wrong_case(text: str, value: str) -> DurationError | None:
    """The error for a duration that is one only with other letter cases, giving the right form:
    a unit string in lower case, an ISO 8601 duration in upper case."""
    lower = text.lower()
    match = _UNIT_STRING.fullmatch(lower) if lower != text else None
    if match and lower:
        # "M" alone (not in "MS") is the letter people write for months.
        if match.group("m") and text[match.end("m")] == "M":
            return DurationError(f"M is not a unit: minutes are m ({lower}) and months are not "
                                 f"supported (got {brief(value)})")
        return DurationError(f"units are lower-case: {lower} (got {brief(value)})")
    upper = text.upper()
    if upper != text and _is_iso(upper):
        return DurationError(f"ISO 8601 durations are upper-case: {upper} (got {brief(value)})")
    return None


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
        raise DurationError(f"expected {EXPECTED} other than NONE (got {brief(value)})")
    check_range(seconds, minimum=minimum, original=value)
    return seconds


def check_range(seconds: float, *, minimum: float, original: object) -> None:
    shown = _plain(original) if isinstance(original, str) else _number(seconds)
    if seconds < 0 == minimum:
        raise DurationError(f"must not be negative (got {shown})")
    if seconds < minimum:
        unit = "second" if minimum == 1 else "seconds"
        floor = f"{_number(minimum)} {unit}" if minimum >= 1 else format(minimum)
        raise DurationError(f"must be at least {floor} (got {shown})")
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
