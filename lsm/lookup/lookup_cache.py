"""A persistent key-lookup cache: for each immutable data file of levels >= 1, a local file
of its keys in sorted order as Fory standard rows with their row positions, so deletion-vector
and first-row lookups resolve a batch of keys by binary search instead of reading the data
file's key columns from storage again.

A cache file (``<table hash>-<data file name>.keys``; data files never change, so the name
is the key) is::

    "PMDKEYS1" | u32 header length | u32 0 | header JSON, zero-padded to 8
    [u64 offset of every row, and the end: when a key field is variable-width]
    rows: one Fory row per data file row (key fields..., _POSITION int64), key order
    u32 CRC32 of everything before | u32 0 | "PMDKEND1"

The header names the table, the data file, its size and row count and the key schema; a
file that does not match what is asked for, does not check out (magic, lengths, offsets,
CRC), or does not parse is deleted and rebuilt, never trusted. Files are written under a
temporary name and renamed, so concurrent processes see whole files or none; a reader whose
file was evicted meanwhile rebuilds it. The directory is bounded by ``max_bytes``: after
each write the least recently used files (by access time, set on every hit) go.

The CRC of a file is checked once per process for each (inode, size, modification time):
a hit changes only the access time, while any rewrite of the file changes the token.

Keys are held in comparable form (``lsm.merge.streaming.comparable_keys``: temporal types as
integers). Integer and boolean keys give fixed-size rows, searched with numpy's vectorized
binary search over a zero-copy view; rows with string or binary keys are decoded column by
column (vectorized, every slot bounds-checked; kept decoded in memory, up to 256 MiB per
process, for the next lookup of the same file version) and matched with one hash join. Other key
types (floats, decimals) are not cached: ``CachedKeyIndex`` then reads the data file as
``ScanKeyIndex`` does.
"""

from __future__ import annotations

import collections
import hashlib
import json
import mmap
import os
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from paimond.errors import CacheFileError, CodecError, UnsupportedError
from paimond.format.fory_row.columnar import (
    check_flat,
    decode_flat_rows,
    encode_flat_rows,
    fixed_columns,
    fixed_stride,
)
from paimond.format.fory_row.layout import bitmap_size
from paimond.format.meta.manifest import DataFileMeta
from paimond.lsm.lookup.key_lookup import POSITION_COLUMN, WANTED_COLUMN, ReadKeys, ScanKeyIndex
from paimond.lsm.merge.streaming import comparable_keys

MAGIC, TRAILER = b"PMDKEYS1", b"PMDKEND1"
VERSION = 1
_TAIL = 16
_STALE_TEMP_S = 3600
_verified: dict[tuple[str, int, int, int], bool] = {}  # (path, inode, size, mtime) checked
_verified_lock = threading.Lock()
_DECODED_BYTES = 256 << 20
Token = tuple[str, int, int, int]


class _DecodedRows:
    """Rows with string keys, decoded, kept per file version for this process's next lookups
    (a daemon's next compaction of the bucket), least recently used dropped past a budget."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._tables: collections.OrderedDict[Token, pa.Table] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: Token | None) -> pa.Table | None:
        if token is None:
            return None
        with self._lock:
            table = self._tables.get(token)
            if table is not None:
                self._tables.move_to_end(token)
            return table

    def put(self, token: Token | None, table: pa.Table) -> None:
        if token is None or table.nbytes > self.max_bytes:
            return
        with self._lock:
            self._tables[token] = table
            while sum(t.nbytes for t in self._tables.values()) > self.max_bytes:
                self._tables.popitem(last=False)


_decoded = _DecodedRows(_DECODED_BYTES)


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    discarded: int = 0  # files that failed validation
    evicted: int = 0


class LookupCache:
    """The cache directory, bounded by ``max_bytes`` with least-recently-used eviction."""

    def __init__(self, directory: str, max_bytes: int,
                 clock_s: Callable[[], float] = time.time) -> None:
        """``clock_s``: wall-clock seconds, for access times and stale temporary files."""
        if max_bytes <= 0:
            raise ValueError(f"lookup cache size must be positive, got {max_bytes}")
        os.makedirs(directory, exist_ok=True)
        self.directory, self.max_bytes, self.clock_s = directory, max_bytes, clock_s
        self.stats = CacheStats()

    def path_of(self, table_path: str, file_name: str) -> str:
        table = hashlib.sha1(table_path.encode()).hexdigest()[:16]
        return os.path.join(self.directory, f"{table}-{file_name}.keys")

    def load(self, table_path: str, meta: DataFileMeta, schema: pa.Schema) -> CachedKeys | None:
        """The validated cached keys of ``meta``, or None (missing, or discarded as bad)."""
        path = self.path_of(table_path, meta.file_name)
        try:
            keys = CachedKeys.open(path, _header(table_path, meta, schema), schema)
        except FileNotFoundError:
            return None
        except CacheFileError:
            self.stats.discarded += 1
            _remove(path)
            return None
        try:
            info = os.stat(path)
            os.utime(path, ns=(int(self.clock_s() * 1e9), info.st_mtime_ns))  # most recently used
        except OSError:
            pass
        return keys

    def store(self, table_path: str, meta: DataFileMeta, keys: pa.Table) -> CachedKeys:
        """Cache ``keys`` (comparable key columns + ``_POSITION``, any order) for ``meta``."""
        path = self.path_of(table_path, meta.file_name)
        header = _header(table_path, meta, keys.schema)
        parts = _encode(header, _sorted(keys))
        size = sum(len(p) for p in parts)
        if size <= self.max_bytes:
            temporary = os.path.join(self.directory,
                                     f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
            try:
                with open(temporary, "wb") as out:
                    for part in parts:
                        out.write(part)
                os.replace(temporary, path)
                info = os.stat(path)
            except OSError:
                _remove(temporary)  # a full or read-only disk: answer from memory
            else:
                with _verified_lock:  # written just now from memory: no need to re-check
                    _verified[(path, info.st_ino, info.st_size, info.st_mtime_ns)] = True
                self.evict(keep=path)
                try:
                    return CachedKeys.open(path, header, keys.schema)
                except (OSError, CacheFileError):
                    pass  # evicted or replaced meanwhile: answer from memory
        return CachedKeys.parse(b"".join(parts), header, keys.schema, check_crc=False)

    def evict(self, keep: str | None = None) -> None:
        """Delete least recently used files until the directory fits ``max_bytes``."""
        files, total, now = [], 0, self.clock_s()
        with os.scandir(self.directory) as entries:
            for entry in entries:
                try:
                    info = entry.stat()
                except OSError:
                    continue
                if entry.name.endswith(".tmp"):
                    if now - info.st_mtime > _STALE_TEMP_S:
                        _remove(entry.path)  # left by a crashed writer
                    continue
                if entry.name.endswith(".keys"):
                    files.append((info.st_atime, entry.path, info.st_size))
                    total += info.st_size
        for _, path, size in sorted(files):
            if total <= self.max_bytes:
                break
            if path != keep:
                _remove(path)
                total -= size
                self.stats.evicted += 1


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _header(table_path: str, meta: DataFileMeta, schema: pa.Schema) -> dict[str, Any]:
    return {"version": VERSION, "table": table_path, "data_file": meta.file_name,
            "file_size": meta.file_size, "row_count": meta.row_count,
            "schema": [[f.name, str(f.type)] for f in schema]}


def _sorted(keys: pa.Table) -> pa.Table:
    """Rows in key order (data files of levels >= 1 already are: checked, not re-sorted)."""
    names = [n for n in keys.column_names if n != POSITION_COLUMN]
    if len(names) == 1 and keys.num_rows > 1:
        column = keys.column(names[0]).combine_chunks()
        if column.null_count == 0 and pa.types.is_integer(column.type):
            values = np.asarray(column.to_numpy())
            if bool(np.all(values[1:] >= values[:-1])):
                return keys
    return keys.sort_by([(n, "ascending") for n in names])


def _encode(header: dict[str, Any], keys: pa.Table) -> list[bytes | memoryview]:
    """The cache file's bytes, in pieces (the rows are not copied)."""
    data, offsets = encode_flat_rows(keys)
    text = json.dumps(header, sort_keys=True).encode()
    head = MAGIC + struct.pack("<II", len(text), 0) + text
    parts: list[bytes | memoryview] = [head + bytes(-len(head) % 8)]
    if fixed_stride(keys.schema) is None:
        parts.append(offsets.astype("<i8").tobytes())
    parts.append(memoryview(data.data))
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    parts.append(struct.pack("<II", crc, 0) + TRAILER)
    return parts


class CachedKeys:
    """The sorted key rows of one data file, validated."""

    def __init__(self, schema: pa.Schema, count: int, rows: memoryview,
                 offsets: np.ndarray | None) -> None:
        self.schema, self.count, self._rows, self._offsets = schema, count, rows, offsets
        self.key_names = [n for n in schema.names if n != POSITION_COLUMN]
        self.token: Token | None = None  # the file version, when read from a file

    @classmethod
    def open(cls, path: str, expected: dict[str, Any], schema: pa.Schema) -> CachedKeys:
        with open(path, "rb") as stream:
            info = os.fstat(stream.fileno())
            if info.st_size < len(MAGIC) + _TAIL + 8:
                raise CacheFileError(f"{path}: {info.st_size} bytes is too short")
            mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
        token = (path, info.st_ino, info.st_size, info.st_mtime_ns)
        with _verified_lock:
            checked = token in _verified
        keys = cls.parse(mapped, expected, schema, check_crc=not checked, where=path)
        keys.token = token
        if not checked:
            with _verified_lock:
                _verified[token] = True
        return keys

    @classmethod
    def parse(cls, content: bytes | mmap.mmap, expected: dict[str, Any], schema: pa.Schema, *,
              check_crc: bool = True, where: str = "lookup cache") -> CachedKeys:
        view = memoryview(content)
        size = len(view)
        if bytes(view[:8]) != MAGIC or bytes(view[size - 8:]) != TRAILER:
            raise CacheFileError(f"{where}: bad magic")
        (crc, _) = struct.unpack_from("<II", view, size - _TAIL)
        if check_crc and zlib.crc32(view[:size - _TAIL]) != crc:
            raise CacheFileError(f"{where}: CRC mismatch")
        (header_length, _) = struct.unpack_from("<II", view, 8)
        if 16 + header_length > size - _TAIL:
            raise CacheFileError(f"{where}: header length {header_length} past the end")
        try:
            header = json.loads(bytes(view[16:16 + header_length]))
        except ValueError as error:
            raise CacheFileError(f"{where}: header does not parse: {error}") from None
        if header != expected:
            raise CacheFileError(f"{where}: header {header} is not for {expected}")
        start = 16 + header_length + (-(16 + header_length) % 8)
        body_end, count = size - _TAIL, int(expected["row_count"])
        stride = fixed_stride(schema)
        offsets = None
        if stride is None:
            end = start + 8 * (count + 1)
            if end > body_end:
                raise CacheFileError(f"{where}: row offsets past the end")
            offsets = np.frombuffer(view[start:end], dtype="<i8")
            rows = view[end:body_end]
            minimum = bitmap_size(len(schema)) + 8 * len(schema)
            if offsets[0] != 0 or offsets[-1] != len(rows) or (
                    count and int(np.diff(offsets).min()) < minimum):
                raise CacheFileError(f"{where}: row offsets are not consistent")
        else:
            rows = view[start:body_end]
            if len(rows) != stride * count:
                raise CacheFileError(f"{where}: {len(rows)} bytes of rows, {count} rows of "
                                     f"{stride} bytes expected")
        return cls(schema, count, rows, offsets)

    # ------------------------------------------------------------- lookups

    def match(self, wanted: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """(positions in the data file, rows of ``wanted``) of every key of ``wanted``
        (comparable key columns, in this cache's order) found here."""
        if self._offsets is None:
            return self._match_fixed(wanted)
        return self._match_rows(wanted)

    def _match_fixed(self, wanted: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        columns = fixed_columns(self._rows, self.schema, self.count)
        if len(self.key_names) == 1:
            cached = columns[self.key_names[0]]
            probe = np.asarray(wanted.column(0).to_numpy(), dtype=cached.dtype)
        else:
            dtype = np.dtype([(n, columns[n].dtype) for n in self.key_names])
            cached = np.empty(self.count, dtype=dtype)
            probe = np.empty(wanted.num_rows, dtype=dtype)
            for i, name in enumerate(self.key_names):
                cached[name] = columns[name]
                probe[name] = np.asarray(wanted.column(i).to_numpy())
        at = np.searchsorted(cached, probe)
        inside = at < self.count
        found = np.zeros(len(probe), dtype=bool)
        found[inside] = cached[at[inside]] == probe[inside]
        rows = np.flatnonzero(found)
        return columns[POSITION_COLUMN][at[rows]].astype(np.int64), rows.astype(np.int64)

    def _match_rows(self, wanted: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        """Variable-width keys: the cached rows decoded column by column (vectorized, every
        slot bounds-checked) and matched with one hash join, as on the data file's keys."""
        assert self._offsets is not None
        cached = _decoded.get(self.token)
        if cached is None:
            try:
                cached = decode_flat_rows(self._rows, self._offsets, self.schema)
            except CodecError as error:
                raise CacheFileError(f"cached rows: {error.reason}") from None
            _decoded.put(self.token, cached)
        numbers = pa.array(np.arange(wanted.num_rows, dtype=np.int64))
        joined = cached.join(wanted.append_column(WANTED_COLUMN, numbers), keys=self.key_names,
                             join_type="inner")
        return (np.asarray(joined.column(POSITION_COLUMN).to_numpy(), dtype=np.int64),
                np.asarray(joined.column(WANTED_COLUMN).to_numpy(), dtype=np.int64))


class CachedKeyIndex:
    """A ``KeyIndex`` answering from the cache, building each file's entry on first use from
    one read of its key columns (which ``ScanKeyIndex`` would have done anyway)."""

    def __init__(self, cache: LookupCache, table_path: str, read_keys: ReadKeys,
                 key_columns: Sequence[str]) -> None:
        self._cache, self._table_path = cache, table_path
        self._read_keys, self._key_columns = read_keys, list(key_columns)
        self._scan = ScanKeyIndex(read_keys, key_columns)

    def match(self, meta: DataFileMeta, wanted: pa.Table) -> pa.Table:
        probe = comparable_keys(wanted, self._key_columns)
        schema = pa.schema([*probe.schema, pa.field(POSITION_COLUMN, pa.int64(), False)])
        try:
            check_flat(schema)
        except UnsupportedError:
            return self._scan.match(meta, wanted)
        if any(c.null_count for c in probe.columns):
            return self._scan.match(meta, wanted)
        cached = self._cache.load(self._table_path, meta, schema)
        if cached is None:
            self._cache.stats.misses += 1
            cached = self._cache.store(self._table_path, meta, self._file_keys(meta, schema))
        else:
            self._cache.stats.hits += 1
        try:
            positions, rows = cached.match(probe)
        except CacheFileError:  # a row that does not decode: the file goes, rebuilt once
            self._cache.stats.discarded += 1
            _remove(self._cache.path_of(self._table_path, meta.file_name))
            cached = self._cache.store(self._table_path, meta, self._file_keys(meta, schema))
            positions, rows = cached.match(probe)
        return pa.table({POSITION_COLUMN: positions, WANTED_COLUMN: rows})

    def _file_keys(self, meta: DataFileMeta, schema: pa.Schema) -> pa.Table:
        batches = list(self._read_keys(meta))
        if batches:
            keys = comparable_keys(pa.Table.from_batches(batches), self._key_columns)
        else:
            keys = schema.empty_table().drop_columns([POSITION_COLUMN])
        keys = keys.append_column(pa.field(POSITION_COLUMN, pa.int64(), False),
                                  pa.array(np.arange(keys.num_rows, dtype=np.int64)))
        if keys.schema != schema:
            keys = keys.cast(schema)
        if keys.num_rows != meta.row_count:
            raise CodecError(f"{meta.file_name}: {keys.num_rows} rows read, the manifest says "
                             f"{meta.row_count}")
        return keys
