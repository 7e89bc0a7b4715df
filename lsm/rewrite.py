"""Executing one bucket's compaction task: Java ``MergeTreeCompactTask`` and
``MergeTreeCompactRewriter`` (apache/paimon 5dacde516b).

Inputs are split into key-disjoint sections. A section of several runs, or a small file, is
a rewrite candidate; a large file alone in its section is upgraded (moved to the output
level in metadata, same file) unless it must be rewritten: output at the max level while it
may hold -U/-D rows, or ``compaction.force-rewrite-all-files``. Candidates are merged
(streaming, ``lsm.merge``) into new files at the output level. Nothing here commits; on any
error the files written so far are deleted and the error propagates.

Reading, merging and writing overlap: every run is decoded on a thread of its own, one batch
ahead of the merge, which runs on the task's thread and hands merged tables to a writer
thread through a short queue. Arrow releases the GIL while it decodes, sorts, takes and
encodes, so a bucket uses about two cores; memory stays at a few batches per run.
"""

from __future__ import annotations

import collections
import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError
from typing import Any

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
# Rows per batch read from a file. Memory holds about two batches per run plus each file
# reader's pages; 32768 keeps that small at no cost in CPU over larger batches.
BATCH_ROWS = 32768
_PREFETCH_BATCHES = 1
_WRITE_QUEUE_BYTES = 32 << 20  # two row groups' worth


def file_format_of(file_name: str) -> str:
    """Data files name their format in the last extension (``data-<uuid>-0.parquet``)."""
    return file_name.rsplit(".", 1)[-1].lower()


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


_END = object()


class _Prefetch:
    """A run's batches decoded on a thread of their own, at most ``depth`` ahead of the
    merge. ``close`` stops the thread and closes the batches (and so the file) there."""

    def __init__(self, batches: Iterator[pa.RecordBatch], depth: int) -> None:
        self._ready: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._slots = threading.Semaphore(depth)
        self._stopped = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._produce, args=(batches,), daemon=True,
                                        name="paimond-prefetch")
        self._thread.start()

    def _produce(self, batches: Iterator[pa.RecordBatch]) -> None:
        try:
            while self._slots.acquire() and not self._stopped.is_set():
                batch = next(batches, None)
                self._ready.put(_END if batch is None else batch)
                if batch is None:
                    return
        except BaseException as error:  # noqa: B036 - re-raised by the consumer
            self._ready.put(_Failed(error))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> _Prefetch:
        return self

    def __next__(self) -> pa.RecordBatch:
        if self._done:
            raise StopIteration
        item = self._ready.get()
        if isinstance(item, pa.RecordBatch):
            self._slots.release()
            return item
        self._done = True
        if isinstance(item, _Failed):
            raise item.error
        raise StopIteration

    def close(self) -> None:
        self._stopped.set()
        self._slots.release()  # wakes the thread if it waits for a slot
        self._thread.join()


class _BackgroundWriter:
    """Hands tables to ``write`` on a thread, holding at most ``max_bytes`` of them (or one
    larger table) in waiting. Leaving the ``with`` block waits for the writes; a write error
    is raised in the caller's thread (at the next ``put`` or on leaving), and after one
    nothing more is written.

    The bound is in bytes, not tables: the writer encodes a whole row group at a time, and
    the merge should go on meanwhile rather than wait for it."""

    def __init__(self, write: Callable[[pa.RecordBatch], None], max_bytes: int) -> None:
        self._write, self._max_bytes = write, max_bytes
        self._waiting: collections.deque[pa.Table] = collections.deque()
        self._waiting_bytes = 0
        self._changed = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._consume, daemon=True,
                                        name="paimond-writer")
        self._thread.start()

    def _consume(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed:
                    self._changed.wait()
                if not self._waiting:
                    return
                table = self._waiting.popleft()
            if self._error is None:
                try:
                    for batch in table.to_batches():
                        self._write(batch)
                except BaseException as error:  # noqa: B036 - re-raised by the caller
                    self._error = error
            with self._changed:
                self._waiting_bytes -= table.nbytes
                self._changed.notify_all()

    def put(self, table: pa.Table) -> None:
        size = table.nbytes
        with self._changed:
            while self._waiting and self._waiting_bytes + size > self._max_bytes \
                    and self._error is None:
                self._changed.wait()
            self._raise()
            self._waiting.append(table)
            self._waiting_bytes += size
            self._changed.notify_all()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def __enter__(self) -> _BackgroundWriter:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        with self._changed:
            if kind is not None and self._error is None:
                self._error = CancelledError()  # what is still waiting is not written
            self._closed = True
            self._changed.notify_all()
        self._thread.join()
        if kind is None:
            self._raise()


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
            yield from self._read(meta)

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
        with _BackgroundWriter(writer.write, _WRITE_QUEUE_BYTES) as background:
            for section in sections:
                runs = [_Prefetch(self._run_batches(run), _PREFETCH_BATCHES)
                        for run in section.runs]
                try:
                    for merged in merge_sorted_runs([self._counted(r) for r in runs],
                                                    self.key_columns, self.sort_key,
                                                    self.reducer, self.user_sequence):
                        background.put(merged.select(self.output_columns))
                        self.rows_written += merged.num_rows
                finally:
                    for run in runs:
                        run.close()
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
                       now_millis: Callable[[], int], batch_rows: int = BATCH_ROWS) -> CompactResult:
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

