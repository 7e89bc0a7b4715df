"""Column statistics of new data files: Java ``StatsCollectorFactories``,
``{None,Counts,Full,Truncate}SimpleColStatsCollector`` and ``SimpleStatsConverter``
(apache/paimon 5dacde516b, ``paimon-core/.../utils`` and ``paimon-common/.../statistics``).

Modes are ``none``, ``counts`` (null count only), ``full`` and ``truncate(N)`` (strings and
binary cut to N code points / bytes; the max is then incremented so it stays an upper
bound, and when no upper bound exists both min and max are null). Statistics are computed
per Arrow batch with pyarrow.compute and merged across batches; only two values per batch
and column reach Python. Where the file format's writer records exact bounds of a column
(Parquet's footer statistics: :mod:`paimond.table.data_files.parquet_bounds`), the min and max are
taken from there instead (``defer_bounds``); null counts are always counted here.

Deliberate differences from Java, all of them still valid bounds: a FLOAT/DOUBLE column
holding NaN gets null min/max (Java's order puts NaN last, Parquet drops such stats);
nested columns get a null count (Java's Parquet footer has none for them); TIMESTAMP(7..9)
gets exact min/max (Java's Parquet writer stores INT96, which has no statistics); the
increment of a truncated string max skips the surrogate range (Java would emit U+D800).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.manifest import SimpleStats
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataField,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.table.data_files.kv_layout import KEY_FIELD_PREFIX, is_system_field
from paimond.table.options.core import TableOptions

_TRUNCATE = re.compile(r"^TRUNCATE\((\d+)\)$")
_ORDERED = (BooleanType, TinyIntType, SmallIntType, IntType, BigIntType, FloatType, DoubleType,
            DecimalType, CharType, VarCharType, BinaryType, VarBinaryType, DateType, TimeType,
            TimestampType, LocalZonedTimestampType)
_UNIT_NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


@dataclass(frozen=True, slots=True)
class StatsMode:
    kind: str  # "none", "counts", "full" or "truncate"
    length: int = 0  # code points or bytes kept by "truncate"


NONE_MODE, COUNTS_MODE, FULL_MODE = StatsMode("none"), StatsMode("counts"), StatsMode("full")
SYSTEM_MODE = StatsMode("truncate", 128)


def parse_stats_mode(text: str) -> StatsMode:
    """``none``, ``counts``, ``full`` or ``truncate(N)`` (any case, N > 0)."""
    upper = text.strip().upper()
    if upper in ("NONE", "COUNTS", "FULL"):
        return StatsMode(upper.lower())
    match = _TRUNCATE.match(upper)
    if match and int(match.group(1)) > 0:
        return StatsMode("truncate", int(match.group(1)))
    raise UnsupportedError(f"unknown stats mode {text!r} (none, counts, full, truncate(N))")


def stats_modes(options: TableOptions, field_names: Sequence[str], *, level: int | None = None,
                avro_key_value: bool = False, thin_key_names: Sequence[str] = ()) -> tuple[StatsMode, ...]:
    """The mode of each physical column, as Java ``createStatsFactories``.

    ``level`` applies ``metadata.stats-mode.per.level`` (primary-key files only). A
    ``fields.<c>.stats-mode`` wins; system columns (and, in thin mode, value columns that are
    keys) get ``truncate(128)``; ``metadata.stats-keep-first-n-columns`` turns the columns
    after the first N user columns to ``none``. Avro primary-key files follow Java's
    ``createStatsFactoriesForAvro``: no system-column rule, and every column counts to N.
    """
    default = options.stats_mode
    if level is not None:
        default = options.stats_mode_per_level.get(level, default)
    keep_first = options.stats_keep_first_n_columns
    thin_keys = set(thin_key_names)
    modes, counted = [], 0
    for name in field_names:
        field_mode = options.field_stats_mode(name)
        if field_mode is not None:
            modes.append(parse_stats_mode(field_mode))
            counted += 1
        elif not avro_key_value and (is_system_field(name) or KEY_FIELD_PREFIX + name in thin_keys):
            modes.append(SYSTEM_MODE)
        else:
            modes.append(NONE_MODE if 0 <= keep_first <= counted else parse_stats_mode(default))
            counted += 1
    return tuple(modes)


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Java ``SimpleColStats``: min and max as ``paimond.format.types.values`` values."""

    min: Any
    max: Any
    null_count: int | None

    @property
    def is_none(self) -> bool:
        return self.min is None and self.max is None and self.null_count is None


NONE_STATS = ColumnStats(None, None, None)


class ColumnStatsCollector:
    """Statistics of one column over the batches of one file. With ``defer_bounds`` the
    min and max come from the file format's own metadata (``set_bounds``), not each batch."""

    __slots__ = ("_data_type", "_deferred", "_max", "_min", "_mode", "_null_count", "_unbounded",
                 "_unit")

    def __init__(self, data_type: DataType, mode: StatsMode) -> None:
        self._data_type = data_type
        self._mode = mode
        self._null_count = 0
        self._min: Any = None
        self._max: Any = None
        self._unbounded = False  # NaN seen, or the format's bounds are unknown
        self._deferred = False
        self._unit: str | None = None  # Arrow unit of a timestamp column

    @property
    def wants_bounds(self) -> bool:
        """Does this column's mode keep a min and max (which ``update`` would compute)?"""
        return self._mode.kind in ("full", "truncate") and isinstance(self._data_type, _ORDERED)

    def defer_bounds(self, arrow_type: pa.DataType) -> None:
        """``update`` counts nulls only; ``set_bounds`` gives min and max before ``result``."""
        self._deferred = True
        if pa.types.is_timestamp(arrow_type):
            self._unit = arrow_type.unit

    def set_bounds(self, bounds: tuple[Any, Any] | None) -> None:
        """Min and max of the non-null values (None, None if none; None if unknown), in the
        conventions ``update`` compares in (timestamps as integers of the Arrow unit)."""
        if bounds is None:
            self._unbounded = True
        else:
            self._min, self._max = bounds

    def update(self, array: pa.Array | pa.ChunkedArray) -> None:
        if self._mode.kind == "none":
            return
        self._null_count += array.null_count
        if self._mode.kind == "counts" or self._deferred or not isinstance(self._data_type, _ORDERED):
            return
        if array.null_count == len(array):
            return
        if pa.types.is_timestamp(array.type):
            # Compare as integers of the column's unit: Python datetimes drop nanoseconds.
            self._unit = array.type.unit
            array = array.cast(pa.int64())
        elif pa.types.is_date32(array.type) or pa.types.is_time32(array.type):
            array = array.cast(pa.int32())  # epoch days, millis of the day
        elif pa.types.is_floating(array.type) and not self._unbounded:
            self._unbounded = bool(pc.any(pc.is_nan(array)).as_py())
        low, high = (s.as_py() for s in pc.min_max(array).values())
        if low is not None and (self._min is None or low < self._min):
            self._min = low
        if high is not None and (self._max is None or high > self._max):
            self._max = high

    def result(self) -> ColumnStats:
        if self._mode.kind == "none":
            return NONE_STATS
        if self._min is None or self._unbounded:
            return ColumnStats(None, None, self._null_count)
        low, high = self._value(self._min), self._value(self._max)
        if self._mode.kind == "truncate":
            high = truncate_max(high, self._mode.length)
            if high is None:
                return ColumnStats(None, None, self._null_count)
            low = truncate_min(low, self._mode.length)
        return ColumnStats(low, high, self._null_count)

    def _value(self, raw: Any) -> Any:
        return raw if self._unit is None else Timestamp.from_nanos(raw * _UNIT_NANOS[self._unit])


def truncate_min(value: Any, length: int) -> Any:
    """A prefix of at most ``length`` code points (strings) or bytes; other values unchanged."""
    if isinstance(value, (str, bytes)):
        return value[:length]
    return value


def truncate_max(value: Any, length: int) -> Any:
    """The smallest short upper bound of ``value``, or None if none exists (a string of
    ``length`` U+10FFFF, bytes of ``length`` 0xFF)."""
    if isinstance(value, str) and len(value) > length:
        for i in range(length - 1, -1, -1):
            code_point = ord(value[i]) + 1
            if code_point == 0xD800:  # surrogates are not characters: skip the range
                code_point = 0xE000
            if code_point <= 0x10FFFF:
                return value[:i] + chr(code_point)
        return None
    if isinstance(value, bytes) and len(value) > length:
        for i in range(length - 1, -1, -1):
            if value[i] != 0xFF:
                return value[:i] + bytes([value[i] + 1])
        return None
    return value


def encode_stats(stats: Sequence[ColumnStats], types: Sequence[DataType]) -> SimpleStats:
    """``SimpleStatsConverter.toBinaryAllMode``: one stats row field per column."""
    return SimpleStats(encode_manifest_row([s.min for s in stats], types),
                       encode_manifest_row([s.max for s in stats], types),
                       tuple(s.null_count for s in stats))


def encode_dense_stats(stats: Sequence[ColumnStats], fields: Sequence[DataField], *,
                       dense: bool = True) -> tuple[tuple[str, ...] | None, SimpleStats]:
    """Value stats and ``_VALUE_STATS_COLS``: with ``metadata.stats-dense-store`` the
    columns without statistics are left out and the kept names listed (None when all are
    kept), as Java ``toBinaryDenseMode``."""
    if not dense:
        return None, encode_stats(stats, [f.type for f in fields])
    kept = [(s, f) for s, f in zip(stats, fields, strict=True) if not s.is_none]
    names = tuple(f.name for _, f in kept)
    encoded = encode_stats([s for s, _ in kept], [f.type for _, f in kept])
    return (None if len(kept) == len(fields) else names), encoded


def row_values(batch: pa.RecordBatch, row: int, columns: Sequence[str],
               types: Sequence[DataType]) -> list[Any]:
    """The values of one row's ``columns`` as ``paimond.format.types.values`` values (min/max keys)."""
    return [_value_at(batch.column(name).slice(row, 1), t)
            for name, t in zip(columns, types, strict=True)]


def _value_at(array: pa.Array, data_type: DataType) -> Any:
    if array.null_count:
        return None
    if pa.types.is_timestamp(array.type):
        return Timestamp.from_nanos(array.cast(pa.int64())[0].as_py() * _UNIT_NANOS[array.type.unit])
    if pa.types.is_date32(array.type) or pa.types.is_time32(array.type):
        return array.cast(pa.int32())[0].as_py()
    return _from_python(array[0].as_py(), data_type)


def _from_python(value: Any, data_type: DataType) -> Any:
    """Nested values from ``as_py`` into the BinaryRow codec's conventions."""
    if value is None:
        return None
    if isinstance(data_type, ArrayType):
        return [_from_python(v, data_type.element) for v in value]
    if isinstance(data_type, MapType):
        return [(_from_python(k, data_type.key), _from_python(v, data_type.value)) for k, v in value]
    if isinstance(data_type, MultisetType):
        return [(_from_python(k, data_type.element), v) for k, v in value]
    if isinstance(data_type, RowType):
        return tuple(_from_python(value[f.name], f.type) for f in data_type.fields)
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        delta = value.replace(tzinfo=None) - datetime.datetime(1970, 1, 1)
        return Timestamp.from_micros(delta // datetime.timedelta(microseconds=1))
    if isinstance(data_type, DateType):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(data_type, TimeType):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return value
