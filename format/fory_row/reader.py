"""Decoding the Fory standard row format with every offset and size checked.

Java: ``org.apache.fory.format.row.binary.BinaryRow``, ``BinaryArray`` and ``BinaryMap``
(getters in ``UnsafeTrait``); C++: ``fory::row::Row``, ``ArrayData`` and ``MapData``
(apache/fory v1.6.1).

A reader gets the buffer and the start and size of one value, an extent its parent has checked
lies inside the buffer. Before following any offset it checks that the target lies inside that
extent and after the fixed region (a row's slots, an array's elements), so malformed bytes
raise :class:`CodecError` and nothing reads outside the value. Null bits past the last field
or element, strings that are not UTF-8, decimals that are not 32 bytes or overflow their
precision, and maps whose key and value counts differ are errors too.
"""

from __future__ import annotations

import decimal
import functools
import struct
from collections.abc import Callable
from typing import Any

from paimond.errors import CodecError
from paimond.format.fory_row.layout import (
    DECIMAL_SIZE_BYTES,
    U64,
    Node,
    array_header_size,
    bitmap_size,
    slot_format,
)

Reader = Callable[[bytes, int, int], Any]
"""``(buffer, start, size) -> value`` of one variable-width value."""
FieldsReader = Callable[[bytes, int, int], list[Any]]
"""``(buffer, start, size) -> field values`` of one row."""

_LOW32 = 0xFFFFFFFF
_DECIMAL_CONTEXT = decimal.Context(prec=200)


def reader(node: Node) -> Reader:
    """The reader of a variable-width node; a struct reads as a dict by field name."""
    return _reader(node)


@functools.lru_cache(maxsize=1024)
def fields_reader(node: Node) -> FieldsReader:
    """The reader of a struct node's fields, in order, None for nulls."""
    num_fields = len(node.children)
    words = bitmap_size(num_fields) // 8
    fixed = struct.Struct(slot_format(node))
    row_fixed = fixed.size
    variable = tuple((i, _reader(child)) for i, child in enumerate(node.children) if not child.code)

    def read(buf: bytes, start: int, size: int) -> list[Any]:
        if size < row_fixed:
            raise CodecError(f"row of {size} bytes is shorter than the {row_fixed}-byte fixed "
                             f"region of its {num_fields} fields")
        values = fixed.unpack_from(buf, start)
        null_bits = values[0] if words == 1 else _join_words(values[:words])
        fields = list(values[words:])
        if null_bits:
            if null_bits >> num_fields:
                raise CodecError(f"null bits set past the {num_fields} fields of a row")
            _set_nulls(fields, null_bits)
        for i, read_value in variable:
            slot = fields[i]
            if slot is not None:
                offset, length = slot >> 32, slot & _LOW32
                if offset < row_fixed or offset + length > size:
                    raise CodecError(_outside("field", i, offset, length, row_fixed, size))
                fields[i] = read_value(buf, start + offset, length)
        return fields

    return read


def _join_words(words: tuple[int, ...]) -> int:
    return sum(word << (64 * k) for k, word in enumerate(words))


def _set_nulls(items: list[Any], null_bits: int) -> None:
    while null_bits:
        lowest = null_bits & -null_bits
        items[lowest.bit_length() - 1] = None
        null_bits ^= lowest


def _outside(what: str, i: int, offset: int, length: int, lower: int, size: int) -> str:
    return (f"{what} {i} points at {length} bytes at offset {offset}, outside the variable "
            f"region [{lower}, {size}) of its {size}-byte container")


@functools.lru_cache(maxsize=1024)
def _reader(node: Node) -> Reader:
    if node.kind == "struct":
        return _struct_reader(node)
    if node.kind == "list":
        return _list_reader(node.children[0])
    if node.kind == "map":
        return _map_reader(node)
    if node.kind == "string":
        return _read_string
    if node.kind == "binary":
        return _read_binary
    if node.kind == "decimal":
        return _decimal_reader(node.precision, node.scale)
    raise AssertionError(f"{node.kind} is fixed-width")


def _struct_reader(node: Node) -> Reader:
    read_fields = fields_reader(node)
    names = node.names

    def read(buf: bytes, start: int, size: int) -> dict[str, Any]:
        return dict(zip(names, read_fields(buf, start, size), strict=True))

    return read


def _list_reader(element: Node) -> Reader:
    code, width = element.code or "Q", element.width
    read_element = None if element.code else _reader(element)

    def read(buf: bytes, start: int, size: int) -> list[Any]:
        if size < 8:
            raise CodecError(f"array of {size} bytes has no element count")
        count = U64.unpack_from(buf, start)[0]
        if count > size:  # every element takes at least a byte: no huge allocation below
            raise CodecError(f"array of {size} bytes claims {count} elements")
        header = array_header_size(count)
        data_end = header + (count * width + 7) // 8 * 8
        if data_end > size:
            raise CodecError(f"array of {count} {element.kind} elements needs {data_end} bytes, "
                             f"has {size}")
        items = list(struct.unpack_from(f"<{count}{code}", buf, start + header))
        null_bits = int.from_bytes(buf[start + 8:start + header], "little")
        if null_bits:
            if null_bits >> count:
                raise CodecError(f"null bits set past the {count} elements of an array")
            _set_nulls(items, null_bits)
        if read_element is not None:
            for i, slot in enumerate(items):
                if slot is not None:
                    offset, length = slot >> 32, slot & _LOW32
                    if offset < data_end or offset + length > size:
                        raise CodecError(_outside("element", i, offset, length, data_end, size))
                    items[i] = read_element(buf, start + offset, length)
        return items

    return read


def _map_reader(node: Node) -> Reader:
    read_keys = _list_reader(node.children[0])
    read_values = _list_reader(node.children[1])

    def read(buf: bytes, start: int, size: int) -> list[tuple[Any, Any]]:
        if size < 8:
            raise CodecError(f"map of {size} bytes has no key-array size")
        keys_size = U64.unpack_from(buf, start)[0]
        if keys_size > size - 8:
            raise CodecError(f"map key array of {keys_size} bytes does not fit in {size} bytes")
        keys = read_keys(buf, start + 8, keys_size)
        values = read_values(buf, start + 8 + keys_size, size - 8 - keys_size)
        if len(keys) != len(values):
            raise CodecError(f"map has {len(keys)} keys but {len(values)} values")
        return list(zip(keys, values, strict=True))

    return read


def _read_string(buf: bytes, start: int, size: int) -> str:
    try:
        return str(buf[start:start + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"string of {size} bytes is not UTF-8 ({exc.reason} at byte "
                         f"{exc.start})") from None


def _read_binary(buf: bytes, start: int, size: int) -> bytes:
    return buf[start:start + size]


def _decimal_reader(precision: int, scale: int) -> Reader:
    limit = 10**precision

    def read(buf: bytes, start: int, size: int) -> decimal.Decimal:
        return decimal.Decimal(read_unscaled(buf, start, size, limit)).scaleb(-scale, _DECIMAL_CONTEXT)

    return read


def read_unscaled(buf: bytes, start: int, size: int, limit: int) -> int:
    """The unscaled value of a decimal, checked to have fewer digits than ``limit``'s."""
    if size != DECIMAL_SIZE_BYTES:
        raise CodecError(f"decimal of {size} bytes, expected {DECIMAL_SIZE_BYTES}")
    unscaled = int.from_bytes(buf[start:start + size], "little", signed=True)
    if not -limit < unscaled < limit:
        raise CodecError(f"decimal unscaled value {unscaled} has more than "
                         f"{len(str(limit)) - 1} digits")
    return unscaled

