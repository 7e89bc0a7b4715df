"""Paimon's BinaryArray and BinaryMap: the ARRAY, MAP and MULTISET values inside a BinaryRow.

Java: ``org.apache.paimon.data.BinaryArray``, ``BinaryArrayWriter`` and ``BinaryMap`` in
paimon-common (Paimon 2.1-SNAPSHOT, commit 5dacde5), checked against rows written by
``InternalRowSerializer.toBinaryRow``.

A BinaryArray is ``int32 count | null bits | elements | variable part``. The null bits fill
4-byte words (bit i of the little-endian bitmap marks element i). Elements sit at their natural
width (1, 2, 4 or 8 bytes); variable-width elements use 8-byte slots
``(offset << 32) | size`` whose offsets count from the start of the array. The fixed part is
zero-padded to 8 bytes. A NULL element only sets its bit and zeroes its slot; unlike a row, it
reserves nothing in the variable part.

A BinaryMap is ``int32 key-array size | key BinaryArray | value BinaryArray``, in stored order.

How a single element is stored is given by a :class:`SlotCodec` from the caller
(``binary_row``), so rows nest in arrays and arrays in rows without a circular import. The
variable-part helpers here (``AbstractBinaryWriter``) serve rows and arrays alike.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CodecError

SlotWriter = Callable[[bytearray, int, object], None]
"""``(section, position, value)``: write a non-null value at ``position`` of the section being
built; variable-width data is appended to the section and the slot points at it."""

SlotReader = Callable[[bytes, int, int, Any], object]
"""``(data, section_start, section_size, raw)``: turn the raw slot value (as unpacked with the
codec's struct code) into a Python value. Raises :class:`CodecError`."""

_INT32 = struct.Struct("<i")
_SLOT = struct.Struct("<Q")
MAX_INLINE_SIZE = 7
"""Strings and bytes up to this size live in the slot itself (``MAX_FIX_PART_DATA_SIZE``)."""


@dataclass(frozen=True, slots=True)
class SlotCodec:
    """How one data type sits in a row slot or an array element."""

    code: str
    """struct format character of the raw slot value (``"Q"`` for offset-and-size slots)."""
    width: int
    """Bytes an array element takes; a row slot is always 8 bytes, zero-padded."""
    write: SlotWriter
    read: SlotReader | None = None
    """None when the raw slot value already is the Python value (ints, floats, bools)."""
    null_reserve: int = 0
    """Zero bytes a NULL still reserves in a row's variable part (non-compact DECIMAL and
    TIMESTAMP, so Java can update them in place); arrays ignore it."""


def round_to_word(size: int) -> int:
    """Round up to a multiple of 8 bytes."""
    return (size + 7) & ~7


def append_variable(section: bytearray, position: int, payload: bytes, size_field: int) -> None:
    """Append ``payload`` padded to 8 bytes; the slot gets ``(offset << 32) | size_field``."""
    _SLOT.pack_into(section, position, len(section) << 32 | size_field)
    section.extend(payload)
    section.extend(bytes(-len(payload) % 8))


def variable_section(raw: int, start: int, size: int) -> tuple[int, int]:
    """Absolute start and length of the data an offset-and-size slot points at."""
    offset, length = raw >> 32, raw & 0xFFFFFFFF
    if offset + length > size:
        raise CodecError(f"slot points at {length} bytes at offset {offset}, outside its "
                         f"{size}-byte section")
    return start + offset, length


def write_bytes(section: bytearray, position: int, payload: bytes) -> None:
    """A string or bytes value: inline with ``0x80 | length`` in slot byte 7, or variable."""
    if len(payload) <= MAX_INLINE_SIZE:
        section[position:position + len(payload)] = payload
        section[position + 7] = 0x80 | len(payload)
    else:
        append_variable(section, position, payload, len(payload))


def read_bytes(data: bytes, start: int, size: int, raw: int) -> bytes:
    """The bytes :func:`write_bytes` stored in a slot whose raw value is ``raw``."""
    if raw >> 63:
        length = raw >> 56 & 0x7F
        if length > MAX_INLINE_SIZE:
            raise CodecError(f"inline value claims {length} bytes, at most {MAX_INLINE_SIZE} fit")
        return _SLOT.pack(raw)[:length]
    begin, length = variable_section(raw, start, size)
    return data[begin:begin + length]


def array_header_size(count: int) -> int:
    """Bytes of the count and null bits before the first element (``calculateHeaderInBytes``)."""
    return 4 + (count + 31) // 32 * 4


def encode_array(values: Sequence[object], codec: SlotCodec) -> bytes:
    """Bytes of a BinaryArray holding ``values`` (None for NULL)."""
    count = len(values)
    header = array_header_size(count)
    section = bytearray(round_to_word(header + codec.width * count))
    _INT32.pack_into(section, 0, count)
    for i, value in enumerate(values):
        if value is None:
            section[4 + (i >> 3)] |= 1 << (i & 7)
        else:
            codec.write(section, header + codec.width * i, value)
    return bytes(section)


def decode_array(data: bytes, start: int, size: int, codec: SlotCodec) -> list[object]:
    """Elements of the BinaryArray in ``data[start:start + size]`` (the caller checked bounds)."""
    if size < 4:
        raise CodecError(f"array section of {size} bytes has no element count")
    (count,) = _INT32.unpack_from(data, start)
    if count < 0 or array_header_size(count) + codec.width * count > size:
        raise CodecError(f"array of {count} elements does not fit in its {size}-byte section")
    header = array_header_size(count)
    raw = struct.unpack_from(f"<{count}{codec.code}", data, start + header)
    nulls = data[start + 4:start + header]
    read = codec.read
    values: list[object] = []
    for i, value in enumerate(raw):
        if nulls[i >> 3] >> (i & 7) & 1:
            values.append(None)
        else:
            values.append(value if read is None else read(data, start, size, value))
    return values


def encode_map(entries: Iterable[tuple[object, object]] | Mapping[object, object],
               key_codec: SlotCodec, value_codec: SlotCodec) -> bytes:
    """Bytes of a BinaryMap of ``(key, value)`` pairs, kept in the given order."""
    pairs = list(entries.items() if isinstance(entries, Mapping) else entries)
    keys = encode_array([key for key, _ in pairs], key_codec)
    values = encode_array([value for _, value in pairs], value_codec)
    return _INT32.pack(len(keys)) + keys + values


def decode_map(data: bytes, start: int, size: int, key_codec: SlotCodec,
               value_codec: SlotCodec) -> list[tuple[object, object]]:
    """``(key, value)`` pairs of the BinaryMap in ``data[start:start + size]``, in stored order."""
    if size < 4:
        raise CodecError(f"map section of {size} bytes has no key-array size")
    (key_size,) = _INT32.unpack_from(data, start)
    if not 0 <= key_size <= size - 4:
        raise CodecError(f"map key array of {key_size} bytes does not fit in {size} bytes")
    keys = decode_array(data, start + 4, key_size, key_codec)
    values = decode_array(data, start + 4 + key_size, size - 4 - key_size, value_codec)
    if len(keys) != len(values):
        raise CodecError(f"map has {len(keys)} keys but {len(values)} values")
    return list(zip(keys, values, strict=True))
