"""Tag periods and the time of a snapshot: Java ``TagPeriodHandler`` and ``TagTimeExtractor``
(apache/paimon 5dacde516b).

A period handler names the tag of a period (daily ``2024-01-01``, hourly ``2024-01-01 10``,
``tag.creation-period-duration`` ``202401011030``) and recognises auto-created tags: a tag is
automatic exactly when its name parses with the table's formatter (a daily name may carry more
after a space, since Java parses only what precedes the first space). Periods are aligned on
the local date-time's digits taken as UTC epoch milliseconds (Java's
``Timestamp.fromLocalDateTime``), so a 90-minute period starts at multiples of 90 minutes
since 1970-01-01T00:00 of the local clock.

A snapshot's time is its commit time (``process-time``, in ``sink.process-time-zone``, else
the machine's zone) or its watermark (``watermark``, in ``sink.watermark-time-zone``, UTC by
default; a snapshot without one, or with Long.MIN_VALUE, has no time).
"""

from __future__ import annotations

import datetime
import re
import zoneinfo
from dataclasses import dataclass

from paimond.errors import ConfigError
from paimond.table.options.core import TableOptions

_EPOCH = datetime.datetime(1970, 1, 1)
_LONG_MIN = -(2**63)
_HOUR_MS, _DAY_MS = 3_600_000, 86_400_000

# period -> formatter -> name template; {Y} is four digits, the others two.
_TEMPLATES = {
    "daily": {"with_dashes": "{Y}-{m}-{d}", "without_dashes": "{Y}{m}{d}",
              "without_dashes_and_spaces": "{Y}{m}{d}"},
    "hourly": {"with_dashes": "{Y}-{m}-{d} {H}", "without_dashes": "{Y}{m}{d} {H}",
               "without_dashes_and_spaces": "{Y}{m}{d}{H}"},
}
_PERIOD_MS = {"daily": _DAY_MS, "hourly": _HOUR_MS, "two-hours": 2 * _HOUR_MS}
_FIELD_WIDTH = {"Y": 4, "m": 2, "d": 2, "H": 2, "M": 2}


@dataclass(frozen=True, slots=True)
class TagPeriod:
    """One of Java's period handlers: a period length and a name template."""

    period_ms: int
    template: str
    daily: bool = False  # Java's daily handler parses only the name's text before a space

    @property
    def period(self) -> datetime.timedelta:
        return datetime.timedelta(milliseconds=self.period_ms)

    def name_of(self, moment: datetime.datetime) -> str:
        """Java ``timeToTag``."""
        values = {"Y": moment.year, "m": moment.month, "d": moment.day, "H": moment.hour,
                  "M": moment.minute}
        return self.template.format(**{k: f"{v:0{_FIELD_WIDTH[k]}d}" for k, v in values.items()})

    def time_of(self, name: str) -> datetime.datetime | None:
        """Java ``tagToTime``; None when ``name`` is not an automatic tag's name."""
        text = name.split(" ")[0] if self.daily else name
        match = _pattern(self.template).fullmatch(text)
        if match is None:
            return None
        parts = {k: int(v) for k, v in match.groupdict().items()}
        try:
            return datetime.datetime(parts["Y"], parts["m"], parts["d"], parts.get("H", 0),
                                     parts.get("M", 0))
        except ValueError:  # Java's STRICT resolver: no 2024-02-30, no hour 24
            return None

    def is_auto(self, name: str) -> bool:
        return self.time_of(name) is not None

    def previous_boundary(self, moment: datetime.datetime) -> datetime.datetime:
        """Java ``normalizeToPreviousTag``: the start of the period before ``moment``'s."""
        millis = (moment - _EPOCH) // datetime.timedelta(milliseconds=1)
        start = int(millis / self.period_ms) * self.period_ms  # Java's long division
        return _EPOCH + datetime.timedelta(milliseconds=start) - self.period


def _pattern(template: str) -> re.Pattern[str]:
    regex = re.escape(template)
    for key, width in _FIELD_WIDTH.items():
        regex = regex.replace(re.escape("{" + key + "}"), f"(?P<{key}>[0-9]{{{width}}})")
    return re.compile(regex)


def tag_period(options: TableOptions) -> TagPeriod:
    """The table's period handler (Java ``TagPeriodHandler.create``), with Java's check that
    ``tag.creation-delay`` is shorter than one period."""
    duration_ms = options.tag_creation_period_duration_ms
    if duration_ms is not None:
        if duration_ms <= 0:
            raise ConfigError("tag.creation-period-duration", "must be positive")
        period = TagPeriod(duration_ms, "{Y}{m}{d}{H}{M}")
    else:
        kind = options.tag_creation_period
        if kind == "two-hours":
            period = TagPeriod(_PERIOD_MS[kind], "{Y}-{m}-{d} {H}")
        else:
            period = TagPeriod(_PERIOD_MS[kind], _TEMPLATES[kind][options.tag_period_formatter],
                               daily=kind == "daily")
    if options.tag_creation_delay_ms >= period.period_ms:
        raise ConfigError("tag.creation-delay", f"{options.tag_creation_delay_ms} ms is not "
                          f"shorter than one period ({period.period_ms} ms)")
    return period


_OFFSET = re.compile(r"^(?:GMT|UTC|UT)?([+-])(\d{1,2})(?::?(\d{2}))?$")


def time_zone(key: str, text: str | None) -> datetime.tzinfo | None:
    """A Java ``ZoneId`` text (region name, ``Z``, ``UTC``, ``GMT+08:00``, ``+8``); None: the
    machine's zone."""
    if text is None:
        return None
    name = text.strip()
    if name.upper() in ("Z", "UTC", "GMT", "UT"):
        return datetime.timezone.utc
    match = _OFFSET.match(name.upper())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        offset = datetime.timedelta(hours=int(match.group(2)), minutes=int(match.group(3) or 0))
        return datetime.timezone(sign * offset)
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(key, f"{text!r} is not a time zone") from None


def local_date_time(epoch_ms: int, zone: datetime.tzinfo | None) -> datetime.datetime:
    """Java ``Instant.ofEpochMilli(ms).atZone(zone).toLocalDateTime()`` (None: local zone)."""
    seconds, millis = divmod(epoch_ms, 1000)
    moment = datetime.datetime.fromtimestamp(seconds, zone)
    return moment.replace(tzinfo=None, microsecond=millis * 1000)


def _local_or_none(epoch_ms: int, zone: datetime.tzinfo | None) -> datetime.datetime | None:
    try:
        return local_date_time(epoch_ms, zone)
    except (OverflowError, OSError, ValueError):  # outside Python's years 1..9999
        return None


@dataclass(frozen=True, slots=True)
class TagTimeExtractor:
    """Java ``TagTimeExtractor``: the local date-time of a snapshot, by commit time or
    watermark."""

    watermark: bool
    zone: datetime.tzinfo | None

    @classmethod
    def of(cls, options: TableOptions) -> TagTimeExtractor:
        if options.tag_automatic_creation == "watermark":
            return cls(True, time_zone("sink.watermark-time-zone",
                                       options.sink_watermark_time_zone))
        return cls(False, time_zone("sink.process-time-zone", options.sink_process_time_zone))

    def extract(self, time_millis: int, watermark: int | None) -> datetime.datetime | None:
        if not self.watermark:
            return _local_or_none(time_millis, self.zone)
        if watermark is None or watermark == _LONG_MIN:
            return None
        return _local_or_none(watermark, self.zone)
