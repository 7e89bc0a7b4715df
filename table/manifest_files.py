"""Writing manifests, manifest lists and index manifests with the metadata Paimon records for
them: Java ``ManifestFile.write``, ``ManifestList``, ``IndexManifestFile``,
``ManifestFileMeta`` partition stats (apache/paimon 5dacde516b).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import count

from paimond.format.binary_row import decode_manifest_row, encode_manifest_row
from paimond.format.index_manifest import IndexManifestEntry, encode_index_manifest
from paimond.format.key_order import sort_key_function
from paimond.format.manifest import FILE_KIND_ADD, ManifestEntry, SimpleStats, encode_manifest
from paimond.format.manifest_list import ManifestFileMeta, encode_manifest_list
from paimond.format.types import DataType
from paimond.table.layout import (
    INDEX_MANIFEST_PREFIX,
    MANIFEST_DIR,
    MANIFEST_LIST_PREFIX,
    MANIFEST_PREFIX,
)
from paimond.table.storage import Storage


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

    def write_manifest(self, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        name, size = self._write(MANIFEST_PREFIX, encode_manifest(entries, compression=self.compression))
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
