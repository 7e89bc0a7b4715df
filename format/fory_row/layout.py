"""Arrow types compiled to the slots and element widths of the Fory standard row format.

Java: ``org.apache.fory.format.type.DataTypes`` and ``BinaryArray.calculateHeaderInBytes``;
C++: ``fory::row::get_byte_width`` (apache/fory v1.6.1, unchanged through pyfory 1.7.7).

A row of n fields is ``bitmap_size(n)`` bytes of null bits (bit i = field i) and n 8-byte
slots. Fixed-width values sit at the start of their slot, zero-padded; every other value is
``(offset << 32) | size`` into the variable region, offsets relative to the enclosing row or
array. The Arrow types that have a Fory type are the only ones accepted (``UnsupportedError``
otherwise); timestamps and durations must be in microseconds, Fory's unit.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import pyarrow as pa

from paimond.errors import UnsupportedError

FIXED_KINDS = {  # kind -> struct code and width of its values in arrays (slots are always 8)
    "bool": ("?", 1), "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "float32": ("f", 4), "float64": ("d", 8), "date32": ("i", 4), "timestamp": ("q", 8),
    "duration": ("q", 8),
}
DECIMAL_SIZE_BYTES = 32
"""Java ``DecimalUtils.DECIMAL_BYTE_LENGTH``: a decimal is its unscaled value as 32-byte
little-endian two's complement in the variable region."""
MAX_DECIMAL_PRECISION = 76  # the most digits 32 signed bytes hold (and decimal256's limit)
MAX_OFFSET = 0xFFFFFFFF  # offsets and sizes are 32-bit halves of a slot


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """One Fory type: ``code`` is its struct code when fixed-width, else empty.

    Nodes hash by identity (cheap, for the caches keyed on them); ``compile_type`` returns one
    node per Arrow type.
    """

    kind: str
    code: str = ""
    width: int = 8
    children: tuple[Node, ...] = ()
    names: tuple[str, ...] = ()
    nullable: tuple[bool, ...] = ()
    precision: int = 0
    scale: int = 0


def bitmap_size(num_fields: int) -> int:
    """Bytes of a row's or an array's null bits: whole 8-byte words."""
    return (num_fields + 63) // 64 * 8


def array_header_size(num_elements: int) -> int:
    """The 8-byte element count plus the null bits."""
    return 8 + bitmap_size(num_elements)


def fixed_size(node: Node) -> int:
    """Bytes of a row's null bits and slots, before its variable region."""
    return bitmap_size(len(node.children)) + 8 * len(node.children)


def slot_format(node: Node, float_bits: bool = False) -> str:
    """The struct format of a row's whole fixed region: bitmap words, then one item per slot
    (the value of a fixed-width field, padding skipped; the raw slot of any other field).

    ``float_bits`` reads floats as their signed integer bits, for sort keys.
    """
    words = bitmap_size(len(node.children)) // 8
    items = []
    for child in node.children:
        code = child.code
        if float_bits and child.kind in ("float32", "float64"):
            code = "i" if child.kind == "float32" else "q"
        items.append(f"{code}{8 - child.width}x" if code and child.width < 8 else code or "Q")
    return "<" + "Q" * words + "".join(items)


_BY_ID: dict[int, tuple[pa.Schema, Node]] = {}
_BY_ID_LIMIT = 256


def compile_schema(schema: pa.Schema) -> Node:
    """The struct node of a row of ``schema``'s fields; raises UnsupportedError."""
    # Hashing a pa.Schema costs microseconds, so the schema object itself is looked up first;
    # each entry holds its schema, so the id cannot be reused while it is cached.
    hit = _BY_ID.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    node = _compile_schema(schema)
    if len(_BY_ID) >= _BY_ID_LIMIT:
        _BY_ID.clear()
    _BY_ID[id(schema)] = (schema, node)
    return node


@functools.lru_cache(maxsize=256)
def _compile_schema(schema: pa.Schema) -> Node:
    return _struct_node(list(schema))


@functools.lru_cache(maxsize=1024)
def compile_type(data_type: pa.DataType) -> Node:
    """The node of one Arrow type; raises UnsupportedError for types Fory has not."""
    types = pa.types
    if types.is_struct(data_type):
        return _struct_node([data_type.field(i) for i in range(data_type.num_fields)])
    if types.is_map(data_type):
        return Node("map", children=(compile_type(data_type.key_type),
                                     compile_type(data_type.item_type)))
    if types.is_list(data_type) or types.is_large_list(data_type):
        return Node("list", children=(compile_type(data_type.value_type),))
    if types.is_string(data_type) or types.is_large_string(data_type):
        return Node("string")
    if types.is_binary(data_type) or types.is_large_binary(data_type):
        return Node("binary")
    if types.is_decimal(data_type):
        if data_type.precision > MAX_DECIMAL_PRECISION:
            raise UnsupportedError(f"Fory row format: {data_type} has more than "
                                   f"{MAX_DECIMAL_PRECISION} digits")
        return Node("decimal", precision=data_type.precision, scale=data_type.scale)
    kind = _fixed_kind(data_type)
    code, width = FIXED_KINDS[kind]
    return Node(kind, code, width)


def _fixed_kind(data_type: pa.DataType) -> str:
    types = pa.types
    if types.is_timestamp(data_type) or types.is_duration(data_type):
        kind = "timestamp" if types.is_timestamp(data_type) else "duration"
        if data_type.unit != "us":
            raise UnsupportedError(f"Fory row format: {data_type} (Fory {kind}s are microseconds; "
                                   f"cast to unit 'us' first)")
        return kind
    for kind, test in (("bool", types.is_boolean), ("int8", types.is_int8),
                       ("int16", types.is_int16), ("int32", types.is_int32),
                       ("int64", types.is_int64), ("float32", types.is_float32),
                       ("float64", types.is_float64), ("date32", types.is_date32)):
        if test(data_type):
            return kind
    raise UnsupportedError(f"Fory row format has no type for Arrow {data_type}")


def _struct_node(fields: list[pa.Field]) -> Node:
    return Node("struct", children=tuple(compile_type(f.type) for f in fields),
                names=tuple(f.name for f in fields),
                nullable=tuple(bool(f.nullable) for f in fields))


U64 = struct.Struct("<Q")
PADDING = tuple(bytes(n) for n in range(8))
"""``PADDING[-size & 7]`` zero bytes bring ``size`` to a multiple of 8."""
