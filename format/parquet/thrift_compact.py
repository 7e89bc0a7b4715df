"""Thrift's compact protocol as a generic tree, enough to rewrite a Parquet footer
(``FileMetaData``, apache/parquet-format ``parquet.thrift``) without its IDL.

A struct decodes to a list of :class:`Field` in wire order; lists and sets to :class:`Items`.
Encoding a decoded struct gives back the same bytes, so a footer can be edited a field at a
time and everything this module does not touch (future fields included) is kept.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from paimond.errors import CodecError

STOP, TRUE, FALSE, I8, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(13)


@dataclass(slots=True)
class Items:
    """A list or set: its element type and elements."""

    element_type: int
    values: list[Value]


@dataclass(slots=True)
class Field:
    field_id: int
    field_type: int  # TRUE or FALSE for booleans: the value is in the type
    value: Value


Value = int | float | bytes | bool | Items | list[Field]
_MAX_DEPTH = 64


def decode_struct(data: bytes) -> list[Field]:
    """The struct at the start of ``data``. Raises CodecError for bytes that do not parse."""
    try:
        fields, _ = _read_struct(memoryview(data), 0, 0)
    except (IndexError, struct.error, RecursionError) as error:
        raise CodecError(f"thrift compact struct does not parse: {error!r}") from None
    return fields


def encode_struct(fields: list[Field]) -> bytes:
    out = bytearray()
    _write_struct(out, fields)
    return bytes(out)


def field(fields: list[Field], field_id: int) -> Field | None:
    """The field ``field_id`` of a decoded struct, if present."""
    return next((f for f in fields if f.field_id == field_id), None)


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 70:
            raise CodecError("thrift varint longer than 10 bytes")


def _zigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def _read_struct(data: memoryview, pos: int, depth: int) -> tuple[list[Field], int]:
    if depth > _MAX_DEPTH:
        raise CodecError("thrift struct nested too deep")
    fields: list[Field] = []
    last_id = 0
    while True:
        header = data[pos]
        pos += 1
        field_type = header & 0x0F
        if field_type == STOP:
            return fields, pos
        delta = header >> 4
        if delta:
            last_id += delta
        else:
            raw, pos = _varint(data, pos)
            last_id = _zigzag(raw)
        value: Value
        if field_type in (TRUE, FALSE):
            value = field_type == TRUE
        else:
            value, pos = _read_value(data, pos, field_type, depth)
        fields.append(Field(last_id, field_type, value))


def _read_value(data: memoryview, pos: int, value_type: int, depth: int) -> tuple[Value, int]:
    if value_type in (TRUE, FALSE):  # a boolean element of a list: one byte
        return data[pos] == TRUE, pos + 1
    if value_type == I8:
        return struct.unpack_from("<b", data, pos)[0], pos + 1
    if value_type in (I16, I32, I64):
        raw, pos = _varint(data, pos)
        return _zigzag(raw), pos
    if value_type == DOUBLE:
        return struct.unpack_from("<d", data, pos)[0], pos + 8
    if value_type == BINARY:
        size, pos = _varint(data, pos)
        if pos + size > len(data):
            raise CodecError("thrift binary runs past the end")
        return bytes(data[pos:pos + size]), pos + size
    if value_type in (LIST, SET):
        header = data[pos]
        pos += 1
        size, element_type = header >> 4, header & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        values = []
        for _ in range(size):
            value, pos = _read_value(data, pos, element_type, depth + 1)
            values.append(value)
        return Items(element_type, values), pos
    if value_type == STRUCT:
        return _read_struct(data, pos, depth + 1)
    raise CodecError(f"thrift type {value_type} is not supported here")  # maps: none in Parquet


def _write_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _write_zigzag(out: bytearray, value: int) -> None:
    _write_varint(out, (value << 1) ^ (value >> 63))


def _write_struct(out: bytearray, fields: list[Field]) -> None:
    last_id = 0
    for f in fields:
        delta = f.field_id - last_id
        field_type = (TRUE if f.value else FALSE) if f.field_type in (TRUE, FALSE) else f.field_type
        if 0 < delta <= 15:
            out.append(delta << 4 | field_type)
        else:
            out.append(field_type)
            _write_zigzag(out, f.field_id)
        last_id = f.field_id
        if f.field_type not in (TRUE, FALSE):
            _write_value(out, f.field_type, f.value)
    out.append(STOP)


def _write_value(out: bytearray, value_type: int, value: Value) -> None:
    if value_type in (TRUE, FALSE):
        out.append(TRUE if value else FALSE)
    elif value_type == I8:
        out += struct.pack("<b", value)
    elif value_type in (I16, I32, I64):
        assert isinstance(value, int)
        _write_zigzag(out, value)
    elif value_type == DOUBLE:
        out += struct.pack("<d", value)
    elif value_type == BINARY:
        assert isinstance(value, bytes)
        _write_varint(out, len(value))
        out += value
    elif value_type in (LIST, SET):
        assert isinstance(value, Items)
        size = len(value.values)
        if size < 15:
            out.append(size << 4 | value.element_type)
        else:
            out.append(0xF0 | value.element_type)
            _write_varint(out, size)
        for element in value.values:
            _write_value(out, value.element_type, element)
    elif value_type == STRUCT:
        assert isinstance(value, list)
        _write_struct(out, value)
    else:
        raise CodecError(f"thrift type {value_type} is not supported here")
