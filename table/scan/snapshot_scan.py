"""A snapshot's live files: Java ``FileStoreScan`` / ``AbstractFileStoreScan`` (read side).

The live data files of a snapshot are the entries of its base and delta manifest lists,
merged in order: an ADD puts a file identifier, a later DELETE of the same identifier removes
it (``FileEntry.mergeEntries``). The index manifest lists the deletion-vector and hash index
files in force. Manifests are read in parallel (S3 latency dominates), merged in list order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from paimond.errors import CodecError, CorruptFileError, MissingFileError
from paimond.format.meta.index_manifest import IndexManifestEntry, decode_index_manifest
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    DataFileMeta,
    ManifestEntry,
    decode_manifest,
)
from paimond.format.meta.manifest_list import ManifestFileMeta, decode_manifest_list
from paimond.format.meta.manifest_slim import SlimEntry, decode_manifest_added, decode_manifest_slim
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import MANIFEST_DIR, bucket_dir_name, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage

T = TypeVar("T")
A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class LiveFile:
    """A live data file with where it was found (for error messages)."""

    entry: ManifestEntry
    manifest_name: str

    @property
    def meta(self) -> DataFileMeta:
        return self.entry.file


@dataclass
class BucketFiles:
    """The live files of one (partition, bucket), by level."""

    partition: bytes
    bucket: int
    total_buckets: int
    levels: dict[int, list[LiveFile]] = field(default_factory=lambda: defaultdict(list))

    @property
    def files(self) -> list[LiveFile]:
        return [f for level in sorted(self.levels) for f in self.levels[level]]

    def sorted_run_count(self) -> int:
        """Level 0: one run per file; each non-empty higher level is one run."""
        return len(self.levels.get(0, ())) + sum(1 for lv, fs in self.levels.items() if lv > 0 and fs)


@dataclass
class SnapshotFiles:
    snapshot: Snapshot
    base_manifests: list[ManifestFileMeta]
    delta_manifests: list[ManifestFileMeta]
    files: list[LiveFile]
    index_entries: list[IndexManifestEntry]

    @property
    def manifests(self) -> list[ManifestFileMeta]:
        return self.base_manifests + self.delta_manifests

    def buckets(self) -> dict[tuple[bytes, int], BucketFiles]:
        """Live files grouped by (partition bytes, bucket), each by level; deterministic order."""
        grouped: dict[tuple[bytes, int], BucketFiles] = {}
        for live in self.files:
            entry = live.entry
            key = (entry.partition, entry.bucket)
            bucket = grouped.get(key)
            if bucket is None:
                bucket = grouped[key] = BucketFiles(entry.partition, entry.bucket,
                                                    entry.total_buckets)
            bucket.levels[entry.file.level].append(live)
        return dict(sorted(grouped.items()))


def _read(storage: Storage, path: str, decode: Callable[[bytes], T], referenced_by: str,
          expected_size: int | None = None) -> T:
    return _decode(path, decode, _fetch(storage, path, referenced_by, expected_size))


def _fetch(storage: Storage, path: str, referenced_by: str, expected_size: int | None) -> bytes:
    try:
        data = storage.read_bytes(path)
    except MissingFileError:
        raise MissingFileError(path, referenced_by) from None
    if expected_size is not None and len(data) != expected_size:
        # An Avro file cut between two blocks still decodes, to fewer entries: the size that
        # the referencing metadata recorded is what catches it.
        raise CorruptFileError(path, f"has {len(data)} bytes, {referenced_by} records "
                                     f"{expected_size}")
    return data


def _decode(path: str, decode: Callable[[bytes], T], data: bytes) -> T:
    try:
        return decode(data)
    except CodecError as error:
        raise CorruptFileError(path, error.reason) from None


def _parallel(fn: Callable[[A], T], items: Sequence[A], parallelism: int) -> list[T]:
    if parallelism <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(parallelism, len(items))) as pool:
        return list(pool.map(fn, items))


def read_manifest_list(table: Table, name: str, referenced_by: str,
                       expected_size: int | None = None) -> list[ManifestFileMeta]:
    return _read(table.storage, table.file_path(MANIFEST_DIR, name), decode_manifest_list,
                 referenced_by, expected_size)


def read_manifest(table: Table, meta: ManifestFileMeta, referenced_by: str) -> list[ManifestEntry]:
    return _read(table.storage, table.file_path(MANIFEST_DIR, meta.file_name), decode_manifest,
                 referenced_by, meta.file_size)


def fetch_manifest(table: Table, meta: ManifestFileMeta, referenced_by: str) -> bytes:
    """A manifest's bytes, checked against the size its list records (no decoding: threads
    fetch, one consumer decodes, so a few fetched manifests are held at a time)."""
    return _fetch(table.storage, table.file_path(MANIFEST_DIR, meta.file_name), referenced_by,
                  meta.file_size)


def decode_fetched_slim(table: Table, meta: ManifestFileMeta, data: bytes) -> list[SlimEntry]:
    """``fetch_manifest``'s bytes decoded for planning only (``format.meta.manifest_slim``)."""
    return _decode(table.file_path(MANIFEST_DIR, meta.file_name), decode_manifest_slim, data)


def decode_fetched_added(table: Table, meta: ManifestFileMeta, data: bytes,
                         wanted: Mapping[int, tuple[object, ...]]) -> list[ManifestEntry]:
    """``fetch_manifest``'s bytes: only the ADD entries at these positions (with these
    identifiers), whole."""
    return _decode(table.file_path(MANIFEST_DIR, meta.file_name),
                   lambda raw: decode_manifest_added(raw, wanted), data)


def read_index_manifest(table: Table, snapshot: Snapshot) -> list[IndexManifestEntry]:
    if not snapshot.index_manifest:
        return []
    return _read(table.storage, table.file_path(MANIFEST_DIR, snapshot.index_manifest),
                 decode_index_manifest, table.snapshots.path(snapshot.id))


def merge_entries(entries: Iterable[tuple[ManifestEntry, str]], where: str) -> list[LiveFile]:
    """Apply ADD/DELETE entries in order; returns the surviving ADDs in first-seen order."""
    live: dict[tuple[object, ...], LiveFile] = {}
    for entry, manifest_name in entries:
        identifier = entry.identifier
        if entry.kind == FILE_KIND_ADD:
            if identifier in live:
                raise CorruptFileError(where, f"file {entry.file.file_name} (bucket "
                                       f"{entry.bucket}, level {entry.file.level}) is added "
                                       f"twice, again by manifest {manifest_name}")
            live[identifier] = LiveFile(entry, manifest_name)
        elif entry.kind == FILE_KIND_DELETE:
            # A DELETE without its ADD in this scan is ignored, as Java's scan keeps ADDs only.
            live.pop(identifier, None)
        else:
            raise CorruptFileError(manifest_name, f"unknown entry kind {entry.kind}")
    return list(live.values())


def scan_snapshot(table: Table, snapshot: Snapshot, *, parallelism: int = 8) -> SnapshotFiles:
    """Every live data file of ``snapshot`` plus its index manifest entries."""
    snapshot_path = table.snapshots.path(snapshot.id)
    base = read_manifest_list(table, snapshot.base_manifest_list, snapshot_path,
                              snapshot.base_manifest_list_size)
    delta = read_manifest_list(table, snapshot.delta_manifest_list, snapshot_path,
                               snapshot.delta_manifest_list_size)
    base_path = table.file_path(MANIFEST_DIR, snapshot.base_manifest_list)
    delta_path = table.file_path(MANIFEST_DIR, snapshot.delta_manifest_list)
    metas = [(m, base_path) for m in base] + [(m, delta_path) for m in delta]
    contents = _parallel(lambda pair: read_manifest(table, *pair), metas, parallelism)
    files = merge_entries(((e, meta.file_name) for (meta, _), entries in zip(metas, contents, strict=True)
                           for e in entries), snapshot_path)
    return SnapshotFiles(snapshot, base, delta, files, read_index_manifest(table, snapshot))


def check_manifest_versions(table: Table, snapshot: Snapshot, *, parallelism: int = 8) -> None:
    """Every manifest of ``snapshot`` decodes as a format paimond knows (its entries'
    ``_VERSION`` among the checks), through the planning decoder: a job that does not read
    them all otherwise (expiry reads the deltas of the snapshots it expires) refuses a table
    a newer Paimon wrote before it deletes anything. CorruptFileError naming the manifest."""
    where = table.snapshots.path(snapshot.id)
    metas = (read_manifest_list(table, snapshot.base_manifest_list, where,
                                snapshot.base_manifest_list_size)
             + read_manifest_list(table, snapshot.delta_manifest_list, where,
                                  snapshot.delta_manifest_list_size))
    _parallel(lambda meta: decode_fetched_slim(table, meta, fetch_manifest(table, meta, where)),
              metas, parallelism)


def bucket_path(table: Table, schema: TableSchema, partition: bytes, bucket: int) -> str:
    """Directory of one bucket's data files (``<table>/<k=v>/bucket-<b>``)."""
    directory = TableOptions.of(schema).data_file_path_directory
    parts = [p for p in (directory, partition_text(schema, partition)) if p]
    return table.file_path(*parts, bucket_dir_name(bucket))


def data_file_path(table: Table, schema: TableSchema, live: LiveFile) -> str:
    if live.meta.external_path:
        return live.meta.external_path
    return table.storage.join(bucket_path(table, schema, live.entry.partition, live.entry.bucket),
                              live.meta.file_name)


def verify_data_files(table: Table, schema: TableSchema, files: SnapshotFiles) -> None:
    """Raise MissingFileError for the first live data file (or extra file) not on storage.

    Lists each bucket directory once instead of probing file by file.
    """
    for (partition, bucket), bucket_files in files.buckets().items():
        directory = bucket_path(table, schema, partition, bucket)
        present = {s.name for s in table.storage.list_dir(directory)}
        for live in bucket_files.files:
            for name in (live.meta.file_name, *live.meta.extra_files):
                if live.meta.external_path and name == live.meta.file_name:
                    continue
                if name not in present:
                    raise MissingFileError(table.storage.join(directory, name),
                                           table.file_path(MANIFEST_DIR, live.manifest_name))
