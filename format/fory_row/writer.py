"""Encoding values into the Fory standard row format.

Java: ``org.apache.fory.format.row.binary.writer.BinaryRowWriter`` and ``BinaryArrayWriter``;
C++: ``fory::row::RowWriter`` and ``ArrayWriter`` (apache/fory v1.6.1).

Every value is appended at an 8-byte boundary and padded with zeros to the next one, in field
(or element) order, so equal values give equal bytes. A row's fixed region is packed in one
``struct`` call. Unlike pyfory 1.7.7, which leaves the slot of a null row field as it finds it
in its buffer, the slot is zeroed here (as Java's ``BinaryRowWriter.setNullAt`` does).
Values that do not fit their type raise ``TypeError`` or ``ValueError`` naming the field.
"""

from __future__ import annotations

import decimal
import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from paimond.format.fory_row.layout import (
    DECIMAL_SIZE_BYTES,
    MAX_OFFSET,
    PADDING,
    U64,
    Node,
    array_header_size,
    fixed_size,
    slot_format,
)

Writer = Callable[[bytearray, Any], int]
"""Appends one variable-width value (8-byte padded) and returns its size before padding."""

_PACK_ERRORS = (struct.error, OverflowError, TypeError, ValueError)
_DECIMAL_CONTEXT = decimal.Context(prec=200)  # exact: scaling never rounds a 76-digit decimal


def writer(node: Node) -> Writer:
    """The writer of a variable-width node (string, binary, decimal, list, map, struct)."""
    return _writer(node)


@functools.lru_cache(maxsize=1024)
def _writer(node: Node) -> Writer:
    if node.kind == "struct":
        return _struct_writer(node)
    if node.kind == "list":
        return _list_writer(node.children[0])
    if node.kind == "map":
        return _map_writer(node)
    if node.kind == "string":
        return _write_string
    if node.kind == "binary":
        return _write_binary
    if node.kind == "decimal":
        return functools.partial(_write_decimal, node.precision, node.scale)
    raise AssertionError(f"{node.kind} is fixed-width")


def _struct_writer(node: Node) -> Writer:
    num_fields = len(node.children)
    words = fixed_size(node) // 8 - num_fields
    fixed = struct.Struct(slot_format(node))
    placeholder = bytes(fixed.size)
    variable = tuple((i, _writer(child)) for i, child in enumerate(node.children) if not child.code)

    def write(out: bytearray, value: Any) -> int:
        fields = field_values(node, value)
        base = len(out)
        out += placeholder
        null_bits = 0
        if None in fields:
            for i, field_value in enumerate(fields):
                if field_value is None:
                    null_bits |= 1 << i
                    fields[i] = 0
        for i, write_value in variable:
            if not null_bits >> i & 1:
                offset = len(out) - base
                try:
                    size = write_value(out, fields[i])
                except _PACK_ERRORS as exc:
                    raise _field_error(node, i, exc) from None
                fields[i] = _offset_and_size(offset, size)
        try:
            fixed.pack_into(out, base, *_words(null_bits, words), *fields)
        except _PACK_ERRORS:
            raise _fixed_field_error(node, fields) from None
        return len(out) - base

    return write


def field_values(node: Node, value: Any) -> list[Any]:
    """A struct value as a list in field order: a sequence by position, a mapping by name
    (a missing name is null)."""
    if isinstance(value, Mapping):
        if any(name not in node.names for name in value):
            unknown = sorted(str(name) for name in value if name not in node.names)
            raise ValueError(f"no field named {', '.join(unknown)} in struct of {node.names}")
        return [value.get(name) for name in node.names]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"expected a sequence or mapping for a struct, got {type(value).__name__}")
    if len(value) != len(node.names):
        raise ValueError(f"{len(value)} values for a struct of {len(node.names)} fields")
    return list(value)


def _words(bits: int, words: int) -> tuple[int, ...]:
    if words == 1:
        return (bits,)
    return tuple(bits >> (64 * k) & 0xFFFFFFFFFFFFFFFF for k in range(words))


def _offset_and_size(offset: int, size: int) -> int:
    if offset > MAX_OFFSET or size > MAX_OFFSET:
        raise ValueError(f"value of {size} bytes at offset {offset} exceeds the 32-bit slot halves")
    return offset << 32 | size


def _list_writer(element: Node) -> Writer:
    code = element.code
    write_element = None if code else _writer(element)

    def write(out: bytearray, value: Any) -> int:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise TypeError(f"expected a sequence for a list, got {type(value).__name__}")
        items = list(value)
        count = len(items)
        base = len(out)
        null_bits = 0
        if None in items:
            for i, item in enumerate(items):
                if item is None:
                    null_bits |= 1 << i
                    items[i] = 0
        header = array_header_size(count)
        out += U64.pack(count)
        out += null_bits.to_bytes(header - 8, "little")
        if write_element is None:
            try:
                out += struct.pack(f"<{count}{code}", *items)
            except _PACK_ERRORS as exc:
                kind = TypeError if isinstance(exc, TypeError) else ValueError
                raise kind(f"{element.kind} list element: {exc}") from None
            out += PADDING[-len(out) & 7]
            return len(out) - base
        out += bytes(8 * count)
        for i, item in enumerate(items):
            if not null_bits >> i & 1:
                offset = len(out) - base
                U64.pack_into(out, base + header + 8 * i,
                              _offset_and_size(offset, write_element(out, item)))
        return len(out) - base

    return write


def _map_writer(node: Node) -> Writer:
    write_keys = _list_writer(node.children[0])
    write_values = _list_writer(node.children[1])

    def write(out: bytearray, value: Any) -> int:
        entries = value.items() if isinstance(value, Mapping) else value
        try:
            keys, values = zip(*entries, strict=True) if entries else ((), ())
        except (TypeError, ValueError):
            raise TypeError("expected a mapping or a sequence of (key, value) pairs for a map") from None
        base = len(out)
        out += bytes(8)
        U64.pack_into(out, base, write_keys(out, keys))
        write_values(out, values)
        return len(out) - base

    return write


def _write_string(out: bytearray, value: Any) -> int:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    data = value.encode("utf-8")
    out += data
    out += PADDING[-len(data) & 7]
    return len(data)


def _write_binary(out: bytearray, value: Any) -> int:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    size = len(out)
    out += value
    size = len(out) - size
    out += PADDING[-size & 7]
    return size


def _write_decimal(precision: int, scale: int, out: bytearray, value: Any) -> int:
    out += unscaled_bytes(value, precision, scale)
    return DECIMAL_SIZE_BYTES


def unscaled_bytes(value: Any, precision: int, scale: int) -> bytes:
    """A Decimal (or int) as its unscaled value at ``scale``, 32 bytes little-endian."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = decimal.Decimal(value)
    if not isinstance(value, decimal.Decimal):
        raise TypeError(f"expected Decimal, got {type(value).__name__}")
    if not value.is_finite():
        raise ValueError(f"{value} is not a finite decimal")
    scaled = value.scaleb(scale, _DECIMAL_CONTEXT)
    unscaled = int(scaled)
    if scaled != unscaled or abs(unscaled) >= 10**precision:
        raise ValueError(f"{value} does not fit decimal({precision}, {scale}) exactly")
    return unscaled.to_bytes(DECIMAL_SIZE_BYTES, "little", signed=True)


def _field_error(node: Node, i: int, exc: Exception) -> Exception:
    kind = TypeError if isinstance(exc, TypeError) else ValueError
    return kind(f"field {node.names[i]!r} ({node.children[i].kind}): {exc}")


def _fixed_field_error(node: Node, fields: list[Any]) -> Exception:
    """Which fixed-width field failed to pack (the whole-region pack does not say)."""
    for i, child in enumerate(node.children):
        if child.code:
            expected = (int, float) if child.code in "fd" else int
            if not isinstance(fields[i], expected):
                return _field_error(node, i, TypeError(f"expected a number, got "
                                                       f"{type(fields[i]).__name__}"))
            try:
                struct.pack("<" + child.code, fields[i])
            except _PACK_ERRORS as exc:
                return _field_error(node, i, exc)
    return ValueError(f"struct of {node.names} does not pack")

