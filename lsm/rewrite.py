"""Executing one bucket's compaction task: Java ``MergeTreeCompactTask`` and
``MergeTreeCompactRewriter`` (apache/paimon 5dacde516b).

Inputs are split into key-disjoint sections. A section of several runs, or a small file, is
a rewrite candidate; a large file alone in its section is upgraded (moved to the output
level in metadata, same file) unless it must be rewritten: output at the max level while it
may hold -U/-D rows, or ``compaction.force-rewrite-all-files``. Candidates are merged
(streaming, ``lsm.merge``) into new files at the output level. Nothing here commits; on any
error the files written so far are deleted and the error propagates.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from paimond.format.key_order import sort_key_function
from paimond.format.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry
from paimond.format.schema import TableSchema
from paimond.lsm.interval_partition import Section, partition_intervals
from paimond.lsm.merge import VALUE_KIND_COLUMN, merge_sorted_runs
from paimond.lsm.merge_engines import MergeConfig, make_reducer
from paimond.lsm.task import CompactResult, CompactTask
from paimond.table.catalog import Table
from paimond.table.data_files import RollingDataFileWriter, read_data_file
from paimond.table.kv_layout import key_fields, physical_row_type, retract_mask, thin_mode
from paimond.table.options import TableOptions
from paimond.table.scan import bucket_path
from paimond.table.storage import Storage

FILE_SOURCE_COMPACT = 1
SMALL_FILE_RATIO_DEFAULT = 0.7


def file_format_of(file_name: str) -> str:
    """Data files name their format in the last extension (``data-<uuid>-0.parquet``)."""
    return file_name.rsplit(".", 1)[-1].lower()


class _BucketRewrite:
    def __init__(self, task: CompactTask, storage: Storage, now_millis: Callable[[], int],
                 batch_rows: int) -> None:
        self.task = task
        self.table = Table(storage, task.table_path, task.table_name)
        self.schema: TableSchema = self.table.schema(task.schema_id)
        self.options = TableOptions.of(self.schema)
        self.directory = bucket_path(self.table, self.schema, task.partition, task.bucket)
        self.now_millis, self.batch_rows = now_millis, batch_rows
        ratio = float(self.schema.options.get("compaction.small-file-ratio",
                                              SMALL_FILE_RATIO_DEFAULT))
        self.min_file_size = int(self.options.target_file_size_bytes * ratio)
        self.force_rewrite = self.schema.options.get(
            "compaction.force-rewrite-all-files", "false").lower() == "true"
        self.key_columns = [f.name for f in key_fields(self.schema)]
        self.sort_key = sort_key_function(self.schema.key_type.field_types)
        config = MergeConfig.of(self.schema)
        self.reducer = make_reducer(config, self.schema.field_names, task.drop_deletes)
        order = "descending" if config.sequence_descending else "ascending"
        self.user_sequence = [(name, order) for name in config.sequence_fields]
        thin = thin_mode(self.schema, self.options)
        self.output_columns = physical_row_type(self.schema, key_value=True, thin=thin).field_names
        self.entries = {e.file.file_name: e for e in task.inputs}
        self.deleted: list[ManifestEntry] = []
        self.added: list[ManifestEntry] = []
        self.writers: list[RollingDataFileWriter] = []
        self.rows_read = self.rows_written = self.rewritten = self.upgraded = 0

    # ------------------------------------------------------------- reading

    def _read(self, meta: DataFileMeta, projection: Sequence[str] | None = None
              ) -> Iterator[pa.RecordBatch]:
        path = self.table.storage.join(self.directory, meta.file_name)
        return read_data_file(self.table.storage, meta.external_path or path,
                              file_format=file_format_of(meta.file_name),
                              file_schema=self.table.schema(meta.schema_id),
                              read_schema=self.schema, key_value=True,
                              batch_rows=self.batch_rows, projection=projection)

    def _run_batches(self, run: Sequence[DataFileMeta]) -> Iterator[pa.RecordBatch]:
        for meta in run:
            for batch in self._read(meta):
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
        candidate: list[Section] = []
        if self.task.file_rewrite:
            for entry in self.task.inputs:
                self._rewrite_now([Section(((entry.file,),))])
            return
        sections = partition_intervals([e.file for e in self.task.inputs],
                                       self.schema.key_type.field_types)
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

    def _rewrite(self, candidate: list[Section]) -> None:
        if not candidate:
            return
        if len(candidate) == 1 and len(candidate[0].runs) == 1:
            for meta in candidate[0].runs[0]:
                self._upgrade(meta)
        else:
            self._rewrite_now(candidate)
        candidate.clear()

    def _upgrade(self, meta: DataFileMeta) -> None:
        output = self.task.output_level
        if self.force_rewrite or (output == self.task.max_level and self.may_hold_deletes(meta)):
            self._rewrite_now([Section(((meta,),))])
            return
        if meta.level != output:
            entry = self.entries[meta.file_name]
            self.deleted.append(entry)
            self.added.append(dataclasses.replace(
                entry, kind=FILE_KIND_ADD, file=dataclasses.replace(meta, level=output)))
            self.upgraded += 1

    def _rewrite_now(self, sections: Sequence[Section]) -> None:
        writer = RollingDataFileWriter(
            self.table.storage, self.directory, self.schema, self.options,
            level=self.task.output_level, key_value=True, file_source=FILE_SOURCE_COMPACT,
            now_millis=self.now_millis)
        self.writers.append(writer)
        for section in sections:
            runs = [self._run_batches(run) for run in section.runs]
            for merged in merge_sorted_runs(runs, self.key_columns, self.sort_key, self.reducer,
                                            self.user_sequence):
                for batch in merged.select(self.output_columns).to_batches():
                    writer.write(batch)
                    self.rows_written += batch.num_rows
            for meta in section.files:
                self.deleted.append(self.entries[meta.file_name])
                self.rewritten += 1
        for meta in writer.close():
            self.added.append(ManifestEntry(FILE_KIND_ADD, self.task.partition, self.task.bucket,
                                            self.task.total_buckets, meta))

    def abort(self) -> None:
        for writer in self.writers:
            writer.abort()


def execute_compaction(task: CompactTask, storage: Storage, *,
                       now_millis: Callable[[], int], batch_rows: int = 65536) -> CompactResult:
    """Run one bucket's task; returns what to commit. Deletes its own files on failure."""
    started = time.monotonic()
    rewrite = _BucketRewrite(task, storage, now_millis, batch_rows)
    try:
        rewrite.run()
    except BaseException:
        rewrite.abort()
        raise
    written = tuple(storage.join(rewrite.directory, e.file.file_name) for e in rewrite.added
                    if e.file.file_name not in {d.file.file_name for d in rewrite.deleted})
    return CompactResult(task=task, deleted=tuple(rewrite.deleted), added=tuple(rewrite.added),
                         rows_read=rewrite.rows_read, rows_written=rewrite.rows_written,
                         files_rewritten=rewrite.rewritten, files_upgraded=rewrite.upgraded,
                         duration_s=time.monotonic() - started, written_paths=written)

