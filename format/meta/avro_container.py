"""The Avro object-container file (header, sync-delimited blocks, codecs) of manifest files.

The container is framed here and only the record bytes go through fastavro, because
fastavro's own ``zstandard`` codec needs ``backports.zstd``, which paimond does not depend
on; zstd frames without a content size (as Java's zstd-jni streams them) are accepted.
Reading drops logical types from the writer schema, so ``_CREATION_TIME`` comes back as the
raw ``long`` of millis.
"""

from __future__ import annotations

import array
import bisect
import bz2
import functools
import io
import json
import lzma
import zlib
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Generic, TypeVar

import fastavro
import zstandard

from paimond.errors import CodecError

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16
_SYNC_INTERVAL_BYTES = 64000  # Avro Java DataFileConstants.DEFAULT_SYNC_INTERVAL
_DEFLATE_LEVEL = 6  # Avro Java deflate default (-1 = zlib's 6)
_XZ_LEVEL = 6  # Avro Java XZCodec default
Schema = dict[str, Any]
_T = TypeVar("_T")



def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_long(data: memoryview, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(data):
            raise CodecError("truncated Avro container: a varint runs past the end")
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise CodecError("malformed Avro container: varint longer than 10 bytes")


def _take(data: memoryview, pos: int, size: int, what: str) -> tuple[memoryview, int]:
    if size < 0 or pos + size > len(data):
        raise CodecError(f"truncated Avro container: {what} of {size} bytes runs past the end")
    return data[pos:pos + size], pos + size


def _read_header(data: memoryview) -> tuple[dict[str, bytes], bytes, int]:
    if bytes(data[:4]) != _MAGIC:
        raise CodecError(f"not an Avro object container file (starts {bytes(data[:4])!r})")
    meta: dict[str, bytes] = {}
    pos = 4
    while True:
        count, pos = _read_long(data, pos)
        if count == 0:
            break
        if count < 0:  # a negative count is followed by the block's byte size
            count = -count
            _, pos = _read_long(data, pos)
        for _ in range(count):
            size, pos = _read_long(data, pos)
            key, pos = _take(data, pos, size, "metadata key")
            size, pos = _read_long(data, pos)
            value, pos = _take(data, pos, size, "metadata value")
            meta[bytes(key).decode("utf-8", "replace")] = bytes(value)
    sync, pos = _take(data, pos, _SYNC_SIZE, "sync marker")
    return meta, bytes(sync), pos


def _header(meta: dict[str, bytes], sync: bytes) -> bytes:
    parts = [_MAGIC, _zigzag(len(meta))]
    for key, value in meta.items():
        raw = key.encode()
        parts += [_zigzag(len(raw)), raw, _zigzag(len(value)), value]
    parts += [_zigzag(0), sync]
    return b"".join(parts)


def _zstd_decompress(data: bytes) -> bytes:
    out = []
    dctx = zstandard.ZstdDecompressor()
    while data:  # Avro blocks are one frame, but frames may be concatenated
        dobj = dctx.decompressobj()
        out.append(dobj.decompress(data))
        if not dobj.eof:
            raise CodecError("truncated zstd frame in an Avro block")
        data = dobj.unused_data
    return b"".join(out)


def _snappy() -> Any:
    """cramjam's snappy, or None: paimond does not depend on it, pypaimon does."""
    try:
        import cramjam
    except ImportError:
        return None
    return cramjam.snappy


def _snappy_decompress(data: bytes) -> bytes:
    # Avro snappy: raw snappy, then the big-endian CRC32 of the uncompressed bytes.
    snappy = _snappy()
    if snappy is None:
        raise CodecError("reading the Avro snappy codec needs the cramjam package")
    out = bytes(snappy.decompress_raw(data[:-4]))
    if zlib.crc32(out).to_bytes(4, "big") != data[-4:]:
        raise CodecError("snappy block CRC32 mismatch")
    return out


def _decompress(codec: str, data: bytes) -> bytes:
    if codec == "null":
        return data
    if codec == "zstandard":
        return _zstd_decompress(data)
    if codec == "deflate":
        return zlib.decompress(data, -15)
    if codec == "snappy":
        return _snappy_decompress(data)
    if codec == "bzip2":
        return bz2.decompress(data)
    if codec == "xz":
        return lzma.decompress(data)
    raise CodecError(f"unsupported Avro codec {codec!r}")


def _compress(codec: str, data: bytes, zstd_level: int) -> bytes:
    if codec == "zstandard":
        return zstandard.ZstdCompressor(level=zstd_level).compress(data)
    if codec == "deflate":
        c = zlib.compressobj(_DEFLATE_LEVEL, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if codec == "snappy":
        snappy = _snappy()
        if snappy is None:
            raise ValueError("writing the Avro snappy codec needs the cramjam package")
        return bytes(snappy.compress_raw(data)) + zlib.crc32(data).to_bytes(4, "big")
    if codec == "bzip2":
        return bz2.compress(data)
    if codec == "xz":
        return lzma.compress(data, preset=_XZ_LEVEL)
    return data


_CODECS = {"zstd": "zstandard", "zstandard": "zstandard", "null": "null", "none": "null",
           "deflate": "deflate", "snappy": "snappy", "bzip2": "bzip2", "xz": "xz"}


def avro_codec(compression: str) -> str:
    """The Avro codec name for a ``manifest.compression`` value (``zstd`` -> ``zstandard``).

    Raises ValueError for a compression Avro has no codec for."""
    codec = _CODECS.get(compression.lower())
    if codec is None:
        raise ValueError(f"unsupported manifest compression {compression!r}; "
                         f"expected one of {sorted(_CODECS)}")
    return codec


def _strip_logical_types(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_logical_types(n) for n in node]
    if isinstance(node, dict):
        return {k: _strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    return node


@functools.lru_cache(maxsize=64)
def _plain_schema(schema_json: bytes) -> bytes:
    """The writer schema without logical types, so values come back as stored."""
    try:
        schema = json.loads(schema_json)
    except ValueError as e:
        raise CodecError(f"Avro header holds an unparsable schema: {e}") from e
    return json.dumps(_strip_logical_types(schema)).encode()


def _blocks(data: memoryview, pos: int, sync: bytes) -> Iterable[tuple[int, memoryview]]:
    index = 0
    while pos < len(data):
        count, pos = _read_long(data, pos)
        size, pos = _read_long(data, pos)
        if count < 0:
            raise CodecError(f"malformed Avro block {index}: negative record count {count}")
        block, pos = _take(data, pos, size, f"block {index}")
        marker, pos = _take(data, pos, _SYNC_SIZE, f"sync marker after block {index}")
        if bytes(marker) != sync:
            raise CodecError(f"malformed Avro container: wrong sync marker after block {index}")
        yield count, block
        index += 1


def read_blocks_uncompressed(data: bytes) -> tuple[dict[str, bytes], int, bytes]:
    """(header metadata, record count, every block's records uncompressed and concatenated)
    of an Avro object container file: for readers that decode records themselves. Raises
    CodecError for a malformed container or data its codec cannot decompress."""
    view = memoryview(data)
    meta, sync, pos = _read_header(view)
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    count, parts = 0, []
    try:
        for block_count, block in _blocks(view, pos, sync):
            count += block_count
            parts.append(_decompress(codec, bytes(block)))
    except CodecError:
        raise
    except Exception as e:  # zstd, zlib, lzma, ... raise many types on bad bytes
        raise CodecError(f"malformed Avro data ({codec}): {type(e).__name__}: {e}") from e
    return meta, count, b"".join(parts)


def count_records(data: bytes) -> int:
    """How many records an Avro object container file holds, from its block headers alone
    (nothing is decompressed). Raises CodecError for a malformed container."""
    view = memoryview(data)
    _, sync, pos = _read_header(view)
    return sum(count for count, _ in _blocks(view, pos, sync))


def read_records(data: bytes) -> list[dict[str, Any]]:
    """Every record of an Avro object container file, as dicts keyed by writer field names.

    Raises CodecError for anything that is not a well-formed container."""
    return [record for _, record in _read_blocks(data, None)]


def read_records_at(data: bytes, positions: Collection[int]) -> dict[int, dict[str, Any]]:
    """The records at these positions (0 is the file's first record), decoding only the
    blocks that hold one; a position past the last record is absent from the answer.

    Raises CodecError as :func:`read_records`, for the blocks it reads."""
    wanted = set(positions)
    return {at: record for at, record in _read_blocks(data, sorted(wanted)) if at in wanted}


def _read_blocks(data: bytes, positions: Sequence[int] | None
                 ) -> list[tuple[int, dict[str, Any]]]:
    """(position, record) of every record of the blocks holding one of the sorted
    ``positions`` (every block: None)."""
    view = memoryview(data)
    meta, sync, pos = _read_header(view)
    codec = meta.get("avro.codec", b"null").decode("utf-8", "replace")
    schema_json = meta.get("avro.schema")
    if schema_json is None:
        raise CodecError("Avro header has no avro.schema")
    plain = [_header({"avro.schema": _plain_schema(schema_json), "avro.codec": b"null"}, sync)]
    starts: list[int] = []
    first = 0
    try:
        for count, block in _blocks(view, pos, sync):
            first, start = first + count, first
            if positions is not None:
                at = bisect.bisect_left(positions, start)
                if at == len(positions) or positions[at] >= first:
                    continue
            raw = _decompress(codec, bytes(block))
            plain += [_zigzag(count), _zigzag(len(raw)), raw, sync]
            starts += range(start, first)
        values = list(fastavro.reader(io.BytesIO(b"".join(plain))))
    except CodecError:
        raise
    except Exception as e:  # fastavro, zstd, zlib, ... raise many types on bad bytes
        raise CodecError(f"malformed Avro data ({codec}): {type(e).__name__}: {e}") from e
    records = [v for v in values if isinstance(v, dict)]
    if len(records) != len(values):
        raise CodecError("Avro file holds values that are not records")
    if len(records) != len(starts):
        raise CodecError(f"Avro blocks announce {len(starts)} records and hold {len(records)}")
    return list(zip(starts, records, strict=True))


def write_records(schema: Schema, records: Iterable[dict[str, Any]], *,
                  compression: str, zstd_level: int) -> bytes:
    """An Avro object container file of ``records`` with ``schema`` and the given codec.

    Raises ValueError for an unknown compression or a value outside its Avro type."""
    codec = avro_codec(compression)
    buf = io.BytesIO()
    try:
        fastavro.writer(buf, schema, records, codec="null", sync_interval=_SYNC_INTERVAL_BYTES,
                        disable_tuple_notation=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"value does not fit the manifest schema: {e}") from e
    if codec == "null":
        return buf.getvalue()
    view = memoryview(buf.getvalue())
    meta, sync, pos = _read_header(view)
    meta["avro.codec"] = codec.encode()
    out = [_header(meta, sync)]
    for count, block in _blocks(view, pos, sync):
        packed = _compress(codec, bytes(block), zstd_level)
        out += [_zigzag(count), _zigzag(len(packed)), packed, sync]
    return b"".join(out)


class PrefixSizes(Generic[_T]):
    """The size of the container :func:`write_records` writes for each prefix of
    ``items[first:]`` as records (``to_record``; same schema, codec and level), computed only
    as far as asked. Blocks close as fastavro's writer closes them, after the record that
    brings the block to the sync interval, so a prefix's closed blocks are those of any
    longer one: each record is encoded once, each closed block compressed once and kept so
    (about the container's size), with where each record ends in it; a prefix ending inside
    a block has that block's records up to it compressed again (at most one block, ~64 KB).
    What a rolling writer needs to find its cut points, then :meth:`container` writes the
    file and :meth:`rest` goes on after it, without encoding a record again."""

    def __init__(self, schema: Schema, items: Sequence[_T], to_record: Callable[[_T], dict[str, Any]],
                 *, first: int = 0, compression: str, zstd_level: int) -> None:
        self._codec = avro_codec(compression)
        self._compression, self._zstd_level = compression, zstd_level
        self._schema_json, self._schema = schema, fastavro.parse_schema(schema)
        self._items, self._first, self._to_record = items, first, to_record
        self._header = len(write_records(schema, [], compression=compression,
                                         zstd_level=zstd_level))
        self._count = 0  # records encoded so far
        self._last: _T | None = None  # the last of them
        self._open = io.BytesIO()  # the open block's records
        self._block_starts = [0]  # record index each block starts at (the last one is open)
        self._closed = [0]  # framed bytes of the closed blocks, cumulative
        self._packed: list[bytes] = []  # each closed block's records, compressed
        self._ends = array.array("I")  # per record: where it ends in its block's records

    def __len__(self) -> int:
        """Records encoded so far."""
        return self._count

    def size(self, count: int) -> int | None:
        """Bytes of the container holding the first ``count`` records; None when there
        are fewer records than that."""
        if count > len(self._items) - self._first:
            return None
        while self._count < count:
            self._encode_next()
        block = bisect.bisect_right(self._block_starts, count) - 1
        start = self._block_starts[block]
        size = self._header + self._closed[block]
        if count == start:
            return size
        packed = self._pack(self._records_to(block, count))
        return size + len(_zigzag(count - start)) + len(_zigzag(len(packed))) + len(packed) \
            + _SYNC_SIZE

    def container(self, count: int) -> bytes:
        """The container of the first ``count`` records: :func:`write_records`' bytes but
        for the random sync marker. Raises ValueError when there are fewer records."""
        if self.size(count) is None:
            raise ValueError(f"fewer than {count} records")
        empty = write_records(self._schema_json, [], compression=self._compression,
                              zstd_level=self._zstd_level)  # the header, a fresh sync marker
        sync = empty[-_SYNC_SIZE:]
        out = [empty]
        block = bisect.bisect_right(self._block_starts, count) - 1
        for index in range(block):
            records = self._block_starts[index + 1] - self._block_starts[index]
            packed = self._packed[index]
            out += [_zigzag(records), _zigzag(len(packed)), packed, sync]
        start = self._block_starts[block]
        if count > start:
            packed = self._pack(self._records_to(block, count))
            out += [_zigzag(count - start), _zigzag(len(packed)), packed, sync]
        return b"".join(out)

    def rest(self, count: int, items: Sequence[_T], first: int) -> PrefixSizes[_T]:
        """The prefixes of the records after the first ``count``, which are ``items[first:]``
        (the same records; the caller may have cut the sequence), starting from the records
        already encoded here."""
        after = PrefixSizes(self._schema_json, items, self._to_record, first=first,
                            compression=self._compression, zstd_level=self._zstd_level)
        block = bisect.bisect_right(self._block_starts, count) - 1
        for index in range(block, len(self._block_starts)):
            last = index == len(self._block_starts) - 1
            raw = self._open.getvalue() if last else _decompress(self._codec, self._packed[index])
            low = max(count, self._block_starts[index])
            high = self._count if last else self._block_starts[index + 1]
            end = 0 if low == self._block_starts[index] else self._ends[low - 1]
            for record in range(low, high):
                after._add(raw[end:self._ends[record]])
                end = self._ends[record]
        if after._count:
            after._last = items[first + after._count - 1]
        return after

    def follows(self, items: Sequence[_T]) -> bool:
        """Whether ``items`` is still the sequence these are the prefixes of, with each
        record encoded at its place (a list only appended to since)."""
        encoded = self._first + self._count
        return items is self._items and len(items) >= encoded and (
            self._count == 0 or items[encoded - 1] is self._last)

    def _records_to(self, block: int, count: int) -> bytes:
        """The encoded records of ``block`` up to record ``count`` (within it)."""
        end = self._ends[count - 1]
        if block == len(self._block_starts) - 1:
            return self._open.getvalue()[:end]
        return _decompress(self._codec, self._packed[block])[:end]

    def _encode_next(self) -> None:
        item = self._items[self._first + self._count]
        try:
            fastavro.schemaless_writer(self._open, self._schema, self._to_record(item),
                                       disable_tuple_notation=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise ValueError(f"value does not fit the manifest schema: {e}") from e
        self._last = item
        self._written()

    def _add(self, record: bytes) -> None:
        self._open.write(record)
        self._written()

    def _written(self) -> None:
        self._count += 1
        self._ends.append(self._open.tell())
        if self._open.tell() >= _SYNC_INTERVAL_BYTES:  # the block closes
            records = self._count - self._block_starts[-1]
            packed = self._pack(self._open.getvalue())
            self._closed.append(self._closed[-1] + len(_zigzag(records))
                                + len(_zigzag(len(packed))) + len(packed) + _SYNC_SIZE)
            self._packed.append(packed)
            self._block_starts.append(self._count)
            self._open = io.BytesIO()

    def _pack(self, raw: bytes) -> bytes:
        return raw if self._codec == "null" else _compress(self._codec, raw, self._zstd_level)
