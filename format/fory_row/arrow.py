"""Arrow record batches <-> rows of the Fory standard row format.

Java: ``org.apache.fory.format.vectorized.ArrowWriter`` and ``ArrowUtils`` (apache/fory
v1.6.1); pyfory 1.7.7 ``pyfory.format.columnar``.

Each column is cast once to a storage type whose Python values the row codec takes directly
(timestamps and durations int64 microseconds, dates int32 days), turned into Python values
with one ``to_pylist`` per column, and rows are encoded from those. Decoding goes the other
way: rows decode to tuples, the tuples are transposed, and each column is built with one
``pa.array`` call of the schema's own type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from paimond.errors import CodecError
from paimond.format.fory_row.layout import compile_schema
from paimond.format.fory_row.reader import fields_reader
from paimond.format.fory_row.writer import Writer, writer

_STORAGE = {"date32": pa.int32(), "timestamp": pa.int64(), "duration": pa.int64()}


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with every date, timestamp and duration inside it as its integer."""
    types = pa.types
    if types.is_struct(arrow_type):
        return pa.struct([f.with_type(storage_type(f.type)) for f in arrow_type])
    if types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(storage_type(arrow_type.key_type)),
                       arrow_type.item_field.with_type(storage_type(arrow_type.item_type)))
    if types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(storage_type(arrow_type.value_type)))
    if types.is_large_list(arrow_type):
        return pa.large_list(arrow_type.value_field.with_type(storage_type(arrow_type.value_type)))
    if types.is_date32(arrow_type):
        return _STORAGE["date32"]
    if types.is_timestamp(arrow_type) or types.is_duration(arrow_type):
        return _STORAGE["timestamp"]
    return arrow_type


def encode_batch(batch: pa.RecordBatch | pa.Table) -> list[bytes]:
    """One row per record of ``batch``, in order; raises UnsupportedError for a column type
    Fory has not (timestamps and durations must be in microseconds)."""
    write = writer(compile_schema(batch.schema))
    columns = [column.cast(storage_type(column.type)).to_pylist() for column in batch.columns]
    if not columns:
        return [_encode(write, ()) for _ in range(batch.num_rows)]
    return [_encode(write, values) for values in zip(*columns, strict=True)]


def _encode(write: Writer, values: Any) -> bytes:
    out = bytearray()
    write(out, values)
    return bytes(out)


def decode_rows(rows: Iterable[bytes | bytearray | memoryview], schema: pa.Schema) -> pa.RecordBatch:
    """A record batch of ``schema`` from encoded rows; raises CodecError for malformed rows or
    values the schema's Arrow types reject (such as a null map key)."""
    read = fields_reader(compile_schema(schema))
    decoded = []
    for row in rows:
        buf = row if isinstance(row, bytes) else bytes(row)
        decoded.append(read(buf, 0, len(buf)))
    if not schema:
        return pa.RecordBatch.from_struct_array(pa.array([{}] * len(decoded), pa.struct([])))
    columns = list(zip(*decoded, strict=True)) if decoded else [()] * len(schema)
    arrays = []
    for field, values in zip(schema, columns, strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            raise CodecError(f"column {field.name!r} does not fit {field.type}: {exc}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
