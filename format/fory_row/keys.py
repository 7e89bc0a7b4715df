"""Sort keys of flat Fory rows, for sorted key rows searched with ``bisect``.

Paimon's key order (Java's generated ``RecordComparator``, the order
``paimond.format.binary.key_order`` gives BinaryRow keys): field by field, NULL first, numbers
by value, FLOAT and DOUBLE in ``Float.compare`` order (-0.0 < 0.0, every NaN equal and last),
strings and binary by unsigned bytes (for UTF-8 the same as by code point), decimals by value.

The whole fixed region is read in one ``struct`` call (floats as their integer bits) and
strings stay bytes, so a key costs no per-field decoding beyond the variable-width fields. A
non-nullable field's key is its bare value (a null there is a CodecError); a nullable one's is
``(0,)`` for NULL and ``(1, value)`` otherwise, so keys of one schema always compare.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from paimond.errors import CodecError, UnsupportedError
from paimond.format.fory_row.layout import Node, bitmap_size, compile_schema, slot_format
from paimond.format.fory_row.reader import read_unscaled

SortKey = tuple[Any, ...]
_NULL_KEY = (0,)
_FLOAT64_NAN_KEY = 1 << 63  # above every other float64 key
_FLOAT32_NAN_KEY = 1 << 31


def _float64_key(bits: int) -> int:
    if bits & 0x7FFFFFFFFFFFFFFF > 0x7FF0000000000000:
        return _FLOAT64_NAN_KEY
    return bits if bits >= 0 else bits ^ 0x7FFFFFFFFFFFFFFF  # negatives: larger magnitude first


def _float32_key(bits: int) -> int:
    if bits & 0x7FFFFFFF > 0x7F800000:
        return _FLOAT32_NAN_KEY
    return bits if bits >= 0 else bits ^ 0x7FFFFFFF


def sort_key_function(schema: pa.Schema) -> Callable[[bytes], SortKey]:
    """``row bytes -> key`` in Paimon's key order, for rows of primitive, temporal, decimal,
    string and binary fields (UnsupportedError for nested ones). Use it to sort rows and as
    ``bisect``'s ``key=``: ``bisect_left(rows, key(probe), key=key)``."""
    node = compile_schema(schema)
    num_fields = len(node.children)
    words = bitmap_size(num_fields) // 8
    fixed = struct.Struct(slot_format(node, float_bits=True))
    row_fixed = fixed.size
    transforms = tuple(_transform(child, i, row_fixed) for i, child in enumerate(node.children))
    steps = tuple((i, t) for i, t in enumerate(transforms) if t is not None)
    nullable = node.nullable
    any_nullable = any(nullable)

    def key(row: bytes) -> SortKey:
        if not isinstance(row, bytes):
            row = bytes(row)
        if len(row) < row_fixed:
            raise CodecError(f"key row of {len(row)} bytes is shorter than its {row_fixed}-byte "
                             f"fixed region")
        values = fixed.unpack_from(row)
        null_bits = values[0] if words == 1 else sum(w << (64 * k) for k, w in enumerate(values[:words]))
        if not steps and not any_nullable and not null_bits:
            return values[words:]  # the common primary key: fixed-width and NOT NULL
        if null_bits >> num_fields:
            raise CodecError(f"null bits set past the {num_fields} fields of a key row")
        fields = list(values[words:])
        for i, transform in steps:
            if not null_bits >> i & 1:
                fields[i] = transform(row, fields[i])
        if any_nullable or null_bits:
            for i in range(num_fields):
                is_null = null_bits >> i & 1
                if nullable[i]:
                    fields[i] = (1, fields[i]) if not is_null else _NULL_KEY
                elif is_null:
                    raise CodecError(f"key field {node.names[i]!r} is NOT NULL but its null bit "
                                     f"is set")
        return tuple(fields)

    return key


def _transform(child: Node, i: int, row_fixed: int) -> Callable[[bytes, int], Any] | None:
    """How field ``i``'s raw slot item becomes its key, None if it already is one."""
    if child.kind == "float64":
        return lambda _row, bits: _float64_key(bits)
    if child.kind == "float32":
        return lambda _row, bits: _float32_key(bits)
    if child.code:
        return None
    if child.kind in ("string", "binary"):
        def variable(row: bytes, slot: int) -> bytes:
            offset, length = _checked_target(row, i, slot, row_fixed)
            return row[offset:offset + length]
        return variable
    if child.kind == "decimal":
        limit = 10**child.precision

        def unscaled(row: bytes, slot: int) -> int:
            offset, length = _checked_target(row, i, slot, row_fixed)
            return read_unscaled(row, offset, length, limit)
        return unscaled
    raise UnsupportedError(f"sort keys of Fory rows with a {child.kind} field")


def _checked_target(row: bytes, i: int, slot: int, row_fixed: int) -> tuple[int, int]:
    offset, length = slot >> 32, slot & 0xFFFFFFFF
    if offset < row_fixed or offset + length > len(row):
        raise CodecError(f"key field {i} points at {length} bytes at offset {offset}, outside "
                         f"the variable region [{row_fixed}, {len(row)}) of its row")
    return offset, length
