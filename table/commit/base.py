"""What a compaction's commit needs from its plan: the live files, at the planned snapshot, of
the (partition, bucket)s the plan's tasks touch, so that the conflict check reads only the delta
manifests of the snapshots committed since (``paimond.table.commit.reads``).

Every check the commit makes on a compaction's changes concerns the buckets it touches: the
files it deletes must still be live, the files it adds must not be, its changelog files must not
be live data files of their bucket, and the levels >= 1 of those buckets must not overlap (Java
``PrimaryKeyConflictDetection`` groups by partition, bucket and level). So the planner keeps
those buckets' files only (held as the planner read them: a level-0 file's keys are never
compared, a deeper file's min and max keys are; statistics are dropped), and the committer
applies only the entries of those buckets from each delta manifest since.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.format.meta.manifest import EMPTY_STATS, ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import MANIFEST_DIR
from paimond.table.scan.bucket_scan import LiveIndex
from paimond.table.scan.snapshot_scan import SnapshotFiles

Identifier = tuple[Any, ...]
BucketKey = tuple[bytes, int]


@dataclass(frozen=True, slots=True)
class PlannedBuckets:
    """The live files of ``buckets`` in ``snapshot``, by identifier; ``manifest_count``: the
    snapshot's manifests (what scanning it whole costs). ``base_manifests`` and
    ``delta_manifests``: its manifest lists' contents, if the planner read them."""

    snapshot: Snapshot
    buckets: frozenset[BucketKey]
    entries: Mapping[Identifier, ManifestEntry]
    manifest_count: int
    base_manifests: Sequence[ManifestFileMeta] | None = None
    delta_manifests: Sequence[ManifestFileMeta] | None = None

    def covers(self, keys: Iterable[BucketKey]) -> bool:
        return all(k in self.buckets for k in keys)


def commit_view(entry: ManifestEntry) -> ManifestEntry:
    """``entry`` as the check needs it: identifier, level and key range (no statistics)."""
    f = entry.file
    if f.key_stats is EMPTY_STATS and f.value_stats is EMPTY_STATS:
        return entry
    return dataclasses.replace(entry, file=dataclasses.replace(
        f, key_stats=EMPTY_STATS, value_stats=EMPTY_STATS))


class PlannedBucketsBuilder:
    """Collects the touched buckets' files as the planner goes (a window of partitions at a
    time); :meth:`build` once every window was planned."""

    def __init__(self) -> None:
        self.buckets: set[BucketKey] = set()
        self.entries: dict[Identifier, ManifestEntry] = {}
        self.base_manifests: list[ManifestFileMeta] | None = None
        self.delta_manifests: list[ManifestFileMeta] | None = None

    def add(self, key: BucketKey, entries: Iterable[ManifestEntry]) -> None:
        self.buckets.add(key)
        for entry in entries:
            self.entries[entry.identifier] = commit_view(entry)

    def build(self, snapshot: Snapshot) -> PlannedBuckets:
        base, delta = self.base_manifests, self.delta_manifests
        count = len(base) + len(delta) if base is not None and delta is not None else 0
        return PlannedBuckets(snapshot, frozenset(self.buckets), self.entries, count,
                              base, delta)

    def add_window(self, table: Table, live: LiveIndex, keys: Iterable[BucketKey],
                   whole: Iterable[ManifestEntry]) -> None:
        """The files of buckets ``keys`` from one window's index; ``whole``: entries already
        read back whole (the tasks' inputs), the other files of level >= 1 are read back for
        their max keys."""
        if self.base_manifests is None:
            base_path = table.file_path(MANIFEST_DIR, live.snapshot.base_manifest_list)
            self.base_manifests = [m for m, path in live.manifests if path == base_path]
            self.delta_manifests = [m for m, path in live.manifests if path != base_path]
        known = {e.identifier: e for e in whole}
        slim = {k: live.bucket_entries(*k) for k in set(keys)}
        missing = [e for files in slim.values() for e in files
                   if e.file.level > 0 and e.identifier not in known]
        if missing:
            known.update(live.full_entries(table, missing))
        for key, files in slim.items():
            self.add(key, (known.get(e.identifier, e) for e in files))

    def add_scan(self, scan: SnapshotFiles, keys: Iterable[BucketKey]) -> None:
        """The files of buckets ``keys`` from a whole scan."""
        self.base_manifests, self.delta_manifests = scan.base_manifests, scan.delta_manifests
        buckets = scan.buckets()
        for key in set(keys):
            found = buckets.get(key)
            self.add(key, (f.entry for f in found.files) if found is not None else ())
