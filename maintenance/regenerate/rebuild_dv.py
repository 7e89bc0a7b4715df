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
(:mod:`paimond.maintenance.regenerate.pending`), whole buckets up to that many level >= 1 files (at
least one bucket), skipping those a ``memory`` says earlier passes handled; a bucket whose DV
file is lost starts from nothing. A table without deletion vectors is nothing to do there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from paimond.clock import Clock
from paimond.errors import UnsupportedError
from paimond.faults import crash_point
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_DELETE
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.distributed import TaskMapper, mapper_of
from paimond.maintenance.job_cleanup import committed_names, recorded_job
from paimond.maintenance.regenerate.dv_bucket import (
    BucketRebuild,
    DvRebuildTask,
    rebuild_bucket,
    rebuild_dv_bucket,
)
from paimond.maintenance.regenerate.pending import RegenerationMemory, choose, vector_needs
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, CommitJournal, Committer
from paimond.table.commit.job_records import JobJournal
from paimond.table.commit.requirements import Requirement, RequireSnapshot
from paimond.table.indexes.deletion_vectors import (
    bucket_dv_entry,
    dv_index_unchanged,
    write_deletion_vectors,
)
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import BucketFiles, LiveFile, scan_snapshot

if TYPE_CHECKING:
    from paimond.maintenance.execution import TaskExecutor

Progress = Callable[[int, int, str], None]


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
    executor: TaskExecutor | None = None  # one that maps tasks (Spark) rebuilds one bucket per task
    _chosen: list[str] = field(default_factory=list, init=False)
    _lost: set[tuple[bytes, int]] = field(default_factory=set, init=False)
    _journal: JobJournal | None = field(default=None, init=False)
    # the DV file each task wrote, by (partition, bucket), for the commit
    _written: dict[tuple[bytes, int], tuple[IndexManifestEntry, str]] = field(
        default_factory=dict, init=False)

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
            self._journal = recorded.journal
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
        bases = [bucket_dv_entry(scanned.index_entries, b.partition, b.bucket) for b in buckets]
        self._written = {}
        mapper = mapper_of(self.executor)
        if mapper is not None and not self.dry_run and buckets:
            summary.buckets = self._rebuild_in_tasks(mapper, schema, buckets, bases)
            return summary
        for done, (bucket, base) in enumerate(zip(buckets, bases, strict=True), start=1):
            summary.buckets.append(rebuild_bucket(
                table, schema, bucket.partition, bucket.bucket, _leveled(bucket), base,
                discard_existing=self.discard_existing,
                lost=(bucket.partition, bucket.bucket) in self._lost))
            if self.progress is not None:
                self.progress(done, len(buckets), summary.buckets[-1].describe())
        return summary

    def _rebuild_in_tasks(self, mapper: TaskMapper, schema: TableSchema,
                          buckets: list[BucketFiles], bases: list[IndexManifestEntry | None]
                          ) -> list[BucketRebuild]:
        """One task per bucket on the executor, each writing its bucket's new DV file through
        the job's journal. A failed task fails the run: what the others wrote is noted in the
        job's record, deleted when the job ends."""
        table = self.table
        tasks = [DvRebuildTask(table.location, table.path, table.name, self._journal, schema,
                               b.partition, b.bucket, tuple(_leveled(b)), base,
                               self.discard_existing, (b.partition, b.bucket) in self._lost)
                 for b, base in zip(buckets, bases, strict=True)]
        outcomes = mapper.map_tasks(rebuild_dv_bucket, tasks,
                                    f"paimond rebuild-dv {table.name}: {len(tasks)} buckets")
        for outcome in outcomes:
            if outcome.written is not None:
                self._written[(outcome.rebuild.partition, outcome.rebuild.bucket)] = \
                    outcome.written
        if self.progress is not None:
            self.progress(len(outcomes), len(outcomes), outcomes[-1].rebuild.describe())
        return [outcome.rebuild for outcome in outcomes]

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

    def _commit(self, summary: RebuildSummary, writing: Table, kept: set[str],
                journal: CommitJournal | None) -> Snapshot:
        table = self.table
        added, deleted, written = [], [], []
        requirements: list[Requirement] = ([RequireSnapshot(summary.base_snapshot_id)]
                                           if summary.base_snapshot_id is not None else [])
        try:
            for bucket in summary.changed:
                requirements.append(dv_index_unchanged(bucket.partition, bucket.bucket,
                                                       bucket.base))
                if not bucket.vectors:
                    assert bucket.base is not None
                    deleted.append(IndexManifestEntry(FILE_KIND_DELETE, bucket.partition,
                                                      bucket.bucket, bucket.base.index_file))
                    continue
                done = self._written.get((bucket.partition, bucket.bucket))
                entry, path = done if done is not None else write_deletion_vectors(
                    writing, bucket.vectors, bucket.partition, bucket.bucket,
                    bitmap64=table.options().deletion_vectors_bitmap64)
                added.append(entry)
                written.append(path)
            changes = CommitChanges(index_added=added, index_deleted=deleted,
                                    requirements=requirements)
            kept.update(committed_names(changes))
            return Committer(table, clock=self.clock, journal=journal).commit(changes)
        except BaseException:
            for path in written:
                table.storage.delete(path)
                crash_point("rebuild_dv.conflict_file_deleted")
            raise


def _leveled(bucket: BucketFiles) -> list[LiveFile]:
    """The bucket's level >= 1 files, lowest level first."""
    return [f for level in sorted(bucket.levels) if level > 0 for f in bucket.levels[level]]
