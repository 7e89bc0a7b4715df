"""The time of a partition from its values: Java ``PartitionTimeExtractor`` (apache/paimon
5dacde516b, ``paimon-core/.../partition/PartitionTimeExtractor.java``).

``partition.timestamp-pattern`` (``$dt $hour:00:00``) builds the text from the values (each
``$key`` replaced by the value of the longest key it starts with; without a pattern the first
value is the text). ``partition.timestamp-formatter`` is a ``java.time`` pattern parsed with
the SMART resolver (``yyyyMMdd``, ``yyyy-MM-dd HH``...): a date-time if the text has a time,
else the date at midnight. Without a formatter, Java's lenient default: ``y-M-d`` or
``y-M-d H:m:s[.f]`` (1..10 year digits, 1..2 digits for the others, overflowing fields roll
over: month 13 is January of the next year).

Only the numeric pattern letters are implemented (``y u M d H m s S``, with quoted literals);
any other letter is refused when the option is read, naming the option. Years outside
1..9999, which Python cannot hold, become the earliest or latest representable time.
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass

from paimond.errors import NullPartitionValueError

_MIN, _MAX = datetime.datetime.min, datetime.datetime.max
_DIGITS = "[0-9]"

# Java's lenient default (TIMESTAMP_FORMATTER, then DATE_FORMATTER).
_DEFAULT = re.compile(r"(-?[0-9]{1,10})-([0-9]{1,2})-([0-9]{1,2})"
                      r"(?: ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(?:\.([0-9]{1,9}))?)?")
_NUMERIC_LETTERS = frozenset("yuMdHmsS")
_RESERVED = frozenset("[]{}#")


@dataclass(frozen=True, slots=True)
class _Field:
    letter: str
    count: int

    def regex(self) -> str:
        letter, count = self.letter, self.count
        if letter in "yu":
            if count == 2:
                return f"({_DIGITS}{{2}})"
            if count >= 4:  # EXCEEDS_PAD, strict: more digits would need a '+' sign
                return f"({_DIGITS}{{{count}}})"
            return f"({_DIGITS}{{{count},19}})"
        if letter == "S":
            return f"({_DIGITS}{{{count}}})"
        return f"({_DIGITS}{{2}})" if count == 2 else f"({_DIGITS}{{1,19}})"


@dataclass(frozen=True, slots=True)
class JavaDateFormat:
    """A compiled ``java.time`` pattern of numeric fields (``DateTimeFormatter.ofPattern``)."""

    pattern: str
    regex: re.Pattern[str]
    fields: tuple[_Field, ...]

    def parse(self, text: str) -> datetime.datetime:
        """Java ``LocalDateTime.parse``, else ``LocalDate.parse`` at midnight (SMART).
        Raises ValueError where Java raises ``DateTimeParseException``."""
        match = self.regex.fullmatch(text)
        if match is None:
            raise ValueError(f"{text!r} does not match {self.pattern!r}")
        values: dict[str, int] = {}
        for fld, digits in zip(self.fields, match.groups(), strict=True):
            if fld.letter == "S":
                value = int(digits.ljust(9, "0"))
            elif fld.letter in "yu" and fld.count == 2:
                value = 2000 + int(digits)
            else:
                value = int(digits)
            key = "y" if fld.letter in "yu" else fld.letter
            if values.setdefault(key, value) != value:
                raise ValueError(f"{text!r}: conflicting values for {fld.letter!r}")
        return _resolve_smart(text, values)


def compile_java_format(pattern: str) -> JavaDateFormat:
    """Raises ValueError for what Java rejects and for the letters paimond does not
    implement (text fields, zones, am/pm, optional sections)."""
    parts: list[str] = []
    fields: list[_Field] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError(f"pattern ends within a quoted literal: {pattern!r}")
            parts.append(re.escape(pattern[i + 1:end] if end > i + 1 else "'"))
            i = end + 1
            continue
        if char.isascii() and char.isalpha():
            count = 1
            while i + count < len(pattern) and pattern[i + count] == char:
                count += 1
            if char not in _NUMERIC_LETTERS:
                raise ValueError(f"pattern letter {char!r} is not supported by paimond (only "
                                 "y u M d H m s S and literals)")
            if char == "M" and count > 2:
                raise ValueError(f"text months ({char * count!r}) are not supported by paimond")
            if (char in "dHms" and count > 2) or (char == "S" and count > 9):
                raise ValueError(f"too many pattern letters {char * count!r} in {pattern!r}")
            fields.append(_Field(char, count))
            parts.append(fields[-1].regex())
            i += count
            continue
        if char in _RESERVED:
            raise ValueError(f"pattern character {char!r} is not supported by paimond")
        parts.append(re.escape(char))
        i += 1
    return JavaDateFormat(pattern, re.compile("".join(parts)), tuple(fields))


def _resolve_smart(text: str, values: dict[str, int]) -> datetime.datetime:
    if not {"y", "M", "d"} <= values.keys():
        raise ValueError(f"{text!r}: no complete date")
    year, month, day = values["y"], values["M"], values["d"]
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise ValueError(f"{text!r}: month or day out of range")
    if year > 9999:
        return _MAX
    if year < 1:
        return _MIN
    day = min(day, calendar.monthrange(year, month)[1])  # SMART: Feb 30 -> Feb 28/29
    date = datetime.datetime(year, month, day)
    hour, minute, second, nano = (values.get(k) for k in "HmsS")
    if hour is None or (minute is None and (second is not None or nano is not None)) or \
            (minute is not None and second is None and nano is not None):
        return date  # no resolvable time: LocalDateTime fails, LocalDate at midnight
    minute, second, nano = minute or 0, second or 0, nano or 0
    if hour == 24 and minute == second == nano == 0:
        return _shift(date, datetime.timedelta(days=1))
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59):
        raise ValueError(f"{text!r}: time out of range")
    return date.replace(hour=hour, minute=minute, second=second, microsecond=nano // 1000)


def parse_default(text: str) -> datetime.datetime:
    """Java ``PartitionTimeExtractor.toLocalDateTimeDefault`` (LENIENT)."""
    match = _DEFAULT.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is neither 'y-M-d' nor 'y-M-d H:m:s[.f]'")
    year, month, day = (int(g) for g in match.groups()[:3])
    months = year * 12 + month - 1
    year, month = divmod(months, 12)
    if year > 9999:
        return _MAX
    if year < 1:
        return _MIN
    start = datetime.datetime(year, month + 1, 1)
    offset = datetime.timedelta(days=day - 1)
    if match.group(4) is not None:
        hour, minute, second = (int(g) for g in match.groups()[3:6])
        nano = int((match.group(7) or "").ljust(9, "0"))
        offset += datetime.timedelta(hours=hour, minutes=minute, seconds=second,
                                     microseconds=nano // 1000)
    return _shift(start, offset)


def _shift(moment: datetime.datetime, offset: datetime.timedelta) -> datetime.datetime:
    try:
        return moment + offset
    except OverflowError:
        return _MAX if offset > datetime.timedelta(0) else _MIN


@dataclass(frozen=True, slots=True)
class PartitionTimeExtractor:
    """``pattern``: ``partition.timestamp-pattern``; ``formatter``: the compiled
    ``partition.timestamp-formatter`` (None: Java's default parsing)."""

    pattern: str | None = None
    formatter: JavaDateFormat | None = None

    def extract(self, keys: Sequence[str], values: Sequence[str | None]) -> datetime.datetime:
        """The partition's local date-time, truncated to microseconds. Raises ValueError
        (Java ``DateTimeParseException``) or :class:`NullPartitionValueError` (a value the
        text needs is null)."""
        if self.pattern is None:
            if values[0] is None:
                raise NullPartitionValueError(keys[0])
            text = values[0]
        else:
            text = _replace_pattern(self.pattern, keys, values)
        if self.formatter is None:
            return parse_default(text)
        return self.formatter.parse(text)


def _replace_pattern(pattern: str, keys: Sequence[str], values: Sequence[str | None]) -> str:
    """Each ``$key`` replaced by its value, longest keys first (``$dt1`` is not ``$dt`` + 1)."""
    order = sorted(range(len(keys)), key=lambda i: -len(keys[i]))  # stable, as Java's sort
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "$" and i + 1 < len(pattern):
            for index in order:
                key = keys[index]
                if pattern.startswith(key, i + 1):
                    value = values[index]
                    if value is None:
                        raise NullPartitionValueError(key)
                    out.append(value)
                    i += 1 + len(key)
                    break
            else:
                out.append("$")
                i += 1
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)
