"""Bit-sliced bitmaps: the code column of ``range-bitmap`` (Java ``BitSliceIndexBitmap``) and the
comparison both it and ``bsi`` (``BitSliceIndexRoaringBitmap``) answer (apache/paimon
``5dacde516b``).

A bit-sliced index stores non-negative integers per row: an existence bitmap (rows with a
value) and slice ``i`` = rows whose value has bit ``i`` set. Range-bitmap layout, big-endian:
``int32 header length | version 1 | int8 slice count | int32 ebm length | int32 index length |
(int32 offset, int32 length) per slice | ebm | slices``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from pyroaring import BitMap

from paimond.errors import CodecError
from paimond.format.roaring.bitmap32 import read_bitmap, serialize_bitmap

VERSION_1 = 1


def encode_bit_slices(ebm: BitMap, slices: Sequence[BitMap]) -> bytes:
    """``BitSliceIndexBitmap.Appender.serialize``."""
    ebm_bytes = serialize_bitmap(ebm)
    bodies = [serialize_bitmap(s) for s in slices]
    indexes, offset = bytearray(), 0
    for body in bodies:
        indexes += struct.pack(">ii", offset, len(body))
        offset += len(body)
    header = struct.pack(">bbii", VERSION_1, len(slices), len(ebm_bytes), len(indexes))
    return struct.pack(">i", len(header) + len(indexes)) + header + indexes + ebm_bytes \
        + b"".join(bodies)


def decode_bit_slices(data: bytes, pos: int) -> tuple[BitMap, list[BitMap]]:
    """The existence bitmap and slices encoded at ``data[pos]``."""
    if pos + 14 > len(data):
        raise CodecError(f"truncated bit-slice index at byte {pos} of {len(data)}")
    header_length, version, count, ebm_length, index_length = struct.unpack_from(">ibbii",
                                                                                 data, pos)
    if version != VERSION_1:
        raise CodecError(f"unknown bit-slice index version {version}")
    if count < 0 or index_length != 8 * count or header_length != 10 + index_length:
        raise CodecError(f"bit-slice index header: {count} slices, {index_length} index bytes, "
                         f"{header_length} header bytes")
    body = pos + 4 + header_length
    if body > len(data):
        raise CodecError(f"truncated bit-slice index: header ends at {body} of {len(data)}")
    ebm = read_bitmap(data, body, ebm_length)[0]
    slices = []
    for i in range(count):
        offset, length = struct.unpack_from(">ii", data, pos + 14 + 8 * i)
        if offset < 0:
            raise CodecError(f"bit slice {i} at negative offset {offset}")
        slices.append(read_bitmap(data, body + ebm_length + offset, length)[0])
    return ebm, slices


def compare(ebm: BitMap, slices: Sequence[BitMap], value: int) -> tuple[BitMap, BitMap, BitMap]:
    """Rows whose stored value is less than, equal to and greater than ``value`` (O'Neil)."""
    if value < 0:
        return BitMap(), BitMap(), BitMap(ebm)
    if value >> len(slices):
        return BitMap(ebm), BitMap(), BitMap()
    greater, equal = BitMap(), BitMap(ebm)
    for i in range(len(slices) - 1, -1, -1):
        if value >> i & 1:
            equal &= slices[i]
        else:
            greater |= equal & slices[i]
            equal -= slices[i]
    return ebm - greater - equal, equal, greater
