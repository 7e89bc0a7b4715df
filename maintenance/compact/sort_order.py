"""The row order of a sort compaction: Paimon's ``TableSorter`` strategies ``order``,
``zorder`` and ``hilbert`` (Spark ``OrderSorter``, ``ZorderSorter``, ``HilbertSorter``,
apache/paimon 5dacde516b) on an Arrow table.

``order`` sorts by the columns, ascending, nulls first (Spark's default); ``zorder`` and
``hilbert`` sort by the key bytes of :mod:`paimond.format.binary.sort_keys`, unsigned
lexicographically. Rows with equal keys keep their input order (a stable sort; Spark's is
not, so Java leaves their order open).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.binary.sort_keys import hilbert_key, sortable, zorder_key
from paimond.format.types.data_types import (
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataField,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

STRATEGIES = ("order", "zorder", "hilbert")


def check_sort_columns(fields: Sequence[DataField], partition_keys: Sequence[str],
                       strategy: str, columns: Sequence[str]) -> None:
    """Java's checks before sorting: known columns, none a partition key, Hilbert on two
    or more, key types the indexers take. Raises UnsupportedError."""
    if strategy not in STRATEGIES:
        raise UnsupportedError(f"order strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
    by_name = {f.name: f for f in fields}
    if not columns:
        raise UnsupportedError("a sort compaction needs columns to order by")
    for name in columns:
        if name not in by_name:
            raise UnsupportedError(f"no column {name!r} to order by")
        if name in partition_keys:
            raise UnsupportedError(f"order by a partition column ({name}) is meaningless")
        if strategy != "order" and not sortable(by_name[name].type):
            raise UnsupportedError(f"{strategy} by a {by_name[name].type} column ({name})")
    if strategy == "hilbert" and len(columns) < 2:
        raise UnsupportedError("Hilbert sort needs at least two columns")


def _python_values(array: pa.ChunkedArray, data_type: DataType) -> list[object]:
    """A column as the values ``sort_keys`` takes: DATE as days, TIME and TIMESTAMP as
    millis (floored, as Java's ``Timestamp.getMillisecond``)."""
    if isinstance(data_type, DateType):
        return list(pc.cast(array, pa.int32()).to_pylist())
    if isinstance(data_type, (TimeType, TimestampType, LocalZonedTimestampType)):
        unit = array.type.unit
        raw = pc.cast(array, pa.int64()).to_pylist()
        if unit in ("s", "ms"):
            return [None if v is None else v * (1000 if unit == "s" else 1) for v in raw]
        per_milli = 1000 if unit == "us" else 1_000_000
        return [None if v is None else v // per_milli for v in raw]
    return list(array.to_pylist())


def sort_key_column(table: pa.Table, fields: Sequence[DataField], strategy: str,
                    columns: Sequence[str], var_type_size: int = 8) -> pa.Array:
    """The ``zorder`` or ``hilbert`` key of each row, as binary values that sort as the rows
    do (unsigned, lexicographically): what an external sort compares across its runs."""
    if strategy == "zorder":
        words = zorder_words(table, fields, columns, var_type_size)
        if words is not None:  # big-endian words: byte order is the words' order
            width = 8 * words.shape[1]
            data = np.ascontiguousarray(words.astype(">u8")).tobytes()
            offsets = np.arange(0, (len(words) + 1) * width, width, dtype=np.int64)
            return pa.LargeBinaryArray.from_buffers(
                pa.large_binary(), len(words), [None, pa.py_buffer(offsets.tobytes()),
                                                pa.py_buffer(data)])
    by_name = {f.name: f for f in fields}
    types = [by_name[c].type for c in columns]
    values = [_python_values(table.column(c), t) for c, t in zip(columns, types, strict=True)]
    if strategy == "zorder":
        return pa.array([zorder_key(row, types, var_type_size)
                         for row in zip(*values, strict=True)], pa.large_binary())
    return pa.array([hilbert_key(row, types) for row in zip(*values, strict=True)],
                    pa.large_binary())


def sort_indices(table: pa.Table, fields: Sequence[DataField], strategy: str,
                 columns: Sequence[str], var_type_size: int = 8) -> pa.Array:
    """The permutation that puts ``table``'s rows in the strategy's order."""
    if strategy == "order":
        return pc.sort_indices(table, sort_keys=[(c, "ascending") for c in columns],
                               null_placement="at_start")
    if strategy == "zorder":
        words = zorder_words(table, fields, columns, var_type_size)
        if words is not None:  # np.lexsort: stable, its last key the most significant
            order = np.lexsort([words[:, i] for i in reversed(range(words.shape[1]))])
            return pa.array(order, pa.uint64())
    by_name = {f.name: f for f in fields}
    types = [by_name[c].type for c in columns]
    values = [_python_values(table.column(c), t) for c, t in zip(columns, types, strict=True)]
    key: Callable[[Sequence[object]], bytes]
    if strategy == "zorder":
        def key(row: Sequence[object]) -> bytes:
            return zorder_key(row, types, var_type_size)
    else:
        def key(row: Sequence[object]) -> bytes:
            return hilbert_key(row, types)
    keys = pa.array([key(row) for row in zip(*values, strict=True)], pa.binary())
    return pc.sort_indices(pa.table({"key": keys}), sort_keys=[("key", "ascending")])


_SIGN = np.uint64(1 << 63)
_FIXED = (TinyIntType, SmallIntType, IntType, BigIntType, DateType, TimeType, TimestampType,
          LocalZonedTimestampType, FloatType, DoubleType, BooleanType)


def _ordered_words(array: pa.ChunkedArray, data_type: DataType) -> np.ndarray:
    """A fixed-width column's z-order bytes (``zorder_column_bytes``) as big-endian uint64
    words, vectorized; nulls are zero."""
    valid = np.asarray(pc.is_valid(array).to_numpy(zero_copy_only=False), dtype=bool)
    if isinstance(data_type, BooleanType):
        flags = np.asarray(pc.fill_null(array, False).to_numpy(zero_copy_only=False), dtype=bool)
        words = np.where(flags, np.uint64(0x81 << 56), np.uint64(0))
    elif isinstance(data_type, (FloatType, DoubleType)):
        values = pc.fill_null(pc.cast(array, pa.float64()), 0.0).to_numpy(zero_copy_only=False)
        bits = np.asarray(values, dtype=np.float64).view(np.int64)
        words = (bits ^ ((bits >> 31) | np.int64(-(1 << 63)))).view(np.uint64)
    else:
        values = np.array([0 if v is None else v for v in _python_values(array, data_type)],
                          dtype=np.int64) if isinstance(
            data_type, (DateType, TimeType, TimestampType, LocalZonedTimestampType)) else np.asarray(
            pc.fill_null(pc.cast(array, pa.int64()), 0).to_numpy(zero_copy_only=False),
            dtype=np.int64)
        words = values.view(np.uint64) ^ _SIGN
    return np.where(valid, words, np.uint64(0))


def _var_words(array: pa.ChunkedArray) -> np.ndarray:
    """A character or binary column's first 8 bytes, zero-filled, as big-endian words."""
    raw = b"".join(b"\x00" * 8 if v is None else
                   (v.encode() if isinstance(v, str) else bytes(v))[:8].ljust(8, b"\x00")
                   for v in array.to_pylist())
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64)


def zorder_words(table: pa.Table, fields: Sequence[DataField], columns: Sequence[str],
                 var_type_size: int = 8) -> np.ndarray | None:
    """Every row's z-order key as rows of big-endian uint64 words (Java's bytes), vectorized
    when each column contributes 8 bytes; None otherwise (decimals, other var sizes)."""
    by_name = {f.name: f for f in fields}
    words = []
    for name in columns:
        data_type = by_name[name].type
        if isinstance(data_type, _FIXED):
            words.append(_ordered_words(table.column(name), data_type))
        elif isinstance(data_type, (CharType, VarCharType, BinaryType, VarBinaryType)) \
                and var_type_size == 8:
            words.append(_var_words(table.column(name)))
        else:
            return None
    count = len(words)
    out = np.zeros((table.num_rows, count), dtype=np.uint64)
    one = np.uint64(1)
    for bit in range(64 * count):  # bit of the key, from the most significant
        source = (words[bit % count] >> np.uint64(63 - bit // count)) & one
        out[:, bit // 64] |= source << np.uint64(63 - bit % 64)
    return out
