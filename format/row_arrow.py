"""Arrow record batches <-> ``.row`` values in the Arrow dialect of ``row_codec``.

Arrow types are those of ``arrow_types.to_arrow_type``. Each column is cast once to a storage
type whose Python values the codec takes directly: timestamps become int64 in their unit,
DATE and TIME int32, strings binary (so reading validates UTF-8 in one cast back). Rows are
then assembled from whole-column ``to_pylist`` calls, and columns are rebuilt from row values
with one ``pa.array`` per column, never per value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

import pyarrow as pa

from paimond.format.arrow_types import to_arrow_field, to_arrow_type
from paimond.format.types import RowType


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with temporal types as integers and strings as binary, recursively."""
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
        return pa.int32()
    if pa.types.is_string(arrow_type):
        return pa.binary()
    if pa.types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(storage_type(arrow_type.key_type)),
                       arrow_type.item_field.with_type(storage_type(arrow_type.item_type)))
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(storage_type(arrow_type.value_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(storage_type(f.type)) for f in arrow_type])
    return arrow_type


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
        storage = storage_type(expected)
        try:
            if column.type != expected:
                column = column.cast(expected)
            if storage != expected:
                column = column.cast(storage)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise TypeError(f"column {field.name} of type {column.type} does not fit "
                            f"{field.type}: {exc}") from None
        columns.append(column.to_pylist())
    return zip(*columns, strict=True)


def rows_batch(rows: Sequence[Sequence[Any]], row_type: RowType,
               projection: Sequence[int]) -> pa.RecordBatch:
    """A record batch of the ``projection`` columns of Arrow-dialect ``rows``.

    Raises ``pa.ArrowException`` for values Arrow rejects (invalid UTF-8 in a string, a NULL
    map key, a value beyond a decimal's precision)."""
    fields = [row_type.fields[i] for i in projection]
    schema = pa.schema([to_arrow_field(f) for f in fields])
    if not fields:
        return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), type=pa.struct([])))
    arrays = []
    for i, arrow_field in zip(projection, schema, strict=True):
        storage = storage_type(arrow_field.type)
        array = pa.array(list(map(itemgetter(i), rows)), type=storage)
        arrays.append(array if storage == arrow_field.type else array.cast(arrow_field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
