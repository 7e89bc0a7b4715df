"""The ``merge-manifests`` job: Java's ``compact_manifest`` procedure
(``FileStoreCommitImpl.compactManifest``, apache/paimon 5dacde516b).

The latest snapshot's base and delta manifests are merged with Paimon's rules forced to merge
whatever can be (``manifest.merge-min-count`` 1, full-compaction threshold 1 byte; the target
file size stays), or, unforced (the daemon's default), by the table's own thresholds as a
writer's commit merges them, and the result is committed through the one commit path as a COMPACT
snapshot whose base is the merged list and whose delta is empty. Nothing is committed when
merging would change nothing. The manifests replaced stay on storage for the older snapshots
that name them, until expiration removes them. A dry run merges into memory only.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

from paimond.clock import Clock
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.expire.references import MANIFEST, MANIFEST_LIST, FileTally
from paimond.maintenance.job_cleanup import recorded_job
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitJournal, Committer, ManifestsUnchanged
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.commit.manifest_merge import ManifestMergeOptions, merge_manifests, write_rolling
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.storage.interface import open_storage


@dataclass(frozen=True, slots=True)
class ManifestMergeResult:
    table_name: str
    base_snapshot_id: int | None  # the snapshot whose manifests were merged
    snapshot_id: int | None  # the COMPACT snapshot committed (None: dry run or unchanged)
    before: tuple[ManifestFileMeta, ...]
    after: tuple[ManifestFileMeta, ...]
    written: FileTally
    dry_run: bool

    @property
    def changed(self) -> bool:
        return {m.file_name for m in self.before} != {m.file_name for m in self.after}

    def quiet_until_ms(self) -> float | None:
        """Nothing to merge: the same snapshot's manifests (and options) never need it (inf);
        None: merged, or a dry run."""
        return None if self.dry_run or self.changed else math.inf

    def describe(self) -> str:
        name = self.table_name
        if self.base_snapshot_id is None:
            return f"{name}: no snapshot, no manifests to merge"
        if not self.changed:
            return (f"{name}: the {len(self.before)} manifests of snapshot "
                    f"{self.base_snapshot_id} need no merging")
        target = ("would be merged into a new COMPACT snapshot" if self.dry_run
                  else f"merged into snapshot {self.snapshot_id} (COMPACT, empty delta)")
        kept = {m.file_name for m in self.after}
        replaced = [m for m in self.before if m.file_name not in kept]
        lines = [
            f"{name}: manifests of snapshot {self.base_snapshot_id} {target}",
            f"  manifest files {len(self.before)} -> {len(self.after)}, bytes "
            f"{sum(m.file_size for m in self.before):,} -> {sum(m.file_size for m in self.after):,}",
            f"  {'would write' if self.dry_run else 'wrote'} {self.written.total_files} files, "
            f"{self.written.total_bytes:,} bytes",
            *self.written.lines("    "),
            f"  replaced {len(replaced)} manifests ({sum(m.file_size for m in replaced):,} bytes); "
            f"they stay until snapshot {self.base_snapshot_id} and older expire",
        ]
        return "\n".join(lines)


@dataclass
class ManifestMergeJob:
    table: Table
    clock: Clock
    dry_run: bool = False
    forced: bool = True  # Java's compact_manifest; False: the table's own merge thresholds

    def run(self) -> ManifestMergeResult:
        """Runs as a recorded job: a run killed before its snapshot leaves manifests the next
        writing job deletes."""
        refuse(self.table.latest_schema(), "merge_manifests", self.table.path)
        if self.dry_run:
            return self._preview()
        with recorded_job(self.table, "merge-manifests", self.clock) as recorded:
            return self._commit(recorded)

    def _manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        where = self.table.snapshots.path(snapshot.id)
        return (read_manifest_list(self.table, snapshot.base_manifest_list, where)
                + read_manifest_list(self.table, snapshot.delta_manifest_list, where))

    def _commit(self, journal: CommitJournal) -> ManifestMergeResult:
        table = self.table
        committed = Committer(table, clock=self.clock, journal=journal).compact_manifests(
            forced=self.forced)
        if isinstance(committed, ManifestsUnchanged):
            latest = table.snapshots.latest()
            before = tuple(self._manifests(latest)) if latest else ()
            return ManifestMergeResult(table.name, latest.id if latest else None, None,
                                       before, before, FileTally(), False)
        base = table.snapshots.load(committed.id - 1)
        before_list, after = self._manifests(base), self._manifests(committed)
        before = tuple(before_list)
        written = FileTally()
        old = {m.file_name for m in before}
        for meta in after:
            if meta.file_name not in old:
                written.add(MANIFEST, meta.file_size)
        for size in (committed.base_manifest_list_size, committed.delta_manifest_list_size):
            written.add(MANIFEST_LIST, size or 0)
        return ManifestMergeResult(table.name, base.id, committed.id, before, tuple(after),
                                   written, False)

    def _preview(self) -> ManifestMergeResult:
        """Merge into an in-memory store: the same decisions and sizes, nothing written."""
        table = self.table
        latest = table.snapshots.latest()
        if latest is None:
            return ManifestMergeResult(table.name, None, None, (), (), FileTally(), True)
        before = self._manifests(latest)
        schema = table.latest_schema()
        scratch = open_storage(f"memory://paimond-dry-run/{uuid.uuid4()}")
        writer = ManifestWriter(scratch, scratch.root, schema.partition_type.field_types,
                                table.options().manifest_compression)
        options = ManifestMergeOptions.of(table.options())
        if self.forced:
            options = options.forced()
        where = table.snapshots.path(latest.id)
        try:
            after = merge_manifests(
                before, options, lambda meta: read_manifest(table, meta, where),
                lambda entries: write_rolling(writer, entries, options.target_file_size_bytes),
                schema.partition_type.field_types)
            written = FileTally()
            old = {m.file_name for m in before}
            for meta in after:
                if meta.file_name not in old:
                    written.add(MANIFEST, meta.file_size)
            if {m.file_name for m in after} != old:
                for metas in (after, []):
                    written.add(MANIFEST_LIST, writer.write_manifest_list(metas)[1])
        finally:
            writer.remove_written()
        return ManifestMergeResult(table.name, latest.id, None, tuple(before), tuple(after),
                                   written, True)
