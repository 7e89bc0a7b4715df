"""Paimon's BinaryRow: the bytes of partitions, keys and stats rows in manifests.

Java: ``org.apache.paimon.data.BinaryRow``, ``BinaryRowWriter``, ``AbstractBinaryWriter``,
``RowHelper`` and ``SerializationUtils.serializeBinaryRow`` in paimon-common/paimon-core
(Paimon 2.1-SNAPSHOT, commit 5dacde5), checked byte for byte against rows written by
``InternalRowSerializer.toBinaryRow``.

Layout (little-endian): ``null bits | arity x 8-byte slots | variable part``. The null region
is ``null_bits_size(arity)`` bytes; byte 0 is the RowKind and field i's null bit is bit i + 8.
A NULL field has a zeroed slot, except non-compact DECIMAL (precision > 18) and TIMESTAMP
(precision > 3), which still reserve 16 / 8 zero bytes and keep ``offset << 32`` in the slot.
Fixed-width values sit at the start of their slot; variable-width ones are either inline
(strings and bytes of at most 7 bytes: data in slot bytes 0..6, ``0x80 | length`` in byte 7)
or ``(offset << 32) | size`` pointing into the variable part, each value padded to 8 bytes.
ARRAY, MAP and MULTISET values are BinaryArray / BinaryMap sections (see ``binary_array``),
ROW values nested BinaryRows. Python values follow ``paimond.format.types.values``.

Strings are UTF-8; bytes that are not valid UTF-8 decode with ``surrogateescape`` so that they
re-encode unchanged. A nested row's RowKind byte is checked but not returned.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TypeAlias

from paimond.errors import CodecError, UnsupportedError
from paimond.format.binary.binary_array import (
    SlotCodec,
    SlotWriter,
    append_variable,
    decode_array,
    decode_map,
    encode_array,
    encode_map,
    read_bytes,
    variable_section,
    write_bytes,
)
from paimond.format.types.data_types import (
    ArrayType,
    DataType,
    DecimalType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    TimestampType,
)
from paimond.format.types.row_kind import RowKind
from paimond.format.types.values import Timestamp

_SLOT = struct.Struct("<Q")
_LONG = struct.Struct("<q")
_ARITY = struct.Struct(">i")
_FIXED = {  # type name -> struct code and width of values stored in the slot itself
    "BOOLEAN": ("?", 1), "TINYINT": ("b", 1), "SMALLINT": ("h", 2), "INT": ("i", 4),
    "DATE": ("i", 4), "TIME": ("i", 4), "FLOAT": ("f", 4), "BIGINT": ("q", 8),
    "DOUBLE": ("d", 8),
}
Types: TypeAlias = "Sequence[DataType] | RowType"


def null_bits_size(arity: int) -> int:
    """Bytes of the RowKind header plus null bits (``calculateBitSetWidthInBytes``)."""
    return (arity + 63 + 8) // 64 * 8


EMPTY_ROW = bytes(null_bits_size(0))
EMPTY_MANIFEST_ROW = _ARITY.pack(0) + EMPTY_ROW


@dataclass(frozen=True, slots=True)
class _RowLayout:
    types: tuple[DataType, ...]
    codecs: tuple[SlotCodec, ...]
    null_size: int
    slots: struct.Struct
    """Every slot's raw value in one unpack, starting after the null bits."""

    @property
    def fixed_size(self) -> int:
        return self.null_size + 8 * len(self.types)


# ---------------------------------------------------------------- public API

def encode_row(values: Sequence[object], types: Types, row_kind: int = RowKind.INSERT) -> bytes:
    """``BinaryRow.toBytes()`` of ``values``; raises ValueError/TypeError for unfit values."""
    if not RowKind.INSERT <= row_kind <= RowKind.DELETE:
        raise ValueError(f"row kind must be 0..3, got {row_kind}")
    return _encode(_layout(_type_tuple(types)), values, row_kind)


def decode_row(data: bytes, types: Types) -> tuple[object, ...]:
    """Field values of the BinaryRow ``data`` of the given field types."""
    data = bytes(data)
    return _decode(_layout(_type_tuple(types)), data, 0, len(data))


def decode_row_kind(data: bytes) -> int:
    """The RowKind byte (a ``RowKind`` value) of a BinaryRow."""
    if len(data) < len(EMPTY_ROW):
        raise CodecError(f"a row has at least {len(EMPTY_ROW)} bytes, got {len(data)}")
    return _check_kind(data[0])


def encode_manifest_row(values: Sequence[object], types: Types,
                        row_kind: int = RowKind.INSERT) -> bytes:
    """The row as a manifest field stores it: 4-byte big-endian arity + row bytes."""
    type_tuple = _type_tuple(types)
    return _ARITY.pack(len(type_tuple)) + encode_row(values, type_tuple, row_kind)


def decode_manifest_row(data: bytes, types: Types) -> tuple[object, ...]:
    """Field values of a manifest-framed row; its arity must match ``types``."""
    data = bytes(data)
    type_tuple = _type_tuple(types)
    arity = manifest_row_arity(data)
    if arity != len(type_tuple):
        raise CodecError(f"manifest row has arity {arity} but {len(type_tuple)} field types")
    return _decode(_layout(type_tuple), data, 4, len(data) - 4)


def manifest_row_arity(data: bytes) -> int:
    """The arity prefix of a manifest-framed row."""
    if len(data) < 4:
        raise CodecError(f"manifest row of {len(data)} bytes has no arity prefix")
    (arity,) = _ARITY.unpack_from(data)
    if arity < 0:
        raise CodecError(f"manifest row has negative arity {arity}")
    return int(arity)


# ---------------------------------------------------------------- rows

def _type_tuple(types: Types) -> tuple[DataType, ...]:
    return tuple(types.field_types if isinstance(types, RowType) else types)


@functools.lru_cache(maxsize=1024)
def _layout(types: tuple[DataType, ...]) -> _RowLayout:
    codecs = tuple(_codec(t, in_array=False) for t in types)
    slot_format = "".join(c.code + (f"{8 - c.width}x" if c.width < 8 else "") for c in codecs)
    return _RowLayout(types, codecs, null_bits_size(len(types)), struct.Struct("<" + slot_format))


def _encode(layout: _RowLayout, values: Sequence[object], row_kind: int) -> bytes:
    if len(values) != len(layout.types):
        raise ValueError(f"{len(values)} values for a row of {len(layout.types)} fields")
    row = bytearray(layout.fixed_size)
    row[0] = row_kind
    for i, (value, codec) in enumerate(zip(values, layout.codecs, strict=True)):
        position = layout.null_size + 8 * i
        if value is None:
            row[(i + 8) >> 3] |= 1 << ((i + 8) & 7)
            if codec.null_reserve:
                _SLOT.pack_into(row, position, len(row) << 32)
                row.extend(bytes(codec.null_reserve))
            continue
        try:
            codec.write(row, position, value)
        except (struct.error, OverflowError, ValueError, TypeError) as exc:
            kind = TypeError if isinstance(exc, TypeError) else ValueError
            raise kind(f"field {i} ({layout.types[i]}): {exc}") from None
    return bytes(row)


def _decode(layout: _RowLayout, data: bytes, start: int, size: int) -> tuple[object, ...]:
    arity = len(layout.types)
    if size < layout.fixed_size:
        raise CodecError(f"row of {size} bytes is shorter than the {layout.fixed_size}-byte "
                         f"fixed part of {arity} fields")
    _check_kind(data[start])
    nulls = int.from_bytes(data[start:start + layout.null_size], "little") >> 8
    if nulls >> arity:
        raise CodecError(f"null bits set beyond the {arity} fields of the row type")
    raw = layout.slots.unpack_from(data, start + layout.null_size)
    return tuple([
        None if nulls >> i & 1 else value if codec.read is None
        else codec.read(data, start, size, value)
        for i, (value, codec) in enumerate(zip(raw, layout.codecs, strict=True))
    ])


def _check_kind(kind: int) -> int:
    if kind > RowKind.DELETE:
        raise CodecError(f"row kind byte {kind} is not 0..3")
    return kind


# ---------------------------------------------------------------- slot codecs

@functools.lru_cache(maxsize=4096)
def _codec(data_type: DataType, in_array: bool) -> SlotCodec:
    """The codec of one type; arrays canonicalise NaN like ``BinaryArrayWriter``."""
    fixed = _FIXED.get(data_type.name)
    if fixed is not None:
        code, width = fixed
        if in_array and code in "fd":
            return SlotCodec(code, width, _nan_canonical_writer(code))
        return SlotCodec(code, width, struct.Struct("<" + code).pack_into)
    if data_type.name in ("CHAR", "VARCHAR"):
        return SlotCodec("Q", 8, _write_string, _read_string)
    if data_type.name in ("BINARY", "VARBINARY"):
        return SlotCodec("Q", 8, _write_binary, read_bytes)
    if isinstance(data_type, DecimalType):
        return _decimal_codec(data_type.precision, data_type.scale)
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return _timestamp_codec(data_type.precision)
    return _nested_codec(data_type)


def _nan_canonical_writer(code: str) -> SlotWriter:
    packer = struct.Struct("<" + code)

    def write(section: bytearray, position: int, value: object) -> None:
        nan = isinstance(value, float) and math.isnan(value)
        packer.pack_into(section, position, math.nan if nan else value)

    return write


def _write_string(section: bytearray, position: int, value: object) -> None:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    write_bytes(section, position, value.encode("utf-8", "surrogateescape"))


def _read_string(data: bytes, start: int, size: int, raw: int) -> str:
    return read_bytes(data, start, size, raw).decode("utf-8", "surrogateescape")


def _write_binary(section: bytearray, position: int, value: object) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    write_bytes(section, position, bytes(value))


def _decimal_codec(precision: int, scale: int) -> SlotCodec:
    """Unscaled int64 in the slot up to precision 18, else 16 reserved bytes holding the
    minimal big-endian two's complement (``BigInteger.toByteArray``)."""
    bound = 10 ** precision

    def to_decimal(unscaled: int) -> Decimal:
        if not -bound < unscaled < bound:
            raise CodecError(f"unscaled value {unscaled} exceeds DECIMAL({precision}, {scale})")
        return Decimal(f"{unscaled}E-{scale}")

    def unscaled_of(value: object) -> int:
        if not isinstance(value, (Decimal, int)) or isinstance(value, bool):
            raise TypeError(f"expected Decimal, got {type(value).__name__}")
        numerator, denominator = value.as_integer_ratio()
        unscaled, remainder = divmod(numerator * 10 ** scale, denominator)
        if remainder or not -bound < unscaled < bound:
            raise ValueError(f"{value} does not fit DECIMAL({precision}, {scale}) exactly")
        return int(unscaled)

    if precision <= 18:
        return SlotCodec("q", 8, lambda s, p, v: _LONG.pack_into(s, p, unscaled_of(v)),
                         lambda d, st, sz, raw: to_decimal(raw))

    def write(section: bytearray, position: int, value: object) -> None:
        unscaled = unscaled_of(value)
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        payload = unscaled.to_bytes(length, "big", signed=True)
        append_variable(section, position, payload.ljust(16, b"\0"), length)

    def read(data: bytes, start: int, size: int, raw: int) -> Decimal:
        begin, length = variable_section(raw, start, size)
        if not 1 <= length <= 16:
            raise CodecError(f"DECIMAL({precision}, {scale}) of {length} bytes, expected 1..16")
        return to_decimal(int.from_bytes(data[begin:begin + length], "big", signed=True))

    return SlotCodec("Q", 8, write, read, null_reserve=16)


def _timestamp_codec(precision: int) -> SlotCodec:
    """Epoch millis in the slot up to precision 3 (nanos dropped, as in Java); else millis in
    8 variable bytes and ``(offset << 32) | nano_of_milli`` in the slot."""

    def timestamp_of(value: object) -> Timestamp:
        if not isinstance(value, Timestamp):
            raise TypeError(f"expected values.Timestamp, got {type(value).__name__}")
        return value

    if precision <= 3:
        return SlotCodec("q", 8, lambda s, p, v: _LONG.pack_into(s, p, timestamp_of(v).millis),
                         lambda d, st, sz, raw: Timestamp(raw))

    def write(section: bytearray, position: int, value: object) -> None:
        timestamp = timestamp_of(value)
        append_variable(section, position, _LONG.pack(timestamp.millis), timestamp.nano_of_milli)

    def read(data: bytes, start: int, size: int, raw: int) -> Timestamp:
        offset, nano_of_milli = raw >> 32, raw & 0xFFFFFFFF
        if offset + 8 > size:
            raise CodecError(f"TIMESTAMP({precision}) millis at offset {offset} outside its "
                             f"{size}-byte section")
        if nano_of_milli > 999_999:
            raise CodecError(f"TIMESTAMP({precision}) nano-of-milli {nano_of_milli} > 999999")
        return Timestamp(_LONG.unpack_from(data, start + offset)[0], nano_of_milli)

    return SlotCodec("Q", 8, write, read, null_reserve=8)


def _nested_codec(data_type: DataType) -> SlotCodec:
    """ARRAY, MAP, MULTISET (a map of element to INT NOT NULL count) and ROW."""
    if isinstance(data_type, ArrayType):
        return _array_codec(_codec(data_type.element, in_array=True))
    if isinstance(data_type, MapType):
        key, value = data_type.key, data_type.value
        return _map_codec(_codec(key, in_array=True), _codec(value, in_array=True))
    if isinstance(data_type, MultisetType):
        count = IntType(nullable=False)
        return _map_codec(_codec(data_type.element, in_array=True), _codec(count, in_array=True))
    if isinstance(data_type, RowType):
        return _row_codec(_layout(tuple(data_type.field_types)))
    raise UnsupportedError(f"BinaryRow codec does not support {data_type.name} ({data_type})")


def _section_codec(encode: Callable[[object], bytes],
                   decode: Callable[[bytes, int, int], object]) -> SlotCodec:
    """A value stored as a whole section (array, map, row) in the variable part."""

    def write(section: bytearray, position: int, value: object) -> None:
        payload = encode(value)
        append_variable(section, position, payload, len(payload))

    def read(data: bytes, start: int, size: int, raw: int) -> object:
        return decode(data, *variable_section(raw, start, size))

    return SlotCodec("Q", 8, write, read)


def _array_codec(element: SlotCodec) -> SlotCodec:
    def encode(value: object) -> bytes:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list for ARRAY, got {type(value).__name__}")
        return encode_array(value, element)

    return _section_codec(encode, functools.partial(decode_array, codec=element))


def _map_codec(key: SlotCodec, value: SlotCodec) -> SlotCodec:
    def encode(entries: object) -> bytes:
        if not isinstance(entries, (list, tuple, Mapping)):
            raise TypeError(f"expected a list of pairs for MAP, got {type(entries).__name__}")
        return encode_map(entries, key, value)

    return _section_codec(encode, functools.partial(decode_map, key_codec=key, value_codec=value))


def _row_codec(layout: _RowLayout) -> SlotCodec:
    def encode(value: object) -> bytes:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a tuple for ROW, got {type(value).__name__}")
        return _encode(layout, value, RowKind.INSERT)

    return _section_codec(encode, functools.partial(_decode, layout))
