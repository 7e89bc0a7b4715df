"""The file-index container of one data file: Java ``FileIndexFormat`` (apache/paimon
``5dacde516b``), embedded in a manifest entry or written as ``<data-file>.index``.

Big-endian layout: ``int64 magic 1493475289347502 | int32 version 1 | int32 head length |
int32 column count | per column: modified-UTF-8 name, int32 index count, per index:
modified-UTF-8 index type, int32 start, int32 length | int32 redundant length 0 | body``.
Starts are absolute (the head length included); an index whose writer saw no row at all
(only possible for a MAP key) has start -1 and length 0. Payloads follow in head order.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from paimond.errors import CodecError, UnsupportedError

MAGIC = 1493475289347502
VERSION_1 = 1
EMPTY_INDEX_FLAG = -1

FileIndexes = dict[str, dict[str, bytes | None]]


def encode_java_utf(text: str) -> bytes:
    """``DataOutput.writeUTF``: uint16 BE length, then modified UTF-8 of the UTF-16 units."""
    units = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(units), 2):
        c = units[i] << 8 | units[i + 1]
        if 0 < c < 0x80:
            out.append(c)
        elif c < 0x800:
            out += bytes([0xC0 | c >> 6, 0x80 | c & 0x3F])
        else:
            out += bytes([0xE0 | c >> 12, 0x80 | c >> 6 & 0x3F, 0x80 | c & 0x3F])
    if len(out) > 0xFFFF:
        raise UnsupportedError(f"name of {len(out)} encoded bytes is too long for writeUTF")
    return struct.pack(">H", len(out)) + bytes(out)


def decode_java_utf(data: bytes, pos: int) -> tuple[str, int]:
    """``DataInput.readUTF`` at ``data[pos]``: the string and the position after it."""
    if pos + 2 > len(data):
        raise CodecError(f"truncated file index head: no name length at byte {pos}")
    (length,) = struct.unpack_from(">H", data, pos)
    raw, end, units = data[pos + 2:pos + 2 + length], pos + 2 + length, bytearray()
    if end > len(data):
        raise CodecError(f"truncated file index head: name of {length} bytes at byte {pos}")
    i = 0
    while i < len(raw):
        b, width = raw[i], 1 if raw[i] < 0x80 else 2 if raw[i] >> 5 == 6 else 3
        tail = raw[i + 1:i + width]
        if b >> 4 in (8, 9, 10, 11, 15) or len(tail) != width - 1 \
                or any(t >> 6 != 2 for t in tail):
            raise CodecError(f"malformed modified UTF-8 in file index head at byte {pos + 2 + i}")
        c = b if width == 1 else (b & 0x1F) << 6 | tail[0] & 0x3F if width == 2 else \
            (b & 0x0F) << 12 | (tail[0] & 0x3F) << 6 | tail[1] & 0x3F
        units += struct.pack(">H", c)
        i += width
    return bytes(units).decode("utf-16-be", "surrogatepass"), end


def encode_file_index(indexes: Mapping[str, Mapping[str, bytes | None]]) -> bytes:
    """The container of ``column -> index type -> payload`` (None: an empty index), in the
    mappings' order, as ``FileIndexFormat.Writer.writeColumnIndexes`` writes it."""
    names = b"".join(encode_java_utf(c) + b"".join(map(encode_java_utf, types))
                     for c, types in indexes.items())
    head_length = 24 + 8 * sum(map(len, indexes.values())) + 4 * len(indexes) + len(names)
    head, body = bytearray(struct.pack(">qiii", MAGIC, VERSION_1, head_length, len(indexes))), []
    start = head_length
    for column, types in indexes.items():
        head += encode_java_utf(column) + struct.pack(">i", len(types))
        for index_type, payload in types.items():
            head += encode_java_utf(index_type)
            if payload is None:
                head += struct.pack(">ii", EMPTY_INDEX_FLAG, 0)
            else:
                head += struct.pack(">ii", start, len(payload))
                body.append(payload)
                start += len(payload)
    head += struct.pack(">i", 0)  # redundant length
    return bytes(head) + b"".join(body)


def _int(data: bytes, pos: int, end: int) -> int:
    if pos + 4 > end:
        raise CodecError(f"truncated file index head at byte {pos} (head ends at {end})")
    return int(struct.unpack_from(">i", data, pos)[0])


def decode_file_index(data: bytes) -> FileIndexes:
    """``column -> index type -> payload`` (None for an empty index), in head order."""
    if len(data) < 16:
        raise CodecError(f"file index of {len(data)} bytes has no header")
    magic, version, head_length = struct.unpack_from(">qii", data)
    if magic != MAGIC:
        raise CodecError(f"not a file index: magic {magic}")
    if version != VERSION_1:
        raise CodecError(f"unknown file index version {version} (supported: 1)")
    if not 24 <= head_length <= len(data):
        raise CodecError(f"file index head of {head_length} bytes in a {len(data)}-byte file")
    indexes: FileIndexes = {}
    pos = 20
    for _ in range(max(_int(data, 16, head_length), 0)):
        column, pos = decode_java_utf(data[:head_length], pos)
        count, pos = _int(data, pos, head_length), pos + 4
        types = indexes.setdefault(column, {})
        for _ in range(max(count, 0)):
            index_type, pos = decode_java_utf(data[:head_length], pos)
            start, length = _int(data, pos, head_length), _int(data, pos + 4, head_length)
            pos += 8
            if start == EMPTY_INDEX_FLAG:
                types[index_type] = None
            elif head_length <= start and length >= 0 and start + length <= len(data):
                types[index_type] = data[start:start + length]
            else:
                raise CodecError(f"file index {column}/{index_type} at {start}+{length} "
                                 f"outside the body [{head_length}, {len(data)})")
    _int(data, pos, head_length)  # the redundant length must still fit the head
    return indexes
