"""A snapshot's live files for planning, bucket by bucket, in memory proportional to a few
packed bytes per live file: Java ``AbstractFileStoreScan`` and ``FileEntry.mergeEntries``
(apache/paimon 5dacde516b), as :func:`paimond.table.scan.snapshot_scan.scan_snapshot` merges them.

``scan_snapshot`` holds every live ``DataFileMeta`` with its statistics (about 1.6 KB a file);
a planner of a million-file table needs, per file, its identifier, size, sequence numbers,
creation time, schema id and min key. Manifests are decoded a few at a time
(:mod:`paimond.format.meta.manifest_slim`), each entry merged at once into a per-bucket, per-level
map of packed records, and the buckets come back in ``scan_snapshot``'s order with
statistics-free ``DataFileMeta`` objects built for one bucket at a time. The few files a plan
picks are then decoded again, whole, from the Avro blocks that hold them (:meth:`full_entries`):
from the bytes a window kept (up to ``KEPT_MANIFEST_BYTES``), so that a manifest is fetched
once, else fetched again.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeVar

from paimond.errors import CodecError, CorruptFileError, PartitionStatsMismatchError
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import (
    EMPTY_STATS,
    FILE_KIND_ADD,
    DataFileMeta,
    ManifestEntry,
)
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.manifest_slim import SlimEntry, decode_manifest_slim_whole
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import MANIFEST_DIR
from paimond.table.scan.partition_windows import (
    WINDOW_ENTRIES,
    PartitionWindows,
    SortKey,
    partition_windows,
)
from paimond.table.scan.snapshot_scan import (
    BucketFiles,
    LiveFile,
    decode_fetched_added,
    decode_fetched_slim,
    fetch_manifest,
    read_index_manifest,
    read_manifest_list,
)

T = TypeVar("T")
A = TypeVar("A")

# order seen, file size, min/max sequence number, creation millis, schema id, total buckets,
# manifest index, position in the manifest, creation-time-present flag, row count; the min key
# follows
_PACKED = struct.Struct("<qqqqqqiiiBq")
# Whole entries a window keeps at most (``scan_live_windows``'s ``whole``): ~1.6 KB each
WHOLE_ENTRIES = 20_000
# Fetched manifest bytes a window keeps at most, for :meth:`LiveIndex.full_entries` to decode
# entries whole without fetching their manifests again (compressed Avro: ~100-300 bytes a file)
KEPT_MANIFEST_BYTES = 32 * 2**20
# A file's key in its level's map: the name alone when the rest of Java's identifier is empty
FileKey = str | tuple[str, tuple[str, ...], bytes | None, str | None]


def _file_key(name: str, extra: tuple[str, ...], embedded: bytes | None,
              external: str | None) -> FileKey:
    return name if not extra and embedded is None and external is None else (
        name, extra, embedded, external)


def _in_windows(fn: Callable[[A], T], items: Sequence[A], parallelism: int) -> Iterator[T]:
    """``fn`` of each item in order, at most ``parallelism`` results held at once."""
    if parallelism <= 1 or len(items) <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(max_workers=min(parallelism, len(items))) as pool:
        for start in range(0, len(items), parallelism):
            yield from pool.map(fn, items[start:start + parallelism])


@dataclass
class LiveIndex:
    """The live files of ``snapshot`` as packed records: (partition, bucket) -> level ->
    file key -> record."""

    snapshot: Snapshot
    manifests: list[tuple[ManifestFileMeta, str]]  # with the path of the list naming each
    index_entries: list[IndexManifestEntry]
    # (manifest, position) -> a live file's ADD entry kept whole from the first read
    # (``scan_live_windows``'s ``whole``), so :meth:`full_entries` need not read it again
    whole: dict[tuple[int, int], ManifestEntry] = field(default_factory=dict)
    # manifest index -> its bytes, as fetched for this window (``KEPT_MANIFEST_BYTES`` in all)
    fetched: dict[int, bytes] = field(default_factory=dict)
    _buckets: dict[tuple[bytes, int], dict[int, dict[FileKey, bytes]]] = field(
        default_factory=dict)
    _seen: int = 0

    def _merge(self, entries: Iterable[SlimEntry], manifest: int, where: str,
               keep: Callable[[bytes, int], bool] | None = None) -> None:
        """``table.scan.snapshot_scan.merge_entries`` for one manifest's entries, in order; ``keep`` (of
        the partition and the manifest's index) leaves out entries of other windows."""
        name = self.manifests[manifest][0].file_name
        for position, e in enumerate(entries):
            if keep is not None and not keep(e.partition, manifest):
                continue
            key = _file_key(e.file_name, e.extra_files, e.embedded_index, e.external_path)
            levels = self._buckets.get((e.partition, e.bucket))
            if e.kind != FILE_KIND_ADD:  # a DELETE without its ADD is ignored (Java keeps ADDs)
                if levels is not None and e.level in levels:
                    levels[e.level].pop(key, None)
                continue
            if levels is None:
                levels = self._buckets[(e.partition, e.bucket)] = {}
            files = levels.get(e.level)
            if files is None:
                files = levels[e.level] = {}
            if key in files:
                raise CorruptFileError(where, f"file {e.file_name} (bucket {e.bucket}, level "
                                       f"{e.level}) is added twice, again by manifest {name}")
            self._seen += 1
            created = e.creation_time_millis
            files[key] = _PACKED.pack(
                self._seen, e.file_size, e.min_sequence_number, e.max_sequence_number,
                created or 0, e.schema_id, e.total_buckets, manifest, position,
                created is not None, e.row_count) + e.min_key

    def buckets(self) -> Iterator[BucketFiles]:
        """Every bucket with a live file, ordered as ``SnapshotFiles.buckets()``; each one's
        levels in first-seen order, its files without statistics, max key or row counts."""
        for (partition, bucket), levels in sorted(self._buckets.items()):
            first, total, grouped = None, 0, {}
            for level in sorted(levels):
                live = []
                for key, packed in levels[level].items():
                    seen, total_buckets, entry = self._slim_entry(partition, bucket, level,
                                                                  key, packed)
                    if first is None or seen < first:
                        first, total = seen, total_buckets
                    live.append(LiveFile(entry, self.manifests[entry_manifest(packed)][0]
                                         .file_name))
                if live:
                    grouped[level] = live
            if grouped:
                files = BucketFiles(partition, bucket, total)
                files.levels.update(grouped)
                yield files

    @staticmethod
    def _slim_entry(partition: bytes, bucket: int, level: int, key: FileKey,
                    packed: bytes) -> tuple[int, int, ManifestEntry]:
        (seen, size, min_seq, max_seq, created, schema_id, total_buckets, _, _,
         has_created, rows) = _PACKED.unpack_from(packed)
        name, extra, embedded, external = (key, (), None, None) if isinstance(key, str) else key
        meta = DataFileMeta(name, size, rows, packed[_PACKED.size:], b"", EMPTY_STATS, EMPTY_STATS,
                            min_seq, max_seq, schema_id, level, extra,
                            created if has_created else None, None, embedded, None, None,
                            external, None, None, None)
        return seen, total_buckets, ManifestEntry(FILE_KIND_ADD, partition, bucket,
                                                  total_buckets, meta)

    def origin(self, entry: ManifestEntry) -> tuple[int, int]:
        """Where the live ``entry`` (one of :meth:`buckets`) was added: the index of its
        manifest in :attr:`manifests` and its position there. Their order is the order
        ``scan_snapshot`` lists live files in, across windows too."""
        f = entry.file
        key = _file_key(f.file_name, f.extra_files, f.embedded_index, f.external_path)
        manifest, position = _PACKED.unpack_from(
            self._buckets[(entry.partition, entry.bucket)][f.level][key])[7:9]
        return int(manifest), int(position)

    def bucket_entries(self, partition: bytes, bucket: int) -> list[ManifestEntry]:
        """The live files of one bucket as :meth:`buckets` gives them (no statistics, no max
        key), in no particular order; empty when it has none."""
        levels = self._buckets.get((partition, bucket), {})
        return [self._slim_entry(partition, bucket, level, key, packed)[2]
                for level, files in levels.items() for key, packed in files.items()]

    def full_entries(self, table: Table, slim: Iterable[ManifestEntry], *,
                     parallelism: int = 8) -> dict[tuple[object, ...], ManifestEntry]:
        """The live ADD entries, whole, of the files ``slim`` names (entries of
        :meth:`buckets`), by identifier: the Avro blocks holding them are decoded once more,
        from the manifest bytes the window kept or else fetched again."""
        wanted: dict[int, dict[int, tuple[object, ...]]] = defaultdict(dict)
        found: dict[tuple[object, ...], ManifestEntry] = {}
        for e in slim:
            manifest, position = self.origin(e)
            kept = self.whole.get((manifest, position))
            if kept is not None:
                found[e.identifier] = kept
            else:
                wanted[manifest][position] = e.identifier
        if wanted:
            found.update(read_added(table, self.manifests, wanted, parallelism=parallelism,
                                    fetched=self.fetched))
        return found


def read_added(table: Table, manifests: Sequence[tuple[ManifestFileMeta, str]],
               wanted: Mapping[int, Mapping[int, tuple[object, ...]]], *, parallelism: int = 8,
               fetched: Mapping[int, bytes] | None = None
               ) -> dict[tuple[object, ...], ManifestEntry]:
    """The ADD entries, whole, at ``wanted[manifest][position]`` (each with the identifier
    given; ``manifests`` as :attr:`LiveIndex.manifests`), by identifier: only the Avro blocks
    holding them are decoded. Usable after the windows that found them are gone. ``fetched``:
    manifest bytes already at hand, by index (the others are fetched)."""
    order = sorted(wanted)
    kept = fetched or {}

    def load(index: int) -> bytes:
        data = kept.get(index)
        if data is not None:
            return data
        meta, list_path = manifests[index]
        return fetch_manifest(table, meta, list_path)

    found: dict[tuple[object, ...], ManifestEntry] = {}
    for index, data in zip(order, _in_windows(load, order, parallelism), strict=True):
        meta = manifests[index][0]
        for e in decode_fetched_added(table, meta, data, wanted[index]):
            found[e.identifier] = e
    return found


def entry_manifest(packed: bytes) -> int:
    """The index (in :attr:`LiveIndex.manifests`) of the manifest adding a packed file."""
    return int(_PACKED.unpack_from(packed)[7])


def scan_live_index(table: Table, snapshot: Snapshot, *, parallelism: int = 8) -> LiveIndex:
    """The live files of ``snapshot`` (as ``scan_snapshot``, same errors) plus its index
    manifest entries, holding at most ``parallelism`` fetched manifests at a time."""
    return next(scan_live_windows(table, snapshot, None, parallelism=parallelism))


def scan_live_windows(table: Table, snapshot: Snapshot, schema: TableSchema | None, *,
                      parallelism: int = 8, budget: int = WINDOW_ENTRIES,
                      whole: Callable[[SlimEntry], bool] | None = None,
                      whole_cap: int = WHOLE_ENTRIES) -> Iterator[LiveIndex]:
    """The live files of ``snapshot`` one window of partitions at a time
    (``table.scan.partition_windows``; one window without ``schema``). Raises
    PartitionStatsMismatchError, possibly after some windows came back. ``whole``: the ADD
    entries it is true for are kept whole too (:attr:`LiveIndex.whole`), at most
    ``whole_cap`` a window (the others are decoded again when asked for). Each window keeps
    the bytes of the manifests it fetched, ``KEPT_MANIFEST_BYTES`` at most
    (:attr:`LiveIndex.fetched`)."""
    snapshot_path = table.snapshots.path(snapshot.id)
    base = read_manifest_list(table, snapshot.base_manifest_list, snapshot_path,
                              snapshot.base_manifest_list_size)
    delta = read_manifest_list(table, snapshot.delta_manifest_list, snapshot_path,
                               snapshot.delta_manifest_list_size)
    base_path = table.file_path(MANIFEST_DIR, snapshot.base_manifest_list)
    delta_path = table.file_path(MANIFEST_DIR, snapshot.delta_manifest_list)
    manifests = [(m, base_path) for m in base] + [(m, delta_path) for m in delta]
    windows = None if schema is None else partition_windows(
        schema, [m for m, _ in manifests], budget=budget)
    index_entries: list[IndexManifestEntry] | None = None
    for window in range(windows.count if windows else 1):
        index = LiveIndex(snapshot, manifests, [])
        numbers = [i for i in range(len(manifests))
                   if windows is None or window in windows.manifest_windows(i)]
        keep = _window_filter(windows, window) if windows and windows.count > 1 else None
        contents = _in_windows(lambda i: fetch_manifest(table, *manifests[i]), numbers,
                               parallelism)
        kept_bytes = 0
        for number, data in zip(numbers, contents, strict=True):
            if kept_bytes + len(data) <= KEPT_MANIFEST_BYTES:
                index.fetched[number] = data
                kept_bytes += len(data)
            if whole is None:
                index._merge(decode_fetched_slim(table, manifests[number][0], data), number,
                             snapshot_path, keep)
                continue
            slim, kept = _decode_whole(table, manifests[number][0], data, whole)
            index._merge(slim, number, snapshot_path, keep)
            for at, entry in kept.items():
                if len(index.whole) >= whole_cap:
                    break
                if keep is None or keep(entry.partition, number):
                    index.whole[(number, at)] = entry
        if index_entries is None:
            index_entries = read_index_manifest(table, snapshot)
        index.index_entries = index_entries
        yield index


def _decode_whole(table: Table, meta: ManifestFileMeta, data: bytes,
                  whole: Callable[[SlimEntry], bool]
                  ) -> tuple[list[SlimEntry], dict[int, ManifestEntry]]:
    """``decode_fetched_slim`` keeping some entries whole (same errors)."""
    try:
        return decode_manifest_slim_whole(data, whole)
    except CodecError as error:
        raise CorruptFileError(table.file_path(MANIFEST_DIR, meta.file_name),
                               error.reason) from None


def _window_filter(windows: PartitionWindows, window: int) -> Callable[[bytes, int], bool]:
    known: dict[bytes, tuple[SortKey, int]] = {}

    def keep(partition: bytes, manifest: int) -> bool:
        found = known.get(partition)
        if found is None:
            key = windows.key(partition)
            found = known[partition] = (key, windows.window_of(key))
        if not windows.in_range(manifest, found[0]):
            raise PartitionStatsMismatchError(manifest)
        return found[1] == window

    return keep
