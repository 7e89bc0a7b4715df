"""The row order of a sort compaction: Paimon's ``TableSorter`` strategies ``order``,
``zorder`` and ``hilbert`` (Spark ``OrderSorter``, ``ZorderSorter``, ``HilbertSorter``,
apache/paimon 5dacde516b) on an Arrow table.

``order`` sorts by the columns, ascending, nulls first (Spark's default); ``zorder`` and
``hilbert`` sort by the key bytes of :mod:`paimond.format.sort_keys`, unsigned
lexicographically. Rows with equal keys keep their input order (a stable sort; Spark's is
not, so Java leaves their order open).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.sort_keys import hilbert_key, sortable, zorder_key
from paimond.format.types import (
    DataField,
    DataType,
    DateType,
    LocalZonedTimestampType,
    TimestampType,
    TimeType,
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


def sort_indices(table: pa.Table, fields: Sequence[DataField], strategy: str,
                 columns: Sequence[str], var_type_size: int = 8) -> pa.Array:
    """The permutation that puts ``table``'s rows in the strategy's order."""
    if strategy == "order":
        return pc.sort_indices(table, sort_keys=[(c, "ascending") for c in columns],
                               null_placement="at_start")
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
