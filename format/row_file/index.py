"""Footer and block index of ``.row`` files.

Java: ``RowFileFooter`` and ``RowBlockIndex`` (``paimon-format/.../format/row/``), apache/paimon
2.1-SNAPSHOT at commit 5dacde5. The footer is 32 little-endian bytes: ``int64 rows | int32
blocks | int64 index offset | int32 index length | int8 version | 3 reserved | int32 magic
"ROWS"``. Reserved bytes are not checked (Java does not check them either). The index is three
arrays, each ``varint byte length | delta-zigzag-varints``: compressed sizes, uncompressed sizes
and the first row of each block. Blocks start at byte 0, back to back, so their offsets are the
prefix sums of the compressed sizes.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass

from paimond.errors import CodecError
from paimond.format.row_file.codec import (
    decode_delta_varints,
    decode_varint,
    encode_delta_varints,
    encode_varint,
)

FOOTER_SIZE = 32
MAGIC = 0x524F5753  # "ROWS"
VERSION = 1
_FOOTER = struct.Struct("<qiqiB3xI")
MAX_BLOCK_BYTES = (1 << 31) - 1
"""Java holds a decompressed block in one byte[]."""


@dataclass(frozen=True, slots=True)
class RowFileFooter:
    total_row_count: int
    block_count: int
    index_offset: int
    index_length: int
    version: int = VERSION


@dataclass(frozen=True, slots=True)
class BlockIndex:
    compressed_sizes: tuple[int, ...]
    uncompressed_sizes: tuple[int, ...]
    row_starts: tuple[int, ...]


def encode_footer(footer: RowFileFooter) -> bytes:
    return _FOOTER.pack(footer.total_row_count, footer.block_count, footer.index_offset,
                        footer.index_length, footer.version, MAGIC)


def decode_footer(data: bytes) -> RowFileFooter:
    """The footer of exactly 32 bytes; raises CodecError for a wrong size, magic or version,
    or a negative field."""
    if len(data) != FOOTER_SIZE:
        raise CodecError(f"footer of {len(data)} bytes, expected {FOOTER_SIZE}")
    rows, blocks, index_offset, index_length, version, magic = _FOOTER.unpack(data)
    if magic != MAGIC:
        raise CodecError(f"bad magic 0x{magic:08X}, expected 0x{MAGIC:08X} (\"ROWS\")")
    if version != VERSION:
        raise CodecError(f"unsupported .row version {version}, expected {VERSION}")
    if min(rows, blocks, index_offset, index_length) < 0:
        raise CodecError(f"negative count or offset: {rows} rows, {blocks} blocks, index of "
                         f"{index_length} bytes at {index_offset}")
    return RowFileFooter(rows, blocks, index_offset, index_length, version)


def encode_block_index(index: BlockIndex) -> bytes:
    out = bytearray()
    for values in (index.compressed_sizes, index.uncompressed_sizes, index.row_starts):
        encoded = encode_delta_varints(values)
        out += encode_varint(len(encoded)) + encoded
    return bytes(out)


def decode_block_index(data: bytes) -> BlockIndex:
    """The three arrays, which must fill ``data`` exactly; raises CodecError."""
    arrays, pos = [], 0
    for name in ("compressed sizes", "uncompressed sizes", "row starts"):
        length, pos = decode_varint(data, pos)
        if pos + length > len(data):
            raise CodecError(f"index array of {name} ({length} bytes at {pos}) runs past the "
                             f"{len(data)}-byte index")
        arrays.append(tuple(decode_delta_varints(data[pos:pos + length])))
        pos += length
    if pos != len(data):
        raise CodecError(f"index arrays end at byte {pos} of a {len(data)}-byte index")
    return BlockIndex(*arrays)


def check_block_index(footer: RowFileFooter, index: BlockIndex) -> None:
    """Raise CodecError unless ``index`` describes the blocks ``footer`` announces: one entry
    per block, blocks ending where the index starts, row starts from 0 strictly increasing
    below the row count, and room in each block for its offsets and row count."""
    blocks = footer.block_count
    lengths = (len(index.compressed_sizes), len(index.uncompressed_sizes), len(index.row_starts))
    if lengths != (blocks,) * 3:
        raise CodecError(f"index arrays of {lengths} entries for {blocks} blocks")
    if any(s <= 0 for s in index.compressed_sizes):
        raise CodecError(f"non-positive compressed size in {index.compressed_sizes}")
    if sum(index.compressed_sizes) != footer.index_offset:
        raise CodecError(f"blocks end at {sum(index.compressed_sizes)}, the index starts at "
                         f"{footer.index_offset}")
    starts = [*index.row_starts, footer.total_row_count]
    if starts[0] != 0 or any(a >= b for a, b in itertools.pairwise(starts)):
        raise CodecError(f"row starts {index.row_starts} are not 0, increasing and below the "
                         f"{footer.total_row_count} rows")
    for b, size in enumerate(index.uncompressed_sizes):
        rows = starts[b + 1] - starts[b]
        if not 4 * rows + 4 <= size <= MAX_BLOCK_BYTES:
            raise CodecError(f"block {b} of {rows} rows has {size} uncompressed bytes")
