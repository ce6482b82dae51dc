"""A schedule's spec in time: its ticks (cron fields in a zone, or every so long), their words,
the instance id a tick gives and the jitter that delays it.

The calendar arithmetic is `cronsim`'s (daylight saving included: a local time that does not
exist fires once at the next instant that does, one that happens twice fires once) and the
words are `cron-descriptor`'s; zones are `zoneinfo`'s.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

OVERLAP_POLICIES = ("skip", "buffer_one", "allow_all", "cancel_other", "terminate_other")
# What a schedule did with a tick, as `schedule describe` and its JSON name it.
ACTIONS = ("started", "skipped", "missed", "buffered")
ALIASES = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
DEFAULT_ID = "{schedule}-{tick}"
DEFAULT_CATCHUP_WINDOW = 60.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROS = timedelta(microseconds=1)
# What `wfctl start` takes as an instance id (engine/start.py says the same).
INSTANCE_ID = re.compile(r"^[^\s\x00-\x1f]{1,200}$")
# Where a template is tried: ticks after these instants must all get ids of their own.
_TRIED_AFTER = tuple(datetime(2026, month, day, tzinfo=UTC) for month, day in
                     ((1, 1), (1, 8), (2, 1), (7, 1)))


class SpecError(ValueError):
    """A cron expression, zone or id template that cannot be used; the message says why."""


def zone(name: str) -> ZoneInfo:
    """The IANA zone of that name."""
    try:
        if name != name.strip() or not name:
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpecError(f"unknown time zone {name!r} (expected an IANA name such as "
                        "Europe/Berlin or UTC)") from None


def cron_fields(expression: str) -> str:
    """The five fields of a cron expression (an alias such as @daily spelled out), checked."""
    from cronsim import CronSim, CronSimError

    fields = ALIASES.get(expression.strip().lower(), expression.strip())
    if len(fields.split()) != 5:
        raise SpecError(f"expected five cron fields (minute hour day month weekday) or one of "
                        f"{', '.join(ALIASES)} (got {expression!r})")
    try:
        CronSim(fields, datetime(2026, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        raise SpecError(f"invalid cron expression {expression!r}: {exc}") from None
    return fields


@dataclass(frozen=True)
class TickSpec:
    """When a schedule ticks: `cron` fields read in `timezone`, or `every` seconds since the
    Unix epoch (whole multiples, whatever the zone)."""

    cron: str | None
    every: float | None
    timezone: str = "UTC"
    _zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise SpecError("expected one of cron or every")
        object.__setattr__(self, "_zone", zone(self.timezone))
        if self.cron is not None:
            object.__setattr__(self, "cron", cron_fields(self.cron))

    @property
    def text(self) -> str:
        """The spec as written in short: the cron fields, or `every 15m`."""
        if self.cron is not None:
            return self.cron
        return f"every {_duration_text(self.every or 0)}"

    def next_after(self, instant: datetime) -> datetime:
        """The first tick strictly after `instant`, an aware UTC datetime."""
        if self.every is not None:
            step = round(self.every * 1_000_000)
            elapsed = (instant - _EPOCH) // _MICROS
            return _EPOCH + timedelta(microseconds=(elapsed // step + 1) * step)
        from cronsim import CronSim

        local = instant.astimezone(self._zone)
        # cronsim works at whole seconds: a tick at the instant's own second is not after it.
        found = next(CronSim(self.cron or "", local.replace(microsecond=0)))
        return found.astimezone(UTC)

    def ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """The ticks strictly after `after`, up to and including `until`, in order."""
        tick = self.next_after(after)
        while tick <= until:
            yield tick
            tick = self.next_after(tick)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        found, tick = [], after
        for _ in range(count):
            tick = self.next_after(tick)
            found.append(tick)
        return found

    def describe(self) -> str:
        """The spec in words, with its zone: `At 03:00, Monday through Friday (Europe/Berlin)`."""
        if self.every is not None:
            return f"Every {_duration_text(self.every)}"
        from cron_descriptor import ExpressionDescriptor, Options

        options = Options()
        options.use_24hour_time_format = True
        words = ExpressionDescriptor(self.cron, options).get_description()
        return f"{words} ({self.timezone})"

    def local(self, instant: datetime) -> datetime:
        """The instant in this spec's zone."""
        return instant.astimezone(self._zone)


def _duration_text(seconds: float) -> str:
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return "".join(parts) or "0s"


class _Tick:
    """A tick as an id template formats it: plain, UTC in ISO basic form (20260412T030000Z);
    with a format (`{tick:%Y%m%d}`), by strftime in the schedule's zone."""

    def __init__(self, instant: datetime, local: datetime) -> None:
        self.instant = instant
        self.local = local

    def __format__(self, spec: str) -> str:
        if not spec:
            return self.instant.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
        return self.local.strftime(spec)


def instance_id(template: str, schedule: str, tick: datetime, spec: TickSpec) -> str:
    """The instance id a tick gives: `template` with `{schedule}` and `{tick}` filled in."""
    try:
        return template.format_map({"schedule": schedule, "tick": _Tick(tick, spec.local(tick))})
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise SpecError(f"invalid id template {template!r}: {exc} (it may use {{schedule}} "
                        "and {tick} or {tick:FORMAT})") from None


def check_template(template: str, schedule: str, spec: TickSpec) -> None:
    """Refuse a template that names anything but `schedule` and `tick`, that makes an id
    `wfctl start` would refuse, or that gives two ticks one id (a tick's id is the proof that
    it started): tried on ticks a week, a month and half a year apart, and on neighbours."""
    names = [name for _, name, _, _ in _parsed(template) if name is not None]
    if "tick" not in names:
        raise SpecError(f"id template {template!r} must hold {{tick}}: each tick's instance id "
                        "must be its own")
    ticks = sorted({tick for after in _TRIED_AFTER for tick in spec.upcoming(after, 2)})
    seen: dict[str, datetime] = {}
    for tick in ticks:
        made = instance_id(template, schedule, tick, spec)
        if not INSTANCE_ID.match(made):
            raise SpecError(f"id template {template!r} makes {made!r}, not a valid instance id "
                            "(1 to 200 characters, no spaces)")
        if made in seen:
            raise SpecError(f"id template {template!r} gives two ticks the same id ({made!r}, "
                            f"at {seen[made].isoformat()} and {tick.isoformat()}): its {{tick}} "
                            "format must tell every tick apart")
        seen[made] = tick


def _parsed(template: str) -> list[tuple[str, str | None, str | None, str | None]]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise SpecError(f"invalid id template {template!r}: {exc}") from None
    for _, name, _, _ in parsed:
        if name is not None and name not in ("schedule", "tick"):
            raise SpecError(f"invalid id template {template!r}: unknown field {{{name}}} (it may "
                            "use {schedule} and {tick} or {tick:FORMAT})")
    return parsed


def jitter_delay(schedule: str, tick: datetime, jitter: float) -> float:
    """Seconds in [0, jitter) a tick's start waits: the same for the same schedule and tick,
    whichever worker computes it."""
    if jitter <= 0:
        return 0.0
    digest = hashlib.sha256(f"{schedule}\x00{tick.astimezone(UTC).isoformat()}".encode()).digest()
    return jitter * int.from_bytes(digest[:8], "big") / 2 ** 64


@dataclass(frozen=True)
class Schedule:
    """A schedule as the definitions file declares it."""

    name: str
    workflow: str
    spec: TickSpec
    input: dict[str, Any]
    id_template: str = DEFAULT_ID
    overlap: str = "skip"
    catchup_window: float = DEFAULT_CATCHUP_WINDOW
    jitter: float = 0.0
    # Start options (`wfctl start`'s), only those given: seconds, or None for NONE.
    overrides: dict[str, float | None] = field(default_factory=dict)
    paused: bool = False
    start_at: datetime | None = None
    line: int = 0

    @property
    def digest(self) -> str:
        """What, changed in the file, makes the ticks begin again from when it is seen."""
        text = f"{self.spec.cron}|{self.spec.every}|{self.spec.timezone}|{self.start_at}"
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def instance_id(self, tick: datetime) -> str:
        return instance_id(self.id_template, self.name, tick, self.spec)

    def due_at(self, tick: datetime) -> datetime:
        """When a tick's start is due: the tick, delayed by its jitter."""
        return tick + timedelta(seconds=jitter_delay(self.name, tick, self.jitter))

    def first_tick(self, seen: datetime) -> datetime:
        """The first tick of a schedule first seen at `seen`: none from before it existed."""
        begin = seen if self.start_at is None or self.start_at < seen else \
            self.start_at - _MICROS
        return self.spec.next_after(begin)
