"""Parquet INT96 timestamps for TIMESTAMP(7..9) and TIMESTAMP_LTZ(7..9): Java
``ParquetSchemaConverter.createTimestampWithLogicalType`` and ``ParquetRowDataWriter
.TimestampInt96Writer`` (apache/paimon 5dacde516b, ``paimon-format/.../format/parquet``).

Java writes precision > 6 as INT96 (8 little-endian bytes of nanoseconds of the day, then 4
of the Julian day) and nothing else as INT96. pyarrow can only write every timestamp column
of a file as INT96 or none, so the nanosecond columns are written as FIXED_LEN_BYTE_ARRAY(12)
holding the INT96 bytes, without statistics (hence without a column index), and the footer is
then rewritten to declare them INT96: PLAIN and dictionary pages of the two types are the same
bytes, and the chunk is then what pyarrow writes for an INT96 column. The ``ARROW:schema``
footer entry is replaced by the logical schema, so pyarrow readers get ``timestamp[ns]`` (with
its time zone) back.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError
from paimond.format.parquet.thrift_compact import I32, Field, Items, decode_struct, encode_struct, field

JULIAN_DAY_OF_EPOCH = 2_440_588
NANOS_PER_DAY = 86_400 * 10**9
INT96 = pa.binary(12)
_PARQUET_INT96, _PARQUET_FIXED_LEN_BYTE_ARRAY = 3, 7
_INT96_LAYOUT = np.dtype([("nanos_of_day", "<i8"), ("julian_day", "<i4")])  # packed: 12 bytes
_ARROW_SCHEMA_KEY = b"ARROW:schema"


def is_nanos(arrow_type: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(arrow_type) and arrow_type.unit == "ns")


def storage_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with every nanosecond timestamp, however nested, as ``binary(12)``."""
    if is_nanos(arrow_type):
        return INT96
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(storage_type(arrow_type.value_type)))
    if pa.types.is_map(arrow_type):
        return pa.map_(arrow_type.key_field.with_type(storage_type(arrow_type.key_type)),
                       arrow_type.item_field.with_type(storage_type(arrow_type.item_type)))
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(storage_type(f.type)) for f in arrow_type])
    return arrow_type


def storage_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(storage_type(f.type)) for f in schema], metadata=schema.metadata)


def int96_paths(schema: pa.Schema) -> frozenset[tuple[str, ...]]:
    """Parquet column paths (``path_in_schema``) of the nanosecond leaves."""
    return parquet_paths(schema, is_nanos)


def parquet_paths(schema: pa.Schema, leaf: Callable[[pa.DataType], bool]
                  ) -> frozenset[tuple[str, ...]]:
    """Parquet column paths of the leaves whose type is ``leaf``, as pyarrow names the levels
    of lists (``list``, ``element``) and maps (``key_value``, ``key``/``value``)."""
    return frozenset(p for f in schema for p in _paths((f.name,), f.type, leaf))


def _paths(path: tuple[str, ...], arrow_type: pa.DataType, leaf: Callable[[pa.DataType], bool]
           ) -> list[tuple[str, ...]]:
    if pa.types.is_list(arrow_type):
        return _paths((*path, "list", "element"), arrow_type.value_type, leaf)
    if pa.types.is_map(arrow_type):
        return [*_paths((*path, "key_value", "key"), arrow_type.key_type, leaf),
                *_paths((*path, "key_value", "value"), arrow_type.item_type, leaf)]
    if pa.types.is_struct(arrow_type):
        return [p for f in arrow_type for p in _paths((*path, f.name), f.type, leaf)]
    return [path] if leaf(arrow_type) else []


def encode_int96(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` (its ``storage_type``): nanosecond timestamps as INT96 bytes."""
    if array.type.equals(target):
        return array
    if is_nanos(array.type):
        return _int96_values(array)
    if len(array) == 0:
        return pa.array([], type=target)
    mask = pc.is_null(array) if array.null_count else None
    if pa.types.is_list(array.type) or pa.types.is_map(array.type):
        # Offsets from 0 and only the values they cover: pyarrow takes no sliced offsets
        # with a mask.
        start, end = array.offsets[0].as_py(), array.offsets[-1].as_py()
        offsets = pc.subtract(array.offsets, pa.scalar(start, pa.int32()))
        if pa.types.is_list(array.type):
            values = encode_int96(array.values.slice(start, end - start), target.value_type)
            return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
        keys = encode_int96(array.keys.slice(start, end - start), target.key_type)
        items = encode_int96(array.items.slice(start, end - start), target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if pa.types.is_struct(array.type):
        children = [encode_int96(array.field(i), f.type) for i, f in enumerate(target)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    raise CodecError(f"a column of type {array.type} cannot be stored as {target}")


def _int96_values(array: pa.Array) -> pa.Array:
    nanos = pc.fill_null(array.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    days, nanos_of_day = np.divmod(nanos, NANOS_PER_DAY)  # floor: nanos of day stay >= 0
    values = np.empty(len(nanos), dtype=_INT96_LAYOUT)
    values["nanos_of_day"] = nanos_of_day
    values["julian_day"] = days + JULIAN_DAY_OF_EPOCH
    validity = pc.is_valid(array).buffers()[1] if array.null_count else None
    return pa.Array.from_buffers(INT96, len(array), [validity, pa.py_buffer(values.tobytes())],
                                 null_count=array.null_count)


def declare_int96(footer: bytes, paths: frozenset[tuple[str, ...]], logical: pa.Schema) -> bytes:
    """The Parquet footer (``FileMetaData`` bytes) with the ``binary(12)`` columns at ``paths``
    declared INT96 and ``ARROW:schema`` set to ``logical``. Raises CodecError if a path is not
    a 12-byte FIXED_LEN_BYTE_ARRAY column of the footer."""
    meta = decode_struct(footer)
    found = _retype_schema(_items(meta, 2), paths)
    if found != paths:
        raise CodecError(f"parquet footer lacks the INT96 columns {sorted(paths - found)}")
    for row_group in _items(meta, 4):
        for chunk in _items(row_group, 1):
            column = _struct(chunk, 3)
            names = _texts(column, 3)
            if names in paths:
                _set_type(column, _PARQUET_INT96)
    for entry in _items(meta, 5) if field(meta, 5) is not None else []:
        key, value = field(entry, 1), field(entry, 2)
        if key is not None and key.value == _ARROW_SCHEMA_KEY and value is not None:
            value.value = base64.b64encode(logical.serialize().to_pybytes())
    return encode_struct(meta)


class Int96FooterSink:
    """The stream a ParquetWriter writes into: passes writes through to ``sink`` until
    ``capturing``, then keeps them; what the writer writes on close ends with the footer,
    which ``declared_tail`` rewrites."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink = sink
        self._captured = bytearray()
        self.capturing = False
        self.closed = False

    def write(self, data: bytes) -> int:
        if self.capturing:
            self._captured += data
        else:
            self._sink.write(data)
        return len(data)

    def tell(self) -> int:
        return self._sink.tell() + len(self._captured)

    def flush(self) -> None:
        if not self.capturing:
            self._sink.flush()

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def declared_tail(self, paths: frozenset[tuple[str, ...]], logical: pa.Schema) -> bytes:
        """The captured tail with its footer declaring ``paths`` INT96."""
        tail = bytes(self._captured)
        footer_size = int.from_bytes(tail[-8:-4], "little")
        if tail[-4:] != b"PAR1" or footer_size + 8 > len(tail):
            raise CodecError("pyarrow wrote a parquet footer this writer did not capture")
        footer = declare_int96(tail[-8 - footer_size:-8], paths, logical)
        return tail[:-8 - footer_size] + footer + len(footer).to_bytes(4, "little") + b"PAR1"


def _retype_schema(elements: list[list[Field]], paths: frozenset[tuple[str, ...]]
                   ) -> set[tuple[str, ...]]:
    """Walks the flattened ``SchemaElement`` list (root first, children after their group)."""
    found: set[tuple[str, ...]] = set()
    stack: list[tuple[tuple[str, ...], int]] = []  # (path of a group, children still to come)
    for i, element in enumerate(elements):
        path = (*stack[-1][0], _name(element)) if stack else ()
        if stack:
            stack[-1] = (stack[-1][0], stack[-1][1] - 1)
        children = _int(element, 5)
        if children:
            stack.append((path, children))
        elif i > 0 and path in paths:
            if _int(element, 1) != _PARQUET_FIXED_LEN_BYTE_ARRAY or _int(element, 2) != 12:
                raise CodecError(f"parquet column {'.'.join(path)} is not FIXED_LEN_BYTE_ARRAY(12)")
            _set_type(element, _PARQUET_INT96)
            element[:] = [f for f in element if f.field_id != 2]  # no type_length
            found.add(path)
        while stack and stack[-1][1] == 0:
            stack.pop()
    return found


def _set_type(fields: list[Field], parquet_type: int) -> None:
    fields[:] = [Field(1, I32, parquet_type) if f.field_id == 1 else f for f in fields]


def _int(fields: list[Field], field_id: int) -> int | None:
    found = field(fields, field_id)
    return found.value if found is not None and isinstance(found.value, int) else None


def _name(fields: list[Field]) -> str:
    found = field(fields, 4)
    if found is None or not isinstance(found.value, bytes):
        raise CodecError("a parquet schema element has no name")
    return found.value.decode()


def _items(fields: list[Field], field_id: int) -> list[list[Field]]:
    found = field(fields, field_id)
    if found is None or not isinstance(found.value, Items):
        raise CodecError(f"parquet footer struct lacks list field {field_id}")
    return found.value.values  # type: ignore[return-value]  # Parquet's lists here hold structs


def _texts(fields: list[Field], field_id: int) -> tuple[str, ...]:
    """A list of strings (a column's ``path_in_schema``)."""
    found = field(fields, field_id)
    if found is None or not isinstance(found.value, Items):
        raise CodecError(f"parquet footer struct lacks list field {field_id}")
    if not all(isinstance(value, bytes) for value in found.value.values):
        raise CodecError(f"parquet footer list field {field_id} holds other than strings")
    return tuple(value.decode() for value in found.value.values)  # type: ignore[union-attr]


def _struct(fields: list[Field], field_id: int) -> list[Field]:
    found = field(fields, field_id)
    if found is None or not isinstance(found.value, list):
        raise CodecError(f"parquet footer struct lacks struct field {field_id}")
    return found.value
