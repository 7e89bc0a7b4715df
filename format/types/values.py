"""Python values of Paimon data types, as codecs in ``paimond.format`` produce and accept them.

| Paimon type                      | Python value                                   |
|----------------------------------|------------------------------------------------|
| BOOLEAN                          | bool                                           |
| TINYINT, SMALLINT, INT, BIGINT   | int                                            |
| FLOAT, DOUBLE                    | float (FLOAT round-trips through float32)      |
| CHAR, VARCHAR                    | str                                            |
| BINARY, VARBINARY                | bytes                                          |
| DECIMAL(p, s)                    | decimal.Decimal with exactly s digits of scale |
| DATE                             | int, days since 1970-01-01                     |
| TIME(p)                          | int, milliseconds of the day                   |
| TIMESTAMP(p), TIMESTAMP_LTZ(p)   | Timestamp (epoch millis + nano of milli)       |
| ARRAY<T>                         | list                                           |
| MAP<K, V>                        | list of (key, value) tuples, in stored order   |
| MULTISET<T>                      | list of (element, count) tuples                |
| ROW<...>                         | tuple                                          |
| NULL                             | None                                           |

These mirror Paimon's internal representation (``Timestamp.fromEpochMillis(millis, nanoOfMillisecond)``,
DATE as epoch days), so values survive a round trip without any time-zone or precision loss.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

_EPOCH = datetime.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True, order=True)
class Timestamp:
    """Paimon ``Timestamp``: milliseconds since the epoch plus nanoseconds within that millisecond."""

    millis: int
    nano_of_milli: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.nano_of_milli <= 999_999:
            raise ValueError(f"nano_of_milli must be in 0..999999, got {self.nano_of_milli}")

    @classmethod
    def from_micros(cls, micros: int) -> Timestamp:
        return cls(micros // 1000, (micros % 1000) * 1000)

    @classmethod
    def from_nanos(cls, nanos: int) -> Timestamp:
        return cls(nanos // 1_000_000, nanos % 1_000_000)

    @property
    def micros(self) -> int:
        return self.millis * 1000 + self.nano_of_milli // 1000

    @property
    def nanos(self) -> int:
        return self.millis * 1_000_000 + self.nano_of_milli

    def to_datetime(self) -> datetime.datetime:
        """Naive datetime (microsecond precision; sub-microsecond nanos are dropped)."""
        return _EPOCH + datetime.timedelta(microseconds=self.micros)

    def __str__(self) -> str:
        text = self.to_datetime().isoformat(sep=" ")
        return text if self.nano_of_milli % 1000 == 0 else f"{text}{self.nano_of_milli % 1000:03d}"
