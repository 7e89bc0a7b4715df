"""The ``rebuild-dv`` job: the deletion vectors of a primary-key table computed from its
levels, for a table that just enabled ``deletion-vectors.enabled`` or whose DV files are
lost or suspect.

In levels >= 1 the newest row of a key is the one in the lowest level (each level is one
sorted run, a key at most once in it). Every older row of the key, and a newest row that is
a retraction (-U/-D), is deleted. Level 0 is left alone: readers skip it and compaction
looks its keys up. What only a vector records (a key whose deletion was dropped by an
earlier compaction) cannot be recomputed from the files, so the existing vectors of live
files are kept and the computed positions added (``discard_existing`` starts from nothing,
for vectors known to be wrong). Positions past a file's end and vectors of files that are no
longer live are dropped.

One new DV file per changed bucket, all committed in one COMPACT snapshot computed from the
latest one: if another commit lands first the job plans again. Nothing changes when the
vectors are already right, so a second run commits nothing.

A bounded pass (``max_files``, the daemon's) rebuilds only buckets whose vectors are missing
(:mod:`paimond.maintenance.regeneration`), whole buckets up to that many level >= 1 files (at
least one bucket), skipping those a ``memory`` says earlier passes handled; a bucket whose DV
file is lost starts from nothing. A table without deletion vectors is nothing to do there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.clock import Clock
from paimond.errors import CorruptFileError, MissingFileError, UnsupportedError
from paimond.faults import crash_point
from paimond.format.deletion_vector import DeletionVector
from paimond.format.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.manifest import FILE_KIND_DELETE
from paimond.format.schema import TableSchema
from paimond.format.snapshot import Snapshot
from paimond.lsm.deletion_vectors import BucketDeletionVectors, deleted_positions, vector_of
from paimond.lsm.merge import VALUE_KIND_COLUMN
from paimond.maintenance.job_cleanup import committed_names, recorded_job
from paimond.maintenance.regeneration import RegenerationMemory, choose, vector_needs
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit import CommitChanges, CommitJournal, Committer
from paimond.table.data_files import read_data_file
from paimond.table.deletion_vectors import (
    bucket_dv_entry,
    read_deletion_vectors,
    write_deletion_vectors,
)
from paimond.table.kv_layout import key_fields, retract_mask
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options import TableOptions
from paimond.table.scan import BucketFiles, LiveFile, data_file_path, scan_snapshot
from paimond.table.semantic_options import refuse

_LEVEL, _FILE, _POS = "__level", "__file", "__pos"
Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class BucketRebuild:
    partition_text: str
    partition: bytes
    bucket: int
    base: IndexManifestEntry | None
    vectors: dict[str, DeletionVector]
    rows_before: int  # deleted rows the old vectors held (of live files)
    rows_after: int
    dropped_positions: int  # positions past a file's end or of files no longer live
    changed: bool

    def describe(self) -> str:
        where = f"{self.partition_text or '-'} bucket {self.bucket}"
        dropped = f", {self.dropped_positions} stale positions dropped" \
            if self.dropped_positions else ""
        return (f"{where}: deleted rows {self.rows_before} -> {self.rows_after} in "
                f"{len(self.vectors)} files{dropped}")


@dataclass
class RebuildSummary:
    table_name: str
    base_snapshot_id: int | None = None
    snapshot: Snapshot | None = None
    buckets: list[BucketRebuild] = field(default_factory=list)
    dry_run: bool = False
    duration_s: float = 0.0
    needed_left: int | None = None  # a bounded pass: buckets left for later passes

    @property
    def changed(self) -> list[BucketRebuild]:
        return [b for b in self.buckets if b.changed]

    def describe(self) -> str:
        if self.base_snapshot_id is None:
            return f"{self.table_name}: no snapshot, no deletion vectors to rebuild"
        left = ("" if self.needed_left is None
                else f" ({self.needed_left} buckets needing vectors left for later passes)")
        changed = self.changed
        if not changed:
            return (f"{self.table_name}: the deletion vectors of snapshot "
                    f"{self.base_snapshot_id} are already right ({len(self.buckets)} buckets); "
                    f"nothing committed{left}")
        outcome = ("would be committed (dry run)" if self.dry_run else
                   f"committed as snapshot {self.snapshot.id if self.snapshot else '?'}")
        lines = [f"{self.table_name}: {len(changed)} of {len(self.buckets)} buckets changed "
                 f"from snapshot {self.base_snapshot_id}; {outcome} in {self.duration_s:.2f} s"
                 f"{left}"]
        lines += [f"  {b.describe()}" for b in changed]
        return "\n".join(lines)


@dataclass
class RebuildDvJob:
    table: Table
    clock: Clock = field(kw_only=True)  # the snapshot's timeMillis
    dry_run: bool = False
    discard_existing: bool = False
    partitions: Mapping[str, str] | None = None
    max_attempts: int = 3
    progress: Progress | None = None
    max_files: int | None = None  # a bounded pass over buckets needing vectors only
    memory: RegenerationMemory | None = None  # what earlier bounded passes handled
    _chosen: list[str] = field(default_factory=list, init=False)
    _lost: set[tuple[bytes, int]] = field(default_factory=set, init=False)

    def run(self) -> RebuildSummary:
        """Runs as a recorded job (a dry run writes nothing): a run killed midway leaves
        index files the next writing job deletes."""
        schema = self.table.latest_schema()
        if self.max_files is not None and not (
                schema.primary_keys and TableOptions.of(schema).deletion_vectors_enabled):
            return RebuildSummary(self.table.name)  # nothing to keep up
        refuse(schema, "rebuild_dv", self.table.path)
        if self.dry_run:
            return self._run(self.table, set(), None)
        with recorded_job(self.table, "rebuild-dv", self.clock) as recorded:
            return self._run(recorded.table, recorded.kept, recorded)

    def _run(self, writing: Table, kept: set[str], journal: CommitJournal | None) -> RebuildSummary:
        """``writing``: the table as the job writes it; ``kept`` collects what it commits;
        ``journal`` notes what its commits write."""
        started = time.monotonic()
        planned: list[RebuildSummary] = []

        def attempt(number: int) -> Attempt:
            summary = self._plan()
            planned.append(summary)
            if self.dry_run or not summary.changed:
                return Attempt()
            return Attempt(lambda: self._commit(summary, writing, kept, journal))

        snapshot, _ = commit_with_replan(attempt, self.max_attempts)
        summary = planned[-1]
        summary.snapshot = snapshot
        summary.duration_s = time.monotonic() - started
        if self.memory is not None and not self.dry_run:
            self.memory.handled.update(self._chosen)
        return summary

    def _plan(self) -> RebuildSummary:
        table = self.table
        schema = table.latest_schema()
        options = TableOptions.of(schema)
        if not schema.primary_keys or not options.deletion_vectors_enabled:
            raise UnsupportedError(f"{table.name}: rebuild-dv needs a primary-key table with "
                                   "deletion-vectors.enabled=true")
        summary = RebuildSummary(table.name, dry_run=self.dry_run)
        latest = table.snapshots.latest()
        if latest is None:
            return summary
        summary.base_snapshot_id = latest.id
        scanned = scan_snapshot(table, latest)
        buckets = [b for b in scanned.buckets().values() if not self.partitions
                   or partition_matches(partition_text(schema, b.partition), self.partitions)]
        if self.max_files is not None:
            buckets = self._bounded(buckets, scanned.index_entries, summary)
        for done, bucket in enumerate(buckets, start=1):
            base = bucket_dv_entry(scanned.index_entries, bucket.partition, bucket.bucket)
            summary.buckets.append(self._rebuild_bucket(bucket, base, schema, options))
            if self.progress is not None:
                self.progress(done, len(buckets), summary.buckets[-1].describe())
        return summary

    def _bounded(self, buckets: list[BucketFiles], index_entries: list[IndexManifestEntry],
                 summary: RebuildSummary) -> list[BucketFiles]:
        """The buckets this bounded pass takes; notes which start from nothing (lost)."""
        needs = vector_needs(self.table, buckets, index_entries, self.table.storage.exists)
        self._chosen = choose({k: n.files for k, n in needs.items()}, self.memory,
                              self.max_files or 1)
        taken = {(needs[k].partition, needs[k].bucket) for k in self._chosen}
        self._lost = {(needs[k].partition, needs[k].bucket) for k in self._chosen
                      if needs[k].lost}
        self._chosen += [also for k in list(self._chosen) for also in needs[k].also]
        unhandled = self.memory.unhandled(needs) if self.memory is not None else needs
        summary.needed_left = len(unhandled) - len(taken)
        return [b for b in buckets if (b.partition, b.bucket) in taken]

    def _rebuild_bucket(self, bucket: BucketFiles, base: IndexManifestEntry | None,
                        schema: TableSchema, options: TableOptions) -> BucketRebuild:
        table = self.table
        files = [f for level in sorted(bucket.levels) if level > 0 for f in bucket.levels[level]]
        old: dict[str, DeletionVector] = {}
        unreadable = False
        if base is not None:
            try:
                old = read_deletion_vectors(table, base)
            except (MissingFileError, CorruptFileError) as error:
                lost = (isinstance(error, MissingFileError)
                        and (bucket.partition, bucket.bucket) in self._lost)
                if not (self.discard_existing or lost):
                    raise
                unreadable = True  # lost or corrupt: replaced whatever the result
        rows = {f.meta.file_name: f.meta.row_count for f in files}
        kept: dict[str, DeletionVector] = {}
        dropped = sum(len(v) for name, v in old.items() if name not in rows)
        before = 0
        for name, vector in old.items():
            if name in rows:
                before += len(vector)
                positions = deleted_positions(vector)  # in the table's layout, whatever the file's
                inside = vector_of(positions[positions < rows[name]],
                                   bitmap64=options.deletion_vectors_bitmap64)
                dropped += len(vector) - len(inside)
                kept[name] = inside
        vectors = BucketDeletionVectors({} if self.discard_existing else kept,
                                        bitmap64=options.deletion_vectors_bitmap64, base=base)
        for meta_name, positions in _superseded(table, schema, files).items():
            vectors.mark(meta_name, positions)
        result = {n: v for n, v in vectors.vectors().items() if v}
        changed = unreadable or set(old) != set(result) or any(
            not np.array_equal(deleted_positions(old[n]), deleted_positions(result[n]))
            for n in result)
        return BucketRebuild(partition_text(schema, bucket.partition), bucket.partition,
                             bucket.bucket, base, result, before,
                             sum(len(v) for v in result.values()), dropped, changed)

    def _commit(self, summary: RebuildSummary, writing: Table, kept: set[str],
                journal: CommitJournal | None) -> Snapshot:
        table = self.table
        added, deleted, written = [], [], []
        base: dict[tuple[bytes, int, str], str | None] = {}
        try:
            for bucket in summary.changed:
                key = (bucket.partition, bucket.bucket, INDEX_TYPE_DELETION_VECTORS)
                base[key] = bucket.base.index_file.file_name if bucket.base else None
                if not bucket.vectors:
                    assert bucket.base is not None
                    deleted.append(IndexManifestEntry(FILE_KIND_DELETE, bucket.partition,
                                                      bucket.bucket, bucket.base.index_file))
                    continue
                entry, path = write_deletion_vectors(
                    writing, bucket.vectors, bucket.partition, bucket.bucket,
                    bitmap64=table.options().deletion_vectors_bitmap64)
                added.append(entry)
                written.append(path)
            changes = CommitChanges(index_added=added, index_deleted=deleted, index_base=base,
                                    expected_snapshot_id=summary.base_snapshot_id)
            kept.update(committed_names(changes))
            return Committer(table, clock=self.clock, journal=journal).commit(changes)
        except BaseException:
            for path in written:
                table.storage.delete(path)
                crash_point("rebuild_dv.conflict_file_deleted")
            raise


def _superseded(table: Table, schema: TableSchema, files: list[LiveFile]
                ) -> dict[str, np.ndarray]:
    """Per file name, the positions of rows that are not the newest live row of their key."""
    key_columns = [f.name for f in key_fields(schema)]
    parts = []
    for number, live in enumerate(files):
        path = data_file_path(table, schema, live)
        batches = list(read_data_file(
            table.storage, path, file_format=path.rsplit(".", 1)[-1],
            file_schema=table.schema(live.meta.schema_id), read_schema=schema, key_value=True,
            projection=[*key_columns, VALUE_KIND_COLUMN]))
        if not batches:
            continue
        keys = pa.Table.from_batches(batches)
        count = keys.num_rows
        parts.append(keys.append_column(_LEVEL, pa.array(np.full(count, live.meta.level,
                                                                 dtype=np.int32)))
                     .append_column(_FILE, pa.array(np.full(count, number, dtype=np.int32)))
                     .append_column(_POS, pa.array(np.arange(count, dtype=np.int64))))
    if not parts:
        return {}
    rows = pa.concat_tables(parts)
    newest = rows.group_by(key_columns, use_threads=False).aggregate([(_LEVEL, "min")])
    joined = rows.join(newest, keys=key_columns, join_type="inner")
    older = pc.greater(joined.column(_LEVEL), joined.column(f"{_LEVEL}_min"))
    deleted = joined.filter(pc.or_(older, retract_mask(joined.column(VALUE_KIND_COLUMN))))
    out: dict[str, np.ndarray] = {}
    file_numbers = np.asarray(deleted.column(_FILE).to_numpy())
    positions = np.asarray(deleted.column(_POS).to_numpy())
    for number in np.unique(file_numbers):
        out[files[int(number)].meta.file_name] = np.sort(positions[file_numbers == number])
    return out
