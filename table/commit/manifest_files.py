"""Writing manifests, manifest lists and index manifests with the metadata Paimon records for
them: Java ``ManifestFile.write``, ``ManifestList``, ``IndexManifestFile``,
``ManifestFileMeta`` partition stats (apache/paimon 5dacde516b).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from paimond.errors import CodecError
from paimond.format.binary.binary_row import decode_manifest_row, encode_manifest_row
from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.avro_container import read_blocks_uncompressed
from paimond.format.meta.index_manifest import IndexManifestEntry, encode_index_manifest
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry, SimpleStats, encode_manifest
from paimond.format.meta.manifest_list import (
    MANIFEST_FILE_META_VERSION,
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)
from paimond.format.types.data_types import DataType
from paimond.table.layout import (
    INDEX_MANIFEST_PREFIX,
    MANIFEST_DIR,
    MANIFEST_LIST_PREFIX,
    MANIFEST_PREFIX,
)
from paimond.table.storage.interface import Storage


def partition_stats(partitions: Sequence[bytes], types: Sequence[DataType]) -> SimpleStats:
    """Min, max and null count per partition field, untruncated (``_PARTITION_STATS``)."""
    rows = [decode_manifest_row(p, types) for p in partitions]
    mins: list[object] = []
    maxs: list[object] = []
    nulls: list[int | None] = []
    for i, data_type in enumerate(types):
        key = sort_key_function([data_type])
        present = [row[i] for row in rows if row[i] is not None]
        mins.append(min(present, key=lambda v: key([v])) if present else None)
        maxs.append(max(present, key=lambda v: key([v])) if present else None)
        nulls.append(len(rows) - len(present))
    return SimpleStats(encode_manifest_row(mins, types), encode_manifest_row(maxs, types),
                       tuple(nulls))


@dataclass
class ManifestWriter:
    """Writes one commit's metadata files under ``<table>/manifest`` with Paimon's names
    (``manifest-<uuid>-<n>``, ``manifest-list-<uuid>-<n>``, ``index-manifest-<uuid>-<n>``)
    and remembers them, so a commit that lost its race can remove them. ``before_write`` is
    told each path before its file is written (a job's record of what it is about to write)."""

    storage: Storage
    table_path: str
    partition_types: Sequence[DataType]
    compression: str = "zstd"
    written: list[str] = field(default_factory=list)
    before_write: Callable[[str], None] | None = None
    _prefix: str = field(default_factory=lambda: str(uuid.uuid4()))
    _counter: count[int] = field(default_factory=count)

    def _path(self, name: str) -> str:
        return self.storage.join(self.table_path, MANIFEST_DIR, name)

    def _write(self, name_prefix: str, data: bytes) -> tuple[str, int]:
        name = f"{name_prefix}{self._prefix}-{next(self._counter)}"
        path = self._path(name)
        if self.before_write is not None:
            self.before_write(path)
        self.storage.write_bytes(path, data)
        self.written.append(path)
        return name, len(data)

    def write_manifest(self, entries: Sequence[ManifestEntry], encoded: bytes | None = None
                       ) -> ManifestFileMeta:
        """``encoded``: the file's bytes if already made (``encode_manifest(entries)``'s with
        this writer's compression, but for the sync marker: ``manifest_sizes``' container)."""
        if encoded is None:
            encoded = encode_manifest(entries, compression=self.compression)
        name, size = self._write(MANIFEST_PREFIX, encoded)
        files = [e.file for e in entries]
        return ManifestFileMeta(
            file_name=name, file_size=size,
            num_added_files=sum(1 for e in entries if e.kind == FILE_KIND_ADD),
            num_deleted_files=sum(1 for e in entries if e.kind != FILE_KIND_ADD),
            partition_stats=partition_stats([e.partition for e in entries], self.partition_types),
            schema_id=max(f.schema_id for f in files),
            min_bucket=min(e.bucket for e in entries), max_bucket=max(e.bucket for e in entries),
            min_level=min(f.level for f in files), max_level=max(f.level for f in files),
            min_row_id=None, max_row_id=None)

    def write_manifest_list(self, metas: Sequence[ManifestFileMeta]) -> tuple[str, int]:
        return self._write(MANIFEST_LIST_PREFIX, encode_manifest_list(metas, compression=self.compression))

    def write_index_manifest(self, entries: Sequence[IndexManifestEntry]) -> str:
        name, _ = self._write(INDEX_MANIFEST_PREFIX,
                              encode_index_manifest(entries, compression=self.compression))
        return name

    def remove_written(self) -> None:
        """Delete every file this writer wrote (only when the commit is known to have failed)."""
        for path in self.written:
            self.storage.delete(path)
        self.written.clear()


# --- Reading only the names of a manifest list (expiry's skipping sets) ---------------------

_NULL, _SKIP_LONG, _SKIP_BYTES, _SKIP_FIXED, _UNION, _ARRAY, _MAP, _RECORD = range(8)
_FIXED_SIZES = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_SkipOp = tuple[Any, ...]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise CodecError("malformed Avro data: varint longer than 10 bytes")


def _skip_op(schema: Any, named: dict[str, _SkipOp]) -> _SkipOp:
    """How to skip one value of ``schema`` (Avro JSON), without decoding it."""
    if isinstance(schema, list):
        return (_UNION, tuple(_skip_op(branch, named) for branch in schema))
    kind = schema.get("type") if isinstance(schema, dict) else schema
    if isinstance(kind, (dict, list)):
        return _skip_op(kind, named)
    if kind in named:
        return named[kind]
    if kind in _FIXED_SIZES:
        size = _FIXED_SIZES[kind]
        return (_NULL,) if size == 0 else (_SKIP_FIXED, size)
    if kind in ("int", "long", "enum"):
        return (_SKIP_LONG,)
    if kind in ("bytes", "string"):
        return (_SKIP_BYTES,)
    if kind == "fixed":
        return (_SKIP_FIXED, int(schema["size"]))
    if kind == "array":
        return (_ARRAY, _skip_op(schema["items"], named))
    if kind == "map":
        return (_MAP, _skip_op(schema["values"], named))
    if kind == "record":
        fields: list[_SkipOp] = []
        op = (_RECORD, fields)
        named[schema["name"]] = op
        if schema.get("namespace"):
            named[f"{schema['namespace']}.{schema['name']}"] = op
        fields.extend(_skip_op(f["type"], named) for f in schema["fields"])
        return op
    raise CodecError(f"Avro type {kind!r} is not supported")


def _skip(op: _SkipOp, data: bytes, pos: int) -> int:
    code = op[0]
    if code == _SKIP_LONG:
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if code == _UNION:
        branch, pos = _varint(data, pos)
        return _skip(op[1][branch], data, pos)
    if code == _SKIP_BYTES:
        size, pos = _varint(data, pos)
        return pos + size
    if code == _NULL:
        return pos
    if code == _SKIP_FIXED:
        return pos + int(op[1])
    if code == _RECORD:
        for field_op in op[1]:
            pos = _skip(field_op, data, pos)
        return pos
    while True:  # array or map: blocks of items until a zero count
        count, pos = _varint(data, pos)
        if count == 0:
            return pos
        if count < 0:
            size, pos = _varint(data, pos)
            pos += size
            continue
        for _ in range(count):
            if code == _MAP:
                pos = _skip((_SKIP_BYTES,), data, pos)
            pos = _skip(op[1], data, pos)


def _flat(ops: list[_SkipOp]) -> list[_SkipOp]:
    """Record fields inlined, so a record is one loop of simple steps."""
    out: list[_SkipOp] = []
    for op in ops:
        if op[0] == _RECORD:
            out += _flat(op[1])
        elif op[0] != _NULL:
            out.append(op)
    return out


def _skip_flat(ops: list[_SkipOp], data: bytes, pos: int) -> int:
    for op in ops:
        code = op[0]
        if code == _SKIP_LONG:
            while data[pos] & 0x80:
                pos += 1
            pos += 1
        elif code == _UNION and data[pos] < 0x80:  # one-byte branch index
            branch = op[1][(data[pos] >> 1) ^ -(data[pos] & 1)]
            pos += 1
            if branch[0] == _SKIP_LONG:
                while data[pos] & 0x80:
                    pos += 1
                pos += 1
            elif branch[0] != _NULL:
                pos = _skip(branch, data, pos)
        else:
            pos = _skip(op, data, pos)
    return pos


@dataclass(frozen=True, slots=True)
class ManifestListRecords:
    """A manifest list's records, uncompressed and concatenated, with its writer schema."""

    schema: bytes  # the writer schema, as stored
    records: bytes
    count: int
    rest: list[_SkipOp]  # how to skip the fields after _FILE_SIZE


def manifest_list_records(data: bytes) -> ManifestListRecords | None:
    """The records of a manifest list file; None when names cannot be read from them alone
    (a schema that does not begin with ``_VERSION``, ``_FILE_NAME``, ``_FILE_SIZE``). Raises
    CodecError for malformed data."""
    meta, total, records = read_blocks_uncompressed(data)
    try:
        schema = meta["avro.schema"]
        fields = [(f["name"], _skip_op(f["type"], {})) for f in json.loads(schema)["fields"]]
    except (KeyError, ValueError, TypeError) as e:
        raise CodecError(f"malformed manifest list: {type(e).__name__}: {e}") from e
    leading = [(name, op[0]) for name, op in fields[:3]]
    if leading != [("_VERSION", _SKIP_LONG), ("_FILE_NAME", _SKIP_BYTES),
                   ("_FILE_SIZE", _SKIP_LONG)]:
        return None
    return ManifestListRecords(schema, records, total, _flat([op for _, op in fields[3:]]))


def manifest_list_names(records: ManifestListRecords, start: int = 0, skip_records: int = 0
                        ) -> list[tuple[str, int]]:
    """(file name, file size) of each record from byte ``start`` on (``skip_records`` records
    lie before it). Raises CodecError for malformed records or a ``_VERSION`` other than 2."""
    data, rest, at = records.records, records.rest, start
    out: list[tuple[str, int]] = []
    try:
        for _ in range(records.count - skip_records):
            version, at = _varint(data, at)
            if version != MANIFEST_FILE_META_VERSION:
                raise CodecError(f"manifest list record has _VERSION {version}, expected "
                                 f"{MANIFEST_FILE_META_VERSION}")
            length, at = _varint(data, at)
            name = data[at:at + length].decode()
            file_size, at = _varint(data, at + length)
            out.append((name, file_size))
            at = _skip_flat(rest, data, at)
    except (IndexError, ValueError) as e:
        raise CodecError(f"malformed manifest list record: {type(e).__name__}: {e}") from e
    if at != len(data):
        raise CodecError("malformed Avro data: the records do not fill their blocks")
    return out


def decode_manifest_list_names(data: bytes) -> list[tuple[str, int]]:
    """(file name, file size) of each manifest a manifest list names, in file order, as
    :func:`~paimond.format.meta.manifest_list.decode_manifest_list` would give them: the other
    fields are skipped by the writer schema, nothing else is built. Raises CodecError for
    malformed data or a ``_VERSION`` other than 2."""
    records = manifest_list_records(data)
    if records is None:
        return [(m.file_name, m.file_size) for m in decode_manifest_list(data)]
    return manifest_list_names(records)
