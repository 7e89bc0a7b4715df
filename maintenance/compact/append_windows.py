"""The append table's plan (``maintenance.compact.append_plan``) over a snapshot's live files read one
window of partitions at a time without statistics (``table.scan.bucket_scan``,
``table.scan.window_scan``), with the plan the whole scan gives: the same tasks in the same order,
the same skips, the same count of buckets seen.

- Fixed buckets: each bucket is picked in its window; the picked files are read back whole
  before the next window; tasks and skips come out in (partition, bucket) order.
- Bucket-unaware: Java's coordinator takes the first ``compaction.file-num-limit`` files worth
  compacting in the order the scan lists live files (the manifest and position of each one's
  ADD, comparable across windows); those are kept (at most the limit) over all windows, then
  packed per partition and their files read back whole.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.manifest_slim import SlimEntry
from paimond.lsm.task import CompactTask
from paimond.maintenance.compact.append_plan import (
    AppendPlanner,
    FileVector,
    file_vectors,
    pick_bucket,
    pick_file,
    pick_unaware,
    should_compact,
)
from paimond.maintenance.compact.plan import expired_partitions
from paimond.table.indexes.deletion_vectors import bucket_dv_entry
from paimond.table.layout import partition_text
from paimond.table.scan.bucket_scan import LiveIndex, read_added
from paimond.table.scan.snapshot_scan import BucketFiles, read_index_manifest
from paimond.table.scan.window_scan import index_by_partition, over_windows


def _whole(tasks: list[CompactTask], full: dict[tuple[object, ...], ManifestEntry]
           ) -> list[CompactTask]:
    return [replace(t, inputs=tuple(full[e.identifier] for e in t.inputs)) for t in tasks]


@dataclass
class _Buckets:
    tasks: list[tuple[tuple[bytes, int], CompactTask]] = field(default_factory=list)
    skipped: list[tuple[tuple[bytes, int], str]] = field(default_factory=list)
    seen: int = 0


def plan_buckets(planner: AppendPlanner, full: bool, window_entries: int) -> None:
    """Fixed buckets (``BucketedAppendCompactManager``), every bucket once."""
    expired = expired_partitions(planner.schema, planner.table_options, planner.moment)

    def each(state: _Buckets, live: LiveIndex) -> None:
        index = index_by_partition(live.index_entries) if planner.dv else {}
        tasks = []
        for files in live.buckets():
            if not planner.wanted(files.partition):
                continue
            state.seen += 1
            text = partition_text(planner.schema, files.partition)
            if (skipped := _skipped_bucket(files.partition, files.bucket, text, expired)):
                state.skipped.append(((files.partition, files.bucket), skipped))
            elif (task := _plan_bucket(planner, files, index, full)) is not None:
                tasks.append(task)
        if tasks:
            whole = live.full_entries(planner.table, [e for t in tasks for e in t.inputs])
            state.tasks += [((t.partition, t.bucket), t) for t in _whole(tasks, whole)]

    found = over_windows(planner.table, planner.snapshot, planner.schema, _Buckets, each,
                         budget=window_entries)
    planner.seen += found.seen
    planner.tasks += [task for _, task in sorted(found.tasks, key=lambda t: t[0])]
    planner.skipped += [text for _, text in sorted(found.skipped, key=lambda s: s[0])]


def _skipped_bucket(partition: bytes, bucket: int, text: str,
                    expired: Callable[[bytes], bool]) -> str | None:
    """Why a fixed-bucket plan leaves the bucket alone, or None."""
    if expired(partition):
        return f"{text} bucket {bucket}: partition expired (compaction.skip-expired-partitions)"
    if bucket < 0:
        return f"{text} bucket {bucket}: not a fixed bucket"
    return None


def _plan_bucket(planner: AppendPlanner, files: BucketFiles,
                 index: dict[bytes, list[IndexManifestEntry]], full: bool) -> CompactTask | None:
    """The bucket's task (its files as listed, not yet read back whole), or None."""
    partition, bucket = files.partition, files.bucket
    by_name = {f.entry.file.file_name: f.entry for f in files.files}
    dv_index = (bucket_dv_entry(index.get(partition, ()), partition, bucket)
                if planner.dv else None)
    with_vector = None
    if planner.dv:
        with_vector = frozenset(file_vectors([dv_index], partition) if dv_index else ())
    picked = pick_bucket([pick_file(e) for e in by_name.values()], planner.options,
                         full=full, with_vector=with_vector)
    if not picked:
        return None
    return planner.task(partition, bucket, files.total_buckets,
                        tuple(by_name[f.name] for f in picked), dv_index,
                        "full" if full else "min-file-num")


class _Overflow(Exception):
    """More files worth compacting than ``compaction.file-num-limit``."""


@dataclass
class _Packed:
    # (where the group's first file was listed, the task's number in its group, the task)
    tasks: list[tuple[tuple[int, int], int, CompactTask]] = field(default_factory=list)
    candidates: int = 0
    seen: int = 0
    index: dict[bytes, list[IndexManifestEntry]] | None = None


def plan_unaware(planner: AppendPlanner, window_entries: int) -> None:
    """Bucket-unaware (``AppendCompactCoordinator``): Java scans the files worth compacting,
    up to ``compaction.file-num-limit`` of them in the scan's order, then packs each
    partition's. While the files worth compacting stay within the limit, every one is
    taken, so each window packs its own partitions, from entries kept whole as the
    manifests are first read (no second read); past the limit, :func:`_plan_limited`."""
    options = planner.options
    small = options.compaction_file_size_bytes
    vectored: frozenset[str] = frozenset()
    if planner.dv:
        vectored = frozenset(dv.data_file_name for e in read_index_manifest(
            planner.table, planner.snapshot) for dv in e.index_file.dv_ranges or ()
            if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS)

    def worth(e: SlimEntry) -> bool:  # may be a candidate: kept whole from the first read
        return e.file_size < small or e.file_name in vectored

    def each(state: _Packed, live: LiveIndex) -> None:
        if state.index is None:
            state.index = index_by_partition(live.index_entries)
        tasks: list[tuple[tuple[int, int], int, CompactTask]] = []
        for files in live.buckets():
            partition = files.partition
            if not planner.wanted(partition):
                continue
            state.seen += 1
            vectors = (file_vectors(state.index.get(partition, ()), partition)
                       if planner.dv else None)
            groups: dict[int, list[tuple[tuple[int, int], ManifestEntry]]] = {}
            for live_file in files.files:
                entry = live_file.entry
                if should_compact(pick_file(entry), options, vectors):
                    groups.setdefault(entry.total_buckets, []).append(
                        (live.origin(entry), entry))
            state.candidates += sum(len(g) for g in groups.values())
            if state.candidates > options.file_num_limit:
                raise _Overflow
            for total_buckets, group in groups.items():
                group.sort(key=lambda item: item[0])
                tasks += [(group[0][0], n, task) for n, task in enumerate(_pack(
                    planner, partition, files.bucket, total_buckets, [e for _, e in group],
                    vectors, state.index))]
        if tasks:
            whole = live.full_entries(planner.table, (e for *_, t in tasks for e in t.inputs))
            state.tasks += [(at, n, replace(t, inputs=tuple(whole[e.identifier]
                                                            for e in t.inputs)))
                            for at, n, t in tasks]

    try:
        found = over_windows(planner.table, planner.snapshot, planner.schema, _Packed, each,
                             budget=window_entries, whole=worth)
    except _Overflow:
        _plan_limited(planner, window_entries)
        return
    planner.seen += found.seen
    planner.tasks += [task for *_, task in sorted(found.tasks, key=lambda t: t[:2])]


def _pack(planner: AppendPlanner, partition: bytes, bucket: int, total_buckets: int,
          entries: list[ManifestEntry], vectors: dict[str, FileVector] | None,
          index: dict[bytes, list[IndexManifestEntry]]) -> list[CompactTask]:
    """One (partition, bucket)'s chosen files, in the scan's order, packed into tasks."""
    by_name = {e.file.file_name: e for e in entries}
    held_by = vectors or {}
    tasks = []
    for group in pick_unaware([pick_file(e) for e in entries], planner.options, vectors):
        held = {held_by[f.name].index_file for f in group if f.name in held_by}
        index_files = tuple(e for e in index.get(partition, ())
                            if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS
                            and e.index_file.file_name in held)
        tasks.append(planner.task(partition, bucket, total_buckets,
                                  tuple(by_name[f.name] for f in group), None,
                                  "bucket-unaware", index_files))
    return tasks


@dataclass
class _Unaware:

    # the candidates kept, the latest-listed on top: (-manifest, -position, seen, entry)
    kept: list[tuple[int, int, int, ManifestEntry]] = field(default_factory=list)
    candidates: int = 0
    seen: int = 0
    manifests: list[tuple[ManifestFileMeta, str]] = field(default_factory=list)
    index: dict[bytes, list[IndexManifestEntry]] | None = None
    vectors: dict[bytes, dict[str, FileVector] | None] = field(default_factory=dict)


def _plan_limited(planner: AppendPlanner, window_entries: int) -> None:
    """More files worth compacting than ``compaction.file-num-limit``: the first ones in the
    scan's order are kept over all windows (the limit's worth, statistics-free), then packed
    and read back whole."""
    limit = planner.options.file_num_limit

    def each(state: _Unaware, live: LiveIndex) -> None:
        state.manifests = live.manifests
        if state.index is None:
            state.index = index_by_partition(live.index_entries)
        for files in live.buckets():
            partition = files.partition
            if not planner.wanted(partition):
                continue
            state.seen += 1
            if partition not in state.vectors:
                state.vectors[partition] = (file_vectors(state.index.get(partition, ()),
                                                         partition) if planner.dv else None)
            vectors = state.vectors[partition]
            for live_file in files.files:
                entry = live_file.entry
                if not should_compact(pick_file(entry), planner.options, vectors):
                    continue
                state.candidates += 1
                manifest, position = live.origin(entry)
                item = (-manifest, -position, state.candidates, entry)
                if len(state.kept) < limit:
                    heapq.heappush(state.kept, item)
                elif limit and item[:2] > state.kept[0][:2]:  # listed before the last kept
                    heapq.heapreplace(state.kept, item)

    found = over_windows(planner.table, planner.snapshot, planner.schema, _Unaware, each,
                         budget=window_entries)
    planner.seen += found.seen
    if found.candidates > limit:
        planner.skipped.append(f"more files than compaction.file-num-limit={limit}; the next "
                               "run continues")
    chosen: dict[tuple[bytes, int, int], list[ManifestEntry]] = {}
    origins: dict[tuple[object, ...], tuple[int, int]] = {}
    for manifest, position, _, entry in sorted(found.kept, reverse=True):
        chosen.setdefault((entry.partition, entry.bucket, entry.total_buckets),
                          []).append(entry)
        origins[entry.identifier] = (-manifest, -position)
    found.kept = []
    index = found.index or {}
    tasks = []
    for (partition, bucket, total_buckets), entries in chosen.items():
        tasks += _pack(planner, partition, bucket, total_buckets, entries,
                       found.vectors[partition], index)
    wanted: dict[int, dict[int, tuple[object, ...]]] = defaultdict(dict)
    for task in tasks:
        for e in task.inputs:
            manifest, position = origins[e.identifier]
            wanted[manifest][position] = e.identifier
    planner.tasks += _whole(tasks, read_added(planner.table, found.manifests, wanted))
