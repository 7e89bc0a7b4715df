"""A row file taken apart: its footer, block index and (decompressed) blocks."""

from __future__ import annotations

import zstandard

from paimond.format.row_file.file import RowFileFooter
from paimond.format.row_file.index import (
    FOOTER_SIZE,
    BlockIndex,
    decode_block_index,
    decode_footer,
)


def split(data: bytes) -> tuple[RowFileFooter, BlockIndex, list[bytes]]:
    """Footer, index and compressed blocks of a file, decoded without the reader."""
    footer = decode_footer(data[-FOOTER_SIZE:])
    index = decode_block_index(data[footer.index_offset:footer.index_offset + footer.index_length])
    ends = [sum(index.compressed_sizes[:i + 1]) for i in range(footer.block_count)]
    return footer, index, [data[e - s:e] for e, s in zip(ends, index.compressed_sizes, strict=True)]


def decompress(block: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(block)
