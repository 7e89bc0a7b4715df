"""Executing one bucket's compaction task: Java ``MergeTreeCompactTask`` and
``MergeTreeCompactRewriter`` (apache/paimon 5dacde516b).

Inputs are split into key-disjoint sections. A section of several runs, or a small file, is
a rewrite candidate; a large file alone in its section is upgraded (moved to the output
level in metadata, same file) unless it must be rewritten: output at the max level while it
may hold -U/-D rows, or ``compaction.force-rewrite-all-files``. Candidates are merged
(streaming, ``lsm.merge.streaming``) into new files at the output level. Nothing here commits; on any
error the files written so far are deleted and the error propagates.

Deletion-vector tables (Java ``LookupMergeTreeCompactRewriter`` with a ``BucketedDvMaintainer``)
read every input through its vector. Before merging, the keys of the level-0 inputs are looked
up in the files above the output level (``lsm.lookup.key_lookup``): the live rows they supersede get
their positions marked, and for merge engines that combine versions (anything but deduplicate
without a sequence field) those rows join the merge as one more run, so the result carries
them. Rewritten files lose their vectors, upgraded ones keep them; a changed map is written as
one new DV index file for the bucket.

Tables whose compaction produces changelog (``changelog-producer`` lookup / full-compaction)
and ``force-lookup`` tables merge through ``lsm.merge.changelog``'s reducer, every row carrying its
file's level: their level-0 keys are looked up above the output with or without vectors (the
rows found join the merge), and a level-0 file moved up without a rewrite is merged once more
for its changelog only. Changelog files are written beside the output.

Reading, merging and writing overlap: every run is decoded one batch ahead of the merge (on a
few threads the runs share); the merge runs on the task's thread and hands merged tables to a
writer thread through a short queue. Arrow releases the GIL while it decodes, sorts, takes and
encodes, so a bucket uses about two cores; memory stays at a few batches per run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.lsm.interval_partition import Section, partition_intervals
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors, filter_deleted
from paimond.lsm.lookup.key_lookup import KeyIndex, ScanKeyIndex, without_keys
from paimond.lsm.lookup.level0_lookup import Level0Lookup
from paimond.lsm.merge.changelog import (
    FULL,
    LEVEL_COLUMN,
    LOOKUP,
    ChangelogFiles,
    ChangelogReducer,
    changelog_mode_of,
    with_level,
)
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.key_first import (
    KEY_FIRST_BYTES,
    Combining,
    RunBatches,
    combines_versions,
    merge_key_first,
    merges_key_first,
    narrow_columns,
    ordered_versions,
    plan_key_first,
    version_reducer,
)
from paimond.lsm.merge.pipeline import BackgroundWriter, SharedPrefetch, run_at_lower_priority
from paimond.lsm.merge.spill import (
    SpillDirectory,
    SpilledRun,
    every_row,
    file_reader_bytes,
    plan_run_reading,
)
from paimond.lsm.merge.streaming import SLICE_ROWS, VALUE_KIND_COLUMN, is_add, merge_sorted_runs
from paimond.lsm.task import CompactResult, CompactTask
from paimond.table.catalog import Table
from paimond.table.data_files.arrow_io import RollingDataFileWriter, file_format_for_level, read_data_file
from paimond.table.data_files.external_paths import external_provider
from paimond.table.data_files.kv_layout import (
    key_fields,
    physical_arrow_schema,
    physical_row_type,
    retract_mask,
    thin_mode,
)
from paimond.table.data_files.parquet_groups import FooterCache, read_buffer_bytes
from paimond.table.options.merge import MergeConfig
from paimond.table.storage.interface import Storage

if TYPE_CHECKING:  # the cache's module (and hashlib, mmap) only where a task uses it
    from paimond.lsm.lookup.lookup_cache import LookupCache

FILE_SOURCE_COMPACT = 1
# Rows per batch read from a file. Memory holds about two batches per run plus each file
# reader's pages; 32768 keeps that small at no cost in CPU over larger batches (16384:
# -43 MB peak RSS but +11% CPU at 10M rows, bench/compact_process.py).
BATCH_ROWS = 32768
_PREFETCH_THREADS = 4  # decode threads shared by a merge's runs (lsm.pipeline.SharedPrefetch)
# A whole row group (table.file_formats: 16 MB) may wait while the one before it is encoded.
# With half of one (8 MB) the merge and the encoder took turns instead of overlapping:
# the merge waited ~1 s of a 2.6 s compaction of 10M rows (bench/compact_process.py).
_WRITE_QUEUE_BYTES = 16 << 20
_Item = TypeVar("_Item")


def file_format_of(file_name: str) -> str:
    """Data files name their format in the last extension (``data-<uuid>-0.parquet``)."""
    return file_name.rsplit(".", 1)[-1].lower()


def load_deletion_vectors(task: CompactTask, table: Table) -> BucketDeletionVectors | None:
    """The bucket's deletion vectors as the task's base index file holds them (None: the
    table has none). CorruptFileError names a damaged index file."""
    if not task.deletion_vectors:
        return None
    return BucketDeletionVectors.load(table, task.dv_index,
                                      bitmap64=task.table.options.deletion_vectors_bitmap64)


class _BucketRewrite:
    """The task's walk; everything it needs comes in (schema and options in the task, the
    bucket's vectors loaded by :func:`load_deletion_vectors`)."""

    def __init__(self, task: CompactTask, table: Table, dvs: BucketDeletionVectors | None,
                 now_millis: Callable[[], int], batch_rows: int,
                 lookup_cache: LookupCache | None, max_runs: int | None = None,
                 write_buffer_bytes: int | None = None, reading_bytes: int | None = None,
                 key_first_bytes: int | None = None) -> None:
        self.task, self.table, self.dvs = task, table, dvs
        self.max_runs = max_runs  # sorted runs merged at once, at most (None: all)
        # what the file readers of the runs merged at once hold, at most (None: no bound)
        self.reading_bytes = reading_bytes
        # the write queue's and a Parquet row group's bytes (None: their defaults)
        self.write_buffer_bytes = write_buffer_bytes
        # rows one merge step sorts together; under a budget a batch's worth, as a spill pass
        # writes each merged step as one batch of its file, which is read back whole
        self.slice_rows = SLICE_ROWS if max_runs is None else max(1, batch_rows)
        self.schema: TableSchema = task.table.schema
        self.options = task.table.options
        self.directory = task.directory
        self.now_millis, self.batch_rows = now_millis, batch_rows
        self.min_file_size = int(self.options.target_file_size_bytes
                                 * self.options.compaction_small_file_ratio)
        self.force_rewrite = self.options.compaction_force_rewrite_all_files
        self.key_columns = [f.name for f in key_fields(self.schema)]
        self.sort_key = sort_key_function(self.schema.key_type.field_types)
        config = MergeConfig.of(self.schema)
        self.first_row = config.engine == "first-row"
        self.changelog_mode, produce = changelog_mode_of(task, config.engine)
        self.reducer = make_reducer(config, self.schema.field_names,
                                    task.drop_deletes and self.changelog_mode is None)
        self.changelog: ChangelogReducer | None = None
        if self.changelog_mode is not None:
            self.changelog = self.reducer = ChangelogReducer(
                self.reducer, self.changelog_mode, task.drop_deletes, produce)
        order = "descending" if config.sequence_descending else "ascending"
        self.user_sequence = [(name, order) for name in config.sequence_fields]
        thin = thin_mode(self.schema, self.options)
        self.output_columns = physical_row_type(self.schema, key_value=True, thin=thin).field_names
        self.read_schema = physical_arrow_schema(physical_row_type(self.schema, key_value=True))
        self.read_buffer = read_buffer_bytes(task.table.location.root)
        self.changelog_files = ChangelogFiles(table.storage, task, now_millis,
                                              self.output_columns, write_buffer_bytes)
        self.entries = {e.file.file_name: e for e in task.inputs}
        self.deleted: list[ManifestEntry] = []
        self.added: list[ManifestEntry] = []
        self.writers: list[RollingDataFileWriter] = []
        self.rows_read = self.rows_written = self.rewritten = self.upgraded = 0
        self.rows_expired = 0
        self._expired_lock = threading.Lock()  # runs are read ahead on shared threads
        # Only deduplicate without a sequence field can ignore the superseded values.
        self.merges_superseded = not (config.engine == "deduplicate" and not config.sequence_fields)
        # Java LookupMergeFunction: level-0 keys merged with their lowest higher version
        self.lookup_merge = self.changelog_mode is not None and self.changelog_mode.kind == LOOKUP
        self.lookup_cache = lookup_cache
        self.level0 = Level0Lookup(
            self.key_columns, self.schema.key_type.field_types, self._key_schema(), self.dvs,
            self.merges_superseded or self.lookup_merge, first_row=self.first_row,
            level_column=LEVEL_COLUMN if self.changelog_mode is not None else None)
        self.rewritten_names: set[str] = set()
        self.index_added: tuple[IndexManifestEntry, ...] = ()
        self.index_paths: list[str] = []
        # what a key-first merge (wide tables: ``lsm.merge.key_first``) holds, or None: the
        # task's merges take whole rows
        self.key_first_bytes = (key_first_bytes or KEY_FIRST_BYTES) \
            if merges_key_first(task) else None
        # a key-first merge reads each file again per group of columns: its footer once
        self.footers: FooterCache | None = {} if self.key_first_bytes is not None else None

    # ------------------------------------------------------------- reading

    def _read_raw(self, meta: DataFileMeta, projection: Sequence[str] | None = None
                  ) -> Iterator[pa.RecordBatch]:
        """Every row of the file, deleted or not (row numbers are positions)."""
        path = self.table.storage.join(self.directory, meta.file_name)
        return read_data_file(self.table.storage, meta.external_path or path,
                              file_format=file_format_of(meta.file_name),
                              file_schema=self.task.table.schema_of(meta.schema_id),
                              read_schema=self.schema, key_value=True,
                              batch_rows=self.batch_rows, projection=projection,
                              file_size=meta.file_size, footers=self.footers)

    def _read(self, meta: DataFileMeta, projection: Sequence[str] | None = None
              ) -> Iterator[pa.RecordBatch]:
        """The live rows of the file: through its deletion vector, if any."""
        batches = self._read_raw(meta, projection)
        if self.dvs is None or self.dvs.vector_of(meta.file_name) is None:
            return batches
        return filter_deleted(batches, self.dvs.positions_of(meta.file_name))

    def _read_unexpired(self, meta: DataFileMeta, projection: Sequence[str] | None = None,
                        count_expired: bool = False) -> Iterator[pa.RecordBatch]:
        """The live rows of the file that are not past their TTL (Java wraps the compaction
        reader with ``RecordLevelExpire``): what the merge and level-0 lookups see. The rows
        dropped count as expired when ``count_expired`` (the merge's one read of them)."""
        expiry = self.task.record_expiry
        if expiry is None:
            yield from self._read(meta, projection)
            return
        columns = None if projection is None else [
            *projection, *([] if expiry.field_name in projection else [expiry.field_name])]
        for batch in self._read(meta, columns):
            kept = expiry.filter(batch)
            if count_expired:
                with self._expired_lock:
                    self.rows_expired += batch.num_rows - kept.num_rows
            yield kept if projection is None else kept.select(list(projection))

    def _run_batches(self, run: Sequence[DataFileMeta], projection: Sequence[str] | None = None,
                     count_expired: bool = True) -> Iterator[pa.RecordBatch]:
        for meta in run:
            if self.changelog_mode is None:
                yield from self._read_unexpired(meta, projection, count_expired)
            else:
                for batch in self._read_unexpired(meta, count_expired=True):
                    yield with_level(batch, meta.level)

    def _counted(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            self.rows_read += batch.num_rows
            yield batch

    def may_hold_deletes(self, meta: DataFileMeta) -> bool:
        """Trust a positive or unknown count; verify a zero (pypaimon writes 0 on files that
        do hold -U/-D rows) by reading the one small ``_VALUE_KIND`` column."""
        if meta.delete_row_count is None or meta.delete_row_count > 0:
            return True
        return any(pc.any(retract_mask(b.column(0))).as_py()
                   for b in self._read(meta, projection=[VALUE_KIND_COLUMN]))

    # ------------------------------------------------------------- the walk

    def run(self) -> None:
        if self.task.file_rewrite:
            for entry in self.task.inputs:
                self._rewrite_now([Section(((entry.file,),))])
            return
        sections = partition_intervals([e.file for e in self.task.inputs],
                                       self.schema.key_type.field_types)
        if (self.dvs is not None or self.first_row or self.lookup_merge) \
                and self.task.output_level != 0:
            self._look_up_level0_keys(sections)
        candidate: list[Section] = []
        for section in sections:
            if len(section.runs) > 1:
                candidate.append(section)
                continue
            for meta in section.runs[0]:
                if meta.file_size < self.min_file_size:
                    candidate.append(Section(((meta,),)))
                else:
                    self._rewrite(candidate)
                    self._upgrade(meta)
        self._rewrite(candidate)

    def _look_up_level0_keys(self, sections: Sequence[Section]) -> None:
        def read_keys(meta: DataFileMeta) -> Iterator[pa.RecordBatch]:
            return self._read_raw(meta, self.key_columns)

        index: KeyIndex = ScanKeyIndex(read_keys, self.key_columns)
        if self.lookup_cache is not None:
            from paimond.lsm.lookup.lookup_cache import CachedKeyIndex

            index = CachedKeyIndex(self.lookup_cache, self.table.path, read_keys,
                                   self.key_columns)
        self.level0.run(sections, [e.file for e in self.task.lookup_files], index,
                        lambda meta: self._read_unexpired(meta, self.key_columns),
                        self._read_raw)

    def _rewrite(self, candidate: list[Section]) -> None:
        if not candidate:
            return
        if len(candidate) == 1 and len(candidate[0].runs) == 1:
            for meta in candidate[0].runs[0]:
                self._upgrade(meta)
        else:
            self._rewrite_now(candidate)
        candidate.clear()

    def _key_schema(self) -> pa.Schema:
        return physical_arrow_schema(
            physical_row_type(self.schema, key_value=True).project(self.key_columns))

    def _rewrites_level0(self, meta: DataFileMeta) -> bool:
        """Java's upgrade strategy for a level-0 file of a deletion-vector table: it moves
        up as it is only without -U/-D rows, in the output level's format, and where its
        rows need no merging with the superseded ones."""
        output = self.task.output_level
        if meta.level != 0 or output == 0:
            return False
        if self.first_row:
            return True  # Java FirstRowMergeTreeCompactRewriter: level 0 always rewritten
        if self.dvs is None and not self.lookup_merge:
            return False
        if file_format_for_level(self.options, 0) != file_format_for_level(self.options, output):
            return True
        if self.dvs is not None and self.may_hold_deletes(meta):
            return True
        return output != self.task.max_level and self.merges_superseded

    def _holds_expired(self, meta: DataFileMeta) -> bool:
        """Java ``MergeTreeCompactTask.containsExpiredRecords``: by the min statistic."""
        expiry = self.task.record_expiry
        return expiry is not None and expiry.expires_file(meta,
                                                          self.task.table.schema_of(meta.schema_id))

    def _upgrade(self, meta: DataFileMeta) -> None:
        output = self.task.output_level
        if self.force_rewrite or (output == self.task.max_level and self.may_hold_deletes(meta)) \
                or self._holds_expired(meta) or self._rewrites_level0(meta):
            self._rewrite_now([Section(((meta,),))])
            return
        if meta.level != output:
            if self.changelog is not None and self.changelog.produce and (
                    meta.level == 0 or self.changelog.mode.kind == FULL):
                self._rewrite_now([Section(((meta,),))], write_data=False)  # changelog only
            entry = self.entries[meta.file_name]
            self.deleted.append(entry)
            self.added.append(dataclasses.replace(
                entry, kind=FILE_KIND_ADD, file=dataclasses.replace(meta, level=output)))
            self.upgraded += 1

    def _rewrite_now(self, sections: Sequence[Section], write_data: bool = True) -> None:
        """Merge ``sections`` into new files at the output level; ``write_data=False``: only
        the changelog of the merge is written (a level-0 file upgraded as it is)."""
        writer = RollingDataFileWriter(
            self.table.storage, self.directory, self.schema, self.options,
            level=self.task.output_level, key_value=True, file_source=FILE_SOURCE_COMPACT,
            now_millis=self.now_millis,
            external=external_provider(self.options, self.task.table_path, self.directory),
            row_group_bytes=self.write_buffer_bytes)
        self.writers.append(writer)
        put = writer.write if write_data else _discard
        with BackgroundWriter(put, self.write_buffer_bytes or _WRITE_QUEUE_BYTES) as background, \
                SharedPrefetch(_PREFETCH_THREADS) as prefetch:
            run_at_lower_priority(lambda: self._merge_sections(sections, background, prefetch,
                                                               write_data))
        for meta in writer.close():
            self.added.append(ManifestEntry(FILE_KIND_ADD, self.task.partition, self.task.bucket,
                                            self.task.total_buckets, meta))

    def _merge_sections(self, sections: Sequence[Section], background: BackgroundWriter,
                        prefetch: SharedPrefetch, write_data: bool) -> None:
        for section in sections:
            if self.key_first_bytes is not None and write_data:
                self._merge_key_first(section, background, prefetch)
                continue
            with contextlib.ExitStack() as stack:
                inputs = self._section_inputs(section, prefetch, stack)
                self._merge_section(section, inputs, background, write_data)

    def _section_inputs(self, section: Section, prefetch: SharedPrefetch,
                        stack: contextlib.ExitStack) -> list[Iterator[pa.RecordBatch]]:
        """The section's runs as the merge reads them, in their order. Runs whose readers do
        not fit ``reading_bytes`` together, or more runs than ``max_runs``, are read
        beforehand into spill files (``lsm.merge.spill.plan_run_reading``); spill files still
        more than ``max_runs`` are merged ``max_runs`` at a time, every row kept."""
        runs = section.runs
        reading = plan_run_reading([self._reader_bytes(run) for run in runs],
                                   self.reading_bytes, self.max_runs)
        if not reading.spills:
            return self._open_runs(runs, prefetch, stack)
        spills = stack.enter_context(SpillDirectory())
        spilled = {}
        for group in reading.spilled:
            with contextlib.ExitStack() as opened:
                read = self._open_runs([runs[i] for i in group], prefetch, opened)
                spilled[group[0]] = spills.spill(
                    (pa.Table.from_batches([b]) for b in read[0]) if len(group) == 1
                    else self._every_row(read))
        members = {i for group in reading.spilled for i in group}
        if len(members) == len(runs):  # every run spilled: merged down to max_runs files
            merged = [spilled[i] for i in sorted(spilled)]
            while self.max_runs is not None and len(merged) > self.max_runs:
                merged = [spills.spill(self._every_row([r.batches() for r in group]))
                          for group in _groups(merged, self.max_runs)]
            return [self._spilled_input(run, stack) for run in merged]
        inputs: list[Iterator[pa.RecordBatch]] = []
        for index, run in enumerate(runs):  # the runs read from their files opened last
            if index in spilled:
                inputs.append(self._spilled_input(spilled[index], stack))
            elif index not in members:
                inputs.extend(self._open_runs([run], prefetch, stack))
        return inputs

    @staticmethod
    def _spilled_input(run: SpilledRun, stack: contextlib.ExitStack
                       ) -> Iterator[pa.RecordBatch]:
        batches = run.batches()
        stack.callback(batches.close)
        return batches

    def _reader_bytes(self, run: Sequence[DataFileMeta]) -> int:
        """What reading the run from its files holds besides its batches: its largest file's
        reader (one file of a run is read at a time)."""
        return file_reader_bytes(self.read_schema, max(m.row_count for m in run),
                                 self.read_buffer)

    def _open_runs(self, runs: Sequence[Sequence[DataFileMeta]], prefetch: SharedPrefetch,
                   stack: contextlib.ExitStack) -> list[Iterator[pa.RecordBatch]]:
        """The runs, each read ahead from now on (closed with ``stack``), their rows counted."""
        opened = [prefetch.run(self._run_batches(run)) for run in runs]
        for run in opened:
            stack.callback(run.close)
        return [self._counted(run) for run in opened]

    def _every_row(self, runs: Sequence[Iterator[pa.RecordBatch]]) -> Iterator[pa.Table]:
        return merge_sorted_runs(runs, self.key_columns, self.sort_key, every_row,
                                 self.user_sequence, slice_rows=self.slice_rows)

    def _merge_section(self, section: Section, inputs: list[Iterator[pa.RecordBatch]],
                       background: BackgroundWriter, write_data: bool) -> None:
        superseded = self.level0.superseded_run(section)
        if superseded is not None:
            inputs.append(self._counted(iter(superseded.to_batches())))
        existing = self.level0.existing_keys_of(section)
        for merged in merge_sorted_runs(inputs, self.key_columns, self.sort_key, self.reducer,
                                        self.user_sequence, slice_rows=self.slice_rows):
            if existing is not None:
                merged = without_keys(merged, existing, self.key_columns)
            self._write_changelog(existing)
            if write_data:
                background.put(merged.select(self.output_columns))
                self.rows_written += merged.num_rows
        # a last piece whose merged rows were all dropped (retractions at the max level)
        # yields no table, but its changelog (a -D of the before) stands
        self._write_changelog(existing)
        if write_data:
            self._rewritten(section)

    def _rewritten(self, section: Section) -> None:
        for meta in section.files:
            self.deleted.append(self.entries[meta.file_name])
            self.rewritten_names.add(meta.file_name)
            self.rewritten += 1

    def _merge_key_first(self, section: Section, background: BackgroundWriter,
                         prefetch: SharedPrefetch) -> None:
        """Merge the section's keys first, then gather the survivors' values, or reduce
        every version's a group of columns at a time (``lsm.merge.key_first``); the deletion
        vectors' superseded rows are one more run."""
        assert self.key_first_bytes is not None
        runs = list(section.runs)
        superseded = self.level0.superseded_run(section)
        existing = self.level0.existing_keys_of(section)
        narrow = narrow_columns(self.task)
        values = [name for name in self.output_columns if name not in narrow]
        run_rows = [max(m.row_count for m in run) for run in runs]
        if superseded is not None:
            run_rows.append(superseded.num_rows)
        parquet = all(file_format_of(meta.file_name) == "parquet" for meta in section.files)
        layout = plan_key_first(self.read_schema, narrow, values, run_rows,
                                self.key_first_bytes, self.read_buffer, self.batch_rows,
                                parquet and superseded is None)
        combining = None
        if combines_versions(self.task):
            combining = Combining(
                version_reducer(MergeConfig.of(self.schema), self.key_columns),
                tuple(name for name in narrow if name in self.schema.field_names))
        reduce_keys = self.reducer if combining is None else ordered_versions
        drop_deletes = combining is not None and self.task.drop_deletes

        with contextlib.ExitStack() as stack:
            def open_run(index: int, columns: Sequence[str]) -> RunBatches:
                if index == len(runs):
                    assert superseded is not None
                    return _batches_of(superseded.select(list(columns)), layout.batch_rows)
                # the narrow read is the one whose expired rows are counted
                expired = list(columns) == narrow
                read = prefetch.run(self._run_batches(runs[index], columns, expired))
                stack.callback(read.close)  # on an error
                return read

            def merge_keys(inputs: list[Iterator[pa.RecordBatch]]) -> Iterator[pa.Table]:
                counted = [self._counted(run) for run in inputs]
                for merged in merge_sorted_runs(counted, self.key_columns, self.sort_key,
                                                reduce_keys, self.user_sequence,
                                                slice_rows=layout.slice_rows):
                    yield merged if existing is None else \
                        without_keys(merged, existing, self.key_columns)

            spills = stack.enter_context(SpillDirectory())
            for merged in merge_key_first(open_run, len(runs) + (superseded is not None),
                                          narrow, merge_keys, layout, self.output_columns,
                                          spills, combining):
                if drop_deletes:  # a merged -U/-D at the max level
                    merged = merged.filter(is_add(merged.column(VALUE_KIND_COLUMN)))
                background.put(merged)
                self.rows_written += merged.num_rows
        self._rewritten(section)

    def _write_changelog(self, existing: pa.Table | None) -> None:
        """The changelog of the last merged table (first-row: keys found above left out)."""
        found = self.changelog.take_changelog() if self.changelog is not None else None
        if found is None:
            return
        if existing is not None:
            found = without_keys(found, existing, self.key_columns)
        self.changelog_files.write(found)

    def finish_deletion_vectors(self) -> None:
        """Drop the vectors of rewritten files; write the bucket's map if it changed."""
        if self.dvs is None:
            return
        for name in self.rewritten_names:
            self.dvs.remove(name)
        if self.dvs.changed:
            entry, path = self.dvs.write(self.table, self.task.partition, self.task.bucket)
            self.index_paths.append(path)
            self.index_added = (entry,)

    def abort(self) -> None:
        for writer in self.writers:
            writer.abort()
        self.changelog_files.abort()
        for path in self.index_paths:
            self.table.storage.delete(path)


def execute_compaction(task: CompactTask, storage: Storage, *,
                       now_millis: Callable[[], int], batch_rows: int = BATCH_ROWS,
                       lookup_cache: LookupCache | None = None, max_runs: int | None = None,
                       write_buffer_bytes: int | None = None,
                       reading_bytes: int | None = None,
                       key_first_bytes: int | None = None) -> CompactResult:
    """Run one bucket's task; returns what to commit. Deletes its own files on failure.
    ``lookup_cache`` answers the level-0 key lookups of deletion-vector and first-row tables
    from local cache files (default: read the key columns of the files above). ``max_runs``:
    the sorted runs merged at once, at most; a section with more is merged in passes through
    local spill files (``lsm.merge.spill``). ``write_buffer_bytes``: what the write queue and
    a Parquet row group hold, at most (None: 16 MB each). ``reading_bytes``: what the file
    readers of the runs merged at once hold, at most; runs past it are read beforehand into
    spill files (None: no bound). ``key_first_bytes``: what a wide table's key-first merge
    holds (``lsm.merge.key_first``; None: its default)."""
    started = time.monotonic()
    table = Table(storage, task.table_path, task.table_name)
    dvs = load_deletion_vectors(task, table)
    rewrite = _BucketRewrite(task, table, dvs, now_millis, batch_rows, lookup_cache, max_runs,
                             write_buffer_bytes, reading_bytes, key_first_bytes)
    try:
        rewrite.run()
        rewrite.changelog_files.finish()
        rewrite.finish_deletion_vectors()
    except BaseException:
        rewrite.abort()
        raise
    stats = lookup_cache.stats if lookup_cache is not None else None
    written = tuple(e.file.external_path or storage.join(rewrite.directory, e.file.file_name)
                    for e in rewrite.added
                    if e.file.file_name not in {d.file.file_name for d in rewrite.deleted})
    return CompactResult(task=task, deleted=tuple(rewrite.deleted), added=tuple(rewrite.added),
                         rows_read=rewrite.rows_read, rows_written=rewrite.rows_written,
                         rows_expired=rewrite.rows_expired,
                         files_rewritten=rewrite.rewritten, files_upgraded=rewrite.upgraded,
                         duration_s=time.monotonic() - started,
                         written_paths=written + tuple(rewrite.index_paths) + tuple(
                             e.file.external_path
                             or storage.join(rewrite.directory, e.file.file_name)
                             for e in rewrite.changelog_files.added),
                         changelog=tuple(rewrite.changelog_files.added),
                         index_added=rewrite.index_added,
                         rows_superseded=rewrite.level0.rows_superseded,
                         cache_hits=stats.hits if stats else 0,
                         cache_misses=stats.misses if stats else 0,
                         cache_discarded=stats.discarded if stats else 0)


def _groups(items: Sequence[_Item], size: int) -> list[Sequence[_Item]]:
    return [items[start:start + size] for start in range(0, len(items), size)]


def _batches_of(table: pa.Table, batch_rows: int) -> Generator[pa.RecordBatch, None, None]:
    yield from table.to_batches(max_chunksize=batch_rows)


def _discard(batch: pa.RecordBatch) -> None:
    """Rows a changelog-only pass merges are not written."""
