"""What a commit attempt reads to check its changes: the live files of the latest snapshot.

Java ``ConflictDetection.scanChangedPartitions`` / ``CommitScanner.readIncrementalChanges``
(apache/paimon master): a retry starts from the live files its previous attempt read and
applies the delta manifests of each snapshot committed since, instead of scanning the new
latest snapshot whole. paimond starts from the newest live-file set it holds: the scan the job
planned from (``CommitChanges.base``), or what this committer read or committed last. Every
snapshot in between is loaded, and the set it starts from must still be the snapshot of its id
(a rollback may have replaced it); a snapshot of kind OVERWRITE in between (as Java), one no
longer there (expired), or more snapshots than the full scan costs in manifests, and the
latest snapshot is scanned whole as before. A compaction's plan hands over the live files of
the buckets its tasks touch only (``table.commit.base``): the set then holds those buckets,
and only their entries of each delta manifest are applied; a change touching another bucket
cannot start from it.

Each attempt reads each manifest list and manifest at most once (they are immutable and
uniquely named): the check, the merge of the base manifests and the index manifest share them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from paimond.errors import CorruptFileError, MissingFileError
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE, ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.commit.base import PlannedBuckets
from paimond.table.scan.snapshot_scan import (
    SnapshotFiles,
    merge_entries,
    read_index_manifest,
    read_manifest,
    read_manifest_list,
)

_PARALLELISM = 8  # manifests read at once (S3 latency dominates), as the scan does
Identifier = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LiveSet:
    """The live data files of ``snapshot`` by identifier (never changed once made), and the
    manifests it was read from (the cost of scanning it whole)."""

    snapshot: Snapshot
    entries: Mapping[Identifier, ManifestEntry]
    base_manifests: Sequence[ManifestFileMeta] | None = None
    delta_manifests: Sequence[ManifestFileMeta] | None = None
    manifest_count: int = 0
    # the (partition, bucket)s ``entries`` holds; None: every one (the whole table)
    scope: frozenset[tuple[bytes, int]] | None = None

    @classmethod
    def of_scan(cls, files: SnapshotFiles) -> LiveSet:
        return cls(files.snapshot, {f.entry.identifier: f.entry for f in files.files},
                   files.base_manifests, files.delta_manifests, len(files.manifests))

    @classmethod
    def of_planned(cls, planned: PlannedBuckets) -> LiveSet:
        return cls(planned.snapshot, planned.entries, planned.base_manifests,
                   planned.delta_manifests, planned.manifest_count, planned.buckets)

    def covers(self, buckets: Iterable[tuple[bytes, int]]) -> bool:
        return self.scope is None or all(b in self.scope for b in buckets)

    def describe(self) -> str:
        return "" if self.scope is None else f" ({len(self.scope)} buckets)"


class AttemptReads:
    """One commit attempt's reads of metadata files, each at most once."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._manifests: dict[str, list[ManifestEntry]] = {}
        self._index: dict[str, list[IndexManifestEntry]] = {}
        self.read_log: list[str] = []  # how the live files were found (tests, the bench)
        # the new snapshot's manifests, once written (what the next commit starts from)
        self.base_written: list[ManifestFileMeta] | None = None
        self.delta_written: list[ManifestFileMeta] | None = None

    def prime_lists(self, snapshot: Snapshot, known: LiveSet) -> None:
        """The manifest lists the job's scan already read, when ``snapshot`` is its."""
        if same_snapshot(known.snapshot, snapshot) and known.base_manifests is not None \
                and known.delta_manifests is not None:
            self._lists.setdefault(snapshot.base_manifest_list, list(known.base_manifests))
            self._lists.setdefault(snapshot.delta_manifest_list, list(known.delta_manifests))

    def manifest_list(self, snapshot: Snapshot, name: str, size: int | None) -> list[ManifestFileMeta]:
        if name not in self._lists:
            self._lists[name] = read_manifest_list(self.table, name,
                                                   self.table.snapshots.path(snapshot.id), size)
        return self._lists[name]

    def snapshot_manifests(self, snapshot: Snapshot) -> tuple[list[ManifestFileMeta],
                                                              list[ManifestFileMeta]]:
        return (self.manifest_list(snapshot, snapshot.base_manifest_list,
                                   snapshot.base_manifest_list_size),
                self.manifest_list(snapshot, snapshot.delta_manifest_list,
                                   snapshot.delta_manifest_list_size))

    def manifest(self, meta: ManifestFileMeta, where: str) -> list[ManifestEntry]:
        if meta.file_name not in self._manifests:
            self._manifests[meta.file_name] = read_manifest(self.table, meta, where)
        return self._manifests[meta.file_name]

    def manifests(self, metas: Sequence[ManifestFileMeta], where: str
                  ) -> list[list[ManifestEntry]]:
        """Several manifests, the missing ones read in parallel."""
        missing = list({m.file_name: m for m in metas if m.file_name not in self._manifests}
                       .values())
        if len(missing) > 1:
            with ThreadPoolExecutor(max_workers=min(_PARALLELISM, len(missing))) as pool:
                for meta, entries in zip(missing, pool.map(
                        lambda m: read_manifest(self.table, m, where), missing), strict=True):
                    self._manifests[meta.file_name] = entries
        return [self.manifest(m, where) for m in metas]

    def reader(self, where: str) -> Callable[[ManifestFileMeta], list[ManifestEntry]]:
        return lambda meta: self.manifest(meta, where)

    def passing_reader(self, where: str) -> Callable[[ManifestFileMeta], list[ManifestEntry]]:
        """Reads what this attempt has not read yet without keeping it (a manifest merge
        reads each base manifest once; keeping them would hold the whole table)."""
        def read(meta: ManifestFileMeta) -> list[ManifestEntry]:
            found = self._manifests.get(meta.file_name)
            return found if found is not None else read_manifest(self.table, meta, where)
        return read

    def index_entries(self, snapshot: Snapshot) -> list[IndexManifestEntry]:
        name = snapshot.index_manifest or ""
        if name not in self._index:
            self._index[name] = read_index_manifest(self.table, snapshot)
        return self._index[name]

    def live_at(self, latest: Snapshot, known: Sequence[LiveSet | None],
                buckets: Iterable[tuple[bytes, int]] = ()) -> LiveSet:
        """The live files of ``latest`` (at least those of ``buckets``): from the newest usable
        set in ``known``, plus the deltas of the snapshots since, else from a scan of
        ``latest`` whole."""
        needed = set(buckets)
        start = max((k for k in known if k is not None and k.snapshot.id <= latest.id
                     and k.covers(needed)), key=lambda k: k.snapshot.id, default=None)
        if start is not None and same_snapshot(start.snapshot, latest):
            self.read_log.append(f"known at {latest.id}{start.describe()}")
            self.prime_lists(latest, start)
            return start
        # each snapshot since costs ~3 reads (snapshot, delta list, manifest): more than a
        # scan of the latest snapshot's lists and manifests, and the latest is scanned whole
        if start is not None and 3 * (latest.id - start.snapshot.id) <= start.manifest_count + 2:
            live = self._incremental(start, latest)
            if live is not None:
                return live
        self.read_log.append(f"scanned {latest.id}")
        return self._scan(latest)

    def _scan(self, latest: Snapshot) -> LiveSet:
        where = self.table.snapshots.path(latest.id)
        base, delta = self.snapshot_manifests(latest)
        metas = base + delta
        contents = self.manifests(metas, where)
        live = merge_entries(((e, m.file_name) for m, entries in zip(metas, contents, strict=True)
                              for e in entries), where)
        return LiveSet(latest, {f.entry.identifier: f.entry for f in live}, base, delta,
                       len(metas))

    def _incremental(self, start: LiveSet, latest: Snapshot) -> LiveSet | None:
        """``start`` plus the deltas of the snapshots after it up to ``latest``; None when
        they cannot be trusted to describe the change (see the module's notes)."""
        try:
            if not same_snapshot(self.table.snapshots.load(start.snapshot.id), start.snapshot):
                return None  # rolled back and committed anew: not the set we hold
            chain = [self.table.snapshots.load(i) for i in range(start.snapshot.id + 1, latest.id)]
            chain.append(latest)
            if any(s.commit_kind == "OVERWRITE" for s in chain):
                return None
            live = dict(start.entries)
            for snapshot in chain:
                where = self.table.snapshots.path(snapshot.id)
                delta = self.manifest_list(snapshot, snapshot.delta_manifest_list,
                                           snapshot.delta_manifest_list_size)
                for meta, entries in zip(delta, self.manifests(delta, where), strict=True):
                    _apply(live, entries, meta.file_name, start.scope)
        except MissingFileError:
            return None  # expired meanwhile: scan the latest snapshot whole
        self.read_log.append(f"{start.snapshot.id} + deltas to {latest.id}{start.describe()}")
        return LiveSet(latest, live, manifest_count=start.manifest_count, scope=start.scope)


def _apply(live: dict[Identifier, ManifestEntry], entries: Sequence[ManifestEntry],
           manifest_name: str, scope: frozenset[tuple[bytes, int]] | None = None) -> None:
    """Java ``FileEntry.mergeEntries`` onto a live set (as ``scan.merge_entries``); only the
    entries of ``scope``'s buckets when the set holds those alone."""
    for entry in entries:
        if scope is not None and (entry.partition, entry.bucket) not in scope:
            continue
        identifier = entry.identifier
        if entry.kind == FILE_KIND_ADD:
            if identifier in live:
                raise CorruptFileError(manifest_name, f"file {entry.file.file_name} (bucket "
                                       f"{entry.bucket}, level {entry.file.level}) is added "
                                       f"again while live")
            live[identifier] = entry
        elif entry.kind == FILE_KIND_DELETE:
            live.pop(identifier, None)
        else:
            raise CorruptFileError(manifest_name, f"unknown entry kind {entry.kind}")


def same_snapshot(a: Snapshot, b: Snapshot) -> bool:
    """One snapshot, read twice or as written: its id and its manifest lists (uniquely named
    files every commit writes anew) are equal."""
    return (a.id, a.base_manifest_list, a.delta_manifest_list) == \
        (b.id, b.base_manifest_list, b.delta_manifest_list)
