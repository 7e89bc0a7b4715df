"""Column bounds of a new Parquet data file from the statistics its writer has just put in
the footer: the writer computes every column chunk's min and max anyway, so
:mod:`paimond.table.data_files.file_stats` takes them from there instead of running ``min_max`` over
each batch a second time (truncation and stats modes stay its business).

A column chunk's statistics are the exact min and max of its non-null values, in the order
Arrow's ``min_max`` uses (integers signed, byte arrays as unsigned bytes, which for UTF-8 is
code point order), for the flat types taken here: BOOLEAN, TINYINT to BIGINT, DATE, TIME,
TIMESTAMP stored as INT64, DECIMAL (INT32, INT64 and FIXED_LEN_BYTE_ARRAY), CHAR/VARCHAR and
BINARY/VARBINARY. Not taken: FLOAT/DOUBLE (NaN is skipped, a zero bound is written -0.0 or
+0.0), INT96 timestamps (no statistics), nested columns (leaf statistics only).

The writer leaves out a byte array min or max longer than ``max_statistics_size`` (4096
bytes in every pyarrow paimond supports). So for each row group a length pass (about 6x
cheaper than ``min_max``) looks for such values, and a row group holding one gets that
column's bounds from ``min_max`` while it is written. A row group whose statistics are
missing for any other reason makes the column's bounds unknown (reported as None), never
guessed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

LONG_VALUE_BYTES = 4096  # Arrow's default max_statistics_size: longer min/max are left out


def bounded_type(arrow_type: pa.DataType) -> bool:
    """Are a flat column's Parquet statistics exact bounds of this Arrow type's values?"""
    return bool(pa.types.is_boolean(arrow_type) or pa.types.is_integer(arrow_type)
                or pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type)
                or pa.types.is_timestamp(arrow_type) or pa.types.is_decimal128(arrow_type)
                or pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type))


@dataclass(slots=True)
class _Column:
    leaf: int  # Parquet column index of this top-level flat column
    arrow_type: pa.DataType
    # (first row, end row, min, max) of row groups whose bounds came from min_max
    computed: list[tuple[int, int, Any, Any]] = field(default_factory=list)


class ParquetBounds:
    """The bounds of some top-level columns of one Parquet file being written: ``note``
    each table before it is written as row groups, ``resolve`` the footer after close."""

    def __init__(self, columns: dict[int, tuple[int, pa.DataType]]) -> None:
        """``columns``: top-level index -> (Parquet leaf index, Arrow type), bounded types."""
        self._columns = {i: _Column(leaf, t) for i, (leaf, t) in columns.items()}
        self._rows = 0
        self._bounds: dict[int, tuple[Any, Any] | None] = {}

    @property
    def columns(self) -> frozenset[int]:
        return frozenset(self._columns)

    def note(self, table: pa.Table) -> None:
        """Before ``table`` is written: min_max of byte array columns holding a long value."""
        start, self._rows = self._rows, self._rows + table.num_rows
        for index, column in self._columns.items():
            if not (pa.types.is_string(column.arrow_type) or pa.types.is_binary(column.arrow_type)):
                continue
            values = table.column(index)
            if values.nbytes <= LONG_VALUE_BYTES:
                continue
            longest = pc.max(pc.binary_length(values)).as_py()
            if longest is not None and longest > LONG_VALUE_BYTES:
                low, high = (s.as_py() for s in pc.min_max(values).values())
                column.computed.append((start, self._rows, low, high))

    def resolve(self, metadata: pq.FileMetaData) -> None:
        """Merge each column's row group bounds from the written file's footer."""
        row_groups = [metadata.row_group(r) for r in range(metadata.num_row_groups)]
        for index, column in self._columns.items():
            self._bounds[index] = _merged(column, row_groups)

    def bounds(self, index: int) -> tuple[Any, Any] | None:
        """(min, max) of column ``index``'s non-null values, as ``pc.min_max(...).as_py()``
        gives them (timestamps as integers of the Arrow unit, DATE and TIME as integers);
        (None, None) when it has none; None when unknown."""
        return self._bounds[index]


def _merged(column: _Column, row_groups: Iterable[pq.RowGroupMetaData]) -> tuple[Any, Any] | None:
    lows = [low for _, _, low, _ in column.computed if low is not None]
    highs = [high for _, _, _, high in column.computed if high is not None]
    start = 0
    for row_group in row_groups:
        end = start + row_group.num_rows
        covered = any(s <= start and end <= e for s, e, _, _ in column.computed)
        start = end
        if covered:
            continue
        stats = row_group.column(column.leaf).statistics
        if stats is None:
            if row_group.num_rows:
                return None
            continue
        if stats.has_min_max:
            lows.append(_value(stats.min_raw, column.arrow_type))
            highs.append(_value(stats.max_raw, column.arrow_type))
        elif not stats.has_null_count or stats.num_values:
            return None  # values without statistics
    if not lows:
        return None, None
    return min(lows), max(highs)


def _value(raw: Any, arrow_type: pa.DataType) -> Any:
    """A Parquet statistics value (physical) as the Arrow column's ``as_py`` convention."""
    if pa.types.is_string(arrow_type):
        return bytes(raw).decode("utf-8")
    if pa.types.is_binary(arrow_type):
        return bytes(raw)
    if pa.types.is_decimal(arrow_type):
        unscaled = raw if isinstance(raw, int) else int.from_bytes(raw, "big", signed=True)
        return Decimal(f"{unscaled}E-{arrow_type.scale}")
    if pa.types.is_timestamp(arrow_type) and arrow_type.unit == "s":
        return raw // 1000  # Parquet has no seconds: the writer stores millis
    return raw
