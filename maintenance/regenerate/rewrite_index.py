"""The ``rewrite-index`` job: Java ``FileIndexProcessor`` as the ``rewrite_file_index``
procedure drives it (apache/paimon 5dacde516b, ``paimon-core/.../index/FileIndexProcessor.java``,
``paimon-spark/.../procedure/RewriteFileIndexProcedure.java``).

Plan: the live data files of the latest snapshot, in the partitions asked for. Execute: per
file, read the columns the table's ``file-index.*`` options index and build those indexes, in
the file's own schema (a column renamed since keeps its old name in the index, one added since
is skipped); indexes no longer configured are dropped with the old container. The result is
placed as when a file is written (:mod:`paimond.table.indexes.file_index_writer`): above the in-manifest
threshold a new index file beside the data file (``<data-file>.index``, or the name after its
current one, ``<data-file>-1.index``...), replacing the old name in the extra files; nothing
configured, no index; otherwise embedded. A file whose index comes out as it already is stays
as it is, so a second run reads the files but commits nothing. Commit: one COMPACT snapshot
that deletes each changed file's live entry and adds the same file (same name and level) with
its new index. Data files are never rewritten; an old index file stays for the snapshots that
name it until expiration finds nothing kept naming it.

Readers (Java's scan, pypaimon's) take an ADD for deleted when any manifest still holds a
DELETE with the same identifier, so a new entry must never repeat a state the file had before
(say, no index after a rewrite added one) while that DELETE is around: the result then goes to
a fresh index file instead, with an empty container if nothing is configured, until merged
manifests have dropped the DELETE. Files readers already take for deleted are left alone.
Unlike Java, a taken index file name is never overwritten (an older snapshot may read it), and
the index files of an attempt that loses to a conflicting commit are deleted before re-planning.
A dry run builds the indexes in memory and writes nothing.

A bounded pass (``max_files``, the daemon's) plans only files whose index is stale
(:mod:`paimond.maintenance.regenerate.pending`), at most that many, skipping those a ``memory``
says earlier passes handled; it adds the ones it handled.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from paimond.clock import Clock
from paimond.errors import ConfigError
from paimond.faults import crash_point
from paimond.format.meta.manifest import FILE_KIND_DELETE, DataFileMeta, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.distributed import (
    TaskMapper,
    index_rewrite_tasks,
    mapper_of,
    rewrite_bucket_indexes,
)
from paimond.maintenance.expire.references import read_manifests
from paimond.maintenance.job_cleanup import committed_names, recorded_job
from paimond.maintenance.regenerate.pending import IndexStaleness, RegenerationMemory, choose
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, CommitJournal, Committer
from paimond.table.commit.job_records import JobJournal
from paimond.table.indexes.file_index_rebuild import FileIndexChange, FileIndexRebuild, FileKey
from paimond.table.indexes.file_index_versions import keeping_bitmap_version
from paimond.table.layout import FILE_INDEX_SUFFIX, partition_matches, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import merge_entries, read_manifest_list

if TYPE_CHECKING:
    from paimond.maintenance.execution import TaskExecutor

Progress = Callable[[int, int, str], None]  # files done, files in all, the file just done
BATCH_ROWS = 32768
_LISTED_CHANGES = 100


@dataclass(frozen=True, slots=True)
class IndexRewritePlan:
    table_name: str
    base_snapshot_id: int | None
    files: tuple[ManifestEntry, ...]  # live entries, exactly as scanned
    # DELETE entries the base snapshot's manifests still hold, per planned file: readers take
    # an ADD with the identifier of any of them for deleted, so no new entry may repeat one.
    retired: Mapping[FileKey, tuple[ManifestEntry, ...]] = field(default_factory=dict)
    # The bitmap index version the table's files use (table/indexes/file_index_versions.py).
    bitmap_version: int | None = None


def _index_state(meta: DataFileMeta) -> str:
    names = [n for n in meta.extra_files if n.endswith(FILE_INDEX_SUFFIX)]
    if names:
        return f"index file {names[0]}"
    return "no index" if meta.embedded_index is None else \
        f"embedded ({len(meta.embedded_index)} bytes)"


@dataclass
class IndexRewriteSummary:
    table_name: str
    dry_run: bool
    plan: IndexRewritePlan | None = None
    changes: list[FileIndexChange] = field(default_factory=list)
    snapshot: Snapshot | None = None
    attempts: int = 0
    duration_s: float = 0.0
    schema: TableSchema | None = None  # for partition names in listings
    stale_left: int | None = None  # a bounded pass: stale files left for later passes

    def describe(self) -> str:
        plan = self.plan
        if plan is None or plan.base_snapshot_id is None:
            return f"{self.table_name}: no snapshot, no data files to index"
        files = f"{len(plan.files)} files of snapshot {plan.base_snapshot_id}"
        if self.stale_left is not None:
            files = (f"{len(plan.files)} stale files of snapshot {plan.base_snapshot_id} "
                     f"({self.stale_left} left for later passes)")
        if not self.changes:
            return f"{self.table_name}: the file index of all {files} is up to date; nothing committed"
        what = f"the file index of {len(self.changes)} of {files}"
        head = (f"{self.table_name}: would rewrite {what} (dry run: nothing written)"
                if self.dry_run else
                f"{self.table_name}: snapshot {self.snapshot.id if self.snapshot else '?'} "
                f"(COMPACT) rewrote {what} after {self.attempts} attempt(s) in "
                f"{self.duration_s:.2f} s")
        files_out = [c for c in self.changes if any(
            n.endswith(FILE_INDEX_SUFFIX) for n in c.after.file.extra_files)]
        embedded = sum(1 for c in self.changes if c.after.file.embedded_index is not None)
        lines = [head, f"  embedded {embedded}, index files {len(files_out)} "
                       f"({sum(c.index_size_bytes for c in files_out):,} bytes), index removed "
                       f"{len(self.changes) - embedded - len(files_out)}"]
        if self.dry_run:
            lines += [f"  {self._where(c.before)} {c.before.file.file_name}: "
                      f"{_index_state(c.before.file)} -> {_index_state(c.after.file)}"
                      for c in self.changes[:_LISTED_CHANGES]]
            if len(self.changes) > _LISTED_CHANGES:
                lines.append(f"  ... and {len(self.changes) - _LISTED_CHANGES} more files")
        return "\n".join(lines)

    def _where(self, entry: ManifestEntry) -> str:
        partition = partition_text(self.schema, entry.partition) if self.schema else ""
        return f"{partition or '-'} bucket {entry.bucket}"


def plan_index_rewrite(table: Table, partitions: Mapping[str, str] | None = None
                       ) -> IndexRewritePlan:
    """Every file readers see in the latest snapshot whose partition path matches
    ``partitions`` (``{"dt": "2024-01-01"}``), with the DELETE entries naming those files.
    Raises ConfigError for a key that is not a partition key."""
    schema = table.latest_schema()
    unknown = sorted(set(partitions or ()) - set(schema.partition_keys))
    if unknown:
        raise ConfigError("--partition", f"{', '.join(unknown)} is not a partition key of "
                          f"{table.name} (partition keys: {list(schema.partition_keys)})")
    snapshot = table.snapshots.latest()
    if snapshot is None:
        return IndexRewritePlan(table.name, None, ())
    where = table.snapshots.path(snapshot.id)
    metas = (read_manifest_list(table, snapshot.base_manifest_list, where)
             + read_manifest_list(table, snapshot.delta_manifest_list, where))
    contents = read_manifests(table, metas, where)
    entries = [(e, m.file_name) for m in metas for e in contents[m.file_name]]
    deleted = {e.identifier for e, _ in entries if e.kind == FILE_KIND_DELETE}
    files = [f.entry for f in merge_entries(entries, where) if f.entry.identifier not in deleted
             and partition_matches(partition_text(schema, f.entry.partition), partitions or {})]
    keys = {_key(e) for e in files}
    retired: dict[FileKey, list[ManifestEntry]] = {}
    for entry, _ in entries:
        if entry.kind == FILE_KIND_DELETE and _key(entry) in keys:
            retired.setdefault(_key(entry), []).append(entry)
    kept = keeping_bitmap_version(table, TableOptions.of(schema), snapshot)
    return IndexRewritePlan(table.name, snapshot.id, tuple(files),
                            {k: tuple(v) for k, v in retired.items()}, kept.bitmap_version_in_use)


def _key(entry: ManifestEntry) -> FileKey:
    return entry.partition, entry.bucket, entry.file.file_name


@dataclass
class IndexRewriteJob:
    table: Table
    clock: Clock
    partitions: Mapping[str, str] | None = None
    dry_run: bool = False
    parallelism: int = 4
    max_attempts: int = 3
    batch_rows: int = BATCH_ROWS
    progress: Progress | None = None
    max_files: int | None = None  # a bounded pass over stale files only
    memory: RegenerationMemory | None = None  # what earlier bounded passes handled
    executor: TaskExecutor | None = None  # one that maps tasks (Spark) re-indexes one bucket per task
    _chosen: list[str] = field(default_factory=list, init=False)
    _journal: JobJournal | None = field(default=None, init=False)
    _left: int = field(default=0, init=False)

    def plan(self) -> IndexRewritePlan:
        plan = plan_index_rewrite(self.table, self.partitions)
        if self.max_files is None:
            return plan
        stale = IndexStaleness(self.table, self.memory).stale(plan.files)
        self._chosen = choose(dict.fromkeys(stale, 1), self.memory, self.max_files)
        unhandled = self.memory.unhandled(stale) if self.memory is not None else stale
        self._left = len(unhandled) - len(self._chosen)
        return dataclasses.replace(plan, files=tuple(stale[k] for k in self._chosen))

    def run(self) -> IndexRewriteSummary:
        """Runs as a recorded job (a dry run writes nothing): a run killed midway leaves
        index files the next writing job deletes."""
        refuse(self.table.latest_schema(), "rewrite_index", self.table.path)
        if self.dry_run:
            return self._run(self.table, set(), None)
        with recorded_job(self.table, "rewrite-index", self.clock) as recorded:
            self._journal = recorded.journal
            return self._run(recorded.table, recorded.kept, recorded)

    def _run(self, writing: Table, kept: set[str], journal: CommitJournal | None) -> IndexRewriteSummary:
        """``writing``: the table as the job writes it; ``kept`` collects what it commits;
        ``journal`` notes what its commits write."""
        started = time.monotonic()
        summary = IndexRewriteSummary(self.table.name, self.dry_run,
                                      schema=self.table.latest_schema())
        committer = Committer(self.table, clock=self.clock, journal=journal)

        def attempt(number: int) -> Attempt:
            summary.attempts = number
            summary.plan = self.plan()
            summary.changes = changes = self._execute(summary.plan, writing)
            if not changes or self.dry_run:
                return Attempt()

            def discard() -> None:
                self._delete_written(changes)
                summary.changes = []

            commit = CommitChanges(deleted=[c.before for c in changes],
                                   added=[c.after for c in changes])
            kept.update(committed_names(commit))
            return Attempt(lambda: committer.commit(commit), discard)

        summary.snapshot, _ = commit_with_replan(attempt, self.max_attempts)
        summary.duration_s = time.monotonic() - started
        if self.max_files is not None and not self.dry_run:
            if self.memory is not None:
                self.memory.handled.update(self._chosen)
            summary.stale_left = self._left
        return summary

    def _execute(self, plan: IndexRewritePlan, writing: Table) -> list[FileIndexChange]:
        """Re-index the planned files in parallel; on a failure, delete what was written and
        re-raise."""
        files = plan.files
        if not files:
            return []
        mapper = mapper_of(self.executor)
        if mapper is not None and not self.dry_run:
            return self._execute_in_tasks(mapper, plan)
        rebuild = FileIndexRebuild(writing, plan.retired, dry_run=self.dry_run,
                                   batch_rows=self.batch_rows, bitmap_version=plan.bitmap_version)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.parallelism, len(files))))
        futures: list[Future[FileIndexChange | None]] = [pool.submit(rebuild, e) for e in files]
        changes: list[FileIndexChange] = []
        try:
            for done, (entry, future) in enumerate(zip(files, futures, strict=True), start=1):
                change = future.result()
                if change is not None:
                    changes.append(change)
                if self.progress is not None:
                    self.progress(done, len(files), entry.file.file_name)
        except BaseException:
            for pending in futures:
                pending.cancel()
            pool.shutdown(wait=True)
            self._delete_written([c for f in futures if f.done() and not f.cancelled()
                                  and f.exception() is None and (c := f.result()) is not None])
            raise
        finally:
            pool.shutdown(wait=True)
        return changes

    def _execute_in_tasks(self, mapper: TaskMapper, plan: IndexRewritePlan
                          ) -> list[FileIndexChange]:
        """One task per bucket on the executor. A failed task fails the attempt: what the
        others wrote is noted in the job's record, deleted when the job ends."""
        tasks = index_rewrite_tasks(self.table, self._journal, plan.retired, plan.files,
                                    self.batch_rows, plan.bitmap_version)
        results = mapper.map_tasks(rewrite_bucket_indexes, tasks,
                                   f"paimond rewrite-index {self.table.name}: {len(tasks)} buckets")
        changes = [c for per_task in results for c in per_task if c is not None]
        if self.progress is not None:
            self.progress(len(plan.files), len(plan.files), plan.files[-1].file.file_name)
        return changes

    def _delete_written(self, changes: Sequence[FileIndexChange]) -> None:
        for change in changes:
            if change.written_path is not None:
                self.table.storage.delete(change.written_path)
                crash_point("rewrite_index.conflict_file_deleted")
