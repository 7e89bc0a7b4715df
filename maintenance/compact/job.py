"""The ``compact`` job: plan every bucket, execute the tasks in parallel, commit once.

Java's ``compact`` procedure (batch): one COMPACT snapshot for all buckets, with conflict
checks; a bucket whose task fails is left out of the commit (its files deleted) while the
others still land. A conflict (an input compacted or removed meanwhile) deletes this
attempt's new files and re-plans from the new latest snapshot.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.faults import crash_point
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.lsm.picker import PickerState
from paimond.lsm.rewrite import BATCH_ROWS
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.compact.memory import (
    MemoryBudget,
    postpone_chunk_bytes,
    use_returning_memory_pool,
)
from paimond.maintenance.compact.plan import (
    FULL_COMPACTION_PROPERTY,
    CompactionPlan,
    plan_compaction,
)
from paimond.maintenance.compact.postpone import (
    PostponeSummary,
    move_postponed_rows,
    plan_postpone,
)
from paimond.maintenance.execution import (
    BucketFailure,
    LookupCacheSettings,
    Progress,
    TaskExecutor,
    TaskRunner,
    in_plan_order,
    largest_first,
    run_in_local_pool,
)
from paimond.maintenance.job_cleanup import RecordedJob, committed_names, recorded_job
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.job_records import JobJournal
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.partition_filter import PartitionSelection
from paimond.table.storage.interface import Storage


@dataclass
class CompactionSummary:
    table_name: str
    plan: CompactionPlan | None = None
    snapshot: Snapshot | None = None
    results: list[CompactResult] = field(default_factory=list)
    failures: list[BucketFailure] = field(default_factory=list)
    attempts: int = 0
    duration_s: float = 0.0
    lookup_cache_used: bool = False
    # a postpone-bucket table's rows moved into real buckets before the LSM compaction
    postpone: PostponeSummary | None = None

    @property
    def files_in(self) -> int:
        return sum(len(r.deleted) for r in self.results)

    @property
    def files_out(self) -> int:
        return sum(len(r.added) for r in self.results)

    @property
    def bytes_in(self) -> int:
        return sum(e.file.file_size for r in self.results for e in r.deleted)

    @property
    def bytes_out(self) -> int:
        return sum(e.file.file_size for r in self.results for e in r.added)

    @property
    def rows_read(self) -> int:
        return sum(r.rows_read for r in self.results)

    @property
    def rows_written(self) -> int:
        return sum(r.rows_written for r in self.results)

    def describe(self) -> str:
        postpone = self.postpone if self.postpone and self.postpone.snapshot else None
        if self.plan is not None and not self.plan.tasks and not self.failures:
            if postpone is None:
                return f"{self.table_name}: nothing to compact"
            return f"{self.table_name}: no LSM compaction due\n{postpone.describe()}"
        committed = f"snapshot {self.snapshot.id}" if self.snapshot else "nothing committed"
        lines = [
            f"{self.table_name}: {committed} after {self.attempts} attempt(s) in "
            f"{self.duration_s:.2f} s",
            f"  buckets compacted {len(self.results)}, failed {len(self.failures)}",
            f"  files {self.files_in} -> {self.files_out}, bytes {self.bytes_in} -> "
            f"{self.bytes_out}",
            f"  rows read {self.rows_read}, written {self.rows_written}, merged or dropped "
            f"{self.rows_read - self.rows_written}",
        ]
        if any(r.task.deletion_vectors for r in self.results):
            superseded = sum(r.rows_superseded for r in self.results)
            vectors = sum(len(r.index_added) for r in self.results)
            lines.append(f"  deletion vectors: {superseded} older rows marked deleted, "
                         f"{vectors} bucket index file(s) written")
        changelog = [e for r in self.results for e in r.changelog]
        if changelog:
            lines.append(f"  changelog ({self.results[0].task.changelog_producer}): "
                         f"{sum(e.file.row_count for e in changelog)} rows in "
                         f"{len(changelog)} file(s)")
        if self.lookup_cache_used and any(r.task.lookup_files for r in self.results):
            hits = sum(r.cache_hits for r in self.results)
            misses = sum(r.cache_misses for r in self.results)
            discarded = sum(r.cache_discarded for r in self.results)
            lines.append(f"  lookup cache: {hits} files answered from it, {misses} cached now"
                         + (f", {discarded} damaged cache files rebuilt" if discarded else ""))
        lines += [f"  FAILED {f.task.partition_text or '-'} bucket {f.task.bucket}: {f.error}"
                  for f in self.failures]
        if self.postpone is not None:
            lines.append(self.postpone.describe())
        return "\n".join(lines)


@dataclass
class CompactJob:
    """``picker_states``: a long-lived caller's per-(partition, bucket) picker states (the
    daemon keeps one mapping per table), read by every plan and updated after each run, so
    that what Java keeps in memory between picks (gentle lookup mode) carries over."""

    table: Table
    full: bool = False
    partitions: PartitionSelection | None = None
    parallelism: int = field(default_factory=lambda: os.cpu_count() or 1)
    use_processes: bool = True
    batch_rows: int = BATCH_ROWS
    max_attempts: int = 3
    clock: Clock = field(kw_only=True)  # the plan's moment and the new files' creation time
    progress: Progress | None = None
    executor: TaskExecutor | None = None  # None: the local pool below
    lookup_cache: LookupCacheSettings | None = None
    picker_states: MutableMapping[tuple[bytes, int], PickerState] | None = None
    memory: MemoryBudget | None = None  # the local pool admits tasks within it
    accepted_options: tuple[str, ...] = ()  # undecided option keys the operator accepts

    def plan(self, *, for_commit: bool = False, schema: TableSchema | None = None
             ) -> CompactionPlan:
        """``for_commit``: the plan also keeps its tasks' buckets for the commit's check.
        ``schema``: the one this run refused (None: the latest, refused by the plan). A
        dry run's plan of a postpone-bucket table says where its postpone rows would go."""
        plan = plan_compaction(self.table, full=self.full, partitions=self.partitions,
                               moment=self.clock.local_now(),
                               picker_states=self.picker_states, commit_base=for_commit,
                               schema=schema, accepted_options=self.accepted_options)
        if for_commit or plan.base_snapshot_id is None:
            return plan
        schema = schema or self.table.latest_schema()
        if TableOptions.of(schema).bucket != BUCKET_POSTPONE:
            return plan
        snapshot = self.table.snapshots.load(plan.base_snapshot_id)
        postpone = plan_postpone(self.table, schema, snapshot, partitions=self.partitions)
        return dataclasses.replace(plan, postpone=postpone)

    def run(self, schema: TableSchema | None = None) -> CompactionSummary:
        """Runs as a recorded job: a run killed midway leaves files the next run deletes. The
        table's schema is read (unless the caller just read it: ``schema``) and refused once,
        before any record; a re-planned attempt refuses again only a schema a writer has
        evolved since."""
        schema = schema or self.table.latest_schema()
        refuse(schema, "compact", self.table.path, self.accepted_options)
        use_returning_memory_pool()  # the postpone rows are moved here
        with recorded_job(self.table, "compact", self.clock) as recorded:
            return self._run(recorded, schema)

    def _run(self, recorded: RecordedJob, schema: TableSchema) -> CompactionSummary:
        started = time.monotonic()
        summary = CompactionSummary(self.table.name, lookup_cache_used=self.lookup_cache is not None)
        committer = Committer(self.table, clock=self.clock, journal=recorded)

        checked = schema
        if TableOptions.of(schema).bucket == BUCKET_POSTPONE:  # first: they are invisible
            mapper = None
            if self.executor is not None:  # (its module loads file-index code)
                from paimond.maintenance.distributed import mapper_of

                mapper = mapper_of(self.executor)
            summary.postpone = move_postponed_rows(recorded, schema, self.clock,
                                                   partitions=self.partitions,
                                                   max_attempts=self.max_attempts, mapper=mapper,
                                                   accepted_options=self.accepted_options,
                                                   chunk_bytes=postpone_chunk_bytes(self.memory))

        def attempt(number: int) -> Attempt:
            nonlocal checked
            summary.attempts = number
            if number > 1:  # a conflict: the writer that won may have evolved the schema
                latest = self.table.latest_schema()
                if latest.id != checked.id:
                    refuse(latest, "compact", self.table.path, self.accepted_options)
                    checked = latest
            summary.plan = self.plan(for_commit=True, schema=checked)
            summary.results, summary.failures = self._execute(summary.plan.tasks,
                                                              recorded.journal)
            if not summary.results:
                return Attempt()
            results = summary.results
            changes = CommitChanges(
                deleted=[e for r in results for e in r.deleted],
                added=[e for r in results for e in r.added],
                index_added=[e for r in results for e in r.index_added],
                index_deleted=[e for r in results for e in r.index_deleted],
                changelog=[e for r in results for e in r.changelog],
                requirements=[req for r in results for req in r.requirements],
                # the mark full-compaction.delta-commits counts from (every bucket done)
                properties={FULL_COMPACTION_PROPERTY: "true"}
                if summary.plan.full and not summary.failures else None,
                base=summary.plan.commit_base)  # the check reads only the snapshots since

            def discard() -> None:
                _delete_written(self.table.storage, results)
                summary.results = []

            recorded.keep(committed_names(changes))
            return Attempt(lambda: committer.commit(changes), discard)

        summary.snapshot, _ = commit_with_replan(attempt, self.max_attempts)
        self._keep_picker_states(summary)
        summary.duration_s = time.monotonic() - started
        return summary

    def _keep_picker_states(self, summary: CompactionSummary) -> None:
        """The plan's states, but a bucket whose task failed keeps its old one (its forced
        pick is due again)."""
        if self.picker_states is None or summary.plan is None:
            return
        failed = {(f.task.partition, f.task.bucket) for f in summary.failures}
        self.picker_states.update((key, state) for key, state in summary.plan.picker_states.items()
                                  if key not in failed)

    def _execute(self, tasks: Sequence[CompactTask], journal: JobJournal | None = None
                 ) -> tuple[list[CompactResult], list[BucketFailure]]:
        if not tasks:
            return [], []
        runner = TaskRunner(self.batch_rows, self.clock, self.lookup_cache, journal)
        if self.executor is not None:
            return self.executor.execute(tasks, runner, self.progress)
        results, failures = run_in_local_pool(largest_first(tasks), runner, self.parallelism,
                                              self.use_processes, self.progress, self.memory)
        return in_plan_order(results, tasks), failures

def _delete_written(storage: Storage, results: Sequence[CompactResult]) -> None:
    """New files of an attempt that will never be committed, with their index files."""
    for result in results:
        extra_files = {e.file.file_name: e.file.extra_files for e in result.added}
        for path in result.written_paths:
            storage.delete(path)
            crash_point("compact.conflict_file_deleted")
            directory, _, name = path.rpartition("/")
            for extra in extra_files.get(name, ()):
                storage.delete(storage.join(directory, extra))
