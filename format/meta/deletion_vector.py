"""Deletion-vector index files: Java ``DeletionVectorsIndexFile`` / ``DeletionFileWriter`` with
``BitmapDeletionVector`` (32-bit) and ``Bitmap64DeletionVector`` records (apache/paimon
``5dacde516b``, 2.1-SNAPSHOT).

A file is the version byte ``1`` followed by one record per data file; the index manifest's
``DeletionVectorMeta`` says where each record is. Both record layouts are
``int32 BE L | magic | bitmap | int32 BE CRC32(magic + bitmap)``, with ``L`` = bytes of
magic + bitmap:

- 32-bit: magic ``1581511376`` big-endian, a portable RoaringBitmap32; meta length = ``L``.
- 64-bit (Iceberg ``deletion-vector-v1``): magic ``1681511377`` little-endian, then an int64
  LE bitmap count and per bitmap an int32 LE key (high 32 bits) + portable RoaringBitmap32;
  every key from 0 to the highest is written, empty or not; meta length = ``L + 8``.

Positions are 0-based row numbers: a ``pyroaring.BitMap`` for 32-bit, ``BitMap64`` for 64-bit.
Java writes its ``HashMap<String, DeletionVector>`` in iteration order; pypaimon sorts by
name; readers take any order.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

from pyroaring import AbstractBitMap, AbstractBitMap64, BitMap, BitMap64

from paimond.errors import CodecError
from paimond.format.binary.java_order import java_hashmap_order, java_string_hash
from paimond.format.meta.index_manifest import DeletionVectorMeta
from paimond.format.roaring.bitmap32 import bitmap_end, read_bitmap, serialize_bitmap

VERSION_ID_V1 = 1
MAGIC_32 = 1581511376
MAGIC_64 = 1681511377
MAX_POSITION_32 = 2**31 - 1
MAX_POSITION_64 = ((2**31 - 2) << 32) | 0x80000000  # OptimizedRoaringBitmap64.MAX_VALUE
_MAGIC_64_BE = struct.unpack(">i", struct.pack("<I", MAGIC_64))[0]

DeletionVector = BitMap | BitMap64
Positions = AbstractBitMap | AbstractBitMap64


def _keyed_bitmaps(positions: Positions) -> list[BitMap]:
    """The 64-bit layout's bitmaps, index = key, as ``OptimizedRoaringBitmap64`` holds them."""
    if isinstance(positions, AbstractBitMap):
        return [BitMap(positions)] if positions else []
    if positions and positions.max() > MAX_POSITION_64:
        raise ValueError(f"deletion vector position {positions.max()} above {MAX_POSITION_64}")
    raw = bytes(positions.serialize())  # CRoaring's portable 64-bit form: the same framing
    bitmaps: list[BitMap] = []
    pos = 8
    for _ in range(struct.unpack_from("<Q", raw)[0]):
        (key,) = struct.unpack_from("<I", raw, pos)
        bitmap, pos = read_bitmap(raw, pos + 4)
        bitmaps.extend(BitMap() for _ in range(key - len(bitmaps)))
        bitmaps.append(bitmap)
    return bitmaps


def _body_64(positions: Positions) -> bytes:
    bitmaps = _keyed_bitmaps(positions)
    parts = [struct.pack("<IQ", MAGIC_64, len(bitmaps))]
    for key, bitmap in enumerate(bitmaps):
        parts += [struct.pack("<I", key), serialize_bitmap(bitmap)]
    return b"".join(parts)


def encode_deletion_vector(positions: Positions, *, bitmap64: bool = False) -> bytes:
    """One record, exactly as Java's ``serializeTo`` writes it.

    Raises ValueError for a position the layout cannot hold (32-bit: above 2^31 - 1)."""
    if bitmap64:
        body = _body_64(positions)
    else:
        if positions and positions.max() > MAX_POSITION_32:
            raise ValueError(f"deletion vector position {positions.max()} above {MAX_POSITION_32}"
                             " needs the 64-bit layout (deletion-vectors.bitmap64)")
        body = struct.pack(">I", MAGIC_32) + serialize_bitmap(BitMap(positions))
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def _meta_length(record: bytes, bitmap64: bool) -> int:
    return len(record) if bitmap64 else len(record) - 8


def encode_deletion_vector_file(
        vectors: Mapping[str, Positions], *, bitmap64: bool = False, java_order: bool = True,
) -> tuple[bytes, tuple[DeletionVectorMeta, ...]]:
    """A DV index file and its ranges, in the order written.

    With ``java_order`` the records follow a fresh Java ``HashMap<String, …>`` filled in
    ``vectors`` order (byte-identical to Paimon for such a map); otherwise ``vectors`` order."""
    names = java_hashmap_order(vectors, java_string_hash) if java_order else list(vectors)
    out = bytearray([VERSION_ID_V1])
    metas = []
    for name in names:
        record = encode_deletion_vector(vectors[name], bitmap64=bitmap64)
        metas.append(DeletionVectorMeta(name, len(out), _meta_length(record, bitmap64),
                                        len(vectors[name])))
        out += record
    return bytes(out), tuple(metas)


def _decode_64(body: bytes) -> BitMap64:
    """``body`` = int64 count, then keyed bitmaps (the magic already checked)."""
    if len(body) < 8:
        raise CodecError("truncated 64-bit deletion vector: no bitmap count")
    (count,) = struct.unpack_from("<q", body)
    if not 0 <= count <= 2**31 - 1:
        raise CodecError(f"64-bit deletion vector with {count} bitmaps")
    pos, last_key = 8, -1
    for _ in range(count):
        if pos + 4 > len(body):
            raise CodecError("truncated 64-bit deletion vector: missing bitmap key")
        (key,) = struct.unpack_from("<i", body, pos)
        if not last_key < key <= 2**31 - 2:
            raise CodecError(f"64-bit deletion vector key {key} after {last_key}")
        pos, last_key = bitmap_end(body, pos + 4), key
    if pos != len(body):
        raise CodecError(f"64-bit deletion vector has {len(body) - pos} bytes after its bitmaps")
    try:
        return BitMap64.deserialize(body)
    except (ValueError, IndexError, OverflowError) as e:
        raise CodecError(f"malformed 64-bit deletion vector: {e}") from None


def _read_record(data: bytes, offset: int) -> tuple[DeletionVector, int, bool]:
    """The vector of the record at ``offset``, its bitmap length ``L`` and whether it is 64-bit."""
    if offset < 0 or offset + 8 > len(data):
        raise CodecError(f"truncated deletion vector: no record header at offset {offset} "
                         f"of a {len(data)}-byte file")
    bitmap_length, magic = struct.unpack_from(">ii", data, offset)
    if magic not in (MAGIC_32, _MAGIC_64_BE):
        raise CodecError(f"bad deletion vector magic {magic} at offset {offset} "
                         f"(expected {MAGIC_32} or little-endian {MAGIC_64})")
    end = offset + 4 + bitmap_length
    if bitmap_length < 4 or end + 4 > len(data):
        raise CodecError(f"truncated deletion vector at offset {offset}: length {bitmap_length} "
                         f"runs past the {len(data)}-byte file")
    body = data[offset + 4:end]
    (crc,) = struct.unpack_from(">I", data, end)
    if zlib.crc32(body) != crc:
        raise CodecError(f"deletion vector CRC mismatch at offset {offset}: stored {crc:#010x}, "
                         f"computed {zlib.crc32(body):#010x}")
    if magic == MAGIC_32:
        return read_bitmap(body, 4, bitmap_length - 4)[0], bitmap_length, False
    return _decode_64(body[4:]), bitmap_length, True


def _check_version(data: bytes) -> None:
    if not data:
        raise CodecError("empty deletion vector file: no version byte")
    if data[0] != VERSION_ID_V1:
        raise CodecError(f"unknown deletion vector file version {data[0]} (expected 1)")


def _checked(data: bytes, offset: int, length: int | None) -> DeletionVector:
    vector, bitmap_length, is_64 = _read_record(data, offset)
    expected = None if length is None else length - 8 if is_64 else length
    if expected is not None and bitmap_length != expected:
        raise CodecError(f"deletion vector at offset {offset} has length {bitmap_length}, "
                         f"index manifest says {expected}")
    return vector


def decode_deletion_vector(record: bytes, length: int | None = None) -> DeletionVector:
    """The vector of one record (the bytes from its offset on, e.g. a ranged read), checking
    the index manifest's ``length`` by the layout's rule when given."""
    return _checked(record, 0, length)


def decode_deletion_vector_range(data: bytes, offset: int, length: int) -> DeletionVector:
    """The vector at ``offset`` of a whole DV file, checking ``length`` by the layout's rule."""
    _check_version(data)
    if offset < 1:
        raise CodecError(f"deletion vector offset {offset} points into the version byte")
    return _checked(data, offset, length)


def decode_deletion_vector_file(data: bytes,
                                ranges: Sequence[DeletionVectorMeta]) -> dict[str, DeletionVector]:
    """Every vector of a DV file by data file name, located by the index manifest's ranges."""
    _check_version(data)
    return {r.data_file_name: decode_deletion_vector_range(data, r.offset, r.length)
            for r in ranges}


def decode_deletion_vector_records(data: bytes) -> list[tuple[int, int, DeletionVector]]:
    """Every record of a DV file in file order, as ``(offset, meta length, vector)``, found by
    walking the records themselves (no index manifest needed)."""
    _check_version(data)
    records = []
    offset = 1
    while offset < len(data):
        vector, bitmap_length, is_64 = _read_record(data, offset)
        records.append((offset, bitmap_length + 8 if is_64 else bitmap_length, vector))
        offset += bitmap_length + 8
    return records
