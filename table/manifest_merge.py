"""Merging the manifests of a base manifest list: Java ``ManifestFileMerger`` with the semantics
of ``ManifestFileLegacyMerger`` (the block-aware ``ManifestFileBlockMerger``, Java's default,
gives the same entries), ``FileEntry.mergeEntries`` and the rolling ``ManifestAvroWriter``
(apache/paimon 5dacde516b).

Full compaction is tried first: when the manifests that must change (any DELETE entry, or
smaller than the target size) add up to ``manifest.full-compaction-threshold-size``, every
DELETE entry and the ADD it cancels vanish and the manifests holding them are rewritten;
manifests that need no change stay as they are. Otherwise the minor merge walks the list,
merging each run of manifests that reaches the target size, and the trailing run only when it
has ``manifest.merge-min-count`` files. A merge cancels ADD/DELETE pairs and keeps a DELETE
whose ADD is in an older manifest. Manifests are never changed in place: new ones are written.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from paimond.errors import CodecError, CorruptFileError, UnsupportedError
from paimond.format.binary_row import decode_manifest_row
from paimond.format.key_order import sort_key_function
from paimond.format.manifest import FILE_KIND_ADD, FILE_KIND_DELETE, ManifestEntry, encode_manifest
from paimond.format.manifest_list import ManifestFileMeta
from paimond.format.types import DataType
from paimond.table.manifest_files import ManifestWriter
from paimond.table.options import TableOptions

ReadManifest = Callable[[ManifestFileMeta], list[ManifestEntry]]
WriteManifests = Callable[[Sequence[ManifestEntry]], list[ManifestFileMeta]]
ROLLING_CHECK_RECORDS = 1000  # Java RollingFileWriter.CHECK_ROLLING_RECORD_CNT
_READ_PARALLELISM = 8


@dataclass(frozen=True, slots=True)
class ManifestMergeOptions:
    target_file_size_bytes: int = 8 << 20  # manifest.target-file-size
    merge_min_count: int = 30  # manifest.merge-min-count
    full_compaction_threshold_bytes: int = 16 << 20  # manifest.full-compaction-threshold-size

    @classmethod
    def of(cls, options: TableOptions) -> ManifestMergeOptions:
        return cls(options.manifest_target_file_size_bytes, options.manifest_merge_min_count,
                   options.manifest_full_compaction_threshold_bytes)

    def forced(self) -> ManifestMergeOptions:
        """Java ``compact_manifest``: merge whatever can be merged (min count 1, threshold 1 B)."""
        return replace(self, merge_min_count=1, full_compaction_threshold_bytes=1)


def cancel_entries(entries: Iterable[tuple[ManifestEntry, str]]) -> list[ManifestEntry]:
    """``FileEntry.mergeEntries``: an ADD then a DELETE of one file cancel; a DELETE whose ADD
    is not among ``entries`` stays. Entries come with the manifest they were read from."""
    merged: dict[tuple[object, ...], ManifestEntry] = {}
    for entry, manifest_name in entries:
        identifier = entry.identifier
        if entry.kind == FILE_KIND_ADD:
            if identifier in merged:
                raise CorruptFileError(manifest_name, f"adds file {entry.file.file_name} (bucket "
                                       f"{entry.bucket}, level {entry.file.level}) a second time")
            merged[identifier] = entry
        elif identifier in merged:
            del merged[identifier]
        else:
            merged[identifier] = entry
    return list(merged.values())


def write_rolling(writer: ManifestWriter, entries: Sequence[ManifestEntry],
                  target_file_size_bytes: int) -> list[ManifestFileMeta]:
    """Java's rolling manifest writer: a file is closed at the first multiple of 1000 records
    at which it has reached the target size, so every file but the last is at least that big."""
    cuts, start = [], 0
    while len(entries) - start > ROLLING_CHECK_RECORDS:
        end = _rolling_cut(entries, start, target_file_size_bytes, writer.compression)
        if end is None:
            break
        cuts.append((start, end))
        start = end
    cuts.append((start, len(entries)))
    return [writer.write_manifest(entries[a:b]) for a, b in cuts if b > a]


def _rolling_cut(entries: Sequence[ManifestEntry], start: int, target: int,
                 compression: str) -> int | None:
    """The first cut point (a multiple of 1000 records, counted from the first entry) at
    which ``entries[start:cut]`` encodes to ``target`` bytes or more; None if no cut point
    before the end gets there."""
    def size(cut: int) -> int:
        return len(encode_manifest(entries[start:cut], compression=compression))

    points = range(start + ROLLING_CHECK_RECORDS, len(entries), ROLLING_CHECK_RECORDS)
    if not points:
        return None
    # Guess from the bytes per entry of the first step, then walk to the first point that
    # reaches the target (the size grows with the cut).
    first = size(points[0])
    index = min(len(points) - 1, max(0, math.ceil(target / first) - 1)) if first < target else 0
    while index > 0 and size(points[index - 1]) >= target:
        index -= 1
    while size(points[index]) < target:
        index += 1
        if index == len(points):
            return None
    return points[index]


def merge_manifests(metas: Sequence[ManifestFileMeta], options: ManifestMergeOptions,
                    read: ReadManifest, write: WriteManifests,
                    partition_types: Sequence[DataType]) -> list[ManifestFileMeta]:
    """The merged manifest list for ``metas`` (returned as is when nothing merges)."""
    full = _full_compaction(metas, options, read, write, partition_types)
    return full if full is not None else _minor_compaction(metas, options, read, write)


def _read_all(read: ReadManifest, metas: Sequence[ManifestFileMeta]) -> list[list[ManifestEntry]]:
    if len(metas) <= 1:
        return [read(m) for m in metas]
    with ThreadPoolExecutor(max_workers=min(_READ_PARALLELISM, len(metas))) as pool:
        return list(pool.map(read, metas))


def _minor_compaction(metas: Sequence[ManifestFileMeta], options: ManifestMergeOptions,
                      read: ReadManifest, write: WriteManifests) -> list[ManifestFileMeta]:
    result: list[ManifestFileMeta] = []
    candidates: list[ManifestFileMeta] = []
    total = 0
    for meta in metas:
        total += meta.file_size
        candidates.append(meta)
        if total >= options.target_file_size_bytes:
            result += _merge_candidates(candidates, read, write)
            candidates, total = [], 0
    if len(candidates) >= options.merge_min_count:
        result += _merge_candidates(candidates, read, write)
    else:
        result += candidates
    return result


def _merge_candidates(candidates: Sequence[ManifestFileMeta], read: ReadManifest,
                      write: WriteManifests) -> list[ManifestFileMeta]:
    if len(candidates) == 1:
        return list(candidates)
    contents = _read_all(read, candidates)
    merged = cancel_entries((e, m.file_name) for m, entries in zip(candidates, contents, strict=True)
                            for e in entries)
    return write(merged) if merged else []


def _must_change(meta: ManifestFileMeta, options: ManifestMergeOptions) -> bool:
    return meta.num_deleted_files > 0 or meta.file_size < options.target_file_size_bytes


def _full_compaction(metas: Sequence[ManifestFileMeta], options: ManifestMergeOptions,
                     read: ReadManifest, write: WriteManifests,
                     partition_types: Sequence[DataType]) -> list[ManifestFileMeta] | None:
    if options.full_compaction_threshold_bytes <= 0:
        raise UnsupportedError("manifest.full-compaction-threshold-size must be positive")
    must_change = [m for m in metas if _must_change(m, options)]
    if sum(m.file_size for m in must_change) < options.full_compaction_threshold_bytes:
        return None
    with_deletes = [m for m in metas if m.num_deleted_files > 0]
    deleted = {e.identifier for m, entries in zip(with_deletes, _read_all(read, with_deletes),
                                                  strict=True)
               for e in entries if e.kind == FILE_KIND_DELETE}
    may_hit = _deleted_partition_test([i[0] for i in deleted], partition_types)
    result = [m for m in metas if not _must_change(m, options) and not may_hit(m)]
    kept = {m.file_name for m in result}
    to_merge = [m for m in metas if m.file_name not in kept]
    if len(to_merge) <= 1:
        return None
    survivors: list[ManifestEntry] = []
    for meta, entries in zip(to_merge, _read_all(read, to_merge), strict=True):
        adds = [e for e in entries if e.kind == FILE_KIND_ADD]
        live = [e for e in adds if e.identifier not in deleted]
        if _must_change(meta, options) or len(live) < len(adds):
            survivors += live
        else:
            result.append(meta)
    return result + (write(survivors) if survivors else [])


def _deleted_partition_test(partitions: Sequence[Any], types: Sequence[DataType]
                            ) -> Callable[[ManifestFileMeta], bool]:
    """Java ``PartitionPredicate.fromMultiple`` on a manifest's partition stats: may the
    manifest hold one of the deleted partitions? Per field, the deleted values' range must
    overlap the manifest's. It only decides which manifests are read; reading decides."""
    if not partitions:
        return lambda meta: False
    if not types:
        return lambda meta: True
    rows = [decode_manifest_row(p, types) for p in set(partitions)]
    bounds = []
    for i, data_type in enumerate(types):
        order = sort_key_function([data_type])
        present = [order([row[i]]) for row in rows if row[i] is not None]
        has_null = len(present) < len(rows)
        bounds.append((min(present) if present else None, max(present) if present else None,
                       has_null, order))

    def may_hit(meta: ManifestFileMeta) -> bool:
        stats = meta.partition_stats
        try:
            mins = decode_manifest_row(stats.min_values, types)
            maxs = decode_manifest_row(stats.max_values, types)
        except (CodecError, struct.error):  # unreadable stats: read the manifest to decide
            return True
        nulls = stats.null_counts or ()
        entries = meta.num_added_files + meta.num_deleted_files
        for i, (low, high, has_null, order) in enumerate(bounds):
            null_count = nulls[i] if i < len(nulls) else None
            if mins[i] is None or maxs[i] is None:
                if null_count is None or null_count < entries:
                    return True  # stats that do not bound the values decide nothing
                value_hit = False
            else:
                value_hit = (low is not None and high is not None
                             and order([maxs[i]]) >= low and order([mins[i]]) <= high)
            null_hit = has_null and (null_count is None or null_count > 0)
            if not (null_hit or value_hit):
                return False
        return True

    return may_hit
