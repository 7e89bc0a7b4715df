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
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from paimond.errors import CodecError, CorruptFileError, UnsupportedError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.avro_container import PrefixSizes
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    ManifestEntry,
    manifest_sizes,
)
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.types.data_types import DataType
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.options.core import TableOptions

ReadManifest = Callable[[ManifestFileMeta], list[ManifestEntry]]
WriteManifests = Callable[[Sequence[ManifestEntry]], list[ManifestFileMeta]]
ROLLING_CHECK_RECORDS = 1000  # Java RollingFileWriter.CHECK_ROLLING_RECORD_CNT
_READ_PARALLELISM = 8
_KEEP_ENTRIES = 100_000  # a merge keeps the manifests with DELETEs it reads twice up to this
_CHUNK_ENTRIES = 20_000  # a streamed merge reads manifests ahead up to this many entries


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
                  target_file_size_bytes: int,
                  sizes: PrefixSizes[ManifestEntry] | None = None) -> list[ManifestFileMeta]:
    """Java's rolling manifest writer: a file is closed at the first multiple of 1000 records
    at which it has reached the target size, so every file but the last is at least that big.
    Each entry is encoded once: the sizes that find the cuts give the files' bytes too.
    ``sizes``: the prefixes of ``entries`` if already begun."""
    if sizes is None:
        sizes = manifest_sizes(entries, compression=writer.compression)
    metas, start = [], 0
    while len(entries) - start > ROLLING_CHECK_RECORDS:
        end = _rolling_cut(entries, start, target_file_size_bytes, writer.compression,
                           sizes=sizes)
        if end is None:
            break
        metas.append(writer.write_manifest(entries[start:end], sizes.container(end - start)))
        sizes = sizes.rest(end - start, entries, end)
        start = end
    if start < len(entries):
        metas.append(writer.write_manifest(entries[start:],
                                           sizes.container(len(entries) - start)))
    return metas


def _rolling_cut(entries: Sequence[ManifestEntry], start: int, target: int,
                 compression: str, per_entry: float | None = None,
                 sizes: PrefixSizes[ManifestEntry] | None = None) -> int | None:
    """The first cut point (a multiple of 1000 records, counted from the first entry) at
    which ``entries[start:cut]`` encodes to ``target`` bytes or more; None if no cut point
    before the end gets there. ``per_entry``: encoded bytes per entry, if known (where the
    walk starts; it finds the same point from anywhere). ``sizes``: the sizes of the
    prefixes of ``entries[start:]``, if already made (each entry is encoded once for all
    the points the walk tries)."""
    prefixes = sizes if sizes is not None else manifest_sizes(entries, first=start,
                                                              compression=compression)

    def size(cut: int) -> int:
        found = prefixes.size(cut - start)
        assert found is not None  # every point is within the entries
        return found

    points = range(start + ROLLING_CHECK_RECORDS, len(entries), ROLLING_CHECK_RECORDS)
    if not points:
        return None
    # Guess from the bytes per entry of the first step, then walk to the first point that
    # reaches the target (the size grows with the cut).
    if per_entry:
        steps = math.ceil(target / per_entry / ROLLING_CHECK_RECORDS) - 1
        index = min(len(points) - 1, max(0, steps))
    else:
        first = size(points[0])
        index = min(len(points) - 1, max(0, math.ceil(target / first) - 1)) \
            if first < target else 0
    while index > 0 and size(points[index - 1]) >= target:
        index -= 1
    while size(points[index]) < target:
        index += 1
        if index == len(points):
            return None
    return points[index]


@dataclass(frozen=True, slots=True)
class RollingWriter:
    """``write_rolling`` as a ``WriteManifests``; given to :func:`merge_manifests`, a full
    compaction writes its surviving entries as they come (the same files), holding about one
    target-size file of them, not the whole table."""

    writer: ManifestWriter
    target_file_size_bytes: int
    # the prefixes of the held entries a call of write_full_files left, for the next call
    _held: list[PrefixSizes[ManifestEntry]] = field(default_factory=list, compare=False)

    def __call__(self, entries: Sequence[ManifestEntry]) -> list[ManifestFileMeta]:
        return write_rolling(self.writer, entries, self.target_file_size_bytes,
                             self._sizes(entries))

    def _sizes(self, entries: Sequence[ManifestEntry]) -> PrefixSizes[ManifestEntry] | None:
        """The prefixes the last call left if ``entries`` are still those it held (more
        appended), once."""
        held = self._held.pop() if self._held else None
        return held if held is not None and held.follows(entries) else None

    def write_full_files(self, entries: list[ManifestEntry]) -> tuple[list[ManifestFileMeta],
                                                                      int]:
        """Writes the files ``write_rolling(entries + more)`` would close within ``entries``
        whatever ``more`` is, removes their entries from the front of ``entries``, and says
        at how many entries held a file may be full (when to call again)."""
        written: list[ManifestFileMeta] = []
        sizes = self._sizes(entries)
        if sizes is None:
            sizes = manifest_sizes(entries, compression=self.writer.compression)
        while len(entries) > ROLLING_CHECK_RECORDS:
            held = sizes.size(len(entries)) or 0
            if held < self.target_file_size_bytes:  # guess from the bytes per entry so far
                ratio = min(2.0, max(1.1, self.target_file_size_bytes / max(1, held)))
                self._held.append(sizes)
                return written, int(len(entries) * ratio) + 1
            cut = _rolling_cut(entries, 0, self.target_file_size_bytes, self.writer.compression,
                               held / len(entries), sizes)
            if cut is None:
                break
            written.append(self.writer.write_manifest(entries[:cut], sizes.container(cut)))
            del entries[:cut]
            sizes = sizes.rest(cut, entries, 0)
        self._held.append(sizes)
        return written, len(entries) + ROLLING_CHECK_RECORDS


def merge_manifests(metas: Sequence[ManifestFileMeta], options: ManifestMergeOptions,
                    read: ReadManifest, write: WriteManifests,
                    partition_types: Sequence[DataType]) -> list[ManifestFileMeta]:
    """The merged manifest list for ``metas`` (returned as is when nothing merges)."""
    full = _full_compaction(metas, options, read, write, partition_types)
    return full if full is not None else _minor_compaction(metas, options, read, write)


def _read_chunks(read: ReadManifest, metas: Sequence[ManifestFileMeta]
                 ) -> Iterator[tuple[ManifestFileMeta, list[ManifestEntry]]]:
    """Each manifest with its entries, in order, read up to ``_READ_PARALLELISM`` at a time
    (fewer when they hold more than ``_CHUNK_ENTRIES`` entries)."""
    start = 0
    while start < len(metas):
        end, entries = start, 0
        while end < len(metas) and end - start < _READ_PARALLELISM and (
                end == start or entries + _entries(metas[end]) <= _CHUNK_ENTRIES):
            entries += _entries(metas[end])
            end += 1
        chunk = metas[start:end]
        yield from zip(chunk, _read_all(read, chunk), strict=True)
        start = end


def _entries(meta: ManifestFileMeta) -> int:
    return meta.num_added_files + meta.num_deleted_files


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
    if isinstance(write, RollingWriter):
        return _merge_streamed(candidates, read, write)
    contents = _read_all(read, candidates)
    merged = cancel_entries((e, m.file_name) for m, entries in zip(candidates, contents, strict=True)
                            for e in entries)
    return write(merged) if merged else []


def _last_deletes(candidates: Sequence[ManifestFileMeta], read: ReadManifest
                  ) -> tuple[dict[tuple[object, ...], tuple[int, int]],
                             dict[str, list[ManifestEntry]]]:
    """The position (candidate, entry) of the last DELETE of each file, from the manifests
    counting DELETE entries; and those manifests' entries, kept when they are few."""
    with_deletes = [m for m in candidates if m.num_deleted_files > 0]
    keep = sum(m.num_added_files + m.num_deleted_files for m in with_deletes) <= _KEEP_ENTRIES
    read_before: dict[str, list[ManifestEntry]] = {}
    index_of = {m.file_name: i for i, m in enumerate(candidates)}
    deletes: dict[tuple[object, ...], tuple[int, int]] = {}
    for meta, entries in _read_chunks(read, with_deletes):
        for position, e in enumerate(entries):
            if e.kind == FILE_KIND_DELETE:
                deletes[e.identifier] = (index_of[meta.file_name], position)
        if keep:
            read_before[meta.file_name] = entries
    return deletes, read_before


def _merge_streamed(candidates: Sequence[ManifestFileMeta], read: ReadManifest,
                    stream: RollingWriter) -> list[ManifestFileMeta]:
    """``cancel_entries`` over the candidates' entries, written as they come: the same files,
    holding a few manifests and about one output file of entries (and the identifiers of the
    ADDs passed, to find one added twice). The manifests counting DELETE entries are read
    first: an entry is written where ``cancel_entries`` would leave it unless a later DELETE
    of its file cancels it."""
    deletes, read_before = _last_deletes(candidates, read)
    held: set[tuple[object, ...]] = set()  # files an ADD or a lone DELETE is held for
    survivors: list[ManifestEntry] = []
    written: list[ManifestFileMeta] = []
    next_try = 2 * ROLLING_CHECK_RECORDS
    chunks = _read_chunks(lambda m: read_before.pop(m.file_name, None) or read(m), candidates)
    for index, (meta, entries) in enumerate(chunks):
        for position, e in enumerate(entries):
            identifier = e.identifier
            last_delete = deletes.get(identifier)
            if e.kind == FILE_KIND_ADD:
                if identifier in held:
                    raise CorruptFileError(meta.file_name, f"adds file {e.file.file_name} (bucket "
                                           f"{e.bucket}, level {e.file.level}) a second time")
                held.add(identifier)
                if last_delete is None or last_delete < (index, position):
                    survivors.append(e)
            elif last_delete is None:
                raise CorruptFileError(meta.file_name, "holds DELETE entries its manifest list "
                                       "does not count")
            elif identifier in held:
                held.discard(identifier)
            else:
                held.add(identifier)
                if last_delete == (index, position):
                    survivors.append(e)
        if len(survivors) >= next_try:
            files, next_try = stream.write_full_files(survivors)  # what is left stays
            written += files
    return written + (stream(survivors) if survivors else [])


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
    # read again below: kept unless they are many entries (then read twice, memory bounded)
    keep = sum(m.num_added_files + m.num_deleted_files for m in with_deletes) <= _KEEP_ENTRIES
    read_before: dict[str, list[ManifestEntry]] = {}
    deleted: set[tuple[object, ...]] = set()
    for meta, entries in _read_chunks(read, with_deletes):
        deleted.update(e.identifier for e in entries if e.kind == FILE_KIND_DELETE)
        if keep:
            read_before[meta.file_name] = entries
    may_hit = _deleted_partition_test([i[0] for i in deleted], partition_types)
    result = [m for m in metas if not _must_change(m, options) and not may_hit(m)]
    kept = {m.file_name for m in result}
    to_merge = [m for m in metas if m.file_name not in kept]
    if len(to_merge) <= 1:
        return None
    stream = write if isinstance(write, RollingWriter) else None
    survivors: list[ManifestEntry] = []
    written: list[ManifestFileMeta] = []
    next_try = 2 * ROLLING_CHECK_RECORDS  # each try encodes what is held: not too often
    for meta, entries in _read_chunks(lambda m: read_before.pop(m.file_name, None) or read(m),
                                      to_merge):
        adds = [e for e in entries if e.kind == FILE_KIND_ADD]
        live = [e for e in adds if e.identifier not in deleted]
        if _must_change(meta, options) or len(live) < len(adds):
            survivors += live
            if stream is not None and len(survivors) >= next_try:
                files, next_try = stream.write_full_files(survivors)  # what is left stays
                written += files
        else:
            result.append(meta)
    return result + written + (write(survivors) if survivors else [])


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
    bounds = [_field_bounds(rows, i, data_type) for i, data_type in enumerate(types)]
    return lambda meta: _may_hit(meta, types, bounds)


_Bounds = tuple[Any, Any, bool, Callable[[list[Any]], Any]]


def _field_bounds(rows: Sequence[Sequence[Any]], i: int, data_type: DataType) -> _Bounds:
    """The deleted values' range of field ``i`` (None, None: only nulls), whether one is
    null, and the field's order."""
    order = sort_key_function([data_type])
    present = [order([row[i]]) for row in rows if row[i] is not None]
    has_null = len(present) < len(rows)
    return (min(present) if present else None, max(present) if present else None,
            has_null, order)


def _may_hit(meta: ManifestFileMeta, types: Sequence[DataType], bounds: Sequence[_Bounds]
             ) -> bool:
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
