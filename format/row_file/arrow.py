"""Arrow record batches <-> ``.row`` values in the Arrow dialect of ``row_codec``.

Arrow types are those of ``arrow_types.to_arrow_type``. Each column is cast once to a storage
type whose Python values the codec takes directly: timestamps become int64 in their unit,
DATE and TIME int32, strings binary (so reading validates UTF-8 in one cast back), and
DECIMAL(p <= 18, s) its unscaled int64 (a zero-copy view as DECIMAL(p, 0), then a cast; read
back through DECIMAL(19, 0) and a view, with a full validation for the precision). Rows are
then assembled from whole-column ``to_pylist`` calls, and columns are rebuilt from row values
with one ``pa.array`` per column, never per value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Any

import pyarrow as pa

from paimond.format.types.arrow_types import to_arrow_field, to_arrow_type
from paimond.format.types.data_types import RowType


def _map_type(arrow_type: pa.DataType, leaf: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """``arrow_type`` with ``leaf`` applied to every non-nested type inside it."""
    if pa.types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(_map_type(arrow_type.key_type, leaf)),
                       arrow_type.item_field.with_type(_map_type(arrow_type.item_type, leaf)))
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_map_type(arrow_type.value_type, leaf)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_map_type(f.type, leaf)) for f in arrow_type])
    return leaf(arrow_type)


def _is_compact_decimal(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_decimal128(arrow_type) and arrow_type.precision <= 18)


def _storage_leaf(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(arrow_type) or _is_compact_decimal(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
        return pa.int32()
    return pa.binary() if pa.types.is_string(arrow_type) else arrow_type


def _unscaled_leaf(arrow_type: pa.DataType) -> pa.DataType:
    return pa.decimal128(arrow_type.precision, 0) if _is_compact_decimal(arrow_type) else arrow_type


def _widened_leaf(arrow_type: pa.DataType) -> pa.DataType:
    return pa.decimal128(19, 0) if _is_compact_decimal(arrow_type) else arrow_type


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type whose Python values are the Arrow dialect of ``arrow_type``."""
    return _map_type(arrow_type, _storage_leaf)


def _has_compact_decimal(arrow_type: pa.DataType) -> bool:
    return bool(_map_type(arrow_type, _widened_leaf) != arrow_type)


def _view(column: Any, arrow_type: pa.DataType) -> Any:
    """A zero-copy view of an Array or ChunkedArray as another type of the same layout."""
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([c.view(arrow_type) for c in column.chunks], type=arrow_type)
    return column.view(arrow_type)


def batch_rows(batch: pa.RecordBatch | pa.Table, row_type: RowType) -> Iterable[Sequence[Any]]:
    """The rows of ``batch`` (columns in ``row_type`` order) as Arrow-dialect values.

    Raises ValueError for a wrong column count and TypeError for a column whose type does not
    cast to the field's Arrow type."""
    fields = row_type.fields
    if batch.num_columns != len(fields):
        raise ValueError(f"batch has {batch.num_columns} columns, the row type {len(fields)}")
    if not fields:
        return [()] * batch.num_rows
    columns = []
    for column, field in zip(batch.columns, fields, strict=True):
        expected = to_arrow_type(field.type)
        try:
            if column.type != expected:
                column = column.cast(expected)
            if _has_compact_decimal(expected):
                column = _view(column, _map_type(expected, _unscaled_leaf))
            column = column.cast(storage_type(expected))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TypeError(f"column {field.name} of type {column.type} does not fit "
                            f"{field.type}: {exc}") from None
        columns.append(column.to_pylist())
    return zip(*columns, strict=True)


def rows_batch(rows: Sequence[Sequence[Any]], row_type: RowType,
               projection: Sequence[int]) -> pa.RecordBatch:
    """A record batch of the ``projection`` columns of Arrow-dialect ``rows``.

    Raises ``pa.ArrowException`` for values Arrow rejects (invalid UTF-8 in a string, a NULL
    map key, a DECIMAL beyond its precision) and OverflowError for values beyond the range
    of their Arrow type."""
    fields = [row_type.fields[i] for i in projection]
    schema = pa.schema([to_arrow_field(f) for f in fields])
    if not fields:
        return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), type=pa.struct([])))
    arrays = []
    for i, arrow_field in zip(projection, schema, strict=True):
        final, storage = arrow_field.type, storage_type(arrow_field.type)
        array = pa.array(list(map(itemgetter(i), rows)), type=storage)
        if _has_compact_decimal(final):
            array = array.cast(_map_type(final, _widened_leaf)).view(final)
            array.validate(full=True)
        elif storage != final:
            array = array.cast(final)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
